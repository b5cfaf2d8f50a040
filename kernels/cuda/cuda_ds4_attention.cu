/* cuda_ds4.cu - the CUDA twins of DeepSeek-V4's remaining ops of
 * ref_ds4.h (shared-KV attention with sinks over a sliding window
 * and compressed entries, clamped SwiGLU, RoPE and its inverse, the final
 * hc_head collapse, the FP4 E2M1 block-scaled GEMV, the compressor's
 * softmax pooling) and of DeepSeek-V3.2's indexer LayerNorm and RoPE
 * (ref_ds.h); see cuda_ops.h, section DeepSeek-V4.
 *
 * As cuda_deepseek.cu: each op has a reference kernel (one thread per
 * output element, or per row where the C loop is sequential: LayerNorm,
 * the attention's scores), a literal port of the C loop in fp32 with its
 * summation order, equal to the C reference bitwise except where CUDA's
 * expf, sinf, cosf differ from the C library's by an ulp; and a custom
 * kernel (warp and block reductions, shared memory, split-K) whose order is
 * a function of the shapes only, so a token's row is the same alone or in
 * a batch.  Compiled with --fmad=false; no float atomics. */
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

/* ================================================================ hc_head */

#define HH_MAXN 64

extern "C" size_t ld_cu_hc_head_work(int T, int N)
{
    return T > 0 && N > 0 ? (size_t)T * (size_t)(1 + N) : 0;
}

/* ref: a thread per token (the norm), per (t, o) (the mix), per (t, d) (the
 * collapse, pre recomputed from the mix: the same bits) */
__global__ void hh_norm_ref(float *work, const float *X, int T, int N, int ND, float eps)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float *x = X + (size_t)t * (size_t)ND;
    float ss = 0.0f;
    for (int i = 0; i < ND; i++) ss += x[i] * x[i];
    work[(size_t)t * (size_t)(1 + N)] = 1.0f / sqrtf(ss / (float)ND + eps);
}

__global__ void hh_mix_ref(float *work, const float *X, const float *fn, int T, int N, int ND)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)N) return;
    size_t t = idx / (size_t)N, o = idx % (size_t)N;
    const float *x = X + t * (size_t)ND, *wr = fn + o * (size_t)ND;
    float *wt = work + t * (size_t)(1 + N);
    float inv = wt[0], acc = 0.0f;
    for (int i = 0; i < ND; i++) acc += wr[i] * (x[i] * inv);
    wt[1 + o] = acc;
}

__global__ void hh_collapse_ref(float *out, const float *work, const float *X, const float *base, float scale,
                                float hc_eps, int T, int N, int D)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)D) return;
    size_t t = idx / (size_t)D, d = idx % (size_t)D;
    const float *m = work + t * (size_t)(1 + N) + 1, *x = X + t * (size_t)N * (size_t)D;
    float acc = 0.0f;
    for (int j = 0; j < N; j++) {
        float pre = ld_sigmoid(m[j] * scale + base[j]) + hc_eps;
        acc += pre * x[(size_t)j * (size_t)D + d];
    }
    out[idx] = acc;
}

/* custom: a block per token: the block-reduced norm, a warp per mixing row
 * (lanes over N*D, fmaf, the tree), pre in shared memory, a thread per d;
 * with normed (not NULL) the final RMSNorm after it, by w (F32, F16 or
 * BF16: ld_elem_f) into normed as rmsnorm_custom computes it (thread j
 * sums the squares of its columns j + 256 m in order, the same tree, the
 * same products) */
__global__ void __launch_bounds__(LD_CU_NORM_THREADS)
    hh_custom(float *out, const float *X, const float *fn, const float *base, float scale, float norm_eps,
              float hc_eps, int N, int D, const void *w, int wdt, float eps, float *normed)
{
    __shared__ float sh[LD_CU_NORM_THREADS], pre[HH_MAXN];
    int t = blockIdx.x, lane = threadIdx.x & 31, wp = threadIdx.x >> 5, nwp = blockDim.x >> 5, ND = N * D;
    const float *x = X + (size_t)t * (size_t)ND;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < ND; i += blockDim.x) ss = fmaf(x[i], x[i], ss);
    ss = ld_block_sum(ss, sh);
    float inv = 1.0f / sqrtf(ss / (float)ND + norm_eps);
    for (int o = wp; o < N; o += nwp) {
        const float *wr = fn + (size_t)o * (size_t)ND;
        float acc = 0.0f;
        for (int i = lane; i < ND; i += 32) acc = fmaf(wr[i], x[i] * inv, acc);
        acc = ld_warp_sum(acc);
        if (lane == 0) pre[o] = ld_sigmoid(acc * scale + base[o]) + hc_eps;
    }
    __syncthreads();
    float *u = out + (size_t)t * (size_t)D, v = 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < N; j++) acc = fmaf(pre[j], x[(size_t)j * (size_t)D + (size_t)d], acc);
        u[d] = acc;
        v = fmaf(acc, acc, v);
    }
    if (!normed) return; /* the block's: no thread is left at the tree's barriers */
    float ninv = ld_norm_tree(v, D, eps, sh), *o = normed + (size_t)t * (size_t)D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) o[d] = ld_elem_f(w, wdt, (size_t)d) * (u[d] * ninv);
}

extern "C" int ld_cu_ds4_hc_head(int v, float *out, const float *X, int T, int N, int D, const float *fn,
                                 const float *base, float scale, float norm_eps, float hc_eps, float *work,
                                 size_t work_floats)
{
    if (T <= 0) return 0;
    if (N <= 0 || N > HH_MAXN || D <= 0) return INVAL;
    int e;
    if (v == LD_CU_REF) {
        if (work_floats < ld_cu_hc_head_work(T, N)) return INVAL;
        hh_norm_ref<<<ld_cu_blocks((size_t)T, 64), 64>>>(work, X, T, N, N * D, norm_eps);
        if ((e = ld_cu_launched())) return e;
        hh_mix_ref<<<ld_cu_blocks((size_t)T * (size_t)N, 64), 64>>>(work, X, fn, T, N, N * D);
        if ((e = ld_cu_launched())) return e;
        hh_collapse_ref<<<ld_cu_blocks((size_t)T * (size_t)D, 256), 256>>>(out, work, X, base, scale, hc_eps, T, N,
                                                                            D);
        return ld_cu_launched();
    }
    hh_custom<<<(unsigned)T, LD_CU_NORM_THREADS>>>(out, X, fn, base, scale, norm_eps, hc_eps, N, D, nullptr, 0, 0.0f,
                                                   nullptr);
    return ld_cu_launched();
}

extern "C" int ld_cu_ds4_hc_head_norm(float *out, const float *X, int T, int N, int D, const float *fn,
                                      const float *base, float scale, float norm_eps, float hc_eps, const void *w,
                                      int w_dt, float eps, float *normed)
{
    if (T <= 0) return 0;
    if (N <= 0 || N > HH_MAXN || D <= 0 || w_dt < 0 || w_dt > 2 || !normed) return INVAL;
    hh_custom<<<(unsigned)T, LD_CU_NORM_THREADS>>>(out, X, fn, base, scale, norm_eps, hc_eps, N, D, w, w_dt, eps,
                                                   normed);
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

/* ================================================================ compressor */

/* slot s (< 2r) of entry w: its row (the position, or its row of a ring
 * of `ring` rows), column and ape row; 0 when absent (as
 * ld_ref_ds4_compress's loop) */
__device__ __forceinline__ int comp_slot(int s, int r, int d, int c, int overlap, int w, int ring, size_t *row,
                                         size_t *col, size_t *j)
{
    int first = s < r, jj = first ? s : s - r;
    if (!overlap) {
        if (!first) return 0;
        *row = (size_t)w * (size_t)r + (size_t)jj;
        *col = (size_t)c;
    } else if (first) {
        if (w == 0) return 0;
        *row = (size_t)(w - 1) * (size_t)r + (size_t)jj;
        *col = (size_t)c;
    } else {
        *row = (size_t)w * (size_t)r + (size_t)jj;
        *col = (size_t)d + (size_t)c;
    }
    if (ring) *row %= (size_t)ring;
    *j = (size_t)jj;
    return 1;
}

/* ref: a thread per (entry, column), the C loop's three passes */
__global__ void comp_ref(float *out, const float *kv, const float *gate, const float *ape, int r, int d,
                         size_t stride, int overlap, int w0, int nw, int ring)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)nw * (size_t)d) return;
    int w = w0 + (int)(idx / (size_t)d), c = (int)(idx % (size_t)d);
    float mx = -INFINITY, sum = 0.0f, acc = 0.0f;
    size_t row, col, j;
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < 2 * r; s++) {
            if (!comp_slot(s, r, d, c, overlap, w, ring, &row, &col, &j)) continue;
            float z = gate[row * stride + col] + ape[j * stride + col];
            if (pass == 0) {
                if (z > mx) mx = z;
            } else {
                sum += expf(z - mx);
            }
        }
    for (int s = 0; s < 2 * r; s++) {
        if (!comp_slot(s, r, d, c, overlap, w, ring, &row, &col, &j)) continue;
        float z = gate[row * stride + col] + ape[j * stride + col];
        acc += kv[row * stride + col] * (expf(z - mx) / sum);
    }
    out[idx] = acc;
}

#define CP_COLS 32
#define CP_PARTS 8

/* custom: a block per (32 columns, entry), 8 slot parts: part y the slots
 * y, y + 8, .. of its column (max, then sum of e and sum of e * kv, fmaf),
 * the 8 parts combined in order by part 0; out = (sum e kv) / (sum e) */
__global__ void __launch_bounds__(CP_COLS *CP_PARTS) comp_custom(float *out, const float *kv, const float *gate,
                                                                 const float *ape, int r, int d, size_t stride,
                                                                 int overlap, int w0, int ring)
{
    __shared__ float sm[CP_PARTS][CP_COLS], ss[CP_PARTS][CP_COLS], sa[CP_PARTS][CP_COLS];
    int cx = threadIdx.x, py = threadIdx.y, c = blockIdx.x * CP_COLS + cx, e = blockIdx.y, w = w0 + e;
    int cv = c < d;
    size_t row, col, j;
    float mx = -INFINITY;
    if (cv)
        for (int s = py; s < 2 * r; s += CP_PARTS)
            if (comp_slot(s, r, d, c, overlap, w, ring, &row, &col, &j))
                mx = fmaxf(mx, gate[row * stride + col] + ape[j * stride + col]);
    sm[py][cx] = mx;
    __syncthreads();
    mx = sm[0][cx];
    for (int y = 1; y < CP_PARTS; y++) mx = fmaxf(mx, sm[y][cx]);
    float sum = 0.0f, acc = 0.0f;
    if (cv)
        for (int s = py; s < 2 * r; s += CP_PARTS)
            if (comp_slot(s, r, d, c, overlap, w, ring, &row, &col, &j)) {
                float ez = expf(gate[row * stride + col] + ape[j * stride + col] - mx);
                sum += ez;
                acc = fmaf(ez, kv[row * stride + col], acc);
            }
    ss[py][cx] = sum;
    sa[py][cx] = acc;
    __syncthreads();
    if (py == 0 && cv) {
        float S = 0.0f, A = 0.0f;
        for (int y = 0; y < CP_PARTS; y++) {
            S += ss[y][cx];
            A += sa[y][cx];
        }
        out[(size_t)e * (size_t)d + (size_t)c] = A / S;
    }
}

extern "C" int ld_cu_ds4_compress(int v, float *out, const float *kv, const float *gate, const float *ape, int r,
                                  int d, size_t stride, int overlap, int w0, int nw, int ring)
{
    if (nw <= 0 || d <= 0) return 0;
    if (r <= 0 || w0 < 0 || stride < (size_t)(overlap ? 2 * d : d) || nw > 65535) return INVAL;
    if (ring && (ring < 2 * r || nw > 1)) return INVAL;
    if (v == LD_CU_REF)
        comp_ref<<<ld_cu_blocks((size_t)nw * (size_t)d, 128), 128>>>(out, kv, gate, ape, r, d, stride, overlap, w0,
                                                                      nw, ring);
    else
        comp_custom<<<dim3((unsigned)((d + CP_COLS - 1) / CP_COLS), (unsigned)nw), dim3(CP_COLS, CP_PARTS)>>>(
            out, kv, gate, ape, r, d, stride, overlap, w0, ring);
    return ld_cu_launched();
}

/* a thread per float of the n rows of a and b */
__global__ void ring_put2(float *ra, float *rb, const float *a, const float *b, size_t W, int ring, int p0, int n)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nw = (size_t)n * W;
    if (idx >= 2 * nw) return;
    size_t i = idx % nw, t = i / W, row = ((size_t)p0 + t) % (size_t)ring;
    if (idx < nw)
        ra[row * W + i % W] = a[i];
    else
        rb[row * W + i % W] = b[i];
}

extern "C" int ld_cu_ring_put2(float *ra, float *rb, const float *a, const float *b, size_t W, int ring, int p0,
                               int n)
{
    if (n <= 0 || W == 0) return 0;
    if (ring <= 0 || n > ring || p0 < 0) return INVAL;
    ring_put2<<<ld_cu_blocks(2 * (size_t)n * W, 256), 256>>>(ra, rb, a, b, W, ring, p0, n);
    return ld_cu_launched();
}

/* ================================================================ LayerNorm (V3.2 indexer) */

/* ref: a thread per row, the C loop */
__global__ void ln_ref(float *x, int rows, size_t row_stride, const float *w, const float *b, int dim, float eps)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float *v = x + (size_t)r * row_stride;
    float sum = 0.0f;
    for (int i = 0; i < dim; i++) sum += v[i];
    float mean = sum / (float)dim, ss = 0.0f;
    for (int i = 0; i < dim; i++) {
        float dd = v[i] - mean;
        ss += dd * dd;
    }
    float rstd = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = 0; i < dim; i++) v[i] = (v[i] - mean) * rstd * w[i] + b[i];
}

/* custom: a block per row, the two block-reduced sums */
__global__ void ln_custom(float *x, size_t row_stride, const float *w, const float *b, int dim, float eps)
{
    __shared__ float sh[32];
    float *v = x + (size_t)blockIdx.x * row_stride;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += v[i];
    sum = ld_block_sum(sum, sh);
    float mean = sum / (float)dim, ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float dd = v[i] - mean;
        ss = fmaf(dd, dd, ss);
    }
    ss = ld_block_sum(ss, sh);
    float rstd = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) v[i] = (v[i] - mean) * rstd * w[i] + b[i];
}

extern "C" int ld_cu_ds_layernorm(int v, float *x, int rows, size_t row_stride, const float *w, const float *b,
                                  int dim, float eps)
{
    if (rows <= 0 || dim <= 0) return 0;
    if (row_stride < (size_t)dim) return INVAL;
    if (v == LD_CU_REF)
        ln_ref<<<ld_cu_blocks((size_t)rows, 64), 64>>>(x, rows, row_stride, w, b, dim, eps);
    else
        ln_custom<<<(unsigned)rows, 128>>>(x, row_stride, w, b, dim, eps);
    return ld_cu_launched();
}
