/* test_ds.c - DeepSeek-V3 and V3.2 (engine/models/deepseek_v3/) on tiny random
 * models: logits and hidden states against transformers, the MLA forms and
 * the kernel variants (ablations), bitwise determinism over chunkings and
 * threads, the op table's DeepSeek entries against the host leaves, the
 * router kernel against transformers' routing.  The config and the errors:
 * test_ds_config.c. */
#include "tests/support/ds_check.h"

/* ------------------------------------------------------------ against transformers */

static int check_model_on(const backend_kind *bk, const char *name, ld_ds_attn attn, double tol)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_ds_model *m = NULL;
    if (open_model(name, &m)) return 1;
    CHECK(m->cfg.n_layers <= MAX_L && m->cfg.top_k <= MAX_K);
    static seq seqs[2];
    CHECK(load_seqs(dir, m->cfg.top_k, seqs, 2) == 2);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    size_t K = (size_t)m->cfg.top_k, L = (size_t)m->cfg.n_layers;
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        seq *q = &seqs[i];
        size_t T = (size_t)q->T;
        float *ref_l = load_f32(dir, q->logits_file, T * V), *ref_h = load_f32(dir, q->hidden_file, P * T * D);
        float *l = malloc(T * V * sizeof *l), *h = malloc(P * T * D * sizeof *h);
        int32_t *ex = malloc(L * T * K * sizeof *ex);
        size_t KI = m->cfg.v32 ? (size_t)m->cfg.index_topk : 1;
        int32_t *sl = malloc(L * T * KI * sizeof *sl);
        CHECK(ref_l && ref_h && l && h && ex && sl);
        CHECK(!m->cfg.v32 || (q->has_sel && KI <= MAX_KI));
        ld_error err;
        ld_error_clear(&err);
        ld_status st = run_on_sel(bk, m, 2, MAX_T, 0, attn, q->tokens, q->T, l, h, ex, sl, &err);
        CHECK_MSG(st == LD_OK, "%s", err.msg);
        double mx, e = nerr(l, ref_l, T * V, &mx);
        fprintf(stderr, "  %s %s %-16s seq %c (%2zu tokens): logits nerr %.3g max|d| %.3g;", bk->name,
                attn == LD_DS_ATTN_NAIVE ? "naive" : "absorbed", name, 'a' + i, T, e, mx);
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
        fprintf(stderr, "; %d expert choices, %d differ", routed, diff);
        if (diff || !routed) bad = 1;
        if (m->cfg.v32) {
            int picks = 0, sdiff = 0, sparse = 0;
            for (size_t ly = 0; ly < L; ly++)
                for (size_t t = 0; t < T; t++) {
                    sparse += t + 1 > KI;
                    for (size_t k = 0; k < KI; k++) {
                        int32_t want = q->selected[ly][t][k], got = sl[(ly * T + t) * KI + k];
                        picks += want >= 0;
                        sdiff += want != got;
                    }
                }
            fprintf(stderr, "; %d indexer picks (%d sparse rows), %d differ", picks, sparse, sdiff);
            if (sdiff || !sparse) bad = 1;
        }
        fprintf(stderr, "\n");
        free(sl);
        free(ref_l);
        free(ref_h);
        free(l);
        free(h);
        free(ex);
    }
    ld_ds_model_close(m);
    CHECK_MSG(!bad, "%s on %s: error above %g or other experts", name, bk->name, tol);
    return 0;
}

static int check_model(const char *name, ld_ds_attn attn)
{
    for (int b = 0; b < N_BACKENDS; b++)
        if (check_model_on(&backends[b], name, attn, 1e-5)) return 1;
    return 0;
}

static int test_deepseek_v3(void) { return check_model("deepseek-v3", LD_DS_ATTN_NAIVE); }
static int test_deepseek_v3_lite(void) { return check_model("deepseek-v3-lite", LD_DS_ATTN_NAIVE); }
static int test_deepseek_v3_absorbed(void) { return check_model("deepseek-v3", LD_DS_ATTN_ABSORBED); }
static int test_deepseek_v3_lite_absorbed(void) { return check_model("deepseek-v3-lite", LD_DS_ATTN_ABSORBED); }
/* DeepSeek-V3.2: the indexer's selections too (index_topk 4 of 13 and 21
 * tokens) */
static int test_deepseek_v32(void) { return check_model("deepseek-v32", LD_DS_ATTN_NAIVE); }
static int test_deepseek_v32_absorbed(void) { return check_model("deepseek-v32", LD_DS_ATTN_ABSORBED); }
/* FP8 block-scaled weights against transformers on their dequantization */
static int test_deepseek_v3_fp8(void)
{
    return check_model("deepseek-v3-fp8", LD_DS_ATTN_NAIVE) || check_model("deepseek-v3-fp8", LD_DS_ATTN_ABSORBED);
}

/* The absorbed form against the naive one on the same backend: the same
 * function to rounding. */
static int test_deepseek_absorbed_matches_naive(void)
{
    const char *names[] = {"deepseek-v3", "deepseek-v3-lite", "deepseek-v32"};
    for (int i = 0; i < 3; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", names[i]);
        ld_ds_model *m = NULL;
        if (open_model(names[i], &m)) return 1;
        static seq seqs[2];
        CHECK(load_seqs(dir, m->cfg.top_k, seqs, 2) == 2);
        const seq *q = &seqs[1];
        size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
        size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q->T * (size_t)m->cfg.hidden;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        float *ha = malloc(nh * sizeof *ha), *hb = malloc(nh * sizeof *hb);
        CHECK(a && b && ha && hb);
        ld_error err;
        ld_error_clear(&err);
        /* token by token: the decode form the absorbed path is for */
        CHECK_MSG(run_on(&backends[0], m, 1, MAX_T, 0, LD_DS_ATTN_NAIVE, q->tokens, q->T, a, ha, NULL, &err) == LD_OK,
                  "%s", err.msg);
        CHECK_MSG(run_on(&backends[0], m, 1, MAX_T, 1, LD_DS_ATTN_ABSORBED, q->tokens, q->T, b, hb, NULL, &err) ==
                      LD_OK,
                  "%s", err.msg);
        double mx, e = nerr(b, a, n, &mx), eh = nerr(hb, ha, nh, NULL);
        fprintf(stderr, "  %-16s absorbed vs naive: logits nerr %.3g max|d| %.3g, hidden nerr %.3g%s\n", names[i], e,
                mx, eh, memcmp(a, b, n * sizeof *a) ? "" : " (bitwise equal)");
        CHECK(e < 2e-6 && eh < 2e-6);
        free(a);
        free(b);
        free(ha);
        free(hb);
        ld_ds_model_close(m);
    }
    return 0;
}

/* ------------------------------------------------------------ ablations */

/* The logits of sequence b when `drop` changes the model's config: far from
 * transformers' (so the feature `drop` removes is exercised). */
static int check_ablation(const char *name, const char *what, void (*drop)(ld_ds_config *))
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_ds_model *m = NULL, *b = NULL;
    if (open_model(name, &m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(dir, m->cfg.top_k, seqs, 2) == 2);
    ld_ds_config c = m->cfg;
    drop(&c);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_ds_model_bind(&c, m->st, &b, &err) == LD_OK, "%s", err.msg);
    size_t n = (size_t)seqs[1].T * (size_t)c.vocab;
    float *ref = load_f32(dir, seqs[1].logits_file, n), *l = malloc(n * sizeof *l);
    CHECK(ref && l);
    CHECK_MSG(run_on(&backends[0], b, 1, MAX_T, 0, LD_DS_ATTN_NAIVE, seqs[1].tokens, seqs[1].T, l, NULL, NULL,
                     &err) == LD_OK,
              "%s", err.msg);
    double e = nerr(l, ref, n, NULL);
    fprintf(stderr, "  %-16s without %s: nerr %.3g\n", name, what, e);
    CHECK_MSG(e > 1e-3, "%s without %s: logits moved only %.3g", name, what, e);
    free(ref);
    free(l);
    ld_ds_model_close(b); /* a bound model does not own the checkpoint */
    ld_ds_model_close(m);
    return 0;
}

static void drop_bias(ld_ds_config *c) { c->score_bias = 0; }
static void drop_group_limit(ld_ds_config *c) { c->topk_group = c->n_group; }
static void drop_yarn(ld_ds_config *c) { c->yarn = 0; }
static void drop_mscale(ld_ds_config *c) { c->mscale_all_dim = 0; }
static void flip_interleave(ld_ds_config *c) { c->rope_interleave = !c->rope_interleave; }
static void drop_norm_topk(ld_ds_config *c) { c->norm_topk_prob = !c->norm_topk_prob; }
/* V3.2: every query attends to its whole context (dense MLA) */
static void drop_sparsity(ld_ds_config *c) { c->index_topk = 1 << 20; }
static void drop_indexer(ld_ds_config *c) { c->v32 = 0; }
/* the original (Sept. 2025) official indexer RoPE: interleaved pairs */
static void interleave_index_rope(ld_ds_config *c) { c->index_rope_interleave = 1; }

/* Dense attention through the sparse path (index_topk past the context)
 * is the V3 forward (no indexer) bit for bit: the sparse kernels with every
 * position selected are the dense ones. */
static int test_deepseek_v32_dense_is_v3(void)
{
    ld_ds_model *m = NULL, *a = NULL, *b = NULL;
    if (open_model("deepseek-v32", &m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(MDIR "deepseek-v32", m->cfg.top_k, seqs, 2) == 2);
    ld_ds_config ca = m->cfg, cb = m->cfg;
    drop_sparsity(&ca);
    drop_indexer(&cb);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_ds_model_bind(&ca, m->st, &a, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_ds_model_bind(&cb, m->st, &b, &err) == LD_OK, "%s", err.msg);
    const seq *q = &seqs[1];
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    float *la = malloc(n * sizeof *la), *lb = malloc(n * sizeof *lb);
    CHECK(la && lb);
    for (int f = 0; f < 2; f++) {
        CHECK_MSG(run_on(&backends[1], a, 2, MAX_T, 0, (ld_ds_attn)f, q->tokens, q->T, la, NULL, NULL, &err) == LD_OK,
                  "%s", err.msg);
        CHECK_MSG(run_on(&backends[1], b, 2, MAX_T, 0, (ld_ds_attn)f, q->tokens, q->T, lb, NULL, NULL, &err) == LD_OK,
                  "%s", err.msg);
        CHECK_MSG(memcmp(la, lb, n * sizeof *la) == 0, "%s: dense V3.2 differs from V3",
                  f ? "absorbed" : "naive");
    }
    free(la);
    free(lb);
    ld_ds_model_close(a);
    ld_ds_model_close(b);
    ld_ds_model_close(m);
    return 0;
}

static int test_deepseek_features_matter(void)
{
    if (check_ablation("deepseek-v3", "the correction bias", drop_bias)) return 1;
    if (check_ablation("deepseek-v3", "the group limit", drop_group_limit)) return 1;
    if (check_ablation("deepseek-v3", "YaRN", drop_yarn)) return 1;
    if (check_ablation("deepseek-v3", "mscale", drop_mscale)) return 1;
    if (check_ablation("deepseek-v3", "interleaved pairs", flip_interleave)) return 1;
    if (check_ablation("deepseek-v3", "norm_topk_prob", drop_norm_topk)) return 1;
    if (check_ablation("deepseek-v3-lite", "the correction bias", drop_bias)) return 1;
    if (check_ablation("deepseek-v3-lite", "the group limit", drop_group_limit)) return 1;
    if (check_ablation("deepseek-v32", "the indexer's top-k (dense MLA)", drop_sparsity)) return 1;
    if (check_ablation("deepseek-v32", "rotate_half pairs in the indexer", interleave_index_rope)) return 1;
    if (check_ablation("deepseek-v32", "the correction bias", drop_bias)) return 1;
    return check_ablation("deepseek-v3-lite", "rotate_half pairs", flip_interleave);
}

/* ------------------------------------------------------------ determinism */

static int check_deterministic_on(const backend_kind *bk, const char *name, ld_ds_attn attn)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_ds_model *m = NULL;
    if (open_model(name, &m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(dir, m->cfg.top_k, seqs, 2) == 2);
    const seq *q = &seqs[1];
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q->T * (size_t)m->cfg.hidden;
    size_t ne = (size_t)m->cfg.n_layers * (size_t)q->T * (size_t)m->cfg.top_k;
    size_t ns = m->cfg.v32 ? (size_t)m->cfg.n_layers * (size_t)q->T * (size_t)m->cfg.index_topk : 1;
    int32_t *sbase = malloc(ns * sizeof *sbase), *sl = malloc(ns * sizeof *sl);
    CHECK(sbase && sl);
    memset(sbase, 0, ns * sizeof *sbase);
    float *base = malloc(n * sizeof *base), *l = malloc(n * sizeof *l);
    float *hbase = malloc(nh * sizeof *hbase), *h = malloc(nh * sizeof *h);
    int32_t *ebase = malloc(ne * sizeof *ebase), *ex = malloc(ne * sizeof *ex);
    CHECK(base && l && hbase && h && ebase && ex);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(run_on_sel(bk, m, 1, MAX_T, 0, attn, q->tokens, q->T, base, hbase, ebase, sbase, &err) == LD_OK, "%s",
              err.msg);
    static const int shapes[][2] = {{64, 0}, {1, 0}, {3, 0}, {5, 0}, {64, 1}, {64, 4}, {2, 7}, {64, 11}};
    for (int threads = 1; threads <= 3; threads++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            memset(l, 0, n * sizeof *l);
            memset(h, 0, nh * sizeof *h);
            memset(ex, 0, ne * sizeof *ex);
            memset(sl, 0, ns * sizeof *sl);
            CHECK_MSG(run_on_sel(bk, m, threads, shapes[k][0], shapes[k][1], attn, q->tokens, q->T, l, h, ex, sl,
                                 &err) == LD_OK,
                      "%s", err.msg);
            CHECK_MSG(memcmp(l, base, n * sizeof *l) == 0 && memcmp(h, hbase, nh * sizeof *h) == 0 &&
                          memcmp(ex, ebase, ne * sizeof *ex) == 0 && memcmp(sl, sbase, ns * sizeof *sl) == 0,
                      "%s on %s (%s): %d threads, batch %d, calls of %d differ from 1 thread in one prefill", name,
                      bk->name, attn == LD_DS_ATTN_NAIVE ? "naive" : "absorbed", threads, shapes[k][0], shapes[k][1]);
        }
    free(base);
    free(l);
    free(hbase);
    free(h);
    free(ebase);
    free(ex);
    free(sbase);
    free(sl);
    ld_ds_model_close(m);
    return 0;
}

static int test_deepseek_deterministic(void)
{
    const char *names[] = {"deepseek-v3", "deepseek-v3-lite", "deepseek-v3-fp8", "deepseek-v32"};
    for (int i = 0; i < 4; i++)
        for (int b = 0; b < N_BACKENDS; b++)
            for (int a = 0; a < 2; a++)
                if (check_deterministic_on(&backends[b], names[i], (ld_ds_attn)a)) return 1;
    return 0;
}

/* ------------------------------------------------------------ op table vs host leaves */

/* the session's host path: fixtures.h */
static const backend_kind host_backends[] = {{"ref-host", ld_test_ref_host_create},
                                              {"cpu-host", ld_test_cpu_host_create}};

/* A mix: backend `partial_fast` (0 ref, 1 cpu) without its mla_latent
 * (partial_drop 1) or without its absorbed products (2), so that the
 * session moves the operands between the backend and the host mid-way. */
static ld_backend_ops partial_ops;
static int partial_fast, partial_drop;

static ld_status partial_create(int n_threads, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_cpu_create_ex(n_threads, partial_fast, NULL, out, err);
    if (st != LD_OK) return st;
    partial_ops = *(*out)->ops;
    partial_ops.name = "partial";
    if (partial_drop == 1) {
        partial_ops.mla_latent = NULL;
    } else {
        partial_ops.mla_absorb_q = NULL;
        partial_ops.mla_absorb_out = NULL;
    }
    (*out)->ops = &partial_ops;
    return LD_OK;
}

/* `name` with MLA form `attn` and variants `kspec`: the op-table path on
 * backend bk with 1 and 3 threads, in one prefill, token by token and in
 * chunks, gives the bits of the host path (1 thread, one prefill): logits,
 * hidden states, experts and V3.2's selections */
static int check_op_table_on(int b, int drop, const ld_ds_model *m, const char *name, const seq *q, ld_ds_attn attn,
                             const char *kspec)
{
    static const backend_kind partial = {"partial", partial_create};
    const backend_kind *under = drop ? &partial : &backends[b];
    partial_fast = b;
    partial_drop = drop;
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q->T * (size_t)m->cfg.hidden;
    size_t ne = (size_t)m->cfg.n_layers * (size_t)q->T * (size_t)m->cfg.top_k;
    size_t ns = m->cfg.v32 ? (size_t)m->cfg.n_layers * (size_t)q->T * (size_t)m->cfg.index_topk : 1;
    float *base = calloc(n + nh, sizeof *base), *l = calloc(n + nh, sizeof *l);
    int32_t *ebase = calloc(ne + ns, sizeof *ebase), *ex = calloc(ne + ns, sizeof *ex);
    CHECK(base && l && ebase && ex);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(run_on_spec(&host_backends[b], m, 1, MAX_T, 0, attn, kspec, q->tokens, q->T, base, base + n, ebase,
                          ebase + ne, &err) == LD_OK,
              "%s", err.msg);
    static const int shapes[][3] = {{1, 64, 0}, {3, 64, 0}, {1, 64, 1}, {3, 64, 1}, {3, 5, 0}, {1, 2, 7}};
    int bad = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0] && !bad; k++) {
        memset(l, 0, (n + nh) * sizeof *l);
        memset(ex, 0, (ne + ns) * sizeof *ex);
        CHECK_MSG(run_on_spec(under, m, shapes[k][0], shapes[k][1], shapes[k][2], attn, kspec, q->tokens,
                              q->T, l, l + n, ex, ex + ne, &err) == LD_OK,
                  "%s", err.msg);
        bad = memcmp(l, base, (n + nh) * sizeof *l) || memcmp(ex, ebase, (ne + ns) * sizeof *ex);
        CHECK_MSG(!bad, "%s on %s (drop %d), form %d, '%s': %d threads, batch %d, calls of %d differ from the host "
                  "path", name, backends[b].name, drop, (int)attn, kspec ? kspec : "", shapes[k][0], shapes[k][1],
                  shapes[k][2]);
    }
    free(base);
    free(l);
    free(ebase);
    free(ex);
    return 0;
}

static int test_deepseek_op_table_matches_host(void)
{
    for (int b = 0; b < N_BACKENDS; b++) { /* the path under test is taken */
        ld_backend *be = NULL;
        ld_error err;
        CHECK(backends[b].create(1, &be, &err) == LD_OK);
        int has = be->ops->mla_latent && be->ops->mla_absorb_q && be->ops->mla_absorb_out && be->ops->ds_route &&
                  be->ops->index_topk;
        ld_backend_destroy(be);
        CHECK_MSG(has, "%s lacks a DeepSeek op", backends[b].name);
    }
    const char *names[] = {"deepseek-v3", "deepseek-v3-lite", "deepseek-v3-fp8", "deepseek-v32"};
    const char *specs[] = {NULL, "router=bf16,combine=fused,indexer=fp8,rope=bf16", "indexer=bf16,combine=bf16"};
    for (int i = 0; i < 4; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", names[i]);
        ld_ds_model *m = NULL;
        if (open_model(names[i], &m)) return 1;
        static seq seqs[2];
        CHECK(load_seqs(dir, m->cfg.top_k, seqs, 2) == 2);
        for (int b = 0; b < N_BACKENDS; b++)
            for (int a = 0; a < 3; a++)
                for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
                    for (int drop = 0; drop < (a ? 3 : 1); drop++) /* the mixes: absorbed forms only */
                        if (check_op_table_on(b, drop, m, names[i], &seqs[1], (ld_ds_attn)a, specs[k])) {
                            ld_ds_model_close(m);
                            return 1;
                        }
        ld_ds_model_close(m);
    }
    return 0;
}

/* ------------------------------------------------------------ the router kernel */

/* Hand-made cases of ld_ref_ds_route: group limit, bias for selection only,
 * ties by index, weights from the un-biased scores. */
static int test_deepseek_router_kernel(void)
{
    /* 8 experts, 4 groups of 2; logits chosen so sigmoid scores are known
     * in order: expert 7 is best alone but its group (3) has a weak
     * partner, group 1 (experts 2, 3) wins on the sum of its top 2 */
    float logits[8] = {-2.0f, -1.5f, 1.0f, 0.9f, -3.0f, -3.0f, 2.0f, -4.0f};
    int32_t idx[2];
    float w[2];
    ld_ref_ds_route(idx, w, logits, NULL, 8, 4, 1, 2, 1, 1.0f, 0, 1);
    CHECK(idx[0] == 2 && idx[1] == 3);
    /* two groups: group 1 and group 3 (6 + 7 = 2.0 and -4.0 vs 0:-2,-1.5) */
    ld_ref_ds_route(idx, w, logits, NULL, 8, 4, 2, 2, 1, 1.0f, 0, 1);
    CHECK(idx[0] == 2 && idx[1] == 6);
    /* no group limit: the two best experts */
    ld_ref_ds_route(idx, w, logits, NULL, 8, 1, 1, 2, 1, 1.0f, 0, 1);
    CHECK(idx[0] == 2 && idx[1] == 6);
    double s2 = 1 / (1 + exp(-1.0)), s6 = 1 / (1 + exp(-2.0));
    CHECK(fabs(w[0] - s2 / (s2 + s6)) < 1e-6 && fabs(w[1] - s6 / (s2 + s6)) < 1e-6);
    /* the bias selects (expert 0 now first) but the weights stay s */
    float bias[8] = {1.0f, 0, 0, 0, 0, 0, 0, 0};
    ld_ref_ds_route(idx, w, logits, bias, 8, 1, 1, 2, 0, 2.5f, 0, 1);
    CHECK(idx[0] == 0 && idx[1] == 6);
    CHECK(fabs(w[0] - 2.5 / (1 + exp(2.0))) < 1e-6 && fabs(w[1] - 2.5 * s6) < 1e-6);
    /* ties: the lower index first */
    float tie[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    ld_ref_ds_route(idx, w, tie, NULL, 4, 2, 1, 2, 1, 1.0f, 0, 1);
    CHECK(idx[0] == 0 && idx[1] == 1);
    ld_ref_ds_route(idx, w, tie, NULL, 4, 1, 1, 1, 1, 1.0f, 0, 1);
    CHECK(idx[0] == 0 && w[0] == 1.0f);
    return 0;
}

/* V3.2's leaves: the top-k order (score descending, index ascending, NaN
 * last; written ascending), the indexer score formula, sparse MLA with
 * every position selected equal to dense MLA bit for bit. */
static int test_deepseek_indexer_kernels(void)
{
    int32_t idx[8], heap[8];
    float sc[7] = {0.5f, 2.0f, 0.5f, NAN, 2.0f, -1.0f, 0.5f};
    CHECK(ld_ref_ds_topk(idx, sc, 7, 3, heap) == 3);
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 4);
    CHECK(ld_ref_ds_topk(idx, sc, 7, 4, heap) == 4);
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && idx[3] == 4);
    CHECK(ld_ref_ds_topk(idx, sc, 7, 6, heap) == 6);
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && idx[3] == 4 && idx[4] == 5 && idx[5] == 6);
    /* fewer than k: all of them; NaN last but taken */
    CHECK(ld_ref_ds_topk(idx, sc, 5, 8, heap) == 5);
    CHECK(idx[0] == 0 && idx[4] == 4);
    float zeros[6] = {0};
    CHECK(ld_ref_ds_topk(idx, zeros, 6, 2, heap) == 2 && idx[0] == 0 && idx[1] == 1);
    CHECK(ld_ref_ds_topk(idx, sc, 0, 2, heap) == 0);
    /* scores: 2 heads of dim 4, 3 keys; head 1's dot with key 2 negative
     * (relu'd away) */
    float q[8] = {1, 0, 0, 0, 0, 1, 0, 0}, w[2] = {2.0f, -1.0f};
    float keys[12] = {1, 1, 0, 0, 0.5f, -1, 0, 0, -1, 3, 0, 0};
    float out[3];
    ld_ref_ds_index_scores(out, q, w, keys, 2, 4, 3);
    double ws = 1 / sqrt(2.0), qs = 0.5;
    double want[3] = {ws * (2 * qs * 1 - 1 * qs * 1), ws * (2 * qs * 0.5), ws * (-1 * qs * 3)};
    for (int i = 0; i < 3; i++) CHECK_MSG(fabs(out[i] - want[i]) < 1e-6, "score %d: %g, want %g", i, out[i], want[i]);
    /* LayerNorm */
    float x[4] = {1, 2, 3, 6}, g[4] = {1, 1, 2, 1}, b[4] = {0, 0, 0, 1};
    ld_ref_ds_layernorm(x, 4, g, b, 4, 0.0f, 0, 1);
    double sd = sqrt((4 + 1 + 0 + 9) / 4.0);
    CHECK(fabs(x[0] + 2 / sd) < 1e-6 && fabs(x[2] - 0.0) < 1e-6 && fabs(x[3] - (3 / sd + 1)) < 1e-6);
    /* sparse MLA with all positions selected == dense, naive and latent */
    enum { T = 5, H = 2, DN = 3, DR = 2, DV = 3, C = 4 };
    float qq[T * H * (DN + DR)], kv[T * H * (DN + DV)], kpe[T * DR], ckv[T * C], qabs[T * H * C];
    float o1[T * H * C], o2[T * H * C], scores[T];
    for (size_t i = 0; i < sizeof qq / sizeof *qq; i++) qq[i] = sinf((float)i * 0.7f);
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++) kv[i] = cosf((float)i * 0.3f);
    for (size_t i = 0; i < sizeof kpe / sizeof *kpe; i++) kpe[i] = sinf((float)i * 1.3f);
    for (size_t i = 0; i < sizeof ckv / sizeof *ckv; i++) ckv[i] = cosf((float)i * 0.9f);
    for (size_t i = 0; i < sizeof qabs / sizeof *qabs; i++) qabs[i] = sinf((float)i * 0.2f);
    int32_t all[T * T];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < T; j++) all[t * T + j] = j <= t ? j : -1;
    ld_ref_mla_attention(o1, qq, kv, kpe, H, DN, DR, DV, 0, 0.4f, scores, 0, T * H);
    ld_ref_mla_attention_sparse(o2, qq, kv, kpe, H, DN, DR, DV, 0, 0.4f, scores, all, T, 0, T * H);
    CHECK(memcmp(o1, o2, T * H * DV * sizeof *o1) == 0);
    ld_ref_mla_latent_attention(o1, qabs, qq, ckv, kpe, H, DN, DR, C, 0, 0.4f, scores, 0, T * H);
    ld_ref_mla_latent_attention_sparse(o2, qabs, qq, ckv, kpe, H, DN, DR, C, 0, 0.4f, scores, all, T, 0, T * H);
    CHECK(memcmp(o1, o2, T * H * C * sizeof *o1) == 0);
    /* one selected position: its v exactly */
    int32_t one[T] = {3, 3, 3, 3, 3};
    ld_ref_mla_attention_sparse(o2, qq + 4 * H * (DN + DR), kv, kpe, H, DN, DR, DV, 4, 0.4f, scores, one, 1, 0, H);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < DV; i++) CHECK(o2[h * DV + i] == kv[3 * H * (DN + DV) + h * (DN + DV) + DN + i]);
    return 0;
}

/* Every E4M3 code against its definition (in double), the block
 * dequantization with partial blocks. */
static int test_deepseek_fp8_kernel(void)
{
    for (int v = 0; v < 256; v++) {
        int e = (v >> 3) & 15, m = v & 7;
        double want = e == 0 ? m / 8.0 * pow(2, -6) : (1 + m / 8.0) * pow(2, e - 7);
        if (v & 0x80) want = -want;
        float got = ld_ref_fp8_e4m3_to_f32((uint8_t)v);
        if (e == 15 && m == 7) CHECK_MSG(isnan(got), "code 0x%02x", v);
        else CHECK_MSG((double)got == want && !signbit(got) == !signbit(want), "code 0x%02x: %g, want %g", v, got, want);
    }
    CHECK(ld_ref_fp8_e4m3_to_f32(0x7e) == 448.0f && ld_ref_fp8_e4m3_to_f32(0x01) == 0x1p-9f);
    CHECK(ld_ref_fp8_e4m3_to_f32(0x38) == 1.0f && ld_ref_fp8_e4m3_to_f32(0xc0) == -2.0f);
    /* 3 x 5 with blocks 2 x 2: scales [2][3] */
    uint8_t q[15];
    for (int i = 0; i < 15; i++) q[i] = 0x38; /* 1.0 */
    float sc[6] = {1, 2, 3, 4, 5, 6}, out[15];
    ld_ref_fp8_block_dequant(out, q, sc, 3, 5, 2, 2, 0, 3);
    static const float want[15] = {1, 1, 2, 2, 3, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6};
    CHECK(memcmp(out, want, sizeof want) == 0);
    return 0;
}

/* One tensor of the FP8 fixture: an F8_E4M3 linear bound as LD_WQ_F8B,
 * its bytes and `<name>_scale_inv` read in place from the file (no copy);
 * *fp32 += the bytes an fp32 copy of it would take. */
static int check_f8b(const ld_ds_model *m, const ld_model_tensor *t, size_t *n_f8b, uint64_t *fp32)
{
    if (!t->st || t->st->dtype != LD_DT_F8_E4M3) return 0;
    char sname[200];
    snprintf(sname, sizeof sname, "%s_scale_inv", t->st->name);
    const ld_st_tensor *sc = ld_st_find(m->st, sname);
    const ld_host_tensor *h = &t->host;
    CHECK_MSG(h->quant == LD_WQ_F8B && h->data == t->st->data && sc && h->scale == (const float *)sc->data,
              "'%s' is not bound as LD_WQ_F8B in place", t->st->name);
    CHECK(h->scale_br == 16 && h->scale_bc == 16 && (uint64_t)(h->rows * h->cols) == t->st->n_bytes);
    (*n_f8b)++;
    *fp32 += (uint64_t)t->st->n_bytes * sizeof(float);
    return 0;
}

static int check_f8b_mlp(const ld_ds_model *m, const ld_ds_expert *x, size_t *n, uint64_t *fp32)
{
    return check_f8b(m, &x->gate, n, fp32) || check_f8b(m, &x->up, n, fp32) || check_f8b(m, &x->down, n, fp32);
}

/* kv_b_proj, the documented exception: an fp32 copy the model owns, equal
 * to e4m3(code) * scale of its block element by element */
static int check_kv_b_dequantized(const ld_ds_model *m, const ld_model_tensor *t)
{
    char sname[200];
    snprintf(sname, sizeof sname, "%s_scale_inv", t->st->name);
    const ld_st_tensor *sc = ld_st_find(m->st, sname);
    const ld_host_tensor *h = &t->host;
    CHECK(t->st->dtype == LD_DT_F8_E4M3 && sc && h->quant == LD_WQ_NONE && h->dtype == LD_DT_F32);
    CHECK(h->data != t->st->data);
    int64_t bcols = (h->cols + 15) / 16;
    const uint8_t *q = t->st->data;
    const float *w = h->data, *s = (const float *)sc->data;
    for (int64_t r = 0; r < h->rows; r++)
        for (int64_t c = 0; c < h->cols; c++)
            CHECK(w[r * h->cols + c] == ld_ref_fp8_e4m3_to_f32(q[r * h->cols + c]) * s[(r / 16) * bcols + c / 16]);
    return 0;
}

/* The FP8 fixture's linears stay FP8 (LD_WQ_F8B), all but kv_b_proj; what
 * the model owns is kv_b_proj's fp32 copies only */
static int test_deepseek_fp8_binding(void)
{
    ld_ds_model *m = NULL;
    if (open_model("deepseek-v3-fp8", &m)) return 1;
    const ld_ds_config *c = &m->cfg;
    size_t n_f8b = 0;
    uint64_t fp32 = 0, kv_b = 0;
    for (int l = 0; l < c->n_layers; l++) {
        const ld_ds_layer *L = &m->layers[l];
        const ld_model_tensor *ts[] = {&L->q_a, &L->q_b, &L->q, &L->kv_a, &L->o, &L->idx_wq_b, &L->idx_wk};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            if (check_f8b(m, ts[i], &n_f8b, &fp32)) return 1;
        if (check_f8b_mlp(m, &L->mlp, &n_f8b, &fp32)) return 1;
        for (int e = 0; L->moe && e < c->n_routed; e++)
            if (check_f8b_mlp(m, &L->experts[e], &n_f8b, &fp32)) return 1;
        if (check_kv_b_dequantized(m, &L->kv_b)) return 1;
        kv_b += (uint64_t)L->kv_b.host.rows * (uint64_t)L->kv_b.host.cols * sizeof(float);
        CHECK(!L->moe || L->router.host.quant == LD_WQ_NONE);
    }
    /* 2 layers: q_a, q_b, kv_a, o, the dense MLP's 3; 3 x (6 experts + shared) */
    CHECK_MSG(n_f8b == 2 * 4 + 3 + 3 * 7, "%zu tensors bound as LD_WQ_F8B", n_f8b);
    CHECK(kv_b == (uint64_t)c->n_layers * (uint64_t)c->n_heads * (uint64_t)(c->qk_nope + c->v_head) *
                      (uint64_t)c->kv_lora_rank * sizeof(float));
    CHECK_MSG(m->owned_bytes == kv_b && m->n_owned == (size_t)c->n_layers, "owned %zu bytes in %zu copies",
              m->owned_bytes, m->n_owned);
    fprintf(stderr, "  deepseek-v3-fp8: %zu linears LD_WQ_F8B in place; owned %zu bytes (kv_b_proj), %llu with "
                    "every FP8 linear dequantized to fp32\n", n_f8b, m->owned_bytes,
            (unsigned long long)(fp32 + kv_b));
    ld_ds_model_close(m);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_deepseek_v3), LD_CASE(test_deepseek_v3_lite), LD_CASE(test_deepseek_v3_absorbed),
    LD_CASE(test_deepseek_v3_lite_absorbed), LD_CASE(test_deepseek_v32), LD_CASE(test_deepseek_v32_absorbed),
    LD_CASE(test_deepseek_v3_fp8), LD_CASE(test_deepseek_absorbed_matches_naive),
    LD_CASE(test_deepseek_v32_dense_is_v3), LD_CASE(test_deepseek_features_matter),
    LD_CASE(test_deepseek_deterministic), LD_CASE(test_deepseek_op_table_matches_host),
    LD_CASE(test_deepseek_router_kernel), LD_CASE(test_deepseek_indexer_kernels),
    LD_CASE(test_deepseek_fp8_kernel), LD_CASE(test_deepseek_fp8_binding),
};

LD_TEST_MAIN(tests)
