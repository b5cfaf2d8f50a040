/* cuda_deepseek.cu - the CUDA twins of the DeepSeek ops of ref_ds.h
 * and ref_ds4.h (see cuda_ops.h, section DeepSeek).
 *
 * Each op has a reference kernel (one thread per output element, or per
 * row where the C reference's loop is sequential: routers, top-k,
 * Sinkhorn), a literal port of the C loop in fp32 with its summation order,
 * so it equals the C reference bitwise except where CUDA's expf, log1pf
 * differ from the C library's by an ulp; and a custom kernel (warp and
 * block reductions, shared memory, split-K) whose order is a function of
 * the shapes only.  Compiled with --fmad=false: a*b+c is two roundings
 * unless written fmaf.  No float atomics; integer atomics only where the
 * result is a count (the top-k histograms, the MoE plan's counts).
 *
 * Sections: FP8 GEMM (ld_cu_fp8_matmul), MoE plan and grouped FP8 GEMM,
 * grouped FP8 GEMM over a table of weights (ld_cu_grouped_fp8_matmul), MLA
 * decode (latent attention dense/sparse, absorb_q/absorb_out),
 * indexer scores (V3.2, V4), top-k, routers (noaux_tc, sqrt-softplus /
 * hash), MoE combine, mHC pre/post. */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_index.cuh"
#include "cuda_mm_warp.cuh"
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
__device__ __forceinline__ int fp8_tile(int *n, int *t0, int *nt, const float **xr, const float *x, int T, int K,
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

#define PLAN_THREADS 1024

/* the plan by one block of any size (integers: the same whatever the
 * size), cnt [E + 1] in shared memory */
__device__ void moe_plan_block(int32_t *offsets, int32_t *rows, int32_t *row_of, const int32_t *idx, int TK, int K,
                               int E, int32_t *cnt)
{
    int nt = (int)blockDim.x;
    for (int e = threadIdx.x; e <= E; e += nt) cnt[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < TK; i += nt) {
        int e = idx[i];
        if (e >= 0 && e < E) atomicAdd(&cnt[e + 1], 1); /* a count: the same whatever the order */
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int e = 0; e < E; e++) cnt[e + 1] += cnt[e];
    __syncthreads();
    for (int e = threadIdx.x; e <= E; e += nt) offsets[e] = cnt[e];
    for (int e = threadIdx.x; e < E; e += nt) {
        int r = cnt[e];
        for (int i = 0; i < TK; i++)
            if (idx[i] == e) {
                rows[r] = i / K;
                row_of[i] = r++;
            }
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

/* the grouped launches' tables from the device plan: thread e (an
 * expert) has rows or not; its position among those that have is the
 * count of such below it (an inclusive scan of the flags in shared memory,
 * Hillis-Steele: log2 E rounds); threads k in [active, G) write the empty
 * entries */
#define TAB_THREADS 1024

/* the tables by one block of nt >= E threads, pos [nt] in shared memory */
__device__ void moe_tables_block(ld_cu_mm_group *tab, int G, const int32_t *offsets, const ld_cu_moe_w *w, int E,
                                 const float *xe, const int32_t *xrows, float *g, float *u, float *eo, int D, int I,
                                 int *pos)
{
    int e = threadIdx.x, nt = (int)blockDim.x;
    int r0 = e < E ? offsets[e] : 0, cnt = e < E ? offsets[e + 1] - r0 : 0;
    pos[e] = cnt > 0;
    __syncthreads();
    for (int step = 1; step < nt; step *= 2) {
        int add = e >= step ? pos[e - step] : 0;
        __syncthreads();
        pos[e] += add;
        __syncthreads();
    }
    int active = pos[nt - 1], k = pos[e] - 1;
    if (cnt > 0 && k < G) {
        size_t rd = (size_t)r0 * (size_t)D, ri = (size_t)r0 * (size_t)I;
        ld_cu_moe_w x = w[e];
        /* the gate and up read the expert's rows: gathered at xe + rd, or
         * picked from xe by xrows */
        const float *xg = xrows ? xe : xe + rd;
        const int32_t *xr = xrows ? xrows + r0 : NULL;
        tab[k] = ld_cu_mm_group{x.gate_q, x.gate_s, xg, g + ri, cnt, 0, 0, 0, xr};
        tab[G + k] = ld_cu_mm_group{x.up_q, x.up_s, xg, u + ri, cnt, 0, 0, 0, xr};
        tab[2 * G + k] = ld_cu_mm_group{x.down_q, x.down_s, g + ri, eo + rd, cnt, 0, 0, 0, NULL};
    }
    for (int j = active + e; j < G; j += nt) {
        ld_cu_mm_group none = {NULL, NULL, NULL, NULL, 0, 0, 0, 0, NULL};
        tab[j] = none;
        tab[G + j] = none;
        tab[2 * G + j] = none;
    }
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

/* ================================================================ MLA decode */

/* the j-th key of query t: its position */
__device__ __forceinline__ int mla_pos(const int32_t *st, int j)
{
    return st ? (int)st[j] : j;
}

__device__ __forceinline__ float mla_score(const float *qa, const float *qp, const float *kc, const float *kp, int c,
                                           int dr, float scale)
{
    float d = 0.0f;
    for (int i = 0; i < c; i++) d += qa[i] * kc[i];
    for (int i = 0; i < dr; i++) d += qp[i] * kp[i];
    return d * scale;
}

/* one thread per (t, h, i): the scores recomputed for the max, the sum and
 * the weighted sum, each the C reference's loop */
__global__ void mla_ref(float *o_lat, const float *q_abs, const float *q, const float *ckv, const float *kpe, int T,
                        int H, int dn, int dr, int c, int pos0, float scale, const int32_t *sel, int k)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)H * (size_t)c) return;
    size_t it = idx / (size_t)c;
    int i = (int)(idx % (size_t)c), t = (int)(it / (size_t)H), h = (int)(it % (size_t)H);
    int n = pos0 + t + 1;
    const int32_t *st = sel ? sel + (size_t)t * (size_t)k : NULL;
    if (sel && n > k) n = k;
    const float *qa = q_abs + it * (size_t)c;
    const float *qp = q + (size_t)t * (size_t)H * (size_t)(dn + dr) + (size_t)h * (size_t)(dn + dr) + dn;
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        int s = mla_pos(st, j);
        float d = mla_score(qa, qp, ckv + (size_t)s * (size_t)c, kpe + (size_t)s * (size_t)dr, c, dr, scale);
        if (d > mx) mx = d;
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        int s = mla_pos(st, j);
        sum += expf(mla_score(qa, qp, ckv + (size_t)s * (size_t)c, kpe + (size_t)s * (size_t)dr, c, dr, scale) - mx);
    }
    float o = 0.0f;
    for (int j = 0; j < n; j++) {
        int s = mla_pos(st, j);
        float p = expf(mla_score(qa, qp, ckv + (size_t)s * (size_t)c, kpe + (size_t)s * (size_t)dr, c, dr, scale) -
                       mx) /
                  sum;
        o += p * ckv[(size_t)s * (size_t)c + (size_t)i];
    }
    o_lat[idx] = o;
}

#define MLA_THREADS 128
#define MLA_HG 8      /* heads per block of the split kernel (they share the latent reads) */
#define MLA_KC 8      /* keys per chunk staged in shared memory */
#define MLA_GTHREADS 256
#define MLA_RMAX 3    /* c <= MLA_RMAX * MLA_GTHREADS */
#define MLA_MAXW 704  /* c + dr: (MLA_HG + MLA_KC) * (c + dr) floats of shared memory */

/* block (t, group of MLA_HG heads, split s): the split's keys staged
 * MLA_KC at a time ([ckv | kpe] rows in shared memory), read by every head
 * of the group.  Per (head, key) a warp's dot (lanes over the latent then
 * the rope part, fmaf in order, shuffle tree) * scale; per head the max,
 * exps and their sum in key order; then o[h][i] = sum_j p[h][j] ckv[j][i]
 * (key order, fmaf), the keys staged again.  rec(t, h, s) = (m, l, o[c]). */
__global__ void __launch_bounds__(MLA_GTHREADS)
    mla_split(float *work, const float *q_abs, const float *q, const float *ckv, const float *kpe, int H, int dn,
              int dr, int c, int pos0, float scale, const int32_t *sel, int k, int nsplit)
{
    LD_CU_DYN_SMEM(float, sm); /* qs [MLA_HG][c + dr], kv [MLA_KC][c + dr] */
    __shared__ float pe[MLA_HG][LD_CU_MLA_SPLIT];
    __shared__ float ml[MLA_HG][2];
    __shared__ int ps[LD_CU_MLA_SPLIT];
    int ng = (H + MLA_HG - 1) / MLA_HG;
    int t = (int)(blockIdx.x / (unsigned)ng), h0 = (int)(blockIdx.x % (unsigned)ng) * MLA_HG;
    int s = blockIdx.y, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    int hn = H - h0 < MLA_HG ? H - h0 : MLA_HG, W = c + dr;
    int n = pos0 + t + 1;
    const int32_t *st = sel ? sel + (size_t)t * (size_t)k : NULL;
    if (sel && n > k) n = k;
    int a = s * LD_CU_MLA_SPLIT, b = a + LD_CU_MLA_SPLIT < n ? a + LD_CU_MLA_SPLIT : n;
    size_t row0 = (size_t)t * (size_t)H + (size_t)h0;
    if (a >= b) {
        for (int h = tid; h < hn; h += MLA_GTHREADS) {
            float *rec = work + ((row0 + (size_t)h) * (size_t)nsplit + (size_t)s) * (size_t)(c + 2);
            rec[0] = -INFINITY;
            rec[1] = 0.0f;
        }
        return;
    }
    int cnt = b - a;
    float *qs = sm, *kv = sm + MLA_HG * W;
    for (int x = tid; x < hn * W; x += MLA_GTHREADS) {
        int h = x / W, i = x % W;
        size_t row = row0 + (size_t)h;
        qs[x] = i < c ? q_abs[row * (size_t)c + (size_t)i] : q[row * (size_t)(dn + dr) + (size_t)(dn + i - c)];
    }
    for (int j = tid; j < cnt; j += MLA_GTHREADS) ps[j] = mla_pos(st, a + j);
    __syncthreads();
    /* scores */
    for (int j0 = 0; j0 < cnt; j0 += MLA_KC) {
        int kn = cnt - j0 < MLA_KC ? cnt - j0 : MLA_KC;
        for (int x = tid; x < kn * W; x += MLA_GTHREADS) {
            int j = x / W, i = x % W;
            size_t pos = (size_t)ps[j0 + j];
            kv[x] = i < c ? ckv[pos * (size_t)c + (size_t)i] : kpe[pos * (size_t)dr + (size_t)(i - c)];
        }
        __syncthreads();
        for (int pr = w; pr < hn * kn; pr += MLA_GTHREADS / 32) {
            int h = pr / kn, j = pr % kn;
            const float *qh = qs + h * W, *kr = kv + j * W;
            float d = 0.0f;
            for (int i = lane; i < c; i += 32) d = fmaf(qh[i], kr[i], d);
            for (int i = lane; i < dr; i += 32) d = fmaf(qh[c + i], kr[c + i], d);
            d = ld_warp_sum(d);
            if (lane == 0) pe[h][j0 + j] = d * scale;
        }
        __syncthreads();
    }
    /* per head: max, exps, their sum in key order */
    if (tid < hn) {
        float m = -INFINITY, l = 0.0f;
        for (int j = 0; j < cnt; j++) m = fmaxf(m, pe[tid][j]);
        for (int j = 0; j < cnt; j++) {
            pe[tid][j] = expf(pe[tid][j] - m);
            l += pe[tid][j];
        }
        ml[tid][0] = m;
        ml[tid][1] = l;
    }
    __syncthreads();
    /* o[h][i], i = tid + r * MLA_GTHREADS */
    float o[MLA_HG][MLA_RMAX];
#pragma unroll
    for (int h = 0; h < MLA_HG; h++)
#pragma unroll
        for (int r = 0; r < MLA_RMAX; r++) o[h][r] = 0.0f;
    for (int j0 = 0; j0 < cnt; j0 += MLA_KC) {
        int kn = cnt - j0 < MLA_KC ? cnt - j0 : MLA_KC;
        for (int x = tid; x < kn * c; x += MLA_GTHREADS) {
            int j = x / c, i = x % c;
            kv[j * W + i] = ckv[(size_t)ps[j0 + j] * (size_t)c + (size_t)i];
        }
        __syncthreads();
        for (int j = 0; j < kn; j++) {
#pragma unroll
            for (int h = 0; h < MLA_HG; h++) {
                if (h < hn) {
                    float p = pe[h][j0 + j];
#pragma unroll
                    for (int r = 0; r < MLA_RMAX; r++) {
                        int i = tid + r * MLA_GTHREADS;
                        if (i < c) o[h][r] = fmaf(p, kv[j * W + i], o[h][r]);
                    }
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int h = 0; h < MLA_HG; h++) {
        if (h < hn) {
            float *rec = work + ((row0 + (size_t)h) * (size_t)nsplit + (size_t)s) * (size_t)(c + 2);
            if (tid == 0) {
                rec[0] = ml[h][0];
                rec[1] = ml[h][1];
            }
#pragma unroll
            for (int r = 0; r < MLA_RMAX; r++) {
                int i = tid + r * MLA_GTHREADS;
                if (i < c) rec[2 + i] = o[h][r];
            }
        }
    }
}

/* block per row: the splits merged in ascending order */
__global__ void __launch_bounds__(MLA_THREADS) mla_merge(float *o_lat, const float *work, int c, int nsplit)
{
    size_t row = blockIdx.x;
    const float *recs = work + row * (size_t)nsplit * (size_t)(c + 2);
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) {
        const float *rec = recs + (size_t)s * (size_t)(c + 2);
        if (rec[1] > 0.0f) M = fmaxf(M, rec[0]);
    }
    float L = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        const float *rec = recs + (size_t)s * (size_t)(c + 2);
        if (rec[1] > 0.0f) L = fmaf(rec[1], expf(rec[0] - M), L);
    }
    for (int i = threadIdx.x; i < c; i += MLA_THREADS) {
        float o = 0.0f;
        for (int s = 0; s < nsplit; s++) {
            const float *rec = recs + (size_t)s * (size_t)(c + 2);
            if (rec[1] > 0.0f) o = fmaf(rec[2 + i], expf(rec[0] - M), o);
        }
        o_lat[row * (size_t)c + (size_t)i] = o / L;
    }
}

static int mla_nsplit(int T, int pos0, const int32_t *sel, int k)
{
    int nmax = pos0 + T;
    if (sel && nmax > k) nmax = k;
    return (nmax + LD_CU_MLA_SPLIT - 1) / LD_CU_MLA_SPLIT;
}

extern "C" size_t ld_cu_mla_latent_work(int v, int T, int n_heads, int c, int pos0, const int32_t *sel, int k)
{
    if (v == LD_CU_REF || T <= 0) return 0;
    return (size_t)T * (size_t)n_heads * (size_t)mla_nsplit(T, pos0, sel, k) * (size_t)(c + 2);
}

extern "C" int ld_cu_mla_latent(int v, float *o_lat, const float *q_abs, const float *q, const float *ckv,
                                const float *kpe, int T, int n_heads, int dn, int dr, int c, int pos0, float scale,
                                const int32_t *sel, int k, float *work, size_t work_floats)
{
    if (T <= 0 || n_heads <= 0 || c <= 0) return 0;
    if (dn < 0 || dr < 0 || pos0 < 0 || (sel && k < 1)) return INVAL;
    if (v == LD_CU_REF) {
        size_t n = (size_t)T * (size_t)n_heads * (size_t)c;
        mla_ref<<<ld_cu_blocks(n, 128), 128>>>(o_lat, q_abs, q, ckv, kpe, T, n_heads, dn, dr, c, pos0, scale, sel,
                                               k);
        return ld_cu_launched();
    }
    int nsplit = mla_nsplit(T, pos0, sel, k);
    if (nsplit > 65535 || c + dr > MLA_MAXW || c > MLA_RMAX * MLA_GTHREADS) return INVAL;
    if (work_floats < ld_cu_mla_latent_work(v, T, n_heads, c, pos0, sel, k)) return INVAL;
    size_t rows = (size_t)T * (size_t)n_heads;
    size_t groups = (size_t)T * (size_t)((n_heads + MLA_HG - 1) / MLA_HG);
    if (groups > 0x7fffffffu) return INVAL;
    mla_split<<<dim3((unsigned)groups, (unsigned)nsplit), MLA_GTHREADS,
                (size_t)(MLA_HG + MLA_KC) * (size_t)(c + dr) * sizeof(float)>>>(work, q_abs, q, ckv, kpe, n_heads, dn,
                                                                             dr, c, pos0, scale, sel, k, nsplit);
    int e = ld_cu_launched();
    if (e) return e;
    mla_merge<<<(unsigned)rows, MLA_THREADS>>>(o_lat, work, c, nsplit);
    return ld_cu_launched();
}

/* ---------------------------------------------------------------- absorb */

#define ABS_ROWS 8 /* tokens per thread (absorb_q) or warp (absorb_out) */

__global__ void absorb_q_ref(float *q_abs, const float *q, const void *w, int dt, int T, int H, int dn, int dr,
                             int dv, int c)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)H * (size_t)c) return;
    size_t it = idx / (size_t)c;
    int j = (int)(idx % (size_t)c), t = (int)(it / (size_t)H), h = (int)(it % (size_t)H);
    const float *qn = q + ((size_t)t * (size_t)H + (size_t)h) * (size_t)(dn + dr);
    size_t r0 = (size_t)h * (size_t)(dn + dv);
    float acc = 0.0f;
    for (int d = 0; d < dn; d++) acc += qn[d] * ld_elem_f(w, dt, (r0 + (size_t)d) * (size_t)c + (size_t)j);
    q_abs[idx] = acc;
}

/* thread (h, j) of block (j tile, h, token tile) */
__global__ void absorb_q_custom(float *q_abs, const float *q, const void *w, int dt, int T, int H, int dn, int dr,
                                int dv, int c)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y, t0 = blockIdx.z * ABS_ROWS;
    if (j >= c) return;
    int nt = T - t0 < ABS_ROWS ? T - t0 : ABS_ROWS;
    size_t r0 = (size_t)h * (size_t)(dn + dv), qrow = (size_t)H * (size_t)(dn + dr);
    const float *qb = q + (size_t)t0 * qrow + (size_t)h * (size_t)(dn + dr);
    float acc[ABS_ROWS];
#pragma unroll
    for (int r = 0; r < ABS_ROWS; r++) acc[r] = 0.0f;
    for (int d = 0; d < dn; d++) {
        float wv = ld_elem_f(w, dt, (r0 + (size_t)d) * (size_t)c + (size_t)j);
#pragma unroll
        for (int r = 0; r < ABS_ROWS; r++)
            if (r < nt) acc[r] = fmaf(qb[(size_t)r * qrow + (size_t)d], wv, acc[r]);
    }
    for (int r = 0; r < nt; r++) q_abs[(((size_t)(t0 + r)) * (size_t)H + (size_t)h) * (size_t)c + (size_t)j] = acc[r];
}

__global__ void absorb_out_ref(float *out, const float *o_lat, const void *w, int dt, int T, int H, int dn, int dv,
                               int c)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)H * (size_t)dv) return;
    size_t it = idx / (size_t)dv;
    int i = (int)(idx % (size_t)dv), h = (int)(it % (size_t)H);
    const float *ol = o_lat + it * (size_t)c;
    size_t r = ((size_t)h * (size_t)(dn + dv) + (size_t)dn + (size_t)i) * (size_t)c;
    float acc = 0.0f;
    for (int j = 0; j < c; j++) acc += ld_elem_f(w, dt, r + (size_t)j) * ol[j];
    out[idx] = acc;
}

/* a warp per (h, i) and up to ABS_ROWS tokens: lanes over j, fmaf, tree */
__global__ void absorb_out_custom(float *out, const float *o_lat, const void *w, int dt, int T, int H, int dn, int dv,
                                  int c)
{
    int lane = threadIdx.x & 31, i = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), h = blockIdx.y;
    int t0 = blockIdx.z * ABS_ROWS;
    if (i >= dv) return;
    int nt = T - t0 < ABS_ROWS ? T - t0 : ABS_ROWS;
    size_t r = ((size_t)h * (size_t)(dn + dv) + (size_t)dn + (size_t)i) * (size_t)c;
    float acc[ABS_ROWS];
#pragma unroll
    for (int k = 0; k < ABS_ROWS; k++) acc[k] = 0.0f;
    for (int j = lane; j < c; j += 32) {
        float wv = ld_elem_f(w, dt, r + (size_t)j);
#pragma unroll
        for (int k = 0; k < ABS_ROWS; k++)
            if (k < nt) acc[k] = fmaf(wv, o_lat[(((size_t)(t0 + k)) * (size_t)H + (size_t)h) * (size_t)c + (size_t)j],
                                      acc[k]);
    }
#pragma unroll
    for (int k = 0; k < ABS_ROWS; k++) {
        float sum = ld_warp_sum(acc[k]);
        if (lane == 0 && k < nt) out[(((size_t)(t0 + k)) * (size_t)H + (size_t)h) * (size_t)dv + (size_t)i] = sum;
    }
}

static int absorb_dt_ok(ld_kdt dt)
{
    return dt == LD_KDT_F32 || dt == LD_KDT_F16 || dt == LD_KDT_BF16;
}

extern "C" int ld_cu_mla_absorb_q(int v, float *q_abs, const float *q, const void *w, ld_kdt dt, int T, int n_heads,
                                  int dn, int dr, int dv, int c)
{
    if (T <= 0 || n_heads <= 0 || c <= 0) return 0;
    if (!absorb_dt_ok(dt) || dn < 0 || dr < 0 || dv < 0) return INVAL;
    if (v == LD_CU_REF) {
        absorb_q_ref<<<ld_cu_blocks((size_t)T * (size_t)n_heads * (size_t)c, 128), 128>>>(q_abs, q, w, (int)dt, T,
                                                                                           n_heads, dn, dr, dv, c);
        return ld_cu_launched();
    }
    unsigned gz = (unsigned)((T + ABS_ROWS - 1) / ABS_ROWS);
    if (n_heads > 65535 || gz > 65535) return INVAL;
    absorb_q_custom<<<dim3((unsigned)((c + 127) / 128), (unsigned)n_heads, gz), 128>>>(q_abs, q, w, (int)dt, T,
                                                                                       n_heads, dn, dr, dv, c);
    return ld_cu_launched();
}

extern "C" int ld_cu_mla_absorb_out(int v, float *out, const float *o_lat, const void *w, ld_kdt dt, int T,
                                    int n_heads, int dn, int dv, int c)
{
    if (T <= 0 || n_heads <= 0 || dv <= 0) return 0;
    if (!absorb_dt_ok(dt) || dn < 0 || c < 0) return INVAL;
    if (v == LD_CU_REF) {
        absorb_out_ref<<<ld_cu_blocks((size_t)T * (size_t)n_heads * (size_t)dv, 128), 128>>>(out, o_lat, w, (int)dt,
                                                                                              T, n_heads, dn, dv, c);
        return ld_cu_launched();
    }
    unsigned gz = (unsigned)((T + ABS_ROWS - 1) / ABS_ROWS);
    if (n_heads > 65535 || gz > 65535) return INVAL;
    absorb_out_custom<<<dim3((unsigned)((dv + 7) / 8), (unsigned)n_heads, gz), 256>>>(out, o_lat, w, (int)dt, T,
                                                                                      n_heads, dn, dv, c);
    return ld_cu_launched();
}

/* ================================================================ indexer */

/* idx_term, index_tile: cuda_index.cuh */
__global__ void index_ref(float *scores, const float *q, const float *w, const float *keys, int T, int H, int dim,
                          int n, int form, float qscale, float wscale)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)n) return;
    int t = (int)(idx / (size_t)n), s = (int)(idx % (size_t)n);
    const float *kr = keys + (size_t)s * (size_t)dim;
    float acc = 0.0f;
    for (int h = 0; h < H; h++) {
        const float *qh = q + ((size_t)t * (size_t)H + (size_t)h) * (size_t)dim;
        float d = 0.0f;
        for (int i = 0; i < dim; i++) d += qh[i] * kr[i];
        acc += idx_term(form, d, w[(size_t)t * (size_t)H + (size_t)h], qscale, wscale);
    }
    scores[idx] = acc;
}

/* block (key tile, query t): the query's heads in shared memory, then
 * index_tile */
__global__ void __launch_bounds__(32 * IDX_WARPS)
    index_custom(float *scores, const float *q, const float *w, const float *keys, int H, int dim, int n, int form,
                 float qscale, float wscale)
{
    LD_CU_DYN_SMEM(float, qsh); /* H * dim */
    int t = blockIdx.y;
    const float *qt = q + (size_t)t * (size_t)H * (size_t)dim;
    for (int i = threadIdx.x; i < H * dim; i += 32 * IDX_WARPS) qsh[i] = qt[i];
    __syncthreads();
    index_tile(scores, qsh, w + (size_t)t * (size_t)H, keys, H, dim, n, form, qscale, wscale, t,
               blockIdx.x * IDX_KEYS);
}

extern "C" int ld_cu_index_scores(int v, int form, float *scores, const float *q, const float *w, const float *keys,
                                  int T, int n_heads, int dim, int n, float qscale, float wscale)
{
    if (T <= 0 || n <= 0) return 0;
    if (n_heads <= 0 || dim <= 0 || (form != 0 && form != 1)) return INVAL;
    if (form == 0) { /* as ld_ref_ds_index_scores computes them (on the host: the same bits) */
        wscale = 1.0f / sqrtf((float)n_heads);
        qscale = 1.0f / sqrtf((float)dim);
    }
    if (v == LD_CU_REF) {
        index_ref<<<ld_cu_blocks((size_t)T * (size_t)n, 128), 128>>>(scores, q, w, keys, T, n_heads, dim, n, form,
                                                                      qscale, wscale);
        return ld_cu_launched();
    }
    if (dim > 32 * IDX_MAXR || (size_t)n_heads * (size_t)dim > 12288 || T > 65535) return INVAL;
    dim3 grid((unsigned)((n + IDX_KEYS - 1) / IDX_KEYS), (unsigned)T);
    index_custom<<<grid, 32 * IDX_WARPS, (size_t)n_heads * (size_t)dim * sizeof(float)>>>(
        scores, q, w, keys, n_heads, dim, n, form, qscale, wscale);
    return ld_cu_launched();
}

/* ================================================================ top-k */

/* topk_n, topk_key, topk_row: cuda_index.cuh */

/* a thread per row: ld_ref_ds4_topk's insertion into the output row */
__global__ void topk_ref(int32_t *idx, const float *scores, int T, int ld, int n, int pos0, int k)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float *sc = scores + (size_t)t * (size_t)ld;
    int32_t *out = idx + (size_t)t * (size_t)k;
    int nt = topk_n(n, pos0, t), m = nt < k ? nt : k, cnt = 0;
    for (int s = 0; s < nt && m > 0; s++) {
        if (cnt == m && !ld_ranks_before(sc[s], s, sc[out[m - 1]], out[m - 1])) continue;
        int j = cnt < m ? cnt++ : m - 1;
        while (j > 0 && ld_ranks_before(sc[s], s, sc[out[j - 1]], out[j - 1])) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = s;
    }
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int32_t x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    for (int i = m; i < k; i++) out[i] = -1;
}

#define TOPK_THREADS 512

/* a block per row: topk_row */
__global__ void __launch_bounds__(TOPK_THREADS) topk_custom(int32_t *idx, const float *scores, int ld, int n, int pos0,
                                                            int k)
{
    __shared__ topk_sh<TOPK_THREADS> sh;
    int t = blockIdx.x;
    topk_row<TOPK_THREADS, 0>(idx + (size_t)t * (size_t)k, scores + (size_t)t * (size_t)ld, topk_n(n, pos0, t), k,
                              &sh);
}


extern "C" int ld_cu_topk(int v, int32_t *idx, const float *scores, int T, int ld, int n, int pos0, int k)
{
    if (T <= 0 || k <= 0) return 0;
    if (n < 0 || ld < n) return INVAL;
    if (v == LD_CU_REF) {
        topk_ref<<<ld_cu_blocks((size_t)T, 64), 64>>>(idx, scores, T, ld, n, pos0, k);
        return ld_cu_launched();
    }
    topk_custom<<<(unsigned)T, TOPK_THREADS>>>(idx, scores, ld, n, pos0, k);
    return ld_cu_launched();
}

/* ================================================================ routers */

#define MAXE 1024
#define MAXG 64 /* groups, and experts chosen per token */

/* ld_ref_ds_route's better(): score descending, index ascending, NaN never
 * first (the same choices as ld_ranks_before for a sequential scan) */
__device__ __forceinline__ int ds_better(float sa, int a, float sb, int b)
{
    return sa > sb || (sa == sb && a < b) || (sb != sb && sa == sa);
}

__device__ __forceinline__ float sigmoid_f(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

__device__ __forceinline__ float sqrt_softplus(float x)
{
    return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
}

/* the per-expert values, stored (custom: shared memory) or recomputed
 * from the logits (ref: the same function, so the same bits, without a
 * thread-local array of E floats) */
struct arr_f {
    const float *a;
    __device__ float operator()(int e) const { return a[e]; }
};
struct sig_f { /* s = sigmoid(logit) (+ bias) */
    const float *l, *bias;
    int add;
    __device__ float operator()(int e) const
    {
        float s = sigmoid_f(l[e]);
        return add && bias ? s + bias[e] : s;
    }
};
struct ssp_f { /* s = sqrt(softplus(logit)) (+ bias) */
    const float *l, *bias;
    int add;
    __device__ float operator()(int e) const
    {
        float s = sqrt_softplus(l[e]);
        return add && bias ? s + bias[e] : s;
    }
};

/* the group scores (the two best of each group, summed best first) of the
 * groups g0, g0 + gstep, ... and, by the thread with `last`, the kept
 * groups; as the C reference */
template <class SC>
__device__ void ds_groups(unsigned char *keep, float *gs, SC sc, int n_group, int per, int topk_group, int g0,
                          int gstep, int last)
{
    for (int g = g0; g < n_group; g += gstep) {
        int b1 = -1, b2 = -1;
        float v1 = 0.0f, v2 = 0.0f;
        for (int e = g * per; e < (g + 1) * per; e++) {
            float x = sc(e);
            if (b1 < 0 || ds_better(x, e, v1, b1)) {
                b2 = b1;
                v2 = v1;
                b1 = e;
                v1 = x;
            } else if (b2 < 0 || ds_better(x, e, v2, b2)) {
                b2 = e;
                v2 = x;
            }
        }
        gs[g] = v1 + v2;
        keep[g] = 0;
    }
    if (gstep > 1) __syncthreads();
    if (last) {
        for (int kk = 0; kk < topk_group; kk++) {
            int best = -1;
            for (int g = 0; g < n_group; g++)
                if (!keep[g] && (best < 0 || ds_better(gs[g], g, gs[best], best))) best = g;
            keep[best] = 1;
        }
    }
}

/* sum in selection order, then ascending id, then the weights */
template <class S>
__device__ void ds_finish(int32_t *idx, float *w, int *chosen, S s, int top_k, int norm, float scale)
{
    float sum = 0.0f;
    for (int kk = 0; kk < top_k; kk++) sum += s(chosen[kk]);
    for (int a = 1; a < top_k; a++)
        for (int b = a; b > 0 && chosen[b - 1] > chosen[b]; b--) {
            int tmp = chosen[b];
            chosen[b] = chosen[b - 1];
            chosen[b - 1] = tmp;
        }
    for (int kk = 0; kk < top_k; kk++) {
        float x = s(chosen[kk]);
        if (norm) x = x / sum;
        idx[kk] = chosen[kk];
        w[kk] = x * scale;
    }
}

/* a thread per row: the C loops, s and sc recomputed where read */
__global__ void ds_route_ref(int32_t *idx, float *w, const float *logits, const float *bias, int T, int E,
                             int n_group, int topk_group, int top_k, int norm, float scale)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    float gs[MAXG];
    unsigned char keep[MAXG];
    int chosen[MAXG];
    int per = E / n_group;
    const float *l = logits + (size_t)t * (size_t)E;
    sig_f s = {l, bias, 0}, sc = {l, bias, 1};
    ds_groups(keep, gs, sc, n_group, per, topk_group, 0, 1, 1);
    for (int kk = 0; kk < top_k; kk++) {
        int best = -1;
        float bv = 0.0f;
        for (int e = 0; e < E; e++) {
            if (!keep[e / per]) continue;
            int taken = 0;
            for (int j = 0; j < kk; j++) taken |= chosen[j] == e;
            if (taken) continue;
            float x = sc(e);
            if (best < 0 || ds_better(x, e, bv, best)) {
                best = e;
                bv = x;
            }
        }
        chosen[kk] = best;
    }
    ds_finish(idx + (size_t)t * (size_t)top_k, w + (size_t)t * (size_t)top_k, chosen, s, top_k, norm, scale);
}

#define ROUTE_THREADS 256

/* the block's best eligible entry of sel[] (eligible[e] != 0) under
 * ld_ranks_before: per thread, per warp by shuffles, then over the warps
 * in order; every thread gets it (-1: none) */
__device__ int block_best(const float *sel, const unsigned char *eligible, int E, int *shb)
{
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    int best = -1;
    for (int e = tid; e < E; e += ROUTE_THREADS)
        if (eligible[e] && (best < 0 || ld_ranks_before(sel[e], e, sel[best], best))) best = e;
    for (int off = 16; off > 0; off >>= 1) {
        int o = __shfl_xor_sync(LD_CU_FULL, best, off);
        if (o >= 0 && (best < 0 || ld_ranks_before(sel[o], o, sel[best], best))) best = o;
    }
    __syncthreads();
    if (lane == 0) shb[w] = best;
    __syncthreads();
    best = -1;
    for (int i = 0; i < ROUTE_THREADS / 32; i++) {
        int o = shb[i];
        if (o >= 0 && (best < 0 || ld_ranks_before(sel[o], o, sel[best], best))) best = o;
    }
    return best;
}

/* a block per row: sigmoid and groups in parallel, the experts by top_k
 * block-wide argmax rounds over the kept, not yet chosen experts */
__global__ void __launch_bounds__(ROUTE_THREADS)
    ds_route_custom(int32_t *idx, float *w, const float *logits, const float *bias, int E, int n_group,
                    int topk_group, int top_k, int norm, float scale)
{
    __shared__ float s[MAXE], sc[MAXE], gs[MAXG];
    __shared__ unsigned char keep[MAXG], elig[MAXE];
    __shared__ int chosen[MAXG], shb[ROUTE_THREADS / 32];
    int t = blockIdx.x, tid = threadIdx.x, per = E / n_group;
    const float *l = logits + (size_t)t * (size_t)E;
    for (int e = tid; e < E; e += ROUTE_THREADS) {
        s[e] = sigmoid_f(l[e]);
        sc[e] = bias ? s[e] + bias[e] : s[e];
    }
    __syncthreads();
    arr_f sca = {sc}, sa = {s};
    ds_groups(keep, gs, sca, n_group, per, topk_group, tid, ROUTE_THREADS, tid == 0);
    __syncthreads();
    for (int e = tid; e < E; e += ROUTE_THREADS) elig[e] = keep[e / per];
    __syncthreads();
    for (int kk = 0; kk < top_k; kk++) {
        int b = block_best(sc, elig, E, shb);
        if (tid == 0) {
            chosen[kk] = b;
            elig[b] = 0;
        }
        __syncthreads();
    }
    if (tid == 0)
        ds_finish(idx + (size_t)t * (size_t)top_k, w + (size_t)t * (size_t)top_k, chosen, sa, top_k, norm, scale);
}

extern "C" int ld_cu_ds_route(int v, int32_t *idx, float *w, const float *logits, const float *bias, int T, int E,
                              int n_group, int topk_group, int top_k, int norm, float scale)
{
    if (T <= 0) return 0;
    if (E <= 0 || E > MAXE || n_group <= 0 || n_group > MAXG || E % n_group || E / n_group < 2 || topk_group < 1 ||
        topk_group > n_group || top_k < 1 || top_k > MAXG || top_k > topk_group * (E / n_group))
        return INVAL;
    if (v == LD_CU_REF) {
        ds_route_ref<<<ld_cu_blocks((size_t)T, 32), 32>>>(idx, w, logits, bias, T, E, n_group, topk_group, top_k,
                                                          norm, scale);
        return ld_cu_launched();
    }
    ds_route_custom<<<(unsigned)T, ROUTE_THREADS>>>(idx, w, logits, bias, E, n_group, topk_group, top_k, norm,
                                                    scale);
    return ld_cu_launched();
}

/* hashed: the table's order summed, then ascending; else `chosen` is
 * already ascending */
template <class S>
__device__ void ds4_finish(int32_t *idx, float *w, int32_t *chosen, S s, int K, float scale, int hashed)
{
    float sum = 0.0f;
    for (int kk = 0; kk < K; kk++) sum += s(chosen[kk]);
    if (hashed)
        for (int i = 1; i < K; i++)
            for (int j = i; j > 0 && chosen[j - 1] > chosen[j]; j--) {
                int32_t x = chosen[j];
                chosen[j] = chosen[j - 1];
                chosen[j - 1] = x;
            }
    for (int kk = 0; kk < K; kk++) {
        idx[kk] = chosen[kk];
        w[kk] = s(chosen[kk]) / (sum + 1e-20f) * scale;
    }
}

__global__ void ds4_route_ref(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                              const int32_t *tokens, int T, int E, int K, float scale)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    int32_t ch[MAXG];
    float chv[MAXG];
    const float *l = logits + (size_t)t * (size_t)E;
    ssp_f s = {l, bias, 0}, sel = {l, bias, 1};
    if (tid2eid) {
        const int32_t *row = tid2eid + (size_t)tokens[t] * (size_t)K;
        for (int kk = 0; kk < K; kk++) ch[kk] = row[kk];
    } else {
        int cnt = 0; /* ld_ref_ds4_topk: insertion (values kept beside), then ascending */
        for (int e = 0; e < E; e++) {
            float x = sel(e);
            if (cnt == K && !ld_ranks_before(x, e, chv[K - 1], ch[K - 1])) continue;
            int j = cnt < K ? cnt++ : K - 1;
            while (j > 0 && ld_ranks_before(x, e, chv[j - 1], ch[j - 1])) {
                ch[j] = ch[j - 1];
                chv[j] = chv[j - 1];
                j--;
            }
            ch[j] = e;
            chv[j] = x;
        }
        for (int i = 1; i < K; i++)
            for (int j = i; j > 0 && ch[j - 1] > ch[j]; j--) {
                int32_t x = ch[j];
                ch[j] = ch[j - 1];
                ch[j - 1] = x;
            }
    }
    ds4_finish(idx + (size_t)t * (size_t)K, w + (size_t)t * (size_t)K, ch, s, K, scale, tid2eid != NULL);
}

/* the shared memory of a V4 route row */
typedef struct ds4_route_sh {
    float s[MAXE], sel[MAXE];
    unsigned char elig[MAXE];
    int32_t ch[MAXG];
    int shb[ROUTE_THREADS / 32];
} ds4_route_sh;

/* row t of the V4 route by the block (ROUTE_THREADS threads); the caller
 * syncs before the block reuses sh */
__device__ void ds4_route_row(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                              const int32_t *tokens, int t, int E, int K, float scale, ds4_route_sh *sh)
{
    float *s = sh->s, *sel = sh->sel;
    unsigned char *elig = sh->elig;
    int32_t *ch = sh->ch;
    int *shb = sh->shb, tid = threadIdx.x;
    const float *l = logits + (size_t)t * (size_t)E;
    for (int e = tid; e < E; e += ROUTE_THREADS) {
        s[e] = sqrt_softplus(__ldcg(l + e)); /* through L2: the fused router's other blocks wrote them */
        sel[e] = bias ? s[e] + bias[e] : s[e];
        elig[e] = 1;
    }
    __syncthreads();
    arr_f sa = {s};
    if (tid2eid) {
        if (tid == 0) {
            const int32_t *row = tid2eid + (size_t)tokens[t] * (size_t)K;
            for (int kk = 0; kk < K; kk++) ch[kk] = row[kk];
            ds4_finish(idx + (size_t)t * (size_t)K, w + (size_t)t * (size_t)K, ch, sa, K, scale, 1);
        }
        return; /* every thread: the branch is the block's */
    }
    for (int kk = 0; kk < K; kk++) {
        int b = block_best(sel, elig, E, shb);
        if (tid == 0) {
            ch[kk] = b;
            elig[b] = 0;
        }
        __syncthreads();
    }
    if (tid == 0) {
        for (int i = 1; i < K; i++)
            for (int j = i; j > 0 && ch[j - 1] > ch[j]; j--) {
                int32_t x = ch[j];
                ch[j] = ch[j - 1];
                ch[j - 1] = x;
            }
        ds4_finish(idx + (size_t)t * (size_t)K, w + (size_t)t * (size_t)K, ch, sa, K, scale, 0);
    }
}

/* a block per row */
__global__ void __launch_bounds__(ROUTE_THREADS)
    ds4_route_custom(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                     const int32_t *tokens, int E, int K, float scale)
{
    __shared__ ds4_route_sh sh;
    ds4_route_row(idx, w, logits, bias, tid2eid, tokens, (int)blockIdx.x, E, K, scale, &sh);
}

/* The route, the plan and the tables of a decode step's few tokens in one
 * block of ROUTE_THREADS (E <= that): the rows in turn, then the plan,
 * then the tables, each the bits of its own kernel (integers and
 * comparisons but for the route, whose row is computed by the same code
 * with the same block size) */
__device__ void route_plan_tables_block(int32_t *idx, float *w, const float *logits, const float *bias,
                                        const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, float scale,
                                        int32_t *offsets, int32_t *rows, int32_t *row_of, ld_cu_mm_group *tab, int G,
                                        const ld_cu_moe_w *mw, const float *xe, int pick, float *g, float *u,
                                        float *eo, int D, int I)
{
    __shared__ ds4_route_sh sh;
    __shared__ int32_t cnt[ROUTE_THREADS + 1];
    __shared__ int pos[ROUTE_THREADS];
    for (int t = 0; t < T; t++) {
        ds4_route_row(idx, w, logits, bias, tid2eid, tokens, t, E, K, scale, &sh);
        __syncthreads(); /* sh reused; the row's idx and w seen by the block */
    }
    moe_plan_block(offsets, rows, row_of, idx, T * K, K, E, cnt);
    __syncthreads();
    moe_tables_block(tab, G, offsets, mw, E, xe, pick ? rows : NULL, g, u, eo, D, I, pos);
}

__global__ void __launch_bounds__(ROUTE_THREADS)
    ds4_route_plan_tables(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                          const int32_t *tokens, int T, int E, int K, float scale, int32_t *offsets, int32_t *rows,
                          int32_t *row_of, ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw, const float *xe,
                          int pick, float *g, float *u, float *eo, int D, int I)
{
    route_plan_tables_block(idx, w, logits, bias, tid2eid, tokens, T, E, K, scale, offsets, rows, row_of, tab, G, mw,
                            xe, pick, g, u, eo, D, I);
}

/* The router's logits and ds4_route_plan_tables in one launch: grid E /
 * MM_WARPS blocks, a warp a column n of r.logits [T][E] = x [T][Kx] times
 * router row n (matmul_custom's warp, its tokens MM_TT at a time: the bits
 * of ld_cu_matmul's custom kernel, + 0 as it adds a missing bias), then
 * the block that finishes last (a count in *r.sync, which it resets)
 * routes, plans and tables as ds4_route_plan_tables does, reading the
 * logits through L2 (ds4_route_row's __ldcg). */
template <int DT, int VEC>
__global__ void __launch_bounds__(ROUTE_THREADS)
    ds4_router_route(ld_cu_router r, size_t rb, int32_t *idx, float *w, const float *bias, const int32_t *tid2eid,
                     const int32_t *tokens, int T, int E, int K, float scale, int32_t *offsets, int32_t *rows,
                     int32_t *row_of, ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw, const float *xe, int pick,
                     float *g, float *u, float *eo, int D, int I)
{
    __shared__ int last;
    int lane = threadIdx.x & 31, n = blockIdx.x * MM_WARPS + (threadIdx.x >> 5);
    for (int t0 = 0; n < E && t0 < T; t0 += MM_TT) {
        int nt = T - t0 < MM_TT ? T - t0 : MM_TT;
        float acc[MM_TT];
        mm_warp_sums<DT, VEC>(acc, (const uint8_t *)r.w + (size_t)n * rb, r.x + (size_t)t0 * (size_t)r.K, r.K, nt,
                              lane);
#pragma unroll
        for (int tt = 0; tt < MM_TT; tt++)
            if (lane == 0 && tt < nt) r.logits[(size_t)(t0 + tt) * (size_t)E + n] = acc[tt] + 0.0f;
    }
    if (!ld_cu_last_block(r.sync, (int)gridDim.x, &last)) return; /* the logits written */
    route_plan_tables_block(idx, w, r.logits, bias, tid2eid, tokens, T, E, K, scale, offsets, rows, row_of, tab, G, mw,
                            xe, pick, g, u, eo, D, I);
}

/* the limits of the one-launch route (T > 0 checked before) */
static int route_plan_args_ok(const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, int G, int D, int I)
{
    return E > 0 && E <= ROUTE_THREADS && K >= 1 && K <= E && K <= MAXG && (!tid2eid || tokens) &&
           T <= LD_CU_ROUTE_FUSED_T && G > 0 && D > 0 && I > 0;
}

extern "C" int ld_cu_ds4_route_plan_tables(int32_t *idx, float *w, const float *logits, const float *bias,
                                           const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K,
                                           float scale, int32_t *offsets, int32_t *rows, int32_t *row_of,
                                           ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw, const float *xe,
                                           int pick, float *g, float *u, float *eo, int D, int I)
{
    static_assert(ROUTE_THREADS == LD_CU_ROUTE_FUSED_E, "one thread an expert in the tables");
    if (T <= 0) return 0;
    if (!route_plan_args_ok(tid2eid, tokens, T, E, K, G, D, I)) return INVAL;
    ds4_route_plan_tables<<<1, ROUTE_THREADS>>>(idx, w, logits, bias, tid2eid, tokens, T, E, K, scale, offsets, rows,
                                                row_of, tab, G, mw, xe, pick, g, u, eo, D, I);
    return ld_cu_launched();
}

extern "C" int ld_cu_ds4_router_route_plan_tables(const ld_cu_router *r, int32_t *idx, float *w, const float *bias,
                                                  const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K,
                                                  float scale, int32_t *offsets, int32_t *rows, int32_t *row_of,
                                                  ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw, const float *xe,
                                                  int pick, float *g, float *u, float *eo, int D, int I)
{
    static_assert(ROUTE_THREADS == MM_WARPS * 32, "the route's block is the matmul's");
    if (T <= 0) return 0;
    if (!route_plan_args_ok(tid2eid, tokens, T, E, K, G, D, I) || r->K <= 0 || !r->sync ||
        (r->dt != LD_KDT_F32 && r->dt != LD_KDT_F16 && r->dt != LD_KDT_BF16))
        return INVAL;
    unsigned blocks = (unsigned)((E + MM_WARPS - 1) / MM_WARPS);
    size_t rb = ld_cu_row_bytes(r->dt, r->K);
    int vec = matmul_vec(r->dt, rb, r->w); /* as ld_cu_matmul picks it for that weight */
#define RR_LAUNCH(DTY, VEC)                                                                                           \
    ds4_router_route<DTY, VEC><<<blocks, ROUTE_THREADS>>>(*r, rb, idx, w, bias, tid2eid, tokens, T, E, K, scale,     \
                                                          offsets, rows, row_of, tab, G, mw, xe, pick, g, u, eo, D, I)
    if (r->dt == LD_KDT_F32) {
        if (vec) RR_LAUNCH(LD_KDT_F32, 1);
        else RR_LAUNCH(LD_KDT_F32, 0);
    } else if (r->dt == LD_KDT_F16) {
        if (vec) RR_LAUNCH(LD_KDT_F16, 1);
        else RR_LAUNCH(LD_KDT_F16, 0);
    } else {
        if (vec) RR_LAUNCH(LD_KDT_BF16, 1);
        else RR_LAUNCH(LD_KDT_BF16, 0);
    }
#undef RR_LAUNCH
    return ld_cu_launched();
}

extern "C" int ld_cu_ds4_route(int v, int32_t *idx, float *w, const float *logits, const float *bias,
                               const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, float scale)
{
    if (T <= 0) return 0;
    if (E <= 0 || E > MAXE || K < 1 || K > E || K > MAXG || (tid2eid && !tokens)) return INVAL;
    if (v == LD_CU_REF) {
        ds4_route_ref<<<ld_cu_blocks((size_t)T, 32), 32>>>(idx, w, logits, bias, tid2eid, tokens, T, E, K, scale);
        return ld_cu_launched();
    }
    ds4_route_custom<<<(unsigned)T, ROUTE_THREADS>>>(idx, w, logits, bias, tid2eid, tokens, E, K, scale);
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

/* ================================================================ mHC */

#define HC_MAXN 64

/* work per token: [inv][m: (2+N)*N][pre: N] */
static size_t hc_stride(int N)
{
    return 1 + (size_t)(2 + N) * (size_t)N + (size_t)N;
}

extern "C" size_t ld_cu_hc_work(int T, int N)
{
    return T > 0 && N > 0 ? (size_t)T * hc_stride(N) : 0;
}

__global__ void hc_norm_ref(float *work, size_t ws, const float *X, int T, int ND, float eps)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float *x = X + (size_t)t * (size_t)ND;
    float ss = 0.0f;
    for (int i = 0; i < ND; i++) ss += x[i] * x[i];
    work[(size_t)t * ws] = 1.0f / sqrtf(ss / (float)ND + eps);
}

/* m[t][o] = fn[o] . (X[t] * inv) (each X * inv rounded first, as the
 * reference's normalised copy) */
__global__ void hc_mix_ref(float *work, size_t ws, const float *X, const float *fn, int T, int ND, int R)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)R) return;
    size_t t = idx / (size_t)R, o = idx % (size_t)R;
    const float *x = X + t * (size_t)ND, *wr = fn + o * (size_t)ND;
    float inv = work[t * ws], acc = 0.0f;
    for (int i = 0; i < ND; i++) acc += wr[i] * (x[i] * inv);
    work[t * ws + 1 + o] = acc;
}

/* block (8 outputs, token t) of HC_THREADS: the token's inverse RMS (each
 * block its own, the same reduction in every block: the row is in the
 * cache after the first), then a warp per output o; block 0 keeps the
 * inverse in work.  One launch where a norm and a mix kernel were two. */
#define HC_THREADS 256
__device__ __forceinline__ void hc_mix_block(float *work, size_t ws, const float *X, const float *fn, int ND, int R,
                                             float eps, float *sh)
{
    int t = blockIdx.y, lane = threadIdx.x & 31, o = blockIdx.x * (HC_THREADS / 32) + (threadIdx.x >> 5);
    const float *x = X + (size_t)t * (size_t)ND;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < ND; i += HC_THREADS) ss = fmaf(x[i], x[i], ss);
    ss = ld_block_sum(ss, sh);
    float inv = 1.0f / sqrtf(ss / (float)ND + eps);
    if (blockIdx.x == 0 && threadIdx.x == 0) work[(size_t)t * ws] = inv;
    if (o >= R) return;
    const float *wr = fn + (size_t)o * (size_t)ND;
    float acc = 0.0f;
    for (int i = lane; i < ND; i += 32) acc = fmaf(wr[i], x[i] * inv, acc);
    acc = ld_warp_sum(acc);
    if (lane == 0) work[(size_t)t * ws + 1 + (size_t)o] = acc;
}

__global__ void __launch_bounds__(HC_THREADS)
    hc_norm_mix_custom(float *work, size_t ws, const float *X, const float *fn, int ND, int R, float eps)
{
    __shared__ float sh[32];
    hc_mix_block(work, ws, X, fn, ND, R, eps, sh);
}

/* token t's mix m [(2 + N) N] and pre [N] in the work rows */
__device__ __forceinline__ float *hc_mix(float *work, size_t ws, size_t t)
{
    return work + t * ws + 1;
}

__device__ __forceinline__ float *hc_pre_of(float *work, size_t ws, size_t t, int N)
{
    return work + t * ws + 1 + (size_t)(2 + N) * (size_t)N;
}

/* the Sinkhorn iterate comb [N][N] rounded to bf16 (mhc=sinkhorn-bf16) */
__device__ void hc_iterate_bf16(float *cb, int N, int bf16)
{
    if (bf16)
        for (int i = 0; i < N * N; i++) cb[i] = ld_bf16_round(cb[i]);
}

/* pre_j of a token from its mix m: the one expression hc_sinkhorn and the
 * custom collapse both evaluate (the same bits in either) */
__device__ __forceinline__ float hc_pre_gate(const float *m, const float *base, const float *scale, int j,
                                             float hc_eps)
{
    return sigmoid_f(m[j] * scale[0] + base[j]) + hc_eps;
}

/* a thread per token: pre, post, the comb softmax and Sinkhorn-Knopp, the
 * C reference's loops (ld_ref_ds4_hc_pre_ex); variant LD_CU_MHC_BF16 rounds
 * post and comb to bf16 at the end, LD_CU_MHC_SINKHORN_BF16 every iterate */
__device__ void hc_sinkhorn_token(float *post, float *comb, const float *m, float *pre, const float *base,
                                  const float *scale, int t, int N, int iters, float hc_eps, int variant)
{
    int sk = variant == LD_CU_MHC_SINKHORN_BF16;
    float *po = post + (size_t)t * (size_t)N, *cb = comb + (size_t)t * (size_t)N * (size_t)N;
    for (int j = 0; j < N; j++) pre[j] = hc_pre_gate(m, base, scale, j, hc_eps);
    for (int j = 0; j < N; j++) po[j] = 2.0f * sigmoid_f(m[N + j] * scale[1] + base[N + j]);
    for (int r = 0; r < N; r++) {
        float *c = cb + (size_t)r * (size_t)N;
        float mx = -INFINITY, sum = 0.0f;
        for (int k = 0; k < N; k++) {
            c[k] = m[2 * N + r * N + k] * scale[2] + base[2 * N + r * N + k];
            if (c[k] > mx) mx = c[k];
        }
        for (int k = 0; k < N; k++) {
            c[k] = expf(c[k] - mx);
            sum += c[k];
        }
        for (int k = 0; k < N; k++) c[k] = c[k] / sum + hc_eps;
    }
    hc_iterate_bf16(cb, N, sk);
    for (int it = 0; it < (iters > 1 ? iters : 1); it++) {
        if (it > 0) {
            for (int r = 0; r < N; r++) {
                float s = 0.0f;
                for (int k = 0; k < N; k++) s += cb[r * N + k];
                for (int k = 0; k < N; k++) cb[r * N + k] = cb[r * N + k] / (s + hc_eps);
            }
            hc_iterate_bf16(cb, N, sk);
        }
        for (int k = 0; k < N; k++) {
            float s = 0.0f;
            for (int r = 0; r < N; r++) s += cb[r * N + k];
            for (int r = 0; r < N; r++) cb[r * N + k] = cb[r * N + k] / (s + hc_eps);
        }
        hc_iterate_bf16(cb, N, sk);
    }
    if (variant == LD_CU_MHC_BF16) { /* the mixing matrices cast to bf16 */
        for (int j = 0; j < N; j++) po[j] = ld_bf16_round(po[j]);
        hc_iterate_bf16(cb, N, 1);
    }
}

__global__ void hc_sinkhorn(float *post, float *comb, float *work, size_t ws, const float *base, const float *scale,
                            int T, int N, int iters, float hc_eps, int variant)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < T) hc_sinkhorn_token(post, comb, hc_mix(work, ws, t), hc_pre_of(work, ws, t, N), base, scale, t, N, iters,
                                 hc_eps, variant);
}

__global__ void hc_collapse(float *collapsed, const float *work, size_t ws, const float *X, int T, int N, int D)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)D) return;
    size_t t = idx / (size_t)D, d = idx % (size_t)D;
    const float *pre = work + t * ws + 1 + (size_t)(2 + N) * (size_t)N;
    const float *x = X + t * (size_t)N * (size_t)D;
    float acc = 0.0f;
    for (int j = 0; j < N; j++) acc += pre[j] * x[(size_t)j * (size_t)D + d];
    collapsed[idx] = acc;
}

/* (hc_sink_collapse_custom's and hc_pre_one's token block) token t's pre_j
 * evaluated from its mix m as hc_sinkhorn does, its collapse into
 * collapsed, and with normed the RMSNorm by w as rmsnorm_custom computes
 * it; sh [LD_CU_NORM_THREADS], pre [N] shared */
__device__ void hc_collapse_block(float *collapsed, float *normed, const float *m, const float *X, const float *base,
                                  const float *scale, const void *w, int wdt, float eps, size_t t, int N, int D,
                                  float hc_eps, float *sh, float *pre)
{
    for (int j = threadIdx.x; j < N; j += HC_THREADS) pre[j] = hc_pre_gate(m, base, scale, j, hc_eps);
    __syncthreads();
    const float *x = X + t * (size_t)N * (size_t)D;
    float *u = collapsed + t * (size_t)D, v = 0.0f;
    for (int d = threadIdx.x; d < D; d += HC_THREADS) {
        float acc = 0.0f;
        for (int j = 0; j < N; j++) acc += pre[j] * x[(size_t)j * (size_t)D + (size_t)d];
        u[d] = acc;
        v = fmaf(acc, acc, v);
    }
    if (!normed) return; /* the block's: no thread is left at the tree's barriers */
    float inv = ld_norm_tree(v, D, eps, sh), *o = normed + t * (size_t)D;
    for (int d = threadIdx.x; d < D; d += HC_THREADS) o[d] = ld_elem_f(w, wdt, (size_t)d) * (u[d] * inv);
}

/* custom: the collapse and the Sinkhorn in one launch.  Blocks [0, T) a
 * token each: its pre_j evaluated from the mix as hc_sinkhorn does (not
 * read from work, which the other blocks write in the same launch), its
 * collapse into collapsed, and with normed (not NULL) the RMSNorm the
 * session runs next, by w (F32, F16 or BF16: ld_elem_f) into normed, as
 * rmsnorm_custom computes it (thread j sums its columns j + 256 m in
 * order, the same tree, the same products).  Blocks from T run
 * hc_sinkhorn's thread per token. */
__global__ void __launch_bounds__(HC_THREADS)
    hc_sink_collapse_custom(float *collapsed, float *normed, float *post, float *comb, float *work, size_t ws,
                            const float *X, const float *base, const float *scale, const void *w, int wdt, float eps,
                            int T, int N, int D, int iters, float hc_eps, int variant)
{
    __shared__ float sh[LD_CU_NORM_THREADS], pre[HC_MAXN];
    if ((int)blockIdx.x >= T) {
        int t = ((int)blockIdx.x - T) * HC_THREADS + (int)threadIdx.x;
        if (t < T)
            hc_sinkhorn_token(post, comb, hc_mix(work, ws, t), hc_pre_of(work, ws, t, N), base, scale, t, N, iters,
                              hc_eps, variant);
        return;
    }
    hc_collapse_block(collapsed, normed, hc_mix(work, ws, blockIdx.x), X, base, scale, w, wdt, eps, blockIdx.x, N, D,
                      hc_eps, sh, pre);
}

/* one launch (T <= 65535): grid (hc_norm_mix_custom's blocks of a token,
 * T); each block its mixes as there, then the token's last block to be
 * done (a count in sync[t], which it resets to 0) copies the token's mix
 * into shared memory (through L2: other blocks wrote it) and runs its
 * Sinkhorn (thread 0) and its collapse and norm (hc_collapse_block): the
 * values of the two launches, one launch fewer */
__global__ void __launch_bounds__(HC_THREADS)
    hc_pre_one(float *collapsed, float *normed, float *post, float *comb, float *work, size_t ws, const float *X,
               const float *fn, const float *base, const float *scale, const void *w, int wdt, float eps, int N,
               int D, int iters, float norm_eps, float hc_eps, int variant, int *sync)
{
    __shared__ float sh[LD_CU_NORM_THREADS], pre[HC_MAXN], m[(2 + HC_MAXN) * HC_MAXN];
    __shared__ int last;
    int t = blockIdx.y, R = (2 + N) * N;
    hc_mix_block(work, ws, X, fn, N * D, R, norm_eps, sh);
    if (!ld_cu_last_block(&sync[t], (int)gridDim.x, &last)) return; /* the mixes written */
    const float *mt = hc_mix(work, ws, t);
    for (int i = threadIdx.x; i < R; i += HC_THREADS) m[i] = __ldcg(mt + i);
    __syncthreads();
    if (threadIdx.x == 0)
        hc_sinkhorn_token(post, comb, m, hc_pre_of(work, ws, t, N), base, scale, t, N, iters, hc_eps, variant);
    hc_collapse_block(collapsed, normed, m, X, base, scale, w, wdt, eps, t, N, D, hc_eps, sh, pre);
}

/* the arguments every hc_pre launcher checks (T > 0) */
static int hc_args_ok(int variant, int T, int N, int D, size_t work_floats)
{
    return variant >= LD_CU_MHC_F32 && variant <= LD_CU_MHC_SINKHORN_BF16 && N > 0 && N <= HC_MAXN && D > 0 &&
           work_floats >= ld_cu_hc_work(T, N);
}

/* the custom hc_pre in two launches (the norm, when normed is not NULL,
 * in the second), or with sync in one */
static int hc_pre_custom(int variant, float *post, float *comb, float *collapsed, const float *X, int T, int N, int D,
                         const float *fn, const float *base, const float *scale, int iters, float norm_eps,
                         float hc_eps, float *work, const void *w, int wdt, float eps, float *normed, int *sync)
{
    static_assert(HC_THREADS == LD_CU_NORM_THREADS, "the fused norm is rmsnorm_custom's block");
    if (T > 65535) return INVAL;
    size_t ws = hc_stride(N);
    int R = (2 + N) * N, e;
    dim3 grid((unsigned)((R + HC_THREADS / 32 - 1) / (HC_THREADS / 32)), (unsigned)T);
    if (sync) {
        hc_pre_one<<<grid, HC_THREADS>>>(collapsed, normed, post, comb, work, ws, X, fn, base, scale, w, wdt, eps, N, D,
                                         iters, norm_eps, hc_eps, variant, sync);
        return ld_cu_launched();
    }
    hc_norm_mix_custom<<<grid, HC_THREADS>>>(work, ws, X, fn, N * D, R, norm_eps);
    if ((e = ld_cu_launched())) return e;
    unsigned blocks = (unsigned)T + ld_cu_blocks((size_t)T, HC_THREADS);
    hc_sink_collapse_custom<<<blocks, HC_THREADS>>>(collapsed, normed, post, comb, work, ws, X, base, scale, w, wdt,
                                                    eps, T, N, D, iters, hc_eps, variant);
    return ld_cu_launched();
}

extern "C" int ld_cu_hc_pre_norm(int variant, float *post, float *comb, float *collapsed, const float *X, int T,
                                 int N, int D, const float *fn, const float *base, const float *scale, int iters,
                                 float norm_eps, float hc_eps, float *work, size_t work_floats, const void *w,
                                 int w_dt, float eps, float *normed, int *sync)
{
    if (T <= 0) return 0;
    if (!hc_args_ok(variant, T, N, D, work_floats) || w_dt < 0 || w_dt > 2 || !normed) return INVAL;
    return hc_pre_custom(variant, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps, hc_eps, work, w,
                         w_dt, eps, normed, sync);
}

extern "C" int ld_cu_hc_pre(int v, float *post, float *comb, float *collapsed, const float *X, int T, int N, int D,
                            const float *fn, const float *base, const float *scale, int iters, float norm_eps,
                            float hc_eps, float *work, size_t work_floats)
{
    return ld_cu_hc_pre_ex(v, LD_CU_MHC_F32, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps,
                           hc_eps, work, work_floats);
}

extern "C" int ld_cu_hc_pre_ex(int v, int variant, float *post, float *comb, float *collapsed, const float *X, int T,
                               int N, int D, const float *fn, const float *base, const float *scale, int iters,
                               float norm_eps, float hc_eps, float *work, size_t work_floats)
{
    if (T <= 0) return 0;
    if (!hc_args_ok(variant, T, N, D, work_floats)) return INVAL;
    if (v != LD_CU_REF) /* two launches: norm and mix, then collapse and Sinkhorn */
        return hc_pre_custom(variant, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps, hc_eps, work,
                             NULL, 0, 0.0f, NULL, NULL);
    size_t ws = hc_stride(N);
    int ND = N * D, R = (2 + N) * N;
    int e;
    hc_norm_ref<<<ld_cu_blocks((size_t)T, 64), 64>>>(work, ws, X, T, ND, norm_eps);
    if ((e = ld_cu_launched())) return e;
    hc_mix_ref<<<ld_cu_blocks((size_t)T * (size_t)R, 128), 128>>>(work, ws, X, fn, T, ND, R);
    if ((e = ld_cu_launched())) return e;
    hc_sinkhorn<<<ld_cu_blocks((size_t)T, 64), 64>>>(post, comb, work, ws, base, scale, T, N, iters, hc_eps,
                                                      variant);
    if ((e = ld_cu_launched())) return e;
    hc_collapse<<<ld_cu_blocks((size_t)T * (size_t)D, 256), 256>>>(collapsed, work, ws, X, T, N, D);
    return ld_cu_launched();
}

__global__ void hc_post_ref(float *out, const float *X, const float *f, const float *post, const float *comb, int T,
                            int N, int D)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t ND = (size_t)N * (size_t)D;
    if (idx >= (size_t)T * ND) return;
    size_t t = idx / ND, k = idx % ND / (size_t)D, d = idx % (size_t)D;
    const float *x = X + t * ND, *cb = comb + t * (size_t)N * (size_t)N;
    float acc = 0.0f;
    for (int j = 0; j < N; j++) acc += cb[(size_t)j * (size_t)N + k] * x[(size_t)j * (size_t)D + d];
    out[idx] = post[t * (size_t)N + k] * f[t * (size_t)D + d] + acc;
}

/* a thread per (t, d) for every k: f[d] read once, the column of X read N
 * times from the cache (the same arithmetic as ref) */
__global__ void hc_post_custom(float *out, const float *X, const float *f, const float *post, const float *comb,
                               int T, int N, int D)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)D) return;
    size_t t = idx / (size_t)D, d = idx % (size_t)D;
    hc_post_col(out, X, f[t * (size_t)D + d], post, comb, t, d, N, D);
}

extern "C" int ld_cu_hc_post(int v, float *out, const float *X, const float *f, const float *post, const float *comb,
                             int T, int N, int D)
{
    if (T <= 0 || N <= 0 || D <= 0) return 0;
    if (v == LD_CU_REF)
        hc_post_ref<<<ld_cu_blocks((size_t)T * (size_t)N * (size_t)D, 256), 256>>>(out, X, f, post, comb, T, N, D);
    else
        hc_post_custom<<<ld_cu_blocks((size_t)T * (size_t)D, 256), 256>>>(out, X, f, post, comb, T, N, D);
    return ld_cu_launched();
}
