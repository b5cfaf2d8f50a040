/* deepseek_forward.h - the forward pass of DeepSeek-V3 (deepseek_model.h)
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
 * deepseek_model.h) compute with the exact dequantization of the weights,
 * activations in fp32: what transformers computes in fp32 on the
 * dequantized weights.  The official code and FP8 servers also quantize
 * the activations (act_quant, 1x128 blocks, e4m3) before each FP8 GEMM;
 * that is not reproduced here.
 *
 * Determinism: as forward.h.  Projections, norms, SwiGLU and adds run
 * through the backend's op table; the ops it lacks (RoPE on a sub-range of
 * the head, MLA attention with q.k and v of different widths, the router,
 * the weighted expert sum, the absorbed products) run as plain-C kernels
 * (kernels/ref_deepseek.h) on host copies of the buffers (buf_read /
 * buf_write), single-threaded, in a fixed order.  Each token's routed
 * experts run as matmuls over the rows routed to that expert, and a
 * matmul's row does not depend on the others, so one prefill, chunks and
 * token-by-token give the same bits, whatever the number of threads.
 */
#ifndef LD_DEEPSEEK_FORWARD_H
#define LD_DEEPSEEK_FORWARD_H

#include <stdint.h>

#include "backend.h"
#include "deepseek_model.h"

typedef enum ld_ds_attn {
    LD_DS_ATTN_NAIVE = 0,    /* per-head k/v expanded from the latent */
    LD_DS_ATTN_ABSORBED = 1  /* kv_b_proj absorbed into q and the output */
} ld_ds_attn;

typedef struct ld_ds_session ld_ds_session;

/* A session of at most `max_seq` positions (<= max_position_embeddings)
 * over `model` and `be` (both borrowed); at most max_batch tokens per
 * chunk. */
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

/* Positions done so far. */
int ld_ds_session_pos(const ld_ds_session *s);

/* Forget the cache (back to position 0). */
void ld_ds_session_reset(ld_ds_session *s);

void ld_ds_session_destroy(ld_ds_session *s);

#endif /* LD_DEEPSEEK_FORWARD_H */
