/* cpu_q8.c - see cpu_q8.h: the prep step (the activations quantized, by
 * the portable code here, cpu_q8_avx2.c or cpu_q8_avx512.c), the dispatch
 * of the packing (cpu_q8_pack.c or cpu_q8_avx2.c) and of the matmul to the
 * portable twin (cpu_q8_portable.c) or the packed layout's AVX2 kernel
 * (cpu_q8_avx2.c). */
#include "cpu_q8.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu_internal.h"
#include "cpu_ops.h"

#define QB LD_CPU_QB

int ld_cpu_q8_supports(ld_kdt dt)
{
    return ld_cpu_is_q32(dt);
}

size_t ld_cpu_q8_prep_size(int T, int K)
{
    size_t tk = (size_t)T * (size_t)K;
    return tk / 4 + 3 * (tk / QB); /* the int8s four a float, dx, xs, qsum */
}

/* one block of 32: its int8s, scale and sum (cpu_q8.h).  roundf is a
 * libm call without SSE4.1, so |y| <= 127 is rounded here, to roundf's
 * value: its integer part r by conversion, up one where |y| - r (exact) is
 * at least 1/2 (not trunc(|y| + 1/2): that sum rounds, 0.49999997 + 0.5
 * is 1 in fp32) */
static void quantize_block(int8_t *q, float *dx, float *xs, const float *x)
{
    float amax = 0.0f, lane[8];
    for (int e = 0; e < QB; e++) {
        float a = fabsf(x[e]);
        amax = a > amax ? a : amax; /* a NaN is passed over, as fmaxf does */
    }
    float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int e = 0; e < QB; e++) {
        float y = x[e] * id, a = fabsf(y);
        /* |y| <= 127 but for rounding (x * 127 / amax of the largest x can
         * be above 127 by an ulp); NaN (an infinite or NaN x): 0 */
        int ok = a < 127.5f, r = ok ? (int)a : 0;
        r += ok && a - (float)r >= 0.5f;
        q[e] = (int8_t)(y < 0.0f ? -r : r);
    }
    *dx = amax / 127.0f;
    for (int l = 0; l < 8; l++) lane[l] = ((x[l] + x[8 + l]) + x[16 + l]) + x[24 + l];
    *xs = ld_cpu_q8_hsum8(lane);
}

/* the level the prep and the matmul run at when asked for `level`: at
 * most what the machine has (ld_cpu_q8_simd) */
static int q8_level(int level)
{
    int have = ld_cpu_q8_simd();
    return level < have ? level : have;
}

/* the blocks' sums of their int8s: the same integers at every level, so
 * one plain loop (the compiler vectorizes it) */
static void block_qsums(int32_t *qsum, const int8_t *q, size_t nblk)
{
    for (size_t b = 0; b < nblk; b++) {
        int32_t s = 0;
        for (int e = 0; e < QB; e++) s += q[b * QB + (size_t)e];
        qsum[b] = s;
    }
}

void ld_cpu_q8_prep_at(int level, float *prep, const float *x, int T, int K)
{
    size_t nblk = (size_t)T * (size_t)(K / QB);
    int8_t *q = (int8_t *)prep;
    float *dx = prep + (size_t)T * (size_t)K / 4, *xs = dx + nblk;
    switch (q8_level(level)) {
    case LD_CPU_AVX512: ld_cpu_q8_quantize_avx512(q, dx, xs, x, nblk); break;
    case LD_CPU_AVX2: ld_cpu_q8_quantize_avx2(q, dx, xs, x, nblk); break;
    default:
        for (size_t b = 0; b < nblk; b++) quantize_block(q + b * QB, dx + b, xs + b, x + b * QB);
    }
    block_qsums((int32_t *)(xs + nblk), q, nblk);
}

void ld_cpu_q8_prep(float *prep, const float *x, int T, int K)
{
    ld_cpu_q8_prep_at(ld_cpu_q8_simd(), prep, x, T, K);
}

/* ---------------------------------------------------------------- dispatch */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

/* AVX-512 BW and VNNI besides what ld_cpu_simd's AVX-512 level has */
static int has_vnni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 30) & 1 && (c >> 11) & 1;
}
#else
static int has_vnni(void)
{
    return 0;
}
#endif

int ld_cpu_q8_simd(void)
{
    static atomic_int state = -1; /* -1 unknown; racing first calls agree */
    int s = atomic_load_explicit(&state, memory_order_relaxed);
    if (s < 0) {
        s = ld_cpu_simd() == LD_CPU_AVX512 && has_vnni() ? LD_CPU_AVX512
            : ld_cpu_simd() >= LD_CPU_AVX2                ? LD_CPU_AVX2
                                                          : LD_CPU_PORTABLE;
        atomic_store_explicit(&state, s, memory_order_relaxed);
    }
    return s;
}

static void portable_rows(const ld_cpu_q8mm *m, size_t from, size_t to)
{
    for (size_t n = from; n < to; n++)
        for (int t = 0; t < m->T; t++) ld_cpu_q8_out_portable(m, n, t);
}

/* group g of the rows at w, packed to dst at `level` (capped at what the
 * machine has) */
static void pack_group_at(int level, unsigned char *dst, const void *w, ld_kdt dt, int K, size_t g, int rope_hd)
{
    const unsigned char *src[LD_CPU_Q8_GROUP_ROWS];
    ld_cpu_group_rows(src, LD_CPU_Q8_GROUP_ROWS, w, dt, K, g * LD_CPU_Q8_GROUP_ROWS, rope_hd);
    if (q8_level(level) >= LD_CPU_AVX2) ld_cpu_q8_pack_blocks_avx2(dst, src, dt, (size_t)(K / QB));
    else ld_cpu_q8_pack_blocks_portable(dst, src, dt, (size_t)(K / QB));
}

void ld_cpu_q8_pack_at(int level, void *dst, const void *w, ld_kdt dt, int K, int N, int rope_hd)
{
    size_t group = ld_cpu_q8_packed_size(dt, K, LD_CPU_Q8_GROUP_ROWS);
    for (size_t g = 0; g < (size_t)(N / LD_CPU_Q8_GROUP_ROWS); g++)
        pack_group_at(level, (unsigned char *)dst + g * group, w, dt, K, g, rope_hd);
}

void ld_cpu_q8_pack(void *dst, const void *w, ld_kdt dt, int K, int N, int rope_hd)
{
    ld_cpu_q8_pack_at(ld_cpu_q8_simd(), dst, w, dt, K, N, rope_hd);
}

/* groups [g0, g1) of the packed copy with AVX2 as four streams: the
 * range cut in four equal parts, walked side by side (group j of each part
 * together), then the groups past the four parts one at a time.  One core
 * reads memory faster in several streams far apart than in one: on a
 * 2-core Xeon, the q8 matvec of 96 MB went from 19-23 to 27-28 GB/s and a
 * 1-thread decode from 150 to 210 tok/s (bench_matmul, bench_engine);
 * groups side by side in the same stretch of memory were slower than one
 * stream (each group's prefetch lands in the next one's bytes). */
static void avx2_streams(const ld_cpu_q8mm *m, size_t gbytes, size_t g0, size_t g1)
{
    const size_t S = LD_CPU_Q8_STREAMS, part = (g1 - g0) / S;
    for (size_t j = 0; j < part; j++) {
        const unsigned char *gp[LD_CPU_Q8_STREAMS];
        size_t g[LD_CPU_Q8_STREAMS];
        for (size_t s = 0; s < S; s++) {
            g[s] = g0 + s * part + j;
            gp[s] = m->packed + g[s] * gbytes;
        }
        ld_cpu_q8_streams_avx2(m, gp, g);
    }
    for (size_t g = g0 + S * part; g < g1; g++) ld_cpu_q8_group_avx2(m, m->packed + g * gbytes, g);
}

/* groups [g0, g1) with AVX2: from the packed copy, or without one (a
 * weight the backend had no room to pack) packed here a group at a time.
 * 0: no memory for that group, nothing computed. */
static int avx2_groups(const ld_cpu_q8mm *m, size_t g0, size_t g1)
{
    size_t gbytes = ld_cpu_q8_packed_size(m->dt, m->K, LD_CPU_Q8_GROUP_ROWS);
    if (m->packed) {
        avx2_streams(m, gbytes, g0, g1);
        return 1;
    }
    unsigned char *buf = malloc(gbytes);
    if (!buf) return 0;
    for (size_t g = g0; g < g1; g++) {
        pack_group_at(LD_CPU_AVX2, buf, m->w, m->dt, m->K, g, m->rope_hd);
        ld_cpu_q8_group_avx2(m, buf, g);
    }
    free(buf);
    return 1;
}

void ld_cpu_matmul_q8_at(int level, float *out, const float *prep, const void *w, const void *packed, ld_kdt dt,
                         const void *bias, ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1)
{
    size_t tk = (size_t)T * (size_t)K, nblk = tk / QB;
    ld_cpu_q8mm m = {
        .out = out, .xq = (const int8_t *)prep, .xd = prep + tk / 4, .xs = prep + tk / 4 + nblk,
        .qsum = (const int32_t *)(prep + tk / 4 + 2 * nblk), .w = w, .packed = packed, .dt = dt, .bias = bias,
        .bias_dt = bias_dt, .T = T, .K = K, .N = N, .rope_hd = rope_hd,
        .row_bytes = (size_t)(K / QB) * ld_cpu_q32_bytes(dt),
    };
    /* the whole groups inside [i0, i1) to the AVX2 kernel, the rows around
     * them to the twin */
    const size_t R = LD_CPU_Q8_GROUP_ROWS;
    size_t g0 = (i0 + R - 1) / R, g1 = (i1 < (size_t)N ? i1 : (size_t)N) / R;
    int simd = q8_level(level) >= LD_CPU_AVX2 && g0 < g1;
    size_t a = simd ? g0 * R : i1, b = simd ? g1 * R : i1;
    portable_rows(&m, i0, a);
    if (simd && !avx2_groups(&m, g0, g1)) portable_rows(&m, a, b);
    portable_rows(&m, b, i1);
}

void ld_cpu_matmul_q8(float *out, const float *prep, const void *w, const void *packed, ld_kdt dt, const void *bias,
                      ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1)
{
    ld_cpu_matmul_q8_at(ld_cpu_q8_simd(), out, prep, w, packed, dt, bias, bias_dt, T, K, N, rope_hd, i0, i1);
}
