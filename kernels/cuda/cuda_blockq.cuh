/* cuda_blockq.cuh - the warp dot products of the block-scaled weights
 * (FP8 E4M3 with a scale grid, FP4 E2M1 with fp32 or UE8M0 scales) that
 * every kernel computing a column of such a matmul shares: the plain and
 * the grouped GEMMs (cuda_fp8.cu, cuda_moe.cu, cuda_ds4_moe.cu) and the MoE's
 * mixed launches, so that one column's sums are the same bits whichever
 * kernel computes them. */
#ifndef LD_CUDA_BLOCKQ_CUH
#define LD_CUDA_BLOCKQ_CUH

#include "cuda_common.cuh"
#include "cuda_ops.h"

/* ---------------------------------------------------------------- FP8 */

#define F8_ROWS 8 /* token rows per warp */
#define F8_WARPS 8

/* one warp's dot products of the weight row (qr, its scale row srow) with
 * the rows xr[0..nt): lane L takes the 16-byte chunks L, L + 32, ... of the
 * row (VEC: K % 16 == 0, the row 16-byte aligned; else single bytes
 * k = L, L + 32, ...), fmaf in order, then the shuffle tree; every lane
 * gets the sums */
template <int VEC>
__device__ __forceinline__ void fp8_warp_dot(float *acc, const uint8_t *qr, const float *srow, int K, int bc,
                                             const float *const *xr, int nt)
{
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < F8_ROWS; r++) acc[r] = 0.0f;
    if (VEC) {
        int chunks = K / 16;
        int same = bc % 16 == 0;
        for (int ch = lane; ch < chunks; ch += 32) {
            uint4 u = ((const uint4 *)qr)[ch];
            uint32_t wd[4] = {u.x, u.y, u.z, u.w};
            int k0 = ch * 16;
            float s0 = srow[k0 / bc];
            float w[16];
#pragma unroll
            for (int e = 0; e < 16; e++) {
                float s = same ? s0 : srow[(k0 + e) / bc];
                w[e] = ld_e4m3_to_f32((wd[e >> 2] >> (8 * (e & 3))) & 255u) * s;
            }
#pragma unroll
            for (int r = 0; r < F8_ROWS; r++) {
                if (r < nt) {
                    const float *xk = xr[r] + k0;
#pragma unroll
                    for (int e = 0; e < 16; e++) acc[r] = fmaf(xk[e], w[e], acc[r]);
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            float w = ld_e4m3_to_f32(qr[k]) * srow[k / bc];
#pragma unroll
            for (int r = 0; r < F8_ROWS; r++)
                if (r < nt) acc[r] = fmaf(xr[r][k], w, acc[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < F8_ROWS; r++) acc[r] = ld_warp_sum(acc[r]);
}

/* a column's dot products of group w's weight over the tile's rows, as
 * fp8_mm_custom's warp computes them (its 16-byte path chosen as that
 * launcher chooses it: K % 16, q aligned) */
__device__ __forceinline__ void fp8_group_dot(float *acc, const ld_cu_mm_group &w, int n, int K, int br, int bc,
                                              const float *const *xr, int nt)
{
    int nbc = (K + bc - 1) / bc;
    const uint8_t *qr = w.q + (size_t)n * (size_t)K;
    const float *srow = w.scale + (size_t)(n / br) * (size_t)nbc;
    if (K % 16 == 0 && ((uintptr_t)w.q & 15) == 0)
        fp8_warp_dot<1>(acc, qr, srow, K, bc, xr, nt);
    else
        fp8_warp_dot<0>(acc, qr, srow, K, bc, xr, nt);
}

/* ---------------------------------------------------------------- FP4 */

/* the scale of block (rb, cb): fp32 or UE8M0 bytes */
__device__ __forceinline__ float fp4_scale(const void *scale, int e8m0, size_t i)
{
    return e8m0 ? ld_e8m0_to_f32(((const uint8_t *)scale)[i]) : ((const float *)scale)[i];
}

#define F4_ROWS 8
#define F4_WARPS 8

/* one warp's dot products of weight row n (qr, its scale row at srow of
 * the grid) with the token rows xr[0..nt), written to out_rows[r][n]:
 * lane L the 16-byte chunks (32 weights) L, L + 32, .. (VEC: K % 32 == 0,
 * rows 16-byte aligned; else the bytes L, L + 32, ..), fmaf in order, the
 * shuffle tree */
template <int VEC>
__device__ __forceinline__ void fp4_warp_dot(float *acc, const float *const *xr, int nt, const uint8_t *qr,
                                             const void *scale, int e8m0, size_t srow, int K, int bn)
{
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int r = 0; r < F4_ROWS; r++) acc[r] = 0.0f;
    if (VEC) {
        int chunks = K / 32, same = bn % 32 == 0;
        for (int ch = lane; ch < chunks; ch += 32) {
            uint4 u = ((const uint4 *)qr)[ch];
            uint32_t wd[4] = {u.x, u.y, u.z, u.w};
            int k0 = ch * 32;
            float s0 = fp4_scale(scale, e8m0, srow + (size_t)(k0 / bn));
            float w[32];
#pragma unroll
            for (int e = 0; e < 32; e++) {
                float s = same ? s0 : fp4_scale(scale, e8m0, srow + (size_t)((k0 + e) / bn));
                w[e] = ld_e2m1_to_f32((wd[e >> 3] >> (4 * (e & 7))) & 15u) * s;
            }
#pragma unroll
            for (int r = 0; r < F4_ROWS; r++)
                if (r < nt) {
                    const float4 *xk = (const float4 *)(xr[r] + k0);
#pragma unroll
                    for (int e4 = 0; e4 < 8; e4++) {
                        float4 xv = xk[e4];
                        acc[r] = fmaf(xv.x, w[4 * e4], acc[r]);
                        acc[r] = fmaf(xv.y, w[4 * e4 + 1], acc[r]);
                        acc[r] = fmaf(xv.z, w[4 * e4 + 2], acc[r]);
                        acc[r] = fmaf(xv.w, w[4 * e4 + 3], acc[r]);
                    }
                }
        }
    } else {
        for (int kb = lane; kb < K / 2; kb += 32) {
            uint32_t b = qr[kb];
            int k = 2 * kb;
            float w0 = ld_e2m1_to_f32(b & 15u) * fp4_scale(scale, e8m0, srow + (size_t)(k / bn));
            float w1 = ld_e2m1_to_f32(b >> 4) * fp4_scale(scale, e8m0, srow + (size_t)((k + 1) / bn));
#pragma unroll
            for (int r = 0; r < F4_ROWS; r++)
                if (r < nt) {
                    acc[r] = fmaf(xr[r][k], w0, acc[r]);
                    acc[r] = fmaf(xr[r][k + 1], w1, acc[r]);
                }
        }
    }
#pragma unroll
    for (int r = 0; r < F4_ROWS; r++) acc[r] = ld_warp_sum(acc[r]);
}

/* a column's dot products of group w's weight (fp32 scales) over the
 * tile's rows, as fp4_mm_custom's warp computes them; its 16-byte path
 * where ld_cu_ds4_fp4_matmul would take it (K % 32, q and x 16-byte
 * aligned, x's rows too: ldx % 4) */
__device__ __forceinline__ void fp4_group_dot(float *acc, const ld_cu_mm_group &w, const ld_cu_mm_group &g, int n,
                                              int K, int bm, int bn, const float *const *xr, int nt)
{
    size_t ldx = g.ldx ? g.ldx : (size_t)K, srow = (size_t)(n / bm) * (size_t)(K / bn);
    const uint8_t *qr = w.q + (size_t)n * (size_t)(K / 2);
    if (K % 32 == 0 && ((uintptr_t)w.q & 15) == 0 && ((uintptr_t)g.x & 15) == 0 && ldx % 4 == 0)
        fp4_warp_dot<1>(acc, xr, nt, qr, w.scale, 0, srow, K, bn);
    else
        fp4_warp_dot<0>(acc, xr, nt, qr, w.scale, 0, srow, K, bn);
}

/* ---------------------------------------------------------------- grouped tiles */

/* a column's dot products of group g (FP4 or FP8) over the tile's rows */
template <int FP4>
__device__ __forceinline__ void group_dot(float *acc, const ld_cu_mm_group &w, const ld_cu_mm_group &g, int n, int K,
                                          int br, int bc, const float *const *xr, int nt)
{
    if (FP4)
        fp4_group_dot(acc, w, g, n, K, br, bc, xr, nt);
    else
        fp8_group_dot(acc, w, n, K, br, bc, xr, nt);
}

/* the value a grouped GEMM stores for a sum: FP8 the sum + 0 (as the FP8
 * matmul, whose reference adds its zero bias), FP4 the sum */
template <int FP4> __device__ __forceinline__ float group_stored(float v)
{
    return FP4 ? v : v + 0.0f;
}

/* one block of a grouped GEMM over group gy of groups (its tile from the
 * grid's x and z), FP8 (blocks br x bc; out = the sum + 0, as the FP8
 * matmul stores) or FP4 (fp32 scales, blocks br x bc; out = the sum).
 * GLU: group G + gy is gy's up, and the gate's output receives the
 * clamped SwiGLU of the two (those same values) */
template <int FP4, int GLU>
__device__ __forceinline__ void grouped_tile(const ld_cu_mm_group *groups, int G, int gy, int K, int N, int br, int bc,
                                             float limit)
{
    static_assert(F4_ROWS == F8_ROWS && F4_WARPS == F8_WARPS, "one tile for both kinds");
    const ld_cu_mm_group g = groups[gy];
    ld_cu_tile t;
    const float *xr[F8_ROWS];
    if (!ld_cu_grouped_tile<F8_ROWS>(&t, xr, g, K, N, F8_WARPS)) return;
    float a[F8_ROWS], b[F8_ROWS];
    group_dot<FP4>(a, g, g, t.n, K, br, bc, xr, t.nt);
    if (GLU) group_dot<FP4>(b, groups[G + gy], g, t.n, K, br, bc, xr, t.nt);
#pragma unroll
    for (int r = 0; r < F8_ROWS; r++)
        if ((threadIdx.x & 31) == 0 && r < t.nt)
            g.out[(size_t)(t.t0 + r) * t.ldo + (size_t)t.n] =
                GLU ? ld_cswiglu(group_stored<FP4>(a[r]), group_stored<FP4>(b[r]), limit) : group_stored<FP4>(a[r]);
}

/* ---------------------------------------------------------------- mHC */

/* column d of token t's new streams (ld_ref_ds4_hc_post) from the block's
 * output fd: out[t][k][d] = post[t][k] fd + sum_j comb[t][j][k] X[t][j][d]
 * for k < N (hc_post_custom's thread; the fused epilogues' too: the same
 * bits) */
__device__ __forceinline__ void hc_post_col(float *out, const float *X, float fd, const float *post,
                                            const float *comb, size_t t, size_t d, int N, int D)
{
    size_t ND = (size_t)N * (size_t)D;
    const float *x = X + t * ND + d, *cb = comb + t * (size_t)N * (size_t)N;
    for (int k = 0; k < N; k++) {
        float acc = 0.0f;
        for (int j = 0; j < N; j++) acc += cb[(size_t)j * (size_t)N + (size_t)k] * x[(size_t)j * (size_t)D];
        out[t * ND + (size_t)k * (size_t)D + d] = post[t * (size_t)N + (size_t)k] * fd + acc;
    }
}

/* the routed experts' combine of column n of token t (combine_ref's
 * expression: from zero, the K rows in order) plus f (the shared expert's
 * output, added last) */
__device__ __forceinline__ float moe_combine_col(const ld_cu_combine &c, size_t t, size_t n, size_t D, float f)
{
    float a = 0.0f;
    for (int k = 0; k < c.K; k++) {
        size_t tk = t * (size_t)c.K + (size_t)k;
        size_t row = c.row_of ? (size_t)c.row_of[tk] : tk;
        a = a + c.eo[row * D + n] * c.w[tk];
    }
    return a + f;
}

#endif /* LD_CUDA_BLOCKQ_CUH */
