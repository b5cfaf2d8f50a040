/* test_cpu_q8.c - the q8 matmul variant (kernels/cpu/cpu_q8.h):
 *  - the prep step's int8s are libm's roundf(x * (127 / amax)), its scales
 *    amax / 127 (ties, zero blocks, NaN and the largest element included),
 *    the same bits at every level;
 *  - the matmul is within the quantization's bound of the reference
 *    (ld_ref_matmul_ex): each x_e is off by at most dx / 2, so a result by
 *    sum |w_e| dx / 2 over its blocks, plus fp32 rounding;
 *  - the packed layout is cpu_q8.h's, byte by byte, at every level;
 *  - every level the machine has (portable C on the rows, AVX2 on their
 *    packed copy) gives the same bits, and so does a matmul without the
 *    packed copy (AVX2 packs each group as it runs), at row counts around
 *    the packed groups of eight, with bias, the rope row order, any split
 *    of the outputs (one inside a group included), and a token alone as in
 *    a batch. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_q8.h"
#include "kernels/ref/ref_ops.h"
#include "tests/support/fixtures.h"
#include "tests/support/q32_weights.h"
#include "tests/support/ld_test.h"

enum { QB = 32 };

/* out [T][N] at `level`, the outputs in two calls split at `split`, from
 * the packed copy (packed: w's, or NULL) */
static int run_q8(int level, float *out, const float *x, const unsigned char *w, const void *packed, ld_kdt dt,
                  const float *bias, int T, int K, int N, int rope_hd, size_t split)
{
    float *prep = malloc(ld_cpu_q8_prep_size(T, K) * sizeof *prep);
    if (!prep) return 1;
    ld_cpu_q8_prep(prep, x, T, K);
    ld_cpu_matmul_q8_at(level, out, prep, w, packed, dt, bias, LD_KDT_F32, T, K, N, rope_hd, 0, split);
    ld_cpu_matmul_q8_at(level, out, prep, w, packed, dt, bias, LD_KDT_F32, T, K, N, rope_hd, split, (size_t)N);
    free(prep);
    return 0;
}

/* the bound on |q8 - ref| of output o of token t (see the top) */
static double q8_bound(const float *deq, const float *x, int K, int o, int rope_hd)
{
    const float *wr = deq + q32_src_row(o, rope_hd) * (size_t)K;
    double quant = 0, mag = 0;
    for (int b = 0; b < K / QB; b++) {
        double amax = 0, wsum = 0;
        for (int e = b * QB; e < (b + 1) * QB; e++) {
            amax = fmax(amax, fabs((double)x[e]));
            wsum += fabs((double)wr[e]);
        }
        double dx = amax / 127;
        quant += wsum * dx * 0.5 * (1 + 1e-5); /* the scale's own rounding: far below 1e-5 of it */
        for (int e = b * QB; e < (b + 1) * QB; e++) mag += fabs((double)wr[e]) * (fabs((double)x[e]) + dx);
    }
    return quant + 2 * (K + 16) * ldexp(1.0, -23) * mag + 1e-30;
}

static int check_case(ld_kdt dt, int T, int K, int N, int rope_hd, int with_bias)
{
    size_t n = (size_t)T * (size_t)N;
    unsigned char *w = q32_rand_weights(dt, N, K);
    float *x = malloc((size_t)T * (size_t)K * sizeof *x), *bias = malloc((size_t)N * sizeof *bias);
    float *deq = malloc((size_t)N * (size_t)K * sizeof *deq), *row = malloc((size_t)K * sizeof *row);
    float *ref = malloc(n * sizeof *ref), *best = malloc(n * sizeof *best), *lv = malloc(n * sizeof *lv);
    size_t np = ld_cpu_q8_packed_size(dt, K, N);
    unsigned char *packed = malloc(np + 1);
    CHECK(w && x && bias && deq && row && ref && best && lv && packed);
    CHECK(np == (size_t)(N / 8) * 8 * (size_t)(K / QB) * q32_block_bytes(dt));
    ld_cpu_q8_pack(packed, w, dt, K, N, rope_hd);
    for (size_t i = 0; i < (size_t)T * (size_t)K; i++) x[i] = q32_uniform() * (i % 7 ? 1.0f : 8.0f);
    for (int i = 0; i < N; i++) bias[i] = q32_uniform();
    const float *b = with_bias ? bias : NULL;
    ld_ref_to_f32(deq, w, dt, 0, (size_t)N * (size_t)K);
    ld_ref_matmul_ex(ref, x, w, dt, b, LD_KDT_F32, T, K, N, rope_hd, row, 0, (size_t)N);
    CHECK(run_q8(ld_cpu_q8_simd(), best, x, w, packed, dt, b, T, K, N, rope_hd, (size_t)N) == 0);
    for (int level = LD_CPU_PORTABLE; level <= LD_CPU_AVX512; level++)
        for (int with_packed = 0; with_packed <= 1; with_packed++)
            for (size_t split = 0; split <= (size_t)N; split += (size_t)N / 2 + 3) {
                memset(lv, 0, n * sizeof *lv);
                CHECK(run_q8(level, lv, x, w, with_packed ? packed : NULL, dt, b, T, K, N, rope_hd, split) == 0);
                CHECK_MSG(memcmp(lv, best, n * sizeof *lv) == 0,
                          "dt %d T=%d K=%d N=%d: level %d split %zu%s differs", (int)dt, T, K, N, level, split,
                          with_packed ? "" : " (no packed copy)");
            }
    double worst = 0;
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * (size_t)K;
        CHECK(run_q8(ld_cpu_q8_simd(), lv, xt, w, packed, dt, b, 1, K, N, rope_hd, (size_t)N) == 0);
        CHECK_MSG(memcmp(lv, best + (size_t)t * (size_t)N, (size_t)N * sizeof *lv) == 0,
                  "dt %d T=%d K=%d: token %d alone differs from the batch", (int)dt, T, K, t);
        for (int o = 0; o < N; o++) {
            double d = fabs((double)best[(size_t)t * (size_t)N + (size_t)o] - ref[(size_t)t * (size_t)N + (size_t)o]);
            double bound = q8_bound(deq, xt, K, o, rope_hd);
            CHECK_MSG(d <= bound, "dt %d T=%d K=%d: output [%d][%d]: q8 %.9g ref %.9g, |d| %.3g > bound %.3g",
                      (int)dt, T, K, t, o, best[(size_t)t * (size_t)N + (size_t)o],
                      ref[(size_t)t * (size_t)N + (size_t)o], d, bound);
            if (d / bound > worst) worst = d / bound;
        }
    }
    fprintf(stderr, "  dt %d T=%d K=%4d N=%2d%s%s: worst |q8 - ref| = %.2f of the bound\n", (int)dt, T, K, N,
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

static int test_q8_matmul_levels_and_bound(void)
{
    static const char *const level_name[] = {"portable C only", "AVX2", "AVX2, the prep AVX-512"};
    fprintf(stderr, "  (levels compared: up to %s on this machine)\n", level_name[ld_cpu_q8_simd()]);
    static const ld_kdt types[] = {LD_KDT_Q4_0, LD_KDT_Q4_1, LD_KDT_Q8_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        ld_kdt dt = types[i];
        CHECK(check_case(dt, 1, 32, 1, 0, 0) == 0);   /* one block, one row: no group of eight */
        CHECK(check_case(dt, 1, 96, 8, 0, 1) == 0);   /* one group */
        CHECK(check_case(dt, 1, 576, 43, 0, 0) == 0); /* groups and a tail of three */
        CHECK(check_case(dt, 1, 64, 16, 8, 1) == 0);  /* the rope row order */
        CHECK(check_case(dt, 5, 96, 17, 0, 1) == 0);  /* a batch */
        CHECK(check_case(dt, 2, 1536, 9, 0, 0) == 0);
        CHECK(check_case(dt, 3, 160, 40, 8, 1) == 0); /* five groups of eight, rope, batch */
        CHECK(check_case(dt, 2, 64, 13, 0, 1) == 0);  /* a group and a tail of five */
        /* eleven groups and a tail: two groups from each of four streams,
         * then three alone; the splits cut the streams short */
        CHECK(check_case(dt, 1, 64, 93, 0, 1) == 0);
        CHECK(check_case(dt, 3, 96, 72, 8, 1) == 0); /* nine groups as streams, rope, batch */
    }
    CHECK(ld_cpu_q8_supports(LD_KDT_Q4_1) && !ld_cpu_q8_supports(LD_KDT_F32) && !ld_cpu_q8_supports(LD_KDT_Q4_K));
    CHECK(ld_cpu_q8_simd() <= ld_cpu_simd());
    return 0;
}

/* The prep's int8s and scales against libm's roundf, on blocks made to hit
 * the edges: exact halves (amax 127: x * 1 = k + 0.5), a zero block, a NaN,
 * and random blocks; its qsums the int8s' sums. */
static int test_q8_prep_rounding(void)
{
    enum { T = 1, K = 4 * QB };
    float x[K], prep[K / 4 + 3 * (K / QB)];
    CHECK(ld_cpu_q8_prep_size(T, K) == sizeof prep / sizeof prep[0]);
    for (int e = 0; e < QB; e++) x[e] = e == 0 ? 127.0f : (float)(e - 16) + 0.5f; /* ties away from zero */
    for (int e = QB; e < 2 * QB; e++) x[e] = 0.0f;
    for (int e = 2 * QB; e < 3 * QB; e++) x[e] = q32_uniform();
    x[2 * QB + 5] = NAN;
    for (int e = 3 * QB; e < K; e++) x[e] = q32_uniform() * 1e-3f;
    ld_cpu_q8_prep(prep, x, T, K);
    const int8_t *q = (const int8_t *)prep;
    const float *dx = prep + K / 4;
    const int32_t *qsum = (const int32_t *)(dx + 2 * (K / QB));
    for (int b = 0; b < K / QB; b++) {
        int32_t sum = 0;
        for (int e = b * QB; e < (b + 1) * QB; e++) sum += q[e];
        CHECK_MSG(qsum[b] == sum, "block %d: qsum %d, the int8s sum to %d", b, (int)qsum[b], (int)sum);
        float amax = 0.0f;
        for (int e = b * QB; e < (b + 1) * QB; e++)
            if (!isnan(x[e])) amax = fmaxf(amax, fabsf(x[e]));
        CHECK_MSG(dx[b] == amax / 127.0f, "block %d: dx %g, amax / 127 = %g", b, dx[b], amax / 127.0f);
        for (int e = b * QB; e < (b + 1) * QB; e++) {
            float want = amax > 0.0f && !isnan(x[e]) ? roundf(x[e] * (127.0f / amax)) : 0.0f;
            CHECK_MSG(q[e] == (int)want, "element %d (x %.9g): q %d, roundf gives %g", e, x[e], q[e], want);
        }
    }
    CHECK(q[1] == -15 && q[16] == 1 && q[15] == -1 && q[0] == 127); /* -14.5, 0.5, -0.5: away from zero */
    float port[sizeof prep / sizeof prep[0]];
    for (int level = LD_CPU_PORTABLE; level <= LD_CPU_AVX512; level++) {
        memset(port, 0, sizeof port);
        ld_cpu_q8_prep_at(level, port, x, T, K);
        CHECK_MSG(memcmp(port, prep, sizeof port) == 0, "the prep at level %d differs", level);
    }
    return 0;
}

/* The packed layout as cpu_q8.h states it, byte by byte, at every level
 * (portable C, AVX2's transposes): group g, block b of K = 96 and rope rows
 * of 8; head byte i of row r at i / 2 * 16 + 2 r + i % 2, integer byte j at
 * head + j / 4 * 32 + 4 r + j % 4. */
static int test_q8_pack_layout(void)
{
    static const ld_kdt types[] = {LD_KDT_Q4_0, LD_KDT_Q4_1, LD_KDT_Q8_0};
    enum { K = 96, N = 27, HD = 8, NB = K / QB };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        ld_kdt dt = types[i];
        size_t bytes = q32_block_bytes(dt), head = bytes - (dt == LD_KDT_Q8_0 ? 32 : 16); /* d, and Q4_1's m */
        size_t n = ld_cpu_q8_packed_size(dt, K, N);
        unsigned char *w = q32_rand_weights(dt, N, K), *want = malloc(n), *got = malloc(n);
        CHECK(w && want && got && n == 24 * NB * bytes);
        for (size_t g = 0; g < N / 8; g++)
            for (size_t b = 0; b < NB; b++)
                for (int r = 0; r < 8; r++) {
                    const unsigned char *blk = w + (q32_src_row((int)(8 * g) + r, HD) * NB + b) * bytes;
                    unsigned char *o = want + (g * NB + b) * 8 * bytes;
                    for (size_t k = 0; k < head; k++) o[k / 2 * 16 + 2 * (size_t)r + k % 2] = blk[k];
                    for (size_t j = 0; j < bytes - head; j++)
                        o[8 * head + j / 4 * 32 + 4 * (size_t)r + j % 4] = blk[head + j];
                }
        for (int level = LD_CPU_PORTABLE; level <= LD_CPU_AVX512; level++) {
            memset(got, 0xA5, n);
            ld_cpu_q8_pack_at(level, got, w, dt, K, N, HD);
            CHECK_MSG(memcmp(got, want, n) == 0, "dt %d: the packing at level %d differs from the layout", (int)dt,
                      level);
        }
        free(w);
        free(want);
        free(got);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_q8_prep_rounding),
    LD_CASE(test_q8_pack_layout),
    LD_CASE(test_q8_matmul_levels_and_bound),
};

LD_TEST_MAIN(cases)
