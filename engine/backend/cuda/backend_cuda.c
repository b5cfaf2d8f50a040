/* backend_cuda.c - the CUDA backend (see backend_cuda.h) over kernels/
 * cuda_ops.h: its making and op table, buffers and weights; the ops are in
 * backend_cuda_dense.c (a dense decoder's), backend_cuda_ds.c,
 * backend_cuda_moe.c, backend_cuda_ds4_attention.c and backend_cuda_fused.c,
 * over backend_cuda_core.c (errors, device constants); see
 * backend_cuda_internal.h.
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
    ld_cuda_consts_free(cb);
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
    .embed = ld_cuda_embed,
    .rmsnorm = ld_cuda_rmsnorm,
    .matmul = ld_cuda_matmul,
    .rope = ld_cuda_rope,
    .kv_store = ld_cuda_kv_store,
    .attention = ld_cuda_attention,
    .swiglu = ld_cuda_swiglu,
    .add = ld_cuda_add,
    .softmax = ld_cuda_softmax,
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
