/* cuda_common.cuh - small device helpers of the DeepSeek kernels (cuda_moe.cu ... cuda_ds4_*.cu) and
 * cuda_sample.cu (CUDA C++ only; C code includes cuda_ops.h).
 *
 * Every reduction here has a fixed order that depends on the launch shape
 * only (a shuffle tree xor 16, 8, 4, 2, 1; a shared-memory tree over the
 * warps in index order), so a result never depends on timing; no float
 * atomics. */
#ifndef LD_CUDA_COMMON_CUH
#define LD_CUDA_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_ops.h"

#define LD_CU_FULL 0xffffffffu

/* a kernel's dynamic shared memory, `extern __shared__ type name[]` (a
 * macro so that tests/support/cuda_emu/cuda_emu.cuh can give it on the CPU) */
#ifndef LD_CU_DYN_SMEM
#define LD_CU_DYN_SMEM(type, name) extern __shared__ type name[]
#endif

#include "cuda_graph.h" /* ld_cu_graph_op */

/* the launch's error (0 = success), cleared; every launcher ends with it */
static inline int ld_cu_launched(void)
{
    return ld_cu_graph_op((int)cudaGetLastError());
}

/* blocks of `threads` covering n items */
static inline unsigned ld_cu_blocks(size_t n, int threads)
{
    return (unsigned)((n + (size_t)threads - 1) / (size_t)threads);
}

/* sum over the warp, every lane gets it (fixed xor tree) */
__device__ __forceinline__ float ld_warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(LD_CU_FULL, v, off);
    return v;
}

__device__ __forceinline__ double ld_warp_sum_d(double v)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(LD_CU_FULL, v, off);
    return v;
}

/* block sum (blockDim.x a multiple of 32, <= 1024): the warps' sums added
 * in warp order by warp 0; every thread gets it.  `sh` 32 floats. */
__device__ __forceinline__ float ld_block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ld_warp_sum(v);
    __syncthreads(); /* sh may be in use by a previous call */
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        float x = lane < nw ? sh[lane] : 0.0f;
        x = ld_warp_sum(x);
        if (lane == 0) sh[0] = x;
    }
    __syncthreads();
    return sh[0];
}

/* V4's clamped SwiGLU of one pair: silu(min(g, L)) * clamp(u, -L, L), the
 * one expression the activation kernels and the fused expert GEMMs
 * evaluate (the same bits in each) */
__device__ __forceinline__ float ld_cswiglu(float g, float u, float limit)
{
    float a = g < limit ? g : limit;
    float b = u < -limit ? -limit : u > limit ? limit : u;
    return a / (1.0f + expf(-a)) * b;
}

/* the custom RMSNorm's block: LD_CU_NORM_THREADS threads, thread j
 * summing x[j + 256 m]^2 (fmaf, m ascending), then a fixed tree over the
 * partial sums in shared memory (sh [LD_CU_NORM_THREADS]); every thread
 * gets 1 / sqrt(mean + eps).  One function for every kernel that norms a
 * row (rmsnorm_custom, V4's fused q/kv), so that they agree bitwise. */
/* The "last block" pattern of the kernels that finish a launch's work in
 * one of its blocks (no co-resident blocks needed): the block's writes
 * are fenced and counted in *cnt; it returns 1 in the block whose count
 * brings it to `blocks` (which resets it to zero, for the next launch,
 * and may then read the other blocks' writes through L2: __ldcg, an SM's
 * L1 not being coherent with the others'), 0 in the others.  Every thread
 * of the block calls it; *last is a __shared__ int of the caller's. */
__device__ __forceinline__ int ld_cu_last_block(int *cnt, int blocks, int *last)
{
    __threadfence(); /* the block's writes, before the count says so */
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence(); /* the block's writes, seen at the barrier, released with the count */
        *last = atomicAdd(cnt, 1) == blocks - 1;
        if (*last) *cnt = 0; /* for the next launch */
    }
    __syncthreads();
    int l = *last;
    if (l) __threadfence();
    return l;
}

#define LD_CU_NORM_THREADS 256
/* the tree and the inverse from each thread's partial sum v (a kernel that
 * computes the row itself sums its own values in ld_norm_inv's order) */
__device__ __forceinline__ float ld_norm_tree(float v, int dim, float eps, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = LD_CU_NORM_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    float total = sh[0];
    __syncthreads();
    return 1.0f / sqrtf(total / (float)dim + eps);
}

__device__ __forceinline__ float ld_norm_inv(const float *x, int dim, float eps, float *sh)
{
    float v = 0.0f;
    for (int i = threadIdx.x; i < dim; i += LD_CU_NORM_THREADS) v = fmaf(x[i], x[i], v);
    return ld_norm_tree(v, dim, eps, sh);
}

/* ld_norm_inv of a row other blocks of the launch wrote (its loads through
 * L2, __ldcg: the same values, the same sums) */
__device__ __forceinline__ float ld_norm_inv_cg(const float *x, int dim, float eps, float *sh)
{
    float v = 0.0f;
    for (int i = threadIdx.x; i < dim; i += LD_CU_NORM_THREADS) {
        float xi = __ldcg(x + i);
        v = fmaf(xi, xi, v);
    }
    return ld_norm_tree(v, dim, eps, sh);
}

__device__ __forceinline__ double ld_block_sum_d(double v, double *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ld_warp_sum_d(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        double x = lane < nw ? sh[lane] : 0.0;
        x = ld_warp_sum_d(x);
        if (lane == 0) sh[0] = x;
    }
    __syncthreads();
    return sh[0];
}

/* FP8 E4M3 "fn" to fp32, exact (ld_ref_fp8_e4m3_to_f32): bias 7,
 * subnormals m * 2^-9, S.1111.111 NaN */
__device__ __forceinline__ float ld_e4m3_to_f32(uint32_t v)
{
    uint32_t e = (v >> 3) & 15u, m = v & 7u, s = (v & 0x80u) << 24;
    if (e == 15u && m == 7u) return __uint_as_float(s | 0x7fc00000u);
    if (e == 0u) {
        float r = (float)m * 0x1p-9f;
        return s ? -r : r;
    }
    return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}

/* element i of a weight of type F32, F16 or BF16 (exact conversions, as
 * ld_ref_to_f32) */
__device__ __forceinline__ float ld_elem_f(const void *w, int dt, size_t i)
{
    if (dt == 0) return ((const float *)w)[i];
    uint32_t h = ((const uint16_t *)w)[i];
    if (dt == 2) return __uint_as_float(h << 16);
    return __half2float(__ushort_as_half((unsigned short)h));
}

/* a ranks before b: score descending, NaN last, then index ascending (the
 * total order of ld_ref_ds4_topk and ld_ref_ds_topk) */
__device__ __forceinline__ int ld_ranks_before(float sa, int a, float sb, int b)
{
    int na = sa != sa, nb = sb != sb;
    if (na != nb) return nb;
    if (!na && sa != sb) return sa > sb;
    return a < b;
}

/* ---- DeepSeek-V4 helpers (cuda_ds4_*.cu) ---- */

/* max over the warp, every lane gets it (exact whatever the order; NaN
 * ignored as fmaxf does) */
__device__ __forceinline__ float ld_warp_max(float v)
{
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(LD_CU_FULL, v, off));
    return v;
}

/* x rounded to bf16 (to nearest, ties to even; NaN kept), as
 * ld_var_bf16_round */
__device__ __forceinline__ float ld_bf16_round(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return x;
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

/* FP4 E2M1 code (low 4 bits) to fp32, exact (ld_ref_ds4_e2m1_to_f32):
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (code & 8) */
__device__ __forceinline__ float ld_e2m1_to_f32(uint32_t code)
{
    uint32_t e = (code >> 1) & 3u, m = code & 1u;
    float v = e ? __uint_as_float(((e + 126u) << 23) | (m << 22)) : (m ? 0.5f : 0.0f);
    return (code & 8u) ? -v : v;
}

/* UE8M0 to fp32: 2^(v - 127), 255 NaN (ld_ref_ds4_e8m0_to_f32) */
__device__ __forceinline__ float ld_e8m0_to_f32(uint32_t v)
{
    if (v == 255u) return __uint_as_float(0x7fc00000u);
    return v ? __uint_as_float(v << 23) : __uint_as_float(0x00400000u);
}

/* 1 / (1 + expf(-x)), the C references' sigmoid */
__device__ __forceinline__ float ld_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* the grid of a grouped GEMM (cuda_ops.h's ld_cu_mm_group): column tiles
 * of `warps` columns, the G groups, row tiles of `rows_per` rows up to
 * max_rows; 1, or 0 when max_rows is 0, -1 when too large */
static inline int ld_cu_grouped_grid(dim3 *grid, int G, int max_rows, int N, int warps, int rows_per)
{
    if (max_rows < 0) return -1;
    size_t gz = ((size_t)max_rows + (size_t)rows_per - 1) / (size_t)rows_per;
    if (!gz) return 0;
    if (G > 65535 || gz > 65535) return -1;
    *grid = dim3((unsigned)((N + warps - 1) / warps), (unsigned)G, (unsigned)gz);
    return 1;
}

/* A grouped GEMM block's share of group g (grid: column tiles of `warps`
 * columns, the groups, row tiles of ROWS rows; a warp a column): its
 * column n, first row t0, rows nt, output row stride, and the x row of
 * each of its ROWS slots (slots past nt repeat the first); 0 when the
 * block has no column or no row of g. */
typedef struct ld_cu_tile {
    int n, t0, nt;
    size_t ldo;
} ld_cu_tile;

/* rows t0 .. of group g (t0 < g.rows) as a tile: t->t0, nt, ldo (gn the
 * group's columns) and the x row of each slot (slots past nt repeat the
 * first) */
template <int ROWS>
__device__ __forceinline__ void ld_cu_group_rows(ld_cu_tile *t, const float **xr, const ld_cu_mm_group &g, int t0,
                                                 int K, int gn)
{
    t->t0 = t0;
    t->nt = g.rows - t0 < ROWS ? g.rows - t0 : ROWS;
    size_t ldx = g.ldx ? g.ldx : (size_t)K;
    t->ldo = g.ldo ? g.ldo : (size_t)gn;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        int i = t0 + (r < t->nt ? r : 0);
        xr[r] = g.x + (size_t)(g.xrows ? g.xrows[i] : i) * ldx;
    }
}

template <int ROWS>
__device__ __forceinline__ int ld_cu_grouped_tile(ld_cu_tile *t, const float **xr, const ld_cu_mm_group &g, int K,
                                                  int N, int warps)
{
    int gn = g.n ? g.n : N; /* the group's columns: the grid spans the widest */
    t->n = (int)blockIdx.x * warps + (int)(threadIdx.x >> 5);
    if (t->n >= gn || (int)blockIdx.z * ROWS >= g.rows) return 0;
    ld_cu_group_rows<ROWS>(t, xr, g, (int)blockIdx.z * ROWS, K, gn);
    return 1;
}

/* the logistic function, as the routers and mHC compute it */
__device__ __forceinline__ float sigmoid_f(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

#endif /* LD_CUDA_COMMON_CUH */
