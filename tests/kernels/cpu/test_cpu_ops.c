/* test_cpu_ops.c - the fast CPU matmul (kernels/cpu/cpu_ops.h) against the
 * reference (kernels/ref/ref_ops.h), for every storage type, the way llama.cpp's
 * backend tests hold every backend's ops to the CPU one:
 *  - within the rounding bound of two fp32 summation orders
 *    ((K + 16) * 2^-23 * sum |w x|) of the reference, element by element;
 *  - every implementation level the machine has (portable, AVX2, AVX-512)
 *    gives the same bits;
 *  - a token's row is the same in a call of T tokens and alone, and any
 *    split of the output columns gives the same bits;
 *  - bias and the rope row order are applied as the reference does;
 *  - the block-scaled FP8 / FP4 rows the matmul converts (ld_cpu_to_f32_at)
 *    are, at every level, bit for bit the reference's, which is the scalar
 *    converters' code * scale (kernels/ref/ref_ds*.c). */
#include <math.h>
#include <stdint.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_ops.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ds.h"    /* ld_ref_fp8_e4m3_to_f32 */
#include "kernels/ref/ref_ds4.h" /* ld_ref_ds4_e2m1_to_f32 */
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_quant.h"


static float uniform(void) /* [-1, 1) */
{
    return (float)((double)next_u32() / 2147483648.0 - 1.0);
}

/* an f16 of magnitude in [2^lo, 2^(hi+1)) with a random sign and mantissa */
static uint16_t rand_f16(int lo, int hi)
{
    int e = lo + (int)(next_u32() % (uint32_t)(hi - lo + 1)) + 15;
    return (uint16_t)((next_u32() & 1u) << 15 | (unsigned)e << 10 | (next_u32() & 1023u));
}

static uint16_t rand_bf16(void)
{
    int e = 120 + (int)(next_u32() % 10u);
    return (uint16_t)((next_u32() & 1u) << 15 | (unsigned)e << 7 | (next_u32() & 127u));
}

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

typedef struct kind {
    ld_kdt dt;
    const char *name;
    uint32_t ggml;
    int block;
    int br, bc; /* LD_KDT_F8B / F4B: the scale blocks */
} kind;

static const kind kinds[] = {
    {LD_KDT_F32, "f32", LD_GGML_F32, 1, 0, 0},      {LD_KDT_F16, "f16", LD_GGML_F16, 1, 0, 0},
    {LD_KDT_BF16, "bf16", LD_GGML_BF16, 1, 0, 0},   {LD_KDT_Q4_0, "q4_0", LD_GGML_Q4_0, 32, 0, 0},
    {LD_KDT_Q4_1, "q4_1", LD_GGML_Q4_1, 32, 0, 0},  {LD_KDT_Q8_0, "q8_0", LD_GGML_Q8_0, 32, 0, 0},
    {LD_KDT_Q4_K, "q4_k", LD_GGML_Q4_K, 256, 0, 0}, {LD_KDT_Q6_K, "q6_k", LD_GGML_Q6_K, 256, 0, 0},
    {LD_KDT_F8B, "f8b", 0, 1, 3, 32},               {LD_KDT_F4B, "f4b", 0, 2, 2, 32},
    {LD_KDT_F8B, "f8b/7", 0, 1, 1, 7},              {LD_KDT_F4B, "f4b/5", 0, 2, 1, 5}, /* blocks across lanes */
};

/* A random block-scaled matrix (LD_KDT_F8B / F4B): codes, scales of a few
 * powers of two either side of 2^-6 with random mantissas and signs. */
/* The activations' magnitude (0: uniform(); else |x| in [2^e, 2^(e+1))
 * with random mantissas and signs): near the bottom of fp32's normal range
 * the AVX2 Q4 decode's x 2^-e (cpu_internal.h, xe) would lose bits. */
static int g_x_exp;

static float activation(void)
{
    float u = uniform();
    if (!g_x_exp) return u;
    return copysignf(ldexpf(1.0f + fabsf(u), g_x_exp), u);
}

typedef struct scaled {
    ld_f8b f;
    uint8_t *q;
    float *scale;
} scaled;

static float rand_scale(void)
{
    float s = ldexpf(1.0f + (float)(next_u32() % 1024u) / 1024.0f, -10 + (int)(next_u32() % 8u));
    return next_u32() % 4u ? s : -s;
}

/* no_nan: the E4M3 NaN codes (0x7f, 0xff) made 0x7e / 0xfe, for the sums */
static int scaled_make(scaled *m, ld_kdt dt, int rows, int cols, int br, int bc, int no_nan)
{
    int64_t nbr = (rows + br - 1) / br, nbc = (cols + bc - 1) / bc;
    size_t nq = dt == LD_KDT_F4B ? (size_t)rows * (size_t)cols / 2 : (size_t)rows * (size_t)cols;
    m->q = malloc(nq ? nq : 1);
    m->scale = malloc((size_t)(nbr * nbc) * sizeof *m->scale);
    if (!m->q || !m->scale) return 1;
    for (size_t i = 0; i < nq; i++) {
        m->q[i] = (uint8_t)next_u32();
        if (no_nan && dt == LD_KDT_F8B && (m->q[i] & 0x7f) == 0x7f) m->q[i] ^= 1;
    }
    for (int64_t i = 0; i < nbr * nbc; i++) m->scale[i] = rand_scale();
    m->f = (ld_f8b){m->q, m->scale, rows, cols, br, bc};
    return 0;
}

static void scaled_free(scaled *m)
{
    free(m->q);
    free(m->scale);
}

/* N rows of K elements of kind k, random, with sane scales; malloc'd */
static void *rand_weights(const kind *k, int N, int K, size_t *size)
{
    size_t block = 1, bytes = 4;
    ld_ref_quant_layout(k->ggml, &block, &bytes);
    size_t n = (size_t)N * (size_t)K / block * bytes;
    unsigned char *w = malloc(n);
    if (!w) return NULL;
    *size = n;
    for (size_t i = 0; i < n; i++) w[i] = (unsigned char)next_u32();
    size_t nb = n / bytes;
    for (size_t b = 0; b < nb; b++) {
        unsigned char *p = w + b * bytes;
        switch (k->dt) {
        case LD_KDT_F32: {
            float f = uniform();
            memcpy(p, &f, 4);
            break;
        }
        case LD_KDT_F16: put16(p, rand_f16(-6, 0)); break;
        case LD_KDT_BF16: put16(p, rand_bf16()); break;
        case LD_KDT_Q4_0: case LD_KDT_Q8_0: put16(p, rand_f16(-9, -5)); break;
        case LD_KDT_Q4_1: put16(p, rand_f16(-9, -5)); put16(p + 2, rand_f16(-6, -3)); break;
        case LD_KDT_Q4_K: put16(p, rand_f16(-12, -9)); put16(p + 2, rand_f16(-12, -9)); break;
        case LD_KDT_Q6_K: put16(p + 208, rand_f16(-14, -11)); break;
        default: break;
        }
    }
    return w;
}

typedef struct mm {
    const kind *k;
    int T, K, N, rope_hd, with_bias;
    void *w;               /* the weights' data (for F8B / F4B: &sc.f) */
    scaled sc;             /* F8B / F4B: the matrix */
    float *x, *bias, *deq; /* deq: the weights dequantized, [N][K] */
} mm;

static int mm_make(mm *m, const kind *k, int T, int K, int N, int rope_hd, int with_bias)
{
    memset(m, 0, sizeof *m);
    m->k = k;
    m->T = T;
    m->K = K;
    m->N = N;
    m->rope_hd = rope_hd;
    m->with_bias = with_bias;
    size_t size;
    if (ld_ref_kdt_is_scaled(k->dt)) {
        if (scaled_make(&m->sc, k->dt, N, K, k->br, k->bc, 1)) return 1;
        m->w = &m->sc.f;
    } else {
        m->w = rand_weights(k, N, K, &size);
    }
    m->x = malloc((size_t)T * (size_t)K * sizeof *m->x);
    m->bias = malloc((size_t)N * sizeof *m->bias);
    m->deq = malloc((size_t)N * (size_t)K * sizeof *m->deq);
    if (!m->w || !m->x || !m->bias || !m->deq) return 1;
    for (size_t i = 0; i < (size_t)T * (size_t)K; i++) m->x[i] = activation();
    for (int i = 0; i < N; i++) m->bias[i] = uniform();
    ld_ref_to_f32(m->deq, m->w, k->dt, 0, (size_t)N * (size_t)K);
    return 0;
}

static void mm_free(mm *m)
{
    if (ld_ref_kdt_is_scaled(m->k->dt)) scaled_free(&m->sc);
    else free(m->w);
    free(m->x);
    free(m->bias);
    free(m->deq);
}

typedef void (*mm_fn)(float *, const float *, const float *, const void *, ld_kdt, const void *, ld_kdt, int, int,
                      int, int, float *, size_t, size_t);

static void ref_fn(float *out, const float *x, const float *prep, const void *w, ld_kdt dt, const void *bias,
                   ld_kdt bias_dt, int T, int K, int N, int rope_hd, float *row, size_t i0, size_t i1)
{
    (void)prep;
    ld_ref_matmul_ex(out, x, w, dt, bias, bias_dt, T, K, N, rope_hd, row, i0, i1);
}

static int g_level; /* the level cpu_fn runs at */
static const void *g_packed; /* the packed copy cpu_fn passes, or NULL */

/* the fast kernels at the machine's best level, from w alone */
static void best_fn(float *out, const float *x, const float *prep, const void *w, ld_kdt dt, const void *bias,
                    ld_kdt bias_dt, int T, int K, int N, int rope_hd, float *scratch, size_t i0, size_t i1)
{
    ld_cpu_matmul(out, x, prep, w, NULL, dt, bias, bias_dt, T, K, N, rope_hd, scratch, i0, i1);
}

static void cpu_fn(float *out, const float *x, const float *prep, const void *w, ld_kdt dt, const void *bias,
                   ld_kdt bias_dt, int T, int K, int N, int rope_hd, float *scratch, size_t i0, size_t i1)
{
    ld_cpu_matmul_at(g_level, out, x, prep, w, g_packed, dt, bias, bias_dt, T, K, N, rope_hd, scratch, i0, i1);
}

/* out = the whole matmul by `fn`, output columns split at `split` */
static int mm_run(const mm *m, mm_fn fn, int T, const float *x, size_t split, float *out)
{
    size_t ns = fn == ref_fn ? (size_t)m->K : ld_cpu_matmul_scratch(m->k->dt, T, m->K);
    size_t np = ld_cpu_matmul_prep_size(m->k->dt, T, m->K);
    float *scratch = malloc(ns * sizeof *scratch), *prep = malloc((np ? np : 1) * sizeof *prep);
    if (!scratch || !prep) return 1;
    ld_cpu_matmul_prep(prep, x, m->k->dt, T, m->K);
    const void *b = m->with_bias ? m->bias : NULL;
    fn(out, x, prep, m->w, m->k->dt, b, LD_KDT_F32, T, m->K, m->N, m->rope_hd, scratch, 0, split);
    fn(out, x, prep, m->w, m->k->dt, b, LD_KDT_F32, T, m->K, m->N, m->rope_hd, scratch, split, (size_t)m->N);
    free(scratch);
    free(prep);
    return 0;
}

static size_t src_row(int n, int rope_hd)
{
    if (!rope_hd) return (size_t)n;
    int h = n / rope_hd, r = n % rope_hd;
    return (size_t)(h * rope_hd + 2 * (r % (rope_hd / 2)) + r / (rope_hd / 2));
}

/* From the packed copy (where the type has one): at every level, whole
 * and with the columns split inside a group, the bits of `cpu` (the fast
 * kernels from w alone). */
static int check_packed(const mm *m, int T, const float *cpu)
{
    size_t size = ld_cpu_fast_packed_size(m->k->dt, m->K, m->N), n = (size_t)T * (size_t)m->N;
    if (!size) return 0;
    void *packed = malloc(size);
    float *out = malloc(n * sizeof *out);
    CHECK(packed && out);
    ld_cpu_fast_pack(packed, m->w, m->k->dt, m->K, m->N, m->rope_hd);
    g_packed = packed;
    const size_t splits[2] = {(size_t)m->N / 3, (size_t)m->N};
    for (g_level = 0; g_level <= ld_cpu_simd(); g_level++)
        for (int i = 0; i < 2; i++) {
            size_t split = splits[i];
            memset(out, 0, n * sizeof *out);
            CHECK(mm_run(m, cpu_fn, T, m->x, split, out) == 0);
            CHECK_MSG(memcmp(cpu, out, n * sizeof *cpu) == 0,
                      "%s T=%d K=%d N=%d: from the packed copy at level %d (split at %zu) the bits differ",
                      m->k->name, T, m->K, m->N, g_level, split);
        }
    g_packed = NULL;
    free(packed);
    free(out);
    return 0;
}

static int check_case(const kind *k, int T, int K, int N, int rope_hd, int with_bias)
{
    mm m;
    CHECK(mm_make(&m, k, T, K, N, rope_hd, with_bias) == 0);
    size_t n = (size_t)T * (size_t)N;
    float *ref = malloc(n * sizeof *ref), *cpu = malloc(n * sizeof *cpu), *port = malloc(n * sizeof *port);
    static const char *const level_name[] = {"portable", "AVX2", "AVX-512"};
    float *split = malloc(n * sizeof *split), *alone = malloc((size_t)N * sizeof *alone);
    CHECK(ref && cpu && port && split && alone);
    CHECK(mm_run(&m, ref_fn, T, m.x, (size_t)N, ref) == 0);
    CHECK(mm_run(&m, best_fn, T, m.x, (size_t)N, cpu) == 0);
    for (g_level = 0; g_level <= ld_cpu_simd(); g_level++) {
        memset(port, 0, n * sizeof *port);
        CHECK(mm_run(&m, cpu_fn, T, m.x, (size_t)N, port) == 0);
        CHECK_MSG(memcmp(cpu, port, n * sizeof *cpu) == 0, "%s T=%d K=%d: the %s code differs from the best level's",
                  k->name, T, K, level_name[g_level]);
    }
    CHECK(mm_run(&m, best_fn, T, m.x, (size_t)N / 3, split) == 0);
    CHECK_MSG(memcmp(cpu, split, n * sizeof *cpu) == 0, "%s T=%d K=%d: a column split changes the bits", k->name,
              T, K);
    CHECK(check_packed(&m, T, cpu) == 0);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        CHECK(mm_run(&m, best_fn, 1, m.x + (size_t)t * (size_t)K, (size_t)N, alone) == 0);
        CHECK_MSG(memcmp(alone, cpu + (size_t)t * (size_t)N, (size_t)N * sizeof *alone) == 0,
                  "%s T=%d K=%d: token %d alone differs from the batch", k->name, T, K, t);
        for (int o = 0; o < N; o++) {
            const float *wr = m.deq + src_row(o, rope_hd) * (size_t)K, *xr = m.x + (size_t)t * (size_t)K;
            double mag = with_bias ? fabs(m.bias[o]) : 0;
            for (int i = 0; i < K; i++) mag += fabs((double)wr[i] * xr[i]);
            double bound = (K + 16) * ldexp(1.0, -23) * mag + 1e-30;
            double d = fabs((double)cpu[(size_t)t * (size_t)N + (size_t)o] - ref[(size_t)t * (size_t)N + (size_t)o]);
            CHECK_MSG(d <= bound, "%s T=%d K=%d: output [%d][%d]: cpu %.9g ref %.9g, |d| %.3g > bound %.3g",
                      k->name, T, K, t, o, cpu[(size_t)t * (size_t)N + (size_t)o],
                      ref[(size_t)t * (size_t)N + (size_t)o], d, bound);
            if (d / bound > worst) worst = d / bound;
        }
    }
    fprintf(stderr, "  %-5s T=%d K=%3d N=%2d%s%s: worst |cpu - ref| = %.2f of the bound\n", k->name, T, K, N,
            rope_hd ? " rope" : "", with_bias ? " bias" : "", worst);
    free(ref);
    free(cpu);
    free(port);
    free(split);
    free(alone);
    mm_free(&m);
    return 0;
}

static int test_matmul_every_type(void)
{
    static const char *const level_name[] = {"portable C only", "AVX2", "AVX-512"};
    fprintf(stderr, "  (levels compared: up to %s on this machine)\n", level_name[ld_cpu_simd()]);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const kind *k = &kinds[i];
        int K = k->block == 256 ? 512 : k->block == 32 ? 96 : k->block == 2 ? 78 : 77; /* 77, 78: tails */
        CHECK(check_case(k, 7, K, 24, 0, 0) == 0);
        CHECK(check_case(k, 1, K, 16, 8, 1) == 0);
        CHECK(check_case(k, 1, K, 43, 0, 0) == 0); /* decode: groups of eight rows, a pair, one */
        CHECK(check_case(k, 5, k->block <= 2 ? 576 : K, 12, 0, 1) == 0);
        if (k->block <= 2) CHECK(check_case(k, 2, 1030, 9, 0, 1) == 0); /* decode: rows in pieces, a tail */
        if (k->bc % 16 == 0 && k->bc) CHECK(check_case(k, 1, 1152, 9, 0, 1) == 0); /* codes converted in registers */
        if (k->block == 32) { /* the packed copy's groups of sixteen, rope order, a tail; prefill from it */
            CHECK(check_case(k, 1, K, 72, 8, 1) == 0);
            CHECK(check_case(k, 6, K, 56, 8, 1) == 0);
        }
        if (k->block == 32) { /* prefill tiles: rows by four, tokens by four, panels of rows */
            for (int T = 2; T <= 9; T++) CHECK(check_case(k, T, K, 27, 0, T % 2) == 0);
            CHECK(check_case(k, 6, K, 16, 8, 1) == 0);
            CHECK(check_case(k, 5, 32 * 1024, 30, 0, 1) == 0); /* panels of 12 rows: 12, 12, 6 */
        }
    }
    return 0;
}

/* The Q4 types' prepared activations (ld_cpu_matmul_prep: x in lane order,
 * its scaled copy and flag, Q4_1's block sums) the same floats at every
 * level: ordinary activations, and some near the bottom of the range
 * (the flag down), one to many tokens. */
static int test_matmul_prep_levels(void)
{
    static const ld_kdt dts[] = {LD_KDT_Q4_0, LD_KDT_Q4_1};
    static const int Ts[] = {1, 3, 6}, Ks[] = {96, 576, 1536};
    for (int d = 0; d < 2; d++)
        for (int t = 0; t < 3; t++)
            for (int k = 0; k < 3; k++)
                for (int tiny = 0; tiny <= 1; tiny++) {
                    int T = Ts[t], K = Ks[k];
                    size_t n = ld_cpu_matmul_prep_size(dts[d], T, K), nx = (size_t)T * (size_t)K;
                    float *x = malloc(nx * sizeof *x), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
                    CHECK(x && want && got);
                    g_x_exp = 0;
                    for (size_t i = 0; i < nx; i++) x[i] = activation();
                    if (tiny) x[nx / 2] = ldexpf(1.5f, -120);
                    memset(want, 0xa5, n * sizeof *want);
                    ld_cpu_matmul_prep_at(LD_CPU_PORTABLE, want, x, dts[d], T, K);
                    for (int level = 1; level <= ld_cpu_simd(); level++) {
                        memset(got, 0x5a, n * sizeof *got);
                        ld_cpu_matmul_prep_at(level, got, x, dts[d], T, K);
                        CHECK_MSG(memcmp(want, got, n * sizeof *got) == 0, "%s T=%d K=%d%s: level %d's prep differs",
                                  dts[d] == LD_KDT_Q4_0 ? "q4_0" : "q4_1", T, K, tiny ? " (tiny)" : "", level);
                    }
                    free(x);
                    free(want);
                    free(got);
                }
    fprintf(stderr, "  q4_0, q4_1: T 1-6, K 96-1536: every level's prep the portable one's\n");
    return 0;
}

/* Q4_0 and Q4_1, K = 96, with activations of magnitudes 2^exps[i]
 * (activation()), in two shapes {T, N, rope_hd}: check_case's every check */
static int q4_at_magnitudes(const int *exps, size_t ne, const int shapes[2][3])
{
    for (size_t e = 0; e < ne; e++) {
        g_x_exp = exps[e];
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            if (kinds[i].dt != LD_KDT_Q4_0 && kinds[i].dt != LD_KDT_Q4_1) continue;
            for (int c = 0; c < 2; c++) CHECK(check_case(&kinds[i], shapes[c][0], 96, shapes[c][1], shapes[c][2], 0) == 0);
        }
    }
    g_x_exp = 0;
    return 0;
}

/* Q4 with activations near the top of fp32's range (|x| from 2^100 to
 * 2^111, where a decode that scaled x up by 2^23 to take the nibbles
 * unshifted would overflow): every level's bits the same, from the packed
 * copy and from the rows as they lie, within the bound of the reference. */
static int test_matmul_large_activations(void)
{
    static const int exps[] = {100, 103, 104, 110}, shapes[2][3] = {{1, 48, 8}, {3, 32, 0}};
    return q4_at_magnitudes(exps, sizeof exps / sizeof exps[0], shapes);
}

/* Q4 with activations where x 2^-12 is still normal (the AVX2 code's
 * scaled decode) and where it is not (its fallback): every level's bits the
 * same, within the bound of the reference. */
static int test_matmul_tiny_activations(void)
{
    static const int exps[] = {-114, -120, -126}, shapes[2][3] = {{1, 43, 0}, {5, 27, 0}};
    return q4_at_magnitudes(exps, sizeof exps / sizeof exps[0], shapes);
}

/* Element i of the block-scaled matrix f by the scalar converters, the
 * oracle: code * scale[r / br][c / bc], one fp32 product. */
static float scaled_oracle(const ld_f8b *f, ld_kdt dt, size_t i)
{
    size_t cols = (size_t)f->cols, bc = (size_t)f->bc, r = i / cols, c = i % cols;
    float sc = f->scale[r / (size_t)f->br * ((cols + bc - 1) / bc) + c / bc];
    float v = dt == LD_KDT_F4B ? ld_ref_ds4_e2m1_to_f32(i % 2 ? f->q[i / 2] >> 4u : f->q[i / 2] & 15u)
                               : ld_ref_fp8_e4m3_to_f32(f->q[i]);
    return v * sc;
}

/* dst[0..n) against the oracle's elements [off, off+n), bit for bit (the
 * NaN codes' patterns too), and the SENTINEL floats after them untouched */
enum { SENTINEL = 16 };
static int scaled_same(const float *dst, const float *want, size_t off, size_t n, const char *what, int level,
                       size_t cols, int bc)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, dst + i, 4);
        memcpy(&b, want + off + i, 4);
        CHECK_MSG(a == b, "%s level %d cols %zu bc %d: element %zu (of [%zu, +%zu)): %08x, the scalar converter %08x",
                  what, level, cols, bc, off + i, off, n, a, b);
    }
    for (size_t i = n; i < n + SENTINEL; i++) {
        uint32_t a;
        memcpy(&a, dst + i, 4);
        CHECK_MSG(a == 0xdeadbeefu, "%s level %d: a float written past the range [%zu, +%zu)", what, level, off, n);
    }
    return 0;
}

static void sentinel_fill(float *dst, size_t n)
{
    uint32_t v = 0xdeadbeefu;
    for (size_t i = 0; i < n; i++) memcpy(dst + i, &v, 4);
}

/* One matrix: every code (F8B: the first 256 elements are codes 0..255;
 * F4B: the first 256 bytes every pair of nibbles), the whole matrix and
 * ranges of it from any element (rows and blocks cut anywhere, F4B's odd
 * elements mid-byte), at every level, against the scalar converters. */
static int check_scaled(ld_kdt dt, int rows, int cols, int br, int bc)
{
    const char *what = dt == LD_KDT_F4B ? "f4b" : "f8b";
    scaled m;
    CHECK(scaled_make(&m, dt, rows, cols, br, bc, 0) == 0);
    size_t n = (size_t)rows * (size_t)cols, nq = dt == LD_KDT_F4B ? n / 2 : n;
    for (size_t i = 0; i < nq && i < 256; i++) m.q[i] = (uint8_t)i;
    float *want = malloc(n * sizeof *want), *got = malloc((n + SENTINEL) * sizeof *got);
    CHECK(want && got);
    int nans = 0;
    for (size_t i = 0; i < n; i++) {
        want[i] = scaled_oracle(&m.f, dt, i);
        nans += isnan(want[i]) != 0;
    }
    CHECK(dt == LD_KDT_F4B ? nans == 0 : nq < 256 || nans >= 2); /* 0x7f, 0xff */
    sentinel_fill(got, n + SENTINEL);
    ld_ref_to_f32(got, &m.f, dt, 0, n);
    CHECK(scaled_same(got, want, 0, n, what, -1, (size_t)cols, bc) == 0); /* the reference's tables */
    for (int level = 0; level <= ld_cpu_simd(); level++) {
        sentinel_fill(got, n + SENTINEL);
        ld_cpu_to_f32_at(level, got, &m.f, dt, 0, n);
        CHECK(scaled_same(got, want, 0, n, what, level, (size_t)cols, bc) == 0);
        for (int j = 0; j < 40; j++) {
            size_t off = j < 4 ? (size_t)j : next_u32() % n, len = j % 3 == 0 ? 1 : next_u32() % (n - off + 1);
            if (j == 4) off = (size_t)cols - 1, len = n - off; /* from a row's last element on */
            sentinel_fill(got, len + SENTINEL);
            ld_cpu_to_f32_at(level, got, &m.f, dt, off, len);
            CHECK(scaled_same(got, want, off, len, what, level, (size_t)cols, bc) == 0);
        }
    }
    free(want);
    free(got);
    scaled_free(&m);
    return 0;
}

static unsigned bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (unsigned)u;
}

/* BF16 and F16 rows as every level converts them: all 65536 codes (the
 * NaNs' payloads, signalling ones included, subnormals, infinities, -0),
 * from offsets 0..9 so that the vector body and the tails both see each
 * code, bit for bit the reference's converters */
static int test_half_rows(void)
{
    enum { N = 65536 + 16 };
    static uint16_t h[N];
    static float out[N];
    for (size_t i = 0; i < N; i++) h[i] = (uint16_t)(i * 40503u); /* every code, shuffled */
    for (int bf16 = 0; bf16 <= 1; bf16++)
        for (int level = 0; level <= ld_cpu_simd(); level++)
            for (size_t off = 0; off < 10; off++) {
                size_t n = N - 16 - off + (off % 3);
                ld_cpu_to_f32_at(level, out, h, bf16 ? LD_KDT_BF16 : LD_KDT_F16, off, n);
                for (size_t i = 0; i < n; i++) {
                    float r = bf16 ? ld_ref_bf16_to_f32(h[off + i]) : ld_ref_f16_to_f32(h[off + i]);
                    CHECK_MSG(!memcmp(&r, &out[i], sizeof r), "%s level %d: code 0x%04x -> %08x, reference %08x",
                              bf16 ? "bf16" : "f16", level, h[off + i], bits_of(out[i]), bits_of(r));
                }
            }
    return 0;
}

static int test_scaled_rows(void)
{
    static const int shapes[][4] = { /* rows, cols (even: F4B too), br, bc */
        {3, 256, 1, 128}, {4, 300, 3, 128}, {5, 96, 2, 32}, {3, 78, 2, 7}, {4, 46, 3, 5},
        {2, 1000, 1, 33}, {3, 2, 1, 1}, {2, 34, 1, 16}, {6, 22, 4, 1}, {1, 512, 1, 512},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int fp4 = 0; fp4 <= 1; fp4++)
            CHECK(check_scaled(fp4 ? LD_KDT_F4B : LD_KDT_F8B, shapes[i][0], shapes[i][1], shapes[i][2],
                               shapes[i][3]) == 0);
    /* the NaN codes' patterns, and the signs of -0 and of 2^-9 (the least
     * subnormal) through a negative scale */
    uint8_t q[4] = {0x7f, 0xff, 0x80, 0x01};
    float sc[1] = {-0.5f}, out[4];
    ld_f8b f = {q, sc, 1, 4, 1, 4};
    for (int level = 0; level <= ld_cpu_simd(); level++) {
        uint32_t b[4];
        ld_cpu_to_f32_at(level, out, &f, LD_KDT_F8B, 0, 4);
        memcpy(b, out, sizeof b);
        CHECK_MSG(b[0] == 0x7fc00000u && b[1] == 0xffc00000u && b[2] == 0x00000000u && b[3] == 0xba800000u,
                  "level %d: codes 7f ff 80 01 * -0.5 give %08x %08x %08x %08x", level, b[0], b[1], b[2], b[3]);
    }
    return 0;
}

/* Sums that cancel: the bound scales with sum |w x|, not with the result. */
static int test_matmul_cancellation(void)
{
    const kind *k = &kinds[0];
    mm m;
    CHECK(mm_make(&m, k, 2, 64, 4, 0, 0) == 0);
    for (int i = 0; i < 64; i++) {
        ((float *)m.w)[i] = (float)(i % 2 ? 1e4 : -1e4);
        m.x[i] = 1.0f + (float)i * 1e-7f;
    }
    float ref[8], cpu[8];
    CHECK(mm_run(&m, ref_fn, 2, m.x, 4, ref) == 0);
    CHECK(mm_run(&m, best_fn, 2, m.x, 4, cpu) == 0);
    /* exact: sum of 32 pairs 1e4 * (x_odd - x_even) = 32 * 1e4 * 1e-7 */
    CHECK(fabs(cpu[0] - 32 * 1e4 * 1e-7) < 0.05);
    CHECK(fabs(ref[0] - 32 * 1e4 * 1e-7) < 0.05);
    mm_free(&m);
    return 0;
}

/* Attention: every level the same bits, and within the rounding bound of
 * the reference (scores of a few units, outputs convex combinations). */
static int test_attention_levels(void)
{
    enum { T = 5, H = 4, KV = 2, HD = 20, P0 = 7, POS = P0 + T };
    static float q[T * H * HD], kc[POS * KV * HD], vc[POS * KV * HD];
    /* scores: the cpu kernel's rows, a head's each, of up to four tokens */
    static float ref[T * H * HD], best[T * H * HD], lv[T * H * HD], scores[4 * POS * H];
    CHECK(ld_cpu_attention_scratch(H, POS) <= sizeof scores / sizeof scores[0]);
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) q[i] = uniform();
    for (size_t i = 0; i < sizeof kc / sizeof kc[0]; i++) {
        kc[i] = uniform();
        vc[i] = uniform();
    }
    for (int window = 0; window <= 3; window += 3) {
        ld_ref_attention(ref, q, kc, vc, H, KV, HD, P0, window, 0.3f, scores, 0, T * H);
        ld_cpu_attention(best, q, kc, vc, H, KV, HD, P0, window, 0.3f, scores, 0, T * H);
        for (int level = 0; level <= ld_cpu_simd(); level++) {
            ld_cpu_attention_at(level, lv, q, kc, vc, H, KV, HD, P0, window, 0.3f, scores, 0, 7);
            ld_cpu_attention_at(level, lv, q, kc, vc, H, KV, HD, P0, window, 0.3f, scores, 7, T * H);
            CHECK_MSG(memcmp(lv, best, sizeof lv) == 0, "attention level %d differs (window %d)", level, window);
        }
        double worst = 0;
        for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
            double d = fabs((double)ref[i] - best[i]);
            if (d > worst) worst = d;
        }
        fprintf(stderr, "  attention window %d: max |cpu - ref| %.3g\n", window, worst);
        CHECK(worst < 1e-5);
    }
    return 0;
}

/* Attention of H heads over KV kv heads of size hd, decode and prefill,
 * from 1 to 48 positions (not a multiple of four or eight): every level
 * the bits of the portable one (ld_attention_with over the plain dot
 * product and axpy), the items in one call (tiles of four tokens and of
 * two where a token's heads fit one chunk) and cut at 5 (a kv head's
 * heads split between two calls, and a head alone). */
static int attention_case(int hd, int H, int KV)
{
    enum { T = 6, P0 = 42, POS = P0 + T };
    size_t nq = (size_t)T * (size_t)H * (size_t)hd, nkv = (size_t)POS * (size_t)KV * (size_t)hd;
    float *q = malloc(nq * sizeof *q), *kc = malloc(nkv * sizeof *kc), *vc = malloc(nkv * sizeof *vc);
    float *port = malloc(nq * sizeof *port), *lv = malloc(nq * sizeof *lv);
    float *scores = malloc(ld_cpu_attention_scratch(H, POS) * sizeof *scores);
    CHECK(q && kc && vc && port && lv && scores);
    for (size_t i = 0; i < nq; i++) q[i] = uniform();
    for (size_t i = 0; i < nkv; i++) {
        kc[i] = uniform();
        vc[i] = uniform();
    }
    for (int window = 0; window <= 5; window += 5)
        for (int pos0 = 0; pos0 <= P0; pos0 += P0) { /* the first positions (1 to 6 of them), then 43 to 48 */
            ld_cpu_attention_at(LD_CPU_PORTABLE, port, q, kc, vc, H, KV, hd, pos0, window, 0.125f, scores, 0,
                                (size_t)(T * H));
            for (int level = 1; level <= ld_cpu_simd(); level++) {
                memset(lv, 0, nq * sizeof *lv);
                ld_cpu_attention_at(level, lv, q, kc, vc, H, KV, hd, pos0, window, 0.125f, scores, 0,
                                    (size_t)(T * H));
                CHECK_MSG(memcmp(lv, port, nq * sizeof *lv) == 0,
                          "attention hd %d, %d heads over %d, pos0 %d window %d: level %d in one call differs from "
                          "the portable code", hd, H, KV, pos0, window, level);
                memset(lv, 0, nq * sizeof *lv);
                ld_cpu_attention_at(level, lv, q, kc, vc, H, KV, hd, pos0, window, 0.125f, scores, 0, 5);
                ld_cpu_attention_at(level, lv, q, kc, vc, H, KV, hd, pos0, window, 0.125f, scores, 5,
                                    (size_t)(T * H));
                CHECK_MSG(memcmp(lv, port, nq * sizeof *lv) == 0,
                          "attention hd %d, %d heads over %d, pos0 %d window %d: level %d differs from the portable "
                          "code", hd, H, KV, pos0, window, level);
            }
        }
    free(q);
    free(kc);
    free(vc);
    free(port);
    free(lv);
    free(scores);
    return 0;
}

/* Attention with head sizes a multiple of 8: with AVX2 and AVX-512 the
 * heads of a kv head together (2, 3, 4 of them; 5 as 4 and 1), a token's
 * runs of them in chunks of at most 12 heads (24 heads over 6: two chunks;
 * 9 over 3, SmolLM2's, one), the positions in blocks of 32 (48 positions:
 * a block and a part); the scores eight, then four positions at a time
 * (with AVX-512 a kv head's heads eight positions at a time together, the
 * rest a head at a time); the outputs of a head 64 then 8 columns at a
 * time (AVX2), of a kv head's heads 64 then 16 (AVX-512). */
static int test_attention_head_sizes(void)
{
    static const int hds[] = {8, 16, 48, 64, 72, 80, 136};
    static const int heads[][2] = {{6, 2}, {4, 2}, {8, 2}, {10, 2}, {3, 3}, {9, 3}, {24, 6}};
    for (size_t c = 0; c < sizeof hds / sizeof hds[0]; c++)
        for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
            CHECK(attention_case(hds[c], heads[h][0], heads[h][1]) == 0);
    return 0;
}

/* The attention's softmax at every level: the reference's bits on rows
 * of 0 to 40 and 100 scores (the eight-lane maximum's tail), random, then
 * with a NaN, an infinity of either sign, every score -inf, zeros of both
 * signs as the maximum, scores near expf's overflow, and every score
 * negative. */
static void softmax_row(float *row, int n, int variant)
{
    for (int j = 0; j < n; j++) row[j] = 8.0f * uniform();
    if (n == 0) return;
    int at = (int)(next_u32() % (uint32_t)n);
    switch (variant) {
    case 1: row[at] = NAN; break; /* every output the sum's NaN */
    case 2: row[at] = INFINITY; break;
    case 3: row[at] = -INFINITY; break;
    case 4: for (int j = 0; j < n; j++) row[j] = -INFINITY; break;
    case 5: for (int j = 0; j < n; j++) row[j] = j % 3 == 0 ? 0.0f : j % 3 == 1 ? -0.0f : -1.0f - uniform(); break;
    case 6: for (int j = 0; j < n; j++) row[j] = 88.0f + uniform(); break;
    case 7: for (int j = 0; j < n; j++) row[j] = -2.0f - 8.0f * fabsf(uniform()); break;
    case 8: /* differences from the maximum past -88 (libm's own calls) and into expf's subnormals */
        for (int j = 0; j < n; j++) row[j] = -120.0f * fabsf(uniform());
        row[at] = 0.0f;
        break;
    }
}

static int test_attention_softmax(void)
{
    enum { MAXN = 100, KINDS = 9 };
    float row[MAXN] = {0}, ref[MAXN], lv[MAXN];
    for (int variant = 0; variant < KINDS; variant++)
        for (int n = 0; n <= MAXN; n = n < 40 ? n + 1 : MAXN + (n == MAXN)) {
            softmax_row(row, n, variant);
            memcpy(ref, row, sizeof row);
            ld_attn_softmax(ref, n);
            for (int level = 0; level <= ld_cpu_simd(); level++) {
                memcpy(lv, row, sizeof row);
                ld_cpu_attn_softmax_at(level, lv, n);
                CHECK_MSG(memcmp(lv, ref, sizeof lv) == 0, "softmax of %d scores (variant %d): level %d differs", n,
                          variant, level);
            }
        }
    return 0;
}

/* floats [at, ...) of the sweep, `step` apart in their bits, into x (n of
 * them at most); returns how many, 0 past the last float */
static int sweep_floats(float *x, int n, uint64_t *at, uint64_t step)
{
    int k = 0;
    for (; k < n && *at <= UINT32_MAX; *at += step) {
        uint32_t u = (uint32_t)*at;
        memcpy(&x[k++], &u, sizeof u);
    }
    return k;
}

/* ld_cpu_exp_shifted_at against libm's expf of x - mx at every level the
 * probe keeps: every 61st float (every float with LD_TEST_EXPF_ALL=1, about
 * a minute), NaNs and infinities among them, through mx = 0 and 1.5 */
static int test_expf_levels(void)
{
    enum { N = 4096 };
    static float x[N], y[N];
    int top = ld_cpu_expf_level(LD_CPU_AVX512);
#ifdef __GLIBC__
    /* glibc 2.27 on has the expf the vector code reproduces: there the
     * probe must keep it (a broken vector code would fall back unseen) */
    int major = 0, minor = 0;
    if (sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) == 2 && (major > 2 || minor >= 27))
        CHECK_MSG(top == ld_cpu_simd(), "glibc %s: the probe keeps the vector expf up to level %d, not %d",
                  gnu_get_libc_version(), top, ld_cpu_simd());
#endif
    if (top < ld_cpu_simd())
        printf("# the vector expf above level %d not used: this libm's expf rounds otherwise\n", top);
    const char *all = getenv("LD_TEST_EXPF_ALL");
    uint64_t step = all && *all == '1' ? 1 : 61;
    for (int level = LD_CPU_AVX2; level <= top; level++)
        for (int pass = 0; pass < 2; pass++) {
            float mx = pass ? 1.5f : 0.0f;
            uint64_t at = pass ? 7 : 0, stride = pass ? step * 97 : step;
            int n;
            while ((n = sweep_floats(x, N - (int)(at % 5), &at, stride)) > 0) { /* lengths not all multiples of 16 */
                memcpy(y, x, (size_t)n * sizeof *y);
                ld_cpu_exp_shifted_at(level, y, n, mx);
                for (int i = 0; i < n; i++) {
                    float e = expf(x[i] - mx);
                    CHECK_MSG(memcmp(&e, &y[i], sizeof e) == 0 || (isnan(e) && isnan(y[i])),
                              "level %d: expf(%a - %g) is %a, the vector code says %a", level, x[i], mx, e, y[i]);
                }
            }
        }
    return 0;
}

/* rows of several lengths at once (ld_cpu_attn_softmax_rows_at): each row
 * the reference's bits, whichever rows share its call and whatever their
 * lengths (the four-row sums run to the shortest, then each alone) */
static int test_attention_softmax_rows(void)
{
    enum { ROWS = 11, MAXN = 70 };
    static float in[ROWS][MAXN], ref[ROWS][MAXN], lv[ROWS][MAXN];
    float *rows[ROWS];
    int n[ROWS];
    for (int round = 0; round < 40; round++) {
        int count = 1 + round % ROWS;
        for (int r = 0; r < count; r++) {
            n[r] = round % 3 == 0 ? 37 + r % 2 : (int)(next_u32() % MAXN); /* a tile's lengths, or any */
            softmax_row(in[r], n[r], (round + r) % 9);
            memcpy(ref[r], in[r], sizeof in[r]);
            ld_attn_softmax(ref[r], n[r]);
        }
        for (int level = 0; level <= ld_cpu_simd(); level++) {
            memcpy(lv, in, sizeof in);
            for (int r = 0; r < count; r++) rows[r] = lv[r];
            ld_cpu_attn_softmax_rows_at(level, rows, n, count);
            for (int r = 0; r < count; r++)
                CHECK_MSG(memcmp(lv[r], ref[r], (size_t)n[r] * sizeof(float)) == 0,
                          "round %d: row %d of %d (%d scores), level %d differs", round, r, count, n[r], level);
        }
    }
    return 0;
}

/* ld_cpu_swiglu_at against ld_ref_swiglu at every level: gates of
 * every size the exponential meets (past expf's +-88 both ways, zeros,
 * infinities, a NaN), ranges not a whole piece, out the gate itself (as
 * the MoE calls it) */
static int test_swiglu_levels(void)
{
    enum { N = 700 };
    static float gate[N], up[N], ref[N], lv[N];
    for (int i = 0; i < N; i++) {
        gate[i] = i % 7 == 0 ? 120.0f * uniform() : 12.0f * uniform();
        up[i] = 4.0f * uniform();
    }
    gate[3] = 0.0f, gate[4] = -0.0f, gate[5] = INFINITY, gate[6] = -INFINITY, gate[8] = NAN;
    gate[9] = 88.5f, gate[10] = -88.5f, gate[11] = -104.0f, gate[12] = 104.0f;
    const size_t ranges[][2] = { { 0, N }, { 5, 261 }, { 256, 513 }, { N - 1, N }, { 7, 7 } };
    for (size_t c = 0; c < sizeof ranges / sizeof ranges[0]; c++) {
        size_t i0 = ranges[c][0], i1 = ranges[c][1];
        memset(ref, 0, sizeof ref);
        ld_ref_swiglu(ref, gate, up, i0, i1);
        for (int level = 0; level <= ld_cpu_simd(); level++) {
            memset(lv, 0, sizeof lv);
            ld_cpu_swiglu_at(level, lv, gate, up, i0, i1);
            CHECK_MSG(memcmp(lv, ref, sizeof lv) == 0, "swiglu [%zu, %zu): level %d differs", i0, i1, level);
            memcpy(lv, gate, sizeof lv); /* in place */
            ld_cpu_swiglu_at(level, lv, lv, up, i0, i1);
            for (size_t i = i0; i < i1; i++)
                CHECK_MSG(memcmp(&lv[i], &ref[i], sizeof lv[i]) == 0, "swiglu in place: element %zu, level %d", i,
                          level);
        }
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_scaled_rows), LD_CASE(test_half_rows),
    LD_CASE(test_matmul_every_type),
    LD_CASE(test_matmul_cancellation),
    LD_CASE(test_matmul_tiny_activations), LD_CASE(test_matmul_large_activations), LD_CASE(test_matmul_prep_levels),
    LD_CASE(test_attention_levels),
    LD_CASE(test_attention_head_sizes),
    LD_CASE(test_attention_softmax),
    LD_CASE(test_attention_softmax_rows),
    LD_CASE(test_expf_levels),
    LD_CASE(test_swiglu_levels),
};

LD_TEST_MAIN(cases)
