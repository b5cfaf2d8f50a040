/* cuda_mm_warp.cuh - the custom matmul's arithmetic, for the kernels that
 * compute a matmul's columns themselves (cuda_weights.cu's matmul_custom
 * and matmul_fan_custom; cuda_route.cu's router fused with the V4
 * route): a weight row's elements as ref_quant.c dequantizes them, and a
 * warp's sums over a column for up to MM_TT tokens.  Every kernel that
 * uses mm_warp_sums with the VEC matmul_vec picks for the weight gives a
 * column the bits of ld_cu_matmul's custom kernel. */
#ifndef LD_CUDA_MM_WARP_CUH
#define LD_CUDA_MM_WARP_CUH

#include <stdint.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

/* ------------------------------------------------------------ elements */

/* ld_ref_f16_to_f32, bit for bit */
__device__ __forceinline__ float f16_to_f32(uint32_t h)
{
    uint32_t s = (h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023u, u;
    if (e == 31) {
        u = s | 0x7f800000u | (m << 13);
    } else if (e) {
        u = s | ((e + 112u) << 23) | (m << 13);
    } else if (!m) {
        u = s;
    } else {
        e = 113;
        while (!(m & 1024u)) {
            m <<= 1;
            e--;
        }
        u = s | (e << 23) | ((m & 1023u) << 13);
    }
    return __uint_as_float(u);
}

__device__ __forceinline__ uint32_t le16(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
}

__device__ __forceinline__ float half_at(const uint8_t *p)
{
    return f16_to_f32(le16(p));
}

/* element k of the row whose bytes start at `row` (ld_cu_row_bytes each),
 * the type a template argument (the custom matmul's inner loop) */
template <int DT> __device__ __forceinline__ float elem_t(const uint8_t *row, int k)
{
    switch (DT) {
    case LD_KDT_F32: return ((const float *)row)[k];
    case LD_KDT_F16: return f16_to_f32(le16(row + 2 * k));
    case LD_KDT_BF16: return __uint_as_float(le16(row + 2 * k) << 16);
    case LD_KDT_Q4_0: {
        const uint8_t *b = row + (k / 32) * 18;
        int j = k % 32;
        float d = half_at(b);
        int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
        return d * (float)(q - 8);
    }
    case LD_KDT_Q4_1: {
        const uint8_t *b = row + (k / 32) * 20;
        int j = k % 32;
        float d = half_at(b), m = half_at(b + 2);
        int q = j < 16 ? (b[4 + j] & 15) : (b[4 + j - 16] >> 4);
        return d * (float)q + m;
    }
    case LD_KDT_Q8_0: {
        const uint8_t *b = row + (k / 32) * 34;
        float d = half_at(b);
        return (float)(int8_t)b[2 + k % 32] * d;
    }
    case LD_KDT_Q4_K: {
        const uint8_t *b = row + (k / 256) * 144;
        const uint8_t *s = b + 4, *qs = b + 16;
        int r = k % 256, j = r / 32, i = r % 32, sc, mn;
        if (j < 4) {
            sc = s[j] & 63;
            mn = s[j + 4] & 63;
        } else {
            sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
            mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
        float d = half_at(b), dmin = half_at(b + 2);
        float dl = d * (float)sc, ml = dmin * (float)mn;
        int q = (qs[32 * (j / 2) + i] >> ((j % 2) * 4)) & 15;
        return dl * (float)q - ml;
    }
    case LD_KDT_Q6_K: {
        const uint8_t *b = row + (k / 256) * 210;
        const uint8_t *ql = b, *qh = b + 128, *sc = b + 192;
        float d = half_at(b + 208);
        int i = k % 256, h = i / 128, r = i % 128;
        int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
        int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        float dl = d * (float)(int8_t)sc[i / 16];
        return dl * (float)((lo | (hi << 4)) - 32);
    }
    }
    return 0.0f;
}

#define MM_WARPS 8 /* output columns per block, one warp each */
#define MM_TT 8    /* tokens per warp */

/* the elements of a 16-byte chunk of a plain-type row (vec_per<DT>::n of
 * them), the same values elem_t gives */
template <int DT> struct vec_per { enum { n = DT == LD_KDT_F32 ? 4 : 8 }; };

template <int DT> __device__ __forceinline__ void chunk_elems(float *w, uint4 u)
{
    uint32_t wd[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (DT == LD_KDT_F32) {
            w[i] = __uint_as_float(wd[i]);
        } else if (DT == LD_KDT_BF16) {
            w[2 * i] = __uint_as_float(wd[i] << 16);
            w[2 * i + 1] = __uint_as_float(wd[i] & 0xffff0000u);
        } else {
            w[2 * i] = f16_to_f32(wd[i] & 0xffffu);
            w[2 * i + 1] = f16_to_f32(wd[i] >> 16);
        }
    }
}

/* A warp per output column n and up to MM_TT tokens.  Lane l dequantizes
 * its share of the row once and accumulates x[t][k] * w[k] with fmaf, in
 * index order within its share, for each of its tokens:
 *  VEC = 0: k = l, l + 32, ... (any type);
 *  VEC = 1 (F32, F16, BF16 rows of a whole number of 16-byte chunks, 16-byte
 *    aligned): the chunks c = l, l + 32, ..., one 16-byte load each (4 or
 *    8 elements), which is what lets a GEMV stream the weights near the
 *    copy bandwidth (two byte loads per bf16 element do not).
 * The 32 partials are then summed by the fixed tree of __shfl_down_sync
 * (16, 8, 4, 2, 1).  The partition is a function of the type, K and the
 * row's alignment only, so a token's sums do not depend on which tile or
 * how many tokens run with it: T = 1 (a GEMV) and T > 1 (a GEMM reading
 * each weight once per MM_TT tokens) give the same bits. */
template <int DT, int VEC>
__device__ __forceinline__ void mm_warp_sums(float *acc, const uint8_t *wr, const float *x0, int K, int nt, int lane)
{
#pragma unroll
    for (int tt = 0; tt < MM_TT; tt++) acc[tt] = 0.0f;
    if (VEC) {
        const int per = vec_per<DT>::n;
        int chunks = K / per;
        for (int c = lane; c < chunks; c += 32) {
            float wv[8];
            chunk_elems<DT>(wv, __ldg((const uint4 *)wr + c));
            int k0 = c * per;
#pragma unroll
            for (int tt = 0; tt < MM_TT; tt++) {
                if (tt < nt) {
                    const float *xk = x0 + (size_t)tt * (size_t)K + k0;
#pragma unroll
                    for (int e = 0; e < per; e++) acc[tt] = fmaf(__ldg(xk + e), wv[e], acc[tt]);
                }
            }
        }
    } else {
        for (int k = lane; k < K; k += 32) {
            float wv = elem_t<DT>(wr, k);
#pragma unroll
            for (int tt = 0; tt < MM_TT; tt++)
                if (tt < nt) acc[tt] = fmaf(__ldg(x0 + (size_t)tt * (size_t)K + k), wv, acc[tt]);
        }
    }
#pragma unroll
    for (int tt = 0; tt < MM_TT; tt++)
        for (int off = 16; off > 0; off >>= 1) acc[tt] += __shfl_down_sync(LD_CU_FULL, acc[tt], off);
}

/* the chunked (VEC) kernel applies: a plain type, whole 16-byte chunks per
 * row, an aligned base (the backend's allocations are; a view of rows
 * keeps it when the row bytes are a multiple of 16) */
static inline int matmul_vec(ld_kdt dt, size_t rb, const void *w)
{
    int plain = dt == LD_KDT_F32 || dt == LD_KDT_F16 || dt == LD_KDT_BF16;
    return plain && rb % 16 == 0 && ((uintptr_t)w & 15) == 0;
}

#endif /* LD_CUDA_MM_WARP_CUH */
