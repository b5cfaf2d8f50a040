/* tp_ds_shard.h - one rank's shard of a DeepSeek-V3 / V3.2 model
 * (ds_model.h) for tensor parallelism over N ranks (tp_forward.h's
 * ld_tp_ds_session_create runs it), the split SGLang and vLLM use for MLA
 * under TP: over the attention heads and the FFN's intermediate rows.
 *
 * Rank r of N holds:
 *  - MLA over the query heads [r*H/N, (r+1)*H/N): q_b_proj's (or
 *    q_proj's) rows of those heads and kv_b_proj's rows of those heads
 *    (column-parallel, zero-copy views; the absorbed form reads the same
 *    rows as W_UK / W_UV), o_proj's input columns of those heads
 *    (row-parallel, a K-slice copied into a buffer the shard owns);
 *  - replicated, computed identically on every rank: q_a_proj,
 *    kv_a_proj_with_mqa, their biases and norms, so the q latent and the
 *    latent KV cache (c + dr floats per position, shared by all heads) are
 *    whole on every rank; V3.2's lightning indexer (its weights, its key
 *    cache, its selection: every rank selects the same positions);
 *  - the FFN over its intermediate rows: the dense layers' MLP, each routed
 *    expert and the shared experts split along their intermediate
 *    dimension (gate/up rows [r*I/N, ...) views, down_proj's columns a
 *    K-slice copy); the router (gate.weight, e_score_correction_bias)
 *    replicated, so every rank routes every token to the same experts and
 *    computes its partial routed + shared sum in the session's order;
 *  - embeddings, norms, lm_head replicated.
 * The shard's config says H/N heads, intermediate_size/N and
 * moe_intermediate_size/N (the shared experts' width follows: Is/N).  The
 * session's reduce hook (ds_forward.h) sums the ranks' partials after
 * o_proj and after the FFN: two all-reduces per layer.  o_proj's bias
 * (attention_bias) is kept out of the shard's matmul and added once after
 * the sum (ld_tp_ds_shard_bias).
 *
 * FP8 checkpoints: the FP8 linears are LD_WQ_F8B (ds_model.h), cut
 * by tp_slice.h as the dense shard cuts them (rows: views with their scale
 * rows; K-slices: copies with their scale columns), and a split is refused
 * (LD_ERR_UNSUPPORTED naming the tensor and the block) where a rank's rows
 * or columns of a tensor stored as F8_E4M3 would cut its weight_block_size
 * scale blocks (kv_b_proj, bound dequantized, is checked on the file's
 * blocks too): a server holding the FP8 weights shards them on whole
 * blocks, and the numbers must be the ones such a shard computes.
 *
 * Expert parallelism (not done) would instead give rank r the experts
 * [r*E/N, (r+1)*E/N) whole, dispatch each token's hidden state to the
 * ranks owning its chosen experts (all-to-all) and combine their weighted
 * outputs back (all-to-all), the shared experts TP-split or replicated.
 * The numbers would change in the combine: a token's routed sum would be
 * assembled from per-rank partial sums (or from the gathered expert
 * outputs, summed in ascending expert id to keep today's bits), and the
 * all-to-all's variable message sizes need a deterministic layout.
 *
 * With N = 1 the shard is the model (o_proj's bias included).  Ownership:
 * the shard borrows the model (which must outlive it) and owns its layer
 * and expert tables, its K-slice copies and the bias converted to fp32. */
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
