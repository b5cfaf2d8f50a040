/* backend_ref.c - the plain-C CPU backends: kernels/ref/ref_ops.c behind the op
 * table ("ref"), or the same with kernels/cpu/cpu_ops.c's matmul and attention
 * ("cpu"),
 * spread over a thread pool.  Each op's items (rows, output columns, heads)
 * are cut into one contiguous range per thread; each item is computed by
 * exactly one thread with the same code, so the results are bitwise
 * identical whatever the number of threads.  Weights are used in place from
 * the host mapping (f32) or converted row by row (f16, bf16, and the GGML
 * block types, dequantized exactly into a per-thread row).
 *
 * The pool: a decode step runs some ten ops per layer, each a few
 * microseconds of work, so waking workers through a condition variable
 * (tens of microseconds) would cost more than the work.  Workers spin on
 * the generation counter for a while (SPIN_NS) before they sleep on `go`;
 * the caller spins on `pending` likewise before sleeping on `done`.  The
 * spin yields the core now and then, so that on a machine busy with other
 * work a descheduled thread of the pool gets to run instead of being
 * waited for.  Element-wise ops too small to be worth a hand-off
 * (SMALL_OP) run on the calling thread alone, and so do DeepSeek ops of
 * too little work (SMALL_WORK).
 *
 * The DeepSeek ops (mla_latent, mla_absorb_q / _out, ds_route,
 * index_topk) call kernels/ref/ref_ds.h's and ref_ds_variants.h's
 * leaves, an item per (token, head) or per token, with per-thread scratch
 * (scores, split partials, the top-k heap): bitwise what the sessions'
 * host path computes with the same leaves in one call.  So do V4's hc_pre
 * hc_post and ds4_route (kernels/ref/ref_ds4.h), an item per token,
 * and V4's attention entries (ds4_qkv, ds4_index, ds4_attention,
 * ds4_hc_head: an item per token; ds4_compress: its positions in order). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "ds4_op_args.h"
#include "ds_op_args.h"
#include "moe_args.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ds_variants.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "spin.h"

#define SPIN_NS 200000L /* how long an idle thread spins before it sleeps */
#define SMALL_OP 16384  /* elements below which add / swiglu stay on one thread */
#define SMALL_WORK 65536 /* multiply-adds below which a DeepSeek op stays on one thread */

struct ld_buf {
    float *p;
    size_t n;
    int view; /* buf_view's: p is another buffer's */
};

struct ld_weight {
    ld_kdt dt;
    const void *data;   /* the host data, or &f8 for LD_KDT_F8B / F4B */
    int64_t rows, cols;
    int rope_hd;
    ld_f8b f8;
};

typedef void (*task_fn)(void *ctx, int tid, size_t i0, size_t i1);

typedef struct ref_backend {
    ld_backend base;
    int n_threads;
    ld_cpu_kernels k;  /* the kernel each op runs (cpu_kernels.h) */
    ld_backend_ops ops; /* the op table with this instance's name */
    char label[96];     /* "ref", "cpu", "ref+matmul=bf16", ... */
    pthread_t *threads;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    atomic_uint gen;
    atomic_int pending, quit;
    /* the task of generation `gen`, written before gen is bumped */
    task_fn fn;
    void *ctx;
    size_t n_items;
    size_t grain;       /* 0: one contiguous range per thread; else ranges
                           of `grain` items taken from `next` */
    atomic_size_t next;
    /* per-thread scratch */
    float **scratch;
    size_t scratch_cap;
    int32_t **iscratch; /* per-thread int32 scratch (index_topk's heap) */
    size_t iscratch_cap;
    /* the "cpu" matmul's prepared activations, shared by the threads */
    float *prep;
    size_t prep_cap;
} ref_backend;

typedef struct worker_arg {
    ref_backend *rb;
    int tid;
} worker_arg;

/* Which thread computes an item never changes the item's result (each is
 * computed whole by one call, scratch is per thread and rewritten per
 * item), so ranges may also be handed out first come, first served: the
 * matmuls are, so that a thread slowed by the other's memory traffic does
 * not leave the other waiting. */
static void run_chunk(ref_backend *rb, task_fn fn, void *ctx, size_t n, int tid)
{
    if (rb->grain) {
        size_t g = rb->grain, i0;
        while ((i0 = atomic_fetch_add_explicit(&rb->next, g, memory_order_relaxed)) < n)
            fn(ctx, tid, i0, n - i0 < g ? n : i0 + g);
        return;
    }
    size_t nt = (size_t)rb->n_threads;
    size_t i0 = n * (size_t)tid / nt, i1 = n * (size_t)(tid + 1) / nt;
    if (i0 < i1) fn(ctx, tid, i0, i1);
}

static long elapsed_ns(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}


/* spins until gen != seen or quit, then sleeps until then */
static unsigned wait_for_work(ref_backend *rb, unsigned seen)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 0;; i++) {
        unsigned g = atomic_load_explicit(&rb->gen, memory_order_acquire);
        if (g != seen || atomic_load(&rb->quit)) return g;
        ld_spin_relax(i);
        if ((i & 255) == 255 && elapsed_ns(&t0) > SPIN_NS) break;
    }
    pthread_mutex_lock(&rb->mu);
    unsigned g;
    while ((g = atomic_load_explicit(&rb->gen, memory_order_acquire)) == seen && !atomic_load(&rb->quit))
        pthread_cond_wait(&rb->go, &rb->mu);
    pthread_mutex_unlock(&rb->mu);
    return g;
}

static void *worker(void *arg)
{
    ref_backend *rb = ((worker_arg *)arg)->rb;
    int tid = ((worker_arg *)arg)->tid;
    free(arg);
    unsigned seen = 0; /* workers start before the first run */
    for (;;) {
        seen = wait_for_work(rb, seen);
        if (atomic_load(&rb->quit)) break;
        run_chunk(rb, rb->fn, rb->ctx, rb->n_items, tid);
        if (atomic_fetch_sub_explicit(&rb->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&rb->mu);
            pthread_cond_signal(&rb->done);
            pthread_mutex_unlock(&rb->mu);
        }
    }
    return NULL;
}

static void run_grain(ref_backend *rb, task_fn fn, void *ctx, size_t n, size_t grain)
{
    if (rb->n_threads == 1 || n < 2) {
        if (n) fn(ctx, 0, 0, n);
        return;
    }
    rb->fn = fn;
    rb->ctx = ctx;
    rb->n_items = n;
    rb->grain = grain;
    atomic_store_explicit(&rb->next, 0, memory_order_relaxed);
    atomic_store_explicit(&rb->pending, rb->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&rb->gen, 1, memory_order_release);
    pthread_mutex_lock(&rb->mu); /* wakes the workers that went to sleep */
    pthread_cond_broadcast(&rb->go);
    pthread_mutex_unlock(&rb->mu);
    run_chunk(rb, fn, ctx, n, 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 0; atomic_load_explicit(&rb->pending, memory_order_acquire); i++) {
        ld_spin_relax(i);
        if ((i & 255) == 255 && elapsed_ns(&t0) > SPIN_NS) break;
    }
    pthread_mutex_lock(&rb->mu);
    while (atomic_load_explicit(&rb->pending, memory_order_acquire)) pthread_cond_wait(&rb->done, &rb->mu);
    pthread_mutex_unlock(&rb->mu);
}

static void run(ref_backend *rb, task_fn fn, void *ctx, size_t n)
{
    run_grain(rb, fn, ctx, n, 0);
}

/* n items of about `work` multiply-adds in all, one at a time from the
 * pool, or on the calling thread when that is too little to hand off
 * (which thread computes an item changes nothing in it) */
static void run_items(ref_backend *rb, task_fn fn, void *ctx, size_t n, double work)
{
    if (work < SMALL_WORK) {
        if (n) fn(ctx, 0, 0, n);
        return;
    }
    run_grain(rb, fn, ctx, n, 1);
}

static ld_status need_scratch(ref_backend *rb, size_t n, ld_error *err)
{
    if (n <= rb->scratch_cap) return LD_OK;
    for (int i = 0; i < rb->n_threads; i++) {
        float *p = realloc(rb->scratch[i], n * sizeof *p);
        if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for %zu floats of scratch", n);
        rb->scratch[i] = p;
    }
    rb->scratch_cap = n;
    return LD_OK;
}

static ld_status need_iscratch(ref_backend *rb, size_t n, ld_error *err)
{
    if (n <= rb->iscratch_cap) return LD_OK;
    for (int i = 0; i < rb->n_threads; i++) {
        int32_t *p = realloc(rb->iscratch[i], n * sizeof *p);
        if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for %zu int32 of scratch", n);
        rb->iscratch[i] = p;
    }
    rb->iscratch_cap = n;
    return LD_OK;
}

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

static ld_status range(const ld_buf *b, size_t off, size_t n, ld_error *err)
{
    if (off > b->n || n > b->n - off)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "range [%zu, +%zu) outside a buffer of %zu floats", off, n, b->n);
    return LD_OK;
}

static ld_status buf_write(ld_backend *be, ld_buf *b, size_t off, const float *src, size_t n, ld_error *err)
{
    (void)be;
    LD_TRY(range(b, off, n, err));
    if (n) memcpy(b->p + off, src, n * sizeof *src);
    return LD_OK;
}

static ld_status buf_read(ld_backend *be, const ld_buf *b, size_t off, float *dst, size_t n, ld_error *err)
{
    (void)be;
    LD_TRY(range(b, off, n, err));
    if (n) memcpy(dst, b->p + off, n * sizeof *dst);
    return LD_OK;
}

static ld_status buf_view(ld_backend *be, ld_buf *b, size_t off, size_t n, ld_buf **out, ld_error *err)
{
    (void)be;
    *out = NULL;
    LD_TRY(range(b, off, n, err));
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
    LD_TRY(range(b, off, n, err));
    *out = (ld_mem){b->p + off, LD_MEM_HOST, 0};
    return LD_OK;
}

static ld_status weight_load(ld_backend *be, const ld_host_tensor *t, ld_weight **out, ld_error *err)
{
    (void)be;
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
    if (ld_ref_kdt_is_scaled(dt)) {
        w->f8 = (ld_f8b){t->data, t->scale, t->rows, t->cols, t->scale_br, t->scale_bc};
        w->data = &w->f8;
    }
    *out = w;
    return LD_OK;
}

static void weight_free(ld_backend *be, ld_weight *w)
{
    (void)be;
    free(w);
}

/* ---------------------------------------------------------------- ops */

typedef struct op_ctx {
    ref_backend *rb;
    float *out;
    const float *a, *b, *c;
    const ld_weight *w, *bias;
    const int32_t *tokens;
    const float *inv_freq;
    int T, n_heads, n_kv, hd, pos0, window, n;
    float eps, scale;
} op_ctx;

static void t_embed(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    ld_ref_embed(c->out, c->w->data, c->w->dt, (int)c->w->cols, c->tokens, i0, i1);
}

static ld_status embed(ld_backend *be, ld_buf *out, const ld_weight *table, const int32_t *tokens, int T, ld_error *err)
{
    LD_TRY(range(out, 0, (size_t)T * (size_t)table->cols, err));
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= table->rows)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "token id %d outside the vocabulary of %lld", (int)tokens[t], (long long)table->rows);
    op_ctx c = {.rb = (ref_backend *)be, .out = out->p, .w = table, .tokens = tokens};
    run(c.rb, t_embed, &c, (size_t)T);
    return LD_OK;
}

static void t_rmsnorm(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    if (c->rb->k.v[LD_KOP_RMSNORM] == LD_KV_BF16) {
        ld_var_rmsnorm_bf16(c->out, c->a, c->w->data, c->w->dt, (int)c->w->cols, c->eps, i0, i1);
        return;
    }
    ld_ref_rmsnorm(c->out, c->a, c->w->data, c->w->dt, (int)c->w->cols, c->eps, i0, i1);
}

static ld_status rmsnorm(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, int rows, float eps, ld_error *err)
{
    size_t n = (size_t)rows * (size_t)w->cols;
    if (ld_ref_kdt_is_block(w->dt) || ld_ref_kdt_is_scaled(w->dt))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a norm weight of a block type");
    LD_TRY(range(out, 0, n, err));
    LD_TRY(range(x, 0, n, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = out->p, .a = x->p, .w = w, .eps = eps};
    run(c.rb, t_rmsnorm, &c, (size_t)rows);
    return LD_OK;
}

static void t_matmul(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    ld_kvar v = c->rb->k.v[LD_KOP_MATMUL];
    if (v == LD_KV_BF16 || v == LD_KV_SPLITK) {
        (v == LD_KV_BF16 ? ld_var_matmul_bf16 : ld_var_matmul_splitk)(
            c->out, c->a, c->w->data, c->w->dt, c->bias ? c->bias->data : NULL, c->bias ? c->bias->dt : LD_KDT_F32,
            c->T, (int)c->w->cols, (int)c->w->rows, c->w->rope_hd, c->rb->scratch[tid], i0, i1);
        return;
    }
    if (v == LD_KV_FP8ACT || v == LD_KV_FP8UE8M0) { /* the activations, quantized once by matmul(), through the reference */
        ld_ref_matmul_ex(c->out, c->rb->prep, c->w->data, c->w->dt, c->bias ? c->bias->data : NULL,
                         c->bias ? c->bias->dt : LD_KDT_F32, c->T, (int)c->w->cols, (int)c->w->rows, c->w->rope_hd,
                         c->rb->scratch[tid], i0, i1);
        return;
    }
    if (v == LD_KV_FAST) {
        ld_cpu_matmul(c->out, c->a, c->rb->prep, c->w->data, c->w->dt, c->bias ? c->bias->data : NULL,
                      c->bias ? c->bias->dt : LD_KDT_F32, c->T, (int)c->w->cols, (int)c->w->rows, c->w->rope_hd,
                      c->rb->scratch[tid], i0, i1);
        return;
    }
    ld_ref_matmul_ex(c->out, c->a, c->w->data, c->w->dt, c->bias ? c->bias->data : NULL,
                     c->bias ? c->bias->dt : LD_KDT_F32, c->T, (int)c->w->cols, (int)c->w->rows,
                     c->w->rope_hd, c->rb->scratch[tid], i0, i1);
}

static ld_status matmul(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias, int T, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(range(out, 0, (size_t)T * (size_t)w->rows, err));
    LD_TRY(range(x, 0, (size_t)T * (size_t)w->cols, err));
    if (bias && (ld_ref_kdt_is_block(bias->dt) || ld_ref_kdt_is_scaled(bias->dt)))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a bias of a block type");
    if (bias && bias->rows * bias->cols != w->rows)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "bias of %lld values for %lld outputs",
                       (long long)(bias->rows * bias->cols), (long long)w->rows);
    ld_kvar mv = rb->k.v[LD_KOP_MATMUL];
    int fast = mv == LD_KV_FAST, fp8 = mv == LD_KV_FP8ACT || mv == LD_KV_FP8UE8M0;
    LD_TRY(need_scratch(rb, fast ? ld_cpu_matmul_scratch(w->dt, T, (int)w->cols) : (size_t)w->cols, err));
    if (fast || fp8) {
        size_t np = fp8 ? (size_t)T * (size_t)w->cols : ld_cpu_matmul_prep_size(w->dt, T, (int)w->cols);
        if (np > rb->prep_cap) {
            float *p = realloc(rb->prep, np * sizeof *p);
            if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for %zu floats of activations", np);
            rb->prep = p;
            rb->prep_cap = np;
        }
        if (fp8) (mv == LD_KV_FP8UE8M0 ? ld_var_fp8_act_ue8m0 : ld_var_fp8_act)(rb->prep, x->p, T, (int)w->cols);
        else ld_cpu_matmul_prep(rb->prep, x->p, w->dt, T, (int)w->cols);
    }
    op_ctx c = {.rb = rb, .out = out->p, .a = x->p, .w = w, .bias = bias, .T = T};
    /* about eight pieces per thread, in whole groups of eight rows (the
     * fast kernels' decode step takes rows eight at a time) */
    size_t grain = (size_t)w->rows / ((size_t)rb->n_threads * 8);
    run_grain(rb, t_matmul, &c, (size_t)w->rows, grain < 8 ? 8 : (grain + 7) / 8 * 8);
    return LD_OK;
}

static void t_rope(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    ld_ref_rope(c->out, c->n_heads, c->hd, c->inv_freq, c->pos0, i0, i1);
}

static ld_status rope(ld_backend *be, ld_buf *x, int T, int n_heads, int head_dim, int pos0, const float *inv_freq, ld_error *err)
{
    LD_TRY(range(x, 0, (size_t)T * (size_t)n_heads * (size_t)head_dim, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = x->p, .n_heads = n_heads, .hd = head_dim,
                .pos0 = pos0, .inv_freq = inv_freq};
    run(c.rb, t_rope, &c, (size_t)T);
    return LD_OK;
}

static ld_status kv_store(ld_backend *be, ld_buf *cache, const ld_buf *src, int T, int pos0, int row, ld_error *err)
{
    (void)be;
    size_t n = (size_t)T * (size_t)row;
    LD_TRY(range(src, 0, n, err));
    LD_TRY(range(cache, (size_t)pos0 * (size_t)row, n, err));
    if (n) memcpy(cache->p + (size_t)pos0 * (size_t)row, src->p, n * sizeof *src->p);
    return LD_OK;
}

static void t_attention(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    if (c->rb->k.v[LD_KOP_ATTENTION] == LD_KV_FAST) {
        ld_cpu_attention(c->out, c->a, c->b, c->c, c->n_heads, c->n_kv, c->hd, c->pos0, c->window, c->scale,
                         c->rb->scratch[tid], i0, i1);
        return;
    }
    ld_ref_attention(c->out, c->a, c->b, c->c, c->n_heads, c->n_kv, c->hd, c->pos0, c->window,
                     c->scale, c->rb->scratch[tid], i0, i1);
}

static ld_status attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kcache, const ld_buf *vcache,
                           int T, int pos0, int n_heads, int n_kv, int head_dim, int window, float scale, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    size_t nq = (size_t)T * (size_t)n_heads * (size_t)head_dim;
    size_t nkv = (size_t)(pos0 + T) * (size_t)n_kv * (size_t)head_dim;
    if (n_kv <= 0 || n_heads % n_kv) return LD_FAIL(err, LD_ERR_USAGE, 0, "%d heads over %d kv heads", n_heads, n_kv);
    LD_TRY(range(out, 0, nq, err));
    LD_TRY(range(q, 0, nq, err));
    LD_TRY(range(kcache, 0, nkv, err));
    LD_TRY(range(vcache, 0, nkv, err));
    LD_TRY(need_scratch(rb, (size_t)(pos0 + T), err));
    op_ctx c = {.rb = rb, .out = out->p, .a = q->p, .b = kcache->p, .c = vcache->p, .n_heads = n_heads,
                .n_kv = n_kv, .hd = head_dim, .pos0 = pos0, .window = window, .scale = scale};
    run_grain(rb, t_attention, &c, (size_t)T * (size_t)n_heads, 1);
    return LD_OK;
}

static void t_swiglu(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    if (c->rb->k.v[LD_KOP_SWIGLU] == LD_KV_BF16) ld_var_swiglu_bf16(c->out, c->a, c->b, i0, i1);
    else ld_ref_swiglu(c->out, c->a, c->b, i0, i1);
}

static ld_status swiglu(ld_backend *be, ld_buf *out, const ld_buf *gate, const ld_buf *up, size_t n, ld_error *err)
{
    LD_TRY(range(out, 0, n, err));
    LD_TRY(range(gate, 0, n, err));
    LD_TRY(range(up, 0, n, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = out->p, .a = gate->p, .b = up->p};
    if (n < SMALL_OP) t_swiglu(&c, 0, 0, n);
    else run(c.rb, t_swiglu, &c, n);
    return LD_OK;
}

static void t_add(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    ld_ref_add(c->out, c->a, i0, i1);
}

static ld_status add(ld_backend *be, ld_buf *x, const ld_buf *y, size_t n, ld_error *err)
{
    LD_TRY(range(x, 0, n, err));
    LD_TRY(range(y, 0, n, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = x->p, .a = y->p};
    if (n < SMALL_OP) t_add(&c, 0, 0, n);
    else run(c.rb, t_add, &c, n);
    return LD_OK;
}

static void t_softmax(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    ld_ref_softmax(c->out, c->a, c->n, i0, i1);
}

static ld_status softmax(ld_backend *be, ld_buf *out, const ld_buf *x, int rows, int n, ld_error *err)
{
    LD_TRY(range(out, 0, (size_t)rows * (size_t)n, err));
    LD_TRY(range(x, 0, (size_t)rows * (size_t)n, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = out->p, .a = x->p, .n = n};
    run(c.rb, t_softmax, &c, (size_t)rows);
    return LD_OK;
}

/* ---------------------------------------------------------------- DeepSeek */

typedef struct mla_ctx {
    ref_backend *rb;
    float *o_lat;
    const float *q_abs, *q, *ckv, *kpe;
    const int32_t *sel;
    int n_heads, dn, dr, c, pos0, k, split;
    size_t n_scores; /* pos0 + T: the scores' part of a thread's scratch */
    float scale;
} mla_ctx;

/* items (t, h): the kernel the session's host path runs, on this thread's
 * scratch (scores, then the split-K partial output) */
static void t_mla_latent(void *p, int tid, size_t i0, size_t i1)
{
    mla_ctx *m = p;
    float *scores = m->rb->scratch[tid];
    if (m->split > 0)
        ld_dsv_mla_latent_attention_splitk(m->o_lat, m->q_abs, m->q, m->ckv, m->kpe, m->n_heads, m->dn, m->dr, m->c,
                                           m->pos0, m->scale, scores, scores + m->n_scores, m->sel, m->k, m->split,
                                           i0, i1);
    else if (m->sel)
        ld_ref_mla_latent_attention_sparse(m->o_lat, m->q_abs, m->q, m->ckv, m->kpe, m->n_heads, m->dn, m->dr, m->c,
                                           m->pos0, m->scale, scores, m->sel, m->k, i0, i1);
    else
        ld_ref_mla_latent_attention(m->o_lat, m->q_abs, m->q, m->ckv, m->kpe, m->n_heads, m->dn, m->dr, m->c, m->pos0,
                                    m->scale, scores, i0, i1);
}

static ld_status mla_latent(ld_backend *be, ld_buf *o_lat, const ld_buf *q_abs, const ld_buf *q, const ld_buf *ckv,
                            const ld_buf *kpe, int T, int pos0, int n_heads, int dn, int dr, int c, float scale,
                            const int32_t *sel, int k, int split, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds_args_latent(T, pos0, n_heads, dn, dr, c, sel, k, split, err));
    size_t rows = (size_t)T * (size_t)n_heads, S = (size_t)pos0 + (size_t)T;
    LD_TRY(range(o_lat, 0, rows * (size_t)c, err));
    LD_TRY(range(q_abs, 0, rows * (size_t)c, err));
    LD_TRY(range(q, 0, rows * (size_t)(dn + dr), err));
    LD_TRY(range(ckv, 0, S * (size_t)c, err));
    LD_TRY(range(kpe, 0, S * (size_t)dr, err));
    if (sel) LD_TRY(ld_ds_args_sel(sel, T, pos0, k, err));
    LD_TRY(need_scratch(rb, S + (size_t)c, err));
    mla_ctx m = {.rb = rb, .o_lat = o_lat->p, .q_abs = q_abs->p, .q = q->p, .ckv = ckv->p, .kpe = kpe->p,
                 .sel = sel, .n_heads = n_heads, .dn = dn, .dr = dr, .c = c, .pos0 = pos0, .k = k,
                 .split = split, .n_scores = S, .scale = scale};
    run_items(rb, t_mla_latent, &m, rows, (double)rows * (double)S * (double)(c + dr));
    return LD_OK;
}

typedef struct absorb_ctx {
    float *out;
    const float *in;
    const ld_weight *w;
    int n_heads, dn, dr, dv, c;
} absorb_ctx;

static void t_absorb_q(void *p, int tid, size_t i0, size_t i1)
{
    absorb_ctx *a = p;
    (void)tid;
    ld_ref_mla_absorb_q(a->out, a->in, a->w->data, a->w->dt, a->n_heads, a->dn, a->dr, a->dv, a->c, i0, i1);
}

static void t_absorb_out(void *p, int tid, size_t i0, size_t i1)
{
    absorb_ctx *a = p;
    (void)tid;
    ld_ref_mla_absorb_out(a->out, a->in, a->w->data, a->w->dt, a->n_heads, a->dn, a->dv, a->c, i0, i1);
}

static ld_status mla_absorb_q(ld_backend *be, ld_buf *q_abs, const ld_buf *q, const ld_weight *w, int T, int n_heads,
                              int dn, int dr, int dv, int c, ld_error *err)
{
    LD_TRY(ld_ds_args_absorb(w->dt, w->rows, w->cols, w->rope_hd, T, n_heads, dn, dr, dv, c, err));
    size_t rows = (size_t)T * (size_t)n_heads;
    LD_TRY(range(q_abs, 0, rows * (size_t)c, err));
    LD_TRY(range(q, 0, rows * (size_t)(dn + dr), err));
    absorb_ctx a = {.out = q_abs->p, .in = q->p, .w = w, .n_heads = n_heads, .dn = dn, .dr = dr, .dv = dv, .c = c};
    run_items((ref_backend *)be, t_absorb_q, &a, rows, (double)rows * (double)dn * (double)c);
    return LD_OK;
}

static ld_status mla_absorb_out(ld_backend *be, ld_buf *out, const ld_buf *o_lat, const ld_weight *w, int T,
                                int n_heads, int dn, int dv, int c, ld_error *err)
{
    LD_TRY(ld_ds_args_absorb(w->dt, w->rows, w->cols, w->rope_hd, T, n_heads, dn, 0, dv, c, err));
    size_t rows = (size_t)T * (size_t)n_heads;
    LD_TRY(range(out, 0, rows * (size_t)dv, err));
    LD_TRY(range(o_lat, 0, rows * (size_t)c, err));
    absorb_ctx a = {.out = out->p, .in = o_lat->p, .w = w, .n_heads = n_heads, .dn = dn, .dv = dv, .c = c};
    run_items((ref_backend *)be, t_absorb_out, &a, rows, (double)rows * (double)dv * (double)c);
    return LD_OK;
}

typedef struct route_ctx {
    int32_t *idx;
    float *w;
    const float *logits, *bias;
    int E, n_group, topk_group, top_k, norm;
    float scale;
} route_ctx;

static void t_ds_route(void *p, int tid, size_t i0, size_t i1)
{
    route_ctx *r = p;
    (void)tid;
    ld_ref_ds_route(r->idx, r->w, r->logits, r->bias, r->E, r->n_group, r->topk_group, r->top_k, r->norm, r->scale,
                    i0, i1);
}

static ld_status ds_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias, int T,
                          int E, int n_group, int topk_group, int top_k, int norm, float scale, ld_error *err)
{
    LD_TRY(ld_ds_args_route(T, E, n_group, topk_group, top_k, err));
    LD_TRY(range(logits, 0, (size_t)T * (size_t)E, err));
    route_ctx r = {.idx = idx, .w = w, .logits = logits->p, .bias = bias, .E = E, .n_group = n_group,
                   .topk_group = topk_group, .top_k = top_k, .norm = norm, .scale = scale};
    run_items((ref_backend *)be, t_ds_route, &r, (size_t)T, (double)T * (double)E * 16.0);
    return LD_OK;
}

typedef struct index_ctx {
    ref_backend *rb;
    int32_t *sel;
    const float *q, *w, *keys;
    int pos0, n_heads, dim, k;
} index_ctx;

/* items: queries; scores in this thread's scratch, the heap in its int32
 * scratch */
static void t_index_topk(void *p, int tid, size_t i0, size_t i1)
{
    index_ctx *x = p;
    size_t qw = (size_t)x->n_heads * (size_t)x->dim, k = (size_t)x->k;
    for (size_t t = i0; t < i1; t++) {
        int vis = x->pos0 + (int)t + 1;
        int32_t *sel = x->sel + t * k;
        ld_ref_ds_index_scores(x->rb->scratch[tid], x->q + t * qw, x->w + t * (size_t)x->n_heads, x->keys,
                               x->n_heads, x->dim, vis);
        int m = ld_ref_ds_topk(sel, x->rb->scratch[tid], vis, x->k, x->rb->iscratch[tid]);
        for (size_t j = (size_t)m; j < k; j++) sel[j] = -1;
    }
}

static ld_status index_topk(ld_backend *be, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys, int T,
                            int pos0, int n_heads, int dim, int k, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds_args_index(T, pos0, n_heads, dim, k, err));
    size_t S = (size_t)pos0 + (size_t)T;
    LD_TRY(range(q, 0, (size_t)T * (size_t)n_heads * (size_t)dim, err));
    LD_TRY(range(w, 0, (size_t)T * (size_t)n_heads, err));
    LD_TRY(range(keys, 0, S * (size_t)dim, err));
    LD_TRY(need_scratch(rb, S, err));
    LD_TRY(need_iscratch(rb, (size_t)k, err));
    index_ctx x = {.rb = rb, .sel = sel, .q = q->p, .w = w->p, .keys = keys->p, .pos0 = pos0, .n_heads = n_heads,
                   .dim = dim, .k = k};
    run_items(rb, t_index_topk, &x, (size_t)T, (double)T * (double)S * (double)n_heads * (double)dim);
    return LD_OK;
}

typedef struct hc_ctx {
    ref_backend *rb;
    float *post, *comb, *out;
    const float *X, *fn, *base, *scale, *f;
    int N, D, iters, variant;
    float norm_eps, hc_eps;
} hc_ctx;

/* items: tokens; the host path's leaf on this thread's scratch, then the
 * mhc=bf16 rounding of the token's post and comb */
static void t_hc_pre(void *p, int tid, size_t i0, size_t i1)
{
    hc_ctx *h = p;
    size_t N = (size_t)h->N, D = (size_t)h->D;
    for (size_t t = i0; t < i1; t++) {
        float *post = h->post + t * N, *comb = h->comb + t * N * N;
        ld_ref_ds4_hc_pre_ex(h->X + t * N * D, h->N, h->D, h->fn, h->base, h->scale, h->iters, h->norm_eps,
                             h->hc_eps, h->variant == LD_DS4_MHC_SINKHORN_BF16, post, comb, h->out + t * D,
                             h->rb->scratch[tid]);
        if (h->variant != LD_DS4_MHC_BF16) continue;
        for (size_t i = 0; i < N; i++) post[i] = ld_var_bf16_round(post[i]);
        for (size_t i = 0; i < N * N; i++) comb[i] = ld_var_bf16_round(comb[i]);
    }
}

static ld_status hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                        const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                        float norm_eps, float hc_eps, int variant, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds_args_hc_pre(T, N, D, iters, variant, err));
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T, hc = (2 + n) * n;
    LD_TRY(range(post, 0, tt * n, err));
    LD_TRY(range(comb, 0, tt * n * n, err));
    LD_TRY(range(collapsed, 0, tt * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    LD_TRY(range(fn, 0, hc * n * d, err));
    LD_TRY(need_scratch(rb, n * d + hc, err));
    hc_ctx h = {.rb = rb, .post = post->p, .comb = comb->p, .out = collapsed->p, .X = X->p, .fn = fn->p,
                .base = base, .scale = scale, .N = N, .D = D, .iters = iters, .variant = variant,
                .norm_eps = norm_eps, .hc_eps = hc_eps};
    run_items(rb, t_hc_pre, &h, tt, (double)tt * (double)hc * (double)(n * d));
    return LD_OK;
}

static void t_hc_post(void *p, int tid, size_t i0, size_t i1)
{
    hc_ctx *h = p;
    size_t N = (size_t)h->N, D = (size_t)h->D;
    (void)tid;
    for (size_t t = i0; t < i1; t++)
        ld_ref_ds4_hc_post(h->out + t * N * D, h->X + t * N * D, h->f + t * D, h->post + t * N, h->comb + t * N * N,
                           h->N, h->D);
}

static ld_status hc_post(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *f, const ld_buf *post,
                         const ld_buf *comb, int T, int N, int D, ld_error *err)
{
    LD_TRY(ld_ds_args_hc_post(T, N, D, err));
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T;
    LD_TRY(range(out, 0, tt * n * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    LD_TRY(range(f, 0, tt * d, err));
    LD_TRY(range(post, 0, tt * n, err));
    LD_TRY(range(comb, 0, tt * n * n, err));
    if (out->p == X->p && tt) return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_post: out aliases X");
    hc_ctx h = {.out = out->p, .X = X->p, .f = f->p, .post = post->p, .comb = comb->p, .N = N, .D = D};
    run_items((ref_backend *)be, t_hc_post, &h, tt, (double)tt * (double)(n + 1) * (double)(n * d));
    return LD_OK;
}

typedef struct ds4_route_ctx {
    int32_t *idx;
    float *w;
    const float *logits, *bias;
    const int32_t *hash;
    int E, K;
    float scale;
} ds4_route_ctx;

static void t_ds4_route(void *p, int tid, size_t i0, size_t i1)
{
    ds4_route_ctx *r = p;
    size_t K = (size_t)r->K;
    (void)tid;
    for (size_t t = i0; t < i1; t++)
        ld_ref_ds4_route(r->idx + t * K, r->w + t * K, r->logits + t * (size_t)r->E, r->bias,
                         r->hash ? r->hash + t * K : NULL, r->E, r->K, r->scale);
}

static ld_status ds4_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias,
                           const int32_t *hash, int T, int E, int K, float scale, ld_error *err)
{
    LD_TRY(ld_ds_args_ds4_route(T, E, K, hash, err));
    LD_TRY(range(logits, 0, (size_t)T * (size_t)E, err));
    ds4_route_ctx r = {.idx = idx, .w = w, .logits = logits->p, .bias = bias, .hash = hash, .E = E, .K = K,
                       .scale = scale};
    run_items((ref_backend *)be, t_ds4_route, &r, (size_t)T, (double)T * (double)E * 16.0);
    return LD_OK;
}

/* ---------------------------------------------------------------- V4 attention
 * The host path's leaves in its order (ds4_forward.c), an item per
 * token (the compressor: its positions in order on the calling thread, as
 * its ring is overwritten within a chunk). */

typedef struct ds4_att_ctx {
    ref_backend *rb;
    float *q, *w, *kvc, *out;
    const float *kv, *keys, *entries, *sinks;
    int32_t *sel;
    const int32_t *csel;
    const float **kp; /* [threads][max_keys]: the keys a token attends */
    size_t max_keys;
    const ld_ds4_rot *rope;
    int pos0, H, hd, kv_rows, window, ratio, k, variant;
    float eps, scale;
} ds4_att_ctx;

/* the rope's inverse frequencies fit their buffer */
static ld_status rot_range(const ld_ds4_rot *r, ld_error *err)
{
    return range(r->inv_freq, 0, (size_t)r->dim / 2, err);
}

/* V4's RoPE of row x (n heads of hd) at position p */
static void ds4_rot(const ld_ds4_rot *r, float *x, int n, int hd, int p, int inverse)
{
    ld_ref_ds4_rope_ex(x, n, hd, r->dim, r->inv_freq->p, r->attn_factor, p, inverse, r->bf16);
}

/* indexer=bf16|fp8: rows of dim as the variant feeds the score kernel */
static void ds4_operand(float *x, int rows, int dim, int variant)
{
    if (variant == LD_DS4_INDEX_BF16) ld_dsv_round_bf16(x, (size_t)rows * (size_t)dim);
    else if (variant == LD_DS4_INDEX_FP8) ld_dsv_index_fp8(x, rows, dim);
}

static void t_ds4_qkv(void *p, int tid, size_t i0, size_t i1)
{
    ds4_att_ctx *a = p;
    size_t hd = (size_t)a->hd, QH = (size_t)a->H * hd;
    (void)tid;
    for (size_t t = i0; t < i1; t++) {
        int pos = a->pos0 + (int)t;
        float *q = a->q + t * QH, *kv = a->kvc + (size_t)(pos % a->kv_rows) * hd;
        for (int h = 0; h < a->H; h++) ld_ref_ds4_unit_rmsnorm(q + (size_t)h * hd, a->hd, a->eps);
        ds4_rot(a->rope, q, a->H, a->hd, pos, 0);
        memcpy(kv, a->kv + t * hd, hd * sizeof *kv);
        ds4_rot(a->rope, kv, 1, a->hd, pos, 0);
    }
}

static ld_status ds4_qkv(ld_backend *be, ld_buf *q, ld_buf *kvc, const ld_buf *kv, int T, int pos0, int H, int hd,
                         int kv_rows, float eps, const ld_ds4_rot *rope, ld_error *err)
{
    LD_TRY(ld_ds4_args_qkv(T, pos0, H, hd, kv_rows, rope, err));
    LD_TRY(rot_range(rope, err));
    size_t tt = (size_t)T, QH = (size_t)H * (size_t)hd;
    LD_TRY(range(q, 0, tt * QH, err));
    LD_TRY(range(kv, 0, tt * (size_t)hd, err));
    LD_TRY(range(kvc, 0, (size_t)kv_rows * (size_t)hd, err));
    ds4_att_ctx a = {.q = q->p, .kvc = kvc->p, .kv = kv->p, .rope = rope, .pos0 = pos0, .H = H, .hd = hd,
                     .kv_rows = kv_rows, .eps = eps};
    run_items((ref_backend *)be, t_ds4_qkv, &a, tt, (double)tt * (double)(QH + (size_t)hd) * 8.0);
    return LD_OK;
}

/* entry w of compressor c from the rings: its slots in order into skv,
 * sgate (window w - 1's, CSA, then window w's), pooled into ent, normed
 * and rotated into the entries */
static void ds4_entry(const ld_ds4_comp_bufs *c, int w, float eps, const ld_ds4_rot *rope, int variant, float *skv,
                      float *sgate, float *ent)
{
    size_t W = (size_t)c->width, r = (size_t)c->ratio, bytes = W * sizeof(float);
    int overlap = c->width == 2 * c->dim, prev = overlap && w > 0;
    for (size_t j = 0; j < (prev ? 2 : 1) * r; j++) {
        size_t q = ((size_t)w - (prev ? 1 : 0)) * r + j;
        memcpy(skv + j * W, c->kv->p + (q % (2 * r)) * W, bytes);
        memcpy(sgate + j * W, c->gate->p + (q % (2 * r)) * W, bytes);
    }
    float *e = c->entries->p + (size_t)w * (size_t)c->dim;
    ld_ref_ds4_compress(ent, skv, sgate, c->ape->p, c->ratio, c->dim, W, overlap, prev);
    ld_ref_rmsnorm(e, ent, c->norm->p, LD_KDT_F32, c->dim, eps, 0, 1);
    ds4_rot(rope, e, 1, c->dim, w * c->ratio, 0);
    ds4_operand(e, 1, c->dim, variant);
}

static ld_status ds4_compress(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate, int T,
                              int pos0, float eps, const ld_ds4_rot *rope, int variant, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds4_args_compress(c, T, pos0, rope, variant, err));
    LD_TRY(rot_range(rope, err));
    size_t W = (size_t)c->width, r = (size_t)c->ratio, tt = (size_t)T;
    LD_TRY(range(kv, 0, tt * W, err));
    LD_TRY(range(gate, 0, tt * W, err));
    LD_TRY(range(c->kv, 0, 2 * r * W, err));
    LD_TRY(range(c->gate, 0, 2 * r * W, err));
    LD_TRY(range(c->ape, 0, r * W, err));
    LD_TRY(range(c->norm, 0, (size_t)c->dim, err));
    LD_TRY(range(c->entries, 0, ((size_t)pos0 + tt) / r * (size_t)c->dim, err));
    if (!T) return LD_OK;
    LD_TRY(need_scratch(rb, 4 * r * W + (size_t)c->dim, err));
    float *skv = rb->scratch[0], *sgate = skv + 2 * r * W, *ent = sgate + 2 * r * W;
    for (size_t t = 0; t < tt; t++) {
        size_t p = (size_t)pos0 + t;
        memcpy(c->kv->p + (p % (2 * r)) * W, kv->p + t * W, W * sizeof(float));
        memcpy(c->gate->p + (p % (2 * r)) * W, gate->p + t * W, W * sizeof(float));
        if ((p + 1) % r == 0) ds4_entry(c, (int)((p + 1) / r) - 1, eps, rope, variant, skv, sgate, ent);
    }
    return LD_OK;
}

static void t_ds4_index(void *p, int tid, size_t i0, size_t i1)
{
    ds4_att_ctx *a = p;
    size_t nh = (size_t)a->H, dim = (size_t)a->hd, k = (size_t)a->k;
    float *scores = a->rb->scratch[tid];
    for (size_t t = i0; t < i1; t++) {
        int pos = a->pos0 + (int)t, nvalid = (pos + 1) / a->ratio;
        float *iq = a->q + t * nh * dim, *iw = a->w + t * nh;
        int32_t *sel = a->sel + t * k;
        ds4_rot(a->rope, iq, a->H, a->hd, pos, 0);
        ds4_operand(iq, a->H, a->hd, a->variant);
        if (a->variant == LD_DS4_INDEX_BF16) ld_dsv_round_bf16(iw, nh);
        ld_ref_ds4_index_scores(scores, iq, iw, a->keys, nvalid, a->H, a->hd, 1.0f / sqrtf((float)a->hd),
                                1.0f / sqrtf((float)a->H));
        int m = ld_ref_ds4_topk(sel, scores, nvalid, a->k);
        for (size_t i = (size_t)m; i < k; i++) sel[i] = -1;
    }
}

static ld_status ds4_index(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0,
                           int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope, int variant,
                           ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds4_args_index(T, pos0, n_heads, dim, ratio, k, rope, variant, err));
    LD_TRY(rot_range(rope, err));
    size_t tt = (size_t)T, n = ((size_t)pos0 + tt) / (size_t)ratio;
    LD_TRY(range(q, 0, tt * (size_t)n_heads * (size_t)dim, err));
    LD_TRY(range(w, 0, tt * (size_t)n_heads, err));
    LD_TRY(range(keys, 0, n * (size_t)dim, err));
    if (!T) return LD_OK;
    LD_TRY(need_scratch(rb, n + 1, err));
    ds4_att_ctx a = {.rb = rb, .q = q->p, .w = w->p, .keys = keys->p, .sel = sel, .rope = rope, .pos0 = pos0,
                     .H = n_heads, .hd = dim, .ratio = ratio, .k = k, .variant = variant};
    run_items(rb, t_ds4_index, &a, tt, (double)tt * (double)n * (double)n_heads * (double)dim);
    return LD_OK;
}

/* token t's keys into kp: the window's ring rows, then the entries */
static int ds4_keys(const ds4_att_ctx *a, size_t t, const float **kp)
{
    size_t hd = (size_t)a->hd;
    int p = a->pos0 + (int)t, nk = 0, lo = p - a->window + 1 > 0 ? p - a->window + 1 : 0;
    for (int j = lo; j <= p; j++) kp[nk++] = a->kvc + (size_t)(j % a->kv_rows) * hd;
    if (!a->entries) return nk;
    if (a->csel) {
        const int32_t *sel = a->csel + t * (size_t)a->k;
        for (int i = 0; i < a->k && sel[i] >= 0; i++) kp[nk++] = a->entries + (size_t)sel[i] * hd;
    } else {
        for (int w = 0; w < (p + 1) / a->ratio; w++) kp[nk++] = a->entries + (size_t)w * hd;
    }
    return nk;
}

static void t_ds4_attention(void *p, int tid, size_t i0, size_t i1)
{
    ds4_att_ctx *a = p;
    size_t QH = (size_t)a->H * (size_t)a->hd;
    const float **kp = a->kp + (size_t)tid * a->max_keys;
    for (size_t t = i0; t < i1; t++) {
        int nk = ds4_keys(a, t, kp);
        float *out = a->out + t * QH;
        ld_ref_ds4_attention(out, a->q + t * QH, a->H, a->hd, kp, nk, a->sinks, a->scale, a->rb->scratch[tid]);
        ds4_rot(a->rope, out, a->H, a->hd, a->pos0 + (int)t, 1);
    }
}

static ld_status ds4_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kvc,
                               const ld_buf *entries, const int32_t *sel, int k, const ld_buf *sinks, int T, int pos0,
                               int H, int hd, int kv_rows, int window, int ratio, float scale,
                               const ld_ds4_rot *rope, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds4_args_attention(T, pos0, H, hd, kv_rows, window, entries != NULL, ratio, sel, k, rope, err));
    LD_TRY(rot_range(rope, err));
    size_t tt = (size_t)T, QH = (size_t)H * (size_t)hd, S = (size_t)pos0 + tt;
    size_t ne = entries ? (sel ? (size_t)k : S / (size_t)ratio) : 0;
    size_t nw = (size_t)window < S ? (size_t)window : S;
    LD_TRY(range(out, 0, tt * QH, err));
    LD_TRY(range(q, 0, tt * QH, err));
    LD_TRY(range(kvc, 0, (size_t)kv_rows * (size_t)hd, err));
    if (entries) LD_TRY(range(entries, 0, S / (size_t)ratio * (size_t)hd, err));
    if (sinks) LD_TRY(range(sinks, 0, (size_t)H, err));
    if (!T) return LD_OK;
    if (out->p == q->p) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention: out aliases q");
    LD_TRY(need_scratch(rb, nw + ne + 1, err));
    ds4_att_ctx a = {.rb = rb, .out = out->p, .q = q->p, .kvc = kvc->p, .entries = entries ? entries->p : NULL,
                     .csel = sel, .sinks = sinks ? sinks->p : NULL, .max_keys = nw + ne + 1, .rope = rope,
                     .pos0 = pos0, .H = H, .hd = hd, .kv_rows = kv_rows, .window = window, .ratio = ratio, .k = k,
                     .scale = scale};
    a.kp = malloc((size_t)rb->n_threads * a.max_keys * sizeof *a.kp);
    if (!a.kp) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    run_items(rb, t_ds4_attention, &a, tt, (double)tt * (double)(nw + ne) * (double)QH * 2.0);
    free(a.kp);
    return LD_OK;
}

static ld_status copy_cols(ld_backend *be, ld_buf *dst, size_t dst_ld, size_t dst_off, const ld_buf *src,
                           size_t src_ld, size_t src_off, int rows, size_t cols, ld_error *err)
{
    (void)be;
    if (rows < 0 || dst_off + cols > dst_ld || src_off + cols > src_ld)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "copy_cols of %d rows: columns [%zu, +%zu) of %zu, [%zu, +%zu) of %zu",
                       rows, dst_off, cols, dst_ld, src_off, cols, src_ld);
    if (!rows || !cols) return LD_OK;
    size_t last = (size_t)rows - 1;
    LD_TRY(range(dst, 0, last * dst_ld + dst_off + cols, err));
    LD_TRY(range(src, 0, last * src_ld + src_off + cols, err));
    if (dst->p == src->p) return LD_FAIL(err, LD_ERR_USAGE, 0, "copy_cols: dst aliases src");
    for (size_t r = 0; r <= last; r++)
        memcpy(dst->p + r * dst_ld + dst_off, src->p + r * src_ld + src_off, cols * sizeof(float));
    return LD_OK;
}

static void t_ds4_hc_head(void *p, int tid, size_t i0, size_t i1)
{
    hc_ctx *h = p;
    size_t N = (size_t)h->N, D = (size_t)h->D;
    for (size_t t = i0; t < i1; t++)
        ld_ref_ds4_hc_head(h->out + t * D, h->X + t * N * D, h->N, h->D, h->fn, h->base, h->scale[0], h->norm_eps,
                           h->hc_eps, h->rb->scratch[tid]);
}

static ld_status ds4_hc_head(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                             float scale, int T, int N, int D, float norm_eps, float hc_eps, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds4_args_hc_head(T, N, D, err));
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T;
    LD_TRY(range(out, 0, tt * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    LD_TRY(range(fn, 0, n * n * d, err));
    if (!T) return LD_OK;
    LD_TRY(need_scratch(rb, n * d + n, err));
    hc_ctx h = {.rb = rb, .out = out->p, .X = X->p, .fn = fn->p, .base = base, .scale = &scale, .N = N, .D = D,
                .norm_eps = norm_eps, .hc_eps = hc_eps};
    run_items(rb, t_ds4_hc_head, &h, tt, (double)tt * (double)n * (double)(n * d));
    return LD_OK;
}

/* ---------------------------------------------------------------- MoE */

static void moe_dims(const ld_weight *w, int64_t dims[2])
{
    dims[0] = w->rows;
    dims[1] = w->cols;
}

/* out [n][D] = down(act(gate x, up x)) of the n rows of x, through this
 * backend's matmul and swiglu ops (the session's host loop's calls); g and
 * u hold n rows of the expert's width */
static ld_status moe_expert(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_moe_expert *ex, int n, int act,
                            float limit, ld_buf *g, ld_buf *u, ld_error *err)
{
    LD_TRY(matmul(be, g, x, ex->gate, NULL, n, err));
    LD_TRY(matmul(be, u, x, ex->up, NULL, n, err));
    size_t ni = (size_t)n * (size_t)ex->gate->rows;
    if (act == LD_MOE_ACT_CLAMPED) ld_ref_ds4_clamped_swiglu(g->p, g->p, u->p, limit, ni);
    else LD_TRY(swiglu(be, g, g, u, ni, err));
    return matmul(be, out, g, ex->down, NULL, n, err);
}

/* y[rows[i]] += eo[i] * w[i] for the cnt gathered rows, in row order */
static void moe_combine(float *y, const float *eo, const int *rows, const float *w, int cnt, size_t D, int combine)
{
    for (int i = 0; i < cnt; i++) {
        float *yr = y + (size_t)rows[i] * D;
        const float *v = eo + (size_t)i * D;
        if (combine != LD_MOE_COMBINE_BF16) {
            ld_ref_ds_axpy(yr, v, w[i], 0, D);
            continue;
        }
        float wb = ld_var_bf16_round(w[i]); /* V3's bf16 tensors: y += expert(x) * w */
        for (size_t j = 0; j < D; j++)
            yr[j] = ld_var_bf16_round(yr[j] + ld_var_bf16_round(ld_var_bf16_round(v[j]) * wb));
    }
}

/* The sessions' host loop over this backend's buffers: per expert in
 * ascending id, its tokens' rows gathered (ld_ref_moe_gather), its
 * projections, their sum into y; then the fused scaling and the shared
 * expert.  Scratch: one allocation per call, freed before returning. */
static ld_status moe(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T, int K,
                     const ld_moe_expert *experts, int E, const ld_moe_expert *shared, int act, float limit,
                     int combine, float fused_scale, ld_error *err)
{
    int64_t D, I, Is;
    LD_TRY(ld_moe_args_check(idx, T, K, experts, E, shared, act, combine, moe_dims, &D, &I, &Is, err));
    if (!T) return LD_OK;
    size_t n = (size_t)T * (size_t)D, nt = (size_t)T, wide = (size_t)(I > Is ? I : Is);
    LD_TRY(range(y, 0, n, err));
    LD_TRY(range(x, 0, n, err));
    if (y->p == x->p) return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: y aliases x");
    float *f = malloc((2 * n + 2 * nt * wide + nt) * sizeof *f);
    int *rows = malloc(nt * sizeof *rows);
    if (!f || !rows) {
        free(f);
        free(rows);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the moe's scratch");
    }
    ld_buf xe = {f, n, 1}, eo = {f + n, n, 1}, g = {f + 2 * n, nt * wide, 1};
    ld_buf u = {f + 2 * n + nt * wide, nt * wide, 1};
    float *rw = f + 2 * n + 2 * nt * wide;
    ld_status st = LD_OK;
    memset(y->p, 0, n * sizeof *y->p);
    for (int e = 0; e < E && st == LD_OK; e++) {
        int cnt = ld_ref_moe_gather(rows, rw, xe.p, x->p, idx, w, nt, (size_t)K, (size_t)D, e);
        if (!cnt) continue;
        st = moe_expert(be, &eo, &xe, &experts[e], cnt, act, limit, &g, &u, err);
        if (st == LD_OK) moe_combine(y->p, eo.p, rows, rw, cnt, (size_t)D, combine);
    }
    if (st == LD_OK && combine == LD_MOE_COMBINE_FUSED) ld_ref_ds_scale(y->p, fused_scale, 0, n);
    if (st == LD_OK && shared) st = moe_expert(be, &eo, x, shared, T, act, limit, &g, &u, err);
    if (st == LD_OK && shared) ld_ref_add(y->p, eo.p, 0, n);
    free(f);
    free(rows);
    return st;
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
    .embed = embed,               \
    .rmsnorm = rmsnorm,           \
    .matmul = matmul,             \
    .rope = rope,                 \
    .kv_store = kv_store,         \
    .attention = attention,       \
    .swiglu = swiglu,             \
    .add = add,                   \
    .softmax = softmax,           \
    .mla_latent = mla_latent,     \
    .mla_absorb_q = mla_absorb_q, \
    .mla_absorb_out = mla_absorb_out, \
    .ds_route = ds_route,         \
    .index_topk = index_topk,     \
    .hc_pre = hc_pre,             \
    .hc_post = hc_post,           \
    .ds4_route = ds4_route,       \
    .ds4_qkv = ds4_qkv,           \
    .ds4_compress = ds4_compress, \
    .ds4_index = ds4_index,       \
    .ds4_attention = ds4_attention, \
    .copy_cols = copy_cols,       \
    .ds4_hc_head = ds4_hc_head,   \
    .moe = moe

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
    rb->n_threads = n_threads;
    rb->threads = calloc((size_t)n_threads, sizeof *rb->threads);
    rb->scratch = calloc((size_t)n_threads, sizeof *rb->scratch);
    rb->iscratch = calloc((size_t)n_threads, sizeof *rb->iscratch);
    if (!rb->threads || !rb->scratch || !rb->iscratch) {
        free(rb->threads);
        free(rb->scratch);
        free(rb->iscratch);
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
        if (!a || pthread_create(&rb->threads[rb->n_started], NULL, worker, a) != 0) {
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
