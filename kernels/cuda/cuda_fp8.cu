/* cuda_fp8.cu - the FP8 block-scaled GEMM of DeepSeek's weights (ld_cu_fp8_matmul), and
 * the block's last matmul written into the streams (ld_cu_fp8_matmul_post):
 * a reference kernel (a thread an output) and the custom one (cuda_fp8_mm.cuh). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_fp8_mm.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

/* ================================================================ FP8 GEMM */

__global__ void fp8_mm_ref(float *out, const float *x, const uint8_t *q, const float *scale, int T, int K, int N,
                           int br, int bc)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)N) return;
    int t = (int)(idx / (size_t)N), n = (int)(idx % (size_t)N);
    int nbc = (K + bc - 1) / bc;
    const float *srow = scale + (size_t)(n / br) * (size_t)nbc;
    const uint8_t *qr = q + (size_t)n * (size_t)K;
    const float *xr = x + (size_t)t * (size_t)K;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        float w = ld_e4m3_to_f32(qr[k]) * srow[k / bc];
        acc += xr[k] * w;
    }
    out[idx] = acc + 0.0f; /* the reference adds its (zero) bias */
}

extern "C" int ld_cu_fp8_matmul(int v, float *out, const float *x, const uint8_t *q, const float *scale, int T,
                                int K, int N, int br, int bc)
{
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0) return INVAL;
    if (v == LD_CU_REF) {
        fp8_mm_ref<<<ld_cu_blocks((size_t)T * (size_t)N, 128), 128>>>(out, x, q, scale, T, K, N, br, bc);
        return ld_cu_launched();
    }
    unsigned gy = (unsigned)((T + F8_ROWS - 1) / F8_ROWS);
    if (gy > 65535) return INVAL;
    dim3 grid((unsigned)((N + F8_WARPS - 1) / F8_WARPS), gy);
    if (K % 16 == 0 && ((uintptr_t)q & 15) == 0)
        fp8_mm_custom<1><<<grid, 32 * F8_WARPS>>>(out, x, q, scale, T, K, N, br, bc);
    else
        fp8_mm_custom<0><<<grid, 32 * F8_WARPS>>>(out, x, q, scale, T, K, N, br, bc);
    return ld_cu_launched();
}

/* ---------------------------------------------------------------- the block's last matmul into the streams */

/* fp8_mm_custom's warp, then lane 0 takes each row's sum + 0 (the value
 * the matmul stores) as f and writes the column's N stream values */
template <int VEC>
__global__ void __launch_bounds__(32 * F8_WARPS)
    fp8_mm_post(const float *x, const uint8_t *q, const float *scale, int T, int K, int N, int br, int bc,
                ld_cu_post p)
{
    int n, t0, nt, nbc = (K + bc - 1) / bc;
    const float *xr[F8_ROWS];
    if (!fp8_tile(&n, &t0, &nt, xr, x, T, K, N)) return;
    float acc[F8_ROWS];
    fp8_warp_dot<VEC>(acc, q + (size_t)n * (size_t)K, scale + (size_t)(n / br) * (size_t)nbc, K, bc, xr, nt);
    if ((threadIdx.x & 31) != 0) return;
    for (int r = 0; r < nt; r++) {
        hc_post_col(p.out, p.X, group_stored<0>(acc[r]), p.post, p.comb, (size_t)(t0 + r), (size_t)n, p.N, N);
    }
}

extern "C" int ld_cu_fp8_matmul_post(const float *x, const uint8_t *q, const float *scale, int T, int K, int N, int br,
                                     int bc, ld_cu_post p)
{
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0 || p.N <= 0) return INVAL;
    unsigned gy = (unsigned)((T + F8_ROWS - 1) / F8_ROWS);
    if (gy > 65535) return INVAL;
    dim3 grid((unsigned)((N + F8_WARPS - 1) / F8_WARPS), gy);
    if (K % 16 == 0 && ((uintptr_t)q & 15) == 0)
        fp8_mm_post<1><<<grid, 32 * F8_WARPS>>>(x, q, scale, T, K, N, br, bc, p);
    else
        fp8_mm_post<0><<<grid, 32 * F8_WARPS>>>(x, q, scale, T, K, N, br, bc, p);
    return ld_cu_launched();
}
