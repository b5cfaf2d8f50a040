/* ds4_forward.h - the forward pass of DeepSeek-V4
 * (ds4_model.h) over a backend (backend.h), with its caches: a
 * session holds the per-layer KV rows, the compressors' per-position
 * projections and their compressed entries, and the position, as
 * ds_forward.h's does for V3.
 *
 * What is computed (fp32 throughout; transformers 5.23's
 * modeling_deepseek_v4.py, the test oracle).  N = hc_mult, D = hidden,
 * H heads of hd = head_dim, rd = rope dim (the LAST rd values of a head),
 * eps = rms_norm_eps.
 *
 * Residual streams (mHC).  A token's state is N streams X [N][D], each the
 * embedding at the start.  Each layer has two mHC sites (attention, FFN),
 * each with fn [(2+N)N, N*D], base [(2+N)N], scale [3]:
 *   m = fn . (X / rms(X))   (unweighted RMSNorm over the N*D values)
 *   pre = sigmoid(m[:N] scale0 + base[:N]) + hc_eps
 *   post = 2 sigmoid(m[N:2N] scale1 + base[N:2N])
 *   C = softmax_row(m[2N:] scale2 + base[2N:]) + hc_eps, then C /= colsum +
 *     hc_eps, then hc_sinkhorn_iters - 1 times (row, then column
 *     normalisation, each + hc_eps)
 *   u = sum_j pre_j X_j;  f = Block(RMSNorm_w(u));  X'_k = post_k f +
 *     sum_j C[j][k] X_j
 * After the last layer: u = sum_j pre_j X_j with hc_head's own pre
 * (sigmoid(hc_fn . X/rms(X) * hc_scale + hc_base) + hc_eps, no Sinkhorn),
 * then RMSNorm (model.norm) and the lm head.
 *
 * Attention.  cq = RMSNorm_w(wq_a x); q = wq_b cq per head, each head
 * unit-RMSNormed, RoPE on its last rd values; kv = RMSNorm_w(wkv x), ONE
 * head of hd that is the key and the value, RoPE on its last rd values.
 * RoPE rotates interleaved pairs (2i, 2i+1); sliding layers use the "main"
 * rope (rope_theta), CSA / HCA layers the "compress" rope
 * (compress_rope_theta, YaRN as configured, cos/sin factor 1).  A query
 * at position p attends to the kv of positions max(0, p - W + 1)..p
 * (W = sliding_window), then to compressed entries:
 *   HCA (ratio r): entry w = RMSNorm_w(sum_j softmax_j(gate_j + ape_j) *
 *     kv_j) over the window of positions w r..w r + r - 1 (per channel),
 *     RoPE at position w r; visible when w < (p + 1) / r (integer), i.e.
 *     its window is complete at p.
 *   CSA (ratio r): the compressor projects 2 hd per position; entry w
 *     pools 2r slots, window w-1's first halves and window w's second
 *     halves (w = 0: the second only).  The lightning indexer has its own
 *     such compressor at index_head_dim (ih) and queries iq = wq_b_idx cq
 *     (index_n_heads heads of ih, RoPE with the compress rope); a visible
 *     entry s scores sum_h relu(iq_h . K_s) ih^-0.5 * weights_proj(x)_h
 *     nih^-0.5, and the query attends to the min(index_topk, visible) best
 *     (ties: lower index).
 *   scores = q . k * hd^-0.5, softmax with the head's sink logit in the
 *   denominator, o = sum p v; RoPE by -sin (de-rotation) on o's last rd
 *   values at the query position; the heads in o_groups groups each
 *   projected by its block of wo_a [G*OL, H*hd/G], then wo_b.
 * FFN (every layer MoE).  s = sqrt(softplus(gate.weight x)); hash_moe
 *   layers: experts = tid2eid[token id]; moe layers: the top-k of s +
 *   e_score_correction_bias (ties: lower id); w = s[e] / (sum + 1e-20) *
 *   routed_scaling_factor; y = sum over chosen experts (ascending id) w *
 *   Expert(x) + Shared(x); every expert and the shared one: down(silu(
 *   min(g, L)) * clamp(u, -L, L)), L = swiglu_limit.
 *
 * Where transformers 5.23 and engine-notes section 3 (which follows
 * antirez/ds4 and DeepSeek's code) differ, the engine follows transformers:
 *  - the shared expert's SwiGLU is clamped like the routed ones
 *    (DeepseekV4MLP; notes: "shared expert unclamped");
 *  - routing weights are s / (sum + 1e-20) (ds4 clamps the sum >= 2^-14),
 *    always normalised (transformers ignores norm_topk_prob; the config
 *    rejects false), and n_shared_experts is ignored by transformers (one
 *    shared MLP of moe_intermediate_size; the config requires 1);
 *  - a yarn compress rope has cos/sin factor 1 (attention_factor forced),
 *    and the main (sliding) rope is the default rope of rope_theta;
 *  - without layer_types or compress_ratios the schedule is transformers'
 *    default (2 x HCA, then HCA / CSA alternating, V4-Pro) rather than the
 *    Flash schedule the notes quote; the released configs give
 *    compress_ratios, which is read;
 *  - nothing is quantized on the fly: DeepSeek's code quantizes the
 *    activations before FP8 GEMMs (and, per public copies of its
 *    inference code, rotates and FP4-quantizes the indexer's queries and
 *    keys); transformers on CPU and this engine compute in fp32 on the
 *    exactly dequantized weights.
 *
 * Memory: a layer keeps the rotated kv of its last sliding_window +
 * max_batch positions (a ring), a compressor the projections of its last
 * 2 ratio positions (a ring) and every compressed entry (max_seq / ratio
 * rows of head_dim or index_head_dim).
 *
 * Production-style variants (engine/backend/cpu_kernels.h): combine=fused
 * (routed_scaling_factor on the routed sum), mhc=bf16 (post and comb cast
 * to bf16) and mhc=sinkhorn-bf16 (every Sinkhorn iterate in bf16),
 * indexer=bf16|fp8 (the CSA indexer's queries, weights and compressed keys
 * in bf16, or queries and keys Hadamard-rotated and FP8-quantized per
 * 1x128 block; the keys when their entry is made), rope=bf16 (every V4
 * RoPE's cos/sin rounded to bf16).
 *
 * Determinism: projections, norms and the lm head run through the backend's
 * op table, and so does the mHC mixing where the backend has backend.h's
 * optional hc_pre / hc_post (the ref and cpu backends: the same leaves, a
 * token per item on their pool, the same bits; a backend without them, or
 * refusing the session's mhc= variant with LD_ERR_UNSUPPORTED, leaves it
 * on the host); the RoPE, attention with sinks, compressors, indexer,
 * router, clamped SwiGLU and head collapse run as plain-C kernels
 * (kernels/ref/ref_ds4.h) on host copies, one token at a time,
 * single-threaded, in a fixed order.  A compressed entry is computed once, when its window
 * completes, from the cached per-position projections, so one prefill,
 * chunks and token-by-token give the same bits whatever the thread count.
 */
#ifndef LD_DS4_FORWARD_H
#define LD_DS4_FORWARD_H

#include <stdint.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "ds4_model.h"

typedef struct ld_ds4_session ld_ds4_session;

/* A session of at most `max_seq` positions (<= max_position_embeddings)
 * over `model` and `be` (both borrowed); at most max_batch tokens per
 * chunk.  The session-level variants (engine/backend/cpu_kernels.h: combine, mhc,
 * indexer, rope) start at ref: ld_ds4_session_set_kernels. */
ld_status ld_ds4_session_create(const ld_ds4_model *model, ld_backend *be, int max_seq, int max_batch,
                                ld_ds4_session **out, ld_error *err);

/* Run `T` tokens from the current position.  `logits` (NULL: not wanted)
 * receives [T][vocab]; `hidden` (NULL: not wanted) [n_layers + 2][T][hidden]:
 * plane 0 the embeddings (every stream's start), plane 1 + l the MEAN of the
 * hc_mult streams after layer l (transformers' output_hidden_states gives
 * the streams [T][hc_mult][hidden] for layers but the last), plane
 * n_layers + 1 the final norm's output (as transformers' last hidden state);
 * `experts` (NULL: not wanted) [n_layers][T][num_experts_per_tok], each
 * token's experts in ascending id. */
ld_status ld_ds4_session_eval(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                              int32_t *experts, ld_error *err);

/* ld_ds4_session_eval, and the CSA indexer's picks: `picks` (NULL: not
 * wanted) receives [n_layers][T][index_topk], per query of a CSA layer the
 * compressed entries it attends to in ascending order, then -1 (all -1 in
 * the other layers). */
ld_status ld_ds4_session_eval_picks(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                    int32_t *experts, int32_t *picks, ld_error *err);

/* ld_ds4_session_eval, and the residual streams entering layer `layer`
 * (0 .. n_layers; n_layers: after the last layer, before the head's
 * collapse): `streams` (NULL: not wanted) receives [T][hc_mult][hidden].
 * What a slice of layers [layer, ...) is fed. */
ld_status ld_ds4_session_eval_streams(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                      int layer, float *streams, ld_error *err);

/* A slice: layers [first, last) alone (their weights, KV rings,
 * compressors and indexers only; no embeddings, head collapse, final
 * norm or lm head), fed the streams ld_ds4_session_eval_streams gives at
 * `first`.  ld_ds4_session_eval_slice runs T rows from the slice's
 * position: x [T][hc_mult][hidden] the streams entering `first`, `tokens`
 * [T] their ids (the hash layers route by them), out [last - first][T]
 * [hidden] the planes ld_ds4_session_eval's `hidden` has after each layer
 * (the streams' means), bitwise those of the whole pass.  A slice's
 * session runs nothing else (no eval, batch or sibling).  The variants
 * as ld_ds4_session_set_kernels sets them. */
ld_status ld_ds4_session_create_slice(const ld_ds4_model *m, ld_backend *be, int first, int last, int max_seq,
                                      int max_batch, ld_ds4_session **out, ld_error *err);
ld_status ld_ds4_session_eval_slice(ld_ds4_session *s, const int32_t *tokens, const float *x, int T, float *out,
                                    ld_error *err);

/* A session that borrows the weights of `lead` (which must outlive it):
 * its own caches (max_seq positions), scratch (lead's max_batch) and
 * position, lead's variants: another request on the same model, for
 * batches. */
ld_status ld_ds4_session_create_sibling(const ld_ds4_session *lead, int max_seq, ld_ds4_session **out,
                                        ld_error *err);

/* One sequence's share of a batch: T tokens appended to s at its position,
 * logits [T][vocab] and hidden [n_layers + 2][T][hidden] as the session's
 * eval writes them (each NULL: not wanted). */
typedef struct ld_ds4_session_part {
    ld_ds4_session *s;
    const int32_t *tokens;
    int T;
    float *logits, *hidden;
} ld_ds4_session_part;

/* Several sequences in one batch (forward.h's ld_session_eval_batch for
 * V4): the parts' sessions (of parts[0].s's model, backend and variants,
 * each once, with parts[0].s's reduce hook if any: one tensor-parallel
 * rank's sessions) run together in chunks of at most parts[0].s's max_batch rows (and each part's own max_batch): the
 * mHC mixing, the projections, the MoE and the head on all the chunk's
 * rows with parts[0].s's weights and scratch, the attention's KV ring,
 * compressors, indexer and attention (on the host path its projections
 * too) per sequence on its rows and its session's state.  A sequence's logits are bitwise those it gets
 * alone.  Several parts need the backend's buf_view (LD_ERR_UNSUPPORTED
 * without).  On an error the sessions may have run part of their tokens. */
ld_status ld_ds4_session_eval_batch(const ld_ds4_session_part *parts, int n, ld_error *err);

/* The combine, mhc, indexer and rope variants of `k`. */
void ld_ds4_session_set_kernels(ld_ds4_session *s, const ld_cpu_kernels *k);

/* Tensor parallelism (tp_ds4_shard.h, tp_forward.h): `fn` is called on the
 * rank's partial output of a block, [T][hidden] in the backend buffer `x`,
 * before its hc_post (which = 0: wo_b's output, 1: the MoE's routed +
 * shared sum), and leaves there the sum over the ranks.  NULL (the
 * default): no call, the single-rank forward's bits. */
typedef ld_status (*ld_ds4_reduce_fn)(void *ctx, ld_backend *be, ld_buf *x, int T, int layer, int which,
                                      ld_error *err);
void ld_ds4_session_set_reduce(ld_ds4_session *s, ld_ds4_reduce_fn fn, void *ctx);

/* Positions done so far. */
int ld_ds4_session_pos(const ld_ds4_session *s);

/* Forget the caches (back to position 0). */
void ld_ds4_session_reset(ld_ds4_session *s);

void ld_ds4_session_destroy(ld_ds4_session *s);

#endif /* LD_DS4_FORWARD_H */
