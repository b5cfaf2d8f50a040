/* ds_session.c - a DeepSeek-V3 / V3.2 session (ds_forward.h): made with its
 * host scratch, the backend's buffers, the weights (loaded, or a lead's
 * borrowed by a sibling) and the latent caches; a slice of layers; freed. */
#include <stdlib.h>
#include <string.h>

#include "ds_internal.h"

static ld_status load(ld_ds_session *s, const ld_model_tensor *t, ld_weight **w, ld_error *err)
{
    *w = NULL;
    if (!t->st) return LD_OK;
    ld_status st = OPS(s)->weight_load(s->be, &t->host, w, err);
    if (st != LD_OK && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "tensor '%.100s': %.140s", t->st->name, err->msg);
        memcpy(err->msg, msg, sizeof msg);
    }
    return st;
}

static void unload(ld_ds_session *s, ld_weight *w)
{
    if (w) OPS(s)->weight_free(s->be, w);
}

static void unload_mlp(ld_ds_session *s, ds_mlp *x)
{
    unload(s, x->gate);
    unload(s, x->up);
    unload(s, x->down);
}

/* a layer's weights and host copies (a lead's: its siblings borrow them) */
static void free_layer_weights(ld_ds_session *s, ds_layer *L)
{
    const ld_ds_config *c = &s->m->cfg;
    ld_weight *ws[] = {L->attn_norm, L->q_a,  L->q_a_bias, L->q_a_norm, L->q_b,      L->q,       L->kv_a,
                       L->kv_a_bias, L->kv_a_norm, L->kv_b, L->o,     L->o_bias, L->ffn_norm, L->router};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) unload(s, ws[i]);
    unload_mlp(s, &L->mlp);
    if (L->experts)
        for (int e = 0; e < c->n_routed; e++) unload_mlp(s, &L->experts[e]);
    free(L->experts);
    free(L->router_bias);
    unload(s, L->idx_wq_b);
    unload(s, L->idx_wk);
    unload(s, L->idx_weights);
    free(L->idx_norm_w);
    free(L->idx_norm_b);
}

void ld_ds_session_destroy(ld_ds_session *s)
{
    if (!s) return;
    const ld_ds_config *c = &s->m->cfg;
    if (s->layers) {
        for (int l = 0; l < c->n_layers; l++) {
            ds_layer *L = &s->layers[l];
            if (!s->borrowed) free_layer_weights(s, L);
            ld_buf *caches[] = {L->ckv, L->kpe, L->ik};
            for (size_t i = 0; i < sizeof caches / sizeof caches[0]; i++)
                if (caches[i]) OPS(s)->buf_free(s->be, caches[i]);
        }
    }
    if (!s->borrowed) {
        unload(s, s->embed);
        unload(s, s->norm);
        if (s->lm_head != s->embed) unload(s, s->lm_head);
    }
    ld_buf *bs[] = {s->x, s->xb, s->qa, s->q, s->kva, s->ckv_raw, s->ckvn, s->kvb,
                    s->att, s->g, s->u, s->y, s->xe, s->rl, s->logits, s->iq, s->ikn, s->iw, s->bqabs, s->bolat};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) OPS(s)->buf_free(s->be, bs[i]);
    float *hs[] = {s->hq, s->hkva, s->hckv, s->hkpe, s->hkvb, s->hcache, s->hatt, s->scores, s->hx,
                   s->hy, s->hxe, s->hrl, s->wts, s->sel_w, s->qabs, s->olat, s->part, s->inv_freq,
                   s->hiq, s->hikn, s->hiw, s->hik, s->iscores};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) free(hs[i]);
    free(s->idx);
    free(s->sel_t);
    free(s->sel);
    free(s->heap);
    free(s->layers);
    free(s);
}

static ld_status load_mlp(ld_ds_session *s, const ld_ds_expert *src, ds_mlp *dst, ld_error *err)
{
    LD_TRY(load(s, &src->gate, &dst->gate, err));
    LD_TRY(load(s, &src->up, &dst->up, err));
    return load(s, &src->down, &dst->down, err);
}

static ld_status load_layer(ld_ds_session *s, int l, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    const ld_ds_layer *ml = &s->m->layers[l];
    ds_layer *L = &s->layers[l];
    const ld_model_tensor *ts[] = {&ml->attn_norm, &ml->q_a,      &ml->q_a_bias, &ml->q_a_norm, &ml->q_b,
                                   &ml->q,         &ml->kv_a,     &ml->kv_a_bias, &ml->kv_a_norm, &ml->kv_b,
                                   &ml->o,         &ml->o_bias,   &ml->ffn_norm, &ml->router};
    ld_weight **ws[] = {&L->attn_norm, &L->q_a,  &L->q_a_bias, &L->q_a_norm, &L->q_b, &L->q,      &L->kv_a,
                        &L->kv_a_bias, &L->kv_a_norm, &L->kv_b, &L->o,     &L->o_bias, &L->ffn_norm, &L->router};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) LD_TRY(load(s, ts[i], ws[i], err));
    if (ml->mlp.gate.st) LD_TRY(load_mlp(s, &ml->mlp, &L->mlp, err));
    if (c->v32) {
        size_t DI = (size_t)c->index_head_dim;
        LD_TRY(load(s, &ml->idx_wq_b, &L->idx_wq_b, err));
        LD_TRY(load(s, &ml->idx_wk, &L->idx_wk, err));
        LD_TRY(load(s, &ml->idx_weights, &L->idx_weights, err));
        L->idx_norm_w = malloc(DI * sizeof *L->idx_norm_w);
        L->idx_norm_b = malloc(DI * sizeof *L->idx_norm_b);
        if (!L->idx_norm_w || !L->idx_norm_b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        ld_ref_to_f32(L->idx_norm_w, ml->idx_k_norm.host.data, (ld_kdt)ml->idx_k_norm.host.dtype, 0, DI);
        ld_ref_to_f32(L->idx_norm_b, ml->idx_k_bias.host.data, (ld_kdt)ml->idx_k_bias.host.dtype, 0, DI);
    }
    if (!ml->moe) return LD_OK;
    L->experts = calloc((size_t)c->n_routed, sizeof *L->experts);
    L->router_bias = malloc((size_t)c->n_routed * sizeof *L->router_bias);
    if (!L->experts || !L->router_bias) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_ref_to_f32(L->router_bias, ml->router_bias.host.data, (ld_kdt)ml->router_bias.host.dtype, 0,
                  (size_t)c->n_routed);
    for (int e = 0; e < c->n_routed; e++) LD_TRY(load_mlp(s, &ml->experts[e], &L->experts[e], err));
    return LD_OK;
}

/* n elements of sz bytes (at least one) */
static void *halloc(size_t n, size_t sz)
{
    return malloc((n > 0 ? n : 1) * sz);
}

#define MAX3(a, b, c) ((a) > (b) ? ((a) > (c) ? (a) : (c)) : ((b) > (c) ? (b) : (c)))

/* the weights of layer l: loaded, or (lead not NULL) borrowed from lead */
static ld_status layer_weights(ld_ds_session *s, const ld_ds_session *lead, int l, ld_error *err)
{
    if (!lead) return load_layer(s, l, err);
    s->layers[l] = lead->layers[l];
    s->layers[l].ckv = s->layers[l].kpe = s->layers[l].ik = NULL; /* the caches are the session's */
    return LD_OK;
}

/* the sizes a session's buffers are made of */
typedef struct ds_dims {
    size_t B, S, D, H, dn, dr, dv, C, E, K, QH, KVB, FF, HI, DI;
} ds_dims;

static ds_dims dims_of(const ld_ds_config *c, int max_seq, int max_batch)
{
    ds_dims d;
    d.B = (size_t)max_batch, d.S = (size_t)max_seq, d.D = (size_t)c->hidden, d.H = (size_t)c->n_heads;
    d.dn = (size_t)c->qk_nope, d.dr = (size_t)c->qk_rope, d.dv = (size_t)c->v_head, d.C = (size_t)c->kv_lora_rank;
    d.E = (size_t)c->n_routed, d.K = (size_t)c->top_k;
    d.QH = d.H * (d.dn + d.dr), d.KVB = d.H * (d.dn + d.dv);
    d.FF = MAX3((size_t)c->intermediate, (size_t)c->moe_intermediate * (size_t)c->n_shared,
                (size_t)c->moe_intermediate);
    /* V3.2's indexer (1-element placeholders for V3) */
    d.HI = c->v32 ? (size_t)c->index_n_heads : 1, d.DI = c->v32 ? (size_t)c->index_head_dim : 1;
    return d;
}

/* the host scratch (1-element placeholders for what the form or the
 * family does not use); 0 when out of memory */
static int alloc_host(ld_ds_session *s, const ld_ds_config *c, const ds_dims *d)
{
    size_t B = d->B, S = d->S, H = d->H, C = d->C;
    int naive = s->attn == LD_DS_ATTN_NAIVE, v32 = c->v32;
    s->layers = calloc((size_t)c->n_layers, sizeof *s->layers);
    s->inv_freq = malloc(d->dr / 2 * sizeof *s->inv_freq);
#define HALLOC(p, n) (p) = halloc((n), sizeof *(p))
    HALLOC(s->hq, B * d->QH);
    HALLOC(s->hkva, B * (C + d->dr));
    HALLOC(s->hckv, B * C);
    HALLOC(s->hkpe, S * d->dr);
    HALLOC(s->hkvb, naive ? S * d->KVB : 1);
    HALLOC(s->hcache, !naive ? S * C : 1);
    HALLOC(s->hatt, B * H * d->dv);
    HALLOC(s->scores, S);
    HALLOC(s->hx, B * d->D);
    HALLOC(s->hy, B * d->D);
    HALLOC(s->hxe, B * d->D);
    HALLOC(s->hrl, B * d->E);
    HALLOC(s->wts, B * d->K);
    HALLOC(s->sel_w, B);
    HALLOC(s->qabs, !naive ? B * H * C : 1);
    HALLOC(s->olat, !naive ? B * H * C : 1);
    HALLOC(s->part, C);
    HALLOC(s->idx, B * d->K);
    HALLOC(s->sel_t, B);
    HALLOC(s->hiq, v32 ? B * d->HI * d->DI : 1);
    HALLOC(s->hikn, v32 ? B * d->DI : 1);
    HALLOC(s->hiw, v32 ? B * d->HI : 1);
    HALLOC(s->hik, v32 ? S * d->DI : 1);
    HALLOC(s->iscores, v32 ? S : 1);
    HALLOC(s->sel, B * (size_t)s->kc);
    HALLOC(s->heap, (size_t)s->kc);
#undef HALLOC
    return s->layers && s->inv_freq && s->hq && s->hkva && s->hckv && s->hkpe && s->hkvb && s->hcache && s->hatt &&
           s->scores && s->hx && s->hy && s->hxe && s->hrl && s->wts && s->sel_w && s->qabs && s->olat && s->part &&
           s->idx && s->sel_t && s->hiq && s->hikn && s->hiw && s->hik && s->iscores && s->sel && s->heap;
}

/* the backend's buffers (not the caches) */
static ld_status alloc_backend(ld_ds_session *s, const ld_ds_config *c, const ds_dims *d, ld_error *err)
{
    size_t B = d->B, H = d->H, C = d->C;
    int naive = s->attn == LD_DS_ATTN_NAIVE, v32 = c->v32;
    ld_status st = LD_OK;
#define ALLOC(b, n) \
    if (st == LD_OK) st = OPS(s)->buf_alloc(s->be, (n), &(b), err)
    ALLOC(s->x, B * d->D);
    ALLOC(s->xb, B * d->D);
    ALLOC(s->qa, B * (c->q_lora_rank ? (size_t)c->q_lora_rank : 1));
    ALLOC(s->q, B * d->QH);
    ALLOC(s->kva, B * (C + d->dr));
    ALLOC(s->ckv_raw, B * C);
    ALLOC(s->ckvn, B * C);
    ALLOC(s->kvb, naive ? d->S * d->KVB : 1);
    ALLOC(s->att, B * H * d->dv);
    ALLOC(s->g, B * d->FF);
    ALLOC(s->u, B * d->FF);
    ALLOC(s->y, B * d->D);
    ALLOC(s->xe, B * d->D);
    ALLOC(s->rl, B * d->E);
    ALLOC(s->logits, s->slice ? 1 : B * (size_t)c->vocab);
    ALLOC(s->iq, v32 ? B * d->HI * d->DI : 1);
    ALLOC(s->ikn, v32 ? B * d->DI : 1);
    ALLOC(s->iw, v32 ? B * d->HI : 1);
    ALLOC(s->bqabs, !naive ? B * H * C : 1);
    ALLOC(s->bolat, !naive ? B * H * C : 1);
#undef ALLOC
    return st;
}

/* the weights (loaded, or a lead's borrowed) and each layer's caches */
static ld_status load_weights(ld_ds_session *s, const ld_ds_session *lead, const ds_dims *d, ld_error *err)
{
    const ld_ds_model *m = s->m;
    const ld_ds_config *c = &m->cfg;
    ld_status st = LD_OK;
    s->borrowed = lead != NULL;
    if (lead) {
        s->k = lead->k;
        s->embed = lead->embed;
        s->norm = lead->norm;
        s->lm_head = lead->lm_head;
    }
    int ends = !lead && !s->slice; /* the embeddings, final norm and head */
    if (st == LD_OK && ends) st = load(s, &m->embed, &s->embed, err);
    if (st == LD_OK && ends) st = load(s, &m->norm, &s->norm, err);
    if (st == LD_OK && ends) {
        if (c->tie_embeddings) s->lm_head = s->embed;
        else st = load(s, &m->lm_head, &s->lm_head, err);
    }
    for (int l = s->first; l < s->last && st == LD_OK; l++) {
        ds_layer *L = &s->layers[l];
        st = layer_weights(s, lead, l, err);
        if (st == LD_OK) st = OPS(s)->buf_alloc(s->be, d->S * d->C, &L->ckv, err);
        if (st == LD_OK) st = OPS(s)->buf_alloc(s->be, d->S * d->dr, &L->kpe, err);
        if (st == LD_OK && c->v32) st = OPS(s)->buf_alloc(s->be, d->S * d->DI, &L->ik, err);
    }
    return st;
}

/* ld_ds_session_create, (lead not NULL) ld_ds_session_create_sibling, and
 * (slice_last > 0) ld_ds_session_create_slice over [slice_first, slice_last) */
static ld_status session_make(const ld_ds_model *m, ld_backend *be, int max_seq, int max_batch, ld_ds_attn attn,
                              const ld_ds_session *lead, int slice_first, int slice_last, ld_ds_session **out,
                              ld_error *err)
{
    *out = NULL;
    const ld_ds_config *c = &m->cfg;
    if (max_seq < 1 || max_batch < 1 || max_seq > c->max_pos)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "max_seq %d and max_batch %d must be >= 1 and max_seq <= %d", max_seq,
                       max_batch, c->max_pos);
    if (attn != LD_DS_ATTN_NAIVE && attn != LD_DS_ATTN_ABSORBED && attn != LD_DS_ATTN_SPLITK)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "unknown attention form %d", (int)attn);
    if (max_batch > max_seq) max_batch = max_seq;
    ld_ds_session *s = calloc(1, sizeof *s);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    s->m = m;
    s->be = be;
    s->max_seq = max_seq;
    s->max_batch = max_batch;
    s->attn = attn;
    s->slice = slice_last > 0;
    s->first = s->slice ? slice_first : 0;
    s->last = s->slice ? slice_last : c->n_layers;
    s->k = ld_cpu_kernels_default(0); /* the variants: ld_ds_session_set_kernels */
    s->scale = ld_ds_softmax_scale(c);
    s->attn_factor = ld_ds_rope_attn_factor(c);
    s->kc = c->v32 ? (c->index_topk < max_seq ? c->index_topk : max_seq) : 1;
    ds_dims d = dims_of(c, max_seq, max_batch);
    ld_status st = alloc_host(s, c, &d) ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK) {
        ld_ds_rope_inv_freq(c, s->inv_freq);
        st = alloc_backend(s, c, &d, err);
    }
    if (st == LD_OK) st = load_weights(s, lead, &d, err);
    if (st != LD_OK) {
        ld_ds_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

ld_status ld_ds_session_create(const ld_ds_model *m, ld_backend *be, int max_seq, int max_batch, ld_ds_attn attn,
                               ld_ds_session **out, ld_error *err)
{
    return session_make(m, be, max_seq, max_batch, attn, NULL, 0, 0, out, err);
}

ld_status ld_ds_session_create_sibling(const ld_ds_session *lead, int max_seq, ld_ds_session **out, ld_error *err)
{
    if (lead->slice) return LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice's session has no siblings");
    return session_make(lead->m, lead->be, max_seq, lead->max_batch, lead->attn, lead, 0, 0, out, err);
}

void ld_ds_session_set_kernels(ld_ds_session *s, const ld_cpu_kernels *k)
{
    static const ld_kop ops[] = {LD_KOP_ROUTER, LD_KOP_COMBINE, LD_KOP_INDEXER, LD_KOP_ROPE};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) s->k.v[ops[i]] = k->v[ops[i]];
}

void ld_ds_session_set_reduce(ld_ds_session *s, ld_ds_reduce_fn fn, void *ctx)
{
    s->reduce = fn;
    s->reduce_ctx = ctx;
}

int ld_ds_session_pos(const ld_ds_session *s)
{
    return s->pos;
}

void ld_ds_session_reset(ld_ds_session *s)
{
    s->pos = 0;
}

/* ---------------------------------------------------------------- slices */

ld_status ld_ds_session_create_slice(const ld_ds_model *m, ld_backend *be, int first, int last, int max_seq,
                                     int max_batch, ld_ds_attn attn, ld_ds_session **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_session_check_slice(first, last, m->cfg.n_layers, err));
    return session_make(m, be, max_seq, max_batch, attn, NULL, first, last, out, err);
}
