/* backend_ref_internal.h - what the plain-C CPU backends' files share.  The
 * backends: kernels/ref/ref_ops.c behind the op
 * table ("ref"), or the same with kernels/cpu/cpu_ops.c's matmul and attention
 * ("cpu"),
 * spread over a thread pool.  Each op's items (rows, output columns, heads)
 * are cut into one contiguous range per thread; each item is computed by
 * exactly one thread with the same code, so the results are bitwise
 * identical whatever the number of threads.  Weights are used in place from
 * the host mapping (f32) or converted row by row (f16, bf16, and the GGML
 * block types, dequantized exactly into a per-thread row); where the matmul
 * is the fast one and the weights lie in a file mapping, from the backend's
 * copy of them in 2 MiB pages (backend_ref_arena.c), the same bytes.
 *
 * The pool: a decode step runs some ten ops per layer, each a few
 * microseconds of work, so waking workers through a condition variable
 * (tens of microseconds) would cost more than the work.  Workers spin on
 * the generation counter for a while (SPIN_NS) before they sleep on `go`;
 * the caller spins on `pending` likewise before sleeping on `done`, and
 * each side signals the other's condition only when it sleeps.  The
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
 * ds4_hc_head: an item per token; ds4_compress: its positions in order).
 *
 * The files, each calling only those below it: backend_ref.c (making, the
 * op table, buffers, weights); backend_ref_dense.c (a dense decoder's ops),
 * backend_ref_ds.c (DeepSeek V3 / V3.2 and V4's mHC and router),
 * backend_ref_ds4.c (V4's attention entries), backend_ref_moe.c (the routed
 * experts); backend_ref_pool.c (the thread pool, per-thread scratch);
 * backend_ref_arena.c (the fast matmul's copy of the weights). */
#ifndef LD_BACKEND_REF_INTERNAL_H
#define LD_BACKEND_REF_INTERNAL_H

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "kernels/cpu/cpu_i24.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_q8.h"
#include "engine/backend/ds4_op_args.h"
#include "engine/backend/ds_op_args.h"
#include "engine/backend/moe_args.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ds_variants.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "engine/backend/spin.h"

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
    const void *data;   /* the host data (or the backend's copy of it,
                         * in_arena), or &f8 for LD_KDT_F8B / F4B */
    int64_t rows, cols;
    int rope_hd;
    int in_arena;       /* 1: data, q8, i24 or fast16 is in the backend's weight arena */
    const void *q8;     /* the q8 matmul's packed layout of data (in the
                         * arena; kernels/cpu/cpu_q8.h), or NULL */
    const void *i24;    /* the i24 matmul's (kernels/cpu/cpu_i24.h), or NULL */
    const void *fast16; /* the fast matmul's packed copy of data (in the
                         * arena; ld_cpu_fast_pack), or NULL */
    ld_f8b f8;
};

/* The "cpu" backend's copy of its weights in 2 MiB pages
 * (backend_ref_arena.c says why): chunks the weights are packed in, and
 * how many weights are in them. */
struct ld_warena_chunk;
typedef struct ld_warena {
    struct ld_warena_chunk *chunks;
    size_t live;  /* weights in the chunks */
    size_t bytes; /* bytes of the chunks */
} ld_warena;

/* a copy of src[0, n) in the arena, one weight more in it (NULL: out of
 * memory or past the budget, a quarter of the machine's memory; nothing
 * changed).  src must lie in a private read-only file mapping
 * (ld_host_tensor.map): its pages are dropped from the resident set. */
const void *ld_warena_copy(ld_warena *a, const void *src, size_t n);
/* n bytes of the arena for the caller to fill, one weight more in it
 * (NULL as ld_warena_copy's) */
void *ld_warena_alloc(ld_warena *a, size_t n);
/* the pages wholly inside src[0, n) out of the resident set; src in a
 * private read-only file mapping, as ld_warena_copy's */
void ld_warena_drop_resident(const void *src, size_t n);
/* one weight fewer; the last one frees the chunks */
void ld_warena_release(ld_warena *a);
/* the chunks freed, whatever is still in them */
void ld_warena_free(ld_warena *a);

typedef void (*task_fn)(void *ctx, int tid, size_t i0, size_t i1);

/* thread tid's mark of the call it last prepared x for (ref_backend's
 * prep_done), a cache line apart from the others': each thread writes its
 * own at every decode matmul, and marks side by side would pass the line
 * between the cores each time */
struct prep_mark {
    uint64_t call;
    unsigned char pad[56];
};

typedef struct ref_backend {
    ld_backend base;
    int n_threads;
    int fast;          /* the "cpu" backend: where an op has fast code of the reference's bits
                          (swiglu), that code */
    ld_cpu_kernels k;  /* the kernel each op runs (cpu_kernels.h) */
    ld_backend_ops ops; /* the op table with this instance's name */
    char label[96];     /* "ref", "cpu", "ref+matmul=bf16", ... */
    pthread_t *threads;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    atomic_uint gen;
    atomic_int pending, quit;
    /* who is asleep (under mu): workers on `go`, the caller on `done`; a
     * run wakes them only then, so that the spinning case takes no lock */
    atomic_int sleepers, caller_asleep;
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
    /* a decode step's fast matmul on several threads prepares its x on
     * each thread instead (backend_ref_dense.c, matmul_prepare): into the
     * thread's scratch from float prep_at on, once a call (prep_call,
     * counted by the caller; prep_done[tid].call: the call thread tid last
     * prepared for); prep_at 0: rb->prep as above */
    size_t prep_at;
    uint64_t prep_call; /* 64 bits: never wraps round to a mark left stale */
    struct prep_mark *prep_done;
    ld_warena weights; /* the weights' copy where the matmul is fast or q8 */
} ref_backend;

/* The matmul kernel that runs on weights of type dt: the backend's, or the
 * fast one where its q8 or i24 has no kernel for dt. */
static inline ld_kvar ld_refb_matmul_kind(const ref_backend *rb, ld_kdt dt)
{
    ld_kvar v = rb->k.v[LD_KOP_MATMUL];
    if ((v == LD_KV_Q8 && !ld_cpu_q8_supports(dt)) || (v == LD_KV_I24 && !ld_cpu_i24_supports(dt))) return LD_KV_FAST;
    return v;
}

typedef struct op_ctx {
    ref_backend *rb;
    float *out;
    const float *a, *b, *c;
    const ld_weight *w, *bias;
    const int32_t *tokens;
    const float *inv_freq;
    int T, n_heads, n_kv, hd, pos0, window, n;
    float eps, scale;
    size_t unit; /* the matmul's rows an item, where it goes out in ranges */
} op_ctx;

/* what the mHC entries (backend_ref_ds.c) and V4's head (backend_ref_ds4.c) pass their items */
typedef struct hc_ctx {
    ref_backend *rb;
    float *post, *comb, *out;
    const float *X, *fn, *base, *scale, *f;
    int N, D, iters, variant;
    float norm_eps, hc_eps;
} hc_ctx;

/* ---- backend_ref_pool.c: the pool and per-thread scratch; a worker
 * thread's body (its argument malloc'd by the maker, freed by the worker) */
typedef struct worker_arg {
    ref_backend *rb;
    int tid;
} worker_arg;
void *ld_refb_worker(void *arg);
void ld_refb_run_grain(ref_backend *rb, task_fn fn, void *ctx, size_t n, size_t grain);
void ld_refb_run(ref_backend *rb, task_fn fn, void *ctx, size_t n);
void ld_refb_run_items(ref_backend *rb, task_fn fn, void *ctx, size_t n, double work);
ld_status ld_refb_need_scratch(ref_backend *rb, size_t n, ld_error *err);
ld_status ld_refb_need_iscratch(ref_backend *rb, size_t n, ld_error *err);

/* LD_ERR_USAGE unless floats [off, off + n) lie in b */
static inline ld_status ld_refb_range(const ld_buf *b, size_t off, size_t n, ld_error *err)
{
    if (off > b->n || n > b->n - off)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "range [%zu, +%zu) outside a buffer of %zu floats", off, n, b->n);
    return LD_OK;
}

/* ---- backend_ref_dense.c */
ld_status ld_refb_embed(ld_backend *be, ld_buf *out, const ld_weight *table, const int32_t *tokens, int T, ld_error *err);
ld_status ld_refb_rmsnorm(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, int rows, float eps, ld_error *err);
ld_status ld_refb_matmul(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias, int T, ld_error *err);
ld_status ld_refb_matmul_fanout(ld_backend *be, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int n,
                                int T, ld_weight *const *norms, float eps, ld_error *err);
ld_status ld_refb_rope(ld_backend *be, ld_buf *x, int T, int n_heads, int head_dim, int pos0, const float *inv_freq, ld_error *err);
ld_status ld_refb_kv_store(ld_backend *be, ld_buf *cache, const ld_buf *src, int T, int pos0, int row, ld_error *err);
ld_status ld_refb_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kcache, const ld_buf *vcache, int T, int pos0, int n_heads, int n_kv, int head_dim, int window, float scale, ld_error *err);
ld_status ld_refb_swiglu(ld_backend *be, ld_buf *out, const ld_buf *gate, const ld_buf *up, size_t n, ld_error *err);
ld_status ld_refb_add(ld_backend *be, ld_buf *x, const ld_buf *y, size_t n, ld_error *err);
ld_status ld_refb_softmax(ld_backend *be, ld_buf *out, const ld_buf *x, int rows, int n, ld_error *err);

/* ---- backend_ref_ds.c */
ld_status ld_refb_mla_latent(ld_backend *be, ld_buf *o_lat, const ld_buf *q_abs, const ld_buf *q, const ld_buf *ckv, const ld_buf *kpe, int T, int pos0, int n_heads, int dn, int dr, int c, float scale, const int32_t *sel, int k, int split, ld_error *err);
ld_status ld_refb_mla_absorb_q(ld_backend *be, ld_buf *q_abs, const ld_buf *q, const ld_weight *w, int T, int n_heads, int dn, int dr, int dv, int c, ld_error *err);
ld_status ld_refb_mla_absorb_out(ld_backend *be, ld_buf *out, const ld_buf *o_lat, const ld_weight *w, int T, int n_heads, int dn, int dv, int c, ld_error *err);
ld_status ld_refb_ds_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias, int T, int E, int n_group, int topk_group, int top_k, int norm, float scale, ld_error *err);
ld_status ld_refb_index_topk(ld_backend *be, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys, int T, int pos0, int n_heads, int dim, int k, ld_error *err);
ld_status ld_refb_hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X, const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters, float norm_eps, float hc_eps, int variant, ld_error *err);
ld_status ld_refb_hc_post(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *f, const ld_buf *post, const ld_buf *comb, int T, int N, int D, ld_error *err);
ld_status ld_refb_ds4_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias, const int32_t *hash, int T, int E, int K, float scale, ld_error *err);

/* ---- backend_ref_ds4.c */
ld_status ld_refb_ds4_qkv(ld_backend *be, ld_buf *q, ld_buf *kvc, const ld_buf *kv, int T, int pos0, int H, int hd, int kv_rows, float eps, const ld_ds4_rot *rope, ld_error *err);
ld_status ld_refb_ds4_compress(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate, int T, int pos0, float eps, const ld_ds4_rot *rope, int variant, ld_error *err);
ld_status ld_refb_ds4_index(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0, int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope, int variant, ld_error *err);
ld_status ld_refb_ds4_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kvc, const ld_buf *entries, const int32_t *sel, int k, const ld_buf *sinks, int T, int pos0, int H, int hd, int kv_rows, int window, int ratio, float scale, const ld_ds4_rot *rope, ld_error *err);
ld_status ld_refb_copy_cols(ld_backend *be, ld_buf *dst, size_t dst_ld, size_t dst_off, const ld_buf *src, size_t src_ld, size_t src_off, int rows, size_t cols, ld_error *err);
ld_status ld_refb_ds4_hc_head(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base, float scale, int T, int N, int D, float norm_eps, float hc_eps, ld_error *err);

/* ---- backend_ref_moe.c */
ld_status ld_refb_moe(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T, int K, const ld_moe_expert *experts, int E, const ld_moe_expert *shared, int act, float limit, int combine, float fused_scale, ld_error *err);

#endif /* LD_BACKEND_REF_INTERNAL_H */
