/* cuda_mock_dense.c - the mock's dense ops (cuda_mock.c): embed, the norms, the matmuls, rope,
 * the copies, attention, swiglu, add, softmax, each checked and computed with
 * the plain-C reference */
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

/* ---------------------------------------------------------------- dense ops */

/* the largest of n device int32 values (checked readable), -1 when none */
int32_t ld_mock_max_of(const char *fn, const char *what, const int32_t *p, size_t n)
{
    ld_mock_dev(fn, what, p, n * IB);
    int32_t m = -1;
    for (size_t i = 0; i < n; i++)
        if (p[i] > m) m = p[i];
    return m;
}

int ld_cu_embed(int v, float *out, const void *table, ld_kdt dt, int dim, const int32_t *tokens, int T)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || dim <= 0) return 0;
    int32_t mx = ld_mock_max_of(__func__, "tokens", tokens, (size_t)T);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0) ld_mock_die(__func__, "tokens", tokens, Z(T, IB), "holds a negative id");
    ld_mock_dev(__func__, "table", table, Z(mx + 1, ld_cu_row_bytes(dt, dim)));
    ld_mock_dev(__func__, "out", out, Z(T, dim) * FB);
    ld_ref_embed(out, table, dt, dim, tokens, 0, (size_t)T);
    return 0;
}

void ld_mock_norm_rows(const char *fn, float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps,
                      int rows)
{
    ld_mock_dev(fn, "out", out, Z(rows, dim) * FB);
    ld_mock_dev(fn, "x", x, Z(rows, dim) * FB);
    ld_mock_dev(fn, "w", w, ld_cu_row_bytes(dt, dim));
    ld_ref_rmsnorm(out, x, w, dt, dim, eps, 0, (size_t)rows);
}

int ld_cu_rmsnorm(int v, float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps, int rows)
{
    (void)v;
    ld_mock_count(__func__);
    if (rows <= 0 || dim <= 0) return 0;
    ld_mock_norm_rows(__func__, out, x, w, dt, dim, eps, rows);
    return 0;
}

int ld_cu_rmsnorm2(ld_cu_norm_arg a, ld_cu_norm_arg b, int rows, float eps)
{
    ld_mock_count(__func__);
    if (rows <= 0) return 0;
    if (a.dim <= 0 || b.dim <= 0) return E_INVAL;
    const char *ao = (const char *)a.out, *bo = (const char *)b.out;
    if (ao < bo + Z(rows, b.dim) * FB && bo < ao + Z(rows, a.dim) * FB)
        ld_mock_die(__func__, "a.out", a.out, Z(rows, a.dim) * FB, "overlaps b.out");
    ld_mock_norm_rows(__func__, a.out, a.x, a.w, a.dt, a.dim, eps, rows);
    ld_mock_norm_rows(__func__, b.out, b.x, b.w, b.dt, b.dim, eps, rows);
    return 0;
}

static size_t bias_bytes(ld_kdt dt, int N)
{
    return dt == LD_KDT_F32 ? Z(N, 4) : Z(N, 2);
}

/* the checks and the operands of a dense matmul; 0 or a code */
static int mm_check(const char *fn, float *out, const float *x, const void *w, ld_kdt dt, const void *bias,
                    ld_kdt bias_dt, int T, int K, int N)
{
    if (ld_cu_row_bytes(dt, K) == 0 && K > 0) return E_INVAL;
    if (bias && bias_dt != LD_KDT_F32 && bias_dt != LD_KDT_F16 && bias_dt != LD_KDT_BF16) return E_INVAL;
    ld_mock_dev(fn, "out", out, Z(T, N) * FB);
    ld_mock_dev(fn, "x", x, Z(T, K) * FB);
    ld_mock_dev(fn, "w", w, Z(N, ld_cu_row_bytes(dt, K)));
    if (bias) ld_mock_dev(fn, "bias", bias, bias_bytes(bias_dt, N));
    return 0;
}

int ld_cu_matmul(int v, float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                 int T, int K, int N, int rope_hd)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || N <= 0) return 0;
    int e = mm_check(__func__, out, x, w, dt, bias, bias_dt, T, K, N);
    if (e) return e;
    float *row = malloc(((size_t)K + 1) * FB);
    if (!row) return E_NOMEM;
    ld_ref_matmul_ex(out, x, w, dt, bias, bias_dt, T, K, N, rope_hd, row, 0, (size_t)N);
    free(row);
    return 0;
}

/* each weight as ld_cu_matmul without a bias */
int ld_cu_matmul_fanout(const ld_cu_fan *fan, int G, const float *x, ld_kdt dt, int T, int K)
{
    ld_mock_count(__func__);
    if (T <= 0 || G <= 0) return 0;
    if (G > LD_CU_FAN_MAX || K <= 0 || (dt != LD_KDT_F32 && dt != LD_KDT_F16 && dt != LD_KDT_BF16)) return E_INVAL;
    float *row = malloc(((size_t)K + 1) * FB);
    if (!row) return E_NOMEM;
    int e = 0;
    for (int i = 0; !e && i < G; i++) {
        if (fan[i].n <= 0) e = E_INVAL;
        if (!e) e = mm_check(__func__, fan[i].out, x, fan[i].w, dt, NULL, LD_KDT_F32, T, K, fan[i].n);
        if (!e)
            ld_ref_matmul_ex(fan[i].out, x, fan[i].w, dt, NULL, LD_KDT_F32, T, K, fan[i].n, 0, row, 0,
                             (size_t)fan[i].n);
    }
    free(row);
    return e;
}

int ld_cu_matmul_tc_supported(ld_kdt dt, int K)
{
    return dt == LD_KDT_BF16 && K > 0 && K % 8 == 0;
}

int ld_cu_matmul_tc(float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt, int T,
                    int K, int N, int rope_hd)
{
    ld_mock_count(__func__);
    if (T <= 0 || N <= 0) return 0;
    if (!ld_cu_matmul_tc_supported(dt, K)) return E_INVAL;
    if (bias && bias_dt != LD_KDT_F32 && bias_dt != LD_KDT_F16 && bias_dt != LD_KDT_BF16) return E_INVAL;
    if (((uintptr_t)x | (uintptr_t)w) & 15) return E_MISALIGN;
    int e = mm_check(__func__, out, x, w, dt, bias, bias_dt, T, K, N);
    if (e) return e;
    float *row = malloc(((size_t)K + 1) * FB);
    if (!row) return E_NOMEM;
    ld_var_matmul_bf16(out, x, w, dt, bias, bias_dt, T, K, N, rope_hd, row, 0, (size_t)N);
    free(row);
    return 0;
}

int ld_cu_rope(int v, float *x, int T, int n_heads, int hd, const float *inv_freq, int pos0)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || n_heads <= 0 || hd < 2) return 0;
    ld_mock_dev(__func__, "x", x, Z(T, n_heads) * (size_t)hd * FB);
    ld_mock_dev(__func__, "inv_freq", inv_freq, (size_t)(hd / 2) * FB);
    ld_ref_rope(x, n_heads, hd, inv_freq, pos0, 0, (size_t)T);
    return 0;
}

int ld_cu_copy(int v, float *dst, const float *src, size_t n)
{
    (void)v;
    ld_mock_count(__func__);
    ld_mock_dev(__func__, "dst", dst, n * FB);
    ld_mock_dev(__func__, "src", src, n * FB);
    if (n) memmove(dst, src, n * FB);
    return 0;
}

size_t ld_cu_attention_work(int v, int tile, int n_heads, int hd, int pos0, int T)
{
    if (v == LD_CU_REF || tile <= 0) return 0;
    size_t splits = (size_t)((pos0 + T + LD_CU_ATT_SPLIT - 1) / LD_CU_ATT_SPLIT);
    return Z(tile, n_heads) * splits * (size_t)(hd + 2);
}

int ld_cu_attention(int v, float *out, const float *q, const float *kcache, const float *vcache, int T, int pos0,
                    int n_heads, int n_kv, int hd, int window, float scale, float *work, size_t work_floats)
{
    ld_mock_count(__func__);
    if (T <= 0 || n_heads <= 0 || hd <= 0) return 0;
    if (n_kv <= 0 || n_heads % n_kv) return E_INVAL;
    if (v != LD_CU_REF) {
        if (hd > LD_CU_ATT_MAX_HD || n_heads > 65535) return E_INVAL;
        size_t per = ld_cu_attention_work(v, 1, n_heads, hd, pos0, T);
        if (!per || work_floats / per < 1) return E_INVAL;
        ld_mock_dev(__func__, "work", work, work_floats * FB);
    }
    size_t nq = Z(T, n_heads) * (size_t)hd, nkv = Z(pos0 + T, n_kv) * (size_t)hd;
    ld_mock_dev(__func__, "out", out, nq * FB);
    ld_mock_dev(__func__, "q", q, nq * FB);
    ld_mock_dev(__func__, "kcache", kcache, nkv * FB);
    ld_mock_dev(__func__, "vcache", vcache, nkv * FB);
    float *scores = malloc(((size_t)pos0 + (size_t)T) * FB);
    if (!scores) return E_NOMEM;
    ld_ref_attention(out, q, kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, scores, 0, Z(T, n_heads));
    free(scores);
    return 0;
}

int ld_cu_swiglu(int v, float *out, const float *gate, const float *up, size_t n)
{
    (void)v;
    ld_mock_count(__func__);
    ld_mock_dev(__func__, "out", out, n * FB);
    ld_mock_dev(__func__, "gate", gate, n * FB);
    ld_mock_dev(__func__, "up", up, n * FB);
    if (n) ld_ref_swiglu(out, gate, up, 0, n);
    return 0;
}

int ld_cu_add(int v, float *x, const float *y, size_t n)
{
    (void)v;
    ld_mock_count(__func__);
    ld_mock_dev(__func__, "x", x, n * FB);
    ld_mock_dev(__func__, "y", y, n * FB);
    if (n) ld_ref_add(x, y, 0, n);
    return 0;
}

int ld_cu_softmax(int v, float *out, const float *x, int rows, int n)
{
    (void)v;
    ld_mock_count(__func__);
    if (rows <= 0 || n <= 0) return 0;
    ld_mock_dev(__func__, "out", out, Z(rows, n) * FB);
    ld_mock_dev(__func__, "x", x, Z(rows, n) * FB);
    ld_ref_softmax(out, x, n, 0, (size_t)rows);
    return 0;
}
