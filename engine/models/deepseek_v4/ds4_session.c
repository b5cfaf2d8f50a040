/* ds4_session.c - the DeepSeek-V4 session (ds4_forward.h):
 * its making (weights bound or copied, buffers, siblings, slices), its
 * settings and its end. */
#include "ds4_internal.h"

static ld_status load_view(ld_ds4_session *s, const ld_host_tensor *h, const char *name, ld_weight **w, ld_error *err)
{
    ld_status st = OPS(s)->weight_load(s->be, h, w, err);
    if (st != LD_OK && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "tensor '%.100s': %.140s", name, err->msg);
        memcpy(err->msg, msg, sizeof msg);
    }
    return st;
}

static ld_status load(ld_ds4_session *s, const ld_model_tensor *t, ld_weight **w, ld_error *err)
{
    *w = NULL;
    if (!t->st) return LD_OK;
    return load_view(s, &t->host, t->st->name, w, err);
}

/* an fp32 host copy of a (small) tensor */
static ld_status host_copy(const ld_model_tensor *t, float **out, ld_error *err)
{
    size_t n = (size_t)t->host.rows * (size_t)t->host.cols;
    *out = malloc((n ? n : 1) * sizeof **out);
    if (!*out) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_ref_to_f32(*out, t->host.data, (ld_kdt)t->host.dtype, 0, n);
    return LD_OK;
}

static void unload(ld_ds4_session *s, ld_weight *w)
{
    if (w) OPS(s)->weight_free(s->be, w);
}

static void unload_mlp(ld_ds4_session *s, ds4_mlp *x)
{
    unload(s, x->gate);
    unload(s, x->up);
    unload(s, x->down);
}

/* a compressor's weights and host copies of its small tensors */
static void free_comp_weights(ld_ds4_session *s, ds4_comp *c)
{
    unload(s, c->wkv);
    unload(s, c->wgate);
    free(c->ape);
    free(c->norm);
}

/* a compressor's state, and the backend buffers the session made for it */
static void free_comp_state(ld_ds4_session *s, ds4_comp *c)
{
    free(c->kv);
    free(c->gate);
    free(c->skv);
    free(c->sgate);
    free(c->entries);
    ld_buf *bs[] = {c->bkv, c->bgate, c->bent, c->bape, c->bnorm};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
        if (bs[i]) OPS(s)->buf_free(s->be, bs[i]);
}

/* a layer's weights and the host copies of its small tensors (a lead's:
 * its siblings borrow them) */
static void free_layer_weights(ld_ds4_session *s, ds4_layer *L)
{
    const ld_ds4_config *c = &s->m->cfg;
    ld_weight *ws[] = {L->attn_norm, L->ffn_norm, L->wq_a, L->q_norm, L->wq_b, L->wkv,
                       L->kv_norm,   L->wo_b,     L->router, L->iwq_b, L->iweights};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) unload(s, ws[i]);
    if (L->wo_a)
        for (int g = 0; g < c->o_groups; g++) unload(s, L->wo_a[g]);
    free(L->wo_a);
    for (int i = 0; i < 2; i++)
        if (L->hc_fn[i]) OPS(s)->buf_free(s->be, L->hc_fn[i]);
    for (int i = 0; i < 3; i++) {
        free(L->hc_attn[i]);
        free(L->hc_ffn[i]);
    }
    free(L->sinks);
    free(L->router_bias);
    unload_mlp(s, &L->shared);
    if (L->experts)
        for (int e = 0; e < c->n_routed; e++) unload_mlp(s, &L->experts[e]);
    free(L->experts);
    free_comp_weights(s, &L->comp);
    free_comp_weights(s, &L->icomp);
}

void ld_ds4_session_destroy(ld_ds4_session *s)
{
    if (!s) return;
    const ld_ds4_config *c = &s->m->cfg;
    if (s->layers) {
        for (int l = 0; l < c->n_layers; l++) {
            ds4_layer *L = &s->layers[l];
            if (!s->borrowed) free_layer_weights(s, L);
            free(L->kvc);
            if (L->bkvc) OPS(s)->buf_free(s->be, L->bkvc);
            if (L->bsinks) OPS(s)->buf_free(s->be, L->bsinks);
            free_comp_state(s, &L->comp);
            free_comp_state(s, &L->icomp);
        }
    }
    if (!s->borrowed) {
        unload(s, s->embed);
        unload(s, s->norm);
        if (s->lm_head != s->embed) unload(s, s->lm_head);
        for (int i = 0; i < 3; i++) free(s->hc_head[i]);
    }
    ld_buf *bs[] = {s->x,   s->xb,  s->qa,    s->q,  s->kv, s->ckv, s->cg, s->iq, s->iw,
                    s->att, s->og,  s->ogall, s->ao, s->rl, s->g,   s->u,  s->xe, s->logits,
                    s->bst, s->bnst, s->bpost, s->bcomb, s->bf,
                    s->bao, s->bhfn, s->bhx, s->bfreq[0], s->bfreq[1], s->ickv, s->icg}; /* attention on the backend */
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
        if (bs[i]) OPS(s)->buf_free(s->be, bs[i]);
    float *hs[] = {s->streams, s->nstreams, s->post, s->comb, s->hu,  s->hf,  s->hq,  s->hkv,   s->hatt,
                   s->hgrp,    s->hog,      s->hiq,  s->hiw,  s->hrl, s->hx,  s->hy,  s->hxe,   s->hg,
                   s->hup,     s->wts,      s->sel_w, s->scores, s->hcs, s->ent, s->inv_main, s->inv_comp,
                   s->hck,     s->hcg};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) free(hs[i]);
    free((void *)s->keys);
    free(s->idx);
    free(s->hrows);
    free(s->rep);
    free(s->pick);
    free(s->sel_t);
    free(s->isel);
    if (s->bmoe) OPS(s)->buf_free(s->be, s->bmoe); /* MoE on the backend (entry) */
    free(s->layers);
    free(s);
}

static ld_status load_mlp(ld_ds4_session *s, const ld_ds4_mlp *src, ds4_mlp *dst, ld_error *err)
{
    LD_TRY(load(s, &src->gate, &dst->gate, err));
    LD_TRY(load(s, &src->up, &dst->up, err));
    return load(s, &src->down, &dst->down, err);
}

/* a compressor's state on the host: its rings and entries (the
 * session's own, whoever's weights) */
static ld_status comp_state_alloc(ld_ds4_session *s, ds4_comp *c, ld_error *err)
{
    size_t ring = 2 * (size_t)c->ratio * (size_t)c->width;
    c->kv = malloc(ring * sizeof *c->kv);
    c->gate = malloc(ring * sizeof *c->gate);
    c->skv = malloc(ring * sizeof *c->skv);
    c->sgate = malloc(ring * sizeof *c->sgate);
    c->entries = malloc(((size_t)s->max_seq / (size_t)c->ratio + 1) * (size_t)c->dim * sizeof *c->entries);
    if (!c->kv || !c->gate || !c->skv || !c->sgate || !c->entries)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    return LD_OK;
}

static ld_status load_comp(ld_ds4_session *s, const ld_ds4_compressor *src, ds4_comp *c, int width, int dim,
                           int ratio, ld_error *err)
{
    c->width = width;
    c->dim = dim;
    c->ratio = ratio;
    c->overlap = width == 2 * dim;
    LD_TRY(load(s, &src->wkv, &c->wkv, err));
    LD_TRY(load(s, &src->wgate, &c->wgate, err));
    LD_TRY(host_copy(&src->ape, &c->ape, err));
    LD_TRY(host_copy(&src->norm, &c->norm, err));
    return comp_state_alloc(s, c, err);
}

static ld_status load_layer(ld_ds4_session *s, int l, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    const ld_ds4_layer *ml = &s->m->layers[l];
    ds4_layer *L = &s->layers[l];
    const ld_model_tensor *ts[] = {&ml->attn_norm, &ml->ffn_norm, &ml->wq_a, &ml->q_norm, &ml->wq_b,
                                   &ml->wkv,       &ml->kv_norm,  &ml->wo_b, &ml->router};
    ld_weight **ws[] = {&L->attn_norm, &L->ffn_norm, &L->wq_a, &L->q_norm, &L->wq_b,
                        &L->wkv,       &L->kv_norm,  &L->wo_b, &L->router};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) LD_TRY(load(s, ts[i], ws[i], err));
    /* wo_a: one weight per group, a view of its OL rows */
    int G = c->o_groups, OL = c->o_lora_rank;
    L->wo_a = calloc((size_t)G, sizeof *L->wo_a);
    if (!L->wo_a) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int g = 0; g < G; g++) {
        ld_host_tensor h;
        LD_TRY(ld_host_rows(&ml->wo_a.host, ml->wo_a.st->name, (int64_t)g * OL, OL, &h, err));
        LD_TRY(load_view(s, &h, ml->wo_a.st->name, &L->wo_a[g], err));
    }
    const ld_model_tensor *hca[3] = {&ml->hc_attn_fn, &ml->hc_attn_base, &ml->hc_attn_scale};
    const ld_model_tensor *hcf[3] = {&ml->hc_ffn_fn, &ml->hc_ffn_base, &ml->hc_ffn_scale};
    for (int i = 0; i < 3; i++) {
        LD_TRY(host_copy(hca[i], &L->hc_attn[i], err));
        LD_TRY(host_copy(hcf[i], &L->hc_ffn[i], err));
    }
    for (int i = 0; i < 2 && !s->hc_host; i++) {
        const ld_model_tensor *fn = i ? hcf[0] : hca[0];
        size_t n = (size_t)fn->host.rows * (size_t)fn->host.cols;
        LD_TRY(OPS(s)->buf_alloc(s->be, n, &L->hc_fn[i], err));
        LD_TRY(OPS(s)->buf_write(s->be, L->hc_fn[i], 0, i ? L->hc_ffn[0] : L->hc_attn[0], n, err));
    }
    LD_TRY(host_copy(&ml->sinks, &L->sinks, err));
    if (ml->router_bias.st) LD_TRY(host_copy(&ml->router_bias, &L->router_bias, err));
    LD_TRY(load_mlp(s, &ml->shared, &L->shared, err));
    L->experts = calloc((size_t)c->n_routed, sizeof *L->experts);
    L->kvc = malloc((size_t)s->kv_rows * (size_t)c->head_dim * sizeof *L->kvc);
    if (!L->experts || !L->kvc) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int e = 0; e < c->n_routed; e++) LD_TRY(load_mlp(s, &ml->experts[e], &L->experts[e], err));
    int type = c->layer_type[l], r = ld_ds4_layer_ratio(c, l);
    if (type != LD_DS4_SLIDING) {
        L->has_comp = 1;
        LD_TRY(load_comp(s, &ml->comp, &L->comp, (type == LD_DS4_CSA ? 2 : 1) * c->head_dim, c->head_dim, r, err));
    }
    if (type == LD_DS4_CSA) {
        L->has_index = 1;
        LD_TRY(load_comp(s, &ml->icomp, &L->icomp, 2 * c->index_head_dim, c->index_head_dim, r, err));
        LD_TRY(load(s, &ml->iwq_b, &L->iwq_b, err));
        LD_TRY(load(s, &ml->iweights, &L->iweights, err));
    }
    L->down[0] = L->wq_a, L->down[1] = L->wkv;
    L->down_norm[0] = L->q_norm, L->down_norm[1] = L->kv_norm;
    L->up[0] = L->wq_b, L->up[1] = L->iwq_b; /* NULL without an indexer: one product */
    if (L->has_comp) L->xw[L->nxw++] = L->comp.wkv, L->xw[L->nxw++] = L->comp.wgate;
    if (L->has_index)
        L->xw[L->nxw++] = L->icomp.wkv, L->xw[L->nxw++] = L->icomp.wgate, L->xw[L->nxw++] = L->iweights;
    return LD_OK;
}

/* n elements of sz bytes (at least one) */
static void *halloc(size_t n, size_t sz)
{
    return calloc(n > 0 ? n : 1, sz);
}


/* a backend buffer of n floats, from `host` when not NULL */
static ld_status buf_from(ld_ds4_session *s, ld_buf **b, const float *host, size_t n, ld_error *err)
{
    LD_TRY(OPS(s)->buf_alloc(s->be, n, b, err));
    return host ? OPS(s)->buf_write(s->be, *b, 0, host, n, err) : LD_OK;
}

/* a compressor's state in backend buffers (the host arrays' layout) */
static ld_status att_alloc_comp(ld_ds4_session *s, ds4_comp *c, ld_error *err)
{
    size_t W = (size_t)c->width, r = (size_t)c->ratio, dim = (size_t)c->dim;
    LD_TRY(buf_from(s, &c->bkv, NULL, 2 * r * W, err));
    LD_TRY(buf_from(s, &c->bgate, NULL, 2 * r * W, err));
    LD_TRY(buf_from(s, &c->bent, NULL, ((size_t)s->max_seq / r + 1) * dim, err));
    LD_TRY(buf_from(s, &c->bape, c->ape, r * W, err));
    return buf_from(s, &c->bnorm, c->norm, dim, err);
}

/* the buffers of the attention and hc_head entries, when the backend has
 * them */
static ld_status att_alloc(ld_ds4_session *s, ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    const ld_ds4_config *c = &s->m->cfg;
    size_t B = (size_t)s->max_batch, N = (size_t)c->hc_mult, D = (size_t)c->hidden, hd = (size_t)c->head_dim;
    if (o->ds4_hc_head && !s->slice) {
        LD_TRY(buf_from(s, &s->bhfn, s->hc_head[0], N * N * D, err));
        LD_TRY(buf_from(s, &s->bhx, NULL, B * N * D, err));
    }
    if (!o->ds4_qkv || !o->ds4_compress || !o->ds4_index || !o->ds4_attention || !o->copy_cols) return LD_OK;
    s->ksel = c->index_topk < s->max_seq ? c->index_topk : s->max_seq;
    s->isel = calloc(B * (size_t)s->ksel + 1, sizeof *s->isel);
    if (!s->isel) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    LD_TRY(buf_from(s, &s->bao, NULL, B * (size_t)c->n_heads * hd, err));
    LD_TRY(buf_from(s, &s->ickv, NULL, B * 2 * (size_t)c->index_head_dim, err));
    LD_TRY(buf_from(s, &s->icg, NULL, B * 2 * (size_t)c->index_head_dim, err));
    LD_TRY(buf_from(s, &s->bfreq[0], s->inv_main, (size_t)c->rope_dim / 2, err));
    LD_TRY(buf_from(s, &s->bfreq[1], s->inv_comp, (size_t)c->rope_dim / 2, err));
    for (int l = s->first; l < s->last; l++) {
        ds4_layer *L = &s->layers[l];
        LD_TRY(buf_from(s, &L->bkvc, NULL, (size_t)s->kv_rows * hd, err));
        LD_TRY(buf_from(s, &L->bsinks, L->sinks, (size_t)c->n_heads, err));
        if (L->has_comp) LD_TRY(att_alloc_comp(s, &L->comp, err));
        if (L->has_index) LD_TRY(att_alloc_comp(s, &L->icomp, err));
    }
    s->att_entries = s->att_be = 1;
    return LD_OK;
}

/* the host scratch of a session of B rows and S positions; 0 when out of
 * memory */
static int alloc_host(ld_ds4_session *s, const ld_ds4_config *c, size_t B, size_t S)
{
    size_t D = (size_t)c->hidden, N = (size_t)c->hc_mult;
    size_t H = (size_t)c->n_heads, hd = (size_t)c->head_dim, G = (size_t)c->o_groups, OL = (size_t)c->o_lora_rank;
    size_t E = (size_t)c->n_routed, K = (size_t)c->top_k, I = (size_t)c->moe_intermediate;
    size_t ih = (size_t)c->index_head_dim, nih = (size_t)c->index_n_heads;
    size_t HC = (2 + N) * N, R = (size_t)c->rope_dim, W = (size_t)c->sliding_window;
    s->layers = calloc((size_t)c->n_layers, sizeof *s->layers);
#define HALLOC(p, n) (p) = halloc((n), sizeof *(p))
    HALLOC(s->inv_main, R / 2);
    HALLOC(s->inv_comp, R / 2);
    HALLOC(s->streams, B * N * D);
    HALLOC(s->nstreams, B * N * D);
    HALLOC(s->post, B * N);
    HALLOC(s->comb, B * N * N);
    HALLOC(s->hu, B * D);
    HALLOC(s->hf, B * D);
    HALLOC(s->hq, B * H * hd);
    HALLOC(s->hkv, B * hd);
    HALLOC(s->hatt, B * H * hd);
    HALLOC(s->hgrp, B * H * hd / G);
    HALLOC(s->hog, B * G * OL);
    HALLOC(s->hiq, B * nih * ih);
    HALLOC(s->hck, B * 2 * max2(hd, ih));
    HALLOC(s->hcg, B * 2 * max2(hd, ih));
    HALLOC(s->hiw, B * nih);
    HALLOC(s->hrl, B * E);
    HALLOC(s->hx, B * D);
    HALLOC(s->hy, B * D);
    HALLOC(s->hxe, B * D);
    HALLOC(s->hg, B * I);
    HALLOC(s->hup, B * I);
    HALLOC(s->wts, B * K);
    HALLOC(s->sel_w, B);
    HALLOC(s->scores, S + W + 1);
    HALLOC(s->hcs, N * D + HC);
    HALLOC(s->ent, max2(hd, ih));
    HALLOC(s->keys, S + W + 1);
    HALLOC(s->idx, B * K);
    HALLOC(s->hrows, B * K);
    HALLOC(s->rep, B * N);
    HALLOC(s->pick, S + 1);
    HALLOC(s->sel_t, B);
#undef HALLOC
    return s->layers && s->inv_main && s->inv_comp && s->streams && s->nstreams && s->post && s->comb && s->hu &&
           s->hf && s->hq && s->hkv && s->hatt && s->hgrp && s->hog && s->hiq && s->hck && s->hcg && s->hiw &&
           s->hrl && s->hx && s->hy && s->hxe && s->hg && s->hup && s->wts && s->sel_w && s->scores && s->hcs &&
           s->ent && s->keys && s->idx && s->hrows && s->rep && s->pick && s->sel_t;
}

/* the backend's buffers of B rows; mHC and the MoE on the backend where
 * it has their entries */
static ld_status alloc_backend(ld_ds4_session *s, const ld_ds4_config *c, size_t B, ld_error *err)
{
    size_t D = (size_t)c->hidden, N = (size_t)c->hc_mult, H = (size_t)c->n_heads, hd = (size_t)c->head_dim;
    size_t QR = (size_t)c->q_lora_rank, G = (size_t)c->o_groups, OL = (size_t)c->o_lora_rank;
    size_t E = (size_t)c->n_routed, I = (size_t)c->moe_intermediate;
    size_t ih = (size_t)c->index_head_dim, nih = (size_t)c->index_n_heads;
    ld_status st = LD_OK;
#define ALLOC(b, n) \
    if (st == LD_OK) st = OPS(s)->buf_alloc(s->be, (n), &(b), err)
    ALLOC(s->x, B * D);
    ALLOC(s->xb, B * D);
    ALLOC(s->qa, B * QR);
    ALLOC(s->q, B * H * hd);
    ALLOC(s->kv, B * hd);
    ALLOC(s->ckv, B * 2 * max2(hd, ih));
    ALLOC(s->cg, B * 2 * max2(hd, ih));
    ALLOC(s->iq, B * nih * ih);
    ALLOC(s->iw, B * nih);
    ALLOC(s->att, B * H * hd / G);
    ALLOC(s->og, B * OL);
    ALLOC(s->ogall, B * G * OL);
    ALLOC(s->ao, B * D);
    ALLOC(s->rl, B * E);
    ALLOC(s->g, B * I);
    ALLOC(s->u, B * max2(I, D));
    ALLOC(s->xe, B * D);
    ALLOC(s->logits, s->slice ? 1 : B * (size_t)c->vocab);
    s->hc_host = !OPS(s)->hc_pre || !OPS(s)->hc_post;
    if (!s->hc_host) {
        ALLOC(s->bst, B * N * D);
        ALLOC(s->bnst, B * N * D);
        ALLOC(s->bpost, B * N);
        ALLOC(s->bcomb, B * N * N);
        ALLOC(s->bf, B * D);
    }
    /* MoE on the backend (entry) */
    s->moe_host = !OPS(s)->moe;
    if (!s->moe_host) ALLOC(s->bmoe, B * D);
#undef ALLOC
    return st;
}

/* A session's own parts: its host and backend scratch (B = max_batch
 * rows), its RoPE tables, its layers [first, last) (last 0: all of them);
 * the weights are loaded (session_make) or borrowed
 * (ld_ds4_session_create_sibling) after. */
static ld_status session_alloc(const ld_ds4_model *m, ld_backend *be, int max_seq, int max_batch, int first,
                               int last, ld_ds4_session **out, ld_error *err)
{
    *out = NULL;
    const ld_ds4_config *c = &m->cfg;
    if (max_seq < 1 || max_batch < 1 || max_seq > c->max_pos)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "max_seq %d and max_batch %d must be >= 1 and max_seq <= %d", max_seq,
                       max_batch, c->max_pos);
    if (max_batch > max_seq) max_batch = max_seq;
    ld_ds4_session *s = calloc(1, sizeof *s);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    s->m = m;
    s->be = be;
    s->max_seq = max_seq;
    s->max_batch = max_batch;
    s->slice = last > 0;
    s->first = s->slice ? first : 0;
    s->last = s->slice ? last : c->n_layers;
    s->k = ld_cpu_kernels_default(0); /* the variants: ld_ds4_session_set_kernels */
    /* the window of every row of a chunk stays in the KV ring */
    s->kv_rows = c->sliding_window < max_seq - max_batch ? c->sliding_window + max_batch : max_seq;
    ld_status st = alloc_host(s, c, (size_t)max_batch, (size_t)max_seq) ? LD_OK
                                                                         : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK) {
        ld_ds4_rope_inv_freq(c, &c->rope_main, s->inv_main, &s->af_main);
        ld_ds4_rope_inv_freq(c, &c->rope_compress, s->inv_comp, &s->af_comp);
        st = alloc_backend(s, c, (size_t)max_batch, err);
    }
    if (st != LD_OK) {
        ld_ds4_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

/* the embeddings, the head's collapse, the final norm and the lm head:
 * what a whole session has and a slice has not */
static ld_status load_ends(ld_ds4_session *s, ld_error *err)
{
    const ld_ds4_model *m = s->m;
    LD_TRY(load(s, &m->embed, &s->embed, err));
    LD_TRY(load(s, &m->norm, &s->norm, err));
    if (m->cfg.tie_embeddings) s->lm_head = s->embed;
    else LD_TRY(load(s, &m->lm_head, &s->lm_head, err));
    LD_TRY(host_copy(&m->hc_fn, &s->hc_head[0], err));
    LD_TRY(host_copy(&m->hc_base, &s->hc_head[1], err));
    return host_copy(&m->hc_scale, &s->hc_head[2], err);
}

/* ld_ds4_session_create, and (last > 0) ld_ds4_session_create_slice over
 * layers [first, last): their weights and state only */
static ld_status session_make(const ld_ds4_model *m, ld_backend *be, int max_seq, int max_batch, int first, int last,
                              ld_ds4_session **out, ld_error *err)
{
    ld_ds4_session *s;
    LD_TRY(session_alloc(m, be, max_seq, max_batch, first, last, &s, err));
    ld_status st = s->slice ? LD_OK : load_ends(s, err);
    for (int l = s->first; l < s->last && st == LD_OK; l++) st = load_layer(s, l, err);
    if (st == LD_OK) st = att_alloc(s, err);
    if (st != LD_OK) {
        ld_ds4_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

ld_status ld_ds4_session_create(const ld_ds4_model *m, ld_backend *be, int max_seq, int max_batch,
                                ld_ds4_session **out, ld_error *err)
{
    return session_make(m, be, max_seq, max_batch, 0, 0, out, err);
}

/* layer l of a sibling: the lead's weights, its own state (rings, entries;
 * the backend's copies made by att_alloc) */
static ld_status borrow_layer(ld_ds4_session *s, const ld_ds4_session *lead, int l, ld_error *err)
{
    ds4_layer *L = &s->layers[l];
    *L = lead->layers[l];
    L->bkvc = L->bsinks = NULL;
    ds4_comp *cs[2] = {&L->comp, &L->icomp};
    for (int i = 0; i < 2; i++) {
        ds4_comp *c = cs[i];
        c->kv = c->gate = c->skv = c->sgate = c->entries = NULL;
        c->bkv = c->bgate = c->bent = c->bape = c->bnorm = NULL;
    }
    L->kvc = malloc((size_t)s->kv_rows * (size_t)s->m->cfg.head_dim * sizeof *L->kvc);
    if (!L->kvc) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (L->has_comp) LD_TRY(comp_state_alloc(s, &L->comp, err));
    if (L->has_index) LD_TRY(comp_state_alloc(s, &L->icomp, err));
    return LD_OK;
}

ld_status ld_ds4_session_create_sibling(const ld_ds4_session *lead, int max_seq, ld_ds4_session **out,
                                        ld_error *err)
{
    *out = NULL;
    if (lead->slice) return LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice's session has no siblings");
    ld_ds4_session *s;
    LD_TRY(session_alloc(lead->m, lead->be, max_seq, lead->max_batch, 0, 0, &s, err));
    s->borrowed = 1;
    s->k = lead->k;
    s->embed = lead->embed;
    s->norm = lead->norm;
    s->lm_head = lead->lm_head;
    memcpy(s->hc_head, lead->hc_head, sizeof s->hc_head);
    ld_status st = LD_OK;
    for (int l = 0; l < lead->m->cfg.n_layers && st == LD_OK; l++) st = borrow_layer(s, lead, l, err);
    if (st == LD_OK) st = att_alloc(s, err);
    if (st != LD_OK) {
        ld_ds4_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

void ld_ds4_session_set_kernels(ld_ds4_session *s, const ld_cpu_kernels *k)
{
    static const ld_kop ops[] = {LD_KOP_COMBINE, LD_KOP_MHC, LD_KOP_INDEXER, LD_KOP_ROPE};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) s->k.v[ops[i]] = k->v[ops[i]];
}

void ld_ds4_session_set_reduce(ld_ds4_session *s, ld_ds4_reduce_fn fn, void *ctx)
{
    s->reduce = fn;
    s->reduce_ctx = ctx;
}



int ld_ds4_session_pos(const ld_ds4_session *s)
{
    return s->pos;
}

void ld_ds4_session_reset(ld_ds4_session *s)
{
    s->pos = 0;
}


ld_status ld_ds4_session_create_slice(const ld_ds4_model *m, ld_backend *be, int first, int last, int max_seq,
                                      int max_batch, ld_ds4_session **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_session_check_slice(first, last, m->cfg.n_layers, err));
    return session_make(m, be, max_seq, max_batch, first, last, out, err);
}
