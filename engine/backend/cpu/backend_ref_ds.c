/* backend_ref_ds.c - the CPU backends' DeepSeek entries: MLA (latent,
 * absorbed), V3's router, the indexer's top-k, V4's mHC (hc_pre, hc_post)
 * and router, over kernels/ref/ref_ds*.h's leaves. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ref_internal.h"

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

ld_status ld_refb_mla_latent(ld_backend *be, ld_buf *o_lat, const ld_buf *q_abs, const ld_buf *q, const ld_buf *ckv,
                            const ld_buf *kpe, int T, int pos0, int n_heads, int dn, int dr, int c, float scale,
                            const int32_t *sel, int k, int split, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds_args_latent(T, pos0, n_heads, dn, dr, c, sel, k, split, err));
    size_t rows = (size_t)T * (size_t)n_heads, S = (size_t)pos0 + (size_t)T;
    LD_TRY(ld_refb_range(o_lat, 0, rows * (size_t)c, err));
    LD_TRY(ld_refb_range(q_abs, 0, rows * (size_t)c, err));
    LD_TRY(ld_refb_range(q, 0, rows * (size_t)(dn + dr), err));
    LD_TRY(ld_refb_range(ckv, 0, S * (size_t)c, err));
    LD_TRY(ld_refb_range(kpe, 0, S * (size_t)dr, err));
    if (sel) LD_TRY(ld_ds_args_sel(sel, T, pos0, k, err));
    LD_TRY(ld_refb_need_scratch(rb, S + (size_t)c, err));
    mla_ctx m = {.rb = rb, .o_lat = o_lat->p, .q_abs = q_abs->p, .q = q->p, .ckv = ckv->p, .kpe = kpe->p,
                 .sel = sel, .n_heads = n_heads, .dn = dn, .dr = dr, .c = c, .pos0 = pos0, .k = k,
                 .split = split, .n_scores = S, .scale = scale};
    ld_refb_run_items(rb, t_mla_latent, &m, rows, (double)rows * (double)S * (double)(c + dr));
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

ld_status ld_refb_mla_absorb_q(ld_backend *be, ld_buf *q_abs, const ld_buf *q, const ld_weight *w, int T, int n_heads,
                              int dn, int dr, int dv, int c, ld_error *err)
{
    LD_TRY(ld_ds_args_absorb(w->dt, w->rows, w->cols, w->rope_hd, T, n_heads, dn, dr, dv, c, err));
    size_t rows = (size_t)T * (size_t)n_heads;
    LD_TRY(ld_refb_range(q_abs, 0, rows * (size_t)c, err));
    LD_TRY(ld_refb_range(q, 0, rows * (size_t)(dn + dr), err));
    absorb_ctx a = {.out = q_abs->p, .in = q->p, .w = w, .n_heads = n_heads, .dn = dn, .dr = dr, .dv = dv, .c = c};
    ld_refb_run_items((ref_backend *)be, t_absorb_q, &a, rows, (double)rows * (double)dn * (double)c);
    return LD_OK;
}

ld_status ld_refb_mla_absorb_out(ld_backend *be, ld_buf *out, const ld_buf *o_lat, const ld_weight *w, int T,
                                int n_heads, int dn, int dv, int c, ld_error *err)
{
    LD_TRY(ld_ds_args_absorb(w->dt, w->rows, w->cols, w->rope_hd, T, n_heads, dn, 0, dv, c, err));
    size_t rows = (size_t)T * (size_t)n_heads;
    LD_TRY(ld_refb_range(out, 0, rows * (size_t)dv, err));
    LD_TRY(ld_refb_range(o_lat, 0, rows * (size_t)c, err));
    absorb_ctx a = {.out = out->p, .in = o_lat->p, .w = w, .n_heads = n_heads, .dn = dn, .dv = dv, .c = c};
    ld_refb_run_items((ref_backend *)be, t_absorb_out, &a, rows, (double)rows * (double)dv * (double)c);
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

ld_status ld_refb_ds_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias, int T,
                          int E, int n_group, int topk_group, int top_k, int norm, float scale, ld_error *err)
{
    LD_TRY(ld_ds_args_route(T, E, n_group, topk_group, top_k, err));
    LD_TRY(ld_refb_range(logits, 0, (size_t)T * (size_t)E, err));
    route_ctx r = {.idx = idx, .w = w, .logits = logits->p, .bias = bias, .E = E, .n_group = n_group,
                   .topk_group = topk_group, .top_k = top_k, .norm = norm, .scale = scale};
    ld_refb_run_items((ref_backend *)be, t_ds_route, &r, (size_t)T, (double)T * (double)E * 16.0);
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

ld_status ld_refb_index_topk(ld_backend *be, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys, int T,
                            int pos0, int n_heads, int dim, int k, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds_args_index(T, pos0, n_heads, dim, k, err));
    size_t S = (size_t)pos0 + (size_t)T;
    LD_TRY(ld_refb_range(q, 0, (size_t)T * (size_t)n_heads * (size_t)dim, err));
    LD_TRY(ld_refb_range(w, 0, (size_t)T * (size_t)n_heads, err));
    LD_TRY(ld_refb_range(keys, 0, S * (size_t)dim, err));
    LD_TRY(ld_refb_need_scratch(rb, S, err));
    LD_TRY(ld_refb_need_iscratch(rb, (size_t)k, err));
    index_ctx x = {.rb = rb, .sel = sel, .q = q->p, .w = w->p, .keys = keys->p, .pos0 = pos0, .n_heads = n_heads,
                   .dim = dim, .k = k};
    ld_refb_run_items(rb, t_index_topk, &x, (size_t)T, (double)T * (double)S * (double)n_heads * (double)dim);
    return LD_OK;
}


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

ld_status ld_refb_hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                        const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                        float norm_eps, float hc_eps, int variant, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds_args_hc_pre(T, N, D, iters, variant, err));
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T, hc = (2 + n) * n;
    LD_TRY(ld_refb_range(post, 0, tt * n, err));
    LD_TRY(ld_refb_range(comb, 0, tt * n * n, err));
    LD_TRY(ld_refb_range(collapsed, 0, tt * d, err));
    LD_TRY(ld_refb_range(X, 0, tt * n * d, err));
    LD_TRY(ld_refb_range(fn, 0, hc * n * d, err));
    LD_TRY(ld_refb_need_scratch(rb, n * d + hc, err));
    hc_ctx h = {.rb = rb, .post = post->p, .comb = comb->p, .out = collapsed->p, .X = X->p, .fn = fn->p,
                .base = base, .scale = scale, .N = N, .D = D, .iters = iters, .variant = variant,
                .norm_eps = norm_eps, .hc_eps = hc_eps};
    ld_refb_run_items(rb, t_hc_pre, &h, tt, (double)tt * (double)hc * (double)(n * d));
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

ld_status ld_refb_hc_post(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *f, const ld_buf *post,
                         const ld_buf *comb, int T, int N, int D, ld_error *err)
{
    LD_TRY(ld_ds_args_hc_post(T, N, D, err));
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T;
    LD_TRY(ld_refb_range(out, 0, tt * n * d, err));
    LD_TRY(ld_refb_range(X, 0, tt * n * d, err));
    LD_TRY(ld_refb_range(f, 0, tt * d, err));
    LD_TRY(ld_refb_range(post, 0, tt * n, err));
    LD_TRY(ld_refb_range(comb, 0, tt * n * n, err));
    if (out->p == X->p && tt) return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_post: out aliases X");
    hc_ctx h = {.out = out->p, .X = X->p, .f = f->p, .post = post->p, .comb = comb->p, .N = N, .D = D};
    ld_refb_run_items((ref_backend *)be, t_hc_post, &h, tt, (double)tt * (double)(n + 1) * (double)(n * d));
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

ld_status ld_refb_ds4_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias,
                           const int32_t *hash, int T, int E, int K, float scale, ld_error *err)
{
    LD_TRY(ld_ds_args_ds4_route(T, E, K, hash, err));
    LD_TRY(ld_refb_range(logits, 0, (size_t)T * (size_t)E, err));
    ds4_route_ctx r = {.idx = idx, .w = w, .logits = logits->p, .bias = bias, .hash = hash, .E = E, .K = K,
                       .scale = scale};
    ld_refb_run_items((ref_backend *)be, t_ds4_route, &r, (size_t)T, (double)T * (double)E * 16.0);
    return LD_OK;
}
