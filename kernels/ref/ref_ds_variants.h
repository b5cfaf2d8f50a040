/* ref_ds_variants.h - production-style versions of DeepSeek's attention
 * and indexer kernels (kernels/ref/ref_ds.h), for op-by-op A/B in replay
 * (engine/backend/cpu_kernels.h: mla=splitk, indexer=bf16|fp8).  Leaves, as
 * ref_ops.h: arrays in, arrays out; fixed orders that depend on the shapes
 * only, so each is deterministic like the reference.
 *
 *   mla splitk   the absorbed latent attention (ld_ref_mla_latent_attention)
 *                computed as flash-decoding does (FlashMLA's
 *                flash_mla_with_kvcache with num_splits, then its combine
 *                of (out, lse) per split; SGLang's and vLLM's split-KV
 *                decode kernels): the attended positions cut in splits of
 *                `split` consecutive entries; per split its max m_s, its
 *                sum of exp l_s and its unnormalised output o_s; the
 *                splits folded in split order with rescaling (the
 *                "online softmax").  A fixed split SIZE (not a fixed
 *                number of splits) keeps the result a function of the
 *                position's own keys only: no dependence on threads, the
 *                batch or prefill vs decode (engine-notes section 5.1).
 *   indexer bf16 the lightning indexer's operands rounded to bf16 (a bf16
 *                serving stack's activations and key cache), the scores
 *                accumulated in fp32.
 *   indexer fp8  q and k rotated by the normalised Hadamard transform and
 *                quantized to FP8 E4M3 per token in 1x128 blocks (scale
 *                amax/448): DeepSeek's V3.2 inference code
 *                (Indexer.forward: rotate_activation, then act_quant before
 *                fp8_index) and DeepGEMM's fp8_mqa_logits.
 */
#ifndef LD_REF_DS_VARIANTS_H
#define LD_REF_DS_VARIANTS_H

#include <stddef.h>
#include <stdint.h>

/* the engine's split size for mla=splitk: FlashMLA's KV page block */
#define LD_DSV_MLA_SPLIT 64

/* ld_ref_mla_latent_attention (sel NULL) or its sparse form (sel, k as
 * ld_ref_mla_latent_attention_sparse) over the n attended positions cut in
 * splits of `split` (>= 1) entries, j in [a, a + split):
 *   m_s = max_j score_j;  e_j = exp(score_j - m_s);  l_s = sum_j e_j;
 *   o_s = sum_j e_j ckv[pos_j]     (j ascending, one accumulator each)
 * folded in split order: M' = max(M, m_s), A = exp(M - M'), B = exp(m_s -
 * M'); L = L A + l_s B; O = O A + o_s B; then o_lat = O / L.  `scores`
 * holds pos0 + T floats, `part` c floats.  Items (t, h). */
void ld_dsv_mla_latent_attention_splitk(float *o_lat, const float *q_abs, const float *q, const float *ckv,
                                        const float *kpe, int n_heads, int dn, int dr, int c, int pos0, float scale,
                                        float *scores, float *part, const int32_t *sel, int k, int split, size_t i0,
                                        size_t i1);

/* x [n] = H_n x / sqrt(n) in place, the Sylvester-ordered Walsh-Hadamard
 * transform (butterflies of span 1, 2, 4, ...; fp32); n a power of two.
 * Returns 0 (x untouched) when n is not a power of two. */
int ld_dsv_hadamard(float *x, int n);

/* The indexer=bf16 operands: x [n] rounded to bf16 in place. */
void ld_dsv_round_bf16(float *x, size_t n);

/* The indexer=fp8 operands: each of `rows` rows of `dim` floats (a head of
 * q, or a key) Hadamard-rotated (when dim is a power of two) and quantized
 * per 1x128 block as ld_var_fp8_act, in place. */
void ld_dsv_index_fp8(float *x, int rows, int dim);

#endif /* LD_REF_DS_VARIANTS_H */
