/* test_forward.c - the forward pass (engine/models/dense/forward.h) over the reference
 * backend on the tiny HF models in testdata/models/ (written with
 * transformers by tools/gen_tiny_models.py): logits and per-layer hidden
 * states against transformers', bitwise determinism over thread counts and
 * over prefill / chunks / token by token, and the errors a wrong config or
 * checkpoint gives. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/models/dense/forward.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_variants.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"
#include "engine/models/dense/model.h"

#define MDIR LD_TESTDATA_DIR "/models/"

/* ------------------------------------------------------------ helpers */

typedef struct seq {
    int32_t tokens[64];
    int T;
    char logits_file[64], hidden_file[64];
    char native_file[64];   /* "" unless a half-precision model */
} seq;

/* The sequences of ref.json. */
static int load_seqs(const char *dir, seq *seqs, int max)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *text = ld_test_slurp(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    int n = 0;
    const cJSON *arr = cJSON_GetObjectItem(j, "sequences"), *e;
    cJSON_ArrayForEach(e, arr)
    {
        if (n == max) break;
        seq *s = &seqs[n++];
        s->T = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "tokens")) if (s->T < 64) s->tokens[s->T++] = t->valueint;
        snprintf(s->logits_file, sizeof s->logits_file, "%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(e, "logits"), "file")->valuestring);
        snprintf(s->hidden_file, sizeof s->hidden_file, "%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(e, "hidden"), "file")->valuestring);
        const cJSON *nat = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "logits_native"), "file");
        snprintf(s->native_file, sizeof s->native_file, "%s", cJSON_IsString(nat) ? nat->valuestring : "");
    }
    cJSON_Delete(j);
    return n;
}

/* The CPU backends: every check runs on each. */
typedef struct backend_kind {
    const char *name;
    ld_status (*create)(int n_threads, ld_backend **out, ld_error *err);
} backend_kind;
static const backend_kind backends[] = {{"ref", ld_backend_ref_create}, {"cpu", ld_backend_cpu_create}};
#define N_BACKENDS ((int)(sizeof backends / sizeof backends[0]))

/* Run `toks` through a fresh session of `m` on backend `bk`, `threads`
 * threads, in calls of `call` tokens (0: all at once) with chunks of at
 * most `batch`. */
static ld_status run_on(const backend_kind *bk, const ld_model *m, int threads, int batch, int call,
                        const int32_t *toks, int T, float *logits, float *hidden, ld_error *err)
{
    ld_backend *be = NULL;
    ld_session *s = NULL;
    ld_status st = bk->create(threads, &be, err);
    if (st == LD_OK) st = ld_session_create(m, be, 64, batch, &s, err);
    size_t V = (size_t)m->cfg.vocab;
    for (int t0 = 0; st == LD_OK && t0 < T;) {
        int n = call ? (T - t0 < call ? T - t0 : call) : T;
        if (hidden) {
            /* hidden planes are per call: run with a temporary and scatter */
            size_t D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
            float *h = malloc(P * (size_t)n * D * sizeof *h);
            st = h ? ld_session_eval(s, toks + t0, n, logits + (size_t)t0 * V, h, err) : LD_ERR_NOMEM;
            for (size_t p = 0; st == LD_OK && p < P; p++)
                memcpy(hidden + (p * (size_t)T + (size_t)t0) * D, h + p * (size_t)n * D, (size_t)n * D * sizeof *h);
            free(h);
        } else {
            st = ld_session_eval(s, toks + t0, n, logits + (size_t)t0 * V, NULL, err);
        }
        t0 += n;
    }
    if (st == LD_OK && ld_session_pos(s) != T) st = LD_ERR_MISMATCH;
    ld_session_destroy(s);
    ld_backend_destroy(be);
    return st;
}

static ld_status run(const ld_model *m, int threads, int batch, int call, const int32_t *toks, int T,
                     float *logits, float *hidden, ld_error *err)
{
    return run_on(&backends[0], m, threads, batch, call, toks, T, logits, hidden, err);
}

static int open_model(const char *name, ld_model **m)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_model_open(dir, m, &err);
    CHECK_MSG(st == LD_OK, "%s: %s", name, err.msg);
    return 0;
}

/* ------------------------------------------------------------ against transformers */

static int check_model_on(const backend_kind *bk, const char *name, double tol, double native_tol)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_model *m = NULL;
    if (open_model(name, &m)) return 1;
    seq seqs[4];
    int ns = load_seqs(dir, seqs, 4);
    CHECK(ns == 2);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    int bad = 0;
    for (int i = 0; i < ns; i++) {
        seq *q = &seqs[i];
        size_t T = (size_t)q->T;
        float *ref_l = load_f32(dir, q->logits_file, T * V), *ref_h = load_f32(dir, q->hidden_file, P * T * D);
        float *l = malloc(T * V * sizeof *l), *h = malloc(P * T * D * sizeof *h);
        CHECK(ref_l && ref_h && l && h);
        ld_error err;
        ld_error_clear(&err);
        ld_status st = run_on(bk, m, 2, 64, 0, q->tokens, q->T, l, h, &err);
        CHECK_MSG(st == LD_OK, "%s", err.msg);
        double mx, e = nerr(l, ref_l, T * V, &mx);
        fprintf(stderr, "  %s %-12s seq %d (%2zu tokens): logits nerr %.3g max|d| %.3g;", bk->name, name, i, T, e,
                mx);
        if (!(e < tol)) bad = 1;
        for (size_t p = 0; p < P; p++) {
            double eh = nerr(h + p * T * D, ref_h + p * T * D, T * D, NULL);
            fprintf(stderr, " h%zu %.2g", p, eh);
            if (!(eh < tol)) bad = 1;
        }
        if (q->native_file[0]) {
            /* transformers computing in bf16/f16 itself: far looser */
            float *nat = load_f32(dir, q->native_file, T * V);
            CHECK(nat);
            double en = nerr(l, nat, T * V, NULL);
            fprintf(stderr, "; vs %s compute %.3g", m->embed.host.dtype == LD_DT_BF16 ? "bf16" : "f16", en);
            if (!(en < native_tol)) bad = 1;
            free(nat);
        }
        fputc('\n', stderr);
        free(ref_l);
        free(ref_h);
        free(l);
        free(h);
    }
    ld_model_close(m);
    CHECK_MSG(!bad, "%s on %s: error above %g", name, bk->name, tol);
    return 0;
}

static int check_model(const char *name, double tol, double native_tol)
{
    for (int b = 0; b < N_BACKENDS; b++)
        if (check_model_on(&backends[b], name, tol, native_tol)) return 1;
    return 0;
}

/* The logits of sequence b when `cfg` replaces the model's config: far from
 * transformers' (so the feature that `cfg` drops is exercised). */
static int check_ablation(const char *name, void (*drop)(ld_model_config *))
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_model *m = NULL, *b = NULL;
    if (open_model(name, &m)) return 1;
    seq seqs[4];
    CHECK(load_seqs(dir, seqs, 4) == 2);
    ld_model_config c = m->cfg;
    drop(&c);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_model_bind(&c, m->st, &b, &err) == LD_OK, "%s", err.msg);
    size_t n = (size_t)seqs[1].T * (size_t)c.vocab;
    float *ref = load_f32(dir, seqs[1].logits_file, n), *l = malloc(n * sizeof *l);
    CHECK(ref && l);
    CHECK_MSG(run(b, 1, 64, 0, seqs[1].tokens, seqs[1].T, l, NULL, &err) == LD_OK, "%s", err.msg);
    double e = nerr(l, ref, n, NULL);
    fprintf(stderr, "  %s without the feature: nerr %.3g\n", name, e);
    CHECK(e > 1e-3);
    free(ref);
    free(l);
    ld_model_close(b); /* a bound model does not own the checkpoint */
    ld_model_close(m);
    return 0;
}

static void drop_window(ld_model_config *c) { memset(c->window, 0, sizeof c->window); }
static void drop_rope_scaling(ld_model_config *c) { c->rope_type = LD_ROPE_DEFAULT; }
/* YaRN's two parts separately: the blended frequencies (the attention
 * factor kept), and the attention factor (the frequencies kept) */
static void drop_rope_freqs_only(ld_model_config *c) { c->rope_type = LD_ROPE_DEFAULT; }
static void drop_rope_attn_factor(ld_model_config *c) { c->rope_attn_factor = 1.0; }
/* dynamic: the config's own max_position_embeddings (no NTK base) */
static void drop_dynamic(ld_model_config *c) { c->rope_type = LD_ROPE_DEFAULT; }

static int test_forward_features_matter(void)
{
    if (check_ablation("mistral", drop_window)) return 1;
    if (check_ablation("llama3", drop_rope_scaling)) return 1;
    if (check_ablation("smollm", drop_rope_scaling)) return 1;
    if (check_ablation("llama-yarn", drop_rope_freqs_only)) return 1;
    if (check_ablation("llama-yarn", drop_rope_attn_factor)) return 1;
    if (check_ablation("qwen2-yarn", drop_rope_freqs_only)) return 1;
    if (check_ablation("qwen2-yarn", drop_rope_attn_factor)) return 1;
    return check_ablation("qwen2-dynamic", drop_dynamic);
}

/* The inverse frequencies and the cos/sin factor against those in ref.json
 * ("rope", tools/gen_tiny_models.py): yarn against transformers' own
 * (rotary_emb.inv_freq, .attention_scaling); dynamic against SGLang's
 * formula evaluated by the generator with torch (not against transformers',
 * whose base is computed from the current length in float32 tensor ops: it
 * differs from SGLang's double base by an ulp in some entries, reported). */
static int check_rope(const char *name, const char *key)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_model *m = NULL;
    if (open_model(name, &m)) return 1;
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *text = ld_test_slurp(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *rope = cJSON_GetObjectItem(j, "rope");
    const cJSON *want = cJSON_GetObjectItem(rope, key), *tf = cJSON_GetObjectItem(rope, "inv_freq");
    const cJSON *as = cJSON_GetObjectItem(rope, "attention_scaling");
    int half = m->cfg.head_dim / 2;
    CHECK(cJSON_GetArraySize(want) == half && cJSON_GetArraySize(tf) == half && cJSON_IsString(as));
    float inv[LD_MODEL_MAX_HEAD_DIM / 2];
    ld_model_rope_inv_freq(&m->cfg, inv);
    double worst = 0, worst_tf = 0;
    for (int i = 0; i < half; i++) {
        double w = strtod(cJSON_GetArrayItem(want, i)->valuestring, NULL);
        double t = strtod(cJSON_GetArrayItem(tf, i)->valuestring, NULL);
        double r = fabs((double)inv[i] - w) / w, rt = fabs((double)inv[i] - t) / t;
        if (r > worst) worst = r;
        if (rt > worst_tf) worst_tf = rt;
    }
    double a = strtod(as->valuestring, NULL);
    double qk = ld_model_rope_qk_scale(&m->cfg);
    fprintf(stderr, "  %-13s inv_freq vs %s: max rel %.3g (vs transformers' %.3g); attention factor %.17g (%s)\n",
            name, key, worst, worst_tf, sqrt(qk), as->valuestring);
    /* one fp32 ulp is 1.2e-7 relative at most */
    CHECK_MSG(worst <= 1.2e-7, "%s: inv_freq differs from %s by %.3g", name, key, worst);
    CHECK_MSG(fabs(qk - a * a) <= 1e-15 * a * a, "%s: q.k factor %.17g, transformers' %.17g^2", name, qk, a);
    cJSON_Delete(j);
    ld_model_close(m);
    return 0;
}

static int test_rope_inv_freq(void)
{
    if (check_rope("llama-yarn", "inv_freq")) return 1;
    if (check_rope("qwen2-yarn", "inv_freq")) return 1;
    return check_rope("qwen2-dynamic", "inv_freq_sglang");
}

/* fp32 models: against transformers in fp32.  bf16/f16 models: against
 * transformers in fp32 on the same (upcast) weights, which is what the
 * engine computes, as tightly; and, loosely, against transformers
 * computing in bf16/f16 (its rounding of every intermediate). */
static int test_forward_llama3(void) { return check_model("llama3", 1e-5, 0); }
static int test_forward_llama3_bf16(void) { return check_model("llama3-bf16", 1e-5, 2e-2); }
static int test_forward_smollm(void) { return check_model("smollm", 1e-5, 0); }
static int test_forward_qwen2(void) { return check_model("qwen2", 1e-5, 0); }
static int test_forward_qwen3(void) { return check_model("qwen3", 1e-5, 0); }
static int test_forward_qwen3_f16(void) { return check_model("qwen3-f16", 1e-5, 3e-3); }
/* block-scaled FP8 weights read in place: transformers on their exact
 * dequantization, as tightly as fp32 */
static int test_forward_qwen3_fp8(void) { return check_model("qwen3-fp8", 1e-5, 0); }
static int test_forward_mistral_sliding_window(void) { return check_model("mistral", 1e-5, 0); }
/* YaRN: transformers multiplies cos and sin by the attention factor, the
 * engine the softmax scale by its square (same up to rounding) */
static int test_forward_llama_yarn(void) { return check_model("llama-yarn", 1e-5, 0); }
static int test_forward_qwen2_yarn(void) { return check_model("qwen2-yarn", 1e-5, 0); }
/* dynamic NTK: 64-token sequences, so that transformers' length-dependent
 * base is SGLang's fixed one (max_len = 32 * 2) */
static int test_forward_qwen2_dynamic(void) { return check_model("qwen2-dynamic", 1e-5, 0); }

/* ------------------------------------------------------------ determinism */

static int check_deterministic_on(const backend_kind *bk, const char *name)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_model *m = NULL;
    if (open_model(name, &m)) return 1;
    seq seqs[4];
    CHECK(load_seqs(dir, seqs, 4) == 2);
    const seq *q = &seqs[1];
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q->T * (size_t)m->cfg.hidden;
    float *base = malloc(n * sizeof *base), *l = malloc(n * sizeof *l);
    float *hbase = malloc(nh * sizeof *hbase), *h = malloc(nh * sizeof *h);
    CHECK(base && l && hbase && h);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(run_on(bk, m, 1, 64, 0, q->tokens, q->T, base, hbase, &err) == LD_OK, "%s", err.msg);
    /* threads x (batch, call): one prefill, chunks, calls of uneven size,
     * token by token */
    static const int shapes[][2] = {{64, 0}, {1, 0}, {3, 0}, {5, 0}, {64, 1}, {64, 4}, {2, 7}, {64, 11}};
    for (int threads = 1; threads <= 3; threads++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            memset(l, 0, n * sizeof *l);
            memset(h, 0, nh * sizeof *h);
            CHECK_MSG(run_on(bk, m, threads, shapes[k][0], shapes[k][1], q->tokens, q->T, l, h, &err) == LD_OK,
                      "%s", err.msg);
            CHECK_MSG(memcmp(l, base, n * sizeof *l) == 0 && memcmp(h, hbase, nh * sizeof *h) == 0,
                      "%s on %s: %d threads, batch %d, calls of %d differ from 1 thread in one prefill", name,
                      bk->name, threads, shapes[k][0], shapes[k][1]);
        }
    free(base);
    free(l);
    free(hbase);
    free(h);
    ld_model_close(m);
    return 0;
}

static int check_deterministic(const char *name)
{
    for (int b = 0; b < N_BACKENDS; b++)
        if (check_deterministic_on(&backends[b], name)) return 1;
    return 0;
}

static int test_forward_deterministic_llama3(void) { return check_deterministic("llama3"); }
static int test_forward_deterministic_qwen3_f16(void) { return check_deterministic("qwen3-f16"); }
static int test_forward_deterministic_mistral(void) { return check_deterministic("mistral"); }
static int test_forward_deterministic_qwen2(void) { return check_deterministic("qwen2"); }
static int test_forward_deterministic_llama_yarn(void) { return check_deterministic("llama-yarn"); }
static int test_forward_deterministic_qwen2_dynamic(void) { return check_deterministic("qwen2-dynamic"); }

/* ------------------------------------------------------------ errors */

static const char *cfg_base =
    "{\"architectures\": [\"%s\"], \"hidden_size\": 64, \"intermediate_size\": 128,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"vocab_size\": 300, \"rms_norm_eps\": 1e-5%s}";

static ld_status parse_cfg(const char *arch, const char *extra, ld_model_config *c, ld_error *err)
{
    char buf[1024];
    snprintf(buf, sizeof buf, cfg_base, arch, extra);
    ld_error_clear(err);
    return ld_model_config_parse(buf, strlen(buf), c, err);
}

static int test_config_fields(void)
{
    ld_model_config c;
    ld_error err;
    CHECK(parse_cfg("LlamaForCausalLM", "", &c, &err) == LD_OK);
    CHECK(c.arch == LD_ARCH_LLAMA && c.head_dim == 16 && c.rope_theta == 10000.0 && !c.tie_embeddings);
    CHECK(parse_cfg("Qwen2ForCausalLM", ", \"tie_word_embeddings\": true, \"rope_theta\": 1e6", &c, &err) == LD_OK);
    CHECK(c.qkv_bias && !c.o_bias && c.tie_embeddings && c.rope_theta == 1e6);
    /* transformers 4 style scaling */
    CHECK(parse_cfg("LlamaForCausalLM",
                    ", \"rope_theta\": 5e5, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8,"
                    " \"low_freq_factor\": 1, \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}",
                    &c, &err) == LD_OK);
    CHECK(c.rope_type == LD_ROPE_LLAMA3 && c.rope_orig_max_pos == 8192 && c.rope_attn_factor == 1.0);
    /* yarn, transformers 4 style: defaults; the top-level
     * original_max_position_embeddings wins (as transformers) */
    CHECK(parse_cfg("LlamaForCausalLM",
                    ", \"original_max_position_embeddings\": 2048, \"rope_scaling\": {\"type\": \"yarn\","
                    " \"factor\": 4, \"original_max_position_embeddings\": 8192}",
                    &c, &err) == LD_OK);
    CHECK(c.rope_type == LD_ROPE_YARN && c.rope_orig_max_pos == 2048 && c.rope_beta_fast == 32 &&
          c.rope_beta_slow == 1 && c.rope_truncate == 1);
    CHECK(fabs(c.rope_attn_factor - (0.1 * log(4.0) + 1)) < 1e-15);
    /* explicit attention_factor; beta 0 / null mean the default; truncate
     * null is false; factor null is max_position_embeddings / original */
    CHECK(parse_cfg("LlamaForCausalLM",
                    ", \"max_position_embeddings\": 4096, \"rope_parameters\": {\"rope_type\": \"yarn\","
                    " \"factor\": null, \"original_max_position_embeddings\": 1024, \"beta_fast\": 0,"
                    " \"beta_slow\": null, \"truncate\": null, \"attention_factor\": 0.75}",
                    &c, &err) == LD_OK);
    CHECK(c.rope_factor == 4 && c.rope_beta_fast == 32 && c.rope_beta_slow == 1 && c.rope_truncate == 0 &&
          c.rope_attn_factor == 0.75 && ld_model_rope_qk_scale(&c) == 0.5625);
    /* mscale without mscale_all_dim: from the factor alone */
    CHECK(parse_cfg("LlamaForCausalLM",
                    ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 40,"
                    " \"original_max_position_embeddings\": 4096, \"mscale\": 1.0, \"mscale_all_dim\": 0}",
                    &c, &err) == LD_OK);
    CHECK(fabs(c.rope_attn_factor - (0.1 * log(40.0) + 1)) < 1e-15);
    /* dynamic: SGLang's context is max_position_embeddings * factor */
    CHECK(parse_cfg("LlamaForCausalLM",
                    ", \"max_position_embeddings\": 100, \"rope_scaling\": {\"rope_type\": \"dynamic\","
                    " \"factor\": 2.5}",
                    &c, &err) == LD_OK);
    CHECK(c.rope_type == LD_ROPE_DYNAMIC && c.max_pos == 250 && c.rope_orig_max_pos == 100 && c.rope_factor == 2.5);
    CHECK(parse_cfg("Qwen3ForCausalLM", ", \"head_dim\": 32", &c, &err) == LD_OK);
    CHECK(c.qk_norm && c.head_dim == 32);
    CHECK(parse_cfg("MistralForCausalLM", ", \"sliding_window\": 4096", &c, &err) == LD_OK);
    CHECK(c.window[0] == 4096 && c.window[1] == 4096);
    CHECK(parse_cfg("Qwen2ForCausalLM", ", \"sliding_window\": 8, \"use_sliding_window\": true, \"max_window_layers\": 1",
                    &c, &err) == LD_OK);
    CHECK(c.window[0] == 0 && c.window[1] == 8);
    return 0;
}

static int test_config_errors(void)
{
    ld_model_config c;
    ld_error err;
    CHECK(parse_cfg("GPT2LMHeadModel", "", &c, &err) == LD_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "'GPT2LMHeadModel'") != NULL, "%s", err.msg);
    CHECK(parse_cfg("LlamaForCausalLM", ", \"rope_scaling\": {\"rope_type\": \"longrope\", \"factor\": 4}", &c,
                    &err) == LD_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "rope_scaling.rope_type") && strstr(err.msg, "longrope"), "%s", err.msg);
    CHECK(parse_cfg("LlamaForCausalLM", ", \"rope_parameters\": {\"rope_type\": \"su\", \"factor\": 4}", &c,
                    &err) == LD_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "rope_parameters.rope_type"), "%s", err.msg);
    /* yarn and dynamic fields missing or invalid: the error names the field */
    static const struct {
        const char *extra, *needle;
    } bad[] = {
        {", \"max_position_embeddings\": 64, \"rope_parameters\": {\"rope_type\": \"yarn\","
         " \"original_max_position_embeddings\": 16}",
         "'rope_parameters.factor' is missing"},
        {", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4}",
         "'rope_scaling.original_max_position_embeddings' is missing"},
        {", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 0, \"original_max_position_embeddings\": 16}",
         "'rope_scaling.factor' is not a positive number"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": \"4\","
         " \"original_max_position_embeddings\": 16}",
         "'rope_parameters.factor' is not a positive number"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4,"
         " \"original_max_position_embeddings\": -16}",
         "'rope_parameters.original_max_position_embeddings' is not a positive number"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4,"
         " \"original_max_position_embeddings\": 16, \"beta_fast\": \"x\"}",
         "'rope_parameters.beta_fast' is not a non-negative number"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4,"
         " \"original_max_position_embeddings\": 16, \"beta_slow\": -1}",
         "'rope_parameters.beta_slow' is not a non-negative number"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4,"
         " \"original_max_position_embeddings\": 16, \"truncate\": 1}",
         "'rope_parameters.truncate' is not a boolean"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4,"
         " \"original_max_position_embeddings\": 16, \"attention_factor\": 0}",
         "'rope_parameters.attention_factor' is not a positive number"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4,"
         " \"original_max_position_embeddings\": 16, \"mscale\": -1, \"mscale_all_dim\": 1}",
         "'rope_parameters.mscale' is not a non-negative number"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1, \"factor\": 4,"
         " \"original_max_position_embeddings\": 16}",
         "'rope_theta' is 1"},
        {", \"rope_parameters\": {\"rope_type\": \"dynamic\"}", "'rope_parameters.factor' is missing"},
        {", \"rope_parameters\": {\"rope_type\": \"dynamic\", \"factor\": 2}", "'max_position_embeddings' is missing"},
        {", \"max_position_embeddings\": 1073741824, \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}",
         "outside [1, 2^30]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_status st = parse_cfg("LlamaForCausalLM", bad[i].extra, &c, &err);
        CHECK_MSG(st == LD_ERR_SYNTAX && strstr(err.msg, bad[i].needle), "case %zu: status %d, '%s'", i, (int)st,
                  err.msg);
    }
    CHECK(parse_cfg("LlamaForCausalLM", ", \"hidden_act\": \"gelu\"", &c, &err) == LD_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "hidden_act"), "%s", err.msg);
    CHECK(parse_cfg("LlamaForCausalLM", ", \"quantization_config\": {}", &c, &err) == LD_ERR_SYNTAX); /* quant_method missing */
    CHECK_MSG(strstr(err.msg, "quantization_config"), "%s", err.msg);
    const char *gqa = "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 8,"
                      " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"num_key_value_heads\": 3,"
                      " \"vocab_size\": 3}";
    CHECK(ld_model_config_parse(gqa, strlen(gqa), &c, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "num_key_value_heads"), "%s", err.msg);
    const char *neg = "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 8,"
                      " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": -1}";
    CHECK(ld_model_config_parse(neg, strlen(neg), &c, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "vocab_size"), "%s", err.msg);
    CHECK(ld_model_config_parse("[1]", 3, &c, &err) == LD_ERR_SYNTAX);
    CHECK(ld_model_config_parse("{", 1, &c, &err) == LD_ERR_SYNTAX);
    /* a file on disk */
    CHECK(ld_model_config_load(MDIR "nonexistent/config.json", &c, &err) == LD_ERR_IO);
    return 0;
}

/* Op variants (engine/backend/cpu_kernels.h) on the ref backend, one at a time,
 * against transformers' fp32 logits: the fp32 reorderings stay within the
 * 1e-5 of the reference, the bf16 ones move the logits visibly (>= 1e-4)
 * but stay sane (<= 5e-2), so a replay can show what each choice costs. */
static int test_forward_kernel_variants(void)
{
    static const struct { const char *spec; double lo, hi; } vs[] = {
        {"matmul=fast", 0, 1e-5},    {"matmul=splitk", 0, 1e-5}, {"attention=fast", 0, 1e-5},
        {"matmul=bf16", 1e-4, 5e-2}, {"rmsnorm=bf16", 1e-4, 5e-2}, {"swiglu=bf16", 1e-4, 5e-2},
        {"matmul=fp8act", 1e-3, 2e-1},
    };
    ld_model *m = NULL;
    if (open_model("qwen3", &m)) return 1;
    seq seqs[4];
    CHECK(load_seqs(MDIR "qwen3", seqs, 4) == 2);
    const seq *q = &seqs[1];
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    float *ref = load_f32(MDIR "qwen3", q->logits_file, n), *l = malloc(n * sizeof *l);
    CHECK(ref && l);
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        ld_error err;
        ld_error_clear(&err);
        ld_backend *be = NULL;
        ld_session *s = NULL;
        CHECK_MSG(ld_backend_cpu_create_ex(2, 0, vs[i].spec, &be, &err) == LD_OK, "%s: %s", vs[i].spec, err.msg);
        char want[64];
        snprintf(want, sizeof want, "ref+%s", vs[i].spec);
        CHECK_EQ_STR(be->ops->name, want);
        CHECK(ld_session_create(m, be, 64, 64, &s, &err) == LD_OK);
        CHECK(ld_session_eval(s, q->tokens, q->T, l, NULL, &err) == LD_OK);
        double e = nerr(l, ref, n, NULL);
        fprintf(stderr, "  qwen3 with %-15s logits nerr %.3g (band %.0e .. %.0e)\n", vs[i].spec, e, vs[i].lo, vs[i].hi);
        CHECK_MSG(e >= vs[i].lo && e <= vs[i].hi, "%s: %.3g outside its band", vs[i].spec, e);
        ld_session_destroy(s);
        ld_backend_destroy(be);
    }
    free(ref);
    free(l);
    ld_model_close(m);
    return 0;
}

/* Kernel specs: errors name the op or variant and where; labels. */
static int test_kernel_specs(void)
{
    static const struct { const char *spec, *needle; uint64_t off; } bad[] = {
        {"matmul", "not OP=VARIANT", 0},          {"gemm=ref", "unknown op 'gemm'", 0},
        {"matmul=fp8", "no variant 'fp8'", 7},    {"rmsnorm=fast", "no variant 'fast'", 8},
        {"matmul=ref,", "ends with ','", 10},     {"attention=ref,swiglu=x", "no variant 'x'", 21},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_error err;
        ld_error_clear(&err);
        ld_backend *be = NULL;
        CHECK_EQ_INT(ld_backend_cpu_create_ex(1, 1, bad[i].spec, &be, &err), LD_ERR_USAGE);
        CHECK_MSG(be == NULL && strstr(err.msg, bad[i].needle) && err.offset == bad[i].off, "'%s': %s @%llu",
                  bad[i].spec, err.msg, (unsigned long long)err.offset);
    }
    ld_error err;
    ld_backend *be = NULL;
    CHECK(ld_backend_cpu_create_ex(1, 1, "matmul=ref,rmsnorm=bf16", &be, &err) == LD_OK);
    CHECK_EQ_STR(be->ops->name, "cpu+matmul=ref,rmsnorm=bf16");
    ld_backend_destroy(be);
    CHECK(ld_backend_cpu_create_ex(1, 1, "", &be, &err) == LD_OK);
    CHECK_EQ_STR(be->ops->name, "cpu");
    ld_backend_destroy(be);
    /* bf16 rounding: to nearest, ties to even (1 + 2^-8 is halfway) */
    CHECK(ld_var_bf16_round(1.0f + 0x1p-8f) == 1.0f);
    CHECK(ld_var_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
    CHECK(ld_var_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    CHECK(ld_var_bf16_round(-2.5f) == -2.5f);
    /* e4m3 rounding: each of the 254 finite codes (ref_ds.h decodes
     * them) is a fixed point, the midpoint of two neighbours goes to the
     * even code, past 448 saturates */
    float vals[128];
    int nv = 0;
    for (int c = 0; c < 127; c++) vals[nv++] = ld_ref_fp8_e4m3_to_f32((uint8_t)c); /* 0 .. 448, ascending */
    for (int i = 0; i < nv; i++) {
        CHECK_MSG(ld_var_e4m3_round(vals[i]) == vals[i], "code %d (%g) is not a fixed point", i, vals[i]);
        CHECK(ld_var_e4m3_round(-vals[i]) == -vals[i]);
        if (i + 1 < nv) {
            float mid = (vals[i] + vals[i + 1]) / 2;
            CHECK_MSG(ld_var_e4m3_round(mid) == vals[i % 2 ? i + 1 : i], "midpoint of codes %d and %d", i, i + 1);
        }
    }
    CHECK(ld_var_e4m3_round(1000.0f) == 448.0f && ld_var_e4m3_round(-500.0f) == -448.0f);
    return 0;
}

/* A session larger than the machine's memory is refused before anything
 * is allocated, naming the positions and the sizes. */
static int test_session_memory_limit(void)
{
    ld_model *m = NULL, *b = NULL;
    if (open_model("qwen3", &m)) return 1;
    ld_model_config c = m->cfg;
    c.max_pos = 2000000000;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_model_bind(&c, m->st, &b, &err) == LD_OK, "%s", err.msg);
    ld_backend *be = NULL;
    ld_session *s = NULL;
    CHECK(ld_backend_cpu_create(1, &be, &err) == LD_OK);
    CHECK_EQ_INT(ld_session_create(b, be, 2000000000, 64, &s, &err), LD_ERR_LIMIT);
    CHECK(s == NULL && strstr(err.msg, "2000000000 positions") && strstr(err.msg, "KV cache"));
    CHECK(ld_session_create(b, be, 1000, 64, &s, &err) == LD_OK);
    ld_session_destroy(s);
    ld_backend_destroy(be);
    ld_model_close(b);
    ld_model_close(m);
    return 0;
}

/* FP8: the quantization_config's errors name the field; the binder's name
 * the scale tensor (its block size or absence) and refuse FP8 without a
 * quantization_config. */
static int test_fp8_errors(void)
{
    ld_model_config c;
    ld_error err;
    static const struct {
        const char *extra, *needle;
        ld_status st;
    } bad[] = {
        {", \"quantization_config\": {\"quant_method\": \"awq\", \"weight_block_size\": [128, 128]}",
         "'quantization_config.quant_method' = 'awq' is not supported", LD_ERR_UNSUPPORTED},
        {", \"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", \"weight_block_size\": [1, 1]}",
         "'quantization_config.fmt' = 'e5m2'", LD_ERR_UNSUPPORTED},
        {", \"quantization_config\": {\"quant_method\": \"fp8\"}",
         "'quantization_config.weight_block_size' is not a list of 2 integers", LD_ERR_SYNTAX},
        {", \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 0]}",
         "in [1, 65536]", LD_ERR_SYNTAX},
        {", \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128],"
         " \"ignored_layers\": []}",
         "'quantization_config.ignored_layers' is not supported", LD_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_error_clear(&err);
        CHECK_EQ_INT(parse_cfg("Qwen3ForCausalLM", bad[i].extra, &c, &err), bad[i].st);
        CHECK_MSG(strstr(err.msg, bad[i].needle), "%s: %s", bad[i].needle, err.msg);
    }
    ld_model *m = NULL, *b = NULL;
    if (open_model("qwen3-fp8", &m)) return 1;
    CHECK(m->cfg.fp8.on && m->cfg.fp8.block[0] == 16 && m->cfg.fp8.block[1] == 16);
    ld_model_config k = m->cfg;
    k.fp8.block[1] = 32; /* scales of another block size: their shape is wrong */
    ld_error_clear(&err);
    CHECK_EQ_INT(ld_model_bind(&k, m->st, &b, &err), LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "'model.layers.0.self_attn.q_proj.weight_scale_inv' has shape [8, 4], expected [8, 2]"),
              "%s", err.msg);
    k = m->cfg;
    k.fp8.on = 0; /* FP8 weights without a quantization_config */
    ld_error_clear(&err);
    CHECK_EQ_INT(ld_model_bind(&k, m->st, &b, &err), LD_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "'model.layers.0.self_attn.q_proj.weight' has dtype F8_E4M3"), "%s", err.msg);
    ld_model_close(m);
    return 0;
}

static int test_bind_errors(void)
{
    ld_model *m = NULL;
    if (open_model("llama3", &m)) return 1;
    ld_model_config c = m->cfg;
    ld_model *b = NULL;
    ld_error err;
    /* a missing tensor: Qwen3's q_norm asked of a Llama checkpoint */
    c.qk_norm = 1;
    ld_error_clear(&err);
    CHECK(ld_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH && !b);
    CHECK_MSG(strstr(err.msg, "'model.layers.0.self_attn.q_norm.weight' [16] is missing"), "%s", err.msg);
    /* a wrong shape */
    c = m->cfg;
    c.intermediate = 100;
    ld_error_clear(&err);
    CHECK(ld_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH && !b);
    CHECK_MSG(strstr(err.msg, "'model.layers.0.mlp.gate_proj.weight' has shape [128, 64], expected [100, 64]"),
              "%s", err.msg);
    /* untied but no lm_head: the tied smollm checkpoint */
    ld_model *t = NULL;
    if (open_model("smollm", &t)) return 1;
    c = t->cfg;
    c.tie_embeddings = 0;
    ld_error_clear(&err);
    CHECK(ld_model_bind(&c, t->st, &b, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "'lm_head.weight' [300, 64] is missing"), "%s", err.msg);
    ld_model_close(t);
    /* a token outside the vocabulary, and too many tokens */
    ld_backend *be = NULL;
    ld_session *s = NULL;
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    CHECK(ld_session_create(m, be, 8, 4, &s, &err) == LD_OK);
    int32_t toks[9] = {1, 2, 300, 4, 5, 6, 7, 8, 9};
    ld_error_clear(&err);
    CHECK(ld_session_eval(s, toks, 3, NULL, NULL, &err) == LD_ERR_USAGE);
    CHECK_MSG(strstr(err.msg, "token id 300"), "%s", err.msg);
    toks[2] = 3;
    CHECK(ld_session_eval(s, toks, 9, NULL, NULL, &err) == LD_ERR_LIMIT);
    CHECK(ld_session_eval(s, toks, 8, NULL, NULL, &err) == LD_OK);
    CHECK(ld_session_eval(s, toks, 1, NULL, NULL, &err) == LD_ERR_LIMIT);
    ld_session_reset(s);
    CHECK(ld_session_pos(s) == 0 && ld_session_eval(s, toks, 1, NULL, NULL, &err) == LD_OK);
    ld_session_destroy(s);
    /* a weight not aligned to its element size (a hostile file) */
    static float store[8];
    ld_host_tensor ht = {.dtype = LD_DT_F32, .data = (const char *)store + 2, .rows = 1, .cols = 4};
    ld_weight *w = NULL;
    CHECK(be->ops->weight_load(be, &ht, &w, &err) == LD_ERR_UNSUPPORTED && !w);
    CHECK_MSG(strstr(err.msg, "aligned"), "%s", err.msg);
    ht.dtype = LD_DT_I32;
    ht.data = store;
    CHECK(be->ops->weight_load(be, &ht, &w, &err) == LD_ERR_UNSUPPORTED && !w);
    ld_backend_destroy(be);
    ld_model_close(m);
    /* a directory without a model */
    ld_error_clear(&err);
    CHECK(ld_model_open(MDIR "nonexistent", &b, &err) == LD_ERR_IO && !b);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_forward_llama3),
    LD_CASE(test_forward_llama3_bf16),
    LD_CASE(test_forward_smollm),
    LD_CASE(test_forward_qwen2),
    LD_CASE(test_forward_qwen3),
    LD_CASE(test_forward_qwen3_f16),
    LD_CASE(test_forward_qwen3_fp8),
    LD_CASE(test_forward_mistral_sliding_window),
    LD_CASE(test_forward_llama_yarn),
    LD_CASE(test_forward_qwen2_yarn),
    LD_CASE(test_forward_qwen2_dynamic),
    LD_CASE(test_rope_inv_freq),
    LD_CASE(test_forward_features_matter),
    LD_CASE(test_forward_deterministic_llama3),
    LD_CASE(test_forward_deterministic_qwen3_f16),
    LD_CASE(test_forward_deterministic_mistral),
    LD_CASE(test_forward_deterministic_qwen2),
    LD_CASE(test_forward_deterministic_llama_yarn),
    LD_CASE(test_forward_deterministic_qwen2_dynamic),
    LD_CASE(test_config_fields),
    LD_CASE(test_config_errors),
    LD_CASE(test_bind_errors),
    LD_CASE(test_fp8_errors),
    LD_CASE(test_session_memory_limit),
    LD_CASE(test_forward_kernel_variants),
    LD_CASE(test_kernel_specs),
};

LD_TEST_MAIN(cases)
