/* membw.c - see membw.h.
 *
 * The roofline's bandwidth must be the best the machine can read, or the
 * engine's fraction of it reads high: the old probe (one loop of eight
 * fp32 lanes, built for SSE2, two dependency chains) read 17-27% below an
 * AVX2 read.  So every read here goes through wide loads into eight
 * independent accumulators (XOR: one-cycle latency, never the bound), each
 * thread on its own CPU, its share cut into 1, 2 or 4 streams read in
 * turn (some prefetchers keep more streams in flight), and the best of
 * every kernel x streams, 5 reads each, is the answer. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE, CPU_SET, pthread_setaffinity_np */
#include "membw.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MEMBW_X86 1
#endif

#define CHUNK 256 /* bytes one stream gives per turn: eight 32-byte loads */
#define MAX_STREAMS 4
#define MAX_THREADS 64

static volatile uint64_t membw_sink; /* the reads' results go here, so they stay */

double ld_bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* s[0..S) each n bytes (a multiple of CHUNK), read a chunk of each in turn;
 * returns something that depends on every byte read */
typedef uint64_t (*read_fn)(const unsigned char *const *s, int S, size_t n);

static uint64_t read_scalar(const unsigned char *const *s, int S, size_t n)
{
    uint64_t acc[8] = {0};
    for (size_t i = 0; i < n; i += CHUNK)
        for (int k = 0; k < S; k++) {
            const unsigned char *p = s[k] + i;
            for (int c = 0; c < CHUNK; c += 64)
                for (int l = 0; l < 8; l++) {
                    uint64_t v;
                    memcpy(&v, p + c + 8 * l, sizeof v);
                    acc[l] ^= v;
                }
        }
    return acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
}

#ifdef MEMBW_X86
__attribute__((target("avx2"))) static uint64_t read_avx2(const unsigned char *const *s, int S, size_t n)
{
    __m256i a[8];
    for (int l = 0; l < 8; l++) a[l] = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += CHUNK)
        for (int k = 0; k < S; k++) {
            const __m256i *p = (const __m256i *)(s[k] + i);
            for (int l = 0; l < 8; l++) a[l] = _mm256_xor_si256(a[l], _mm256_load_si256(p + l));
        }
    for (int l = 1; l < 8; l++) a[0] = _mm256_xor_si256(a[0], a[l]);
    return (uint64_t)_mm256_extract_epi64(a[0], 0) ^ (uint64_t)_mm256_extract_epi64(a[0], 3);
}

/* four 64-byte loads per chunk, the eight accumulators over two chunks */
__attribute__((target("avx512f"))) static uint64_t read_avx512(const unsigned char *const *s, int S, size_t n)
{
    __m512i a[8];
    for (int l = 0; l < 8; l++) a[l] = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 2 * CHUNK)
        for (int k = 0; k < S; k++) {
            const __m512i *p = (const __m512i *)(s[k] + i);
            for (int l = 0; l < 8; l++) a[l] = _mm512_xor_si512(a[l], _mm512_load_si512(p + l));
        }
    for (int l = 1; l < 8; l++) a[0] = _mm512_xor_si512(a[0], a[l]);
    return (uint64_t)_mm512_reduce_or_epi64(a[0]);
}
#endif

typedef struct bw_kernel {
    const char *name;
    read_fn fn;
    size_t step; /* bytes of a stream per turn */
} bw_kernel;

/* the kernels this CPU can run, best first; returns how many */
static int kernels(bw_kernel k[3])
{
    int n = 0;
#ifdef MEMBW_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) k[n++] = (bw_kernel){"avx512", read_avx512, 2 * CHUNK};
    if (__builtin_cpu_supports("avx2")) k[n++] = (bw_kernel){"avx2", read_avx2, CHUNK};
#endif
    k[n++] = (bw_kernel){"scalar", read_scalar, CHUNK};
    return n;
}

typedef struct bw_part {
    const unsigned char *p; /* the thread's share */
    size_t n;               /* its bytes, a multiple of S * step */
    int S, cpu;             /* streams; the CPU to pin to (-1: none) */
    read_fn fn;
    pthread_barrier_t *start;
    uint64_t sink;
    double t0, t1; /* the thread's own start and end of its read */
} bw_part;

static void *bw_read(void *arg)
{
    bw_part *b = arg;
    if (b->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(b->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
    }
    const unsigned char *s[MAX_STREAMS];
    size_t each = b->n / (size_t)b->S;
    for (int k = 0; k < b->S; k++) s[k] = b->p + (size_t)k * each;
    pthread_barrier_wait(b->start);
    b->t0 = ld_bench_now();
    b->sink = b->fn(s, b->S, each);
    b->t1 = ld_bench_now();
    return NULL;
}

/* the CPUs this process may run on, in order, up to `max`; how many */
static int allowed_cpus(int *cpu, int max)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    for (int c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &set)) cpu[n++] = c;
    return n;
}

/* one timed read of the n bytes at p by `threads` threads; GB/s */
static double read_once(const unsigned char *p, size_t n, int threads, const int *cpu, int ncpu,
                        const bw_kernel *k, int S, uint64_t *sink)
{
    bw_part parts[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    pthread_barrier_t start;
    size_t unit = (size_t)S * k->step, share = n / (size_t)threads / unit * unit;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    int made = 0;
    for (int i = 0; i < threads; i++) {
        parts[i] = (bw_part){p + (size_t)i * share, share, S, threads <= ncpu ? cpu[i] : -1, k->fn, &start, 0, 0, 0};
        if (pthread_create(&th[i], NULL, bw_read, &parts[i]) != 0) break;
        made++;
    }
    if (made < threads) { /* cannot measure: let the made ones go */
        pthread_barrier_destroy(&start);
        return 0;
    }
    pthread_barrier_wait(&start);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    /* from the first thread's start to the last one's end, as the threads
     * saw them: the caller's own clock could start after a reader ended,
     * where a loaded machine leaves it waiting to run after the barrier */
    double t0 = parts[0].t0, t1 = parts[0].t1;
    for (int i = 1; i < threads; i++) {
        if (parts[i].t0 < t0) t0 = parts[i].t0;
        if (parts[i].t1 > t1) t1 = parts[i].t1;
    }
    double secs = t1 - t0;
    pthread_barrier_destroy(&start);
    for (int i = 0; i < threads; i++) *sink ^= parts[i].sink;
    return (double)(share * (size_t)threads) / secs / 1e9;
}

double ld_bench_read_bandwidth_ex(size_t mb, int threads, ld_bench_bw *out)
{
    ld_bench_bw best = {0, "none", 0, threads};
    size_t n = mb << 20;
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        if (out) *out = best;
        return 0;
    }
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE); /* fewer TLB misses, as the engine's mapped weights may get */
#endif
    for (size_t i = 0; i < n; i += 64) memset(p + i, (int)(i >> 6) & 255, 64);
    int cpu[MAX_THREADS];
    int ncpu = allowed_cpus(cpu, MAX_THREADS);
    bw_kernel ks[3];
    int nk = kernels(ks);
    uint64_t sink = 0;
    for (int ki = 0; ki < nk; ki++)
        for (int S = 1; S <= MAX_STREAMS; S *= 2)
            for (int r = 0; r < 5; r++) {
                double gbs = read_once(p, n, threads, cpu, ncpu, &ks[ki], S, &sink);
                if (gbs > best.gbs) best = (ld_bench_bw){gbs, ks[ki].name, S, threads};
            }
    munmap(p, n);
    membw_sink ^= sink;
    if (out) *out = best;
    return best.gbs;
}

double ld_bench_read_bandwidth(size_t mb, int threads)
{
    return ld_bench_read_bandwidth_ex(mb, threads, NULL);
}
