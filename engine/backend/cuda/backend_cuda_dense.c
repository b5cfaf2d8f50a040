/* backend_cuda_dense.c - the CUDA backend's ops of a dense decoder: embed,
 * rmsnorm, the matmul (custom, tensor-core, FP8-block; its group tables for
 * the grouped launches), rope, the KV cache, attention, swiglu, add and
 * softmax.  backend.h's ops over kernels/cuda/cuda_ops.h. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_internal.h"

#if LD_CUDA_BACKEND

/* ---------------------------------------------------------------- ops */

ld_status ld_cuda_embed(ld_backend *be, ld_buf *out, const ld_weight *table, const int32_t *tokens, int T, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "embed of %d tokens", T);
    if (ld_ref_kdt_is_scaled(table->dt))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda embed: a block-scaled FP8 / FP4 table is not supported");
    LD_TRY(range(out, 0, (size_t)T * (size_t)table->cols, err));
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= table->rows)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "token id %d outside the vocabulary of %lld", (int)tokens[t],
                           (long long)table->rows);
    if (!T) return LD_OK;
    CU("embed", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->tokens, &cb->tokens_cap, (size_t)T * sizeof(int32_t), "embed", err));
    CU("embed", ld_cu_h2d(cb->tokens, tokens, (size_t)T * sizeof(int32_t)));
    CU("embed", ld_cu_embed(variant(cb, LD_CUDA_OP_EMBED), out->d, table->d, table->dt, (int)table->cols,
                            cb->tokens, T));
    return LD_OK;
}

ld_status ld_cuda_rmsnorm(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, int rows, float eps,
                         ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (rows < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "rmsnorm of %d rows", rows);
    size_t n = (size_t)rows * (size_t)w->cols;
    if (ld_ref_kdt_is_block(w->dt) || ld_ref_kdt_is_scaled(w->dt))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a norm weight of a block type");
    LD_TRY(range(out, 0, n, err));
    LD_TRY(range(x, 0, n, err));
    CU("rmsnorm", ld_cu_set_device(cb->device));
    CU("rmsnorm", ld_cu_rmsnorm(variant(cb, LD_CUDA_OP_RMSNORM), out->d, x->d, w->d, w->dt, (int)w->cols, eps, rows));
    return LD_OK;
}

/* rows of an FP8 matmul's bias copies (the scratch is this many rows) */
#define BIAS_ROWS 64

/* out [T][N] += bias (N values of F32, F16 or BF16), row by row: the bias
 * converted to fp32 into up to BIAS_ROWS rows (embed's exact conversion of
 * row 0, zero token ids), then added to the rows of out that many at a
 * time (x += y, element-wise: no row depends on the others) */
static ld_status add_bias_rows(cuda_backend *cb, ld_buf *out, const ld_weight *bias, int T, int N, ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_MATMUL), R = T < BIAS_ROWS ? T : BIAS_ROWS;
    size_t had = cb->zeros_cap;
    LD_TRY(scratch((void **)&cb->zeros, &cb->zeros_cap, (size_t)R * sizeof(int32_t), "matmul", err));
    if (cb->zeros_cap != had) CU("matmul", ld_cu_memset0(cb->zeros, cb->zeros_cap));
    LD_TRY(scratch((void **)&cb->bias_rows, &cb->bias_rows_cap, (size_t)R * (size_t)N * sizeof(float), "matmul",
                   err));
    CU("matmul", ld_cu_embed(v, cb->bias_rows, bias->d, bias->dt, N, cb->zeros, R));
    for (int t0 = 0; t0 < T; t0 += R) {
        int nt = T - t0 < R ? T - t0 : R;
        CU("matmul", ld_cu_add(v, out->d + (size_t)t0 * (size_t)N, cb->bias_rows, (size_t)nt * (size_t)N));
    }
    return LD_OK;
}

/* tokens per ld_cu_fp8_matmul call (its custom grid's y bound, for any
 * rows per block); rows are independent, so the split changes no result */
#define F8B_MAX_T 65535

/* the block-scaled matmuls: ld_cu_fp8_matmul or ld_cu_ds4_fp4_matmul (acc
 * + 0.0f, as the reference without a bias), then the bias added to the
 * rows */
static ld_status matmul_f8b(cuda_backend *cb, ld_buf *out, const ld_buf *x, const ld_weight *w,
                            const ld_weight *bias, int T, ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_MATMUL), K = (int)w->cols, N = (int)w->rows;
    if (!T || !N) return LD_OK;
    if (!K) CU("matmul", ld_cu_memset0(out->d, (size_t)T * (size_t)N * sizeof(float)));
    for (int t0 = 0; K && t0 < T; t0 += F8B_MAX_T) {
        int nt = T - t0 < F8B_MAX_T ? T - t0 : F8B_MAX_T;
        float *o = out->d + (size_t)t0 * (size_t)N;
        const float *xt = x->d + (size_t)t0 * (size_t)K;
        if (w->dt == LD_KDT_F4B) /* fp32 scales, a grid of N/br x K/bc (weight_type checked it divides) */
            CU("matmul", ld_cu_ds4_fp4_matmul(v, o, xt, w->d, w->scale, 0, nt, K, N, N / w->br, K / w->bc));
        else
            CU("matmul", ld_cu_fp8_matmul(v, o, xt, w->d, w->scale, nt, K, N, w->br, w->bc));
    }
    if (bias) LD_TRY(add_bias_rows(cb, out, bias, T, N, err));
    return LD_OK;
}

/* a group of a table that const_dev keeps: its padding bytes (after
 * rows) zeroed, since const_dev compares the table's bytes with memcmp */
void ld_cuda_mm_group(ld_cu_mm_group *g, const ld_weight *w, const float *x, float *out, int rows, size_t ldx,
                      size_t ldo)
{
    memset(g, 0, sizeof *g);
    g->q = w->d;
    g->scale = w->scale;
    g->x = x;
    g->out = out;
    g->rows = rows;
    g->ldx = ldx;
    g->ldo = ldo;
}

/* ws [G] one grouped FP8 launch can take over T rows: FP8 block-scaled,
 * one shape and block size, the custom matmul (the grouped kernel is the
 * custom one's warp: the same bits as a matmul a weight) */
int ld_cuda_fp8_group_ok(const cuda_backend *cb, ld_weight *const *ws, int G, int T)
{
    if (G < 1 || T > 8 * 65535 || variant(cb, LD_CUDA_OP_MATMUL) != LD_CU_CUSTOM) return 0;
    for (int g = 0; g < G; g++) {
        const ld_weight *w = ws[g], *w0 = ws[0];
        if (w->dt != LD_KDT_F8B || w->rows != w0->rows || w->cols != w0->cols || w->br != w0->br || w->bc != w0->bc)
            return 0;
    }
    return ws[0]->cols > 0 && ws[0]->rows > 0;
}

/* whether the matmul op runs w through the tensor-core GEMM (matmul=tc
 * and a weight it takes): for every T, never by T, since a token's bits
 * must not depend on its batch; the other plain and GGML weights take
 * ld_cu_matmul's kernel of the variant, FP8 ones matmul_f8b */
int ld_cuda_matmul_tc(const cuda_backend *cb, const ld_weight *w)
{
    return cb->k.custom[LD_CUDA_OP_MATMUL] == LD_CUDA_KERNEL_TC && ld_cu_matmul_tc_supported(w->dt, (int)w->cols);
}

ld_status ld_cuda_matmul(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias,
                         int T, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul of %d tokens", T);
    LD_TRY(range(out, 0, (size_t)T * (size_t)w->rows, err));
    LD_TRY(range(x, 0, (size_t)T * (size_t)w->cols, err));
    if (x == out) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul in place");
    if (bias && (ld_ref_kdt_is_block(bias->dt) || ld_ref_kdt_is_scaled(bias->dt)))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a bias of a block type");
    if (bias && bias->rows * bias->cols != w->rows)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "bias of %lld values for %lld outputs",
                       (long long)(bias->rows * bias->cols), (long long)w->rows);
    CU("matmul", ld_cu_set_device(cb->device));
    if (ld_ref_kdt_is_scaled(w->dt)) return matmul_f8b(cb, out, x, w, bias, T, err);
    const void *bd = bias ? bias->d : NULL;
    ld_kdt bdt = bias ? bias->dt : LD_KDT_F32;
    if (ld_cuda_matmul_tc(cb, w))
        CU("matmul", ld_cu_matmul_tc(out->d, x->d, w->d, w->dt, bd, bdt, T, (int)w->cols, (int)w->rows, w->rope_hd));
    else
        CU("matmul", ld_cu_matmul(variant(cb, LD_CUDA_OP_MATMUL), out->d, x->d, w->d, w->dt, bd, bdt, T,
                                  (int)w->cols, (int)w->rows, w->rope_hd));
    return LD_OK;
}

ld_status ld_cuda_rope(ld_backend *be, ld_buf *x, int T, int n_heads, int head_dim, int pos0, const float *inv_freq,
                      ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || n_heads < 0 || head_dim < 0 || pos0 < 0)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rope of %d tokens, %d heads of %d at %d", T, n_heads, head_dim, pos0);
    LD_TRY(range(x, 0, (size_t)T * (size_t)n_heads * (size_t)head_dim, err));
    size_t half = (size_t)(head_dim / 2);
    if (!T || !n_heads || !half) return LD_OK;
    CU("rope", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->freq, &cb->freq_cap, half * sizeof(float), "rope", err));
    CU("rope", ld_cu_h2d(cb->freq, inv_freq, half * sizeof(float)));
    CU("rope", ld_cu_rope(variant(cb, LD_CUDA_OP_ROPE), x->d, T, n_heads, head_dim, cb->freq, pos0));
    return LD_OK;
}

ld_status ld_cuda_kv_store(ld_backend *be, ld_buf *cache, const ld_buf *src, int T, int pos0, int row, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || pos0 < 0 || row < 0)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "kv_store of %d rows of %d at %d", T, row, pos0);
    size_t n = (size_t)T * (size_t)row;
    LD_TRY(range(src, 0, n, err));
    LD_TRY(range(cache, (size_t)pos0 * (size_t)row, n, err));
    CU("kv_store", ld_cu_set_device(cb->device));
    CU("kv_store", ld_cu_copy(variant(cb, LD_CUDA_OP_KV_STORE), cache->d + (size_t)pos0 * (size_t)row, src->d, n));
    return LD_OK;
}


ld_status ld_cuda_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kcache, const ld_buf *vcache,
                           int T, int pos0, int n_heads, int n_kv, int head_dim, int window, float scale, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0 || pos0 < 0 || n_heads < 0 || head_dim < 0)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "attention of %d tokens at %d, %d heads of %d", T, pos0, n_heads,
                       head_dim);
    size_t nq = (size_t)T * (size_t)n_heads * (size_t)head_dim;
    size_t nkv = (size_t)(pos0 + T) * (size_t)n_kv * (size_t)head_dim;
    if (n_kv <= 0 || n_heads % n_kv) return LD_FAIL(err, LD_ERR_USAGE, 0, "%d heads over %d kv heads", n_heads, n_kv);
    LD_TRY(range(out, 0, nq, err));
    LD_TRY(range(q, 0, nq, err));
    LD_TRY(range(kcache, 0, nkv, err));
    LD_TRY(range(vcache, 0, nkv, err));
    if (!nq) return LD_OK;
    int v = variant(cb, LD_CUDA_OP_ATTENTION);
    if (v == LD_CU_CUSTOM && head_dim > LD_CU_ATT_MAX_HD)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "cuda attention: head_dim %d > %d (custom kernel; use attention=ref)", head_dim,
                       LD_CU_ATT_MAX_HD);
    CU("attention", ld_cu_set_device(cb->device));
    size_t per_query = ld_cu_attention_work(v, 1, n_heads, head_dim, pos0, T), want = 0;
    if (per_query) {
        size_t tile = ATT_WORK_FLOATS / per_query;
        if (tile < 1) tile = 1;
        if (tile > (size_t)T) tile = (size_t)T;
        want = tile * per_query;
        if (want > cb->work_cap / sizeof(float))
            LD_TRY(scratch((void **)&cb->work, &cb->work_cap, want * sizeof(float), "attention", err));
        else
            want = cb->work_cap / sizeof(float);
    }
    CU("attention", ld_cu_attention(v, out->d, q->d, kcache->d, vcache->d, T, pos0, n_heads, n_kv, head_dim, window,
                                    scale, cb->work, want));
    return LD_OK;
}

ld_status ld_cuda_swiglu(ld_backend *be, ld_buf *out, const ld_buf *gate, const ld_buf *up, size_t n, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(range(out, 0, n, err));
    LD_TRY(range(gate, 0, n, err));
    LD_TRY(range(up, 0, n, err));
    CU("swiglu", ld_cu_set_device(cb->device));
    CU("swiglu", ld_cu_swiglu(variant(cb, LD_CUDA_OP_SWIGLU), out->d, gate->d, up->d, n));
    return LD_OK;
}

ld_status ld_cuda_add(ld_backend *be, ld_buf *x, const ld_buf *y, size_t n, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(range(x, 0, n, err));
    LD_TRY(range(y, 0, n, err));
    CU("add", ld_cu_set_device(cb->device));
    CU("add", ld_cu_add(variant(cb, LD_CUDA_OP_ADD), x->d, y->d, n));
    return LD_OK;
}

ld_status ld_cuda_softmax(ld_backend *be, ld_buf *out, const ld_buf *x, int rows, int n, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (rows < 0 || n < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "softmax of %d rows of %d", rows, n);
    LD_TRY(range(out, 0, (size_t)rows * (size_t)n, err));
    LD_TRY(range(x, 0, (size_t)rows * (size_t)n, err));
    CU("softmax", ld_cu_set_device(cb->device));
    CU("softmax", ld_cu_softmax(variant(cb, LD_CUDA_OP_SOFTMAX), out->d, x->d, rows, n));
    return LD_OK;
}

#endif /* LD_CUDA_BACKEND */
