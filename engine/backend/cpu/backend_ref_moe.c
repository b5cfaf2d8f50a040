/* backend_ref_moe.c - the CPU backends' routed experts (the moe entry):
 * each expert's rows gathered, its SwiGLU MLP, the outputs combined. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ref_internal.h"

/* ---------------------------------------------------------------- MoE */

static void moe_dims(const ld_weight *w, int64_t dims[2])
{
    dims[0] = w->rows;
    dims[1] = w->cols;
}

/* out [n][D] = down(act(gate x, up x)) of the n rows of x, through this
 * backend's matmul and swiglu ops (the session's host loop's calls); g and
 * u hold n rows of the expert's width */
static ld_status moe_expert(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_moe_expert *ex, int n, int act,
                            float limit, ld_buf *g, ld_buf *u, ld_error *err)
{
    LD_TRY(ld_refb_matmul(be, g, x, ex->gate, NULL, n, err));
    LD_TRY(ld_refb_matmul(be, u, x, ex->up, NULL, n, err));
    size_t ni = (size_t)n * (size_t)ex->gate->rows;
    if (act == LD_MOE_ACT_CLAMPED) ld_ref_ds4_clamped_swiglu(g->p, g->p, u->p, limit, ni);
    else LD_TRY(ld_refb_swiglu(be, g, g, u, ni, err));
    return ld_refb_matmul(be, out, g, ex->down, NULL, n, err);
}

/* y[rows[i]] += eo[i] * w[i] for the cnt gathered rows, in row order */
static void moe_combine(float *y, const float *eo, const int *rows, const float *w, int cnt, size_t D, int combine)
{
    for (int i = 0; i < cnt; i++) {
        float *yr = y + (size_t)rows[i] * D;
        const float *v = eo + (size_t)i * D;
        if (combine != LD_MOE_COMBINE_BF16) {
            ld_ref_ds_axpy(yr, v, w[i], 0, D);
            continue;
        }
        float wb = ld_var_bf16_round(w[i]); /* V3's bf16 tensors: y += expert(x) * w */
        for (size_t j = 0; j < D; j++)
            yr[j] = ld_var_bf16_round(yr[j] + ld_var_bf16_round(ld_var_bf16_round(v[j]) * wb));
    }
}

/* The sessions' host loop over this backend's buffers: per expert in
 * ascending id, its tokens' rows gathered (ld_ref_moe_gather), its
 * projections, their sum into y; then the fused scaling and the shared
 * expert.  Scratch: one allocation per call, freed before returning. */
ld_status ld_refb_moe(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T, int K,
                     const ld_moe_expert *experts, int E, const ld_moe_expert *shared, int act, float limit,
                     int combine, float fused_scale, ld_error *err)
{
    int64_t D, I, Is;
    LD_TRY(ld_moe_args_check(idx, T, K, experts, E, shared, act, combine, moe_dims, &D, &I, &Is, err));
    if (!T) return LD_OK;
    size_t n = (size_t)T * (size_t)D, nt = (size_t)T, wide = (size_t)(I > Is ? I : Is);
    LD_TRY(ld_refb_range(y, 0, n, err));
    LD_TRY(ld_refb_range(x, 0, n, err));
    if (y->p == x->p) return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: y aliases x");
    float *f = malloc((2 * n + 2 * nt * wide + nt) * sizeof *f);
    int *rows = malloc(nt * sizeof *rows);
    if (!f || !rows) {
        free(f);
        free(rows);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the moe's scratch");
    }
    ld_buf xe = {f, n, 1}, eo = {f + n, n, 1}, g = {f + 2 * n, nt * wide, 1};
    ld_buf u = {f + 2 * n + nt * wide, nt * wide, 1};
    float *rw = f + 2 * n + 2 * nt * wide;
    ld_status st = LD_OK;
    memset(y->p, 0, n * sizeof *y->p);
    for (int e = 0; e < E && st == LD_OK; e++) {
        int cnt = ld_ref_moe_gather(rows, rw, xe.p, x->p, idx, w, nt, (size_t)K, (size_t)D, e);
        if (!cnt) continue;
        st = moe_expert(be, &eo, &xe, &experts[e], cnt, act, limit, &g, &u, err);
        if (st == LD_OK) moe_combine(y->p, eo.p, rows, rw, cnt, (size_t)D, combine);
    }
    if (st == LD_OK && combine == LD_MOE_COMBINE_FUSED) ld_ref_ds_scale(y->p, fused_scale, 0, n);
    if (st == LD_OK && shared) st = moe_expert(be, &eo, x, shared, T, act, limit, &g, &u, err);
    if (st == LD_OK && shared) ld_ref_add(y->p, eo.p, 0, n);
    free(f);
    free(rows);
    return st;
}
