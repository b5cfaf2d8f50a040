/* cuda_weights.cu - the ops that read weights: embed, rmsnorm, matmul.
 * Weights are the host bytes as they are (F32, F16, BF16 or a GGML block
 * type), dequantized one element at a time with ref_quant.c's fp32
 * operations in its order (this file is compiled with --fmad=false), so
 * every element equals the reference's dequantization bitwise. */
#include <cuda_runtime.h>

#include <stdint.h>

#include "cuda_common.cuh"
#include "cuda_mm_warp.cuh"
#include "cuda_ops.h"


/* ------------------------------------------------------------ elements */

/* elem_t (cuda_mm_warp.cuh), the type a run-time argument */
__device__ float elem(const uint8_t *row, int dt, int k)
{
    switch (dt) {
    case LD_KDT_F32: return elem_t<LD_KDT_F32>(row, k);
    case LD_KDT_F16: return elem_t<LD_KDT_F16>(row, k);
    case LD_KDT_BF16: return elem_t<LD_KDT_BF16>(row, k);
    case LD_KDT_Q4_0: return elem_t<LD_KDT_Q4_0>(row, k);
    case LD_KDT_Q4_1: return elem_t<LD_KDT_Q4_1>(row, k);
    case LD_KDT_Q8_0: return elem_t<LD_KDT_Q8_0>(row, k);
    case LD_KDT_Q4_K: return elem_t<LD_KDT_Q4_K>(row, k);
    case LD_KDT_Q6_K: return elem_t<LD_KDT_Q6_K>(row, k);
    }
    return 0.0f;
}

/* bytes per row, device side (see ld_cu_row_bytes) */
static size_t row_bytes(ld_kdt dt, int cols)
{
    return ld_cu_row_bytes(dt, cols);
}

static unsigned blocks_for(size_t n, unsigned threads)
{
    return (unsigned)((n + threads - 1) / threads);
}

/* ------------------------------------------------------------ embed */

__global__ void embed_ref(float *out, const uint8_t *table, int dt, size_t rb, int dim, const int32_t *tokens,
                          size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    size_t t = i / (size_t)dim;
    int k = (int)(i % (size_t)dim);
    out[i] = elem(table + (size_t)tokens[t] * rb, dt, k);
}

/* one block per token, threads striding over the row */
__global__ void embed_custom(float *out, const uint8_t *table, int dt, size_t rb, int dim, const int32_t *tokens)
{
    size_t t = blockIdx.x;
    const uint8_t *row = table + (size_t)tokens[t] * rb;
    float *o = out + t * (size_t)dim;
    for (int k = threadIdx.x; k < dim; k += blockDim.x) o[k] = elem(row, dt, k);
}

extern "C" int ld_cu_embed(int v, float *out, const void *table, ld_kdt dt, int dim, const int32_t *tokens, int T)
{
    if (T <= 0 || dim <= 0) return 0;
    size_t rb = row_bytes(dt, dim), n = (size_t)T * (size_t)dim;
    const uint8_t *tb = (const uint8_t *)table;
    if (v == LD_CU_REF) embed_ref<<<blocks_for(n, 256), 256>>>(out, tb, (int)dt, rb, dim, tokens, n);
    else embed_custom<<<(unsigned)T, 256>>>(out, tb, (int)dt, rb, dim, tokens);
    return ld_cu_launched();
}

/* ------------------------------------------------------------ rmsnorm */

/* one thread per row, ld_ref_rmsnorm's loop (in place safe as the C is) */
__global__ void rmsnorm_ref(float *out, const float *x, const uint8_t *w, int dt, int dim, float eps, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *xr = x + (size_t)r * (size_t)dim;
    float *o = out + (size_t)r * (size_t)dim;
    float ss = 0.0f;
    for (int i = 0; i < dim; i++) ss += xr[i] * xr[i];
    float inv = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = 0; i < dim; i++) o[i] = elem(w, dt, i) * (xr[i] * inv);
}

#define NORM_THREADS LD_CU_NORM_THREADS

/* row r normed by a block of NORM_THREADS: ld_norm_inv's sum, then the
 * products (rmsnorm_custom's block; rmsnorm2_custom's, the same bits) */
__device__ __forceinline__ void rms_row(float *out, const float *x, const uint8_t *w, int dt, int dim, float eps,
                                        size_t r, float *sh)
{
    const float *xr = x + r * (size_t)dim;
    float *o = out + r * (size_t)dim;
    float inv = ld_norm_inv(xr, dim, eps, sh);
    for (int i = threadIdx.x; i < dim; i += NORM_THREADS) o[i] = elem(w, dt, i) * (xr[i] * inv);
}

/* one block per row */
__global__ void rmsnorm_custom(float *out, const float *x, const uint8_t *w, int dt, int dim, float eps)
{
    __shared__ float sh[NORM_THREADS];
    rms_row(out, x, w, dt, dim, eps, blockIdx.x, sh);
}

/* blocks [0, rows): array a's rows, [rows, 2 rows): b's */
__global__ void rmsnorm2_custom(ld_cu_norm_arg a, ld_cu_norm_arg b, int rows, float eps)
{
    __shared__ float sh[NORM_THREADS];
    int second = (int)blockIdx.x >= rows;
    const ld_cu_norm_arg &n = second ? b : a;
    rms_row(n.out, n.x, (const uint8_t *)n.w, (int)n.dt, n.dim, eps, blockIdx.x - (second ? rows : 0), sh);
}

extern "C" int ld_cu_rmsnorm2(ld_cu_norm_arg a, ld_cu_norm_arg b, int rows, float eps)
{
    if (rows <= 0) return 0;
    if (a.dim <= 0 || b.dim <= 0 || rows > 0x3fffffff) return (int)cudaErrorInvalidValue;
    rmsnorm2_custom<<<(unsigned)(2 * rows), NORM_THREADS>>>(a, b, rows, eps);
    return ld_cu_launched();
}

extern "C" int ld_cu_rmsnorm(int v, float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps,
                             int rows)
{
    if (rows <= 0 || dim <= 0) return 0;
    const uint8_t *wb = (const uint8_t *)w;
    if (v == LD_CU_REF) rmsnorm_ref<<<blocks_for((size_t)rows, 64), 64>>>(out, x, wb, (int)dt, dim, eps, rows);
    else rmsnorm_custom<<<(unsigned)rows, NORM_THREADS>>>(out, x, wb, (int)dt, dim, eps);
    return ld_cu_launched();
}

/* ------------------------------------------------------------ matmul */

/* the weight row of output column n (ld_ref_matmul_ex's rope order) */
__device__ __forceinline__ size_t src_row(int n, int rope_hd)
{
    if (rope_hd <= 0) return (size_t)n;
    int hd = rope_hd, h = n / hd, r = n % hd;
    return (size_t)h * hd + 2 * (r % (hd / 2)) + r / (hd / 2);
}

__device__ __forceinline__ float bias_at(const void *bias, int bias_dt, int n)
{
    return bias ? elem((const uint8_t *)bias, bias_dt, n) : 0.0f;
}

/* one thread per output (t, n): acc += x[t][k] * w[k], k ascending */
__global__ void matmul_ref(float *out, const float *x, const uint8_t *w, int dt, size_t rb, const void *bias,
                           int bias_dt, int T, int K, int N, int rope_hd)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * (size_t)N) return;
    int t = (int)(i / (size_t)N), n = (int)(i % (size_t)N);
    const uint8_t *wr = w + src_row(n, rope_hd) * rb;
    const float *xr = x + (size_t)t * (size_t)K;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += xr[k] * elem(wr, dt, k);
    out[i] = acc + bias_at(bias, bias_dt, n);
}

/* the kernel: mm_warp_sums of the warp's column, lane 0 writing sum + bias */
template <int DT, int VEC>
__global__ void __launch_bounds__(MM_WARPS * 32)
    matmul_custom(float *out, const float *x, const uint8_t *w, size_t rb, const void *bias, int bias_dt, int T, int K,
                  int N, int rope_hd)
{
    int lane = threadIdx.x & 31;
    int n = blockIdx.x * MM_WARPS + (threadIdx.x >> 5);
    if (n >= N) return; /* the whole warp */
    int t0 = blockIdx.y * MM_TT;
    int nt = T - t0 < MM_TT ? T - t0 : MM_TT;
    float acc[MM_TT];
    mm_warp_sums<DT, VEC>(acc, w + src_row(n, rope_hd) * rb, x + (size_t)t0 * (size_t)K, K, nt, lane);
    float b = bias_at(bias, bias_dt, n);
#pragma unroll
    for (int tt = 0; tt < MM_TT; tt++)
        if (lane == 0 && tt < nt) out[(size_t)(t0 + tt) * (size_t)N + n] = acc[tt] + b;
}

/* the weights of ld_cu_matmul_fanout, by value (a kernel argument) */
struct mm_fans {
    ld_cu_fan g[LD_CU_FAN_MAX];
    int vec[LD_CU_FAN_MAX];
};

/* block (column tile, token tile, weight z): matmul_custom's warp over
 * weight z's column (no bias: + 0, as the matmul without one stores) */
template <int DT>
__global__ void __launch_bounds__(MM_WARPS * 32)
    matmul_fan_custom(mm_fans f, const float *x, size_t rb, int T, int K)
{
    const ld_cu_fan &g = f.g[blockIdx.z];
    int lane = threadIdx.x & 31;
    int n = blockIdx.x * MM_WARPS + (threadIdx.x >> 5);
    if (n >= g.n) return; /* the whole warp */
    int t0 = blockIdx.y * MM_TT;
    int nt = T - t0 < MM_TT ? T - t0 : MM_TT;
    float acc[MM_TT];
    const uint8_t *wr = (const uint8_t *)g.w + (size_t)n * rb;
    if (f.vec[blockIdx.z])
        mm_warp_sums<DT, 1>(acc, wr, x + (size_t)t0 * (size_t)K, K, nt, lane);
    else
        mm_warp_sums<DT, 0>(acc, wr, x + (size_t)t0 * (size_t)K, K, nt, lane);
    float b = bias_at(NULL, 0, n);
#pragma unroll
    for (int tt = 0; tt < MM_TT; tt++)
        if (lane == 0 && tt < nt) g.out[(size_t)(t0 + tt) * (size_t)g.n + n] = acc[tt] + b;
}

extern "C" int ld_cu_matmul_fanout(const ld_cu_fan *fan, int G, const float *x, ld_kdt dt, int T, int K)
{
    if (T <= 0 || G <= 0) return 0;
    if (G > LD_CU_FAN_MAX || K <= 0 || (dt != LD_KDT_F32 && dt != LD_KDT_F16 && dt != LD_KDT_BF16))
        return (int)cudaErrorInvalidValue;
    mm_fans f;
    size_t rb = row_bytes(dt, K);
    int N = 0;
    for (int i = 0; i < G; i++) {
        if (fan[i].n <= 0) return (int)cudaErrorInvalidValue;
        f.g[i] = fan[i];
        f.vec[i] = matmul_vec(dt, rb, fan[i].w); /* as ld_cu_matmul chooses it for that weight */
        N = fan[i].n > N ? fan[i].n : N;
    }
    dim3 grid((unsigned)((N + MM_WARPS - 1) / MM_WARPS), (unsigned)((T + MM_TT - 1) / MM_TT), (unsigned)G);
    if (grid.y > 65535u) return (int)cudaErrorInvalidValue;
    if (dt == LD_KDT_F32) matmul_fan_custom<LD_KDT_F32><<<grid, MM_WARPS * 32>>>(f, x, rb, T, K);
    else if (dt == LD_KDT_F16) matmul_fan_custom<LD_KDT_F16><<<grid, MM_WARPS * 32>>>(f, x, rb, T, K);
    else matmul_fan_custom<LD_KDT_BF16><<<grid, MM_WARPS * 32>>>(f, x, rb, T, K);
    return ld_cu_launched();
}

extern "C" int ld_cu_matmul(int v, float *out, const float *x, const void *w, ld_kdt dt, const void *bias,
                            ld_kdt bias_dt, int T, int K, int N, int rope_hd)
{
    if (T <= 0 || N <= 0) return 0;
    size_t rb = row_bytes(dt, K);
    const uint8_t *wb = (const uint8_t *)w;
    if (v == LD_CU_REF) {
        size_t n = (size_t)T * (size_t)N;
        matmul_ref<<<blocks_for(n, 128), 128>>>(out, x, wb, (int)dt, rb, bias, (int)bias_dt, T, K, N, rope_hd);
    } else {
        dim3 grid((unsigned)((N + MM_WARPS - 1) / MM_WARPS), (unsigned)((T + MM_TT - 1) / MM_TT));
        if (grid.y > 65535u) return (int)cudaErrorInvalidValue;
        int vec = matmul_vec(dt, rb, w);
        switch (dt) {
#define MM_LAUNCH(D, VEC) matmul_custom<D, VEC><<<grid, MM_WARPS * 32>>>(out, x, wb, rb, bias, (int)bias_dt, T, K, N, rope_hd)
#define MM_CASE(D) \
    case D: MM_LAUNCH(D, 0); break
#define MM_CASE_VEC(D)                 \
    case D:                            \
        if (vec) MM_LAUNCH(D, 1);      \
        else MM_LAUNCH(D, 0);          \
        break
            MM_CASE_VEC(LD_KDT_F32);
            MM_CASE_VEC(LD_KDT_F16);
            MM_CASE_VEC(LD_KDT_BF16);
            MM_CASE(LD_KDT_Q4_0);
            MM_CASE(LD_KDT_Q4_1);
            MM_CASE(LD_KDT_Q8_0);
            MM_CASE(LD_KDT_Q4_K);
            MM_CASE(LD_KDT_Q6_K);
#undef MM_CASE
#undef MM_CASE_VEC
#undef MM_LAUNCH
        default: return (int)cudaErrorInvalidValue;
        }
    }
    return ld_cu_launched();
}
