/* cuda_moe.cu - DeepSeek's routed experts on the device: the plan
 * (rows grouped by expert), the FP8 GEMMs over the grouped rows (one
 * expert's weights a launch, or a table of them), the tables from the
 * device plan, and the combine of the experts' outputs. */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_fp8_mm.cuh"
#include "cuda_moe_plan.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

/* ================================================================ MoE plan, grouped FP8 GEMM */

/* thread per expert: its count, then (one thread) the offsets, then its
 * rows in token order; the custom kernel does the three in one block */
__global__ void moe_count(int32_t *offsets, const int32_t *idx, int TK, int E)
{
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    int cnt = 0;
    for (int i = 0; i < TK; i++) cnt += idx[i] == e;
    offsets[e + 1] = cnt;
}

__global__ void moe_offsets(int32_t *offsets, int E)
{
    offsets[0] = 0;
    for (int e = 0; e < E; e++) offsets[e + 1] += offsets[e];
}

__global__ void moe_fill(int32_t *rows, int32_t *row_of, const int32_t *offsets, const int32_t *idx, int TK, int K,
                         int E)
{
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    int r = offsets[e];
    for (int i = 0; i < TK; i++)
        if (idx[i] == e) {
            rows[r] = i / K;
            row_of[i] = r++;
        }
}

__global__ void __launch_bounds__(PLAN_THREADS)
    moe_plan_custom(int32_t *offsets, int32_t *rows, int32_t *row_of, const int32_t *idx, int TK, int K, int E)
{
    LD_CU_DYN_SMEM(int32_t, cnt); /* E + 1 */
    moe_plan_block(offsets, rows, row_of, idx, TK, K, E, cnt);
}

extern "C" int ld_cu_moe_plan(int v, int32_t *offsets, int32_t *rows, int32_t *row_of, const int32_t *idx, int T,
                              int K, int E)
{
    if (E <= 0 || K <= 0 || T < 0) return INVAL;
    int TK = T * K, e;
    if (v == LD_CU_REF) {
        moe_count<<<ld_cu_blocks((size_t)E, 128), 128>>>(offsets, idx, TK, E);
        if ((e = ld_cu_launched())) return e;
        moe_offsets<<<1, 1>>>(offsets, E);
        if ((e = ld_cu_launched())) return e;
        moe_fill<<<ld_cu_blocks((size_t)E, 128), 128>>>(rows, row_of, offsets, idx, TK, K, E);
        return ld_cu_launched();
    }
    if ((size_t)(E + 1) * 4 > 48 * 1024) return INVAL;
    moe_plan_custom<<<1, PLAN_THREADS, (size_t)(E + 1) * sizeof(int32_t)>>>(offsets, rows, row_of, idx, TK, K, E);
    return ld_cu_launched();
}

/* the expert of grouped row r: offsets[e] <= r < offsets[e + 1] (binary
 * search; empty experts have equal offsets) */
__device__ __forceinline__ int moe_expert_of(const int32_t *offsets, int E, int r)
{
    int lo = 0, hi = E - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (offsets[mid] <= r) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

__global__ void moe_fp8_ref(float *out, const float *x, const int32_t *rows, const int32_t *offsets, const uint8_t *q,
                            const float *scale, int E, int R, int K, int N, int br, int bc)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)R * (size_t)N) return;
    int r = (int)(idx / (size_t)N), n = (int)(idx % (size_t)N);
    int e = moe_expert_of(offsets, E, r);
    int nbr = (N + br - 1) / br, nbc = (K + bc - 1) / bc;
    const float *srow = scale + ((size_t)e * (size_t)nbr + (size_t)(n / br)) * (size_t)nbc;
    const uint8_t *qr = q + ((size_t)e * (size_t)N + (size_t)n) * (size_t)K;
    const float *xr = x + (size_t)rows[r] * (size_t)K;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        float w = ld_e4m3_to_f32(qr[k]) * srow[k / bc];
        acc += xr[k] * w;
    }
    out[idx] = acc + 0.0f;
}

/* block (column tile, expert e, row tile of that expert): a warp per
 * column, the expert's rows gathered through rows[] */
template <int VEC>
__global__ void __launch_bounds__(32 * F8_WARPS)
    moe_fp8_custom(float *out, const float *x, const int32_t *rows, const int32_t *offsets, const uint8_t *q,
                   const float *scale, int K, int N, int br, int bc)
{
    int n = blockIdx.x * F8_WARPS + (threadIdx.x >> 5), e = blockIdx.y;
    int r0 = offsets[e] + (int)blockIdx.z * F8_ROWS, r1 = offsets[e + 1];
    if (n >= N || r0 >= r1) return;
    int nt = r1 - r0 < F8_ROWS ? r1 - r0 : F8_ROWS;
    int nbr = (N + br - 1) / br, nbc = (K + bc - 1) / bc;
    const float *xr[F8_ROWS];
#pragma unroll
    for (int r = 0; r < F8_ROWS; r++) xr[r] = x + (size_t)rows[r0 + (r < nt ? r : 0)] * (size_t)K;
    fp8_warp_rows<VEC>(out + (size_t)r0 * (size_t)N + n, (size_t)N,
                       q + ((size_t)e * (size_t)N + (size_t)n) * (size_t)K,
                       scale + ((size_t)e * (size_t)nbr + (size_t)(n / br)) * (size_t)nbc, K, bc, xr, nt);
}

extern "C" int ld_cu_moe_fp8_matmul(int v, float *out, const float *x, const int32_t *rows, const int32_t *offsets,
                                    const uint8_t *q, const float *scale, int E, int R, int max_rows, int K, int N,
                                    int br, int bc)
{
    if (R <= 0 || N <= 0) return 0;
    if (E <= 0 || K <= 0 || br <= 0 || bc <= 0 || max_rows < 0) return INVAL;
    if (v == LD_CU_REF) {
        moe_fp8_ref<<<ld_cu_blocks((size_t)R * (size_t)N, 128), 128>>>(out, x, rows, offsets, q, scale, E, R, K, N,
                                                                        br, bc);
        return ld_cu_launched();
    }
    if (max_rows > R) max_rows = R;
    unsigned gz = (unsigned)((max_rows + F8_ROWS - 1) / F8_ROWS);
    if (!gz) return 0;
    if (E > 65535 || gz > 65535) return INVAL;
    dim3 grid((unsigned)((N + F8_WARPS - 1) / F8_WARPS), (unsigned)E, gz);
    if (K % 16 == 0 && ((uintptr_t)q & 15) == 0)
        moe_fp8_custom<1><<<grid, 32 * F8_WARPS>>>(out, x, rows, offsets, q, scale, K, N, br, bc);
    else
        moe_fp8_custom<0><<<grid, 32 * F8_WARPS>>>(out, x, rows, offsets, q, scale, K, N, br, bc);
    return ld_cu_launched();
}

/* ================================================================ grouped FP8 GEMM */

/* block (column tile, group g, row tile of g): fp8_mm_custom's warp over
 * group g's own weight and rows (out = the sum + 0, as it writes).  GLU:
 * the G groups are gates and group G + g is g's up over the same rows of
 * the same x; the warp computes both and writes the clamped SwiGLU of the
 * two (each + 0: the values the unfused path would store) into the gate's
 * output */
template <int GLU>
__global__ void __launch_bounds__(32 * F8_WARPS)
    fp8_mm_grouped(const ld_cu_mm_group *groups, int G, int K, int N, int br, int bc, float limit)
{
    grouped_tile<0, GLU>(groups, G, blockIdx.y, K, N, br, bc, limit);
}

static int grouped_fp8(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc, int glu,
                       float limit)
{
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0) return INVAL;
    dim3 grid;
    int ok = ld_cu_grouped_grid(&grid, G, max_rows, N, F8_WARPS, F8_ROWS);
    if (ok <= 0) return ok ? INVAL : 0;
    if (glu)
        fp8_mm_grouped<1><<<grid, 32 * F8_WARPS>>>(tab, G, K, N, br, bc, limit);
    else
        fp8_mm_grouped<0><<<grid, 32 * F8_WARPS>>>(tab, G, K, N, br, bc, limit);
    return ld_cu_launched();
}

extern "C" int ld_cu_grouped_fp8_matmul(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc)
{
    return grouped_fp8(tab, G, max_rows, K, N, br, bc, 0, 0.0f);
}

/* the norms of a launch, by value */
struct fan_norms {
    ld_cu_norm_w g[LD_CU_FAN_MAX];
};

/* the grouped FP8 GEMM's block, then the last block of its row tile to be
 * done norms the tile's rows of the groups with a norm (in place, their
 * values through L2: rmsnorm_custom's sums and products) */
__global__ void __launch_bounds__(32 * F8_WARPS)
    fp8_mm_grouped_norm(const ld_cu_mm_group *groups, int G, int K, int N, int br, int bc, fan_norms nm, float eps,
                        int *sync)
{
    static_assert(32 * F8_WARPS == LD_CU_NORM_THREADS, "the norm is rmsnorm_custom's block");
    __shared__ float sh[LD_CU_NORM_THREADS];
    __shared__ int last;
    grouped_tile<0, 0>(groups, G, blockIdx.y, K, N, br, bc, 0.0f);
    if (!ld_cu_last_block(&sync[blockIdx.z], (int)(gridDim.x * gridDim.y), &last)) return; /* the outputs written */
    for (int g = 0; g < G; g++) {
        if (!nm.g[g].w) continue;
        const ld_cu_mm_group t = groups[g];
        int gn = t.n ? t.n : N, r1 = (int)(blockIdx.z + 1) * F8_ROWS;
        size_t ldo = t.ldo ? t.ldo : (size_t)gn;
        for (int r = (int)blockIdx.z * F8_ROWS; r < t.rows && r < r1; r++) {
            float *row = t.out + (size_t)r * ldo;
            float inv = ld_norm_inv_cg(row, gn, eps, sh);
            for (int i = threadIdx.x; i < gn; i += LD_CU_NORM_THREADS)
                row[i] = ld_elem_f(nm.g[g].w, (int)nm.g[g].dt, (size_t)i) * (__ldcg(row + i) * inv);
        }
    }
}

extern "C" int ld_cu_grouped_fp8_matmul_norm(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br,
                                             int bc, const ld_cu_norm_w *norms, float eps, int *sync)
{
    if (G <= 0 || N <= 0) return 0;
    if (G > LD_CU_FAN_MAX || K <= 0 || br <= 0 || bc <= 0 || !sync) return INVAL;
    fan_norms nm;
    for (int g = 0; g < G; g++) {
        nm.g[g] = norms[g];
        if (nm.g[g].w && nm.g[g].dt != LD_KDT_F32 && nm.g[g].dt != LD_KDT_F16 && nm.g[g].dt != LD_KDT_BF16)
            return INVAL;
    }
    dim3 grid;
    int ok = ld_cu_grouped_grid(&grid, G, max_rows, N, F8_WARPS, F8_ROWS);
    if (ok <= 0) return ok ? INVAL : 0;
    fp8_mm_grouped_norm<<<grid, 32 * F8_WARPS>>>(tab, G, K, N, br, bc, nm, eps, sync);
    return ld_cu_launched();
}

extern "C" int ld_cu_grouped_fp8_glu(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                                     float limit)
{
    return grouped_fp8(tab, G, max_rows, K, N, br, bc, 1, limit);
}

__global__ void __launch_bounds__(TAB_THREADS)
    moe_tables_kernel(ld_cu_mm_group *tab, int G, const int32_t *offsets, const ld_cu_moe_w *w, int E,
                      const float *xe, const int32_t *xrows, float *g, float *u, float *eo, int D, int I)
{
    __shared__ int pos[TAB_THREADS];
    moe_tables_block(tab, G, offsets, w, E, xe, xrows, g, u, eo, D, I, pos);
}

extern "C" int ld_cu_moe_tables(ld_cu_mm_group *tab, int G, const int32_t *offsets, const ld_cu_moe_w *w, int E,
                                const float *xe, const int32_t *xrows, float *g, float *u, float *eo, int D, int I)
{
    if (G <= 0) return 0;
    if (E <= 0 || E > TAB_THREADS || D <= 0 || I <= 0) return INVAL;
    moe_tables_kernel<<<1, TAB_THREADS>>>(tab, G, offsets, w, E, xe, xrows, g, u, eo, D, I);
    return ld_cu_launched();
}

/* ================================================================ MoE combine */

/* from y (or from +0: what a memset to zero would leave), the K
 * products, then + add (NULL: none) */
__global__ void combine_ref(float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K, int D,
                            int from_zero, const float *add)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)D) return;
    size_t t = idx / (size_t)D, d = idx % (size_t)D;
    float acc = from_zero ? 0.0f : y[idx];
    for (int k = 0; k < K; k++) {
        size_t tk = t * (size_t)K + (size_t)k;
        size_t row = row_of ? (size_t)row_of[tk] : tk;
        acc = acc + eo[row * (size_t)D + d] * w[tk];
    }
    if (add) acc = acc + add[idx];
    y[idx] = acc;
}

/* four columns per thread (float4), the same arithmetic */
__global__ void combine_custom(float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K, int D,
                               int from_zero, const float *add)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, D4 = (size_t)D / 4;
    if (idx >= (size_t)T * D4) return;
    size_t t = idx / D4, d4 = idx % D4;
    float4 a = from_zero ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : ((float4 *)y)[idx];
    for (int k = 0; k < K; k++) {
        size_t tk = t * (size_t)K + (size_t)k;
        size_t row = row_of ? (size_t)row_of[tk] : tk;
        float wk = w[tk];
        float4 x = ((const float4 *)eo)[row * D4 + d4];
        a.x = a.x + x.x * wk;
        a.y = a.y + x.y * wk;
        a.z = a.z + x.z * wk;
        a.w = a.w + x.w * wk;
    }
    if (add) {
        float4 b = ((const float4 *)add)[idx];
        a.x = a.x + b.x;
        a.y = a.y + b.y;
        a.z = a.z + b.z;
        a.w = a.w + b.w;
    }
    ((float4 *)y)[idx] = a;
}

extern "C" int ld_cu_moe_combine_ex(int v, float *y, const float *eo, const int32_t *row_of, const float *w, int T,
                                    int K, int D, int from_zero, const float *add)
{
    if (T <= 0 || D <= 0 || K < 0) return 0;
    if (v == LD_CU_CUSTOM && D % 4 == 0 && (((uintptr_t)y | (uintptr_t)eo | (uintptr_t)add) & 15) == 0) {
        combine_custom<<<ld_cu_blocks((size_t)T * (size_t)(D / 4), 256), 256>>>(y, eo, row_of, w, T, K, D, from_zero,
                                                                                add);
        return ld_cu_launched();
    }
    combine_ref<<<ld_cu_blocks((size_t)T * (size_t)D, 256), 256>>>(y, eo, row_of, w, T, K, D, from_zero, add);
    return ld_cu_launched();
}

extern "C" int ld_cu_moe_combine(int v, float *y, const float *eo, const int32_t *row_of, const float *w, int T,
                                 int K, int D)
{
    if (K <= 0) return 0;
    return ld_cu_moe_combine_ex(v, y, eo, row_of, w, T, K, D, 0, NULL);
}
