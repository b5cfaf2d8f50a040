/* backend_cuda_fused.c - the CUDA backend's projections run together:
 * copy_cols, matmul_blockdiag, matmul_fanout, rmsnorm2.  backend.h's ops
 * over kernels/cuda/cuda_ops.h; backend_cuda_internal.h says how the backend
 * is cut. */
#include "backend_cuda_internal.h"

#if LD_CUDA_BACKEND

ld_status ld_cuda_copy_cols(ld_backend *be, ld_buf *dst, size_t dst_ld, size_t dst_off, const ld_buf *src,
                            size_t src_ld, size_t src_off, int rows, size_t cols, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (rows < 0 || dst_off + cols > dst_ld || src_off + cols > src_ld)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "copy_cols of %d rows: columns [%zu, +%zu) of %zu, [%zu, +%zu) of %zu",
                       rows, dst_off, cols, dst_ld, src_off, cols, src_ld);
    if (!rows || !cols) return LD_OK;
    size_t last = (size_t)rows - 1;
    LD_TRY(range(dst, 0, last * dst_ld + dst_off + cols, err));
    LD_TRY(range(src, 0, last * src_ld + src_off + cols, err));
    if (dst->d == src->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "copy_cols: dst aliases src");
    CU("copy_cols", ld_cu_set_device(cb->device));
    if (cols == dst_ld && cols == src_ld) { /* whole rows: one copy */
        CU("copy_cols", ld_cu_d2d(dst->d, src->d + src_off, (size_t)rows * cols * sizeof(float)));
        return LD_OK;
    }
    CU("copy_cols", ld_cu_d2d_rows(dst->d + dst_off, dst_ld * sizeof(float), src->d + src_off, src_ld * sizeof(float),
                                   cols * sizeof(float), (size_t)rows));
    return LD_OK;
}

/* the groups matmul_blockdiag takes in one launch */
#define BLOCKDIAG_MAX_G 64

/* one grouped FP8 launch over G column blocks of x and out, its table
 * kept on the device (const_dev, keyed by ws: the same buffers and T
 * upload nothing) */
ld_status ld_cuda_matmul_blockdiag(ld_backend *be, ld_buf *out, const ld_buf *x, ld_weight *const *ws, int G, int T,
                                   ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || G < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_blockdiag of %d tokens, %d groups", T, G);
    if (G > BLOCKDIAG_MAX_G || !ld_cuda_fp8_group_ok(cb, ws, G, T))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda matmul_blockdiag: not %d FP8 weights of one shape", G);
    size_t K = (size_t)ws[0]->cols, N = (size_t)ws[0]->rows, GK = (size_t)G * K, GN = (size_t)G * N;
    LD_TRY(range(out, 0, (size_t)T * GN, err));
    LD_TRY(range(x, 0, (size_t)T * GK, err));
    if (x == out) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_blockdiag in place");
    if (!T) return LD_OK;
    CU("matmul_blockdiag", ld_cu_set_device(cb->device));
    ld_cu_mm_group tab[BLOCKDIAG_MAX_G];
    for (int g = 0; g < G; g++)
        ld_cuda_mm_group(&tab[g], ws[g], x->d + (size_t)g * K, out->d + (size_t)g * N, T, GK, GN);
    void *dtab = NULL;
    LD_TRY(ld_cuda_const_dev(cb, ws, tab, (size_t)G * sizeof *tab, NULL, 0, &dtab, "matmul_blockdiag", err));
    CU("matmul_blockdiag", ld_cu_grouped_fp8_matmul(dtab, G, T, (int)K, (int)N, ws[0]->br, ws[0]->bc));
    return LD_OK;
}

/* a weight matmul_fanout launches with others of its kind: a plain type
 * (F32, F16, BF16: ld_cu_matmul_fanout; rows not permuted, and not for
 * the tensor-core kernel, whose sums are another's) or FP8 / FP4 (the
 * grouped launch), of K columns, for the custom matmul */
static int fan_one_ok(const cuda_backend *cb, const ld_weight *w, int64_t K)
{
    if (w->cols != K || w->rows <= 0 || w->rows > INT_MAX) return 0;
    if (w->dt == LD_KDT_F8B || w->dt == LD_KDT_F4B) return w->br > 0 && w->bc > 0;
    return plain_dt(w->dt) && !w->rope_hd && !ld_cuda_matmul_tc(cb, w); /* w->cols is K */
}

/* the grouped launch's table of the m block-scaled weights ws over T rows
 * of x into outs (each group its own width), on the device (kept in the
 * constant slot of key: where the caller keeps ws); *N the widest */
static ld_status fan_table(cuda_backend *cb, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int m, int T,
                           const void *key, void **dtab, int *N, ld_error *err)
{
    ld_cu_mm_group tab[LD_CU_FAN_MAX];
    *N = 0;
    for (int i = 0; i < m; i++) {
        ld_cuda_mm_group(&tab[i], ws[i], x->d, outs[i]->d, T, 0, 0);
        tab[i].n = (int)ws[i]->rows;
        *N = tab[i].n > *N ? tab[i].n : *N;
    }
    return ld_cuda_const_dev(cb, key, tab, (size_t)m * sizeof *tab, NULL, 0, dtab, "matmul_fanout", err);
}

/* one launch of the m weights ws (one kind) into outs; key: where the
 * caller keeps them (the grouped launch's table stays on the device) */
static ld_status fan_launch(cuda_backend *cb, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int m,
                            int T, const void *key, ld_error *err)
{
    int K = (int)ws[0]->cols, N;
    if (ws[0]->dt != LD_KDT_F8B && ws[0]->dt != LD_KDT_F4B) {
        ld_cu_fan fan[LD_CU_FAN_MAX];
        for (int i = 0; i < m; i++) fan[i] = (ld_cu_fan){ws[i]->d, outs[i]->d, (int)ws[i]->rows};
        CU("matmul_fanout", ld_cu_matmul_fanout(fan, m, x->d, ws[0]->dt, T, K));
        return LD_OK;
    }
    void *dtab = NULL;
    LD_TRY(fan_table(cb, outs, x, ws, m, T, key, &dtab, &N, err));
    int br = ws[0]->br, bc = ws[0]->bc;
    if (ws[0]->dt == LD_KDT_F4B)
        CU("matmul_fanout", ld_cu_grouped_fp4_matmul(dtab, m, T, K, N, br, bc));
    else
        CU("matmul_fanout", ld_cu_grouped_fp8_matmul(dtab, m, T, K, N, br, bc));
    return LD_OK;
}

/* the norms matmul_fanout fuses: into one FP8 launch (ws of one block
 * size), each a plain weight of its output's width, the custom rmsnorm */
static int fan_norms_ok(const cuda_backend *cb, ld_weight *const *ws, ld_weight *const *norms, int n)
{
    if (variant(cb, LD_CUDA_OP_RMSNORM) != LD_CU_CUSTOM) return 0;
    for (int i = 0; i < n; i++) {
        const ld_weight *w = ws[i], *nw = norms[i];
        if (w->dt != LD_KDT_F8B || w->br != ws[0]->br || w->bc != ws[0]->bc) return 0;
        if (nw && (!plain_dt(nw->dt) || nw->rows * nw->cols != w->rows))
            return 0;
    }
    return 1;
}

/* the grouped FP8 launch with the norms (ld_cu_grouped_fp8_matmul_norm),
 * its table kept on the device (keyed by ws) */
static ld_status fan_norm_launch(cuda_backend *cb, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int n,
                                 int T, ld_weight *const *norms, float eps, ld_error *err)
{
    ld_cu_norm_w nw[LD_CU_FAN_MAX];
    for (int i = 0; i < n; i++)
        nw[i] = (ld_cu_norm_w){norms[i] ? norms[i]->d : NULL, norms[i] ? norms[i]->dt : LD_KDT_F32};
    void *dtab = NULL;
    int32_t *sync = NULL;
    int N;
    LD_TRY(fan_table(cb, outs, x, ws, n, T, ws, &dtab, &N, err));
    LD_TRY(ld_cuda_sync_ints(cb, ((size_t)T + 7) / 8, &sync, "matmul_fanout", err));
    CU("matmul_fanout", ld_cu_grouped_fp8_matmul_norm(dtab, n, T, (int)ws[0]->cols, N, ws[0]->br, ws[0]->bc, nw, eps,
                                                      sync));
    return LD_OK;
}

/* a launch for each kind among the n weights (type, and block size for
 * the block types), in the order of their first weight; with norms, one
 * FP8 launch that norms too */
ld_status ld_cuda_matmul_fanout(ld_backend *be, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int n,
                                int T, ld_weight *const *norms, float eps, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || n < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_fanout of %d tokens, %d weights", T, n);
    int ok = n >= 1 && n <= LD_CU_FAN_MAX && T <= 8 * 65535 && variant(cb, LD_CUDA_OP_MATMUL) == LD_CU_CUSTOM;
    for (int i = 0; ok && i < n; i++) ok = fan_one_ok(cb, ws[i], ws[0]->cols);
    if (ok && norms) ok = fan_norms_ok(cb, ws, norms, n);
    if (!ok) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda matmul_fanout: not %d weights it launches together", n);
    size_t K = (size_t)ws[0]->cols, tt = (size_t)T;
    LD_TRY(range(x, 0, tt * K, err));
    for (int i = 0; i < n; i++) {
        LD_TRY(range(outs[i], 0, tt * (size_t)ws[i]->rows, err));
        if (outs[i]->d == x->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_fanout in place");
    }
    if (!T) return LD_OK;
    CU("matmul_fanout", ld_cu_set_device(cb->device));
    if (norms) return fan_norm_launch(cb, outs, x, ws, n, T, norms, eps, err);
    int taken[LD_CU_FAN_MAX] = {0};
    for (int i = 0; i < n; i++) {
        if (taken[i]) continue;
        ld_weight *kw[LD_CU_FAN_MAX];
        ld_buf *ko[LD_CU_FAN_MAX];
        int m = 1;
        kw[0] = ws[i], ko[0] = outs[i];
        for (int j = i + 1; j < n; j++)
            if (!taken[j] && ws[j]->dt == ws[i]->dt && ws[j]->br == ws[i]->br && ws[j]->bc == ws[i]->bc)
                kw[m] = ws[j], ko[m++] = outs[j], taken[j] = 1;
        LD_TRY(fan_launch(cb, ko, x, kw, m, T, &ws[i], err));
    }
    return LD_OK;
}

/* a norm weight rmsnorm2's kernel reads: F32, F16 or BF16, one row */
static int norm_weight_ok(const ld_weight *w)
{
    return plain_dt(w->dt) && w->cols > 0 && w->cols <= INT_MAX;
}

ld_status ld_cuda_rmsnorm2(ld_backend *be, ld_buf *out_a, const ld_buf *x_a, const ld_weight *w_a, ld_buf *out_b,
                           const ld_buf *x_b, const ld_weight *w_b, int rows, float eps, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (rows < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "rmsnorm2 of %d rows", rows);
    if (variant(cb, LD_CUDA_OP_RMSNORM) != LD_CU_CUSTOM || !norm_weight_ok(w_a) || !norm_weight_ok(w_b) ||
        rows > 0x3fffffff || out_a->d == out_b->d)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda rmsnorm2: not fused here");
    size_t na = (size_t)rows * (size_t)w_a->cols, nb = (size_t)rows * (size_t)w_b->cols;
    LD_TRY(range(out_a, 0, na, err));
    LD_TRY(range(x_a, 0, na, err));
    LD_TRY(range(out_b, 0, nb, err));
    LD_TRY(range(x_b, 0, nb, err));
    if (!rows) return LD_OK;
    CU("rmsnorm2", ld_cu_set_device(cb->device));
    ld_cu_norm_arg a = {out_a->d, x_a->d, w_a->d, w_a->dt, (int)w_a->cols};
    ld_cu_norm_arg b = {out_b->d, x_b->d, w_b->d, w_b->dt, (int)w_b->cols};
    CU("rmsnorm2", ld_cu_rmsnorm2(a, b, rows, eps));
    return LD_OK;
}

#endif /* LD_CUDA_BACKEND */
