/* cuda_index.cuh - the lightning indexer's custom kernels as block-level
 * pieces: a tile of key scores (index_custom's) and a row's top-k
 * (topk_custom's), for cuda_indexer.cu's kernels and for the V4 kernel
 * that runs the indexer's RoPE, scores and top-k in one launch
 * (cuda_ds4_attention.cu's ds4_index_pick).  A piece gives the same values
 * whichever kernel runs it: a key's score is one warp's, the heads summed
 * in order; a top-k is the exact set, written in index order. */
#ifndef LD_CUDA_INDEX_CUH
#define LD_CUDA_INDEX_CUH

#include <stdint.h>

#include "cuda_common.cuh"

/* ---------------------------------------------------------------- scores */

__device__ __forceinline__ float idx_term(int form, float d, float wh, float qscale, float wscale)
{
    if (form == 0) {
        d *= qscale;
        if (d < 0.0f) d = 0.0f; /* a NaN stays NaN */
        return (wh * wscale) * d;
    }
    float rl = d > 0.0f ? d : 0.0f;
    return (rl * qscale) * (wh * wscale);
}

#define IDX_WARPS 8
#define IDX_KEYS 64 /* keys per block */
#define IDX_MAXR 8  /* dim <= 256 */

/* the scores of query t against keys [s0, s0 + IDX_KEYS) (those < n)
 * into scores[t][s], by a block of IDX_WARPS warps: the query's heads in
 * shared memory qsh [H][dim], its head weights wt [H]; a warp per key, the
 * key in registers (lane L holds i = L + 32 r), per head a dot by fmaf
 * over r then the tree; the heads summed in order */
__device__ __forceinline__ void index_tile(float *scores, const float *qsh, const float *wt, const float *keys, int H,
                                           int dim, int n, int form, float qscale, float wscale, int t, int s0)
{
    int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    for (int s = s0 + wp; s < s0 + IDX_KEYS && s < n; s += IDX_WARPS) {
        const float *kr = keys + (size_t)s * (size_t)dim;
        float kv[IDX_MAXR];
#pragma unroll
        for (int r = 0; r < IDX_MAXR; r++) kv[r] = lane + 32 * r < dim ? kr[lane + 32 * r] : 0.0f;
        float acc = 0.0f;
        for (int h = 0; h < H; h++) {
            const float *qh = qsh + h * dim;
            float d = 0.0f;
#pragma unroll
            for (int r = 0; r < IDX_MAXR; r++)
                if (lane + 32 * r < dim) d = fmaf(qh[lane + 32 * r], kv[r], d);
            d = ld_warp_sum(d);
            acc += idx_term(form, d, wt[h], qscale, wscale);
        }
        if (lane == 0) scores[(size_t)t * (size_t)n + (size_t)s] = acc;
    }
}

/* ---------------------------------------------------------------- top-k */

__device__ __forceinline__ int topk_n(int n, int pos0, int t)
{
    return pos0 < 0 || pos0 + t + 1 > n ? n : pos0 + t + 1;
}

/* the order of ranks_before as a 64-bit key, larger first: the score's
 * bits made monotone (NaN lowest, -0 as +0), then the complemented index */
__device__ __forceinline__ uint64_t topk_key(float f, int s)
{
    uint32_t u;
    if (f != f) u = 0u;
    else {
        u = __float_as_uint(f == 0.0f ? 0.0f : f);
        u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    }
    return ((uint64_t)u << 32) | (uint64_t)(0xffffffffu - (uint32_t)s);
}

/* score s of a row: CG 1 through L2 (__ldcg), where other blocks of the
 * launch wrote the row */
template <int CG> __device__ __forceinline__ float topk_score(const float *sc, int s)
{
    return CG ? __ldcg(sc + s) : sc[s];
}

/* the shared memory of a top-k row by THREADS threads */
template <int THREADS> struct topk_sh {
    unsigned hist[256];
    unsigned long long prefix;
    int need, wtot[THREADS / 32];
};

/* the m = min(k, nt) best of the row's first nt scores sc into out [k]
 * (ascending, -1 after them), by a block of THREADS threads: radix select
 * of the m-th largest key (eight passes of 8 bits, integer histograms),
 * then the keys >= it written in index order (ballot prefix counts).  The
 * set and its order do not depend on THREADS. */
template <int THREADS, int CG>
__device__ void topk_row(int32_t *out, const float *sc, int nt, int k, topk_sh<THREADS> *sh)
{
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, m = nt < k ? nt : k;
    for (int i = m + tid; i < k; i += THREADS) out[i] = -1;
    if (m <= 0) return;
    if (tid == 0) {
        sh->prefix = 0;
        sh->need = m;
    }
    uint64_t mask = 0;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += THREADS) sh->hist[i] = 0;
        __syncthreads();
        uint64_t prefix = sh->prefix;
        for (int s = tid; s < nt; s += THREADS) {
            uint64_t key = topk_key(topk_score<CG>(sc, s), s);
            if ((key & mask) == prefix) atomicAdd(&sh->hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (tid == 0) {
            unsigned cum = 0, need = (unsigned)sh->need;
            int d = 255;
            for (; d > 0; d--) {
                if (cum + sh->hist[d] >= need) break;
                cum += sh->hist[d];
            }
            sh->need = (int)(need - cum);
            sh->prefix = prefix | ((uint64_t)d << shift);
        }
        mask |= (uint64_t)255 << shift;
        __syncthreads();
    }
    uint64_t thr = sh->prefix;
    int base = 0;
    for (int s0 = 0; s0 < nt; s0 += THREADS) {
        int s = s0 + tid;
        int flag = s < nt && topk_key(topk_score<CG>(sc, s), s) >= thr;
        unsigned bal = __ballot_sync(LD_CU_FULL, flag);
        if (lane == 0) sh->wtot[w] = __popc(bal);
        __syncthreads();
        int before = 0, total = 0;
        for (int i = 0; i < THREADS / 32; i++) {
            if (i < w) before += sh->wtot[i];
            total += sh->wtot[i];
        }
        if (flag) out[base + before + __popc(bal & ((1u << lane) - 1u))] = s;
        base += total;
        __syncthreads();
    }
}

#endif /* LD_CUDA_INDEX_CUH */
