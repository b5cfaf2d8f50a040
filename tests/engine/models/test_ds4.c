/* test_ds4.c - DeepSeek-V4 (engine/models/deepseek_v4/ds4_forward.h) over the
 * reference and CPU backends on the tiny HF model in
 * testdata/models/deepseek-v4 (written with transformers by
 * tools/gen_tiny_deepseek_v4.py): logits, per-layer hidden planes and the
 * routed experts against transformers'; bitwise determinism over thread
 * counts and over prefill / chunks / token by token; ablations that show
 * mHC's Sinkhorn, the sinks, hash routing, the compressed entries, the
 * indexer, the window, the clamp and the compress rope's YaRN are
 * exercised; the kernels on hand-made cases; the errors a wrong config or
 * checkpoint gives; the op-table entries (mHC, router, the attention with
 * its KV ring, compressor and indexer, hc_head) against the host leaves,
 * bitwise, including the fallback where an entry refuses a variant. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ds4.h"

#define MROOT LD_TESTDATA_DIR "/models/"
/* the fixture the helpers read: testdata/models/<name> */
static char MDIR[512] = MROOT "deepseek-v4";
static const char *use_model(const char *name)
{
    snprintf(MDIR, sizeof MDIR, MROOT "%s", name);
    return name;
}
#define MAX_T 64
#define MAX_L 8
#define MAX_K 8

/* ------------------------------------------------------------ helpers */


typedef struct seq {
    int32_t tokens[MAX_T];
    int T;
    char logits_file[64], hidden_file[64];
    int32_t experts[MAX_L][MAX_T][MAX_K];   /* transformers', ascending */
} seq;

static int load_seqs(int top_k, seq *seqs, int max)
{
    char path[600];
    snprintf(path, sizeof path, "%s/ref.json", MDIR);
    char *text = ld_test_slurp(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "sequences"))
    {
        if (n == max) break;
        seq *s = &seqs[n++];
        memset(s, 0xff, sizeof *s);
        s->T = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "tokens")) if (s->T < MAX_T) s->tokens[s->T++] = t->valueint;
        snprintf(s->logits_file, sizeof s->logits_file, "%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(e, "logits"), "file")->valuestring);
        snprintf(s->hidden_file, sizeof s->hidden_file, "%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(e, "hidden"), "file")->valuestring);
        const cJSON *lay;
        cJSON_ArrayForEach(lay, cJSON_GetObjectItem(e, "experts"))
        {
            int l = atoi(lay->string + strlen("layer.")), tt = 0;
            const cJSON *row;
            cJSON_ArrayForEach(row, lay)
            {
                int k = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, row) if (l < MAX_L && tt < MAX_T && k < top_k) s->experts[l][tt][k++] =
                    x->valueint;
                tt++;
            }
        }
    }
    cJSON_Delete(j);
    return n;
}

typedef struct backend_kind {
    const char *name;
    ld_status (*create)(int n_threads, ld_backend **out, ld_error *err);
} backend_kind;
static const backend_kind backends[] = {{"ref", ld_backend_ref_create}, {"cpu", ld_backend_cpu_create}};
#define N_BACKENDS ((int)(sizeof backends / sizeof backends[0]))

/* Run `toks` through a fresh session: `threads` threads, calls of `call`
 * tokens (0: all at once), chunks of at most `batch`, the session-level
 * variants of `kspec` (engine/backend/cpu_kernels.h; NULL: ref). */
static ld_status run_on_spec(const backend_kind *bk, const ld_ds4_model *m, int threads, int batch, int call,
                             const char *kspec, const int32_t *toks, int T, float *logits, float *hidden,
                             int32_t *experts, ld_error *err)
{
    ld_backend *be = NULL;
    ld_ds4_session *s = NULL;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    ld_status st = ld_cpu_kernels_parse(kspec, &k, err);
    if (st == LD_OK) st = bk->create(threads, &be, err);
    if (st == LD_OK) st = ld_ds4_session_create(m, be, MAX_T, batch, &s, err);
    if (st == LD_OK) ld_ds4_session_set_kernels(s, &k);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    size_t K = (size_t)m->cfg.top_k, L = (size_t)m->cfg.n_layers;
    for (int t0 = 0; st == LD_OK && t0 < T;) {
        int n = call ? (T - t0 < call ? T - t0 : call) : T;
        float *h = hidden ? malloc(P * (size_t)n * D * sizeof *h) : NULL;
        int32_t *ex = experts ? malloc(L * (size_t)n * K * sizeof *ex) : NULL;
        if ((hidden && !h) || (experts && !ex)) st = LD_ERR_NOMEM;
        if (st == LD_OK) st = ld_ds4_session_eval(s, toks + t0, n, logits ? logits + (size_t)t0 * V : NULL, h, ex, err);
        for (size_t p = 0; h && st == LD_OK && p < P; p++)
            memcpy(hidden + (p * (size_t)T + (size_t)t0) * D, h + p * (size_t)n * D, (size_t)n * D * sizeof *h);
        for (size_t l = 0; ex && st == LD_OK && l < L; l++)
            memcpy(experts + (l * (size_t)T + (size_t)t0) * K, ex + l * (size_t)n * K, (size_t)n * K * sizeof *ex);
        free(h);
        free(ex);
        t0 += n;
    }
    if (st == LD_OK && ld_ds4_session_pos(s) != T) st = LD_ERR_MISMATCH;
    ld_ds4_session_destroy(s);
    ld_backend_destroy(be);
    return st;
}

static ld_status run_on(const backend_kind *bk, const ld_ds4_model *m, int threads, int batch, int call,
                        const int32_t *toks, int T, float *logits, float *hidden, int32_t *experts, ld_error *err)
{
    return run_on_spec(bk, m, threads, batch, call, NULL, toks, T, logits, hidden, experts, err);
}

static int open_model(ld_ds4_model **m)
{
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_ds4_model_open(MDIR, m, &err);
    CHECK_MSG(st == LD_OK, "%s", err.msg);
    CHECK((*m)->cfg.n_layers <= MAX_L && (*m)->cfg.top_k <= MAX_K);
    return 0;
}

/* ------------------------------------------------------------ against transformers */

static int check_on(const backend_kind *bk, double tol)
{
    ld_ds4_model *m = NULL;
    if (open_model(&m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(m->cfg.top_k, seqs, 2) == 2);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    size_t K = (size_t)m->cfg.top_k, L = (size_t)m->cfg.n_layers;
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        seq *q = &seqs[i];
        size_t T = (size_t)q->T;
        float *ref_l = load_f32(MDIR, q->logits_file, T * V), *ref_h = load_f32(MDIR, q->hidden_file, P * T * D);
        float *l = malloc(T * V * sizeof *l), *h = malloc(P * T * D * sizeof *h);
        int32_t *ex = malloc(L * T * K * sizeof *ex);
        CHECK(ref_l && ref_h && l && h && ex);
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(run_on(bk, m, 2, MAX_T, 0, q->tokens, q->T, l, h, ex, &err) == LD_OK, "%s", err.msg);
        double mx, e = nerr(l, ref_l, T * V, &mx);
        fprintf(stderr, "  %s %s seq %c (%2zu tokens): logits nerr %.3g max|d| %.3g;", bk->name, MDIR + strlen(MROOT),
                'a' + i, T, e, mx);
        if (!(e < tol)) bad = 1;
        for (size_t p = 0; p < P; p++) {
            double eh = nerr(h + p * T * D, ref_h + p * T * D, T * D, NULL);
            fprintf(stderr, " h%zu %.2g", p, eh);
            if (!(eh < tol)) bad = 1;
        }
        int routed = 0, diff = 0;
        for (size_t ly = 0; ly < L; ly++)
            for (size_t t = 0; t < T; t++)
                for (size_t k = 0; k < K; k++) {
                    int32_t want = q->experts[ly][t][k], got = ex[(ly * T + t) * K + k];
                    routed += want >= 0;
                    diff += want != got;
                }
        fprintf(stderr, "; %d expert choices, %d differ\n", routed, diff);
        if (diff || !routed) bad = 1;
        free(ref_l);
        free(ref_h);
        free(l);
        free(h);
        free(ex);
    }
    ld_ds4_model_close(m);
    CHECK_MSG(!bad, "%s on %s: error above %g or other experts", MDIR, bk->name, tol);
    return 0;
}

static int test_deepseek_v4_ref(void) { return use_model("deepseek-v4"), check_on(&backends[0], 1e-5); }
static int test_deepseek_v4_cpu(void) { return use_model("deepseek-v4"), check_on(&backends[1], 1e-5); }
/* DeepSeek's released format: its names, FP4 experts, FP8 linears with
 * UE8M0 scales, BF16 compressors; against transformers on the
 * dequantized weights */
static int test_deepseek_v4_fp4(void)
{
    use_model("deepseek-v4-fp4");
    int r = check_on(&backends[0], 1e-5) || check_on(&backends[1], 1e-5);
    ld_ds4_model *m = NULL;
    if (!r && open_model(&m)) r = 1;
    if (!r) {
        CHECK(m->official && m->cfg.quant && m->cfg.expert_fp4 && m->n_owned > 0);
        CHECK(m->layers[0].experts[0].gate.st->dtype == LD_DT_I8 && m->layers[0].wq_a.st->dtype == LD_DT_F8_E4M3);
        /* without the quantization_config the FP8 tensor is an error naming it */
        static ld_ds4_config c;
        c = m->cfg;
        c.quant = 0;
        ld_ds4_model *b = NULL;
        ld_error err;
        ld_error_clear(&err);
        CHECK(ld_ds4_model_bind(&c, m->st, &b, &err) == LD_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "layers.0.attn.wq_a.weight") && strstr(err.msg, "F8_E4M3"), "%s", err.msg);
        ld_ds4_model_close(m);
    }
    use_model("deepseek-v4");
    return r;
}

/* ------------------------------------------------------------ ablations */

/* the fixture opened (*m), its sequences read (seqs [2]), and its tensors
 * bound again (*b) under the config `drop` changes; the config is static,
 * one ablated model at a time */
static int open_ablated(void (*drop)(ld_ds4_config *), ld_ds4_model **m, ld_ds4_model **b, seq *seqs)
{
    if (open_model(m)) return 1;
    CHECK(load_seqs((*m)->cfg.top_k, seqs, 2) == 2);
    static ld_ds4_config c;
    c = (*m)->cfg;
    drop(&c);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_ds4_model_bind(&c, (*m)->st, b, &err) == LD_OK, "%s", err.msg);
    return 0;
}

static int check_ablation(const char *what, void (*drop)(ld_ds4_config *))
{
    ld_ds4_model *m = NULL, *b = NULL;
    static seq seqs[2];
    if (open_ablated(drop, &m, &b, seqs)) return 1;
    ld_error err;
    ld_error_clear(&err);
    size_t n = (size_t)seqs[1].T * (size_t)b->cfg.vocab;
    float *ref = load_f32(MDIR, seqs[1].logits_file, n), *l = malloc(n * sizeof *l);
    CHECK(ref && l);
    CHECK_MSG(run_on(&backends[0], b, 1, MAX_T, 0, seqs[1].tokens, seqs[1].T, l, NULL, NULL, &err) == LD_OK, "%s",
              err.msg);
    double e = nerr(l, ref, n, NULL);
    fprintf(stderr, "  deepseek-v4 without %s: nerr %.3g\n", what, e);
    CHECK_MSG(e > 1e-3, "without %s: logits moved only %.3g", what, e);
    free(ref);
    free(l);
    ld_ds4_model_close(b); /* a bound model does not own the checkpoint */
    ld_ds4_model_close(m);
    return 0;
}

static void drop_sinkhorn(ld_ds4_config *c) { c->hc_sinkhorn_iters = 0; }
static void drop_sinks(ld_ds4_config *c) { c->use_sinks = 0; }
static void drop_hash(ld_ds4_config *c) { c->use_hash = 0; }
static void drop_compressed(ld_ds4_config *c) { c->use_compressed = 0; }
static void drop_indexer(ld_ds4_config *c) { c->index_topk = 1 << 20; }
static void drop_window(ld_ds4_config *c) { c->sliding_window = 1 << 20; }
static void drop_clamp(ld_ds4_config *c) { c->swiglu_limit = 1e30f; }
static void drop_bias(ld_ds4_config *c) { c->use_score_bias = 0; }
static void drop_yarn(ld_ds4_config *c) { c->rope_compress.yarn = 0; }
static void one_rope(ld_ds4_config *c) { c->rope_compress = c->rope_main; }

static int test_deepseek_v4_features_matter(void)
{
    if (check_ablation("Sinkhorn iterations (0)", drop_sinkhorn)) return 1;
    if (check_ablation("the attention sinks", drop_sinks)) return 1;
    if (check_ablation("hash routing (top-k instead)", drop_hash)) return 1;
    if (check_ablation("the compressed entries (CSA/HCA)", drop_compressed)) return 1;
    if (check_ablation("the indexer's top-k (every entry)", drop_indexer)) return 1;
    if (check_ablation("the sliding window (all positions)", drop_window)) return 1;
    if (check_ablation("the SwiGLU clamp", drop_clamp)) return 1;
    if (check_ablation("the correction bias", drop_bias)) return 1;
    if (check_ablation("the compress rope's YaRN", drop_yarn)) return 1;
    return check_ablation("the compress rope (main rope everywhere)", one_rope);
}

/* ------------------------------------------------------------ determinism */

static int check_deterministic_on(const backend_kind *bk)
{
    ld_ds4_model *m = NULL;
    if (open_model(&m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(m->cfg.top_k, seqs, 2) == 2);
    const seq *q = &seqs[1];
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q->T * (size_t)m->cfg.hidden;
    size_t ne = (size_t)m->cfg.n_layers * (size_t)q->T * (size_t)m->cfg.top_k;
    float *base = malloc(n * sizeof *base), *l = malloc(n * sizeof *l);
    float *hbase = malloc(nh * sizeof *hbase), *h = malloc(nh * sizeof *h);
    int32_t *ebase = malloc(ne * sizeof *ebase), *ex = malloc(ne * sizeof *ex);
    CHECK(base && l && hbase && h && ebase && ex);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(run_on(bk, m, 1, MAX_T, 0, q->tokens, q->T, base, hbase, ebase, &err) == LD_OK, "%s", err.msg);
    static const int shapes[][2] = {{64, 0}, {1, 0}, {3, 0}, {5, 0}, {64, 1}, {64, 4}, {2, 7}, {64, 11}};
    for (int threads = 1; threads <= 3; threads++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            memset(l, 0, n * sizeof *l);
            memset(h, 0, nh * sizeof *h);
            memset(ex, 0, ne * sizeof *ex);
            CHECK_MSG(run_on(bk, m, threads, shapes[k][0], shapes[k][1], q->tokens, q->T, l, h, ex, &err) == LD_OK,
                      "%s", err.msg);
            CHECK_MSG(memcmp(l, base, n * sizeof *l) == 0 && memcmp(h, hbase, nh * sizeof *h) == 0 &&
                          memcmp(ex, ebase, ne * sizeof *ex) == 0,
                      "%s: %d threads, batch %d, calls of %d differ from 1 thread in one prefill", bk->name, threads,
                      shapes[k][0], shapes[k][1]);
        }
    free(base);
    free(l);
    free(hbase);
    free(h);
    free(ebase);
    free(ex);
    ld_ds4_model_close(m);
    return 0;
}

static int test_deepseek_v4_deterministic(void)
{
    static const char *const names[] = {"deepseek-v4", "deepseek-v4-fp4"};
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < N_BACKENDS; b++) {
            use_model(names[i]);
            if (check_deterministic_on(&backends[b])) return 1;
        }
    use_model("deepseek-v4");
    return 0;
}

/* reset: a second run on the same session gives the same bits */
static int test_deepseek_v4_reset(void)
{
    ld_ds4_model *m = NULL;
    if (open_model(&m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(m->cfg.top_k, seqs, 2) == 2);
    const seq *q = &seqs[1];
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    CHECK(a && b);
    ld_error err;
    ld_error_clear(&err);
    ld_backend *be = NULL;
    ld_ds4_session *s = NULL;
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    CHECK_MSG(ld_ds4_session_create(m, be, q->T, 8, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_ds4_session_eval(s, seqs[0].tokens, 5, NULL, NULL, NULL, &err) == LD_OK);
    ld_ds4_session_reset(s);
    CHECK(ld_ds4_session_pos(s) == 0);
    CHECK(ld_ds4_session_eval(s, q->tokens, q->T, a, NULL, NULL, &err) == LD_OK);
    /* the session is full: one more token is an error */
    CHECK(ld_ds4_session_eval(s, q->tokens, 1, NULL, NULL, NULL, &err) == LD_ERR_LIMIT);
    ld_ds4_session_reset(s);
    CHECK(ld_ds4_session_eval(s, q->tokens, q->T, b, NULL, NULL, &err) == LD_OK);
    CHECK(memcmp(a, b, n * sizeof *a) == 0);
    int32_t bad = m->cfg.vocab;
    ld_ds4_session_reset(s);
    CHECK(ld_ds4_session_eval(s, &bad, 1, NULL, NULL, NULL, &err) == LD_ERR_USAGE);
    ld_ds4_session_destroy(s);
    ld_backend_destroy(be);
    free(a);
    free(b);
    ld_ds4_model_close(m);
    return 0;
}

/* ------------------------------------------------------------ kernels */

static int test_deepseek_v4_kernels(void)
{
    /* Sinkhorn: with 20 iterations comb is doubly stochastic to ~1e-5 */
    enum { N = 4, D = 3, HC = (2 + N) * N };
    float X[N * D], fn[HC * N * D], base[HC], scale[3] = {1.0f, 0.7f, 1.3f};
    for (int i = 0; i < N * D; i++) X[i] = sinf((float)i * 0.9f + 0.3f);
    for (int i = 0; i < HC * N * D; i++) fn[i] = 0.5f * cosf((float)i * 0.37f);
    for (int i = 0; i < HC; i++) base[i] = 0.3f * sinf((float)i * 1.7f);
    float post[N], comb[N * N], u[D], scratch[N * D + HC];
    ld_ref_ds4_hc_pre(X, N, D, fn, base, scale, 20, 1e-6f, 1e-6f, post, comb, u, scratch);
    for (int i = 0; i < N; i++) {
        double r = 0, c = 0;
        for (int j = 0; j < N; j++) {
            r += comb[i * N + j];
            c += comb[j * N + i];
        }
        CHECK_MSG(fabs(r - 1) < 1e-4 && fabs(c - 1) < 1e-5, "row %d sums %g, column %g", i, r, c);
        CHECK(post[i] > 0 && post[i] < 2);
    }
    /* iters 0 and 1: only the column normalisation (as transformers) */
    float comb0[N * N], comb1[N * N];
    ld_ref_ds4_hc_pre(X, N, D, fn, base, scale, 0, 1e-6f, 1e-6f, post, comb0, u, scratch);
    ld_ref_ds4_hc_pre(X, N, D, fn, base, scale, 1, 1e-6f, 1e-6f, post, comb1, u, scratch);
    CHECK(memcmp(comb0, comb1, sizeof comb0) == 0);
    /* hc_post uses comb transposed: X'_k = post_k f + sum_j C[j][k] X_j */
    float f[D] = {1, 2, 3}, out[N * D], eye[N * N] = {0}, p1[N] = {0, 0, 0, 0};
    eye[0 * N + 1] = 1; /* stream 0 goes to stream 1 */
    eye[1 * N + 0] = 1;
    eye[2 * N + 2] = 1;
    eye[3 * N + 3] = 1;
    p1[3] = 1;
    ld_ref_ds4_hc_post(out, X, f, p1, eye, N, D);
    CHECK(out[1 * D + 0] == X[0] && out[0 * D + 2] == X[1 * D + 2] && out[3 * D + 1] == X[3 * D + 1] + 2.0f);
    /* top-k: score descending, index ascending, written ascending */
    float sc[6] = {0.5f, 2.0f, 0.5f, -1.0f, 2.0f, 0.5f};
    int32_t idx[6];
    CHECK(ld_ref_ds4_topk(idx, sc, 6, 3) == 3 && idx[0] == 0 && idx[1] == 1 && idx[2] == 4);
    CHECK(ld_ref_ds4_topk(idx, sc, 6, 4) == 4 && idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && idx[3] == 4);
    CHECK(ld_ref_ds4_topk(idx, sc, 2, 5) == 2 && idx[0] == 0 && idx[1] == 1);
    float scn[4] = {NAN, -5.0f, NAN, 1.0f}; /* NaN last, then by index */
    CHECK(ld_ref_ds4_topk(idx, scn, 4, 3) == 3 && idx[0] == 0 && idx[1] == 1 && idx[2] == 3);
    CHECK(ld_ref_ds4_topk(idx, scn, 4, 0) == 0);
    /* router: hash rows are the experts (ascending), weights from s */
    float logits[4] = {-1.0f, 3.0f, 0.0f, 25.0f}, w[2];
    int32_t row[2] = {2, 0};
    ld_ref_ds4_route(idx, w, logits, NULL, row, 4, 2, 1.5f);
    double s0 = sqrt(log1p(exp(-1.0))), s2 = sqrt(log(2.0));
    CHECK(idx[0] == 0 && idx[1] == 2);
    CHECK(fabs(w[0] - 1.5 * s0 / (s0 + s2)) < 1e-6 && fabs(w[1] - 1.5 * s2 / (s0 + s2)) < 1e-6);
    /* top-k by s (+ bias); softplus is x above 20 */
    float bias[4] = {0, 0, 10.0f, 0};
    ld_ref_ds4_route(idx, w, logits, bias, NULL, 4, 2, 1.0f);
    CHECK(idx[0] == 2 && idx[1] == 3);
    CHECK(fabs(w[1] - 5.0 / (5.0 + s2)) < 1e-6);
    /* clamped SwiGLU */
    float g[3] = {20.0f, -3.0f, 0.5f}, up[3] = {-20.0f, 2.0f, 0.25f}, o[3];
    ld_ref_ds4_clamped_swiglu(o, g, up, 10.0f, 3);
    CHECK(fabs(o[0] - 10.0 / (1 + exp(-10.0)) * -10.0) < 1e-4);
    CHECK(fabs(o[2] - 0.5 / (1 + exp(-0.5)) * 0.25) < 1e-7);
    /* rope then inverse rope: the identity to rounding */
    float inv[2] = {1.0f, 0.1f}, v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, v0[8];
    memcpy(v0, v, sizeof v);
    ld_ref_ds4_rope(v, 2, 4, 4, inv, 1.0f, 7, 0);
    CHECK(v[0] != v0[0]);
    ld_ref_ds4_rope(v, 2, 4, 4, inv, 1.0f, 7, 1);
    for (int i = 0; i < 8; i++) CHECK(fabs(v[i] - v0[i]) < 1e-5);
    /* HCA pooling of a window of equal gates: the mean */
    float kv[4] = {1, 3, 5, 7}, gt[4] = {0}, ape[2] = {0}, pooled;
    ld_ref_ds4_compress(&pooled, kv, gt, ape, 2, 1, 1, 0, 1);
    CHECK(fabs(pooled - 6.0f) < 1e-6);
    /* CSA entry 0 pools only window 0's second halves */
    float kv2[4] = {100, 2, 100, 4}, gt2[4] = {0}, ape2[4] = {0};
    ld_ref_ds4_compress(&pooled, kv2, gt2, ape2, 2, 1, 2, 1, 0);
    CHECK(fabs(pooled - 3.0f) < 1e-6);
    /* FP4 / UE8M0 / dequantization */
    CHECK(ld_ref_ds4_e2m1_to_f32(7) == 6.0f && ld_ref_ds4_e2m1_to_f32(9) == -0.5f && ld_ref_ds4_e2m1_to_f32(3) == 1.5f);
    CHECK(ld_ref_ds4_e8m0_to_f32(127) == 1.0f && ld_ref_ds4_e8m0_to_f32(130) == 8.0f &&
          ld_ref_ds4_e8m0_to_f32(120) == 1.0f / 128 && isnan(ld_ref_ds4_e8m0_to_f32(255)));
    /* 2 x 4 FP4 (bytes: low nibble first), scale grid [2][2] */
    uint8_t q4[4] = {0x71, 0x9A, 0x20, 0x0F};
    float s4[4] = {1.0f, 2.0f, 0.5f, 4.0f}, d4[8];
    ld_ref_ds4_dequant(d4, q4, 1, s4, 2, 4, 2, 2, 0, 2);
    float want4[8] = {0.5f, 6.0f, -1.0f * 2, -0.5f * 2, 0.0f, 1.0f * 0.5f, -6.0f * 4, 0.0f};
    CHECK(memcmp(d4, want4, sizeof d4) == 0);
    /* FP8 E4M3: 0x38 = 1.0, 0xC0 = -2.0; one block */
    uint8_t q8[2] = {0x38, 0xC0};
    float s8 = 0.25f, d8[2];
    ld_ref_ds4_dequant(d8, q8, 0, &s8, 1, 2, 1, 1, 0, 1);
    CHECK(d8[0] == 0.25f && d8[1] == -0.5f);
    /* attention with a sink: a sink of -inf is no sink */
    float q[2] = {1, 0}, k0[2] = {1, 0}, k1[2] = {0, 1}, att[2], att2[2], scs[2], sink = -INFINITY, sink0 = 0.0f;
    const float *keys[2] = {k0, k1};
    ld_ref_ds4_attention(att, q, 1, 2, keys, 2, &sink, 1.0f, scs);
    ld_ref_ds4_attention(att2, q, 1, 2, keys, 2, NULL, 1.0f, scs);
    CHECK(memcmp(att, att2, sizeof att) == 0);
    ld_ref_ds4_attention(att, q, 1, 2, keys, 2, &sink0, 1.0f, scs);
    double e1 = exp(1.0);
    CHECK(fabs(att[0] - e1 / (e1 + 2)) < 1e-6 && fabs(att[1] - 1 / (e1 + 2)) < 1e-6);
    return 0;
}

/* ------------------------------------------------------------ errors */

static char *config_text(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", MDIR);
    return ld_test_slurp(path);
}

/* the config with `key` set to `value` (JSON text; NULL: removed) */
static ld_status parse_with(const char *key, const char *value, ld_ds4_config *c, ld_error *err)
{
    char *text = config_text();
    cJSON *j = cJSON_Parse(text);
    free(text);
    cJSON_DeleteItemFromObjectCaseSensitive(j, key);
    if (value) cJSON_AddItemToObject(j, key, cJSON_Parse(value));
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    ld_error_clear(err);
    ld_status st = ld_ds4_config_parse(out, strlen(out), c, err);
    free(out);
    return st;
}

static int expect_config_error(const char *key, const char *value, ld_status code, const char *needle)
{
    static ld_ds4_config c;
    ld_error err;
    ld_status st = parse_with(key, value, &c, &err);
    CHECK_MSG(st == code && strstr(err.msg, needle), "%s = %s: status %d, '%s' (want %d naming '%s')", key,
              value ? value : "(removed)", (int)st, err.msg, (int)code, needle);
    return 0;
}

static int test_deepseek_v4_config_errors(void)
{
    static ld_ds4_config c;
    ld_error err;
    char *text = config_text();
    CHECK(text);
    CHECK(ld_ds4_config_detect(text, strlen(text)) == 1);
    CHECK(ld_ds4_config_parse(text, strlen(text), &c, &err) == LD_OK);
    free(text);
    CHECK(c.n_layers == 4 && c.hc_mult == 4 && c.hc_sinkhorn_iters == 20 && c.rope_dim == 8);
    CHECK(c.layer_type[0] == LD_DS4_SLIDING && c.layer_type[1] == LD_DS4_CSA && c.layer_type[2] == LD_DS4_HCA);
    CHECK(c.mlp_type[0] == LD_DS4_HASH && c.mlp_type[3] == LD_DS4_MOE);
    CHECK(c.ratio_csa == 2 && c.ratio_hca == 4 && c.rope_compress.yarn && c.rope_compress.attention_factor == 1.0);
    if (expect_config_error("layer_types",
                            "[\"sliding_attention\",\"full_attention\",\"heavily_compressed_attention\","
                            "\"compressed_sparse_attention\"]",
                            LD_ERR_UNSUPPORTED, "layer_types[1]"))
        return 1;
    if (expect_config_error("layer_types", "[\"sliding_attention\"]", LD_ERR_SYNTAX, "layer_types")) return 1;
    if (expect_config_error("mlp_layer_types", "[\"hash_moe\",\"dense\",\"moe\",\"moe\"]", LD_ERR_UNSUPPORTED,
                            "mlp_layer_types[1]"))
        return 1;
    if (expect_config_error("hidden_size", NULL, LD_ERR_SYNTAX, "hidden_size")) return 1;
    if (expect_config_error("hc_mult", "0", LD_ERR_SYNTAX, "hc_mult")) return 1;
    if (expect_config_error("num_key_value_heads", "4", LD_ERR_UNSUPPORTED, "num_key_value_heads")) return 1;
    if (expect_config_error("scoring_func", "\"softmax\"", LD_ERR_UNSUPPORTED, "scoring_func")) return 1;
    if (expect_config_error("quantization_config", "{\"quant_method\": \"awq\"}", LD_ERR_UNSUPPORTED,
                            "quantization_config.quant_method"))
        return 1;
    if (expect_config_error("quantization_config", "{\"quant_method\": \"fp8\", \"expert_dtype\": \"nvfp4\"}",
                            LD_ERR_UNSUPPORTED, "quantization_config.expert_dtype"))
        return 1;
    if (expect_config_error("expert_dtype", "\"fp4\"", LD_ERR_UNSUPPORTED, "expert_dtype")) return 1;
    if (expect_config_error("o_groups", "3", LD_ERR_SYNTAX, "o_groups")) return 1;
    if (expect_config_error("qk_rope_head_dim", "4", LD_ERR_SYNTAX, "qk_rope_head_dim")) return 1;
    if (expect_config_error("compress_rates", "{\"sliding_attention\": 2}", LD_ERR_UNSUPPORTED, "compress_rates"))
        return 1;
    if (expect_config_error("rope_parameters", "{\"main\": {\"rope_type\": \"llama3\"}, \"compress\": {}}",
                            LD_ERR_UNSUPPORTED, "rope_parameters.main.rope_type"))
        return 1;
    if (expect_config_error("rope_parameters",
                            "{\"main\": {\"rope_type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": "
                            "32, \"mscale\": 1e40, \"mscale_all_dim\": 1}, \"compress\": {}}",
                            LD_ERR_SYNTAX, "'rope_parameters.main.mscale' = 1e+40"))
        return 1;
    if (expect_config_error("n_shared_experts", "2", LD_ERR_UNSUPPORTED, "n_shared_experts")) return 1;
    if (expect_config_error("architectures", "[\"DeepseekV3ForCausalLM\"]", LD_ERR_UNSUPPORTED, "DeepSeek-V4"))
        return 1;
    /* legacy fields: compress_ratios and num_hash_layers */
    text = config_text();
    cJSON *j = cJSON_Parse(text);
    free(text);
    cJSON_DeleteItemFromObjectCaseSensitive(j, "layer_types");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "mlp_layer_types");
    cJSON_AddItemToObject(j, "compress_ratios", cJSON_Parse("[0, 4, 128, 4]"));
    cJSON_AddItemToObject(j, "num_hash_layers", cJSON_CreateNumber(1));
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    CHECK_MSG(ld_ds4_config_parse(s, strlen(s), &c, &err) == LD_OK, "%s", err.msg);
    free(s);
    CHECK(c.layer_type[1] == LD_DS4_CSA && c.layer_type[2] == LD_DS4_HCA && c.mlp_type[0] == LD_DS4_HASH &&
          c.mlp_type[1] == LD_DS4_MOE);
    return 0;
}

/* weights: a missing tensor, a wrong shape, tid2eid out of range or repeated */
static int test_deepseek_v4_weight_errors(void)
{
    ld_ds4_model *m = NULL, *b = NULL;
    if (open_model(&m)) return 1;
    static ld_ds4_config c;
    ld_error err;
    c = m->cfg;
    c.layer_type[0] = LD_DS4_HCA; /* layer 0 has no compressor */
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "model.layers.0.attn.compressor.wkv.weight"), "%s", err.msg);
    c = m->cfg;
    c.o_lora_rank = 8;
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "model.layers.0.attn.wo_a.weight"), "%s", err.msg);
    c = m->cfg;
    c.mlp_type[2] = LD_DS4_HASH; /* layer 2 has no tid2eid */
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "model.layers.2.ffn.gate.tid2eid"), "%s", err.msg);
    /* tid2eid with an expert id >= n_routed_experts: the same checkpoint
     * with fewer experts */
    c = m->cfg;
    c.n_routed = 3;
    ld_error_clear(&err);
    ld_status st = ld_ds4_model_bind(&c, m->st, &b, &err);
    CHECK_MSG(st == LD_ERR_MISMATCH || st == LD_ERR_SYNTAX, "%d %s", (int)st, err.msg);
    /* patch the file's bytes: one tid2eid entry = 99 */
    const ld_st_tensor *t = ld_st_find(m->st, "model.layers.1.ffn.gate.tid2eid");
    CHECK(t && t->dtype == LD_DT_I64);
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", MDIR);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len);
    CHECK(buf && fread(buf, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    ld_safetensors *st0 = NULL, *st1 = NULL;
    CHECK(ld_st_parse(buf, (size_t)len, &st0, &err) == LD_OK);
    const ld_st_tensor *t0 = ld_st_find(st0, "model.layers.1.ffn.gate.tid2eid");
    CHECK(t0);
    size_t off = (size_t)(t0->data - buf) + 8 * 5; /* row 2, column 1 */
    ld_st_close(st0);
    int64_t v = 99;
    memcpy(buf + off, &v, 8);
    CHECK(ld_st_parse(buf, (size_t)len, &st1, &err) == LD_OK);
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&m->cfg, st1, &b, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "model.layers.1.ffn.gate.tid2eid") && strstr(err.msg, "[2][1]"), "%s", err.msg);
    ld_st_close(st1);
    /* a row naming one expert twice: column 1 = column 0 (the MoE gathers
     * an expert's tokens once; a repeat would overflow its rows) */
    memcpy(&v, buf + off - 8, 8);
    memcpy(buf + off, &v, 8);
    CHECK(ld_st_parse(buf, (size_t)len, &st1, &err) == LD_OK);
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&m->cfg, st1, &b, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "model.layers.1.ffn.gate.tid2eid") && strstr(err.msg, "row 2") &&
                  strstr(err.msg, "twice"),
              "%s", err.msg);
    ld_st_close(st1);
    free(buf);
    ld_ds4_model_close(m);
    return 0;
}

/* ------------------------------------------------------------ op table vs host leaves */

/* the session's host path: fixtures.h */
static const backend_kind host_backends[] = {{"ref-host", ld_test_ref_host_create},
                                              {"cpu-host", ld_test_cpu_host_create}};

/* A backend with the fp32 mixing only, as CUDA's: its hc_pre refuses the
 * bf16 variants (LD_ERR_UNSUPPORTED), and the session falls back to the
 * host leaves */
static ld_backend_ops fp32_mix_ops;
static ld_status (*inner_hc_pre)(ld_backend *, ld_buf *, ld_buf *, ld_buf *, const ld_buf *, const ld_buf *,
                                 const float *, const float *, int, int, int, int, float, float, int, ld_error *);

static ld_status fp32_hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                             const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                             float norm_eps, float hc_eps, int variant, ld_error *err)
{
    if (variant != LD_DS4_MHC_F32) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "test: the fp32 mixing only");
    return inner_hc_pre(be, post, comb, collapsed, X, fn, base, scale, T, N, D, iters, norm_eps, hc_eps, variant,
                        err);
}

static ld_status fp32_mix(ld_status st, ld_backend *be)
{
    if (st != LD_OK) return st;
    fp32_mix_ops = *be->ops;
    fp32_mix_ops.name = "fp32-mix";
    inner_hc_pre = be->ops->hc_pre;
    fp32_mix_ops.hc_pre = fp32_hc_pre;
    be->ops = &fp32_mix_ops;
    return LD_OK;
}

static ld_status ref_fp32_create(int n_threads, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_ref_create(n_threads, out, err);
    return fp32_mix(st, *out);
}

static ld_status cpu_fp32_create(int n_threads, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_cpu_create(n_threads, out, err);
    return fp32_mix(st, *out);
}

static const backend_kind fp32_backends[] = {{"ref-fp32-mix", ref_fp32_create}, {"cpu-fp32-mix", cpu_fp32_create}};

/* A backend whose V4 attention entries take the fp32 indexer operands only,
 * as CUDA's (ds4_compress and ds4_index refuse indexer=bf16|fp8 with
 * LD_ERR_UNSUPPORTED) and whose ds4_hc_head refuses every call: the
 * session keeps the attention state on the host for those variants (moving
 * it over when the variant changes between evals) and collapses the
 * streams with the host leaf */
static ld_backend_ops f32_index_ops[2];
static const ld_backend_ops *f32_index_inner[2];

static ld_status f32_compress(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate, int T,
                              int pos0, float eps, const ld_ds4_rot *rope, int variant, ld_error *err)
{
    if (variant != LD_DS4_INDEX_F32) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "test: fp32 indexer operands only");
    int i = be->ops == &f32_index_ops[1];
    return f32_index_inner[i]->ds4_compress(be, c, kv, gate, T, pos0, eps, rope, variant, err);
}

static ld_status f32_index(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0,
                           int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope, int variant, ld_error *err)
{
    if (variant != LD_DS4_INDEX_F32) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "test: fp32 indexer operands only");
    int i = be->ops == &f32_index_ops[1];
    return f32_index_inner[i]->ds4_index(be, sel, q, w, keys, T, pos0, n_heads, dim, ratio, k, rope, variant, err);
}

static ld_status no_hc_head(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                            float scale, int T, int N, int D, float norm_eps, float hc_eps, ld_error *err)
{
    (void)be, (void)out, (void)X, (void)fn, (void)base, (void)scale, (void)T, (void)N, (void)D, (void)norm_eps;
    (void)hc_eps;
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "test: no hc_head");
}

static ld_status f32_index_wrap(ld_status st, ld_backend *be, int i)
{
    if (st != LD_OK) return st;
    f32_index_inner[i] = be->ops;
    f32_index_ops[i] = *be->ops;
    f32_index_ops[i].name = i ? "cpu-f32-index" : "ref-f32-index";
    f32_index_ops[i].ds4_compress = f32_compress;
    f32_index_ops[i].ds4_index = f32_index;
    f32_index_ops[i].ds4_hc_head = no_hc_head;
    be->ops = &f32_index_ops[i];
    return LD_OK;
}

static ld_status ref_f32_index_create(int n_threads, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_ref_create(n_threads, out, err);
    return f32_index_wrap(st, *out, 0);
}

static ld_status cpu_f32_index_create(int n_threads, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_cpu_create(n_threads, out, err);
    return f32_index_wrap(st, *out, 1);
}

static const backend_kind f32_index_backends[] = {{"ref-f32-index", ref_f32_index_create},
                                                  {"cpu-f32-index", cpu_f32_index_create}};

/* the op-table path on backend b with 1 and 3 threads, in one prefill,
 * token by token and in chunks, gives the bits of the host path (1
 * thread, one prefill): logits, hidden planes, experts and the indexer's
 * picks */
static int check_op_table_on(int b, const backend_kind *under, const ld_ds4_model *m, const char *name,
                             const seq *q, const char *kspec)
{
    size_t T = (size_t)q->T, L = (size_t)m->cfg.n_layers;
    size_t n = T * (size_t)m->cfg.vocab, nh = (L + 2) * T * (size_t)m->cfg.hidden;
    size_t ne = L * T * (size_t)m->cfg.top_k;
    float *base = calloc(n + nh, sizeof *base), *l = calloc(n + nh, sizeof *l);
    int32_t *ebase = calloc(ne, sizeof *ebase), *ex = calloc(ne, sizeof *ex);
    CHECK(base && l && ebase && ex);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(run_on_spec(&host_backends[b], m, 1, MAX_T, 0, kspec, q->tokens, q->T, base, base + n, ebase, &err) ==
                  LD_OK,
              "%s", err.msg);
    static const int shapes[][3] = {{1, 64, 0}, {3, 64, 0}, {1, 64, 1}, {3, 64, 1}, {3, 5, 0}, {1, 2, 7}};
    int bad = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0] && !bad; k++) {
        memset(l, 0, (n + nh) * sizeof *l);
        memset(ex, 0, ne * sizeof *ex);
        CHECK_MSG(run_on_spec(under, m, shapes[k][0], shapes[k][1], shapes[k][2], kspec, q->tokens, q->T, l,
                              l + n, ex, &err) == LD_OK,
                  "%s", err.msg);
        bad = memcmp(l, base, (n + nh) * sizeof *l) || memcmp(ex, ebase, ne * sizeof *ex);
        CHECK_MSG(!bad, "%s on %s, '%s': %d threads, batch %d, calls of %d differ from the host path", name,
                  under->name, kspec ? kspec : "", shapes[k][0], shapes[k][1], shapes[k][2]);
    }
    free(base);
    free(l);
    free(ebase);
    free(ex);
    return 0;
}

/* the picks of the indexer: the op-table path's equal the host path's */
static int check_op_table_picks(int b, const ld_ds4_model *m, const seq *q, const char *kspec)
{
    size_t KI = (size_t)m->cfg.index_topk, L = (size_t)m->cfg.n_layers, T = (size_t)q->T;
    const backend_kind *bks[2] = {&host_backends[b], &backends[b]};
    int32_t *pk[2];
    for (int i = 0; i < 2; i++) {
        ld_backend *be = NULL;
        ld_ds4_session *s = NULL;
        ld_error err;
        ld_error_clear(&err);
        ld_cpu_kernels k = ld_cpu_kernels_default(0);
        pk[i] = calloc(L * T * KI + 1, sizeof *pk[i]);
        CHECK(pk[i] && ld_cpu_kernels_parse(kspec, &k, &err) == LD_OK);
        CHECK_MSG(bks[i]->create(i ? 3 : 1, &be, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(ld_ds4_session_create(m, be, MAX_T, MAX_T, &s, &err) == LD_OK, "%s", err.msg);
        ld_ds4_session_set_kernels(s, &k);
        CHECK_MSG(ld_ds4_session_eval_picks(s, q->tokens, q->T, NULL, NULL, NULL, pk[i], &err) == LD_OK, "%s",
                  err.msg);
        ld_ds4_session_destroy(s);
        ld_backend_destroy(be);
    }
    CHECK(memcmp(pk[0], pk[1], L * T * KI * sizeof *pk[0]) == 0);
    free(pk[0]);
    free(pk[1]);
    return 0;
}

/* logits and hidden planes of `toks` in two evals: the first half under
 * kernel spec a, the rest under b (ld_ds4_session_set_kernels between),
 * into out: each eval's logits then its planes */
static ld_status run_switch(const backend_kind *bk, const ld_ds4_model *m, int threads, int batch, const char *a,
                            const char *b, const int32_t *toks, int T, float *out, ld_error *err)
{
    ld_backend *be = NULL;
    ld_ds4_session *s = NULL;
    ld_status st = bk->create(threads, &be, err);
    if (st == LD_OK) st = ld_ds4_session_create(m, be, MAX_T, batch, &s, err);
    size_t V = (size_t)m->cfg.vocab, PD = ((size_t)m->cfg.n_layers + 2) * (size_t)m->cfg.hidden;
    for (int i = 0, t0 = 0; i < 2 && st == LD_OK; i++) {
        int n = i ? T - t0 : T / 2;
        ld_cpu_kernels k = ld_cpu_kernels_default(0);
        st = ld_cpu_kernels_parse(i ? b : a, &k, err);
        if (st != LD_OK) break;
        ld_ds4_session_set_kernels(s, &k);
        float *o = out + (size_t)t0 * (V + PD);
        st = ld_ds4_session_eval(s, toks + t0, n, o, o + (size_t)n * V, NULL, err);
        t0 += n;
    }
    ld_ds4_session_destroy(s);
    ld_backend_destroy(be);
    return st;
}

/* a variant change between evals (the attention state moving between the
 * host and the backend's buffers where the entries refuse the variant)
 * gives the host path's bits */
static int check_switch(int b, const ld_ds4_model *m, const char *name, const seq *q)
{
    static const char *pairs[][2] = {{"indexer=bf16", NULL}, {NULL, "indexer=fp8,rope=bf16"}, {"rope=bf16", NULL}};
    size_t n = (size_t)q->T * ((size_t)m->cfg.vocab + ((size_t)m->cfg.n_layers + 2) * (size_t)m->cfg.hidden);
    float *want = calloc(n, sizeof *want), *got = calloc(n, sizeof *got);
    CHECK(want && got);
    const backend_kind *unders[2] = {&backends[b], &f32_index_backends[b]};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(run_switch(&host_backends[b], m, 1, MAX_T, pairs[i][0], pairs[i][1], q->tokens, q->T, want, &err) ==
                      LD_OK,
                  "%s", err.msg);
        for (int u = 0; u < 2; u++) {
            memset(got, 0, n * sizeof *got);
            CHECK_MSG(run_switch(unders[u], m, 3, 5, pairs[i][0], pairs[i][1], q->tokens, q->T, got, &err) == LD_OK,
                      "%s", err.msg);
            CHECK_MSG(memcmp(want, got, n * sizeof *got) == 0, "%s on %s: '%s' then '%s' differ from the host path",
                      name, unders[u]->name, pairs[i][0] ? pairs[i][0] : "", pairs[i][1] ? pairs[i][1] : "");
        }
    }
    free(want);
    free(got);
    return 0;
}

static int test_deepseek_v4_op_table_matches_host(void)
{
    for (int b = 0; b < N_BACKENDS; b++) { /* the path under test is taken */
        ld_backend *be = NULL;
        ld_error err;
        CHECK(backends[b].create(1, &be, &err) == LD_OK);
        const ld_backend_ops *o = be->ops;
        int has = o->hc_pre && o->hc_post && o->ds4_route && o->ds4_qkv && o->ds4_compress && o->ds4_index &&
                  o->ds4_attention && o->copy_cols && o->ds4_hc_head;
        ld_backend_destroy(be);
        CHECK_MSG(has, "%s lacks a V4 op", backends[b].name);
    }
    const char *names[] = {"deepseek-v4", "deepseek-v4-fp4"};
    const char *specs[] = {NULL, "mhc=bf16", "mhc=sinkhorn-bf16,combine=fused,indexer=fp8,rope=bf16",
                           "indexer=bf16", "rope=bf16"};
    int r = 0;
    for (int i = 0; i < 2 && !r; i++) {
        use_model(names[i]);
        ld_ds4_model *m = NULL;
        if (open_model(&m)) return 1;
        static seq seqs[2];
        CHECK(load_seqs(m->cfg.top_k, seqs, 2) == 2);
        for (int b = 0; b < N_BACKENDS && !r; b++)
            for (size_t k = 0; k < sizeof specs / sizeof specs[0] && !r; k++)
                r = check_op_table_on(b, &backends[b], m, names[i], &seqs[1], specs[k]) ||
                    check_op_table_on(b, &fp32_backends[b], m, names[i], &seqs[1], specs[k]) ||
                    check_op_table_on(b, &f32_index_backends[b], m, names[i], &seqs[1], specs[k]) ||
                    check_op_table_picks(b, m, &seqs[1], specs[k]);
        for (int b = 0; b < N_BACKENDS && !r; b++) r = check_switch(b, m, names[i], &seqs[1]);
        ld_ds4_model_close(m);
    }
    use_model("deepseek-v4");
    return r;
}

/* the attention entries' other branches (no sinks, no entries, more picks
 * than entries, a window past the sequence, one rope): the host path's
 * bits on both backends */
static int check_entries_ablated(const char *what, void (*drop)(ld_ds4_config *))
{
    ld_ds4_model *m = NULL, *b = NULL;
    static seq seqs[2];
    if (open_ablated(drop, &m, &b, seqs)) return 1;
    int r = 0;
    for (int k = 0; k < N_BACKENDS && !r; k++) r = check_op_table_on(k, &backends[k], b, what, &seqs[1], NULL);
    ld_ds4_model_close(b);
    ld_ds4_model_close(m);
    return r;
}

static int test_deepseek_v4_entries_ablated(void)
{
    use_model("deepseek-v4");
    return check_entries_ablated("no sinks", drop_sinks) || check_entries_ablated("no entries", drop_compressed) ||
           check_entries_ablated("every entry", drop_indexer) || check_entries_ablated("no window", drop_window) ||
           check_entries_ablated("one rope", one_rope);
}

/* the attention entries' argument checks (engine/backend/ds4_op_args.c), the same
 * on both backends: LD_ERR_USAGE naming the problem, and a T = 0 probe
 * that writes nothing */
static int check_entry_args(const backend_kind *bk)
{
    ld_backend *be = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(bk->create(1, &be, &err) == LD_OK, "%s", err.msg);
    const ld_backend_ops *o = be->ops;
    ld_buf *q = NULL, *kvc = NULL, *kv = NULL, *out = NULL, *ent = NULL, *fr = NULL;
    CHECK(o->buf_alloc(be, 2 * 2 * 8, &q, &err) == LD_OK && o->buf_alloc(be, 4 * 8, &kvc, &err) == LD_OK &&
          o->buf_alloc(be, 2 * 8, &kv, &err) == LD_OK && o->buf_alloc(be, 2 * 2 * 8, &out, &err) == LD_OK &&
          o->buf_alloc(be, 2 * 8, &ent, &err) == LD_OK && o->buf_alloc(be, 2, &fr, &err) == LD_OK);
    float ones[2] = {1.0f, 0.5f}, probe[4 * 8];
    CHECK(o->buf_write(be, fr, 0, ones, 2, &err) == LD_OK);
    ld_ds4_rot r = {.inv_freq = fr, .attn_factor = 1.0f, .dim = 4, .bf16 = 0}, odd = r;
    odd.dim = 3;
    /* T = 0 writes nothing; bad shapes and picks are refused */
    for (int i = 0; i < 4 * 8; i++) probe[i] = -1.0f;
    CHECK(o->buf_write(be, kvc, 0, probe, 4 * 8, &err) == LD_OK);
    CHECK(o->ds4_qkv(be, q, kvc, kv, 0, 3, 2, 8, 4, 1e-6f, &r, &err) == LD_OK);
    CHECK(o->buf_read(be, kvc, 0, probe, 4 * 8, &err) == LD_OK);
    for (int i = 0; i < 4 * 8; i++) CHECK(probe[i] == -1.0f);
    CHECK(o->ds4_qkv(be, q, kvc, kv, 2, 0, 2, 8, 1, 1e-6f, &r, &err) == LD_ERR_USAGE);
    CHECK(o->ds4_qkv(be, q, kvc, kv, 2, 0, 2, 8, 4, 1e-6f, &odd, &err) == LD_ERR_USAGE);
    CHECK(o->ds4_qkv(be, q, kvc, kv, 3, 0, 2, 8, 4, 1e-6f, &r, &err) == LD_ERR_USAGE); /* q holds 2 rows */
    int32_t sel[2 * 2] = {0, -1, 2, -1};
    CHECK(o->ds4_attention(be, out, q, kvc, ent, sel, 2, NULL, 2, 2, 2, 8, 4, 4, 2, 1.0f, &r, &err) ==
          LD_ERR_USAGE); /* token 1 at position 3 sees 2 entries: pick 2 is none */
    CHECK_MSG(strstr(err.msg, "picks entry 2 of 2"), "%s", err.msg);
    sel[2] = 1;
    CHECK(o->ds4_attention(be, out, q, kvc, ent, sel, 2, NULL, 2, 2, 2, 8, 4, 4, 2, 1.0f, &r, &err) == LD_OK);
    CHECK(o->ds4_attention(be, out, q, kvc, ent, sel, 2, NULL, 2, 2, 2, 8, 2, 4, 2, 1.0f, &r, &err) ==
          LD_ERR_USAGE); /* a ring of 2 rows for a window of 4 */
    CHECK(o->ds4_attention(be, q, q, kvc, NULL, NULL, 2, NULL, 2, 2, 2, 8, 4, 4, 2, 1.0f, &r, &err) ==
          LD_ERR_USAGE); /* out aliases q */
    ld_ds4_comp_bufs c = {.kv = kvc, .gate = kvc, .entries = ent, .ape = kv, .norm = kv, .width = 8, .dim = 8,
                          .ratio = 2};
    CHECK(o->ds4_compress(be, &c, kv, kv, 0, 0, 1e-6f, &r, 7, &err) == LD_ERR_USAGE);
    c.width = 12;
    CHECK(o->ds4_compress(be, &c, kv, kv, 0, 0, 1e-6f, &r, LD_DS4_INDEX_F32, &err) == LD_ERR_USAGE);
    CHECK(o->copy_cols(be, out, 8, 4, q, 8, 0, 2, 5, &err) == LD_ERR_USAGE);
    CHECK(o->copy_cols(be, out, 8, 4, q, 16, 0, 2, 4, &err) == LD_OK);
    ld_buf *bs[] = {q, kvc, kv, out, ent, fr};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) o->buf_free(be, bs[i]);
    ld_backend_destroy(be);
    return 0;
}

static int test_deepseek_v4_entry_args(void)
{
    return check_entry_args(&backends[0]) || check_entry_args(&backends[1]);
}

static const ld_test_case cases[] = {
    LD_CASE(test_deepseek_v4_kernels),
    LD_CASE(test_deepseek_v4_config_errors),
    LD_CASE(test_deepseek_v4_weight_errors),
    LD_CASE(test_deepseek_v4_ref),
    LD_CASE(test_deepseek_v4_cpu),
    LD_CASE(test_deepseek_v4_fp4),
    LD_CASE(test_deepseek_v4_reset),
    LD_CASE(test_deepseek_v4_features_matter),
    LD_CASE(test_deepseek_v4_deterministic),
    LD_CASE(test_deepseek_v4_op_table_matches_host),
    LD_CASE(test_deepseek_v4_entries_ablated),
    LD_CASE(test_deepseek_v4_entry_args),
};

LD_TEST_MAIN(cases)
