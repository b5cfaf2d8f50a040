/* cuda_ops.c - times the CUDA kernels (kernels/cuda_ops.h) at
 * SmolLM2-135M sizes (hidden 576, intermediate 1536, 9 heads of 64 over 3
 * kv heads, vocab 49152) against a device-to-device cudaMemcpy of the
 * same weight bytes, measured in the same run on the same device.
 *
 * One line per measurement:
 *   op  type  shape  T  variant  us/call  GB/s  %copy
 * GB/s is the bytes the op must read and write (weights once, activations)
 * over the time; %copy compares it with the copy's bandwidth (bytes read +
 * written over its time).  A benchmark: nothing is asserted; exit 0 when
 * everything ran, 2 when something could not (no device, a CUDA error).
 *
 * Usage: bench_cuda_ops [--quick] */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_ops.h"

static int quick;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint32_t next_u32(void)
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
static void *dev_random(size_t bytes)
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

static double time_it(call_fn fn, void *ctx, int iters)
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

typedef struct mm_ctx {
    int v;
    float *out, *x;
    void *w;
    ld_kdt dt;
    int T, K, N;
} mm_ctx;

static int call_mm(void *p)
{
    mm_ctx *c = p;
    return ld_cu_matmul(c->v, c->out, c->x, c->w, c->dt, NULL, LD_KDT_F32, c->T, c->K, c->N, 0);
}

typedef struct cp_ctx {
    void *dst, *src;
    size_t bytes;
} cp_ctx;

static int call_cp(void *p)
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

static int call_att(void *p)
{
    att_ctx *c = p;
    return ld_cu_attention(c->v, c->out, c->q, c->k, c->vc, c->T, c->pos0, 9, 3, 64, 0, 0.125f, c->work, c->work_n);
}

static const char *dt_name(ld_kdt dt)
{
    static const char *n[] = {"f32", "f16", "bf16", "q4_0", "q4_1", "q8_0", "q4_k", "q6_k"};
    return n[dt];
}

static double copy_gbps(size_t bytes)
{
    cp_ctx c = {NULL, NULL, bytes};
    TRY(ld_cu_malloc(&c.dst, bytes));
    TRY(ld_cu_malloc(&c.src, bytes));
    double t = time_it(call_cp, &c, quick ? 20 : 200);
    TRY(ld_cu_free(c.dst));
    TRY(ld_cu_free(c.src));
    return 2.0 * (double)bytes / t / 1e9;
}

static void line(const char *op, const char *type, const char *shape, int T, const char *var, double t, double bytes,
                 double ref_gbps)
{
    double gbps = bytes / t / 1e9;
    printf("%-9s %-5s %-12s %4d  %-6s %10.2f %8.1f %6.1f%%\n", op, type, shape, T, var, t * 1e6, gbps,
           100.0 * gbps / ref_gbps);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else {
            fprintf(stderr, "usage: bench_cuda_ops [--quick]\n");
            return 2;
        }
    }
    int n = 0, e = ld_cu_device_count(&n);
    if (e || !n) {
        printf("bench_cuda_ops: no CUDA device (%s); nothing measured\n", e ? ld_cu_error_string(e) : "0 devices");
        return 2;
    }
    char name[256];
    int major = 0, minor = 0, sms = 0;
    TRY(ld_cu_device_info(0, name, sizeof name, &major, &minor, &sms));
    printf("device: %s (sm_%d%d, %d SMs)\n", name, major, minor, sms);

    /* the lm_head's f32 bytes: big enough for a steady copy bandwidth */
    double cp = copy_gbps((size_t)49152 * 576 * 4);
    printf("cudaMemcpy device-to-device, %zu MB: %.1f GB/s (read + write)\n\n", (size_t)49152 * 576 * 4 >> 20, cp);
    printf("%-9s %-5s %-12s %4s  %-6s %10s %8s %7s\n", "op", "type", "N x K", "T", "kernel", "us/call", "GB/s",
           "%copy");

    struct { int N, K; } shapes[] = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
    ld_kdt types[] = {LD_KDT_F32, LD_KDT_F16, LD_KDT_BF16, LD_KDT_Q8_0, LD_KDT_Q4_0, LD_KDT_Q4_1, LD_KDT_Q4_K,
                      LD_KDT_Q6_K};
    int Ts[] = {1, 8, 64};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int N = shapes[si].N, K = shapes[si].K;
            ld_kdt dt = types[ti];
            if ((dt == LD_KDT_Q4_K || dt == LD_KDT_Q6_K) && K % 256) continue;
            if (quick && si != 2 && si != 4) continue;
            size_t wb = ld_cu_row_bytes(dt, K) * (size_t)N;
            void *w = dev_random(wb);
            float *x = dev_random(sizeof(float) * 64 * (size_t)K);
            float *out;
            TRY(ld_cu_malloc((void **)&out, sizeof(float) * 64 * (size_t)N));
            /* x as small floats: random f32 bits masked above are finite */
            char shape[32];
            snprintf(shape, sizeof shape, "%dx%d", N, K);
            for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
                int T = Ts[k];
                if (quick && T == 64) continue;
                double bytes = (double)wb + 4.0 * T * ((double)K + (double)N);
                for (int v = 1; v >= 0; v--) {
                    if (v == LD_CU_REF && (T > 8 || N > 2000) && quick) continue;
                    mm_ctx c = {v, out, x, w, dt, T, K, N};
                    int iters = v == LD_CU_REF ? 5 : (quick ? 20 : 100);
                    line("matmul", dt_name(dt), shape, T, v ? "custom" : "ref", time_it(call_mm, &c, iters), bytes, cp);
                }
            }
            TRY(ld_cu_free(w));
            TRY(ld_cu_free(x));
            TRY(ld_cu_free(out));
        }
    }

    /* decode attention: one query of 9 heads against `ctx` cached positions */
    int ctxs[] = {128, 1024, 4096};
    for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++) {
        int ctx = ctxs[i];
        size_t kvn = (size_t)ctx * 3 * 64;
        att_ctx c = {0};
        c.q = dev_random(sizeof(float) * 9 * 64);
        c.k = dev_random(sizeof(float) * kvn);
        c.vc = dev_random(sizeof(float) * kvn);
        TRY(ld_cu_malloc((void **)&c.out, sizeof(float) * 9 * 64));
        c.T = 1;
        c.pos0 = ctx - 1;
        c.work_n = ld_cu_attention_work(LD_CU_CUSTOM, 1, 9, 64, c.pos0, 1);
        TRY(ld_cu_malloc((void **)&c.work, sizeof(float) * c.work_n));
        char shape[32];
        snprintf(shape, sizeof shape, "ctx %d", ctx);
        double bytes = 2.0 * 4.0 * (double)kvn;
        for (int v = 1; v >= 0; v--) {
            c.v = v;
            line("attention", "f32", shape, 1, v ? "custom" : "ref", time_it(call_att, &c, v ? 100 : 5), bytes, cp);
        }
        TRY(ld_cu_free(c.q));
        TRY(ld_cu_free(c.k));
        TRY(ld_cu_free(c.vc));
        TRY(ld_cu_free(c.out));
        TRY(ld_cu_free(c.work));
    }
    return 0;
}
