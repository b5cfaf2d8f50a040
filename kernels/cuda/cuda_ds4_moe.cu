/* cuda_ds4_moe.cu - DeepSeek-V4's experts on the device: the clamped
 * SwiGLU, the FP4 E2M1 block-scaled GEMV and the MoE's launches mixing FP4
 * and FP8 experts. */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

/* ================================================================ clamped SwiGLU */

__global__ void cswiglu_ref(float *out, const float *g, const float *u, int T, int F, size_t ld, float limit)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)F) return;
    size_t t = idx / (size_t)F, i = idx % (size_t)F;
    out[idx] = ld_cswiglu(g[t * ld + i], u[t * ld + i], limit);
}

/* four elements a thread (16-byte loads and stores) */
__global__ void cswiglu_custom4(float *out, const float *g, const float *u, int T, int F, size_t ld, float limit)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, F4 = (size_t)F / 4;
    if (idx >= (size_t)T * F4) return;
    size_t t = idx / F4, i = idx % F4;
    float4 a = ((const float4 *)(g + t * ld))[i], b = ((const float4 *)(u + t * ld))[i], r;
    r.x = ld_cswiglu(a.x, b.x, limit);
    r.y = ld_cswiglu(a.y, b.y, limit);
    r.z = ld_cswiglu(a.z, b.z, limit);
    r.w = ld_cswiglu(a.w, b.w, limit);
    ((float4 *)(out + t * (size_t)F))[i] = r;
}

extern "C" int ld_cu_ds4_clamped_swiglu(int v, float *out, const float *g, const float *u, int T, int F, size_t ld,
                                        float limit)
{
    if (T <= 0 || F <= 0) return 0;
    if (ld < (size_t)F) return INVAL;
    int vec = F % 4 == 0 && ld % 4 == 0 && ((uintptr_t)out & 15) == 0 && ((uintptr_t)g & 15) == 0 &&
              ((uintptr_t)u & 15) == 0;
    if (v == LD_CU_REF || !vec)
        cswiglu_ref<<<ld_cu_blocks((size_t)T * (size_t)F, 256), 256>>>(out, g, u, T, F, ld, limit);
    else
        cswiglu_custom4<<<ld_cu_blocks((size_t)T * (size_t)F / 4, 256), 256>>>(out, g, u, T, F, ld, limit);
    return ld_cu_launched();
}

/* ================================================================ FP4 GEMV */

/* ref: a thread per (t, n), ld_ref_ds4_dequant's product then the C
 * matmul's one accumulator in k order */
__global__ void fp4_mm_ref(float *out, const float *x, const uint8_t *q, const void *scale, int e8m0, int T, int K,
                           int N, int bm, int bn, int sc)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)N) return;
    int t = (int)(idx / (size_t)N), n = (int)(idx % (size_t)N);
    const uint8_t *qr = q + (size_t)n * (size_t)(K / 2);
    const float *xr = x + (size_t)t * (size_t)K;
    size_t srow = (size_t)(n / bm) * (size_t)sc;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        uint32_t b = qr[k / 2];
        float w = ld_e2m1_to_f32(k % 2 ? b >> 4 : b & 15u) * fp4_scale(scale, e8m0, srow + (size_t)(k / bn));
        acc += xr[k] * w;
    }
    out[idx] = acc;
}

/* fp4_warp_dot's sums written by lane 0: out[r * ldo] for r < nt */
template <int VEC>
__device__ __forceinline__ void fp4_warp_rows(float *out, size_t ldo, const float *const *xr, int nt,
                                              const uint8_t *qr, const void *scale, int e8m0, size_t srow, int K,
                                              int bn)
{
    float acc[F4_ROWS];
    fp4_warp_dot<VEC>(acc, xr, nt, qr, scale, e8m0, srow, K, bn);
#pragma unroll
    for (int r = 0; r < F4_ROWS; r++)
        if ((threadIdx.x & 31) == 0 && r < nt) out[(size_t)r * ldo] = acc[r];
}

/* custom: a warp per output column n and up to F4_ROWS token rows */
template <int VEC>
__global__ void __launch_bounds__(32 * F4_WARPS)
    fp4_mm_custom(float *out, const float *x, const uint8_t *q, const void *scale, int e8m0, int T, int K, int N,
                  int bm, int bn, int sc)
{
    int n = blockIdx.x * F4_WARPS + (threadIdx.x >> 5);
    int t0 = blockIdx.y * F4_ROWS;
    if (n >= N) return;
    int nt = T - t0 < F4_ROWS ? T - t0 : F4_ROWS;
    const float *xr[F4_ROWS];
#pragma unroll
    for (int r = 0; r < F4_ROWS; r++) xr[r] = x + (size_t)(t0 + (r < nt ? r : 0)) * (size_t)K;
    fp4_warp_rows<VEC>(out + (size_t)t0 * (size_t)N + n, (size_t)N, xr, nt, q + (size_t)n * (size_t)(K / 2), scale,
                       e8m0, (size_t)(n / bm) * (size_t)sc, K, bn);
}

/* grouped: block (column tile, group g, row tile of g), the custom warp
 * over g's weight and rows.  GLU: groups G + g the ups of the gates g over
 * the same rows of the same x, the clamped SwiGLU of the two written into
 * the gate's output (fp8_mm_grouped's GLU) */
template <int GLU>
__global__ void __launch_bounds__(32 * F4_WARPS)
    fp4_mm_grouped(const ld_cu_mm_group *groups, int G, int K, int N, int bm, int bn, float limit)
{
    grouped_tile<1, GLU>(groups, G, blockIdx.y, K, N, bm, bn, limit);
}

static int grouped_fp4(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc, int glu,
                       float limit)
{
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || K % 2 || br <= 0 || bc <= 0 || N % br || K % bc) return INVAL;
    dim3 grid;
    int ok = ld_cu_grouped_grid(&grid, G, max_rows, N, F4_WARPS, F4_ROWS);
    if (ok <= 0) return ok ? INVAL : 0;
    if (glu)
        fp4_mm_grouped<1><<<grid, 32 * F4_WARPS>>>(tab, G, K, N, br, bc, limit);
    else
        fp4_mm_grouped<0><<<grid, 32 * F4_WARPS>>>(tab, G, K, N, br, bc, limit);
    return ld_cu_launched();
}

extern "C" int ld_cu_grouped_fp4_matmul(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc)
{
    return grouped_fp4(tab, G, max_rows, K, N, br, bc, 0, 0.0f);
}

extern "C" int ld_cu_grouped_fp4_glu(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                                     float limit)
{
    return grouped_fp4(tab, G, max_rows, K, N, br, bc, 1, limit);
}

/* ================================================================ the MoE's mixed launches */

/* block (column tile, group y of a then b, row tile): that part's GLU tile */
__global__ void __launch_bounds__(32 * F8_WARPS)
    glu2_custom(ld_cu_moe_part a, ld_cu_moe_part b, int K, float limit)
{
    int y = (int)blockIdx.y, in_a = y < a.G;
    const ld_cu_moe_part &p = in_a ? a : b;
    int gy = in_a ? y : y - a.G;
    if (p.fp4)
        grouped_tile<1, 1>(p.tab, p.G, gy, K, p.N, p.br, p.bc, limit);
    else
        grouped_tile<0, 1>(p.tab, p.G, gy, K, p.N, p.br, p.bc, limit);
}

extern "C" int ld_cu_grouped_glu2(ld_cu_moe_part a, ld_cu_moe_part b, int max_rows, int K, float limit)
{
    static_assert(F4_WARPS == F8_WARPS && F4_ROWS == F8_ROWS, "one grid for both kinds");
    if (a.G < 0 || b.G < 0 || K <= 0 || (a.G && (a.N <= 0 || a.br <= 0 || a.bc <= 0)) ||
        (b.G && (b.N <= 0 || b.br <= 0 || b.bc <= 0)) || ((a.fp4 || b.fp4) && K % 2))
        return INVAL;
    if (!a.G && !b.G) return 0;
    dim3 grid;
    int N = a.N > b.N ? a.N : b.N;
    int ok = ld_cu_grouped_grid(&grid, a.G + b.G, max_rows, N, F8_WARPS, F8_ROWS);
    if (ok <= 0) return ok ? INVAL : 0;
    glu2_custom<<<grid, 32 * F8_WARPS>>>(a, b, K, limit);
    return ld_cu_launched();
}

/* a warp per column n: every routed group's rows (down, into its output:
 * FP4 the sum, FP8 the sum + 0, the grouped kernels' stores), then the
 * shared down of the T tokens, the combine and the column's new streams
 * (fp8_mm_post's epilogue) */
__global__ void __launch_bounds__(32 * F8_WARPS)
    moe_down_post_custom(ld_cu_moe_part r, int Kr, const float *x, ld_cu_mm_group sd, int T, int Ks, int br, int bc,
                         ld_cu_combine c, ld_cu_post p)
{
    int n = (int)blockIdx.x * F8_WARPS + (int)(threadIdx.x >> 5), lane0 = (threadIdx.x & 31) == 0;
    if (n >= r.N) return;
    float acc[F8_ROWS];
    const float *xr[F8_ROWS];
    ld_cu_tile t;
    for (int gy = 0; gy < r.G; gy++) {
        const ld_cu_mm_group g = r.tab[gy];
        int gn = g.n ? g.n : r.N;
        for (int t0 = 0; n < gn && t0 < g.rows; t0 += F8_ROWS) {
            ld_cu_group_rows<F8_ROWS>(&t, xr, g, t0, Kr, gn);
            if (r.fp4)
                group_dot<1>(acc, g, g, n, Kr, r.br, r.bc, xr, t.nt);
            else
                group_dot<0>(acc, g, g, n, Kr, r.br, r.bc, xr, t.nt);
            for (int i = 0; lane0 && i < t.nt; i++) {
                float v = r.fp4 ? group_stored<1>(acc[i]) : group_stored<0>(acc[i]);
                g.out[(size_t)(t0 + i) * t.ldo + (size_t)n] = v;
            }
        }
    }
    for (int t0 = 0; t0 < T; t0 += F8_ROWS) {
        int nt = T - t0 < F8_ROWS ? T - t0 : F8_ROWS;
        for (int i = 0; i < F8_ROWS; i++) xr[i] = x + (size_t)(t0 + (i < nt ? i : 0)) * (size_t)Ks;
        fp8_group_dot(acc, sd, n, Ks, br, bc, xr, nt);
        for (int i = 0; lane0 && i < nt; i++) {
            size_t tt = (size_t)(t0 + i);
            float f = moe_combine_col(c, tt, (size_t)n, (size_t)r.N, group_stored<0>(acc[i]));
            hc_post_col(p.out, p.X, f, p.post, p.comb, tt, (size_t)n, p.N, r.N);
        }
    }
}

extern "C" int ld_cu_moe_down_post(ld_cu_moe_part r, int Kr, const float *x, const uint8_t *q, const float *scale,
                                   int T, int Ks, int br, int bc, ld_cu_combine c, ld_cu_post p)
{
    if (T <= 0 || r.N <= 0) return 0;
    if (r.G < 0 || Kr <= 0 || Ks <= 0 || br <= 0 || bc <= 0 || r.br <= 0 || r.bc <= 0 || (r.fp4 && Kr % 2) ||
        p.N <= 0 || c.K < 0 || !c.eo || !c.w)
        return INVAL;
    ld_cu_mm_group sd = {q, scale, NULL, NULL, 0, 0, 0, 0, NULL};
    moe_down_post_custom<<<(unsigned)((r.N + F8_WARPS - 1) / F8_WARPS), 32 * F8_WARPS>>>(r, Kr, x, sd, T, Ks, br, bc,
                                                                                          c, p);
    return ld_cu_launched();
}

extern "C" int ld_cu_ds4_fp4_matmul(int v, float *out, const float *x, const uint8_t *q, const void *scale,
                                    int scale_e8m0, int T, int K, int N, int sr, int sc)
{
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || K % 2 || sr <= 0 || sc <= 0 || N % sr || K % sc) return INVAL;
    int bm = N / sr, bn = K / sc;
    if (v == LD_CU_REF) {
        fp4_mm_ref<<<ld_cu_blocks((size_t)T * (size_t)N, 128), 128>>>(out, x, q, scale, scale_e8m0, T, K, N, bm, bn,
                                                                       sc);
        return ld_cu_launched();
    }
    unsigned gy = (unsigned)((T + F4_ROWS - 1) / F4_ROWS);
    if (gy > 65535) return INVAL;
    dim3 grid((unsigned)((N + F4_WARPS - 1) / F4_WARPS), gy);
    if (K % 32 == 0 && ((uintptr_t)q & 15) == 0 && ((uintptr_t)x & 15) == 0)
        fp4_mm_custom<1><<<grid, 32 * F4_WARPS>>>(out, x, q, scale, scale_e8m0, T, K, N, bm, bn, sc);
    else
        fp4_mm_custom<0><<<grid, 32 * F4_WARPS>>>(out, x, q, scale, scale_e8m0, T, K, N, bm, bn, sc);
    return ld_cu_launched();
}
