/* cuda_moe_plan.cuh - the MoE plan (rows grouped by expert) and the grouped
 * launches' tables, each by one block, shared by their own kernels
 * (cuda_moe.cu) and the fused route + plan + tables (cuda_route.cu). */
#ifndef LD_CUDA_MOE_PLAN_CUH
#define LD_CUDA_MOE_PLAN_CUH

#include "cuda_common.cuh"
#include "cuda_ops.h"

#define PLAN_THREADS 1024

/* the plan by one block of any size (integers: the same whatever the
 * size), cnt [E + 1] in shared memory */
static __device__ void moe_plan_block(int32_t *offsets, int32_t *rows, int32_t *row_of, const int32_t *idx, int TK, int K,
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

/* the grouped launches' tables from the device plan: thread e (an
 * expert) has rows or not; its position among those that have is the
 * count of such below it (an inclusive scan of the flags in shared memory,
 * Hillis-Steele: log2 E rounds); threads k in [active, G) write the empty
 * entries */
#define TAB_THREADS 1024

/* the tables by one block of nt >= E threads, pos [nt] in shared memory */
static __device__ void moe_tables_block(ld_cu_mm_group *tab, int G, const int32_t *offsets, const ld_cu_moe_w *w, int E,
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

#endif /* LD_CUDA_MOE_PLAN_CUH */
