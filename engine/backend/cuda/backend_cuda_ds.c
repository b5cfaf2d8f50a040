/* backend_cuda_ds.c - the CUDA backend's DeepSeek entries: V3 /
 * V3.2's MLA, router and indexer, and V4's mHC (hc_pre, hc_post, the
 * head).  backend.h's ops over kernels/cuda/cuda_ops.h; backend_cuda_internal.h
 * says how the backend is cut. */
#include "backend_cuda_internal.h"

#if LD_CUDA_BACKEND

/* ---------------------------------------------------------------- DeepSeek */

/* the workspace floats of the mla kernel for queries tiled so that a tile
 * stays under ATT_WORK_FLOATS (or holds one query), in *tile */
static size_t mla_tile(int v, int T, int pos0, int n_heads, int c, const int32_t *dsel, int k, int *tile)
{
    size_t per_query = ld_cu_mla_latent_work(v, 1, n_heads, c, pos0 + T - 1, dsel, k);
    size_t n = per_query ? ATT_WORK_FLOATS / per_query : (size_t)T;
    if (n < 1) n = 1;
    if (n > (size_t)T) n = (size_t)T;
    *tile = (int)n;
    return n * per_query;
}

ld_status ld_cuda_mla_latent(ld_backend *be, ld_buf *o_lat, const ld_buf *q_abs, const ld_buf *q, const ld_buf *ckv,
                             const ld_buf *kpe, int T, int pos0, int n_heads, int dn, int dr, int c, float scale,
                             const int32_t *sel, int k, int split, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_latent(T, pos0, n_heads, dn, dr, c, sel, k, split, err));
    if (split && split != LD_CU_MLA_SPLIT)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda mla_latent: split %d (0 or %d)", split, LD_CU_MLA_SPLIT);
    size_t rows = (size_t)T * (size_t)n_heads, S = (size_t)pos0 + (size_t)T, QW = (size_t)n_heads * (size_t)(dn + dr);
    LD_TRY(range(o_lat, 0, rows * (size_t)c, err));
    LD_TRY(range(q_abs, 0, rows * (size_t)c, err));
    LD_TRY(range(q, 0, rows * (size_t)(dn + dr), err));
    LD_TRY(range(ckv, 0, S * (size_t)c, err));
    LD_TRY(range(kpe, 0, S * (size_t)dr, err));
    if (sel) LD_TRY(ld_ds_args_sel(sel, T, pos0, k, err));
    if (!rows || !c) return LD_OK;
    CU("mla_latent", ld_cu_set_device(cb->device));
    const int32_t *dsel = NULL;
    if (sel) {
        size_t nb = (size_t)T * (size_t)k * sizeof(int32_t);
        LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, nb, "mla_latent", err));
        CU("mla_latent", ld_cu_h2d(cb->ds_i, sel, nb));
        dsel = cb->ds_i;
    }
    int v = variant(cb, LD_CUDA_OP_MLA), tile = 0;
    size_t wn = mla_tile(v, T, pos0, n_heads, c, dsel, k, &tile);
    if (wn) LD_TRY(scratch((void **)&cb->work, &cb->work_cap, wn * sizeof(float), "mla_latent", err));
    for (int t0 = 0; t0 < T; t0 += tile) {
        int n = T - t0 < tile ? T - t0 : tile;
        size_t r0 = (size_t)t0 * (size_t)n_heads * (size_t)c;
        CU("mla_latent", ld_cu_mla_latent(v, o_lat->d + r0, q_abs->d + r0, q->d + (size_t)t0 * QW, ckv->d, kpe->d, n,
                                          n_heads, dn, dr, c, pos0 + t0, scale,
                                          dsel ? dsel + (size_t)t0 * (size_t)k : NULL, k, cb->work, wn));
    }
    return LD_OK;
}

ld_status ld_cuda_mla_absorb_q(ld_backend *be, ld_buf *q_abs, const ld_buf *q, const ld_weight *w, int T, int n_heads,
                               int dn, int dr, int dv, int c, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_absorb(w->dt, w->rows, w->cols, w->rope_hd, T, n_heads, dn, dr, dv, c, err));
    size_t rows = (size_t)T * (size_t)n_heads;
    LD_TRY(range(q_abs, 0, rows * (size_t)c, err));
    LD_TRY(range(q, 0, rows * (size_t)(dn + dr), err));
    if (!rows || !c) return LD_OK;
    CU("mla_absorb_q", ld_cu_set_device(cb->device));
    CU("mla_absorb_q", ld_cu_mla_absorb_q(variant(cb, LD_CUDA_OP_ABSORB), q_abs->d, q->d, w->d, w->dt, T, n_heads,
                                          dn, dr, dv, c));
    return LD_OK;
}

ld_status ld_cuda_mla_absorb_out(ld_backend *be, ld_buf *out, const ld_buf *o_lat, const ld_weight *w, int T,
                                 int n_heads, int dn, int dv, int c, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_absorb(w->dt, w->rows, w->cols, w->rope_hd, T, n_heads, dn, 0, dv, c, err));
    size_t rows = (size_t)T * (size_t)n_heads;
    LD_TRY(range(out, 0, rows * (size_t)dv, err));
    LD_TRY(range(o_lat, 0, rows * (size_t)c, err));
    if (!rows || !dv) return LD_OK;
    CU("mla_absorb_out", ld_cu_set_device(cb->device));
    CU("mla_absorb_out", ld_cu_mla_absorb_out(variant(cb, LD_CUDA_OP_ABSORB), out->d, o_lat->d, w->d, w->dt, T,
                                              n_heads, dn, dv, c));
    return LD_OK;
}

ld_status ld_cuda_ds_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias, int T,
                           int E, int n_group, int topk_group, int top_k, int norm, float scale, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_route(T, E, n_group, topk_group, top_k, err));
    if (n_group > 64 || top_k > 64)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds_route: %d groups, top %d (at most 64 each)", n_group,
                       top_k);
    LD_TRY(range(logits, 0, (size_t)T * (size_t)E, err));
    if (!T) return LD_OK;
    size_t nk = (size_t)T * (size_t)top_k;
    CU("ds_route", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, nk * sizeof(int32_t), "ds_route", err));
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, nk * sizeof(float), "ds_route", err));
    float *dbias = NULL; /* kept on the device between calls (const_dev) */
    if (bias)
        LD_TRY(ld_cuda_const_one(cb, bias, (size_t)E * sizeof *bias, (void **)&dbias, "ds_route", err));
    CU("ds_route", ld_cu_ds_route(variant(cb, LD_CUDA_OP_ROUTE), cb->ds_i, cb->ds_f, logits->d, dbias, T, E, n_group,
                                  topk_group, top_k, norm, scale));
    CU("ds_route", ld_cu_d2h(idx, cb->ds_i, nk * sizeof(int32_t)));
    CU("ds_route", ld_cu_d2h(w, cb->ds_f, nk * sizeof(float)));
    return LD_OK;
}

ld_status ld_cuda_index_topk(ld_backend *be, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys, int T,
                             int pos0, int n_heads, int dim, int k, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_index(T, pos0, n_heads, dim, k, err));
    size_t S = (size_t)pos0 + (size_t)T, QW = (size_t)n_heads * (size_t)dim;
    LD_TRY(range(q, 0, (size_t)T * QW, err));
    LD_TRY(range(w, 0, (size_t)T * (size_t)n_heads, err));
    LD_TRY(range(keys, 0, S * (size_t)dim, err));
    if (!T) return LD_OK;
    if (S > 0x7fffffff) return LD_FAIL(err, LD_ERR_LIMIT, 0, "index_topk over %zu positions", S);
    /* queries in tiles of at most ATT_WORK_FLOATS scores (or one query) */
    size_t tile = ATT_WORK_FLOATS / S;
    if (tile < 1) tile = 1;
    if (tile > (size_t)T) tile = (size_t)T;
    int v = variant(cb, LD_CUDA_OP_INDEX);
    CU("index_topk", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, tile * S * sizeof(float), "index_topk", err));
    LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, tile * (size_t)k * sizeof(int32_t), "index_topk", err));
    for (size_t t0 = 0; t0 < (size_t)T; t0 += tile) {
        int n = (int)((size_t)T - t0 < tile ? (size_t)T - t0 : tile), p0 = pos0 + (int)t0;
        CU("index_topk", ld_cu_index_scores(v, 0, cb->ds_f, q->d + t0 * QW, w->d + t0 * (size_t)n_heads, keys->d, n,
                                            n_heads, dim, p0 + n, 0.0f, 0.0f));
        CU("index_topk", ld_cu_topk(v, cb->ds_i, cb->ds_f, n, p0 + n, p0 + n, p0, k));
        CU("index_topk", ld_cu_d2h(sel + t0 * (size_t)k, cb->ds_i, (size_t)n * (size_t)k * sizeof(int32_t)));
    }
    return LD_OK;
}

_Static_assert((int)LD_DS4_MHC_F32 == (int)LD_CU_MHC_F32 && (int)LD_DS4_MHC_BF16 == (int)LD_CU_MHC_BF16 &&
                   (int)LD_DS4_MHC_SINKHORN_BF16 == (int)LD_CU_MHC_SINKHORN_BF16,
               "the mHC variants of backend.h and cuda_ops.h");

/* hc_pre's checks, its work scratch and its base and scale on the device
 * (*bs: base [hc], then scale [3]); 1 in *none when T is 0 */
static ld_status hc_pre_setup(cuda_backend *cb, const ld_buf *post, const ld_buf *comb, const ld_buf *collapsed,
                              const ld_buf *X, const ld_buf *fn, const float *base, const float *scale, int T, int N,
                              int D, int iters, int mhc, float **bs, int *none, ld_error *err)
{
    LD_TRY(ld_ds_args_hc_pre(T, N, D, iters, mhc, err));
    if (N > 64) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda hc_pre: %d streams (at most 64)", N);
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T, hc = (2 + n) * n;
    LD_TRY(range(post, 0, tt * n, err));
    LD_TRY(range(comb, 0, tt * n * n, err));
    LD_TRY(range(collapsed, 0, tt * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    LD_TRY(range(fn, 0, hc * n * d, err));
    *none = !T;
    if (!T) return LD_OK;
    CU("hc_pre", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->work, &cb->work_cap, ld_cu_hc_work(T, N) * sizeof(float), "hc_pre", err));
    return ld_cuda_const_dev(cb, base, base, hc * sizeof(float), scale, 3 * sizeof(float), (void **)bs, "hc_pre", err);
}

ld_status ld_cuda_hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                         const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                         float norm_eps, float hc_eps, int mhc, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    float *bs = NULL;
    int none = 0;
    LD_TRY(hc_pre_setup(cb, post, comb, collapsed, X, fn, base, scale, T, N, D, iters, mhc, &bs, &none, err));
    if (none) return LD_OK;
    size_t hc = (size_t)(2 + N) * (size_t)N;
    /* backend.h's LD_DS4_MHC_* are cuda_ops.h's LD_CU_MHC_* (checked below) */
    CU("hc_pre", ld_cu_hc_pre_ex(variant(cb, LD_CUDA_OP_HC), mhc, post->d, comb->d, collapsed->d, X->d, T, N, D,
                                 fn->d, bs, bs + hc, iters, norm_eps, hc_eps, cb->work, ld_cu_hc_work(T, N)));
    return LD_OK;
}

/* whether an mHC collapse (hc_pre's, the head's) and the RMSNorm after it
 * run as one: the custom kernels of both, a norm weight of D whole floats */
static int hc_norm_fuses(const cuda_backend *cb, const ld_weight *w, int D)
{
    return variant(cb, LD_CUDA_OP_HC) == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_RMSNORM) == LD_CU_CUSTOM &&
           plain_dt(w->dt) && w->rows * w->cols == D;
}

/* hc_pre and rmsnorm in two launches: the custom kernels of both, a norm
 * weight of F32, F16 or BF16 (else LD_ERR_UNSUPPORTED, nothing written) */
ld_status ld_cuda_hc_pre_norm(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                              const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                              float norm_eps, float hc_eps, int mhc, const ld_weight *w, float eps, ld_buf *normed,
                              ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (!hc_norm_fuses(cb, w, D) || T > 65535)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda hc_pre_norm: not fused here");
    LD_TRY(range(normed, 0, (size_t)(T > 0 ? T : 0) * (size_t)D, err));
    float *bs = NULL;
    int none = 0;
    LD_TRY(hc_pre_setup(cb, post, comb, collapsed, X, fn, base, scale, T, N, D, iters, mhc, &bs, &none, err));
    if (none) return LD_OK;
    size_t hc = (size_t)(2 + N) * (size_t)N;
    int32_t *sync = NULL;
    LD_TRY(ld_cuda_sync_ints(cb, (size_t)T, &sync, "hc_pre", err));
    CU("hc_pre", ld_cu_hc_pre_norm(mhc, post->d, comb->d, collapsed->d, X->d, T, N, D, fn->d, bs, bs + hc, iters,
                                   norm_eps, hc_eps, cb->work, ld_cu_hc_work(T, N), w->d, (int)w->dt, eps,
                                   normed->d, sync));
    return LD_OK;
}

ld_status ld_cuda_hc_post(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *f, const ld_buf *post,
                          const ld_buf *comb, int T, int N, int D, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_hc_post(T, N, D, err));
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T;
    LD_TRY(range(out, 0, tt * n * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    LD_TRY(range(f, 0, tt * d, err));
    LD_TRY(range(post, 0, tt * n, err));
    LD_TRY(range(comb, 0, tt * n * n, err));
    if (!T) return LD_OK;
    if (out->d == X->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_post: out aliases X");
    CU("hc_post", ld_cu_set_device(cb->device));
    CU("hc_post", ld_cu_hc_post(variant(cb, LD_CUDA_OP_HC), out->d, X->d, f->d, post->d, comb->d, T, N, D));
    return LD_OK;
}

/* ds4_hc_head's checks: the shape, N <= 64, the buffers' ranges */
static ld_status hc_head_checks(const ld_buf *out, const ld_buf *X, const ld_buf *fn, int T, int N, int D,
                                ld_error *err)
{
    LD_TRY(ld_ds4_args_hc_head(T, N, D, err));
    if (N > 64) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_hc_head: %d streams (at most 64)", N);
    size_t n = (size_t)N, d = (size_t)D, tt = (size_t)T;
    LD_TRY(range(out, 0, tt * d, err));
    LD_TRY(range(X, 0, tt * n * d, err));
    return range(fn, 0, n * n * d, err);
}

ld_status ld_cuda_ds4_hc_head(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                              float scale, int T, int N, int D, float norm_eps, float hc_eps, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(hc_head_checks(out, X, fn, T, N, D, err));
    if (!T) return LD_OK;
    size_t n = (size_t)N;
    CU("ds4_hc_head", ld_cu_set_device(cb->device));
    size_t wn = ld_cu_hc_head_work(T, N);
    LD_TRY(scratch((void **)&cb->work, &cb->work_cap, (wn ? wn : 1) * sizeof(float), "ds4_hc_head", err));
    float *db;
    LD_TRY(ld_cuda_const_one(cb, base, n * sizeof(float), (void **)&db, "ds4_hc_head", err));
    CU("ds4_hc_head", ld_cu_ds4_hc_head(variant(cb, LD_CUDA_OP_HC), out->d, X->d, T, N, D, fn->d, db, scale,
                                        norm_eps, hc_eps, cb->work, wn));
    return LD_OK;
}

/* ds4_hc_head and rmsnorm in one launch: the custom kernels of both, a
 * norm weight of F32, F16 or BF16 (else LD_ERR_UNSUPPORTED, nothing
 * written) */
ld_status ld_cuda_ds4_hc_head_norm(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                                   float scale, int T, int N, int D, float norm_eps, float hc_eps, const ld_weight *w,
                                   float eps, ld_buf *normed, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (!hc_norm_fuses(cb, w, D))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_hc_head_norm: not fused here");
    LD_TRY(hc_head_checks(out, X, fn, T, N, D, err));
    LD_TRY(range(normed, 0, (size_t)T * (size_t)D, err));
    if (!T) return LD_OK;
    CU("ds4_hc_head", ld_cu_set_device(cb->device));
    float *db;
    LD_TRY(ld_cuda_const_one(cb, base, (size_t)N * sizeof(float), (void **)&db, "ds4_hc_head", err));
    CU("ds4_hc_head", ld_cu_ds4_hc_head_norm(out->d, X->d, T, N, D, fn->d, db, scale, norm_eps, hc_eps, w->d,
                                             (int)w->dt, eps, normed->d));
    return LD_OK;
}

#endif /* LD_CUDA_BACKEND */
