/* tp_ds_shard.h - one rank's shard of a DeepSeek-V3 / V3.2 model
 * (ds_model.h) for tensor parallelism over N ranks (tp_forward.h's
 * ld_tp_ds_session_create runs it), the split SGLang and vLLM use for MLA
 * under TP: over the attention heads and the FFN's intermediate rows.
 *
 * The design: docs/engine-tp.md, "Tensor parallelism: DeepSeek-V3's shard". */
#ifndef LD_TP_DS_SHARD_H
#define LD_TP_DS_SHARD_H

#include "engine/models/deepseek_v3/ds_model.h"

typedef struct ld_tp_ds_shard ld_tp_ds_shard;

/* Whether N ranks can split `c`: 1 <= N <= 1024 dividing
 * num_attention_heads, intermediate_size (when there are dense layers) and
 * moe_intermediate_size (when there are MoE layers).  LD_ERR_USAGE naming
 * the field. */
ld_status ld_tp_ds_check_config(const ld_ds_config *c, int n, ld_error *err);

/* ld_tp_ds_check_config and, for an FP8 checkpoint, that no rank's slice
 * cuts a scale block (LD_ERR_UNSUPPORTED naming the tensor); builds
 * nothing. */
ld_status ld_tp_ds_check(const ld_ds_model *m, int n, ld_error *err);

/* Rank `rank`'s shard of `m` over `n` ranks.  Errors: those of
 * ld_tp_ds_check, LD_ERR_USAGE for a rank outside [0, n), LD_ERR_NOMEM. */
ld_status ld_tp_ds_shard_create(const ld_ds_model *m, int n, int rank, ld_tp_ds_shard **out, ld_error *err);

/* The rank's model (owned by the shard). */
const ld_ds_model *ld_tp_ds_shard_model(const ld_tp_ds_shard *s);

/* Layer `layer`'s bias added after the reduce, fp32 [hidden]: which = 0
 * o_proj's (attention_bias); NULL when there is none, for which = 1 (the
 * FFN has no bias) and always with N = 1 (the matmul adds it). */
const float *ld_tp_ds_shard_bias(const ld_tp_ds_shard *s, int layer, int which);

/* Bytes the shard copied (its K-slices and bias). */
size_t ld_tp_ds_shard_copied_bytes(const ld_tp_ds_shard *s);

void ld_tp_ds_shard_free(ld_tp_ds_shard *s);

#endif /* LD_TP_DS_SHARD_H */
