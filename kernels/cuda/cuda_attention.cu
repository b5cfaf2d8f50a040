/* cuda_attention.cu - causal attention over the KV cache (GQA, sliding
 * window), see ld_ref_attention.
 *
 * ref:    one thread per output element (t, h, i); it recomputes the
 *         scores three times (max, sum, weighted sum of v), each a
 *         one-accumulator dot in index order, exactly the C reference's
 *         arithmetic (but CUDA's expf).
 * custom: split-KV with a fixed split size.  Split s is the absolute key
 *         positions [s * LD_CU_ATT_SPLIT, (s + 1) * LD_CU_ATT_SPLIT)
 *         intersected with the query's range [lo, pos]; a warp runs an
 *         online softmax over its split in chunks of 32 keys (a key per
 *         lane, dot by fmaf in index order; chunk max exact, chunk sum by a
 *         fixed shuffle tree; v accumulated key by key in order) and writes
 *         (max, sum, o[hd]); a second kernel merges the non-empty splits in
 *         ascending order.  Which splits exist and how each is cut depend on
 *         the query's position and window only, never on T, pos0 or the
 *         tiling of the queries, so prefill, chunks and token-by-token give
 *         the same bits. */
#include <cuda_runtime.h>

#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

#define FULL 0xffffffffu
#define SPLIT LD_CU_ATT_SPLIT
#define MAXR (LD_CU_ATT_MAX_HD / 32)

__device__ __forceinline__ int range_lo(int pos, int window)
{
    return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

__device__ __forceinline__ float dot_seq(const float *a, const float *b, int n)
{
    float d = 0.0f;
    for (int i = 0; i < n; i++) d += a[i] * b[i];
    return d;
}

__global__ void attention_ref(float *out, const float *q, const float *kc, const float *vc, int T, int pos0,
                              int n_heads, int n_kv, int hd, int window, float scale)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t qrow = (size_t)n_heads * (size_t)hd, kvrow = (size_t)n_kv * (size_t)hd;
    if (idx >= (size_t)T * qrow) return;
    int t = (int)(idx / qrow), h = (int)(idx % qrow / (size_t)hd), i = (int)(idx % (size_t)hd);
    int pos = pos0 + t, kvh = h / (n_heads / n_kv), lo = range_lo(pos, window);
    const float *qv = q + (size_t)t * qrow + (size_t)h * (size_t)hd;
    const float *kb = kc + (size_t)kvh * (size_t)hd, *vb = vc + (size_t)kvh * (size_t)hd;
    float mx = -INFINITY;
    for (int j = lo; j <= pos; j++) {
        float d = dot_seq(qv, kb + (size_t)j * kvrow, hd) * scale;
        if (d > mx) mx = d;
    }
    float sum = 0.0f;
    for (int j = lo; j <= pos; j++) sum += expf(dot_seq(qv, kb + (size_t)j * kvrow, hd) * scale - mx);
    float o = 0.0f;
    for (int j = lo; j <= pos; j++) {
        float p = expf(dot_seq(qv, kb + (size_t)j * kvrow, hd) * scale - mx);
        o += p / sum * vb[(size_t)j * kvrow + (size_t)i];
    }
    out[idx] = o;
}

/* one warp per (split, head, query of the tile); rec = (m, l, o[hd]) */
__global__ void __launch_bounds__(32)
    attention_split(float *work, const float *q, const float *kc, const float *vc, int t_base, int pos0,
                    int n_heads, int n_kv, int hd, int window, float scale, int nsplit)
{
    __shared__ float qs[LD_CU_ATT_MAX_HD];
    int lane = threadIdx.x, s = blockIdx.x, h = blockIdx.y, tt = blockIdx.z;
    int t = t_base + tt, pos = pos0 + t, lo = range_lo(pos, window);
    int kvh = h / (n_heads / n_kv);
    size_t qrow = (size_t)n_heads * (size_t)hd, kvrow = (size_t)n_kv * (size_t)hd;
    float *rec = work + (((size_t)tt * (size_t)n_heads + (size_t)h) * (size_t)nsplit + (size_t)s) * (size_t)(hd + 2);
    int a = s * SPLIT > lo ? s * SPLIT : lo;
    int b = s * SPLIT + SPLIT - 1 < pos ? s * SPLIT + SPLIT - 1 : pos;
    if (a > b) {
        if (lane == 0) {
            rec[0] = -INFINITY;
            rec[1] = 0.0f;
        }
        return;
    }
    const float *qv = q + (size_t)t * qrow + (size_t)h * (size_t)hd;
    for (int i = lane; i < hd; i += 32) qs[i] = qv[i];
    __syncwarp();
    const float *kb = kc + (size_t)kvh * (size_t)hd, *vb = vc + (size_t)kvh * (size_t)hd;
    float m = -INFINITY, l = 0.0f, o[MAXR];
#pragma unroll
    for (int r = 0; r < MAXR; r++) o[r] = 0.0f;
    for (int c = a; c <= b; c += 32) {
        int j = c + lane;
        int valid = j <= b;
        float sc = -INFINITY;
        if (valid) {
            const float *kr = kb + (size_t)j * kvrow;
            float d = 0.0f;
            for (int i = 0; i < hd; i++) d = fmaf(qs[i], kr[i], d);
            sc = d * scale;
        }
        float cm = sc;
        for (int off = 16; off > 0; off >>= 1) cm = fmaxf(cm, __shfl_xor_sync(FULL, cm, off));
        float mn = fmaxf(m, cm);
        float p = valid ? expf(sc - mn) : 0.0f;
        float ps = p;
        for (int off = 16; off > 0; off >>= 1) ps += __shfl_down_sync(FULL, ps, off);
        ps = __shfl_sync(FULL, ps, 0);
        float alpha = expf(m - mn); /* 0 on the first chunk (m = -inf) */
        l = l * alpha + ps;
#pragma unroll
        for (int r = 0; r < MAXR; r++) o[r] *= alpha;
        int nj = b - c + 1 < 32 ? b - c + 1 : 32;
        for (int jj = 0; jj < nj; jj++) {
            float pj = __shfl_sync(FULL, p, jj);
            const float *vr = vb + (size_t)(c + jj) * kvrow;
#pragma unroll
            for (int r = 0; r < MAXR; r++) {
                int i = lane + 32 * r;
                if (i < hd) o[r] = fmaf(pj, vr[i], o[r]);
            }
        }
        m = mn;
    }
    if (lane == 0) {
        rec[0] = m;
        rec[1] = l;
    }
#pragma unroll
    for (int r = 0; r < MAXR; r++) {
        int i = lane + 32 * r;
        if (i < hd) rec[2 + i] = o[r];
    }
}

/* one warp per (head, query of the tile): the splits merged in order */
__global__ void __launch_bounds__(32)
    attention_merge(float *out, const float *work, int t_base, int n_heads, int hd, int nsplit)
{
    int lane = threadIdx.x, h = blockIdx.x, tt = blockIdx.y;
    const float *recs = work + ((size_t)tt * (size_t)n_heads + (size_t)h) * (size_t)nsplit * (size_t)(hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) {
        const float *rec = recs + (size_t)s * (size_t)(hd + 2);
        if (rec[1] > 0.0f) M = fmaxf(M, rec[0]);
    }
    float L = 0.0f, o[MAXR];
#pragma unroll
    for (int r = 0; r < MAXR; r++) o[r] = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        const float *rec = recs + (size_t)s * (size_t)(hd + 2);
        if (!(rec[1] > 0.0f)) continue; /* empty split */
        float e = expf(rec[0] - M);
        L = fmaf(rec[1], e, L);
#pragma unroll
        for (int r = 0; r < MAXR; r++) {
            int i = lane + 32 * r;
            if (i < hd) o[r] = fmaf(rec[2 + i], e, o[r]);
        }
    }
    float *ov = out + ((size_t)(t_base + tt) * (size_t)n_heads + (size_t)h) * (size_t)hd;
#pragma unroll
    for (int r = 0; r < MAXR; r++) {
        int i = lane + 32 * r;
        if (i < hd) ov[i] = o[r] / L;
    }
}

static int n_splits(int pos0, int T)
{
    return (pos0 + T + SPLIT - 1) / SPLIT;
}

extern "C" size_t ld_cu_attention_work(int v, int tile, int n_heads, int hd, int pos0, int T)
{
    if (v == LD_CU_REF || tile <= 0) return 0;
    return (size_t)tile * (size_t)n_heads * (size_t)n_splits(pos0, T) * (size_t)(hd + 2);
}

extern "C" int ld_cu_attention(int v, float *out, const float *q, const float *kcache, const float *vcache, int T,
                               int pos0, int n_heads, int n_kv, int hd, int window, float scale, float *work,
                               size_t work_floats)
{
    if (T <= 0 || n_heads <= 0 || hd <= 0) return 0;
    if (n_kv <= 0 || n_heads % n_kv) return (int)cudaErrorInvalidValue;
    if (v == LD_CU_REF) {
        size_t n = (size_t)T * (size_t)n_heads * (size_t)hd;
        attention_ref<<<(unsigned)((n + 127) / 128), 128>>>(out, q, kcache, vcache, T, pos0, n_heads, n_kv, hd,
                                                            window, scale);
        return ld_cu_launched();
    }
    if (hd > LD_CU_ATT_MAX_HD || n_heads > 65535) return (int)cudaErrorInvalidValue;
    int nsplit = n_splits(pos0, T);
    size_t per_query = ld_cu_attention_work(v, 1, n_heads, hd, pos0, T);
    size_t cap = per_query ? work_floats / per_query : 0;
    int tile = cap > 65535 ? 65535 : (int)cap;
    if (tile < 1) return (int)cudaErrorInvalidValue;
    for (int t0 = 0; t0 < T; t0 += tile) {
        int nt = T - t0 < tile ? T - t0 : tile;
        attention_split<<<dim3((unsigned)nsplit, (unsigned)n_heads, (unsigned)nt), 32>>>(
            work, q, kcache, vcache, t0, pos0, n_heads, n_kv, hd, window, scale, nsplit);
        int e = ld_cu_launched();
        if (e) return e;
        attention_merge<<<dim3((unsigned)n_heads, (unsigned)nt), 32>>>(out, work, t0, n_heads, hd, nsplit);
        if ((e = ld_cu_launched())) return e;
    }
    return 0;
}
