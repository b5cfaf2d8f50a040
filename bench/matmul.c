/* matmul.c - bench_matmul: the decode matvec (one token) of the fast CPU
 * kernels and of the `matmul=q8` variant, alone, in GB/s of weight bytes:
 * from a matrix that stays in L2 (what the kernels compute) and from one
 * far larger than the caches (what they stream), next to the machine's best
 * read of the same size (bench/membw.c).  What bench/RESULTS-cpu.md's
 * decode notes cite; see bench/README.md.
 *
 *   bench_matmul [--mem-mb N] [--runs N]
 *
 * Prints `matvec TYPE K=.. PLACE KERNEL LEVEL  GB/s` lines, then the
 * read probe's, then the overlap table: a synthetic stream with F fmas of
 * arithmetic per 64 bytes, from L1 and from memory, for F = 0 .. 32 (how
 * fast a kernel that computes at a given rate can read this machine's
 * memory, one thread).  The weights are random blocks with small f16 scales, on
 * 2 MiB pages where the kernel gives them (as the engine's weight arena). */
#define _DEFAULT_SOURCE /* madvise */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_q8.h"
#include "membw.h"

typedef struct matrix {
    unsigned char *w;
    size_t bytes, cap;
    int K, N;
    ld_kdt dt;
} matrix;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* about `mb` MB of dt rows of K, a whole number of 16-row groups */
static int matrix_make(matrix *m, ld_kdt dt, int K, double mb)
{
    size_t block = dt == LD_KDT_Q8_0 ? 34 : 20, row = (size_t)(K / 32) * block;
    size_t n = (size_t)(mb * 1e6) / row / 16 * 16;
    m->dt = dt, m->K = K, m->N = (int)(n ? n : 16), m->bytes = (size_t)m->N * row;
    m->cap = (m->bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    m->w = aligned_alloc(2u << 20, m->cap);
    if (!m->w) return -1;
#ifdef MADV_HUGEPAGE
    madvise(m->w, m->cap, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < m->bytes; i += 4) { /* four random bytes a call (bytes: a multiple of 4) */
        uint32_t r = rnd();
        memcpy(m->w + i, &r, sizeof r);
    }
    for (size_t b = 0; b < m->bytes / block; b++) { /* d (and Q4_1's m): small normal f16s */
        uint16_t d = (uint16_t)(0x2000 + (rnd() & 0xff)), mn = (uint16_t)(0xa000 + (rnd() & 0xff));
        memcpy(m->w + b * block, &d, 2);
        if (dt == LD_KDT_Q4_1) memcpy(m->w + b * block + 2, &mn, 2);
    }
    return 0;
}

/* the best time of `runs` matvecs of m by x at `level`, q8 or the fast
 * kernels (packed: the kernel's packed copy, or NULL) */
static double matvec_best(const matrix *m, const void *packed, const float *x, float *out, float *prep,
                          float *scratch, int q8, int level, int runs, int inner)
{
    double best = 1e30;
    for (int r = 0; r < runs; r++) {
        double t0 = ld_bench_now();
        for (int i = 0; i < inner; i++) {
            if (q8) {
                ld_cpu_q8_prep_at(level, prep, x, 1, m->K);
                ld_cpu_matmul_q8_at(level, out, prep, m->w, packed, m->dt, NULL, LD_KDT_F32, 1, m->K, m->N, 0, 0,
                                    (size_t)m->N);
            } else {
                ld_cpu_matmul_prep(prep, x, m->dt, 1, m->K);
                ld_cpu_matmul_at(level, out, x, prep, m->w, packed, m->dt, NULL, LD_KDT_F32, 1, m->K, m->N, 0, scratch, 0,
                                 (size_t)m->N);
            }
        }
        double t = (ld_bench_now() - t0) / inner;
        if (t < best) best = t;
    }
    return best;
}

/* n bytes on 2 MiB pages, as the backend's weight arena gives them; NULL
 * when the memory is not there (n = 0 included) */
static void *huge_alloc(size_t n)
{
    size_t cap = (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    void *p = cap ? aligned_alloc(2u << 20, cap) : NULL;
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, cap, MADV_HUGEPAGE);
#endif
    return p;
}

/* ---------------------------------------------------------------- overlap */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define OVERLAP_X86 1
/* the packed decode's prefetches (kernels/cpu/cpu_avx512.c: PACK_AHEAD
 * into L1, PACK_FAR into L2), which the stand-in makes as the kernel does */
#define OVERLAP_AHEAD 3072
#define OVERLAP_FAR 16384

/* A stand-in for a decode kernel with F fused multiply-adds of arithmetic
 * per 64 bytes of weights: n bytes at p read in order, each 64-byte line
 * loaded as two 32-byte halves (added into two accumulators, so that F = 0
 * is a plain read), then fed to F fmas spread over eight accumulators (as
 * many independent chains as two FMA units need); when `prefetch`, each
 * line asked for as the packed decode asks (OVERLAP_AHEAD on into L1,
 * OVERLAP_FAR on into L2).  Inlined into one function per F (a constant:
 * the accumulators stay in registers).  What the overlap table measures:
 * how fast a stream of that arithmetic reads memory against how fast it
 * computes from L1. */
__attribute__((target("avx2,fma"), always_inline)) static inline float overlap_pass(const unsigned char *p, size_t n,
                                                                                  int prefetch, const int F)
{
    __m256 acc[8], k = _mm256_set1_ps(0.999f);
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    for (size_t o = 0; o < n; o += 64) {
        if (prefetch) {
            _mm_prefetch((const char *)p + o + OVERLAP_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)p + o + OVERLAP_FAR, _MM_HINT_T1);
        }
        __m256 h0 = _mm256_load_ps((const float *)(const void *)(p + o));
        __m256 h1 = _mm256_load_ps((const float *)(const void *)(p + o + 32));
        acc[0] = _mm256_add_ps(acc[0], h0);
        acc[1] = _mm256_add_ps(acc[1], h1);
#pragma GCC unroll 32
        for (int f = 0; f < F; f++) acc[(f + 2) % 8] = _mm256_fmadd_ps(acc[(f + 2) % 8], k, f % 2 ? h1 : h0);
    }
    for (int i = 1; i < 8; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
    float v[8];
    _mm256_storeu_ps(v, acc[0]);
    return v[0];
}

#define OVERLAP_PASS(F)                                                                               \
    __attribute__((target("avx2,fma"))) static float overlap_pass_##F(const unsigned char *p, size_t n, \
                                                                      int prefetch)                     \
    {                                                                                                  \
        return overlap_pass(p, n, prefetch, F);                                                        \
    }
OVERLAP_PASS(0)
OVERLAP_PASS(4)
OVERLAP_PASS(8)
OVERLAP_PASS(12)
OVERLAP_PASS(16)
OVERLAP_PASS(24)
OVERLAP_PASS(32)

typedef float (*overlap_fn)(const unsigned char *p, size_t n, int prefetch);

static volatile float overlap_sink; /* the passes' results, so that they stay */

/* the best GB/s of `runs` rounds of `reps` passes of fn over n bytes at p */
static double overlap_rate(overlap_fn fn, const unsigned char *p, size_t n, int prefetch, int reps, int runs)
{
    double best = 1e30;
    for (int r = 0; r < runs; r++) {
        double t0 = ld_bench_now();
        for (int i = 0; i < reps; i++) overlap_sink += fn(p, n, prefetch);
        double t = (ld_bench_now() - t0) / reps;
        if (t < best) best = t;
    }
    return (double)n / best / 1e9;
}

/* The overlap table: for each F, the stand-in's rate from a 16 KiB buffer
 * in L1 (its arithmetic alone) and from an mb MiB one (prefetched as the
 * packed decode prefetches, and not): the memory rate a kernel that computes at a
 * given rate can expect on this machine.  0, or -1 without AVX2 or the
 * memory. */
static int overlap_table(size_t mb, int runs)
{
    static const struct { int f; overlap_fn fn; } passes[] = {
        {0, overlap_pass_0}, {4, overlap_pass_4}, {8, overlap_pass_8}, {12, overlap_pass_12},
        {16, overlap_pass_16}, {24, overlap_pass_24}, {32, overlap_pass_32}};
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("overlap: skipped (no AVX2 and FMA)\n");
        return 0;
    }
    size_t small = 16u << 10, big = mb << 20;
    unsigned char *p = huge_alloc(big); /* prefetches past its end do not fault */
    if (!p) {
        fprintf(stderr, "bench_matmul: out of memory for %zu MiB\n", mb);
        return -1;
    }
    memset(p, 0x3f, big); /* every float 0.747: no denormals, no overflow */
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        double l1 = overlap_rate(passes[i].fn, p, small, 0, (int)(big / small / 4), runs);
        double pf = overlap_rate(passes[i].fn, p, big, 1, 1, runs);
        double none = overlap_rate(passes[i].fn, p, big, 0, 1, runs);
        printf("overlap fma/64B %2d  l1 %7.2f GB/s  memory %6.2f GB/s (prefetched %d / %d), %6.2f (not)\n",
               passes[i].f, l1, pf, OVERLAP_AHEAD, OVERLAP_FAR, none);
    }
    free(p);
    return 0;
}
#else
static int overlap_table(size_t mb, int runs)
{
    (void)mb, (void)runs;
    printf("overlap: skipped (x86-64 only)\n");
    return 0;
}
#endif

/* 0, or -1 (said on stderr) when the memory is not there */
static int bench_one(ld_kdt dt, int K, double mb, const char *place, int runs)
{
    static const char *const level_name[] = {"portable", "avx2", "avx512"};
    matrix m;
    if (matrix_make(&m, dt, K, mb)) {
        fprintf(stderr, "bench_matmul: out of memory for %.0f MB\n", mb);
        return -1;
    }
    float *x = malloc((size_t)K * sizeof *x), *out = malloc((size_t)m.N * sizeof *out);
    size_t np = ld_cpu_q8_prep_size(1, K) + ld_cpu_matmul_prep_size(dt, 1, K) + 64;
    size_t ns = ld_cpu_matmul_scratch(dt, 1, K) + 64;
    float *prep = malloc(np * sizeof *prep), *scratch = malloc(ns * sizeof *scratch);
    /* the kernels' packed copies: q8's, and the fast one's where the
     * machine's kernels read it (AVX-512), as the backend makes them */
    void *packed = huge_alloc(ld_cpu_q8_packed_size(dt, K, m.N));
    void *fpacked = ld_cpu_fast_reads_packed(dt) ? huge_alloc(ld_cpu_fast_packed_size(dt, K, m.N)) : NULL;
    if (packed) ld_cpu_q8_pack(packed, m.w, dt, K, m.N, 0);
    if (fpacked) ld_cpu_fast_pack(fpacked, m.w, dt, K, m.N, 0);
    int ok = x && out && prep && scratch && packed;
    if (!ok) fprintf(stderr, "bench_matmul: out of memory for the activations of K=%d\n", K);
    else {
        for (int i = 0; i < K; i++) x[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
        int inner = mb < 8 ? (int)(20 / mb) + 1 : 1;
        /* kernel 0: the fast one from the rows as they lie; 1: q8 from its
         * packed copy; 2: q8 without it (packing each group as it runs);
         * 3: the fast one from its packed copy (what the backend runs on
         * AVX-512) */
        static const char *const kernel_name[] = {"fast", "q8", "q8row", "fastpk"};
        const void *const kernel_packed[] = {NULL, packed, NULL, fpacked};
        int q8_best = ld_cpu_q8_simd() >= LD_CPU_AVX2 ? LD_CPU_AVX2 : LD_CPU_PORTABLE; /* q8's matmul: AVX2 at most */
        for (int k = 0; k <= 3; k++) {
            int q8 = k == 1 || k == 2, best = q8 ? q8_best : ld_cpu_simd(), lowest = LD_CPU_AVX2;
            if (k == 3) lowest = fpacked ? LD_CPU_AVX512 : best + 1; /* only AVX-512 reads the packed copy */
            for (int level = best; level >= lowest; level--) {
                double t = matvec_best(&m, kernel_packed[k], x, out, prep, scratch, q8, level, runs, inner);
                printf("matvec %s K=%d %-6s %-5s %-8s %7.2f GB/s\n", dt == LD_KDT_Q8_0 ? "q8_0" : "q4_1", K, place,
                       kernel_name[k], level_name[level], (double)m.bytes / t / 1e9);
            }
        }
    }
    free(x);
    free(out);
    free(prep);
    free(scratch);
    free(packed);
    free(fpacked);
    free(m.w);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    long mem_mb = 256;
    int runs = 5;
    int bad = argc % 2 == 0;
    for (int i = 1; i + 1 < argc && !bad; i += 2) {
        if (!strcmp(argv[i], "--mem-mb")) mem_mb = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
        else bad = 1;
    }
    if (bad || mem_mb < 16 || runs < 1) {
        fprintf(stderr, "usage: bench_matmul [--mem-mb N (>= 16, default 256)] [--runs N (default 5)]\n");
        return 2;
    }
    static const struct { ld_kdt dt; int K; } shapes[] = {
        {LD_KDT_Q4_1, 576}, {LD_KDT_Q4_1, 1536}, {LD_KDT_Q8_0, 576}};
    int failed = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        failed |= bench_one(shapes[s].dt, shapes[s].K, 1.0, "l2", runs);
        failed |= bench_one(shapes[s].dt, shapes[s].K, (double)mem_mb, "memory", runs);
    }
    ld_bench_bw bw;
    ld_bench_read_bandwidth_ex((size_t)mem_mb, 1, &bw);
    printf("read probe, %ld MiB, 1 thread: %.2f GB/s (%s, %d stream(s))\n", mem_mb, bw.gbs, bw.kernel, bw.streams);
    failed |= overlap_table((size_t)mem_mb, runs);
    return failed ? 1 : 0;
}
