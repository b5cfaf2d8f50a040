/* tp_ds4_shard.h - one rank's shard of a DeepSeek-V4 model
 * (ds4_model.h) for tensor parallelism over N ranks (tp_forward.h's
 * ld_tp_ds4_session_create runs it): over the query heads, wo_a's output
 * groups and the experts' intermediate rows.
 *
 * Rank r of N holds:
 *  - attention over the query heads [r H/N, (r+1) H/N): wq_b's rows of
 *    those heads (a view) and their sink logits (a view of attn_sink);
 *    wo_a's groups [r G/N, (r+1) G/N) (its rows of those groups, a view):
 *    the heads of a group are contiguous (H/G of them), so with N dividing
 *    G a rank's groups read exactly its heads; wo_b row-parallel (the
 *    K-slice of its groups' G/N * o_lora_rank columns, copied);
 *  - replicated, computed identically on every rank: wq_a, q_norm, wkv,
 *    kv_norm (the one shared KV head, so the KV ring is whole on every
 *    rank), the compressors and their entries, the CSA indexer (its own
 *    heads and weights: every rank picks the same entries), the mHC
 *    tensors (hc_attn / hc_ffn / hc_head), the norms, embeddings and head;
 *  - the MoE over its intermediate rows: every routed expert and the
 *    shared one split along moe_intermediate_size (w1/w3 rows views, w2's
 *    columns a K-slice copy); the router (gate.weight, its bias, tid2eid)
 *    replicated, so every rank routes every token to the same experts and
 *    computes its partial routed + shared sum in the session's order.
 * The shard's config says H/N heads, G/N groups and I/N; the session's
 * reduce hook (ds4_forward.h) sums the ranks' partials of wo_b's
 * output and of the MoE before hc_post: two all-reduces per layer.  V4 has
 * no biases on these projections.
 *
 * Quantized checkpoints: the FP8 linears (LD_WQ_F8B) and FP4 experts
 * (LD_WQ_F4B) are cut by tp_slice.h; a split whose rows or columns would
 * cut a scale block is LD_ERR_UNSUPPORTED naming the tensor.
 *
 * With N = 1 the shard is the model.  Ownership: the shard borrows the
 * model (which must outlive it) and owns its layer and expert tables and
 * its K-slice copies. */
#ifndef LD_TP_DS4_SHARD_H
#define LD_TP_DS4_SHARD_H

#include "engine/models/deepseek_v4/ds4_model.h"

typedef struct ld_tp_ds4_shard ld_tp_ds4_shard;

/* Whether N ranks can split `c`: 1 <= N <= 1024 dividing
 * num_attention_heads, o_groups and moe_intermediate_size.  LD_ERR_USAGE
 * naming the field. */
ld_status ld_tp_ds4_check_config(const ld_ds4_config *c, int n, ld_error *err);

/* ld_tp_ds4_check_config and that no rank's slice cuts a scale block of a
 * quantized weight (LD_ERR_UNSUPPORTED naming the tensor); builds nothing. */
ld_status ld_tp_ds4_check(const ld_ds4_model *m, int n, ld_error *err);

/* Rank `rank`'s shard of `m` over `n` ranks.  Errors: those of
 * ld_tp_ds4_check, LD_ERR_USAGE for a rank outside [0, n), LD_ERR_NOMEM. */
ld_status ld_tp_ds4_shard_create(const ld_ds4_model *m, int n, int rank, ld_tp_ds4_shard **out, ld_error *err);

/* The rank's model (owned by the shard). */
const ld_ds4_model *ld_tp_ds4_shard_model(const ld_tp_ds4_shard *s);

/* Bytes the shard copied (its K-slices). */
size_t ld_tp_ds4_shard_copied_bytes(const ld_tp_ds4_shard *s);

void ld_tp_ds4_shard_free(ld_tp_ds4_shard *s);

#endif /* LD_TP_DS4_SHARD_H */
