/* test_ds4_ops.c - DeepSeek-V4's entries of the op table (hc_pre, hc_post,
 * ds4_route, the attention's, the head, moe) run by a session on each CPU
 * backend against the host leaves the session runs without them, bitwise. */
#include "tests/support/ds4_check.h"

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

static const ld_test_case tests[] = {
    LD_CASE(test_deepseek_v4_op_table_matches_host), LD_CASE(test_deepseek_v4_entries_ablated),
    LD_CASE(test_deepseek_v4_entry_args),
};

LD_TEST_MAIN(tests)
