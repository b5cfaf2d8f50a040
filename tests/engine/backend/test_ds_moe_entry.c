/* test_ds_moe_entry.c - backend.h's moe entry (the routed experts' weighted
 * sum and the shared expert on the backend) on the reference and CPU
 * backends: against a per-token oracle of the plain-C reference kernels
 * (bitwise on "ref", to rounding on "cpu"), a token's bits independent of
 * T and of the other tokens, the argument checks, and the DeepSeek-V4
 * session through the entry giving bitwise the host loop's logits, hidden
 * planes and experts on the committed fixtures (and transformers' logits). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"

#define MROOT LD_TESTDATA_DIR "/models/"

typedef struct backend_kind {
    const char *name;
    ld_status (*create)(int n_threads, ld_backend **out, ld_error *err);
} backend_kind;
static const backend_kind backends[] = {{"ref", ld_backend_ref_create}, {"cpu", ld_backend_cpu_create}};
static const backend_kind host_backends[] = {{"ref-host", ld_test_ref_host_create},
                                              {"cpu-host", ld_test_cpu_host_create}};

static float frand(void)
{
    return (float)next_u32() / 4294967296.0f * 2.0f - 1.0f;
}

/* ------------------------------------------------------------ a random MoE */

#define E_MAX 8
#define T_MAX 9

/* E experts of width I over D (expert `absent` without weights), a shared
 * one of width IS, as host data of dtype dt (F32 or BF16) and backend
 * weights */
typedef struct moe_case {
    int D, I, IS, E, K, T, absent;
    ld_dtype dt;
    void *data[E_MAX + 1][3]; /* [e][gate, up, down]; e = E: the shared */
    ld_moe_expert ex[E_MAX], shared;
    float *x;
    int32_t idx[T_MAX * E_MAX];
    float w[T_MAX * E_MAX];
} moe_case;

static void *random_matrix(ld_dtype dt, size_t n, float scale)
{
    if (dt == LD_DT_F32) {
        float *p = malloc(n * sizeof *p);
        for (size_t i = 0; p && i < n; i++) p[i] = frand() * scale;
        return p;
    }
    uint16_t *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) {
        float f = frand() * scale;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        p[i] = (uint16_t)(u >> 16);
    }
    return p;
}

/* the route: K distinct experts ascending per token, never `absent`,
 * weights in (0, 2) */
static void random_route(moe_case *c)
{
    for (int t = 0; t < c->T; t++) {
        int chosen[E_MAX] = {0}, n = 0;
        while (n < c->K) {
            int e = (int)(next_u32() % (uint32_t)c->E);
            if (e == c->absent || chosen[e]) continue;
            chosen[e] = 1;
            n++;
        }
        for (int e = 0, k = 0; e < c->E; e++)
            if (chosen[e]) {
                c->idx[t * c->K + k] = e;
                c->w[t * c->K + k] = (frand() + 1.0f) * 0.999f;
                k++;
            }
    }
}

static ld_status load_w(ld_backend *be, const moe_case *c, const void *data, int rows, int cols, ld_weight **w,
                        ld_error *err)
{
    ld_host_tensor h = {.dtype = c->dt, .data = data, .rows = rows, .cols = cols};
    return be->ops->weight_load(be, &h, w, err);
}

static int case_make(moe_case *c, ld_dtype dt, int T)
{
    memset(c, 0, sizeof *c);
    c->D = 24;
    c->I = 12;
    c->IS = 20;
    c->E = 6;
    c->K = 3;
    c->T = T;
    c->absent = 4;
    c->dt = dt;
    for (int e = 0; e <= c->E; e++) {
        if (e == c->absent) continue;
        int I = e == c->E ? c->IS : c->I;
        c->data[e][0] = random_matrix(dt, (size_t)I * (size_t)c->D, 0.4f);
        c->data[e][1] = random_matrix(dt, (size_t)I * (size_t)c->D, 0.4f);
        c->data[e][2] = random_matrix(dt, (size_t)I * (size_t)c->D, 0.4f);
        CHECK(c->data[e][0] && c->data[e][1] && c->data[e][2]);
    }
    c->x = random_matrix(LD_DT_F32, (size_t)T * (size_t)c->D, 2.0f);
    CHECK(c->x);
    random_route(c);
    return 0;
}

static ld_status case_load(moe_case *c, ld_backend *be, ld_error *err)
{
    for (int e = 0; e <= c->E; e++) {
        if (e == c->absent) continue;
        int I = e == c->E ? c->IS : c->I;
        ld_moe_expert *x = e == c->E ? &c->shared : &c->ex[e];
        LD_TRY(load_w(be, c, c->data[e][0], I, c->D, &x->gate, err));
        LD_TRY(load_w(be, c, c->data[e][1], I, c->D, &x->up, err));
        LD_TRY(load_w(be, c, c->data[e][2], c->D, I, &x->down, err));
    }
    return LD_OK;
}

static void case_unload(moe_case *c, ld_backend *be)
{
    for (int e = 0; e <= c->E; e++) {
        ld_moe_expert *x = e == c->E ? &c->shared : &c->ex[e];
        ld_weight *ws[3] = {x->gate, x->up, x->down};
        for (int i = 0; i < 3; i++)
            if (ws[i]) be->ops->weight_free(be, ws[i]);
        memset(x, 0, sizeof *x);
    }
}

static void case_free(moe_case *c)
{
    for (int e = 0; e <= c->E; e++)
        for (int i = 0; i < 3; i++) free(c->data[e][i]);
    free(c->x);
}

/* ------------------------------------------------------------ the oracle */

/* one expert of data d (gate, up, down) on ONE row x [D]: out [D] */
static void oracle_expert(float *out, const float *x, void *const d[3], ld_kdt dt, int D, int I, int act, float limit)
{
    float g[64], u[64], row[64];
    ld_ref_matmul(g, x, d[0], dt, NULL, LD_KDT_F32, 1, D, I, row, 0, (size_t)I);
    ld_ref_matmul(u, x, d[1], dt, NULL, LD_KDT_F32, 1, D, I, row, 0, (size_t)I);
    if (act == LD_MOE_ACT_CLAMPED) ld_ref_ds4_clamped_swiglu(g, g, u, limit, (size_t)I);
    else ld_ref_swiglu(g, g, u, 0, (size_t)I);
    ld_ref_matmul(out, g, d[2], dt, NULL, LD_KDT_F32, 1, I, D, row, 0, (size_t)D);
}

/* y [T][D] by the entry's definition, token by token */
static void oracle(float *y, const moe_case *c, int with_shared, int act, float limit, int combine, float fscale)
{
    ld_kdt dt = c->dt == LD_DT_F32 ? LD_KDT_F32 : LD_KDT_BF16;
    size_t D = (size_t)c->D;
    float o[64];
    for (int t = 0; t < c->T; t++) {
        float *yt = y + (size_t)t * D;
        const float *xt = c->x + (size_t)t * D;
        memset(yt, 0, D * sizeof *yt);
        for (int k = 0; k < c->K; k++) {
            int e = c->idx[t * c->K + k];
            float w = c->w[t * c->K + k];
            oracle_expert(o, xt, c->data[e], dt, c->D, c->I, act, limit);
            if (combine != LD_MOE_COMBINE_BF16) {
                ld_ref_ds_axpy(yt, o, w, 0, D);
                continue;
            }
            for (size_t j = 0; j < D; j++)
                yt[j] = ld_var_bf16_round(yt[j] + ld_var_bf16_round(ld_var_bf16_round(o[j]) * ld_var_bf16_round(w)));
        }
        if (combine == LD_MOE_COMBINE_FUSED) ld_ref_ds_scale(yt, fscale, 0, D);
        if (!with_shared) continue;
        oracle_expert(o, xt, c->data[c->E], dt, c->D, c->IS, act, limit);
        for (size_t j = 0; j < D; j++) yt[j] = yt[j] + o[j];
    }
}

/* the entry on the case's tokens [t0, t0 + T) into y (host) */
static ld_status run_entry(ld_backend *be, const moe_case *c, int t0, int T, int with_shared, int act, float limit,
                           int combine, float fscale, float *y, ld_error *err)
{
    const ld_backend_ops *o = be->ops;
    ld_buf *bx = NULL, *by = NULL;
    size_t n = (size_t)T * (size_t)c->D;
    ld_status st = o->buf_alloc(be, n, &bx, err);
    if (st == LD_OK) st = o->buf_alloc(be, n, &by, err);
    if (st == LD_OK) st = o->buf_write(be, bx, 0, c->x + (size_t)t0 * (size_t)c->D, n, err);
    if (st == LD_OK)
        st = o->moe(be, by, bx, c->idx + t0 * c->K, c->w + t0 * c->K, T, c->K, c->ex, c->E,
                    with_shared ? &c->shared : NULL, act, limit, combine, fscale, err);
    if (st == LD_OK) st = o->buf_read(be, by, 0, y, n, err);
    if (bx) o->buf_free(be, bx);
    if (by) o->buf_free(be, by);
    return st;
}

/* ------------------------------------------------------------ op level */

static int test_moe_entry_present(void)
{
    for (int b = 0; b < 2; b++) {
        ld_backend *be = NULL, *host = NULL;
        ld_error err;
        CHECK(backends[b].create(1, &be, &err) == LD_OK);
        CHECK(host_backends[b].create(1, &host, &err) == LD_OK);
        CHECK_MSG(be->ops->moe != NULL, "%s lacks moe", backends[b].name);
        CHECK_MSG(host->ops->moe == NULL, "%s's host path has moe", host_backends[b].name);
        ld_backend_destroy(be);
        ld_backend_destroy(host);
    }
    return 0;
}

/* every activation, combine and weight type, with and without the shared
 * expert, against the oracle: bitwise on ref, to rounding on cpu (its
 * matmul's own summation order).  K = 3, so that the order of the
 * additions shows in the bits (the V4 fixtures' two experts a token sum
 * the same either way). */
static int test_moe_entry_matches_oracle(void)
{
    static const ld_dtype dts[] = {LD_DT_F32, LD_DT_BF16};
    int cases = 0;
    for (int di = 0; di < 2; di++) {
        moe_case c;
        if (case_make(&c, dts[di], T_MAX)) return 1;
        for (int b = 0; b < 2; b++)
            for (int threads = 1; threads <= 3; threads += 2) {
                ld_backend *be = NULL;
                ld_error err;
                ld_error_clear(&err);
                CHECK(backends[b].create(threads, &be, &err) == LD_OK);
                CHECK_MSG(case_load(&c, be, &err) == LD_OK, "%s", err.msg);
                for (int act = 0; act < 2; act++)
                    for (int comb = 0; comb < 3; comb++)
                        for (int sh = 0; sh < 2; sh++) {
                            float y[T_MAX * 24], want[T_MAX * 24];
                            float limit = act ? 0.35f : 0.0f, fs = 2.5f;
                            size_t n = (size_t)c.T * (size_t)c.D;
                            oracle(want, &c, sh, act, limit, comb, fs);
                            CHECK_MSG(run_entry(be, &c, 0, c.T, sh, act, limit, comb, fs, y, &err) == LD_OK, "%s",
                                      err.msg);
                            double mx, e = nerr(y, want, n, &mx);
                            if (b == 0)
                                CHECK_MSG(memcmp(y, want, n * sizeof *y) == 0,
                                          "ref, %s, act %d, combine %d, shared %d: max|d| %.3g", di ? "bf16" : "f32",
                                          act, comb, sh, mx);
                            else
                                CHECK_MSG(e < (comb == LD_MOE_COMBINE_BF16 ? 2e-2 : 1e-5),
                                          "cpu, act %d, combine %d, shared %d: nerr %.3g", act, comb, sh, e);
                            cases++;
                        }
                case_unload(&c, be);
                ld_backend_destroy(be);
            }
        case_free(&c);
    }
    fprintf(stderr, "  %d entry calls against the oracle\n", cases);
    return 0;
}

/* a token's bits depend on its row and route only: all T tokens at once,
 * each alone, and two other groupings (other tokens sharing its experts)
 * agree bitwise, on both backends and thread counts */
static int test_moe_entry_token_independent(void)
{
    moe_case c;
    if (case_make(&c, LD_DT_BF16, T_MAX)) return 1;
    size_t D = (size_t)c.D, n = (size_t)c.T * D;
    for (int b = 0; b < 2; b++)
        for (int threads = 1; threads <= 3; threads += 2)
            for (int comb = 0; comb < 3; comb++) {
                ld_backend *be = NULL;
                ld_error err;
                ld_error_clear(&err);
                CHECK(backends[b].create(threads, &be, &err) == LD_OK);
                CHECK_MSG(case_load(&c, be, &err) == LD_OK, "%s", err.msg);
                float all[T_MAX * 24], part[T_MAX * 24];
                CHECK(run_entry(be, &c, 0, c.T, 1, 1, 0.5f, comb, 2.0f, all, &err) == LD_OK);
                /* pieces of the T tokens: each alone, then other groupings */
                static const int pieces[][T_MAX + 1] = {{1, 1, 1, 1, 1, 1, 1, 1, 1}, {4, 5}, {2, 7}, {3, 3, 3}};
                for (size_t s = 0; s < sizeof pieces / sizeof pieces[0]; s++) {
                    memset(part, 0xff, sizeof part);
                    for (int i = 0, t0 = 0; pieces[s][i]; t0 += pieces[s][i++])
                        CHECK(run_entry(be, &c, t0, pieces[s][i], 1, 1, 0.5f, comb, 2.0f, part + (size_t)t0 * D,
                                        &err) == LD_OK);
                    CHECK_MSG(memcmp(all, part, n * sizeof *all) == 0, "%s, %d threads, combine %d, pieces %zu",
                              backends[b].name, threads, comb, s);
                }
                case_unload(&c, be);
                ld_backend_destroy(be);
            }
    case_free(&c);
    return 0;
}

static int expect_usage(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T,
                        const ld_moe_expert *ex, int E, const ld_moe_expert *sh, int act, int comb, const char *what)
{
    ld_error err;
    ld_error_clear(&err);
    ld_status st = be->ops->moe(be, y, x, idx, w, T, 2, ex, E, sh, act, 1.0f, comb, 1.0f, &err);
    CHECK_MSG(st == LD_ERR_USAGE, "%s: status %d (%s)", what, (int)st, err.msg);
    CHECK_MSG(strstr(err.msg, "moe") || strstr(err.msg, "outside a buffer"), "%s: message '%s'", what, err.msg);
    return 0;
}

static int test_moe_entry_errors(void)
{
    moe_case c;
    if (case_make(&c, LD_DT_F32, 2)) return 1;
    for (int b = 0; b < 2; b++) {
        ld_backend *be = NULL;
        ld_buf *bx = NULL, *by = NULL, *small = NULL;
        ld_error err;
        CHECK(backends[b].create(1, &be, &err) == LD_OK);
        CHECK(case_load(&c, be, &err) == LD_OK);
        size_t n = 2 * (size_t)c.D;
        CHECK(be->ops->buf_alloc(be, n, &bx, &err) == LD_OK);
        CHECK(be->ops->buf_alloc(be, n, &by, &err) == LD_OK);
        CHECK(be->ops->buf_alloc(be, n - 1, &small, &err) == LD_OK);
        int32_t ok[4] = {0, 2, 1, 3}, out_of_range[4] = {0, 6, 1, 2}, descending[4] = {2, 1, 0, 3},
                twice[4] = {1, 1, 0, 2}, absent[4] = {0, 4, 1, 2};
        float w[4] = {0.5f, 0.25f, 1.0f, 0.75f};
        ld_moe_expert bad[E_MAX], half = c.shared;
        memcpy(bad, c.ex, sizeof bad);
        bad[2].down = bad[2].gate; /* [I][D] where [D][I] belongs */
        half.down = NULL;
        int r = expect_usage(be, by, bx, out_of_range, w, 2, c.ex, c.E, NULL, 1, 0, "id out of range") ||
                expect_usage(be, by, bx, descending, w, 2, c.ex, c.E, NULL, 1, 0, "descending ids") ||
                expect_usage(be, by, bx, twice, w, 2, c.ex, c.E, NULL, 1, 0, "an expert twice") ||
                expect_usage(be, by, bx, absent, w, 2, c.ex, c.E, NULL, 1, 0, "an absent expert") ||
                expect_usage(be, by, bx, ok, w, 2, bad, c.E, NULL, 1, 0, "a misshapen expert") ||
                expect_usage(be, by, bx, ok, w, 2, c.ex, c.E, &half, 1, 0, "a shared expert without down") ||
                expect_usage(be, by, bx, ok, w, 2, c.ex, c.E, NULL, 2, 0, "activation 2") ||
                expect_usage(be, by, bx, ok, w, 2, c.ex, c.E, NULL, 1, 3, "combine 3") ||
                expect_usage(be, bx, bx, ok, w, 2, c.ex, c.E, NULL, 1, 0, "y aliasing x") ||
                expect_usage(be, small, bx, ok, w, 2, c.ex, c.E, NULL, 1, 0, "a short y") ||
                expect_usage(be, by, bx, ok, w, -1, c.ex, c.E, NULL, 1, 0, "T < 0");
        CHECK(r == 0);
        CHECK(be->ops->moe(be, by, bx, ok, w, 0, 2, c.ex, c.E, NULL, 1, 1.0f, 0, 1.0f, &err) == LD_OK);
        be->ops->buf_free(be, bx);
        be->ops->buf_free(be, by);
        be->ops->buf_free(be, small);
        case_unload(&c, be);
        ld_backend_destroy(be);
    }
    case_free(&c);
    return 0;
}

/* ------------------------------------------------------------ the V4 session */

/* the backend under test with its moe wrapped: calls counted; refuse = 1:
 * every call LD_ERR_UNSUPPORTED (the session must fall back to its host
 * loop), else passed on */
static ld_backend_ops wrapped_ops;
static const ld_backend_ops *inner_ops;
static int moe_calls, moe_refuse;

static ld_status counting_moe(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T,
                              int K, const ld_moe_expert *experts, int E, const ld_moe_expert *shared, int act,
                              float limit, int combine, float fused_scale, ld_error *err)
{
    moe_calls++;
    if (moe_refuse) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "test: moe refused");
    return inner_ops->moe(be, y, x, idx, w, T, K, experts, E, shared, act, limit, combine, fused_scale, err);
}

static ld_status wrap(ld_status st, ld_backend *be)
{
    if (st != LD_OK) return st;
    inner_ops = be->ops;
    wrapped_ops = *be->ops;
    wrapped_ops.name = "moe-counted";
    wrapped_ops.moe = counting_moe;
    be->ops = &wrapped_ops;
    return LD_OK;
}

static ld_status ref_wrapped(int n, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_ref_create(n, out, err);
    return wrap(st, *out);
}

static ld_status cpu_wrapped(int n, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_cpu_create(n, out, err);
    return wrap(st, *out);
}

static const backend_kind wrapped[] = {{"ref", ref_wrapped}, {"cpu", cpu_wrapped}};

/* a sequence of the fixture's ref.json (fixtures.h) */
typedef ld_test_seq seq;

/* logits, hidden planes and experts of `q` on a fresh session: `threads`,
 * chunks of `batch`, calls of `call` tokens (0: one), variants `kspec` */
static ld_status run_session(const backend_kind *bk, const ld_ds4_model *m, int threads, int batch, int call,
                             const char *kspec, const seq *q, float *out, int32_t *ex, ld_error *err)
{
    ld_backend *be = NULL;
    ld_ds4_session *s = NULL;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, L = (size_t)m->cfg.n_layers, T = (size_t)q->T;
    size_t K = (size_t)m->cfg.top_k, P = L + 2;
    float *h = malloc(P * T * D * sizeof *h);
    int32_t *e = malloc(L * T * K * sizeof *e);
    ld_status st = h && e ? ld_cpu_kernels_parse(kspec, &k, err) : LD_ERR_NOMEM;
    if (st == LD_OK) st = bk->create(threads, &be, err);
    if (st == LD_OK) st = ld_ds4_session_create(m, be, 64, batch, &s, err);
    if (st == LD_OK) ld_ds4_session_set_kernels(s, &k);
    for (size_t t0 = 0; st == LD_OK && t0 < T;) {
        size_t n = call && (size_t)call < T - t0 ? (size_t)call : T - t0;
        st = ld_ds4_session_eval(s, q->tokens + t0, (int)n, out + t0 * V, h, e, err);
        for (size_t p = 0; st == LD_OK && p < P; p++) /* planes [P][T][D] of the whole sequence */
            memcpy(out + T * V + (p * T + t0) * D, h + p * n * D, n * D * sizeof *h);
        for (size_t l = 0; st == LD_OK && l < L; l++)
            memcpy(ex + (l * T + t0) * K, e + l * n * K, n * K * sizeof *e);
        t0 += n;
    }
    ld_ds4_session_destroy(s);
    ld_backend_destroy(be);
    free(h);
    free(e);
    return st;
}

/* the entry path (and a refusing entry's fallback) against the host loop,
 * bitwise: one prefill, chunks and token by token, 1 and 3 threads */
static int check_session(int b, const ld_ds4_model *m, const seq *q, const char *kspec, const char *name)
{
    size_t T = (size_t)q->T, L = (size_t)m->cfg.n_layers;
    size_t n = T * (size_t)m->cfg.vocab + (L + 2) * T * (size_t)m->cfg.hidden, ne = L * T * (size_t)m->cfg.top_k;
    float *base = calloc(n, sizeof *base), *got = calloc(n, sizeof *got);
    int32_t *ebase = calloc(ne, sizeof *ebase), *ex = calloc(ne, sizeof *ex);
    CHECK(base && got && ebase && ex);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(run_session(&host_backends[b], m, 1, 64, 0, kspec, q, base, ebase, &err) == LD_OK, "%s", err.msg);
    static const int shapes[][3] = {{1, 64, 0}, {3, 64, 0}, {1, 64, 1}, {3, 64, 1}, {3, 5, 0}, {1, 2, 7}};
    for (int refuse = 0; refuse < 2; refuse++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            memset(got, 0, n * sizeof *got);
            memset(ex, 0, ne * sizeof *ex);
            moe_calls = 0;
            moe_refuse = refuse;
            CHECK_MSG(run_session(&wrapped[b], m, shapes[k][0], shapes[k][1], shapes[k][2], kspec, q, got, ex,
                                  &err) == LD_OK,
                      "%s", err.msg);
            /* the path under test was taken: an entry call per MoE layer and
             * chunk; a refusal once, then the host loop */
            CHECK_MSG(refuse ? moe_calls == 1 : moe_calls >= (int)L, "%d moe calls", moe_calls);
            CHECK_MSG(memcmp(got, base, n * sizeof *got) == 0 && memcmp(ex, ebase, ne * sizeof *ex) == 0,
                      "%s on %s, '%s'%s: %d threads, batch %d, calls of %d differ from the host loop", name,
                      backends[b].name, kspec ? kspec : "", refuse ? " (refused)" : "", shapes[k][0], shapes[k][1],
                      shapes[k][2]);
        }
    free(base);
    free(got);
    free(ebase);
    free(ex);
    return 0;
}

static int open_model(const char *name, ld_ds4_model **m, seq *seqs)
{
    char dir[512];
    snprintf(dir, sizeof dir, MROOT "%s", name);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_ds4_model_open(dir, m, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_load_seqs(dir, seqs, 2) == 2);
    return 0;
}

static int test_moe_entry_v4_session_bitwise(void)
{
    const char *names[] = {"deepseek-v4", "deepseek-v4-fp4"};
    const char *specs[] = {NULL, "combine=fused", "combine=bf16", "mhc=bf16,combine=fused"};
    for (int i = 0; i < 2; i++) {
        ld_ds4_model *m = NULL;
        static seq seqs[2];
        if (open_model(names[i], &m, seqs)) return 1;
        for (int b = 0; b < 2; b++)
            for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
                if (check_session(b, m, &seqs[1], specs[k], names[i])) return 1;
        ld_ds4_model_close(m);
    }
    return 0;
}

/* through the entry, the logits still match transformers' */
static int test_moe_entry_v4_transformers(void)
{
    const char *names[] = {"deepseek-v4", "deepseek-v4-fp4"};
    for (int i = 0; i < 2; i++) {
        ld_ds4_model *m = NULL;
        static seq seqs[2];
        if (open_model(names[i], &m, seqs)) return 1;
        char dir[512];
        snprintf(dir, sizeof dir, MROOT "%s", names[i]);
        for (int b = 0; b < 2; b++)
            for (int j = 0; j < 2; j++) {
                const seq *q = &seqs[j];
                size_t T = (size_t)q->T, V = (size_t)m->cfg.vocab, L = (size_t)m->cfg.n_layers;
                size_t n = T * V + (L + 2) * T * (size_t)m->cfg.hidden;
                float *got = calloc(n, sizeof *got), *want = load_f32(dir, q->logits_file, T * V);
                int32_t *ex = calloc(L * T * (size_t)m->cfg.top_k, sizeof *ex);
                ld_error err;
                ld_error_clear(&err);
                CHECK(got && want && ex);
                moe_calls = 0;
                moe_refuse = 0;
                CHECK_MSG(run_session(&wrapped[b], m, 2, 64, 0, NULL, q, got, ex, &err) == LD_OK, "%s", err.msg);
                double mx, e = nerr(got, want, T * V, &mx);
                fprintf(stderr, "  %s %s seq %c: %d moe calls, logits nerr %.3g max|d| %.3g\n", backends[b].name,
                        names[i], 'a' + j, moe_calls, e, mx);
                CHECK(moe_calls == (int)L);
                CHECK_MSG(e < 1e-5, "%s on %s: logits nerr %.3g", names[i], backends[b].name, e);
                free(got);
                free(want);
                free(ex);
            }
        ld_ds4_model_close(m);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_moe_entry_present),
    LD_CASE(test_moe_entry_matches_oracle),
    LD_CASE(test_moe_entry_token_independent),
    LD_CASE(test_moe_entry_errors),
    LD_CASE(test_moe_entry_v4_session_bitwise),
    LD_CASE(test_moe_entry_v4_transformers),
};

LD_TEST_MAIN(cases)
