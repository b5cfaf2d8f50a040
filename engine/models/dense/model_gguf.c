/* model_gguf.c - a dense decoder from a GGUF file (model.h):
 * ld_model_open_gguf, ld_model_find_gguf, ld_model_open_any.
 *
 * The config comes from the metadata of `general.architecture` A (llama,
 * qwen2, qwen3):
 *   A.block_count, A.embedding_length, A.feed_forward_length,
 *   A.attention.head_count, A.attention.head_count_kv (default: heads),
 *   A.attention.key_length / value_length (default embedding / heads; must
 *   agree), A.rope.dimension_count (must be the head dim: no partial RoPE),
 *   A.rope.freq_base (default 10000), A.attention.layer_norm_rms_epsilon,
 *   A.context_length, A.vocab_size (default: the tokenizer.ggml.tokens
 *   count, else the embedding's rows), A.rope.scaling.* (none, linear,
 *   yarn: parse_rope_scaling); Llama's rope_freqs.weight (bind_rope_freqs).
 * Refused (LD_ERR_UNSUPPORTED naming the key or tensor): another
 * architecture, experts, a sliding window, another RoPE scaling, a
 * big-endian file, and any tensor that is not bound below (biases Llama
 * does not have, rope_freqs.weight of a Qwen...), so that nothing that
 * changes the numbers is ignored.
 *
 * Tensors (GGUF dims are [cols, rows]):
 *   token_embd.weight [V, D]  output_norm.weight [D]  output.weight [V, D]
 *   (absent: tied)  blk.L.attn_norm, attn_q [Q, D], attn_k [KV, D],
 *   attn_v [KV, D], attn_output [D, Q], ffn_norm, ffn_gate [I, D],
 *   ffn_up [I, D], ffn_down [D, I]; qwen2: attn_{q,k,v}.bias; qwen3:
 *   attn_{q,k}_norm [head_dim].
 * Matrices may be F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K; vectors
 * F32, F16, BF16.
 *
 * RoPE: the engine rotates HF's pairs (i, i + hd/2).  llama.cpp's
 * conversion of a Llama checkpoint reorders the rows of q_proj and k_proj
 * within each head (row j*hd/2 + i becomes row 2i + j) so that GGML's
 * default rope, which rotates adjacent pairs, computes the same thing; the
 * Qwen architectures are converted unchanged (GGML's NeoX rope is HF's).
 * So for llama the q/k weights are bound with rope_hd = head_dim, and the
 * matmul reads row 2i + j for output j*hd/2 + i: the projections come out
 * in HF order and everything after them is what the HF model computes. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"
#include "model_internal.h"

typedef struct gctx {
    const ld_gguf *g;
    char arch[16];
    unsigned char *bound; /* per tensor: bound */
} gctx;

static ld_status key_int(const gctx *c, const char *suffix, int required, int64_t def, int64_t lo, int64_t hi,
                         int *out, ld_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    int64_t v = def;
    if (ld_gguf_find(c->g, key)) LD_TRY(ld_gguf_get_int(c->g, key, &v, err));
    else if (required) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "GGUF key '%s' is missing", key);
    if (v < lo || v > hi)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "GGUF key '%s' = %lld is outside [%lld, %lld]", key, (long long)v,
                       (long long)lo, (long long)hi);
    *out = (int)v;
    return LD_OK;
}

static ld_status key_float(const gctx *c, const char *suffix, int required, double def, double *out, ld_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    const ld_gguf_kv *kv = ld_gguf_find(c->g, key);
    if (!kv) {
        if (required) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "GGUF key '%s' is missing", key);
        *out = def;
        return LD_OK;
    }
    if (kv->value.type != LD_GGUF_FLOAT32 && kv->value.type != LD_GGUF_FLOAT64)
        return LD_FAIL(err, LD_ERR_MISMATCH, kv->offset, "GGUF key '%s' is a %s, not a float", key,
                       ld_gguf_type_name(kv->value.type));
    double v = kv->value.v.f;
    if (!(v > 0) || v > 1e300)
        return LD_FAIL(err, LD_ERR_SYNTAX, kv->offset, "GGUF key '%s' is not a positive number", key);
    *out = v;
    return LD_OK;
}

static int has_key(const gctx *c, const char *suffix)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    return ld_gguf_find(c->g, key) != NULL;
}

/* RoPE scaling as llama.cpp reads it for llama / qwen2 / qwen3
 * (llama_model::load_hparams, llama_context's constructor, ggml's
 * rope_yarn):
 *   A.rope.scaling.type: none, linear (A.rope.scaling.factor), yarn:
 *     factor, A.rope.scaling.original_context_length (default
 *     context_length); beta_fast 32, beta_slow 1, the correction range
 *     floored/ceiled (HF's truncate) and the same blend as HF's
 *     _compute_yarn_parameters; the magnitude on cos/sin get_mscale(factor)
 *     (HF's attention factor when the config has none);
 *   A.rope.scaling.attn_factor (default 1) multiplies the magnitude (any
 *     type).
 * llama.cpp reads the yarn_* keys (beta_fast, beta_slow, ext_factor,
 * attn_factor, log_multiplier) only for other architectures (DeepSeek,
 * Grok...) and ignores them here: present with another value than its
 * default they are LD_ERR_UNSUPPORTED (what the file means is unclear). */
static double gguf_mscale(double scale)
{
    return scale <= 1 ? 1.0 : 0.1 * log(scale) + 1.0;
}

static ld_status parse_rope_scaling(gctx *c, ld_model_config *cfg, ld_error *err)
{
    char key[128];
    cfg->rope_attn_factor = 1.0;
    snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch);
    if (ld_gguf_find(c->g, key)) {
        ld_gguf_str t;
        LD_TRY(ld_gguf_get_str(c->g, key, &t, err));
        if (ld_gguf_str_eq(t, "linear")) {
            cfg->rope_type = LD_ROPE_LINEAR;
            LD_TRY(key_float(c, "rope.scaling.factor", 1, 0, &cfg->rope_factor, err));
        } else if (ld_gguf_str_eq(t, "yarn")) {
            cfg->rope_type = LD_ROPE_YARN;
            int orig = 0;
            if (cfg->rope_theta == 1.0)
                return LD_FAIL(err, LD_ERR_SYNTAX, 0, "GGUF key '%s.rope.freq_base' is 1 (yarn needs a base above 1)", c->arch);
            LD_TRY(key_float(c, "rope.scaling.factor", 1, 0, &cfg->rope_factor, err));
            LD_TRY(key_int(c, "rope.scaling.original_context_length", 0, cfg->max_pos, 1, 1 << 30, &orig, err));
            cfg->rope_orig_max_pos = orig;
            cfg->rope_beta_fast = 32;
            cfg->rope_beta_slow = 1;
            cfg->rope_truncate = 1;
            cfg->rope_attn_factor = gguf_mscale(cfg->rope_factor);
        } else if (!ld_gguf_str_eq(t, "none")) {
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "GGUF key '%s' = '%.*s' is not supported (none, linear, yarn)", key,
                           (int)(t.len > 40 ? 40 : t.len), t.ptr);
        }
    } else if (has_key(c, "rope.scaling.factor")) {
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "GGUF key '%s.rope.scaling.factor' without rope.scaling.type", c->arch);
    }
    static const struct {
        const char *suffix;
        double def;
    } ignored[] = {
        {"rope.scaling.yarn_beta_fast", 32}, {"rope.scaling.yarn_beta_slow", 1}, {"rope.scaling.yarn_ext_factor", -1},
        {"rope.scaling.yarn_attn_factor", 1}, {"rope.scaling.yarn_log_multiplier", 0},
    };
    for (size_t k = 0; k < sizeof ignored / sizeof ignored[0]; k++) {
        snprintf(key, sizeof key, "%s.%s", c->arch, ignored[k].suffix);
        const ld_gguf_kv *kv = ld_gguf_find(c->g, key);
        if (!kv) continue;
        double def = ignored[k].def;
        if (def < 0) def = cfg->rope_type == LD_ROPE_YARN ? 1 : 0; /* ext_factor: what "unset" becomes */
        int is_float = kv->value.type == LD_GGUF_FLOAT32 || kv->value.type == LD_GGUF_FLOAT64;
        if (!is_float || kv->value.v.f != def)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, kv->offset,
                           "GGUF key '%s' other than %g is not supported (llama.cpp ignores it for %s)", key, def,
                           c->arch);
    }
    if (has_key(c, "rope.scaling.attn_factor")) {
        double v = 1.0;
        LD_TRY(key_float(c, "rope.scaling.attn_factor", 1, 1.0, &v, err));
        cfg->rope_attn_factor *= v;
    }
    return LD_OK;
}

/* rope_freqs.weight (Llama only, as llama.cpp): F32 [head_dim / 2], the
 * divisors of the inverse frequencies (llama.cpp's conversion of Llama 3's
 * "llama3" scaling), each finite and positive.  Copied into the config. */
static ld_status bind_rope_freqs(gctx *c, ld_model_config *cfg, ld_error *err)
{
    const ld_gguf_tensor *t = ld_gguf_find_tensor(c->g, "rope_freqs.weight");
    if (!t || cfg->arch != LD_ARCH_LLAMA) return LD_OK; /* elsewhere: refused as not used */
    int half = cfg->head_dim / 2;
    if (t->n_dims != 1 || t->dims[0] != (uint64_t)half)
        return LD_FAIL(err, LD_ERR_MISMATCH, t->info_offset, "tensor 'rope_freqs.weight' has %u dims [%llu...], expected [%d]",
                       t->n_dims, (unsigned long long)t->dims[0], half);
    if (t->type != 0) {
        const char *tn = ld_gguf_ggml_type(t->type, NULL, NULL);
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, t->info_offset, "tensor 'rope_freqs.weight' has type %s (F32 supported)",
                       tn ? tn : "?");
    }
    const unsigned char *p = ld_gguf_tensor_data(c->g, t);
    for (int i = 0; i < half; i++) {
        float f;
        memcpy(&f, p + (size_t)i * sizeof f, sizeof f);
        if (!(f > 0) || !isfinite(f))
            return LD_FAIL(err, LD_ERR_SYNTAX, t->info_offset, "tensor 'rope_freqs.weight' [%d] = %g is not a positive number",
                           i, (double)f);
        cfg->rope_freq_factors[i] = f;
    }
    cfg->rope_n_freq_factors = half;
    c->bound[t - c->g->tensors] = 1;
    return LD_OK;
}

/* general.architecture: one the engine runs */
static ld_status parse_arch(gctx *c, ld_model_config *cfg, ld_error *err)
{
    ld_gguf_str a;
    LD_TRY(ld_gguf_get_str(c->g, "general.architecture", &a, err));
    static const struct {
        const char *name, *cls;
        ld_arch arch;
    } archs[] = {
        {"llama", "LlamaForCausalLM", LD_ARCH_LLAMA},
        {"qwen2", "Qwen2ForCausalLM", LD_ARCH_QWEN2},
        {"qwen3", "Qwen3ForCausalLM", LD_ARCH_QWEN3},
    };
    size_t i;
    for (i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (ld_gguf_str_eq(a, archs[i].name)) break;
    if (i == sizeof archs / sizeof archs[0])
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "GGUF general.architecture '%.*s' is not supported (llama, qwen2, qwen3)",
                       (int)(a.len > 40 ? 40 : a.len), a.ptr);
    cfg->arch = archs[i].arch;
    snprintf(c->arch, sizeof c->arch, "%s", archs[i].name);
    snprintf(cfg->arch_name, sizeof cfg->arch_name, "%s", archs[i].cls);
    return LD_OK;
}

/* the widths, the heads, the context, the norm's eps and RoPE's base */
static ld_status parse_dims(gctx *c, ld_model_config *cfg, ld_error *err)
{
    LD_TRY(key_int(c, "block_count", 1, 0, 1, LD_MODEL_MAX_LAYERS, &cfg->n_layers, err));
    LD_TRY(key_int(c, "embedding_length", 1, 0, 1, 1 << 16, &cfg->hidden, err));
    LD_TRY(key_int(c, "feed_forward_length", 1, 0, 1, 1 << 20, &cfg->intermediate, err));
    LD_TRY(key_int(c, "attention.head_count", 1, 0, 1, 1 << 12, &cfg->n_heads, err));
    LD_TRY(key_int(c, "attention.head_count_kv", 0, cfg->n_heads, 1, 1 << 12, &cfg->n_kv_heads, err));
    if (cfg->n_heads % cfg->n_kv_heads)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "GGUF %s.attention.head_count (%d) is not a multiple of head_count_kv (%d)",
                       c->arch, cfg->n_heads, cfg->n_kv_heads);
    int hd_def = cfg->hidden / cfg->n_heads, vlen = 0, rdim = 0;
    LD_TRY(key_int(c, "attention.key_length", 0, hd_def, 2, 1 << 12, &cfg->head_dim, err));
    LD_TRY(key_int(c, "attention.value_length", 0, cfg->head_dim, 1, 1 << 12, &vlen, err));
    if (vlen != cfg->head_dim)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "GGUF %s.attention.value_length %d differs from key_length %d",
                       c->arch, vlen, cfg->head_dim);
    if (cfg->head_dim % 2)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "GGUF head dim %d is not even", cfg->head_dim);
    LD_TRY(key_int(c, "rope.dimension_count", 0, cfg->head_dim, 0, 1 << 12, &rdim, err));
    if (rdim != cfg->head_dim)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "GGUF %s.rope.dimension_count %d differs from the head dim %d (partial RoPE)",
                       c->arch, rdim, cfg->head_dim);
    LD_TRY(key_int(c, "context_length", 1, 0, 1, 1 << 30, &cfg->max_pos, err));
    double eps, theta;
    LD_TRY(key_float(c, "attention.layer_norm_rms_epsilon", 1, 0, &eps, err));
    cfg->rms_eps = (float)eps;
    LD_TRY(key_float(c, "rope.freq_base", 0, 10000.0, &theta, err));
    cfg->rope_theta = theta;
    cfg->rope_type = LD_ROPE_DEFAULT;
    return LD_OK;
}

/* what a GGUF may hold that the engine does not run (experts, a sliding
 * window, soft-capping) */
static ld_status refuse_unsupported(gctx *c, ld_error *err)
{
    static const char *const refused[] = {"expert_count", "attention.sliding_window", "attn_logit_softcapping",
                                          "final_logit_softcapping"};
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        if (!has_key(c, refused[k])) continue;
        if (k == 0) { /* expert_count 0 is a dense model */
            int e = 0;
            LD_TRY(key_int(c, refused[k], 1, 0, 0, 1 << 20, &e, err));
            if (e == 0) continue;
        }
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "GGUF key '%s.%s' is not supported", c->arch, refused[k]);
    }
    return LD_OK;
}

/* the vocabulary's size: vocab_size, else the tokenizer's count, else the
 * embeddings' rows */
static ld_status parse_vocab(gctx *c, ld_model_config *cfg, ld_error *err)
{
    const ld_gguf *g = c->g;
    const ld_gguf_tensor *emb = ld_gguf_find_tensor(g, "token_embd.weight");
    if (has_key(c, "vocab_size")) {
        LD_TRY(key_int(c, "vocab_size", 1, 0, 1, 1 << 24, &cfg->vocab, err));
    } else if (ld_gguf_find(g, "tokenizer.ggml.tokens")) {
        const ld_gguf_str *items;
        uint64_t n;
        LD_TRY(ld_gguf_get_str_array(g, "tokenizer.ggml.tokens", &items, &n, err));
        if (n < 1 || n > (1u << 24)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "GGUF tokenizer.ggml.tokens has %llu tokens", (unsigned long long)n);
        cfg->vocab = (int)n;
    } else if (emb && emb->n_dims == 2 && emb->dims[1] >= 1 && emb->dims[1] <= (1u << 24)) {
        cfg->vocab = (int)emb->dims[1];
    } else {
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "GGUF model has no %s.vocab_size nor tokenizer.ggml.tokens", c->arch);
    }
    return LD_OK;
}

static ld_status parse_config(gctx *c, ld_model_config *cfg, ld_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (c->g->big_endian) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "big-endian GGUF models are not supported");
    LD_TRY(parse_arch(c, cfg, err));
    LD_TRY(parse_dims(c, cfg, err));
    LD_TRY(parse_rope_scaling(c, cfg, err));
    LD_TRY(refuse_unsupported(c, err));
    LD_TRY(parse_vocab(c, cfg, err));
    cfg->tie_embeddings = ld_gguf_find_tensor(c->g, "output.weight") == NULL;
    cfg->qkv_bias = cfg->arch == LD_ARCH_QWEN2;
    cfg->qk_norm = cfg->arch == LD_ARCH_QWEN3;
    return LD_OK;
}

static ld_status tensor_type(uint32_t ty, int matrix, ld_dtype *dt, ld_wquant *q)
{
    *q = LD_WQ_NONE;
    *dt = LD_DT_F32;
    switch (ty) {
    case 0: *dt = LD_DT_F32; return LD_OK;
    case 1: *dt = LD_DT_F16; return LD_OK;
    case 30: *dt = LD_DT_BF16; return LD_OK;
    default: break;
    }
    if (!matrix) return LD_ERR_UNSUPPORTED;
    switch (ty) {
    case 2: *q = LD_WQ_Q4_0; return LD_OK;
    case 3: *q = LD_WQ_Q4_1; return LD_OK;
    case 8: *q = LD_WQ_Q8_0; return LD_OK;
    case 12: *q = LD_WQ_Q4_K; return LD_OK;
    case 14: *q = LD_WQ_Q6_K; return LD_OK;
    default: return LD_ERR_UNSUPPORTED;
    }
}

/* Bind `name` with shape [rows, cols] (a vector when rows == 0). */
static ld_status bind(gctx *c, ld_model_tensor *mt, int optional, int64_t rows, int64_t cols, int rope_hd,
                      ld_error *err, const char *fmt, ...)
{
    char name[LD_GGUF_MAX_TENSOR_NAME + 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    memset(mt, 0, sizeof *mt);
    const ld_gguf_tensor *t = ld_gguf_find_tensor(c->g, name);
    if (!t && optional) return LD_OK;
    uint64_t shape[LD_GGUF_MAX_DIMS]; /* GGUF lists dims fastest first: reversed, row-major */
    int n_dims = t ? (int)t->n_dims : 0;
    for (int d = 0; d < n_dims; d++) shape[d] = t->dims[n_dims - 1 - d];
    LD_TRY(ld_model_check_shape(name, t ? shape : NULL, n_dims, rows, cols, t ? t->info_offset : 0, err));
    ld_dtype dt;
    ld_wquant q;
    if (tensor_type(t->type, rows != 0, &dt, &q) != LD_OK) {
        const char *tn = ld_gguf_ggml_type(t->type, NULL, NULL);
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, t->info_offset, "tensor '%s' has type %s (%s)", name, tn ? tn : "?",
                       rows ? "F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K supported" : "F32, F16, BF16 supported");
    }
    mt->gg = t;
    mt->host.dtype = dt;
    mt->host.quant = q;
    mt->host.data = ld_gguf_tensor_data(c->g, t);
    mt->host.map = c->g->base; /* ld_gguf_open's mapping (ld_model_open_gguf) */
    mt->host.map_size = c->g->size;
    mt->host.rows = rows ? rows : 1;
    mt->host.cols = cols;
    mt->host.rope_hd = rope_hd;
    c->bound[t - c->g->tensors] = 1;
    return LD_OK;
}

static ld_status bind_all(gctx *c, ld_model *m, ld_error *err)
{
    const ld_model_config *cfg = &m->cfg;
    const int64_t V = cfg->vocab, D = cfg->hidden, I = cfg->intermediate, hd = cfg->head_dim;
    const int64_t Q = (int64_t)cfg->n_heads * hd, KV = (int64_t)cfg->n_kv_heads * hd;
    const int rh = cfg->arch == LD_ARCH_LLAMA ? cfg->head_dim : 0;
    ld_status s = LD_OK;
#define B(mt, opt, r, cl, rope, ...) \
    if (s == LD_OK) s = bind(c, (mt), (opt), (r), (cl), (rope), err, __VA_ARGS__)
    B(&m->embed, 0, V, D, 0, "token_embd.weight");
    B(&m->norm, 0, 0, D, 0, "output_norm.weight");
    if (cfg->tie_embeddings) m->lm_head = m->embed;
    else B(&m->lm_head, 0, V, D, 0, "output.weight");
    for (int l = 0; l < cfg->n_layers && s == LD_OK; l++) {
        ld_model_layer *L = &m->layers[l];
        B(&L->attn_norm, 0, 0, D, 0, "blk.%d.attn_norm.weight", l);
        B(&L->wq, 0, Q, D, rh, "blk.%d.attn_q.weight", l);
        B(&L->wk, 0, KV, D, rh, "blk.%d.attn_k.weight", l);
        B(&L->wv, 0, KV, D, 0, "blk.%d.attn_v.weight", l);
        B(&L->wo, 0, D, Q, 0, "blk.%d.attn_output.weight", l);
        if (cfg->qkv_bias) {
            B(&L->bq, 0, 0, Q, 0, "blk.%d.attn_q.bias", l);
            B(&L->bk, 0, 0, KV, 0, "blk.%d.attn_k.bias", l);
            B(&L->bv, 0, 0, KV, 0, "blk.%d.attn_v.bias", l);
        }
        if (cfg->qk_norm) {
            B(&L->q_norm, 0, 0, hd, 0, "blk.%d.attn_q_norm.weight", l);
            B(&L->k_norm, 0, 0, hd, 0, "blk.%d.attn_k_norm.weight", l);
        }
        B(&L->ffn_norm, 0, 0, D, 0, "blk.%d.ffn_norm.weight", l);
        B(&L->w_gate, 0, I, D, 0, "blk.%d.ffn_gate.weight", l);
        B(&L->w_up, 0, I, D, 0, "blk.%d.ffn_up.weight", l);
        B(&L->w_down, 0, D, I, 0, "blk.%d.ffn_down.weight", l);
    }
#undef B
    if (s != LD_OK) return s;
    for (uint64_t i = 0; i < c->g->n_tensors; i++)
        if (!c->bound[i]) {
            const ld_gguf_tensor *t = &c->g->tensors[i];
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, t->info_offset,
                           "tensor '%.*s' is not used by a %s model (not supported)",
                           (int)(t->name.len > 80 ? 80 : t->name.len), t->name.ptr, c->arch);
        }
    return LD_OK;
}

ld_status ld_model_open_gguf(const char *path, ld_model **out, ld_error *err)
{
    *out = NULL;
    ld_gguf *g = NULL;
    LD_TRY(ld_gguf_open(path, &g, err));
    ld_model *m = calloc(1, sizeof *m);
    gctx c = {.g = g, .bound = calloc(g->n_tensors ? g->n_tensors : 1, 1)};
    ld_status s = m && c.bound ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (s == LD_OK) s = parse_config(&c, &m->cfg, err);
    if (s == LD_OK) {
        m->layers = calloc((size_t)m->cfg.n_layers, sizeof *m->layers);
        if (!m->layers) s = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    if (s == LD_OK) s = bind_rope_freqs(&c, &m->cfg, err);
    if (s == LD_OK) s = bind_all(&c, m, err);
    free(c.bound);
    if (s != LD_OK) {
        if (m) free(m->layers);
        free(m);
        ld_gguf_close(g);
        if (err) err->path = path;
        return s;
    }
    m->gguf = g;
    *out = m;
    return LD_OK;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

ld_status ld_model_find_gguf(const char *path, char **gguf, ld_error *err)
{
    *gguf = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        ld_status s = LD_FAIL(err, LD_ERR_IO, 0, "cannot read '%.200s'", path);
        if (err) err->path = path;
        return s;
    }
    if (!S_ISDIR(sb.st_mode)) {
        *gguf = strdup(path);
        return *gguf ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    size_t n = strlen(path);
    char *p = malloc(n + 300);
    if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    snprintf(p, n + 300, "%s/config.json", path);
    if (stat(p, &sb) == 0) {
        free(p);
        return LD_OK;
    }
    DIR *d = opendir(path);
    if (!d) {
        free(p);
        ld_status s = LD_FAIL(err, LD_ERR_IO, 0, "cannot list '%.200s'", path);
        if (err) err->path = path;
        return s;
    }
    int found = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!ends_with(e->d_name, ".gguf") || strlen(e->d_name) > 255) continue;
        if (found++) continue;
        snprintf(p, n + 300, "%s/%s", path, e->d_name);
    }
    closedir(d);
    if (found > 1) {
        free(p);
        ld_status s = LD_FAIL(err, LD_ERR_MISMATCH, 0, "'%.200s' holds %d *.gguf files and no config.json: name one", path, found);
        if (err) err->path = path;
        return s;
    }
    if (!found) {
        free(p);
        return LD_OK;
    }
    *gguf = p;
    return LD_OK;
}

ld_status ld_model_open_any(const char *path, ld_model **out, ld_error *err)
{
    *out = NULL;
    char *gp = NULL;
    LD_TRY(ld_model_find_gguf(path, &gp, err));
    if (!gp) return ld_model_open(path, out, err);
    ld_status s = ld_model_open_gguf(gp, out, err);
    if (s != LD_OK && err) err->path = path; /* gp is freed */
    free(gp);
    return s;
}
