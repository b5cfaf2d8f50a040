/* backend_cuda.c - the CUDA backend (see backend_cuda.h) over kernels/
 * cuda_ops.h: its making and op table, the constants kept on the device,
 * buffers, weights and the dense ops; the DeepSeek, MoE, V4 attention and
 * fused-projection ops are in backend_cuda_*.c (backend_cuda_internal.h).
 * The kernel-spec parser is always built (it needs no GPU); the backend
 * itself only when CUDA is (LD_HAVE_CUDA), else ld_backend_cuda_create
 * says "built without CUDA". */
#include "backend_cuda.h"

#include <limits.h>
#include <stdint.h>
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

/* graphs=on|off|N (N operations a graph, 1 to 100000) */
static ld_status parse_graphs(const char *val, size_t vlen, uint64_t off, int *graphs, ld_error *err)
{
    if (span_is(val, vlen, "on")) {
        *graphs = LD_CUDA_GRAPH_CHUNK;
        return LD_OK;
    }
    if (span_is(val, vlen, "off")) {
        *graphs = 0;
        return LD_OK;
    }
    long n = 0;
    size_t i = 0;
    for (; i < vlen && val[i] >= '0' && val[i] <= '9' && n <= 100000; i++) n = n * 10 + (val[i] - '0');
    if (!vlen || i < vlen || n < 1 || n > 100000)
        return LD_FAIL(err, LD_ERR_USAGE, off, "graphs=%.*s: on, off, or the operations a graph (1 to 100000)",
                       (int)vlen, val);
    *graphs = (int)n;
    return LD_OK;
}

ld_status ld_cuda_kernels_parse(const char *spec, ld_cuda_kernels *out, ld_error *err)
{
    ld_cuda_kernels k;
    for (int i = 0; i < LD_CUDA_N_OPS; i++) k.custom[i] = 1;
    k.graphs = 0;
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
        if (span_is(p, nlen, "graphs")) {
            LD_TRY(parse_graphs(val, vlen, (uint64_t)(val - spec), &k.graphs, err));
            if (!end) break;
            p = end + 1;
            if (!*p) return LD_FAIL(err, LD_ERR_USAGE, (uint64_t)(p - spec), "kernel spec ends with ','");
            continue;
        }
        int custom;
        if (span_is(val, vlen, "ref")) custom = LD_CUDA_KERNEL_REF;
        else if (span_is(val, vlen, "custom")) custom = LD_CUDA_KERNEL_CUSTOM;
        else if (span_is(val, vlen, "tc")) custom = LD_CUDA_KERNEL_TC;
        else
            return LD_FAIL(err, LD_ERR_USAGE, (uint64_t)(val - spec),
                           "unknown kernel variant '%.*s' for '%.*s' (ref, custom, or tc for matmul)", (int)vlen,
                           val, (int)nlen, p);
        /* tensor cores serve the GEMM only */
        if (custom == LD_CUDA_KERNEL_TC && !span_is(p, nlen, "matmul"))
            return LD_FAIL(err, LD_ERR_USAGE, (uint64_t)(val - spec),
                           "kernel variant 'tc' is for matmul only, not '%.*s'", (int)nlen, p);
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

/* LD_CUDA_MOCK: the backend built without the CUDA toolkit over the CPU
 * mock of cuda_ops.h (tests/support/cuda_mock.c), so that this file's host
 * code runs in CI; LD_CUDA_EMU: over the kernels themselves, run on the CPU
 * by tests/support/cuda_emu.  The only place either touches this file. */
#if !LD_HAVE_CUDA && !defined(LD_CUDA_MOCK) && !defined(LD_CUDA_EMU)

ld_status ld_backend_cuda_create(int device, const char *kernels_spec, ld_backend **out, ld_error *err)
{
    (void)device;
    *out = NULL;
    ld_cuda_kernels k;
    LD_TRY(ld_cuda_kernels_parse(kernels_spec, &k, err));
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "built without CUDA");
}

ld_status ld_backend_cuda_create_unbound(int device, const char *kernels_spec, ld_backend **out, ld_error *err)
{
    return ld_backend_cuda_create(device, kernels_spec, out, err);
}

ld_status ld_backend_cuda_graphs_thread(ld_backend *be, int on, ld_error *err)
{
    (void)be;
    (void)on;
    (void)err;
    return LD_OK;
}

int ld_backend_cuda_device_count(void)
{
    return 0;
}

#else /* LD_HAVE_CUDA || LD_CUDA_MOCK || LD_CUDA_EMU */

#include "backend_cuda_internal.h"

ld_status ld_cuda_fail(ld_error *err, const char *what, int code)
{
    return LD_FAIL(err, ld_cu_is_oom(code) ? LD_ERR_NOMEM : LD_ERR_CUDA, 0, "cuda %s: %s (%s)", what,
                   ld_cu_error_string(code), ld_cu_error_name(code));
}

/* ---------------------------------------------------------------- constants
 * Small host arrays an op uploads at every call although they rarely change
 * (hc_pre's base and scale, the V4 route's bias and expert table: 6 of a
 * V4 decode layer's 8 uploads; ds4_hc_head's base, the V3 router's bias)
 * kept on the device between calls.  A slot is
 * keyed by the host address and size and holds a host copy: a call whose
 * bytes still equal the copy (a memcmp of at most a few KB, against a few
 * µs an upload through the ring costs the host) uses the device copy; any
 * other call uploads and refreshes the slot.  So the cache is never stale,
 * whatever the caller does with its memory.  Open addressing over the
 * address's hash; a full probe run evicts its first slot. */
#define CONST_SLOTS 1024
#define CONST_PROBES 8
#define CONST_MAX_BYTES ((size_t)64 << 10) /* a call's constants, at most */

typedef struct const_slot {
    const void *key;
    size_t bytes;
    unsigned char *host; /* the bytes last uploaded */
    void *dev;
} const_slot;

static void const_drop(const_slot *c)
{
    ld_cu_free(c->dev);
    free(c->host);
    *c = (const_slot){0};
}

/* the slot of key: its own, else an empty one, else the run's first */
static const_slot *const_find(cuda_backend *cb, const void *key, size_t bytes)
{
    size_t h = (size_t)(((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull >> 32) % CONST_SLOTS;
    const_slot *empty = NULL;
    for (int i = 0; i < CONST_PROBES; i++) {
        const_slot *c = &cb->consts[(h + (size_t)i) % CONST_SLOTS];
        if (c->key == key && c->bytes == bytes) return c;
        if (!c->key && !empty) empty = c;
    }
    return empty ? empty : &cb->consts[h];
}

/* a device copy of a (na bytes), then b (nb bytes; none when NULL: two
 * arrays an op passes together share a slot), in the slot of `key` (the
 * address the caller keeps them at); *dev the device copy */
ld_status ld_cuda_const_dev(cuda_backend *cb, const void *key, const void *a, size_t na, const void *b, size_t nb,
                            void **dev, const char *what, ld_error *err)
{
    size_t n = na + (b ? nb : 0);
    if (n > CONST_MAX_BYTES) return LD_FAIL(err, LD_ERR_USAGE, 0, "cuda %s: %zu bytes to keep", what, n);
    if (!cb->consts) cb->consts = calloc(CONST_SLOTS, sizeof *cb->consts);
    if (!cb->consts) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    const_slot *c = const_find(cb, key, n);
    int mine = c->key == key && c->bytes == n;
    if (mine && !memcmp(c->host, a, na) && (!b || !memcmp(c->host + na, b, nb))) {
        *dev = c->dev;
        return LD_OK;
    }
    if (!mine) {
        const_drop(c);
        c->host = malloc(n);
        if (!c->host) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        int e = ld_cu_malloc(&c->dev, n);
        if (e) {
            const_drop(c);
            CU(what, e);
        }
        c->key = key;
        c->bytes = n;
    }
    memcpy(c->host, a, na);
    if (b) memcpy(c->host + na, b, nb);
    int e = ld_cu_h2d(c->dev, c->host, n);
    if (e) {
        const_drop(c); /* its device bytes are not its host copy's */
        CU(what, e);
    }
    *dev = c->dev;
    return LD_OK;
}

/* const_dev of one array, keyed by its own address */
ld_status ld_cuda_const_one(cuda_backend *cb, const void *a, size_t na, void **dev, const char *what, ld_error *err)
{
    return ld_cuda_const_dev(cb, a, a, na, NULL, 0, dev, what, err);
}

/* every thread's work on the device (ld_cu_sync: cudaDeviceSynchronize
 * waits for all of the device's streams) */
static ld_status finish(ld_backend *be, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    CU("finish", ld_cu_set_device(cb->device));
    CU("finish", ld_cu_sync());
    return LD_OK;
}

static void destroy(ld_backend *be)
{
    cuda_backend *cb = (cuda_backend *)be;
    ld_cu_set_device(cb->device);
    if (cb->k.graphs && !cb->unbound) ld_cu_graphs_end();
    for (int i = 0; cb->consts && i < CONST_SLOTS; i++) const_drop(&cb->consts[i]);
    free(cb->consts);
    ld_cu_free(cb->tokens);
    ld_cu_free(cb->freq);
    ld_cu_free(cb->work);
    ld_cu_free(cb->zeros);
    ld_cu_free(cb->bias_rows);
    ld_cu_free(cb->ds_i);
    ld_cu_free(cb->ds_f);
    ld_cu_free(cb->ones);
    ld_cu_free(cb->moe_up);
    ld_cu_free(cb->picks);
    ld_cu_free(cb->sync);
    free(cb);
}

/* at least n zero ints of device memory (cb->sync) for the kernels whose
 * last block to finish does the rest of the work (ld_cu_hc_pre_norm's
 * sync): zeroed when allocated, and each such kernel leaves them zero */
ld_status ld_cuda_sync_ints(cuda_backend *cb, size_t n, int32_t **out, const char *what, ld_error *err)
{
    size_t had = cb->sync_cap;
    LD_TRY(scratch((void **)&cb->sync, &cb->sync_cap, n * sizeof(int32_t), what, err));
    if (cb->sync_cap != had) { /* a new allocation */
        int e = ld_cu_memset0(cb->sync, cb->sync_cap);
        if (e) cb->sync_cap = 0; /* not zero: the next call allocates again */
        CU(what, e);
    }
    *out = cb->sync;
    return LD_OK;
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
    b->view = 0;
    void *d = NULL;
    int e = ld_cu_set_device(cb->device);
    if (!e) e = ld_cu_malloc(&d, (n ? n : 1) * sizeof(float));
    if (!e) e = ld_cu_memset0(d, n * sizeof(float));
    if (e) {
        ld_cu_free(d);
        free(b);
        ld_status st = ld_cuda_fail(err, "buf_alloc", e);
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
    if (!b->view) {
        ld_cu_set_device(((cuda_backend *)be)->device);
        ld_cu_free(b->d);
    }
    free(b);
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

/* a view starts 16-byte aligned (cudaMalloc's base is 256-aligned): the
 * kernels read rows of activations as float4 (the tensor-core GEMM's x,
 * the block-scaled warps'), which a GPU faults on where misaligned */
static ld_status buf_view(ld_backend *be, ld_buf *b, size_t off, size_t n, ld_buf **out, ld_error *err)
{
    (void)be;
    *out = NULL;
    LD_TRY(range(b, off, n, err));
    if (off % 4)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "a view at float %zu: the CUDA kernels' rows start 16-byte aligned (a row width a multiple "
                       "of 4)",
                       off);
    ld_buf *v = malloc(sizeof *v);
    if (!v) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    *v = (ld_buf){b->d + off, n, 1};
    *out = v;
    return LD_OK;
}

static ld_status buf_mem(ld_backend *be, ld_buf *b, size_t off, size_t n, ld_mem *out, ld_error *err)
{
    LD_TRY(range(b, off, n, err));
    out->p = b->d + off;
    out->kind = LD_MEM_CUDA;
    out->device = ((cuda_backend *)be)->device;
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
        default:
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "weight dtype %s is not supported", ld_dtype_name(t->dtype));
        }
    case LD_WQ_Q4_0: *dt = LD_KDT_Q4_0; *block = 32; return LD_OK;
    case LD_WQ_Q4_1: *dt = LD_KDT_Q4_1; *block = 32; return LD_OK;
    case LD_WQ_Q8_0: *dt = LD_KDT_Q8_0; *block = 32; return LD_OK;
    case LD_WQ_Q4_K: *dt = LD_KDT_Q4_K; *block = 256; return LD_OK;
    case LD_WQ_Q6_K: *dt = LD_KDT_Q6_K; *block = 256; return LD_OK;
    case LD_WQ_F8B:
    case LD_WQ_F4B: {
        const char *what = t->quant == LD_WQ_F4B ? "FP4" : "FP8";
        if (!t->scale || t->scale_br < 1 || t->scale_bc < 1)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "an %s weight without its block scales", what);
        if (t->rope_hd)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "an %s block-scaled weight in the rope row order", what);
        if (t->quant == LD_WQ_F8B) {
            *dt = LD_KDT_F8B;
            return LD_OK;
        }
        /* ld_cu_ds4_fp4_matmul's grid divides the matrix */
        if (t->rows % t->scale_br || t->cols % t->scale_bc)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                           "cuda: an FP4 weight of %lld x %lld in scale blocks of %d x %d (not dividing it)",
                           (long long)t->rows, (long long)t->cols, t->scale_br, t->scale_bc);
        *dt = LD_KDT_F4B;
        *block = 2;
        return LD_OK;
    }
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
    if (e || !ld_ref_kdt_is_scaled(w->dt)) return e;
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
    size_t bytes = dt == LD_KDT_F8B   ? (size_t)t->cols * (size_t)t->rows
                   : dt == LD_KDT_F4B ? (size_t)t->cols / 2 * (size_t)t->rows
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
        return ld_cuda_fail(err, "weight_load", e);
    }
    w->rows = t->rows;
    w->cols = t->cols;
    w->rope_hd = t->rope_hd;
    if (ld_ref_kdt_is_scaled(dt)) {
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
    if (ld_ref_kdt_is_scaled(table->dt))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda embed: a block-scaled FP8 / FP4 table is not supported");
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
    if (ld_ref_kdt_is_block(w->dt) || ld_ref_kdt_is_scaled(w->dt))
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

/* the block-scaled matmuls: ld_cu_fp8_matmul or ld_cu_ds4_fp4_matmul (acc
 * + 0.0f, as the reference without a bias), then the bias added to the
 * rows */
static ld_status matmul_f8b(cuda_backend *cb, ld_buf *out, const ld_buf *x, const ld_weight *w,
                            const ld_weight *bias, int T, ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_MATMUL), K = (int)w->cols, N = (int)w->rows;
    if (!T || !N) return LD_OK;
    if (!K) CU("matmul", ld_cu_memset0(out->d, (size_t)T * (size_t)N * sizeof(float)));
    for (int t0 = 0; K && t0 < T; t0 += F8B_MAX_T) {
        int nt = T - t0 < F8B_MAX_T ? T - t0 : F8B_MAX_T;
        float *o = out->d + (size_t)t0 * (size_t)N;
        const float *xt = x->d + (size_t)t0 * (size_t)K;
        if (w->dt == LD_KDT_F4B) /* fp32 scales, a grid of N/br x K/bc (weight_type checked it divides) */
            CU("matmul", ld_cu_ds4_fp4_matmul(v, o, xt, w->d, w->scale, 0, nt, K, N, N / w->br, K / w->bc));
        else
            CU("matmul", ld_cu_fp8_matmul(v, o, xt, w->d, w->scale, nt, K, N, w->br, w->bc));
    }
    if (bias) LD_TRY(add_bias_rows(cb, out, bias, T, N, err));
    return LD_OK;
}

/* a group of a table that const_dev keeps: its padding bytes (after
 * rows) zeroed, since const_dev compares the table's bytes with memcmp */
void ld_cuda_mm_group(ld_cu_mm_group *g, const ld_weight *w, const float *x, float *out, int rows, size_t ldx,
                      size_t ldo)
{
    memset(g, 0, sizeof *g);
    g->q = w->d;
    g->scale = w->scale;
    g->x = x;
    g->out = out;
    g->rows = rows;
    g->ldx = ldx;
    g->ldo = ldo;
}

/* ws [G] one grouped FP8 launch can take over T rows: FP8 block-scaled,
 * one shape and block size, the custom matmul (the grouped kernel is the
 * custom one's warp: the same bits as a matmul a weight) */
int ld_cuda_fp8_group_ok(const cuda_backend *cb, ld_weight *const *ws, int G, int T)
{
    if (G < 1 || T > 8 * 65535 || variant(cb, LD_CUDA_OP_MATMUL) != LD_CU_CUSTOM) return 0;
    for (int g = 0; g < G; g++) {
        const ld_weight *w = ws[g], *w0 = ws[0];
        if (w->dt != LD_KDT_F8B || w->rows != w0->rows || w->cols != w0->cols || w->br != w0->br || w->bc != w0->bc)
            return 0;
    }
    return ws[0]->cols > 0 && ws[0]->rows > 0;
}

/* whether the matmul op runs w through the tensor-core GEMM (matmul=tc
 * and a weight it takes): for every T, never by T, since a token's bits
 * must not depend on its batch; the other plain and GGML weights take
 * ld_cu_matmul's kernel of the variant, FP8 ones matmul_f8b */
int ld_cuda_matmul_tc(const cuda_backend *cb, const ld_weight *w)
{
    return cb->k.custom[LD_CUDA_OP_MATMUL] == LD_CUDA_KERNEL_TC && ld_cu_matmul_tc_supported(w->dt, (int)w->cols);
}

ld_status ld_cuda_matmul(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias,
                         int T, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul of %d tokens", T);
    LD_TRY(range(out, 0, (size_t)T * (size_t)w->rows, err));
    LD_TRY(range(x, 0, (size_t)T * (size_t)w->cols, err));
    if (x == out) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul in place");
    if (bias && (ld_ref_kdt_is_block(bias->dt) || ld_ref_kdt_is_scaled(bias->dt)))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a bias of a block type");
    if (bias && bias->rows * bias->cols != w->rows)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "bias of %lld values for %lld outputs",
                       (long long)(bias->rows * bias->cols), (long long)w->rows);
    CU("matmul", ld_cu_set_device(cb->device));
    if (ld_ref_kdt_is_scaled(w->dt)) return matmul_f8b(cb, out, x, w, bias, T, err);
    const void *bd = bias ? bias->d : NULL;
    ld_kdt bdt = bias ? bias->dt : LD_KDT_F32;
    if (ld_cuda_matmul_tc(cb, w))
        CU("matmul", ld_cu_matmul_tc(out->d, x->d, w->d, w->dt, bd, bdt, T, (int)w->cols, (int)w->rows, w->rope_hd));
    else
        CU("matmul", ld_cu_matmul(variant(cb, LD_CUDA_OP_MATMUL), out->d, x->d, w->d, w->dt, bd, bdt, T,
                                  (int)w->cols, (int)w->rows, w->rope_hd));
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
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "cuda attention: head_dim %d > %d (custom kernel; use attention=ref)", head_dim,
                       LD_CU_ATT_MAX_HD);
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

static const ld_backend_ops cuda_ops = {
    .name = "cuda",
    .destroy = destroy,
    .buf_alloc = buf_alloc,
    .buf_free = buf_free,
    .buf_write = buf_write,
    .buf_read = buf_read,
    .buf_mem = buf_mem,
    .buf_view = buf_view,
    .finish = finish,
    .weight_load = weight_load,
    .weight_free = weight_free,
    .embed = embed,
    .rmsnorm = rmsnorm,
    .matmul = ld_cuda_matmul,
    .rope = rope,
    .kv_store = kv_store,
    .attention = attention,
    .swiglu = swiglu,
    .add = add,
    .softmax = softmax,
    .mla_latent = ld_cuda_mla_latent,
    .mla_absorb_q = ld_cuda_mla_absorb_q,
    .mla_absorb_out = ld_cuda_mla_absorb_out,
    .ds_route = ld_cuda_ds_route,
    .index_topk = ld_cuda_index_topk,
    .hc_pre = ld_cuda_hc_pre,
    .hc_post = ld_cuda_hc_post,
    .ds4_route = ld_cuda_ds4_route,
    .ds4_qkv = ld_cuda_ds4_qkv,
    .ds4_compress = ld_cuda_ds4_compress,
    .ds4_index = ld_cuda_ds4_index,
    .ds4_attention = ld_cuda_ds4_attention,
    .copy_cols = ld_cuda_copy_cols,
    .matmul_blockdiag = ld_cuda_matmul_blockdiag,
    .matmul_fanout = ld_cuda_matmul_fanout,
    .matmul_hc_post = ld_cuda_matmul_hc_post,
    .ds4_route_moe_post = ld_cuda_ds4_route_moe_post,
    .rmsnorm2 = ld_cuda_rmsnorm2,
    .hc_pre_norm = ld_cuda_hc_pre_norm,
    .ds4_hc_head = ld_cuda_ds4_hc_head,
    .ds4_hc_head_norm = ld_cuda_ds4_hc_head_norm,
    .moe = ld_cuda_moe,
    .ds4_route_moe = ld_cuda_ds4_route_moe,
    .ds4_index_attention = ld_cuda_ds4_index_attention,
};

static ld_status cuda_create(int device, const char *kernels_spec, int unbound, ld_backend **out, ld_error *err)
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
    cb->unbound = unbound;
    if (k.graphs && !unbound && (e = ld_cu_graphs_begin(k.graphs))) {
        free(cb);
        return ld_cuda_fail(err, "create: graphs", e);
    }
    *out = &cb->base;
    return LD_OK;
}

ld_status ld_backend_cuda_create(int device, const char *kernels_spec, ld_backend **out, ld_error *err)
{
    return cuda_create(device, kernels_spec, 0, out, err);
}

ld_status ld_backend_cuda_create_unbound(int device, const char *kernels_spec, ld_backend **out, ld_error *err)
{
    return cuda_create(device, kernels_spec, 1, out, err);
}

int ld_backend_cuda_device_count(void)
{
    int n = 0;
    return ld_cu_device_count(&n) ? 0 : n;
}

ld_status ld_backend_cuda_graphs_thread(ld_backend *be, int on, ld_error *err)
{
    if (!be || be->ops != &cuda_ops) return LD_OK;
    cuda_backend *cb = (cuda_backend *)be;
    if (!cb->k.graphs || !cb->unbound) return LD_OK;
    CU("graphs", ld_cu_set_device(cb->device));
    if (on) CU("graphs: begin", ld_cu_graphs_begin(cb->k.graphs));
    else CU("graphs: end", ld_cu_graphs_end());
    return LD_OK;
}

#endif /* LD_HAVE_CUDA || LD_CUDA_MOCK || LD_CUDA_EMU */
