/* ds_forward.h - the forward pass of DeepSeek-V3 and V3.2 (ds_model.h)
 * over a backend (backend.h), with a latent KV cache: a session holds the
 * cache and the position, as forward.h's does for the dense models.
 *
 * What is computed (fp32 throughout; a layer is pre-norm:
 *   x += MLA(RMSNorm(x));  x += FFN_l(RMSNorm(x))):
 *
 * MLA.  cq = RMSNorm_q(q_a_proj x) (eps 1e-6, see LD_DS_LATENT_NORM_EPS);
 *   q = q_b_proj cq (or q_proj x without q LoRA), per head [nope dn | rope
 *   dr]; kv = kv_a_proj_with_mqa x = [latent c | k_pe dr]; ckv =
 *   RMSNorm_kv(latent); q's and k_pe's rope parts are rotated (interleaved
 *   pairs (2i, 2i+1) with rope_interleave, else (i, i+dr/2)), cos and sin
 *   times the YaRN attention_factor.  The cache holds, per layer and
 *   position, ckv (c floats) and the rotated k_pe (dr floats): c + dr
 *   floats, the whole of MLA's KV cache.
 *   - naive form (LD_DS_ATTN_NAIVE, the default; what transformers runs):
 *     [k_nope | v] per head = kv_b_proj ckv for every cached position, then
 *     softmax((q_nope.k_nope + q_pe.k_pe) * scale) . v;
 *   - absorbed form (LD_DS_ATTN_ABSORBED; what the official code, FlashMLA
 *     and SGLang decode with): q_abs = W_UK^T q_nope per head, scores
 *     (q_abs.ckv + q_pe.k_pe) * scale over the latent cache, o_lat = sum
 *     p ckv, o = W_UV o_lat.  The same function, other rounding: it agrees
 *     with the naive form to ~1e-7 relative, not bitwise.
 *   scale = (dn+dr)^-0.5 * mscale(factor, mscale_all_dim)^2 with YaRN
 *   (ld_ds_softmax_scale); o_proj of the heads' outputs.
 * FFN.  Layers < first_k_dense_replace: SwiGLU MLP.  Others, MoE:
 *   router logits = gate.weight x (fp32); s = sigmoid; selection by s +
 *   e_score_correction_bias: group score = sum of the group's top 2, keep
 *   the topk_group best groups, the num_experts_per_tok best experts in
 *   them (ties: score descending, index ascending); weights = s of the
 *   chosen (/ their sum with norm_topk_prob) * routed_scaling_factor;
 *   y = sum over the chosen experts in ascending id of w * Expert(x),
 *   then + SharedExperts(x) (SwiGLU of width n_shared * moe_intermediate).
 *
 * DeepSeek-V3.2 (cfg.v32: DeepSeek Sparse Attention).  Each layer's
 * lightning indexer (Hi heads of di dims, the first dr = qk_rope_head_dim
 * of them rotated) picks the positions MLA attends to:
 *   iq = indexer.wq_b cq (the same q latent as MLA's), per head
 *     [rope dr | rest] (rope FIRST, unlike MLA);
 *   ik = LayerNorm(indexer.wk x) (weight and bias, eps 1e-6), one head;
 *   RoPE of iq's and ik's first dr dims in rotate_half pairs (i, i+dr/2),
 *     the same inv_freq and cos/sin factor as MLA (cfg.index_rope_interleave:
 *     interleaved pairs, the official code before its Nov. 2025 fix);
 *   w = indexer.weights_proj x, [Hi] (fp32);
 *   I[t][s] = sum_h (w_h Hi^-0.5) relu((iq_h . ik_s) di^-0.5) over the
 *     visible s <= pos(t) (ld_ref_ds_index_scores);
 *   sel[t] = the min(index_topk, pos(t) + 1) best s: score descending, then
 *     position ascending (ld_ref_ds_topk; deterministic, where torch.topk
 *     leaves ties unspecified), attended in ascending position.
 * The indexer keys are cached per layer and position (di floats), next to
 * MLA's c + dr.  MLA then runs as for V3 over sel[t] only: the softmax and
 * the sum of values (naive) or latents (absorbed) skip the other positions
 * (ld_ref_mla_attention_sparse / ld_ref_mla_latent_attention_sparse); a
 * query with at most index_topk visible positions attends to all of them,
 * bit for bit as V3's dense attention.  (The naive form still expands
 * kv_b_proj for every cached position; only the selected ones are read.)
 * ld_ds_session_eval_sel returns the selections.
 * transformers 5.23 (DeepseekV32Indexer) and the official V3.2-Exp code
 * (inference/model.py, Indexer and MLA) differ where the engine follows
 * transformers: the official code rotates q and k by a Hadamard transform
 * (orthogonal: no change in exact arithmetic) and quantizes them to FP8
 * e4m3 with per-128 scales before the scores (fp8_index), and caches the
 * indexer keys (and, later, the latent) in FP8; the engine, as
 * transformers, scores in fp32 without either.  The official code folds
 * di^-0.5 and the q scale into the weights outside the relu (the same
 * function: the scales are positive).  Its weights_proj runs in the
 * default dtype (bf16), transformers' and the engine's in fp32.  Its
 * top-k takes min(index_topk, end_pos) of the masked scores, transformers'
 * min(index_topk, T) with future positions masked at attention: the same
 * attended set.  Its original (Sept. 2025) indexer RoPE was interleaved.
 *
 * Where transformers 5.23 and DeepSeek's official inference code differ,
 * the engine computes what both compute for configs where they agree, and
 * transformers otherwise: YaRN and the mscale^2 softmax factor are applied
 * whenever rope_scaling is yarn (official: only when max_seq_len >
 * original_max_position_embeddings); cos/sin are scaled by HF's
 * attention_factor (official: never; it is 1 when mscale ==
 * mscale_all_dim, as in V3); norm_topk_prob is read (official: always
 * normalises sigmoid weights); dropped groups are masked out entirely (both
 * use -inf in these versions); the router's logits and the expert sum are
 * fp32 (official V3: bf16); RMSNorm is fp32 (official V3: bf16).
 *
 * FP8 checkpoints (DeepSeek's block-scaled F8_E4M3 weights, see
 * ds_model.h) compute with the exact dequantization of the weights,
 * activations in fp32: what transformers computes in fp32 on the
 * dequantized weights.  The official code and FP8 servers also quantize
 * the activations (act_quant, 1x128 blocks, e4m3) before each FP8 GEMM;
 * that is not reproduced here.
 *
 * Production-style variants (engine/backend/cpu_kernels.h, kernels/ref/ref_ds_variants.h;
 * each keeps the determinism below): mla=absorbed and mla=splitk (the
 * absorbed form with flash-decoding's split-KV over fixed splits of
 * LD_DSV_MLA_SPLIT attended positions, V3.2's selected ones included),
 * router=bf16, combine=bf16 and combine=fused (the weights unscaled,
 * routed_scaling_factor on the routed sum, as SGLang's DeepseekV2MoE),
 * indexer=bf16|fp8 (V3.2's scores from bf16 operands, or from q and k
 * Hadamard-rotated and FP8-quantized per 1x128 block, the keys cached so),
 * rope=bf16 (MLA's and the indexer's cos/sin rounded to bf16).
 *
 * Determinism: as forward.h.  Projections, norms, SwiGLU and adds run
 * through the backend's op table, and so do, when the backend has them
 * (backend.h's optional DeepSeek ops), the absorbed forms' latent attention
 * (mla_latent, dense or over V3.2's selection, split-K for mla=splitk), the
 * router (ds_route) and V3.2's indexer scores and top-k (index_topk): the
 * ref and cpu backends run the same plain-C kernels over their thread
 * pool, one (token, head) or token per item, so their bits are the host
 * path's whatever the thread count.  The rest (RoPE on a sub-range of the
 * head, the naive form's attention, the weighted expert sum, the absorbed
 * products, V3.2's indexer LayerNorm), and the DeepSeek ops a backend
 * lacks, run as plain-C kernels (kernels/ref/ref_ds.h) on host copies of
 * the buffers (buf_read / buf_write), single-threaded, in a fixed order.  Each token's routed
 * experts run as matmuls over the rows routed to that expert, and a
 * matmul's row does not depend on the others, so one prefill, chunks and
 * token-by-token give the same bits, whatever the number of threads.
 */
#ifndef LD_DS_FORWARD_H
#define LD_DS_FORWARD_H

#include <stdint.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "ds_model.h"

typedef enum ld_ds_attn {
    LD_DS_ATTN_NAIVE = 0,    /* per-head k/v expanded from the latent */
    LD_DS_ATTN_ABSORBED = 1, /* kv_b_proj absorbed into q and the output */
    LD_DS_ATTN_SPLITK = 2    /* absorbed, the latent attention split-KV
                                (mla=splitk, kernels/ref/ref_ds_variants.h) */
} ld_ds_attn;

typedef struct ld_ds_session ld_ds_session;

/* A session of at most `max_seq` positions (<= max_position_embeddings)
 * over `model` and `be` (both borrowed); at most max_batch tokens per
 * chunk; `attn` is the MLA form (engine/backend/cpu_kernels.h: mla=ref, absorbed,
 * splitk).  The other session-level variants (router, combine, indexer,
 * rope) start at ref: ld_ds_session_set_kernels. */
ld_status ld_ds_session_create(const ld_ds_model *model, ld_backend *be, int max_seq, int max_batch,
                               ld_ds_attn attn, ld_ds_session **out, ld_error *err);

/* Run `T` tokens from the current position.  `logits` (NULL: not wanted)
 * receives [T][vocab]; `hidden` (NULL: not wanted) [n_layers + 2][T][hidden]
 * (the embeddings, the residual stream after each layer, the final norm's
 * output); `experts` (NULL: not wanted) [n_layers][T][num_experts_per_tok],
 * the experts each token was routed to in ascending id (-1 for dense
 * layers). */
ld_status ld_ds_session_eval(ld_ds_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                             int32_t *experts, ld_error *err);

/* ld_ds_session_eval, and for DeepSeek-V3.2 the positions the indexer
 * selected: `selected` (NULL: not wanted; ignored for V3) receives
 * [n_layers][T][index_topk], per query the min(index_topk, pos + 1)
 * positions its MLA attended to in ascending order, then -1. */
ld_status ld_ds_session_eval_sel(ld_ds_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                 int32_t *experts, int32_t *selected, ld_error *err);

/* A session that borrows the weights of `lead` (which must outlive it):
 * its own latent (and index key) caches of max_seq positions, scratch
 * (lead's max_batch), position; lead's MLA form and variants. */
ld_status ld_ds_session_create_sibling(const ld_ds_session *lead, int max_seq, ld_ds_session **out, ld_error *err);

/* A slice: layers [first, last) alone, fed hidden rows, as forward.h's
 * ld_session_create_slice / ld_session_eval_slice (their weights and
 * caches only; out [last - first][T][hidden]); the variants as
 * ld_ds_session_set_kernels sets them. */
ld_status ld_ds_session_create_slice(const ld_ds_model *m, ld_backend *be, int first, int last, int max_seq,
                                     int max_batch, ld_ds_attn attn, ld_ds_session **out, ld_error *err);
ld_status ld_ds_session_eval_slice(ld_ds_session *s, const float *x, int T, float *out, ld_error *err);

/* One sequence's share of a batch: T tokens appended to s at its position,
 * logits [T][vocab] and hidden [n_layers + 2][T][hidden] as the session's
 * eval writes them (each NULL: not wanted). */
typedef struct ld_ds_session_part {
    ld_ds_session *s;
    const int32_t *tokens;
    int T;
    float *logits, *hidden;
} ld_ds_session_part;

/* Several sequences in one batch (forward.h's ld_session_eval_batch for
 * V3 / V3.2): the parts' sessions (of parts[0].s's model, backend, MLA
 * form and variants, each once, with parts[0].s's reduce hook if any: one
 * tensor-parallel rank's sessions) run together in chunks of at most parts[0].s's max_batch rows (and each part's own):
 * the norms, MLA's projections, the MLP/MoE and the head on all the
 * chunk's rows with parts[0].s's weights and scratch, MLA's rope, caches
 * and attention (and V3.2's indexer) per sequence on its rows and its
 * session's caches.  A
 * sequence's logits are bitwise those it gets alone.  Several parts need
 * the backend's buf_view (LD_ERR_UNSUPPORTED without). */
ld_status ld_ds_session_eval_batch(const ld_ds_session_part *parts, int n, ld_error *err);

/* The router, combine, indexer and rope variants of `k` (the MLA form is
 * the session's, fixed at creation). */
void ld_ds_session_set_kernels(ld_ds_session *s, const ld_cpu_kernels *k);

/* Tensor parallelism (tp_forward.h, ld_tp_ds_session_create): a hook the
 * session calls on layer `layer`'s partial output x [T][hidden] in the
 * session's backend before it joins the residual stream: after o_proj
 * (which = 0) and after the whole FFN (which = 1: the dense MLP's
 * down_proj, or the MoE's routed sum plus the shared experts), where the
 * TP forward sums the ranks' partial outputs.  NULL (the default): no
 * call, the plain forward's bits.  The signature is forward.h's
 * ld_session_reduce_fn. */
typedef ld_status (*ld_ds_reduce_fn)(void *ctx, ld_backend *be, ld_buf *x, int T, int layer, int which,
                                     ld_error *err);
void ld_ds_session_set_reduce(ld_ds_session *s, ld_ds_reduce_fn fn, void *ctx);

/* Positions done so far. */
int ld_ds_session_pos(const ld_ds_session *s);

/* Forget the cache (back to position 0). */
void ld_ds_session_reset(ld_ds_session *s);

void ld_ds_session_destroy(ld_ds_session *s);

#endif /* LD_DS_FORWARD_H */
