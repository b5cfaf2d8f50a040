/* ds4_attention.c - the DeepSeek-V4 session's attention
 * (ds4_forward.h): the compressors, the indexer and the sparse
 * attention on the host leaves or on the backend's entries, and a batch's
 * attention, each sequence on its own state. */
#include "ds4_internal.h"

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
    if (ld_backend_answered(st, &e, err)) return st;
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
    if (ld_backend_answered(st, &e, err)) return st;
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
    if (!ld_backend_answered(st, &e, err)) { /* the projections, then the norms together or one by one */
        LD_TRY(fanout(s, down, s->xb, L->down, 2, n, err));
        st = LD_ERR_UNSUPPORTED;
        if (o->rmsnorm2) st = o->rmsnorm2(s->be, s->qa, s->qa, L->q_norm, s->kv, s->kv, L->kv_norm, n, eps, &e);
        if (!ld_backend_answered(st, &e, err)) {
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
ld_status ld_ds4_attention(ld_ds4_session *s, int l, int n, int32_t *picks, ld_error *err)
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
ld_status ld_ds4_attention_parts(ld_ds4_session *s, int l, int n, ld_error *err)
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
