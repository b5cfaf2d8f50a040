/* ds_attention.c - DeepSeek-V3 / V3.2's multi-head latent attention on a
 * session's rows: the projections, the latent cache, the naive form (k and
 * v expanded per head), the absorbed form and its split-K decode, V3.2's
 * indexer choosing the positions each query reads (ds_forward.h). */
#include <stdlib.h>
#include <string.h>

#include "ds_internal.h"

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
ld_status ld_ds_attention(ld_ds_session *s, int l, int n, ld_error *err)
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
ld_status ld_ds_attention_parts(ld_ds_session *s, int l, int n, ld_error *err)
{
    LD_TRY(att_proj(s, &s->layers[l], n, err));
    for (int i = 0; i < s->nparts; i++) LD_TRY(attention_part(s, &s->parts[i], l, err));
    return att_out(s, l, n, err);
}
