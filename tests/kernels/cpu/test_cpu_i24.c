/* test_cpu_i24.c - the i24 matmul variant (kernels/cpu/cpu_i24.h):
 *  - the prep's scale is 2^E for the least E with amax 2^-E <= 8355711, its
 *    digits those of x 2^-E rounded to nearest even (computed here in
 *    double, exact), their sums, xs, a zero block, a NaN and an infinity;
 *    the same bits at every level;
 *  - the packed layout is cpu_i24.h's, byte by byte;
 *  - every level the machine has (portable C on the rows, AVX2 and AVX-512
 *    VNNI on their packed copy) gives the same bits, at row counts around the
 *    groups of sixteen and the four streams, with bias, the rope row order,
 *    any split of the outputs and a token alone as in a batch;
 *  - the result is within the digits' bound of the reference (each x_e off
 *    by at most 2^E / 2, plus fp32 rounding), and over many rows its error
 *    against exact arithmetic (long double) is no larger than the
 *    reference's own fp32 error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_i24.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ref/ref_ops.h"
#include "tests/support/fixtures.h"
#include "tests/support/q32_weights.h"
#include "tests/support/ld_test.h"

enum { QB = 32, ROWS = LD_CPU_I24_GROUP_ROWS };

/* the least E with amax 2^-E <= 8355711, by a walk in double (exact) */
static int least_exp(double amax)
{
    int E = -200;
    while (ldexp(amax, -E) > 8355711.0) E++;
    return E;
}

/* ---------------------------------------------------------------- prep */

static int check_prep_block(const float *x, const int8_t *dig, float scale, float xs, const int32_t *dsum, int b)
{
    double amax = 0;
    int finite = 1;
    for (int e = 0; e < QB; e++) {
        finite &= isfinite(x[e]) != 0;
        if (isfinite(x[e])) amax = fmax(amax, fabs((double)x[e]));
    }
    if (!finite) {
        CHECK_MSG(isnan(scale) && isnan(xs), "block %d (not finite): scale %g xs %g", b, scale, xs);
        for (int e = 0; e < 3 * QB; e++) CHECK(dig[e] == 0);
        return 0;
    }
    int E = amax > 0 ? least_exp(amax) : 0;
    CHECK_MSG(scale == (float)ldexp(1.0, E), "block %d: scale %g, want 2^%d", b, scale, E);
    int64_t sum = 0, ds[3] = {0, 0, 0};
    for (int e = 0; e < QB; e++) {
        double X = amax > 0 ? nearbyint(ldexp((double)x[e], -E)) : 0; /* ties to even: the default mode */
        int64_t got = 65536 * (int64_t)dig[2 * QB + e] + 256 * (int64_t)dig[QB + e] + dig[e];
        CHECK_MSG((double)got == X, "block %d element %d (x %.9g, E %d): digits give %lld, want %.0f", b, e, x[e], E,
                  (long long)got, X);
        sum += got;
        for (int k = 0; k < 3; k++) ds[k] += dig[k * QB + e];
    }
    for (int k = 0; k < 3; k++) CHECK_MSG(dsum[k] == ds[k], "block %d: digit sum %d is %d, want %lld", b, k, dsum[k], (long long)ds[k]);
    CHECK_MSG(xs == (float)sum * scale, "block %d: xs %.9g, want %.9g", b, xs, (float)sum * scale);
    return 0;
}

static int test_i24_prep(void)
{
    enum { T = 1, NBLK = 10, K = NBLK * QB };
    static float x[K];
    float prep[3 * K / 4 + 5 * NBLK];
    CHECK(ld_cpu_i24_prep_size(T, K) == sizeof prep / sizeof prep[0]);
    for (int e = 0; e < QB; e++) x[e] = e == 0 ? 4194304.0f : (float)(e - 16) + 0.5f; /* E = 0: ties */
    for (int e = QB; e < 2 * QB; e++) x[e] = 0.0f;
    for (int e = 2 * QB; e < 3 * QB; e++) x[e] = q32_uniform();
    x[2 * QB + 5] = NAN;
    for (int e = 3 * QB; e < 4 * QB; e++) x[e] = q32_uniform() * 1e-3f;
    x[3 * QB + 7] = INFINITY;
    for (int e = 4 * QB; e < 5 * QB; e++) x[e] = q32_uniform() * 3e4f;
    x[4 * QB + 3] = 0.99999994f * 65536.0f; /* amax 2^-E past 8355711: E one more */
    for (int e = 5 * QB; e < 6 * QB; e++) x[e] = q32_uniform() * 1e-40f; /* subnormal */
    for (int e = 6 * QB; e < 7 * QB; e++) x[e] = q32_uniform() * 1e30f;
    for (int e = 7 * QB; e < 8 * QB; e++) x[e] = q32_uniform() * (e % 3 ? 1e-6f : 50.0f);
    for (int e = 8 * QB; e < 10 * QB; e++) x[e] = q32_uniform();
    x[8 * QB + 9] = -8355711.0f / 1024; /* amax 2^-E on the three digits' most: E stays */
    x[9 * QB + 30] = 8355711.5f / 1024; /* just past it: E one more */
    ld_cpu_i24_prep(prep, x, T, K);
    const int8_t *dig = (const int8_t *)prep;
    const float *scale = prep + 3 * K / 4, *xs = scale + NBLK;
    const int32_t *dsum = (const int32_t *)(xs + NBLK);
    for (int b = 0; b < NBLK; b++)
        CHECK(check_prep_block(x + b * QB, dig + 3 * QB * b, scale[b], xs[b], dsum + 3 * b, b) == 0);
    CHECK(dig[1] == -14 && dig[16] == 0 && dig[15] == 0 && dig[17] == 2); /* -14.5, 0.5, -0.5, 1.5: to even */
    /* the exponents by hand: amax 2^22 (frexp's e 23): E 0; 65535.996 (e 16)
     * times 2^7 is 8388607.5, past three digits: E -6, not -7; 8355711 / 1024
     * times 2^10 is the digits' most: E -10; half a unit more: E -9 */
    CHECK(scale[0] == 1.0f && scale[4] == 0x1p-6f && scale[8] == 0x1p-10f && scale[9] == 0x1p-9f);
    float port[sizeof prep / sizeof prep[0]];
    for (int level = LD_CPU_PORTABLE; level <= LD_CPU_AVX512; level++) {
        memset(port, 0, sizeof port);
        ld_cpu_i24_prep_at(level, port, x, T, K);
        CHECK_MSG(memcmp(port, prep, sizeof port) == 0, "the prep at level %d differs", level);
    }
    return 0;
}

/* ---------------------------------------------------------------- packing */

/* head byte i of row r at i / 2 * 32 + 2 r + i % 2, nibble byte j at
 * head * 16 + j / 4 * 64 + 4 r + j % 4 */
static int test_i24_pack_layout(void)
{
    static const ld_kdt types[] = {LD_KDT_Q4_0, LD_KDT_Q4_1, LD_KDT_Q8_0};
    enum { K = 96, N = 37, HD = 8, NB = K / QB };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        ld_kdt dt = types[i];
        size_t bytes = q32_block_bytes(dt), head = dt == LD_KDT_Q8_0 ? 2 : bytes - 16;
        size_t n = ld_cpu_i24_packed_size(dt, K, N);
        unsigned char *w = q32_rand_weights(dt, N, K), *want = malloc(n), *got = malloc(n);
        CHECK(w && want && got && n == 32 * NB * bytes);
        for (size_t g = 0; g < N / ROWS; g++)
            for (size_t b = 0; b < NB; b++)
                for (int r = 0; r < ROWS; r++) {
                    const unsigned char *blk = w + (q32_src_row((int)(ROWS * g) + r, HD) * NB + b) * bytes;
                    unsigned char *o = want + (g * NB + b) * ROWS * bytes;
                    for (size_t k = 0; k < head; k++) o[k / 2 * 32 + 2 * (size_t)r + k % 2] = blk[k];
                    for (size_t j = 0; j < bytes - head; j++)
                        o[ROWS * head + j / 4 * 64 + 4 * (size_t)r + j % 4] = blk[head + j];
                }
        memset(got, 0xA5, n);
        ld_cpu_i24_pack(got, w, dt, K, N, HD);
        CHECK_MSG(memcmp(got, want, n) == 0, "dt %d: the packing differs from the layout", (int)dt);
        free(w);
        free(want);
        free(got);
    }
    return 0;
}

/* ---------------------------------------------------------------- matmul */

static int run_i24(int level, float *out, const float *x, const unsigned char *w, const void *packed, ld_kdt dt,
                   const float *bias, int T, int K, int N, int rope_hd, size_t split)
{
    float *prep = malloc(ld_cpu_i24_prep_size(T, K) * sizeof *prep);
    if (!prep) return 1;
    ld_cpu_i24_prep_at(level, prep, x, T, K);
    ld_cpu_matmul_i24_at(level, out, prep, w, packed, dt, bias, LD_KDT_F32, T, K, N, rope_hd, 0, split);
    ld_cpu_matmul_i24_at(level, out, prep, w, packed, dt, bias, LD_KDT_F32, T, K, N, rope_hd, split, (size_t)N);
    free(prep);
    return 0;
}

/* the bound on |i24 - ref| of output o (see the top): the digits' rounding,
 * and fp32's on both sides */
static double i24_bound(const float *deq, const float *x, int K, int o, int rope_hd)
{
    const float *wr = deq + q32_src_row(o, rope_hd) * (size_t)K;
    double quant = 0, mag = 0;
    for (int b = 0; b < K / QB; b++) {
        double amax = 0, wsum = 0;
        for (int e = b * QB; e < (b + 1) * QB; e++) {
            amax = fmax(amax, fabs((double)x[e]));
            wsum += fabs((double)wr[e]);
        }
        quant += amax > 0 ? wsum * ldexp(1.0, least_exp(amax)) * 0.5 : 0;
        for (int e = b * QB; e < (b + 1) * QB; e++) mag += fabs((double)wr[e]) * fabs((double)x[e]);
    }
    return quant + 2 * (K + 16) * ldexp(1.0, -23) * mag + 1e-30;
}

typedef struct errsum {
    double i24, ref; /* sums of squared errors against exact arithmetic */
} errsum;

static int check_case(ld_kdt dt, int T, int K, int N, int rope_hd, int with_bias, errsum *es)
{
    size_t n = (size_t)T * (size_t)N;
    unsigned char *w = q32_rand_weights(dt, N, K);
    float *x = malloc((size_t)T * (size_t)K * sizeof *x), *bias = malloc((size_t)N * sizeof *bias);
    float *deq = malloc((size_t)N * (size_t)K * sizeof *deq), *row = malloc((size_t)K * sizeof *row);
    float *ref = malloc(n * sizeof *ref), *best = malloc(n * sizeof *best), *lv = malloc(n * sizeof *lv);
    size_t np = ld_cpu_i24_packed_size(dt, K, N);
    unsigned char *packed = malloc(np + 1);
    CHECK(w && x && bias && deq && row && ref && best && lv && packed);
    ld_cpu_i24_pack(packed, w, dt, K, N, rope_hd);
    for (size_t i = 0; i < (size_t)T * (size_t)K; i++) x[i] = q32_uniform() * (i % 7 ? 1.0f : 8.0f);
    for (int i = 0; i < N; i++) bias[i] = q32_uniform();
    const float *b = with_bias ? bias : NULL;
    ld_ref_to_f32(deq, w, dt, 0, (size_t)N * (size_t)K);
    ld_ref_matmul_ex(ref, x, w, dt, b, LD_KDT_F32, T, K, N, rope_hd, row, 0, (size_t)N);
    CHECK(run_i24(LD_CPU_PORTABLE, best, x, w, NULL, dt, b, T, K, N, rope_hd, (size_t)N) == 0);
    for (int level = LD_CPU_PORTABLE; level <= LD_CPU_AVX512; level++)
        for (int with_packed = 0; with_packed <= 1; with_packed++)
            for (size_t split = 0; split <= (size_t)N; split += (size_t)N / 2 + 3) {
                memset(lv, 0, n * sizeof *lv);
                CHECK(run_i24(level, lv, x, w, with_packed ? packed : NULL, dt, b, T, K, N, rope_hd, split) == 0);
                CHECK_MSG(memcmp(lv, best, n * sizeof *lv) == 0,
                          "dt %d T=%d K=%d N=%d: level %d split %zu%s differs", (int)dt, T, K, N, level, split,
                          with_packed ? "" : " (no packed copy)");
            }
    double worst = 0;
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * (size_t)K;
        CHECK(run_i24(ld_cpu_i24_simd(), lv, xt, w, packed, dt, b, 1, K, N, rope_hd, (size_t)N) == 0);
        CHECK_MSG(memcmp(lv, best + (size_t)t * (size_t)N, (size_t)N * sizeof *lv) == 0,
                  "dt %d T=%d K=%d: token %d alone differs from the batch", (int)dt, T, K, t);
        for (int o = 0; o < N; o++) {
            size_t i = (size_t)t * (size_t)N + (size_t)o;
            const float *wr = deq + q32_src_row(o, rope_hd) * (size_t)K;
            long double exact = b ? (long double)b[o] : 0;
            for (int e = 0; e < K; e++) exact += (long double)wr[e] * (long double)xt[e];
            es->i24 += (double)((best[i] - exact) * (best[i] - exact));
            es->ref += (double)((ref[i] - exact) * (ref[i] - exact));
            double d = fabs((double)best[i] - ref[i]), bound = i24_bound(deq, xt, K, o, rope_hd);
            CHECK_MSG(d <= bound, "dt %d T=%d K=%d: output [%d][%d]: i24 %.9g ref %.9g, |d| %.3g > bound %.3g",
                      (int)dt, T, K, t, o, best[i], ref[i], d, bound);
            if (d / bound > worst) worst = d / bound;
        }
    }
    fprintf(stderr, "  dt %d T=%d K=%4d N=%3d%s%s: worst |i24 - ref| = %.2f of the bound\n", (int)dt, T, K, N,
            rope_hd ? " rope" : "", with_bias ? " bias" : "", worst);
    free(w);
    free(x);
    free(bias);
    free(deq);
    free(row);
    free(ref);
    free(best);
    free(lv);
    free(packed);
    return 0;
}

static int test_i24_matmul_levels_and_bound(void)
{
    static const char *const level_name[] = {"portable C only", "portable C and AVX2", "portable C, AVX2, AVX-512 VNNI"};
    fprintf(stderr, "  (levels compared: %s on this machine)\n", level_name[ld_cpu_i24_simd()]);
    static const ld_kdt types[] = {LD_KDT_Q4_0, LD_KDT_Q4_1, LD_KDT_Q8_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        ld_kdt dt = types[i];
        errsum es = {0, 0};
        CHECK(check_case(dt, 1, 32, 1, 0, 0, &es) == 0);    /* one block, one row: no group */
        CHECK(check_case(dt, 1, 96, 16, 0, 1, &es) == 0);   /* one group */
        CHECK(check_case(dt, 1, 576, 43, 0, 0, &es) == 0);  /* groups and a tail of eleven */
        CHECK(check_case(dt, 1, 64, 32, 16, 1, &es) == 0);  /* the rope row order */
        CHECK(check_case(dt, 5, 96, 17, 0, 1, &es) == 0);   /* a batch */
        CHECK(check_case(dt, 2, 1536, 19, 0, 0, &es) == 0);
        CHECK(check_case(dt, 3, 160, 80, 8, 1, &es) == 0);  /* five groups, rope, batch */
        /* eleven groups and a tail: two groups from each of four streams,
         * then three alone; the splits cut the streams short */
        CHECK(check_case(dt, 1, 64, 181, 0, 1, &es) == 0);
        CHECK(check_case(dt, 2, 576, 400, 0, 0, &es) == 0); /* many rows: the error statistics */
        fprintf(stderr, "  dt %d: rms error against exact arithmetic: i24 %.3g, the reference's fp32 %.3g\n", (int)dt,
                sqrt(es.i24), sqrt(es.ref));
        CHECK_MSG(es.i24 <= es.ref, "dt %d: i24's error (%.3g) is larger than fp32's (%.3g)", (int)dt, sqrt(es.i24),
                  sqrt(es.ref));
    }
    CHECK(ld_cpu_i24_supports(LD_KDT_Q4_1) && ld_cpu_i24_supports(LD_KDT_Q4_0) && ld_cpu_i24_supports(LD_KDT_Q8_0));
    CHECK(!ld_cpu_i24_supports(LD_KDT_Q4_K) && !ld_cpu_i24_supports(LD_KDT_F32));
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_i24_prep),
    LD_CASE(test_i24_pack_layout),
    LD_CASE(test_i24_matmul_levels_and_bound),
};

LD_TEST_MAIN(cases)
