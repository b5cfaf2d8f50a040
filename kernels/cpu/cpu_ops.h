/* cpu_ops.h - the fast fp32 CPU kernels: the "cpu" backend's matmul and
 * attention.
 *
 * The reference (ref_ops.h) sums a dot product in index order with one
 * accumulator, which is easy to state but latency-bound: a few GFLOP/s.
 * The kernels here keep the reference's contract (fp32, a fixed reduction
 * order that is a function of the shapes only, each output computed by one
 * call, the same whatever the thread split or the number of tokens in the
 * call) with a different, equally fixed order that SIMD units can run:
 *
 *   hsum8(a)  = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))
 *   fma(a,b,c) = a * b + c rounded once (C's fmaf)
 *
 *   Plain rows (F32, F16, BF16, and Q4_K, Q6_K, block-scaled FP8 / FP4
 *   (LD_KDT_F8B / F4B) converted exactly into fp32 first, the last two by
 *   the vector code too, to the reference's bits): eight lane accumulators
 *   acc[l] = fma(w[k], x[k], acc[l]) for k = 8j + l in order of j; the
 *   K % 8 tail in a ninth, sequential accumulator; out = hsum8(acc) + tail
 *   (+ bias).  (Decode sums a few rows side by side, each the same way.)
 *
 *   Blocks of 32 (Q4_0, Q4_1, Q8_0), weight = d * q (+ m): the integer q
 *   stays exact, so the sum runs in sixteen lanes over a block's two
 *   groups of sixteen: s[j] = 0, then for g = 0, 1
 *   s[j] = fma(q[e], x[e], s[j]) where e = e(g, j) is the element in lane
 *   j of group g; then acc[j] = fma(d, s[j], acc[j]).  For Q8_0
 *   e = 16g + j; for Q4_0 and Q4_1 e = 16 h + 8g + 4 (j % 2) + j / 4 with
 *   h = (j / 2) % 2: nibble j / 2 of the 32-bit half j % 2 of the block's
 *   64-bit word g, which a vector unit gets from one broadcast without
 *   shuffles (the activations are put in that order once per matmul: the
 *   prep step).  Q4_1's offsets use the block sums of x (xs = hsum8 of the
 *   lanes v[l] = ((x[l] + x[8+l]) + x[16+l]) + x[24+l]) in a sequential
 *   accumulator macc = fma(m, xs, macc).
 *   out = (hsum16(acc) + macc) + bias, hsum16(a) = hsum8(a[l] + a[8+l]);
 *   macc = 0 for Q4_0 and Q8_0, bias = 0 when none; plain rows likewise
 *   (hsum8(acc) + tail) + bias.
 *
 * This is algebraically the reference's sum but rounds differently: results
 * agree with ref_ops to a few ulps of the dot product's magnitude, which
 * tests/kernels/cpu/test_cpu_ops.c checks op by op, as llama.cpp's backend tests
 * compare every backend with the CPU one.  Three implementations compute
 * the same arithmetic and give the same bits (the tests check it), so a
 * replay's numbers do not depend on the machine's vector unit: a portable
 * C twin with fmaf (cpu_ops.c), AVX2+FMA+F16C (cpu_avx2.c: eight lanes per
 * register, a block's sixteen in two) and AVX-512F (cpu_avx512.c: a
 * block's sixteen in one, for the blocks).  The best the machine has is
 * used; LD_CPU_SIMD=portable or =avx2 in the environment caps it.
 */
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

/* out[t][n] = x[t] . w[rope_row(n)] (+ bias[n]), t in [0, T), n in
 * [i0, i1): as ld_ref_matmul_ex (same arguments and row order), with the
 * summation order above; `prep` from ld_cpu_matmul_prep on this x;
 * `scratch` holds ld_cpu_matmul_scratch floats. */
void ld_cpu_matmul(float *out, const float *x, const float *prep,
                   const void *w, ld_kdt dt, const void *bias,
                   ld_kdt bias_dt, int T, int K, int N, int rope_hd,
                   float *scratch, size_t i0, size_t i1);

/* Implementation levels (ld_cpu_simd). */
enum { LD_CPU_PORTABLE = 0, LD_CPU_AVX2 = 1, LD_CPU_AVX512 = 2 };

/* ld_cpu_matmul at `level`, capped at what the machine has (for tests:
 * every level gives the same bits). */
void ld_cpu_matmul_at(int level, float *out, const float *x,
                      const float *prep, const void *w, ld_kdt dt,
                      const void *bias, ld_kdt bias_dt, int T, int K, int N,
                      int rope_hd, float *scratch, size_t i0, size_t i1);

/* dst[0..n) = elements [off, off+n) of w (type dt) as fp32, the bits of
 * ld_ref_to_f32, at `level` (capped as above): what ld_cpu_matmul_at
 * converts a weight row with (the block-scaled types LD_KDT_F8B / F4B
 * through the vector code, the others as the reference). */
void ld_cpu_to_f32_at(int level, float *dst, const void *w, ld_kdt dt,
                      size_t off, size_t n);

/* Causal attention as ld_ref_attention (same arguments), its dot products
 * q . k summed as plain rows above, and the output accumulated as
 * o[i] = fma(p_j, v_j[i], o[i]) over positions j in order; the softmax as
 * the reference's (expf, one sequential sum). */
void ld_cpu_attention(float *out, const float *q, const float *kcache,
                      const float *vcache, int n_heads, int n_kv, int hd,
                      int pos0, int window, float scale, float *scores,
                      size_t i0, size_t i1);
void ld_cpu_attention_at(int level, float *out, const float *q,
                         const float *kcache, const float *vcache,
                         int n_heads, int n_kv, int hd, int pos0, int window,
                         float scale, float *scores, size_t i0, size_t i1);

/* The level the kernels above run at on this machine (LD_CPU_*). */
int ld_cpu_simd(void);

#endif /* LD_CPU_OPS_H */
