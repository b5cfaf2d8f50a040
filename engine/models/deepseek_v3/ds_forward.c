/* ds_forward.c - DeepSeek-V3 / V3.2's forward pass (ds_forward.h): a layer's
 * FFN (dense, or the router and the routed and shared experts), the layers
 * over a chunk of rows, the logits, batches of sessions and slices; the
 * attention is ds_attention.c's, the session ds_session.c's. */
#include <stdlib.h>
#include <string.h>

#include "ds_internal.h"

/* rows [t0, t0+n) of plane p of hidden [planes][T][D]; in a batch's
 * chunk, each part's rows into its own planes */
static ld_status trace(ld_ds_session *s, const ld_buf *b, float *hidden, int plane, int T, int t0, int n,
                       ld_error *err)
{
    size_t D = (size_t)s->m->cfg.hidden;
    if (s->rows) return ld_batch_trace(s->be, b, s->rows, s->nparts, plane, D, err);
    if (!hidden) return LD_OK;
    if (s->slice) plane -= s->first + 1; /* a slice's out holds the planes after its layers */
    return OPS(s)->buf_read(s->be, b, 0, hidden + ((size_t)plane * (size_t)T + (size_t)t0) * D, (size_t)n * D,
                            err);
}

/* SwiGLU MLP (intermediate width `width`) of `n` rows of `x` into `out` */
static ld_status swiglu_mlp(ld_ds_session *s, const ds_mlp *w, int width, ld_buf *out, const ld_buf *x, int n,
                            ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    LD_TRY(o->matmul(s->be, s->g, x, w->gate, NULL, n, err));
    LD_TRY(o->matmul(s->be, s->u, x, w->up, NULL, n, err));
    LD_TRY(o->swiglu(s->be, s->g, s->g, s->u, (size_t)n * (size_t)width, err));
    return o->matmul(s->be, out, s->g, w->down, NULL, n, err);
}

/* the router of the n rows into s->idx, s->wts: from the logits in s->rl
 * (in s->hrl with router=bf16, which computes them on the host) by the
 * backend's ds_route, else on the host from s->hrl */
static ld_status route(ld_ds_session *s, int l, int n, int logits_on_host, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    const float *bias = c->score_bias ? s->layers[l].router_bias : NULL;
    /* combine=fused: the weights unscaled, the scaling on the routed sum */
    float scale = s->k.v[LD_KOP_COMBINE] == LD_KV_FUSED ? 1.0f : c->routed_scaling;
    if (!o->ds_route) {
        ld_ref_ds_route(s->idx, s->wts, s->hrl, bias, c->n_routed, c->n_group, c->topk_group, c->top_k,
                        c->norm_topk_prob, scale, 0, (size_t)n);
        return LD_OK;
    }
    if (logits_on_host) LD_TRY(o->buf_write(s->be, s->rl, 0, s->hrl, (size_t)n * (size_t)c->n_routed, err));
    return o->ds_route(s->be, s->idx, s->wts, s->rl, bias, n, c->n_routed, c->n_group, c->topk_group, c->top_k,
                       c->norm_topk_prob, scale, err);
}

/* MoE of the n rows of s->xb into s->y; experts chosen into s->idx */
/* the routed and shared experts of the n rows of s->xb into s->y by the
 * backend's moe entry (the host loop's bits); LD_ERR_UNSUPPORTED (nothing
 * written) when the backend has none or lacks the combine variant */
static ld_status moe_entry(ld_ds_session *s, ds_layer *L, int n, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    if (!OPS(s)->moe) return LD_ERR_UNSUPPORTED;
    ld_kvar comb = s->k.v[LD_KOP_COMBINE];
    int combine = comb == LD_KV_FUSED ? LD_MOE_COMBINE_FUSED : comb == LD_KV_BF16 ? LD_MOE_COMBINE_BF16
                                                                                  : LD_MOE_COMBINE_REF;
    ld_error e = {0};
    ld_status st = OPS(s)->moe(s->be, s->y, s->xb, s->idx, s->wts, n, c->top_k, L->experts, c->n_routed,
                               c->n_shared ? &L->mlp : NULL, LD_MOE_ACT_SILU, 0.0f, combine, c->routed_scaling, &e);
    if (st != LD_OK && st != LD_ERR_UNSUPPORTED && err) *err = e;
    return st;
}

static ld_status moe(ld_ds_session *s, int l, int n, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    ds_layer *L = &s->layers[l];
    size_t N = (size_t)n, D = (size_t)c->hidden, E = (size_t)c->n_routed, K = (size_t)c->top_k;
    const ld_model_tensor *rt = &s->m->layers[l].router;
    int router_bf16 = s->k.v[LD_KOP_ROUTER] == LD_KV_BF16;
    ld_kvar comb = s->k.v[LD_KOP_COMBINE];
    if (router_bf16 && rt->host.quant != LD_WQ_NONE)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "router=bf16 needs a plain F32/F16/BF16 gate weight");
    if (router_bf16) { /* bf16 operands, bf16 logits (the official V3 gate); the
                             storage dtypes F32/F16/BF16 are numbered as ld_kdt's */
        LD_TRY(o->buf_read(be, s->xb, 0, s->hx, N * D, err));
        ld_var_matmul_bf16(s->hrl, s->hx, rt->host.data, (ld_kdt)rt->host.dtype, NULL, LD_KDT_F32, n, (int)D,
                           (int)E, 0, s->hxe, 0, E);
        for (size_t i = 0; i < N * E; i++) s->hrl[i] = ld_var_bf16_round(s->hrl[i]);
    } else {
        LD_TRY(o->matmul(be, s->rl, s->xb, L->router, NULL, n, err));
        if (!o->ds_route) LD_TRY(o->buf_read(be, s->rl, 0, s->hrl, N * E, err));
    }
    LD_TRY(route(s, l, n, router_bf16, err));
    if (!s->moe_host) {
        ld_status st = moe_entry(s, L, n, err);
        if (st != LD_ERR_UNSUPPORTED) return st;
        s->moe_host = 1;
    }
    LD_TRY(o->buf_read(be, s->xb, 0, s->hx, N * D, err));
    memset(s->hy, 0, N * D * sizeof *s->hy);
    /* experts in ascending id; each runs on the rows routed to it */
    for (int e = 0; e < c->n_routed; e++) {
        int cnt = ld_ref_moe_gather(s->sel_t, s->sel_w, s->hxe, s->hx, s->idx, s->wts, N, K, D, e);
        if (!cnt) continue;
        LD_TRY(o->buf_write(be, s->xe, 0, s->hxe, (size_t)cnt * D, err));
        LD_TRY(swiglu_mlp(s, &L->experts[e], c->moe_intermediate, s->xe, s->xe, cnt, err));
        LD_TRY(o->buf_read(be, s->xe, 0, s->hxe, (size_t)cnt * D, err));
        for (int i = 0; i < cnt; i++) {
            float *y = s->hy + (size_t)s->sel_t[i] * D, *v = s->hxe + (size_t)i * D;
            if (comb != LD_KV_BF16) {
                ld_ref_ds_axpy(y, v, s->sel_w[i], 0, D);
                continue;
            }
            float w = ld_var_bf16_round(s->sel_w[i]); /* bf16 tensors: y += expert(x) * w */
            for (size_t j = 0; j < D; j++)
                y[j] = ld_var_bf16_round(y[j] + ld_var_bf16_round(ld_var_bf16_round(v[j]) * w));
        }
    }
    if (comb == LD_KV_FUSED) ld_ref_ds_scale(s->hy, c->routed_scaling, 0, N * D);
    LD_TRY(o->buf_write(be, s->y, 0, s->hy, N * D, err));
    if (c->n_shared) {
        LD_TRY(swiglu_mlp(s, &L->mlp, c->moe_intermediate * c->n_shared, s->xe, s->xb, n, err));
        LD_TRY(o->add(be, s->y, s->xe, N * D, err));
    }
    return LD_OK;
}

/* the n rows through every layer and the final norm into s->xb */
static ld_status rows_forward(ld_ds_session *s, const int32_t *tokens, int n, int T, int t0, float *hidden,
                              int32_t *experts, int32_t *selected, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    size_t D = (size_t)c->hidden, N = (size_t)n, K = (size_t)c->top_k;

    if (!s->slice) { /* a slice's rows are in s->x already */
        LD_TRY(o->embed(be, s->x, s->embed, tokens, n, err));
        LD_TRY(trace(s, s->x, hidden, 0, T, t0, n, err));
    }
    for (int l = s->first; l < s->last; l++) {
        ds_layer *L = &s->layers[l];
        LD_TRY(o->rmsnorm(be, s->xb, s->x, L->attn_norm, n, c->rms_eps, err));
        LD_TRY(s->parts ? ld_ds_attention_parts(s, l, n, err) : ld_ds_attention(s, l, n, err));
        if (selected && c->v32) {
            size_t KT = (size_t)c->index_topk;
            int32_t *dst = selected + ((size_t)l * (size_t)T + (size_t)t0) * KT;
            for (size_t t = 0; t < N; t++) {
                size_t j = 0;
                for (; j < (size_t)s->kc; j++) dst[t * KT + j] = s->sel[t * (size_t)s->kc + j];
                for (; j < KT; j++) dst[t * KT + j] = -1;
            }
        }
        LD_TRY(o->add(be, s->x, s->xb, N * D, err));
        LD_TRY(o->rmsnorm(be, s->xb, s->x, L->ffn_norm, n, c->rms_eps, err));
        int32_t *ex = experts ? experts + ((size_t)l * (size_t)T + (size_t)t0) * K : NULL;
        if (s->m->layers[l].moe) {
            LD_TRY(moe(s, l, n, err));
            if (s->reduce) LD_TRY(s->reduce(s->reduce_ctx, be, s->y, n, l, 1, err));
            LD_TRY(o->add(be, s->x, s->y, N * D, err));
            if (ex) memcpy(ex, s->idx, N * K * sizeof *ex);
        } else {
            LD_TRY(swiglu_mlp(s, &L->mlp, c->intermediate, s->xb, s->xb, n, err));
            if (s->reduce) LD_TRY(s->reduce(s->reduce_ctx, be, s->xb, n, l, 1, err));
            LD_TRY(o->add(be, s->x, s->xb, N * D, err));
            if (ex)
                for (size_t i = 0; i < N * K; i++) ex[i] = -1;
        }
        LD_TRY(trace(s, s->x, hidden, 1 + l, T, t0, n, err));
    }
    if (s->slice) return LD_OK;
    LD_TRY(o->rmsnorm(be, s->xb, s->x, s->norm, n, c->rms_eps, err));
    return trace(s, s->xb, hidden, c->n_layers + 1, T, t0, n, err);
}

static ld_status chunk(ld_ds_session *s, const int32_t *tokens, int n, int T, int t0, float *logits, float *hidden,
                       int32_t *experts, int32_t *selected, ld_error *err)
{
    LD_TRY(rows_forward(s, tokens, n, T, t0, hidden, experts, selected, err));
    if (logits) {
        size_t V = (size_t)s->m->cfg.vocab;
        LD_TRY(OPS(s)->matmul(s->be, s->logits, s->xb, s->lm_head, NULL, n, err));
        LD_TRY(OPS(s)->buf_read(s->be, s->logits, 0, logits + (size_t)t0 * V, (size_t)n * V, err));
    }
    s->pos += n;
    return LD_OK;
}

/* a batch's chunk of N rows (tokens [N]) on s's weights and scratch: the
 * parts' rows (p [np], rows [np]: the same parts), their logits and
 * positions */
static ld_status batch_chunk(ld_ds_session *s, const ds_part *p, const ld_batch_rows *rows, int np,
                             const int32_t *tokens, int N, ld_error *err)
{
    s->parts = p;
    s->rows = rows;
    s->nparts = np;
    ld_status st = rows_forward(s, tokens, N, N, 0, NULL, NULL, NULL, err);
    s->parts = NULL;
    s->rows = NULL;
    s->nparts = 0;
    LD_TRY(st);
    LD_TRY(ld_batch_logits(s->be, s->logits, s->xb, s->lm_head, rows, np, N, (size_t)s->m->cfg.vocab, err));
    for (int i = 0; i < np; i++) p[i].s->pos += p[i].n;
    return LD_OK;
}

/* a batch being run: its parts, and room for a round's */
typedef struct batch_ctx {
    const ld_ds_session_part *parts;
    ds_part *p;
} batch_ctx;

static ld_status batch_round(void *ctx, const ld_batch_rows *rows, int nrows, const int32_t *tokens, int N,
                             ld_error *err)
{
    batch_ctx *b = ctx;
    ld_ds_session *w = b->parts[0].s;
    /* a round of the lead's rows alone is a plain chunk */
    if (nrows == 1 && rows[0].part == 0)
        return chunk(w, tokens, N, rows[0].T, rows[0].t0, b->parts[0].logits, b->parts[0].hidden, NULL, NULL, err);
    for (int k = 0; k < nrows; k++) b->p[k] = (ds_part){b->parts[rows[k].part].s, rows[k].row, rows[k].n};
    return batch_chunk(w, b->p, rows, nrows, tokens, N, err);
}

/* s may share a batch that lead leads: the same model, backend, MLA form
 * and variants */
static int batch_mate(const ld_ds_session *s, const ld_ds_session *lead)
{
    static const ld_kop kops[] = {LD_KOP_ROUTER, LD_KOP_COMBINE, LD_KOP_INDEXER, LD_KOP_ROPE};
    int same = s->m == lead->m && s->be == lead->be && s->attn == lead->attn;
    for (size_t k = 0; same && k < sizeof kops / sizeof kops[0]; k++) same = s->k.v[kops[k]] == lead->k.v[kops[k]];
    return same;
}

ld_status ld_ds_session_eval_batch(const ld_ds_session_part *parts, int n, ld_error *err)
{
    if (n < 1 || !parts[0].s) return LD_FAIL(err, LD_ERR_USAGE, 0, "a batch needs at least one session");
    ld_ds_session *w = parts[0].s;
    ld_batch_seq *seqs = calloc((size_t)n, sizeof *seqs);
    batch_ctx b = {parts, calloc((size_t)n, sizeof *b.p)};
    ld_status st = seqs && b.p ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int i = 0; st == LD_OK && i < n; i++) {
        const ld_ds_session *s = parts[i].s;
        if (s && s->slice) {
            st = LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice's session runs hidden rows "
                         "(ld_ds_session_eval_slice), not tokens");
            break;
        }
        seqs[i] = (ld_batch_seq){s, parts[i].tokens, parts[i].T, parts[i].logits, parts[i].hidden,
                                 s ? s->max_batch : 0,
                                 s ? s->pos : 0, s ? s->max_seq : 0, w->m->cfg.vocab, s && batch_mate(s, w),
                                 s && (s->reduce != w->reduce || s->reduce_ctx != w->reduce_ctx)};
    }
    if (st == LD_OK)
        st = ld_batch_run(seqs, n, w->max_batch, OPS(w)->buf_view != NULL, "model, backend, MLA form and variants",
                          batch_round, &b, err);
    free(seqs);
    free(b.p);
    return st;
}

ld_status ld_ds_session_eval(ld_ds_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                             int32_t *experts, ld_error *err)
{
    return ld_ds_session_eval_sel(s, tokens, T, logits, hidden, experts, NULL, err);
}

ld_status ld_ds_session_eval_sel(ld_ds_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                 int32_t *experts, int32_t *selected, ld_error *err)
{
    if (s->slice)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice's session runs hidden rows (ld_ds_session_eval_slice), "
                       "not tokens");
    LD_TRY(ld_session_check_eval(tokens, T, s->pos, s->max_seq, s->m->cfg.vocab, err));
    for (int t0 = 0; t0 < T; t0 += s->max_batch) {
        int n = T - t0 < s->max_batch ? T - t0 : s->max_batch;
        LD_TRY(chunk(s, tokens + t0, n, T, t0, logits, hidden, experts, selected, err));
    }
    return LD_OK;
}

ld_status ld_ds_session_eval_slice(ld_ds_session *s, const float *x, int T, float *out, ld_error *err)
{
    if (!s->slice) return LD_FAIL(err, LD_ERR_USAGE, 0, "not a layer slice's session (ld_ds_session_create_slice)");
    LD_TRY(ld_session_check_rows(T, s->pos, s->max_seq, err));
    size_t D = (size_t)s->m->cfg.hidden;
    for (int t0 = 0; t0 < T; t0 += s->max_batch) {
        int n = T - t0 < s->max_batch ? T - t0 : s->max_batch;
        LD_TRY(OPS(s)->buf_write(s->be, s->x, 0, x + (size_t)t0 * D, (size_t)n * D, err));
        LD_TRY(rows_forward(s, NULL, n, T, t0, out, NULL, NULL, err));
        s->pos += n;
    }
    return LD_OK;
}
