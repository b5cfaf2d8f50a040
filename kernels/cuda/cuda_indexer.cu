/* cuda_indexer.cu - the lightning indexer's scores (V3.2, V4:
 * ld_cu_index_scores) and the top-k of them (ld_cu_topk). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_common.cuh"
#include "cuda_index.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

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
