/* cuda_fp8_mm.cuh - the custom FP8 block-scaled matmul's warp work
 * (fp8_warp_rows, fp8_tile) and kernel (fp8_mm_custom), shared by the FP8
 * GEMM (cuda_fp8.cu) and the grouped MoE GEMMs (cuda_moe.cu). */
#ifndef LD_CUDA_FP8_MM_CUH
#define LD_CUDA_FP8_MM_CUH

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"

/* fp8_warp_dot's sums written by lane 0: out[r * ldo] for r < nt (the
 * reference's "+ 0" of its zero bias included) */
template <int VEC>
__device__ __forceinline__ void fp8_warp_rows(float *out, size_t ldo, const uint8_t *qr, const float *srow, int K,
                                              int bc, const float *const *xr, int nt)
{
    float acc[F8_ROWS];
    fp8_warp_dot<VEC>(acc, qr, srow, K, bc, xr, nt);
#pragma unroll
    for (int r = 0; r < F8_ROWS; r++)
        if ((threadIdx.x & 31) == 0 && r < nt) out[(size_t)r * ldo] = acc[r] + 0.0f;
}

/* the warp's share of fp8_mm_custom's grid (a warp per output column,
 * F8_ROWS token rows a block): its column, first row, rows, and the x row
 * of each slot (slots past nt repeat the first); 0 past the last column */
static __device__ __forceinline__ int fp8_tile(int *n, int *t0, int *nt, const float **xr, const float *x, int T, int K,
                                        int N)
{
    *n = blockIdx.x * F8_WARPS + (threadIdx.x >> 5);
    *t0 = blockIdx.y * F8_ROWS;
    if (*n >= N) return 0;
    *nt = T - *t0 < F8_ROWS ? T - *t0 : F8_ROWS;
#pragma unroll
    for (int r = 0; r < F8_ROWS; r++) xr[r] = x + (size_t)(*t0 + (r < *nt ? r : 0)) * (size_t)K;
    return 1;
}

/* a warp per output column n and up to F8_ROWS token rows */
template <int VEC>
__global__ void __launch_bounds__(32 * F8_WARPS)
    fp8_mm_custom(float *out, const float *x, const uint8_t *q, const float *scale, int T, int K, int N, int br,
                  int bc)
{
    int n, t0, nt, nbc = (K + bc - 1) / bc;
    const float *xr[F8_ROWS];
    if (!fp8_tile(&n, &t0, &nt, xr, x, T, K, N)) return;
    fp8_warp_rows<VEC>(out + (size_t)t0 * (size_t)N + n, (size_t)N, q + (size_t)n * (size_t)K,
                       scale + (size_t)(n / br) * (size_t)nbc, K, bc, xr, nt);
}

#endif /* LD_CUDA_FP8_MM_CUH */
