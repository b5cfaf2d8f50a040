/* ds_op_args.c - see ds_op_args.h. */
#include "ds_op_args.h"

#include "backend.h"

ld_status ld_ds_args_latent(int T, int pos0, int n_heads, int dn, int dr, int c, const int32_t *sel, int k,
                            int split, ld_error *err)
{
    if (T < 0 || pos0 < 0 || n_heads < 0 || dn < 0 || dr < 0 || c < 0 || split < 0 || (sel && k < 1))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "mla_latent of %d tokens at %d, %d heads (%d, %d, %d), k %d, split %d", T,
                       pos0, n_heads, dn, dr, c, k, split);
    return LD_OK;
}

ld_status ld_ds_args_sel(const int32_t *sel, int T, int pos0, int k, ld_error *err)
{
    for (int t = 0; t < T; t++) {
        int n = pos0 + t + 1 < k ? pos0 + t + 1 : k;
        for (int j = 0; j < n; j++) {
            int32_t v = sel[(size_t)t * (size_t)k + (size_t)j];
            if (v < 0 || v > pos0 + t)
                return LD_FAIL(err, LD_ERR_USAGE, 0, "query %d at %d selects position %d", t, pos0 + t, (int)v);
        }
    }
    return LD_OK;
}

ld_status ld_ds_args_absorb(ld_kdt dt, int64_t rows, int64_t cols, int rope_hd, int T, int n_heads, int dn, int dr,
                            int dv, int c, ld_error *err)
{
    if (T < 0 || n_heads < 0 || dn < 0 || dr < 0 || dv < 0 || c < 0)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "mla absorb of %d tokens, %d heads (%d, %d, %d, %d)", T, n_heads, dn, dr,
                       dv, c);
    if (dt != LD_KDT_F32 && dt != LD_KDT_F16 && dt != LD_KDT_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "mla absorb: kv_b_proj must be F32, F16 or BF16");
    if (rows != (int64_t)n_heads * (dn + dv) || cols != c || rope_hd)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "mla absorb: kv_b_proj of %lld x %lld for %d heads of %d + %d, c %d",
                       (long long)rows, (long long)cols, n_heads, dn, dv, c);
    return LD_OK;
}

ld_status ld_ds_args_route(int T, int E, int n_group, int topk_group, int top_k, ld_error *err)
{
    if (T < 0 || E < 2 || E > 1024 || n_group < 1 || E % n_group || E / n_group < 2 || topk_group < 1 ||
        topk_group > n_group || top_k < 1 || top_k > topk_group * (E / n_group))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ds_route of %d experts in %d groups, %d groups, top %d", E, n_group,
                       topk_group, top_k);
    return LD_OK;
}

ld_status ld_ds_args_index(int T, int pos0, int n_heads, int dim, int k, ld_error *err)
{
    if (T < 0 || pos0 < 0 || n_heads < 1 || dim < 1 || k < 1)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "index_topk of %d queries at %d, %d heads of %d, k %d", T, pos0, n_heads,
                       dim, k);
    return LD_OK;
}

ld_status ld_ds_args_hc_pre(int T, int N, int D, int iters, int variant, ld_error *err)
{
    if (T < 0 || N < 1 || D < 1 || iters < 0)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_pre of %d tokens, %d streams of %d, %d iterations", T, N, D, iters);
    if (variant != LD_DS4_MHC_F32 && variant != LD_DS4_MHC_BF16 && variant != LD_DS4_MHC_SINKHORN_BF16)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_pre: variant %d", variant);
    return LD_OK;
}

ld_status ld_ds_args_hc_post(int T, int N, int D, ld_error *err)
{
    if (T < 0 || N < 1 || D < 1)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_post of %d tokens, %d streams of %d", T, N, D);
    return LD_OK;
}

ld_status ld_ds_args_ds4_route(int T, int E, int K, const int32_t *hash, ld_error *err)
{
    if (T < 0 || E < 1 || E > 1024 || K < 1 || K > E || K > 64)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_route of %d experts, top %d", E, K);
    for (size_t i = 0; hash && i < (size_t)T * (size_t)K; i++)
        if (hash[i] < 0 || hash[i] >= E)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_route: row %zu names expert %d of %d", i / (size_t)K,
                           (int)hash[i], E);
    return LD_OK;
}
