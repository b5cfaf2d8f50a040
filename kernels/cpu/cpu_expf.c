/* cpu_expf.c - libm's expf, the one the reference calls, eight (AVX2) or
 * sixteen (AVX-512) at a time with its bits: the attention's softmax takes
 * an exponential per score, and libm's, a call each, was most of its time.
 *
 * The algorithm is glibc's (and musl's) expf, from Arm's optimized
 * routines, as glibc builds it for machines with FMA and AVX2 (its
 * __expf_fma, which those machines run): in double precision,
 *   k + r = x 32/ln2 (k an integer, |r| <= 1/2; the rounding by adding
 *           and subtracting 1.5 2^52),
 *   2^(k/32) from a table of 32 entries with k/32's integer part added to
 *           the exponent bits,
 *   2^(r/32) by a cubic in r,
 * their product rounded once to float.  The fused operations are the ones
 * glibc's build has (x 32/ln2 fused into both of its uses, three in the
 * cubic): on glibc 2.36 the same bits for all 2^32 floats (the test
 * with LD_TEST_EXPF_ALL=1).  Inputs of magnitude 88 or more, infinities
 * and NaNs go to libm's expf itself.
 *
 * Another libm may round differently (the algorithm built without fused
 * operations differs on 2 floats of the 2^32, a correctly rounded expf on
 * 170554): before the vector code is first used, a probe compares it with
 * the libm at hand on those floats (some of the latter) and a spread of
 * others, and keeps to libm where any differs (ld_cpu_expf_level in
 * cpu_ops.c).  The table is computed (2^(i/32) from exp2l); the cubic's
 * coefficients are the algorithm's. */
#include "cpu_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h" /* the levels */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* the table: bits of 2^(i/32) less i << 47 (the exponent bits k/32 adds
 * back), and 32/ln2, both rounded to double; filled once, when the vector
 * code first runs */
static uint64_t exp_tab[32];
static double inv_ln2_32;

/* the cubic: 2^(r/32) ~ C0 r^3 + C1 r^2 + C2 r + 1 */
#define EXP_C0 0x1.c6af84b912394p-20
#define EXP_C1 0x1.ebfce50fac4f3p-13
#define EXP_C2 0x1.62e42ff0c52d6p-6
#define EXP_SHIFT 0x1.8p52 /* adding it rounds to an integer, in the low bits */

static void fill_once(void)
{
    for (int i = 0; i < 32; i++) {
        double d = (double)exp2l((long double)i / 32.0L);
        uint64_t w;
        memcpy(&w, &d, sizeof w);
        exp_tab[i] = w - ((uint64_t)i << 47);
    }
    inv_ln2_32 = (double)(32.0L / logl(2.0L));
}

static void fill_table(void)
{
    static pthread_once_t filled = PTHREAD_ONCE_INIT;
    pthread_once(&filled, fill_once);
}

#define EXP_AVX2 __attribute__((target("avx2,fma")))
#define EXP_AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))
#define EXP_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
#define EXP_AVX512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512vl,avx2,fma")))

/* libm's expf of the lanes of magnitude 88 or more, infinities and NaNs,
 * over the vector's results (mask: bit l for lane l) */
static void exp_patch(float *y, const float *x, unsigned mask)
{
    for (int l = 0; mask; l++, mask >>= 1)
        if (mask & 1) y[l] = expf(x[l]);
}

/* four lanes in double; the order of operations is the one above */
EXP_AVX2_INLINE __m128 exp4_avx2(__m128 x)
{
    const __m256d inv = _mm256_set1_pd(inv_ln2_32), sh = _mm256_set1_pd(EXP_SHIFT);
    __m256d xd = _mm256_cvtps_pd(x);
    __m256d kr = _mm256_fmadd_pd(xd, inv, sh); /* k in the low bits */
    __m256i ki = _mm256_castpd_si256(kr);
    __m256d r = _mm256_fmsub_pd(inv, xd, _mm256_sub_pd(kr, sh));
    __m256i t = _mm256_i64gather_epi64((const long long *)exp_tab, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
    __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(EXP_C0), _mm256_set1_pd(EXP_C1));
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(EXP_C2), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, _mm256_mul_pd(r, r), y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

/* v[j] = expf(v[j] - mx), j in [0, n) */
static EXP_AVX2 void exp_shifted_avx2(float *v, int n, float mx)
{
    fill_table();
    const __m256 m = _mm256_set1_ps(mx);
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_sub_ps(_mm256_loadu_ps(v + j), m);
        /* |x| >= 88 or NaN: the integer compare of the magnitude's bits */
        __m256i mag = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
        unsigned odd = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x42afffff))));
        __m256 y = _mm256_set_m128(exp4_avx2(_mm256_extractf128_ps(x, 1)), exp4_avx2(_mm256_castps256_ps128(x)));
        _mm256_storeu_ps(v + j, y);
        if (odd) {
            float xs[8];
            _mm256_storeu_ps(xs, x);
            exp_patch(v + j, xs, odd);
        }
    }
    for (; j < n; j++) v[j] = expf(v[j] - mx);
}

/* eight lanes in double */
EXP_AVX512_INLINE __m256 exp8_avx512(__m256 x, const __m512i tab[4])
{
    const __m512d inv = _mm512_set1_pd(inv_ln2_32), sh = _mm512_set1_pd(EXP_SHIFT);
    __m512d xd = _mm512_cvtps_pd(x);
    __m512d kr = _mm512_fmadd_pd(xd, inv, sh);
    __m512i ki = _mm512_castpd_si512(kr);
    __m512d r = _mm512_fmsub_pd(inv, xd, _mm512_sub_pd(kr, sh));
    /* entries 0-15 and 16-31 by the low four bits, then bit 4 picks */
    __m512i lo = _mm512_permutex2var_epi64(tab[0], ki, tab[1]), hi = _mm512_permutex2var_epi64(tab[2], ki, tab[3]);
    __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, lo, hi), _mm512_slli_epi64(ki, 47));
    __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(EXP_C0), _mm512_set1_pd(EXP_C1));
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(EXP_C2), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, _mm512_mul_pd(r, r), y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_castsi512_pd(t)));
}

static EXP_AVX512 void exp_shifted_avx512(float *v, int n, float mx)
{
    fill_table();
    const __m512i tab[4] = { _mm512_loadu_si512(exp_tab), _mm512_loadu_si512(exp_tab + 8),
                             _mm512_loadu_si512(exp_tab + 16), _mm512_loadu_si512(exp_tab + 24) };
    const __m512 m = _mm512_set1_ps(mx);
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 x = _mm512_sub_ps(_mm512_loadu_ps(v + j), m);
        __m512i mag = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
        unsigned odd = _mm512_cmpge_epu32_mask(mag, _mm512_set1_epi32(0x42b00000));
        __m256 lo = exp8_avx512(_mm512_castps512_ps256(x), tab);
        __m256 hi = exp8_avx512(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)), tab);
        _mm256_storeu_ps(v + j, lo);
        _mm256_storeu_ps(v + j + 8, hi);
        if (odd) {
            float xs[16];
            _mm512_storeu_ps(xs, x);
            exp_patch(v + j, xs, odd);
        }
    }
    if (j < n) exp_shifted_avx2(v + j, n - j, mx);
}

#else /* not x86-64: never called (ld_cpu_simd() is 0) */
static void exp_shifted_avx2(float *v, int n, float mx) { (void)v; (void)n; (void)mx; }
static void exp_shifted_avx512(float *v, int n, float mx) { (void)v; (void)n; (void)mx; }
#endif

void ld_cpu_exp_shifted(int level, float *v, int n, float mx)
{
    if (level >= LD_CPU_AVX512) exp_shifted_avx512(v, n, mx);
    else if (level >= LD_CPU_AVX2) exp_shifted_avx2(v, n, mx);
    else
        for (int j = 0; j < n; j++) v[j] = expf(v[j] - mx);
}

/* ---------------------------------------------------------------- the probe */

/* Floats where other builds of the algorithm, or a correctly rounded
 * expf, round otherwise than glibc's FMA build (tools/gen_expf_probe.sh
 * lists them): the two where the build without fused operations differs,
 * then 254 of those where a correctly rounded expf does. */
static const uint32_t probe_bits[] = {
#include "cpu_expf_probe.h"
};

/* 1 when the vector code of `level` (LD_CPU_AVX2 or LD_CPU_AVX512, which
 * the machine has) gives libm's bits on the probe: the floats above, 4096
 * spread over [-104, 89] and both zeros */
int ld_cpu_expf_agrees(int level)
{
    enum { SPREAD = 4096, N = SPREAD + (int)(sizeof probe_bits / sizeof probe_bits[0]) + 2 };
    float *x = malloc(2 * N * sizeof *x), *y = x + N;
    if (!x) return 0; /* libm's calls, then */
    int n = 0;
    for (int i = 0; i < SPREAD; i++) x[n++] = -104.0f + 193.0f * (float)i / (float)SPREAD;
    for (size_t i = 0; i < sizeof probe_bits / sizeof probe_bits[0]; i++) memcpy(&x[n++], &probe_bits[i], sizeof(float));
    x[n++] = 0.0f;
    x[n++] = -0.0f;
    memcpy(y, x, (size_t)n * sizeof *y);
    ld_cpu_exp_shifted(level, y, n, 0.0f);
    int same = 1;
    for (int i = 0; i < n && same; i++) {
        float e = expf(x[i]);
        same = memcmp(&e, &y[i], sizeof e) == 0;
    }
    free(x);
    return same;
}
