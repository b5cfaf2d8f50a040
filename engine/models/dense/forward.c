/* forward.c - see forward.h. */
#include "forward.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/models/batch.h"
#include "engine/models/finite.h"
#include "engine/models/session_args.h"

typedef struct sess_layer {
    ld_weight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *q_norm, *k_norm;
    ld_weight *ffn_norm, *w_gate, *w_up, *w_down, *b_gate, *b_up, *b_down;
    ld_weight *qkv[3], *gate_up[2]; /* what project() hands matmul_fanout: arrays it keeps */
    ld_buf *kc, *vc;
} sess_layer;

struct ld_session {
    const ld_model *m;
    ld_backend *be;
    int max_seq, max_batch, pos;
    float *inv_freq;
    float scale;
    ld_weight *embed, *norm, *lm_head;
    sess_layer *layers;
    ld_buf *x, *xb, *q, *k, *v, *att, *g, *u, *logits;
    ld_session_reduce_fn reduce; /* tensor parallelism: NULL = none */
    void *reduce_ctx;
    int borrowed; /* 1: the weights are a lead session's (ld_session_create_sibling) */
    int first, last; /* the layers it runs: all, or a slice's (ld_session_create_slice) */
    int slice;       /* 1: ld_session_create_slice's (no embeddings, head or logits) */
    int check;       /* 1: every op's output checked for NaN and infinities (ld_session_set_check) */
    ld_finite_scratch check_buf;
};

#define OPS(s) ((s)->be->ops)

static ld_status load(ld_session *s, const ld_model_tensor *t, ld_weight **w, ld_error *err)
{
    *w = NULL;
    if (!t->st && !t->gg) return LD_OK;
    ld_status st = OPS(s)->weight_load(s->be, &t->host, w, err);
    if (st != LD_OK && err) {
        char msg[sizeof err->msg];
        if (t->st) snprintf(msg, sizeof msg, "tensor '%.100s': %.140s", t->st->name, err->msg);
        else snprintf(msg, sizeof msg, "tensor '%.*s': %.140s", (int)(t->gg->name.len > 100 ? 100 : t->gg->name.len),
                      t->gg->name.ptr, err->msg);
        memcpy(err->msg, msg, sizeof msg);
    }
    return st;
}

static void unload(ld_session *s, ld_weight *w)
{
    if (w) OPS(s)->weight_free(s->be, w);
}

void ld_session_destroy(ld_session *s)
{
    if (!s) return;
    if (s->layers) {
        for (int l = 0; l < s->m->cfg.n_layers; l++) {
            sess_layer *L = &s->layers[l];
            ld_weight *ws[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->bq, L->bk, L->bv, L->bo,
                               L->q_norm, L->k_norm, L->ffn_norm, L->w_gate, L->w_up, L->w_down,
                               L->b_gate, L->b_up, L->b_down};
            for (size_t i = 0; !s->borrowed && i < sizeof ws / sizeof ws[0]; i++) unload(s, ws[i]);
            if (L->kc) OPS(s)->buf_free(s->be, L->kc);
            if (L->vc) OPS(s)->buf_free(s->be, L->vc);
        }
    }
    if (!s->borrowed) {
        unload(s, s->embed);
        unload(s, s->norm);
        if (s->lm_head != s->embed) unload(s, s->lm_head);
    }
    ld_buf *bs[] = {s->x, s->xb, s->q, s->k, s->v, s->att, s->g, s->u, s->logits};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) OPS(s)->buf_free(s->be, bs[i]);
    free(s->layers);
    free(s->inv_freq);
    ld_finite_scratch_free(&s->check_buf);
    free(s);
}

/* The bytes of the buffers a session of n_layers layers allocates (KV
 * caches and the chunk's activations, logits but for a slice), in double
 * so that no product overflows. */
static double session_bytes(const ld_model_config *c, int n_layers, int slice, int max_seq, int max_batch, double *kv)
{
    double KV = (double)c->n_kv_heads * c->head_dim, Q = (double)c->n_heads * c->head_dim;
    *kv = 2.0 * n_layers * max_seq * KV * sizeof(float);
    double act = (double)max_batch * (2.0 * c->hidden + 2.0 * Q + 2.0 * KV + 2.0 * c->intermediate +
                                      (slice ? 0.0 : c->vocab));
    return *kv + act * sizeof(float);
}

/* Refuses, before allocating, a session larger than the machine's memory:
 * a clear error rather than a process the kernel kills. */
static ld_status check_memory(const ld_model_config *c, int n_layers, int slice, int max_seq, int max_batch,
                              ld_error *err)
{
    double kv, need = session_bytes(c, n_layers, slice, max_seq, max_batch, &kv);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    if (need > (double)SIZE_MAX / 2 || (have > 0 && need > have))
        return LD_FAIL(err, LD_ERR_LIMIT, 0,
                       "a session of %d positions needs %.1f GiB (KV cache %.1f GiB), more than the %.1f GiB of "
                       "memory of this machine",
                       max_seq, need / 1073741824.0, kv / 1073741824.0, have / 1073741824.0);
    return LD_OK;
}

/* A session's own parts for layers [first, last) (slice: a slice's, no
 * logits): its scratch, those layers' KV caches, its RoPE table; the
 * weights are loaded by the caller (load_weights) or borrowed. */
static ld_status session_new(const ld_model *m, ld_backend *be, int first, int last, int slice, int max_seq,
                             int max_batch, ld_session **out, ld_error *err)
{
    *out = NULL;
    const ld_model_config *c = &m->cfg;
    if (max_seq < 1 || max_batch < 1 || max_seq > c->max_pos)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "max_seq %d and max_batch %d must be >= 1 and max_seq <= %d",
                       max_seq, max_batch, c->max_pos);
    if (max_batch > max_seq) max_batch = max_seq;
    LD_TRY(check_memory(c, last - first, slice, max_seq, max_batch, err));
    ld_session *s = calloc(1, sizeof *s);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    s->m = m;
    s->first = first;
    s->last = last;
    s->slice = slice;
    s->be = be;
    s->max_seq = max_seq;
    s->max_batch = max_batch;
    /* 1/sqrt(head_dim), times the square of the RoPE attention factor:
     * HF multiplies cos and sin (so q and k) by it (YaRN's mscale); here it
     * scales the scores instead, the same up to rounding */
    s->scale = (float)(ld_model_rope_qk_scale(c) / sqrt((double)c->head_dim));
    s->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof *s->inv_freq);
    s->layers = calloc((size_t)c->n_layers, sizeof *s->layers);
    if (!s->inv_freq || !s->layers) {
        ld_session_destroy(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    ld_model_rope_inv_freq(c, s->inv_freq);
    size_t B = (size_t)max_batch, D = (size_t)c->hidden, I = (size_t)c->intermediate;
    size_t Q = (size_t)c->n_heads * (size_t)c->head_dim, KV = (size_t)c->n_kv_heads * (size_t)c->head_dim;
    ld_status st = LD_OK;
#define ALLOC(b, n) \
    if (st == LD_OK) st = OPS(s)->buf_alloc(be, (n), &(b), err)
    ALLOC(s->x, B * D);
    ALLOC(s->xb, B * D);
    ALLOC(s->q, B * Q);
    ALLOC(s->k, B * KV);
    ALLOC(s->v, B * KV);
    ALLOC(s->att, B * Q);
    ALLOC(s->g, B * I);
    ALLOC(s->u, B * I);
    ALLOC(s->logits, slice ? 1 : B * (size_t)c->vocab);
    for (int l = first; l < last && st == LD_OK; l++) {
        ALLOC(s->layers[l].kc, (size_t)max_seq * KV);
        ALLOC(s->layers[l].vc, (size_t)max_seq * KV);
    }
#undef ALLOC
    if (st != LD_OK) {
        ld_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

static ld_status load_weights(ld_session *s, ld_error *err)
{
    const ld_model *m = s->m;
    ld_status st = LD_OK;
#define LOAD(w, t) \
    if (st == LD_OK) st = load(s, (t), &(w), err)
    if (!s->slice) {
        LOAD(s->embed, &m->embed);
        LOAD(s->norm, &m->norm);
        if (m->cfg.tie_embeddings) s->lm_head = s->embed;
        else LOAD(s->lm_head, &m->lm_head);
    }
    for (int l = s->first; l < s->last && st == LD_OK; l++) {
        const ld_model_layer *ml = &m->layers[l];
        sess_layer *L = &s->layers[l];
        LOAD(L->attn_norm, &ml->attn_norm);
        LOAD(L->wq, &ml->wq);
        LOAD(L->wk, &ml->wk);
        LOAD(L->wv, &ml->wv);
        LOAD(L->wo, &ml->wo);
        LOAD(L->bq, &ml->bq);
        LOAD(L->bk, &ml->bk);
        LOAD(L->bv, &ml->bv);
        LOAD(L->bo, &ml->bo);
        LOAD(L->q_norm, &ml->q_norm);
        LOAD(L->k_norm, &ml->k_norm);
        LOAD(L->ffn_norm, &ml->ffn_norm);
        LOAD(L->w_gate, &ml->w_gate);
        LOAD(L->w_up, &ml->w_up);
        LOAD(L->w_down, &ml->w_down);
        LOAD(L->b_gate, &ml->b_gate);
        LOAD(L->b_up, &ml->b_up);
        LOAD(L->b_down, &ml->b_down);
    }
#undef LOAD
    return st;
}

ld_status ld_session_create(const ld_model *m, ld_backend *be, int max_seq, int max_batch,
                            ld_session **out, ld_error *err)
{
    ld_session *s;
    LD_TRY(session_new(m, be, 0, m->cfg.n_layers, 0, max_seq, max_batch, &s, err));
    ld_status st = load_weights(s, err);
    if (st != LD_OK) {
        ld_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

ld_status ld_session_create_sibling(const ld_session *lead, int max_seq, ld_session **out, ld_error *err)
{
    ld_session *s;
    if (lead->slice) return LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice's session has no siblings");
    LD_TRY(session_new(lead->m, lead->be, 0, lead->m->cfg.n_layers, 0, max_seq, lead->max_batch, &s, err));
    s->borrowed = 1;
    s->embed = lead->embed;
    s->norm = lead->norm;
    s->lm_head = lead->lm_head;
    for (int l = 0; l < lead->m->cfg.n_layers; l++) {
        sess_layer *L = &s->layers[l];
        ld_buf *kc = L->kc, *vc = L->vc;
        *L = lead->layers[l];
        L->kc = kc;
        L->vc = vc;
    }
    *out = s;
    return LD_OK;
}

void ld_session_set_reduce(ld_session *s, ld_session_reduce_fn fn, void *ctx)
{
    s->reduce = fn;
    s->reduce_ctx = ctx;
}

void ld_session_set_check(ld_session *s, int on)
{
    s->check = on;
}

int ld_session_pos(const ld_session *s)
{
    return s->pos;
}

void ld_session_reset(ld_session *s)
{
    s->pos = 0;
}

/* A sequence's rows in a chunk: n tokens at positions s->pos..., rows
 * [row, row + n) of the chunk's buffers, rows [t0, t0 + n) of the call's
 * hidden [planes][T][D]; q, k, v and att (views of those rows, or the
 * lead's buffers when the chunk is this one sequence's) */
typedef struct seq_rows {
    ld_session *s;
    int n, row, t0, T;
    float *hidden;
    ld_buf *q, *k, *v, *att;
} seq_rows;

/* the chunk's rows of b (rows of D floats) into plane p of each sequence's
 * hidden */
static ld_status trace(ld_session *w, const ld_buf *b, const seq_rows *r, int nr, int plane, ld_error *err)
{
    size_t D = (size_t)w->m->cfg.hidden;
    if (w->slice) plane -= w->first + 1; /* a slice's out holds the planes after its layers */
    for (int i = 0; i < nr; i++) {
        if (!r[i].hidden) continue;
        float *dst = r[i].hidden + ((size_t)plane * (size_t)r[i].T + (size_t)r[i].t0) * D;
        LD_TRY(OPS(w)->buf_read(w->be, b, (size_t)r[i].row * D, dst, (size_t)r[i].n * D, err));
    }
    return LD_OK;
}

/* attention of each sequence on its rows and its own KV cache (layer l) */
static ld_status attention_rows(ld_session *w, const seq_rows *r, int nr, int l, ld_error *err)
{
    const ld_model_config *c = &w->m->cfg;
    const ld_backend_ops *o = OPS(w);
    ld_backend *be = w->be;
    int hd = c->head_dim, KV = c->n_kv_heads * hd;
    for (int i = 0; i < nr; i++) {
        const seq_rows *x = &r[i];
        int n = x->n, pos0 = x->s->pos;
        sess_layer *L = &x->s->layers[l];
        LD_TRY(o->rope(be, x->q, n, c->n_heads, hd, pos0, w->inv_freq, err));
        LD_TRY(o->rope(be, x->k, n, c->n_kv_heads, hd, pos0, w->inv_freq, err));
        LD_TRY(o->kv_store(be, L->kc, x->k, n, pos0, KV, err));
        LD_TRY(o->kv_store(be, L->vc, x->v, n, pos0, KV, err));
        LD_TRY(o->attention(be, x->att, x->q, L->kc, L->vc, n, pos0, c->n_heads, c->n_kv_heads, hd, c->window[l],
                            w->scale, err));
    }
    return LD_OK;
}

/* With the checks on (ld_session_set_check): the chunk's rows of b (width
 * floats a row) after op `op` of layer l (-1: the embeddings, n_layers:
 * the head), each sequence's rows at its own positions.  Off, nothing is
 * read: the check costs a branch. */
static ld_status check(ld_session *w, const ld_buf *b, size_t width, const seq_rows *r, int nr, int l, const char *op,
                       ld_error *err)
{
    if (!w->check) return LD_OK;
    for (int i = 0; i < nr; i++) {
        ld_finite_site at = {l, w->m->cfg.n_layers, op, r[i].s->pos};
        LD_TRY(ld_finite_check_buf(&w->check_buf, w->be, b, (size_t)r[i].row * width, r[i].n, width, &at, err));
    }
    return LD_OK;
}

/* an op of layer l, then its output b (width floats a row) checked */
#define STEP(call, b, width, op)                                 \
    do {                                                         \
        LD_TRY(call);                                            \
        LD_TRY(check(w, (b), (width), r, nr, l, (op), err));     \
    } while (0)

/* outs[i] = w->xb . ws[i] (+ bs[i]) over the chunk's N rows, i < n:
 * one matmul_fanout where the backend groups them (one hand-off to its
 * threads, not n) and none has a bias, else a matmul each; the bits of
 * the n calls either way.  ws: an array of the layer's (the CUDA backend
 * keys what it keeps on the device by it). */
static ld_status project(ld_session *w, ld_buf *const *outs, ld_weight *const *ws, ld_weight *const *bs, int n, int N,
                         ld_error *err)
{
    const ld_backend_ops *o = OPS(w);
    int biased = 0;
    for (int i = 0; i < n; i++) biased |= bs[i] != NULL;
    ld_error e = {0};
    ld_status st = o->matmul_fanout && !biased ? o->matmul_fanout(w->be, outs, w->xb, ws, n, N, NULL, 0.0f, &e)
                                               : LD_ERR_UNSUPPORTED;
    if (ld_backend_answered(st, &e, err)) return st;
    for (int i = 0; i < n; i++) LD_TRY(o->matmul(w->be, outs[i], w->xb, ws[i], bs[i], N, err));
    return LD_OK;
}

/* layer l's attention block over the chunk's N rows (x the residual
 * stream, to which its output is added) */
static ld_status attention_block(ld_session *w, const seq_rows *r, int nr, int N, int l, ld_error *err)
{
    const ld_model_config *c = &w->m->cfg;
    const ld_backend_ops *o = OPS(w);
    ld_backend *be = w->be;
    sess_layer *L = &w->layers[l];
    size_t D = (size_t)c->hidden, Q = (size_t)c->n_heads * (size_t)c->head_dim;
    size_t KV = (size_t)c->n_kv_heads * (size_t)c->head_dim;
    STEP(o->rmsnorm(be, w->xb, w->x, L->attn_norm, N, c->rms_eps, err), w->xb, D, "attn_norm");
    ld_buf *qkv[3] = {w->q, w->k, w->v};
    ld_weight *b_qkv[3] = {L->bq, L->bk, L->bv};
    L->qkv[0] = L->wq, L->qkv[1] = L->wk, L->qkv[2] = L->wv;
    LD_TRY(project(w, qkv, L->qkv, b_qkv, 3, N, err));
    LD_TRY(check(w, w->q, Q, r, nr, l, "q_proj", err));
    LD_TRY(check(w, w->k, KV, r, nr, l, "k_proj", err));
    LD_TRY(check(w, w->v, KV, r, nr, l, "v_proj", err));
    if (c->qk_norm) {
        STEP(o->rmsnorm(be, w->q, w->q, L->q_norm, N * c->n_heads, c->rms_eps, err), w->q, Q, "q_norm");
        STEP(o->rmsnorm(be, w->k, w->k, L->k_norm, N * c->n_kv_heads, c->rms_eps, err), w->k, KV, "k_norm");
    }
    STEP(attention_rows(w, r, nr, l, err), w->att, Q, "attention");
    LD_TRY(o->matmul(be, w->xb, w->att, L->wo, L->bo, N, err));
    if (w->reduce) LD_TRY(w->reduce(w->reduce_ctx, be, w->xb, N, l, 0, err));
    LD_TRY(check(w, w->xb, D, r, nr, l, "attn_out", err));
    STEP(o->add(be, w->x, w->xb, (size_t)N * D, err), w->x, D, "attn_residual");
    return LD_OK;
}

/* layer l's MLP over the chunk's N rows, its output added to x */
static ld_status mlp_block(ld_session *w, const seq_rows *r, int nr, int N, int l, ld_error *err)
{
    const ld_model_config *c = &w->m->cfg;
    const ld_backend_ops *o = OPS(w);
    ld_backend *be = w->be;
    sess_layer *L = &w->layers[l];
    size_t D = (size_t)c->hidden, I = (size_t)c->intermediate;
    STEP(o->rmsnorm(be, w->xb, w->x, L->ffn_norm, N, c->rms_eps, err), w->xb, D, "ffn_norm");
    ld_buf *gu[2] = {w->g, w->u};
    ld_weight *b_gu[2] = {L->b_gate, L->b_up};
    L->gate_up[0] = L->w_gate, L->gate_up[1] = L->w_up;
    LD_TRY(project(w, gu, L->gate_up, b_gu, 2, N, err));
    LD_TRY(check(w, w->g, I, r, nr, l, "ffn_gate", err));
    LD_TRY(check(w, w->u, I, r, nr, l, "ffn_up", err));
    STEP(o->swiglu(be, w->g, w->g, w->u, (size_t)N * I, err), w->g, I, "ffn_act");
    LD_TRY(o->matmul(be, w->xb, w->g, L->w_down, L->b_down, N, err));
    if (w->reduce) LD_TRY(w->reduce(w->reduce_ctx, be, w->xb, N, l, 1, err));
    LD_TRY(check(w, w->xb, D, r, nr, l, "ffn_down", err));
    STEP(o->add(be, w->x, w->xb, (size_t)N * D, err), w->x, D, "ffn_residual");
    return LD_OK;
}

#undef STEP

/* the layers over the chunk's N rows, with w's weights and scratch (x holds
 * the embeddings); every op but attention runs on all rows at once */
static ld_status layers(ld_session *w, const seq_rows *r, int nr, int N, ld_error *err)
{
    for (int l = w->first; l < w->last; l++) {
        LD_TRY(attention_block(w, r, nr, N, l, err));
        LD_TRY(mlp_block(w, r, nr, N, l, err));
        LD_TRY(trace(w, w->x, r, nr, 1 + l, err));
    }
    return LD_OK;
}

static void free_views(ld_session *w, seq_rows *r, int nr)
{
    for (int i = 0; i < nr; i++) {
        ld_buf *v[] = {r[i].q, r[i].k, r[i].v, r[i].att};
        for (int j = 0; j < 4; j++)
            if (v[j] && v[j] != w->q && v[j] != w->k && v[j] != w->v && v[j] != w->att) OPS(w)->buf_free(w->be, v[j]);
        r[i].q = r[i].k = r[i].v = r[i].att = NULL;
    }
}

/* each sequence's q, k, v and att: the whole buffers for one sequence,
 * else views of its rows (the backend's buf_view) */
static ld_status make_views(ld_session *w, seq_rows *r, int nr, ld_error *err)
{
    const ld_model_config *c = &w->m->cfg;
    size_t Q = (size_t)c->n_heads * (size_t)c->head_dim, KV = (size_t)c->n_kv_heads * (size_t)c->head_dim;
    if (nr == 1) {
        r->q = w->q, r->k = w->k, r->v = w->v, r->att = w->att;
        return LD_OK;
    }
    const ld_backend_ops *o = OPS(w);
    if (!o->buf_view)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "the %s backend runs one sequence at a time (no buf_view)", o->name);
    ld_status st = LD_OK;
    for (int i = 0; i < nr && st == LD_OK; i++) {
        size_t row = (size_t)r[i].row, n = (size_t)r[i].n;
        st = o->buf_view(w->be, w->q, row * Q, n * Q, &r[i].q, err);
        if (st == LD_OK) st = o->buf_view(w->be, w->k, row * KV, n * KV, &r[i].k, err);
        if (st == LD_OK) st = o->buf_view(w->be, w->v, row * KV, n * KV, &r[i].v, err);
        if (st == LD_OK) st = o->buf_view(w->be, w->att, row * Q, n * Q, &r[i].att, err);
    }
    if (st != LD_OK) free_views(w, r, nr);
    return st;
}

/* the final norm, the logits each sequence wants (rows: the round's, as
 * r), and the positions */
static ld_status head(ld_session *w, seq_rows *r, const ld_batch_rows *rows, int nr, int N, ld_error *err)
{
    const ld_model_config *c = &w->m->cfg;
    LD_TRY(OPS(w)->rmsnorm(w->be, w->xb, w->x, w->norm, N, c->rms_eps, err));
    LD_TRY(check(w, w->xb, (size_t)c->hidden, r, nr, c->n_layers, "final_norm", err));
    LD_TRY(trace(w, w->xb, r, nr, c->n_layers + 1, err));
    LD_TRY(ld_batch_logits(w->be, w->logits, w->xb, w->lm_head, rows, nr, N, (size_t)c->vocab, err));
    for (int i = 0; w->check && i < nr; i++) { /* the logits its sequences took */
        ld_finite_site at = {c->n_layers, c->n_layers, "logits", r[i].s->pos};
        if (rows[i].logits) LD_TRY(ld_finite_check_host(rows[i].logits, r[i].n, (size_t)c->vocab, &at, err));
    }
    for (int i = 0; i < nr; i++) r[i].s->pos += r[i].n;
    return LD_OK;
}

/* one chunk of N rows (at most w->max_batch) of nr sequences, tokens [N],
 * on w's weights and scratch */
static ld_status chunk(ld_session *w, seq_rows *r, const ld_batch_rows *rows, int nr, const int32_t *tokens, int N,
                       ld_error *err)
{
    ld_status st = make_views(w, r, nr, err);
    if (st == LD_OK) st = OPS(w)->embed(w->be, w->x, w->embed, tokens, N, err);
    if (st == LD_OK) st = check(w, w->x, (size_t)w->m->cfg.hidden, r, nr, -1, "embed", err);
    if (st == LD_OK) st = trace(w, w->x, r, nr, 0, err);
    if (st == LD_OK) st = layers(w, r, nr, N, err);
    if (st == LD_OK) st = head(w, r, rows, nr, N, err);
    free_views(w, r, nr);
    return st;
}

/* a batch being run: its parts, and room for a round's rows */
typedef struct dense_batch {
    const ld_session_part *parts;
    seq_rows *r;
} dense_batch;

static ld_status dense_round(void *ctx, const ld_batch_rows *rows, int nrows, const int32_t *tokens, int N,
                             ld_error *err)
{
    dense_batch *b = ctx;
    for (int k = 0; k < nrows; k++) {
        const ld_session_part *p = &b->parts[rows[k].part];
        b->r[k] = (seq_rows){p->s, rows[k].n, rows[k].row, rows[k].t0, p->T, p->hidden, NULL, NULL, NULL, NULL};
    }
    return chunk(b->parts[0].s, b->r, rows, nrows, tokens, N, err);
}

ld_status ld_session_eval_batch(const ld_session_part *parts, int n, ld_error *err)
{
    if (n < 1 || !parts[0].s) return LD_FAIL(err, LD_ERR_USAGE, 0, "a batch needs at least one session");
    ld_session *w = parts[0].s;
    ld_batch_seq *seqs = calloc((size_t)n, sizeof *seqs);
    dense_batch b = {parts, calloc((size_t)n, sizeof *b.r)};
    ld_status st = seqs && b.r ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int i = 0; st == LD_OK && i < n; i++) {
        const ld_session *s = parts[i].s;
        if (s && s->slice) {
            st = LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice's session runs hidden rows (ld_session_eval_slice), "
                         "not tokens");
            break;
        }
        seqs[i] = (ld_batch_seq){s, parts[i].tokens, parts[i].T, parts[i].logits, parts[i].hidden, s ? s->max_batch : 0,
                                 s ? s->pos : 0, s ? s->max_seq : 0, w->m->cfg.vocab,
                                 s && s->m == w->m && s->be == w->be,
                                 s && (s->reduce != w->reduce || s->reduce_ctx != w->reduce_ctx)};
    }
    if (st == LD_OK)
        st = ld_batch_run(seqs, n, w->max_batch, OPS(w)->buf_view != NULL, "model and backend", dense_round, &b, err);
    free(seqs);
    free(b.r);
    return st;
}

ld_status ld_session_eval(ld_session *s, const int32_t *tokens, int T, float *logits, float *hidden, ld_error *err)
{
    ld_session_part p = {s, tokens, T, logits, hidden};
    return ld_session_eval_batch(&p, 1, err);
}

/* ---------------------------------------------------------------- slices */

ld_status ld_session_create_slice(const ld_model *m, ld_backend *be, int first, int last, int max_seq, int max_batch,
                                  ld_session **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_session_check_slice(first, last, m->cfg.n_layers, err));
    ld_session *s;
    LD_TRY(session_new(m, be, first, last, 1, max_seq, max_batch, &s, err));
    ld_status st = load_weights(s, err);
    if (st != LD_OK) {
        ld_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

ld_status ld_session_eval_slice(ld_session *s, const float *x, int T, float *out, ld_error *err)
{
    if (!s->slice) return LD_FAIL(err, LD_ERR_USAGE, 0, "not a layer slice's session (ld_session_create_slice)");
    LD_TRY(ld_session_check_rows(T, s->pos, s->max_seq, err));
    size_t D = (size_t)s->m->cfg.hidden;
    for (int t0 = 0; t0 < T; t0 += s->max_batch) {
        int n = T - t0 < s->max_batch ? T - t0 : s->max_batch;
        seq_rows r = {s, n, 0, t0, T, out, NULL, NULL, NULL, NULL};
        LD_TRY(OPS(s)->buf_write(s->be, s->x, 0, x + (size_t)t0 * D, (size_t)n * D, err));
        ld_status st = make_views(s, &r, 1, err);
        if (st == LD_OK) st = layers(s, &r, 1, n, err);
        free_views(s, &r, 1);
        LD_TRY(st);
        s->pos += n;
    }
    return LD_OK;
}
