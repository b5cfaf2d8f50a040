/* ds4_stack.c - bench_ds4_stack: the decode step of a DeepSeek-V4-Flash-
 * shaped layer stack on one backend, against the bandwidth roofline of the
 * same device measured in the same run (issue 9's target: within 1.5x).
 *
 * The model is built in memory, never written to disk: a config with
 * V4-Flash's dimensions (engine-notes 3.2: hidden 4096, 64 heads of 512,
 * q_lora 1024, 8 output groups of 1024, window 128, the indexer's 64
 * heads of 128 and top-512, 256 experts of 2048 with 6 per token, mHC
 * with 4 streams and 20 Sinkhorn iterations) but --layers layers (CSA and
 * HCA alternating, the first hash-routed: Flash's 43 are [SWA, SWA] +
 * [CSA, HCA] * 20 + [CSA]) and a small vocabulary (--vocab, default 4096:
 * the stack is what is measured, not the lm head), and a safetensors image
 * of random weights in the released checkpoint's formats: FP8 E4M3 with
 * UE8M0 128x128 block scales for the attention and shared-expert linears,
 * packed FP4 E2M1 with UE8M0 1x32 scales for the routed experts, BF16 for
 * the compressors, the indexer's head weights, the router, the embeddings
 * and the head, FP32 for norms, mHC and sinks.  Values are small and
 * finite (no NaN codes): timing is what is measured.
 *
 * The decode is timed from its second step (the first pays what a backend
 * prepares once for one-token calls).
 *
 * Roofline: the checkpoint bytes one decode token must read (every
 * non-expert weight of every layer, the 6 routed experts and the shared
 * one, the head), over the device's bandwidth: a device-to-device copy
 * (bytes read + written over its time, as bench_cuda_ops) for cuda, the
 * threaded read of bench/membw.c for the CPU backends.  The KV cache and
 * activations are not counted (they are small at this context).  ratio =
 * measured decode time per token / roofline time; <= 1.5 is the target.
 * A benchmark: nothing is asserted.
 *
 *   bench_ds4_stack [--backend cuda|cpu|ref] [--kernels SPEC] [--threads N]
 *                   [--layers L] [--vocab V] [--prompt P] [--decode N]
 *                   [--batch B] [--small]
 * --batch B (> 1): then B requests of the same prompt (the session and
 * B - 1 siblings sharing its weights, ds4_forward.h), prefilled in
 * one batch and decoded --decode steps, every step one batch of B tokens
 * (ld_ds4_session_eval_batch): batch_step_ms, batch_tps (tokens of all the
 * requests a second) and batch_gain (batch_tps over the single decode's).
 * --kernels graphs=on (CUDA): the launches captured in CUDA graphs
 * (backend_cuda.h), with their counts printed (graphs_*).
 * --small: hidden 256, 4 heads of 128, 16 experts of 256 (2 per token) and
 * the rest scaled alike, for a CPU run in seconds.  Prints `key value`
 * lines; exit 0, or 2 with a message when something cannot run.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "engine/backend/cpu_kernels.h"
#include "engine/models/deepseek_v4/ds4_config.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "engine/models/deepseek_v4/ds4_model.h"
#include "logdiff_config.h"
#include "membw.h"
#include "engine/formats/safetensors.h"
#if LD_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

/* ---------------------------------------------------------------- shape */

typedef struct shape {
    int D, H, hd, rd, QR, G, OL, win, nih, ih, topk, E, K, I, N, V, L, csa_r, hca_r;
} shape;

static shape flash_shape(int layers, int vocab)
{
    return (shape){.D = 4096, .H = 64, .hd = 512, .rd = 64, .QR = 1024, .G = 8, .OL = 1024, .win = 128, .nih = 64,
                   .ih = 128, .topk = 512, .E = 256, .K = 6, .I = 2048, .N = 4, .V = vocab, .L = layers,
                   .csa_r = 4, .hca_r = 128};
}

static shape small_shape(int layers, int vocab)
{
    return (shape){.D = 256, .H = 4, .hd = 128, .rd = 64, .QR = 128, .G = 2, .OL = 128, .win = 32, .nih = 4,
                   .ih = 64, .topk = 16, .E = 16, .K = 2, .I = 256, .N = 4, .V = vocab, .L = layers,
                   .csa_r = 4, .hca_r = 32};
}

static int is_csa(int l)
{
    return l % 2 == 0;
}

/* ---------------------------------------------------------------- tensors */

enum kind { K_F32, K_BF16, K_F8, K_F4, K_E8M0, K_I32 };

/* how a tensor's values are drawn */
enum fill { F_ONE, F_ZERO, F_SMALL, F_WEIGHT, F_SCALE, F_HASH };

typedef struct tensor {
    char name[96];
    enum kind kind;
    enum fill fill;
    int64_t rows, cols; /* the stored shape (FP4: cols/2 bytes); rows 0: a vector */
    int fan_in;         /* F_WEIGHT, F_SCALE: the matrix's input width */
    uint64_t off, bytes;
    int decode;         /* read by every decode step (not a routed expert) */
} tensor;

typedef struct plan {
    tensor *t;
    size_t n, cap;
    uint64_t bytes;
} plan;

static int kind_size(enum kind k)
{
    return k == K_F32 || k == K_I32 ? 4 : k == K_BF16 ? 2 : 1;
}

static const char *kind_name(enum kind k)
{
    static const char *names[] = {"F32", "BF16", "F8_E4M3", "I8", "F8_E8M0", "I32"};
    return names[k];
}

static tensor *add(plan *p, const char *name, enum kind k, enum fill f, int64_t rows, int64_t cols, int fan_in,
                   int decode)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        tensor *t = realloc(p->t, cap * sizeof *t);
        if (!t) return NULL;
        p->t = t;
        p->cap = cap;
    }
    tensor *t = &p->t[p->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = k;
    t->fill = f;
    t->rows = rows;
    t->cols = cols;
    t->fan_in = fan_in;
    t->bytes = (uint64_t)(rows ? rows : 1) * (uint64_t)cols * (uint64_t)kind_size(k);
    t->off = (p->bytes + 15) & ~(uint64_t)15; /* every tensor 16-byte aligned (gaps are allowed) */
    t->decode = decode;
    p->bytes = t->off + t->bytes;
    return t;
}

/* a linear [rows, cols] of `name` (ending .weight): FP8 with 128x128 UE8M0
 * scales, packed FP4 with 1x32 ones, or BF16 */
static int linear(plan *p, const char *stem, enum kind k, int64_t rows, int64_t cols, int decode)
{
    char w[96], s[96];
    snprintf(w, sizeof w, "%.80s.weight", stem);
    snprintf(s, sizeof s, "%.80s.scale", stem);
    if (k == K_BF16) return add(p, w, K_BF16, F_WEIGHT, rows, cols, (int)cols, decode) != NULL;
    int fp4 = k == K_F4;
    int64_t br = fp4 ? 1 : 128, bc = fp4 ? 32 : 128;
    if (!add(p, w, fp4 ? K_F4 : K_F8, F_WEIGHT, rows, fp4 ? cols / 2 : cols, (int)cols, decode)) return 0;
    return add(p, s, K_E8M0, F_SCALE, rows / br, cols / bc, (int)cols, decode) != NULL;
}

static int vec(plan *p, const char *name, enum fill f, int64_t n)
{
    return add(p, name, K_F32, f, 0, n, 0, 1) != NULL;
}

#define NM(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)

static int attention_tensors(plan *p, const shape *s, int l)
{
    char nm[96];
    int ok = linear(p, NM("layers.%d.attn.wq_a", l), K_F8, s->QR, s->D, 1) &&
             vec(p, NM("layers.%d.attn.q_norm.weight", l), F_ONE, s->QR) &&
             linear(p, NM("layers.%d.attn.wq_b", l), K_F8, (int64_t)s->H * s->hd, s->QR, 1) &&
             linear(p, NM("layers.%d.attn.wkv", l), K_F8, s->hd, s->D, 1) &&
             vec(p, NM("layers.%d.attn.norm.weight", l), F_ONE, s->hd) &&
             linear(p, NM("layers.%d.attn.wo_a", l), K_F8, (int64_t)s->G * s->OL, (int64_t)s->H * s->hd / s->G, 1) &&
             linear(p, NM("layers.%d.attn.wo_b", l), K_F8, s->D, (int64_t)s->G * s->OL, 1) &&
             vec(p, NM("layers.%d.attn.attn_sink", l), F_ZERO, s->H);
    int c = is_csa(l) ? 2 : 1, r = is_csa(l) ? s->csa_r : s->hca_r;
    ok = ok && linear(p, NM("layers.%d.attn.compressor.wkv", l), K_BF16, (int64_t)c * s->hd, s->D, 1) &&
         linear(p, NM("layers.%d.attn.compressor.wgate", l), K_BF16, (int64_t)c * s->hd, s->D, 1) &&
         add(p, NM("layers.%d.attn.compressor.ape", l), K_F32, F_ZERO, r, (int64_t)c * s->hd, 0, 1) &&
         vec(p, NM("layers.%d.attn.compressor.norm.weight", l), F_ONE, s->hd);
    if (!ok || !is_csa(l)) return ok;
    return linear(p, NM("layers.%d.attn.indexer.compressor.wkv", l), K_BF16, 2 * (int64_t)s->ih, s->D, 1) &&
           linear(p, NM("layers.%d.attn.indexer.compressor.wgate", l), K_BF16, 2 * (int64_t)s->ih, s->D, 1) &&
           add(p, NM("layers.%d.attn.indexer.compressor.ape", l), K_F32, F_ZERO, r, 2 * (int64_t)s->ih, 0, 1) &&
           vec(p, NM("layers.%d.attn.indexer.compressor.norm.weight", l), F_ONE, s->ih) &&
           linear(p, NM("layers.%d.attn.indexer.wq_b", l), K_F8, (int64_t)s->nih * s->ih, s->QR, 1) &&
           linear(p, NM("layers.%d.attn.indexer.weights_proj", l), K_BF16, s->nih, s->D, 1);
}

static int mlp_tensors(plan *p, const char *stem, enum kind k, const shape *s, int decode)
{
    char nm[96];
    return linear(p, NM("%s.w1", stem), k, s->I, s->D, decode) && linear(p, NM("%s.w3", stem), k, s->I, s->D, decode) &&
           linear(p, NM("%s.w2", stem), k, s->D, s->I, decode);
}

static int ffn_tensors(plan *p, const shape *s, int l)
{
    char nm[96], stem[64];
    int ok = linear(p, NM("layers.%d.ffn.gate", l), K_BF16, s->E, s->D, 1);
    if (ok && l == 0) ok = add(p, NM("layers.%d.ffn.gate.tid2eid", l), K_I32, F_HASH, s->V, s->K, s->E, 1) != NULL;
    if (ok && l != 0) ok = vec(p, NM("layers.%d.ffn.gate.bias", l), F_ZERO, s->E);
    for (int e = 0; ok && e < s->E; e++) {
        snprintf(stem, sizeof stem, "layers.%d.ffn.experts.%d", l, e);
        ok = mlp_tensors(p, stem, K_F4, s, 0);
    }
    snprintf(stem, sizeof stem, "layers.%d.ffn.shared_experts", l);
    return ok && mlp_tensors(p, stem, K_F8, s, 1);
}

static int layer_tensors(plan *p, const shape *s, int l)
{
    char nm[96];
    int R = (2 + s->N) * s->N, ND = s->N * s->D;
    return vec(p, NM("layers.%d.attn_norm.weight", l), F_ONE, s->D) &&
           vec(p, NM("layers.%d.ffn_norm.weight", l), F_ONE, s->D) &&
           add(p, NM("layers.%d.hc_attn_fn", l), K_F32, F_SMALL, R, ND, 0, 1) &&
           vec(p, NM("layers.%d.hc_attn_base", l), F_SMALL, R) && vec(p, NM("layers.%d.hc_attn_scale", l), F_ONE, 3) &&
           add(p, NM("layers.%d.hc_ffn_fn", l), K_F32, F_SMALL, R, ND, 0, 1) &&
           vec(p, NM("layers.%d.hc_ffn_base", l), F_SMALL, R) && vec(p, NM("layers.%d.hc_ffn_scale", l), F_ONE, 3) &&
           attention_tensors(p, s, l) && ffn_tensors(p, s, l);
}

static int model_tensors(plan *p, const shape *s)
{
    int ok = add(p, "embed.weight", K_BF16, F_WEIGHT, s->V, s->D, s->D, 0) &&
             add(p, "head.weight", K_BF16, F_WEIGHT, s->V, s->D, s->D, 1) && vec(p, "norm.weight", F_ONE, s->D) &&
             add(p, "hc_head_fn", K_F32, F_SMALL, s->N, (int64_t)s->N * s->D, 0, 1) &&
             vec(p, "hc_head_base", F_SMALL, s->N) && vec(p, "hc_head_scale", F_ONE, 1);
    for (int l = 0; ok && l < s->L; l++) ok = layer_tensors(p, s, l);
    return ok;
}

/* ---------------------------------------------------------------- values */

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* a uniform float in [-a, a) */
static float uniform(float a)
{
    return a * ((float)(next64() >> 40) / 8388608.0f - 1.0f);
}

/* the UE8M0 exponent byte that brings codes of magnitude ~2 to a weight of
 * ~1/sqrt(fan_in) */
static uint8_t scale_byte(int fan_in)
{
    return (uint8_t)(127 - (int)lround(log2(2.0 * sqrt((double)fan_in))));
}

static void fill_bytes(uint8_t *b, const tensor *t)
{
    uint64_t n = t->bytes;
    if (t->kind == K_E8M0) {
        memset(b, scale_byte(t->fan_in), n);
        return;
    }
    /* eight bytes a step.  FP4: any two E2M1 codes a byte; E4M3: each byte's
       sign and mantissa bits kept, its exponent 5 + (bits 3-4), i.e. 5..8
       (0.25 .. 3.75): never the NaN code */
    const uint64_t keep = 0x8787878787878787ull, two = 0x0303030303030303ull, five = 0x0505050505050505ull;
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w = next64();
        if (t->kind != K_F4) w = (w & keep) | ((((w >> 3) & two) + five) << 3);
        memcpy(b + i, &w, n - i < 8 ? (size_t)(n - i) : 8);
    }
}

static void fill_tensor(uint8_t *img, const tensor *t, const shape *s)
{
    uint8_t *b = img + t->off;
    size_t n = (size_t)(t->rows ? t->rows : 1) * (size_t)t->cols;
    if (t->kind == K_F8 || t->kind == K_F4 || t->kind == K_E8M0) {
        fill_bytes(b, t);
        return;
    }
    if (t->fill == F_HASH) { /* K distinct experts per token */
        int32_t *h = (int32_t *)b;
        for (size_t r = 0; r < (size_t)t->rows; r++)
            for (int k = 0; k < s->K; k++) {
                int32_t e;
                int dup;
                do {
                    e = (int32_t)(next64() % (uint64_t)s->E);
                    dup = 0;
                    for (int j = 0; j < k; j++) dup |= h[r * (size_t)s->K + (size_t)j] == e;
                } while (dup);
                h[r * (size_t)s->K + (size_t)k] = e;
            }
        return;
    }
    float a = t->fill == F_WEIGHT ? 1.0f / sqrtf((float)t->fan_in) : t->fill == F_SMALL ? 1e-3f : 0.0f;
    for (size_t i = 0; i < n; i++) {
        float v = t->fill == F_ONE ? 1.0f : uniform(a);
        if (t->kind == K_F32) {
            memcpy(b + 4 * i, &v, 4);
        } else {
            uint32_t u;
            memcpy(&u, &v, 4);
            uint16_t h = (uint16_t)(u >> 16);
            memcpy(b + 2 * i, &h, 2);
        }
    }
}

/* ---------------------------------------------------------------- image */

/* the safetensors header JSON (each tensor's dtype, shape, offsets) */
static char *header_json(const plan *p)
{
    size_t cap = 256 + p->n * 192 + 16, len = 0;
    char *h = malloc(cap);
    if (!h) return NULL;
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < p->n; i++) {
        const tensor *t = &p->t[i];
        char shp[64];
        if (t->rows) snprintf(shp, sizeof shp, "[%lld,%lld]", (long long)t->rows, (long long)t->cols);
        else snprintf(shp, sizeof shp, "[%lld]", (long long)t->cols);
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}",
                                t->name, kind_name(t->kind), shp, (unsigned long long)t->off,
                                (unsigned long long)(t->off + t->bytes));
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while ((8 + len) % 16) h[len++] = ' '; /* the data 16-byte aligned in the image */
    h[len] = 0;
    return h;
}

/* the whole file image: 8-byte length, header, tensors */
static uint8_t *image(const plan *p, const shape *s, size_t *len)
{
    char *h = header_json(p);
    if (!h) return NULL;
    size_t hl = strlen(h);
    *len = 8 + hl + p->bytes;
    uint8_t *img = calloc(1, *len);
    if (img) {
        uint64_t n = hl;
        for (int i = 0; i < 8; i++) img[i] = (uint8_t)(n >> (8 * i));
        memcpy(img + 8, h, hl);
        for (size_t i = 0; i < p->n; i++) fill_tensor(img + 8 + hl, &p->t[i], s);
    }
    free(h);
    return img;
}

static char *config_json(const shape *s)
{
    char types[4096] = "", mlps[4096] = "";
    size_t a = 0, b = 0;
    for (int l = 0; l < s->L; l++) {
        a += (size_t)snprintf(types + a, sizeof types - a, "%s\"%s\"", l ? "," : "",
                              is_csa(l) ? "compressed_sparse_attention" : "heavily_compressed_attention");
        b += (size_t)snprintf(mlps + b, sizeof mlps - b, "%s\"%s\"", l ? "," : "", l == 0 ? "hash_moe" : "moe");
    }
    char *c = malloc(16384);
    if (!c) return NULL;
    snprintf(c, 16384,
             "{\"architectures\":[\"DeepseekV4ForCausalLM\"],\"model_type\":\"deepseek_v4\","
             "\"vocab_size\":%d,\"hidden_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":1,\"head_dim\":%d,\"qk_rope_head_dim\":%d,\"partial_rotary_factor\":%g,"
             "\"q_lora_rank\":%d,\"o_groups\":%d,\"o_lora_rank\":%d,\"sliding_window\":%d,"
             "\"index_n_heads\":%d,\"index_head_dim\":%d,\"index_topk\":%d,"
             "\"n_routed_experts\":%d,\"n_shared_experts\":1,\"num_experts_per_tok\":%d,"
             "\"moe_intermediate_size\":%d,\"hc_mult\":%d,\"hc_sinkhorn_iters\":20,\"hc_eps\":1e-6,"
             "\"layer_types\":[%s],\"mlp_layer_types\":[%s],"
             "\"compress_rates\":{\"compressed_sparse_attention\":%d,\"heavily_compressed_attention\":%d},"
             "\"rope_theta\":10000.0,\"compress_rope_theta\":160000.0,"
             "\"rope_parameters\":{\"main\":{\"rope_type\":\"default\",\"rope_theta\":10000.0,"
             "\"partial_rotary_factor\":%g},\"compress\":{\"rope_type\":\"yarn\",\"rope_theta\":160000.0,"
             "\"factor\":16.0,\"original_max_position_embeddings\":65536,\"beta_fast\":32.0,\"beta_slow\":1.0,"
             "\"attention_factor\":1.0,\"partial_rotary_factor\":%g}},"
             "\"max_position_embeddings\":1048576,\"rms_norm_eps\":1e-6,\"hidden_act\":\"silu\","
             "\"scoring_func\":\"sqrtsoftplus\",\"norm_topk_prob\":true,\"routed_scaling_factor\":1.5,"
             "\"swiglu_limit\":10.0,\"num_nextn_predict_layers\":0,\"tie_word_embeddings\":false,"
             "\"attention_bias\":false,\"mlp_bias\":false,"
             "\"quantization_config\":{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"scale_fmt\":\"ue8m0\","
             "\"activation_scheme\":\"dynamic\",\"weight_block_size\":[128,128]},\"expert_dtype\":\"fp4\"}",
             s->V, s->D, s->L, s->H, s->hd, s->rd, (double)s->rd / s->hd, s->QR, s->G, s->OL, s->win, s->nih, s->ih,
             s->topk, s->E, s->K, s->I, s->N, types, mlps, s->csa_r, s->hca_r, (double)s->rd / s->hd,
             (double)s->rd / s->hd);
    return c;
}

/* checkpoint bytes one decode token reads: every tensor marked `decode`
 * (the embeddings' one row aside) and K routed experts a layer */
static uint64_t decode_bytes(const plan *p, const shape *s)
{
    uint64_t b = 0, expert = 0;
    for (size_t i = 0; i < p->n; i++) {
        const tensor *t = &p->t[i];
        if (t->decode) b += t->bytes;
        else if (strstr(t->name, "layers.0.ffn.experts.0.")) expert += t->bytes;
    }
    b += (uint64_t)s->D * 2; /* one embedding row */
    return b + expert * (uint64_t)s->K * (uint64_t)s->L;
}

/* ---------------------------------------------------------------- run */

typedef struct opts {
    const char *backend, *kernels;
    int threads, layers, vocab, prompt, decode, small, batch;
} opts;

static int parse_opts(int argc, char **argv, opts *o)
{
    *o = (opts){.backend = LD_HAVE_CUDA ? "cuda" : "cpu", .threads = 2, .layers = 2, .vocab = 4096, .prompt = 512,
                .decode = 16, .batch = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--small")) {
            o->small = 1;
            continue;
        }
        if (!v) return 0;
        i++;
        if (!strcmp(a, "--backend")) o->backend = v;
        else if (!strcmp(a, "--kernels")) o->kernels = v;
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--layers")) o->layers = atoi(v);
        else if (!strcmp(a, "--vocab")) o->vocab = atoi(v);
        else if (!strcmp(a, "--prompt")) o->prompt = atoi(v);
        else if (!strcmp(a, "--decode")) o->decode = atoi(v);
        else if (!strcmp(a, "--batch")) o->batch = atoi(v);
        else return 0;
    }
    return o->threads >= 1 && o->layers >= 1 && o->layers <= 64 && o->vocab >= 16 && o->prompt >= 1 &&
           o->decode >= 1 && o->batch >= 1 && o->batch <= 256;
}

/* GB/s of the device behind `backend`: a device-to-device copy of 1 GiB
 * (bytes read + written over its time, best of 5) for cuda, the threaded
 * read of bench/membw.c for the CPU backends; 0 when it cannot be measured */
static double device_bandwidth(const opts *o)
{
    if (strcmp(o->backend, "cuda") != 0) return ld_bench_read_bandwidth(512, o->threads);
#if LD_HAVE_CUDA
    size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    double best = 0;
    if (!ld_cu_malloc(&a, bytes) && !ld_cu_malloc(&b, bytes) && !ld_cu_memset0(a, bytes) && !ld_cu_sync()) {
        for (int r = 0; r < 5; r++) {
            double t0 = ld_bench_now();
            if (ld_cu_d2d(b, a, bytes) || ld_cu_sync()) break;
            double gbs = 2.0 * (double)bytes / (ld_bench_now() - t0) / 1e9;
            if (gbs > best) best = gbs;
        }
    }
    ld_cu_free(a);
    ld_cu_free(b);
    return best;
#else
    return 0;
#endif
}

static ld_status make_backend(const opts *o, ld_backend **be, ld_error *err)
{
    if (!strcmp(o->backend, "cuda")) return ld_backend_cuda_create(0, o->kernels, be, err);
    if (strcmp(o->backend, "cpu") && strcmp(o->backend, "ref"))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "unknown backend '%s' (cuda, cpu, ref)", o->backend);
    return ld_backend_cpu_create_ex(o->threads, !strcmp(o->backend, "cpu"), o->kernels, be, err);
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* the prompt in one call, then `decode` greedy tokens one at a time;
 * seconds of the decode loop into *t_dec */
static ld_status run(ld_ds4_session *s, const opts *o, int V, double *t_pre, double *t_dec, ld_error *err)
{
    int32_t *toks = malloc((size_t)o->prompt * sizeof *toks);
    float *logits = malloc((size_t)V * sizeof *logits);
    ld_status st = toks && logits ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int i = 0; st == LD_OK && i < o->prompt; i++) toks[i] = (int32_t)(next64() % (uint64_t)V);
    double t0 = ld_bench_now();
    if (st == LD_OK && o->prompt > 1) st = ld_ds4_session_eval(s, toks, o->prompt - 1, NULL, NULL, NULL, err);
    if (st == LD_OK) st = ld_ds4_session_eval(s, toks + o->prompt - 1, 1, logits, NULL, NULL, err);
    *t_pre = ld_bench_now() - t0;
    /* one decode step untimed: what a backend prepares once for one-token
       calls (weight layouts, scratch) is not a step's cost */
    for (int i = 0; st == LD_OK && i <= o->decode; i++) {
        if (i == 1) t0 = ld_bench_now();
        int32_t next = argmax(logits, V);
        st = ld_ds4_session_eval(s, &next, 1, logits, NULL, NULL, err);
    }
    *t_dec = ld_bench_now() - t0;
    free(toks);
    free(logits);
    return st;
}

/* --batch: o->batch requests over lead's weights (lead among them, reset),
 * the same random prompt in one batch, then o->decode batched steps;
 * seconds of the steps into *t_dec */
static ld_status run_batch(ld_ds4_session *lead, const opts *o, int V, double *t_dec, ld_error *err)
{
    int B = o->batch;
    ld_ds4_session **s = calloc((size_t)B, sizeof *s);
    ld_ds4_session_part *parts = calloc((size_t)B, sizeof *parts);
    int32_t *toks = malloc((size_t)o->prompt * sizeof *toks), *next = malloc((size_t)B * sizeof *next);
    float *logits = malloc((size_t)B * (size_t)V * sizeof *logits);
    ld_status st = s && parts && toks && next && logits ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int i = 0; st == LD_OK && i < o->prompt; i++) toks[i] = (int32_t)(next64() % (uint64_t)V);
    ld_ds4_session_reset(lead);
    if (s) s[0] = lead;
    for (int i = 1; st == LD_OK && i < B; i++)
        st = ld_ds4_session_create_sibling(lead, o->prompt + o->decode + 1, &s[i], err);
    /* the prompts but their last token, then the last with logits */
    for (int i = 0; st == LD_OK && i < B; i++) parts[i] = (ld_ds4_session_part){s[i], toks, o->prompt - 1, NULL, NULL};
    if (st == LD_OK && o->prompt > 1) st = ld_ds4_session_eval_batch(parts, B, err);
    for (int i = 0; st == LD_OK && i < B; i++)
        parts[i] = (ld_ds4_session_part){s[i], toks + o->prompt - 1, 1, logits + (size_t)i * (size_t)V,
                                              NULL};
    if (st == LD_OK) st = ld_ds4_session_eval_batch(parts, B, err);
    double t0 = ld_bench_now();
    for (int k = 0; st == LD_OK && k <= o->decode; k++) { /* the first untimed, as run()'s */
        if (k == 1) t0 = ld_bench_now();
        for (int i = 0; i < B; i++) {
            next[i] = argmax(logits + (size_t)i * (size_t)V, V);
            parts[i].tokens = &next[i];
        }
        st = ld_ds4_session_eval_batch(parts, B, err);
    }
    *t_dec = ld_bench_now() - t0;
    for (int i = 1; s && i < B; i++) ld_ds4_session_destroy(s[i]);
    free(s);
    free(parts);
    free(toks);
    free(next);
    free(logits);
    return st;
}

/* --kernels graphs=...: what the CUDA graphs did (kernels/cuda/cuda_graph.cu),
 * the prompt's and the decode's together */
static void print_graphs(const opts *o)
{
#if LD_HAVE_CUDA
    ld_cu_graph_stats g;
    ld_cu_graph_stats_get(&g);
    if (!strcmp(o->backend, "cuda") && g.launched)
        printf("graphs_launched %ld\ngraphs_instantiated %ld\ngraphs_updated %ld\ngraph_ops %ld\n", g.launched,
               g.instantiated, g.updated, g.ops);
#else
    (void)o;
#endif
}

static int fail(const char *what, const ld_error *err)
{
    fprintf(stderr, "bench_ds4_stack: %s: %s\n", what, err->msg);
    return 2;
}

int main(int argc, char **argv)
{
    opts o;
    if (!parse_opts(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_ds4_stack [--backend cuda|cpu|ref] [--kernels SPEC] [--threads N] "
                        "[--layers L] [--vocab V] [--prompt P] [--decode N] [--batch B] [--small]\n");
        return 2;
    }
    shape s = o.small ? small_shape(o.layers, o.vocab) : flash_shape(o.layers, o.vocab);
    plan p = {0};
    ld_error err;
    ld_error_clear(&err);
    double t0 = ld_bench_now();
    size_t len = 0;
    uint8_t *img = model_tensors(&p, &s) ? image(&p, &s, &len) : NULL;
    char *cfg_json = config_json(&s);
    if (!img || !cfg_json) {
        fprintf(stderr, "bench_ds4_stack: out of memory for the %.1f GB model\n", (double)p.bytes / 1e9);
        return 2;
    }
    double t_build = ld_bench_now() - t0;
    ld_ds4_config cfg;
    ld_safetensors *st = NULL;
    ld_ds4_model *m = NULL;
    ld_backend *be = NULL;
    ld_ds4_session *sess = NULL;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    if (ld_ds4_config_parse(cfg_json, strlen(cfg_json), &cfg, &err) != LD_OK) return fail("config", &err);
    if (ld_st_parse(img, len, &st, &err) != LD_OK) return fail("safetensors image", &err);
    if (ld_ds4_model_bind(&cfg, st, &m, &err) != LD_OK) return fail("model", &err);
    if (make_backend(&o, &be, &err) != LD_OK) return fail(o.backend, &err);
    if (ld_cpu_kernels_parse(strcmp(o.backend, "cuda") ? o.kernels : NULL, &k, &err) != LD_OK)
        return fail("kernels", &err);
    t0 = ld_bench_now();
    if (ld_ds4_session_create(m, be, o.prompt + o.decode + 1, o.prompt, &sess, &err) != LD_OK)
        return fail("session", &err);
    ld_ds4_session_set_kernels(sess, &k);
    double t_load = ld_bench_now() - t0, t_pre = 0, t_dec = 0;
    if (run(sess, &o, s.V, &t_pre, &t_dec, &err) != LD_OK) return fail("eval", &err);
    double bw = device_bandwidth(&o);
    uint64_t dec = decode_bytes(&p, &s);
    double per_tok = t_dec / o.decode, roof = bw > 0 ? (double)dec / (bw * 1e9) : 0;
    printf("backend %s\nshape %s\nlayers %d\nmodel_bytes %llu\n", be->ops->name, o.small ? "small" : "v4-flash",
           s.L, (unsigned long long)p.bytes);
    printf("build_s %.2f\nload_s %.2f\nprompt_tokens %d\nprefill_tps %.2f\n", t_build, t_load, o.prompt,
           o.prompt / t_pre);
    printf("decode_tokens %d\ndecode_ms %.3f\ndecode_bytes %llu\nbandwidth_gbs %.1f\nroofline_ms %.3f\n", o.decode,
           per_tok * 1e3, (unsigned long long)dec, bw, roof * 1e3);
    if (roof > 0) printf("ratio %.2f\ntarget 1.50\n", per_tok / roof);
    else printf("ratio -\n");
    print_graphs(&o);
    double t_batch = 0;
    if (o.batch > 1 && run_batch(sess, &o, s.V, &t_batch, &err) != LD_OK) return fail("batch", &err);
    if (o.batch > 1)
        printf("batch %d\nbatch_step_ms %.3f\nbatch_tps %.2f\nbatch_gain %.2f\n", o.batch, t_batch / o.decode * 1e3,
               o.batch * o.decode / t_batch, (o.batch * o.decode / t_batch) / (o.decode / t_dec));
    ld_ds4_session_destroy(sess);
    ld_backend_destroy(be);
    ld_ds4_model_close(m);
    ld_st_close(st);
    free(img);
    free(cfg_json);
    free(p.t);
    return 0;
}
