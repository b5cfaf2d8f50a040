/* membw.c - see membw.h. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "membw.h"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

double ld_bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct bw_part {
    const float *p;
    size_t n;
    float sum;
} bw_part;

static void *bw_read(void *arg)
{
    bw_part *b = arg;
    float lane[8] = {0};
    for (size_t i = 0; i + 8 <= b->n; i += 8)
        for (int l = 0; l < 8; l++) lane[l] += b->p[i + (size_t)l];
    b->sum = lane[0] + lane[1] + lane[2] + lane[3] + lane[4] + lane[5] + lane[6] + lane[7];
    return NULL;
}

double ld_bench_read_bandwidth(size_t mb, int threads)
{
    size_t n = mb << 18; /* floats */
    float *p = mmap(NULL, n * sizeof *p, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
    for (size_t i = 0; i < n; i++) p[i] = (float)(i & 1023);
    double best = 0, sink = 0;
    bw_part parts[64];
    pthread_t th[64];
    if (threads > 64) threads = 64;
    for (int r = 0; r < 5; r++) {
        double t0 = ld_bench_now();
        for (int i = 0; i < threads; i++) {
            parts[i].p = p + n * (size_t)i / (size_t)threads;
            parts[i].n = n / (size_t)threads;
            if (i) pthread_create(&th[i], NULL, bw_read, &parts[i]);
        }
        bw_read(&parts[0]);
        for (int i = 1; i < threads; i++) pthread_join(th[i], NULL);
        double gbs = (double)(n * sizeof *p) / (ld_bench_now() - t0) / 1e9;
        for (int i = 0; i < threads; i++) sink += parts[i].sum;
        if (gbs > best) best = gbs;
    }
    munmap(p, n * sizeof *p);
    return sink == -1.0 ? 0 : best; /* the sums are used, so the reads stay */
}

