/* backend_ref_dense.c - the CPU backends' ops of a dense decoder: embed, rmsnorm,
 * matmul (the reference's, the fast one or a variant, cpu_kernels.h), rope,
 * the KV cache, attention, swiglu, add, softmax. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ref_internal.h"
#include "kernels/cpu/cpu_q8.h"

/* ---------------------------------------------------------------- ops */



static void t_embed(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    ld_ref_embed(c->out, c->w->data, c->w->dt, (int)c->w->cols, c->tokens, i0, i1);
}

ld_status ld_refb_embed(ld_backend *be, ld_buf *out, const ld_weight *table, const int32_t *tokens, int T, ld_error *err)
{
    LD_TRY(ld_refb_range(out, 0, (size_t)T * (size_t)table->cols, err));
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= table->rows)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "token id %d outside the vocabulary of %lld", (int)tokens[t], (long long)table->rows);
    op_ctx c = {.rb = (ref_backend *)be, .out = out->p, .w = table, .tokens = tokens};
    ld_refb_run(c.rb, t_embed, &c, (size_t)T);
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

ld_status ld_refb_rmsnorm(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, int rows, float eps, ld_error *err)
{
    size_t n = (size_t)rows * (size_t)w->cols;
    if (ld_ref_kdt_is_block(w->dt) || ld_ref_kdt_is_scaled(w->dt))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a norm weight of a block type");
    LD_TRY(ld_refb_range(out, 0, n, err));
    LD_TRY(ld_refb_range(x, 0, n, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = out->p, .a = x->p, .w = w, .eps = eps};
    ld_refb_run(c.rb, t_rmsnorm, &c, (size_t)rows);
    return LD_OK;
}

/* the prepared x the fast kernel of op c reads on thread tid: rb->prep,
 * or the thread's own (matmul_prepare), made at its first piece of the call */
static const float *thread_prep(ref_backend *rb, const op_ctx *c, int tid)
{
    if (!rb->prep_at) return rb->prep;
    float *own = rb->scratch[tid] + rb->prep_at;
    if (rb->prep_done[tid].call != rb->prep_call) {
        ld_cpu_matmul_prep(own, c->a, c->w->dt, c->T, (int)c->w->cols);
        rb->prep_done[tid].call = rb->prep_call;
    }
    return own;
}

/* rows [i0, i1) of out [T][w->rows] = a [T][K] . w^T (+ bias), with the
 * kernel the backend's matmul runs (what matmul_prepare made of a for w's
 * type: rb->prep, or each thread's own, thread_prep) */
static void t_matmul(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    ref_backend *rb = c->rb;
    const ld_weight *w = c->w;
    float *out = c->out;
    ld_kvar v = ld_refb_matmul_kind(rb, w->dt);
    const void *bd = c->bias ? c->bias->data : NULL;
    ld_kdt bdt = c->bias ? c->bias->dt : LD_KDT_F32;
    int T = c->T, K = (int)w->cols, N = (int)w->rows;
    if (v == LD_KV_BF16 || v == LD_KV_SPLITK) {
        (v == LD_KV_BF16 ? ld_var_matmul_bf16 : ld_var_matmul_splitk)(out, c->a, w->data, w->dt, bd, bdt, T, K, N,
                                                                       w->rope_hd, rb->scratch[tid], i0, i1);
        return;
    }
    /* FP8 activations: quantized once by matmul_prepare, then the reference */
    if (v == LD_KV_FP8ACT || v == LD_KV_FP8UE8M0) {
        ld_ref_matmul_ex(out, rb->prep, w->data, w->dt, bd, bdt, T, K, N, w->rope_hd, rb->scratch[tid], i0, i1);
        return;
    }
    if (v == LD_KV_Q8) {
        ld_cpu_matmul_q8(out, rb->prep, w->data, w->q8, w->dt, bd, bdt, T, K, N, w->rope_hd, i0, i1);
        return;
    }
    if (v == LD_KV_I24) {
        ld_cpu_matmul_i24(out, rb->prep, w->data, w->i24, w->dt, bd, bdt, T, K, N, w->rope_hd, i0, i1);
        return;
    }
    if (v == LD_KV_FAST) {
        ld_cpu_matmul(out, c->a, thread_prep(rb, c, tid), w->data, w->fast16, w->dt, bd, bdt, T, K, N, w->rope_hd,
                      rb->scratch[tid], i0, i1);
        return;
    }
    ld_ref_matmul_ex(out, c->a, w->data, w->dt, bd, bdt, T, K, N, w->rope_hd, rb->scratch[tid], i0, i1);
}

/* the per-thread scratch and the prepared activations (rb->prep) of the
 * matmul of x [T][w->cols] by w: the same for every weight of w's type and
 * columns.  A decode step's fast matmul on several threads leaves x to
 * each thread to prepare in its own scratch (thread_prep): the prep is a
 * few hundred nanoseconds, and the caller's writing the shared copy that
 * the other cores had read made it wait on their copies (at 2 threads,
 * 1-1.5 us before each of a step's matmuls, the other thread idle). */
static ld_status matmul_prepare(ref_backend *rb, const float *x, const ld_weight *w, int T, ld_error *err)
{
    ld_kvar mv = ld_refb_matmul_kind(rb, w->dt);
    int q8 = mv == LD_KV_Q8, i24 = mv == LD_KV_I24;
    int fast = mv == LD_KV_FAST, fp8 = mv == LD_KV_FP8ACT || mv == LD_KV_FP8UE8M0;
    size_t ks = fast ? ld_cpu_matmul_scratch(w->dt, T, (int)w->cols) : (size_t)w->cols;
    rb->prep_at = 0;
    if (fast && T == 1 && rb->n_threads > 1) {
        size_t at = (ks / 16 + 1) * 16; /* past the kernel's scratch, a whole cache line; never 0 */
        LD_TRY(ld_refb_need_scratch(rb, at + ld_cpu_matmul_prep_size(w->dt, T, (int)w->cols), err));
        rb->prep_at = at;
        rb->prep_call++;
        return LD_OK;
    }
    LD_TRY(ld_refb_need_scratch(rb, ks, err));
    if (!fast && !fp8 && !q8 && !i24) return LD_OK;
    size_t np = fp8   ? (size_t)T * (size_t)w->cols
                : q8  ? ld_cpu_q8_prep_size(T, (int)w->cols)
                : i24 ? ld_cpu_i24_prep_size(T, (int)w->cols)
                      : ld_cpu_matmul_prep_size(w->dt, T, (int)w->cols);
    if (np > rb->prep_cap) {
        float *p = realloc(rb->prep, np * sizeof *p);
        if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for %zu floats of activations", np);
        rb->prep = p;
        rb->prep_cap = np;
    }
    if (fp8) (mv == LD_KV_FP8UE8M0 ? ld_var_fp8_act_ue8m0 : ld_var_fp8_act)(rb->prep, x, T, (int)w->cols);
    else if (q8) ld_cpu_q8_prep(rb->prep, x, T, (int)w->cols);
    else if (i24) ld_cpu_i24_prep(rb->prep, x, T, (int)w->cols);
    else ld_cpu_matmul_prep(rb->prep, x, w->dt, T, (int)w->cols);
    return LD_OK;
}

/* rows [u i0, u i1) of t_matmul's, u = c->unit rows an item (the last
 * item may be short) */
static void t_matmul_units(void *p, int tid, size_t i0, size_t i1)
{
    const op_ctx *c = p;
    size_t u = c->unit, rows = (size_t)c->w->rows, r1 = u * i1;
    t_matmul(p, tid, u * i0, r1 < rows ? r1 : rows);
}

/* The rows a unit when a decode step's matmul of w goes out in one
 * contiguous range a thread, in whole units; 0: in pieces as the threads
 * come free (a prompt's: its matmuls compute more than they read, and a
 * thread that runs late leaves the other less to wait for).  From its packed
 * copy the q8 kernel reads a range as four streams far apart (cpu_q8.c),
 * which pieces would cut short; the fast kernels read one range as one
 * stream.  The 2-core Xeon at 2 threads (bench_engine, decode): q8 280 tok/s
 * in pieces, 335 in ranges, a batch of 4 (--batch 4) 400 and 450; the fast
 * kernels 1.09x in ranges (5 rounds), a batch of 4 the same either way. */
static size_t matmul_range_unit(const ref_backend *rb, const ld_weight *w, int T)
{
    ld_kvar v = ld_refb_matmul_kind(rb, w->dt);
    if (v == LD_KV_Q8) return T <= 4 && w->q8 ? LD_CPU_Q8_GROUP_ROWS : 0;
    if (v == LD_KV_I24) return T <= 4 && w->i24 ? LD_CPU_I24_GROUP_ROWS : 0;
    return v == LD_KV_FAST && T == 1 ? LD_CPU_DECODE_ROWS : 0;
}

/* the pieces the pool hands out of a matmul's `rows` output rows (where
 * matmul_range_unit says pieces): about eight per thread, in whole groups of
 * LD_CPU_DECODE_ROWS rows */
static size_t matmul_grain(const ref_backend *rb, size_t rows)
{
    const size_t u = LD_CPU_DECODE_ROWS;
    size_t grain = rows / ((size_t)rb->n_threads * 8);
    return grain < u ? u : (grain + u - 1) / u * u;
}

/* One run of the pool over the matmuls of one x (a matmul is one; a
 * fanout n): each weight's items (ranges' units or rows, as
 * matmul_range_unit cuts it) one after the other. */
#define FANOUT_MAX 8
typedef struct matmul_set {
    op_ctx part[FANOUT_MAX];      /* weight i's matmul, as ld_refb_matmul would run it */
    size_t first[FANOUT_MAX + 1]; /* the item where weight i's begin; first[n]: all */
    int n;
} matmul_set;

/* items [i0, i1) of a set of matmuls: each weight's share by its own matmul */
static void t_matmul_set(void *p, int tid, size_t i0, size_t i1)
{
    matmul_set *f = p;
    for (int i = 0; i < f->n && i0 < i1; i++) {
        size_t a = f->first[i], b = f->first[i + 1], e = i1 < b ? i1 : b;
        if (i0 >= b) continue;
        (f->part[i].unit ? t_matmul_units : t_matmul)(&f->part[i], tid, i0 - a, e - a);
        i0 = e;
    }
}

/* the matmuls of f (f->n parts set, each weight's op_ctx with one unit)
 * in one run of the pool: ranges of units or pieces of rows */
static void run_matmuls(ref_backend *rb, matmul_set *f)
{
    size_t unit = f->part[0].unit, rows = 0;
    f->first[0] = 0;
    for (int i = 0; i < f->n; i++) {
        size_t r = (size_t)f->part[i].w->rows;
        f->first[i + 1] = f->first[i] + (unit ? (r + unit - 1) / unit : r);
        rows += r;
    }
    if (unit) ld_refb_run(rb, t_matmul_set, f, f->first[f->n]);
    else ld_refb_run_grain(rb, t_matmul_set, f, f->first[f->n], matmul_grain(rb, rows));
}

ld_status ld_refb_matmul(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias, int T, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_refb_range(out, 0, (size_t)T * (size_t)w->rows, err));
    LD_TRY(ld_refb_range(x, 0, (size_t)T * (size_t)w->cols, err));
    if (bias && (ld_ref_kdt_is_block(bias->dt) || ld_ref_kdt_is_scaled(bias->dt)))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a bias of a block type");
    if (bias && bias->rows * bias->cols != w->rows)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "bias of %lld values for %lld outputs",
                       (long long)(bias->rows * bias->cols), (long long)w->rows);
    LD_TRY(matmul_prepare(rb, x->p, w, T, err));
    matmul_set f = {.n = 1};
    f.part[0] = (op_ctx){.rb = rb, .out = out->p, .a = x->p, .w = w, .bias = bias, .T = T,
                         .unit = matmul_range_unit(rb, w, T)};
    run_matmuls(rb, &f);
    return LD_OK;
}

/* LD_ERR_UNSUPPORTED unless the fanout's weights go out alike: one type
 * and K (one prepared x), one way of cutting (ranges of one unit or
 * pieces); LD_ERR_USAGE for what ld_refb_matmul and ld_refb_rmsnorm
 * would refuse.  Nothing written. */
static ld_status fanout_check(const ref_backend *rb, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws,
                              int n, int T, ld_weight *const *norms, ld_error *err)
{
    if (n < 1 || n > FANOUT_MAX || T < 0)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "matmul_fanout of %d weights, %d tokens", n, T);
    for (int i = 0; i < n; i++) {
        const ld_weight *w = ws[i], *nw = norms ? norms[i] : NULL;
        if (w->dt != ws[0]->dt || w->cols != ws[0]->cols || matmul_range_unit(rb, w, T) != matmul_range_unit(rb, ws[0], T))
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "matmul_fanout: weight %d goes out unlike weight 0", i);
        if (outs[i] == x) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_fanout in place");
        LD_TRY(ld_refb_range(outs[i], 0, (size_t)T * (size_t)w->rows, err));
        if (nw && (ld_ref_kdt_is_block(nw->dt) || ld_ref_kdt_is_scaled(nw->dt)))
            return LD_FAIL(err, LD_ERR_USAGE, 0, "a norm weight of a block type");
        if (nw) LD_TRY(ld_refb_range(outs[i], 0, (size_t)T * (size_t)nw->cols, err));
    }
    return ld_refb_range(x, 0, (size_t)T * (size_t)ws[0]->cols, err);
}

/* n products of x (matmul_fanout, backend.h) in one run of the pool
 * rather than n: a decode step's projections of one input pay one
 * hand-off and one wait, and x is prepared once.  Each output row is
 * computed as its weight's matmul computes it: the bits of n calls. */
ld_status ld_refb_matmul_fanout(ld_backend *be, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int n,
                                int T, ld_weight *const *norms, float eps, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(fanout_check(rb, outs, x, ws, n, T, norms, err));
    LD_TRY(matmul_prepare(rb, x->p, ws[0], T, err));
    matmul_set f = {.n = n};
    size_t unit = matmul_range_unit(rb, ws[0], T);
    for (int i = 0; i < n; i++)
        f.part[i] = (op_ctx){.rb = rb, .out = outs[i]->p, .a = x->p, .w = ws[i], .T = T, .unit = unit};
    run_matmuls(rb, &f);
    for (int i = 0; norms && i < n; i++)
        if (norms[i]) LD_TRY(ld_refb_rmsnorm(be, outs[i], outs[i], norms[i], T, eps, err));
    return LD_OK;
}

static void t_rope(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    ld_ref_rope(c->out, c->n_heads, c->hd, c->inv_freq, c->pos0, i0, i1);
}

ld_status ld_refb_rope(ld_backend *be, ld_buf *x, int T, int n_heads, int head_dim, int pos0, const float *inv_freq, ld_error *err)
{
    LD_TRY(ld_refb_range(x, 0, (size_t)T * (size_t)n_heads * (size_t)head_dim, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = x->p, .n_heads = n_heads, .hd = head_dim,
                .pos0 = pos0, .inv_freq = inv_freq};
    ld_refb_run(c.rb, t_rope, &c, (size_t)T);
    return LD_OK;
}

ld_status ld_refb_kv_store(ld_backend *be, ld_buf *cache, const ld_buf *src, int T, int pos0, int row, ld_error *err)
{
    (void)be;
    size_t n = (size_t)T * (size_t)row;
    LD_TRY(ld_refb_range(src, 0, n, err));
    LD_TRY(ld_refb_range(cache, (size_t)pos0 * (size_t)row, n, err));
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

ld_status ld_refb_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kcache, const ld_buf *vcache,
                           int T, int pos0, int n_heads, int n_kv, int head_dim, int window, float scale, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    size_t nq = (size_t)T * (size_t)n_heads * (size_t)head_dim;
    size_t nkv = (size_t)(pos0 + T) * (size_t)n_kv * (size_t)head_dim;
    if (n_kv <= 0 || n_heads % n_kv) return LD_FAIL(err, LD_ERR_USAGE, 0, "%d heads over %d kv heads", n_heads, n_kv);
    LD_TRY(ld_refb_range(out, 0, nq, err));
    LD_TRY(ld_refb_range(q, 0, nq, err));
    LD_TRY(ld_refb_range(kcache, 0, nkv, err));
    LD_TRY(ld_refb_range(vcache, 0, nkv, err));
    int fast = rb->k.v[LD_KOP_ATTENTION] == LD_KV_FAST;
    size_t scratch = fast ? ld_cpu_attention_scratch(n_heads, pos0 + T) : (size_t)(pos0 + T);
    LD_TRY(ld_refb_need_scratch(rb, scratch, err));
    op_ctx c = {.rb = rb, .out = out->p, .a = q->p, .b = kcache->p, .c = vcache->p, .n_heads = n_heads,
                .n_kv = n_kv, .hd = head_dim, .pos0 = pos0, .window = window, .scale = scale};
    /* a decode step's heads in one range a thread (SmolLM2's nine go 4:5
     * to two threads, not 2:1 in pieces of three; the fast kernel reads a
     * range's k and v rows as one stream); a prompt's in pieces of as
     * many heads as that kernel takes together (a token's times the
     * tokens it tiles; both 1 where it takes none together), taken as the
     * threads come free: a late token's attention is longer than an early
     * one's */
    size_t grain = !fast ? 1 : T == 1 ? 0 : (size_t)ld_cpu_attention_heads(n_heads, n_kv, head_dim) *
                                             (size_t)ld_cpu_attention_tokens(n_heads, n_kv, head_dim);
    ld_refb_run_grain(rb, t_attention, &c, (size_t)T * (size_t)n_heads, grain);
    return LD_OK;
}

static void t_swiglu(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    if (c->rb->k.v[LD_KOP_SWIGLU] == LD_KV_BF16) ld_var_swiglu_bf16(c->out, c->a, c->b, i0, i1);
    else if (c->rb->fast) ld_cpu_swiglu(c->out, c->a, c->b, i0, i1); /* the reference's bits, expf vectorized */
    else ld_ref_swiglu(c->out, c->a, c->b, i0, i1);
}

ld_status ld_refb_swiglu(ld_backend *be, ld_buf *out, const ld_buf *gate, const ld_buf *up, size_t n, ld_error *err)
{
    LD_TRY(ld_refb_range(out, 0, n, err));
    LD_TRY(ld_refb_range(gate, 0, n, err));
    LD_TRY(ld_refb_range(up, 0, n, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = out->p, .a = gate->p, .b = up->p};
    if (n < SMALL_OP) t_swiglu(&c, 0, 0, n);
    else ld_refb_run(c.rb, t_swiglu, &c, n);
    return LD_OK;
}

static void t_add(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    ld_ref_add(c->out, c->a, i0, i1);
}

ld_status ld_refb_add(ld_backend *be, ld_buf *x, const ld_buf *y, size_t n, ld_error *err)
{
    LD_TRY(ld_refb_range(x, 0, n, err));
    LD_TRY(ld_refb_range(y, 0, n, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = x->p, .a = y->p};
    if (n < SMALL_OP) t_add(&c, 0, 0, n);
    else ld_refb_run(c.rb, t_add, &c, n);
    return LD_OK;
}

static void t_softmax(void *p, int tid, size_t i0, size_t i1)
{
    op_ctx *c = p;
    (void)tid;
    ld_ref_softmax(c->out, c->a, c->n, i0, i1);
}

ld_status ld_refb_softmax(ld_backend *be, ld_buf *out, const ld_buf *x, int rows, int n, ld_error *err)
{
    LD_TRY(ld_refb_range(out, 0, (size_t)rows * (size_t)n, err));
    LD_TRY(ld_refb_range(x, 0, (size_t)rows * (size_t)n, err));
    op_ctx c = {.rb = (ref_backend *)be, .out = out->p, .a = x->p, .n = n};
    ld_refb_run(c.rb, t_softmax, &c, (size_t)rows);
    return LD_OK;
}
