/* backend_ref.c - the plain-C CPU backends ("ref": kernels/ref/ref_ops.c
 * behind the op table; "cpu": the same with kernels/cpu/cpu_ops.c's matmul
 * and attention): making them, the op table, buffers and weights.  The ops
 * are in backend_ref_*.c, the thread pool in backend_ref_pool.c (see
 * backend_ref_internal.h). */
#include <pthread.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ref_internal.h"
#include "engine/backend/host_tensor.h"
#include "kernels/cpu/cpu_q8.h"

static void destroy(ld_backend *be)
{
    ref_backend *rb = (ref_backend *)be;
    atomic_store(&rb->quit, 1);
    pthread_mutex_lock(&rb->mu);
    pthread_cond_broadcast(&rb->go);
    pthread_mutex_unlock(&rb->mu);
    for (int i = 0; i < rb->n_started; i++) pthread_join(rb->threads[i], NULL);
    pthread_mutex_destroy(&rb->mu);
    pthread_cond_destroy(&rb->go);
    pthread_cond_destroy(&rb->done);
    for (int i = 0; i < rb->n_threads; i++) free(rb->scratch[i]);
    free(rb->scratch);
    for (int i = 0; i < rb->n_threads && rb->iscratch; i++) free(rb->iscratch[i]);
    free(rb->iscratch);
    free(rb->prep);
    free(rb->prep_done);
    ld_warena_free(&rb->weights);
    free(rb->threads);
    free(rb);
}

/* ---------------------------------------------------------------- buffers */

static ld_status buf_alloc(ld_backend *be, size_t n, ld_buf **out, ld_error *err)
{
    (void)be;
    *out = NULL;
    ld_buf *b = malloc(sizeof *b);
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!b || !p) {
        free(b);
        free(p);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a buffer of %zu floats", n);
    }
    b->p = p;
    b->n = n;
    b->view = 0;
    *out = b;
    return LD_OK;
}

static void buf_free(ld_backend *be, ld_buf *b)
{
    (void)be;
    if (b && !b->view) free(b->p);
    free(b);
}


static ld_status buf_write(ld_backend *be, ld_buf *b, size_t off, const float *src, size_t n, ld_error *err)
{
    (void)be;
    LD_TRY(ld_refb_range(b, off, n, err));
    if (n) memcpy(b->p + off, src, n * sizeof *src);
    return LD_OK;
}

static ld_status buf_read(ld_backend *be, const ld_buf *b, size_t off, float *dst, size_t n, ld_error *err)
{
    (void)be;
    LD_TRY(ld_refb_range(b, off, n, err));
    if (n) memcpy(dst, b->p + off, n * sizeof *dst);
    return LD_OK;
}

static ld_status buf_view(ld_backend *be, ld_buf *b, size_t off, size_t n, ld_buf **out, ld_error *err)
{
    (void)be;
    *out = NULL;
    LD_TRY(ld_refb_range(b, off, n, err));
    ld_buf *v = malloc(sizeof *v);
    if (!v) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    *v = (ld_buf){b->p + off, n, 1};
    *out = v;
    return LD_OK;
}

/* the buffer's own host memory: a communicator reduces it in place */
static ld_status buf_mem(ld_backend *be, ld_buf *b, size_t off, size_t n, ld_mem *out, ld_error *err)
{
    (void)be;
    LD_TRY(ld_refb_range(b, off, n, err));
    *out = (ld_mem){b->p + off, LD_MEM_HOST, 0};
    return LD_OK;
}

/* bytes of t's data, 0 for a type without a block size */
static size_t host_bytes(const ld_host_tensor *t)
{
    size_t elems, bytes;
    ld_host_block(t, &elems, &bytes);
    return elems ? (size_t)t->rows * ((size_t)t->cols / elems) * bytes : 0;
}

/* whether t's data lies wholly inside its file mapping (t->map), n bytes */
static int in_mapping(const ld_host_tensor *t, size_t n)
{
    uintptr_t lo = (uintptr_t)t->map, at = (uintptr_t)t->data;
    return t->map && at >= lo && at - lo <= t->map_size && n <= t->map_size - (at - lo);
}

/* A matmul kernel's packed layout of w (n bytes, made by `pack`) in the
 * arena; w->data stays the host data (the embedding, the rows the layout
 * leaves out and the other ops read it), whose pages leave the resident
 * set when it is a file mapping's.  NULL: no room (or n = 0). */
static const void *weight_packed(ref_backend *rb, ld_weight *w, const ld_host_tensor *t, size_t n,
                                 void (*pack)(void *, const void *, ld_kdt, int, int, int))
{
    void *p = n ? ld_warena_alloc(&rb->weights, n) : NULL;
    if (!p) return NULL;
    pack(p, w->data, w->dt, (int)w->cols, (int)w->rows, w->rope_hd);
    size_t all = host_bytes(t);
    if (in_mapping(t, all)) ld_warena_drop_resident(t->data, all);
    w->in_arena = 1;
    return p;
}

/* the integer matmuls' packed copy of w, where the matmul of w's type is
 * q8's (kernels/cpu/cpu_q8.h) or i24's (cpu_i24.h).  0: not packed (fewer
 * rows than a group, or no room). */
static int weight_pack_int(ref_backend *rb, ld_weight *w, const ld_host_tensor *t)
{
    int K = (int)w->cols, N = (int)w->rows;
    switch (ld_refb_matmul_kind(rb, w->dt)) {
    case LD_KV_Q8:
        w->q8 = weight_packed(rb, w, t, ld_cpu_q8_packed_size(w->dt, K, N), ld_cpu_q8_pack);
        return w->q8 != NULL;
    case LD_KV_I24:
        w->i24 = weight_packed(rb, w, t, ld_cpu_i24_packed_size(w->dt, K, N), ld_cpu_i24_pack);
        return w->i24 != NULL;
    default: return 0;
    }
}

/* the fast matmul's packed copy of w (ld_cpu_fast_pack), where the matmul
 * is the fast one and this machine's kernels read one (AVX-512: a decode
 * reads a group of sixteen rows as one stream, the scales without a
 * gather).  0: not packed (fewer than sixteen rows, or no room). */
static int weight_pack_fast(ref_backend *rb, ld_weight *w, const ld_host_tensor *t)
{
    if (ld_refb_matmul_kind(rb, w->dt) != LD_KV_FAST || !ld_cpu_fast_reads_packed(w->dt)) return 0;
    w->fast16 = weight_packed(rb, w, t, ld_cpu_fast_packed_size(w->dt, (int)w->cols, (int)w->rows),
                              ld_cpu_fast_pack);
    return w->fast16 != NULL;
}

/* w->data moved to the backend's arena (backend_ref_arena.c) where the
 * matmul is the fast one or q8 (and not packed for it), whose decode
 * streams the weights, and the host data lies in a file mapping (t->map; a
 * copy of other memory would add to the resident size); the reference's
 * stays on the host data.  Past the arena's budget or out of memory: the
 * host data, as before. */
static void weight_copy(ref_backend *rb, ld_weight *w, const ld_host_tensor *t)
{
    ld_kvar mm = ld_refb_matmul_kind(rb, w->dt);
    if ((mm != LD_KV_FAST && mm != LD_KV_Q8 && mm != LD_KV_I24) || ld_ref_kdt_is_scaled(w->dt)) return;
    size_t n = host_bytes(t);
    if (!n || !in_mapping(t, n)) return;
    const void *p = ld_warena_copy(&rb->weights, t->data, n);
    if (!p) return;
    w->data = p;
    w->in_arena = 1;
}

static ld_status weight_load(ld_backend *be, const ld_host_tensor *t, ld_weight **out, ld_error *err)
{
    *out = NULL;
    ld_kdt dt;
    int64_t block = 1;
    switch (t->quant) {
    case LD_WQ_NONE:
        switch (t->dtype) {
        case LD_DT_F32: dt = LD_KDT_F32; break;
        case LD_DT_F16: dt = LD_KDT_F16; break;
        case LD_DT_BF16: dt = LD_KDT_BF16; break;
        default: return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "weight dtype %s is not supported", ld_dtype_name(t->dtype));
        }
        if (((uintptr_t)t->data) % ld_dtype_size(t->dtype))
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "weight data is not aligned to its element size");
        break;
    case LD_WQ_Q4_0: dt = LD_KDT_Q4_0; block = 32; break;
    case LD_WQ_Q4_1: dt = LD_KDT_Q4_1; block = 32; break;
    case LD_WQ_Q8_0: dt = LD_KDT_Q8_0; block = 32; break;
    case LD_WQ_Q4_K: dt = LD_KDT_Q4_K; block = 256; break;
    case LD_WQ_Q6_K: dt = LD_KDT_Q6_K; block = 256; break;
    case LD_WQ_F8B:
    case LD_WQ_F4B:
        if (!t->scale || t->scale_br < 1 || t->scale_bc < 1 || t->rope_hd)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "an %s weight without its block scales",
                           t->quant == LD_WQ_F4B ? "FP4" : "FP8");
        dt = t->quant == LD_WQ_F4B ? LD_KDT_F4B : LD_KDT_F8B;
        block = t->quant == LD_WQ_F4B ? 2 : 1; /* whole bytes a row */
        break;
    default: return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "weight block type %d is not supported", (int)t->quant);
    }
    if (t->cols % block)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rows of %lld values are not whole blocks of %lld", (long long)t->cols,
                       (long long)block);
    if (t->rope_hd < 0 || t->rope_hd % 2 || (t->rope_hd && t->rows % t->rope_hd))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rope row order of %d rows per head for %lld rows", t->rope_hd,
                       (long long)t->rows);
    ld_weight *w = malloc(sizeof *w);
    if (!w) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    w->dt = dt;
    w->data = t->data;
    w->rows = t->rows;
    w->cols = t->cols;
    w->rope_hd = t->rope_hd;
    w->in_arena = 0;
    w->q8 = NULL;
    w->i24 = NULL;
    w->fast16 = NULL;
    if (ld_ref_kdt_is_scaled(dt)) {
        w->f8 = (ld_f8b){t->data, t->scale, t->rows, t->cols, t->scale_br, t->scale_bc};
        w->data = &w->f8;
    }
    if (!weight_pack_int((ref_backend *)be, w, t) && !weight_pack_fast((ref_backend *)be, w, t))
        weight_copy((ref_backend *)be, w, t);
    *out = w;
    return LD_OK;
}

static void weight_free(ld_backend *be, ld_weight *w)
{
    if (w && w->in_arena) ld_warena_release(&((ref_backend *)be)->weights);
    free(w);
}

#define OP_TABLE                 \
    .destroy = destroy,           \
    .buf_alloc = buf_alloc,       \
    .buf_free = buf_free,         \
    .buf_view = buf_view,         \
    .buf_write = buf_write,       \
    .buf_read = buf_read,         \
    .buf_mem = buf_mem,           \
    .weight_load = weight_load,   \
    .weight_free = weight_free,   \
    .embed = ld_refb_embed,               \
    .rmsnorm = ld_refb_rmsnorm,           \
    .matmul = ld_refb_matmul,             \
    .matmul_fanout = ld_refb_matmul_fanout, \
    .rope = ld_refb_rope,                 \
    .kv_store = ld_refb_kv_store,         \
    .attention = ld_refb_attention,       \
    .swiglu = ld_refb_swiglu,             \
    .add = ld_refb_add,                   \
    .softmax = ld_refb_softmax,           \
    .mla_latent = ld_refb_mla_latent,     \
    .mla_absorb_q = ld_refb_mla_absorb_q, \
    .mla_absorb_out = ld_refb_mla_absorb_out, \
    .ds_route = ld_refb_ds_route,         \
    .index_topk = ld_refb_index_topk,     \
    .hc_pre = ld_refb_hc_pre,             \
    .hc_post = ld_refb_hc_post,           \
    .ds4_route = ld_refb_ds4_route,       \
    .ds4_qkv = ld_refb_ds4_qkv,           \
    .ds4_compress = ld_refb_ds4_compress, \
    .ds4_index = ld_refb_ds4_index,       \
    .ds4_attention = ld_refb_ds4_attention, \
    .copy_cols = ld_refb_copy_cols,       \
    .ds4_hc_head = ld_refb_ds4_hc_head,   \
    .moe = ld_refb_moe

static const ld_backend_ops ref_ops = {.name = "ref", OP_TABLE};
static const ld_backend_ops cpu_ops = {.name = "cpu", OP_TABLE};
#undef OP_TABLE

static ld_status create(int n_threads, int fast, const char *kernels, ld_backend **out, ld_error *err)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "thread count %d outside [1, 1024]", n_threads);
    ld_cpu_kernels k = ld_cpu_kernels_default(fast);
    LD_TRY(ld_cpu_kernels_parse(kernels, &k, err));
    ref_backend *rb = calloc(1, sizeof *rb);
    if (!rb) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    rb->ops = fast ? cpu_ops : ref_ops;
    rb->ops.name = ld_cpu_kernels_label(&k, fast, rb->label, sizeof rb->label);
    rb->base.ops = &rb->ops;
    rb->k = k;
    rb->fast = fast;
    rb->n_threads = n_threads;
    rb->threads = calloc((size_t)n_threads, sizeof *rb->threads);
    rb->scratch = calloc((size_t)n_threads, sizeof *rb->scratch);
    rb->iscratch = calloc((size_t)n_threads, sizeof *rb->iscratch);
    rb->prep_done = calloc((size_t)n_threads, sizeof *rb->prep_done);
    if (!rb->threads || !rb->scratch || !rb->iscratch || !rb->prep_done) {
        free(rb->threads);
        free(rb->scratch);
        free(rb->iscratch);
        free(rb->prep_done);
        free(rb);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    pthread_mutex_init(&rb->mu, NULL);
    pthread_cond_init(&rb->go, NULL);
    pthread_cond_init(&rb->done, NULL);
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (a) {
            a->rb = rb;
            a->tid = i;
        }
        if (!a || pthread_create(&rb->threads[rb->n_started], NULL, ld_refb_worker, a) != 0) {
            free(a);
            destroy(&rb->base);
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "cannot start thread %d", i);
        }
        rb->n_started++;
    }
    *out = &rb->base;
    return LD_OK;
}

ld_status ld_backend_ref_create(int n_threads, ld_backend **out, ld_error *err)
{
    return create(n_threads, 0, NULL, out, err);
}

ld_status ld_backend_cpu_create(int n_threads, ld_backend **out, ld_error *err)
{
    return create(n_threads, 1, NULL, out, err);
}

ld_status ld_backend_cpu_create_ex(int n_threads, int fast, const char *kernels, ld_backend **out, ld_error *err)
{
    return create(n_threads, fast, kernels, out, err);
}
