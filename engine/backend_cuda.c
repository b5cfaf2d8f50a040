/* backend_cuda.c - the CUDA backend (see backend_cuda.h) over kernels/
 * cuda_ops.h.  The kernel-spec parser is always built (it needs no GPU);
 * the backend itself only when CUDA is (LD_HAVE_CUDA), else
 * ld_backend_cuda_create says "built without CUDA". */
#include "backend_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "logdiff_config.h"

static const char *const op_names[LD_CUDA_N_OPS] = {"embed", "rmsnorm", "matmul", "rope", "kv_store",
                                                    "attention", "swiglu", "add", "softmax", "mla", "absorb",
                                                    "route", "index", "hc"};

const char *ld_cuda_op_name(int op)
{
    return op >= 0 && op < LD_CUDA_N_OPS ? op_names[op] : NULL;
}

static int span_is(const char *p, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(p, word, n) == 0;
}

ld_status ld_cuda_kernels_parse(const char *spec, ld_cuda_kernels *out, ld_error *err)
{
    ld_cuda_kernels k;
    for (int i = 0; i < LD_CUDA_N_OPS; i++) k.custom[i] = 1;
    const char *p = spec ? spec : "";
    while (*p) {
        size_t off = (size_t)(p - spec);
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return LD_FAIL(err, LD_ERR_USAGE, off, "kernel spec item '%.*s' is not op=variant", (int)len, p);
        size_t nlen = (size_t)(eq - p), vlen = len - nlen - 1;
        const char *val = eq + 1;
        int custom;
        if (span_is(val, vlen, "ref")) custom = 0;
        else if (span_is(val, vlen, "custom")) custom = 1;
        else
            return LD_FAIL(err, LD_ERR_USAGE, (uint64_t)(val - spec),
                           "unknown kernel variant '%.*s' for '%.*s' (ref or custom)", (int)vlen, val, (int)nlen, p);
        if (span_is(p, nlen, "all")) {
            for (int i = 0; i < LD_CUDA_N_OPS; i++) k.custom[i] = (unsigned char)custom;
        } else {
            int op = -1;
            for (int i = 0; i < LD_CUDA_N_OPS; i++)
                if (span_is(p, nlen, op_names[i])) op = i;
            if (op < 0) return LD_FAIL(err, LD_ERR_USAGE, off, "unknown op '%.*s' in the kernel spec", (int)nlen, p);
            k.custom[op] = (unsigned char)custom;
        }
        if (!end) break;
        p = end + 1;
        if (!*p) return LD_FAIL(err, LD_ERR_USAGE, (uint64_t)(p - spec), "kernel spec ends with ','");
    }
    *out = k;
    return LD_OK;
}

#if !LD_HAVE_CUDA

ld_status ld_backend_cuda_create(int device, const char *kernels_spec, ld_backend **out, ld_error *err)
{
    (void)device;
    *out = NULL;
    ld_cuda_kernels k;
    LD_TRY(ld_cuda_kernels_parse(kernels_spec, &k, err));
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "built without CUDA");
}

#else /* LD_HAVE_CUDA */

#include "cuda_ops.h"
#include "ds_op_args.h"
#include "ref_ops.h"

struct ld_buf {
    float *d; /* device */
    size_t n;
};

struct ld_weight {
    void *d; /* device copy of the host bytes (LD_KDT_F8B: the e4m3 bytes) */
    float *scale; /* LD_KDT_F8B: device copy of the scale grid, else NULL */
    int br, bc;   /* LD_KDT_F8B: the scale blocks */
    ld_kdt dt;
    int64_t rows, cols;
    int rope_hd;
};

typedef struct cuda_backend {
    ld_backend base;
    int device;
    ld_cuda_kernels k;
    int32_t *tokens; /* device scratch for embed's token ids */
    size_t tokens_cap;
    float *freq; /* device scratch for rope's inverse frequencies */
    size_t freq_cap;
    float *work; /* attention workspace */
    size_t work_cap;
    int32_t *zeros; /* zero token ids: an FP8 matmul's bias rows by embed */
    size_t zeros_cap;
    float *bias_rows; /* [<= BIAS_ROWS][N] fp32 copies of an FP8 matmul's bias */
    size_t bias_rows_cap;
    int32_t *ds_i; /* DeepSeek ops: selections in, expert ids / top-k out */
    size_t ds_i_cap;
    float *ds_f; /* DeepSeek ops: router bias and weights, indexer scores */
    size_t ds_f_cap;
} cuda_backend;

static ld_status cu_fail(ld_error *err, const char *what, int code)
{
    return LD_FAIL(err, ld_cu_is_oom(code) ? LD_ERR_NOMEM : LD_ERR_CUDA, 0, "cuda %s: %s (%s)", what,
                   ld_cu_error_string(code), ld_cu_error_name(code));
}

/* a CUDA call of op `what`: a non-zero code returns an ld_error naming it */
#define CU(what, expr)                                  \
    do {                                                \
        int cu_e_ = (expr);                             \
        if (cu_e_) return cu_fail(err, (what), cu_e_);  \
    } while (0)

static int variant(const cuda_backend *cb, int op)
{
    return cb->k.custom[op] ? LD_CU_CUSTOM : LD_CU_REF;
}

/* grows a device scratch array to `bytes` */
static ld_status scratch(void **p, size_t *cap, size_t bytes, const char *what, ld_error *err)
{
    if (bytes <= *cap) return LD_OK;
    ld_cu_free(*p);
    *p = NULL;
    *cap = 0;
    CU(what, ld_cu_malloc(p, bytes));
    *cap = bytes;
    return LD_OK;
}

static void destroy(ld_backend *be)
{
    cuda_backend *cb = (cuda_backend *)be;
    ld_cu_set_device(cb->device);
    ld_cu_free(cb->tokens);
    ld_cu_free(cb->freq);
    ld_cu_free(cb->work);
    ld_cu_free(cb->zeros);
    ld_cu_free(cb->bias_rows);
    ld_cu_free(cb->ds_i);
    ld_cu_free(cb->ds_f);
    free(cb);
}

/* ---------------------------------------------------------------- buffers */

static ld_status buf_alloc(ld_backend *be, size_t n, ld_buf **out, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    *out = NULL;
    if (n > SIZE_MAX / sizeof(float) - 1)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "a buffer of %zu floats is too large", n);
    ld_buf *b = malloc(sizeof *b);
    if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    b->n = n;
    b->d = NULL;
    void *d = NULL;
    int e = ld_cu_set_device(cb->device);
    if (!e) e = ld_cu_malloc(&d, (n ? n : 1) * sizeof(float));
    if (!e) e = ld_cu_memset0(d, n * sizeof(float));
    if (e) {
        ld_cu_free(d);
        free(b);
        ld_status st = cu_fail(err, "buf_alloc", e);
        if (err) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%.180s, %zu floats", err->msg, n);
            memcpy(err->msg, msg, sizeof msg);
        }
        return st;
    }
    b->d = d;
    *out = b;
    return LD_OK;
}

static void buf_free(ld_backend *be, ld_buf *b)
{
    if (!b) return;
    ld_cu_set_device(((cuda_backend *)be)->device);
    ld_cu_free(b->d);
    free(b);
}

static ld_status range(const ld_buf *b, size_t off, size_t n, ld_error *err)
{
    if (off > b->n || n > b->n - off)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "range [%zu, +%zu) outside a buffer of %zu floats", off, n, b->n);
    return LD_OK;
}

static ld_status buf_write(ld_backend *be, ld_buf *b, size_t off, const float *src, size_t n, ld_error *err)
{
    LD_TRY(range(b, off, n, err));
    CU("buf_write", ld_cu_set_device(((cuda_backend *)be)->device));
    CU("buf_write", ld_cu_h2d(b->d + off, src, n * sizeof *src));
    return LD_OK;
}

static ld_status buf_read(ld_backend *be, const ld_buf *b, size_t off, float *dst, size_t n, ld_error *err)
{
    LD_TRY(range(b, off, n, err));
    CU("buf_read", ld_cu_set_device(((cuda_backend *)be)->device));
    CU("buf_read", ld_cu_d2h(dst, b->d + off, n * sizeof *dst));
    return LD_OK;
}

/* ---------------------------------------------------------------- weights */

/* the kernel type of host tensor t and the values per block of its rows */
static ld_status weight_type(const ld_host_tensor *t, ld_kdt *dt, int64_t *block, ld_error *err)
{
    *block = 1;
    switch (t->quant) {
    case LD_WQ_NONE:
        switch (t->dtype) {
        case LD_DT_F32: *dt = LD_KDT_F32; return LD_OK;
        case LD_DT_F16: *dt = LD_KDT_F16; return LD_OK;
        case LD_DT_BF16: *dt = LD_KDT_BF16; return LD_OK;
        default: return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "weight dtype %s is not supported", ld_dtype_name(t->dtype));
        }
    case LD_WQ_Q4_0: *dt = LD_KDT_Q4_0; *block = 32; return LD_OK;
    case LD_WQ_Q4_1: *dt = LD_KDT_Q4_1; *block = 32; return LD_OK;
    case LD_WQ_Q8_0: *dt = LD_KDT_Q8_0; *block = 32; return LD_OK;
    case LD_WQ_Q4_K: *dt = LD_KDT_Q4_K; *block = 256; return LD_OK;
    case LD_WQ_Q6_K: *dt = LD_KDT_Q6_K; *block = 256; return LD_OK;
    case LD_WQ_F8B:
        if (!t->scale || t->scale_br < 1 || t->scale_bc < 1)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "an FP8 weight without its block scales");
        if (t->rope_hd)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "an FP8 block-scaled weight in the rope row order");
        *dt = LD_KDT_F8B;
        return LD_OK;
    default: return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "weight block type %d is not supported", (int)t->quant);
    }
}

/* fp32 values in the scale grid of FP8 weight t */
static size_t f8b_scales(const ld_host_tensor *t)
{
    size_t rb = (size_t)((t->rows + t->scale_br - 1) / t->scale_br);
    return rb * (size_t)((t->cols + t->scale_bc - 1) / t->scale_bc);
}

/* device copies of t's `bytes` of data and, for an FP8 weight, of its
 * scale grid into w (w->d, w->scale: what was allocated, for the caller to
 * free on an error); a CUDA error code */
static int weight_copy(ld_weight *w, const ld_host_tensor *t, size_t bytes)
{
    int e = ld_cu_malloc(&w->d, bytes);
    if (!e) e = ld_cu_h2d(w->d, t->data, bytes);
    if (e || w->dt != LD_KDT_F8B) return e;
    size_t ns = f8b_scales(t);
    void *s = NULL;
    e = ld_cu_malloc(&s, (ns ? ns : 1) * sizeof(float));
    w->scale = s;
    if (!e) e = ld_cu_h2d(s, t->scale, ns * sizeof(float));
    return e;
}

static ld_status weight_load(ld_backend *be, const ld_host_tensor *t, ld_weight **out, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    *out = NULL;
    ld_kdt dt = LD_KDT_F32;
    int64_t block = 1;
    LD_TRY(weight_type(t, &dt, &block, err));
    if (t->rows < 0 || t->cols < 0 || t->cols > 0x7fffffff || t->rows > 0x7fffffff)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "weight of %lld x %lld values", (long long)t->rows, (long long)t->cols);
    if (t->cols % block)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rows of %lld values are not whole blocks of %lld", (long long)t->cols,
                       (long long)block);
    if (t->rope_hd < 0 || t->rope_hd % 2 || (t->rope_hd && t->rows % t->rope_hd))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rope row order of %d rows per head for %lld rows", t->rope_hd,
                       (long long)t->rows);
    size_t bytes = dt == LD_KDT_F8B ? (size_t)t->cols * (size_t)t->rows
                                    : ld_cu_row_bytes(dt, t->cols) * (size_t)t->rows;
    ld_weight *w = calloc(1, sizeof *w);
    if (!w) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    w->dt = dt;
    int e = ld_cu_set_device(cb->device);
    if (!e) e = weight_copy(w, t, bytes);
    if (e) {
        ld_cu_free(w->d);
        ld_cu_free(w->scale);
        free(w);
        return cu_fail(err, "weight_load", e);
    }
    w->rows = t->rows;
    w->cols = t->cols;
    w->rope_hd = t->rope_hd;
    if (dt == LD_KDT_F8B) {
        w->br = t->scale_br;
        w->bc = t->scale_bc;
    }
    *out = w;
    return LD_OK;
}

static void weight_free(ld_backend *be, ld_weight *w)
{
    if (!w) return;
    ld_cu_set_device(((cuda_backend *)be)->device);
    ld_cu_free(w->d);
    ld_cu_free(w->scale);
    free(w);
}

/* ---------------------------------------------------------------- ops */

static ld_status embed(ld_backend *be, ld_buf *out, const ld_weight *table, const int32_t *tokens, int T, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "embed of %d tokens", T);
    if (table->dt == LD_KDT_F8B)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda embed: an FP8 block-scaled table is not supported");
    LD_TRY(range(out, 0, (size_t)T * (size_t)table->cols, err));
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= table->rows)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "token id %d outside the vocabulary of %lld", (int)tokens[t],
                           (long long)table->rows);
    if (!T) return LD_OK;
    CU("embed", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->tokens, &cb->tokens_cap, (size_t)T * sizeof(int32_t), "embed", err));
    CU("embed", ld_cu_h2d(cb->tokens, tokens, (size_t)T * sizeof(int32_t)));
    CU("embed", ld_cu_embed(variant(cb, LD_CUDA_OP_EMBED), out->d, table->d, table->dt, (int)table->cols,
                            cb->tokens, T));
    return LD_OK;
}

static ld_status rmsnorm(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, int rows, float eps,
                         ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (rows < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "rmsnorm of %d rows", rows);
    size_t n = (size_t)rows * (size_t)w->cols;
    if (ld_ref_kdt_is_block(w->dt) || w->dt == LD_KDT_F8B)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a norm weight of a block type");
    LD_TRY(range(out, 0, n, err));
    LD_TRY(range(x, 0, n, err));
    CU("rmsnorm", ld_cu_set_device(cb->device));
    CU("rmsnorm", ld_cu_rmsnorm(variant(cb, LD_CUDA_OP_RMSNORM), out->d, x->d, w->d, w->dt, (int)w->cols, eps, rows));
    return LD_OK;
}

/* rows of an FP8 matmul's bias copies (the scratch is this many rows) */
#define BIAS_ROWS 64

/* out [T][N] += bias (N values of F32, F16 or BF16), row by row: the bias
 * converted to fp32 into up to BIAS_ROWS rows (embed's exact conversion of
 * row 0, zero token ids), then added to the rows of out that many at a
 * time (x += y, element-wise: no row depends on the others) */
static ld_status add_bias_rows(cuda_backend *cb, ld_buf *out, const ld_weight *bias, int T, int N, ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_MATMUL), R = T < BIAS_ROWS ? T : BIAS_ROWS;
    size_t had = cb->zeros_cap;
    LD_TRY(scratch((void **)&cb->zeros, &cb->zeros_cap, (size_t)R * sizeof(int32_t), "matmul", err));
    if (cb->zeros_cap != had) CU("matmul", ld_cu_memset0(cb->zeros, cb->zeros_cap));
    LD_TRY(scratch((void **)&cb->bias_rows, &cb->bias_rows_cap, (size_t)R * (size_t)N * sizeof(float), "matmul",
                   err));
    CU("matmul", ld_cu_embed(v, cb->bias_rows, bias->d, bias->dt, N, cb->zeros, R));
    for (int t0 = 0; t0 < T; t0 += R) {
        int nt = T - t0 < R ? T - t0 : R;
        CU("matmul", ld_cu_add(v, out->d + (size_t)t0 * (size_t)N, cb->bias_rows, (size_t)nt * (size_t)N));
    }
    return LD_OK;
}

/* tokens per ld_cu_fp8_matmul call (its custom grid's y bound, for any
 * rows per block); rows are independent, so the split changes no result */
#define F8B_MAX_T 65535

/* the FP8 block-scaled matmul: ld_cu_fp8_matmul (acc + 0.0f, as the
 * reference without a bias), then the bias added to the rows */
static ld_status matmul_f8b(cuda_backend *cb, ld_buf *out, const ld_buf *x, const ld_weight *w,
                            const ld_weight *bias, int T, ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_MATMUL), K = (int)w->cols, N = (int)w->rows;
    if (!T || !N) return LD_OK;
    if (!K) CU("matmul", ld_cu_memset0(out->d, (size_t)T * (size_t)N * sizeof(float)));
    for (int t0 = 0; K && t0 < T; t0 += F8B_MAX_T) {
        int nt = T - t0 < F8B_MAX_T ? T - t0 : F8B_MAX_T;
        CU("matmul", ld_cu_fp8_matmul(v, out->d + (size_t)t0 * (size_t)N, x->d + (size_t)t0 * (size_t)K, w->d,
                                      w->scale, nt, K, N, w->br, w->bc));
    }
    if (bias) LD_TRY(add_bias_rows(cb, out, bias, T, N, err));
    return LD_OK;
}

static ld_status matmul(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias,
                        int T, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul of %d tokens", T);
    LD_TRY(range(out, 0, (size_t)T * (size_t)w->rows, err));
    LD_TRY(range(x, 0, (size_t)T * (size_t)w->cols, err));
    if (x == out) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul in place");
    if (bias && (ld_ref_kdt_is_block(bias->dt) || bias->dt == LD_KDT_F8B))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a bias of a block type");
    if (bias && bias->rows * bias->cols != w->rows)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "bias of %lld values for %lld outputs",
                       (long long)(bias->rows * bias->cols), (long long)w->rows);
    CU("matmul", ld_cu_set_device(cb->device));
    if (w->dt == LD_KDT_F8B) return matmul_f8b(cb, out, x, w, bias, T, err);
    CU("matmul", ld_cu_matmul(variant(cb, LD_CUDA_OP_MATMUL), out->d, x->d, w->d, w->dt, bias ? bias->d : NULL,
                              bias ? bias->dt : LD_KDT_F32, T, (int)w->cols, (int)w->rows, w->rope_hd));
    return LD_OK;
}

static ld_status rope(ld_backend *be, ld_buf *x, int T, int n_heads, int head_dim, int pos0, const float *inv_freq,
                      ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || n_heads < 0 || head_dim < 0 || pos0 < 0)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rope of %d tokens, %d heads of %d at %d", T, n_heads, head_dim, pos0);
    LD_TRY(range(x, 0, (size_t)T * (size_t)n_heads * (size_t)head_dim, err));
    size_t half = (size_t)(head_dim / 2);
    if (!T || !n_heads || !half) return LD_OK;
    CU("rope", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->freq, &cb->freq_cap, half * sizeof(float), "rope", err));
    CU("rope", ld_cu_h2d(cb->freq, inv_freq, half * sizeof(float)));
    CU("rope", ld_cu_rope(variant(cb, LD_CUDA_OP_ROPE), x->d, T, n_heads, head_dim, cb->freq, pos0));
    return LD_OK;
}

static ld_status kv_store(ld_backend *be, ld_buf *cache, const ld_buf *src, int T, int pos0, int row, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || pos0 < 0 || row < 0)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "kv_store of %d rows of %d at %d", T, row, pos0);
    size_t n = (size_t)T * (size_t)row;
    LD_TRY(range(src, 0, n, err));
    LD_TRY(range(cache, (size_t)pos0 * (size_t)row, n, err));
    CU("kv_store", ld_cu_set_device(cb->device));
    CU("kv_store", ld_cu_copy(variant(cb, LD_CUDA_OP_KV_STORE), cache->d + (size_t)pos0 * (size_t)row, src->d, n));
    return LD_OK;
}

/* the custom attention runs its queries in tiles whose workspace stays
 * under this many floats (or one query's, when that is more) */
#define ATT_WORK_FLOATS ((size_t)16 << 20)

static ld_status attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kcache, const ld_buf *vcache,
                           int T, int pos0, int n_heads, int n_kv, int head_dim, int window, float scale, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || pos0 < 0 || n_heads < 0 || head_dim < 0)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "attention of %d tokens at %d, %d heads of %d", T, pos0, n_heads,
                       head_dim);
    size_t nq = (size_t)T * (size_t)n_heads * (size_t)head_dim;
    size_t nkv = (size_t)(pos0 + T) * (size_t)n_kv * (size_t)head_dim;
    if (n_kv <= 0 || n_heads % n_kv) return LD_FAIL(err, LD_ERR_USAGE, 0, "%d heads over %d kv heads", n_heads, n_kv);
    LD_TRY(range(out, 0, nq, err));
    LD_TRY(range(q, 0, nq, err));
    LD_TRY(range(kcache, 0, nkv, err));
    LD_TRY(range(vcache, 0, nkv, err));
    if (!nq) return LD_OK;
    int v = variant(cb, LD_CUDA_OP_ATTENTION);
    if (v == LD_CU_CUSTOM && head_dim > LD_CU_ATT_MAX_HD)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda attention: head_dim %d > %d (custom kernel; use attention=ref)",
                       head_dim, LD_CU_ATT_MAX_HD);
    CU("attention", ld_cu_set_device(cb->device));
    size_t per_query = ld_cu_attention_work(v, 1, n_heads, head_dim, pos0, T), want = 0;
    if (per_query) {
        size_t tile = ATT_WORK_FLOATS / per_query;
        if (tile < 1) tile = 1;
        if (tile > (size_t)T) tile = (size_t)T;
        want = tile * per_query;
        if (want > cb->work_cap / sizeof(float))
            LD_TRY(scratch((void **)&cb->work, &cb->work_cap, want * sizeof(float), "attention", err));
        else
            want = cb->work_cap / sizeof(float);
    }
    CU("attention", ld_cu_attention(v, out->d, q->d, kcache->d, vcache->d, T, pos0, n_heads, n_kv, head_dim, window,
                                    scale, cb->work, want));
    return LD_OK;
}

static ld_status swiglu(ld_backend *be, ld_buf *out, const ld_buf *gate, const ld_buf *up, size_t n, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(range(out, 0, n, err));
    LD_TRY(range(gate, 0, n, err));
    LD_TRY(range(up, 0, n, err));
    CU("swiglu", ld_cu_set_device(cb->device));
    CU("swiglu", ld_cu_swiglu(variant(cb, LD_CUDA_OP_SWIGLU), out->d, gate->d, up->d, n));
    return LD_OK;
}

static ld_status add(ld_backend *be, ld_buf *x, const ld_buf *y, size_t n, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(range(x, 0, n, err));
    LD_TRY(range(y, 0, n, err));
    CU("add", ld_cu_set_device(cb->device));
    CU("add", ld_cu_add(variant(cb, LD_CUDA_OP_ADD), x->d, y->d, n));
    return LD_OK;
}

static ld_status softmax(ld_backend *be, ld_buf *out, const ld_buf *x, int rows, int n, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (rows < 0 || n < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "softmax of %d rows of %d", rows, n);
    LD_TRY(range(out, 0, (size_t)rows * (size_t)n, err));
    LD_TRY(range(x, 0, (size_t)rows * (size_t)n, err));
    CU("softmax", ld_cu_set_device(cb->device));
    CU("softmax", ld_cu_softmax(variant(cb, LD_CUDA_OP_SOFTMAX), out->d, x->d, rows, n));
    return LD_OK;
}

/* ---------------------------------------------------------------- DeepSeek */

/* the workspace floats of the mla kernel for queries tiled so that a tile
 * stays under ATT_WORK_FLOATS (or holds one query), in *tile */
static size_t mla_tile(int v, int T, int pos0, int n_heads, int c, const int32_t *dsel, int k, int *tile)
{
    size_t per_query = ld_cu_mla_latent_work(v, 1, n_heads, c, pos0 + T - 1, dsel, k);
    size_t n = per_query ? ATT_WORK_FLOATS / per_query : (size_t)T;
    if (n < 1) n = 1;
    if (n > (size_t)T) n = (size_t)T;
    *tile = (int)n;
    return n * per_query;
}

static ld_status mla_latent(ld_backend *be, ld_buf *o_lat, const ld_buf *q_abs, const ld_buf *q, const ld_buf *ckv,
                            const ld_buf *kpe, int T, int pos0, int n_heads, int dn, int dr, int c, float scale,
                            const int32_t *sel, int k, int split, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_latent(T, pos0, n_heads, dn, dr, c, sel, k, split, err));
    if (split && split != LD_CU_MLA_SPLIT)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda mla_latent: split %d (0 or %d)", split, LD_CU_MLA_SPLIT);
    size_t rows = (size_t)T * (size_t)n_heads, S = (size_t)pos0 + (size_t)T, QW = (size_t)n_heads * (size_t)(dn + dr);
    LD_TRY(range(o_lat, 0, rows * (size_t)c, err));
    LD_TRY(range(q_abs, 0, rows * (size_t)c, err));
    LD_TRY(range(q, 0, rows * (size_t)(dn + dr), err));
    LD_TRY(range(ckv, 0, S * (size_t)c, err));
    LD_TRY(range(kpe, 0, S * (size_t)dr, err));
    if (sel) LD_TRY(ld_ds_args_sel(sel, T, pos0, k, err));
    if (!rows || !c) return LD_OK;
    CU("mla_latent", ld_cu_set_device(cb->device));
    const int32_t *dsel = NULL;
    if (sel) {
        size_t nb = (size_t)T * (size_t)k * sizeof(int32_t);
        LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, nb, "mla_latent", err));
        CU("mla_latent", ld_cu_h2d(cb->ds_i, sel, nb));
        dsel = cb->ds_i;
    }
    int v = variant(cb, LD_CUDA_OP_MLA), tile = 0;
    size_t wn = mla_tile(v, T, pos0, n_heads, c, dsel, k, &tile);
    if (wn) LD_TRY(scratch((void **)&cb->work, &cb->work_cap, wn * sizeof(float), "mla_latent", err));
    for (int t0 = 0; t0 < T; t0 += tile) {
        int n = T - t0 < tile ? T - t0 : tile;
        size_t r0 = (size_t)t0 * (size_t)n_heads * (size_t)c;
        CU("mla_latent", ld_cu_mla_latent(v, o_lat->d + r0, q_abs->d + r0, q->d + (size_t)t0 * QW, ckv->d, kpe->d, n,
                                          n_heads, dn, dr, c, pos0 + t0, scale,
                                          dsel ? dsel + (size_t)t0 * (size_t)k : NULL, k, cb->work, wn));
    }
    return LD_OK;
}

static ld_status mla_absorb_q(ld_backend *be, ld_buf *q_abs, const ld_buf *q, const ld_weight *w, int T, int n_heads,
                              int dn, int dr, int dv, int c, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_absorb(w->dt, w->rows, w->cols, w->rope_hd, T, n_heads, dn, dr, dv, c, err));
    size_t rows = (size_t)T * (size_t)n_heads;
    LD_TRY(range(q_abs, 0, rows * (size_t)c, err));
    LD_TRY(range(q, 0, rows * (size_t)(dn + dr), err));
    if (!rows || !c) return LD_OK;
    CU("mla_absorb_q", ld_cu_set_device(cb->device));
    CU("mla_absorb_q", ld_cu_mla_absorb_q(variant(cb, LD_CUDA_OP_ABSORB), q_abs->d, q->d, w->d, w->dt, T, n_heads,
                                          dn, dr, dv, c));
    return LD_OK;
}

static ld_status mla_absorb_out(ld_backend *be, ld_buf *out, const ld_buf *o_lat, const ld_weight *w, int T,
                                int n_heads, int dn, int dv, int c, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_absorb(w->dt, w->rows, w->cols, w->rope_hd, T, n_heads, dn, 0, dv, c, err));
    size_t rows = (size_t)T * (size_t)n_heads;
    LD_TRY(range(out, 0, rows * (size_t)dv, err));
    LD_TRY(range(o_lat, 0, rows * (size_t)c, err));
    if (!rows || !dv) return LD_OK;
    CU("mla_absorb_out", ld_cu_set_device(cb->device));
    CU("mla_absorb_out", ld_cu_mla_absorb_out(variant(cb, LD_CUDA_OP_ABSORB), out->d, o_lat->d, w->d, w->dt, T,
                                              n_heads, dn, dv, c));
    return LD_OK;
}

static ld_status ds_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias, int T,
                          int E, int n_group, int topk_group, int top_k, int norm, float scale, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_route(T, E, n_group, topk_group, top_k, err));
    if (n_group > 64 || top_k > 64)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds_route: %d groups, top %d (at most 64 each)", n_group,
                       top_k);
    LD_TRY(range(logits, 0, (size_t)T * (size_t)E, err));
    if (!T) return LD_OK;
    size_t nk = (size_t)T * (size_t)top_k;
    CU("ds_route", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, nk * sizeof(int32_t), "ds_route", err));
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (nk + (size_t)E) * sizeof(float), "ds_route", err));
    float *dbias = NULL;
    if (bias) {
        dbias = cb->ds_f + nk;
        CU("ds_route", ld_cu_h2d(dbias, bias, (size_t)E * sizeof(float)));
    }
    CU("ds_route", ld_cu_ds_route(variant(cb, LD_CUDA_OP_ROUTE), cb->ds_i, cb->ds_f, logits->d, dbias, T, E, n_group,
                                  topk_group, top_k, norm, scale));
    CU("ds_route", ld_cu_d2h(idx, cb->ds_i, nk * sizeof(int32_t)));
    CU("ds_route", ld_cu_d2h(w, cb->ds_f, nk * sizeof(float)));
    return LD_OK;
}

static ld_status index_topk(ld_backend *be, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys, int T,
                            int pos0, int n_heads, int dim, int k, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_index(T, pos0, n_heads, dim, k, err));
    size_t S = (size_t)pos0 + (size_t)T, QW = (size_t)n_heads * (size_t)dim;
    LD_TRY(range(q, 0, (size_t)T * QW, err));
    LD_TRY(range(w, 0, (size_t)T * (size_t)n_heads, err));
    LD_TRY(range(keys, 0, S * (size_t)dim, err));
    if (!T) return LD_OK;
    if (S > 0x7fffffff) return LD_FAIL(err, LD_ERR_LIMIT, 0, "index_topk over %zu positions", S);
    /* queries in tiles of at most ATT_WORK_FLOATS scores (or one query) */
    size_t tile = ATT_WORK_FLOATS / S;
    if (tile < 1) tile = 1;
    if (tile > (size_t)T) tile = (size_t)T;
    int v = variant(cb, LD_CUDA_OP_INDEX);
    CU("index_topk", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, tile * S * sizeof(float), "index_topk", err));
    LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, tile * (size_t)k * sizeof(int32_t), "index_topk", err));
    for (size_t t0 = 0; t0 < (size_t)T; t0 += tile) {
        int n = (int)((size_t)T - t0 < tile ? (size_t)T - t0 : tile), p0 = pos0 + (int)t0;
        CU("index_topk", ld_cu_index_scores(v, 0, cb->ds_f, q->d + t0 * QW, w->d + t0 * (size_t)n_heads, keys->d, n,
                                            n_heads, dim, p0 + n, 0.0f, 0.0f));
        CU("index_topk", ld_cu_topk(v, cb->ds_i, cb->ds_f, n, p0 + n, p0 + n, p0, k));
        CU("index_topk", ld_cu_d2h(sel + t0 * (size_t)k, cb->ds_i, (size_t)n * (size_t)k * sizeof(int32_t)));
    }
    return LD_OK;
}

static ld_status hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                        const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                        float norm_eps, float hc_eps, int mhc, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_hc_pre(T, N, D, iters, mhc, err));
    if (mhc != LD_DS4_MHC_F32)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda hc_pre: the fp32 mixing only (variant %d)", mhc);
    if (N > 64) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda hc_pre: %d streams (at most 64)", N);
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T, hc = (2 + n) * n;
    LD_TRY(range(post, 0, tt * n, err));
    LD_TRY(range(comb, 0, tt * n * n, err));
    LD_TRY(range(collapsed, 0, tt * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    LD_TRY(range(fn, 0, hc * n * d, err));
    if (!T) return LD_OK;
    CU("hc_pre", ld_cu_set_device(cb->device));
    size_t wn = ld_cu_hc_work(T, N);
    LD_TRY(scratch((void **)&cb->work, &cb->work_cap, wn * sizeof(float), "hc_pre", err));
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (hc + 3) * sizeof(float), "hc_pre", err));
    CU("hc_pre", ld_cu_h2d(cb->ds_f, base, hc * sizeof(float)));
    CU("hc_pre", ld_cu_h2d(cb->ds_f + hc, scale, 3 * sizeof(float)));
    CU("hc_pre", ld_cu_hc_pre(variant(cb, LD_CUDA_OP_HC), post->d, comb->d, collapsed->d, X->d, T, N, D, fn->d,
                              cb->ds_f, cb->ds_f + hc, iters, norm_eps, hc_eps, cb->work, wn));
    return LD_OK;
}

static ld_status hc_post(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *f, const ld_buf *post,
                         const ld_buf *comb, int T, int N, int D, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_hc_post(T, N, D, err));
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T;
    LD_TRY(range(out, 0, tt * n * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    LD_TRY(range(f, 0, tt * d, err));
    LD_TRY(range(post, 0, tt * n, err));
    LD_TRY(range(comb, 0, tt * n * n, err));
    if (!T) return LD_OK;
    if (out->d == X->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_post: out aliases X");
    CU("hc_post", ld_cu_set_device(cb->device));
    CU("hc_post", ld_cu_hc_post(variant(cb, LD_CUDA_OP_HC), out->d, X->d, f->d, post->d, comb->d, T, N, D));
    return LD_OK;
}

static ld_status ds4_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias,
                           const int32_t *hash, int T, int E, int K, float scale, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_ds4_route(T, E, K, hash, err));
    LD_TRY(range(logits, 0, (size_t)T * (size_t)E, err));
    if (!T) return LD_OK;
    size_t nk = (size_t)T * (size_t)K, ni = nk + (hash ? nk + (size_t)T : 0);
    CU("ds4_route", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, ni * sizeof(int32_t), "ds4_route", err));
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (nk + (size_t)E) * sizeof(float), "ds4_route", err));
    float *dbias = NULL;
    if (bias) {
        dbias = cb->ds_f + nk;
        CU("ds4_route", ld_cu_h2d(dbias, bias, (size_t)E * sizeof(float)));
    }
    int32_t *table = NULL, *rows = NULL;
    if (hash) { /* the rows as the table, row t for token t */
        table = cb->ds_i + nk;
        rows = table + nk;
        int32_t *iota = malloc((size_t)T * sizeof *iota);
        if (!iota) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        for (int t = 0; t < T; t++) iota[t] = t;
        int e1 = ld_cu_h2d(table, hash, nk * sizeof(int32_t));
        int e2 = e1 ? 0 : ld_cu_h2d(rows, iota, (size_t)T * sizeof *iota);
        free(iota);
        CU("ds4_route", e1 ? e1 : e2);
    }
    CU("ds4_route", ld_cu_ds4_route(variant(cb, LD_CUDA_OP_ROUTE), cb->ds_i, cb->ds_f, logits->d, dbias, table, rows,
                                    T, E, K, scale));
    CU("ds4_route", ld_cu_d2h(idx, cb->ds_i, nk * sizeof(int32_t)));
    CU("ds4_route", ld_cu_d2h(w, cb->ds_f, nk * sizeof(float)));
    return LD_OK;
}

static const ld_backend_ops cuda_ops = {
    .name = "cuda",
    .destroy = destroy,
    .buf_alloc = buf_alloc,
    .buf_free = buf_free,
    .buf_write = buf_write,
    .buf_read = buf_read,
    .weight_load = weight_load,
    .weight_free = weight_free,
    .embed = embed,
    .rmsnorm = rmsnorm,
    .matmul = matmul,
    .rope = rope,
    .kv_store = kv_store,
    .attention = attention,
    .swiglu = swiglu,
    .add = add,
    .softmax = softmax,
    .mla_latent = mla_latent,
    .mla_absorb_q = mla_absorb_q,
    .mla_absorb_out = mla_absorb_out,
    .ds_route = ds_route,
    .index_topk = index_topk,
    .hc_pre = hc_pre,
    .hc_post = hc_post,
    .ds4_route = ds4_route,
};

ld_status ld_backend_cuda_create(int device, const char *kernels_spec, ld_backend **out, ld_error *err)
{
    *out = NULL;
    ld_cuda_kernels k;
    LD_TRY(ld_cuda_kernels_parse(kernels_spec, &k, err));
    int n = 0, e = ld_cu_device_count(&n);
    if (e || n == 0)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "no CUDA device: %s",
                       e ? ld_cu_error_string(e) : "the runtime sees 0 devices");
    if (device < 0 || device >= n)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "CUDA device %d outside [0, %d)", device, n);
    CU("create", ld_cu_set_device(device));
    CU("create", ld_cu_sync()); /* creates the context now, reports a broken device here */
    cuda_backend *cb = calloc(1, sizeof *cb);
    if (!cb) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    cb->base.ops = &cuda_ops;
    cb->device = device;
    cb->k = k;
    *out = &cb->base;
    return LD_OK;
}

#endif /* LD_HAVE_CUDA */
