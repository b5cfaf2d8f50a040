/* backend_cuda_ds4_attention.c - the CUDA backend's DeepSeek-V4 attention
 * entries: q and kv, the compressors, the indexer, the sparse attention.
 * backend.h's ops over kernels/cuda/cuda_ops.h; backend_cuda_internal.h says
 * how the backend is cut. */
#include "backend_cuda_internal.h"

#if LD_CUDA_BACKEND

/* ---------------------------------------------------------------- V4 attention
 * backend.h's V4 attention entries over the twins of kernels/
 * cuda_ds4_*.cu: the host path's steps in its order, a launch over
 * the chunk's tokens where the step allows (the compressor: its positions
 * in order, its ring being overwritten within a chunk). */

/* the rope's inverse frequencies fit their buffer */
static ld_status rot_range(const ld_ds4_rot *r, ld_error *err)
{
    return range(r->inv_freq, 0, (size_t)r->dim / 2, err);
}

/* V4's RoPE of T rows `stride` floats apart, n heads of hd each,
 * row t at position pos0 + t */
static int ds4_rot_rows(cuda_backend *cb, float *x, int T, size_t stride, int n, int hd, const ld_ds4_rot *r, int pos0,
                        int inverse)
{
    return ld_cu_ds_rope(variant(cb, LD_CUDA_OP_ROPE), x, T, stride, (size_t)(hd - r->dim), n, (size_t)hd, r->dim,
                         r->inv_freq->d, r->attn_factor, 1, pos0, inverse, r->bf16);
}

/* at least n fp32 ones in cb->ones (uploaded once, then kept): the unit RMSNorm is rmsnorm by ones (the same
 * formula, the product by 1 exact) */
static ld_status ds4_ones(cuda_backend *cb, int n, ld_error *err)
{
    if ((size_t)n <= cb->ones_n) return LD_OK; /* uploaded by an earlier call */
    LD_TRY(scratch((void **)&cb->ones, &cb->ones_cap, (size_t)n * sizeof(float), "ds4_qkv", err));
    float *ones = malloc((size_t)n * sizeof *ones);
    if (!ones) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int i = 0; i < n; i++) ones[i] = 1.0f;
    int e = ld_cu_h2d(cb->ones, ones, (size_t)n * sizeof *ones);
    free(ones);
    CU("ds4_qkv", e);
    cb->ones_n = (size_t)n;
    return LD_OK;
}

ld_status ld_cuda_ds4_qkv(ld_backend *be, ld_buf *q, ld_buf *kvc, const ld_buf *kv, int T, int pos0, int H, int hd,
                          int kv_rows, float eps, const ld_ds4_rot *rope, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds4_args_qkv(T, pos0, H, hd, kv_rows, rope, err));
    LD_TRY(rot_range(rope, err));
    size_t QH = (size_t)H * (size_t)hd, d = (size_t)hd;
    LD_TRY(range(q, 0, (size_t)T * QH, err));
    LD_TRY(range(kv, 0, (size_t)T * d, err));
    LD_TRY(range(kvc, 0, (size_t)kv_rows * d, err));
    if (!T) return LD_OK;
    CU("ds4_qkv", ld_cu_set_device(cb->device));
    if (variant(cb, LD_CUDA_OP_RMSNORM) == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_ROPE) == LD_CU_CUSTOM &&
        kv_rows >= T) { /* one launch for the four below: their bits */
        CU("ds4_qkv", ld_cu_ds4_qkv(q->d, kvc->d, kv->d, T, H, hd, kv_rows, pos0, eps, rope->inv_freq->d,
                                    rope->attn_factor, rope->dim, rope->bf16));
        return LD_OK;
    }
    LD_TRY(ds4_ones(cb, hd, err));
    CU("ds4_qkv", ld_cu_rmsnorm(variant(cb, LD_CUDA_OP_RMSNORM), q->d, q->d, cb->ones, LD_KDT_F32, hd, eps, T * H));
    CU("ds4_qkv", ds4_rot_rows(cb, q->d, T, QH, H, hd, rope, pos0, 0));
    /* the ring's rows of the T positions: at most two runs (it wraps once) */
    for (int t0 = 0; t0 < T;) {
        int row = (pos0 + t0) % kv_rows, n = T - t0 < kv_rows - row ? T - t0 : kv_rows - row;
        float *dst = kvc->d + (size_t)row * d;
        CU("ds4_qkv", ld_cu_d2d(dst, kv->d + (size_t)t0 * d, (size_t)n * d * sizeof(float)));
        CU("ds4_qkv", ds4_rot_rows(cb, dst, n, d, 1, hd, rope, pos0 + t0, 0));
        t0 += n;
    }
    return LD_OK;
}

/* entry w of compressor c (ds4_compress's contract): its slots read in
 * place from the rings, pooled into work, normed into its row, rotated */
static ld_status ds4_entry(cuda_backend *cb, const ld_ds4_comp_bufs *c, int w, float eps, const ld_ds4_rot *rope,
                           ld_error *err)
{
    size_t W = (size_t)c->width, dim = (size_t)c->dim;
    int overlap = c->width == 2 * c->dim;
    float *ent = cb->work, *e = c->entries->d + (size_t)w * dim;
    CU("ds4_compress", ld_cu_ds4_compress(variant(cb, LD_CUDA_OP_ATTENTION), ent, c->kv->d, c->gate->d, c->ape->d,
                                          c->ratio, c->dim, W, overlap, w, 1, 2 * c->ratio));
    CU("ds4_compress",
       ld_cu_rmsnorm(variant(cb, LD_CUDA_OP_RMSNORM), e, ent, c->norm->d, LD_KDT_F32, c->dim, eps, 1));
    CU("ds4_compress", ds4_rot_rows(cb, e, 1, dim, 1, c->dim, rope, w * c->ratio, 0));
    return LD_OK;
}

ld_status ld_cuda_ds4_compress(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate, int T,
                               int pos0, float eps, const ld_ds4_rot *rope, int index_variant, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds4_args_compress(c, T, pos0, rope, index_variant, err));
    LD_TRY(rot_range(rope, err));
    if (index_variant != LD_DS4_INDEX_F32)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_compress: fp32 indexer keys only (variant %d)",
                       index_variant);
    size_t W = (size_t)c->width, r = (size_t)c->ratio, tt = (size_t)T;
    LD_TRY(range(kv, 0, tt * W, err));
    LD_TRY(range(gate, 0, tt * W, err));
    LD_TRY(range(c->kv, 0, 2 * r * W, err));
    LD_TRY(range(c->gate, 0, 2 * r * W, err));
    LD_TRY(range(c->ape, 0, r * W, err));
    LD_TRY(range(c->norm, 0, (size_t)c->dim, err));
    LD_TRY(range(c->entries, 0, ((size_t)pos0 + tt) / r * (size_t)c->dim, err));
    if (!T) return LD_OK;
    CU("ds4_compress", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->work, &cb->work_cap, (size_t)c->dim * sizeof(float), "ds4_compress", err));
    /* the tokens up to the next completed window into the rings in one
     * launch, then that window's entry (the rows it reads are not yet
     * overwritten: a chunk is at most r rows of a ring of 2 r) */
    for (size_t t = 0; t < tt;) {
        size_t p = (size_t)pos0 + t, n = r - p % r < tt - t ? r - p % r : tt - t;
        CU("ds4_compress", ld_cu_ring_put2(c->kv->d, c->gate->d, kv->d + t * W, gate->d + t * W, W, (int)(2 * r),
                                           (int)p, (int)n));
        t += n;
        if (((size_t)pos0 + t) % r == 0) LD_TRY(ds4_entry(cb, c, (int)(((size_t)pos0 + t) / r) - 1, eps, rope, err));
    }
    return LD_OK;
}

/* the indexer's picks of queries [t0, t0 + n), which all see nv entries */
/* the picks of the n queries from t0 on, which see nv entries, into the
 * device array dsel [n][k] (scores in ds_f) */
static ld_status ds4_pick_dev(cuda_backend *cb, int32_t *dsel, const ld_buf *q, const ld_buf *w, const ld_buf *keys,
                              int t0, int n, int nv, int n_heads, int dim, int k, ld_error *err)
{
    size_t QW = (size_t)n_heads * (size_t)dim;
    int v = variant(cb, LD_CUDA_OP_INDEX);
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (size_t)n * (size_t)nv * sizeof(float), "ds4_index", err));
    CU("ds4_index", ld_cu_index_scores(v, 1, cb->ds_f, q->d + (size_t)t0 * QW, w->d + (size_t)t0 * (size_t)n_heads,
                                       keys->d, n, n_heads, dim, nv, 1.0f / sqrtf((float)dim),
                                       1.0f / sqrtf((float)n_heads)));
    CU("ds4_index", ld_cu_topk(v, dsel, cb->ds_f, n, nv, nv, -1, k));
    return LD_OK;
}

/* the same into the host array sel (rows t0..), through ds_i */
static ld_status ds4_pick(cuda_backend *cb, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys,
                          int t0, int n, int nv, int n_heads, int dim, int k, ld_error *err)
{
    size_t nk = (size_t)n * (size_t)k;
    LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, nk * sizeof(int32_t), "ds4_index", err));
    LD_TRY(ds4_pick_dev(cb, cb->ds_i, q, w, keys, t0, n, nv, n_heads, dim, k, err));
    CU("ds4_index", ld_cu_d2h(sel + (size_t)t0 * (size_t)k, cb->ds_i, nk * sizeof(int32_t)));
    return LD_OK;
}

ld_status ld_cuda_ds4_index(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0,
                            int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope, int index_variant,
                            ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds4_args_index(T, pos0, n_heads, dim, ratio, k, rope, index_variant, err));
    LD_TRY(rot_range(rope, err));
    if (index_variant != LD_DS4_INDEX_F32)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_index: fp32 operands only (variant %d)", index_variant);
    size_t QW = (size_t)n_heads * (size_t)dim, tt = (size_t)T;
    LD_TRY(range(q, 0, tt * QW, err));
    LD_TRY(range(w, 0, tt * (size_t)n_heads, err));
    LD_TRY(range(keys, 0, ((size_t)pos0 + tt) / (size_t)ratio * (size_t)dim, err));
    if (!T) return LD_OK;
    CU("ds4_index", ld_cu_set_device(cb->device));
    CU("ds4_index", ds4_rot_rows(cb, q->d, T, QW, n_heads, dim, rope, pos0, 0));
    /* queries in runs that see the same entries (at most ratio of them) */
    for (int t0 = 0, t1; t0 < T; t0 = t1) {
        int nv = (pos0 + t0 + 1) / ratio;
        for (t1 = t0 + 1; t1 < T && (pos0 + t1 + 1) / ratio == nv; t1++) {}
        if (nv > 0) {
            LD_TRY(ds4_pick(cb, sel, q, w, keys, t0, t1 - t0, nv, n_heads, dim, k, err));
            continue;
        }
        for (size_t i = (size_t)t0 * (size_t)k; i < (size_t)t1 * (size_t)k; i++) sel[i] = -1;
    }
    return LD_OK;
}

static ld_status ds4_attention_run(cuda_backend *cb, const ld_ds4_attn_call *a, int T, int pos0, const int32_t *dsel,
                                   int kpick, ld_error *err);

/* whether the indexer's RoPE, scores and top-k of a run run in one launch
 * (ld_cu_ds4_index_pick): their kernels custom, shapes it takes */
static int index_fuses(const cuda_backend *cb, const ld_ds4_index_call *ix)
{
    return variant(cb, LD_CUDA_OP_ROPE) == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_INDEX) == LD_CU_CUSTOM &&
           ix->dim <= 256 && (size_t)ix->n_heads * (size_t)ix->dim <= LD_CU_INDEX_PICK_QW;
}

/* ds4_pick_dev of n queries from t0 not yet rotated, in one launch that
 * rotates them (at pos0 + t0 ...) too */
static ld_status ds4_pick_fused(cuda_backend *cb, int32_t *dsel, const ld_ds4_index_call *ix, int t0, int n, int nv,
                                int pos0, ld_error *err)
{
    size_t QW = (size_t)ix->n_heads * (size_t)ix->dim;
    int32_t *sync;
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (size_t)n * (size_t)nv * sizeof(float), "ds4_index", err));
    LD_TRY(ld_cuda_sync_ints(cb, (size_t)n, &sync, "ds4_index", err));
    const ld_ds4_rot *r = ix->rope;
    ld_cu_rot rot = {r->inv_freq->d, r->attn_factor, r->dim, r->bf16};
    CU("ds4_index", ld_cu_ds4_index_pick(dsel, cb->ds_f, ix->q->d + (size_t)t0 * QW,
                                         ix->w->d + (size_t)t0 * (size_t)ix->n_heads, ix->keys->d, n, ix->n_heads,
                                         ix->dim, nv, ix->k, 1.0f / sqrtf((float)ix->dim),
                                         1.0f / sqrtf((float)ix->n_heads), &rot, pos0 + t0, sync));
    return LD_OK;
}

/* the picks of ds4_index for T queries into cb->picks [T][k] on the device:
 * the runs of queries that see the same entries as ds4_index makes them,
 * a run that sees none -1 rows.  q already rotated, or (fused) rotated
 * run by run here: by ds4_pick_fused, a run that sees no entry alone */
static ld_status ds4_picks_dev(cuda_backend *cb, const ld_ds4_index_call *ix, int T, int pos0, int ratio, int fused,
                               ld_error *err)
{
    size_t k = (size_t)ix->k;
    for (int t0 = 0, t1; t0 < T; t0 = t1) {
        int nv = (pos0 + t0 + 1) / ratio;
        for (t1 = t0 + 1; t1 < T && (pos0 + t1 + 1) / ratio == nv; t1++) {}
        int32_t *dst = cb->picks + (size_t)t0 * k;
        if (nv > 0 && fused) {
            LD_TRY(ds4_pick_fused(cb, dst, ix, t0, t1 - t0, nv, pos0, err));
            continue;
        }
        if (nv > 0) {
            LD_TRY(ds4_pick_dev(cb, dst, ix->q, ix->w, ix->keys, t0, t1 - t0, nv, ix->n_heads, ix->dim, ix->k, err));
            continue;
        }
        size_t QW = (size_t)ix->n_heads * (size_t)ix->dim;
        if (fused)
            CU("ds4_index_attention", ds4_rot_rows(cb, ix->q->d + (size_t)t0 * QW, t1 - t0, QW, ix->n_heads, ix->dim,
                                                   ix->rope, pos0 + t0, 0));
        size_t n = (size_t)(t1 - t0) * k;
        int32_t *none = malloc(n * sizeof *none);
        if (!none) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        for (size_t i = 0; i < n; i++) none[i] = -1;
        int e = ld_cu_h2d(dst, none, n * sizeof *none);
        free(none);
        CU("ds4_index_attention", e);
    }
    return LD_OK;
}

ld_status ld_cuda_ds4_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kvc,
                                const ld_buf *entries, const int32_t *sel, int k, const ld_buf *sinks, int T, int pos0,
                                int H, int hd, int kv_rows, int window, int ratio, float scale,
                                const ld_ds4_rot *rope, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds4_args_attention(T, pos0, H, hd, kv_rows, window, entries != NULL, ratio, sel, k, rope, err));
    LD_TRY(rot_range(rope, err));
    size_t tt = (size_t)T, QH = (size_t)H * (size_t)hd, S = (size_t)pos0 + tt;
    LD_TRY(range(out, 0, tt * QH, err));
    LD_TRY(range(q, 0, tt * QH, err));
    LD_TRY(range(kvc, 0, (size_t)kv_rows * (size_t)hd, err));
    if (entries) LD_TRY(range(entries, 0, S / (size_t)ratio * (size_t)hd, err));
    if (sinks) LD_TRY(range(sinks, 0, (size_t)H, err));
    if (!T) return LD_OK;
    if (out->d == q->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention: out aliases q");
    CU("ds4_attention", ld_cu_set_device(cb->device));
    int kpick = entries && sel ? k : 0;
    if (kpick) {
        LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, tt * (size_t)k * sizeof(int32_t), "ds4_attention", err));
        CU("ds4_attention", ld_cu_h2d(cb->ds_i, sel, tt * (size_t)k * sizeof(int32_t)));
    }
    ld_ds4_attn_call at = {out, q, kvc, entries, sinks, H, hd, kv_rows, window, ratio, scale, rope};
    return ds4_attention_run(cb, &at, T, pos0, kpick ? cb->ds_i : NULL, kpick, err);
}

/* ds4_attention's kernels once its arguments are checked: the picks dsel
 * [T][kpick] on the device (NULL, kpick 0: every entry, or none) */
static ld_status ds4_attention_run(cuda_backend *cb, const ld_ds4_attn_call *a, int T, int pos0, const int32_t *dsel,
                                   int kpick, ld_error *err)
{
    size_t tt = (size_t)T, QH = (size_t)a->H * (size_t)a->hd;
    int has = a->entries != NULL, v = variant(cb, LD_CUDA_OP_ATTENTION), H = a->H, hd = a->hd, k = kpick;
    int ratio = a->ratio, kv_rows = a->kv_rows;
    const ld_buf *out = a->out, *q = a->q, *kvc = a->kvc, *entries = a->entries, *sinks = a->sinks;
    float scale = a->scale;
    /* a window past the chunk's last position is that many positions (the
       same keys; the kernel wants kv_rows >= window) */
    int win = a->window < pos0 + T ? a->window : pos0 + T;
    /* tokens in tiles whose workspace stays under ATT_WORK_FLOATS */
    size_t per = ld_cu_ds4_attention_work(v, 1, H, hd, pos0 + T - 1, win, ratio, kpick, has);
    size_t tile = per ? ATT_WORK_FLOATS / per : tt;
    if (tile < 1) tile = 1;
    if (tile > 65535) tile = 65535;
    /* custom attention and rope: the merge de-rotates (one launch fewer) */
    int fused = v == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_ROPE) == LD_CU_CUSTOM;
    ld_cu_rot rot = {a->rope->inv_freq->d, a->rope->attn_factor, a->rope->dim, a->rope->bf16};
    for (size_t t0 = 0; t0 < tt; t0 += tile) {
        int n = (int)(tt - t0 < tile ? tt - t0 : tile), p0 = pos0 + (int)t0;
        size_t wn = ld_cu_ds4_attention_work(v, n, H, hd, p0, win, ratio, kpick, has);
        LD_TRY(scratch((void **)&cb->work, &cb->work_cap, (wn ? wn : 1) * sizeof(float), "ds4_attention", err));
        const float *ent = has ? entries->d : NULL, *snk = sinks ? sinks->d : NULL;
        const int32_t *pk = kpick ? dsel + t0 * (size_t)k : NULL;
        int32_t *sync = NULL; /* the split and the merge in one launch */
        if (fused) LD_TRY(ld_cuda_sync_ints(cb, ld_cu_ds4_attention_sync(n, H), &sync, "ds4_attention", err));
        if (fused)
            CU("ds4_attention", ld_cu_ds4_attention_rope(out->d + t0 * QH, q->d + t0 * QH, n, H, hd, kvc->d, kv_rows,
                                                         win, ent, ratio, pk, kpick, snk, scale, p0, cb->work, wn,
                                                         rot, sync));
        else
            CU("ds4_attention", ld_cu_ds4_attention(v, out->d + t0 * QH, q->d + t0 * QH, n, H, hd, kvc->d, kv_rows,
                                                    win, ent, ratio, pk, kpick, snk, scale, p0, cb->work, wn));
    }
    if (!fused) CU("ds4_attention", ds4_rot_rows(cb, out->d, T, QH, H, hd, a->rope, pos0, 1));
    return LD_OK;
}

/* ds4_index into host picks (the caller's, or scratch when it wants none),
 * then ds4_attention over them */
static ld_status index_then_attention(ld_backend *be, const ld_ds4_index_call *ix, const ld_ds4_attn_call *at, int T,
                                      int pos0, int32_t *sel, ld_error *err)
{
    int32_t *own = NULL;
    if (!sel) {
        own = malloc(((size_t)T * (size_t)(ix->k > 0 ? ix->k : 1) + 1) * sizeof *own);
        if (!own) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        sel = own;
    }
    ld_status st = ld_cuda_ds4_index(be, sel, ix->q, ix->w, ix->keys, T, pos0, ix->n_heads, ix->dim, at->ratio,
                                     ix->k, ix->rope, ix->variant, err);
    if (st == LD_OK)
        st = ld_cuda_ds4_attention(be, at->out, at->q, at->kvc, at->entries, sel, ix->k, at->sinks, T, pos0, at->H,
                                   at->hd, at->kv_rows, at->window, at->ratio, at->scale, at->rope, err);
    free(own);
    return st;
}

/* backend.h's ds4_index_attention: with the picks wanted on the host, or an
 * indexer variant other than fp32, ds4_index then ds4_attention; else the
 * picks go from the top-k kernel straight to the attention kernel on the
 * device (queries that see no entry yet: -1 rows, uploaded) */
ld_status ld_cuda_ds4_index_attention(ld_backend *be, const ld_ds4_index_call *ix, const ld_ds4_attn_call *at, int T,
                                      int pos0, int32_t *sel, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (!at->entries) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_index_attention: no entries to pick from");
    if (sel || ix->variant != LD_DS4_INDEX_F32 || !T)
        return index_then_attention(be, ix, at, T, pos0, sel, err);
    LD_TRY(ld_ds4_args_index(T, pos0, ix->n_heads, ix->dim, at->ratio, ix->k, ix->rope, ix->variant, err));
    LD_TRY(ld_ds4_args_attention(T, pos0, at->H, at->hd, at->kv_rows, at->window, 1, at->ratio, NULL, ix->k,
                                 at->rope, err));
    LD_TRY(rot_range(ix->rope, err));
    LD_TRY(rot_range(at->rope, err));
    size_t tt = (size_t)T, QW = (size_t)ix->n_heads * (size_t)ix->dim, QH = (size_t)at->H * (size_t)at->hd;
    size_t S = (size_t)pos0 + tt, nk = tt * (size_t)ix->k;
    LD_TRY(range(ix->q, 0, tt * QW, err));
    LD_TRY(range(ix->w, 0, tt * (size_t)ix->n_heads, err));
    LD_TRY(range(ix->keys, 0, S / (size_t)at->ratio * (size_t)ix->dim, err));
    LD_TRY(range(at->out, 0, tt * QH, err));
    LD_TRY(range(at->q, 0, tt * QH, err));
    LD_TRY(range(at->kvc, 0, (size_t)at->kv_rows * (size_t)at->hd, err));
    LD_TRY(range(at->entries, 0, S / (size_t)at->ratio * (size_t)at->hd, err));
    if (at->sinks) LD_TRY(range(at->sinks, 0, (size_t)at->H, err));
    if (at->out->d == at->q->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention: out aliases q");
    CU("ds4_index_attention", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->picks, &cb->picks_cap, nk * sizeof(int32_t), "ds4_index_attention", err));
    int fused = index_fuses(cb, ix);
    if (!fused) CU("ds4_index_attention", ds4_rot_rows(cb, ix->q->d, T, QW, ix->n_heads, ix->dim, ix->rope, pos0, 0));
    LD_TRY(ds4_picks_dev(cb, ix, T, pos0, at->ratio, fused, err));
    return ds4_attention_run(cb, at, T, pos0, cb->picks, ix->k, err);
}

#endif /* LD_CUDA_BACKEND */
