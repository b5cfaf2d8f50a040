/* ref_ops.h - the plain-C fp32 reference kernels.
 *
 * Leaves: arrays in, arrays out, no engine headers.  Every kernel computes
 * a half-open range of independent output items [i0, i1) (rows, heads...),
 * so a caller may split the range over threads; each output element is
 * computed by one call with the same loop in the same order whatever the
 * split, so results are bitwise identical for any number of threads.
 * Reductions run in index order with one fp32 accumulator.  Nothing depends
 * on how many tokens are processed together: a token's row is computed the
 * same way in a prefill, a chunk or alone.
 *
 * Weights come in a storage type (ld_kdt) and are converted to fp32 per use
 * (bf16 and f16 -> f32 are exact), so results equal those of an fp32 copy.
 */
#ifndef LD_REF_OPS_H
#define LD_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ref_dtype.h"

/* Storage types.  The block types (ref_quant.h) hold rows that are a whole
 * number of blocks; offsets and counts passed for them (ld_ref_to_f32, the
 * K of ld_ref_matmul) must be multiples of the block, which the caller
 * checks.  They are dequantized exactly, one row at a time. */
typedef enum ld_kdt {
    LD_KDT_F32 = 0, LD_KDT_F16 = 1, LD_KDT_BF16 = 2,
    LD_KDT_Q4_0, LD_KDT_Q4_1, LD_KDT_Q8_0, LD_KDT_Q4_K, LD_KDT_Q6_K,
    LD_KDT_F8B,  /* block-scaled FP8 E4M3: the data is an ld_f8b (below) */
    LD_KDT_F4B   /* block-scaled packed FP4 E2M1: the data is an ld_f8b (below) */
} ld_kdt;

/* A block-scaled FP8 E4M3 matrix (the `weight_scale_inv` checkpoints of
 * DeepSeek-V3, Qwen3-FP8...): element [r][c] = e4m3(q[r][c]) *
 * scale[r / br][c / bc], one fp32 product (exact as their weight_dequant),
 * scale [ceil(rows / br)][ceil(cols / bc)].  With dt = LD_KDT_F8B the
 * kernels take a pointer to this as the weight's data; offsets count
 * elements of the matrix; rows are converted one at a time.
 * With dt = LD_KDT_F4B the same struct holds DeepSeek-V4's FP4 experts:
 * q [rows][cols / 2] bytes, two E2M1 codes a byte, the low nibble first
 * (cols even), element [r][c] = e2m1(code) * scale[r / br][c / bc]. */
typedef struct ld_f8b {
    const uint8_t *q;
    const float *scale;
    int64_t rows, cols;
    int br, bc;
} ld_f8b;

/* 1 for the block types (LD_KDT_Q*) */
int ld_ref_kdt_is_block(ld_kdt dt);

/* 1 for the types whose data is an ld_f8b (LD_KDT_F8B, LD_KDT_F4B) */
int ld_ref_kdt_is_scaled(ld_kdt dt);

/* dst[0..n) = src[off .. off+n) of type dt, as fp32 */
void ld_ref_to_f32(float *dst, const void *src, ld_kdt dt, size_t off, size_t n);

/* out[t][0..dim) = table[tokens[t]] for t in [i0, i1); tokens < rows of the
 * table are the caller's to check */
void ld_ref_embed(float *out, const void *table, ld_kdt dt, int dim,
                  const int32_t *tokens, size_t i0, size_t i1);

/* out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, rows r in [i0, i1) of dim */
void ld_ref_rmsnorm(float *out, const float *x, const void *w, ld_kdt dt,
                    int dim, float eps, size_t i0, size_t i1);

/* out[t][n] = sum_k x[t][k] * w[n][k] (+ bias[n]) for t in [0, T) and the
 * output columns n in [i0, i1); w is [N][K]; `row` is K floats of scratch */
void ld_ref_matmul(float *out, const float *x, const void *w, ld_kdt dt,
                   const void *bias, ld_kdt bias_dt, int T, int K, int N,
                   float *row, size_t i0, size_t i1);

/* ld_ref_matmul where output column n reads weight row rope_row(n): with
 * heads of `rope_hd` rows, the row h*hd + j*hd/2 + i (j in {0, 1}) of the
 * HF order is row h*hd + 2i + j of `w`, the order llama.cpp's GGUF
 * conversion gives Llama's q/k projections (pairs adjacent for GGML's
 * rope).  rope_hd = 0 reads row n (ld_ref_matmul).  `bias` is indexed by n
 * (HF order). */
void ld_ref_matmul_ex(float *out, const float *x, const void *w, ld_kdt dt,
                      const void *bias, ld_kdt bias_dt, int T, int K, int N,
                      int rope_hd, float *row, size_t i0, size_t i1);

/* RoPE, HF rotate_half style: for each head of row t (position pos0 + t),
 * pairs (i, i + head_dim/2) rotate by (pos * inv_freq[i]); x is
 * [T][n_heads * head_dim], work items are rows t in [i0, i1) */
void ld_ref_rope(float *x, int n_heads, int head_dim, const float *inv_freq,
                 int pos0, size_t i0, size_t i1);

/* Causal attention of T query rows (positions pos0..pos0+T-1) against a
 * KV cache holding positions 0..pos0+T-1: q [T][n_heads*hd], caches
 * [positions][n_kv*hd], out [T][n_heads*hd].  Query head h reads kv head
 * h / (n_heads / n_kv).  window > 0 restricts each query to the last
 * `window` positions (itself included).  Work items are (t, h) pairs,
 * index t * n_heads + h, in [i0, i1); `scores` holds pos0 + T floats. */
void ld_ref_attention(float *out, const float *q, const float *kcache,
                      const float *vcache, int n_heads, int n_kv, int hd,
                      int pos0, int window, float scale, float *scores,
                      size_t i0, size_t i1);

/* One head's scores sc[0..n) made its weights, in place: the max, the
 * exponentials of sc[j] - max and their sum in index order, each divided
 * by the sum (the reference's softmax; the fast attention shares it). */
void ld_attn_softmax(float *sc, int n);

/* ld_ref_attention with its two inner loops given: dot(q, k, hd) for the
 * scores (the reference: one accumulator in index order) and
 * axpy(o, p, v, hd) for o += p * v (the reference: o[i] += p * v[i], two
 * roundings); the fast kernels (cpu_ops.h) pass theirs where they take
 * a head at a time. */
typedef float (*ld_dot_fn)(const float *a, const float *b, int n);
typedef void (*ld_axpy_fn)(float *o, float p, const float *v, int n);
void ld_attention_with(ld_dot_fn dot, ld_axpy_fn axpy, float *out,
                       const float *q, const float *kcache,
                       const float *vcache, int n_heads, int n_kv, int hd,
                       int pos0, int window, float scale, float *scores,
                       size_t i0, size_t i1);

/* out[i] = silu(gate[i]) * up[i], i in [i0, i1) */
void ld_ref_swiglu(float *out, const float *gate, const float *up, size_t i0,
                   size_t i1);

/* x[i] += y[i], i in [i0, i1) */
void ld_ref_add(float *x, const float *y, size_t i0, size_t i1);

/* out[r] = softmax(x[r]) over n columns, rows r in [i0, i1) */
void ld_ref_softmax(float *out, const float *x, int n, size_t i0, size_t i1);

#endif /* LD_REF_OPS_H */
