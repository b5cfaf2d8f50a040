/* ds_forward.c - see ds_forward.h. */
#include "ds_forward.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds_variants.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "engine/models/batch.h"
#include "engine/models/session_args.h"

/* an MLP's three projections, as the backend's moe entry takes them */
typedef ld_moe_expert ds_mlp;

typedef struct ds_layer {
    ld_weight *attn_norm, *q_a, *q_a_bias, *q_a_norm, *q_b, *q, *kv_a, *kv_a_bias, *kv_a_norm, *kv_b, *o, *o_bias;
    ld_weight *ffn_norm, *router;
    ds_mlp mlp;          /* dense MLP or the shared experts */
    ds_mlp *experts;     /* [E] (MoE layers) */
    float *router_bias;  /* [E] fp32 host copy */
    ld_buf *ckv, *kpe;   /* the latent cache: [max_seq][c], [max_seq][dr] */
    /* V3.2: the indexer's weights, its LayerNorm (fp32 host copies), its
     * key cache [max_seq][di] */
    ld_weight *idx_wq_b, *idx_wk, *idx_weights;
    float *idx_norm_w, *idx_norm_b;
    ld_buf *ik;
} ds_layer;

/* a sequence's rows in a batch's chunk (ld_ds_session_eval_batch): its
 * session (its position and caches), rows [row, row + n) of the lead's
 * buffers */
typedef struct ds_part {
    ld_ds_session *s;
    int row, n;
} ds_part;

struct ld_ds_session {
    const ld_ds_model *m;
    ld_backend *be;
    int max_seq, max_batch, pos;
    ld_ds_attn attn;
    ld_cpu_kernels k; /* the session-level variants (mla, router, combine, indexer, rope) */
    float *inv_freq;
    float scale, attn_factor;
    ld_weight *embed, *norm, *lm_head;
    ds_layer *layers;
    /* backend buffers (B = max_batch rows, S = max_seq) */
    ld_buf *x, *xb, *qa, *q, *kva, *ckv_raw, *ckvn, *kvb, *att, *g, *u, *y, *xe, *rl, *logits;
    ld_buf *bqabs, *bolat; /* the backend's q_abs, o_lat [B][H][c] (absorbed forms) */
    /* host scratch */
    float *hq, *hkva, *hckv, *hkpe, *hkvb, *hcache, *hatt, *scores, *hx, *hy, *hxe, *hrl, *wts, *sel_w, *qabs, *olat;
    float *part; /* mla=splitk: one split's partial output [c] */
    int32_t *idx;
    int *sel_t;
    /* V3.2: kc = min(index_topk, max_seq) selected positions per query */
    int kc;
    ld_buf *iq, *ikn, *iw;                   /* [B][Hi*di], [B][di], [B][Hi] */
    float *hiq, *hikn, *hiw, *hik, *iscores; /* host copies; keys [S][di]; [S] */
    int32_t *sel, *heap;                     /* [B][kc], [kc] */
    int moe_host; /* 1: the MoE on the host loop (no moe entry, or a combine it lacks) */
    ld_ds_reduce_fn reduce;                  /* tensor parallelism: NULL = none */
    void *reduce_ctx;
    /* a batch's chunk, this session leading (its weights and scratch): the
       sequences whose attention runs on their rows, and the round's rows
       (batch.h: where each part's rows and hidden planes go); NULL outside one */
    const struct ds_part *parts;
    const ld_batch_rows *rows;
    int nparts;
    int borrowed; /* 1: the weights are a lead's (ld_ds_session_create_sibling) */
    int first, last; /* the layers it runs: all, or a slice's (ld_ds_session_create_slice) */
    int slice;       /* 1: a slice's session (no embeddings, final norm or head) */
};

#define OPS(s) ((s)->be->ops)

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
    ld_cpu_kernels k = ld_cpu_kernels_default(0); /* the variants: ld_ds_session_set_kernels */
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
    s->k = k;
    s->scale = ld_ds_softmax_scale(c);
    s->attn_factor = ld_ds_rope_attn_factor(c);
    size_t B = (size_t)max_batch, S = (size_t)max_seq, D = (size_t)c->hidden, H = (size_t)c->n_heads;
    size_t dn = (size_t)c->qk_nope, dr = (size_t)c->qk_rope, dv = (size_t)c->v_head, C = (size_t)c->kv_lora_rank;
    size_t E = (size_t)c->n_routed, K = (size_t)c->top_k;
    size_t QH = H * (dn + dr), KVB = H * (dn + dv);
    size_t FF = MAX3((size_t)c->intermediate, (size_t)c->moe_intermediate * (size_t)c->n_shared,
                     (size_t)c->moe_intermediate);
    s->layers = calloc((size_t)c->n_layers, sizeof *s->layers);
    s->inv_freq = malloc(dr / 2 * sizeof *s->inv_freq);
#define HALLOC(p, n) (p) = halloc((n), sizeof *(p))
    HALLOC(s->hq, B * QH);
    HALLOC(s->hkva, B * (C + dr));
    HALLOC(s->hckv, B * C);
    HALLOC(s->hkpe, S * dr);
    HALLOC(s->hkvb, attn == LD_DS_ATTN_NAIVE ? S * KVB : 1);
    HALLOC(s->hcache, attn != LD_DS_ATTN_NAIVE ? S * C : 1);
    HALLOC(s->hatt, B * H * dv);
    HALLOC(s->scores, S);
    HALLOC(s->hx, B * D);
    HALLOC(s->hy, B * D);
    HALLOC(s->hxe, B * D);
    HALLOC(s->hrl, B * E);
    HALLOC(s->wts, B * K);
    HALLOC(s->sel_w, B);
    HALLOC(s->qabs, attn != LD_DS_ATTN_NAIVE ? B * H * C : 1);
    HALLOC(s->olat, attn != LD_DS_ATTN_NAIVE ? B * H * C : 1);
    HALLOC(s->part, C);
    HALLOC(s->idx, B * K);
    HALLOC(s->sel_t, B);
    /* V3.2's indexer (1-element placeholders for V3) */
    size_t HI = c->v32 ? (size_t)c->index_n_heads : 1, DI = c->v32 ? (size_t)c->index_head_dim : 1;
    s->kc = c->v32 ? (c->index_topk < max_seq ? c->index_topk : max_seq) : 1;
    HALLOC(s->hiq, c->v32 ? B * HI * DI : 1);
    HALLOC(s->hikn, c->v32 ? B * DI : 1);
    HALLOC(s->hiw, c->v32 ? B * HI : 1);
    HALLOC(s->hik, c->v32 ? S * DI : 1);
    HALLOC(s->iscores, c->v32 ? S : 1);
    HALLOC(s->sel, B * (size_t)s->kc);
    HALLOC(s->heap, (size_t)s->kc);
#undef HALLOC
    if (!s->layers || !s->inv_freq || !s->hq || !s->hkva || !s->hckv || !s->hkpe || !s->hkvb || !s->hcache ||
        !s->hatt || !s->scores || !s->hx || !s->hy || !s->hxe || !s->hrl || !s->wts || !s->sel_w || !s->qabs ||
        !s->olat || !s->part || !s->idx || !s->sel_t || !s->hiq || !s->hikn || !s->hiw || !s->hik || !s->iscores ||
        !s->sel || !s->heap) {
        ld_ds_session_destroy(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    ld_ds_rope_inv_freq(c, s->inv_freq);
    ld_status st = LD_OK;
#define ALLOC(b, n) \
    if (st == LD_OK) st = OPS(s)->buf_alloc(be, (n), &(b), err)
    ALLOC(s->x, B * D);
    ALLOC(s->xb, B * D);
    ALLOC(s->qa, B * (c->q_lora_rank ? (size_t)c->q_lora_rank : 1));
    ALLOC(s->q, B * QH);
    ALLOC(s->kva, B * (C + dr));
    ALLOC(s->ckv_raw, B * C);
    ALLOC(s->ckvn, B * C);
    ALLOC(s->kvb, attn == LD_DS_ATTN_NAIVE ? S * KVB : 1);
    ALLOC(s->att, B * H * dv);
    ALLOC(s->g, B * FF);
    ALLOC(s->u, B * FF);
    ALLOC(s->y, B * D);
    ALLOC(s->xe, B * D);
    ALLOC(s->rl, B * E);
    ALLOC(s->logits, s->slice ? 1 : B * (size_t)c->vocab);
    ALLOC(s->iq, c->v32 ? B * HI * DI : 1);
    ALLOC(s->ikn, c->v32 ? B * DI : 1);
    ALLOC(s->iw, c->v32 ? B * HI : 1);
    ALLOC(s->bqabs, attn != LD_DS_ATTN_NAIVE ? B * H * C : 1);
    ALLOC(s->bolat, attn != LD_DS_ATTN_NAIVE ? B * H * C : 1);
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
        st = layer_weights(s, lead, l, err);
        ALLOC(s->layers[l].ckv, S * C);
        ALLOC(s->layers[l].kpe, S * dr);
        if (c->v32) ALLOC(s->layers[l].ik, S * DI);
    }
#undef ALLOC
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

/* indexer=bf16|fp8: the n rows' queries q [n][hi][di], keys k [n][di]
 * (cached so: a bf16 or FP8 index key cache) and weights w [n][hi] as the
 * variant feeds its score kernel; ref leaves them fp32 */
static void index_operands(ld_kvar v, float *q, float *k, float *w, size_t n, int hi, int di)
{
    size_t qn = n * (size_t)hi * (size_t)di;
    if (v == LD_KV_BF16) {
        ld_dsv_round_bf16(q, qn);
        ld_dsv_round_bf16(k, n * (size_t)di);
        ld_dsv_round_bf16(w, n * (size_t)hi);
    } else if (v == LD_KV_FP8) { /* the weights stay fp32 (the scales fold into them) */
        ld_dsv_index_fp8(q, (int)(n * (size_t)hi), di);
        ld_dsv_index_fp8(k, (int)n, di);
    }
}

/* V3.2: the lightning indexer of the n rows of s->xb (q latent in s->qa):
 * caches their keys and selects each query's positions into s->sel
 * ([n][kc], ascending, -1 after the min(kc, pos0 + t + 1) chosen) */
static ld_status indexer(ld_ds_session *s, int l, int n, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    ds_layer *L = &s->layers[l];
    int pos0 = s->pos, HI = c->index_n_heads, DI = c->index_head_dim, dr = c->qk_rope;
    size_t N = (size_t)n, QW = (size_t)HI * (size_t)DI, kc = (size_t)s->kc;
    LD_TRY(o->matmul(be, s->iq, s->qa, L->idx_wq_b, NULL, n, err));
    LD_TRY(o->matmul(be, s->ikn, s->xb, L->idx_wk, NULL, n, err));
    LD_TRY(o->matmul(be, s->iw, s->xb, L->idx_weights, NULL, n, err));
    LD_TRY(o->buf_read(be, s->iq, 0, s->hiq, N * QW, err));
    LD_TRY(o->buf_read(be, s->ikn, 0, s->hikn, N * (size_t)DI, err));
    LD_TRY(o->buf_read(be, s->iw, 0, s->hiw, N * (size_t)HI, err));
    ld_ref_ds_layernorm(s->hikn, (size_t)DI, L->idx_norm_w, L->idx_norm_b, DI, LD_DS_INDEX_NORM_EPS, 0, N);
    /* rope first (dims 0..dr), rotate_half pairs: the fixed official code's
     * and transformers' layout (index_rope_interleave: the original code's) */
    int il = c->index_rope_interleave, rb = s->k.v[LD_KOP_ROPE] == LD_KV_BF16;
    ld_ref_ds_rope_ex(s->hiq, QW, 0, HI, (size_t)DI, dr, s->inv_freq, s->attn_factor, il, pos0, rb, 0, N);
    ld_ref_ds_rope_ex(s->hikn, (size_t)DI, 0, 1, 0, dr, s->inv_freq, s->attn_factor, il, pos0, rb, 0, N);
    index_operands(s->k.v[LD_KOP_INDEXER], s->hiq, s->hikn, s->hiw, N, HI, DI);
    LD_TRY(o->buf_write(be, L->ik, (size_t)pos0 * (size_t)DI, s->hikn, N * (size_t)DI, err));
    if (o->index_topk) { /* the rotated (and variant-fed) operands back to the backend */
        LD_TRY(o->buf_write(be, s->iq, 0, s->hiq, N * QW, err));
        LD_TRY(o->buf_write(be, s->iw, 0, s->hiw, N * (size_t)HI, err));
        return o->index_topk(be, s->sel, s->iq, s->iw, L->ik, n, pos0, HI, DI, (int)kc, err);
    }
    size_t S = (size_t)pos0 + N;
    LD_TRY(o->buf_read(be, L->ik, 0, s->hik, S * (size_t)DI, err));
    for (size_t t = 0; t < N; t++) {
        int vis = pos0 + (int)t + 1;
        int32_t *sel = s->sel + t * kc;
        ld_ref_ds_index_scores(s->iscores, s->hiq + t * QW, s->hiw + t * (size_t)HI, s->hik, HI, DI, vis);
        int m = ld_ref_ds_topk(sel, s->iscores, vis, (int)kc, s->heap);
        for (size_t j = (size_t)m; j < kc; j++) sel[j] = -1;
    }
    return LD_OK;
}

/* the absorbed form's latent attention of the n rows on host copies: the
 * plain-C kernel of the session's form over s->qabs, s->hq, s->hkpe and
 * the latent cache read into s->hcache, into s->olat */
static ld_status latent_attention_host(ld_ds_session *s, int l, int n, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    int pos0 = s->pos, H = c->n_heads, dn = c->qk_nope, dr = c->qk_rope, C = c->kv_lora_rank;
    size_t items = (size_t)n * (size_t)H, S = (size_t)pos0 + (size_t)n;
    LD_TRY(OPS(s)->buf_read(s->be, s->layers[l].ckv, 0, s->hcache, S * (size_t)C, err));
    if (s->attn == LD_DS_ATTN_SPLITK)
        ld_dsv_mla_latent_attention_splitk(s->olat, s->qabs, s->hq, s->hcache, s->hkpe, H, dn, dr, C, pos0, s->scale,
                                           s->scores, s->part, c->v32 ? s->sel : NULL, s->kc, LD_DSV_MLA_SPLIT, 0,
                                           items);
    else if (c->v32)
        ld_ref_mla_latent_attention_sparse(s->olat, s->qabs, s->hq, s->hcache, s->hkpe, H, dn, dr, C, pos0, s->scale,
                                           s->scores, s->sel, s->kc, 0, items);
    else
        ld_ref_mla_latent_attention(s->olat, s->qabs, s->hq, s->hcache, s->hkpe, H, dn, dr, C, pos0, s->scale,
                                    s->scores, 0, items);
    return LD_OK;
}

/* the backend has the absorbed products, for layer l's kv_b_proj (plain
 * F32/F16/BF16 rows, as the host path reads it) */
static int absorb_ops(const ld_ds_session *s, int l)
{
    const ld_backend_ops *o = OPS(s);
    const ld_host_tensor *w = &s->m->layers[l].kv_b.host;
    return o->mla_absorb_q && o->mla_absorb_out && w->quant == LD_WQ_NONE && !w->rope_hd;
}

/* the absorbed forms of MLA for the n rows, from the rotated q in s->hq,
 * into s->att: the absorbed products and the latent attention by the
 * backend's ops where it has them (the operands travel between s->q,
 * s->bqabs, s->bolat on the backend and s->qabs, s->olat, s->hatt on the
 * host only where one step is the backend's and the next is not) */
static ld_status absorbed(ld_ds_session *s, int l, int n, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    ds_layer *L = &s->layers[l];
    const ld_host_tensor *w = &s->m->layers[l].kv_b.host;
    int H = c->n_heads, dn = c->qk_nope, dr = c->qk_rope, dv = c->v_head, C = c->kv_lora_rank;
    int ab = absorb_ops(s, l), lat = o->mla_latent != NULL;
    size_t N = (size_t)n, items = N * (size_t)H, nl = items * (size_t)C;
    if (ab || lat) LD_TRY(o->buf_write(be, s->q, 0, s->hq, items * (size_t)(dn + dr), err));
    if (ab) {
        LD_TRY(o->mla_absorb_q(be, s->bqabs, s->q, L->kv_b, n, H, dn, dr, dv, C, err));
        if (!lat) LD_TRY(o->buf_read(be, s->bqabs, 0, s->qabs, nl, err));
    } else {
        ld_ref_mla_absorb_q(s->qabs, s->hq, w->data, (ld_kdt)w->dtype, H, dn, dr, dv, C, 0, items);
        if (lat) LD_TRY(o->buf_write(be, s->bqabs, 0, s->qabs, nl, err));
    }
    if (lat) {
        LD_TRY(o->mla_latent(be, s->bolat, s->bqabs, s->q, L->ckv, L->kpe, n, s->pos, H, dn, dr, C, s->scale,
                             c->v32 ? s->sel : NULL, s->kc, s->attn == LD_DS_ATTN_SPLITK ? LD_DSV_MLA_SPLIT : 0, err));
        if (!ab) LD_TRY(o->buf_read(be, s->bolat, 0, s->olat, nl, err));
    } else {
        LD_TRY(latent_attention_host(s, l, n, err));
        if (ab) LD_TRY(o->buf_write(be, s->bolat, 0, s->olat, nl, err));
    }
    if (ab) return o->mla_absorb_out(be, s->att, s->bolat, L->kv_b, n, H, dn, dv, C, err);
    ld_ref_mla_absorb_out(s->hatt, s->olat, w->data, (ld_kdt)w->dtype, H, dn, dv, C, 0, items);
    return o->buf_write(be, s->att, 0, s->hatt, items * (size_t)dv, err);
}

/* MLA's projections of the n rows of s->xb: the query heads into s->q (via
 * the normed q latent in s->qa), the kv latent and k_pe into s->kva; each
 * row a product of its own (a batch's run on all its rows) */
static ld_status att_proj(ld_ds_session *s, const ds_layer *L, int n, ld_error *err)
{
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    if (s->m->cfg.q_lora_rank) {
        LD_TRY(o->matmul(be, s->qa, s->xb, L->q_a, L->q_a_bias, n, err));
        LD_TRY(o->rmsnorm(be, s->qa, s->qa, L->q_a_norm, n, LD_DS_LATENT_NORM_EPS, err));
        LD_TRY(o->matmul(be, s->q, s->qa, L->q_b, NULL, n, err));
    } else {
        LD_TRY(o->matmul(be, s->q, s->xb, L->q, NULL, n, err));
    }
    return o->matmul(be, s->kva, s->xb, L->kv_a, L->kv_a_bias, n, err);
}

/* the output projection of the n rows' heads (s->att) into s->xb, summed
 * over the ranks under tensor parallelism */
static ld_status att_out(ld_ds_session *s, int l, int n, ld_error *err)
{
    const ds_layer *L = &s->layers[l];
    LD_TRY(OPS(s)->matmul(s->be, s->xb, s->att, L->o, L->o_bias, n, err));
    return s->reduce ? s->reduce(s->reduce_ctx, s->be, s->xb, n, l, 0, err) : LD_OK;
}

/* MLA of the n rows projected by att_proj (positions pos0..., the
 * session's caches) into s->att; with V3.2's indexer over the positions
 * it selects (s->sel) */
static ld_status att_core(ld_ds_session *s, int l, int n, ld_error *err)
{
    const ld_ds_config *c = &s->m->cfg;
    const ld_backend_ops *o = OPS(s);
    ld_backend *be = s->be;
    ds_layer *L = &s->layers[l];
    int pos0 = s->pos, H = c->n_heads, dn = c->qk_nope, dr = c->qk_rope, dv = c->v_head, C = c->kv_lora_rank;
    size_t N = (size_t)n, QH = (size_t)H * (size_t)(dn + dr), KA = (size_t)(C + dr);
    size_t S = (size_t)pos0 + N;

    LD_TRY(o->buf_read(be, s->q, 0, s->hq, N * QH, err));
    LD_TRY(o->buf_read(be, s->kva, 0, s->hkva, N * KA, err));
    /* RoPE of q's rope parts and of k_pe (one head) */
    int rb = s->k.v[LD_KOP_ROPE] == LD_KV_BF16;
    ld_ref_ds_rope_ex(s->hq, QH, (size_t)dn, H, (size_t)(dn + dr), dr, s->inv_freq, s->attn_factor,
                      c->rope_interleave, pos0, rb, 0, N);
    ld_ref_ds_rope_ex(s->hkva, KA, (size_t)C, 1, 0, dr, s->inv_freq, s->attn_factor, c->rope_interleave, pos0, rb, 0,
                      N);
    for (size_t t = 0; t < N; t++) {
        memcpy(s->hckv + t * (size_t)C, s->hkva + t * KA, (size_t)C * sizeof *s->hckv);
        LD_TRY(o->buf_write(be, L->kpe, ((size_t)pos0 + t) * (size_t)dr, s->hkva + t * KA + C, (size_t)dr, err));
    }
    LD_TRY(o->buf_write(be, s->ckv_raw, 0, s->hckv, N * (size_t)C, err));
    LD_TRY(o->rmsnorm(be, s->ckvn, s->ckv_raw, L->kv_a_norm, n, LD_DS_LATENT_NORM_EPS, err));
    LD_TRY(o->kv_store(be, L->ckv, s->ckvn, n, pos0, C, err));
    int latent_op = s->attn != LD_DS_ATTN_NAIVE && o->mla_latent;
    if (!latent_op) LD_TRY(o->buf_read(be, L->kpe, 0, s->hkpe, S * (size_t)dr, err));
    if (c->v32) LD_TRY(indexer(s, l, n, err));

    size_t items = N * (size_t)H;
    if (s->attn != LD_DS_ATTN_NAIVE) {
        LD_TRY(absorbed(s, l, n, err));
    } else {
        /* per-head [k_nope | v] of every cached position */
        LD_TRY(o->matmul(be, s->kvb, L->ckv, L->kv_b, NULL, (int)S, err));
        LD_TRY(o->buf_read(be, s->kvb, 0, s->hkvb, S * (size_t)H * (size_t)(dn + dv), err));
        if (c->v32)
            ld_ref_mla_attention_sparse(s->hatt, s->hq, s->hkvb, s->hkpe, H, dn, dr, dv, pos0, s->scale, s->scores,
                                        s->sel, s->kc, 0, items);
        else
            ld_ref_mla_attention(s->hatt, s->hq, s->hkvb, s->hkpe, H, dn, dr, dv, pos0, s->scale, s->scores, 0, items);
        LD_TRY(o->buf_write(be, s->att, 0, s->hatt, items * (size_t)dv, err));
    }
    return LD_OK;
}

/* MLA of the n rows of s->xb (positions s->pos...) into s->xb */
static ld_status attention(ld_ds_session *s, int l, int n, ld_error *err)
{
    LD_TRY(att_proj(s, &s->layers[l], n, err));
    LD_TRY(att_core(s, l, n, err));
    return att_out(s, l, n, err);
}

/* ---- a batch's attention */

#define ATT_BUFS 12

/* the row buffers att_core() reads and writes (a pointer to each field)
 * and the floats of a row of each; 0 where the session's buffer is a
 * placeholder the form or model does not use (the part keeps its own) */
static void att_bufs(ld_ds_session *s, ld_buf **b[ATT_BUFS], size_t w[ATT_BUFS])
{
    const ld_ds_config *c = &s->m->cfg;
    size_t H = (size_t)c->n_heads, dn = (size_t)c->qk_nope, dr = (size_t)c->qk_rope, dv = (size_t)c->v_head;
    size_t C = (size_t)c->kv_lora_rank, v32 = (size_t)(c->v32 != 0), lat = s->attn != LD_DS_ATTN_NAIVE;
    size_t HI = (size_t)c->index_n_heads, DI = (size_t)c->index_head_dim;
    ld_buf **p[ATT_BUFS] = {&s->xb, &s->qa, &s->q,  &s->kva, &s->ckv_raw, &s->ckvn,
                            &s->att, &s->iq, &s->ikn, &s->iw, &s->bqabs,  &s->bolat};
    size_t n[ATT_BUFS] = {(size_t)c->hidden, (size_t)c->q_lora_rank, H * (dn + dr), C + dr, C, C, H * dv,
                          v32 * HI * DI, v32 * DI, v32 * HI, lat * H * C, lat * H * C};
    memcpy(b, p, sizeof p);
    memcpy(w, n, sizeof n);
}

/* part p's attention core on its rows of the lead's buffers (the
 * projections of all the rows), bound in its session's place */
static ld_status attention_part(ld_ds_session *lead, const ds_part *p, int l, ld_error *err)
{
    ld_buf **src[ATT_BUFS], **dst[ATT_BUFS];
    size_t w[ATT_BUFS], wd[ATT_BUFS];
    att_bufs(lead, src, w);
    att_bufs(p->s, dst, wd);
    ld_batch_bind b;
    LD_TRY(ld_batch_bind_rows(lead->be, src, dst, w, ATT_BUFS, p->row, p->n, &b, err));
    ld_status st = att_core(p->s, l, p->n, err);
    ld_batch_unbind(lead->be, &b);
    return st;
}

/* a batch's attention of layer l: the projections on all the rows, each
 * sequence's core on its rows and its own caches, the output projection
 * on all the rows */
static ld_status attention_parts(ld_ds_session *s, int l, int n, ld_error *err)
{
    LD_TRY(att_proj(s, &s->layers[l], n, err));
    for (int i = 0; i < s->nparts; i++) LD_TRY(attention_part(s, &s->parts[i], l, err));
    return att_out(s, l, n, err);
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
        LD_TRY(s->parts ? attention_parts(s, l, n, err) : attention(s, l, n, err));
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

/* ---------------------------------------------------------------- slices */

ld_status ld_ds_session_create_slice(const ld_ds_model *m, ld_backend *be, int first, int last, int max_seq,
                                     int max_batch, ld_ds_attn attn, ld_ds_session **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_session_check_slice(first, last, m->cfg.n_layers, err));
    return session_make(m, be, max_seq, max_batch, attn, NULL, first, last, out, err);
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
