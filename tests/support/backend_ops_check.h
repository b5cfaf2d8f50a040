/* backend_ops_check.h - what the op table's checks share (tests/engine/
 * backend/test_backend_ops.c, test_backend_ds_ops.c, tests/kernels/cuda/
 * test_cuda_ops.c): random inputs, weights of every storage type, the
 * backends, the comparison with the reference and the batch-split check.
 *
 * The checks: every op of the table (backend.h) on every backend
 * of this build against the reference backend, llama.cpp test-backend-ops
 * style: random inputs of several shapes (awkward ones included), the
 * normalised error nmse = sum (a - r)^2 / sum r^2 per op and shape against
 * a tolerance per op, non-finite values in the same places, a guard region
 * after every output that must stay as written, and the batch-split
 * invariance of backend.h's contract (a row computed in a batch equals the
 * row computed alone, bitwise).  Weights come in every storage type: plain,
 * GGML blocks, FP8 block-scaled (matmul only, with partial edge blocks;
 * the places such a weight does not belong are refused) and packed FP4
 * block-scaled (DeepSeek-V4's experts; matmul only).  Prints one table
 * line per (backend, case).
 *
 * Backends: "cpu" (ld_backend_cpu_create) always; "cuda-ref" and
 * "cuda-custom" (ld_backend_cuda_create with all=ref / all custom) when
 * built with CUDA and a device is present, else reported as skipped with
 * the reason.  The kernel-spec parser is tested here too (no GPU needed).
 *
 *   test_backend_ops [case-filter], test_backend_ds_ops [case-filter]
 */
#ifndef LD_TEST_BACKEND_OPS_CHECK_H
#define LD_TEST_BACKEND_OPS_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ds_variants.h"
#include "kernels/ref/ref_variants.h"

#define GUARD 64
#define SENTINEL 1234.5f

/* ---------------------------------------------------------------- random */

static uint64_t rng;

static inline uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static inline float uniform(void) /* [-1, 1) */
{
    return (float)((double)next_u32() / 2147483648.0 - 1.0);
}

static inline void fill(float *p, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) p[i] = uniform() * scale;
}

static inline void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

/* an f16 of magnitude in [2^lo, 2^(hi+1)) with a random sign */
static inline uint16_t rand_f16(int lo, int hi)
{
    int e = lo + (int)(next_u32() % (uint32_t)(hi - lo + 1)) + 15;
    return (uint16_t)((next_u32() & 1u) << 15 | (unsigned)e << 10 | (next_u32() & 1023u));
}

static inline uint16_t rand_bf16(void)
{
    int e = 120 + (int)(next_u32() % 8u);
    return (uint16_t)((next_u32() & 1u) << 15 | (unsigned)e << 7 | (next_u32() & 127u));
}

typedef struct kind {
    const char *name;
    ld_dtype dtype;
    ld_wquant quant;
    int block, bytes;
    int br, bc; /* LD_WQ_F8B / F4B: the scale blocks (rows x columns) */
} kind;

static const kind kinds[] = {
    {"f32", LD_DT_F32, LD_WQ_NONE, 1, 4, 0, 0},      {"f16", LD_DT_F16, LD_WQ_NONE, 1, 2, 0, 0},
    {"bf16", LD_DT_BF16, LD_WQ_NONE, 1, 2, 0, 0},    {"q4_0", LD_DT_F32, LD_WQ_Q4_0, 32, 18, 0, 0},
    {"q4_1", LD_DT_F32, LD_WQ_Q4_1, 32, 20, 0, 0},   {"q8_0", LD_DT_F32, LD_WQ_Q8_0, 32, 34, 0, 0},
    {"q4_k", LD_DT_F32, LD_WQ_Q4_K, 256, 144, 0, 0}, {"q6_k", LD_DT_F32, LD_WQ_Q6_K, 256, 210, 0, 0},
    /* block-scaled FP8 (matmul only): DeepSeek's 128x128, small blocks
     * with partial edge blocks, and column blocks that are not a multiple
     * of the custom kernel's 16-byte chunks */
    {"f8b16x16", LD_DT_F32, LD_WQ_F8B, 1, 1, 16, 16}, {"f8b128x128", LD_DT_F32, LD_WQ_F8B, 1, 1, 128, 128},
    {"f8b8x24", LD_DT_F32, LD_WQ_F8B, 1, 1, 8, 24},
    /* block-scaled packed FP4 (matmul only): DeepSeek-V4's experts (1x32),
     * and 4x16 blocks */
    {"f4b1x32", LD_DT_F32, LD_WQ_F4B, 2, 1, 1, 32}, {"f4b4x16", LD_DT_F32, LD_WQ_F4B, 2, 1, 4, 16},
};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))
#define KIND_F8B16 8
#define KIND_F8B128 9
#define KIND_F8B8X24 10
#define KIND_F4B1X32 11
#define KIND_F4B4X16 12

/* the block-scaled kinds (FP8, FP4) */
static inline int is_f8b(int k)
{
    return kinds[k].quant == LD_WQ_F8B || kinds[k].quant == LD_WQ_F4B;
}

/* bytes of a block-scaled weight's codes (e4m3 bytes, or two e2m1 codes a
 * byte), its scale grid following them */
static inline size_t f8b_qbytes(const kind *k, int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols / (k->quant == LD_WQ_F4B ? 2 : 1);
    return (n + 15) & ~(size_t)15;
}

static inline size_t f8b_nscales(const kind *k, int rows, int cols)
{
    return (size_t)((rows + k->br - 1) / k->br) * (size_t)((cols + k->bc - 1) / k->bc);
}

/* rows x cols of FP8 E4M3 (every byte but the NaNs 0x7f, 0xff) or packed
 * FP4 E2M1 (every code), then the scale grid: positive, in [2^-10, 2^-6)
 * as weight_scale_inv's */
static inline void *rand_f8b(const kind *k, int rows, int cols)
{
    size_t nq = f8b_qbytes(k, rows, cols), ns = f8b_nscales(k, rows, cols);
    unsigned char *w = malloc(nq + ns * sizeof(float));
    if (!w) return NULL;
    for (size_t i = 0; i < nq; i++) {
        unsigned char b = (unsigned char)next_u32();
        w[i] = k->quant == LD_WQ_F8B && (b & 0x7f) == 0x7f ? (unsigned char)(b - 1) : b;
    }
    for (size_t i = 0; i < ns; i++) {
        float f = ldexpf(1.5f + 0.5f * uniform(), -7 - (int)(next_u32() % 4u));
        memcpy(w + nq + i * sizeof f, &f, sizeof f);
    }
    return w;
}

/* rows x cols of kind k, random with sane scales (malloc'd, 8-aligned) */
static inline void *rand_weights(const kind *k, int rows, int cols)
{
    if (k->quant == LD_WQ_F8B || k->quant == LD_WQ_F4B) return rand_f8b(k, rows, cols);
    size_t nb = (size_t)rows * (size_t)cols / (size_t)k->block, n = nb * (size_t)k->bytes;
    unsigned char *w = malloc(n ? n : 1);
    if (!w) return NULL;
    for (size_t i = 0; i < n; i++) w[i] = (unsigned char)next_u32();
    for (size_t b = 0; b < nb; b++) {
        unsigned char *p = w + b * (size_t)k->bytes;
        switch (k->quant) {
        case LD_WQ_NONE:
            if (k->dtype == LD_DT_F32) {
                float f = uniform();
                memcpy(p, &f, 4);
            } else if (k->dtype == LD_DT_F16) {
                put16(p, rand_f16(-6, 0));
            } else {
                put16(p, rand_bf16());
            }
            break;
        case LD_WQ_Q4_0:
        case LD_WQ_Q8_0: put16(p, rand_f16(-10, -6)); break;
        case LD_WQ_Q4_1:
            put16(p, rand_f16(-10, -6));
            put16(p + 2, rand_f16(-8, -4));
            break;
        case LD_WQ_Q4_K:
            put16(p, rand_f16(-12, -8));
            put16(p + 2, rand_f16(-12, -8));
            break;
        case LD_WQ_Q6_K: put16(p + 208, rand_f16(-14, -10)); break;
        default: break; /* LD_WQ_F8B, F4B: rand_f8b */
        }
    }
    return w;
}

/* ---------------------------------------------------------------- backends */

typedef struct bk {
    const char *name;
    ld_backend *be;
    char skip[300]; /* why not available */
} bk;

static ld_backend *ref_be;

static inline int open_backends(bk *b, int *n)
{
    ld_error err = {0};
    if (!ref_be && ld_backend_ref_create(1, &ref_be, &err) != LD_OK) {
        fprintf(stderr, "  reference backend: %s\n", err.msg);
        return 1;
    }
    *n = 3;
    memset(b, 0, 3 * sizeof *b);
    b[0].name = "cpu";
    if (ld_backend_cpu_create(2, &b[0].be, &err) != LD_OK) {
        fprintf(stderr, "  cpu backend: %s\n", err.msg);
        return 1;
    }
    b[1].name = "cuda-ref";
    b[2].name = "cuda-custom";
    const char *specs[2] = {"all=ref", NULL};
    for (int i = 0; i < 2; i++) {
        ld_status st = ld_backend_cuda_create(0, specs[i], &b[1 + i].be, &err);
        if (st == LD_ERR_UNSUPPORTED) {
            snprintf(b[1 + i].skip, sizeof b[1 + i].skip, "%s", err.msg);
        } else if (st != LD_OK) {
            fprintf(stderr, "  %s backend: %s\n", b[1 + i].name, err.msg);
            return 1;
        }
    }
    return 0;
}

static inline void close_backends(bk *b, int n)
{
    for (int i = 0; i < n; i++) ld_backend_destroy(b[i].be);
    ld_backend_destroy(ref_be);
    ref_be = NULL;
}

/* a buffer of n floats + GUARD sentinels, holding `src` (NULL: zeros) */
static inline ld_buf *upload(ld_backend *be, const float *src, size_t n)
{
    ld_error err = {0};
    ld_buf *b = NULL;
    if (be->ops->buf_alloc(be, n + GUARD, &b, &err) != LD_OK) {
        fprintf(stderr, "  buf_alloc: %s\n", err.msg);
        return NULL;
    }
    float *h = calloc(n + GUARD, sizeof *h);
    if (src) memcpy(h, src, n * sizeof *h);
    for (size_t i = n; i < n + GUARD; i++) h[i] = SENTINEL;
    ld_status st = be->ops->buf_write(be, b, 0, h, n + GUARD, &err);
    free(h);
    if (st != LD_OK) {
        fprintf(stderr, "  buf_write: %s\n", err.msg);
        be->ops->buf_free(be, b);
        return NULL;
    }
    return b;
}

/* the first n floats of b (malloc'd), NULL (and a message) if the guard
 * after them changed or the read failed */
static inline float *download(ld_backend *be, ld_buf *b, size_t n)
{
    ld_error err = {0};
    float *h = malloc((n + GUARD) * sizeof *h);
    if (be->ops->buf_read(be, b, 0, h, n + GUARD, &err) != LD_OK) {
        fprintf(stderr, "  buf_read: %s\n", err.msg);
        free(h);
        return NULL;
    }
    for (size_t i = n; i < n + GUARD; i++)
        if (h[i] != SENTINEL) {
            fprintf(stderr, "  guard overwritten at +%zu\n", i - n);
            free(h);
            return NULL;
        }
    return h;
}

static inline ld_weight *load_weight(ld_backend *be, const kind *k, const void *data, int rows, int cols, int rope_hd)
{
    ld_host_tensor t = {.dtype = k->dtype, .data = data, .rows = rows, .cols = cols, .quant = k->quant,
                        .rope_hd = rope_hd};
    if (k->quant == LD_WQ_F8B || k->quant == LD_WQ_F4B) { /* the scale grid follows the bytes (rand_f8b) */
        t.scale = (const float *)((const unsigned char *)data + f8b_qbytes(k, rows, cols));
        t.scale_br = k->br;
        t.scale_bc = k->bc;
    }
    ld_weight *w = NULL;
    ld_error err = {0};
    if (be->ops->weight_load(be, &t, &w, &err) != LD_OK) fprintf(stderr, "  weight_load: %s\n", err.msg);
    return w;
}

/* ---------------------------------------------------------------- cases */

typedef enum { OP_EMBED, OP_RMSNORM, OP_MATMUL, OP_ROPE, OP_KV, OP_ATT, OP_SWIGLU, OP_ADD, OP_SOFTMAX } op_id;

static const char *const op_names[] = {"embed", "rmsnorm", "matmul", "rope", "kv_store",
                                       "attention", "swiglu", "add", "softmax"};

/* Tolerances (nmse).  Copies are exact.  The element-wise ops with a
 * transcendental (rope, swiglu) differ by CUDA's expf/sinf/cosf (within 2
 * ulp): nmse ~1e-14, tolerance 1e-10.  The reductions (rmsnorm, matmul,
 * attention, softmax) differ by the summation order, and the reference's
 * own one-accumulator sum of n terms is off by ~sqrt(n) 2^-24 relative
 * (1e-5 for softmax over 49152 columns: nmse ~1e-10): tolerance 1e-8.  A
 * wrong index or a missed element gives nmse ~1e-3 .. 1. */
static inline double op_tol(op_id op)
{
    switch (op) {
    case OP_EMBED:
    case OP_KV:
    case OP_ADD: return 0.0;
    case OP_ROPE:
    case OP_SWIGLU: return 1e-10;
    default: return 1e-8;
    }
}

typedef struct ocase {
    op_id op;
    int kind;           /* weights' kind (embed, rmsnorm, matmul) */
    int a, b, c, d, e;  /* op-specific shape */
    int f, g;
    int bias_kind;      /* matmul: -1 none */
    int inplace;        /* rmsnorm, softmax, swiglu: out is an input */
} ocase;

static inline void case_name(const ocase *c, char *s, size_t n)
{
    const char *k = kinds[c->kind].name;
    switch (c->op) {
    case OP_EMBED: snprintf(s, n, "embed(type=%s,vocab=%d,dim=%d,T=%d)", k, c->a, c->b, c->c); break;
    case OP_RMSNORM:
        snprintf(s, n, "rmsnorm(type=%s,dim=%d,rows=%d%s)", k, c->a, c->b, c->inplace ? ",inplace" : "");
        break;
    case OP_MATMUL:
        snprintf(s, n, "matmul(type=%s,T=%d,K=%d,N=%d,rope_hd=%d,bias=%s)", k, c->a, c->b, c->c, c->d,
                 c->bias_kind < 0 ? "none" : kinds[c->bias_kind].name);
        break;
    case OP_ROPE: snprintf(s, n, "rope(T=%d,heads=%d,hd=%d,pos0=%d)", c->a, c->b, c->c, c->d); break;
    case OP_KV: snprintf(s, n, "kv_store(T=%d,pos0=%d,row=%d)", c->a, c->b, c->c); break;
    case OP_ATT:
        snprintf(s, n, "attention(T=%d,pos0=%d,heads=%d,kv=%d,hd=%d,window=%d)", c->a, c->b, c->c, c->d, c->e, c->f);
        break;
    case OP_SWIGLU: snprintf(s, n, "swiglu(n=%d%s)", c->a, c->inplace ? ",inplace" : ""); break;
    case OP_ADD: snprintf(s, n, "add(n=%d)", c->a); break;
    case OP_SOFTMAX:
        snprintf(s, n, "softmax(rows=%d,n=%d%s)", c->a, c->b, c->inplace ? ",inplace" : "");
        break;
    }
}

/* Runs case c on `be` with inputs from `seed`; *out (malloc'd) the output,
 * *n its size.  Returns 0, or 1 after a message. */
static inline int run_case(ld_backend *be, const ocase *c, uint64_t seed, float **out, size_t *n_out)
{
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    ld_status st = LD_OK;
    ld_buf *bo = NULL, *b1 = NULL, *b2 = NULL, *b3 = NULL;
    ld_weight *w = NULL, *wb = NULL;
    void *wdata = NULL, *bdata = NULL;
    float *h1 = NULL, *h2 = NULL, *h3 = NULL;
    int32_t *toks = NULL;
    size_t n = 0;
    int fail = 1;
    rng = seed;
    *out = NULL;
    switch (c->op) {
    case OP_EMBED: {
        int vocab = c->a, dim = c->b, T = c->c;
        wdata = rand_weights(&kinds[c->kind], vocab, dim);
        toks = malloc((size_t)T * sizeof *toks);
        for (int t = 0; t < T; t++) toks[t] = (int32_t)(next_u32() % (uint32_t)vocab);
        n = (size_t)T * (size_t)dim;
        if (!(w = load_weight(be, &kinds[c->kind], wdata, vocab, dim, 0)) || !(bo = upload(be, NULL, n))) goto done;
        st = o->embed(be, bo, w, toks, T, &err);
        break;
    }
    case OP_RMSNORM: {
        int dim = c->a, rows = c->b;
        n = (size_t)dim * (size_t)rows;
        wdata = rand_weights(&kinds[c->kind], 1, dim);
        h1 = malloc(n * sizeof *h1);
        fill(h1, n, 3.0f);
        if (!(w = load_weight(be, &kinds[c->kind], wdata, 1, dim, 0)) || !(b1 = upload(be, h1, n))) goto done;
        if (c->inplace) bo = b1, b1 = NULL;
        else if (!(bo = upload(be, NULL, n))) goto done;
        st = o->rmsnorm(be, bo, b1 ? b1 : bo, w, rows, 1e-5f, &err);
        break;
    }
    case OP_MATMUL: {
        int T = c->a, K = c->b, N = c->c;
        wdata = rand_weights(&kinds[c->kind], N, K);
        h1 = malloc((size_t)T * (size_t)K * sizeof *h1);
        fill(h1, (size_t)T * (size_t)K, 1.0f);
        n = (size_t)T * (size_t)N;
        if (!(w = load_weight(be, &kinds[c->kind], wdata, N, K, c->d)) || !(b1 = upload(be, h1, (size_t)T * (size_t)K)) ||
            !(bo = upload(be, NULL, n)))
            goto done;
        if (c->bias_kind >= 0) {
            bdata = rand_weights(&kinds[c->bias_kind], 1, N);
            if (!(wb = load_weight(be, &kinds[c->bias_kind], bdata, 1, N, 0))) goto done;
        }
        st = o->matmul(be, bo, b1, w, wb, T, &err);
        break;
    }
    case OP_ROPE: {
        int T = c->a, H = c->b, hd = c->c, pos0 = c->d;
        n = (size_t)T * (size_t)H * (size_t)hd;
        h1 = malloc(n * sizeof *h1);
        fill(h1, n, 2.0f);
        h2 = malloc((size_t)(hd / 2) * sizeof *h2);
        for (int i = 0; i < hd / 2; i++) h2[i] = powf(10000.0f, -2.0f * (float)i / (float)hd);
        if (!(bo = upload(be, h1, n))) goto done;
        st = o->rope(be, bo, T, H, hd, pos0, h2, &err);
        break;
    }
    case OP_KV: {
        int T = c->a, pos0 = c->b, row = c->c;
        size_t cap = (size_t)(pos0 + T + 3) * (size_t)row;
        n = cap;
        h1 = malloc((size_t)T * (size_t)row * sizeof *h1);
        fill(h1, (size_t)T * (size_t)row, 1.0f);
        h2 = malloc(cap * sizeof *h2);
        fill(h2, cap, 1.0f);
        if (!(b1 = upload(be, h1, (size_t)T * (size_t)row)) || !(bo = upload(be, h2, cap))) goto done;
        st = o->kv_store(be, bo, b1, T, pos0, row, &err);
        break;
    }
    case OP_ATT: {
        int T = c->a, pos0 = c->b, H = c->c, KV = c->d, hd = c->e, window = c->f;
        size_t nq = (size_t)T * (size_t)H * (size_t)hd, nkv = (size_t)(pos0 + T) * (size_t)KV * (size_t)hd;
        n = nq;
        h1 = malloc(nq * sizeof *h1);
        h2 = malloc(nkv * sizeof *h2);
        h3 = malloc(nkv * sizeof *h3);
        fill(h1, nq, 1.0f);
        fill(h2, nkv, 1.0f);
        fill(h3, nkv, 1.0f);
        if (!(b1 = upload(be, h1, nq)) || !(b2 = upload(be, h2, nkv)) || !(b3 = upload(be, h3, nkv)) ||
            !(bo = upload(be, NULL, nq)))
            goto done;
        st = o->attention(be, bo, b1, b2, b3, T, pos0, H, KV, hd, window, 1.0f / sqrtf((float)hd), &err);
        break;
    }
    case OP_SWIGLU:
    case OP_ADD: {
        n = (size_t)c->a;
        h1 = malloc(n * sizeof *h1);
        h2 = malloc(n * sizeof *h2);
        fill(h1, n, 6.0f);
        fill(h2, n, 2.0f);
        if (!(b1 = upload(be, h1, n)) || !(b2 = upload(be, h2, n))) goto done;
        if (c->op == OP_ADD) {
            bo = b1, b1 = NULL;
            st = o->add(be, bo, b2, n, &err);
        } else {
            if (c->inplace) bo = b1, b1 = NULL;
            else if (!(bo = upload(be, NULL, n))) goto done;
            st = o->swiglu(be, bo, b1 ? b1 : bo, b2, n, &err);
        }
        break;
    }
    case OP_SOFTMAX: {
        int rows = c->a, cols = c->b;
        n = (size_t)rows * (size_t)cols;
        h1 = malloc(n * sizeof *h1);
        fill(h1, n, 8.0f);
        if (!(b1 = upload(be, h1, n))) goto done;
        if (c->inplace) bo = b1, b1 = NULL;
        else if (!(bo = upload(be, NULL, n))) goto done;
        st = o->softmax(be, bo, b1 ? b1 : bo, rows, cols, &err);
        break;
    }
    }
    if (st != LD_OK) {
        fprintf(stderr, "  %s: %s\n", op_names[c->op], err.msg);
        goto done;
    }
    if (!(*out = download(be, bo, n))) goto done;
    *n_out = n;
    fail = 0;
done:
    o->buf_free(be, bo);
    o->buf_free(be, b1);
    o->buf_free(be, b2);
    o->buf_free(be, b3);
    if (w) o->weight_free(be, w);
    if (wb) o->weight_free(be, wb);
    free(wdata);
    free(bdata);
    free(h1);
    free(h2);
    free(h3);
    free(toks);
    return fail;
}

static ocase *cases;
static int n_cases, cap_cases;

static inline void add_case(ocase c)
{
    if (n_cases == cap_cases) {
        cap_cases = cap_cases ? 2 * cap_cases : 64;
        cases = realloc(cases, (size_t)cap_cases * sizeof *cases);
    }
    cases[n_cases++] = c;
}

/* FP8 block-scaled matmuls: partial edge blocks in both dimensions
 * (16x16 blocks on 40 x 56), 128x128 blocks on a realistic shape (2048 ->
 * 384) and with partial blocks (640 -> 200, 200 -> 130), the custom
 * kernel's 16-byte path (K % 16 == 0) and its byte path, blocks of 24
 * columns that split its chunks, 1 to 70 tokens (its 8-row groups; the
 * backend adds a bias 64 rows at a time), and biases of every plain type */
static inline void build_f8b_cases(void)
{
    static const int mm[][5] = {
        /* kind, T, K, N, bias kind */
        {KIND_F8B16, 1, 56, 40, -1},      {KIND_F8B16, 13, 56, 40, -1},     {KIND_F8B16, 5, 96, 40, 0},
        {KIND_F8B16, 3, 56, 40, 2},       {KIND_F8B16, 70, 56, 40, 0},      {KIND_F8B128, 1, 2048, 384, -1},
        {KIND_F8B128, 13, 2048, 384, -1}, {KIND_F8B128, 9, 640, 200, -1},   {KIND_F8B128, 4, 200, 130, 1},
        {KIND_F8B8X24, 7, 96, 50, -1},    {KIND_F8B8X24, 2, 100, 17, 0},
        /* FP4: V4-Flash's expert shapes cut down, GEMV and GEMM, a bias;
         * the grid divides the matrix (the CUDA kernel's requirement) */
        {KIND_F4B1X32, 1, 2048, 64, -1},  {KIND_F4B1X32, 9, 256, 96, -1},   {KIND_F4B1X32, 3, 64, 40, 0},
        {KIND_F4B4X16, 1, 96, 40, -1},    {KIND_F4B4X16, 13, 48, 20, 2},
    };
    for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++)
        add_case((ocase){.op = OP_MATMUL, .kind = mm[i][0], .a = mm[i][1], .b = mm[i][2], .c = mm[i][3],
                         .bias_kind = mm[i][4]});
}

static inline void build_cases(void)
{
    n_cases = 0;
    for (int k = 0; k < N_KINDS; k++) {
        if (is_f8b(k)) continue; /* build_f8b_cases */
        int blk = kinds[k].block, dim = blk == 256 ? 512 : blk == 32 ? 96 : 37;
        add_case((ocase){.op = OP_EMBED, .kind = k, .a = 11, .b = dim, .c = 1});
        add_case((ocase){.op = OP_EMBED, .kind = k, .a = 11, .b = dim, .c = 7});
        int Ks[] = {blk == 256 ? 256 : blk == 32 ? 32 : 1, blk == 256 ? 768 : blk == 32 ? 576 : 100};
        for (int ki = 0; ki < 2; ki++) {
            add_case((ocase){.op = OP_MATMUL, .kind = k, .a = 1, .b = Ks[ki], .c = 67, .bias_kind = -1});
            add_case((ocase){.op = OP_MATMUL, .kind = k, .a = 13, .b = Ks[ki], .c = 130, .bias_kind = -1});
        }
        add_case((ocase){.op = OP_MATMUL, .kind = k, .a = 5, .b = Ks[1], .c = 64, .d = 16, .bias_kind = 0});
        add_case((ocase){.op = OP_MATMUL, .kind = k, .a = 3, .b = Ks[0], .c = 48, .d = 0, .bias_kind = 2});
    }
    build_f8b_cases();
    for (int k = 0; k < 3; k++) {
        add_case((ocase){.op = OP_RMSNORM, .kind = k, .a = 1, .b = 1});
        add_case((ocase){.op = OP_RMSNORM, .kind = k, .a = 576, .b = 5});
        add_case((ocase){.op = OP_RMSNORM, .kind = k, .a = 1000, .b = 3, .inplace = 1});
    }
    add_case((ocase){.op = OP_RMSNORM, .kind = 0, .a = 64, .b = 36, .inplace = 1}); /* qk-norm: rows of heads */
    int ropes[][4] = {{1, 1, 2, 0}, {6, 4, 64, 0}, {3, 9, 64, 1000}, {2, 2, 128, 40000}};
    for (int i = 0; i < 4; i++)
        add_case((ocase){.op = OP_ROPE, .a = ropes[i][0], .b = ropes[i][1], .c = ropes[i][2], .d = ropes[i][3]});
    add_case((ocase){.op = OP_KV, .a = 1, .b = 0, .c = 8});
    add_case((ocase){.op = OP_KV, .a = 7, .b = 13, .c = 192});
    int atts[][6] = {{1, 0, 1, 1, 8, 0},     {4, 3, 4, 2, 64, 0},    {7, 300, 8, 2, 64, 0},
                     {5, 600, 4, 4, 32, 100}, {9, 0, 6, 3, 80, 0},   {1, 1000, 2, 1, 128, 0},
                     {3, 250, 9, 3, 64, 7},  {2, 511, 2, 2, 256, 300}, {12, 250, 2, 1, 48, 0}};
    for (int i = 0; i < (int)(sizeof atts / sizeof atts[0]); i++)
        add_case((ocase){.op = OP_ATT, .a = atts[i][0], .b = atts[i][1], .c = atts[i][2], .d = atts[i][3],
                         .e = atts[i][4], .f = atts[i][5]});
    int ns[] = {1, 1003, 70001};
    for (int i = 0; i < 3; i++) {
        add_case((ocase){.op = OP_SWIGLU, .a = ns[i]});
        add_case((ocase){.op = OP_ADD, .a = ns[i]});
    }
    add_case((ocase){.op = OP_SWIGLU, .a = 1003, .inplace = 1});
    add_case((ocase){.op = OP_SOFTMAX, .a = 1, .b = 1});
    add_case((ocase){.op = OP_SOFTMAX, .a = 3, .b = 1000});
    add_case((ocase){.op = OP_SOFTMAX, .a = 2, .b = 49152, .inplace = 1});
}

/* nmse of a against r; -1 when non-finite values differ in place */
static inline double nmse(const float *a, const float *r, size_t n, double *maxabs)
{
    double num = 0, den = 0;
    *maxabs = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(r[i]) || !isfinite(a[i])) {
            if (isnan(r[i]) != isnan(a[i]) || (isinf(r[i]) && a[i] != r[i])) return -1;
            continue;
        }
        double d = (double)a[i] - (double)r[i];
        num += d * d;
        den += (double)r[i] * (double)r[i];
        if (fabs(d) > *maxabs) *maxabs = fabs(d);
    }
    return den > 0 ? num / den : num;
}

/* Every case on backend b against the reference; prints the table. */
static inline int check_backend(bk *b)
{
    if (!b->be) SKIP("%s: %s", b->name, b->skip);
    build_cases();
    int bad = 0;
    printf("  %-12s %-62s %10s %10s %8s\n", "backend", "case", "nmse", "max|d|", "tol");
    for (int i = 0; i < n_cases; i++) {
        char name[160];
        case_name(&cases[i], name, sizeof name);
        uint64_t seed = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(i + 1) * 0x100000001B3ull);
        float *r = NULL, *a = NULL;
        size_t nr = 0, na = 0;
        if (run_case(ref_be, &cases[i], seed, &r, &nr) || run_case(b->be, &cases[i], seed, &a, &na)) {
            printf("  %-12s %-62s FAIL (did not run)\n", b->name, name);
            bad++;
        } else {
            double mx, e = nmse(a, r, nr, &mx), tol = op_tol(cases[i].op);
            int ok = nr == na && e >= 0 && e <= tol;
            printf("  %-12s %-62s %10.3g %10.3g %8.0e%s\n", b->name, name, e, mx, tol, ok ? "" : "  FAIL");
            bad += !ok;
        }
        free(r);
        free(a);
    }
    free(cases);
    cases = NULL;
    cap_cases = 0;
    CHECK_MSG(!bad, "%d cases failed on %s", bad, b->name);
    return 0;
}

/* ---------------------------------------------------------------- split */

/* Rows computed in one call equal the rows computed one at a time, bitwise
 * (backend.h's contract): matmul for every kind, rmsnorm, softmax, and
 * attention (prefill against token-by-token over the same cache, across
 * the custom kernel's split boundary and with a window). */
static inline int check_split(bk *b)
{
    if (!b->be) SKIP("%s: %s", b->name, b->skip);
    ld_backend *be = b->be;
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    rng = 42;
    const int T = 11;
    for (int k = 0; k < N_KINDS; k++) {
        int K = kinds[k].block == 256 ? 512 : 96, N = 80, rope_hd = 16;
        if (is_f8b(k)) { /* no rope order; partial blocks */
            K = k == KIND_F8B16 ? 56 : k == KIND_F8B128 ? 640 : 96;
            N = k == KIND_F8B128 ? 200 : 40;
            rope_hd = 0;
        }
        void *wd = rand_weights(&kinds[k], N, K);
        float *x = malloc((size_t)T * (size_t)K * sizeof *x), *all = malloc((size_t)T * (size_t)N * sizeof *all);
        float *one = malloc((size_t)N * sizeof *one);
        fill(x, (size_t)T * (size_t)K, 1.0f);
        ld_weight *w = load_weight(be, &kinds[k], wd, N, K, rope_hd);
        ld_buf *bx = upload(be, x, (size_t)T * (size_t)K), *bo = upload(be, NULL, (size_t)T * (size_t)N);
        CHECK(w && bx && bo);
        CHECK_MSG(o->matmul(be, bo, bx, w, NULL, T, &err) == LD_OK, "%s", err.msg);
        CHECK(o->buf_read(be, bo, 0, all, (size_t)T * (size_t)N, &err) == LD_OK);
        for (int t = 0; t < T; t++) {
            CHECK(o->buf_write(be, bx, 0, x + (size_t)t * (size_t)K, (size_t)K, &err) == LD_OK);
            CHECK(o->matmul(be, bo, bx, w, NULL, 1, &err) == LD_OK);
            CHECK(o->buf_read(be, bo, 0, one, (size_t)N, &err) == LD_OK);
            CHECK_MSG(!memcmp(one, all + (size_t)t * (size_t)N, (size_t)N * sizeof *one),
                      "%s: matmul %s row %d alone differs from the batch", b->name, kinds[k].name, t);
        }
        o->buf_free(be, bx);
        o->buf_free(be, bo);
        o->weight_free(be, w);
        free(wd);
        free(x);
        free(all);
        free(one);
    }
    /* rmsnorm and softmax: rows of 1000 */
    {
        int D = 1000;
        float *x = malloc((size_t)T * (size_t)D * sizeof *x), *all = malloc((size_t)T * (size_t)D * sizeof *all);
        float *one = malloc((size_t)D * sizeof *one);
        fill(x, (size_t)T * (size_t)D, 4.0f);
        void *wd = rand_weights(&kinds[2], 1, D);
        ld_weight *w = load_weight(be, &kinds[2], wd, 1, D, 0);
        ld_buf *bx = upload(be, x, (size_t)T * (size_t)D), *bo = upload(be, NULL, (size_t)T * (size_t)D);
        CHECK(w && bx && bo);
        for (int op = 0; op < 2; op++) {
            CHECK(o->buf_write(be, bx, 0, x, (size_t)T * (size_t)D, &err) == LD_OK);
            CHECK(op ? o->softmax(be, bo, bx, T, D, &err) == LD_OK : o->rmsnorm(be, bo, bx, w, T, 1e-6f, &err) == LD_OK);
            CHECK(o->buf_read(be, bo, 0, all, (size_t)T * (size_t)D, &err) == LD_OK);
            for (int t = 0; t < T; t++) {
                CHECK(o->buf_write(be, bx, 0, x + (size_t)t * (size_t)D, (size_t)D, &err) == LD_OK);
                CHECK(op ? o->softmax(be, bo, bx, 1, D, &err) == LD_OK : o->rmsnorm(be, bo, bx, w, 1, 1e-6f, &err) == LD_OK);
                CHECK(o->buf_read(be, bo, 0, one, (size_t)D, &err) == LD_OK);
                CHECK_MSG(!memcmp(one, all + (size_t)t * (size_t)D, (size_t)D * sizeof *one),
                          "%s: %s row %d alone differs from the batch", b->name, op ? "softmax" : "rmsnorm", t);
            }
        }
        o->buf_free(be, bx);
        o->buf_free(be, bo);
        o->weight_free(be, w);
        free(wd);
        free(x);
        free(all);
        free(one);
    }
    /* attention: T queries from pos0 at once, then one by one */
    int shapes[][6] = {{11, 0, 4, 2, 64, 0}, {11, 250, 6, 3, 32, 0}, {11, 500, 2, 1, 64, 9}, {11, 1020, 2, 2, 128, 0}};
    for (int s = 0; s < 4; s++) {
        int pos0 = shapes[s][1], H = shapes[s][2], KV = shapes[s][3], hd = shapes[s][4], win = shapes[s][5];
        size_t qrow = (size_t)H * (size_t)hd, nkv = (size_t)(pos0 + T) * (size_t)KV * (size_t)hd;
        float *q = malloc((size_t)T * qrow * sizeof *q), *kc = malloc(nkv * sizeof *kc), *vc = malloc(nkv * sizeof *vc);
        float *all = malloc((size_t)T * qrow * sizeof *all), *one = malloc(qrow * sizeof *one);
        fill(q, (size_t)T * qrow, 1.0f);
        fill(kc, nkv, 1.0f);
        fill(vc, nkv, 1.0f);
        ld_buf *bq = upload(be, q, (size_t)T * qrow), *bk_ = upload(be, kc, nkv), *bv = upload(be, vc, nkv);
        ld_buf *bo = upload(be, NULL, (size_t)T * qrow);
        CHECK(bq && bk_ && bv && bo);
        float sc = 1.0f / sqrtf((float)hd);
        CHECK_MSG(o->attention(be, bo, bq, bk_, bv, T, pos0, H, KV, hd, win, sc, &err) == LD_OK, "%s", err.msg);
        CHECK(o->buf_read(be, bo, 0, all, (size_t)T * qrow, &err) == LD_OK);
        for (int t = 0; t < T; t++) {
            CHECK(o->buf_write(be, bq, 0, q + (size_t)t * qrow, qrow, &err) == LD_OK);
            CHECK(o->attention(be, bo, bq, bk_, bv, 1, pos0 + t, H, KV, hd, win, sc, &err) == LD_OK);
            CHECK(o->buf_read(be, bo, 0, one, qrow, &err) == LD_OK);
            CHECK_MSG(!memcmp(one, all + (size_t)t * qrow, qrow * sizeof *one),
                      "%s: attention query %d (pos %d) alone differs from the prefill", b->name, t, pos0 + t);
        }
        o->buf_free(be, bq);
        o->buf_free(be, bk_);
        o->buf_free(be, bv);
        o->buf_free(be, bo);
        free(q);
        free(kc);
        free(vc);
        free(all);
        free(one);
    }
    return 0;
}

#endif /* LD_TEST_BACKEND_OPS_CHECK_H */
