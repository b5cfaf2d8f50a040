/* cuda_hc.cu - DeepSeek-V4's manifold-constrained hyper-connections
 * (mHC) on the device: the streams' norm and mixing, Sinkhorn's iterations
 * and the collapse before a block (ld_cu_hc_pre, fused with the RMSNorm in
 * ld_cu_hc_pre_norm), the expansion after it (ld_cu_hc_post). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

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
