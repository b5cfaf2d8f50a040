/* cpu_ops.h - the fast fp32 CPU kernels: the "cpu" backend's matmul and
 * attention.
 *
 * The design: docs/engine.md, "The fast CPU kernels: summation order and SIMD". */
#ifndef LD_CPU_OPS_H
#define LD_CPU_OPS_H

#include <stddef.h>

#include "kernels/ref/ref_ops.h"

/* Floats of per-thread scratch ld_cpu_matmul needs for T rows of K. */
size_t ld_cpu_matmul_scratch(ld_kdt dt, int T, int K);

/* The prep step: once per matmul (not per thread), x [T][K] rearranged for
 * weights of type dt into `prep`, ld_cpu_matmul_prep_size floats (0: the
 * type needs none, and prep may be NULL). */
size_t ld_cpu_matmul_prep_size(ld_kdt dt, int T, int K);
void ld_cpu_matmul_prep(float *prep, const float *x, ld_kdt dt, int T, int K);
/* the same with a level's code (the same floats at every level) */
void ld_cpu_matmul_prep_at(int level, float *prep, const float *x, ld_kdt dt, int T, int K);

/* out[t][n] = x[t] . w[rope_row(n)] (+ bias[n]), t in [0, T), n in
 * [i0, i1): as ld_ref_matmul_ex (same arguments and row order), with the
 * summation order above; `prep` from ld_cpu_matmul_prep on this x;
 * `scratch` holds ld_cpu_matmul_scratch floats; `packed` is NULL or w's
 * packed copy (ld_cpu_fast_pack: the same bits, read faster). */
void ld_cpu_matmul(float *out, const float *x, const float *prep,
                   const void *w, const void *packed, ld_kdt dt,
                   const void *bias, ld_kdt bias_dt, int T, int K, int N,
                   int rope_hd, float *scratch, size_t i0, size_t i1);

/* The packed copy of a Q4_0 / Q4_1 / Q8_0 weight [N][K] (rows in the
 * order of rope_hd as ld_ref_matmul_ex's): its rows sixteen to a group,
 * each group's blocks one after another with the sixteen rows' scales
 * together (cpu_internal.h), so that the AVX-512 kernels read a group as
 * one stream and no scale by a gather.  The rows past the last whole group
 * are not in it: the kernels read them (and the other levels all rows)
 * from w.  Size in bytes, 0 where there is none (another type, N < 16). */
size_t ld_cpu_fast_packed_size(ld_kdt dt, int K, int N);
void ld_cpu_fast_pack(void *dst, const void *w, ld_kdt dt, int K, int N, int rope_hd);
/* Whether this machine's kernels read a packed copy of dt (AVX-512): where
 * not, making one would only cost memory. */
int ld_cpu_fast_reads_packed(ld_kdt dt);

/* Rows a decode step (T = 1) of the block types takes in one pass at most
 * (the AVX-512 kernels: sixteen; AVX2 fewer): a range of whole passes
 * wastes none. */
#define LD_CPU_DECODE_ROWS 16

/* Implementation levels (ld_cpu_simd). */
enum { LD_CPU_PORTABLE = 0, LD_CPU_AVX2 = 1, LD_CPU_AVX512 = 2 };

/* ld_cpu_matmul at `level`, capped at what the machine has (for tests:
 * every level gives the same bits). */
void ld_cpu_matmul_at(int level, float *out, const float *x,
                      const float *prep, const void *w, const void *packed,
                      ld_kdt dt, const void *bias, ld_kdt bias_dt, int T,
                      int K, int N, int rope_hd, float *scratch, size_t i0,
                      size_t i1);

/* dst[0..n) = elements [off, off+n) of w (type dt) as fp32, the bits of
 * ld_ref_to_f32, at `level` (capped as above): what ld_cpu_matmul_at
 * converts a weight row with (the block-scaled types LD_KDT_F8B / F4B
 * through the vector code, the others as the reference). */
void ld_cpu_to_f32_at(int level, float *dst, const void *w, ld_kdt dt,
                      size_t off, size_t n);

/* Causal attention as ld_ref_attention (same arguments, but scores: room
 * for ld_cpu_attention_scratch floats), its dot products q . k summed as
 * plain rows above, and the output accumulated as o[i] = fma(p_j, v_j[i],
 * o[i]) over positions j in order; the softmax as the reference's (expf,
 * one sequential sum).  With AVX2 and AVX-512 a token's heads in the range
 * go together (with AVX-512 the scores of a kv head's heads in one pass),
 * and a prompt's whole tokens four at a time, the positions in blocks: each
 * block's k rows (then its v rows) read once for all of them, in the
 * cache's order (the same bits). */
void ld_cpu_attention(float *out, const float *q, const float *kcache,
                      const float *vcache, int n_heads, int n_kv, int hd,
                      int pos0, int window, float scale, float *scores,
                      size_t i0, size_t i1);
void ld_cpu_attention_at(int level, float *out, const float *q,
                         const float *kcache, const float *vcache,
                         int n_heads, int n_kv, int hd, int pos0, int window,
                         float scale, float *scores, size_t i0, size_t i1);
/* libm's expf with its bits, many at a time (cpu_expf.c): v[j] =
 * expf(v[j] - mx) for j in [0, n) by the vector code of `level` (capped
 * at what the machine has; libm's calls at LD_CPU_PORTABLE).
 * ld_cpu_expf_level(level): the highest level up to `level` whose vector
 * code gives the bits of the libm at hand (compared once, on floats where
 * other builds of expf round otherwise); what the softmax uses. */
int ld_cpu_expf_level(int level);
void ld_cpu_exp_shifted_at(int level, float *v, int n, float mx);

/* out[i] = g / (1 + expf(-g)) * up[i], g = gate[i], for i in [i0, i1):
 * ld_ref_swiglu with its bits, the exponentials by ld_cpu_exp_shifted_at
 * (out may be gate); at the machine's level, or at most `level`. */
void ld_cpu_swiglu(float *out, const float *gate, const float *up, size_t i0, size_t i1);
void ld_cpu_swiglu_at(int level, float *out, const float *gate, const float *up, size_t i0, size_t i1);

/* The attention's softmax of a row of n scores (ld_attn_softmax, with its
 * bits) at a level: with AVX2 the maximum and the divisions eight at a
 * time, the exponentials by ld_cpu_exp_shifted_at; and of `count` rows at
 * once (rows[r] of n[r] scores), each with the same bits, with AVX2 four
 * rows' sums side by side. */
void ld_cpu_attn_softmax_at(int level, float *sc, int n);
void ld_cpu_attn_softmax_rows_at(int level, float *const *rows, const int *n, int count);
/* The floats of ld_cpu_attention's scores for positions pos0 + T: a
 * row of them for each head it takes together (at most twelve; a prompt's
 * four tokens' where a token has at most twelve). */
size_t ld_cpu_attention_scratch(int n_heads, int positions);
/* The heads ld_cpu_attention takes together on this machine, for head
 * size hd: a token's (n_heads) with AVX2 or AVX-512 (a range that splits
 * them reads some of their k and v rows once more), else 1. */
int ld_cpu_attention_heads(int n_heads, int n_kv, int hd);
/* The tokens of a prompt that it takes together where a range holds them
 * whole (their heads at most twelve: each block of k and v rows read once
 * for all of them), else 1: a prompt's pieces are best this many tokens'
 * heads. */
int ld_cpu_attention_tokens(int n_heads, int n_kv, int hd);

/* The level the kernels above run at on this machine (LD_CPU_*). */
int ld_cpu_simd(void);

#endif /* LD_CPU_OPS_H */
