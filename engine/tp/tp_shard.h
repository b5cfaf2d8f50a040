/* tp_shard.h - one rank's shard of a dense decoder (model.h) for tensor
 * parallelism over N ranks (Megatron-style; tp_forward.h runs it).
 *
 * Rank r of N holds:
 *  - column-parallel (output rows split, zero-copy views of the mapping):
 *    q_proj by query heads [r*H/N, (r+1)*H/N), k_proj and v_proj by KV heads
 *    [r*KV/N, (r+1)*KV/N) (the GQA groups stay whole: query head h reads KV
 *    head h / (H/KV) on the same rank), their biases (Qwen2) with their rows,
 *    gate_proj and up_proj by intermediate rows [r*I/N, (r+1)*I/N) with
 *    theirs;
 *  - row-parallel (input columns split, a K-slice): o_proj by the columns of
 *    its query heads, down_proj by its intermediate columns.  A K-slice of
 *    a row-major [rows][cols] matrix is not contiguous: it is copied into a
 *    buffer the shard owns ([rows][cols/N]); block-quantized rows (Q4_0...,
 *    Q6_K; FP8 scale blocks) are cut on whole blocks only, anything else is
 *    refused (the cuts: tp_slice.h, shared with the DeepSeek shard);
 *  - replicated: embeddings, norms (q/k norms too: per head_dim), lm_head.
 * The shard's config says H/N heads, KV/N KV heads and I/N intermediate; a
 * rank's partial o_proj / down_proj outputs are summed across ranks
 * (comm.h) and then the row-parallel biases (o_proj, down_proj: kept out of
 * the shard's matmuls, ld_tp_shard_bias) are added once, after the sum.
 *
 * With N = 1 the shard is the model: the same tensors (biases included),
 * so TP = 1 computes exactly what forward.h does.
 *
 * Ownership: a shard borrows the model (which must outlive it) and owns
 * its K-slice copies, its layer table and the biases converted to fp32.
 */
#ifndef LD_TP_SHARD_H
#define LD_TP_SHARD_H

#include "engine/models/dense/model.h"

typedef struct ld_tp_shard ld_tp_shard;

/* Checks that N ranks can split `c`: N >= 1 dividing n_heads,
 * n_kv_heads and intermediate.  LD_ERR_USAGE naming the field. */
ld_status ld_tp_check_config(const ld_model_config *c, int n, ld_error *err);

/* Rank `rank`'s shard of `m` over `n` ranks.  Errors: those of
 * ld_tp_check_config; LD_ERR_UNSUPPORTED when a K-slice (or an FP8 scale
 * block) would cut a quantization block, naming the tensor, its type and
 * the block; LD_ERR_NOMEM. */
ld_status ld_tp_shard_create(const ld_model *m, int n, int rank, ld_tp_shard **out, ld_error *err);

/* The rank's model (owned by the shard): config and tensors as above. */
const ld_model *ld_tp_shard_model(const ld_tp_shard *s);

/* Layer `layer`'s row-parallel bias as fp32 [hidden], added after the
 * reduce: which = 0 o_proj, 1 down_proj; NULL when there is none (and
 * always with N = 1, where the matmul adds it). */
const float *ld_tp_shard_bias(const ld_tp_shard *s, int layer, int which);

/* Bytes the shard copied (its K-slices). */
size_t ld_tp_shard_copied_bytes(const ld_tp_shard *s);

void ld_tp_shard_free(ld_tp_shard *s);

#endif /* LD_TP_SHARD_H */
