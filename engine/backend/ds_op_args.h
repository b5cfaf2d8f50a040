/* ds_op_args.h - the argument checks of backend.h's DeepSeek entries
 * (mla_latent, mla_absorb_q / _out, ds_route, index_topk; V4's hc_pre,
 * hc_post, ds4_route), the same for every backend, so that a bad call is refused
 * with the same LD_ERR_USAGE (or LD_ERR_UNSUPPORTED) and message
 * whichever backend it reaches.  Buffer
 * sizes are each backend's own check (its range()). */
#ifndef LD_DS_OP_ARGS_H
#define LD_DS_OP_ARGS_H

#include <stdint.h>

#include "ld_error.h"
#include "kernels/ref/ref_ops.h"

/* the shape of an mla_latent call */
ld_status ld_ds_args_latent(int T, int pos0, int n_heads, int dn, int dr, int c, const int32_t *sel, int k,
                            int split, ld_error *err);

/* the attended entries of sel [T][k] (min(k, pos0 + t + 1) of row t) are
 * positions their query sees */
ld_status ld_ds_args_sel(const int32_t *sel, int T, int pos0, int k, ld_error *err);

/* kv_b_proj (rows x cols of dt, rope_hd) fits (n_heads, dn, dv, c) and is
 * of a plain type */
ld_status ld_ds_args_absorb(ld_kdt dt, int64_t rows, int64_t cols, int rope_hd, int T, int n_heads, int dn, int dr,
                            int dv, int c, ld_error *err);

/* E experts in n_group groups, topk_group groups kept, top_k experts */
ld_status ld_ds_args_route(int T, int E, int n_group, int topk_group, int top_k, ld_error *err);

/* the shape of an index_topk call */
ld_status ld_ds_args_index(int T, int pos0, int n_heads, int dim, int k, ld_error *err);

/* the shape and variant of an hc_pre call (V4's mHC pre-mixing) */
ld_status ld_ds_args_hc_pre(int T, int N, int D, int iters, int variant, ld_error *err);

/* the shape of an hc_post call */
ld_status ld_ds_args_hc_post(int T, int N, int D, ld_error *err);

/* E experts, top K, the hash rows [T][K] (NULL: none) name experts */
ld_status ld_ds_args_ds4_route(int T, int E, int K, const int32_t *hash, ld_error *err);

#endif /* LD_DS_OP_ARGS_H */
