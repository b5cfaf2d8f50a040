/* test_gguf_model.c - GGUF files as model sources (engine/models/dense/model_gguf.c):
 * the tiny models of testdata/models/ converted to GGUF with quantized
 * weights (Llama with llama.cpp's q/k row order, Qwen2 with biases, Qwen3
 * with q/k norms and an untied output) against transformers running
 * gguf-py's dequantization of the same tensors (testdata/engine/quant/,
 * tools/gen_quant_vectors.py --models); the config read from the metadata
 * against the HF config.json; determinism over threads and chunking; and
 * the loader's errors, each naming the key or tensor.
 * RoPE scalings (testdata/engine/rope/, tools/gen_gguf_fixtures.py
 * --rope-models): Llama 3's rope_freqs.weight and yarn keys on F32 GGUF
 * conversions of tiny HF models, against transformers' logits for those HF
 * models; the keys read into the config; their errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/dense/forward.h"
#include "tests/support/ld_test.h"
#include "engine/models/dense/model.h"

#define QDIR LD_TESTDATA_DIR "/engine/quant/"
#define RDIR LD_TESTDATA_DIR "/engine/rope/"
#define MDIR LD_TESTDATA_DIR "/models/"

static double rel_err(const float *a, const float *b, size_t n, double *maxabs)
{
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
        if (fabs(d) > mx) mx = fabs(d);
    }
    *maxabs = mx;
    return sqrt(num / (den > 0 ? den : 1));
}

static int run(const ld_model *m, int threads, int chunk, const int32_t *ids, int T, float *logits)
{
    ld_error err;
    ld_error_clear(&err);
    ld_backend *be = NULL;
    ld_session *s = NULL;
    CHECK(ld_backend_ref_create(threads, &be, &err) == LD_OK);
    CHECK_MSG(ld_session_create(m, be, 64, chunk, &s, &err) == LD_OK, "%s", err.msg);
    for (int t0 = 0; t0 < T; t0 += chunk) {
        int n = T - t0 < chunk ? T - t0 : chunk;
        CHECK_MSG(ld_session_eval(s, ids + t0, n, logits + (size_t)t0 * (size_t)m->cfg.vocab, NULL, &err) == LD_OK,
                  "%s", err.msg);
    }
    ld_session_destroy(s);
    ld_backend_destroy(be);
    return 0;
}

static int test_gguf_model_logits_vs_transformers(void)
{
    char *idx = ld_test_slurp(QDIR "models.txt");
    CHECK_MSG(idx, "cannot read " QDIR "models.txt");
    int n = 0, bad = 0;
    char *save = NULL;
    for (char *line = strtok_r(idx, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[32], seq[8];
        int off = 0;
        CHECK(sscanf(line, "%31s %7s %n", name, seq, &off) == 2);
        int32_t ids[64];
        int T = 0, k;
        for (const char *p = line + off; T < 64 && sscanf(p, "%d%n", &ids[T], &k) == 1; p += k) T++;
        CHECK(T > 0);
        char path[512];
        snprintf(path, sizeof path, QDIR "%s.gguf", name);
        ld_model *m = NULL;
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_model_open_gguf(path, &m, &err) == LD_OK, "%s: %s", name, err.msg);
        size_t V = (size_t)m->cfg.vocab, nl = (size_t)T * V, got_n = 0;
        snprintf(path, sizeof path, QDIR "%s-%s.logits.f32", name, seq);
        float *ref = (float *)ld_test_read_bytes(path, &got_n);
        CHECK(ref && got_n == nl * sizeof(float));
        float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b), *c = malloc(nl * sizeof *c);
        CHECK(a && b && c);
        if (run(m, 1, T, ids, T, a) || run(m, 3, 1, ids, T, b) || run(m, 2, 5, ids, T, c)) return 1;
        double mx, e = rel_err(a, ref, nl, &mx);
        int same = memcmp(a, b, nl * sizeof *a) == 0 && memcmp(a, c, nl * sizeof *a) == 0;
        printf("  %-8s %s: %2d tokens, rel error %.2e (max |d| %.2e) vs transformers; "
               "threads/chunks bitwise equal: %s\n", name, seq, T, e, mx, same ? "yes" : "NO");
        if (!(e < 1e-5) || !same) bad = 1;
        free(a);
        free(b);
        free(c);
        free(ref);
        ld_model_close(m);
        n++;
    }
    free(idx);
    CHECK(n >= 6);
    CHECK(!bad);
    return 0;
}

/* ablation: the q/k row order matters (Llama only) */
static int test_gguf_model_rope_row_order(void)
{
    ld_model *m = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_model_open_gguf(QDIR "llama-q.gguf", &m, &err) == LD_OK, "%s", err.msg);
    static const int32_t ids[] = {1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200};
    enum { T = 13 };
    size_t nl = (size_t)T * (size_t)m->cfg.vocab, got_n = 0;
    float *ref = (float *)ld_test_read_bytes(QDIR "llama-q-a.logits.f32", &got_n);
    float *a = malloc(nl * sizeof *a);
    CHECK(ref && got_n == nl * sizeof *ref && a);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        CHECK(m->layers[l].wq.host.rope_hd == m->cfg.head_dim && m->layers[l].wk.host.rope_hd == m->cfg.head_dim);
        CHECK(m->layers[l].wv.host.rope_hd == 0);
        m->layers[l].wq.host.rope_hd = m->layers[l].wk.host.rope_hd = 0;
    }
    if (run(m, 1, T, ids, T, a)) return 1;
    double mx, e = rel_err(a, ref, nl, &mx);
    printf("  without the row order: rel error %.2e\n", e);
    CHECK(e > 1e-3);
    free(a);
    free(ref);
    ld_model_close(m);
    CHECK(ld_model_open_gguf(QDIR "qwen2-q.gguf", &m, &err) == LD_OK);
    CHECK(m->layers[0].wq.host.rope_hd == 0 && m->layers[0].wq.host.quant == LD_WQ_Q8_0);
    ld_model_close(m);
    return 0;
}

/* the config from GGUF metadata is the HF config.json's */
static int test_gguf_model_config(void)
{
    static const char *const pairs[][2] = {{"llama-q", "smollm"}, {"qwen2-q", "qwen2"}, {"qwen3-q", "qwen3"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char path[512];
        ld_error err;
        ld_error_clear(&err);
        ld_model *m = NULL;
        snprintf(path, sizeof path, QDIR "%s.gguf", pairs[i][0]);
        CHECK_MSG(ld_model_open_any(path, &m, &err) == LD_OK, "%s", err.msg);
        static ld_model_config hf;
        snprintf(path, sizeof path, LD_TESTDATA_DIR "/models/%s/config.json", pairs[i][1]);
        CHECK_MSG(ld_model_config_load(path, &hf, &err) == LD_OK, "%s", err.msg);
        const ld_model_config *g = &m->cfg;
        CHECK(g->arch == hf.arch);
        CHECK_EQ_STR(g->arch_name, hf.arch_name);
        CHECK(g->vocab == hf.vocab && g->hidden == hf.hidden && g->intermediate == hf.intermediate);
        CHECK(g->n_layers == hf.n_layers && g->n_heads == hf.n_heads && g->n_kv_heads == hf.n_kv_heads);
        CHECK(g->head_dim == hf.head_dim && g->max_pos == hf.max_pos && g->rms_eps == hf.rms_eps);
        CHECK(g->tie_embeddings == hf.tie_embeddings && g->qkv_bias == hf.qkv_bias && g->qk_norm == hf.qk_norm);
        CHECK(g->o_bias == hf.o_bias && g->mlp_bias == hf.mlp_bias);
        CHECK(g->rope_type == hf.rope_type && g->rope_theta == hf.rope_theta && g->rope_factor == hf.rope_factor);
        ld_model_close(m);
    }
    return 0;
}

static int test_gguf_model_errors(void)
{
    static const struct {
        const char *file;
        ld_status st;
        const char *needle;
    } cases[] = {
        {"bad-ok", LD_OK, NULL},
        {"bad-shape", LD_ERR_MISMATCH, "'blk.0.attn_k.weight' has shape [16, 32]"},
        {"bad-missing", LD_ERR_MISMATCH, "'blk.0.ffn_up.weight' [32, 32] is missing"},
        {"bad-arch", LD_ERR_UNSUPPORTED, "'gpt2'"},
        /* its rope_freqs.weight holds random normals: bound now, refused
         * for a value that is not positive */
        {"bad-extra", LD_ERR_SYNTAX, "'rope_freqs.weight' [0] = "},
        {"bad-normtype", LD_ERR_UNSUPPORTED, "'blk.0.ffn_norm.weight' has type Q8_0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, QDIR "%s.gguf", cases[i].file);
        ld_error err;
        ld_error_clear(&err);
        ld_model *m = NULL;
        ld_status st = ld_model_open_gguf(path, &m, &err);
        CHECK_MSG(st == cases[i].st, "%s: status %d (%s)", cases[i].file, (int)st, err.msg);
        if (st == LD_OK) {
            CHECK(m && m->cfg.tie_embeddings && m->cfg.n_layers == 1 && m->cfg.vocab == 8);
            ld_model_close(m);
            continue;
        }
        CHECK(!m);
        CHECK_MSG(strstr(err.msg, cases[i].needle), "%s: '%s'", cases[i].file, err.msg);
        CHECK(err.path && strcmp(err.path, path) == 0);
    }
    /* a directory with several *.gguf and no config.json */
    char *gp = (char *)1;
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_model_find_gguf(QDIR, &gp, &err) == LD_ERR_MISMATCH && !gp);
    CHECK(strstr(err.msg, "*.gguf"));
    /* an HF directory is not GGUF */
    CHECK(ld_model_find_gguf(LD_TESTDATA_DIR "/models/qwen2", &gp, &err) == LD_OK && !gp);
    CHECK(ld_model_find_gguf(QDIR "nonexistent.gguf", &gp, &err) == LD_ERR_IO && !gp);
    /* not a GGUF file */
    ld_model *m = NULL;
    CHECK(ld_model_open_any(QDIR "index.txt", &m, &err) != LD_OK && !m);
    return 0;
}

/* The GGUF conversions (F32 weights) against transformers on the HF model
 * they come from (its ref-<seq>.logits.f32): rope_freqs.weight, yarn. */
static int test_gguf_model_rope_vs_transformers(void)
{
    char *idx = ld_test_slurp(RDIR "models.txt");
    CHECK_MSG(idx, "cannot read " RDIR "models.txt");
    int n = 0, bad = 0;
    char *save = NULL;
    for (char *line = strtok_r(idx, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[32], src[32], path[512];
        CHECK(sscanf(line, "%31s %31s", name, src) == 2);
        snprintf(path, sizeof path, RDIR "%s.gguf", name);
        ld_model *m = NULL, *hfm = NULL;
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_model_open_gguf(path, &m, &err) == LD_OK, "%s: %s", name, err.msg);
        snprintf(path, sizeof path, MDIR "%s", src);
        CHECK_MSG(ld_model_open(path, &hfm, &err) == LD_OK, "%s: %s", src, err.msg);
        /* same inverse frequencies up to rounding, same attention factor */
        float ig[LD_MODEL_MAX_HEAD_DIM / 2], ih[LD_MODEL_MAX_HEAD_DIM / 2];
        ld_model_rope_inv_freq(&m->cfg, ig);
        ld_model_rope_inv_freq(&hfm->cfg, ih);
        double wf = 0;
        for (int i = 0; i < m->cfg.head_dim / 2; i++) {
            double r = fabs((double)ig[i] - ih[i]) / ih[i];
            if (r > wf) wf = r;
        }
        double af = ld_model_rope_qk_scale(&m->cfg), afh = ld_model_rope_qk_scale(&hfm->cfg);
        CHECK_MSG(fabs(af - afh) < 1e-12 && wf < 1e-6, "%s: inv_freq rel %.3g, q.k factor %.17g vs %.17g", name, wf, af,
                  afh);
        ld_model_close(hfm);
        for (const char *seq = "ab"; *seq; seq++) {
            /* the sequences of ref.json (tools/gen_tiny_models.py SEQS) */
            static const int32_t sa[] = {1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200};
            int32_t ids[21];
            int T = *seq == 'a' ? 13 : 21;
            for (int t = 0; t < T; t++) ids[t] = *seq == 'a' ? sa[t] : (t * 37 + 11) % 299 + 1;
            size_t V = (size_t)m->cfg.vocab, nl = (size_t)T * V, got_n = 0;
            snprintf(path, sizeof path, MDIR "%s/ref-%c.logits.f32", src, *seq);
            float *ref = (float *)ld_test_read_bytes(path, &got_n);
            CHECK(ref && got_n == nl * sizeof(float));
            float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
            CHECK(a && b);
            if (run(m, 1, T, ids, T, a) || run(m, 3, 4, ids, T, b)) return 1;
            double mx, e = rel_err(a, ref, nl, &mx);
            int same = memcmp(a, b, nl * sizeof *a) == 0;
            printf("  %-12s %c: %2d tokens, rel error %.2e (max |d| %.2e) vs transformers on %s; inv_freq vs the "
                   "HF config's: rel %.2e; threads/chunks bitwise equal: %s\n",
                   name, *seq, T, e, mx, src, wf, same ? "yes" : "NO");
            if (!(e < 1e-5) || !same) bad = 1;
            free(a);
            free(b);
            free(ref);
        }
        ld_model_close(m);
        n++;
    }
    free(idx);
    CHECK(n >= 2);
    CHECK(!bad);
    return 0;
}

/* ablation: without rope_freqs.weight / without yarn, far from transformers */
static int test_gguf_model_rope_matters(void)
{
    static const char *const pairs[][2] = {{"llama3-freqs", "llama3"}, {"llama-yarn", "llama-yarn"}};
    static const int32_t ids[] = {1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200};
    enum { T = 13 };
    for (size_t i = 0; i < 2; i++) {
        char path[512];
        ld_model *m = NULL;
        ld_error err;
        ld_error_clear(&err);
        snprintf(path, sizeof path, RDIR "%s.gguf", pairs[i][0]);
        CHECK_MSG(ld_model_open_gguf(path, &m, &err) == LD_OK, "%s", err.msg);
        if (i == 0) {
            CHECK(m->cfg.rope_n_freq_factors == m->cfg.head_dim / 2 && m->cfg.rope_type == LD_ROPE_DEFAULT);
            m->cfg.rope_n_freq_factors = 0;
        } else {
            CHECK(m->cfg.rope_type == LD_ROPE_YARN && m->cfg.rope_n_freq_factors == 0);
            m->cfg.rope_type = LD_ROPE_DEFAULT;
            m->cfg.rope_attn_factor = 1;
        }
        size_t nl = (size_t)T * (size_t)m->cfg.vocab, got_n = 0;
        snprintf(path, sizeof path, MDIR "%s/ref-a.logits.f32", pairs[i][1]);
        float *ref = (float *)ld_test_read_bytes(path, &got_n), *a = malloc(nl * sizeof *a);
        CHECK(ref && got_n == nl * sizeof *ref && a);
        if (run(m, 1, T, ids, T, a)) return 1;
        double mx, e = rel_err(a, ref, nl, &mx);
        printf("  %s without its RoPE scaling: rel error %.2e\n", pairs[i][0], e);
        CHECK(e > 1e-3);
        free(a);
        free(ref);
        ld_model_close(m);
    }
    return 0;
}

/* the RoPE keys read into the config, and their errors */
static int test_gguf_model_rope_keys(void)
{
    ld_model *m = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_model_open_gguf(RDIR "ok-freqs.gguf", &m, &err) == LD_OK, "%s", err.msg);
    static const float ff[] = {1, 1, 1.5f, 2, 3, 4, 4, 4};
    CHECK(m->cfg.head_dim == 16 && m->cfg.rope_n_freq_factors == 8);
    CHECK(memcmp(m->cfg.rope_freq_factors, ff, sizeof ff) == 0);
    float inv[8];
    ld_model_rope_inv_freq(&m->cfg, inv);
    for (int i = 0; i < 8; i++) CHECK(inv[i] == 1.0f / powf(10000.0f, (float)(2 * i) / 16.0f) / ff[i]);
    ld_model_close(m);
    /* yarn (the yarn_* keys at llama.cpp's defaults): magnitude
     * 0.1 ln(4) + 1 times attn_factor 2 */
    CHECK_MSG(ld_model_open_gguf(RDIR "ok-yarn-attn.gguf", &m, &err) == LD_OK, "%s", err.msg);
    CHECK(m->cfg.rope_type == LD_ROPE_YARN && m->cfg.rope_factor == 4 && m->cfg.rope_orig_max_pos == 16);
    CHECK(m->cfg.rope_beta_fast == 32 && m->cfg.rope_beta_slow == 1 && m->cfg.rope_truncate == 1);
    double want = (0.1 * log(4.0) + 1) * 2;
    CHECK_MSG(fabs(m->cfg.rope_attn_factor - want) < 1e-15, "%.17g vs %.17g", m->cfg.rope_attn_factor, want);
    ld_model_close(m);
    /* linear with attn_factor 2 */
    CHECK_MSG(ld_model_open_gguf(RDIR "ok-linear-attn.gguf", &m, &err) == LD_OK, "%s", err.msg);
    CHECK(m->cfg.rope_type == LD_ROPE_LINEAR && m->cfg.rope_factor == 2 && m->cfg.rope_attn_factor == 2);
    CHECK(ld_model_rope_qk_scale(&m->cfg) == 4);
    ld_model_close(m);
    static const struct {
        const char *file;
        ld_status st;
        const char *needle;
    } cases[] = {
        {"bad-freqs-shape", LD_ERR_MISMATCH, "'rope_freqs.weight' has 1 dims [9...], expected [8]"},
        {"bad-freqs-value", LD_ERR_SYNTAX, "'rope_freqs.weight' [2] = 0 is not a positive number"},
        {"bad-freqs-type", LD_ERR_UNSUPPORTED, "'rope_freqs.weight' has type F16"},
        {"bad-freqs-qwen2", LD_ERR_UNSUPPORTED, "'rope_freqs.weight' is not used by a qwen2 model"},
        {"bad-yarn-factor", LD_ERR_SYNTAX, "'llama.rope.scaling.factor' is missing"},
        {"bad-yarn-ext", LD_ERR_UNSUPPORTED, "'llama.rope.scaling.yarn_ext_factor' other than 1"},
        {"bad-yarn-beta", LD_ERR_UNSUPPORTED, "'llama.rope.scaling.yarn_beta_fast' other than 32"},
        {"bad-yarn-logmul", LD_ERR_UNSUPPORTED, "'llama.rope.scaling.yarn_log_multiplier' other than 0"},
        {"bad-scaling-type", LD_ERR_UNSUPPORTED, "'llama.rope.scaling.type' = 'longrope' is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, RDIR "%s.gguf", cases[i].file);
        ld_error_clear(&err);
        m = NULL;
        ld_status st = ld_model_open_gguf(path, &m, &err);
        CHECK_MSG(st == cases[i].st && !m, "%s: status %d (%s)", cases[i].file, (int)st, err.msg);
        CHECK_MSG(strstr(err.msg, cases[i].needle), "%s: '%s'", cases[i].file, err.msg);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_gguf_model_logits_vs_transformers),
    LD_CASE(test_gguf_model_rope_row_order),
    LD_CASE(test_gguf_model_config),
    LD_CASE(test_gguf_model_errors),
    LD_CASE(test_gguf_model_rope_vs_transformers),
    LD_CASE(test_gguf_model_rope_matters),
    LD_CASE(test_gguf_model_rope_keys),
};

LD_TEST_MAIN(cases)
