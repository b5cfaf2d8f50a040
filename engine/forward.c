/* forward.c - see forward.h. */
#include "forward.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session_args.h"

typedef struct sess_layer {
    ld_weight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *q_norm, *k_norm;
    ld_weight *ffn_norm, *w_gate, *w_up, *w_down, *b_gate, *b_up, *b_down;
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
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) unload(s, ws[i]);
            OPS(s)->buf_free(s->be, L->kc);
            OPS(s)->buf_free(s->be, L->vc);
        }
    }
    unload(s, s->embed);
    unload(s, s->norm);
    if (s->lm_head != s->embed) unload(s, s->lm_head);
    ld_buf *bs[] = {s->x, s->xb, s->q, s->k, s->v, s->att, s->g, s->u, s->logits};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) OPS(s)->buf_free(s->be, bs[i]);
    free(s->layers);
    free(s->inv_freq);
    free(s);
}

/* The bytes of the buffers a session allocates (KV caches and the chunk's
 * activations), in double so that no product overflows. */
static double session_bytes(const ld_model_config *c, int max_seq, int max_batch, double *kv)
{
    double KV = (double)c->n_kv_heads * c->head_dim, Q = (double)c->n_heads * c->head_dim;
    *kv = 2.0 * c->n_layers * max_seq * KV * sizeof(float);
    double act = (double)max_batch * (2.0 * c->hidden + 2.0 * Q + 2.0 * KV + 2.0 * c->intermediate + c->vocab);
    return *kv + act * sizeof(float);
}

/* Refuses, before allocating, a session larger than the machine's memory:
 * a clear error rather than a process the kernel kills. */
static ld_status check_memory(const ld_model_config *c, int max_seq, int max_batch, ld_error *err)
{
    double kv, need = session_bytes(c, max_seq, max_batch, &kv);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    if (need > (double)SIZE_MAX / 2 || (have > 0 && need > have))
        return LD_FAIL(err, LD_ERR_LIMIT, 0,
                       "a session of %d positions needs %.1f GiB (KV cache %.1f GiB), more than the %.1f GiB of "
                       "memory of this machine",
                       max_seq, need / 1073741824.0, kv / 1073741824.0, have / 1073741824.0);
    return LD_OK;
}

ld_status ld_session_create(const ld_model *m, ld_backend *be, int max_seq, int max_batch,
                            ld_session **out, ld_error *err)
{
    *out = NULL;
    const ld_model_config *c = &m->cfg;
    if (max_seq < 1 || max_batch < 1 || max_seq > c->max_pos)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "max_seq %d and max_batch %d must be >= 1 and max_seq <= %d",
                       max_seq, max_batch, c->max_pos);
    if (max_batch > max_seq) max_batch = max_seq;
    LD_TRY(check_memory(c, max_seq, max_batch, err));
    ld_session *s = calloc(1, sizeof *s);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    s->m = m;
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
#define LOAD(w, t) \
    if (st == LD_OK) st = load(s, (t), &(w), err)
    ALLOC(s->x, B * D);
    ALLOC(s->xb, B * D);
    ALLOC(s->q, B * Q);
    ALLOC(s->k, B * KV);
    ALLOC(s->v, B * KV);
    ALLOC(s->att, B * Q);
    ALLOC(s->g, B * I);
    ALLOC(s->u, B * I);
    ALLOC(s->logits, B * (size_t)c->vocab);
    LOAD(s->embed, &m->embed);
    LOAD(s->norm, &m->norm);
    if (c->tie_embeddings) s->lm_head = s->embed;
    else LOAD(s->lm_head, &m->lm_head);
    for (int l = 0; l < c->n_layers && st == LD_OK; l++) {
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
        ALLOC(L->kc, (size_t)max_seq * KV);
        ALLOC(L->vc, (size_t)max_seq * KV);
    }
#undef ALLOC
#undef LOAD
    if (st != LD_OK) {
        ld_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

void ld_session_set_reduce(ld_session *s, ld_session_reduce_fn fn, void *ctx)
{
    s->reduce = fn;
    s->reduce_ctx = ctx;
}

int ld_session_pos(const ld_session *s)
{
    return s->pos;
}

void ld_session_reset(ld_session *s)
{
    s->pos = 0;
}

/* rows [t0, t0+n) of plane p of hidden [planes][T][D] */
static ld_status trace(ld_session *s, const ld_buf *b, float *hidden, int plane, int T, int t0, int n, ld_error *err)
{
    if (!hidden) return LD_OK;
    size_t D = (size_t)s->m->cfg.hidden;
    return OPS(s)->buf_read(s->be, b, 0, hidden + ((size_t)plane * (size_t)T + (size_t)t0) * D, (size_t)n * D, err);
}

static ld_status chunk(ld_session *s, const int32_t *tokens, int n, int T, int t0, float *logits, float *hidden,
                       ld_error *err)
{
    const ld_model_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    int pos0 = s->pos, hd = c->head_dim;
    size_t D = (size_t)c->hidden, I = (size_t)c->intermediate;
    int KV = c->n_kv_heads * hd;

    LD_TRY(o->embed(be, s->x, s->embed, tokens, n, err));
    LD_TRY(trace(s, s->x, hidden, 0, T, t0, n, err));
    for (int l = 0; l < c->n_layers; l++) {
        sess_layer *L = &s->layers[l];
        LD_TRY(o->rmsnorm(be, s->xb, s->x, L->attn_norm, n, c->rms_eps, err));
        LD_TRY(o->matmul(be, s->q, s->xb, L->wq, L->bq, n, err));
        LD_TRY(o->matmul(be, s->k, s->xb, L->wk, L->bk, n, err));
        LD_TRY(o->matmul(be, s->v, s->xb, L->wv, L->bv, n, err));
        if (c->qk_norm) {
            LD_TRY(o->rmsnorm(be, s->q, s->q, L->q_norm, n * c->n_heads, c->rms_eps, err));
            LD_TRY(o->rmsnorm(be, s->k, s->k, L->k_norm, n * c->n_kv_heads, c->rms_eps, err));
        }
        LD_TRY(o->rope(be, s->q, n, c->n_heads, hd, pos0, s->inv_freq, err));
        LD_TRY(o->rope(be, s->k, n, c->n_kv_heads, hd, pos0, s->inv_freq, err));
        LD_TRY(o->kv_store(be, L->kc, s->k, n, pos0, KV, err));
        LD_TRY(o->kv_store(be, L->vc, s->v, n, pos0, KV, err));
        LD_TRY(o->attention(be, s->att, s->q, L->kc, L->vc, n, pos0, c->n_heads, c->n_kv_heads, hd, c->window[l],
                            s->scale, err));
        LD_TRY(o->matmul(be, s->xb, s->att, L->wo, L->bo, n, err));
        if (s->reduce) LD_TRY(s->reduce(s->reduce_ctx, be, s->xb, n, l, 0, err));
        LD_TRY(o->add(be, s->x, s->xb, (size_t)n * D, err));
        LD_TRY(o->rmsnorm(be, s->xb, s->x, L->ffn_norm, n, c->rms_eps, err));
        LD_TRY(o->matmul(be, s->g, s->xb, L->w_gate, L->b_gate, n, err));
        LD_TRY(o->matmul(be, s->u, s->xb, L->w_up, L->b_up, n, err));
        LD_TRY(o->swiglu(be, s->g, s->g, s->u, (size_t)n * I, err));
        LD_TRY(o->matmul(be, s->xb, s->g, L->w_down, L->b_down, n, err));
        if (s->reduce) LD_TRY(s->reduce(s->reduce_ctx, be, s->xb, n, l, 1, err));
        LD_TRY(o->add(be, s->x, s->xb, (size_t)n * D, err));
        LD_TRY(trace(s, s->x, hidden, 1 + l, T, t0, n, err));
    }
    LD_TRY(o->rmsnorm(be, s->xb, s->x, s->norm, n, c->rms_eps, err));
    LD_TRY(trace(s, s->xb, hidden, c->n_layers + 1, T, t0, n, err));
    if (logits) {
        size_t V = (size_t)c->vocab;
        LD_TRY(o->matmul(be, s->logits, s->xb, s->lm_head, NULL, n, err));
        LD_TRY(o->buf_read(be, s->logits, 0, logits + (size_t)t0 * V, (size_t)n * V, err));
    }
    s->pos += n;
    return LD_OK;
}

ld_status ld_session_eval(ld_session *s, const int32_t *tokens, int T, float *logits, float *hidden, ld_error *err)
{
    LD_TRY(ld_session_check_eval(tokens, T, s->pos, s->max_seq, s->m->cfg.vocab, err));
    for (int t0 = 0; t0 < T; t0 += s->max_batch) {
        int n = T - t0 < s->max_batch ? T - t0 : s->max_batch;
        LD_TRY(chunk(s, tokens + t0, n, T, t0, logits, hidden, err));
    }
    return LD_OK;
}
