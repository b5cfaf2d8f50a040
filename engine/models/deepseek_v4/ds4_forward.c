/* ds4_forward.c - the DeepSeek-V4 session (ds4_forward.h):
 * a layer's MoE and mHC sites, the head, a chunk's rows, the evals, the
 * batches and the slices' evals; the attention is ds4_attention.c's,
 * the making ds4_session.c's (ds4_internal.h). */
#include "ds4_internal.h"

/* clamped SwiGLU MLP of n rows of backend `x` into host `out` [n][D] */
static ld_status mlp(ld_ds4_session *s, const ds4_mlp *w, const ld_buf *x, int n, float *out, ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    const ld_ds4_config *c = &s->m->cfg;
    size_t NI = (size_t)n * (size_t)c->moe_intermediate;
    LD_TRY(o->matmul(s->be, s->g, x, w->gate, NULL, n, err));
    LD_TRY(o->matmul(s->be, s->u, x, w->up, NULL, n, err));
    LD_TRY(o->buf_read(s->be, s->g, 0, s->hg, NI, err));
    LD_TRY(o->buf_read(s->be, s->u, 0, s->hup, NI, err));
    ld_ref_ds4_clamped_swiglu(s->hg, s->hg, s->hup, c->swiglu_limit, NI);
    LD_TRY(o->buf_write(s->be, s->g, 0, s->hg, NI, err));
    LD_TRY(o->matmul(s->be, s->u, s->g, w->down, NULL, n, err));
    return o->buf_read(s->be, s->u, 0, out, (size_t)n * (size_t)c->hidden, err);
}

/* an entry's answer: LD_ERR_UNSUPPORTED (nothing written) sends this and
 * every later call to the host loop; else the MoE is in s->bmoe, *f =
 * s->bmoe for hc_post (into host s->hf, *f NULL, when the mixing is on the
 * host) */
static ld_status moe_entry_done(ld_ds4_session *s, ld_status st, const ld_error *e, int n, const ld_buf **f,
                                ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    if (st == LD_ERR_UNSUPPORTED) {
        s->moe_host = 1;
        return LD_OK;
    }
    if (st != LD_OK) {
        if (err) *err = *e;
        return st;
    }
    if (!s->hc_host) {
        *f = s->bmoe;
        return LD_OK;
    }
    return OPS(s)->buf_read(s->be, s->bmoe, 0, s->hf, (size_t)n * (size_t)c->hidden, err);
}

/* The MoE (routed experts, then the shared one) of the n rows of s->xb by
 * the backend's moe entry over the route in s->idx / s->wts.  combine=bf16
 * is not V4's (the host loop ignores it): ref. */
static ld_status moe_entry(ld_ds4_session *s, ds4_layer *L, int n, int fused, const ld_buf **f, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    ld_error e = {0};
    ld_status st = OPS(s)->moe(s->be, s->bmoe, s->xb, s->idx, s->wts, n, c->top_k, L->experts, c->n_routed,
                               &L->shared, LD_MOE_ACT_CLAMPED, c->swiglu_limit,
                               fused ? LD_MOE_COMBINE_FUSED : LD_MOE_COMBINE_REF, c->routed_scaling, &e);
    return moe_entry_done(s, st, &e, n, f, err);
}

/* The router and the moe entry in one call (ds4_route_moe), the router's
 * matmul too (the entry computes the logits into s->rl): the route
 * comes back into s->idx / s->wts only when this chunk records its
 * experts, else it may stay where the backend computed it.  *done = 0 when
 * the entry refused the variant, having written nothing (the logits
 * neither: the caller's matmul then runs, and the host loop routes).
 * With `post` (post_call's), first ds4_route_moe_post: the MoE's output
 * mixed into s->bnst by the same call (*posted = 1), where the backend
 * fuses that. */
static ld_status route_moe_entry(ld_ds4_session *s, ds4_layer *L, int n, int hash, const float *bias, float scale,
                                 int fused, const ld_hc_post_call *post, const ld_buf **f, int *done, int *posted,
                                 ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    ld_error e = {0};
    ld_status st = LD_ERR_UNSUPPORTED;
    if (post && OPS(s)->ds4_route_moe_post)
        st = OPS(s)->ds4_route_moe_post(s->be, post, s->xb, s->rl, L->router, bias, hash ? s->hrows : NULL, n,
                                        c->n_routed, c->top_k, scale, L->experts, &L->shared, LD_MOE_ACT_CLAMPED,
                                        c->swiglu_limit, fused ? LD_MOE_COMBINE_FUSED : LD_MOE_COMBINE_REF,
                                        c->routed_scaling, s->want_route ? s->idx : NULL,
                                        s->want_route ? s->wts : NULL, &e);
    *posted = st == LD_OK;
    if (ld_backend_answered(st, &e, err)) {
        *done = 1;
        return st;
    }
    st = OPS(s)->ds4_route_moe(s->be, s->bmoe, s->xb, s->rl, L->router, bias, hash ? s->hrows : NULL, n, c->n_routed,
                               c->top_k, scale, L->experts, &L->shared, LD_MOE_ACT_CLAMPED, c->swiglu_limit,
                               fused ? LD_MOE_COMBINE_FUSED : LD_MOE_COMBINE_REF, c->routed_scaling,
                               s->want_route ? s->idx : NULL, s->want_route ? s->wts : NULL, &e);
    LD_TRY(moe_entry_done(s, st, &e, n, f, err));
    *done = !s->moe_host;
    return LD_OK;
}

/* MoE of the n rows of s->xb into host s->hf (*f NULL), or into a backend
 * buffer *f by the moe entry, or (post, *posted = 1) mixed into s->bnst by
 * the entry; experts chosen into s->idx */
static ld_status moe(ld_ds4_session *s, int l, const int32_t *tokens, int n, const ld_hc_post_call *post,
                     const ld_buf **f, int *posted, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    ds4_layer *L = &s->layers[l];
    const ld_ds4_layer *ml = &s->m->layers[l];
    size_t N = (size_t)n, D = (size_t)c->hidden, E = (size_t)c->n_routed, K = (size_t)c->top_k;
    int hash = c->mlp_type[l] == LD_DS4_HASH && c->use_hash;
    int fused = s->k.v[LD_KOP_COMBINE] == LD_KV_FUSED; /* the scaling on the routed sum */
    const float *bias = c->use_score_bias ? L->router_bias : NULL;
    float scale = fused ? 1.0f : c->routed_scaling;
    *f = NULL;
    for (size_t t = 0; o->ds4_route && hash && t < N; t++) /* the hash layers' rows gathered into s->hrows */
        memcpy(s->hrows + t * K, ml->tid2eid + (size_t)tokens[t] * K, K * sizeof *s->hrows);
    if (o->ds4_route && o->ds4_route_moe && !s->moe_host) {
        int done = 0;
        LD_TRY(route_moe_entry(s, L, n, hash, bias, scale, fused, post, f, &done, posted, err));
        if (done) return LD_OK;
    }
    LD_TRY(o->matmul(be, s->rl, s->xb, L->router, NULL, n, err)); /* the router: no entry took it */
    if (o->ds4_route) {
        LD_TRY(o->ds4_route(be, s->idx, s->wts, s->rl, bias, hash ? s->hrows : NULL, n, c->n_routed, c->top_k, scale,
                            err));
    } else {
        LD_TRY(o->buf_read(be, s->rl, 0, s->hrl, N * E, err));
        for (size_t t = 0; t < N; t++)
            ld_ref_ds4_route(s->idx + t * K, s->wts + t * K, s->hrl + t * E, bias,
                             hash ? ml->tid2eid + (size_t)tokens[t] * K : NULL, c->n_routed, c->top_k, scale);
    }
    if (!s->moe_host) LD_TRY(moe_entry(s, L, n, fused, f, err));
    if (!s->moe_host) return LD_OK;
    LD_TRY(o->buf_read(be, s->xb, 0, s->hx, N * D, err));
    memset(s->hf, 0, N * D * sizeof *s->hf);
    for (int e = 0; e < c->n_routed; e++) {
        int cnt = ld_ref_moe_gather(s->sel_t, s->sel_w, s->hxe, s->hx, s->idx, s->wts, N, K, D, e);
        if (!cnt) continue;
        LD_TRY(o->buf_write(be, s->xe, 0, s->hxe, (size_t)cnt * D, err));
        LD_TRY(mlp(s, &L->experts[e], s->xe, cnt, s->hxe, err));
        for (int i = 0; i < cnt; i++)
            ld_ref_ds_axpy(s->hf + (size_t)s->sel_t[i] * D, s->hxe + (size_t)i * D, s->sel_w[i], 0, D);
    }
    if (fused) ld_ref_ds_scale(s->hf, c->routed_scaling, 0, N * D);
    LD_TRY(mlp(s, &L->shared, s->xb, n, s->hy, err));
    for (size_t i = 0; i < N * D; i++) s->hf[i] = s->hf[i] + s->hy[i];
    return LD_OK;
}

/* plane p of hidden [planes][T][D]: rows [t0, t0+n) from host `src`; in
 * a batch's chunk, each part's rows into its own planes */
static void trace(ld_ds4_session *s, const float *src, float *hidden, int plane, int T, int t0, int n)
{
    size_t D = (size_t)s->m->cfg.hidden;
    if (s->rows) {
        ld_batch_trace_host(src, s->rows, s->nparts, plane, D);
        return;
    }
    if (!hidden) return;
    if (s->slice) plane -= s->first + 1; /* a slice's out holds the planes after its layers */
    memcpy(hidden + ((size_t)plane * (size_t)T + (size_t)t0) * D, src, (size_t)n * D * sizeof *src);
}

/* the session's mhc= variant as hc_pre's */
static int mhc_variant(const ld_ds4_session *s)
{
    if (s->k.v[LD_KOP_MHC] == LD_KV_BF16) return LD_DS4_MHC_BF16;
    return s->k.v[LD_KOP_MHC] == LD_KV_SINKHORN_BF16 ? LD_DS4_MHC_SINKHORN_BF16 : LD_DS4_MHC_F32;
}

/* the host path of hc_pre: s->post, s->comb, the collapsed streams in s->u */
static ld_status hc_pre_host(ld_ds4_session *s, float **p, int n, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    size_t N = (size_t)c->hc_mult, D = (size_t)c->hidden;
    int sinkhorn_bf16 = s->k.v[LD_KOP_MHC] == LD_KV_SINKHORN_BF16;
    for (int t = 0; t < n; t++)
        ld_ref_ds4_hc_pre_ex(s->streams + (size_t)t * N * D, c->hc_mult, c->hidden, p[0], p[1], p[2],
                             c->hc_sinkhorn_iters, c->rms_eps, c->hc_eps, sinkhorn_bf16, s->post + (size_t)t * N,
                             s->comb + (size_t)t * N * N, s->hu + (size_t)t * D, s->hcs);
    if (s->k.v[LD_KOP_MHC] == LD_KV_BF16) /* the variant: the mixing matrices cast to bf16 */
        for (size_t i = 0; i < (size_t)n * N; i++) {
            s->post[i] = ld_var_bf16_round(s->post[i]);
            for (size_t j = 0; j < N; j++) s->comb[i * N + j] = ld_var_bf16_round(s->comb[i * N + j]);
        }
    return OPS(s)->buf_write(s->be, s->u, 0, s->hu, (size_t)n * D, err);
}

/* the current streams of n rows on the host (read back from s->bst when
 * only the backend has them) */
static ld_status streams_to_host(ld_ds4_session *s, int n, ld_error *err)
{
    if (s->st_host) return LD_OK;
    size_t N = (size_t)s->m->cfg.hc_mult, D = (size_t)s->m->cfg.hidden;
    LD_TRY(OPS(s)->buf_read(s->be, s->bst, 0, s->streams, (size_t)n * N * D, err));
    s->st_host = 1;
    return LD_OK;
}

/* hc_pre: the backend's entry (the streams into s->bst, post and comb in
 * s->bpost, s->bcomb), or the host path when the backend has none or
 * lacks the variant (LD_ERR_UNSUPPORTED, refused before any write).  With
 * the backend's hc_pre_norm, the block's input norm `norm` too (into
 * s->xb, *normed = 1). */
static ld_status hc_pre(ld_ds4_session *s, int l, int which, int n, const ld_weight *norm, int *normed,
                        ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    ds4_layer *L = &s->layers[l];
    float **p = which ? L->hc_ffn : L->hc_attn;
    if (!s->hc_host && !s->st_dev) { /* the streams onto the backend (a chunk's first site) */
        size_t N = (size_t)c->hc_mult, D = (size_t)c->hidden;
        LD_TRY(OPS(s)->buf_write(s->be, s->bst, 0, s->streams, (size_t)n * N * D, err));
        s->st_dev = 1;
    }
    if (s->hc_host) {
        LD_TRY(streams_to_host(s, n, err));
        return hc_pre_host(s, p, n, err);
    }
    ld_error e = {0};
    ld_status st = LD_ERR_UNSUPPORTED;
    if (OPS(s)->hc_pre_norm)
        st = OPS(s)->hc_pre_norm(s->be, s->bpost, s->bcomb, s->u, s->bst, L->hc_fn[which], p[1], p[2], n,
                                 c->hc_mult, c->hidden, c->hc_sinkhorn_iters, c->rms_eps, c->hc_eps, mhc_variant(s),
                                 norm, c->rms_eps, s->xb, &e);
    *normed = st == LD_OK;
    if (st == LD_ERR_UNSUPPORTED)
        st = OPS(s)->hc_pre(s->be, s->bpost, s->bcomb, s->u, s->bst, L->hc_fn[which], p[1], p[2], n, c->hc_mult,
                            c->hidden, c->hc_sinkhorn_iters, c->rms_eps, c->hc_eps, mhc_variant(s), &e);
    if (st == LD_ERR_UNSUPPORTED) {
        s->hc_host = 1;
        LD_TRY(streams_to_host(s, n, err));
        return hc_pre_host(s, p, n, err);
    }
    if (st != LD_OK && err) *err = e;
    return st;
}

/* the new streams s->bnst become s->bst (on the backend) */
static void streams_swap(ld_ds4_session *s)
{
    ld_buf *tmp = s->bst;
    s->bst = s->bnst;
    s->bnst = tmp;
    s->st_host = 0;
}

/* where nothing reads a block's output but hc_post (no TP reduce between)
 * and the streams are on the backend: *p the call that mixes it into
 * s->bnst, for the entries that compute and mix the output in one; else 0 */
static int post_call(const ld_ds4_session *s, ld_hc_post_call *p)
{
    if (s->reduce || s->hc_host) return 0;
    *p = (ld_hc_post_call){s->bnst, s->bst, s->bpost, s->bcomb, s->m->cfg.hc_mult};
    return 1;
}

/* the attention's last projection: wo_b of s->ogall into s->ao, or, with
 * `post`, by the backend's matmul_hc_post straight into s->bnst (*posted
 * = 1) where it fuses that */
static ld_status attention_out(ld_ds4_session *s, const ds4_layer *L, int n, const ld_hc_post_call *post,
                               int *posted, ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    *posted = 0;
    if (post && o->matmul_hc_post) {
        ld_error e = {0};
        ld_status st = o->matmul_hc_post(s->be, post, s->ogall, L->wo_b, n, &e);
        *posted = st == LD_OK;
        if (ld_backend_answered(st, &e, err)) return st;
    }
    return o->matmul(s->be, s->ao, s->ogall, L->wo_b, NULL, n, err);
}

/* hc_post of the block's output f (host s->hf, or the buffer s->ao): on
 * the host into s->nstreams (hc_site swaps them in), or by the entry into
 * s->bnst, which becomes s->bst: the streams stay on the backend */
static ld_status hc_post(ld_ds4_session *s, const ld_buf *f, int n, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    size_t N = (size_t)c->hc_mult, D = (size_t)c->hidden;
    if (s->hc_host) {
        for (int t = 0; t < n; t++)
            ld_ref_ds4_hc_post(s->nstreams + (size_t)t * N * D, s->streams + (size_t)t * N * D,
                               s->hf + (size_t)t * D, s->post + (size_t)t * N, s->comb + (size_t)t * N * N,
                               c->hc_mult, c->hidden);
        return LD_OK;
    }
    if (!f) {
        LD_TRY(OPS(s)->buf_write(s->be, s->bf, 0, s->hf, (size_t)n * D, err));
        f = s->bf;
    }
    LD_TRY(OPS(s)->hc_post(s->be, s->bnst, s->bst, f, s->bpost, s->bcomb, n, c->hc_mult, c->hidden, err));
    streams_swap(s);
    return LD_OK;
}

/* tensor parallelism: the MoE's partial (the buffer f, or host s->hf when
 * f is NULL) summed over the ranks in place; the host one through s->ao,
 * free once the attention's hc_post has read it */
static ld_status reduce_moe(ld_ds4_session *s, int l, int n, const ld_buf *f, ld_error *err)
{
    if (f) return s->reduce(s->reduce_ctx, s->be, s->bmoe, n, l, 1, err); /* f is s->bmoe */
    size_t nd = (size_t)n * (size_t)s->m->cfg.hidden;
    LD_TRY(OPS(s)->buf_write(s->be, s->ao, 0, s->hf, nd, err));
    LD_TRY(s->reduce(s->reduce_ctx, s->be, s->ao, n, l, 1, err));
    return OPS(s)->buf_read(s->be, s->ao, 0, s->hf, nd, err);
}

/* one mHC site around a block: collapse the streams into s->xb (normed by
 * `norm`), run the block (attention: 0, MoE: 1) into s->hf, expand */
static ld_status hc_site(ld_ds4_session *s, int l, int which, const int32_t *tokens, int n, int32_t *picks,
                         ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ds4_layer *L = &s->layers[l];
    const ld_weight *norm = which ? L->ffn_norm : L->attn_norm;
    int normed = 0;
    LD_TRY(hc_pre(s, l, which, n, norm, &normed, err));
    if (!normed) LD_TRY(o->rmsnorm(s->be, s->xb, s->u, norm, n, c->rms_eps, err));
    const ld_buf *f = NULL;
    ld_hc_post_call pc;
    const ld_hc_post_call *post = post_call(s, &pc) ? &pc : NULL;
    int posted = 0;
    if (which) {
        LD_TRY(moe(s, l, tokens, n, post, &f, &posted, err));
        if (s->reduce) LD_TRY(reduce_moe(s, l, n, f, err));
    } else {
        LD_TRY(s->parts ? ld_ds4_attention_parts(s, l, n, err) : ld_ds4_attention(s, l, n, picks, err));
        LD_TRY(attention_out(s, L, n, post, &posted, err));
    }
    if (posted) { /* the block's output already mixed into s->bnst */
        streams_swap(s);
        return LD_OK;
    }
    if (!which) {
        if (s->reduce) LD_TRY(s->reduce(s->reduce_ctx, s->be, s->ao, n, l, 0, err));
        if (s->hc_host) LD_TRY(o->buf_read(s->be, s->ao, 0, s->hf, (size_t)n * (size_t)c->hidden, err));
        else f = s->ao;
    }
    LD_TRY(hc_post(s, f, n, err));
    if (s->hc_host) { /* the host's new streams */
        float *tmp = s->streams;
        s->streams = s->nstreams;
        s->nstreams = tmp;
        s->st_host = 1;
        s->st_dev = 0;
    }
    return LD_OK;
}

/* The final stream collapse of the n rows' streams into s->u and the
 * final norm into s->xb on the backend (the streams uploaded first where
 * they are on the host): ds4_hc_head_norm, else ds4_hc_head then rmsnorm.
 * *done = 0, nothing computed, where the backend refuses the shape. */
static ld_status hc_head_dev(ld_ds4_session *s, int n, int *done, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    size_t D = (size_t)c->hidden, N = (size_t)c->hc_mult;
    const ld_buf *X = s->st_dev ? s->bst : s->bhx; /* the streams where they are */
    const float *base = s->hc_head[1], scale = s->hc_head[2][0];
    *done = 0;
    if (!s->st_dev) LD_TRY(o->buf_write(s->be, s->bhx, 0, s->streams, (size_t)n * N * D, err));
    ld_error e = {0};
    ld_status st = LD_ERR_UNSUPPORTED;
    int fused = 0;
    if (o->ds4_hc_head_norm) {
        st = o->ds4_hc_head_norm(s->be, s->u, X, s->bhfn, base, scale, n, c->hc_mult, c->hidden, c->rms_eps,
                                 c->hc_eps, s->norm, c->rms_eps, s->xb, &e);
        fused = st != LD_ERR_UNSUPPORTED;
    }
    if (!fused) {
        st = o->ds4_hc_head(s->be, s->u, X, s->bhfn, base, scale, n, c->hc_mult, c->hidden, c->rms_eps, c->hc_eps,
                            &e);
        if (st == LD_ERR_UNSUPPORTED) return LD_OK;
    }
    *done = 1;
    if (st != LD_OK) {
        if (err) *err = e;
        return st;
    }
    return fused ? LD_OK : o->rmsnorm(s->be, s->xb, s->u, s->norm, n, c->rms_eps, err);
}

/* the final stream collapse of the n rows' streams into s->u, then the
 * final norm into s->xb: on the backend (hc_head_dev), or the host leaf
 * (no entry, or one that refuses the shape) and rmsnorm */
static ld_status hc_head_norm(ld_ds4_session *s, int n, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    size_t D = (size_t)c->hidden, N = (size_t)c->hc_mult;
    int done = 0;
    if (s->bhfn) LD_TRY(hc_head_dev(s, n, &done, err));
    if (done) return LD_OK;
    LD_TRY(streams_to_host(s, n, err));
    for (int t = 0; t < n; t++)
        ld_ref_ds4_hc_head(s->hu + (size_t)t * D, s->streams + (size_t)t * N * D, c->hc_mult, c->hidden, s->hc_head[0],
                           s->hc_head[1], s->hc_head[2][0], c->rms_eps, c->hc_eps, s->hcs);
    LD_TRY(o->buf_write(s->be, s->u, 0, s->hu, (size_t)n * D, err));
    return o->rmsnorm(s->be, s->xb, s->u, s->norm, n, c->rms_eps, err);
}

/* whether the rows being run trace their hidden planes: the call's
 * `hidden`, or in a batch's chunk any part's */
static int tracing(const ld_ds4_session *s, const float *hidden)
{
    return s->rows ? ld_batch_wants_hidden(s->rows, s->nparts) : hidden != NULL;
}

/* every stream of the n rows starts as the row's embedding: on the
 * backend when the mixing is there and no plane is traced, each token's
 * row embedded hc_mult times straight into the streams (one embed, the
 * same rows as copies of it), else through the host from s->x (plane 0
 * traced) */
static ld_status start_streams(ld_ds4_session *s, const int32_t *tokens, int n, int T, int t0, float *hidden,
                               ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    size_t D = (size_t)s->m->cfg.hidden, N = (size_t)s->m->cfg.hc_mult;
    if (!tracing(s, hidden) && !s->hc_host) {
        for (size_t i = 0; i < (size_t)n * N; i++) s->rep[i] = tokens[i / N];
        LD_TRY(o->embed(s->be, s->bst, s->embed, s->rep, n * (int)N, err));
        s->st_dev = 1;
        s->st_host = 0;
        return LD_OK;
    }
    LD_TRY(o->embed(s->be, s->x, s->embed, tokens, n, err));
    LD_TRY(o->buf_read(s->be, s->x, 0, s->hu, (size_t)n * D, err));
    trace(s, s->hu, hidden, 0, T, t0, n);
    for (int t = 0; t < n; t++)
        for (size_t j = 0; j < N; j++)
            memcpy(s->streams + ((size_t)t * N + j) * D, s->hu + (size_t)t * D, D * sizeof *s->hu);
    s->st_host = 1;
    s->st_dev = 0;
    return LD_OK;
}

/* ld_ds4_session_eval_streams: the current streams of the n rows from
 * t0 into s->tap */
static ld_status tap_streams(ld_ds4_session *s, int n, int t0, ld_error *err)
{
    if (!s->tap) return LD_OK;
    size_t ND = (size_t)s->m->cfg.hc_mult * (size_t)s->m->cfg.hidden;
    LD_TRY(streams_to_host(s, n, err));
    memcpy(s->tap + (size_t)t0 * ND, s->streams, (size_t)n * ND * sizeof *s->tap);
    return LD_OK;
}

/* the n rows through the session's layers (every layer, or a slice's),
 * then (not a slice) the head's collapse and the final norm into s->xb */
static ld_status rows_forward(ld_ds4_session *s, const int32_t *tokens, int n, int T, int t0, float *hidden,
                              int32_t *experts, int32_t *picks, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    size_t D = (size_t)c->hidden, N = (size_t)c->hc_mult, K = (size_t)c->top_k;

    s->want_route = experts != NULL;
    if (!s->slice) LD_TRY(start_streams(s, tokens, n, T, t0, hidden, err)); /* a slice's are in s->streams */
    for (int l = s->first; l < s->last; l++) {
        if (l == s->tap_layer) LD_TRY(tap_streams(s, n, t0, err));
        size_t KI = (size_t)c->index_topk;
        int32_t *pk = picks ? picks + ((size_t)l * (size_t)T + (size_t)t0) * KI : NULL;
        if (pk)
            for (size_t i = 0; i < (size_t)n * KI; i++) pk[i] = -1;
        LD_TRY(hc_site(s, l, 0, tokens, n, pk, err));
        LD_TRY(hc_site(s, l, 1, tokens, n, NULL, err));
        if (experts)
            memcpy(experts + ((size_t)l * (size_t)T + (size_t)t0) * K, s->idx, (size_t)n * K * sizeof *experts);
        if (tracing(s, hidden)) {
            LD_TRY(streams_to_host(s, n, err));
            for (int t = 0; t < n; t++)
                for (size_t d = 0; d < D; d++) {
                    float acc = 0.0f;
                    for (size_t j = 0; j < N; j++) acc += s->streams[((size_t)t * N + j) * D + d];
                    s->hu[(size_t)t * D + d] = acc / (float)N;
                }
            trace(s, s->hu, hidden, 1 + l, T, t0, n);
        }
    }
    if (s->last == s->tap_layer) LD_TRY(tap_streams(s, n, t0, err));
    if (s->slice) return LD_OK;
    LD_TRY(hc_head_norm(s, n, err));
    if (tracing(s, hidden)) {
        LD_TRY(o->buf_read(be, s->xb, 0, s->hu, (size_t)n * D, err));
        trace(s, s->hu, hidden, c->n_layers + 1, T, t0, n);
    }
    return LD_OK;
}

static ld_status chunk(ld_ds4_session *s, const int32_t *tokens, int n, int T, int t0, float *logits, float *hidden,
                       int32_t *experts, int32_t *picks, ld_error *err)
{
    LD_TRY(rows_forward(s, tokens, n, T, t0, hidden, experts, picks, err));
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
static ld_status batch_chunk(ld_ds4_session *s, const ds4_part *p, const ld_batch_rows *rows, int np,
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
    const ld_ds4_session_part *parts;
    ds4_part *p;
} batch_ctx;

static ld_status batch_round(void *ctx, const ld_batch_rows *rows, int nrows, const int32_t *tokens, int N,
                             ld_error *err)
{
    batch_ctx *b = ctx;
    ld_ds4_session *w = b->parts[0].s;
    /* a round of the lead's rows alone is a plain chunk */
    if (nrows == 1 && rows[0].part == 0)
        return chunk(w, tokens, N, rows[0].T, rows[0].t0, b->parts[0].logits, b->parts[0].hidden, NULL, NULL, err);
    for (int k = 0; k < nrows; k++) b->p[k] = (ds4_part){b->parts[rows[k].part].s, rows[k].row, rows[k].n};
    return batch_chunk(w, b->p, rows, nrows, tokens, N, err);
}

/* s may share a batch that lead leads: the same model, backend and
 * variants */
static int batch_mate(const ld_ds4_session *s, const ld_ds4_session *lead)
{
    static const ld_kop kops[] = {LD_KOP_COMBINE, LD_KOP_MHC, LD_KOP_INDEXER, LD_KOP_ROPE};
    int same = s->m == lead->m && s->be == lead->be;
    for (size_t k = 0; same && k < sizeof kops / sizeof kops[0]; k++) same = s->k.v[kops[k]] == lead->k.v[kops[k]];
    return same;
}

ld_status ld_ds4_session_eval_batch(const ld_ds4_session_part *parts, int n, ld_error *err)
{
    if (n < 1 || !parts[0].s) return LD_FAIL(err, LD_ERR_USAGE, 0, "a batch needs at least one session");
    ld_ds4_session *w = parts[0].s;
    ld_batch_seq *seqs = calloc((size_t)n, sizeof *seqs);
    batch_ctx b = {parts, calloc((size_t)n, sizeof *b.p)};
    ld_status st = seqs && b.p ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int i = 0; st == LD_OK && i < n; i++) {
        const ld_ds4_session *s = parts[i].s;
        if (s && s->slice) {
            st = LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice's session runs streams (ld_ds4_session_eval_slice), "
                         "not a batch");
            break;
        }
        seqs[i] = (ld_batch_seq){s, parts[i].tokens, parts[i].T, parts[i].logits, parts[i].hidden,
                                 s ? s->max_batch : 0,
                                 s ? s->pos : 0, s ? s->max_seq : 0, w->m->cfg.vocab, s && batch_mate(s, w),
                                 s && (s->reduce != w->reduce || s->reduce_ctx != w->reduce_ctx)};
    }
    if (st == LD_OK)
        st = ld_batch_run(seqs, n, w->max_batch, OPS(w)->buf_view != NULL, "model, backend and variants",
                          batch_round, &b, err);
    free(seqs);
    free(b.p);
    return st;
}

ld_status ld_ds4_session_eval(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                              int32_t *experts, ld_error *err)
{
    return ld_ds4_session_eval_picks(s, tokens, T, logits, hidden, experts, NULL, err);
}

ld_status ld_ds4_session_eval_picks(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                    int32_t *experts, int32_t *picks, ld_error *err)
{
    if (s->slice)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice's session runs streams (ld_ds4_session_eval_slice), "
                       "not a whole pass");
    LD_TRY(ld_session_check_eval(tokens, T, s->pos, s->max_seq, s->m->cfg.vocab, err));
    for (int t0 = 0; t0 < T; t0 += s->max_batch) {
        int n = T - t0 < s->max_batch ? T - t0 : s->max_batch;
        LD_TRY(chunk(s, tokens + t0, n, T, t0, logits, hidden, experts, picks, err));
    }
    return LD_OK;
}

ld_status ld_ds4_session_eval_streams(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                      int layer, float *streams, ld_error *err)
{
    if (layer < 0 || layer > s->m->cfg.n_layers)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "streams entering layer %d: the model has %d layers", layer,
                       s->m->cfg.n_layers);
    s->tap = streams;
    s->tap_layer = layer;
    ld_status st = ld_ds4_session_eval_picks(s, tokens, T, logits, hidden, NULL, NULL, err);
    s->tap = NULL;
    return st;
}

ld_status ld_ds4_session_eval_slice(ld_ds4_session *s, const int32_t *tokens, const float *x, int T, float *out,
                                    ld_error *err)
{
    if (!s->slice) return LD_FAIL(err, LD_ERR_USAGE, 0, "not a layer slice's session (ld_ds4_session_create_slice)");
    if (!tokens) return LD_FAIL(err, LD_ERR_USAGE, 0, "a DeepSeek V4 slice needs its rows' tokens (hash routing)");
    LD_TRY(ld_session_check_eval(tokens, T, s->pos, s->max_seq, s->m->cfg.vocab, err));
    size_t ND = (size_t)s->m->cfg.hc_mult * (size_t)s->m->cfg.hidden;
    for (int t0 = 0; t0 < T; t0 += s->max_batch) {
        int n = T - t0 < s->max_batch ? T - t0 : s->max_batch;
        memcpy(s->streams, x + (size_t)t0 * ND, (size_t)n * ND * sizeof *s->streams);
        s->st_host = 1;
        s->st_dev = 0;
        LD_TRY(rows_forward(s, tokens + t0, n, T, t0, out, NULL, NULL, err));
        s->pos += n;
    }
    return LD_OK;
}
