/* cpu_i24.c - see cpu_i24.h: the prep step (the activations as digits, in
 * portable C here or by cpu_i24_avx512.c / cpu_i24_avx2.c), the packing,
 * and the dispatch of the matmul to the portable twin (cpu_i24_portable.c)
 * or the packed layout's kernels (cpu_i24_avx512.c, cpu_i24_avx2.c). */
#include "cpu_i24.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_ops.h"
#include "cpu_q8.h"

#define QB LD_CPU_QB
#define ROWS LD_CPU_I24_GROUP_ROWS

int ld_cpu_i24_supports(ld_kdt dt)
{
    return ld_cpu_is_q32(dt);
}

size_t ld_cpu_i24_prep_size(int T, int K)
{
    size_t tk = (size_t)T * (size_t)K, nblk = tk / QB;
    return 3 * tk / 4 + 5 * nblk; /* the digits four a float; scale, xs, three digit sums */
}

int ld_cpu_i24_simd(void)
{
    return ld_cpu_q8_simd(); /* AVX-512 with F, BW, VL and VNNI; AVX2 with FMA and F16C */
}

/* the level a call asking for `level` runs at: at most the machine's */
static int i24_level(int level)
{
    int have = ld_cpu_i24_simd();
    return level < have ? level : have;
}

/* X's digits in base 256, each in [-128, 127] */
static void digits(int32_t X, int8_t *c0, int8_t *c1, int8_t *c2)
{
    int32_t d0 = (int32_t)(((uint32_t)X + 128u) & 255u) - 128, r = (X - d0) / 256;
    int32_t d1 = (int32_t)(((uint32_t)r + 128u) & 255u) - 128;
    *c0 = (int8_t)d0;
    *c1 = (int8_t)d1;
    *c2 = (int8_t)((r - d1) / 256);
}

/* one block of 32 (cpu_i24.h's prep): dig [3][32] */
static void prep_block(int8_t *dig, float *scale, float *xs, int32_t dsum[3], const float *x)
{
    float amax = 0.0f;
    int finite = 1;
    for (int e = 0; e < QB; e++) {
        float a = fabsf(x[e]);
        finite &= a <= 3.40282347e38f; /* NaN: false */
        amax = a > amax ? a : amax;
    }
    memset(dig, 0, 3 * QB);
    dsum[0] = dsum[1] = dsum[2] = 0;
    if (!finite || amax == 0.0f) {
        *scale = finite ? 1.0f : NAN;
        *xs = finite ? 0.0f : NAN;
        return;
    }
    int E = ld_cpu_i24_block_exp(amax);
    int32_t sum = 0;
    for (int e = 0; e < QB; e++) {
        int32_t X = (int32_t)rintf(ldexpf(x[e], -E)); /* exact scaling, ties to even */
        digits(X, dig + e, dig + QB + e, dig + 2 * QB + e);
        for (int k = 0; k < 3; k++) dsum[k] += dig[k * QB + e];
        sum += X;
    }
    *scale = ld_cpu_i24_pow2(E);
    *xs = (float)sum * *scale;
}

void ld_cpu_i24_prep_at(int level, float *prep, const float *x, int T, int K)
{
    size_t tk = (size_t)T * (size_t)K, nblk = tk / QB;
    int8_t *dig = (int8_t *)prep;
    float *scale = prep + 3 * tk / 4, *xs = scale + nblk;
    int32_t *dsum = (int32_t *)(xs + nblk);
    switch (i24_level(level)) {
    case LD_CPU_AVX512: ld_cpu_i24_prep_avx512(dig, scale, xs, dsum, x, nblk); return;
    case LD_CPU_AVX2: ld_cpu_i24_prep_avx2(dig, scale, xs, dsum, x, nblk); return;
    default: break;
    }
    for (size_t b = 0; b < nblk; b++)
        prep_block(dig + 3 * QB * b, scale + b, xs + b, dsum + 3 * b, x + QB * b);
}

void ld_cpu_i24_prep(float *prep, const float *x, int T, int K)
{
    ld_cpu_i24_prep_at(ld_cpu_i24_simd(), prep, x, T, K);
}

/* ---------------------------------------------------------------- packing */

size_t ld_cpu_i24_packed_size(ld_kdt dt, int K, int N)
{
    return (size_t)(N / ROWS) * ROWS * (size_t)(K / QB) * ld_cpu_q32_bytes(dt);
}

void ld_cpu_i24_pack(void *dst, const void *w, ld_kdt dt, int K, int N, int rope_hd)
{
    unsigned char *o = dst;
    size_t bytes = ld_cpu_q32_bytes(dt);
    for (size_t g = 0; g < (size_t)(N / ROWS); g++) {
        const unsigned char *src[ROWS];
        ld_cpu_group_rows(src, ROWS, w, dt, K, g * ROWS, rope_hd);
        for (size_t b = 0; b < (size_t)(K / QB); b++) o = ld_cpu_pack_lanes_block(o, src, ROWS, b * bytes, dt);
    }
}

/* ---------------------------------------------------------------- dispatch */

static void portable_rows(const ld_cpu_i24mm *m, size_t from, size_t to)
{
    for (size_t n = from; n < to; n++)
        for (int t = 0; t < m->T; t++) ld_cpu_i24_out_portable(m, n, t);
}

/* groups [g0, g1) of the packed copy as four streams: the range cut in
 * four equal parts, walked side by side (group j of each part together),
 * then the groups past the four parts one at a time (q8's reading:
 * cpu_q8.c says why) */
static void simd_streams(const ld_cpu_i24mm *m, int level, size_t g0, size_t g1)
{
    void (*streams)(const ld_cpu_i24mm *, const unsigned char *const[LD_CPU_I24_STREAMS],
                    const size_t[LD_CPU_I24_STREAMS]) =
        level == LD_CPU_AVX512 ? ld_cpu_i24_streams_avx512 : ld_cpu_i24_streams_avx2;
    void (*group)(const ld_cpu_i24mm *, const unsigned char *, size_t) =
        level == LD_CPU_AVX512 ? ld_cpu_i24_group_avx512 : ld_cpu_i24_group_avx2;
    const size_t S = LD_CPU_I24_STREAMS, part = (g1 - g0) / S;
    size_t gbytes = ld_cpu_i24_packed_size(m->dt, m->K, ROWS);
    for (size_t j = 0; j < part; j++) {
        const unsigned char *gp[LD_CPU_I24_STREAMS];
        size_t g[LD_CPU_I24_STREAMS];
        for (size_t s = 0; s < S; s++) {
            g[s] = g0 + s * part + j;
            gp[s] = m->packed + g[s] * gbytes;
        }
        streams(m, gp, g);
    }
    for (size_t g = g0 + S * part; g < g1; g++) group(m, m->packed + g * gbytes, g);
}

void ld_cpu_matmul_i24_at(int level, float *out, const float *prep, const void *w, const void *packed, ld_kdt dt,
                          const void *bias, ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1)
{
    size_t tk = (size_t)T * (size_t)K, nblk = tk / QB;
    const float *scale = prep + 3 * tk / 4;
    ld_cpu_i24mm m = {
        .out = out, .dig = (const int8_t *)prep, .scale = scale, .xs = scale + nblk,
        .dsum = (const int32_t *)(scale + 2 * nblk), .w = w, .packed = packed, .dt = dt, .bias = bias,
        .bias_dt = bias_dt, .T = T, .K = K, .N = N, .rope_hd = rope_hd,
        .row_bytes = (size_t)(K / QB) * ld_cpu_q32_bytes(dt),
    };
    /* the whole groups inside [i0, i1) to the SIMD kernels, the rows
     * around them to the twin */
    size_t g0 = (i0 + ROWS - 1) / ROWS, g1 = (i1 < (size_t)N ? i1 : (size_t)N) / ROWS;
    int lv = i24_level(level), simd = lv >= LD_CPU_AVX2 && packed && g0 < g1;
    size_t a = simd ? g0 * ROWS : i1, b = simd ? g1 * ROWS : i1;
    portable_rows(&m, i0, a);
    if (simd) simd_streams(&m, lv, g0, g1);
    portable_rows(&m, b, i1);
}

void ld_cpu_matmul_i24(float *out, const float *prep, const void *w, const void *packed, ld_kdt dt, const void *bias,
                       ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1)
{
    ld_cpu_matmul_i24_at(ld_cpu_i24_simd(), out, prep, w, packed, dt, bias, bias_dt, T, K, N, rope_hd, i0, i1);
}
