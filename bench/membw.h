/* membw.h - the memory read bandwidth of this machine, for the benches'
 * rooflines (bench_engine, bench_ds4_stack). */
#ifndef LD_BENCH_MEMBW_H
#define LD_BENCH_MEMBW_H

#include <stddef.h>

/* seconds on the monotonic clock */
double ld_bench_now(void);

/* How the best read of ld_bench_read_bandwidth_ex went. */
typedef struct ld_bench_bw {
    double gbs;          /* GB/s (10^9 bytes) */
    const char *kernel;  /* the read that gave it: "avx512", "avx2" or "scalar" */
    int streams;         /* independent streams per thread */
    int threads;         /* threads (each pinned to its own CPU where it can be) */
} ld_bench_bw;

/* The best read the machine can do of an `mb` MiB buffer (far above any
 * cache: the roofline's bandwidth) with `threads` threads (<= 64), each on
 * its own CPU and reading its share: every read kernel the CPU has
 * (AVX-512 and AVX2 loads into eight independent accumulators, and the
 * plain eight-lane C loop), as 1, 2 and 4 interleaved streams a thread,
 * best of 5 each; the best into *out.  Returns out->gbs, 0 when the
 * buffer cannot be mapped. */
double ld_bench_read_bandwidth_ex(size_t mb, int threads, ld_bench_bw *out);

/* ld_bench_read_bandwidth_ex's GB/s alone. */
double ld_bench_read_bandwidth(size_t mb, int threads);

#endif /* LD_BENCH_MEMBW_H */
