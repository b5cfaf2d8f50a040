/* backend_cuda.c - the CUDA backend (see backend_cuda.h) over kernels/
 * cuda_ops.h.  The kernel-spec parser is always built (it needs no GPU);
 * the backend itself only when CUDA is (LD_HAVE_CUDA), else
 * ld_backend_cuda_create says "built without CUDA". */
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
 * mock of cuda_ops.h (tests/engine/cuda_mock.c), so that this file's host
 * code runs in CI; LD_CUDA_EMU: over the kernels themselves, run on the CPU
 * by tests/cuda_emu.  The only place either touches this file. */
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

#include <math.h>

#include "cuda_ops.h"
#include "ds4_op_args.h"
#include "ds_op_args.h"
#include "moe_args.h"
#include "ref_ops.h"

struct ld_buf {
    float *d; /* device */
    size_t n;
    int view; /* buf_view's: d is another buffer's */
};

struct ld_weight {
    void *d; /* device copy of the host bytes (LD_KDT_F8B: the e4m3 bytes, F4B: the packed e2m1 ones) */
    float *scale; /* LD_KDT_F8B / F4B: device copy of the scale grid, else NULL */
    int br, bc;   /* LD_KDT_F8B / F4B: the scale blocks */
    ld_kdt dt;
    int64_t rows, cols;
    int rope_hd;
};

typedef struct cuda_backend {
    ld_backend base;
    int device;
    ld_cuda_kernels k;
    int unbound;     /* graphs=N entered by each thread that runs it, not by its creator */
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
    float *ones; /* ds4_qkv's unit RMSNorm weight: ones_n ones, uploaded once */
    size_t ones_cap, ones_n;
    unsigned char *moe_up; /* the moe entry's upload: plan, weights, grouped tables */
    size_t moe_up_cap;
    int32_t *picks; /* ds4_index_attention's picks, kept on the device */
    size_t picks_cap;
    int32_t *sync; /* block counts of the kernels whose last block finishes (zero between launches) */
    size_t sync_cap;
    struct const_slot *consts; /* CONST_SLOTS host constants kept on the device */
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
static ld_status const_dev(cuda_backend *cb, const void *key, const void *a, size_t na, const void *b, size_t nb,
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
static ld_status const_one(cuda_backend *cb, const void *a, size_t na, void **dev, const char *what, ld_error *err)
{
    return const_dev(cb, a, a, na, NULL, 0, dev, what, err);
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
static ld_status sync_ints(cuda_backend *cb, size_t n, int32_t **out, const char *what, ld_error *err)
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
    if (!b->view) {
        ld_cu_set_device(((cuda_backend *)be)->device);
        ld_cu_free(b->d);
    }
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
        default: return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "weight dtype %s is not supported", ld_dtype_name(t->dtype));
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
        return cu_fail(err, "weight_load", e);
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
static void mm_group(ld_cu_mm_group *g, const ld_weight *w, const float *x, float *out, int rows, size_t ldx,
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
static int fp8_group_ok(const cuda_backend *cb, ld_weight *const *ws, int G, int T)
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
static int matmul_tc(const cuda_backend *cb, const ld_weight *w)
{
    return cb->k.custom[LD_CUDA_OP_MATMUL] == LD_CUDA_KERNEL_TC && ld_cu_matmul_tc_supported(w->dt, (int)w->cols);
}

static ld_status matmul(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias,
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
    if (matmul_tc(cb, w))
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
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, nk * sizeof(float), "ds_route", err));
    float *dbias = NULL; /* kept on the device between calls (const_dev) */
    if (bias)
        LD_TRY(const_one(cb, bias, (size_t)E * sizeof *bias, (void **)&dbias, "ds_route", err));
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

_Static_assert((int)LD_DS4_MHC_F32 == (int)LD_CU_MHC_F32 && (int)LD_DS4_MHC_BF16 == (int)LD_CU_MHC_BF16 &&
                   (int)LD_DS4_MHC_SINKHORN_BF16 == (int)LD_CU_MHC_SINKHORN_BF16,
               "the mHC variants of backend.h and cuda_ops.h");

/* hc_pre's checks, its work scratch and its base and scale on the device
 * (*bs: base [hc], then scale [3]); 1 in *none when T is 0 */
static ld_status hc_pre_setup(cuda_backend *cb, const ld_buf *post, const ld_buf *comb, const ld_buf *collapsed,
                              const ld_buf *X, const ld_buf *fn, const float *base, const float *scale, int T, int N,
                              int D, int iters, int mhc, float **bs, int *none, ld_error *err)
{
    LD_TRY(ld_ds_args_hc_pre(T, N, D, iters, mhc, err));
    if (N > 64) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda hc_pre: %d streams (at most 64)", N);
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T, hc = (2 + n) * n;
    LD_TRY(range(post, 0, tt * n, err));
    LD_TRY(range(comb, 0, tt * n * n, err));
    LD_TRY(range(collapsed, 0, tt * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    LD_TRY(range(fn, 0, hc * n * d, err));
    *none = !T;
    if (!T) return LD_OK;
    CU("hc_pre", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->work, &cb->work_cap, ld_cu_hc_work(T, N) * sizeof(float), "hc_pre", err));
    return const_dev(cb, base, base, hc * sizeof(float), scale, 3 * sizeof(float), (void **)bs, "hc_pre", err);
}

static ld_status hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                        const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                        float norm_eps, float hc_eps, int mhc, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    float *bs = NULL;
    int none = 0;
    LD_TRY(hc_pre_setup(cb, post, comb, collapsed, X, fn, base, scale, T, N, D, iters, mhc, &bs, &none, err));
    if (none) return LD_OK;
    size_t hc = (size_t)(2 + N) * (size_t)N;
    /* backend.h's LD_DS4_MHC_* are cuda_ops.h's LD_CU_MHC_* (checked below) */
    CU("hc_pre", ld_cu_hc_pre_ex(variant(cb, LD_CUDA_OP_HC), mhc, post->d, comb->d, collapsed->d, X->d, T, N, D,
                                 fn->d, bs, bs + hc, iters, norm_eps, hc_eps, cb->work, ld_cu_hc_work(T, N)));
    return LD_OK;
}

/* hc_pre and rmsnorm in two launches: the custom kernels of both, a norm
 * weight of F32, F16 or BF16 (else LD_ERR_UNSUPPORTED, nothing written) */
static ld_status hc_pre_norm(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                             const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                             float norm_eps, float hc_eps, int mhc, const ld_weight *w, float eps, ld_buf *normed,
                             ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (variant(cb, LD_CUDA_OP_HC) != LD_CU_CUSTOM || variant(cb, LD_CUDA_OP_RMSNORM) != LD_CU_CUSTOM ||
        (w->dt != LD_KDT_F32 && w->dt != LD_KDT_F16 && w->dt != LD_KDT_BF16) || w->rows * w->cols != D ||
        T > 65535)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda hc_pre_norm: not fused here");
    LD_TRY(range(normed, 0, (size_t)(T > 0 ? T : 0) * (size_t)D, err));
    float *bs = NULL;
    int none = 0;
    LD_TRY(hc_pre_setup(cb, post, comb, collapsed, X, fn, base, scale, T, N, D, iters, mhc, &bs, &none, err));
    if (none) return LD_OK;
    size_t hc = (size_t)(2 + N) * (size_t)N;
    int32_t *sync = NULL;
    LD_TRY(sync_ints(cb, (size_t)T, &sync, "hc_pre", err));
    CU("hc_pre", ld_cu_hc_pre_norm(mhc, post->d, comb->d, collapsed->d, X->d, T, N, D, fn->d, bs, bs + hc, iters,
                                   norm_eps, hc_eps, cb->work, ld_cu_hc_work(T, N), w->d, (int)w->dt, eps,
                                   normed->d, sync));
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
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, nk * sizeof(float), "ds4_route", err));
    float *dbias = NULL; /* kept on the device between calls (const_dev) */
    if (bias)
        LD_TRY(const_one(cb, bias, (size_t)E * sizeof *bias, (void **)&dbias, "ds4_route", err));
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

/* ---------------------------------------------------------------- MoE */

static void moe_dims(const ld_weight *w, int64_t dims[2])
{
    dims[0] = w->rows;
    dims[1] = w->cols;
}

/* floats rounded up to whole 256-byte pieces, so that every scratch array
 * starts aligned for the 16-byte accesses of the custom kernels */
static size_t moe_pad(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* The plan of T tokens' K choices on the host (idx is a host array): the
 * grouped rows by expert in ascending id, then in token order
 * (ld_ref_moe_gather's), rows [T*K] the token of each grouped row, row_of
 * [T*K] the grouped row of choice (t, k), off [E + 1] each expert's first
 * grouped row; next [E] scratch. */
static void moe_plan(int32_t *off, int32_t *rows, int32_t *row_of, int32_t *next, const int32_t *idx, int T, int K,
                     int E)
{
    size_t nk = (size_t)T * (size_t)K;
    memset(off, 0, ((size_t)E + 1) * sizeof *off);
    for (size_t i = 0; i < nk; i++) off[idx[i] + 1]++;
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    memcpy(next, off, (size_t)E * sizeof *next);
    for (size_t i = 0; i < nk; i++) { /* token order: t = i / K ascending */
        int32_t r = next[idx[i]]++;
        rows[r] = (int32_t)(i / (size_t)K);
        row_of[i] = r;
    }
}

/* the device scratch of one moe call: the rows and their products in
 * cb->ds_f, the plan, the route's weights and the grouped launches'
 * tables in cb->moe_up (one upload) */
typedef struct moe_dev {
    float *xe, *eo, *g, *u, *yt;
    float *es; /* the shared expert's output [T][D] */
    float *sg; /* the shared expert's activation [T][Is] beside the routed ones' (moe_mixed_post) */
    float *w, *srow;
    int32_t *rows, *row_of;
    ld_cu_mm_group *tab; /* [2 n] gate and up, then [n] down (n active experts) */
} moe_dev;

/* What one moe call runs: n experts with rows, and how their matmuls go.
 * dt LD_KDT_F8B / F4B: one grouped launch for every gate and up, one for
 * every down (all three weights of every active expert of that type, gate
 * and up of one block shape, down of one; the custom matmul); else
 * (LD_KDT_F32) the backend's matmul per expert and projection. */
typedef struct moe_how {
    int n;
    ld_kdt dt;
} moe_how;

/* a weight of the grouped launch's type and shape: rows x cols in blocks
 * br x bc as `first`'s */
static int moe_same(const ld_weight *w, const ld_weight *first)
{
    return w->dt == first->dt && w->rows == first->rows && w->cols == first->cols && w->br == first->br &&
           w->bc == first->bc;
}

/* off NULL: every expert (a route not seen on the host; all are there,
 * ld_moe_args_all checked it) */
static moe_how moe_choose(const cuda_backend *cb, const int32_t *off, const ld_moe_expert *experts, int E)
{
    moe_how h = {0, LD_KDT_F32};
    const ld_moe_expert *first = NULL;
    int same = variant(cb, LD_CUDA_OP_MATMUL) == LD_CU_CUSTOM;
    for (int e = 0; e < E; e++) {
        if (off && off[e + 1] == off[e]) continue;
        h.n++;
        const ld_moe_expert *x = &experts[e];
        if (!first) first = x;
        same = same && ld_ref_kdt_is_scaled(x->gate->dt) && moe_same(x->gate, first->gate) &&
               moe_same(x->up, first->gate) && moe_same(x->down, first->down) && x->down->dt == x->gate->dt;
    }
    /* FP4's grouped kernel takes whole blocks (as its matmul does) */
    if (same && first && first->gate->dt == LD_KDT_F4B)
        same = first->gate->rows % first->gate->br == 0 && first->gate->cols % first->gate->bc == 0 &&
               first->down->rows % first->down->br == 0 && first->down->cols % first->down->bc == 0;
    if (same && first && h.n <= 32767) h.dt = first->gate->dt;
    return h;
}

/* act(g, u) into g over `rows` rows of width F (the backend's swiglu
 * kernel, or V4's clamped one) */
static ld_status moe_act(cuda_backend *cb, float *g, const float *u, int rows, int64_t F, int act, float limit,
                         ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_SWIGLU);
    if (act == LD_MOE_ACT_CLAMPED)
        CU("moe", ld_cu_ds4_clamped_swiglu(v, g, g, u, rows, (int)F, (size_t)F, limit));
    else
        CU("moe", ld_cu_swiglu(v, g, g, u, (size_t)rows * (size_t)F));
    return LD_OK;
}

/* the activation goes into the grouped gate/up launch: V4's clamped one
 * with the custom swiglu kernel (swiglu=ref keeps its own kernel, the A/B
 * of --compare-kernels) */
static int fuse_act(const cuda_backend *cb, int act)
{
    return act == LD_MOE_ACT_CLAMPED && variant(cb, LD_CUDA_OP_SWIGLU) == LD_CU_CUSTOM;
}

/* the grouped launches' tables on the host (device pointers into m): for
 * the k-th active expert, entry k its gate (xe rows into g), n + k its up
 * (into u), 2 n + k its down (g rows into eo) */
static void moe_tables(ld_cu_mm_group *tab, const moe_dev *m, const int32_t *off, const ld_moe_expert *experts,
                       int E, int n, int64_t D, int64_t I)
{
    size_t d = (size_t)D, i = (size_t)I;
    int k = 0;
    for (int e = 0; e < E; e++) {
        int cnt = off[e + 1] - off[e];
        if (!cnt) continue;
        size_t r0 = (size_t)off[e];
        const ld_moe_expert *x = &experts[e];
        mm_group(&tab[k], x->gate, m->xe + r0 * d, m->g + r0 * i, cnt, 0, 0);
        mm_group(&tab[n + k], x->up, m->xe + r0 * d, m->u + r0 * i, cnt, 0, 0);
        mm_group(&tab[2 * n + k], x->down, m->g + r0 * i, m->eo + r0 * d, cnt, 0, 0);
        k++;
    }
}

/* one grouped launch of the type's kernel: G groups (a table on the
 * device) of at most max_rows rows, weights [N][K] in blocks br x bc */
static int moe_grouped(ld_kdt dt, const ld_cu_mm_group *tab, int G, int max_rows, int64_t K, int64_t N, int br,
                       int bc)
{
    if (dt == LD_KDT_F4B) return ld_cu_grouped_fp4_matmul(tab, G, max_rows, (int)K, (int)N, br, bc);
    return ld_cu_grouped_fp8_matmul(tab, G, max_rows, (int)K, (int)N, br, bc);
}

/* the grouped launches over m->tab ([G] gates, [G] ups, [G] downs, as
 * moe_tables or ld_cu_moe_tables lay them out): gate and up in one, the
 * activation over the R rows, down; `x` an expert whose blocks all share */
static ld_status moe_grouped_all(cuda_backend *cb, const moe_dev *m, ld_kdt dt, int G, int max_rows, int R,
                                 const ld_moe_expert *x, int64_t D, int64_t I, int act, float limit, ld_error *err)
{
    if (fuse_act(cb, act)) { /* gate, up and the activation in one launch */
        if (dt == LD_KDT_F4B)
            CU("moe", ld_cu_grouped_fp4_glu(m->tab, G, max_rows, (int)D, (int)I, x->gate->br, x->gate->bc, limit));
        else
            CU("moe", ld_cu_grouped_fp8_glu(m->tab, G, max_rows, (int)D, (int)I, x->gate->br, x->gate->bc, limit));
    } else {
        CU("moe", moe_grouped(dt, m->tab, 2 * G, max_rows, D, I, x->gate->br, x->gate->bc));
        LD_TRY(moe_act(cb, m->g, m->u, R, I, act, limit, err));
    }
    CU("moe", moe_grouped(dt, m->tab + 2 * G, G, max_rows, I, D, x->down->br, x->down->bc));
    return LD_OK;
}

/* the routed experts over the grouped rows: gate and up, the activation
 * over all rows at once, down into eo; grouped (the table uploaded in
 * m->tab) or a matmul per expert */
static ld_status moe_routed(ld_backend *be, const moe_dev *m, moe_how how, const int32_t *off,
                            const ld_moe_expert *experts, int E, int64_t D, int64_t I, int act, float limit,
                            ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (how.dt != LD_KDT_F32) {
        const ld_moe_expert *first = NULL; /* the first active expert: the blocks of all */
        int most = 0;
        for (int e = 0; e < E; e++) {
            int cnt = off[e + 1] - off[e];
            if (cnt && !first) first = &experts[e];
            if (cnt > most) most = cnt;
        }
        return moe_grouped_all(cb, m, how.dt, how.n, most, off[E], first, D, I, act, limit, err);
    }
    size_t d = (size_t)D, i = (size_t)I;
    for (int pass = 0; pass < 2; pass++) {
        for (int e = 0; e < E; e++) {
            int cnt = off[e + 1] - off[e];
            if (!cnt) continue;
            size_t r0 = (size_t)off[e], n = (size_t)cnt;
            ld_buf xe = {m->xe + r0 * d, n * d, 1}, g = {m->g + r0 * i, n * i, 1}, u = {m->u + r0 * i, n * i, 1};
            ld_buf eo = {m->eo + r0 * d, n * d, 1};
            if (pass == 0) {
                LD_TRY(matmul(be, &g, &xe, experts[e].gate, NULL, cnt, err));
                LD_TRY(matmul(be, &u, &xe, experts[e].up, NULL, cnt, err));
            } else {
                LD_TRY(matmul(be, &eo, &g, experts[e].down, NULL, cnt, err));
            }
        }
        if (pass == 0) LD_TRY(moe_act(cb, m->g, m->u, off[E], I, act, limit, err));
    }
    return LD_OK;
}

/* an expert's gate and up over the T rows of x, then its activation into
 * g: one grouped launch where both are FP8 of one shape (its table kept on
 * the device, keyed by the expert), the activation in it (fuse_act), else
 * two matmuls and moe_act */
static ld_status gate_up_act(ld_backend *be, ld_buf *g, ld_buf *u, const ld_buf *x, const ld_moe_expert *ex, int T,
                             int act, float limit, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    ld_weight *const pair[2] = {ex->gate, ex->up};
    if (!T || !fp8_group_ok(cb, pair, 2, T)) {
        LD_TRY(matmul(be, g, x, ex->gate, NULL, T, err));
        LD_TRY(matmul(be, u, x, ex->up, NULL, T, err));
        return moe_act(cb, g->d, u->d, T, ex->gate->rows, act, limit, err);
    }
    size_t K = (size_t)ex->gate->cols, N = (size_t)ex->gate->rows;
    LD_TRY(range(g, 0, (size_t)T * N, err));
    LD_TRY(range(u, 0, (size_t)T * N, err));
    LD_TRY(range(x, 0, (size_t)T * K, err));
    ld_cu_mm_group tab[2];
    mm_group(&tab[0], ex->gate, x->d, g->d, T, 0, 0);
    mm_group(&tab[1], ex->up, x->d, u->d, T, 0, 0);
    void *dtab = NULL;
    LD_TRY(const_dev(cb, ex, tab, sizeof tab, NULL, 0, &dtab, "moe", err));
    if (fuse_act(cb, act)) {
        CU("moe", ld_cu_grouped_fp8_glu(dtab, 1, T, (int)K, (int)N, ex->gate->br, ex->gate->bc, limit));
        return LD_OK;
    }
    CU("moe", ld_cu_grouped_fp8_matmul(dtab, 2, T, (int)K, (int)N, ex->gate->br, ex->gate->bc));
    return moe_act(cb, g->d, u->d, T, N, act, limit, err);
}

/* the shared expert of the T rows of x into m->es (after the routed
 * experts, whose gate and up scratch it reuses; moe_sum adds it) */
static ld_status moe_shared(ld_backend *be, const ld_buf *x, const moe_dev *m, const ld_moe_expert *sh, int T,
                            int64_t D, int64_t Is, int act, float limit, ld_error *err)
{
    size_t n = (size_t)T * (size_t)Is, nd = (size_t)T * (size_t)D;
    ld_buf g = {m->g, n, 1}, u = {m->u, n, 1}, es = {m->es, nd, 1};
    LD_TRY(gate_up_act(be, &g, &u, x, sh, T, act, limit, err));
    return matmul(be, &es, &g, sh->down, NULL, T, err);
}

/* ld_cu_post of a post call */
static ld_cu_post cu_post(const ld_hc_post_call *p)
{
    ld_cu_post c = {p->out->d, p->X->d, p->post->d, p->comb->d, p->N};
    return c;
}

/* the routed and the shared experts in the mixed launches: the custom
 * activation, the shared gate and up FP8 of one shape, its down FP8 */
static int mixed_ok(const cuda_backend *cb, const ld_moe_expert *sh, int act, int T)
{
    ld_weight *const pair[2] = {sh->gate, sh->up};
    return fuse_act(cb, act) && fp8_group_ok(cb, pair, 2, T) && sh->down->dt == LD_KDT_F8B;
}

/* the MoE after its tables, the routed experts of type dt and the shared
 * one in two launches: every gate/up with the activation
 * (ld_cu_grouped_glu2: the shared one's into m->sg), then every down with
 * the combine and hc_post (ld_cu_moe_down_post); the bits of
 * moe_grouped_all, moe_shared, moe_sum and hc_post (ds4_route_moe_post
 * checked mixed_ok).  ex: the experts' block sizes. */
static ld_status moe_mixed_post(cuda_backend *cb, const ld_hc_post_call *p, const ld_buf *x, const moe_dev *m,
                                const ld_moe_expert *ex, const ld_moe_expert *sh, ld_kdt dt, int G, int T, int K,
                                int64_t D, int64_t I, int64_t Is, float limit, ld_error *err)
{
    ld_cu_mm_group tab[2];
    mm_group(&tab[0], sh->gate, x->d, m->sg, T, 0, 0);
    mm_group(&tab[1], sh->up, x->d, m->sg, T, 0, 0); /* the GLU writes no up */
    void *dtab = NULL;
    /* keyed by &sh->up: gate_up_act keys its own table (other outputs) by sh */
    LD_TRY(const_dev(cb, &sh->up, tab, sizeof tab, NULL, 0, &dtab, "moe", err));
    int fp4 = dt == LD_KDT_F4B;
    ld_cu_moe_part a = {m->tab, G, fp4, (int)I, ex->gate->br, ex->gate->bc};
    ld_cu_moe_part b = {dtab, 1, 0, (int)Is, sh->gate->br, sh->gate->bc};
    CU("moe", ld_cu_grouped_glu2(a, b, T, (int)D, limit));
    ld_cu_moe_part r = {m->tab + 2 * G, G, fp4, (int)D, ex->down->br, ex->down->bc};
    ld_cu_combine c = {m->eo, m->row_of, m->w, K};
    const ld_weight *w = sh->down;
    CU("moe", ld_cu_moe_down_post(r, (int)I, m->sg, w->d, w->scale, T, (int)Is, w->br, w->bc, c, cu_post(p)));
    return LD_OK;
}

/* the bytes of the uploaded block for R grouped rows of T tokens and the
 * tables of n experts: [tables 3 n][rows R][row_of R][w R][srow T] */
static size_t moe_up_bytes(size_t R, int T, int n)
{
    return (size_t)3 * (size_t)n * sizeof(ld_cu_mm_group) + 2 * R * sizeof(int32_t) + R * sizeof(float) +
           (size_t)T * sizeof(float);
}

/* the rows and their products for R grouped rows of T tokens in ds_f */
static ld_status moe_floats(cuda_backend *cb, moe_dev *m, int T, int K, int64_t D, int64_t I, int64_t Is,
                            ld_error *err)
{
    size_t R = (size_t)T * (size_t)K, nd = moe_pad(R * (size_t)D), td = moe_pad((size_t)T * (size_t)D);
    size_t gi = moe_pad(R * (size_t)I > (size_t)T * (size_t)Is ? R * (size_t)I : (size_t)T * (size_t)Is);
    size_t si = moe_pad((size_t)T * (size_t)Is);
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (2 * nd + 2 * gi + 2 * td + si) * sizeof(float), "moe", err));
    m->xe = cb->ds_f;
    m->eo = m->xe + nd;
    m->g = m->eo + nd;
    m->u = m->g + gi;
    m->yt = m->u + gi;
    m->es = m->yt + td;
    m->sg = m->es + td;
    return LD_OK;
}

/* the device scratch for R grouped rows of T tokens laid out in ds_f and
 * moe_up; *host the host image of moe_up (the caller fills and frees it) */
static ld_status moe_scratch(cuda_backend *cb, moe_dev *m, unsigned char **host, int T, int K, int n, int64_t D,
                             int64_t I, int64_t Is, ld_error *err)
{
    size_t R = (size_t)T * (size_t)K;
    LD_TRY(moe_floats(cb, m, T, K, D, I, Is, err));
    size_t up = moe_up_bytes(R, T, n);
    LD_TRY(scratch((void **)&cb->moe_up, &cb->moe_up_cap, up, "moe", err));
    /* pointers first (their alignment), then the int32 and float arrays */
    m->tab = (ld_cu_mm_group *)cb->moe_up;
    m->rows = (int32_t *)(m->tab + 3 * (size_t)n);
    m->row_of = m->rows + R;
    m->w = (float *)(m->row_of + R);
    m->srow = m->w + R;
    *host = malloc(up);
    if (!*host) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    return LD_OK;
}

/* the host image of the uploaded block: tables, plan, weights, the fused
 * scale per token (moe_sum's second combine) */
static void moe_image(unsigned char *host, const moe_dev *m, const int32_t *plan, const int32_t *off,
                      const float *w, float fused_scale, const ld_moe_expert *experts, int E, int n, int T, int K,
                      int64_t D, int64_t I)
{
    size_t R = (size_t)T * (size_t)K;
    ld_cu_mm_group *tab = (ld_cu_mm_group *)host;
    moe_tables(tab, m, off, experts, E, n, D, I);
    int32_t *ip = (int32_t *)(tab + 3 * (size_t)n);
    memcpy(ip, plan, 2 * R * sizeof *ip);
    float *fp = (float *)(ip + 2 * R);
    memcpy(fp, w, R * sizeof *fp);
    for (int t = 0; t < T; t++) fp[R + (size_t)t] = fused_scale;
}

/* the combine in the fixed order: per token its experts' rows in k
 * (ascending id) order from zero (ld_cu_moe_combine: the axpy's two
 * roundings); fused: that sum into yt, then y = 0 + yt * scale (a
 * combine of one choice, the weight the scale: the product, exact + 0) */
static ld_status moe_sum(cuda_backend *cb, ld_buf *y, const moe_dev *m, int fused, int shared, int T, int K,
                         int64_t D, ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_ADD);
    const float *add = shared ? m->es : NULL;
    /* from zero, the routed sum, then the shared output: one launch (two
     * with the fused scale), the bits of memset, combine and add */
    if (!fused) {
        CU("moe", ld_cu_moe_combine_ex(v, y->d, m->eo, m->row_of, m->w, T, K, (int)D, 1, add));
        return LD_OK;
    }
    CU("moe", ld_cu_moe_combine_ex(v, m->yt, m->eo, m->row_of, m->w, T, K, (int)D, 1, NULL));
    CU("moe", ld_cu_moe_combine_ex(v, y->d, m->yt, NULL, m->srow, T, 1, (int)D, 1, add));
    return LD_OK;
}

/* the plan, scratch and upload, the gather, the routed experts (off the
 * host plan's offsets) */
static ld_status moe_run_routed(ld_backend *be, moe_dev *m, const int32_t *plan, const int32_t *off,
                                const float *w, float fused_scale, const ld_moe_expert *experts, int E,
                                const ld_buf *x, int T, int K, int64_t D, int64_t I, int64_t Is, int act,
                                float limit, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    moe_how how = moe_choose(cb, off, experts, E);
    unsigned char *host = NULL;
    size_t R = (size_t)T * (size_t)K;
    CU("moe", ld_cu_set_device(cb->device));
    ld_status st = moe_scratch(cb, m, &host, T, K, how.n, D, I, Is, err);
    if (st == LD_OK) {
        moe_image(host, m, plan, off, w, fused_scale, experts, E, how.n, T, K, D, I);
        int e = ld_cu_h2d(cb->moe_up, host, moe_up_bytes(R, T, how.n));
        if (!e) e = ld_cu_embed(variant(cb, LD_CUDA_OP_EMBED), m->xe, x->d, LD_KDT_F32, (int)D, m->rows, (int)R);
        if (e) st = cu_fail(err, "moe", e);
    }
    if (st == LD_OK) st = moe_routed(be, m, how, off, experts, E, D, I, act, limit, err);
    free(host);
    return st;
}

/* The moe entry on the device: the plan on the host (idx is a host array)
 * and one upload (plan, weights, the grouped launches' tables), the rows
 * gathered per expert by the embed kernel (an F32 "table" of x's rows: an
 * exact copy), the routed experts (grouped launches for FP8 / FP4 experts
 * with the custom matmul, else the backend's own matmul per expert), the
 * activation, the fixed-order combine, the shared expert.  combine=bf16
 * is LD_ERR_UNSUPPORTED. */
static ld_status moe(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T, int K,
                     const ld_moe_expert *experts, int E, const ld_moe_expert *shared, int act, float limit,
                     int combine, float fused_scale, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    int64_t D, I, Is;
    LD_TRY(ld_moe_args_check(idx, T, K, experts, E, shared, act, combine, moe_dims, &D, &I, &Is, err));
    if (combine == LD_MOE_COMBINE_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda moe: combine=bf16 (ref and fused only)");
    if (!T) return LD_OK;
    if ((size_t)T * (size_t)K > 0x7fffffff || D > 0x7fffffff)
        return LD_FAIL(err, LD_ERR_LIMIT, 0, "moe of %d tokens, top %d", T, K);
    size_t nd = (size_t)T * (size_t)D, R = (size_t)T * (size_t)K;
    LD_TRY(range(y, 0, nd, err));
    LD_TRY(range(x, 0, nd, err));
    if (y->d == x->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: y aliases x");
    /* host plan: [rows R][row_of R][E counters], then the offsets [E + 1] */
    int32_t *plan = malloc((2 * R + 2 * (size_t)E + 1) * sizeof *plan);
    if (!plan) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    int32_t *off = plan + 2 * R + (size_t)E;
    moe_plan(off, plan, plan + R, plan + 2 * R, idx, T, K, E);
    moe_dev m = {0};
    ld_status st = moe_run_routed(be, &m, plan, off, w, fused_scale, experts, E, x, T, K, D, I, Is, act, limit, err);
    free(plan);
    LD_TRY(st);
    if (shared) LD_TRY(moe_shared(be, x, &m, shared, T, D, Is, act, limit, err));
    LD_TRY(moe_sum(cb, y, &m, combine == LD_MOE_COMBINE_FUSED, shared != NULL, T, K, D, err));
    return LD_OK;
}

/* ---------------------------------------------------------------- V4 route + MoE
 * backend.h's ds4_route_moe: with the route wanted on the host, or experts
 * the grouped launches do not take, ds4_route then moe as two calls; else
 * the route never leaves the device: the router kernel, the plan
 * (ld_cu_moe_plan), the grouped launches' tables (ld_cu_moe_tables from
 * every expert's weights) and the grouped launches with T as the largest
 * row count (a token chooses an expert once), so the host queues the whole
 * MoE without waiting for the device. */

/* how ds4_route_moe runs: on the device (dev 1: route_moe_dev over
 * experts of type dt, dims D, I, Is), or as ds4_route then moe */
typedef struct route_how {
    int dev;
    ld_kdt dt;
    int64_t D, I, Is;
} route_how;

/* the most tokens a call keeps its route on the device: the grouped
 * launches then take T as every expert's row count, so a prefill chunk's
 * grid would be mostly empty blocks (experts x T / 8 row tiles); a chunk
 * that large waits for its route instead, and its grid fits the counts */
#define ROUTE_DEV_MAX_T 16

/* byte offsets into moe_up of the device route's arrays */
typedef struct route_layout {
    size_t tab, idx, hash, offsets, rows, row_of, w, end;
} route_layout;

static size_t up256(size_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

static route_layout route_lay(size_t T, size_t K, size_t E, size_t G)
{
    size_t R = T * K, o = 0, i4 = sizeof(int32_t);
    route_layout L;
    L.tab = o, o += up256(3 * G * sizeof(ld_cu_mm_group));
    L.idx = o, o += up256(R * i4);
    L.hash = o, o += up256(R * i4);
    L.offsets = o, o += up256((E + 1) * i4);
    L.rows = o, o += up256(R * i4);
    L.row_of = o, o += up256(R * i4);
    L.w = o, o += up256(R * sizeof(float));
    L.end = o;
    return L;
}

/* keys of the constant slots that hold arrays the backend makes itself
 * (const_dev keys a slot by an address that stays put) */
static const char KEY_IOTA, KEY_SROW;

/* the host arrays the device route reads, on the device, each kept
 * between calls in a constant slot (const_dev: uploaded when its bytes
 * change): every expert's weights (*ptrs) and the bias (*dbias, NULL
 * without one), keyed by the layer's experts and bias; the tokens 0..T-1
 * (*diota, hash layers only) and the fused scale per token (*dsrow, with
 * the fused combine only: the only reader), both the same at every layer.
 * The hash rows (the tokens' own) are uploaded. */
static ld_status route_uploads(cuda_backend *cb, const route_layout *L, const ld_moe_expert *experts, int E,
                               const float *bias, const int32_t *hash, int T, int K, int fused, float fused_scale,
                               const ld_cu_moe_w **ptrs, const float **dbias, int32_t **diota, float **dsrow,
                               ld_error *err)
{
    size_t nt = (size_t)T, np = (size_t)E * sizeof(ld_cu_moe_w);
    size_t big = np > nt * sizeof(float) ? np : nt * sizeof(float);
    unsigned char *h = malloc(big);
    if (!h) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_cu_moe_w *p = (ld_cu_moe_w *)h;
    for (int e = 0; e < E; e++) {
        const ld_moe_expert *x = &experts[e];
        p[e] = (ld_cu_moe_w){x->gate->d, x->up->d, x->down->d, x->gate->scale, x->up->scale, x->down->scale};
    }
    ld_status st = const_dev(cb, experts, p, np, NULL, 0, (void **)ptrs, "ds4_route_moe", err);
    *dbias = NULL, *diota = NULL, *dsrow = NULL;
    if (st == LD_OK && bias)
        st = const_one(cb, bias, (size_t)E * sizeof *bias, (void **)dbias, "ds4_route_moe", err);
    int32_t *iota = (int32_t *)h;
    float *srow = (float *)h;
    if (st == LD_OK && hash) {
        for (int t = 0; t < T; t++) iota[t] = t;
        st = const_dev(cb, &KEY_IOTA, iota, nt * sizeof *iota, NULL, 0, (void **)diota, "ds4_route_moe", err);
    }
    for (int t = 0; st == LD_OK && fused && t < T; t++) srow[t] = fused_scale;
    if (st == LD_OK && fused)
        st = const_dev(cb, &KEY_SROW, srow, nt * sizeof *srow, NULL, 0, (void **)dsrow, "ds4_route_moe", err);
    free(h);
    LD_TRY(st);
    if (hash) CU("ds4_route_moe", ld_cu_h2d(cb->moe_up + L->hash, hash, nt * (size_t)K * sizeof *hash));
    return LD_OK;
}

/* whether the route's one launch can compute the router's logits too:
 * they are then the custom matmul kernel's (cuda_mm_warp.cuh), as the
 * matmul op would compute them (not the tensor-core GEMM, FP8 or a GGML
 * type) */
static int router_fuses(const cuda_backend *cb, const ld_weight *router)
{
    ld_kdt dt = router->dt;
    int plain = dt == LD_KDT_F32 || dt == LD_KDT_F16 || dt == LD_KDT_BF16;
    return plain && !matmul_tc(cb, router) && variant(cb, LD_CUDA_OP_MATMUL) == LD_CU_CUSTOM && router->rope_hd <= 0 &&
           router->cols <= 0x7fffffff;
}

/* the route, plan, tables and the grouped experts on the device (with
 * router, its logits first: in the route's launch where router_fuses);
 * then the fixed-order combine and the shared expert as moe's into y, or
 * with post the mixed launches into the new streams (moe_mixed_post) */
static ld_status route_moe_dev(cuda_backend *cb, ld_buf *y, const ld_hc_post_call *post, const ld_buf *x,
                               ld_buf *logits, const ld_weight *router, const float *bias, const int32_t *hash, int T,
                               int E, int K, float scale, const ld_moe_expert *experts, const ld_moe_expert *shared,
                               int act, float limit, int fused, float fused_scale, const route_how *h, ld_error *err)
{
    ld_kdt dt = h->dt;
    int64_t D = h->D, I = h->I, Is = h->Is;
    size_t R = (size_t)T * (size_t)K;
    int G = (size_t)E < R ? E : (int)R;
    route_layout L = route_lay((size_t)T, (size_t)K, (size_t)E, (size_t)G);
    moe_dev m = {0};
    CU("ds4_route_moe", ld_cu_set_device(cb->device));
    LD_TRY(moe_floats(cb, &m, T, K, D, I, Is, err));
    LD_TRY(scratch((void **)&cb->moe_up, &cb->moe_up_cap, L.end, "ds4_route_moe", err));
    unsigned char *b = cb->moe_up;
    m.tab = (ld_cu_mm_group *)(b + L.tab);
    m.rows = (int32_t *)(b + L.rows);
    m.row_of = (int32_t *)(b + L.row_of);
    m.w = (float *)(b + L.w);
    int32_t *idx = (int32_t *)(b + L.idx), *off = (int32_t *)(b + L.offsets), *diota;
    const ld_cu_moe_w *ptrs;
    const float *dbias;
    LD_TRY(route_uploads(cb, &L, experts, E, bias, hash, T, K, fused, fused_scale, &ptrs, &dbias, &diota, &m.srow,
                         err));
    int vr = variant(cb, LD_CUDA_OP_ROUTE);
    int32_t *dhash = hash ? (int32_t *)(b + L.hash) : NULL;
    /* the experts' gate and up read their tokens' rows of x in place (the
     * tables' xrows), not a gathered copy, where that gives the same bits:
     * the grouped FP4 kernel picks its 16-byte path by x's alignment */
    int pick = (((uintptr_t)x->d & 15) == 0) == (((uintptr_t)m.xe & 15) == 0);
    const float *xe = pick ? x->d : m.xe;
    int one = vr == LD_CU_CUSTOM && T <= LD_CU_ROUTE_FUSED_T && E <= LD_CU_ROUTE_FUSED_E; /* a decode step */
    int fuse = one && router && router_fuses(cb, router); /* the router's matmul in that launch */
    if (router && !fuse) LD_TRY(matmul(&cb->base, logits, x, router, NULL, T, err));
    if (fuse) {
        int32_t *sync;
        LD_TRY(sync_ints(cb, 1, &sync, "ds4_route_moe", err));
        ld_cu_router r = {logits->d, x->d, router->d, router->dt, (int)router->cols, sync};
        CU("ds4_route_moe", ld_cu_ds4_router_route_plan_tables(&r, idx, m.w, dbias, dhash, diota, T, E, K, scale, off,
                                                               m.rows, m.row_of, m.tab, G, ptrs, xe, pick, m.g, m.u,
                                                               m.eo, (int)D, (int)I));
    } else if (one) {
        CU("ds4_route_moe", ld_cu_ds4_route_plan_tables(idx, m.w, logits->d, dbias, dhash, diota, T, E, K, scale, off,
                                                        m.rows, m.row_of, m.tab, G, ptrs, xe, pick, m.g, m.u, m.eo,
                                                        (int)D, (int)I));
    } else {
        CU("ds4_route_moe", ld_cu_ds4_route(vr, idx, m.w, logits->d, dbias, dhash, diota, T, E, K, scale));
        CU("ds4_route_moe", ld_cu_moe_plan(vr, off, m.rows, m.row_of, idx, T, K, E));
        CU("ds4_route_moe", ld_cu_moe_tables(m.tab, G, off, ptrs, E, xe, pick ? m.rows : NULL, m.g, m.u, m.eo, (int)D,
                                             (int)I));
    }
    if (!pick)
        CU("ds4_route_moe", ld_cu_embed(variant(cb, LD_CUDA_OP_EMBED), m.xe, x->d, LD_KDT_F32, (int)D, m.rows, (int)R));
    if (post) return moe_mixed_post(cb, post, x, &m, &experts[0], shared, dt, G, T, K, D, I, Is, limit, err);
    LD_TRY(moe_grouped_all(cb, &m, dt, G, T, (int)R, &experts[0], D, I, act, limit, err));
    if (shared) LD_TRY(moe_shared(&cb->base, x, &m, shared, T, D, Is, act, limit, err));
    LD_TRY(moe_sum(cb, y, &m, fused, shared != NULL, T, K, D, err));
    return LD_OK;
}

/* ds4_route into host arrays (the caller's, or scratch when it wants none),
 * then moe over them */
static ld_status route_then_moe(ld_backend *be, ld_buf *y, const ld_buf *x, const ld_buf *logits, const float *bias,
                                const int32_t *hash, int T, int E, int K, float scale, const ld_moe_expert *experts,
                                const ld_moe_expert *shared, int act, float limit, int combine, float fused_scale,
                                int32_t *idx, float *w, ld_error *err)
{
    size_t R = (size_t)T * (size_t)K;
    void *own = NULL;
    if (!idx) {
        own = malloc(R * (sizeof *idx + sizeof *w) + 1);
        if (!own) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        idx = own;
        w = (float *)(idx + R);
    }
    ld_status st = ds4_route(be, idx, w, logits, bias, hash, T, E, K, scale, err);
    if (st == LD_OK) st = moe(be, y, x, idx, w, T, K, experts, E, shared, act, limit, combine, fused_scale, err);
    free(own);
    return st;
}

/* ds4_route_moe's checks, and how it runs (*h) */
static ld_status route_moe_checks(cuda_backend *cb, const ld_buf *x, const ld_buf *logits, const ld_weight *router,
                                  const int32_t *hash, int T, int E, int K, const ld_moe_expert *experts,
                                  const ld_moe_expert *shared, int act, int combine, int32_t *idx, float *w,
                                  route_how *h, ld_error *err)
{
    LD_TRY(ld_moe_args(T, K, E, act, combine, err));
    if (router) { /* what the matmul op checks, before anything is written */
        if (router->rows != E)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_route_moe: a router of %lld rows for %d experts",
                           (long long)router->rows, E);
        LD_TRY(range(logits, 0, (size_t)T * (size_t)E, err));
        LD_TRY(range(x, 0, (size_t)T * (size_t)router->cols, err));
        if (x == logits) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_route_moe: logits alias x");
    }
    if (combine == LD_MOE_COMBINE_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda moe: combine=bf16 (ref and fused only)");
    if (!idx != !w) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_route_moe: give both idx and w, or neither");
    LD_TRY(ld_ds_args_ds4_route(T, E, K, hash, err));
    ld_error quiet = {0}; /* an expert missing: the two calls name the chosen one */
    *h = (route_how){0, LD_KDT_F32, 0, 0, 0};
    if (!idx && T &&
        ld_moe_args_all(T, K, experts, E, shared, act, combine, moe_dims, &h->D, &h->I, &h->Is, &quiet) == LD_OK)
        h->dt = moe_choose(cb, NULL, experts, E).dt;
    h->dev = !(h->dt == LD_KDT_F32 || T > ROUTE_DEV_MAX_T || h->D > 0x7fffffff || E > 1024);
    if (!h->dev) return LD_OK;
    LD_TRY(range(x, 0, (size_t)T * (size_t)h->D, err));
    return range(logits, 0, (size_t)T * (size_t)E, err);
}

static ld_status ds4_route_moe(ld_backend *be, ld_buf *y, const ld_buf *x, ld_buf *logits, const ld_weight *router,
                               const float *bias, const int32_t *hash, int T, int E, int K, float scale,
                               const ld_moe_expert *experts, const ld_moe_expert *shared, int act, float limit,
                               int combine, float fused_scale, int32_t *idx, float *w, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    route_how h;
    LD_TRY(route_moe_checks(cb, x, logits, router, hash, T, E, K, experts, shared, act, combine, idx, w, &h, err));
    if (!h.dev) {
        if (router) LD_TRY(matmul(be, logits, x, router, NULL, T, err));
        return route_then_moe(be, y, x, logits, bias, hash, T, E, K, scale, experts, shared, act, limit, combine,
                              fused_scale, idx, w, err);
    }
    LD_TRY(range(y, 0, (size_t)T * (size_t)h.D, err));
    if (y->d == x->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: y aliases x");
    return route_moe_dev(cb, y, NULL, x, logits, router, bias, hash, T, E, K, scale, experts, shared, act, limit,
                         combine == LD_MOE_COMBINE_FUSED, fused_scale, &h, err);
}

/* the streams of a post call for T tokens of D values: in range, apart
 * from x */
static ld_status post_ranges(const ld_hc_post_call *p, const ld_buf *x, int T, int64_t D, ld_error *err)
{
    size_t tt = (size_t)T, n = (size_t)p->N, d = (size_t)D;
    LD_TRY(range(p->out, 0, tt * n * d, err));
    LD_TRY(range(p->X, 0, tt * n * d, err));
    LD_TRY(range(p->post, 0, tt * n, err));
    LD_TRY(range(p->comb, 0, tt * n * n, err));
    if (p->out->d == p->X->d || p->out->d == x->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_post: out aliases X or x");
    return LD_OK;
}

/* the custom kernels the fused epilogues stand for */
static int post_kernels(const cuda_backend *cb)
{
    return variant(cb, LD_CUDA_OP_MATMUL) == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_ADD) == LD_CU_CUSTOM &&
           variant(cb, LD_CUDA_OP_HC) == LD_CU_CUSTOM;
}

static ld_status ds4_route_moe_post(ld_backend *be, const ld_hc_post_call *p, const ld_buf *x, ld_buf *logits,
                                    const ld_weight *router, const float *bias, const int32_t *hash, int T, int E,
                                    int K, float scale, const ld_moe_expert *experts, const ld_moe_expert *shared,
                                    int act, float limit, int combine, float fused_scale, int32_t *idx, float *w,
                                    ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    route_how h;
    LD_TRY(route_moe_checks(cb, x, logits, router, hash, T, E, K, experts, shared, act, combine, idx, w, &h, err));
    if (!h.dev || !T || combine != LD_MOE_COMBINE_REF || !shared || !mixed_ok(cb, shared, act, T) ||
        shared->down->rows != h.D || p->N <= 0 || !post_kernels(cb))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_route_moe_post: not fused here");
    LD_TRY(post_ranges(p, x, T, h.D, err));
    return route_moe_dev(cb, NULL, p, x, logits, router, bias, hash, T, E, K, scale, experts, shared, act, limit, 0,
                         fused_scale, &h, err);
}

static ld_status matmul_hc_post(ld_backend *be, const ld_hc_post_call *p, const ld_buf *x, const ld_weight *w, int T,
                                ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_hc_post of %d tokens", T);
    if (w->dt != LD_KDT_F8B || !post_kernels(cb) || p->N <= 0 || w->rows > INT_MAX || w->cols > INT_MAX ||
        (T + 7) / 8 > 65535)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda matmul_hc_post: not fused here");
    LD_TRY(range(x, 0, (size_t)T * (size_t)w->cols, err));
    LD_TRY(post_ranges(p, x, T, w->rows, err));
    if (!T) return LD_OK;
    CU("matmul_hc_post", ld_cu_set_device(cb->device));
    CU("matmul_hc_post", ld_cu_fp8_matmul_post(x->d, w->d, w->scale, T, (int)w->cols, (int)w->rows, w->br, w->bc,
                                               cu_post(p)));
    return LD_OK;
}

/* ---------------------------------------------------------------- V4 attention
 * backend.h's V4 attention entries over the twins of kernels/
 * cuda_deepseek_v4.cu: the host path's steps in its order, a launch over
 * the chunk's tokens where the step allows (the compressor: its positions
 * in order, its ring being overwritten within a chunk). */

/* the rope's inverse frequencies fit their buffer */
static ld_status rot_range(const ld_ds4_rot *r, ld_error *err)
{
    return range(r->inv_freq, 0, (size_t)r->dim / 2, err);
}

/* V4's RoPE of T rows `stride` floats apart, n heads of hd each,
 * row t at position pos0 + t */
static int ds4_rot_rows(cuda_backend *cb, float *x, int T, size_t stride, int n, int hd, const ld_ds4_rot *r, int pos0,
                        int inverse)
{
    return ld_cu_ds_rope(variant(cb, LD_CUDA_OP_ROPE), x, T, stride, (size_t)(hd - r->dim), n, (size_t)hd, r->dim,
                         r->inv_freq->d, r->attn_factor, 1, pos0, inverse, r->bf16);
}

/* at least n fp32 ones in cb->ones (uploaded once, then kept): the unit RMSNorm is rmsnorm by ones (the same
 * formula, the product by 1 exact) */
static ld_status ds4_ones(cuda_backend *cb, int n, ld_error *err)
{
    if ((size_t)n <= cb->ones_n) return LD_OK; /* uploaded by an earlier call */
    LD_TRY(scratch((void **)&cb->ones, &cb->ones_cap, (size_t)n * sizeof(float), "ds4_qkv", err));
    float *ones = malloc((size_t)n * sizeof *ones);
    if (!ones) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int i = 0; i < n; i++) ones[i] = 1.0f;
    int e = ld_cu_h2d(cb->ones, ones, (size_t)n * sizeof *ones);
    free(ones);
    CU("ds4_qkv", e);
    cb->ones_n = (size_t)n;
    return LD_OK;
}

static ld_status ds4_qkv(ld_backend *be, ld_buf *q, ld_buf *kvc, const ld_buf *kv, int T, int pos0, int H, int hd,
                         int kv_rows, float eps, const ld_ds4_rot *rope, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds4_args_qkv(T, pos0, H, hd, kv_rows, rope, err));
    LD_TRY(rot_range(rope, err));
    size_t QH = (size_t)H * (size_t)hd, d = (size_t)hd;
    LD_TRY(range(q, 0, (size_t)T * QH, err));
    LD_TRY(range(kv, 0, (size_t)T * d, err));
    LD_TRY(range(kvc, 0, (size_t)kv_rows * d, err));
    if (!T) return LD_OK;
    CU("ds4_qkv", ld_cu_set_device(cb->device));
    if (variant(cb, LD_CUDA_OP_RMSNORM) == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_ROPE) == LD_CU_CUSTOM &&
        kv_rows >= T) { /* one launch for the four below: their bits */
        CU("ds4_qkv", ld_cu_ds4_qkv(q->d, kvc->d, kv->d, T, H, hd, kv_rows, pos0, eps, rope->inv_freq->d,
                                    rope->attn_factor, rope->dim, rope->bf16));
        return LD_OK;
    }
    LD_TRY(ds4_ones(cb, hd, err));
    CU("ds4_qkv", ld_cu_rmsnorm(variant(cb, LD_CUDA_OP_RMSNORM), q->d, q->d, cb->ones, LD_KDT_F32, hd, eps, T * H));
    CU("ds4_qkv", ds4_rot_rows(cb, q->d, T, QH, H, hd, rope, pos0, 0));
    /* the ring's rows of the T positions: at most two runs (it wraps once) */
    for (int t0 = 0; t0 < T;) {
        int row = (pos0 + t0) % kv_rows, n = T - t0 < kv_rows - row ? T - t0 : kv_rows - row;
        float *dst = kvc->d + (size_t)row * d;
        CU("ds4_qkv", ld_cu_d2d(dst, kv->d + (size_t)t0 * d, (size_t)n * d * sizeof(float)));
        CU("ds4_qkv", ds4_rot_rows(cb, dst, n, d, 1, hd, rope, pos0 + t0, 0));
        t0 += n;
    }
    return LD_OK;
}

/* entry w of compressor c (ds4_compress's contract): its slots read in
 * place from the rings, pooled into work, normed into its row, rotated */
static ld_status ds4_entry(cuda_backend *cb, const ld_ds4_comp_bufs *c, int w, float eps, const ld_ds4_rot *rope,
                           ld_error *err)
{
    size_t W = (size_t)c->width, dim = (size_t)c->dim;
    int overlap = c->width == 2 * c->dim;
    float *ent = cb->work, *e = c->entries->d + (size_t)w * dim;
    CU("ds4_compress", ld_cu_ds4_compress(variant(cb, LD_CUDA_OP_ATTENTION), ent, c->kv->d, c->gate->d, c->ape->d,
                                          c->ratio, c->dim, W, overlap, w, 1, 2 * c->ratio));
    CU("ds4_compress",
       ld_cu_rmsnorm(variant(cb, LD_CUDA_OP_RMSNORM), e, ent, c->norm->d, LD_KDT_F32, c->dim, eps, 1));
    CU("ds4_compress", ds4_rot_rows(cb, e, 1, dim, 1, c->dim, rope, w * c->ratio, 0));
    return LD_OK;
}

static ld_status ds4_compress(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate, int T,
                              int pos0, float eps, const ld_ds4_rot *rope, int index_variant, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds4_args_compress(c, T, pos0, rope, index_variant, err));
    LD_TRY(rot_range(rope, err));
    if (index_variant != LD_DS4_INDEX_F32)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_compress: fp32 indexer keys only (variant %d)",
                       index_variant);
    size_t W = (size_t)c->width, r = (size_t)c->ratio, tt = (size_t)T;
    LD_TRY(range(kv, 0, tt * W, err));
    LD_TRY(range(gate, 0, tt * W, err));
    LD_TRY(range(c->kv, 0, 2 * r * W, err));
    LD_TRY(range(c->gate, 0, 2 * r * W, err));
    LD_TRY(range(c->ape, 0, r * W, err));
    LD_TRY(range(c->norm, 0, (size_t)c->dim, err));
    LD_TRY(range(c->entries, 0, ((size_t)pos0 + tt) / r * (size_t)c->dim, err));
    if (!T) return LD_OK;
    CU("ds4_compress", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->work, &cb->work_cap, (size_t)c->dim * sizeof(float), "ds4_compress", err));
    /* the tokens up to the next completed window into the rings in one
     * launch, then that window's entry (the rows it reads are not yet
     * overwritten: a chunk is at most r rows of a ring of 2 r) */
    for (size_t t = 0; t < tt;) {
        size_t p = (size_t)pos0 + t, n = r - p % r < tt - t ? r - p % r : tt - t;
        CU("ds4_compress", ld_cu_ring_put2(c->kv->d, c->gate->d, kv->d + t * W, gate->d + t * W, W, (int)(2 * r),
                                           (int)p, (int)n));
        t += n;
        if (((size_t)pos0 + t) % r == 0) LD_TRY(ds4_entry(cb, c, (int)(((size_t)pos0 + t) / r) - 1, eps, rope, err));
    }
    return LD_OK;
}

/* the indexer's picks of queries [t0, t0 + n), which all see nv entries */
/* the picks of the n queries from t0 on, which see nv entries, into the
 * device array dsel [n][k] (scores in ds_f) */
static ld_status ds4_pick_dev(cuda_backend *cb, int32_t *dsel, const ld_buf *q, const ld_buf *w, const ld_buf *keys,
                              int t0, int n, int nv, int n_heads, int dim, int k, ld_error *err)
{
    size_t QW = (size_t)n_heads * (size_t)dim;
    int v = variant(cb, LD_CUDA_OP_INDEX);
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (size_t)n * (size_t)nv * sizeof(float), "ds4_index", err));
    CU("ds4_index", ld_cu_index_scores(v, 1, cb->ds_f, q->d + (size_t)t0 * QW, w->d + (size_t)t0 * (size_t)n_heads,
                                       keys->d, n, n_heads, dim, nv, 1.0f / sqrtf((float)dim),
                                       1.0f / sqrtf((float)n_heads)));
    CU("ds4_index", ld_cu_topk(v, dsel, cb->ds_f, n, nv, nv, -1, k));
    return LD_OK;
}

/* the same into the host array sel (rows t0..), through ds_i */
static ld_status ds4_pick(cuda_backend *cb, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys,
                          int t0, int n, int nv, int n_heads, int dim, int k, ld_error *err)
{
    size_t nk = (size_t)n * (size_t)k;
    LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, nk * sizeof(int32_t), "ds4_index", err));
    LD_TRY(ds4_pick_dev(cb, cb->ds_i, q, w, keys, t0, n, nv, n_heads, dim, k, err));
    CU("ds4_index", ld_cu_d2h(sel + (size_t)t0 * (size_t)k, cb->ds_i, nk * sizeof(int32_t)));
    return LD_OK;
}

static ld_status ds4_index(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0,
                           int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope, int index_variant,
                           ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds4_args_index(T, pos0, n_heads, dim, ratio, k, rope, index_variant, err));
    LD_TRY(rot_range(rope, err));
    if (index_variant != LD_DS4_INDEX_F32)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_index: fp32 operands only (variant %d)", index_variant);
    size_t QW = (size_t)n_heads * (size_t)dim, tt = (size_t)T;
    LD_TRY(range(q, 0, tt * QW, err));
    LD_TRY(range(w, 0, tt * (size_t)n_heads, err));
    LD_TRY(range(keys, 0, ((size_t)pos0 + tt) / (size_t)ratio * (size_t)dim, err));
    if (!T) return LD_OK;
    CU("ds4_index", ld_cu_set_device(cb->device));
    CU("ds4_index", ds4_rot_rows(cb, q->d, T, QW, n_heads, dim, rope, pos0, 0));
    /* queries in runs that see the same entries (at most ratio of them) */
    for (int t0 = 0, t1; t0 < T; t0 = t1) {
        int nv = (pos0 + t0 + 1) / ratio;
        for (t1 = t0 + 1; t1 < T && (pos0 + t1 + 1) / ratio == nv; t1++) {}
        if (nv > 0) {
            LD_TRY(ds4_pick(cb, sel, q, w, keys, t0, t1 - t0, nv, n_heads, dim, k, err));
            continue;
        }
        for (size_t i = (size_t)t0 * (size_t)k; i < (size_t)t1 * (size_t)k; i++) sel[i] = -1;
    }
    return LD_OK;
}

static ld_status ds4_attention_run(cuda_backend *cb, const ld_ds4_attn_call *a, int T, int pos0, const int32_t *dsel,
                                   int kpick, ld_error *err);

/* whether the indexer's RoPE, scores and top-k of a run run in one launch
 * (ld_cu_ds4_index_pick): their kernels custom, shapes it takes */
static int index_fuses(const cuda_backend *cb, const ld_ds4_index_call *ix)
{
    return variant(cb, LD_CUDA_OP_ROPE) == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_INDEX) == LD_CU_CUSTOM &&
           ix->dim <= 256 && (size_t)ix->n_heads * (size_t)ix->dim <= LD_CU_INDEX_PICK_QW;
}

/* ds4_pick_dev of n queries from t0 not yet rotated, in one launch that
 * rotates them (at pos0 + t0 ...) too */
static ld_status ds4_pick_fused(cuda_backend *cb, int32_t *dsel, const ld_ds4_index_call *ix, int t0, int n, int nv,
                                int pos0, ld_error *err)
{
    size_t QW = (size_t)ix->n_heads * (size_t)ix->dim;
    int32_t *sync;
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (size_t)n * (size_t)nv * sizeof(float), "ds4_index", err));
    LD_TRY(sync_ints(cb, (size_t)n, &sync, "ds4_index", err));
    const ld_ds4_rot *r = ix->rope;
    ld_cu_rot rot = {r->inv_freq->d, r->attn_factor, r->dim, r->bf16};
    CU("ds4_index", ld_cu_ds4_index_pick(dsel, cb->ds_f, ix->q->d + (size_t)t0 * QW,
                                         ix->w->d + (size_t)t0 * (size_t)ix->n_heads, ix->keys->d, n, ix->n_heads,
                                         ix->dim, nv, ix->k, 1.0f / sqrtf((float)ix->dim),
                                         1.0f / sqrtf((float)ix->n_heads), &rot, pos0 + t0, sync));
    return LD_OK;
}

/* the picks of ds4_index for T queries into cb->picks [T][k] on the device:
 * the runs of queries that see the same entries as ds4_index makes them,
 * a run that sees none -1 rows.  q already rotated, or (fused) rotated
 * run by run here: by ds4_pick_fused, a run that sees no entry alone */
static ld_status ds4_picks_dev(cuda_backend *cb, const ld_ds4_index_call *ix, int T, int pos0, int ratio, int fused,
                               ld_error *err)
{
    size_t k = (size_t)ix->k;
    for (int t0 = 0, t1; t0 < T; t0 = t1) {
        int nv = (pos0 + t0 + 1) / ratio;
        for (t1 = t0 + 1; t1 < T && (pos0 + t1 + 1) / ratio == nv; t1++) {}
        int32_t *dst = cb->picks + (size_t)t0 * k;
        if (nv > 0 && fused) {
            LD_TRY(ds4_pick_fused(cb, dst, ix, t0, t1 - t0, nv, pos0, err));
            continue;
        }
        if (nv > 0) {
            LD_TRY(ds4_pick_dev(cb, dst, ix->q, ix->w, ix->keys, t0, t1 - t0, nv, ix->n_heads, ix->dim, ix->k, err));
            continue;
        }
        size_t QW = (size_t)ix->n_heads * (size_t)ix->dim;
        if (fused)
            CU("ds4_index_attention", ds4_rot_rows(cb, ix->q->d + (size_t)t0 * QW, t1 - t0, QW, ix->n_heads, ix->dim,
                                                   ix->rope, pos0 + t0, 0));
        size_t n = (size_t)(t1 - t0) * k;
        int32_t *none = malloc(n * sizeof *none);
        if (!none) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        for (size_t i = 0; i < n; i++) none[i] = -1;
        int e = ld_cu_h2d(dst, none, n * sizeof *none);
        free(none);
        CU("ds4_index_attention", e);
    }
    return LD_OK;
}

static ld_status ds4_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kvc,
                               const ld_buf *entries, const int32_t *sel, int k, const ld_buf *sinks, int T, int pos0,
                               int H, int hd, int kv_rows, int window, int ratio, float scale,
                               const ld_ds4_rot *rope, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds4_args_attention(T, pos0, H, hd, kv_rows, window, entries != NULL, ratio, sel, k, rope, err));
    LD_TRY(rot_range(rope, err));
    size_t tt = (size_t)T, QH = (size_t)H * (size_t)hd, S = (size_t)pos0 + tt;
    LD_TRY(range(out, 0, tt * QH, err));
    LD_TRY(range(q, 0, tt * QH, err));
    LD_TRY(range(kvc, 0, (size_t)kv_rows * (size_t)hd, err));
    if (entries) LD_TRY(range(entries, 0, S / (size_t)ratio * (size_t)hd, err));
    if (sinks) LD_TRY(range(sinks, 0, (size_t)H, err));
    if (!T) return LD_OK;
    if (out->d == q->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention: out aliases q");
    CU("ds4_attention", ld_cu_set_device(cb->device));
    int kpick = entries && sel ? k : 0;
    if (kpick) {
        LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, tt * (size_t)k * sizeof(int32_t), "ds4_attention", err));
        CU("ds4_attention", ld_cu_h2d(cb->ds_i, sel, tt * (size_t)k * sizeof(int32_t)));
    }
    ld_ds4_attn_call at = {out, q, kvc, entries, sinks, H, hd, kv_rows, window, ratio, scale, rope};
    return ds4_attention_run(cb, &at, T, pos0, kpick ? cb->ds_i : NULL, kpick, err);
}

/* ds4_attention's kernels once its arguments are checked: the picks dsel
 * [T][kpick] on the device (NULL, kpick 0: every entry, or none) */
static ld_status ds4_attention_run(cuda_backend *cb, const ld_ds4_attn_call *a, int T, int pos0, const int32_t *dsel,
                                   int kpick, ld_error *err)
{
    size_t tt = (size_t)T, QH = (size_t)a->H * (size_t)a->hd;
    int has = a->entries != NULL, v = variant(cb, LD_CUDA_OP_ATTENTION), H = a->H, hd = a->hd, k = kpick;
    int ratio = a->ratio, kv_rows = a->kv_rows;
    const ld_buf *out = a->out, *q = a->q, *kvc = a->kvc, *entries = a->entries, *sinks = a->sinks;
    float scale = a->scale;
    /* a window past the chunk's last position is that many positions (the
       same keys; the kernel wants kv_rows >= window) */
    int win = a->window < pos0 + T ? a->window : pos0 + T;
    /* tokens in tiles whose workspace stays under ATT_WORK_FLOATS */
    size_t per = ld_cu_ds4_attention_work(v, 1, H, hd, pos0 + T - 1, win, ratio, kpick, has);
    size_t tile = per ? ATT_WORK_FLOATS / per : tt;
    if (tile < 1) tile = 1;
    if (tile > 65535) tile = 65535;
    /* custom attention and rope: the merge de-rotates (one launch fewer) */
    int fused = v == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_ROPE) == LD_CU_CUSTOM;
    ld_cu_rot rot = {a->rope->inv_freq->d, a->rope->attn_factor, a->rope->dim, a->rope->bf16};
    for (size_t t0 = 0; t0 < tt; t0 += tile) {
        int n = (int)(tt - t0 < tile ? tt - t0 : tile), p0 = pos0 + (int)t0;
        size_t wn = ld_cu_ds4_attention_work(v, n, H, hd, p0, win, ratio, kpick, has);
        LD_TRY(scratch((void **)&cb->work, &cb->work_cap, (wn ? wn : 1) * sizeof(float), "ds4_attention", err));
        const float *ent = has ? entries->d : NULL, *snk = sinks ? sinks->d : NULL;
        const int32_t *pk = kpick ? dsel + t0 * (size_t)k : NULL;
        int32_t *sync = NULL; /* the split and the merge in one launch */
        if (fused) LD_TRY(sync_ints(cb, ld_cu_ds4_attention_sync(n, H), &sync, "ds4_attention", err));
        if (fused)
            CU("ds4_attention", ld_cu_ds4_attention_rope(out->d + t0 * QH, q->d + t0 * QH, n, H, hd, kvc->d, kv_rows,
                                                         win, ent, ratio, pk, kpick, snk, scale, p0, cb->work, wn,
                                                         rot, sync));
        else
            CU("ds4_attention", ld_cu_ds4_attention(v, out->d + t0 * QH, q->d + t0 * QH, n, H, hd, kvc->d, kv_rows,
                                                    win, ent, ratio, pk, kpick, snk, scale, p0, cb->work, wn));
    }
    if (!fused) CU("ds4_attention", ds4_rot_rows(cb, out->d, T, QH, H, hd, a->rope, pos0, 1));
    return LD_OK;
}

/* ds4_index into host picks (the caller's, or scratch when it wants none),
 * then ds4_attention over them */
static ld_status index_then_attention(ld_backend *be, const ld_ds4_index_call *ix, const ld_ds4_attn_call *at, int T,
                                      int pos0, int32_t *sel, ld_error *err)
{
    int32_t *own = NULL;
    if (!sel) {
        own = malloc(((size_t)T * (size_t)(ix->k > 0 ? ix->k : 1) + 1) * sizeof *own);
        if (!own) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        sel = own;
    }
    ld_status st = ds4_index(be, sel, ix->q, ix->w, ix->keys, T, pos0, ix->n_heads, ix->dim, at->ratio, ix->k, ix->rope,
                             ix->variant, err);
    if (st == LD_OK)
        st = ds4_attention(be, at->out, at->q, at->kvc, at->entries, sel, ix->k, at->sinks, T, pos0, at->H, at->hd,
                           at->kv_rows, at->window, at->ratio, at->scale, at->rope, err);
    free(own);
    return st;
}

/* backend.h's ds4_index_attention: with the picks wanted on the host, or an
 * indexer variant other than fp32, ds4_index then ds4_attention; else the
 * picks go from the top-k kernel straight to the attention kernel on the
 * device (queries that see no entry yet: -1 rows, uploaded) */
static ld_status ds4_index_attention(ld_backend *be, const ld_ds4_index_call *ix, const ld_ds4_attn_call *at, int T,
                                     int pos0, int32_t *sel, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (!at->entries) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_index_attention: no entries to pick from");
    if (sel || ix->variant != LD_DS4_INDEX_F32 || !T)
        return index_then_attention(be, ix, at, T, pos0, sel, err);
    LD_TRY(ld_ds4_args_index(T, pos0, ix->n_heads, ix->dim, at->ratio, ix->k, ix->rope, ix->variant, err));
    LD_TRY(ld_ds4_args_attention(T, pos0, at->H, at->hd, at->kv_rows, at->window, 1, at->ratio, NULL, ix->k,
                                 at->rope, err));
    LD_TRY(rot_range(ix->rope, err));
    LD_TRY(rot_range(at->rope, err));
    size_t tt = (size_t)T, QW = (size_t)ix->n_heads * (size_t)ix->dim, QH = (size_t)at->H * (size_t)at->hd;
    size_t S = (size_t)pos0 + tt, nk = tt * (size_t)ix->k;
    LD_TRY(range(ix->q, 0, tt * QW, err));
    LD_TRY(range(ix->w, 0, tt * (size_t)ix->n_heads, err));
    LD_TRY(range(ix->keys, 0, S / (size_t)at->ratio * (size_t)ix->dim, err));
    LD_TRY(range(at->out, 0, tt * QH, err));
    LD_TRY(range(at->q, 0, tt * QH, err));
    LD_TRY(range(at->kvc, 0, (size_t)at->kv_rows * (size_t)at->hd, err));
    LD_TRY(range(at->entries, 0, S / (size_t)at->ratio * (size_t)at->hd, err));
    if (at->sinks) LD_TRY(range(at->sinks, 0, (size_t)at->H, err));
    if (at->out->d == at->q->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention: out aliases q");
    CU("ds4_index_attention", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->picks, &cb->picks_cap, nk * sizeof(int32_t), "ds4_index_attention", err));
    int fused = index_fuses(cb, ix);
    if (!fused) CU("ds4_index_attention", ds4_rot_rows(cb, ix->q->d, T, QW, ix->n_heads, ix->dim, ix->rope, pos0, 0));
    LD_TRY(ds4_picks_dev(cb, ix, T, pos0, at->ratio, fused, err));
    return ds4_attention_run(cb, at, T, pos0, cb->picks, ix->k, err);
}

static ld_status copy_cols(ld_backend *be, ld_buf *dst, size_t dst_ld, size_t dst_off, const ld_buf *src,
                           size_t src_ld, size_t src_off, int rows, size_t cols, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (rows < 0 || dst_off + cols > dst_ld || src_off + cols > src_ld)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "copy_cols of %d rows: columns [%zu, +%zu) of %zu, [%zu, +%zu) of %zu",
                       rows, dst_off, cols, dst_ld, src_off, cols, src_ld);
    if (!rows || !cols) return LD_OK;
    size_t last = (size_t)rows - 1;
    LD_TRY(range(dst, 0, last * dst_ld + dst_off + cols, err));
    LD_TRY(range(src, 0, last * src_ld + src_off + cols, err));
    if (dst->d == src->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "copy_cols: dst aliases src");
    CU("copy_cols", ld_cu_set_device(cb->device));
    if (cols == dst_ld && cols == src_ld) { /* whole rows: one copy */
        CU("copy_cols", ld_cu_d2d(dst->d, src->d + src_off, (size_t)rows * cols * sizeof(float)));
        return LD_OK;
    }
    CU("copy_cols", ld_cu_d2d_rows(dst->d + dst_off, dst_ld * sizeof(float), src->d + src_off, src_ld * sizeof(float),
                                   cols * sizeof(float), (size_t)rows));
    return LD_OK;
}

/* the groups matmul_blockdiag takes in one launch */
#define BLOCKDIAG_MAX_G 64

/* one grouped FP8 launch over G column blocks of x and out, its table
 * kept on the device (const_dev, keyed by ws: the same buffers and T
 * upload nothing) */
static ld_status matmul_blockdiag(ld_backend *be, ld_buf *out, const ld_buf *x, ld_weight *const *ws, int G, int T,
                                  ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || G < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_blockdiag of %d tokens, %d groups", T, G);
    if (G > BLOCKDIAG_MAX_G || !fp8_group_ok(cb, ws, G, T))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda matmul_blockdiag: not %d FP8 weights of one shape", G);
    size_t K = (size_t)ws[0]->cols, N = (size_t)ws[0]->rows, GK = (size_t)G * K, GN = (size_t)G * N;
    LD_TRY(range(out, 0, (size_t)T * GN, err));
    LD_TRY(range(x, 0, (size_t)T * GK, err));
    if (x == out) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_blockdiag in place");
    if (!T) return LD_OK;
    CU("matmul_blockdiag", ld_cu_set_device(cb->device));
    ld_cu_mm_group tab[BLOCKDIAG_MAX_G];
    for (int g = 0; g < G; g++) mm_group(&tab[g], ws[g], x->d + (size_t)g * K, out->d + (size_t)g * N, T, GK, GN);
    void *dtab = NULL;
    LD_TRY(const_dev(cb, ws, tab, (size_t)G * sizeof *tab, NULL, 0, &dtab, "matmul_blockdiag", err));
    CU("matmul_blockdiag", ld_cu_grouped_fp8_matmul(dtab, G, T, (int)K, (int)N, ws[0]->br, ws[0]->bc));
    return LD_OK;
}

/* a weight matmul_fanout launches with others of its kind: a plain type
 * (F32, F16, BF16: ld_cu_matmul_fanout; rows not permuted, and not for
 * the tensor-core kernel, whose sums are another's) or FP8 / FP4 (the
 * grouped launch), of K columns, for the custom matmul */
static int fan_one_ok(const cuda_backend *cb, const ld_weight *w, int64_t K)
{
    if (w->cols != K || w->rows <= 0 || w->rows > INT_MAX) return 0;
    if (w->dt == LD_KDT_F8B || w->dt == LD_KDT_F4B) return w->br > 0 && w->bc > 0;
    if (w->dt != LD_KDT_F32 && w->dt != LD_KDT_F16 && w->dt != LD_KDT_BF16) return 0;
    return !w->rope_hd &&
           !(cb->k.custom[LD_CUDA_OP_MATMUL] == LD_CUDA_KERNEL_TC && ld_cu_matmul_tc_supported(w->dt, (int)K));
}

/* the grouped launch's table of the m block-scaled weights ws over T rows
 * of x into outs (each group its own width), on the device (kept in the
 * constant slot of key: where the caller keeps ws); *N the widest */
static ld_status fan_table(cuda_backend *cb, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int m, int T,
                           const void *key, void **dtab, int *N, ld_error *err)
{
    ld_cu_mm_group tab[LD_CU_FAN_MAX];
    *N = 0;
    for (int i = 0; i < m; i++) {
        mm_group(&tab[i], ws[i], x->d, outs[i]->d, T, 0, 0);
        tab[i].n = (int)ws[i]->rows;
        *N = tab[i].n > *N ? tab[i].n : *N;
    }
    return const_dev(cb, key, tab, (size_t)m * sizeof *tab, NULL, 0, dtab, "matmul_fanout", err);
}

/* one launch of the m weights ws (one kind) into outs; key: where the
 * caller keeps them (the grouped launch's table stays on the device) */
static ld_status fan_launch(cuda_backend *cb, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int m,
                            int T, const void *key, ld_error *err)
{
    int K = (int)ws[0]->cols, N;
    if (ws[0]->dt != LD_KDT_F8B && ws[0]->dt != LD_KDT_F4B) {
        ld_cu_fan fan[LD_CU_FAN_MAX];
        for (int i = 0; i < m; i++) fan[i] = (ld_cu_fan){ws[i]->d, outs[i]->d, (int)ws[i]->rows};
        CU("matmul_fanout", ld_cu_matmul_fanout(fan, m, x->d, ws[0]->dt, T, K));
        return LD_OK;
    }
    void *dtab = NULL;
    LD_TRY(fan_table(cb, outs, x, ws, m, T, key, &dtab, &N, err));
    int br = ws[0]->br, bc = ws[0]->bc;
    if (ws[0]->dt == LD_KDT_F4B)
        CU("matmul_fanout", ld_cu_grouped_fp4_matmul(dtab, m, T, K, N, br, bc));
    else
        CU("matmul_fanout", ld_cu_grouped_fp8_matmul(dtab, m, T, K, N, br, bc));
    return LD_OK;
}

/* the norms matmul_fanout fuses: into one FP8 launch (ws of one block
 * size), each a plain weight of its output's width, the custom rmsnorm */
static int fan_norms_ok(const cuda_backend *cb, ld_weight *const *ws, ld_weight *const *norms, int n)
{
    if (variant(cb, LD_CUDA_OP_RMSNORM) != LD_CU_CUSTOM) return 0;
    for (int i = 0; i < n; i++) {
        const ld_weight *w = ws[i], *nw = norms[i];
        if (w->dt != LD_KDT_F8B || w->br != ws[0]->br || w->bc != ws[0]->bc) return 0;
        if (nw && ((nw->dt != LD_KDT_F32 && nw->dt != LD_KDT_F16 && nw->dt != LD_KDT_BF16) ||
                   nw->rows * nw->cols != w->rows))
            return 0;
    }
    return 1;
}

/* the grouped FP8 launch with the norms (ld_cu_grouped_fp8_matmul_norm),
 * its table kept on the device (keyed by ws) */
static ld_status fan_norm_launch(cuda_backend *cb, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int n,
                                 int T, ld_weight *const *norms, float eps, ld_error *err)
{
    ld_cu_norm_w nw[LD_CU_FAN_MAX];
    for (int i = 0; i < n; i++)
        nw[i] = (ld_cu_norm_w){norms[i] ? norms[i]->d : NULL, norms[i] ? norms[i]->dt : LD_KDT_F32};
    void *dtab = NULL;
    int32_t *sync = NULL;
    int N;
    LD_TRY(fan_table(cb, outs, x, ws, n, T, ws, &dtab, &N, err));
    LD_TRY(sync_ints(cb, ((size_t)T + 7) / 8, &sync, "matmul_fanout", err));
    CU("matmul_fanout", ld_cu_grouped_fp8_matmul_norm(dtab, n, T, (int)ws[0]->cols, N, ws[0]->br, ws[0]->bc, nw, eps,
                                                      sync));
    return LD_OK;
}

/* a launch for each kind among the n weights (type, and block size for
 * the block types), in the order of their first weight; with norms, one
 * FP8 launch that norms too */
static ld_status matmul_fanout(ld_backend *be, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int n,
                               int T, ld_weight *const *norms, float eps, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || n < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_fanout of %d tokens, %d weights", T, n);
    int ok = n >= 1 && n <= LD_CU_FAN_MAX && T <= 8 * 65535 && variant(cb, LD_CUDA_OP_MATMUL) == LD_CU_CUSTOM;
    for (int i = 0; ok && i < n; i++) ok = fan_one_ok(cb, ws[i], ws[0]->cols);
    if (ok && norms) ok = fan_norms_ok(cb, ws, norms, n);
    if (!ok) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda matmul_fanout: not %d weights it launches together", n);
    size_t K = (size_t)ws[0]->cols, tt = (size_t)T;
    LD_TRY(range(x, 0, tt * K, err));
    for (int i = 0; i < n; i++) {
        LD_TRY(range(outs[i], 0, tt * (size_t)ws[i]->rows, err));
        if (outs[i]->d == x->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_fanout in place");
    }
    if (!T) return LD_OK;
    CU("matmul_fanout", ld_cu_set_device(cb->device));
    if (norms) return fan_norm_launch(cb, outs, x, ws, n, T, norms, eps, err);
    int taken[LD_CU_FAN_MAX] = {0};
    for (int i = 0; i < n; i++) {
        if (taken[i]) continue;
        ld_weight *kw[LD_CU_FAN_MAX];
        ld_buf *ko[LD_CU_FAN_MAX];
        int m = 1;
        kw[0] = ws[i], ko[0] = outs[i];
        for (int j = i + 1; j < n; j++)
            if (!taken[j] && ws[j]->dt == ws[i]->dt && ws[j]->br == ws[i]->br && ws[j]->bc == ws[i]->bc)
                kw[m] = ws[j], ko[m++] = outs[j], taken[j] = 1;
        LD_TRY(fan_launch(cb, ko, x, kw, m, T, &ws[i], err));
    }
    return LD_OK;
}

/* a norm weight rmsnorm2's kernel reads: F32, F16 or BF16, one row */
static int norm_weight_ok(const ld_weight *w)
{
    return (w->dt == LD_KDT_F32 || w->dt == LD_KDT_F16 || w->dt == LD_KDT_BF16) && w->cols > 0 && w->cols <= INT_MAX;
}

static ld_status rmsnorm2(ld_backend *be, ld_buf *out_a, const ld_buf *x_a, const ld_weight *w_a, ld_buf *out_b,
                          const ld_buf *x_b, const ld_weight *w_b, int rows, float eps, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (rows < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "rmsnorm2 of %d rows", rows);
    if (variant(cb, LD_CUDA_OP_RMSNORM) != LD_CU_CUSTOM || !norm_weight_ok(w_a) || !norm_weight_ok(w_b) ||
        rows > 0x3fffffff || out_a->d == out_b->d)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda rmsnorm2: not fused here");
    size_t na = (size_t)rows * (size_t)w_a->cols, nb = (size_t)rows * (size_t)w_b->cols;
    LD_TRY(range(out_a, 0, na, err));
    LD_TRY(range(x_a, 0, na, err));
    LD_TRY(range(out_b, 0, nb, err));
    LD_TRY(range(x_b, 0, nb, err));
    if (!rows) return LD_OK;
    CU("rmsnorm2", ld_cu_set_device(cb->device));
    ld_cu_norm_arg a = {out_a->d, x_a->d, w_a->d, w_a->dt, (int)w_a->cols};
    ld_cu_norm_arg b = {out_b->d, x_b->d, w_b->d, w_b->dt, (int)w_b->cols};
    CU("rmsnorm2", ld_cu_rmsnorm2(a, b, rows, eps));
    return LD_OK;
}

/* ds4_hc_head's checks: the shape, N <= 64, the buffers' ranges */
static ld_status hc_head_checks(const ld_buf *out, const ld_buf *X, const ld_buf *fn, int T, int N, int D,
                                ld_error *err)
{
    LD_TRY(ld_ds4_args_hc_head(T, N, D, err));
    if (N > 64) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_hc_head: %d streams (at most 64)", N);
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T;
    LD_TRY(range(out, 0, tt * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    return range(fn, 0, n * n * d, err);
}

static ld_status ds4_hc_head(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                             float scale, int T, int N, int D, float norm_eps, float hc_eps, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(hc_head_checks(out, X, fn, T, N, D, err));
    if (!T) return LD_OK;
    size_t n = (size_t)N;
    CU("ds4_hc_head", ld_cu_set_device(cb->device));
    size_t wn = ld_cu_hc_head_work(T, N);
    LD_TRY(scratch((void **)&cb->work, &cb->work_cap, (wn ? wn : 1) * sizeof(float), "ds4_hc_head", err));
    float *db;
    LD_TRY(const_one(cb, base, n * sizeof(float), (void **)&db, "ds4_hc_head", err));
    CU("ds4_hc_head", ld_cu_ds4_hc_head(variant(cb, LD_CUDA_OP_HC), out->d, X->d, T, N, D, fn->d, db, scale,
                                        norm_eps, hc_eps, cb->work, wn));
    return LD_OK;
}

/* ds4_hc_head and rmsnorm in one launch: the custom kernels of both, a
 * norm weight of F32, F16 or BF16 (else LD_ERR_UNSUPPORTED, nothing
 * written) */
static ld_status ds4_hc_head_norm(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                                  float scale, int T, int N, int D, float norm_eps, float hc_eps, const ld_weight *w,
                                  float eps, ld_buf *normed, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (variant(cb, LD_CUDA_OP_HC) != LD_CU_CUSTOM || variant(cb, LD_CUDA_OP_RMSNORM) != LD_CU_CUSTOM ||
        (w->dt != LD_KDT_F32 && w->dt != LD_KDT_F16 && w->dt != LD_KDT_BF16) || w->rows * w->cols != D)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_hc_head_norm: not fused here");
    LD_TRY(hc_head_checks(out, X, fn, T, N, D, err));
    LD_TRY(range(normed, 0, (size_t)T * (size_t)D, err));
    if (!T) return LD_OK;
    CU("ds4_hc_head", ld_cu_set_device(cb->device));
    float *db;
    LD_TRY(const_one(cb, base, (size_t)N * sizeof(float), (void **)&db, "ds4_hc_head", err));
    CU("ds4_hc_head", ld_cu_ds4_hc_head_norm(out->d, X->d, T, N, D, fn->d, db, scale, norm_eps, hc_eps, w->d,
                                             (int)w->dt, eps, normed->d));
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
    .ds4_qkv = ds4_qkv,
    .ds4_compress = ds4_compress,
    .ds4_index = ds4_index,
    .ds4_attention = ds4_attention,
    .copy_cols = copy_cols,
    .matmul_blockdiag = matmul_blockdiag,
    .matmul_fanout = matmul_fanout,
    .matmul_hc_post = matmul_hc_post,
    .ds4_route_moe_post = ds4_route_moe_post,
    .rmsnorm2 = rmsnorm2,
    .hc_pre_norm = hc_pre_norm,
    .ds4_hc_head = ds4_hc_head,
    .ds4_hc_head_norm = ds4_hc_head_norm,
    .moe = moe,
    .ds4_route_moe = ds4_route_moe,
    .ds4_index_attention = ds4_index_attention,
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
        return cu_fail(err, "create: graphs", e);
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
