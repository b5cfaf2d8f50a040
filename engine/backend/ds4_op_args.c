/* ds4_op_args.c - see ds4_op_args.h. */
#include "ds4_op_args.h"

ld_status ld_ds4_args_rope(const ld_ds4_rot *rope, int hd, ld_error *err)
{
    if (!rope || !rope->inv_freq || rope->dim < 2 || rope->dim % 2 || rope->dim > hd)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "V4 rope of %d of a head of %d", rope ? rope->dim : -1, hd);
    return LD_OK;
}

ld_status ld_ds4_args_index_variant(int variant, ld_error *err)
{
    if (variant != LD_DS4_INDEX_F32 && variant != LD_DS4_INDEX_BF16 && variant != LD_DS4_INDEX_FP8)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "V4 indexer operand variant %d", variant);
    return LD_OK;
}

ld_status ld_ds4_args_qkv(int T, int pos0, int H, int hd, int kv_rows, const ld_ds4_rot *rope, ld_error *err)
{
    if (T < 0 || pos0 < 0 || H < 1 || hd < 1 || kv_rows < 1 || kv_rows < T)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_qkv of %d tokens at %d, %d heads of %d, a ring of %d", T, pos0, H,
                       hd, kv_rows);
    return ld_ds4_args_rope(rope, hd, err);
}

ld_status ld_ds4_args_compress(const ld_ds4_comp_bufs *c, int T, int pos0, const ld_ds4_rot *rope, int variant,
                               ld_error *err)
{
    if (T < 0 || pos0 < 0 || !c || c->ratio < 1 || c->dim < 1 || (c->width != c->dim && c->width != 2 * c->dim))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_compress of %d positions at %d, ratio %d, width %d of %d", T, pos0,
                       c ? c->ratio : 0, c ? c->width : 0, c ? c->dim : 0);
    LD_TRY(ld_ds4_args_index_variant(variant, err));
    return ld_ds4_args_rope(rope, c->dim, err);
}

ld_status ld_ds4_args_index(int T, int pos0, int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope,
                            int variant, ld_error *err)
{
    if (T < 0 || pos0 < 0 || n_heads < 1 || dim < 1 || ratio < 1 || k < 1)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_index of %d queries at %d, %d heads of %d, ratio %d, k %d", T, pos0,
                       n_heads, dim, ratio, k);
    LD_TRY(ld_ds4_args_index_variant(variant, err));
    return ld_ds4_args_rope(rope, dim, err);
}

ld_status ld_ds4_args_attention(int T, int pos0, int H, int hd, int kv_rows, int window, int has_entries, int ratio,
                                const int32_t *sel, int k, const ld_ds4_rot *rope, ld_error *err)
{
    if (T < 0 || pos0 < 0 || H < 1 || hd < 1 || window < 1 || (has_entries && ratio < 1) || (sel && k < 1))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention of %d tokens at %d, %d heads of %d, window %d, ratio %d",
                       T, pos0, H, hd, window, ratio);
    long long span = (long long)window - 1 + T, seq = (long long)pos0 + T; /* the ring holds every row a token sees */
    if (kv_rows < (span < seq ? span : seq))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention: a ring of %d rows for a window of %d and %d tokens",
                       kv_rows, window, T);
    for (int t = 0; sel && has_entries && t < T; t++) {
        int n = (pos0 + t + 1) / ratio;
        for (int i = 0; i < k && sel[(size_t)t * (size_t)k + (size_t)i] >= 0; i++)
            if (sel[(size_t)t * (size_t)k + (size_t)i] >= n)
                return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_attention: token %d picks entry %d of %d", t,
                               (int)sel[(size_t)t * (size_t)k + (size_t)i], n);
    }
    return ld_ds4_args_rope(rope, hd, err);
}

ld_status ld_ds4_args_hc_head(int T, int N, int D, ld_error *err)
{
    if (T < 0 || N < 1 || D < 1)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_hc_head of %d tokens, %d streams of %d", T, N, D);
    return LD_OK;
}
