/* ref_ds4.h - plain-C fp32 reference kernels of DeepSeek-V4's
 * layers that the backend op table (engine/backend/backend.h) does not have: the
 * mHC stream mixing with its Sinkhorn-Knopp projection, the final stream
 * collapse, V4's interleaved partial RoPE (and its inverse on the attention
 * output), the shared-KV attention with per-head sinks over an arbitrary
 * list of keys, the CSA / HCA compressor's softmax pooling, the lightning
 * indexer's scores, a deterministic top-k, the sqrt-softplus / hash router
 * and the clamped SwiGLU.
 *
 * Leaves, as ref_ops.h: arrays in, arrays out, no engine headers; fp32
 * parameters (the caller converts weights with ld_ref_to_f32).  Each kernel
 * computes one token row (or one compressed entry); every output element is
 * computed by one loop in a fixed order that depends on the shapes only,
 * one fp32 accumulator per reduction in index order, so a token's results
 * do not depend on what is computed with it.
 */
#ifndef LD_REF_DS4_H
#define LD_REF_DS4_H

#include <stddef.h>
#include <stdint.h>

#include "ref_dtype.h"

/* x * rsqrt(mean(x^2) + eps) in place over n values (no weight) */
void ld_ref_ds4_unit_rmsnorm(float *x, int n, float eps);

/* One mHC site for one token: X [N][D] the streams, fn [(2+N)*N][N*D],
 * base [(2+N)*N], scale [3] (transformers' DeepseekV4HyperConnection):
 *   m = fn . (X / rms(X))            (rms over all N*D values, eps norm_eps)
 *   pre  = sigmoid(m[0:N] * scale[0] + base[0:N]) + hc_eps
 *   post = 2 sigmoid(m[N:2N] * scale[1] + base[N:2N])
 *   comb = softmax_row(m[2N:] * scale[2] + base[2N:]) + hc_eps   [N][N]
 *   comb /= colsum + hc_eps; then iters - 1 times: comb /= rowsum +
 *   hc_eps; comb /= colsum + hc_eps  (iters <= 1: the first only)
 *   collapsed[d] = sum_j pre[j] X[j][d]
 * `scratch` holds N*D + (2+N)*N floats. */
void ld_ref_ds4_hc_pre(const float *X, int N, int D, const float *fn, const float *base, const float *scale,
                       int iters, float norm_eps, float hc_eps, float *post, float *comb, float *collapsed,
                       float *scratch);

/* ld_ref_ds4_hc_pre, with bf16_sinkhorn = 1 the mhc=sinkhorn-bf16
 * variant: the comb iterate rounded to bf16 after the softmax + hc_eps and
 * after every row and every column normalisation (a Sinkhorn kernel whose
 * iterates live in bf16 registers or tensors), the sums and divisions in
 * fp32. */
void ld_ref_ds4_hc_pre_ex(const float *X, int N, int D, const float *fn, const float *base, const float *scale,
                          int iters, float norm_eps, float hc_eps, int bf16_sinkhorn, float *post, float *comb,
                          float *collapsed, float *scratch);

/* The streams after the block: out[k][d] = post[k] * f[d] + sum_j comb[j][k]
 * X[j][d] (j ascending).  out must not alias X. */
void ld_ref_ds4_hc_post(float *out, const float *X, const float *f, const float *post, const float *comb, int N,
                        int D);

/* The final collapse (DeepseekV4HyperHead): pre = sigmoid(fn . (X /
 * rms(X)) * scale + base) + hc_eps, out[d] = sum_j pre[j] X[j][d]; fn
 * [N][N*D], base [N], scale [1]; `scratch` N*D + N floats. */
void ld_ref_ds4_hc_head(float *out, const float *X, int N, int D, const float *fn, const float *base, float scale,
                        float norm_eps, float hc_eps, float *scratch);

/* V4's RoPE of the last `dim` values of each of `n_heads` heads of
 * `head_dim` (pairs (2i, 2i+1) in place, transformers' interleaved
 * rotate_half): a = pos * inv_freq[i] (fp32), c = cos(a) f, s = sin(a) f,
 *   x[2i] = x[2i] c - x[2i+1] s,  x[2i+1] = x[2i+1] c + x[2i] s;
 * inverse = 1 rotates by -s (the de-rotation of the attention output). */
void ld_ref_ds4_rope(float *x, int n_heads, int head_dim, int dim, const float *inv_freq, float attn_factor, int pos,
                     int inverse);

/* ld_ref_ds4_rope, with bf16_table = 1 (rope=bf16) c and s rounded to bf16
 * before they rotate (as ld_ref_ds_rope_ex). */
void ld_ref_ds4_rope_ex(float *x, int n_heads, int head_dim, int dim, const float *inv_freq, float attn_factor,
                        int pos, int inverse, int bf16_table);

/* Shared-KV attention of one token: q [H][hd], keys[i] (i < nk) rows of hd
 * that are the keys and the values, scores over them * scale, the sink
 * logit sinks[h] (NULL: none) in the softmax's denominator:
 *   m = max(scores, sink); p_i = exp(s_i - m) / (sum_i exp(s_i - m) +
 *   exp(sink - m)); out[h] = sum_i p_i keys[i]  (i ascending)
 * `scores` nk floats. */
void ld_ref_ds4_attention(float *out, const float *q, int H, int hd, const float *const *keys, int nk,
                          const float *sinks, float scale, float *scores);

/* A compressor's pooled entry w (before its RMSNorm and RoPE), ratio r,
 * output dim d: kv and gate are the projections of every position, rows of
 * `stride` floats, ape [r][stride] the position bias.
 *   overlap = 0 (HCA): slots j < r: value kv[w r + j][0:d], logit
 *     gate[w r + j][0:d] + ape[j][0:d];
 *   overlap = 1 (CSA, stride 2d): slots j < r: window w-1's first half
 *     (kv[(w-1) r + j][0:d], gate + ape[j][0:d]; absent for w = 0), then
 *     slots r + j: window w's second half (kv[w r + j][d:2d], gate +
 *     ape[j][d:2d]);
 *   out[c] = sum_slots softmax_slots(logit[.][c]) value[.][c]. */
void ld_ref_ds4_compress(float *out, const float *kv, const float *gate, const float *ape, int r, int d,
                         size_t stride, int overlap, int w);

/* Lightning-indexer scores of one query: q [nh][hd], weights w [nh] (the
 * weights_proj output), keys [n][hd]:
 *   score[s] = sum_h (relu(q[h] . keys[s]) * qscale) * (w[h] * wscale) */
void ld_ref_ds4_index_scores(float *score, const float *q, const float *w, const float *keys, int n, int nh, int hd,
                             float qscale, float wscale);

/* The k best of score[0..n) (score descending, NaN last, then index
 * ascending), their indices ascending into idx; returns min(k, n). */
int ld_ref_ds4_topk(int32_t *idx, const float *score, int n, int k);

/* V4's router for one token: logits [E] (the gate's x . W^T), s =
 * sqrt(softplus(logit)) (softplus(x) = x above 20, as torch).  hash (NULL:
 * top-k) a row of K expert ids: the experts; else the top-K of s + bias
 * (bias NULL: none), ties by index ascending.  w = s[e] / (sum + 1e-20) *
 * scale, the sum in the order of `hash` or ascending id.  idx [K] ascending
 * expert id, w [K] matching.  E <= 1024. */
void ld_ref_ds4_route(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *hash, int E,
                      int K, float scale);

/* out[i] = silu(min(g[i], limit)) * clamp(u[i], -limit, limit) */
void ld_ref_ds4_clamped_swiglu(float *out, const float *g, const float *u, float limit, size_t n);

/* DeepSeek-V4's block-scaled weights, as transformers' Fp8Dequantize:
 * out[r][c] = q[r][c] * scale[r / (rows/sr)][c / (cols/sc)] (one fp32
 * product), q FP8 E4M3 [rows][cols] (fp4 = 0) or packed FP4 E2M1
 * [rows][cols/2] (fp4 = 1: byte c/2, low nibble for even c, high for odd
 * c), scale fp32 [sr][sc] with sr | rows and sc | cols (the caller
 * checks).  Items: rows [r0, r1). */
void ld_ref_ds4_dequant(float *out, const uint8_t *q, int fp4, const float *scale, size_t rows, size_t cols,
                        size_t sr, size_t sc, size_t r0, size_t r1);

#endif /* LD_REF_DS4_H */
