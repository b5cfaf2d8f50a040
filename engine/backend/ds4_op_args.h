/* ds4_op_args.h - the argument checks of backend.h's V4 attention entries
 * (ds4_qkv, ds4_compress, ds4_index, ds4_attention, copy_cols,
 * ds4_hc_head), the same for every backend: a bad call is refused with the
 * same LD_ERR_USAGE and message whichever backend it reaches.  Buffer sizes
 * are each backend's own check (its range()). */
#ifndef LD_DS4_OP_ARGS_H
#define LD_DS4_OP_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* a rotation of the last rope->dim (even, <= hd) values of a head */
ld_status ld_ds4_args_rope(const ld_ds4_rot *rope, int hd, ld_error *err);

/* LD_DS4_INDEX_F32, _BF16 or _FP8 */
ld_status ld_ds4_args_index_variant(int variant, ld_error *err);

ld_status ld_ds4_args_qkv(int T, int pos0, int H, int hd, int kv_rows, const ld_ds4_rot *rope, ld_error *err);

ld_status ld_ds4_args_compress(const ld_ds4_comp_bufs *c, int T, int pos0, const ld_ds4_rot *rope, int variant,
                               ld_error *err);

ld_status ld_ds4_args_index(int T, int pos0, int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope,
                            int variant, ld_error *err);

/* also: sel's rows name entries their token sees (w < (p + 1) / ratio) */
ld_status ld_ds4_args_attention(int T, int pos0, int H, int hd, int kv_rows, int window, int has_entries, int ratio,
                                const int32_t *sel, int k, const ld_ds4_rot *rope, ld_error *err);

ld_status ld_ds4_args_hc_head(int T, int N, int D, ld_error *err);

#endif /* LD_DS4_OP_ARGS_H */
