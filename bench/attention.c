/* attention.c - bench_attention: one decode step's attention over a model's
 * layers (SmolLM2-135M's shape by default: 30 layers, 9 heads over 3 kv
 * heads of 64), the fast CPU kernel (cpu_ops.h) taking the token's heads
 * together against the same kernel handed one head a call (each head's k
 * and v rows read at the stride of a whole cache row, as before
 * 2026-12-04), in one run.  A 64 MiB read between steps stands for the
 * weights a decode step streams, so the cache comes from memory as it
 * does in a replay.  See bench/README.md.
 *
 *   bench_attention [--ctx N]... [--runs N] [--layers N] [--heads H KV HD]
 *
 * Prints `attention ctx=N  per-head US  together US  us/step  RATIO`
 * lines (the best of --runs steps each, interleaved), and the KV bytes a
 * step reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_ops.h"

typedef struct shape {
    int layers, heads, kv, hd;
} shape;

typedef struct caches {
    float **k, **v, *q, *out, *scores;
    unsigned char *flush;
    size_t flush_bytes;
} caches;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float uniform(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

static int caches_init(caches *c, const shape *sh, int ctx)
{
    size_t row = (size_t)sh->kv * (size_t)sh->hd, nq = (size_t)sh->heads * (size_t)sh->hd;
    unsigned s = 1;
    memset(c, 0, sizeof *c);
    c->k = calloc((size_t)sh->layers, sizeof *c->k);
    c->v = calloc((size_t)sh->layers, sizeof *c->v);
    c->q = malloc(nq * sizeof *c->q);
    c->out = malloc(nq * sizeof *c->out);
    c->scores = malloc(ld_cpu_attention_scratch(sh->heads, ctx) * sizeof *c->scores);
    c->flush_bytes = (size_t)64 << 20;
    c->flush = malloc(c->flush_bytes);
    if (!c->k || !c->v || !c->q || !c->out || !c->scores || !c->flush) return -1;
    memset(c->flush, 1, c->flush_bytes);
    for (size_t i = 0; i < nq; i++) c->q[i] = uniform(&s);
    for (int l = 0; l < sh->layers; l++) {
        c->k[l] = malloc((size_t)ctx * row * sizeof(float));
        c->v[l] = malloc((size_t)ctx * row * sizeof(float));
        if (!c->k[l] || !c->v[l]) return -1;
        for (size_t i = 0; i < (size_t)ctx * row; i++) {
            c->k[l][i] = uniform(&s);
            c->v[l][i] = uniform(&s);
        }
    }
    return 0;
}

static void caches_free(caches *c, const shape *sh)
{
    for (int l = 0; c->k && c->v && l < sh->layers; l++) {
        free(c->k[l]);
        free(c->v[l]);
    }
    free(c->k);
    free(c->v);
    free(c->q);
    free(c->out);
    free(c->scores);
    free(c->flush);
}

/* one decode step at position ctx - 1 over every layer, the heads in
 * calls of `per_call`; seconds, after the caches were pushed out */
static double step(caches *c, const shape *sh, int ctx, int per_call)
{
    volatile unsigned char sink = 0;
    for (size_t i = 0; i < c->flush_bytes; i += 64) sink = (unsigned char)(sink + c->flush[i]);
    double t = now();
    for (int l = 0; l < sh->layers; l++)
        for (int h = 0; h < sh->heads; h += per_call) {
            size_t h1 = (size_t)(h + per_call < sh->heads ? h + per_call : sh->heads);
            ld_cpu_attention(c->out, c->q, c->k[l], c->v[l], sh->heads, sh->kv, sh->hd, ctx - 1, 0, 0.125f,
                             c->scores, (size_t)h, h1);
        }
    return now() - t;
}

static int bench_ctx(const shape *sh, int ctx, int runs)
{
    caches c;
    if (caches_init(&c, sh, ctx)) {
        caches_free(&c, sh);
        fprintf(stderr, "bench_attention: out of memory for a context of %d\n", ctx);
        return -1;
    }
    double one = 1e9, all = 1e9;
    for (int r = 0; r < runs; r++) {
        double a = step(&c, sh, ctx, 1), b = step(&c, sh, ctx, sh->heads);
        if (a < one) one = a;
        if (b < all) all = b;
    }
    double kv = 2.0 * sh->layers * ctx * sh->kv * sh->hd * sizeof(float);
    printf("attention ctx=%-6d per-head %9.1f  together %9.1f  us/step  %5.2fx  (KV %.1f MB a step: %.2f / %.2f GB/s)\n",
           ctx, one * 1e6, all * 1e6, one / all, kv / 1e6, kv / one / 1e9, kv / all / 1e9);
    caches_free(&c, sh);
    return 0;
}

int main(int argc, char **argv)
{
    shape sh = {30, 9, 3, 64};
    int ctxs[16], nctx = 0, runs = 9;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ctx") && i + 1 < argc && nctx < 16) ctxs[nctx++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) sh.layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && i + 3 < argc) {
            sh.heads = atoi(argv[++i]);
            sh.kv = atoi(argv[++i]);
            sh.hd = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_attention [--ctx N]... [--runs N] [--layers N] [--heads H KV HD]\n");
            return 2;
        }
    }
    if (sh.layers < 1 || sh.heads < 1 || sh.kv < 1 || sh.heads % sh.kv || sh.hd < 1 || runs < 1) {
        fprintf(stderr, "bench_attention: bad shape or runs\n");
        return 2;
    }
    if (!nctx) {
        static const int dflt[] = {192, 1024, 4096};
        for (nctx = 0; nctx < 3; nctx++) ctxs[nctx] = dflt[nctx];
    }
    printf("# %d layers, %d heads over %d kv heads of %d, level %d, best of %d\n", sh.layers, sh.heads, sh.kv,
           sh.hd, ld_cpu_simd(), runs);
    for (int i = 0; i < nctx; i++)
        if (ctxs[i] < 1 || bench_ctx(&sh, ctxs[i], runs)) return 2;
    return 0;
}
