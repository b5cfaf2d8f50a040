/* cuda_ds4_attention.cu - DeepSeek-V4's attention on the device: shared-KV
 * attention with sinks over a sliding window and the compressed entries
 * (split over the keys, merged with the inverse RoPE in one launch), the
 * RoPE of V4 and of V3.2's indexer, and the indexer's picks in one launch
 * (the query's RoPE, the scores, the top-k). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_index.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

/* ================================================================ attention */

/* Where token t's keys are: the sliding window (positions max(0, p - window
 * + 1) .. p of the ring kv [kv_rows][hd], row = position % kv_rows), then
 * the compressed entries ent [.][hd]: picks[t][0 .. kpick) up to the first
 * negative (picks NULL: every entry w < (p + 1) / ratio). */
struct ds4_keys {
    const float *kv, *ent;
    const int32_t *picks;
    int kv_rows, window, kpick, ratio, hd;
};

/* the key count of the token at position p (row t); *lo, *nw the window */
__device__ __forceinline__ int ds4_nkeys(const ds4_keys &K, int t, int p, int *lo, int *nw)
{
    int l = p - K.window + 1;
    if (l < 0) l = 0;
    int n = p - l + 1, nc = 0;
    if (n < 0) n = 0;
    if (K.ent) {
        if (K.picks) {
            const int32_t *pr = K.picks + (size_t)t * (size_t)K.kpick;
            while (nc < K.kpick && pr[nc] >= 0) nc++;
        } else if (K.ratio > 0) {
            nc = (p + 1) / K.ratio;
        }
    }
    *lo = l;
    *nw = n;
    return n + nc;
}

__device__ __forceinline__ const float *ds4_key(const ds4_keys &K, int t, int lo, int nw, int i)
{
    if (i < nw) return K.kv + (size_t)((lo + i) % K.kv_rows) * (size_t)K.hd;
    int c = i - nw;
    size_t w = K.picks ? (size_t)K.picks[(size_t)t * (size_t)K.kpick + (size_t)c] : (size_t)c;
    return K.ent + w * (size_t)K.hd;
}

/* an upper bound of any token's key count */
static int ds4_nk_max(int T, int pos0, int window, int ratio, int kpick, int has_ent)
{
    long long last = (long long)pos0 + T; /* positions < last */
    long long nw = window < last ? window : last;
    if (nw < 0) nw = 0;
    long long nc = 0;
    if (has_ent) nc = kpick > 0 ? kpick : ratio > 0 ? last / ratio : 0;
    long long n = nw + nc;
    return n > 0x3fffffff ? 0x3fffffff : (int)n;
}

#define A4_SPLIT 64 /* keys per split (the custom kernel): 2 a lane */
#define A4_KPL (A4_SPLIT / 32)
#define A4_HEADS 8  /* heads per block (custom) */
#define A4_MAX_HD 512

__host__ __device__ static inline size_t a4_nsplit(int nk)
{
    return (size_t)((nk + A4_SPLIT - 1) / A4_SPLIT);
}

extern "C" size_t ld_cu_ds4_attention_sync(int T, int H)
{
    return T > 0 && H > 0 ? (size_t)T * (size_t)((H + A4_HEADS - 1) / A4_HEADS) : 0;
}

extern "C" size_t ld_cu_ds4_attention_work(int v, int T, int H, int hd, int pos0, int window, int ratio, int kpick,
                                           int has_entries)
{
    if (T <= 0 || H <= 0 || hd <= 0) return 0;
    int nk = ds4_nk_max(T, pos0, window, ratio, kpick, has_entries);
    if (v == LD_CU_REF) return (size_t)T * (size_t)H * ((size_t)nk + 1);
    return (size_t)T * (size_t)H * a4_nsplit(nk) * ((size_t)hd + 2);
}

/* ref, step 1: a thread per (t, h): the scores, their max (the sink
 * included), the exps in place and their sum (at [nkmax]) */
__global__ void a4_scores_ref(float *work, size_t wrow, const float *q, ds4_keys K, const float *sinks, int T, int H,
                              int pos0, float scale)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)H) return;
    int t = (int)(idx / (size_t)H), h = (int)(idx % (size_t)H), lo, nw;
    int nk = ds4_nkeys(K, t, pos0 + t, &lo, &nw);
    const float *qh = q + idx * (size_t)K.hd;
    float *sc = work + idx * wrow;
    float mx = sinks ? sinks[h] : -INFINITY;
    for (int i = 0; i < nk; i++) {
        const float *k = ds4_key(K, t, lo, nw, i);
        float acc = 0.0f;
        for (int d = 0; d < K.hd; d++) acc += qh[d] * k[d];
        sc[i] = acc * scale;
        if (sc[i] > mx) mx = sc[i];
    }
    float sum = 0.0f;
    for (int i = 0; i < nk; i++) {
        sc[i] = expf(sc[i] - mx);
        sum += sc[i];
    }
    if (sinks) sum += expf(sinks[h] - mx);
    sc[wrow - 1] = sum;
}

/* ref, step 2: a thread per output (t, h, d): sum_i (e_i / sum) k_i[d] */
__global__ void a4_out_ref(float *out, const float *work, size_t wrow, ds4_keys K, int T, int H, int pos0)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t hd = (size_t)K.hd;
    if (idx >= (size_t)T * (size_t)H * hd) return;
    size_t th = idx / hd, d = idx % hd;
    int t = (int)(th / (size_t)H), lo, nw;
    int nk = ds4_nkeys(K, t, pos0 + t, &lo, &nw);
    const float *sc = work + th * wrow;
    float sum = sc[wrow - 1], acc = 0.0f;
    for (int i = 0; i < nk; i++) {
        float p = sc[i] / sum;
        acc += p * ds4_key(K, t, lo, nw, i)[d];
    }
    out[idx] = acc;
}

/* custom: a block per (split s, 8 heads, token t), 8 warps.  The split's
 * A4_SPLIT keys (list positions s * 64 ..): warp w the dot products of
 * keys w, w + 8, .. with the 8 queries (lanes over d, fmaf, the tree); warp
 * hh the split's max m and sum l of exp(score - m) for head hh (keys lane
 * and lane + 32, summed in that order, then the tree); then a thread per d
 * the unnormalised o[d] = sum_i e_i k_i[d] (i ascending, fmaf).  (m, l, o)
 * to part[t][h][s].  (64 keys a split: the partial o of 64 heads are about
 * the bytes of the split's keys.) */
struct a4_smem { /* the split block's shared memory */
    float qs[A4_HEADS][A4_MAX_HD];
    float es[A4_HEADS][A4_SPLIT];
    const float *kp[A4_SPLIT];
};

__device__ void a4_split_block(float *part, size_t nsplit, const float *q, const ds4_keys &K, int H, int pos0,
                               float scale, a4_smem *sm)
{
    float(*qs)[A4_MAX_HD] = sm->qs, (*es)[A4_SPLIT] = sm->es;
    const float **kp = sm->kp;
    int s = blockIdx.x, h0 = blockIdx.y * A4_HEADS, t = blockIdx.z;
    int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, hd = K.hd;
    int lo, nw, nk = ds4_nkeys(K, t, pos0 + t, &lo, &nw);
    int i0 = s * A4_SPLIT;
    if (i0 >= nk) return; /* the merge reads the splits < ceil(nk / 64); the whole block returns */
    int ns = nk - i0 < A4_SPLIT ? nk - i0 : A4_SPLIT;
    int nh = H - h0 < A4_HEADS ? H - h0 : A4_HEADS;
    for (int e = threadIdx.x; e < A4_HEADS * A4_MAX_HD; e += blockDim.x) {
        int hh = e / A4_MAX_HD, d = e % A4_MAX_HD;
        qs[hh][d] = hh < nh && d < hd ? q[((size_t)t * (size_t)H + (size_t)(h0 + hh)) * (size_t)hd + (size_t)d] : 0.0f;
    }
    for (int i = threadIdx.x; i < A4_SPLIT; i += blockDim.x) kp[i] = i < ns ? ds4_key(K, t, lo, nw, i0 + i) : K.kv;
    __syncthreads();
    for (int i = wp; i < ns; i += 8) {
        const float *k = kp[i];
        float kr[A4_MAX_HD / 32];
#pragma unroll
        for (int j = 0; j < A4_MAX_HD / 32; j++) {
            int d = lane + 32 * j;
            kr[j] = d < hd ? k[d] : 0.0f;
        }
#pragma unroll
        for (int hh = 0; hh < A4_HEADS; hh++) {
            float acc = 0.0f;
#pragma unroll
            for (int j = 0; j < A4_MAX_HD / 32; j++) acc = fmaf(qs[hh][lane + 32 * j], kr[j], acc);
            acc = ld_warp_sum(acc);
            if (lane == 0) es[hh][i] = acc * scale;
        }
    }
    __syncthreads();
    if (wp < nh) {
        float x[A4_KPL], m = -INFINITY, l = 0.0f;
#pragma unroll
        for (int j = 0; j < A4_KPL; j++) {
            int i = lane + 32 * j;
            x[j] = i < ns ? es[wp][i] : -INFINITY;
            m = fmaxf(m, x[j]);
        }
        m = ld_warp_max(m);
#pragma unroll
        for (int j = 0; j < A4_KPL; j++) {
            int i = lane + 32 * j;
            float e = i < ns ? expf(x[j] - m) : 0.0f;
            l += e;
            es[wp][i] = e;
        }
        l = ld_warp_sum(l);
        if (lane == 0) {
            float *pp = part + (((size_t)t * (size_t)H + (size_t)(h0 + wp)) * nsplit + (size_t)s) * (size_t)(hd + 2);
            pp[0] = m;
            pp[1] = l;
        }
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc[A4_HEADS];
#pragma unroll
        for (int hh = 0; hh < A4_HEADS; hh++) acc[hh] = 0.0f;
        for (int i = 0; i < ns; i++) {
            float kd = kp[i][d];
#pragma unroll
            for (int hh = 0; hh < A4_HEADS; hh++) acc[hh] = fmaf(es[hh][i], kd, acc[hh]);
        }
        for (int hh = 0; hh < nh; hh++)
            part[(((size_t)t * (size_t)H + (size_t)(h0 + hh)) * nsplit + (size_t)s) * (size_t)(hd + 2) + 2 +
                 (size_t)d] = acc[hh];
    }
}

__global__ void __launch_bounds__(256) a4_split_custom(float *part, size_t nsplit, const float *q, ds4_keys K,
                                                       int H, int pos0, float scale)
{
    __shared__ a4_smem sm;
    a4_split_block(part, nsplit, q, K, H, pos0, scale, &sm);
}

/* custom, merge: output d of (token, head) th, the splits in order:
 * M = max(sink, m_s), L = sum_s l_s exp(m_s - M) + exp(sink - M),
 * out[d] = sum_s o_s[d] exp(m_s - M) / L (0 with no keys and no sink) */
__device__ __forceinline__ float a4_merged(const float *part, size_t nsplit, const ds4_keys &K, const float *sinks,
                                           int H, int pos0, size_t th, size_t d)
{
    size_t hd = (size_t)K.hd;
    int t = (int)(th / (size_t)H), h = (int)(th % (size_t)H), lo, nw;
    int ns = (int)a4_nsplit(ds4_nkeys(K, t, pos0 + t, &lo, &nw));
    const float *pp = part + th * nsplit * (hd + 2);
    float M = sinks ? sinks[h] : -INFINITY;
    /* __ldcg: through L2, the parts being other blocks' (a4_split_merge) */
    for (int s = 0; s < ns; s++) M = fmaxf(M, __ldcg(pp + (size_t)s * (hd + 2)));
    if (M == -INFINITY) return 0.0f; /* no keys, no sink */
    float L = 0.0f, o = 0.0f;
    for (int s = 0; s < ns; s++) {
        const float *ps = pp + (size_t)s * (hd + 2);
        float f = expf(__ldcg(ps) - M);
        L += __ldcg(ps + 1) * f;
        o = fmaf(__ldcg(ps + 2 + d), f, o);
    }
    if (sinks) L += expf(sinks[h] - M);
    return o / L;
}

/* a thread per (t, h, d) */
__global__ void a4_merge_custom(float *out, const float *part, size_t nsplit, ds4_keys K, const float *sinks, int T,
                                int H, int pos0)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t hd = (size_t)K.hd;
    if (idx >= (size_t)T * (size_t)H * hd) return;
    out[idx] = a4_merged(part, nsplit, K, sinks, H, pos0, idx / hd, idx % hd);
}

__global__ void a4_merge_rope_custom(float *out, const float *part, size_t nsplit, ds4_keys K, const float *sinks,
                                     int T, int H, int pos0, ld_cu_rot rot);
__global__ void __launch_bounds__(256)
    a4_split_merge_custom(float *part, size_t nsplit, const float *q, ds4_keys K, int H, int pos0, float scale,
                          float *out, const float *sinks, ld_cu_rot rot, int *sync);

/* ld_cu_ds4_attention, and with rot (custom only) its merge de-rotating */
static int ds4_attention(int v, float *out, const float *q, int T, int H, int hd, const float *kv, int kv_rows,
                         int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                         const float *sinks, float scale, int pos0, float *work, size_t work_floats,
                         const ld_cu_rot *rot, int *sync)
{
    if (T <= 0 || H <= 0) return 0;
    if (hd <= 0 || pos0 < 0 || window < 0 || (window > 0 && (!kv || kv_rows < window)) ||
        (entries && !picks && ratio <= 0) || (picks && (!entries || kpick <= 0)))
        return INVAL;
    if (rot && (v == LD_CU_REF || rot->rd < 0 || rot->rd % 2 || rot->rd > hd)) return INVAL;
    if (T > 65535 || (v != LD_CU_REF && hd > A4_MAX_HD)) return INVAL;
    if (work_floats < ld_cu_ds4_attention_work(v, T, H, hd, pos0, window, ratio, picks ? kpick : 0, entries != NULL))
        return INVAL;
    ds4_keys K;
    K.kv = kv;
    K.ent = entries;
    K.picks = picks;
    K.kv_rows = kv_rows > 0 ? kv_rows : 1;
    K.window = window;
    K.kpick = picks ? kpick : 0;
    K.ratio = ratio;
    K.hd = hd;
    int nk = ds4_nk_max(T, pos0, window, ratio, picks ? kpick : 0, entries != NULL);
    size_t n_out = (size_t)T * (size_t)H * (size_t)hd;
    int e;
    if (v == LD_CU_REF) {
        size_t wrow = (size_t)nk + 1;
        a4_scores_ref<<<ld_cu_blocks((size_t)T * (size_t)H, 64), 64>>>(work, wrow, q, K, sinks, T, H, pos0, scale);
        if ((e = ld_cu_launched())) return e;
        a4_out_ref<<<ld_cu_blocks(n_out, 128), 128>>>(out, work, wrow, K, T, H, pos0);
        return ld_cu_launched();
    }
    size_t nsplit = a4_nsplit(nk);
    if (nsplit > 0x7fffffff) return INVAL;
    dim3 grid((unsigned)nsplit, (unsigned)((H + A4_HEADS - 1) / A4_HEADS), (unsigned)T);
    if (nsplit > 0 && sync) {
        a4_split_merge_custom<<<grid, 256>>>(work, nsplit, q, K, H, pos0, scale, out, sinks, *rot, sync);
        return ld_cu_launched();
    }
    if (nsplit > 0) {
        a4_split_custom<<<grid, 256>>>(work, nsplit, q, K, H, pos0, scale);
        if ((e = ld_cu_launched())) return e;
    }
    if (rot)
        a4_merge_rope_custom<<<ld_cu_blocks(n_out, 256), 256>>>(out, work, nsplit, K, sinks, T, H, pos0, *rot);
    else
        a4_merge_custom<<<ld_cu_blocks(n_out, 256), 256>>>(out, work, nsplit, K, sinks, T, H, pos0);
    return ld_cu_launched();
}

extern "C" int ld_cu_ds4_attention(int v, float *out, const float *q, int T, int H, int hd, const float *kv,
                                   int kv_rows, int window, const float *entries, int ratio, const int32_t *picks,
                                   int kpick, const float *sinks, float scale, int pos0, float *work,
                                   size_t work_floats)
{
    return ds4_attention(v, out, q, T, H, hd, kv, kv_rows, window, entries, ratio, picks, kpick, sinks, scale, pos0,
                         work, work_floats, NULL, NULL);
}

extern "C" int ld_cu_ds4_attention_rope(float *out, const float *q, int T, int H, int hd, const float *kv,
                                        int kv_rows, int window, const float *entries, int ratio,
                                        const int32_t *picks, int kpick, const float *sinks, float scale, int pos0,
                                        float *work, size_t work_floats, ld_cu_rot rot, int *sync)
{
    return ds4_attention(LD_CU_CUSTOM, out, q, T, H, hd, kv, kv_rows, window, entries, ratio, picks, kpick, sinks,
                         scale, pos0, work, work_floats, &rot, sync);
}

/* ================================================================ RoPE */

/* c and s of pair i at position pos, as the C references compute them */
__device__ __forceinline__ void rope_cs(float *c, float *s, int pos, float inv_freq, float af, int inverse,
                                        int bf16_table)
{
    float a = (float)pos * inv_freq;
    float cc = cosf(a) * af, ss = sinf(a) * af;
    if (bf16_table) {
        cc = ld_bf16_round(cc);
        ss = ld_bf16_round(ss);
    }
    *c = cc;
    *s = inverse ? -ss : ss;
}

__device__ __forceinline__ void rope_pair(float *v, int i, int half, int interleave, float c, float s)
{
    int a = interleave ? 2 * i : i, b = interleave ? 2 * i + 1 : i + half;
    float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x1 * c + x0 * s;
}

/* a thread per (t, h, pair) */
__global__ void rope_ref(float *x, int T, size_t row_stride, size_t off, int H, size_t head_stride, int dim,
                         const float *inv_freq, float af, int interleave, int pos0, int inverse, int bf16_table)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int half = dim / 2;
    if (idx >= (size_t)T * (size_t)H * (size_t)half) return;
    int i = (int)(idx % (size_t)half);
    size_t th = idx / (size_t)half, t = th / (size_t)H, h = th % (size_t)H;
    float c, s;
    rope_cs(&c, &s, pos0 + (int)t, inv_freq[i], af, inverse, bf16_table);
    rope_pair(x + t * row_stride + off + h * head_stride, i, half, interleave, c, s);
}

#define ROPE_MAX_HALF 512

/* the merge with the inverse RoPE of each head's last rd values: a thread
 * per (t, h, d) merges d before them; in them the even one merges its
 * pair (d, d + 1) and rotates it (rope_cs, rope_pair's expressions), the
 * odd one returns: the values the merge stores, then rope_custom's */
__device__ void a4_merge_item(float *out, const float *part, size_t nsplit, const ds4_keys &K, const float *sinks,
                              int H, int pos0, size_t th, size_t d, const ld_cu_rot &rot)
{
    size_t hd = (size_t)K.hd, r0 = hd - (size_t)rot.rd, idx = th * hd + d;
    if (d < r0) {
        out[idx] = a4_merged(part, nsplit, K, sinks, H, pos0, th, d);
        return;
    }
    if ((d - r0) & 1) return;
    float x0 = a4_merged(part, nsplit, K, sinks, H, pos0, th, d);
    float x1 = a4_merged(part, nsplit, K, sinks, H, pos0, th, d + 1);
    float c, s;
    rope_cs(&c, &s, pos0 + (int)(th / (size_t)H), rot.inv_freq[(d - r0) / 2], rot.af, 1, rot.bf16_table);
    out[idx] = x0 * c - x1 * s;
    out[idx + 1] = x1 * c + x0 * s;
}

__global__ void a4_merge_rope_custom(float *out, const float *part, size_t nsplit, ds4_keys K, const float *sinks,
                                     int T, int H, int pos0, ld_cu_rot rot)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, hd = (size_t)K.hd;
    if (idx >= (size_t)T * (size_t)H * hd) return;
    a4_merge_item(out, part, nsplit, K, sinks, H, pos0, idx / hd, idx % hd, rot);
}

/* the split and the merge (with the inverse RoPE) in one launch: the
 * split kernel's blocks, then the last of the blocks of a (token, 8 heads)
 * to be done (counted in sync[t][head group], which it resets to 0)
 * merges those heads as a4_merge_rope_custom does (the parts read through
 * L2): the same bits, one launch fewer */
__global__ void __launch_bounds__(256)
    a4_split_merge_custom(float *part, size_t nsplit, const float *q, ds4_keys K, int H, int pos0, float scale,
                          float *out, const float *sinks, ld_cu_rot rot, int *sync)
{
    __shared__ a4_smem sm;
    __shared__ int last;
    a4_split_block(part, nsplit, q, K, H, pos0, scale, &sm);
    int *cnt = sync + (size_t)blockIdx.z * gridDim.y + blockIdx.y;
    if (!ld_cu_last_block(cnt, (int)gridDim.x, &last)) return; /* the parts written */
    int h0 = blockIdx.y * A4_HEADS, nh = H - h0 < A4_HEADS ? H - h0 : A4_HEADS, hd = K.hd;
    for (int e = threadIdx.x; e < nh * hd; e += blockDim.x)
        a4_merge_item(out, part, nsplit, K, sinks, H, pos0, (size_t)blockIdx.z * (size_t)H + (size_t)(h0 + e / hd),
                      (size_t)(e % hd), rot);
}

/* a block per row: the row's cos / sin table in shared memory once, then a
 * thread per (h, pair); the same values as rope_ref */
__global__ void rope_custom(float *x, size_t row_stride, size_t off, int H, size_t head_stride, int dim,
                            const float *inv_freq, float af, int interleave, int pos0, int inverse, int bf16_table)
{
    __shared__ float cs[ROPE_MAX_HALF], sn[ROPE_MAX_HALF];
    int half = dim / 2, t = blockIdx.x;
    for (int i = threadIdx.x; i < half; i += blockDim.x) rope_cs(&cs[i], &sn[i], pos0 + t, inv_freq[i], af, inverse,
                                                                bf16_table);
    __syncthreads();
    float *row = x + (size_t)t * row_stride + off;
    for (int e = threadIdx.x; e < H * half; e += blockDim.x) {
        int h = e / half, i = e % half;
        rope_pair(row + (size_t)h * head_stride, i, half, interleave, cs[i], sn[i]);
    }
}

extern "C" int ld_cu_ds_rope(int v, float *x, int T, size_t row_stride, size_t off, int n_heads, size_t head_stride,
                             int dim, const float *inv_freq, float attn_factor, int interleave, int pos0,
                             int inverse, int bf16_table)
{
    if (T <= 0 || n_heads <= 0 || dim <= 0) return 0;
    if (dim % 2 || pos0 < 0) return INVAL;
    if (v == LD_CU_REF || dim / 2 > ROPE_MAX_HALF)
        rope_ref<<<ld_cu_blocks((size_t)T * (size_t)n_heads * (size_t)(dim / 2), 256), 256>>>(
            x, T, row_stride, off, n_heads, head_stride, dim, inv_freq, attn_factor, interleave, pos0, inverse,
            bf16_table);
    else
        rope_custom<<<(unsigned)T, 256>>>(x, row_stride, off, n_heads, head_stride, dim, inv_freq, attn_factor,
                                          interleave, pos0, inverse, bf16_table);
    return ld_cu_launched();
}

/* ---------------------------------------------------------------- the indexer's picks in one launch */

#define PICK_THREADS (32 * IDX_WARPS)

/* grid (key tiles of n, T): a block copies query t's heads into shared
 * memory and rotates each head's last rot.rd values at pos0 + t there
 * (rope_custom's table and pairs, interleaved), then scores its tile
 * (index_tile, form 1); the last of query t's blocks to be done (a count
 * in sync[t], which it resets to 0) writes the rotated heads back into q
 * (the in-place rotation of ld_cu_ds_rope: every block has read q by
 * then) and picks the row's top k (topk_row, the scores read through L2)
 * into sel [T][k].  The bits of the three launches. */
__global__ void __launch_bounds__(PICK_THREADS)
    ds4_index_pick(int32_t *sel, float *scores, float *q, const float *w, const float *keys, int H, int dim, int n,
                   int k, float qscale, float wscale, ld_cu_rot rot, int pos0, int *sync)
{
    LD_CU_DYN_SMEM(float, qsh); /* H * dim */
    __shared__ float cs[ROPE_MAX_HALF], sn[ROPE_MAX_HALF];
    __shared__ topk_sh<PICK_THREADS> tsh;
    __shared__ int last;
    int t = blockIdx.y, half = rot.rd / 2, QW = H * dim;
    float *qt = q + (size_t)t * (size_t)QW;
    for (int i = threadIdx.x; i < QW; i += PICK_THREADS) qsh[i] = qt[i];
    for (int i = threadIdx.x; i < half; i += PICK_THREADS)
        rope_cs(&cs[i], &sn[i], pos0 + t, rot.inv_freq[i], rot.af, 0, rot.bf16_table);
    __syncthreads();
    for (int e = threadIdx.x; e < H * half; e += PICK_THREADS) {
        int h = e / half, i = e % half;
        rope_pair(qsh + h * dim + (dim - rot.rd), i, half, 1, cs[i], sn[i]);
    }
    __syncthreads();
    index_tile(scores, qsh, w + (size_t)t * (size_t)H, keys, H, dim, n, 1, qscale, wscale, t, blockIdx.x * IDX_KEYS);
    if (!ld_cu_last_block(&sync[t], (int)gridDim.x, &last)) return; /* the scores written */
    for (int i = threadIdx.x; i < QW; i += PICK_THREADS) qt[i] = qsh[i];
    topk_row<PICK_THREADS, 1>(sel + (size_t)t * (size_t)k, scores + (size_t)t * (size_t)n, n, k, &tsh);
}

extern "C" int ld_cu_ds4_index_pick(int32_t *sel, float *scores, float *q, const float *w, const float *keys, int T,
                                    int H, int dim, int n, int k, float qscale, float wscale, const ld_cu_rot *rot,
                                    int pos0, int *sync)
{
    if (T <= 0 || k <= 0) return 0;
    if (H <= 0 || dim <= 0 || dim > 32 * IDX_MAXR || (size_t)H * (size_t)dim > LD_CU_INDEX_PICK_QW || n <= 0 ||
        T > 65535 || rot->rd < 0 || rot->rd % 2 || rot->rd > dim || rot->rd / 2 > ROPE_MAX_HALF || pos0 < 0 || !sync)
        return INVAL;
    dim3 grid((unsigned)((n + IDX_KEYS - 1) / IDX_KEYS), (unsigned)T);
    ds4_index_pick<<<grid, PICK_THREADS, (size_t)H * (size_t)dim * sizeof(float)>>>(sel, scores, q, w, keys, H, dim, n,
                                                                                   k, qscale, wscale, *rot, pos0, sync);
    return ld_cu_launched();
}

/* blocks [0, T H): head h of token t's q, normed in place (rmsnorm_custom
 * by ones: 1 * v is v), then its last rd values rotated (rope_custom's
 * pairs); blocks [T H, T H + T): kv row t copied to its ring row, then
 * rotated there.  The bits of the three launches and the copy it
 * replaces. */
__global__ void __launch_bounds__(LD_CU_NORM_THREADS)
    ds4_qkv_custom(float *q, float *kvc, const float *kv, int T, int H, int hd, int kv_rows, int pos0, float eps,
                   const float *inv_freq, float af, int rd, int bf16_table)
{
    __shared__ float sh[LD_CU_NORM_THREADS];
    int b = blockIdx.x, half = rd / 2, t;
    float *v;
    if (b < T * H) {
        t = b / H;
        v = q + (size_t)b * (size_t)hd;
        float inv = ld_norm_inv(v, hd, eps, sh);
        for (int i = threadIdx.x; i < hd; i += LD_CU_NORM_THREADS) v[i] = 1.0f * (v[i] * inv);
    } else {
        t = b - T * H;
        v = kvc + (size_t)((pos0 + t) % kv_rows) * (size_t)hd;
        for (int i = threadIdx.x; i < hd; i += LD_CU_NORM_THREADS) v[i] = kv[(size_t)t * (size_t)hd + (size_t)i];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < half; i += LD_CU_NORM_THREADS) {
        float c, s;
        rope_cs(&c, &s, pos0 + t, inv_freq[i], af, 0, bf16_table);
        rope_pair(v + (hd - rd), i, half, 1, c, s);
    }
}

extern "C" int ld_cu_ds4_qkv(float *q, float *kvc, const float *kv, int T, int H, int hd, int kv_rows, int pos0,
                             float eps, const float *inv_freq, float attn_factor, int rd, int bf16_table)
{
    if (T <= 0 || H <= 0 || hd <= 0) return 0;
    if (rd < 0 || rd % 2 || rd > hd || pos0 < 0 || kv_rows < T || (size_t)T * (size_t)(H + 1) > 0x7fffffffu)
        return INVAL;
    ds4_qkv_custom<<<(unsigned)(T * (H + 1)), LD_CU_NORM_THREADS>>>(q, kvc, kv, T, H, hd, kv_rows, pos0, eps,
                                                                     inv_freq, attn_factor, rd, bf16_table);
    return ld_cu_launched();
}
