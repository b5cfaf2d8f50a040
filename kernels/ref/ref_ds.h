/* ref_ds.h - plain-C fp32 reference kernels of DeepSeek-V3's layers
 * that the backend op table (engine/backend/backend.h) does not have yet: RoPE on a
 * sub-range of each head (interleaved pairs or rotate_half pairs), MLA
 * attention in its naive and absorbed forms, the noaux_tc router and the
 * weighted accumulation of expert outputs; and DeepSeek-V3.2's lightning
 * indexer (LayerNorm, scores, deterministic top-k) and MLA restricted to
 * the indexer's tokens (sparse MLA, both forms).
 *
 * Leaves, as ref_ops.h: arrays in, arrays out, no engine headers.  Each
 * kernel computes the independent items [i0, i1) (rows, (token, head)
 * pairs), every output element by one loop in a fixed order that depends on
 * the shapes only, one fp32 accumulator per reduction in index order.  So a
 * token's results are the same whatever the items computed with it, the
 * split over threads, or the chunking of the prompt.  Weights are read in
 * their storage type (ld_kdt: F32, F16, BF16) and converted exactly.
 */
#ifndef LD_REF_DS_H
#define LD_REF_DS_H

#include <stddef.h>
#include <stdint.h>

#include "ref_ops.h"

/* RoPE of `dim` values at offset `off` of each of `n_heads` heads, heads
 * `head_stride` floats apart, in rows of `row_stride` floats: row t is at
 * position pos0 + t.  Angle a_i = pos * inv_freq[i] (fp32), c = cosf(a) *
 * attn_factor, s = sinf(a) * attn_factor.  interleave = 1: pairs (2i,
 * 2i+1), DeepSeek's layout (HF rope_interleave; HF returns the rotated
 * values de-interleaved, [evens | odds], which changes no dot product);
 * interleave = 0: pairs (i, i + dim/2) as HF's rotate_half.  Items: rows. */
void ld_ref_ds_rope(float *x, size_t row_stride, size_t off, int n_heads,
                    size_t head_stride, int dim, const float *inv_freq,
                    float attn_factor, int interleave, int pos0, size_t i0,
                    size_t i1);

/* ld_ref_ds_rope, with bf16_table = 1 the rope=bf16 variant: c and s
 * (attn_factor included) rounded to bf16 before they rotate, as SGLang's
 * RotaryEmbedding keeps its cos_sin_cache in the model dtype (bf16) and
 * its DeepSeek YaRN rope folds mscale into that cache before the cast. */
void ld_ref_ds_rope_ex(float *x, size_t row_stride, size_t off, int n_heads, size_t head_stride, int dim,
                       const float *inv_freq, float attn_factor, int interleave, int pos0, int bf16_table, size_t i0,
                       size_t i1);

/* Naive MLA attention (per-head keys and values expanded from the latent):
 * q [T][H][dn + dr] (per head: nope, then the rotated rope part),
 * kv [S][H][dn + dv] (per head: k_nope, then v; kv_b_proj of the cached
 * latents), kpe [S][dr] (the rotated rope key, one head shared by all),
 * out [T][H][dv].  Query t (position pos0 + t) sees positions 0..pos0+t:
 *   score_s = (sum_i<dn q_nope[i] k_nope[s][i] + sum_i<dr q_pe[i] kpe[s][i])
 *             * scale                     (one accumulator, that order)
 *   p_s = exp(score_s - max) / sum;  out = sum_s p_s v[s]  (s ascending)
 * Items (t, h), index t * H + h; `scores` holds pos0 + T floats. */
void ld_ref_mla_attention(float *out, const float *q, const float *kv,
                          const float *kpe, int n_heads, int dn, int dr,
                          int dv, int pos0, float scale, float *scores,
                          size_t i0, size_t i1);

/* Absorbed MLA, step 1: q_abs[t][h][j] = sum_d<dn q[t][h][d] *
 * W[h*(dn+dv) + d][j], j < c, with W = kv_b_proj [H*(dn+dv)][c] of type
 * `dt` (W_UK^T q_nope).  q as ld_ref_mla_attention's; q_abs [T][H][c].
 * Items (t, h). */
void ld_ref_mla_absorb_q(float *q_abs, const float *q, const void *w,
                         ld_kdt dt, int n_heads, int dn, int dr, int dv,
                         int c, size_t i0, size_t i1);

/* Absorbed MLA, step 2: attention over the latent cache, MQA with key
 * [ckv | kpe] (c + dr) and value ckv (c):
 *   score_s = (sum_j<c q_abs[j] ckv[s][j] + sum_i<dr q_pe[i] kpe[s][i]) * scale
 *   o_lat = sum_s p_s ckv[s]
 * q_abs [T][H][c], q [T][H][dn + dr] (its rope part is read), ckv [S][c],
 * kpe [S][dr], o_lat [T][H][c].  Items (t, h); `scores` pos0 + T floats. */
void ld_ref_mla_latent_attention(float *o_lat, const float *q_abs,
                                 const float *q, const float *ckv,
                                 const float *kpe, int n_heads, int dn,
                                 int dr, int c, int pos0, float scale,
                                 float *scores, size_t i0, size_t i1);

/* Absorbed MLA, step 3: out[t][h][i] = sum_j<c W[h*(dn+dv) + dn + i][j] *
 * o_lat[t][h][j], i < dv (W_UV o_lat).  out [T][H][dv].  Items (t, h). */
void ld_ref_mla_absorb_out(float *out, const float *o_lat, const void *w,
                           ld_kdt dt, int n_heads, int dn, int dv, int c,
                           size_t i0, size_t i1);

/* Sparse MLA (DeepSeek-V3.2): ld_ref_mla_attention over the positions
 * sel[t][0 .. n_t) only, n_t = min(k, pos0 + t + 1), ascending (as
 * ld_ref_ds_topk writes them): the scores, their softmax and the weighted
 * sum of v run over those positions in that order.  With every position
 * selected it is ld_ref_mla_attention bit for bit. */
void ld_ref_mla_attention_sparse(float *out, const float *q, const float *kv, const float *kpe, int n_heads, int dn,
                                 int dr, int dv, int pos0, float scale, float *scores, const int32_t *sel, int k,
                                 size_t i0, size_t i1);

/* Sparse MLA, absorbed form: ld_ref_mla_latent_attention over the
 * positions sel[t][0 .. n_t) as ld_ref_mla_attention_sparse's. */
void ld_ref_mla_latent_attention_sparse(float *o_lat, const float *q_abs, const float *q, const float *ckv,
                                        const float *kpe, int n_heads, int dn, int dr, int c, int pos0, float scale,
                                        float *scores, const int32_t *sel, int k, size_t i0, size_t i1);

/* LayerNorm in place of rows of `dim` floats, `row_stride` apart:
 *   mean = sum x / dim;  var = sum (x - mean)^2 / dim   (fp32, in order)
 *   x = (x - mean) * (1 / sqrtf(var + eps)) * w + b
 * (the indexer's k_norm, eps 1e-6).  Items: rows. */
void ld_ref_ds_layernorm(float *x, size_t row_stride, const float *w, const float *b, int dim, float eps, size_t i0,
                         size_t i1);

/* The lightning indexer's scores of one query against n cached keys:
 * q [n_heads][dim] (its rope part rotated), w [n_heads] (weights_proj of
 * the query's normed hidden state), keys [n][dim] (LayerNorm'd, rotated):
 *   scores[s] = sum_h (w[h] * n_heads^-0.5) * relu((q_h . k_s) * dim^-0.5)
 * (h ascending, one accumulator; the dot product one accumulator, i
 * ascending): transformers' DeepseekV32Indexer in fp32.  The official code
 * folds dim^-0.5 into the weights (relu is positively homogeneous: the
 * same function, other rounding). */
void ld_ref_ds_index_scores(float *scores, const float *q, const float *w, const float *keys, int n_heads, int dim,
                            int n);

/* The min(k, n) best of scores[0..n): score descending, then index
 * ascending (a NaN ranks below every number), written to idx ascending;
 * returns their number.  `scratch` holds k int32 (a heap of the best so
 * far; the order is total, so the result depends on the scores only). */
int ld_ref_ds_topk(int32_t *idx, const float *scores, int n, int k, int32_t *scratch);

/* The noaux_tc router of one token row per item: logits [T][E] (the gate's
 * fp32 x . W^T), bias [E] fp32 (NULL: no correction bias).
 *   s = 1 / (1 + exp(-logit));  sc = s + bias   (sc for selection only)
 *   group score = the sum of the two largest sc of the group's E/n_group
 *   keep the topk_group best groups; choose the top_k best sc among their
 *   experts; ties: score descending, then index ascending
 *   w = s[chosen] (/ their sum, summed in the order chosen, if norm) *
 *       scale
 * idx [T][top_k] ascending expert id, w [T][top_k] matching.  E is a
 * multiple of n_group with at least 2 experts per group, topk_group <=
 * n_group, top_k <= topk_group * E / n_group, E <= 1024 (the caller
 * checks).  Items: rows. */
void ld_ref_ds_route(int32_t *idx, float *w, const float *logits,
                     const float *bias, int E, int n_group, int topk_group,
                     int top_k, int norm, float scale, size_t i0, size_t i1);

/* DeepSeek's block-scaled FP8 weights (weight_dequant): out[r][c] =
 * e4m3(q[r][c]) * scale_inv[r / b0][c / b1] (one fp32 product), q
 * [rows][cols], scale_inv [ceil(rows/b0)][ceil(cols/b1)] (the last blocks
 * may be partial).  Items: rows. */
void ld_ref_fp8_block_dequant(float *out, const uint8_t *q, const float *scale_inv, size_t rows, size_t cols,
                              size_t b0, size_t b1, size_t i0, size_t i1);

/* y[i] += x[i] * w, i in [i0, i1) (two roundings: the product, the sum) */
void ld_ref_ds_axpy(float *y, const float *x, float w, size_t i0, size_t i1);

/* y[i] = y[i] * w, i in [i0, i1) (combine=fused's routed_scaling_factor on
 * the sum of the routed experts) */
void ld_ref_ds_scale(float *y, float w, size_t i0, size_t i1);

/* The tokens routed to expert `e`, for an MoE run one expert at a time: of
 * N tokens with K choices each (idx, wts [N][K]), those that chose e, in
 * token order: their index into rows[], their weight into w[], their row
 * of x [N][D] copied into xe [count][D].  Returns the count (<= N). */
int ld_ref_moe_gather(int *rows, float *w, float *xe, const float *x, const int32_t *idx, const float *wts,
                      size_t N, size_t K, size_t D, int e);

#endif /* LD_REF_DS_H */
