/* cuda_mock_ds.c - the mock's DeepSeek ops (cuda_mock.c): the FP8 GEMMs, the MoE plan and
 * combine, MLA, the indexer and top-k, the routers, mHC; and the sampler */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_mock_internal.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "replay/run/replay_sample.h"

/* ---------------------------------------------------------------- DeepSeek */

/* a block-scaled weight's scale grid: ceil(N / br) x ceil(K / bc) */
size_t ld_mock_f8b_grid(int N, int K, int br, int bc)
{
    return Z((N + br - 1) / br, (K + bc - 1) / bc);
}

/* out [T][N] = x . W^T of an ld_f8b-described weight */
int ld_mock_scaled_mm(float *out, const float *x, const ld_f8b *w, ld_kdt dt, int T, int K, int N)
{
    float *row = malloc(((size_t)K + 1) * FB);
    if (!row) return E_NOMEM;
    ld_ref_matmul(out, x, w, dt, NULL, LD_KDT_F32, T, K, N, row, 0, (size_t)N);
    free(row);
    return 0;
}

int ld_cu_fp8_matmul(int v, float *out, const float *x, const uint8_t *q, const float *scale, int T, int K, int N,
                     int br, int bc)
{
    ld_mock_count(__func__);
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0) return E_INVAL;
    if (v != LD_CU_REF && (T + 7) / 8 > 65535) return E_INVAL;
    ld_mock_dev(__func__, "out", out, Z(T, N) * FB);
    ld_mock_dev(__func__, "x", x, Z(T, K) * FB);
    ld_mock_dev(__func__, "q", q, Z(N, K));
    ld_mock_dev(__func__, "scale", scale, ld_mock_f8b_grid(N, K, br, bc) * FB);
    ld_f8b w = {q, scale, N, K, br, bc};
    return ld_mock_scaled_mm(out, x, &w, LD_KDT_F8B, T, K, N);
}

int ld_cu_moe_plan(int v, int32_t *offsets, int32_t *rows, int32_t *row_of, const int32_t *idx, int T, int K, int E)
{
    (void)v;
    ld_mock_count(__func__);
    if (E <= 0 || K <= 0 || T < 0) return E_INVAL;
    size_t nk = Z(T, K);
    ld_mock_dev(__func__, "offsets", offsets, ((size_t)E + 1) * IB);
    ld_mock_dev(__func__, "rows", rows, nk * IB);
    ld_mock_dev(__func__, "row_of", row_of, nk * IB);
    ld_mock_dev(__func__, "idx", idx, nk * IB);
    memset(offsets, 0, ((size_t)E + 1) * IB);
    for (size_t i = 0; i < nk; i++) {
        if (idx[i] < 0 || idx[i] >= E) return E_INVAL;
        offsets[idx[i] + 1]++;
    }
    for (int e = 0; e < E; e++) offsets[e + 1] += offsets[e];
    int32_t *next = malloc((size_t)E * IB + 1);
    if (!next) return E_NOMEM;
    memcpy(next, offsets, (size_t)E * IB);
    for (size_t i = 0; i < nk; i++) {
        int32_t r = next[idx[i]]++;
        rows[r] = (int32_t)(i / (size_t)K);
        row_of[i] = r;
    }
    free(next);
    return 0;
}

int ld_cu_moe_fp8_matmul(int v, float *out, const float *x, const int32_t *rows, const int32_t *offsets,
                         const uint8_t *q, const float *scale, int E, int R, int max_rows, int K, int N, int br, int bc)
{
    (void)v;
    ld_mock_count(__func__);
    if (R <= 0 || N <= 0) return 0;
    if (E <= 0 || K <= 0 || br <= 0 || bc <= 0 || max_rows < 0) return E_INVAL;
    ld_mock_dev(__func__, "offsets", offsets, ((size_t)E + 1) * IB);
    int32_t mx = ld_mock_max_of(__func__, "rows", rows, (size_t)R);
    ld_mock_dev(__func__, "out", out, Z(R, N) * FB);
    ld_mock_dev(__func__, "x", x, Z(mx + 1, K) * FB);
    size_t g = ld_mock_f8b_grid(N, K, br, bc);
    ld_mock_dev(__func__, "q", q, Z(E, N) * (size_t)K);
    ld_mock_dev(__func__, "scale", scale, Z(E, g) * FB);
    float *xr = malloc(Z(K, 1) * FB);
    if (!xr) return E_NOMEM;
    int e = 0;
    for (int ex = 0; !e && ex < E; ex++) {
        ld_f8b w = {q + Z(ex, N) * (size_t)K, scale + Z(ex, g), N, K, br, bc};
        for (int r = offsets[ex]; !e && r < offsets[ex + 1] && r < R; r++) {
            memcpy(xr, x + Z(rows[r], K), Z(K, FB));
            e = ld_mock_scaled_mm(out + Z(r, N), xr, &w, LD_KDT_F8B, 1, K, N);
        }
    }
    free(xr);
    return e;
}

/* the custom kernel's split count (cuda_deepseek.cu's mla_nsplit): the
 * longest key list over LD_CU_MLA_SPLIT */
static int mla_nsplit(int T, int pos0, const int32_t *sel, int k)
{
    int n = pos0 + T;
    if (sel && k < n) n = k;
    return (n + LD_CU_MLA_SPLIT - 1) / LD_CU_MLA_SPLIT;
}

size_t ld_cu_mla_latent_work(int v, int T, int n_heads, int c, int pos0, const int32_t *sel, int k)
{
    if (v == LD_CU_REF || T <= 0) return 0;
    return Z(T, n_heads) * (size_t)mla_nsplit(T, pos0, sel, k) * (size_t)(c + 2);
}

int ld_cu_mla_latent(int v, float *o_lat, const float *q_abs, const float *q, const float *ckv, const float *kpe,
                     int T, int n_heads, int dn, int dr, int c, int pos0, float scale, const int32_t *sel, int k,
                     float *work, size_t work_floats)
{
    ld_mock_count(__func__);
    if (T <= 0 || n_heads <= 0 || c <= 0) return 0;
    if (dn < 0 || dr < 0 || pos0 < 0 || (sel && k < 1)) return E_INVAL;
    if (v != LD_CU_REF) {
        if (mla_nsplit(T, pos0, sel, k) > 65535 || c + dr > 704 || c > 768) return E_INVAL;
        if (work_floats < ld_cu_mla_latent_work(v, T, n_heads, c, pos0, sel, k)) return E_INVAL;
        ld_mock_dev(__func__, "work", work, work_floats * FB);
    }
    size_t rows = Z(T, n_heads), S = (size_t)pos0 + (size_t)T;
    ld_mock_dev(__func__, "o_lat", o_lat, rows * (size_t)c * FB);
    ld_mock_dev(__func__, "q_abs", q_abs, rows * (size_t)c * FB);
    ld_mock_dev(__func__, "q", q, rows * (size_t)(dn + dr) * FB);
    ld_mock_dev(__func__, "ckv", ckv, S * (size_t)c * FB);
    ld_mock_dev(__func__, "kpe", kpe, S * (size_t)dr * FB);
    if (sel) {
        ld_mock_dev(__func__, "sel", sel, Z(T, k) * IB);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < k && i < pos0 + t + 1; i++)
                if (sel[Z(t, k) + (size_t)i] < 0 || sel[Z(t, k) + (size_t)i] > pos0 + t)
                    ld_mock_die(__func__, "sel", sel, Z(T, k) * IB, "selects a position outside 0..pos");
    }
    float *scores = malloc(S * FB);
    if (!scores) return E_NOMEM;
    if (sel)
        ld_ref_mla_latent_attention_sparse(o_lat, q_abs, q, ckv, kpe, n_heads, dn, dr, c, pos0, scale, scores, sel, k,
                                           0, rows);
    else
        ld_ref_mla_latent_attention(o_lat, q_abs, q, ckv, kpe, n_heads, dn, dr, c, pos0, scale, scores, 0, rows);
    free(scores);
    return 0;
}

static int absorb_dt_ok(ld_kdt dt)
{
    return dt == LD_KDT_F32 || dt == LD_KDT_F16 || dt == LD_KDT_BF16;
}

int ld_cu_mla_absorb_q(int v, float *q_abs, const float *q, const void *w, ld_kdt dt, int T, int n_heads, int dn,
                       int dr, int dv, int c)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || n_heads <= 0 || c <= 0) return 0;
    if (!absorb_dt_ok(dt) || dn < 0 || dr < 0 || dv < 0) return E_INVAL;
    size_t rows = Z(T, n_heads);
    ld_mock_dev(__func__, "q_abs", q_abs, rows * (size_t)c * FB);
    ld_mock_dev(__func__, "q", q, rows * (size_t)(dn + dr) * FB);
    ld_mock_dev(__func__, "w", w, Z(n_heads, dn + dv) * ld_cu_row_bytes(dt, c));
    ld_ref_mla_absorb_q(q_abs, q, w, dt, n_heads, dn, dr, dv, c, 0, rows);
    return 0;
}

int ld_cu_mla_absorb_out(int v, float *out, const float *o_lat, const void *w, ld_kdt dt, int T, int n_heads, int dn,
                         int dv, int c)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || n_heads <= 0 || dv <= 0) return 0;
    if (!absorb_dt_ok(dt) || dn < 0 || c < 0) return E_INVAL;
    size_t rows = Z(T, n_heads);
    ld_mock_dev(__func__, "out", out, rows * (size_t)dv * FB);
    ld_mock_dev(__func__, "o_lat", o_lat, rows * (size_t)c * FB);
    ld_mock_dev(__func__, "w", w, Z(n_heads, dn + dv) * ld_cu_row_bytes(dt, c));
    ld_ref_mla_absorb_out(out, o_lat, w, dt, n_heads, dn, dv, c, 0, rows);
    return 0;
}

int ld_cu_index_scores(int v, int form, float *scores, const float *q, const float *w, const float *keys, int T,
                       int n_heads, int dim, int n, float qscale, float wscale)
{
    ld_mock_count(__func__);
    if (T <= 0 || n <= 0) return 0;
    if (n_heads <= 0 || dim <= 0 || (form != 0 && form != 1)) return E_INVAL;
    if (v != LD_CU_REF && (dim > 32 * 8 || Z(n_heads, dim) > 12288 || T > 65535)) return E_INVAL;
    size_t QW = Z(n_heads, dim);
    ld_mock_dev(__func__, "scores", scores, Z(T, n) * FB);
    ld_mock_dev(__func__, "q", q, Z(T, QW) * FB);
    ld_mock_dev(__func__, "w", w, Z(T, n_heads) * FB);
    ld_mock_dev(__func__, "keys", keys, Z(n, dim) * FB);
    for (int t = 0; t < T; t++) {
        const float *qt = q + Z(t, QW), *wt = w + Z(t, n_heads);
        if (form == 0) ld_ref_ds_index_scores(scores + Z(t, n), qt, wt, keys, n_heads, dim, n);
        else ld_ref_ds4_index_scores(scores + Z(t, n), qt, wt, keys, n, n_heads, dim, qscale, wscale);
    }
    return 0;
}

int ld_cu_topk(int v, int32_t *idx, const float *scores, int T, int ld, int n, int pos0, int k)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || k <= 0) return 0;
    if (n < 0 || ld < n) return E_INVAL;
    ld_mock_dev(__func__, "idx", idx, Z(T, k) * IB);
    ld_mock_dev(__func__, "scores", scores, (Z(T - 1, ld) + (size_t)n) * FB);
    for (int t = 0; t < T; t++) {
        int nt = pos0 < 0 ? n : (pos0 + t + 1 < n ? pos0 + t + 1 : n);
        int32_t *it = idx + Z(t, k);
        int m = nt > 0 ? ld_ref_ds4_topk(it, scores + Z(t, ld), nt, k) : 0;
        for (int i = m; i < k; i++) it[i] = -1;
    }
    return 0;
}

int ld_cu_ds_route(int v, int32_t *idx, float *w, const float *logits, const float *bias, int T, int E, int n_group,
                   int topk_group, int top_k, int norm, float scale)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0) return 0;
    if (E <= 0 || E > 1024 || n_group <= 0 || n_group > 64 || E % n_group || E / n_group < 2 || topk_group < 1 ||
        topk_group > n_group || top_k < 1 || top_k > 64 || top_k > topk_group * (E / n_group))
        return E_INVAL;
    ld_mock_dev(__func__, "idx", idx, Z(T, top_k) * IB);
    ld_mock_dev(__func__, "w", w, Z(T, top_k) * FB);
    ld_mock_dev(__func__, "logits", logits, Z(T, E) * FB);
    if (bias) ld_mock_dev(__func__, "bias", bias, Z(E, FB));
    ld_ref_ds_route(idx, w, logits, bias, E, n_group, topk_group, top_k, norm, scale, 0, (size_t)T);
    return 0;
}

int ld_cu_ds4_route(int v, int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                    const int32_t *tokens, int T, int E, int K, float scale)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0) return 0;
    if (E <= 0 || E > 1024 || K < 1 || K > E || K > 64 || (tid2eid && !tokens)) return E_INVAL;
    ld_mock_dev(__func__, "idx", idx, Z(T, K) * IB);
    ld_mock_dev(__func__, "w", w, Z(T, K) * FB);
    ld_mock_dev(__func__, "logits", logits, Z(T, E) * FB);
    if (bias) ld_mock_dev(__func__, "bias", bias, Z(E, FB));
    if (tid2eid) {
        int32_t mx = ld_mock_max_of(__func__, "tokens", tokens, (size_t)T);
        ld_mock_dev(__func__, "tid2eid", tid2eid, Z(mx + 1, K) * IB);
    }
    for (int t = 0; t < T; t++) {
        const int32_t *hash = tid2eid ? tid2eid + Z(tokens[t], K) : NULL;
        ld_ref_ds4_route(idx + Z(t, K), w + Z(t, K), logits + Z(t, E), bias, hash, E, K, scale);
    }
    return 0;
}

/* the combine's products into y (K > 0), ranges checked as fn's */
static void combine_into(const char *fn, float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K,
                         int D)
{
    size_t nk = Z(T, K);
    int32_t mx = row_of ? ld_mock_max_of(fn, "row_of", row_of, nk) : (int32_t)(nk - 1);
    ld_mock_dev(fn, "eo", eo, Z(mx + 1, D) * FB);
    ld_mock_dev(fn, "w", w, nk * FB);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            size_t i = Z(t, K) + (size_t)k, r = row_of ? (size_t)row_of[i] : i;
            ld_ref_ds_axpy(y + Z(t, D), eo + Z(r, D), w[i], 0, (size_t)D);
        }
}

int ld_cu_moe_combine(int v, float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K, int D)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || D <= 0 || K <= 0) return 0;
    ld_mock_dev(__func__, "y", y, Z(T, D) * FB);
    combine_into(__func__, y, eo, row_of, w, T, K, D);
    return 0;
}

int ld_cu_moe_combine_ex(int v, float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K, int D,
                         int from_zero, const float *add)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || D <= 0 || K < 0) return 0;
    size_t n = Z(T, D);
    ld_mock_dev(__func__, "y", y, n * FB);
    if (add) ld_mock_dev(__func__, "add", add, n * FB);
    if (from_zero) memset(y, 0, n * FB);
    if (K > 0) combine_into(__func__, y, eo, row_of, w, T, K, D);
    for (size_t i = 0; add && i < n; i++) y[i] = y[i] + add[i];
    return 0;
}

size_t ld_cu_ds4_attention_sync(int T, int H)
{
    return T > 0 && H > 0 ? Z(T, (H + 7) / 8) : 0;
}

size_t ld_cu_hc_work(int T, int N)
{
    return T > 0 && N > 0 ? (size_t)T * (1 + Z(2 + N, N) + (size_t)N) : 0;
}

int ld_cu_hc_pre(int v, float *post, float *comb, float *collapsed, const float *X, int T, int N, int D,
                 const float *fn, const float *base, const float *scale, int iters, float norm_eps, float hc_eps,
                 float *work, size_t work_floats)
{
    return ld_cu_hc_pre_ex(v, LD_CU_MHC_F32, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps,
                           hc_eps, work, work_floats);
}

/* ld_cu_hc_pre_ex's checks and C references, as fn */
static int hc_pre_body(const char *fn_name, int variant, float *post, float *comb, float *collapsed, const float *X,
                       int T, int N, int D, const float *fn, const float *base, const float *scale, int iters,
                       float norm_eps, float hc_eps, float *work, size_t work_floats)
{
    if (T <= 0) return 0;
    if (variant < LD_CU_MHC_F32 || variant > LD_CU_MHC_SINKHORN_BF16) return E_INVAL;
    if (N <= 0 || N > 64 || D <= 0 || work_floats < ld_cu_hc_work(T, N)) return E_INVAL;
    size_t n = (size_t)N, d = (size_t)D, hc = (2 + n) * n;
    ld_mock_dev(fn_name, "work", work, work_floats * FB);
    ld_mock_dev(fn_name, "post", post, Z(T, n) * FB);
    ld_mock_dev(fn_name, "comb", comb, Z(T, n * n) * FB);
    ld_mock_dev(fn_name, "collapsed", collapsed, Z(T, d) * FB);
    ld_mock_dev(fn_name, "X", X, Z(T, n * d) * FB);
    ld_mock_dev(fn_name, "fn", fn, hc * n * d * FB);
    ld_mock_dev(fn_name, "base", base, hc * FB);
    ld_mock_dev(fn_name, "scale", scale, 3 * FB);
    float *scratch = malloc((n * d + hc) * FB);
    if (!scratch) return E_NOMEM;
    for (int t = 0; t < T; t++) {
        float *pt = post + Z(t, n), *ct = comb + Z(t, n * n);
        ld_ref_ds4_hc_pre_ex(X + Z(t, n * d), N, D, fn, base, scale, iters, norm_eps, hc_eps,
                             variant == LD_CU_MHC_SINKHORN_BF16, pt, ct, collapsed + Z(t, d), scratch);
        if (variant != LD_CU_MHC_BF16) continue;
        for (size_t i = 0; i < n; i++) pt[i] = ld_var_bf16_round(pt[i]);
        for (size_t i = 0; i < n * n; i++) ct[i] = ld_var_bf16_round(ct[i]);
    }
    free(scratch);
    return 0;
}

int ld_cu_hc_pre_ex(int v, int variant, float *post, float *comb, float *collapsed, const float *X, int T, int N,
                    int D, const float *fn, const float *base, const float *scale, int iters, float norm_eps,
                    float hc_eps, float *work, size_t work_floats)
{
    (void)v;
    ld_mock_count(__func__);
    return hc_pre_body(__func__, variant, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps, hc_eps,
                       work, work_floats);
}

int ld_cu_hc_pre_norm(int variant, float *post, float *comb, float *collapsed, const float *X, int T, int N, int D,
                      const float *fn, const float *base, const float *scale, int iters, float norm_eps, float hc_eps,
                      float *work, size_t work_floats, const void *w, int w_dt, float eps, float *normed, int *sync)
{
    ld_mock_count(__func__);
    if (T > 65535 || w_dt < LD_KDT_F32 || w_dt > LD_KDT_BF16 || (T > 0 && !normed)) return E_INVAL;
    if (sync && T > 0) { /* the counts: device ints, zero (the kernel leaves them so) */
        ld_mock_dev(__func__, "sync", sync, Z(T, sizeof *sync));
        for (int t = 0; t < T; t++)
            if (sync[t]) ld_mock_die(__func__, "sync", sync, Z(T, sizeof *sync), "holds a nonzero count");
    }
    int e = hc_pre_body(__func__, variant, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps, hc_eps,
                        work, work_floats);
    if (e || T <= 0) return e;
    ld_kdt dt = (ld_kdt)w_dt;
    ld_mock_dev(__func__, "w", w, ld_cu_row_bytes(dt, D));
    ld_mock_dev(__func__, "normed", normed, Z(T, D) * FB);
    ld_ref_rmsnorm(normed, collapsed, w, dt, D, eps, 0, (size_t)T);
    return 0;
}

int ld_cu_hc_post(int v, float *out, const float *X, const float *f, const float *post, const float *comb, int T,
                  int N, int D)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || N <= 0 || D <= 0) return 0;
    size_t n = (size_t)N, d = (size_t)D;
    ld_mock_dev(__func__, "out", out, Z(T, n * d) * FB);
    ld_mock_dev(__func__, "X", X, Z(T, n * d) * FB);
    ld_mock_dev(__func__, "f", f, Z(T, d) * FB);
    ld_mock_dev(__func__, "post", post, Z(T, n) * FB);
    ld_mock_dev(__func__, "comb", comb, Z(T, n * n) * FB);
    for (int t = 0; t < T; t++)
        ld_ref_ds4_hc_post(out + Z(t, n * d), X + Z(t, n * d), f + Z(t, d), post + Z(t, n), comb + Z(t, n * n), N, D);
    return 0;
}

/* the matmul into a host block f, the combine into it (c: from zero,
 * then f added), the mixing from it */
int ld_mock_matmul_post(const char *fn, const float *x, const uint8_t *q, const float *scale, int T, int K, int N,
                       int br, int bc, ld_cu_post p, const ld_cu_combine *c)
{
    ld_mock_dev(fn, "x", x, Z(T, K) * FB);
    ld_mock_dev(fn, "q", q, Z(N, K));
    ld_mock_dev(fn, "scale", scale, ld_mock_f8b_grid(N, K, br, bc) * FB);
    size_t n = (size_t)p.N, d = (size_t)N;
    ld_mock_dev(fn, "p.out", p.out, Z(T, n * d) * FB);
    ld_mock_dev(fn, "p.X", p.X, Z(T, n * d) * FB);
    ld_mock_dev(fn, "p.post", p.post, Z(T, n) * FB);
    ld_mock_dev(fn, "p.comb", p.comb, Z(T, n * n) * FB);
    float *f = malloc(Z(T, d) * FB), *y = malloc(Z(T, d) * FB);
    if (!f || !y) {
        free(f);
        free(y);
        return E_NOMEM;
    }
    ld_f8b w = {q, scale, N, K, br, bc};
    int e = ld_mock_scaled_mm(f, x, &w, LD_KDT_F8B, T, K, N);
    if (!e && c) {
        memset(y, 0, Z(T, d) * FB);
        if (c->K > 0) combine_into(fn, y, c->eo, c->row_of, c->w, T, c->K, N);
        for (size_t i = 0; i < Z(T, d); i++) f[i] = y[i] + f[i];
    }
    for (int t = 0; !e && t < T; t++)
        ld_ref_ds4_hc_post(p.out + Z(t, n * d), p.X + Z(t, n * d), f + Z(t, d), p.post + Z(t, n),
                           p.comb + Z(t, n * n), p.N, N);
    free(f);
    free(y);
    return e;
}

int ld_cu_fp8_matmul_post(const float *x, const uint8_t *q, const float *scale, int T, int K, int N, int br, int bc,
                          ld_cu_post p)
{
    ld_mock_count(__func__);
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0 || p.N <= 0) return E_INVAL;
    if ((T + 7) / 8 > 65535) return E_INVAL;
    return ld_mock_matmul_post(__func__, x, q, scale, T, K, N, br, bc, p, NULL);
}

/* ---------------------------------------------------------------- sampling */

int ld_cu_sample_uniforms(uint64_t *hash, double *u, uint64_t seed, uint64_t pos0, int n)
{
    ld_mock_count(__func__);
    if (n <= 0) return 0;
    if (hash) ld_mock_dev(__func__, "hash", hash, (size_t)n * sizeof *hash);
    if (u) ld_mock_dev(__func__, "u", u, (size_t)n * sizeof *u);
    for (int i = 0; i < n; i++) {
        if (hash) hash[i] = ld_sample_hash(seed, pos0 + (uint64_t)i);
        if (u) u[i] = ld_sample_uniform(seed, pos0 + (uint64_t)i);
    }
    return 0;
}

static size_t pow2_at_least(int V)
{
    size_t p = 1;
    while (p < (size_t)V) p <<= 1;
    return p;
}

size_t ld_cu_sample_work(int v, int T, int V)
{
    if (T <= 0 || V <= 0) return 0;
    size_t P = v == LD_CU_REF ? (size_t)V : pow2_at_least(V);
    return (size_t)T * (2 * sizeof(double) + P * (sizeof(double) + sizeof(int32_t)));
}

int ld_cu_sample(int v, int32_t *tokens, const float *logits, int T, int V, double temperature, int64_t top_k,
                 double top_p, double min_p, uint64_t seed, uint64_t pos0, void *work, size_t work_bytes)
{
    ld_mock_count(__func__);
    if (T <= 0) return 0;
    if (V <= 0) return E_INVAL;
    int greedy = !(temperature >= LD_SAMPLE_EPS) || top_k == 1;
    if (!greedy && work_bytes < ld_cu_sample_work(v, T, V)) return E_INVAL;
    if (!greedy) ld_mock_dev(__func__, "work", work, work_bytes);
    ld_mock_dev(__func__, "tokens", tokens, Z(T, IB));
    ld_mock_dev(__func__, "logits", logits, Z(T, V) * FB);
    ld_sampler *s = NULL;
    ld_error err = {0};
    if (ld_sampler_new(V, &s, &err) != LD_OK) return E_NOMEM;
    ld_sample_params p = {temperature, top_k, top_p, min_p};
    for (int t = 0; t < T; t++) tokens[t] = ld_sampler_token(s, logits + Z(t, V), V, &p, seed, pos0 + (uint64_t)t);
    ld_sampler_free(s);
    return 0;
}
