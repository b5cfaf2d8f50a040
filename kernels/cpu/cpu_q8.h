/* cpu_q8.h - the matmul of the "q8" variant (`--kernels matmul=q8`): the
 * activations quantized to 8-bit integers per block of 32 once per matmul,
 * each Q4_0 / Q4_1 / Q8_0 weight block dotted with them in integers, as
 * llama.cpp's CPU backend does (its Q8_0 / Q8_1 activations; the scales
 * here are fp32, not f16).  Not the fast kernels' contract (cpu_ops.h): the
 * quantization moves a result by up to about 1/254 of a block's largest
 * |x| times the sum of its |w| (the tests hold it to that bound against
 * the reference), but one fixed arithmetic, the same bits at every level
 * and for any thread split or token count:
 *
 *   prep, per token and block of 32 elements x_e of x:
 *     amax = max |x_e|; dx = amax / 127 (fp32); q_e = 0 when amax is 0,
 *     else roundf(x_e * (127 / amax)) (|q_e| <= 127);
 *     xs = the block's sum, in the fast kernels' order (cpu_ops.h).
 *   a weight row's dot product: its blocks in order, a block's integer
 *   weights v_e (q - 8 for Q4_0, q for Q4_1, the int8 for Q8_0) and scale
 *   d (and Q4_1's offset m):
 *     p_l = sum of v_e q_e over e = 4l .. 4l+3, in integers (exact);
 *     s = d * dx (fp32); acc[l] = fma(s, p_l, acc[l]) for l = 0..7;
 *     Q4_1: macc = fma(m, xs, macc).
 *   out = (hsum8(acc) + macc) + bias, hsum8 as cpu_ops.h's.
 *
 * Levels: the portable C one, AVX2 (with FMA and F16C: a block's 32
 * products by vpmaddubsw and vpmaddwd) and AVX-512 (F, BW, VL and VNNI: two
 * rows' blocks, 64 products, in one vpdpbusd). */
#ifndef LD_CPU_Q8_H
#define LD_CPU_Q8_H

#include <stddef.h>

#include "kernels/ref/ref_ops.h"

/* Whether the variant has a kernel for weights of type dt (else the
 * caller runs the fast matmul of cpu_ops.h). */
int ld_cpu_q8_supports(ld_kdt dt);

/* Floats of `prep` for T tokens of K (a multiple of 32) activations, and
 * the prep step itself: x [T][K] quantized as above, once per matmul. */
size_t ld_cpu_q8_prep_size(int T, int K);
void ld_cpu_q8_prep(float *prep, const float *x, int T, int K);
void ld_cpu_q8_prep_at(int level, float *prep, const float *x, int T, int K); /* level as below */

/* out[t][n] = x[t] . w[rope_row(n)] (+ bias[n]) for t in [0, T), n in
 * [i0, i1), as ld_ref_matmul_ex's arguments, from x's prep; dt one that
 * ld_cpu_q8_supports.  _at: at `level` (LD_CPU_* of cpu_ops.h), capped
 * at what the machine has; every level gives the same bits. */
void ld_cpu_matmul_q8(float *out, const float *prep, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                      int T, int K, int N, int rope_hd, size_t i0, size_t i1);
void ld_cpu_matmul_q8_at(int level, float *out, const float *prep, const void *w, ld_kdt dt, const void *bias,
                         ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1);

/* The level ld_cpu_matmul_q8 runs at on this machine. */
int ld_cpu_q8_simd(void);

/* The sum of 8 lanes, pairwise in the order every level reduces in (the
 * prep's block sums and the twin's accumulators). */
static inline float ld_cpu_q8_hsum8(const float *a)
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

#endif /* LD_CPU_Q8_H */
