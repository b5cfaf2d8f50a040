/* membw.h - the memory read bandwidth of this machine, for the benches'
 * rooflines (bench_engine, bench_ds4_stack). */
#ifndef LD_BENCH_MEMBW_H
#define LD_BENCH_MEMBW_H

#include <stddef.h>

/* seconds on the monotonic clock */
double ld_bench_now(void);

/* GB/s (10^9 bytes) of the best of 5 reads of an `mb` MiB buffer by
 * `threads` threads (<= 64), each summing its share in eight fp32 lanes
 * (the read pattern of a matmul over a weight matrix); 0 when the buffer
 * cannot be mapped. */
double ld_bench_read_bandwidth(size_t mb, int threads);

#endif /* LD_BENCH_MEMBW_H */
