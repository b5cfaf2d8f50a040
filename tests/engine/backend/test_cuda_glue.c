/* test_cuda_glue.c - the CUDA backend's host code (engine/backend/cuda/backend_cuda*.c)
 * end to end on the CPU, over tests/support/cuda_mock.c (kernels/cuda/cuda_ops.h
 * computed by the plain-C reference leaves, every device range checked):
 * the sessions of the committed tiny models (DeepSeek-V4 and its FP4
 * experts, V3, V3 FP8, V3.2, Qwen3, Qwen3 FP8, Llama 3 BF16) through the
 * mock CUDA backend against the reference backend, under the kernel specs
 * all=ref, all=custom and matmul=tc and the session variants (V3's MLA
 * forms, combine=fused, V4's mhc=bf16 and mhc=sinkhorn-bf16):
 *  - one prefill, calls of 3 and token by token give bitwise the same
 *    logits (the backend's contract);
 *  - those logits are within 1e-5 (normalised) of the reference backend's
 *    under the same variants, and, for the default variants, of the
 *    committed transformers logits;
 *  - every DeepSeek entry of the op table the model's session should use
 *    was called (counted by wrapping the table), so that a session quietly
 *    falling back to its host path cannot pass for the backend;
 *  - FP4 / FP8 block weights reach their launchers (counted by the mock);
 *  - no device allocation outlives its backend;
 *  - 160 random tokens (the KV ring, the compressor and the indexer far
 *    past the fixtures) give the same bits in any call size and the
 *    reference backend's logits;
 *  - each device allocation of a session's run failing in turn: an
 *    LD_ERR_NOMEM, no leak, the backend still right afterwards;
 *  - the mock aborts on a range past an allocation and a copy the wrong way.
 * matmul=tc is bf16 activations (ld_var_matmul_bf16) where a weight is
 * BF16: Llama 3 BF16 runs it against the reference backend's matmul=bf16
 * (the same formula); where it is launched in a mixed model (V4 FP4's BF16
 * compressors) the reference is the plain one and the tolerance that of
 * bf16 activations.  Built only over the mock (CMakeLists.txt), label cpu. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "tests/support/cuda_mock.h"
#include "kernels/cuda/cuda_ops.h"
#include "engine/models/deepseek_v3/ds_forward.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "tests/support/fixtures.h"
#include "engine/models/dense/forward.h"
#include "tests/support/ld_test.h"
#include "engine/models/dense/model.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define MAX_TOKENS 64
#define TOL 1e-5
#define TC_TOL 1e-2 /* bf16 activations against fp32 ones */
#define LONG_T 160  /* the long runs: many ring wraps, compressed entries, picks */

static const char *const ksets[] = {"all=ref", "all=custom", "matmul=tc"};
#define N_KSETS 3
#define KSET_TC 2

/* ---------------------------------------------------------------- entry counts */

enum {
    C_MLA, C_ABSORB_Q, C_ABSORB_OUT, C_DS_ROUTE, C_INDEX_TOPK, C_HC_PRE, C_HC_POST, C_DS4_ROUTE, C_DS4_QKV,
    C_DS4_COMPRESS, C_DS4_INDEX, C_DS4_ATTENTION, C_COPY_COLS, C_DS4_HC_HEAD, C_MOE, C_DS4_ROUTE_MOE,
    C_DS4_INDEX_ATTENTION, N_COUNTED
};
static const char *const counted_names[N_COUNTED] = {
    "mla_latent", "mla_absorb_q",  "mla_absorb_out", "ds_route",  "index_topk",  "hc_pre", "hc_post", "ds4_route",
    "ds4_qkv",    "ds4_compress",  "ds4_index",      "ds4_attention", "copy_cols", "ds4_hc_head", "moe",
    "ds4_route_moe", "ds4_index_attention"};
static long counts[N_COUNTED];
/* 1: the counted table leaves ds4_route_moe and ds4_index_attention out
 * (the session then makes the two calls of each) */
static int no_fused;
static const ld_backend_ops *inner; /* the cuda backend's table (one for every instance) */
static ld_backend_ops counting;

static ld_status c_mla_latent(ld_backend *be, ld_buf *o, const ld_buf *qa, const ld_buf *q, const ld_buf *ckv,
                              const ld_buf *kpe, int T, int pos0, int H, int dn, int dr, int c, float scale,
                              const int32_t *sel, int k, int split, ld_error *err)
{
    counts[C_MLA]++;
    return inner->mla_latent(be, o, qa, q, ckv, kpe, T, pos0, H, dn, dr, c, scale, sel, k, split, err);
}

static ld_status c_absorb_q(ld_backend *be, ld_buf *qa, const ld_buf *q, const ld_weight *w, int T, int H, int dn,
                            int dr, int dv, int c, ld_error *err)
{
    counts[C_ABSORB_Q]++;
    return inner->mla_absorb_q(be, qa, q, w, T, H, dn, dr, dv, c, err);
}

static ld_status c_absorb_out(ld_backend *be, ld_buf *out, const ld_buf *o, const ld_weight *w, int T, int H, int dn,
                              int dv, int c, ld_error *err)
{
    counts[C_ABSORB_OUT]++;
    return inner->mla_absorb_out(be, out, o, w, T, H, dn, dv, c, err);
}

static ld_status c_ds_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *l, const float *bias, int T, int E,
                            int ng, int tg, int tk, int norm, float scale, ld_error *err)
{
    counts[C_DS_ROUTE]++;
    return inner->ds_route(be, idx, w, l, bias, T, E, ng, tg, tk, norm, scale, err);
}

static ld_status c_index_topk(ld_backend *be, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys,
                              int T, int pos0, int H, int dim, int k, ld_error *err)
{
    counts[C_INDEX_TOPK]++;
    return inner->index_topk(be, sel, q, w, keys, T, pos0, H, dim, k, err);
}

static ld_status c_hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *col, const ld_buf *X, const ld_buf *fn,
                          const float *base, const float *scale, int T, int N, int D, int iters, float ne, float he,
                          int mhc, ld_error *err)
{
    counts[C_HC_PRE]++;
    return inner->hc_pre(be, post, comb, col, X, fn, base, scale, T, N, D, iters, ne, he, mhc, err);
}

/* hc_pre with the norm after it: counted as hc_pre when it ran (refused,
 * the session calls hc_pre, counted there) */
static ld_status c_hc_pre_norm(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *col, const ld_buf *X,
                               const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                               float ne, float he, int mhc, const ld_weight *w, float eps, ld_buf *normed,
                               ld_error *err)
{
    ld_status st = inner->hc_pre_norm(be, post, comb, col, X, fn, base, scale, T, N, D, iters, ne, he, mhc, w, eps,
                                      normed, err);
    if (st == LD_OK) counts[C_HC_PRE]++;
    return st;
}

static ld_status c_hc_post(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *f, const ld_buf *post,
                           const ld_buf *comb, int T, int N, int D, ld_error *err)
{
    counts[C_HC_POST]++;
    return inner->hc_post(be, out, X, f, post, comb, T, N, D, err);
}

static ld_status c_ds4_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *l, const float *bias,
                             const int32_t *hash, int T, int E, int K, float scale, ld_error *err)
{
    counts[C_DS4_ROUTE]++;
    return inner->ds4_route(be, idx, w, l, bias, hash, T, E, K, scale, err);
}

static ld_status c_ds4_qkv(ld_backend *be, ld_buf *q, ld_buf *kvc, const ld_buf *kv, int T, int pos0, int H, int hd,
                           int kv_rows, float eps, const ld_ds4_rot *rope, ld_error *err)
{
    counts[C_DS4_QKV]++;
    return inner->ds4_qkv(be, q, kvc, kv, T, pos0, H, hd, kv_rows, eps, rope, err);
}

static ld_status c_ds4_compress(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate,
                                int T, int pos0, float eps, const ld_ds4_rot *rope, int iv, ld_error *err)
{
    counts[C_DS4_COMPRESS]++;
    return inner->ds4_compress(be, c, kv, gate, T, pos0, eps, rope, iv, err);
}

static ld_status c_ds4_index(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0,
                             int H, int dim, int ratio, int k, const ld_ds4_rot *rope, int iv, ld_error *err)
{
    counts[C_DS4_INDEX]++;
    return inner->ds4_index(be, sel, q, w, keys, T, pos0, H, dim, ratio, k, rope, iv, err);
}

static ld_status c_ds4_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kvc,
                                 const ld_buf *entries, const int32_t *sel, int k, const ld_buf *sinks, int T,
                                 int pos0, int H, int hd, int kv_rows, int window, int ratio, float scale,
                                 const ld_ds4_rot *rope, ld_error *err)
{
    counts[C_DS4_ATTENTION]++;
    return inner->ds4_attention(be, out, q, kvc, entries, sel, k, sinks, T, pos0, H, hd, kv_rows, window, ratio,
                                scale, rope, err);
}

static ld_status c_copy_cols(ld_backend *be, ld_buf *dst, size_t dld, size_t doff, const ld_buf *src, size_t sld,
                             size_t soff, int rows, size_t cols, ld_error *err)
{
    counts[C_COPY_COLS]++;
    return inner->copy_cols(be, dst, dld, doff, src, sld, soff, rows, cols, err);
}

static ld_status c_ds4_hc_head(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                               float scale, int T, int N, int D, float ne, float he, ld_error *err)
{
    counts[C_DS4_HC_HEAD]++;
    return inner->ds4_hc_head(be, out, X, fn, base, scale, T, N, D, ne, he, err);
}

/* the head with the final norm: counted as ds4_hc_head when it ran */
static ld_status c_ds4_hc_head_norm(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn,
                                    const float *base, float scale, int T, int N, int D, float ne, float he,
                                    const ld_weight *w, float eps, ld_buf *normed, ld_error *err)
{
    ld_status st = inner->ds4_hc_head_norm(be, out, X, fn, base, scale, T, N, D, ne, he, w, eps, normed, err);
    if (st == LD_OK) counts[C_DS4_HC_HEAD]++;
    return st;
}

static ld_status c_moe(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T, int K,
                       const ld_moe_expert *ex, int E, const ld_moe_expert *sh, int act, float limit, int combine,
                       float fs, ld_error *err)
{
    counts[C_MOE]++;
    return inner->moe(be, y, x, idx, w, T, K, ex, E, sh, act, limit, combine, fs, err);
}

static ld_status c_ds4_route_moe(ld_backend *be, ld_buf *y, const ld_buf *x, ld_buf *l, const ld_weight *router,
                                 const float *bias, const int32_t *hash, int T, int E, int K, float scale,
                                 const ld_moe_expert *ex, const ld_moe_expert *sh, int act, float limit, int combine,
                                 float fs, int32_t *idx, float *w, ld_error *err)
{
    counts[C_DS4_ROUTE_MOE]++;
    return inner->ds4_route_moe(be, y, x, l, router, bias, hash, T, E, K, scale, ex, sh, act, limit, combine, fs, idx,
                                w, err);
}

static ld_status c_ds4_index_attention(ld_backend *be, const ld_ds4_index_call *ix, const ld_ds4_attn_call *at, int T,
                                       int pos0, int32_t *sel, ld_error *err)
{
    counts[C_DS4_INDEX_ATTENTION]++;
    return inner->ds4_index_attention(be, ix, at, T, pos0, sel, err);
}

/* the mock CUDA backend with kernel set k, its DeepSeek entries counted */
static ld_status open_cuda(int k, ld_backend **be, ld_error *err)
{
    ld_status st = ld_backend_cuda_create(0, ksets[k], be, err);
    if (st != LD_OK) return st;
    inner = (*be)->ops;
    counting = *inner;
    counting.name = "cuda-counted";
#define WRAP(f, c) counting.f = inner->f ? c : NULL
    WRAP(mla_latent, c_mla_latent);
    WRAP(mla_absorb_q, c_absorb_q);
    WRAP(mla_absorb_out, c_absorb_out);
    WRAP(ds_route, c_ds_route);
    WRAP(index_topk, c_index_topk);
    WRAP(hc_pre, c_hc_pre);
    WRAP(hc_pre_norm, c_hc_pre_norm);
    WRAP(hc_post, c_hc_post);
    WRAP(ds4_route, c_ds4_route);
    WRAP(ds4_qkv, c_ds4_qkv);
    WRAP(ds4_compress, c_ds4_compress);
    WRAP(ds4_index, c_ds4_index);
    WRAP(ds4_attention, c_ds4_attention);
    WRAP(copy_cols, c_copy_cols);
    WRAP(ds4_hc_head, c_ds4_hc_head);
    WRAP(ds4_hc_head_norm, c_ds4_hc_head_norm);
    WRAP(moe, c_moe);
    WRAP(ds4_route_moe, c_ds4_route_moe);
    WRAP(ds4_index_attention, c_ds4_index_attention);
#undef WRAP
    if (no_fused) ld_test_unfuse(&counting);
    (*be)->ops = &counting;
    return LD_OK;
}

/* ---------------------------------------------------------------- sessions */

typedef enum { DENSE, DS, DS4 } family;

/* one model under one set of session variants */
typedef struct runner {
    family fam;
    const void *m; /* ld_model, ld_ds_model or ld_ds4_model */
    ld_ds_attn attn;
    const char *spec; /* engine/backend/cpu_kernels.h session variants; NULL: ref */
    int vocab;
} runner;

static ld_status run_dense(ld_backend *be, const runner *r, const int32_t *toks, int T, int call, float *logits,
                           ld_error *err)
{
    ld_session *s = NULL;
    ld_status st = ld_session_create(r->m, be, LONG_T, call, &s, err);
    for (int t0 = 0; st == LD_OK && t0 < T; t0 += call) {
        int n = T - t0 < call ? T - t0 : call;
        st = ld_session_eval(s, toks + t0, n, logits + (size_t)t0 * (size_t)r->vocab, NULL, err);
    }
    ld_session_destroy(s);
    return st;
}

static ld_status run_ds(ld_backend *be, const runner *r, const ld_cpu_kernels *kk, const int32_t *toks, int T,
                        int call, float *logits, ld_error *err)
{
    ld_ds_session *s = NULL;
    ld_status st = ld_ds_session_create(r->m, be, LONG_T, call, r->attn, &s, err);
    if (st == LD_OK) ld_ds_session_set_kernels(s, kk);
    for (int t0 = 0; st == LD_OK && t0 < T; t0 += call) {
        int n = T - t0 < call ? T - t0 : call;
        st = ld_ds_session_eval(s, toks + t0, n, logits + (size_t)t0 * (size_t)r->vocab, NULL, NULL, err);
    }
    ld_ds_session_destroy(s);
    return st;
}

static ld_status run_ds4(ld_backend *be, const runner *r, const ld_cpu_kernels *kk, const int32_t *toks, int T,
                         int call, float *logits, ld_error *err)
{
    ld_ds4_session *s = NULL;
    ld_status st = ld_ds4_session_create(r->m, be, LONG_T, call, &s, err);
    if (st == LD_OK) ld_ds4_session_set_kernels(s, kk);
    for (int t0 = 0; st == LD_OK && t0 < T; t0 += call) {
        int n = T - t0 < call ? T - t0 : call;
        st = ld_ds4_session_eval(s, toks + t0, n, logits + (size_t)t0 * (size_t)r->vocab, NULL, NULL, err);
    }
    ld_ds4_session_destroy(s);
    return st;
}

/* `toks` through a fresh session of r on `be` in calls of `call`:
 * logits [T][vocab] */
static ld_status run(ld_backend *be, const runner *r, const int32_t *toks, int T, int call, float *logits,
                     ld_error *err)
{
    ld_cpu_kernels kk = ld_cpu_kernels_default(0);
    LD_TRY(ld_cpu_kernels_parse(r->spec, &kk, err));
    if (r->fam == DENSE) return run_dense(be, r, toks, T, call, logits, err);
    if (r->fam == DS) return run_ds(be, r, &kk, toks, T, call, logits, err);
    return run_ds4(be, r, &kk, toks, T, call, logits, err);
}

/* ---------------------------------------------------------------- fixtures */

/* a sequence of the fixture's ref.json (fixtures.h) */
typedef ld_test_seq seq;

/* ---------------------------------------------------------------- checks */

/* the reference backend the mock CUDA one is compared with: the plain
 * one, or for matmul=tc on an all-BF16 model its matmul=bf16 */
static ld_status open_ref(int tc_ref, ld_backend **be, ld_error *err)
{
    return tc_ref ? ld_backend_cpu_create_ex(1, 0, "matmul=bf16", be, err) : ld_backend_ref_create(1, be, err);
}

/* One sequence on kernel set k: the three call sizes bitwise equal, within
 * tolerance of the reference backend and (default variants) of
 * transformers. */
static int check_seq(int k, const runner *r, const char *name, const char *dir, const seq *q, int tc_ref)
{
    size_t n = (size_t)q->T * (size_t)r->vocab;
    float *l[4];
    for (int i = 0; i < 4; i++) l[i] = malloc(n * sizeof *l[i]);
    CHECK(l[0] && l[1] && l[2] && l[3]);
    ld_error err = {0};
    ld_backend *be = NULL, *rb = NULL;
    CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(open_ref(tc_ref, &rb, &err) == LD_OK, "%s", err.msg);
    long tc0 = ld_cu_mock_calls("ld_cu_matmul_tc");
    const int calls[3] = {q->T, 3, 1};
    for (int c = 0; c < 3; c++)
        CHECK_MSG(run(be, r, q->tokens, q->T, calls[c], l[c], &err) == LD_OK, "%s %s '%s' calls of %d: %s", name,
                  ksets[k], r->spec ? r->spec : "", calls[c], err.msg);
    int tc = ld_cu_mock_calls("ld_cu_matmul_tc") > tc0;
    CHECK_MSG(run(rb, r, q->tokens, q->T, q->T, l[3], &err) == LD_OK, "%s ref: %s", name, err.msg);
    ld_backend_destroy(be);
    ld_backend_destroy(rb);
    CHECK_MSG(!memcmp(l[0], l[1], n * sizeof *l[0]) && !memcmp(l[0], l[2], n * sizeof *l[0]),
              "%s %s '%s' attn %d: chunks or token by token differ from one prefill", name, ksets[k],
              r->spec ? r->spec : "", (int)r->attn);
    double tol = tc && !tc_ref ? TC_TOL : TOL, mx, e = nerr(l[0], l[3], n, &mx);
    printf("  %-16s %-10s attn %d %-18s %2d tokens%s: vs %s nerr %.3g max|d| %.3g", name, ksets[k], (int)r->attn,
           r->spec ? r->spec : "-", q->T, tc ? " (tc)" : "", tc_ref ? "ref+matmul=bf16" : "ref", e, mx);
    free(l[1]);
    free(l[2]);
    free(l[3]);
    CHECK_MSG(e < tol, "%s %s '%s': %g from the reference backend (tol %g)", name, ksets[k], r->spec ? r->spec : "",
              e, tol);
    if (!r->spec && !tc) { /* the default variants: transformers too */
        float *ref = load_f32(dir, q->logits_file, n);
        CHECK_MSG(ref, "%s/%s", dir, q->logits_file);
        double et = nerr(l[0], ref, n, NULL);
        printf(", vs transformers %.3g", et);
        free(ref);
        CHECK_MSG(et < TOL, "%s %s: %g from transformers", name, ksets[k], et);
    }
    printf("\n");
    free(l[0]);
    return 0;
}

/* every kernel set and sequence for runner r; the entries in `want`
 * (a mask of C_*) each called */
static const char *const launchers[] = {"ld_cu_matmul",         "ld_cu_matmul_tc",          "ld_cu_fp8_matmul",
                                        "ld_cu_ds4_fp4_matmul", "ld_cu_grouped_fp8_matmul", "ld_cu_grouped_fp4_matmul"};
#define N_LAUNCHERS 6

/* the grouped launcher a model's routed experts must reach with a custom
 * matmul (NULL: none; all=ref runs them one matmul each) */
static const char *grouped_launcher(const char *name)
{
    if (strcmp(name, "deepseek-v4-fp4") == 0) return "ld_cu_grouped_fp4_matmul";
    if (strcmp(name, "deepseek-v3-fp8") == 0) return "ld_cu_grouped_fp8_matmul";
    return NULL;
}

/* the block-scaled launcher a model's weights must reach (NULL: none) */
static const char *scaled_launcher(const char *name)
{
    if (strstr(name, "fp4")) return "ld_cu_ds4_fp4_matmul";
    if (strcmp(name, "qwen3-fp8") == 0) return "ld_cu_fp8_matmul";
    return NULL;
}

static int check_runner(const runner *r, const char *name, const char *dir, unsigned want, int tc_ref)
{
    seq seqs[2];
    CHECK_MSG(ld_test_load_seqs(dir, seqs, 2) == 2, "%s/ref.json", dir);
    size_t live = ld_cu_mock_live();
    long l0[N_LAUNCHERS];
    for (int i = 0; i < N_LAUNCHERS; i++) l0[i] = ld_cu_mock_calls(launchers[i]);
    const char *scaled = scaled_launcher(name);
    long s0 = scaled ? ld_cu_mock_calls(scaled) : 0;
    const char *grouped = grouped_launcher(name);
    /* V4's FP4 experts with the custom matmul: the route kept on the device
     * (ds4_route_moe's device path builds the tables there) */
    int dev_route = strcmp(name, "deepseek-v4-fp4") == 0 && !no_fused;
    for (int k = 0; k < N_KSETS; k++) {
        if (tc_ref && k != KSET_TC) continue;
        memset(counts, 0, sizeof counts);
        long g0 = grouped ? ld_cu_mock_calls(grouped) : 0, t0 = ld_cu_mock_calls("ld_cu_moe_tables");
        for (int i = 0; i < 2; i++)
            if (check_seq(k, r, name, dir, &seqs[i], tc_ref)) return 1;
        /* the experts in one launch a projection with the custom matmul
         * (all=custom, and matmul=tc: scaled weights take the custom one) */
        long dg = grouped ? ld_cu_mock_calls(grouped) - g0 : 0, dt = ld_cu_mock_calls("ld_cu_moe_tables") - t0;
        CHECK_MSG(!grouped || (k == 0) == (dg == 0), "%s %s: %s launched %ld times", name, ksets[k], grouped, dg);
        CHECK_MSG((dev_route && k != 0) == (dt != 0), "%s %s: ld_cu_moe_tables launched %ld times", name, ksets[k],
                  dt);
        for (int c = 0; c < N_COUNTED; c++)
            CHECK_MSG(!(want >> c & 1) || counts[c] > 0, "%s %s '%s': the %s entry was never called", name,
                      ksets[k], r->spec ? r->spec : "", counted_names[c]);
    }
    CHECK_MSG(ld_cu_mock_live() == live, "%s: %zu device allocations outlive their backend", name,
              ld_cu_mock_live() - live);
    printf("  %-16s launches:", name);
    for (int i = 0; i < N_LAUNCHERS; i++) printf(" %s %ld", launchers[i] + 6, ld_cu_mock_calls(launchers[i]) - l0[i]);
    printf("\n");
    CHECK_MSG(!scaled || ld_cu_mock_calls(scaled) > s0, "%s: %s never launched", name, scaled);
    return 0;
}

/* LONG_T random tokens through the mock CUDA backend (kernel set k) in one
 * prefill, calls of 7 and token by token: bitwise equal, and within TOL
 * of the reference backend (no transformers logits that long) */
static int check_long(int k, const runner *r, const char *name)
{
    static int32_t toks[LONG_T];
    for (int i = 0; i < LONG_T; i++) toks[i] = (int32_t)(next_u32() % (uint32_t)r->vocab);
    size_t n = (size_t)LONG_T * (size_t)r->vocab;
    float *l[4];
    for (int i = 0; i < 4; i++) l[i] = malloc(n * sizeof *l[i]);
    CHECK(l[0] && l[1] && l[2] && l[3]);
    ld_error err = {0};
    ld_backend *be = NULL, *rb = NULL;
    CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_backend_ref_create(1, &rb, &err) == LD_OK, "%s", err.msg);
    const int calls[3] = {LONG_T, 7, 1};
    for (int c = 0; c < 3; c++)
        CHECK_MSG(run(be, r, toks, LONG_T, calls[c], l[c], &err) == LD_OK, "%s %s long, calls of %d: %s", name,
                  ksets[k], calls[c], err.msg);
    CHECK_MSG(run(rb, r, toks, LONG_T, LONG_T, l[3], &err) == LD_OK, "%s ref long: %s", name, err.msg);
    ld_backend_destroy(be);
    ld_backend_destroy(rb);
    int same = !memcmp(l[0], l[1], n * sizeof *l[0]) && !memcmp(l[0], l[2], n * sizeof *l[0]);
    double mx, e = nerr(l[0], l[3], n, &mx);
    printf("  %-16s %-10s attn %d %-18s %d random tokens: calls of %d, 7, 1 %s; vs ref nerr %.3g max|d| %.3g\n",
           name, ksets[k], (int)r->attn, r->spec ? r->spec : "-", LONG_T, LONG_T, same ? "bitwise equal" : "DIFFER",
           e, mx);
    for (int i = 0; i < 4; i++) free(l[i]);
    CHECK_MSG(same, "%s %s long: chunks or token by token differ from one prefill", name, ksets[k]);
    CHECK_MSG(e < TOL, "%s %s long: %g from the reference backend", name, ksets[k], e);
    return 0;
}

#define BIT(c) (1u << (c))

static int with_dense(const char *name, int tc_ref)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_model *m = NULL;
    ld_error err = {0};
    CHECK_MSG(ld_model_open(dir, &m, &err) == LD_OK, "%s: %s", name, err.msg);
    runner r = {DENSE, m, LD_DS_ATTN_NAIVE, NULL, m->cfg.vocab};
    int rc = check_runner(&r, name, dir, 0, 0);
    if (!rc && tc_ref) rc = check_runner(&r, name, dir, 0, 1);
    ld_model_close(m);
    return rc;
}

/* V3 / V3.2: the three MLA forms, the default and combine=fused */
static int with_ds(const char *name)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_ds_model *m = NULL;
    ld_error err = {0};
    CHECK_MSG(ld_ds_model_open(dir, &m, &err) == LD_OK, "%s: %s", name, err.msg);
    const char *specs[] = {NULL, "combine=fused"};
    const ld_ds_attn attns[] = {LD_DS_ATTN_NAIVE, LD_DS_ATTN_ABSORBED, LD_DS_ATTN_SPLITK};
    int rc = 0;
    for (int a = 0; !rc && a < 3; a++)
        for (int s = 0; !rc && s < 2; s++) {
            runner r = {DS, m, attns[a], specs[s], m->cfg.vocab};
            unsigned want = BIT(C_DS_ROUTE) | BIT(C_MOE);
            if (attns[a] != LD_DS_ATTN_NAIVE) want |= BIT(C_MLA) | BIT(C_ABSORB_Q) | BIT(C_ABSORB_OUT);
            if (m->cfg.v32) want |= BIT(C_INDEX_TOPK);
            rc = check_runner(&r, name, dir, want, 0);
            for (int k = 0; !rc && s == 0 && a == 1 && k < 2; k++) rc = check_long(k, &r, name);
        }
    ld_ds_model_close(m);
    return rc;
}

/* V4: the default, the mHC variants and combine=fused; every V4 entry */
static int with_ds4(const char *name)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_ds4_model *m = NULL;
    ld_error err = {0};
    CHECK_MSG(ld_ds4_model_open(dir, &m, &err) == LD_OK, "%s: %s", name, err.msg);
    const char *specs[] = {NULL, "mhc=bf16", "mhc=sinkhorn-bf16", "combine=fused"};
    unsigned want = BIT(C_HC_PRE) | BIT(C_HC_POST) | BIT(C_DS4_QKV) | BIT(C_DS4_COMPRESS) | BIT(C_DS4_ATTENTION) |
                    BIT(C_DS4_HC_HEAD);
    int rc = 0;
    /* the router and the MoE, the indexer and the attention, in one entry
     * each (every spec), and as two calls each (the default spec and
     * combine=fused: the table without the fused entries, the output
     * projection then a copy_cols and a matmul a group) */
    for (int s = 0; !rc && s < 6; s++) {
        no_fused = s >= 4;
        runner r = {DS4, m, LD_DS_ATTN_NAIVE, specs[s >= 4 ? (s - 4) * 3 : s], m->cfg.vocab};
        unsigned w = want | (no_fused ? BIT(C_DS4_ROUTE) | BIT(C_MOE) | BIT(C_DS4_INDEX) | BIT(C_COPY_COLS)
                                      : BIT(C_DS4_ROUTE_MOE) | BIT(C_DS4_INDEX_ATTENTION));
        rc = check_runner(&r, name, dir, w, 0);
        for (int k = 0; !rc && s % 4 == 0 && k < 2; k++) rc = check_long(k, &r, name);
    }
    no_fused = 0;
    ld_ds4_model_close(m);
    return rc;
}

static int test_glue_deepseek_v4(void) { return with_ds4("deepseek-v4"); }
static int test_glue_deepseek_v4_fp4(void) { return with_ds4("deepseek-v4-fp4"); }
static int test_glue_deepseek_v3(void) { return with_ds("deepseek-v3"); }
static int test_glue_deepseek_v3_fp8(void) { return with_ds("deepseek-v3-fp8"); }
static int test_glue_deepseek_v32(void) { return with_ds("deepseek-v32"); }
static int test_glue_qwen3(void) { return with_dense("qwen3", 0); }
static int test_glue_qwen3_fp8(void) { return with_dense("qwen3-fp8", 0); }
static int test_glue_llama3_bf16_tc(void) { return with_dense("llama3-bf16", 1); }

/* Every device allocation of a session's first run on a fresh backend
 * failing in turn (out of memory): the run reports LD_ERR_NOMEM, the same
 * backend then runs the sequence with the logits of a clean run, and
 * nothing leaks (the mock's live allocations back to where they were;
 * ASan for the host side). */
static int check_oom(const runner *r, const char *name, const char *dir)
{
    seq q[2];
    CHECK_MSG(ld_test_load_seqs(dir, q, 2) == 2, "%s/ref.json", dir);
    size_t n = (size_t)q[0].T * (size_t)r->vocab, live = ld_cu_mock_live();
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    CHECK(want && got);
    ld_error err = {0};
    ld_backend *be = NULL;
    CHECK_MSG(open_cuda(1, &be, &err) == LD_OK, "%s", err.msg);
    long m0 = ld_cu_mock_calls("ld_cu_malloc");
    CHECK_MSG(run(be, r, q[0].tokens, q[0].T, 3, want, &err) == LD_OK, "%s: %s", name, err.msg);
    long allocs = ld_cu_mock_calls("ld_cu_malloc") - m0;
    ld_backend_destroy(be);
    for (long i = 0; i < allocs; i++) {
        CHECK_MSG(open_cuda(1, &be, &err) == LD_OK, "%s", err.msg);
        ld_cu_mock_fail_malloc(i);
        ld_status st = run(be, r, q[0].tokens, q[0].T, 3, got, &err);
        ld_cu_mock_fail_malloc(-1);
        CHECK_MSG(st == LD_ERR_NOMEM, "%s: allocation %ld of %ld failing: status %d (%s)", name, i, allocs, (int)st,
                  err.msg);
        CHECK_MSG(run(be, r, q[0].tokens, q[0].T, 3, got, &err) == LD_OK, "%s: %s", name, err.msg);
        CHECK_MSG(!memcmp(got, want, n * sizeof *got), "%s: the logits after failure %ld differ", name, i);
        ld_backend_destroy(be);
        CHECK_MSG(ld_cu_mock_live() == live, "%s: failure %ld: %zu device allocations leaked", name, i,
                  ld_cu_mock_live() - live);
    }
    printf("  %-16s each of its %ld device allocations failing in turn: LD_ERR_NOMEM, then a clean run, no leak\n",
           name, allocs);
    free(want);
    free(got);
    return 0;
}

/* 1 when fn(p) aborts (in a child process) */
static int aborts(void (*fn)(void *), void *p)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        fn(p);
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return 0;
    return WIFSIGNALED(status);
}

static void read_past_end(void *p)
{
    float h[17];
    ld_cu_d2h(h, p, sizeof h);
}

static void launch_past_end(void *p)
{
    ld_cu_add(LD_CU_CUSTOM, p, p, 17);
}

static void copy_wrong_way(void *p)
{
    float h[16] = {0};
    ld_cu_h2d(h, p, sizeof h);
}

static int test_glue_out_of_memory(void)
{
    const char *names[] = {"deepseek-v4-fp4", "deepseek-v32", "qwen3-fp8"};
    int rc = 0;
    for (int i = 0; !rc && i < 3; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", names[i]);
        ld_error err = {0};
        void *m = NULL;
        runner r = {i == 0 ? DS4 : i == 1 ? DS : DENSE, NULL, LD_DS_ATTN_ABSORBED, NULL, 0};
        ld_status st = i == 0   ? ld_ds4_model_open(dir, (ld_ds4_model **)&m, &err)
                       : i == 1 ? ld_ds_model_open(dir, (ld_ds_model **)&m, &err)
                                : ld_model_open(dir, (ld_model **)&m, &err);
        CHECK_MSG(st == LD_OK, "%s: %s", names[i], err.msg);
        r.m = m;
        r.vocab = i == 0 ? ((ld_ds4_model *)m)->cfg.vocab : i == 1 ? ((ld_ds_model *)m)->cfg.vocab
                                                             : ((ld_model *)m)->cfg.vocab;
        rc = check_oom(&r, names[i], dir);
        if (i == 0) ld_ds4_model_close(m);
        else if (i == 1) ld_ds_model_close(m);
        else ld_model_close(m);
    }
    return rc;
}

/* the mock itself: a copy or a launch past an allocation's end, or a copy
 * in the wrong direction, aborts; the device reports "mock" */
static int test_mock_device(void)
{
    char name[16];
    int n = 0;
    CHECK(ld_cu_device_count(&n) == 0 && n == 1);
    CHECK(ld_cu_device_info(0, name, sizeof name, NULL, NULL, NULL) == 0 && strcmp(name, "mock") == 0);
    size_t live = ld_cu_mock_live();
    void *p = NULL;
    CHECK(ld_cu_malloc(&p, 64) == 0 && ld_cu_mock_live() == live + 1);
    float h[16] = {1, 2, 3}, g[16] = {0};
    CHECK(ld_cu_h2d(p, h, sizeof h) == 0 && ld_cu_d2h(g, p, sizeof g) == 0 && g[2] == 3.0f);
    CHECK(ld_cu_add(LD_CU_REF, p, p, 16) == 0 && ld_cu_d2h(g, p, sizeof g) == 0 && g[2] == 6.0f);
    printf("  three mock aborts expected (in child processes):\n");
    CHECK(aborts(read_past_end, p) && aborts(launch_past_end, p) && aborts(copy_wrong_way, p));
    CHECK(ld_cu_free(p) == 0 && ld_cu_mock_live() == live);
    return 0;
}

/* buf_view: a view shares its buffer's memory both ways, is freed
 * without its buffer, stays inside it, and starts 16-byte aligned */
static int test_glue_buf_view(void)
{
    ld_error err = {0};
    ld_backend *be = NULL;
    CHECK_MSG(ld_backend_cuda_create(0, NULL, &be, &err) == LD_OK, "%s", err.msg);
    const ld_backend_ops *o = be->ops;
    ld_buf *b = NULL, *v = NULL;
    float h[16], g[4] = {-1, -2, -3, -4}, r[16];
    for (int i = 0; i < 16; i++) h[i] = (float)i;
    CHECK(o->buf_alloc(be, 16, &b, &err) == LD_OK && o->buf_write(be, b, 0, h, 16, &err) == LD_OK);
    CHECK_MSG(o->buf_view(be, b, 8, 4, &v, &err) == LD_OK, "%s", err.msg);
    CHECK(o->buf_read(be, v, 0, r, 4, &err) == LD_OK && r[0] == 8.0f && r[3] == 11.0f);
    CHECK(o->buf_write(be, v, 0, g, 4, &err) == LD_OK && o->buf_read(be, b, 0, r, 16, &err) == LD_OK);
    CHECK(r[7] == 7.0f && r[8] == -1.0f && r[11] == -4.0f && r[12] == 12.0f);
    CHECK(ld_test_expect_fail(o->buf_read(be, v, 0, r, 5, &err), LD_ERR_USAGE, &err, "outside") == 0);
    size_t live = ld_cu_mock_live();
    o->buf_free(be, v);
    CHECK(ld_cu_mock_live() == live); /* the memory stays b's */
    ld_buf *bad = NULL;
    CHECK(ld_test_expect_fail(o->buf_view(be, b, 14, 4, &bad, &err), LD_ERR_USAGE, &err, "outside") == 0);
    CHECK(ld_test_expect_fail(o->buf_view(be, b, 2, 4, &bad, &err), LD_ERR_UNSUPPORTED, &err, "16-byte") == 0);
    CHECK(bad == NULL);
    CHECK(o->buf_read(be, b, 0, r, 16, &err) == LD_OK && r[8] == -1.0f);
    o->buf_free(be, b);
    CHECK(ld_cu_mock_live() == live - 1);
    ld_backend_destroy(be);
    return 0;
}

/* finish: the device's work waited for (a device-wide sync), for the
 * hand-off of a backend from one thread to another (tp_forward.c) */
static int test_glue_finish(void)
{
    ld_error err = {0};
    ld_backend *be = NULL;
    CHECK_MSG(ld_backend_cuda_create(0, NULL, &be, &err) == LD_OK, "%s", err.msg);
    CHECK(be->ops->finish != NULL);
    long syncs = ld_cu_mock_calls("ld_cu_sync");
    CHECK_MSG(be->ops->finish(be, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_cu_mock_calls("ld_cu_sync") == syncs + 1);
    ld_backend_destroy(be);
    return 0;
}

/* A V4 decode step on the device waits for it once: the FP4 fixture
 * decoded token by token (all=custom, nothing recorded) copies to the host
 * only its logits (one ld_cu_d2h a token): the route, the picks and the
 * mHC streams stay on the device; recording the experts brings the route
 * back (one more copy a layer and token, at least). */
static int test_glue_v4_decode_copies(void)
{
    ld_ds4_model *m = NULL;
    ld_backend *be = NULL;
    ld_ds4_session *s = NULL;
    ld_error err = {0};
    CHECK_MSG(ld_ds4_model_open(MDIR "deepseek-v4-fp4", &m, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_backend_cuda_create(0, "all=custom", &be, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_ds4_session_create(m, be, 64, 16, &s, &err) == LD_OK, "%s", err.msg);
    int L = m->cfg.n_layers, K = m->cfg.top_k;
    int32_t toks[13], *experts = malloc((size_t)L * (size_t)K * sizeof *experts);
    float *lg = malloc(13 * (size_t)m->cfg.vocab * sizeof *lg);
    CHECK(experts && lg);
    for (int i = 0; i < 13; i++) toks[i] = (int32_t)((7 * i + 3) % m->cfg.vocab);
    CHECK_MSG(ld_ds4_session_eval(s, toks, 8, lg, NULL, NULL, &err) == LD_OK, "%s", err.msg);
    /* a first decode token: the tables kept on the device (the grouped
     * output projection's) take its row count once */
    CHECK_MSG(ld_ds4_session_eval(s, toks + 8, 1, lg, NULL, NULL, &err) == LD_OK, "%s", err.msg);
    long c0 = ld_cu_mock_calls("ld_cu_d2h"), u0 = ld_cu_mock_calls("ld_cu_h2d");
    for (int t = 9; t < 12; t++)
        CHECK_MSG(ld_ds4_session_eval(s, toks + t, 1, lg, NULL, NULL, &err) == LD_OK, "%s", err.msg);
    long plain = ld_cu_mock_calls("ld_cu_d2h") - c0, up = ld_cu_mock_calls("ld_cu_h2d") - u0;
    c0 = ld_cu_mock_calls("ld_cu_d2h");
    CHECK_MSG(ld_ds4_session_eval(s, toks + 12, 1, lg, NULL, experts, &err) == LD_OK, "%s", err.msg);
    long recorded = ld_cu_mock_calls("ld_cu_d2h") - c0;
    int hashed = 0;
    for (int l = 0; l < L; l++) hashed += m->cfg.mlp_type[l] == LD_DS4_HASH;
    long want_up = 1 + hashed;
    printf("  deepseek-v4-fp4 decode: %ld copies to the host a token (the logits), %ld with its experts recorded;"
           " %ld uploads a token over %d layers\n",
           plain / 3, recorded, up / 3, L);
    ld_ds4_session_destroy(s);
    ld_backend_destroy(be);
    ld_ds4_model_close(m);
    free(experts);
    free(lg);
    CHECK_MSG(plain == 3, "%ld copies to the host over 3 decode tokens (want 3: the logits)", plain);
    /* uploads a token, by design: its id, and a hash layer's rows (the
     * token's own experts); the mHC base and scale, the router bias, the
     * expert tables, the hash rows' token indices and the fused scale stay
     * on the device */
    CHECK_MSG(up == 3 * want_up, "%ld uploads over 3 decode tokens (want 3 x %ld)", up, want_up);
    CHECK_MSG(recorded >= 1 + L, "%ld copies with the experts recorded (want at least %d)", recorded, 1 + L);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_mock_device),          LD_CASE(test_glue_deepseek_v4), LD_CASE(test_glue_deepseek_v4_fp4),
    LD_CASE(test_glue_deepseek_v3),     LD_CASE(test_glue_deepseek_v3_fp8), LD_CASE(test_glue_deepseek_v32),
    LD_CASE(test_glue_qwen3),           LD_CASE(test_glue_qwen3_fp8),   LD_CASE(test_glue_llama3_bf16_tc),
    LD_CASE(test_glue_out_of_memory),   LD_CASE(test_glue_v4_decode_copies), LD_CASE(test_glue_buf_view),
    LD_CASE(test_glue_finish),
};

LD_TEST_MAIN(tests)
