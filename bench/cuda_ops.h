/* cuda_ops.h - what bench_cuda_ops's files share (cuda_ops.c: main and the
 * engine's ops; cuda_ops_ds.c: the DeepSeek and V4 kernels; cuda_ops_gemm.c:
 * the tensor-core GEMM against cuBLAS): timing, device buffers, the table's
 * lines. */
#ifndef LD_BENCH_CUDA_OPS_H
#define LD_BENCH_CUDA_OPS_H
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_ops.h"

extern int quick;         /* --quick */
extern const char *only;  /* --only SECTION (NULL: every section) */
extern int tc_ok;         /* the device runs ld_cu_matmul_tc (sm_80+) */

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng = 0x243F6A8885A308D3ull; /* each file's own: random data */

static inline uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

#define TRY(expr)                                                                              \
    do {                                                                                       \
        int e_ = (expr);                                                                       \
        if (e_) {                                                                              \
            fprintf(stderr, "bench_cuda_ops: %s: %s\n", #expr, ld_cu_error_string(e_));         \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

/* device bytes: random, but every f16 a small finite number (so that the
 * timed arithmetic is ordinary) */
static inline void *dev_random(size_t bytes)
{
    unsigned char *h = malloc(bytes ? bytes : 1);
    if (!h) {
        fprintf(stderr, "bench_cuda_ops: out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < bytes; i++) h[i] = (unsigned char)next_u32();
    for (size_t i = 1; i < bytes; i += 2) h[i] &= 0x3b; /* |f16| < 1, |bf16| tiny, f32 finite */
    void *d;
    TRY(ld_cu_malloc(&d, bytes));
    TRY(ld_cu_h2d(d, h, bytes));
    free(h);
    return d;
}

/* seconds per call of `fn` (best of 3 runs of `iters`) */
typedef int (*call_fn)(void *ctx);

static inline double time_it(call_fn fn, void *ctx, int iters)
{
    TRY(fn(ctx)); /* warm-up */
    TRY(ld_cu_sync());
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        for (int i = 0; i < iters; i++) TRY(fn(ctx));
        TRY(ld_cu_sync());
        double t = (now_s() - t0) / iters;
        if (t < best) best = t;
    }
    return best;
}

#define V_TC 2 /* mm_ctx.v: ld_cu_matmul_tc */

typedef struct mm_ctx {
    int v;
    float *out, *x;
    void *w;
    ld_kdt dt;
    int T, K, N;
} mm_ctx;

static inline int call_mm(void *p)
{
    mm_ctx *c = p;
    if (c->v == V_TC) return ld_cu_matmul_tc(c->out, c->x, c->w, c->dt, NULL, LD_KDT_F32, c->T, c->K, c->N, 0);
    return ld_cu_matmul(c->v, c->out, c->x, c->w, c->dt, NULL, LD_KDT_F32, c->T, c->K, c->N, 0);
}

typedef struct cp_ctx {
    void *dst, *src;
    size_t bytes;
} cp_ctx;

static inline int call_cp(void *p)
{
    cp_ctx *c = p;
    return ld_cu_d2d(c->dst, c->src, c->bytes);
}

typedef struct att_ctx {
    int v;
    float *out, *q, *k, *vc, *work;
    size_t work_n;
    int T, pos0;
} att_ctx;

static inline int call_att(void *p)
{
    att_ctx *c = p;
    return ld_cu_attention(c->v, c->out, c->q, c->k, c->vc, c->T, c->pos0, 9, 3, 64, 0, 0.125f, c->work, c->work_n);
}

static inline const char *dt_name(ld_kdt dt)
{
    static const char *n[] = {"f32", "f16", "bf16", "q4_0", "q4_1", "q8_0", "q4_k", "q6_k"};
    return n[dt];
}

static inline double copy_gbps(size_t bytes)
{
    cp_ctx c = {NULL, NULL, bytes};
    TRY(ld_cu_malloc(&c.dst, bytes));
    TRY(ld_cu_malloc(&c.src, bytes));
    double t = time_it(call_cp, &c, quick ? 20 : 200);
    TRY(ld_cu_free(c.dst));
    TRY(ld_cu_free(c.src));
    return 2.0 * (double)bytes / t / 1e9;
}

static inline void line(const char *op, const char *type, const char *shape, int T, const char *var, double t, double bytes,
                 double ref_gbps)
{
    double gbps = bytes / t / 1e9;
    printf("%-9s %-5s %-12s %4d  %-6s %10.2f %8.1f %6.1f%%\n", op, type, shape, T, var, t * 1e6, gbps,
           100.0 * gbps / ref_gbps);
}

/* the sections */
void bench_deepseek(double cp);
void bench_gemm(void);

#endif
