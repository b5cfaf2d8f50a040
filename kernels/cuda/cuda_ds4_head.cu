/* cuda_ds4_head.cu - DeepSeek-V4's head on the device: hc_head, the
 * final collapse of a token's streams (with the final RMSNorm in one
 * launch: ld_cu_ds4_hc_head_norm). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

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
