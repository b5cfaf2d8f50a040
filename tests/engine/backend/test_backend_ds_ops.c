/* test_backend_ops.c - every op of the table (backend.h) on every backend
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
 *   test_engine_backend_ops [case-filter]
 */
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

static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float uniform(void) /* [-1, 1) */
{
    return (float)((double)next_u32() / 2147483648.0 - 1.0);
}

static void fill(float *p, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) p[i] = uniform() * scale;
}

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

/* an f16 of magnitude in [2^lo, 2^(hi+1)) with a random sign */
static uint16_t rand_f16(int lo, int hi)
{
    int e = lo + (int)(next_u32() % (uint32_t)(hi - lo + 1)) + 15;
    return (uint16_t)((next_u32() & 1u) << 15 | (unsigned)e << 10 | (next_u32() & 1023u));
}

static uint16_t rand_bf16(void)
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
static int is_f8b(int k)
{
    return kinds[k].quant == LD_WQ_F8B || kinds[k].quant == LD_WQ_F4B;
}

/* bytes of a block-scaled weight's codes (e4m3 bytes, or two e2m1 codes a
 * byte), its scale grid following them */
static size_t f8b_qbytes(const kind *k, int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols / (k->quant == LD_WQ_F4B ? 2 : 1);
    return (n + 15) & ~(size_t)15;
}

static size_t f8b_nscales(const kind *k, int rows, int cols)
{
    return (size_t)((rows + k->br - 1) / k->br) * (size_t)((cols + k->bc - 1) / k->bc);
}

/* rows x cols of FP8 E4M3 (every byte but the NaNs 0x7f, 0xff) or packed
 * FP4 E2M1 (every code), then the scale grid: positive, in [2^-10, 2^-6)
 * as weight_scale_inv's */
static void *rand_f8b(const kind *k, int rows, int cols)
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
static void *rand_weights(const kind *k, int rows, int cols)
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

static int open_backends(bk *b, int *n)
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

static void close_backends(bk *b, int n)
{
    for (int i = 0; i < n; i++) ld_backend_destroy(b[i].be);
    ld_backend_destroy(ref_be);
    ref_be = NULL;
}

/* a buffer of n floats + GUARD sentinels, holding `src` (NULL: zeros) */
static ld_buf *upload(ld_backend *be, const float *src, size_t n)
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
static float *download(ld_backend *be, ld_buf *b, size_t n)
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

static ld_weight *load_weight(ld_backend *be, const kind *k, const void *data, int rows, int cols, int rope_hd)
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
static double op_tol(op_id op)
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

static void case_name(const ocase *c, char *s, size_t n)
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
static int run_case(ld_backend *be, const ocase *c, uint64_t seed, float **out, size_t *n_out)
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

static void add_case(ocase c)
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
static void build_f8b_cases(void)
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

static void build_cases(void)
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
static double nmse(const float *a, const float *r, size_t n, double *maxabs)
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
static int check_backend(bk *b)
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
static int check_split(bk *b)
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

/* ---------------------------------------------------------------- cases
 * (test_cuda_ops.c includes this file with LD_BACKEND_OPS_NO_MAIN for the
 * helpers above) */
#ifndef LD_BACKEND_OPS_NO_MAIN

/* ---------------------------------------------------------------- FP8 */

/* FP8 block weights where they do not belong, refused as the reference
 * backend refuses them: without their scales or in the rope row order
 * (weight_load), as a norm weight or a bias (LD_ERR_USAGE); and on CUDA,
 * which has no kernel for it, as an embedding table (LD_ERR_UNSUPPORTED). */
static int check_f8b_refusals(bk *b)
{
    if (!b->be) SKIP("%s: %s", b->name, b->skip);
    ld_backend *be = b->be;
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    rng = 5;
    const kind *k = &kinds[KIND_F8B16];
    void *wd = rand_weights(k, 32, 32);
    CHECK(wd);
    const float *sc = (const float *)((const unsigned char *)wd + f8b_qbytes(k, 32, 32));
    ld_host_tensor bad[] = {
        {.data = wd, .rows = 32, .cols = 32, .quant = LD_WQ_F8B, .scale_br = 16, .scale_bc = 16},
        {.data = wd, .rows = 32, .cols = 32, .quant = LD_WQ_F8B, .scale = sc, .scale_br = 16},
        {.data = wd, .rows = 32, .cols = 32, .quant = LD_WQ_F8B, .scale = sc, .scale_br = 16, .scale_bc = 16,
         .rope_hd = 16},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_weight *w = NULL;
        CHECK_MSG(o->weight_load(be, &bad[i], &w, &err) == LD_ERR_USAGE && !w, "%s: FP8 weight %zu", b->name, i);
    }
    ld_weight *w = load_weight(be, k, wd, 32, 32, 0);
    ld_buf *bx = upload(be, NULL, 32 * 32), *bo = upload(be, NULL, 32 * 32);
    CHECK(w && bx && bo);
    CHECK(o->rmsnorm(be, bo, bx, w, 1, 1e-6f, &err) == LD_ERR_USAGE && strstr(err.msg, "block type"));
    CHECK(o->matmul(be, bo, bx, w, w, 1, &err) == LD_ERR_USAGE && strstr(err.msg, "bias of a block type"));
    int32_t tok = 3;
    ld_status st = o->embed(be, bo, w, &tok, 1, &err);
    if (strncmp(b->name, "cuda", 4) == 0) CHECK_MSG(st == LD_ERR_UNSUPPORTED, "%s: embed %d", b->name, (int)st);
    /* and the weight works as a matmul's */
    CHECK_MSG(o->matmul(be, bo, bx, w, NULL, 32, &err) == LD_OK, "%s: %s", b->name, err.msg);
    o->buf_free(be, bx);
    o->buf_free(be, bo);
    o->weight_free(be, w);
    free(wd);
    return 0;
}

static int with_backend(int which)
{
    bk b[3];
    int n = 0;
    CHECK(!open_backends(b, &n));
    int rc = check_backend(&b[which]);
    close_backends(b, n);
    return rc;
}

static int test_ops_cpu(void) { return with_backend(0); }
static int test_ops_cuda_ref(void) { return with_backend(1); }
static int test_ops_cuda_custom(void) { return with_backend(2); }

static int with_backend_split(int which)
{
    bk b[3];
    int n = 0;
    CHECK(!open_backends(b, &n));
    int rc = check_split(&b[which]);
    close_backends(b, n);
    return rc;
}

static int test_split_cpu(void) { return with_backend_split(0); }
static int test_split_cuda_ref(void) { return with_backend_split(1); }
static int test_split_cuda_custom(void) { return with_backend_split(2); }

static int with_backend_f8b(int which)
{
    bk b[3];
    int n = 0;
    CHECK(!open_backends(b, &n));
    int rc = check_f8b_refusals(&b[which]);
    close_backends(b, n);
    return rc;
}

static int test_f8b_refusals_cpu(void) { return with_backend_f8b(0); }
static int test_f8b_refusals_cuda_ref(void) { return with_backend_f8b(1); }
static int test_f8b_refusals_cuda_custom(void) { return with_backend_f8b(2); }

/* ---------------------------------------------------------------- spec */

static int test_spec_parse(void)
{
    ld_cuda_kernels k;
    ld_error err = {0};
    CHECK(ld_cuda_kernels_parse(NULL, &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++) CHECK(k.custom[i] == 1);
    CHECK(ld_cuda_kernels_parse("", &k, &err) == LD_OK);
    CHECK(ld_cuda_kernels_parse("matmul=ref,attention=custom", &k, &err) == LD_OK);
    CHECK(k.custom[LD_CUDA_OP_MATMUL] == 0 && k.custom[LD_CUDA_OP_ATTENTION] == 1 && k.custom[LD_CUDA_OP_EMBED] == 1);
    CHECK(ld_cuda_kernels_parse("all=ref,softmax=custom", &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++) CHECK(k.custom[i] == (i == LD_CUDA_OP_SOFTMAX));
    for (int i = 0; i < LD_CUDA_N_OPS; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "all=custom,%s=ref", ld_cuda_op_name(i));
        CHECK(ld_cuda_kernels_parse(spec, &k, &err) == LD_OK);
        for (int j = 0; j < LD_CUDA_N_OPS; j++) CHECK(k.custom[j] == (j != i));
    }
    /* tc: matmul alone, on top of anything; a later item still wins */
    CHECK(ld_cuda_kernels_parse("all=ref,matmul=tc", &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++)
        CHECK(k.custom[i] == (i == LD_CUDA_OP_MATMUL ? LD_CUDA_KERNEL_TC : LD_CUDA_KERNEL_REF));
    CHECK(ld_cuda_kernels_parse("matmul=tc", &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++)
        CHECK(k.custom[i] == (i == LD_CUDA_OP_MATMUL ? LD_CUDA_KERNEL_TC : LD_CUDA_KERNEL_CUSTOM));
    CHECK(ld_cuda_kernels_parse("matmul=tc,all=ref", &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++) CHECK(k.custom[i] == LD_CUDA_KERNEL_REF);
    CHECK(ld_cuda_op_name(LD_CUDA_N_OPS) == NULL && ld_cuda_op_name(-1) == NULL);
    /* graphs: not an op, untouched by all=; off by default */
    CHECK(ld_cuda_kernels_parse(NULL, &k, &err) == LD_OK && k.graphs == 0);
    CHECK(ld_cuda_kernels_parse("graphs=on,all=ref", &k, &err) == LD_OK && k.graphs == LD_CUDA_GRAPH_CHUNK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++) CHECK(k.custom[i] == LD_CUDA_KERNEL_REF);
    CHECK(ld_cuda_kernels_parse("matmul=ref,graphs=100", &k, &err) == LD_OK && k.graphs == 100);
    CHECK(k.custom[LD_CUDA_OP_MATMUL] == LD_CUDA_KERNEL_REF && k.custom[LD_CUDA_OP_EMBED] == LD_CUDA_KERNEL_CUSTOM);
    CHECK(ld_cuda_kernels_parse("graphs=on,graphs=off", &k, &err) == LD_OK && k.graphs == 0);
    CHECK(ld_cuda_kernels_parse("graphs=1", &k, &err) == LD_OK && k.graphs == 1);
    return 0;
}

static int test_spec_errors(void)
{
    struct {
        const char *spec, *needle;
        uint64_t off;
    } bad[] = {
        {"bogus=ref", "unknown op 'bogus'", 0},
        {"matmul=ref,matmull=ref", "unknown op 'matmull'", 11},
        {"matmul=fast", "unknown kernel variant 'fast' for 'matmul'", 7},
        {"matmul=", "unknown kernel variant ''", 7},
        {"matmul", "is not op=variant", 0},
        {"matmul=ref,", "ends with ','", 11},
        {",matmul=ref", "is not op=variant", 0},
        {"=ref", "unknown op ''", 0},
        {"all=REF", "unknown kernel variant 'REF'", 4},
        {"rmsnorm=tc", "'tc' is for matmul only, not 'rmsnorm'", 8},
        {"matmul=tc,all=tc", "'tc' is for matmul only, not 'all'", 14},
        {"matmul=TC", "unknown kernel variant 'TC' for 'matmul' (ref, custom, or tc", 7},
        {"graphs=yes", "graphs=yes: on, off, or the operations a graph", 7},
        {"all=ref,graphs=0", "graphs=0: on, off", 15},
        {"graphs=100001", "graphs=100001", 7},
        {"graphs=", "graphs=: on, off", 7},
        {"graphs=8x", "graphs=8x", 7},
        {"graphs=on,", "ends with ','", 10},
    };
    ld_cuda_kernels k;
    memset(&k, 7, sizeof k);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_error err = {0};
        CHECK_MSG(ld_cuda_kernels_parse(bad[i].spec, &k, &err) == LD_ERR_USAGE, "%s", bad[i].spec);
        CHECK_MSG(strstr(err.msg, bad[i].needle), "'%s': '%s'", bad[i].spec, err.msg);
        CHECK_MSG(err.offset == bad[i].off, "'%s': offset %llu", bad[i].spec, (unsigned long long)err.offset);
        CHECK(k.custom[0] == 7); /* untouched on error */
        /* the backend refuses it first, with or without CUDA or a GPU */
        ld_backend *be = (ld_backend *)&k;
        CHECK(ld_backend_cuda_create(0, bad[i].spec, &be, &err) == LD_ERR_USAGE && !be);
        CHECK(strstr(err.msg, bad[i].needle));
    }
    return 0;
}

/* without CUDA or a device the backend says why, as LD_ERR_UNSUPPORTED */
static int test_cuda_unavailable(void)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    ld_status st = ld_backend_cuda_create(0, NULL, &be, &err);
    if (st == LD_OK) {
        ld_backend_destroy(be);
        SKIP("a CUDA device is present");
    }
    CHECK_MSG(st == LD_ERR_UNSUPPORTED && !be, "%d: %s", (int)st, err.msg);
    CHECK(strstr(err.msg, "built without CUDA") || strstr(err.msg, "no CUDA device"));
    printf("  cuda: %s\n", err.msg);
    return 0;
}

/* ---------------------------------------------------------------- DeepSeek */

/* The DeepSeek ops (mla_latent, mla_absorb_q / _out, ds_route, index_topk)
 * on random inputs
 * against the plain-C kernels they stand for (kernels/ref/ref_ds.h,
 * ref_ds_variants.h), called directly: the CPU backends bitwise, whatever
 * their thread count; CUDA to a tolerance (its expf; the custom kernels'
 * orders), the chosen experts and positions exactly.  Every case also runs
 * its rows one call each, which must give the batch's bits (backend.h's
 * contract), and the guards after every output stay as written. */

typedef struct mla_case {
    int T, pos0, H, dn, dr, c, k, split; /* k 0: dense */
} mla_case;

static const mla_case mla_cases[] = {
    {1, 0, 4, 16, 8, 32, 0, 0},      {1, 100, 4, 16, 8, 32, 0, 0},   {1, 100, 4, 16, 8, 32, 0, 64},
    {7, 60, 3, 8, 4, 20, 0, 64},     {5, 70, 4, 16, 8, 32, 16, 0},   {5, 70, 4, 16, 8, 32, 16, 64},
    {9, 0, 2, 8, 8, 24, 4, 0},       {3, 150, 5, 8, 4, 36, 80, 64},  {2, 130, 16, 128, 64, 512, 0, 64},
    {2, 130, 16, 128, 64, 512, 0, 0}, {1, 200, 16, 128, 64, 512, 64, 0},
};

typedef struct route_case {
    int T, E, n_group, topk_group, top_k, norm, bias;
    float scale;
} route_case;

static const route_case route_cases[] = {
    {3, 64, 8, 4, 8, 1, 1, 2.5f}, {1, 256, 8, 4, 8, 1, 1, 2.5f}, {5, 16, 1, 1, 4, 0, 0, 1.0f},
    {4, 8, 4, 2, 3, 1, 1, 1.5f},  {7, 160, 8, 3, 6, 0, 1, 16.0f},
};

typedef struct index_case {
    int T, pos0, H, dim, k;
} index_case;

static const index_case index_cases[] = {
    {1, 40, 4, 32, 8}, {6, 0, 4, 32, 8}, {3, 90, 8, 64, 16}, {1, 200, 64, 128, 64}, {4, 10, 2, 16, 64},
};

/* positions sel [T][k] for queries at pos0 + t: min(k, pos0 + t + 1) of
 * the visible ones, ascending (selection sampling), then -1 */
static void rand_sel(int32_t *sel, int T, int pos0, int k)
{
    for (int t = 0; t < T; t++) {
        int vis = pos0 + t + 1, want = k < vis ? k : vis, j = 0;
        int32_t *row = sel + (size_t)t * (size_t)k;
        for (int p = 0; p < vis && j < want; p++)
            if ((int)(next_u32() % (uint32_t)(vis - p)) < want - j) row[j++] = p;
        for (; j < k; j++) row[j] = -1;
    }
}

typedef struct mla_in {
    float *q_abs, *q, *ckv, *kpe;
    int32_t *sel;
} mla_in;

static int mla_make(const mla_case *c, mla_in *in)
{
    size_t rows = (size_t)c->T * (size_t)c->H, S = (size_t)(c->pos0 + c->T);
    in->q_abs = malloc(rows * (size_t)c->c * sizeof(float));
    in->q = malloc(rows * (size_t)(c->dn + c->dr) * sizeof(float));
    in->ckv = malloc(S * (size_t)c->c * sizeof(float));
    in->kpe = malloc(S * (size_t)c->dr * sizeof(float));
    in->sel = c->k ? malloc((size_t)c->T * (size_t)c->k * sizeof(int32_t)) : NULL;
    if (!in->q_abs || !in->q || !in->ckv || !in->kpe || (c->k && !in->sel)) return 1;
    fill(in->q_abs, rows * (size_t)c->c, 1.0f);
    fill(in->q, rows * (size_t)(c->dn + c->dr), 1.0f);
    fill(in->ckv, S * (size_t)c->c, 1.0f);
    fill(in->kpe, S * (size_t)c->dr, 1.0f);
    if (c->k) rand_sel(in->sel, c->T, c->pos0, c->k);
    return 0;
}

static void mla_free(mla_in *in)
{
    free(in->q_abs);
    free(in->q);
    free(in->ckv);
    free(in->kpe);
    free(in->sel);
}

static float mla_scale(const mla_case *c)
{
    return 1.0f / sqrtf((float)(c->dn + c->dr));
}

/* the kernel the session's host path runs */
static int mla_expect(const mla_case *c, const mla_in *in, float *out)
{
    size_t S = (size_t)(c->pos0 + c->T), items = (size_t)c->T * (size_t)c->H;
    float *scores = malloc(S * sizeof *scores), *part = malloc((size_t)c->c * sizeof *part);
    if (!scores || !part) return 1;
    float sc = mla_scale(c);
    if (c->split)
        ld_dsv_mla_latent_attention_splitk(out, in->q_abs, in->q, in->ckv, in->kpe, c->H, c->dn, c->dr, c->c,
                                           c->pos0, sc, scores, part, in->sel, c->k, c->split, 0, items);
    else if (c->k)
        ld_ref_mla_latent_attention_sparse(out, in->q_abs, in->q, in->ckv, in->kpe, c->H, c->dn, c->dr, c->c,
                                           c->pos0, sc, scores, in->sel, c->k, 0, items);
    else
        ld_ref_mla_latent_attention(out, in->q_abs, in->q, in->ckv, in->kpe, c->H, c->dn, c->dr, c->c, c->pos0, sc,
                                    scores, 0, items);
    free(scores);
    free(part);
    return 0;
}

/* rows [t0, t0 + T) of the case by the op (the cache: all pos0 + t0 + T
 * positions), into out [T][H][c] */
static int mla_run(ld_backend *be, const mla_case *c, const mla_in *in, int t0, int T, float *out)
{
    const ld_backend_ops *o = be->ops;
    size_t rows = (size_t)T * (size_t)c->H, S = (size_t)(c->pos0 + t0 + T), QW = (size_t)c->H * (size_t)(c->dn + c->dr);
    size_t lat = rows * (size_t)c->c;
    ld_buf *bo = upload(be, NULL, lat), *ba = upload(be, in->q_abs + (size_t)t0 * (size_t)c->H * (size_t)c->c, lat);
    ld_buf *bq = upload(be, in->q + (size_t)t0 * QW, (size_t)T * QW), *bc = upload(be, in->ckv, S * (size_t)c->c);
    ld_buf *bp = upload(be, in->kpe, S * (size_t)c->dr);
    ld_error err = {0};
    int bad = !bo || !ba || !bq || !bc || !bp;
    if (!bad && o->mla_latent(be, bo, ba, bq, bc, bp, T, c->pos0 + t0, c->H, c->dn, c->dr, c->c, mla_scale(c),
                              in->sel ? in->sel + (size_t)t0 * (size_t)c->k : NULL, c->k, c->split, &err) != LD_OK) {
        fprintf(stderr, "  mla_latent: %s\n", err.msg);
        bad = 1;
    }
    float *h = bad ? NULL : download(be, bo, lat);
    if (h) memcpy(out, h, lat * sizeof *out);
    free(h);
    ld_buf *bs[] = {bo, ba, bq, bc, bp};
    for (int i = 0; i < 5; i++)
        if (bs[i]) o->buf_free(be, bs[i]);
    return bad || !h;
}

/* a's n values equal r's bitwise (exact) or to nmse <= tol; prints the line */
static int agree(const char *be_name, const char *what, const float *a, const float *r, size_t n, int exact, double tol)
{
    double mx, e = nmse(a, r, n, &mx);
    int ok = exact ? memcmp(a, r, n * sizeof *a) == 0 : e >= 0 && e <= tol;
    printf("  %-12s %-62s %10.3g %10.3g %8s%s\n", be_name, what, e, mx, exact ? "bitwise" : "tol", ok ? "" : "  FAIL");
    return !ok;
}

static int check_mla(ld_backend *be, const char *be_name, int exact)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof mla_cases / sizeof mla_cases[0]; i++) {
        const mla_case *c = &mla_cases[i];
        rng = 0x5EED0000u + i;
        mla_in in = {0};
        size_t n = (size_t)c->T * (size_t)c->H * (size_t)c->c;
        float *r = malloc(n * sizeof *r), *a = malloc(n * sizeof *a), *one = malloc(n * sizeof *one);
        if (mla_make(c, &in) || !r || !a || !one || mla_expect(c, &in, r) || mla_run(be, c, &in, 0, c->T, a)) {
            bad++;
        } else {
            char what[160];
            snprintf(what, sizeof what, "mla_latent T=%d pos0=%d H=%d dn=%d dr=%d c=%d k=%d split=%d", c->T, c->pos0,
                     c->H, c->dn, c->dr, c->c, c->k, c->split);
            bad += agree(be_name, what, a, r, n, exact, 1e-10);
            size_t per = (size_t)c->H * (size_t)c->c;
            for (int t = 0; t < c->T; t++) bad += mla_run(be, c, &in, t, 1, one + (size_t)t * per);
            if (memcmp(one, a, n * sizeof *a)) {
                printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
                bad++;
            }
        }
        mla_free(&in);
        free(r);
        free(a);
        free(one);
    }
    return bad;
}

typedef struct absorb_case {
    int T, H, dn, dr, dv, c, kind; /* kind: kinds[] 0..2 (f32, f16, bf16) */
} absorb_case;

static const absorb_case absorb_cases[] = {
    {1, 4, 16, 8, 16, 32, 0}, {5, 3, 8, 4, 12, 20, 1}, {9, 2, 8, 8, 8, 24, 2}, {2, 16, 128, 64, 128, 512, 2},
};

/* the case's products by the op into qa [T][H][c] and out [T][H][dv]
 * (from o_lat), rows [t0, t0 + T) */
static int absorb_run(ld_backend *be, const absorb_case *c, const void *wd, const float *q, const float *ol, int t0,
                      int T, float *qa, float *out)
{
    const ld_backend_ops *o = be->ops;
    size_t rows = (size_t)T * (size_t)c->H, hq = (size_t)c->H * (size_t)(c->dn + c->dr);
    size_t hl = (size_t)c->H * (size_t)c->c;
    ld_weight *w = load_weight(be, &kinds[c->kind], wd, c->H * (c->dn + c->dv), c->c, 0);
    ld_buf *bq = upload(be, q + (size_t)t0 * hq, (size_t)T * hq);
    ld_buf *bl = upload(be, ol + (size_t)t0 * hl, (size_t)T * hl);
    ld_buf *ba = upload(be, NULL, rows * (size_t)c->c), *bo = upload(be, NULL, rows * (size_t)c->dv);
    ld_error err = {0};
    int bad = !w || !bq || !bl || !ba || !bo;
    if (!bad && (o->mla_absorb_q(be, ba, bq, w, T, c->H, c->dn, c->dr, c->dv, c->c, &err) != LD_OK ||
                 o->mla_absorb_out(be, bo, bl, w, T, c->H, c->dn, c->dv, c->c, &err) != LD_OK)) {
        fprintf(stderr, "  mla absorb: %s\n", err.msg);
        bad = 1;
    }
    float *ha = bad ? NULL : download(be, ba, rows * (size_t)c->c);
    float *ho = bad ? NULL : download(be, bo, rows * (size_t)c->dv);
    if (ha && ho) {
        memcpy(qa, ha, rows * (size_t)c->c * sizeof *qa);
        memcpy(out, ho, rows * (size_t)c->dv * sizeof *out);
    }
    bad |= !ha || !ho;
    free(ha);
    free(ho);
    ld_buf *bs[] = {bq, bl, ba, bo};
    for (int i = 0; i < 4; i++)
        if (bs[i]) o->buf_free(be, bs[i]);
    if (w) o->weight_free(be, w);
    return bad;
}

static int check_absorb(ld_backend *be, const char *be_name, int exact)
{
    static const ld_kdt kdt[] = {LD_KDT_F32, LD_KDT_F16, LD_KDT_BF16};
    int bad = 0;
    for (size_t i = 0; i < sizeof absorb_cases / sizeof absorb_cases[0]; i++) {
        const absorb_case *c = &absorb_cases[i];
        rng = 0xAB50000u + i;
        size_t rows = (size_t)c->T * (size_t)c->H, nq = rows * (size_t)c->c, no = rows * (size_t)c->dv;
        void *wd = rand_weights(&kinds[c->kind], c->H * (c->dn + c->dv), c->c);
        float *q = malloc(rows * (size_t)(c->dn + c->dr) * sizeof *q), *ol = malloc(nq * sizeof *ol);
        float *rq = malloc(nq * sizeof *rq), *aq = malloc(nq * sizeof *aq), *oq = malloc(nq * sizeof *oq);
        float *ro = malloc(no * sizeof *ro), *ao = malloc(no * sizeof *ao), *oo = malloc(no * sizeof *oo);
        if (!wd || !q || !ol || !rq || !aq || !oq || !ro || !ao || !oo) return 1;
        fill(q, rows * (size_t)(c->dn + c->dr), 1.0f);
        fill(ol, nq, 1.0f);
        ld_ref_mla_absorb_q(rq, q, wd, kdt[c->kind], c->H, c->dn, c->dr, c->dv, c->c, 0, rows);
        ld_ref_mla_absorb_out(ro, ol, wd, kdt[c->kind], c->H, c->dn, c->dv, c->c, 0, rows);
        char what[120], wq[140], wo[140];
        snprintf(what, sizeof what, "T=%d H=%d dn=%d dr=%d dv=%d c=%d %s", c->T, c->H, c->dn, c->dr, c->dv, c->c,
                 kinds[c->kind].name);
        snprintf(wq, sizeof wq, "mla_absorb_q %s", what);
        snprintf(wo, sizeof wo, "mla_absorb_out %s", what);
        if (absorb_run(be, c, wd, q, ol, 0, c->T, aq, ao)) {
            bad++;
        } else {
            bad += agree(be_name, wq, aq, rq, nq, exact, 1e-10) + agree(be_name, wo, ao, ro, no, exact, 1e-10);
            size_t pq = (size_t)c->H * (size_t)c->c, po = (size_t)c->H * (size_t)c->dv;
            for (int t = 0; t < c->T; t++)
                bad += absorb_run(be, c, wd, q, ol, t, 1, oq + (size_t)t * pq, oo + (size_t)t * po);
            if (memcmp(oq, aq, nq * sizeof *oq) || memcmp(oo, ao, no * sizeof *oo)) {
                printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
                bad++;
            }
        }
        free(wd);
        free(q);
        free(ol);
        free(rq);
        free(aq);
        free(oq);
        free(ro);
        free(ao);
        free(oo);
    }
    return bad;
}

/* rows [t0, t0 + T) of logits [.][E] routed by the op */
static int route_run(ld_backend *be, const route_case *c, const float *logits, const float *bias, int t0, int T,
                     int32_t *idx, float *w)
{
    ld_buf *bl = upload(be, logits + (size_t)t0 * (size_t)c->E, (size_t)T * (size_t)c->E);
    ld_error err = {0};
    int bad = !bl || be->ops->ds_route(be, idx, w, bl, c->bias ? bias : NULL, T, c->E, c->n_group, c->topk_group,
                                       c->top_k, c->norm, c->scale, &err) != LD_OK;
    if (bad && bl) fprintf(stderr, "  ds_route: %s\n", err.msg);
    if (bl) be->ops->buf_free(be, bl);
    return bad;
}

static int check_route(ld_backend *be, const char *be_name, int exact)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof route_cases / sizeof route_cases[0]; i++) {
        const route_case *c = &route_cases[i];
        rng = 0x7007E000u + i;
        size_t nl = (size_t)c->T * (size_t)c->E, nk = (size_t)c->T * (size_t)c->top_k;
        float *lg = malloc(nl * sizeof *lg), *bias = malloc((size_t)c->E * sizeof *bias);
        float *rw = malloc(nk * sizeof *rw), *aw = malloc(nk * sizeof *aw), *ow = malloc(nk * sizeof *ow);
        int32_t *ri = malloc(nk * sizeof *ri), *ai = malloc(nk * sizeof *ai), *oi = malloc(nk * sizeof *oi);
        if (!lg || !bias || !rw || !aw || !ow || !ri || !ai || !oi) return 1;
        fill(lg, nl, 4.0f);
        fill(bias, (size_t)c->E, 0.5f);
        for (int t = 0; t < c->T; t++) /* a tie in every row: the lower id first */
            lg[(size_t)t * (size_t)c->E + (size_t)c->E - 1] = lg[(size_t)t * (size_t)c->E + 1];
        ld_ref_ds_route(ri, rw, lg, c->bias ? bias : NULL, c->E, c->n_group, c->topk_group, c->top_k, c->norm,
                        c->scale, 0, (size_t)c->T);
        if (route_run(be, c, lg, bias, 0, c->T, ai, aw)) {
            bad++;
        } else {
            char what[160];
            snprintf(what, sizeof what, "ds_route T=%d E=%d groups=%d/%d top_k=%d norm=%d bias=%d", c->T, c->E,
                     c->topk_group, c->n_group, c->top_k, c->norm, c->bias);
            int ids = memcmp(ai, ri, nk * sizeof *ai) == 0;
            if (!ids) printf("  %-12s %-62s  FAIL (other experts)\n", be_name, what);
            bad += !ids + agree(be_name, what, aw, rw, nk, exact, 1e-12);
            for (int t = 0; t < c->T; t++)
                bad += route_run(be, c, lg, bias, t, 1, oi + (size_t)t * (size_t)c->top_k,
                                 ow + (size_t)t * (size_t)c->top_k);
            if (memcmp(oi, ai, nk * sizeof *oi) || memcmp(ow, aw, nk * sizeof *ow)) {
                printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
                bad++;
            }
        }
        free(lg);
        free(bias);
        free(rw);
        free(aw);
        free(ow);
        free(ri);
        free(ai);
        free(oi);
    }
    return bad;
}

/* queries [t0, t0 + T) of the case by the op over keys [pos0 + t0 + T] */
static int index_run(ld_backend *be, const index_case *c, const float *q, const float *w, const float *keys, int t0,
                     int T, int32_t *sel)
{
    size_t QW = (size_t)c->H * (size_t)c->dim, S = (size_t)(c->pos0 + t0 + T);
    ld_buf *bq = upload(be, q + (size_t)t0 * QW, (size_t)T * QW);
    ld_buf *bw = upload(be, w + (size_t)t0 * (size_t)c->H, (size_t)T * (size_t)c->H);
    ld_buf *bkeys = upload(be, keys, S * (size_t)c->dim);
    ld_error err = {0};
    int bad = !bq || !bw || !bkeys ||
              be->ops->index_topk(be, sel, bq, bw, bkeys, T, c->pos0 + t0, c->H, c->dim, c->k, &err) != LD_OK;
    if (bad && bq && bw && bkeys) fprintf(stderr, "  index_topk: %s\n", err.msg);
    ld_buf *bs[] = {bq, bw, bkeys};
    for (int i = 0; i < 3; i++)
        if (bs[i]) be->ops->buf_free(be, bs[i]);
    return bad;
}

static int check_index(ld_backend *be, const char *be_name)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof index_cases / sizeof index_cases[0]; i++) {
        const index_case *c = &index_cases[i];
        rng = 0x1D3E0000u + i;
        size_t QW = (size_t)c->H * (size_t)c->dim, S = (size_t)(c->pos0 + c->T), ns = (size_t)c->T * (size_t)c->k;
        float *q = malloc((size_t)c->T * QW * sizeof *q), *w = malloc((size_t)c->T * (size_t)c->H * sizeof *w);
        float *keys = malloc(S * (size_t)c->dim * sizeof *keys), *scores = malloc(S * sizeof *scores);
        int32_t *r = malloc(ns * sizeof *r), *a = malloc(ns * sizeof *a), *one = malloc(ns * sizeof *one);
        int32_t *heap = malloc((size_t)c->k * sizeof *heap);
        if (!q || !w || !keys || !scores || !r || !a || !one || !heap) return 1;
        fill(q, (size_t)c->T * QW, 1.0f);
        fill(w, (size_t)c->T * (size_t)c->H, 1.0f);
        fill(keys, S * (size_t)c->dim, 1.0f);
        for (int t = 0; t < c->T; t++) {
            int vis = c->pos0 + t + 1;
            int32_t *row = r + (size_t)t * (size_t)c->k;
            ld_ref_ds_index_scores(scores, q + (size_t)t * QW, w + (size_t)t * (size_t)c->H, keys, c->H, c->dim, vis);
            for (int j = ld_ref_ds_topk(row, scores, vis, c->k, heap); j < c->k; j++) row[j] = -1;
        }
        char what[160];
        snprintf(what, sizeof what, "index_topk T=%d pos0=%d H=%d dim=%d k=%d", c->T, c->pos0, c->H, c->dim, c->k);
        if (index_run(be, c, q, w, keys, 0, c->T, a)) {
            bad++;
        } else {
            int ok = memcmp(a, r, ns * sizeof *a) == 0;
            printf("  %-12s %-62s %10s %10s %8s%s\n", be_name, what, "-", "-", "exact", ok ? "" : "  FAIL");
            bad += !ok;
            for (int t = 0; t < c->T; t++) bad += index_run(be, c, q, w, keys, t, 1, one + (size_t)t * (size_t)c->k);
            if (memcmp(one, a, ns * sizeof *a)) {
                printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
                bad++;
            }
        }
        free(q);
        free(w);
        free(keys);
        free(scores);
        free(r);
        free(a);
        free(one);
        free(heap);
    }
    return bad;
}

/* every DeepSeek op of backend `be` (all three are there on every backend
 * of this build) */
static int check_ds_ops(ld_backend *be, const char *be_name, int exact)
{
    const ld_backend_ops *o = be->ops;
    CHECK_MSG(o->mla_latent && o->mla_absorb_q && o->mla_absorb_out && o->ds_route && o->index_topk,
              "%s lacks a DeepSeek op", be_name);
    int bad = check_mla(be, be_name, exact) + check_absorb(be, be_name, exact) + check_route(be, be_name, exact) +
              check_index(be, be_name);
    CHECK_MSG(!bad, "%d DeepSeek cases failed on %s", bad, be_name);
    return 0;
}

/* a check of some DeepSeek entries on one backend (exact: bitwise the
 * plain-C kernels, else within the CUDA tolerances) */
typedef int (*ds_check_fn)(ld_backend *be, const char *be_name, int exact);

/* the CPU backends: bitwise the plain-C kernels with 1, 2 (fast) and 3
 * threads */
static int on_cpu_backends(ds_check_fn check)
{
    static const struct {
        int threads, fast;
        const char *name;
    } runs[] = {{1, 0, "ref-1t"}, {3, 0, "ref-3t"}, {2, 1, "cpu-2t"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        ld_backend *be = NULL;
        ld_error err = {0};
        CHECK_MSG(ld_backend_cpu_create_ex(runs[i].threads, runs[i].fast, NULL, &be, &err) == LD_OK, "%s", err.msg);
        int rc = check(be, runs[i].name, 1);
        ld_backend_destroy(be);
        if (rc) return rc;
    }
    return 0;
}

/* backend `which` of open_backends (1 cuda-ref, 2 cuda-custom), or a
 * visible skip without it */
static int on_backend(int which, ds_check_fn check)
{
    bk b[3];
    int n = 0;
    CHECK(!open_backends(b, &n));
    int rc = 0;
    if (!b[which].be) {
        fprintf(stderr, "  skipped: %s: %s\n", b[which].name, b[which].skip);
        rc = LD_SKIP;
    } else {
        rc = check(b[which].be, b[which].name, 0);
    }
    close_backends(b, n);
    return rc;
}

static int test_ds_ops_cpu(void) { return on_cpu_backends(check_ds_ops); }
static int test_ds_ops_cuda_ref(void) { return on_backend(1, check_ds_ops); }
static int test_ds_ops_cuda_custom(void) { return on_backend(2, check_ds_ops); }

/* bad shapes, cache ranges and selections are refused (LD_ERR_USAGE) */
static int test_ds_ops_refusals(void)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    CHECK(ld_backend_ref_create(2, &be, &err) == LD_OK);
    const ld_backend_ops *o = be->ops;
    ld_buf *b = upload(be, NULL, 4096);
    CHECK(b);
    int32_t idx[8], sel[4] = {1, -1, -1, -1}; /* position 1 from position 0: not visible */
    float w[8];
    CHECK(o->mla_latent(be, b, b, b, b, b, 1, 0, 2, 4, 4, 8, 1.0f, sel, 4, 0, &err) == LD_ERR_USAGE);
    CHECK(o->mla_latent(be, b, b, b, b, b, 1, 0, 2, 4, 4, 8, 1.0f, NULL, 0, -1, &err) == LD_ERR_USAGE);
    CHECK(o->mla_latent(be, b, b, b, b, b, 1, 4000, 2, 4, 4, 8, 1.0f, NULL, 0, 0, &err) == LD_ERR_USAGE);
    CHECK(o->ds_route(be, idx, w, b, NULL, 1, 10, 4, 2, 2, 1, 1.0f, &err) == LD_ERR_USAGE);  /* 10 % 4 */
    CHECK(o->ds_route(be, idx, w, b, NULL, 1, 16, 4, 5, 2, 1, 1.0f, &err) == LD_ERR_USAGE);  /* 5 > 4 groups */
    CHECK(o->ds_route(be, idx, w, b, NULL, 1, 16, 4, 2, 9, 1, 1.0f, &err) == LD_ERR_USAGE);  /* 9 > 2 * 4 */
    CHECK(o->ds_route(be, idx, w, b, NULL, 1, 2048, 8, 2, 2, 1, 1.0f, &err) == LD_ERR_USAGE); /* E > 1024 */
    CHECK(o->index_topk(be, sel, b, b, b, 1, 0, 2, 8, 0, &err) == LD_ERR_USAGE);
    CHECK(o->index_topk(be, sel, b, b, b, 1, 5000, 2, 8, 4, &err) == LD_ERR_USAGE);
    void *wd = rand_weights(&kinds[3], 2 * (4 + 4), 32); /* q4_0: not a plain type */
    ld_weight *wq = wd ? load_weight(be, &kinds[3], wd, 2 * (4 + 4), 32, 0) : NULL;
    CHECK(wq);
    CHECK(o->mla_absorb_q(be, b, b, wq, 1, 2, 4, 4, 4, 32, &err) == LD_ERR_UNSUPPORTED);
    CHECK(o->mla_absorb_out(be, b, b, wq, 1, 2, 4, 4, 32, &err) == LD_ERR_UNSUPPORTED);
    o->weight_free(be, wq);
    free(wd);
    wd = rand_weights(&kinds[0], 2 * (4 + 4), 32);
    wq = wd ? load_weight(be, &kinds[0], wd, 2 * (4 + 4), 32, 0) : NULL;
    CHECK(wq);
    CHECK(o->mla_absorb_q(be, b, b, wq, 1, 2, 4, 4, 4, 32, &err) == LD_OK);
    CHECK(o->mla_absorb_q(be, b, b, wq, 1, 3, 4, 4, 4, 32, &err) == LD_ERR_USAGE); /* 3 heads: other rows */
    CHECK(o->mla_absorb_out(be, b, b, wq, 1, 2, 4, 4, 16, &err) == LD_ERR_USAGE);  /* c 16: other columns */
    CHECK(o->mla_absorb_q(be, b, b, wq, 300, 2, 4, 4, 4, 32, &err) == LD_ERR_USAGE); /* past the buffer */
    o->weight_free(be, wq);
    free(wd);
    o->buf_free(be, b);
    ld_backend_destroy(be);
    return 0;
}

/* ---------------------------------------------------------------- DeepSeek-V4 */

/* V4's mHC mixing (hc_pre, hc_post) on random inputs against
 * kernels/ref/ref_ds4.h's leaves called a token at a time (the V4
 * session's host path; mhc=bf16: post and comb then rounded to bf16): the
 * CPU backends bitwise whatever their thread count, CUDA to a tolerance
 * (the fp32 mixing 1e-10; the bf16 variants 1e-4, since an expf ulp may
 * move a value across a bf16 rounding boundary); the rows one call each
 * give the batch's bits; the guards stay. */

typedef struct hc_case {
    int T, N, D, iters;
} hc_case;

static const hc_case hc_cases[] = {{1, 4, 64, 20}, {5, 4, 96, 20}, {3, 4, 32, 1}, {2, 8, 48, 7}, {4, 4, 1024, 20},
                                   {9, 2, 16, 0}};

typedef struct hc_data {
    float *X, *fn, *base, scale[3], *f; /* inputs */
    float *post, *comb, *col, *out;     /* outputs [T]... */
} hc_data;

static size_t hc_rows(const hc_case *c)
{
    return (size_t)(2 + c->N) * (size_t)c->N;
}

static int hc_make(const hc_case *c, hc_data *d)
{
    size_t T = (size_t)c->T, N = (size_t)c->N, D = (size_t)c->D, HC = hc_rows(c);
    d->X = malloc(T * N * D * sizeof(float));
    d->fn = malloc(HC * N * D * sizeof(float));
    d->base = malloc(HC * sizeof(float));
    d->f = malloc(T * D * sizeof(float));
    d->post = malloc(T * N * sizeof(float));
    d->comb = malloc(T * N * N * sizeof(float));
    d->col = malloc(T * D * sizeof(float));
    d->out = malloc(T * N * D * sizeof(float));
    if (!d->X || !d->fn || !d->base || !d->f || !d->post || !d->comb || !d->col || !d->out) return 1;
    fill(d->X, T * N * D, 2.0f);
    fill(d->fn, HC * N * D, 0.2f);
    fill(d->base, HC, 0.5f);
    fill(d->scale, 3, 1.5f);
    fill(d->f, T * D, 1.0f);
    return 0;
}

static void hc_free(hc_data *d)
{
    float *ps[] = {d->X, d->fn, d->base, d->f, d->post, d->comb, d->col, d->out};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

/* the session's host path: the leaves a token at a time into d's outputs */
static int hc_expect(const hc_case *c, int variant, hc_data *d)
{
    size_t N = (size_t)c->N, D = (size_t)c->D;
    float *scratch = malloc((N * D + hc_rows(c)) * sizeof *scratch);
    if (!scratch) return 1;
    for (size_t t = 0; t < (size_t)c->T; t++) {
        float *post = d->post + t * N, *comb = d->comb + t * N * N;
        ld_ref_ds4_hc_pre_ex(d->X + t * N * D, c->N, c->D, d->fn, d->base, d->scale, c->iters, 1e-6f, 1e-6f,
                             variant == LD_DS4_MHC_SINKHORN_BF16, post, comb, d->col + t * D, scratch);
        for (size_t i = 0; variant == LD_DS4_MHC_BF16 && i < N; i++) post[i] = ld_var_bf16_round(post[i]);
        for (size_t i = 0; variant == LD_DS4_MHC_BF16 && i < N * N; i++) comb[i] = ld_var_bf16_round(comb[i]);
        ld_ref_ds4_hc_post(d->out + t * N * D, d->X + t * N * D, d->f + t * D, post, comb, c->N, c->D);
    }
    free(scratch);
    return 0;
}

/* tokens [t0, t0 + T) by the ops into r's outputs at t0; hc_post mixes
 * the op's own post and comb; LD_ERR_UNSUPPORTED is returned as such */
static ld_status hc_run(ld_backend *be, const hc_case *c, int variant, const hc_data *in, int t0, int T, hc_data *r)
{
    const ld_backend_ops *o = be->ops;
    size_t N = (size_t)c->N, D = (size_t)c->D, t = (size_t)t0, n = (size_t)T, HC = hc_rows(c);
    ld_buf *bx = upload(be, in->X + t * N * D, n * N * D), *bfn = upload(be, in->fn, HC * N * D);
    ld_buf *bf = upload(be, in->f + t * D, n * D), *bp = upload(be, NULL, n * N), *bc = upload(be, NULL, n * N * N);
    ld_buf *bu = upload(be, NULL, n * D), *bo = upload(be, NULL, n * N * D);
    ld_error err = {0};
    ld_status st = !bx || !bfn || !bf || !bp || !bc || !bu || !bo ? LD_ERR_NOMEM : LD_OK;
    if (st == LD_OK)
        st = o->hc_pre(be, bp, bc, bu, bx, bfn, in->base, in->scale, T, c->N, c->D, c->iters, 1e-6f, 1e-6f, variant,
                       &err);
    if (st == LD_OK) st = o->hc_post(be, bo, bx, bf, bp, bc, T, c->N, c->D, &err);
    if (st != LD_OK && st != LD_ERR_UNSUPPORTED) fprintf(stderr, "  hc ops: %s\n", err.msg);
    ld_buf *bs[] = {bp, bc, bu, bo};
    float *dst[] = {r->post + t * N, r->comb + t * N * N, r->col + t * D, r->out + t * N * D};
    size_t len[] = {n * N, n * N * N, n * D, n * N * D};
    for (int i = 0; i < 4 && st == LD_OK; i++) {
        float *h = download(be, bs[i], len[i]);
        if (!h) st = LD_ERR_MISMATCH;
        else memcpy(dst[i], h, len[i] * sizeof *h);
        free(h);
    }
    ld_buf *all[] = {bx, bfn, bf, bp, bc, bu, bo};
    for (int i = 0; i < 7; i++)
        if (all[i]) o->buf_free(be, all[i]);
    return st;
}

/* a's outputs equal r's (bitwise, or to tol) */
static int hc_agree(const char *be_name, const char *what, const hc_case *c, const hc_data *a, const hc_data *r,
                    int exact, double tol)
{
    size_t T = (size_t)c->T, N = (size_t)c->N, D = (size_t)c->D;
    char w[4][200];
    const char *part[] = {"post", "comb", "collapsed", "hc_post"};
    for (int i = 0; i < 4; i++) snprintf(w[i], sizeof w[i], "%s %s", what, part[i]);
    return agree(be_name, w[0], a->post, r->post, T * N, exact, tol) +
           agree(be_name, w[1], a->comb, r->comb, T * N * N, exact, tol) +
           agree(be_name, w[2], a->col, r->col, T * D, exact, tol) +
           agree(be_name, w[3], a->out, r->out, T * N * D, exact, tol);
}

/* one case, one variant: the batch, then its rows one call each */
static int check_hc_case(ld_backend *be, const char *be_name, int exact, const hc_case *c, int variant)
{
    hc_data in = {0}, a = {0}, one = {0};
    int bad = hc_make(c, &in) || hc_make(c, &a) || hc_make(c, &one) || hc_expect(c, variant, &in);
    char what[120];
    snprintf(what, sizeof what, "hc T=%d N=%d D=%d iters=%d variant=%d", c->T, c->N, c->D, c->iters, variant);
    ld_status st = bad ? LD_ERR_NOMEM : hc_run(be, c, variant, &in, 0, c->T, &a);
    if (!bad) {
        double tol = variant == LD_DS4_MHC_F32 ? 1e-10 : 1e-4;
        bad = st != LD_OK || hc_agree(be_name, what, c, &a, &in, exact, tol);
        for (int t = 0; t < c->T && !bad; t++) bad = hc_run(be, c, variant, &in, t, 1, &one) != LD_OK;
        size_t T = (size_t)c->T, N = (size_t)c->N, D = (size_t)c->D;
        if (!bad && (memcmp(one.post, a.post, T * N * sizeof(float)) ||
                     memcmp(one.comb, a.comb, T * N * N * sizeof(float)) ||
                     memcmp(one.col, a.col, T * D * sizeof(float)) ||
                     memcmp(one.out, a.out, T * N * D * sizeof(float)))) {
            printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
            bad = 1;
        }
    }
    hc_free(&in);
    hc_free(&a);
    hc_free(&one);
    return bad;
}

/* V4's router (ds4_route) against ld_ref_ds4_route a row at a time: the
 * CPU backends bitwise, CUDA's ids exactly and weights to a tolerance;
 * rows one call each give the batch's results */

typedef struct ds4_route_case {
    int T, E, K, bias, hash;
    float scale;
} ds4_route_case;

static const ds4_route_case ds4_route_cases[] = {
    {3, 64, 6, 1, 0, 2.5f}, {1, 256, 8, 0, 0, 1.0f}, {5, 16, 4, 1, 1, 1.5f}, {7, 384, 6, 1, 1, 16.0f},
    {2, 1024, 64, 1, 0, 1.0f}, {64, 256, 8, 1, 1, 2.0f}, {48, 256, 8, 0, 0, 1.0f},
};

/* rows [t0, t0 + T) by the op */
static int ds4_route_run(ld_backend *be, const ds4_route_case *c, const float *lg, const float *bias,
                         const int32_t *hash, int t0, int T, int32_t *idx, float *w)
{
    size_t K = (size_t)c->K;
    ld_buf *bl = upload(be, lg + (size_t)t0 * (size_t)c->E, (size_t)T * (size_t)c->E);
    ld_error err = {0};
    int bad = !bl || be->ops->ds4_route(be, idx, w, bl, c->bias ? bias : NULL, c->hash ? hash + (size_t)t0 * K : NULL,
                                        T, c->E, c->K, c->scale, &err) != LD_OK;
    if (bad && bl) fprintf(stderr, "  ds4_route: %s\n", err.msg);
    if (bl) be->ops->buf_free(be, bl);
    return bad;
}

static int check_one_ds4_route(ld_backend *be, const char *be_name, int exact, const ds4_route_case *c)
{
    size_t nl = (size_t)c->T * (size_t)c->E, nk = (size_t)c->T * (size_t)c->K, K = (size_t)c->K;
    float *lg = malloc(nl * sizeof *lg), *bias = malloc((size_t)c->E * sizeof *bias);
    float *rw = malloc(nk * sizeof *rw), *aw = malloc(nk * sizeof *aw), *ow = malloc(nk * sizeof *ow);
    int32_t *ri = malloc(nk * sizeof *ri), *ai = malloc(nk * sizeof *ai), *oi = malloc(nk * sizeof *oi);
    int32_t *hash = malloc(nk * sizeof *hash);
    int bad = !lg || !bias || !rw || !aw || !ow || !ri || !ai || !oi || !hash;
    if (!bad) {
        fill(lg, nl, 6.0f);
        fill(bias, (size_t)c->E, 0.5f);
        for (int t = 0; t < c->T; t++) { /* a tie in every row; hash rows of distinct ids, not sorted */
            lg[(size_t)t * (size_t)c->E + (size_t)c->E - 1] = lg[(size_t)t * (size_t)c->E + 1];
            for (size_t k = 0; k < K; k++)
                hash[(size_t)t * K + k] = (int32_t)((k * 7 + (size_t)t * 3 + 5) % (size_t)c->E);
        }
        for (size_t t = 0; t < (size_t)c->T; t++)
            ld_ref_ds4_route(ri + t * K, rw + t * K, lg + t * (size_t)c->E, c->bias ? bias : NULL,
                             c->hash ? hash + t * K : NULL, c->E, c->K, c->scale);
        bad = ds4_route_run(be, c, lg, bias, hash, 0, c->T, ai, aw);
    }
    if (!bad) {
        char what[160];
        snprintf(what, sizeof what, "ds4_route T=%d E=%d K=%d bias=%d hash=%d", c->T, c->E, c->K, c->bias, c->hash);
        int ids = memcmp(ai, ri, nk * sizeof *ai) == 0;
        if (!ids) printf("  %-12s %-62s  FAIL (other experts)\n", be_name, what);
        bad = !ids + agree(be_name, what, aw, rw, nk, exact, 1e-12);
        for (int t = 0; t < c->T; t++)
            bad += ds4_route_run(be, c, lg, bias, hash, t, 1, oi + (size_t)t * K, ow + (size_t)t * K);
        if (memcmp(oi, ai, nk * sizeof *oi) || memcmp(ow, aw, nk * sizeof *ow)) {
            printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
            bad++;
        }
    }
    void *ps[] = {lg, bias, rw, aw, ow, ri, ai, oi, hash};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    return bad;
}

static int check_ds4_route(ld_backend *be, const char *be_name, int exact)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof ds4_route_cases / sizeof ds4_route_cases[0]; i++) {
        rng = 0xD4700000u + i;
        bad += check_one_ds4_route(be, be_name, exact, &ds4_route_cases[i]);
    }
    return bad;
}

/* every V4 op of backend `be` on every case and variant */
static int check_ds4_ops(ld_backend *be, const char *be_name, int exact)
{
    CHECK_MSG(be->ops->hc_pre && be->ops->hc_post && be->ops->ds4_route, "%s lacks a V4 op", be_name);
    int bad = 0;
    for (size_t i = 0; i < sizeof hc_cases / sizeof hc_cases[0]; i++)
        for (int v = LD_DS4_MHC_F32; v <= LD_DS4_MHC_SINKHORN_BF16; v++) {
            rng = 0x4C000000u + i;
            bad += check_hc_case(be, be_name, exact, &hc_cases[i], v);
        }
    bad += check_ds4_route(be, be_name, exact);
    CHECK_MSG(!bad, "%d V4 cases failed on %s", bad, be_name);
    return 0;
}

static int test_ds4_ops_cpu(void) { return on_cpu_backends(check_ds4_ops); }
static int test_ds4_ops_cuda_ref(void) { return on_backend(1, check_ds4_ops); }
static int test_ds4_ops_cuda_custom(void) { return on_backend(2, check_ds4_ops); }

/* bad shapes and variants, buffers too short, an aliased hc_post, hash
 * rows naming no expert */
static int test_ds4_ops_refusals(void)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    const ld_backend_ops *o = be->ops;
    ld_buf *b = upload(be, NULL, 256), *b2 = upload(be, NULL, 256);
    CHECK(b && b2);
    float base[24] = {0}, scale[3] = {1, 1, 1};
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 2, 4, 1, 1e-6f, 1e-6f, LD_DS4_MHC_F32, &err) == LD_OK);
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 2, 4, 1, 1e-6f, 1e-6f, 3, &err) == LD_ERR_USAGE);
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 0, 4, 1, 1e-6f, 1e-6f, 0, &err) == LD_ERR_USAGE);
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 2, 4, -1, 1e-6f, 1e-6f, 0, &err) == LD_ERR_USAGE);
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 4, 64, 1, 1e-6f, 1e-6f, 0, &err) == LD_ERR_USAGE); /* fn */
    CHECK(o->hc_post(be, b2, b, b, b, b, 1, 2, 4, &err) == LD_OK);
    CHECK(o->hc_post(be, b, b, b, b, b, 1, 2, 4, &err) == LD_ERR_USAGE);   /* out aliases X */
    CHECK(o->hc_post(be, b2, b, b, b, b, 1, 2, 0, &err) == LD_ERR_USAGE);  /* D 0 */
    CHECK(o->hc_post(be, b2, b, b, b, b, 100, 2, 4, &err) == LD_ERR_USAGE); /* past the buffer */
    int32_t idx[8], hash[8] = {0, 1, 2, 3, 0, 1, 2, 16};
    float w[8];
    CHECK(o->ds4_route(be, idx, w, b, NULL, hash, 2, 16, 4, 1.0f, &err) == LD_ERR_USAGE); /* expert 16 of 16 */
    CHECK(o->ds4_route(be, idx, w, b, NULL, hash, 1, 16, 4, 1.0f, &err) == LD_OK);
    CHECK(o->ds4_route(be, idx, w, b, NULL, NULL, 1, 16, 17, 1.0f, &err) == LD_ERR_USAGE); /* K > E */
    CHECK(o->ds4_route(be, idx, w, b, NULL, NULL, 1, 2048, 4, 1.0f, &err) == LD_ERR_USAGE); /* E > 1024 */
    CHECK(o->ds4_route(be, idx, w, b, NULL, NULL, 40, 16, 4, 1.0f, &err) == LD_ERR_USAGE); /* past the buffer */
    o->buf_free(be, b);
    o->buf_free(be, b2);
    ld_backend_destroy(be);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_spec_parse),      LD_CASE(test_spec_errors),      LD_CASE(test_cuda_unavailable),
    LD_CASE(test_ops_cpu),         LD_CASE(test_split_cpu),        LD_CASE(test_ops_cuda_ref),
    LD_CASE(test_split_cuda_ref),  LD_CASE(test_ops_cuda_custom),  LD_CASE(test_split_cuda_custom),
    LD_CASE(test_f8b_refusals_cpu), LD_CASE(test_f8b_refusals_cuda_ref), LD_CASE(test_f8b_refusals_cuda_custom),
    LD_CASE(test_ds_ops_cpu),      LD_CASE(test_ds_ops_cuda_ref),  LD_CASE(test_ds_ops_cuda_custom),
    LD_CASE(test_ds_ops_refusals),
    LD_CASE(test_ds4_ops_cpu),     LD_CASE(test_ds4_ops_cuda_ref), LD_CASE(test_ds4_ops_cuda_custom),
    LD_CASE(test_ds4_ops_refusals),
};

LD_TEST_MAIN(tests)

#endif /* LD_BACKEND_OPS_NO_MAIN */
