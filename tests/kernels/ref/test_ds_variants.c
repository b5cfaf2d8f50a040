/* test_ds_variants.c - the production-style variants of DeepSeek's ops
 * (engine/backend/cpu_kernels.h: mla=splitk, indexer=bf16|fp8, combine=fused,
 * rope=bf16, mhc=sinkhorn-bf16; kernels/ref/ref_ds_variants.h and the _ex
 * forms of kernels/ref/ref_ds*.h) on the tiny DeepSeek models of
 * testdata/models/ against transformers' fp32 logits (the committed
 * references of tools/gen_tiny_deepseek*.py): each variant's normalised
 * logits error lies in its band, whose lower bound shows that the variant
 * computes other numbers and whose upper bound that they stay sane; the
 * indexer variants' changed top-k selections are counted; each variant is
 * bitwise deterministic (twice the same bits, 1 or 3 threads, prefill or
 * token by token); mla=splitk folds several splits on a long sequence;
 * the kernels on hand-made cases; specs; engine/models/lm.c hands the variants to
 * the sessions. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "engine/models/deepseek_v3/ds_forward.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "tests/support/fixtures.h"
#include "engine/engine.h"
#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ds_variants.h"
#include "kernels/ref/ref_variants.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define MAX_T 64
#define LONG_T 150 /* mla=splitk's long sequence: three splits of 64 */

/* ------------------------------------------------------------ helpers */

/* a sequence of the fixture's ref.json (fixtures.h) */
typedef ld_test_seq seq;

/* ref.json's sequence `which` of testdata/models/<model>; 0 when it is there */
static int load_seq(const char *model, int which, seq *q)
{
    char dir[600];
    snprintf(dir, sizeof dir, MDIR "%s", model);
    return ld_test_load_seq(dir, which, q) ? 0 : 1;
}

/* a DeepSeek model of either family */
typedef struct dsm {
    ld_ds_model *v3;
    ld_ds4_model *v4;
    int vocab, layers, topk; /* topk: the indexer's (0: none) */
} dsm;

static int open_dsm(const char *name, dsm *m)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    memset(m, 0, sizeof *m);
    ld_error err;
    ld_error_clear(&err);
    if (!strncmp(name, "deepseek-v4", 11)) {
        CHECK_MSG(ld_ds4_model_open(dir, &m->v4, &err) == LD_OK, "%s: %s", name, err.msg);
        m->vocab = m->v4->cfg.vocab;
        m->layers = m->v4->cfg.n_layers;
        m->topk = m->v4->cfg.index_topk;
    } else {
        CHECK_MSG(ld_ds_model_open(dir, &m->v3, &err) == LD_OK, "%s: %s", name, err.msg);
        m->vocab = m->v3->cfg.vocab;
        m->layers = m->v3->cfg.n_layers;
        m->topk = m->v3->cfg.v32 ? m->v3->cfg.index_topk : 0;
    }
    return 0;
}

static void close_dsm(dsm *m)
{
    ld_ds_model_close(m->v3);
    ld_ds4_model_close(m->v4);
}

/* One run of toks on a fresh "ref" backend made with `spec` (the backend's
 * ops), the session given the same spec's variants as engine/models/lm.c gives
 * them (the MLA form at creation, the rest by set_kernels): `threads` threads, calls
 * of `call` tokens (0: all at once); logits [T][V]; sel (NULL: not wanted)
 * [layers][T][topk], the indexer's selections. */
static ld_status run_spec(const dsm *m, const char *spec, int threads, int call, const int32_t *toks, int T,
                          float *logits, int32_t *sel, ld_error *err)
{
    ld_backend *be = NULL;
    ld_ds_session *s3 = NULL;
    ld_ds4_session *s4 = NULL;
    int max_seq = T > MAX_T ? T : MAX_T;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    ld_status st = ld_cpu_kernels_parse(spec, &k, err);
    if (st == LD_OK) st = ld_backend_cpu_create_ex(threads, 0, spec, &be, err);
    ld_ds_attn form = k.v[LD_KOP_MLA] == LD_KV_ABSORBED ? LD_DS_ATTN_ABSORBED
                    : k.v[LD_KOP_MLA] == LD_KV_SPLITK   ? LD_DS_ATTN_SPLITK
                                                        : LD_DS_ATTN_NAIVE;
    if (st == LD_OK)
        st = m->v4 ? ld_ds4_session_create(m->v4, be, max_seq, max_seq, &s4, err)
                   : ld_ds_session_create(m->v3, be, max_seq, max_seq, form, &s3, err);
    if (st == LD_OK && s4) ld_ds4_session_set_kernels(s4, &k);
    if (st == LD_OK && s3) ld_ds_session_set_kernels(s3, &k);
    size_t V = (size_t)m->vocab, KI = m->topk > 0 ? (size_t)m->topk : 1, L = (size_t)m->layers;
    for (int t0 = 0; st == LD_OK && t0 < T;) {
        int n = call ? (T - t0 < call ? T - t0 : call) : T;
        int32_t *sl = sel && m->topk ? malloc(L * (size_t)n * KI * sizeof *sl) : NULL;
        if (sel && m->topk && !sl) st = LD_ERR_NOMEM;
        float *lg = logits + (size_t)t0 * V;
        if (st == LD_OK)
            st = m->v4 ? ld_ds4_session_eval_picks(s4, toks + t0, n, lg, NULL, NULL, sl, err)
                       : ld_ds_session_eval_sel(s3, toks + t0, n, lg, NULL, NULL, sl, err);
        for (size_t l = 0; sl && st == LD_OK && l < L; l++)
            memcpy(sel + (l * (size_t)T + (size_t)t0) * KI, sl + l * (size_t)n * KI, (size_t)n * KI * sizeof *sl);
        free(sl);
        t0 += n;
    }
    ld_ds_session_destroy(s3);
    ld_ds4_session_destroy(s4);
    ld_backend_destroy(be);
    return st;
}

/* how many of n selections differ */
static int count_diff(const int32_t *a, const int32_t *b, size_t n)
{
    int d = 0;
    for (size_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

/* ------------------------------------------------------------ bands against transformers */

/* a variant's band on a model: its normalised logits error against
 * transformers in [lo, hi], its distance to the reference kernels' logits
 * at least dlo (> 0: other numbers), the indexer's selections that change
 * against the reference kernels' at most sel_hi */
typedef struct band {
    const char *model, *spec;
    double lo, hi, dlo;
    int sel_hi;
} band;

/* The normalised logits error against transformers of both sequences
 * (the larger), the selections that changed against the reference
 * kernels' (which are transformers'); *moved = 0 when the variant gave the
 * reference's bits on both. */
static int variant_error(const band *b, double *err_out, double *dref_out, int *sel_changed, int *sel_total)
{
    dsm m;
    if (open_dsm(b->model, &m)) return 1;
    double worst = 0, dref = 0;
    *sel_changed = *sel_total = 0;
    for (int i = 0; i < 2; i++) {
        seq q;
        CHECK(load_seq(b->model, i, &q) == 0);
        size_t n = (size_t)q.T * (size_t)m.vocab, ns = (size_t)m.layers * (size_t)q.T * (size_t)(m.topk ? m.topk : 1);
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", b->model);
        float *ref = load_f32(dir, q.logits_file, n), *l = malloc(n * sizeof *l), *l0 = malloc(n * sizeof *l0);
        int32_t *s0 = malloc(ns * sizeof *s0), *s1 = malloc(ns * sizeof *s1);
        CHECK(ref && l && l0 && s0 && s1);
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(run_spec(&m, NULL, 2, 0, q.tokens, q.T, l0, s0, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(run_spec(&m, b->spec, 2, 0, q.tokens, q.T, l, s1, &err) == LD_OK, "%s %s: %s", b->model, b->spec,
                  err.msg);
        double e = nerr(l, ref, n, NULL), d = nerr(l, l0, n, NULL);
        worst = e > worst ? e : worst;
        dref = d > dref ? d : dref;
        if (m.topk) {
            *sel_changed += count_diff(s0, s1, ns);
            for (size_t j = 0; j < ns; j++) *sel_total += s0[j] >= 0;
        }
        free(ref);
        free(l);
        free(l0);
        free(s0);
        free(s1);
    }
    close_dsm(&m);
    *err_out = worst;
    *dref_out = dref;
    return 0;
}

/* Each variant on the models it applies to: the error band (measured on
 * this machine; the lower bound > 0: not the reference's numbers). */
static int test_ds_variant_bands(void)
{
    static const band bands[] = {
        /* fp32 reorderings: as close to transformers as the reference
         * (itself ~6.5e-7), other bits */
        {"deepseek-v3", "mla=splitk", 0, 2e-6, 1e-8, 0},
        {"deepseek-v3-lite", "mla=splitk", 0, 2e-6, 1e-8, 0},
        {"deepseek-v32", "mla=splitk", 0, 2e-6, 1e-8, 0},
        {"deepseek-v3", "combine=fused", 0, 2e-6, 1e-8, 0},
        {"deepseek-v32", "combine=fused", 0, 2e-6, 1e-8, 0},
        {"deepseek-v4", "combine=fused", 0, 2e-6, 1e-8, 0},
        /* bf16 tables and iterates: visible, sane */
        {"deepseek-v3", "rope=bf16", 1e-4, 1e-2, 1e-4, 0},
        {"deepseek-v3-lite", "rope=bf16", 1e-4, 1e-2, 1e-4, 0},
        {"deepseek-v32", "rope=bf16", 1e-4, 1e-2, 1e-4, 2},
        {"deepseek-v4", "rope=bf16", 1e-4, 1e-2, 1e-4, 2},
        {"deepseek-v4", "mhc=sinkhorn-bf16", 1e-4, 1e-2, 1e-4, 2},
        {"deepseek-v4-fp4", "mhc=sinkhorn-bf16", 1e-4, 1e-2, 1e-4, 2},
        /* the indexer moves the logits only through the selections it
         * changes: bf16 changes none on these short sequences (the same
         * bits; test_ds_indexer_long shows it does on longer ones); FP8
         * changes some, and each changed pick moves a tiny random model's
         * logits a lot */
        {"deepseek-v32", "indexer=bf16", 0, 2e-6, 0, 0},
        {"deepseek-v4", "indexer=bf16", 0, 2e-6, 0, 0},
        {"deepseek-v32", "indexer=fp8", 1e-2, 8e-1, 1e-2, 60},
        {"deepseek-v4", "indexer=fp8", 1e-2, 3e-1, 1e-2, 20},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++) {
        const band *b = &bands[i];
        double e, d;
        int changed, total;
        if (variant_error(b, &e, &d, &changed, &total)) return 1;
        fprintf(stderr, "  %-16s %-18s logits nerr %.3g (band %.0e .. %.0e), from the reference kernels %.3g (>= %.0e)",
                b->model, b->spec, e, b->lo, b->hi, d, b->dlo);
        if (total) fprintf(stderr, "; top-k selections changed %d of %d (<= %d)", changed, total, b->sel_hi);
        fprintf(stderr, "\n");
        if (!(e >= b->lo && e <= b->hi) || !(d >= b->dlo) || (d == 0 && b->dlo > 0) || changed > b->sel_hi) {
            fprintf(stderr, "  ^ outside its band\n");
            bad = 1;
        }
    }
    CHECK_MSG(!bad, "a variant outside its band");
    return 0;
}

static int deterministic(const char *model, const char *spec);

/* matmul=fp8ue8m0 where the backend offers it (engine/backend/backend_ref.c's
 * matmul dispatch): on the FP8 checkpoint, against transformers on the
 * dequantized weights, as visible as fp8act and not the same numbers */
static int test_ds_fp8_ue8m0(void)
{
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    ld_error err;
    if (ld_cpu_kernels_parse("matmul=fp8ue8m0", &k, &err) != LD_OK) {
        fprintf(stderr, "  matmul=fp8ue8m0 not offered by the backend yet: %s\n", err.msg);
        return 0;
    }
    static const band bands[] = {{"deepseek-v3-fp8", "matmul=fp8act", 1e-3, 2e-1, 1e-3, 0},
                                 {"deepseek-v3-fp8", "matmul=fp8ue8m0", 1e-3, 2e-1, 1e-3, 0}};
    double e[2], d[2];
    for (int i = 0; i < 2; i++) {
        int changed, total;
        if (variant_error(&bands[i], &e[i], &d[i], &changed, &total)) return 1;
        fprintf(stderr, "  %-16s %-18s logits nerr %.3g (band %.0e .. %.0e), from the reference kernels %.3g\n",
                bands[i].model, bands[i].spec, e[i], bands[i].lo, bands[i].hi, d[i]);
        CHECK(e[i] >= bands[i].lo && e[i] <= bands[i].hi && d[i] >= bands[i].dlo);
    }
    CHECK(e[0] != e[1]);
    return deterministic("deepseek-v3-fp8", "matmul=fp8ue8m0");
}

/* ------------------------------------------------------------ determinism */

/* the same bits twice, with 1 or 3 threads, prefill or token by token */
static int deterministic(const char *model, const char *spec)
{
    dsm m;
    if (open_dsm(model, &m)) return 1;
    seq q;
    CHECK(load_seq(model, 1, &q) == 0);
    size_t n = (size_t)q.T * (size_t)m.vocab;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    CHECK(a && b);
    ld_error err;
    ld_error_clear(&err);
    static const int runs[][2] = {{2, 0}, {1, 0}, {3, 0}, {2, 1}, {1, 5}};
    CHECK_MSG(run_spec(&m, spec, 2, 0, q.tokens, q.T, a, NULL, &err) == LD_OK, "%s", err.msg);
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        CHECK(run_spec(&m, spec, runs[r][0], runs[r][1], q.tokens, q.T, b, NULL, &err) == LD_OK);
        CHECK_MSG(!memcmp(a, b, n * sizeof *a), "%s %s: %d threads, calls of %d: other bits", model, spec,
                  runs[r][0], runs[r][1]);
    }
    free(a);
    free(b);
    close_dsm(&m);
    return 0;
}

static int test_ds_variants_deterministic(void)
{
    static const char *const v3[] = {"mla=splitk", "combine=fused", "rope=bf16", NULL};
    static const char *const v32[] = {"mla=splitk", "indexer=bf16", "indexer=fp8", NULL};
    static const char *const v4[] = {"combine=fused", "rope=bf16", "indexer=bf16", "indexer=fp8",
                                     "mhc=sinkhorn-bf16", NULL};
    for (int i = 0; v3[i]; i++)
        if (deterministic("deepseek-v3", v3[i])) return 1;
    for (int i = 0; v32[i]; i++)
        if (deterministic("deepseek-v32", v32[i])) return 1;
    for (int i = 0; v4[i]; i++)
        if (deterministic("deepseek-v4", v4[i])) return 1;
    return 0;
}

/* mla=splitk over LONG_T positions (three splits of LD_DSV_MLA_SPLIT, the
 * last partial): against mla=absorbed within fp32 rounding but not its
 * bits, and the same bits prefill, token by token or in calls of 7, with
 * 1 or 3 threads */
static int test_ds_mla_splitk_long(void)
{
    dsm m;
    if (open_dsm("deepseek-v3", &m)) return 1;
    CHECK(m.v3->cfg.max_pos >= LONG_T && LONG_T > 2 * LD_DSV_MLA_SPLIT);
    int32_t toks[LONG_T];
    for (int t = 0; t < LONG_T; t++) toks[t] = (int32_t)((t * 37 + 11) % m.vocab);
    size_t n = (size_t)LONG_T * (size_t)m.vocab;
    float *ab = malloc(n * sizeof *ab), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    CHECK(ab && a && b);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(run_spec(&m, "mla=absorbed", 2, 0, toks, LONG_T, ab, NULL, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(run_spec(&m, "mla=splitk", 2, 0, toks, LONG_T, a, NULL, &err) == LD_OK, "%s", err.msg);
    /* the positions past the first split */
    size_t off = (size_t)(LD_DSV_MLA_SPLIT + 1) * (size_t)m.vocab;
    double e = nerr(a + off, ab + off, n - off, NULL);
    fprintf(stderr, "  deepseek-v3 %d tokens: mla=splitk vs absorbed past position %d: nerr %.3g\n", LONG_T,
            LD_DSV_MLA_SPLIT, e);
    CHECK_MSG(e > 0 && e < 1e-5, "splitk vs absorbed %.3g", e);
    static const int runs[][2] = {{1, 0}, {3, 1}, {2, 7}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        CHECK(run_spec(&m, "mla=splitk", runs[r][0], runs[r][1], toks, LONG_T, b, NULL, &err) == LD_OK);
        CHECK_MSG(!memcmp(a, b, n * sizeof *a), "splitk: %d threads, calls of %d: other bits", runs[r][0],
                  runs[r][1]);
    }
    free(ab);
    free(a);
    free(b);
    close_dsm(&m);
    return 0;
}

/* The indexer variants on a LONG_T-token sequence (V3.2: 4 of up to 150
 * positions; V4: 3 of up to 37 CSA entries): how many top-k selections
 * they change against the reference kernels' (no transformers reference
 * at this length: the reference kernels match it on the short ones) */
static int test_ds_indexer_long(void)
{
    static const char *const models[] = {"deepseek-v32", "deepseek-v4"};
    static const char *const specs[] = {"indexer=bf16", "indexer=fp8"};
    for (int mi = 0; mi < 2; mi++) {
        dsm m;
        if (open_dsm(models[mi], &m)) return 1;
        int32_t toks[LONG_T];
        for (int t = 0; t < LONG_T; t++) toks[t] = (int32_t)((t * 53 + 7) % m.vocab);
        size_t n = (size_t)LONG_T * (size_t)m.vocab, ns = (size_t)m.layers * LONG_T * (size_t)m.topk;
        float *l0 = malloc(n * sizeof *l0), *l = malloc(n * sizeof *l);
        int32_t *s0 = malloc(ns * sizeof *s0), *s1 = malloc(ns * sizeof *s1);
        CHECK(l0 && l && s0 && s1);
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(run_spec(&m, NULL, 2, 0, toks, LONG_T, l0, s0, &err) == LD_OK, "%s", err.msg);
        int total = 0;
        for (size_t j = 0; j < ns; j++) total += s0[j] >= 0;
        size_t per = LONG_T * (size_t)m.topk; /* one layer's selections */
        for (int v = 0; v < 2; v++) {
            CHECK_MSG(run_spec(&m, specs[v], 2, 0, toks, LONG_T, l, s1, &err) == LD_OK, "%s", err.msg);
            int changed = count_diff(s0, s1, ns), first = -1, first_changed = 0;
            int first_total = 0;
            for (int ly = 0; ly < m.layers && first < 0; ly++)
                if ((first_changed = count_diff(s0 + (size_t)ly * per, s1 + (size_t)ly * per, per)) > 0) first = ly;
            for (size_t j = 0; first >= 0 && j < per; j++) first_total += s0[(size_t)first * per + j] >= 0;
            double d = nerr(l, l0, n, NULL);
            fprintf(stderr, "  %-12s %d tokens, %-12s: top-k selections changed %d of %d (the first indexed layer "
                    "that changes, %d: %d of %d), logits from the reference kernels %.3g\n", models[mi], LONG_T,
                    specs[v], changed, total, first, first_changed, first_total, d);
            /* the first changed layer's changes are the variant's own (the
             * later ones add what its new hidden states change) */
            CHECK_MSG(changed > 0 && first_changed <= first_total / 4 && d > 0, "%s %s: %d of %d changed", models[mi],
                      specs[v], changed, total);
        }
        free(l0);
        free(l);
        free(s0);
        free(s1);
        close_dsm(&m);
    }
    return 0;
}

/* ------------------------------------------------------------ kernels */

static float frand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* the split-KV latent attention against the reference one: one split of
 * at least n is the same function with other rounding, several splits
 * too; items computed apart give the same bits; the sparse form over
 * every position is the dense one */
static int test_ds_splitk_kernel(void)
{
    enum { H = 3, DN = 4, DR = 4, DV = 4, C = 8, T = 3, POS0 = 17, S = POS0 + T };
    static float q_abs[T * H * C], q[T * H * (DN + DR)], ckv[S * C], kpe[S * DR];
    static float ref[T * H * C], got[T * H * C], got2[T * H * C], sparse[T * H * C], scores[S], part[C];
    unsigned seed = 7;
    for (size_t i = 0; i < sizeof q_abs / sizeof *q_abs; i++) q_abs[i] = frand(&seed);
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = frand(&seed);
    for (size_t i = 0; i < sizeof ckv / sizeof *ckv; i++) ckv[i] = frand(&seed) * 3.0f;
    for (size_t i = 0; i < sizeof kpe / sizeof *kpe; i++) kpe[i] = frand(&seed);
    ld_ref_mla_latent_attention(ref, q_abs, q, ckv, kpe, H, DN, DR, C, POS0, 0.7f, scores, 0, T * H);
    static const int splits[] = {1, 2, 5, 64};
    for (size_t k = 0; k < sizeof splits / sizeof *splits; k++) {
        ld_dsv_mla_latent_attention_splitk(got, q_abs, q, ckv, kpe, H, DN, DR, C, POS0, 0.7f, scores, part, NULL, 0,
                                           splits[k], 0, T * H);
        double e = nerr(got, ref, T * H * C, NULL);
        CHECK_MSG(e < 1e-6, "split %d: nerr %.3g", splits[k], e);
        if (splits[k] < POS0) CHECK_MSG(e > 0, "split %d: the reference's bits", splits[k]);
        /* items one at a time, in reverse: the same bits */
        for (size_t it = T * H; it-- > 0;)
            ld_dsv_mla_latent_attention_splitk(got2, q_abs, q, ckv, kpe, H, DN, DR, C, POS0, 0.7f, scores, part, NULL,
                                               0, splits[k], it, it + 1);
        CHECK(!memcmp(got, got2, sizeof got));
        /* the sparse form with every position selected: the dense bits */
        static int32_t sel[T * S];
        for (int t = 0; t < T; t++)
            for (int j = 0; j < S; j++) sel[t * S + j] = j <= POS0 + t ? j : -1;
        ld_dsv_mla_latent_attention_splitk(sparse, q_abs, q, ckv, kpe, H, DN, DR, C, POS0, 0.7f, scores, part, sel, S,
                                           splits[k], 0, T * H);
        CHECK(!memcmp(got, sparse, sizeof got));
    }
    /* a subset: the reference's sparse form within rounding */
    static int32_t sub[T * 5];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 5; j++) sub[t * 5 + j] = 3 * j + t;
    ld_ref_mla_latent_attention_sparse(ref, q_abs, q, ckv, kpe, H, DN, DR, C, POS0, 0.7f, scores, sub, 5, 0, T * H);
    ld_dsv_mla_latent_attention_splitk(got, q_abs, q, ckv, kpe, H, DN, DR, C, POS0, 0.7f, scores, part, sub, 5, 2, 0,
                                       T * H);
    CHECK(nerr(got, ref, T * H * C, NULL) < 1e-6);
    return 0;
}

/* Hadamard, the indexer operands, the bf16 rope table, the bf16 Sinkhorn */
static int test_ds_variant_kernels(void)
{
    /* H_n / sqrt(n) is orthonormal and its own inverse */
    float x[16], y[16];
    unsigned seed = 3;
    for (int i = 0; i < 16; i++) x[i] = y[i] = frand(&seed);
    CHECK(ld_dsv_hadamard(y, 16) == 1);
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 16; i++) {
        n0 += (double)x[i] * x[i];
        n1 += (double)y[i] * y[i];
    }
    CHECK(fabs(n0 - n1) < 1e-5 * n0);
    CHECK(ld_dsv_hadamard(y, 16) == 1);
    for (int i = 0; i < 16; i++) CHECK(fabsf(x[i] - y[i]) < 1e-6f);
    float e4[4] = {1, 0, 0, 0};
    CHECK(ld_dsv_hadamard(e4, 4) == 1 && e4[0] == 0.5f && e4[3] == 0.5f);
    float z[3] = {1, 2, 3};
    CHECK(ld_dsv_hadamard(z, 3) == 0 && z[2] == 3.0f);
    /* fp8 operands: on the grid of e4m3 times the row's scale */
    float r[2 * 16];
    for (int i = 0; i < 32; i++) r[i] = frand(&seed) * (i < 16 ? 1.0f : 100.0f);
    ld_dsv_index_fp8(r, 2, 16);
    for (int row = 0; row < 2; row++) {
        float amax = 0;
        for (int i = 0; i < 16; i++) amax = fmaxf(amax, fabsf(r[row * 16 + i]));
        CHECK(amax > 0 && fabsf(amax - 448.0f * (amax / 448.0f)) == 0);
        for (int i = 0; i < 16; i++) {
            float v = r[row * 16 + i] / (amax / 448.0f);
            CHECK_MSG(fabsf(ld_var_e4m3_round(v) - v) <= 1e-3f * fabsf(v) + 1e-6f, "row %d: %g off the grid", row,
                      (double)v);
        }
    }
    /* the indexer's scores from its variants' operands, against fp32 ones
     * on random data: bf16 within 1e-2, FP8 within 1e-1 (normalised), and
     * both other numbers */
    {
        enum { NH = 4, DI = 16, NK = 12 };
        float iq[3][NH * DI], ik[3][NK * DI], iw[3][NH], sc[3][NK];
        for (int i = 0; i < NH * DI; i++) iq[0][i] = iq[1][i] = iq[2][i] = frand(&seed);
        for (int i = 0; i < NK * DI; i++) ik[0][i] = ik[1][i] = ik[2][i] = frand(&seed);
        for (int i = 0; i < NH; i++) iw[0][i] = iw[1][i] = iw[2][i] = frand(&seed) + 1.5f;
        ld_dsv_round_bf16(iq[1], NH * DI);
        ld_dsv_round_bf16(ik[1], NK * DI);
        ld_dsv_round_bf16(iw[1], NH);
        ld_dsv_index_fp8(iq[2], NH, DI);
        ld_dsv_index_fp8(ik[2], NK, DI);
        for (int v = 0; v < 3; v++) ld_ref_ds_index_scores(sc[v], iq[v], iw[v], ik[v], NH, DI, NK);
        double eb = nerr(sc[1], sc[0], NK, NULL), ef = nerr(sc[2], sc[0], NK, NULL);
        fprintf(stderr, "  indexer scores on random data: bf16 operands nerr %.3g, fp8 %.3g\n", eb, ef);
        CHECK(eb > 0 && eb < 1e-2 && ef > 0 && ef < 1e-1);
    }
    /* rope: the _ex form without the table's rounding is the plain one;
     * with it, c and s on the bf16 grid */
    float inv[4] = {1.0f, 0.3f, 0.05f, 0.001f}, a[2][16], b[16], b0[16];
    for (int i = 0; i < 16; i++) a[0][i] = a[1][i] = b[i] = b0[i] = frand(&seed);
    ld_ref_ds_rope(a[0], 16, 0, 2, 8, 8, inv, 1.1f, 1, 5, 0, 1);
    ld_ref_ds_rope_ex(a[1], 16, 0, 2, 8, 8, inv, 1.1f, 1, 5, 0, 0, 1);
    CHECK(!memcmp(a[0], a[1], sizeof a[0]));
    ld_ref_ds_rope_ex(b, 16, 0, 2, 8, 8, inv, 1.1f, 1, 5, 1, 0, 1);
    double e = nerr(b, a[0], 16, NULL);
    CHECK_MSG(e > 0 && e < 1e-2, "rope bf16 table: %.3g", e);
    float c4[16], d4[16];
    for (int i = 0; i < 16; i++) c4[i] = d4[i] = frand(&seed);
    ld_ref_ds4_rope(c4, 2, 8, 4, inv, 1.0f, 9, 0);
    ld_ref_ds4_rope_ex(d4, 2, 8, 4, inv, 1.0f, 9, 0, 0);
    CHECK(!memcmp(c4, d4, sizeof c4));
    memcpy(d4, b0, sizeof d4);
    memcpy(c4, b0, sizeof c4);
    ld_ref_ds4_rope(c4, 2, 8, 4, inv, 1.0f, 9, 0);
    ld_ref_ds4_rope_ex(d4, 2, 8, 4, inv, 1.0f, 9, 0, 1);
    e = nerr(d4, c4, 16, NULL);
    CHECK_MSG(e > 0 && e < 1e-2, "ds4 rope bf16 table: %.3g", e);
    /* Sinkhorn: _ex(0) is the plain one; _ex(1) leaves comb on the bf16
     * grid, near doubly stochastic */
    enum { N = 4, D = 8, R = (2 + N) * N };
    float X[N * D], fn[R * N * D], base[R], scale[3] = {0.5f, 0.7f, 1.3f};
    for (int i = 0; i < N * D; i++) X[i] = frand(&seed);
    for (int i = 0; i < R * N * D; i++) fn[i] = frand(&seed) * 0.3f;
    for (int i = 0; i < R; i++) base[i] = frand(&seed);
    float post[2][N], comb[2][N * N], u[2][D], scratch[N * D + R];
    ld_ref_ds4_hc_pre(X, N, D, fn, base, scale, 20, 1e-6f, 1e-6f, post[0], comb[0], u[0], scratch);
    ld_ref_ds4_hc_pre_ex(X, N, D, fn, base, scale, 20, 1e-6f, 1e-6f, 0, post[1], comb[1], u[1], scratch);
    CHECK(!memcmp(comb[0], comb[1], sizeof comb[0]) && !memcmp(u[0], u[1], sizeof u[0]));
    ld_ref_ds4_hc_pre_ex(X, N, D, fn, base, scale, 20, 1e-6f, 1e-6f, 1, post[1], comb[1], u[1], scratch);
    CHECK(memcmp(comb[0], comb[1], sizeof comb[0]) != 0 && !memcmp(u[0], u[1], sizeof u[0]));
    for (int k = 0; k < N; k++) {
        float cs = 0;
        for (int j = 0; j < N; j++) {
            CHECK(ld_var_bf16_round(comb[1][j * N + k]) == comb[1][j * N + k]);
            cs += comb[1][j * N + k];
        }
        CHECK_MSG(fabsf(cs - 1.0f) < 2e-2f, "column %d sums to %g", k, (double)cs);
    }
    /* FP8 activations with ue8m0 scales: per 128 block a power-of-two
     * scale s >= amax / 448, every value e4m3(x / s) s */
    enum { K = 200 };
    static float act[2 * K], q8[2 * K], q8u[2 * K];
    for (int i = 0; i < 2 * K; i++) act[i] = frand(&seed) * (i % 3 ? 0.01f : 5.0f);
    ld_var_fp8_act(q8, act, 2, K);
    ld_var_fp8_act_ue8m0(q8u, act, 2, K);
    CHECK(memcmp(q8, q8u, sizeof q8) != 0);
    for (int t = 0; t < 2; t++)
        for (int blk = 0; blk < K; blk += 128) {
            int bend = blk + 128 < K ? blk + 128 : K;
            float amax = 1e-4f;
            for (int i = blk; i < bend; i++) amax = fmaxf(amax, fabsf(act[t * K + i]));
            int ex;
            float f = frexpf(amax / 448.0f, &ex), sc = f == 0.5f ? amax / 448.0f : ldexpf(1.0f, ex);
            CHECK(frexpf(sc, &ex) == 0.5f && sc >= amax / 448.0f && sc < amax / 224.0f);
            for (int i = blk; i < bend; i++) {
                float v = q8u[t * K + i] / sc;
                CHECK_MSG(ld_var_e4m3_round(v) == v && fabsf(v) <= 448.0f, "%d: %g", i, (double)v);
                CHECK(fabsf(q8u[t * K + i] - act[t * K + i]) <= sc * 16.0f); /* half a step of 2^5 at the top */
            }
        }
    CHECK(nerr(q8u, act, 2 * K, NULL) < 0.1 && nerr(q8, act, 2 * K, NULL) < 0.1);
    /* the scaling of the routed sum */
    float yv[3] = {1, -2, 0.5f};
    ld_ref_ds_scale(yv, 2.5f, 0, 3);
    CHECK(yv[0] == 2.5f && yv[1] == -5.0f && yv[2] == 1.25f);
    return 0;
}

/* ------------------------------------------------------------ specs and labels */

static int test_ds_variant_specs(void)
{
    static const char *const good[] = {"mla=splitk",    "indexer=bf16", "indexer=fp8", "rope=bf16",
                                       "combine=fused", "mhc=sinkhorn-bf16", "rope=ref,indexer=ref"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        ld_cpu_kernels k = ld_cpu_kernels_default(0);
        ld_error err;
        CHECK_MSG(ld_cpu_kernels_parse(good[i], &k, &err) == LD_OK, "%s: %s", good[i], err.msg);
    }
    static const struct {
        const char *spec, *needle;
    } bad[] = {{"rope=fp8", "rope has no variant 'fp8'"},
               {"indexer=fp8act", "indexer has no variant 'fp8act'"},
               {"mla=fused", "mla has no variant 'fused'"},
               {"matmul=sinkhorn-bf16", "no variant 'sinkhorn-bf16'"},
               {"rotary=bf16", "(matmul, attention, rmsnorm, swiglu, mla, router, combine, mhc, indexer, rope)"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ld_cpu_kernels k = ld_cpu_kernels_default(0);
        ld_error err;
        ld_error_clear(&err);
        CHECK(ld_cpu_kernels_parse(bad[i].spec, &k, &err) == LD_ERR_USAGE);
        CHECK_MSG(strstr(err.msg, bad[i].needle), "%s: %s", bad[i].spec, err.msg);
    }
    /* the variants --compare-kernels runs: each parses, new ones listed */
    static const char *const listed[] = {"mla=splitk", "indexer=bf16", "indexer=fp8", "rope=bf16", "combine=fused",
                                         "mhc=sinkhorn-bf16"};
    for (size_t i = 0; i < sizeof listed / sizeof *listed; i++) {
        int found = 0;
        for (size_t j = 0; ld_cpu_kernel_variants[j]; j++) found |= !strcmp(ld_cpu_kernel_variants[j], listed[i]);
        CHECK_MSG(found, "%s not in ld_cpu_kernel_variants", listed[i]);
    }
    /* which models a variant applies to */
    CHECK(ld_cpu_kernel_variant_applies("indexer=fp8", LD_KF_INDEXER) &&
          !ld_cpu_kernel_variant_applies("indexer=fp8", LD_KF_MLA | LD_KF_DEEPSEEK) &&
          !ld_cpu_kernel_variant_applies("indexer=fp8", 0));
    CHECK(!ld_cpu_kernel_variant_applies("rope=bf16", 0) && ld_cpu_kernel_variant_applies("matmul=bf16", 0));
    CHECK(ld_cpu_kernel_variant_applies("combine=fused", LD_KF_DEEPSEEK | LD_KF_MHC) &&
          !ld_cpu_kernel_variant_applies("combine=bf16", LD_KF_DEEPSEEK | LD_KF_MHC));
    CHECK(!ld_cpu_kernel_variant_applies("mhc=sinkhorn-bf16", LD_KF_DEEPSEEK | LD_KF_MLA));
    CHECK(!ld_cpu_kernel_variant_applies("mla=splitk", LD_KF_DEEPSEEK | LD_KF_MHC));
    return 0;
}

/* engine/models/lm.c hands every variant of a spec to the session: the model
 * opened through ld_lm_open and run with ld_lm_session_create's kernels
 * gives run_spec's bits, and other bits than the reference's. */
static int test_ds_lm_hands_variants_to_session(void)
{
    static const struct {
        const char *model, *spec;
    } cases_[] = {{"deepseek-v3", "rope=bf16,combine=fused,mla=splitk"}, {"deepseek-v32", "indexer=fp8"},
                  {"deepseek-v4", "mhc=sinkhorn-bf16,combine=fused"}, {"deepseek-v4", "mhc=bf16,rope=bf16"}};
    for (size_t c = 0; c < sizeof cases_ / sizeof *cases_; c++) {
        dsm m;
        if (open_dsm(cases_[c].model, &m)) return 1;
        seq q;
        CHECK(load_seq(cases_[c].model, 1, &q) == 0);
        size_t n = (size_t)q.T * (size_t)m.vocab;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *r = malloc(n * sizeof *r);
        CHECK(a && b && r);
        ld_error err;
        ld_error_clear(&err);
        CHECK(run_spec(&m, cases_[c].spec, 1, 0, q.tokens, q.T, a, NULL, &err) == LD_OK);
        CHECK(run_spec(&m, "", 1, 0, q.tokens, q.T, r, NULL, &err) == LD_OK);
        close_dsm(&m);
        ld_cpu_kernels k = ld_cpu_kernels_default(0);
        CHECK(ld_cpu_kernels_parse(cases_[c].spec, &k, &err) == LD_OK);
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", cases_[c].model);
        ld_lm *lm = NULL;
        ld_backend *be = NULL;
        ld_lm_session *s = NULL;
        CHECK_MSG(ld_lm_open(dir, &lm, &err) == LD_OK, "%s: %s", dir, err.msg);
        unsigned want = !strcmp(cases_[c].model, "deepseek-v3")    ? LD_KF_DEEPSEEK | LD_KF_MLA
                        : !strcmp(cases_[c].model, "deepseek-v32") ? LD_KF_DEEPSEEK | LD_KF_MLA | LD_KF_INDEXER
                                                                   : LD_KF_DEEPSEEK | LD_KF_MHC | LD_KF_INDEXER;
        CHECK_MSG(ld_lm_info_of(lm)->kernel_features == want, "%s: features %u, expected %u", cases_[c].model,
                  ld_lm_info_of(lm)->kernel_features, want);
        CHECK(ld_backend_cpu_create_ex(1, 0, cases_[c].spec, &be, &err) == LD_OK);
        CHECK(ld_lm_session_create(lm, be, &k, MAX_T, MAX_T, &s, &err) == LD_OK);
        CHECK_MSG(ld_lm_eval(s, q.tokens, q.T, b, NULL, &err) == LD_OK, "%s", err.msg);
        ld_lm_session_destroy(s);
        ld_backend_destroy(be);
        ld_lm_close(lm);
        CHECK_MSG(!memcmp(a, b, n * sizeof *a), "%s %s: engine/models/lm.c's session gives other bits", cases_[c].model,
                  cases_[c].spec);
        CHECK_MSG(memcmp(a, r, n * sizeof *a), "%s %s: the reference's bits", cases_[c].model, cases_[c].spec);
        free(a);
        free(b);
        free(r);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_ds_variant_specs),
    LD_CASE(test_ds_variant_kernels),
    LD_CASE(test_ds_splitk_kernel),
    LD_CASE(test_ds_variant_bands),
    LD_CASE(test_ds_variants_deterministic),
    LD_CASE(test_ds_mla_splitk_long),
    LD_CASE(test_ds_indexer_long),
    LD_CASE(test_ds_fp8_ue8m0),
    LD_CASE(test_ds_lm_hands_variants_to_session),
};

LD_TEST_MAIN(cases)
