/* deepseek_v4_forward.c - see deepseek_v4_forward.h. */
#include "deepseek_v4_forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host_tensor.h"
#include "ref_deepseek.h"
#include "ref_deepseek_v4.h"
#include "ref_ds_variants.h"
#include "ref_ops.h"
#include "ref_variants.h"
#include "batch.h"
#include "session_args.h"

/* an MLP's gate, up and down weights: the moe entry's expert */
typedef ld_moe_expert ds4_mlp;

/* a compressor's weights and state */
typedef struct ds4_comp {
    ld_weight *wkv, *wgate;
    float *ape, *norm;       /* [r][width], [dim] fp32 host copies */
    int width, dim, ratio, overlap;
    float *kv, *gate;        /* [2 ratio][width]: the last positions' projections
                                (position p in row p % (2 ratio)) */
    float *skv, *sgate;      /* [2 ratio][width]: one entry's slots, in order */
    float *entries;          /* [max_seq / ratio][dim]: normalised, rotated */
    /* attention on the backend (entries): the rings and entries above in
       backend buffers, ape and norm copies */
    ld_buf *bkv, *bgate, *bent, *bape, *bnorm;
} ds4_comp;

typedef struct ds4_layer {
    ld_weight *attn_norm, *ffn_norm, *wq_a, *q_norm, *wq_b, *wkv, *kv_norm, *wo_b, *router;
    ld_weight **wo_a;        /* [G]: views of wo_a's blocks of rows */
    float *hc_attn[3], *hc_ffn[3];  /* fn, base, scale */
    ld_buf *hc_fn[2];        /* attention's and the MoE's fn for hc_pre */
    float *sinks, *router_bias;
    ds4_mlp shared, *experts;
    float *kvc;              /* [kv_rows][hd] rotated kv, position p in row
                                p % kv_rows */
    int has_comp, has_index;
    ds4_comp comp, icomp;
    ld_weight *iwq_b, *iweights;
    /* the projections that share an input, as matmul_fanout takes them:
       {wq_a, wkv} of the block's input; {wq_b, iwq_b} of the q latent */
    ld_weight *down[2], *up[2], *down_norm[2]; /* down_norm: {q_norm, kv_norm} */
    /* the attention input's other projections, as matmul_fanout takes them:
       the compressor's kv and gate, the indexer's compressor's, its weights */
    ld_weight *xw[5];
    int nxw;
    /* attention on the backend (entries): the kv ring, the sinks */
    ld_buf *bkvc, *bsinks;
} ds4_layer;

/* a sequence's rows in a batch's chunk (ld_ds4_session_eval_batch): its
 * session (its position, rings and entries), rows [row, row + n) of the
 * lead's buffers */
typedef struct ds4_part {
    ld_ds4_session *s;
    int row, n;
} ds4_part;

struct ld_ds4_session {
    ld_cpu_kernels k; /* the session-level variants (combine, mhc, indexer, rope) */
    const ld_ds4_model *m;
    ld_backend *be;
    int max_seq, max_batch, pos, kv_rows;
    float *inv_main, *inv_comp, af_main, af_comp;
    ld_weight *embed, *norm, *lm_head;
    float *hc_head[3];
    ds4_layer *layers;
    /* backend buffers (B = max_batch rows) */
    ld_buf *x, *xb, *qa, *q, *kv, *ckv, *cg, *iq, *iw, *att, *og, *ogall, *ao, *rl, *g, *u, *xe, *logits;
    /* the mHC ops' buffers (backends with hc_pre / hc_post): streams in and
       out, post, comb, the block's output */
    ld_buf *bst, *bnst, *bpost, *bcomb, *bf;
    int hc_host; /* 1: the mHC mixing on the host (no entries, or a variant
                    the backend lacks) */
    /* where the current streams are (at least one): s->bst on the backend,
       which the entries keep from site to site without a copy to the host,
       and / or the host's s->streams (the host path, the hidden planes) */
    int st_dev, st_host;
    /* MoE on the backend (entry) */
    ld_buf *bmoe; /* the MoE block's output [B][D] (backends with moe) */
    int moe_host; /* 1: the host loop (no entry, or a variant it refuses) */
    int want_route; /* 1: this chunk's experts are recorded (s->idx read after each layer) */
    /* host scratch */
    float *streams, *nstreams, *post, *comb, *hu, *hf, *hq, *hkv, *hatt, *hgrp, *hog, *hiq, *hiw, *hrl, *hx, *hy,
        *hxe, *hg, *hup, *wts, *sel_w, *scores, *hcs, *ent, *hck, *hcg;
    const float **keys;
    int32_t *idx, *pick, *hrows; /* hrows: ds4_route's hash rows [B][K] */
    int32_t *rep;                /* a chunk's tokens, each hc_mult times [B][N] */
    int *sel_t;
    /* attention on the backend (entries) */
    int att_entries; /* 1: the backend has every V4 attention entry (and the buffers exist) */
    int att_be;      /* 1: the KV rings and entries live in the backend buffers (else the host arrays) */
    ld_buf *bao;     /* [B][H*hd] the attention's output (de-rotated) */
    ld_buf *ickv, *icg; /* [B][2 ih] the indexer's compressor's projections (the
                           main one's: ckv, cg; all of a layer's L->xw at once) */
    ld_buf *bfreq[2]; /* inv_main, inv_comp [rope_dim/2] */
    ld_buf *bhfn, *bhx; /* ds4_hc_head's fn [N][N*D] and streams [B][N][D] */
    int32_t *isel;   /* [B][ksel] the indexer's picks */
    int ksel;        /* index_topk, at most max_seq (no more entries exist) */
    ld_ds4_reduce_fn reduce; /* tensor parallelism: NULL = none */
    void *reduce_ctx;
    /* a batch's chunk, this session leading (its weights and scratch): the
       sequences whose attention runs on their rows, and the round's rows
       (batch.h: where each part's rows and hidden planes go); NULL outside one */
    const ds4_part *parts;
    const ld_batch_rows *rows;
    int nparts;
    int borrowed; /* 1: the weights are a lead's (ld_ds4_session_create_sibling) */
    int first, last; /* the layers it runs: all, or a slice's (ld_ds4_session_create_slice) */
    int slice;       /* 1: a slice's session (no embeddings, head collapse, final norm or lm head) */
    /* ld_ds4_session_eval_streams: the streams entering layer tap_layer
       (n_layers: after the last) copied to tap [T][N][D]; NULL: none */
    float *tap;
    int tap_layer;
};

#define OPS(s) ((s)->be->ops)

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
                   s->hup,     s->wts,      s->sel_w, s->scores, s->hcs, s->ent, s->inv_main, s->inv_comp, s->hck, s->hcg};
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

static size_t max2(size_t a, size_t b)
{
    return a > b ? a : b;
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
    size_t B = (size_t)max_batch, S = (size_t)max_seq, D = (size_t)c->hidden, N = (size_t)c->hc_mult;
    size_t H = (size_t)c->n_heads, hd = (size_t)c->head_dim, QR = (size_t)c->q_lora_rank;
    size_t G = (size_t)c->o_groups, OL = (size_t)c->o_lora_rank, E = (size_t)c->n_routed, K = (size_t)c->top_k;
    size_t I = (size_t)c->moe_intermediate, ih = (size_t)c->index_head_dim, nih = (size_t)c->index_n_heads;
    size_t HC = (2 + N) * N, R = (size_t)c->rope_dim;
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
    HALLOC(s->scores, S + (size_t)c->sliding_window + 1);
    HALLOC(s->hcs, N * D + HC);
    HALLOC(s->ent, max2(hd, ih));
    HALLOC(s->keys, S + (size_t)c->sliding_window + 1);
    HALLOC(s->idx, B * K);
    HALLOC(s->hrows, B * K);
    HALLOC(s->rep, B * N);
    HALLOC(s->pick, S + 1);
    HALLOC(s->sel_t, B);
#undef HALLOC
    if (!s->layers || !s->inv_main || !s->inv_comp || !s->streams || !s->nstreams || !s->post || !s->comb || !s->hu ||
        !s->hf || !s->hq || !s->hkv || !s->hatt || !s->hgrp || !s->hog || !s->hiq || !s->hck || !s->hcg || !s->hiw || !s->hrl || !s->hx ||
        !s->hy || !s->hxe || !s->hg || !s->hup || !s->wts || !s->sel_w || !s->scores || !s->hcs || !s->ent ||
        !s->keys || !s->idx || !s->hrows || !s->rep || !s->pick || !s->sel_t) {
        ld_ds4_session_destroy(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    ld_ds4_rope_inv_freq(c, &c->rope_main, s->inv_main, &s->af_main);
    ld_ds4_rope_inv_freq(c, &c->rope_compress, s->inv_comp, &s->af_comp);
    ld_status st = LD_OK;
#define ALLOC(b, n) \
    if (st == LD_OK) st = OPS(s)->buf_alloc(be, (n), &(b), err)
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

/* rope=bf16 */
static int rope_bf16(const ld_ds4_session *s)
{
    return s->k.v[LD_KOP_ROPE] == LD_KV_BF16;
}

/* indexer=bf16|fp8: `rows` rows of `dim` (query heads or one key) as the
 * variant feeds the score kernel (the key when it is cached) */
static void index_operand(const ld_ds4_session *s, float *x, int rows, int dim)
{
    if (s->k.v[LD_KOP_INDEXER] == LD_KV_BF16) ld_dsv_round_bf16(x, (size_t)rows * (size_t)dim);
    else if (s->k.v[LD_KOP_INDEXER] == LD_KV_FP8) ld_dsv_index_fp8(x, rows, dim);
}

int ld_ds4_session_pos(const ld_ds4_session *s)
{
    return s->pos;
}

void ld_ds4_session_reset(ld_ds4_session *s)
{
    s->pos = 0;
}

/* The n rows' projections of compressor `c`; each row goes to the ring,
 * and the entry whose window it completes is computed then. */
static ld_status compress(ld_ds4_session *s, ds4_comp *c, int is_index, int n, ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    const ld_ds4_config *cf = &s->m->cfg;
    size_t W = (size_t)c->width, r = (size_t)c->ratio, bytes = W * sizeof(float);
    LD_TRY(o->matmul(s->be, s->ckv, s->xb, c->wkv, NULL, n, err));
    LD_TRY(o->matmul(s->be, s->cg, s->xb, c->wgate, NULL, n, err));
    LD_TRY(o->buf_read(s->be, s->ckv, 0, s->hck, (size_t)n * W, err));
    LD_TRY(o->buf_read(s->be, s->cg, 0, s->hcg, (size_t)n * W, err));
    for (int t = 0; t < n; t++) {
        size_t p = (size_t)s->pos + (size_t)t;
        memcpy(c->kv + (p % (2 * r)) * W, s->hck + (size_t)t * W, bytes);
        memcpy(c->gate + (p % (2 * r)) * W, s->hcg + (size_t)t * W, bytes);
        if ((p + 1) % r) continue;
        int w = (int)((p + 1) / r) - 1, prev = c->overlap && w > 0;
        /* the slots in order: window w - 1 (CSA), then window w */
        for (size_t j = 0; j < (prev ? 2 : 1) * r; j++) {
            size_t q = ((size_t)w - (prev ? 1 : 0)) * r + j;
            memcpy(c->skv + j * W, c->kv + (q % (2 * r)) * W, bytes);
            memcpy(c->sgate + j * W, c->gate + (q % (2 * r)) * W, bytes);
        }
        float *e = c->entries + (size_t)w * (size_t)c->dim;
        ld_ref_ds4_compress(s->ent, c->skv, c->sgate, c->ape, c->ratio, c->dim, W, c->overlap, prev);
        ld_ref_rmsnorm(e, s->ent, c->norm, LD_KDT_F32, c->dim, cf->rms_eps, 0, 1);
        ld_ref_ds4_rope_ex(e, 1, c->dim, cf->rope_dim, s->inv_comp, s->af_comp, w * c->ratio, 0, rope_bf16(s));
        if (is_index) index_operand(s, e, 1, c->dim);
    }
    return LD_OK;
}

/* the host path of attention(): the n rows of s->xb (positions
 * s->pos...) into s->ao, the state in host arrays; the CSA indexer's
 * picks into `picks` [n][index_topk] (NULL: not wanted) */
static ld_status attention_host(ld_ds4_session *s, int l, int n, int32_t *picks, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    ds4_layer *L = &s->layers[l];
    int H = c->n_heads, hd = c->head_dim, rd = c->rope_dim, G = c->o_groups, OL = c->o_lora_rank;
    size_t N = (size_t)n, QH = (size_t)H * (size_t)hd, GW = QH / (size_t)G;
    int comp_rope = c->layer_type[l] != LD_DS4_SLIDING;
    const float *inv = comp_rope ? s->inv_comp : s->inv_main;
    float af = comp_rope ? s->af_comp : s->af_main;

    LD_TRY(o->matmul(be, s->qa, s->xb, L->wq_a, NULL, n, err));
    LD_TRY(o->rmsnorm(be, s->qa, s->qa, L->q_norm, n, c->rms_eps, err));
    LD_TRY(o->matmul(be, s->q, s->qa, L->wq_b, NULL, n, err));
    LD_TRY(o->buf_read(be, s->q, 0, s->hq, N * QH, err));
    LD_TRY(o->matmul(be, s->kv, s->xb, L->wkv, NULL, n, err));
    LD_TRY(o->rmsnorm(be, s->kv, s->kv, L->kv_norm, n, c->rms_eps, err));
    LD_TRY(o->buf_read(be, s->kv, 0, s->hkv, N * (size_t)hd, err));
    for (int t = 0; t < n; t++) {
        float *q = s->hq + (size_t)t * QH;
        for (int h = 0; h < H; h++) ld_ref_ds4_unit_rmsnorm(q + (size_t)h * (size_t)hd, hd, c->rms_eps);
        ld_ref_ds4_rope_ex(q, H, hd, rd, inv, af, s->pos + t, 0, rope_bf16(s));
        float *kv = L->kvc + (size_t)((s->pos + t) % s->kv_rows) * (size_t)hd;
        memcpy(kv, s->hkv + (size_t)t * (size_t)hd, (size_t)hd * sizeof *kv);
        ld_ref_ds4_rope_ex(kv, 1, hd, rd, inv, af, s->pos + t, 0, rope_bf16(s));
    }
    if (L->has_comp) LD_TRY(compress(s, &L->comp, 0, n, err));
    int nih = c->index_n_heads, ih = c->index_head_dim;
    if (L->has_index) {
        LD_TRY(compress(s, &L->icomp, 1, n, err));
        LD_TRY(o->matmul(be, s->iq, s->qa, L->iwq_b, NULL, n, err));
        LD_TRY(o->buf_read(be, s->iq, 0, s->hiq, N * (size_t)nih * (size_t)ih, err));
        LD_TRY(o->matmul(be, s->iw, s->xb, L->iweights, NULL, n, err));
        LD_TRY(o->buf_read(be, s->iw, 0, s->hiw, N * (size_t)nih, err));
    }
    for (int t = 0; t < n; t++) {
        int p = s->pos + t, nk = 0;
        int lo = p - c->sliding_window + 1 > 0 ? p - c->sliding_window + 1 : 0;
        for (int j = lo; j <= p; j++) s->keys[nk++] = L->kvc + (size_t)(j % s->kv_rows) * (size_t)hd;
        if (L->has_comp && c->use_compressed) {
            int nvalid = (p + 1) / L->comp.ratio, npick = nvalid;
            if (L->has_index) {
                float *iq = s->hiq + (size_t)t * (size_t)nih * (size_t)ih;
                float *iw = s->hiw + (size_t)t * (size_t)nih;
                ld_ref_ds4_rope_ex(iq, nih, ih, rd, s->inv_comp, s->af_comp, p, 0, rope_bf16(s));
                index_operand(s, iq, nih, ih);
                if (s->k.v[LD_KOP_INDEXER] == LD_KV_BF16) ld_dsv_round_bf16(iw, (size_t)nih);
                ld_ref_ds4_index_scores(s->scores, iq, iw, L->icomp.entries, nvalid, nih, ih,
                                        1.0f / sqrtf((float)ih), 1.0f / sqrtf((float)nih));
                npick = ld_ref_ds4_topk(s->pick, s->scores, nvalid, c->index_topk);
                if (picks) {
                    int32_t *dst = picks + (size_t)t * (size_t)c->index_topk;
                    for (int i = 0; i < c->index_topk; i++) dst[i] = i < npick ? s->pick[i] : -1;
                }
            } else {
                for (int w = 0; w < nvalid; w++) s->pick[w] = w;
            }
            for (int i = 0; i < npick; i++) s->keys[nk++] = L->comp.entries + (size_t)s->pick[i] * (size_t)hd;
        }
        float *out = s->hatt + (size_t)t * QH;
        ld_ref_ds4_attention(out, s->hq + (size_t)t * QH, H, hd, s->keys, nk, c->use_sinks ? L->sinks : NULL,
                             1.0f / sqrtf((float)hd), s->scores);
        ld_ref_ds4_rope_ex(out, H, hd, rd, inv, af, p, 1, rope_bf16(s));
    }
    /* grouped output projection: group g's heads through wo_a's block g */
    for (int g = 0; g < G; g++) {
        for (size_t t = 0; t < N; t++)
            memcpy(s->hgrp + t * GW, s->hatt + t * QH + (size_t)g * GW, GW * sizeof *s->hgrp);
        LD_TRY(o->buf_write(be, s->att, 0, s->hgrp, N * GW, err));
        LD_TRY(o->matmul(be, s->og, s->att, L->wo_a[g], NULL, n, err));
        LD_TRY(o->buf_read(be, s->og, 0, s->hgrp, N * (size_t)OL, err));
        for (size_t t = 0; t < N; t++)
            memcpy(s->hog + t * (size_t)G * (size_t)OL + (size_t)g * (size_t)OL, s->hgrp + t * (size_t)OL,
                   (size_t)OL * sizeof *s->hog);
    }
    return o->buf_write(be, s->ogall, 0, s->hog, N * (size_t)G * (size_t)OL, err); /* wo_b: attention_out */
}

/* ---- attention on the backend (entries) */

/* the session's indexer= variant as the entries' */
static int index_variant(const ld_ds4_session *s)
{
    if (s->k.v[LD_KOP_INDEXER] == LD_KV_BF16) return LD_DS4_INDEX_BF16;
    return s->k.v[LD_KOP_INDEXER] == LD_KV_FP8 ? LD_DS4_INDEX_FP8 : LD_DS4_INDEX_F32;
}

/* layer l's RoPE: the compress rope's (comp 1, or a layer with a
 * compressor) or the main one */
static ld_ds4_rot layer_rope(const ld_ds4_session *s, int l, int comp)
{
    const ld_ds4_config *c = &s->m->cfg;
    int cr = comp || c->layer_type[l] != LD_DS4_SLIDING;
    ld_ds4_rot r = {.inv_freq = s->bfreq[cr], .attn_factor = cr ? s->af_comp : s->af_main,
                     .dim = c->rope_dim, .bf16 = rope_bf16(s)};
    return r;
}

static ld_ds4_comp_bufs comp_bufs(const ds4_comp *c)
{
    ld_ds4_comp_bufs b = {.kv = c->bkv, .gate = c->bgate, .entries = c->bent, .ape = c->bape, .norm = c->bnorm,
                     .width = c->width, .dim = c->dim, .ratio = c->ratio};
    return b;
}

/* an optional entry's answer st (its error in *e): 0 when it refused
 * (LD_ERR_UNSUPPORTED, nothing written: the caller makes the calls it
 * stands for), else 1 with a failure's error copied to *err */
static int answered(ld_status st, const ld_error *e, ld_error *err)
{
    if (st == LD_ERR_UNSUPPORTED) return 0;
    if (st != LD_OK && err) *err = *e;
    return 1;
}

/* st of a probe: *ok cleared on LD_ERR_UNSUPPORTED, another error kept */
static ld_status probe_ok(ld_status st, const ld_error *e, int *ok, ld_error *err)
{
    if (st == LD_ERR_UNSUPPORTED) *ok = 0;
    else if (st != LD_OK && err) *err = *e;
    return st == LD_ERR_UNSUPPORTED ? LD_OK : st;
}

/* whether the entries take the session's variants now: each called with
 * T = 0 (a probe, nothing written) */
static ld_status att_probe(ld_ds4_session *s, int *ok, ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    const ld_ds4_config *c = &s->m->cfg;
    int H = c->n_heads, hd = c->head_dim, vi = index_variant(s);
    ld_error e = {0};
    *ok = 1;
    for (int l = s->first; l < s->last && *ok; l++) {
        ds4_layer *L = &s->layers[l];
        ld_ds4_rot r = layer_rope(s, l, 0), cr = layer_rope(s, l, 1);
        ld_ds4_comp_bufs cb = comp_bufs(&L->comp), ib = comp_bufs(&L->icomp);
        const ld_buf *ent = L->has_comp ? L->comp.bent : NULL;
        int ratio = L->has_comp ? L->comp.ratio : 1;
        LD_TRY(probe_ok(o->ds4_qkv(s->be, s->q, L->bkvc, s->kv, 0, s->pos, H, hd, s->kv_rows, c->rms_eps, &r, &e), &e,
                        ok, err));
        LD_TRY(probe_ok(o->ds4_attention(s->be, s->bao, s->q, L->bkvc, ent, NULL, s->ksel, L->bsinks, 0, s->pos,
                                         H, hd, s->kv_rows, c->sliding_window, ratio, 1.0f, &r, &e),
                        &e, ok, err));
        if (L->has_comp)
            LD_TRY(probe_ok(o->ds4_compress(s->be, &cb, s->ckv, s->cg, 0, s->pos, c->rms_eps, &cr, LD_DS4_INDEX_F32,
                                            &e),
                            &e, ok, err));
        if (!L->has_index) continue;
        LD_TRY(probe_ok(o->ds4_compress(s->be, &ib, s->ckv, s->cg, 0, s->pos, c->rms_eps, &cr, vi, &e), &e, ok, err));
        LD_TRY(probe_ok(o->ds4_index(s->be, s->isel, s->iq, s->iw, L->icomp.bent, 0, s->pos, c->index_n_heads,
                                     c->index_head_dim, L->comp.ratio, s->ksel, &cr, vi, &e),
                        &e, ok, err));
    }
    return LD_OK;
}

/* one state array between the host (to_be 0) and its buffer */
static ld_status move(ld_ds4_session *s, ld_buf *b, float *host, size_t n, int to_be, ld_error *err)
{
    if (to_be) return OPS(s)->buf_write(s->be, b, 0, host, n, err);
    return OPS(s)->buf_read(s->be, b, 0, host, n, err);
}

static ld_status move_comp(ld_ds4_session *s, ds4_comp *c, int to_be, ld_error *err)
{
    size_t ring = 2 * (size_t)c->ratio * (size_t)c->width;
    size_t ne = ((size_t)s->max_seq / (size_t)c->ratio + 1) * (size_t)c->dim;
    LD_TRY(move(s, c->bkv, c->kv, ring, to_be, err));
    LD_TRY(move(s, c->bgate, c->gate, ring, to_be, err));
    return move(s, c->bent, c->entries, ne, to_be, err);
}

/* Picks where the attention state lives for this chunk: in the buffers
 * when the entries take the variants, else on the host; a change (the
 * variants set between two evals) moves the rings and entries over (the
 * same layout on both sides). */
static ld_status att_place(ld_ds4_session *s, ld_error *err)
{
    int ok = 0;
    if (s->att_entries) LD_TRY(att_probe(s, &ok, err));
    if (ok == s->att_be) return LD_OK;
    const ld_ds4_config *c = &s->m->cfg;
    for (int l = s->first; l < s->last; l++) {
        ds4_layer *L = &s->layers[l];
        LD_TRY(move(s, L->bkvc, L->kvc, (size_t)s->kv_rows * (size_t)c->head_dim, ok, err));
        if (L->has_comp) LD_TRY(move_comp(s, &L->comp, ok, err));
        if (L->has_index) LD_TRY(move_comp(s, &L->icomp, ok, err));
    }
    s->att_be = ok;
    return LD_OK;
}

/* compressor c's entry over its projections kv, gate of the n rows */
static ld_status compress_be(ld_ds4_session *s, const ds4_comp *c, const ld_buf *kv, const ld_buf *gate, int variant,
                             const ld_ds4_rot *rope, int n, ld_error *err)
{
    ld_ds4_comp_bufs b = comp_bufs(c);
    return OPS(s)->ds4_compress(s->be, &b, kv, gate, n, s->pos, s->m->cfg.rms_eps, rope, variant, err);
}

/* the grouped output projection of s->bao into s->ogall: group g's heads
 * through wo_a's block g (the backend's matmul_blockdiag in one call, or
 * a copy_cols and matmul a group), the groups' outputs side by side (wo_b
 * then takes them: attention_out) */
static ld_status out_proj_be(ld_ds4_session *s, const ds4_layer *L, int n, ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    const ld_ds4_config *c = &s->m->cfg;
    size_t G = (size_t)c->o_groups, OL = (size_t)c->o_lora_rank;
    size_t QH = (size_t)c->n_heads * (size_t)c->head_dim, GW = QH / G;
    ld_status st = LD_ERR_UNSUPPORTED;
    ld_error e = {0};
    if (o->matmul_blockdiag) st = o->matmul_blockdiag(s->be, s->ogall, s->bao, L->wo_a, (int)G, n, &e);
    if (answered(st, &e, err)) return st;
    for (size_t g = 0; g < G; g++) {
        LD_TRY(o->copy_cols(s->be, s->att, GW, 0, s->bao, QH, g * GW, n, GW, err));
        LD_TRY(o->matmul(s->be, s->og, s->att, L->wo_a[g], NULL, n, err));
        LD_TRY(o->copy_cols(s->be, s->ogall, G * OL, g * OL, s->og, OL, 0, n, OL, err));
    }
    return LD_OK;
}

/* the n products of x through ws (a layer's down[] or up[]) into outs:
 * one matmul_fanout where the backend groups them, else a matmul each */
static ld_status fanout(ld_ds4_session *s, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int nw, int n,
                        ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    ld_error e = {0};
    ld_status st = o->matmul_fanout ? o->matmul_fanout(s->be, outs, x, ws, nw, n, NULL, 0.0f, &e) : LD_ERR_UNSUPPORTED;
    if (answered(st, &e, err)) return st;
    for (int i = 0; i < nw; i++) LD_TRY(o->matmul(s->be, outs[i], x, ws[i], NULL, n, err));
    return LD_OK;
}

/* the q latent (wq_a, q_norm), the kv row (wkv, kv_norm) and the query
 * heads (wq_b; with an indexer, its queries by iwq_b) of the n rows of
 * s->xb: the projections of one input together, the two norms together,
 * where the backend fuses them */
static ld_status q_and_kv(ld_ds4_session *s, ds4_layer *L, int n, ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    float eps = s->m->cfg.rms_eps;
    ld_buf *down[2] = {s->qa, s->kv}, *up[2] = {s->q, s->iq};
    ld_error e = {0};
    ld_status st = LD_ERR_UNSUPPORTED; /* the projections and their norms in one call */
    if (o->matmul_fanout) st = o->matmul_fanout(s->be, down, s->xb, L->down, 2, n, L->down_norm, eps, &e);
    if (!answered(st, &e, err)) { /* the projections, then the norms together or one by one */
        LD_TRY(fanout(s, down, s->xb, L->down, 2, n, err));
        st = LD_ERR_UNSUPPORTED;
        if (o->rmsnorm2) st = o->rmsnorm2(s->be, s->qa, s->qa, L->q_norm, s->kv, s->kv, L->kv_norm, n, eps, &e);
        if (!answered(st, &e, err)) {
            LD_TRY(o->rmsnorm(s->be, s->qa, s->qa, L->q_norm, n, eps, err));
            st = o->rmsnorm(s->be, s->kv, s->kv, L->kv_norm, n, eps, err);
        }
    }
    LD_TRY(st);
    return fanout(s, up, s->qa, L->up, L->has_index ? 2 : 1, n, err);
}

/* the attention's projections of the n rows of s->xb, every one a
 * product of a row alone (a batch's projections run on all its rows) */
static ld_status att_proj_be(ld_ds4_session *s, ds4_layer *L, int n, ld_error *err)
{
    LD_TRY(q_and_kv(s, L, n, err));
    ld_buf *xo[5] = {s->ckv, s->cg, s->ickv, s->icg, s->iw}; /* L->xw's outputs */
    return fanout(s, xo, s->xb, L->xw, L->nxw, n, err);
}

/* the entries of attention_be on the projections of n rows of one
 * sequence (positions s->pos..., its ring and compressors): the output
 * heads into s->bao, de-rotated */
static ld_status att_core_be(ld_ds4_session *s, int l, int n, int32_t *picks, ld_error *err)
{
    const ld_ds4_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    ds4_layer *L = &s->layers[l];
    int H = c->n_heads, hd = c->head_dim;
    ld_ds4_rot r = layer_rope(s, l, 0), cr = layer_rope(s, l, 1);
    LD_TRY(o->ds4_qkv(be, s->q, L->bkvc, s->kv, n, s->pos, H, hd, s->kv_rows, c->rms_eps, &r, err));
    if (L->has_comp) LD_TRY(compress_be(s, &L->comp, s->ckv, s->cg, LD_DS4_INDEX_F32, &cr, n, err));
    if (L->has_index) LD_TRY(compress_be(s, &L->icomp, s->ickv, s->icg, index_variant(s), &cr, n, err));
    const ld_buf *ent = NULL;
    const int32_t *sel = NULL;
    size_t KI = (size_t)c->index_topk, KS = (size_t)s->ksel;
    int ratio = L->has_comp ? L->comp.ratio : 1;
    float scale = 1.0f / sqrtf((float)hd);
    if (L->has_comp && c->use_compressed && L->has_index && !picks && o->ds4_index_attention) {
        /* the picks unrecorded: one call, which may keep them on the device */
        ld_ds4_index_call ix = {s->iq, s->iw, L->icomp.bent, c->index_n_heads, c->index_head_dim, s->ksel, &cr,
                                index_variant(s)};
        ld_ds4_attn_call at = {s->bao, s->q, L->bkvc, L->comp.bent, c->use_sinks ? L->bsinks : NULL, H, hd,
                               s->kv_rows, c->sliding_window, ratio, scale, &r};
        return o->ds4_index_attention(be, &ix, &at, n, s->pos, NULL, err);
    }
    if (L->has_comp && c->use_compressed) {
        ent = L->comp.bent;
        if (L->has_index) {
            LD_TRY(o->ds4_index(be, s->isel, s->iq, s->iw, L->icomp.bent, n, s->pos, c->index_n_heads,
                                c->index_head_dim, L->comp.ratio, s->ksel, &cr, index_variant(s), err));
            sel = s->isel;
            for (size_t t = 0; picks && t < (size_t)n; t++)
                for (size_t i = 0; i < KI; i++) picks[t * KI + i] = i < KS ? s->isel[t * KS + i] : -1;
        }
    }
    return o->ds4_attention(be, s->bao, s->q, L->bkvc, ent, sel, s->ksel, c->use_sinks ? L->bsinks : NULL, n, s->pos,
                            H, hd, s->kv_rows, c->sliding_window, ratio, scale, &r, err);
}

/* attention() with the state in backend buffers: the projections, the
 * entries in the host path's order, the grouped output projection; only
 * the indexer's picks come back (int32) */
static ld_status attention_be(ld_ds4_session *s, int l, int n, int32_t *picks, ld_error *err)
{
    ds4_layer *L = &s->layers[l];
    LD_TRY(att_proj_be(s, L, n, err));
    LD_TRY(att_core_be(s, l, n, picks, err));
    return out_proj_be(s, L, n, err);
}

/* attention of the n rows of s->xb (positions s->pos...) into s->ao: on
 * the backend's entries, or the host leaves (where the state is decided
 * once a chunk, at layer 0) */
static ld_status attention(ld_ds4_session *s, int l, int n, int32_t *picks, ld_error *err)
{
    if (l == 0) LD_TRY(att_place(s, err));
    if (s->att_be) return attention_be(s, l, n, picks, err);
    return attention_host(s, l, n, picks, err);
}

/* ---- a batch's attention */

#define ATT_BUFS 14

/* the row buffers layer l's attention() reads and writes (a pointer to
 * each field, whose buffer is NULL where the session has none) and the
 * floats of a row of each, as the layer's products pack them (the
 * compressor's kv and gate: its width) */
static void att_bufs(ld_ds4_session *s, int l, ld_buf **b[ATT_BUFS], size_t w[ATT_BUFS])
{
    const ld_ds4_config *c = &s->m->cfg;
    size_t D = (size_t)c->hidden, QR = (size_t)c->q_lora_rank, QH = (size_t)c->n_heads * (size_t)c->head_dim;
    size_t hd = (size_t)c->head_dim, G = (size_t)c->o_groups, OL = (size_t)c->o_lora_rank;
    size_t ih = (size_t)c->index_head_dim, nih = (size_t)c->index_n_heads;
    const ds4_layer *L = &s->layers[l];
    size_t cw = L->has_comp ? (size_t)L->comp.width : 2 * max2(hd, ih);
    ld_buf **p[ATT_BUFS] = {&s->xb, &s->qa,  &s->q,     &s->kv,  &s->ckv,  &s->cg,  &s->iq,
                            &s->iw, &s->att, &s->og,    &s->ogall, &s->bao, &s->ickv, &s->icg};
    size_t n[ATT_BUFS] = {D, QR, QH, hd, cw, cw, nih * ih, nih, QH / G, OL, G * OL, QH, 2 * ih, 2 * ih};
    memcpy(b, p, sizeof p);
    memcpy(w, n, sizeof n);
}

/* part p's attention on its rows of the lead's buffers, bound in its
 * session's place: the entries alone (be 1: the projections ran on all
 * the rows), or the host path's whole block */
static ld_status attention_part(ld_ds4_session *lead, const ds4_part *p, int l, int be, ld_error *err)
{
    ld_buf **src[ATT_BUFS], **dst[ATT_BUFS];
    size_t w[ATT_BUFS], wd[ATT_BUFS];
    att_bufs(lead, l, src, w);
    att_bufs(p->s, l, dst, wd);
    ld_batch_bind b;
    LD_TRY(ld_batch_bind_rows(lead->be, src, dst, w, ATT_BUFS, p->row, p->n, &b, err));
    ld_status st = be ? att_core_be(p->s, l, p->n, NULL, err) : attention_host(p->s, l, p->n, NULL, err);
    ld_batch_unbind(lead->be, &b);
    return st;
}

/* a batch's attention of layer l: the projections on all rows, each
 * sequence's entries on its rows and its own state, the output projection
 * on all rows; or, on the host path, each sequence's whole attention */
static ld_status attention_parts(ld_ds4_session *s, int l, int n, ld_error *err)
{
    if (l == 0)
        for (int i = 0; i < s->nparts; i++) LD_TRY(att_place(s->parts[i].s, err));
    int be = 1; /* the parts share the backend and variants: the same place */
    for (int i = 0; i < s->nparts; i++) be &= s->parts[i].s->att_be;
    ds4_layer *L = &s->layers[l];
    if (be) LD_TRY(att_proj_be(s, L, n, err));
    for (int i = 0; i < s->nparts; i++) LD_TRY(attention_part(s, &s->parts[i], l, be, err));
    return be ? out_proj_be(s, L, n, err) : LD_OK;
}

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
    if (answered(st, &e, err)) {
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
        for (int i = 0; i < cnt; i++) ld_ref_ds_axpy(s->hf + (size_t)s->sel_t[i] * D, s->hxe + (size_t)i * D, s->sel_w[i], 0, D);
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
        if (answered(st, &e, err)) return st;
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
        LD_TRY(s->parts ? attention_parts(s, l, n, err) : attention(s, l, n, picks, err));
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
        if (experts) memcpy(experts + ((size_t)l * (size_t)T + (size_t)t0) * K, s->idx, (size_t)n * K * sizeof *experts);
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

/* ---------------------------------------------------------------- slices */

ld_status ld_ds4_session_create_slice(const ld_ds4_model *m, ld_backend *be, int first, int last, int max_seq,
                                      int max_batch, ld_ds4_session **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_session_check_slice(first, last, m->cfg.n_layers, err));
    return session_make(m, be, max_seq, max_batch, first, last, out, err);
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
