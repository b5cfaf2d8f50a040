/* backend_ref_ds4.c - the CPU backends' DeepSeek-V4 attention entries:
 * ds4_qkv, ds4_compress, ds4_index, ds4_attention, copy_cols, ds4_hc_head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ref_internal.h"

/* ---------------------------------------------------------------- V4 attention
 * The host path's leaves in its order (ds4_forward.c), an item per
 * token (the compressor: its positions in order on the calling thread, as
 * its ring is overwritten within a chunk). */

typedef struct ds4_att_ctx {
    ref_backend *rb;
    float *q, *w, *kvc, *out;
    const float *kv, *keys, *entries, *sinks;
    int32_t *sel;
    const int32_t *csel;
    const float **kp; /* [threads][max_keys]: the keys a token attends */
    size_t max_keys;
    const ld_ds4_rot *rope;
    int pos0, H, hd, kv_rows, window, ratio, k, variant;
    float eps, scale;
} ds4_att_ctx;

/* the rope's inverse frequencies fit their buffer */
static ld_status rot_range(const ld_ds4_rot *r, ld_error *err)
{
    return ld_refb_range(r->inv_freq, 0, (size_t)r->dim / 2, err);
}

/* V4's RoPE of row x (n heads of hd) at position p */
static void ds4_rot(const ld_ds4_rot *r, float *x, int n, int hd, int p, int inverse)
{
    ld_ref_ds4_rope_ex(x, n, hd, r->dim, r->inv_freq->p, r->attn_factor, p, inverse, r->bf16);
}

/* indexer=bf16|fp8: rows of dim as the variant feeds the score kernel */
static void ds4_operand(float *x, int rows, int dim, int variant)
{
    if (variant == LD_DS4_INDEX_BF16) ld_dsv_round_bf16(x, (size_t)rows * (size_t)dim);
    else if (variant == LD_DS4_INDEX_FP8) ld_dsv_index_fp8(x, rows, dim);
}

static void t_ds4_qkv(void *p, int tid, size_t i0, size_t i1)
{
    ds4_att_ctx *a = p;
    size_t hd = (size_t)a->hd, QH = (size_t)a->H * hd;
    (void)tid;
    for (size_t t = i0; t < i1; t++) {
        int pos = a->pos0 + (int)t;
        float *q = a->q + t * QH, *kv = a->kvc + (size_t)(pos % a->kv_rows) * hd;
        for (int h = 0; h < a->H; h++) ld_ref_ds4_unit_rmsnorm(q + (size_t)h * hd, a->hd, a->eps);
        ds4_rot(a->rope, q, a->H, a->hd, pos, 0);
        memcpy(kv, a->kv + t * hd, hd * sizeof *kv);
        ds4_rot(a->rope, kv, 1, a->hd, pos, 0);
    }
}

ld_status ld_refb_ds4_qkv(ld_backend *be, ld_buf *q, ld_buf *kvc, const ld_buf *kv, int T, int pos0, int H, int hd,
                         int kv_rows, float eps, const ld_ds4_rot *rope, ld_error *err)
{
    LD_TRY(ld_ds4_args_qkv(T, pos0, H, hd, kv_rows, rope, err));
    LD_TRY(rot_range(rope, err));
    size_t tt = (size_t)T, QH = (size_t)H * (size_t)hd;
    LD_TRY(ld_refb_range(q, 0, tt * QH, err));
    LD_TRY(ld_refb_range(kv, 0, tt * (size_t)hd, err));
    LD_TRY(ld_refb_range(kvc, 0, (size_t)kv_rows * (size_t)hd, err));
    ds4_att_ctx a = {.q = q->p, .kvc = kvc->p, .kv = kv->p, .rope = rope, .pos0 = pos0, .H = H, .hd = hd,
                     .kv_rows = kv_rows, .eps = eps};
    ld_refb_run_items((ref_backend *)be, t_ds4_qkv, &a, tt, (double)tt * (double)(QH + (size_t)hd) * 8.0);
    return LD_OK;
}

/* entry w of compressor c from the rings: its slots in order into skv,
 * sgate (window w - 1's, CSA, then window w's), pooled into ent, normed
 * and rotated into the entries */
static void ds4_entry(const ld_ds4_comp_bufs *c, int w, float eps, const ld_ds4_rot *rope, int variant, float *skv,
                      float *sgate, float *ent)
{
    size_t W = (size_t)c->width, r = (size_t)c->ratio, bytes = W * sizeof(float);
    int overlap = c->width == 2 * c->dim, prev = overlap && w > 0;
    for (size_t j = 0; j < (prev ? 2 : 1) * r; j++) {
        size_t q = ((size_t)w - (prev ? 1 : 0)) * r + j;
        memcpy(skv + j * W, c->kv->p + (q % (2 * r)) * W, bytes);
        memcpy(sgate + j * W, c->gate->p + (q % (2 * r)) * W, bytes);
    }
    float *e = c->entries->p + (size_t)w * (size_t)c->dim;
    ld_ref_ds4_compress(ent, skv, sgate, c->ape->p, c->ratio, c->dim, W, overlap, prev);
    ld_ref_rmsnorm(e, ent, c->norm->p, LD_KDT_F32, c->dim, eps, 0, 1);
    ds4_rot(rope, e, 1, c->dim, w * c->ratio, 0);
    ds4_operand(e, 1, c->dim, variant);
}

ld_status ld_refb_ds4_compress(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate, int T,
                              int pos0, float eps, const ld_ds4_rot *rope, int variant, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds4_args_compress(c, T, pos0, rope, variant, err));
    LD_TRY(rot_range(rope, err));
    size_t W = (size_t)c->width, r = (size_t)c->ratio, tt = (size_t)T;
    LD_TRY(ld_refb_range(kv, 0, tt * W, err));
    LD_TRY(ld_refb_range(gate, 0, tt * W, err));
    LD_TRY(ld_refb_range(c->kv, 0, 2 * r * W, err));
    LD_TRY(ld_refb_range(c->gate, 0, 2 * r * W, err));
    LD_TRY(ld_refb_range(c->ape, 0, r * W, err));
    LD_TRY(ld_refb_range(c->norm, 0, (size_t)c->dim, err));
    LD_TRY(ld_refb_range(c->entries, 0, ((size_t)pos0 + tt) / r * (size_t)c->dim, err));
    if (!T) return LD_OK;
    LD_TRY(ld_refb_need_scratch(rb, 4 * r * W + (size_t)c->dim, err));
    float *skv = rb->scratch[0], *sgate = skv + 2 * r * W, *ent = sgate + 2 * r * W;
    for (size_t t = 0; t < tt; t++) {
        size_t p = (size_t)pos0 + t;
        memcpy(c->kv->p + (p % (2 * r)) * W, kv->p + t * W, W * sizeof(float));
        memcpy(c->gate->p + (p % (2 * r)) * W, gate->p + t * W, W * sizeof(float));
        if ((p + 1) % r == 0) ds4_entry(c, (int)((p + 1) / r) - 1, eps, rope, variant, skv, sgate, ent);
    }
    return LD_OK;
}

static void t_ds4_index(void *p, int tid, size_t i0, size_t i1)
{
    ds4_att_ctx *a = p;
    size_t nh = (size_t)a->H, dim = (size_t)a->hd, k = (size_t)a->k;
    float *scores = a->rb->scratch[tid];
    for (size_t t = i0; t < i1; t++) {
        int pos = a->pos0 + (int)t, nvalid = (pos + 1) / a->ratio;
        float *iq = a->q + t * nh * dim, *iw = a->w + t * nh;
        int32_t *sel = a->sel + t * k;
        ds4_rot(a->rope, iq, a->H, a->hd, pos, 0);
        ds4_operand(iq, a->H, a->hd, a->variant);
        if (a->variant == LD_DS4_INDEX_BF16) ld_dsv_round_bf16(iw, nh);
        ld_ref_ds4_index_scores(scores, iq, iw, a->keys, nvalid, a->H, a->hd, 1.0f / sqrtf((float)a->hd),
                                1.0f / sqrtf((float)a->H));
        int m = ld_ref_ds4_topk(sel, scores, nvalid, a->k);
        for (size_t i = (size_t)m; i < k; i++) sel[i] = -1;
    }
}

ld_status ld_refb_ds4_index(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0,
                           int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope, int variant,
                           ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds4_args_index(T, pos0, n_heads, dim, ratio, k, rope, variant, err));
    LD_TRY(rot_range(rope, err));
    size_t tt = (size_t)T, n = ((size_t)pos0 + tt) / (size_t)ratio;
    LD_TRY(ld_refb_range(q, 0, tt * (size_t)n_heads * (size_t)dim, err));
    LD_TRY(ld_refb_range(w, 0, tt * (size_t)n_heads, err));
    LD_TRY(ld_refb_range(keys, 0, n * (size_t)dim, err));
    if (!T) return LD_OK;
    LD_TRY(ld_refb_need_scratch(rb, n + 1, err));
    ds4_att_ctx a = {.rb = rb, .q = q->p, .w = w->p, .keys = keys->p, .sel = sel, .rope = rope, .pos0 = pos0,
                     .H = n_heads, .hd = dim, .ratio = ratio, .k = k, .variant = variant};
    ld_refb_run_items(rb, t_ds4_index, &a, tt, (double)tt * (double)n * (double)n_heads * (double)dim);
    return LD_OK;
}

/* token t's keys into kp: the window's ring rows, then the entries */
static int ds4_keys(const ds4_att_ctx *a, size_t t, const float **kp)
{
    size_t hd = (size_t)a->hd;
    int p = a->pos0 + (int)t, nk = 0, lo = p - a->window + 1 > 0 ? p - a->window + 1 : 0;
    for (int j = lo; j <= p; j++) kp[nk++] = a->kvc + (size_t)(j % a->kv_rows) * hd;
    if (!a->entries) return nk;
    if (a->csel) {
        const int32_t *sel = a->csel + t * (size_t)a->k;
        for (int i = 0; i < a->k && sel[i] >= 0; i++) kp[nk++] = a->entries + (size_t)sel[i] * hd;
    } else {
        for (int w = 0; w < (p + 1) / a->ratio; w++) kp[nk++] = a->entries + (size_t)w * hd;
    }
    return nk;
}

static void t_ds4_attention(void *p, int tid, size_t i0, size_t i1)
{
    ds4_att_ctx *a = p;
    size_t QH = (size_t)a->H * (size_t)a->hd;
    const float **kp = a->kp + (size_t)tid * a->max_keys;
    for (size_t t = i0; t < i1; t++) {
        int nk = ds4_keys(a, t, kp);
        float *out = a->out + t * QH;
        ld_ref_ds4_attention(out, a->q + t * QH, a->H, a->hd, kp, nk, a->sinks, a->scale, a->rb->scratch[tid]);
        ds4_rot(a->rope, out, a->H, a->hd, a->pos0 + (int)t, 1);
    }
}

ld_status ld_refb_ds4_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kvc,
                               const ld_buf *entries, const int32_t *sel, int k, const ld_buf *sinks, int T, int pos0,
                               int H, int hd, int kv_rows, int window, int ratio, float scale,
                               const ld_ds4_rot *rope, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds4_args_attention(T, pos0, H, hd, kv_rows, window, entries != NULL, ratio, sel, k, rope, err));
    LD_TRY(rot_range(rope, err));
    size_t tt = (size_t)T, QH = (size_t)H * (size_t)hd, S = (size_t)pos0 + tt;
    size_t ne = entries ? (sel ? (size_t)k : S / (size_t)ratio) : 0;
    size_t nw = (size_t)window < S ? (size_t)window : S;
    LD_TRY(ld_refb_range(out, 0, tt * QH, err));
    LD_TRY(ld_refb_range(q, 0, tt * QH, err));
    LD_TRY(ld_refb_range(kvc, 0, (size_t)kv_rows * (size_t)hd, err));
    if (entries) LD_TRY(ld_refb_range(entries, 0, S / (size_t)ratio * (size_t)hd, err));
    if (sinks) LD_TRY(ld_refb_range(sinks, 0, (size_t)H, err));
    if (!T) return LD_OK;
    if (out->p == q->p) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention: out aliases q");
    LD_TRY(ld_refb_need_scratch(rb, nw + ne + 1, err));
    ds4_att_ctx a = {.rb = rb, .out = out->p, .q = q->p, .kvc = kvc->p, .entries = entries ? entries->p : NULL,
                     .csel = sel, .sinks = sinks ? sinks->p : NULL, .max_keys = nw + ne + 1, .rope = rope,
                     .pos0 = pos0, .H = H, .hd = hd, .kv_rows = kv_rows, .window = window, .ratio = ratio, .k = k,
                     .scale = scale};
    a.kp = malloc((size_t)rb->n_threads * a.max_keys * sizeof *a.kp);
    if (!a.kp) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_refb_run_items(rb, t_ds4_attention, &a, tt, (double)tt * (double)(nw + ne) * (double)QH * 2.0);
    free(a.kp);
    return LD_OK;
}

ld_status ld_refb_copy_cols(ld_backend *be, ld_buf *dst, size_t dst_ld, size_t dst_off, const ld_buf *src,
                           size_t src_ld, size_t src_off, int rows, size_t cols, ld_error *err)
{
    (void)be;
    if (rows < 0 || dst_off + cols > dst_ld || src_off + cols > src_ld)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "copy_cols of %d rows: columns [%zu, +%zu) of %zu, [%zu, +%zu) of %zu",
                       rows, dst_off, cols, dst_ld, src_off, cols, src_ld);
    if (!rows || !cols) return LD_OK;
    size_t last = (size_t)rows - 1;
    LD_TRY(ld_refb_range(dst, 0, last * dst_ld + dst_off + cols, err));
    LD_TRY(ld_refb_range(src, 0, last * src_ld + src_off + cols, err));
    if (dst->p == src->p) return LD_FAIL(err, LD_ERR_USAGE, 0, "copy_cols: dst aliases src");
    for (size_t r = 0; r <= last; r++)
        memcpy(dst->p + r * dst_ld + dst_off, src->p + r * src_ld + src_off, cols * sizeof(float));
    return LD_OK;
}

static void t_ds4_hc_head(void *p, int tid, size_t i0, size_t i1)
{
    hc_ctx *h = p;
    size_t N = (size_t)h->N, D = (size_t)h->D;
    for (size_t t = i0; t < i1; t++)
        ld_ref_ds4_hc_head(h->out + t * D, h->X + t * N * D, h->N, h->D, h->fn, h->base, h->scale[0], h->norm_eps,
                           h->hc_eps, h->rb->scratch[tid]);
}

ld_status ld_refb_ds4_hc_head(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                             float scale, int T, int N, int D, float norm_eps, float hc_eps, ld_error *err)
{
    ref_backend *rb = (ref_backend *)be;
    LD_TRY(ld_ds4_args_hc_head(T, N, D, err));
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T;
    LD_TRY(ld_refb_range(out, 0, tt * d, err));
    LD_TRY(ld_refb_range(X, 0, tt * n * d, err));
    LD_TRY(ld_refb_range(fn, 0, n * n * d, err));
    if (!T) return LD_OK;
    LD_TRY(ld_refb_need_scratch(rb, n * d + n, err));
    hc_ctx h = {.rb = rb, .out = out->p, .X = X->p, .fn = fn->p, .base = base, .scale = &scale, .N = N, .D = D,
                .norm_eps = norm_eps, .hc_eps = hc_eps};
    ld_refb_run_items(rb, t_ds4_hc_head, &h, tt, (double)tt * (double)n * (double)(n * d));
    return LD_OK;
}
