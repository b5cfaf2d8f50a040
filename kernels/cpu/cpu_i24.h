/* cpu_i24.h - the matmul of the "i24" variant (`--kernels matmul=i24`):
 * each block of 32 activations held as 24-bit integers under a power-of-two
 * scale (three signed bytes a value), and the Q4_0 / Q4_1 / Q8_0 weights' dot
 * products with them computed exactly in integers, as vpdpbusd computes
 * them.  Not the fast kernels' contract (cpu_ops.h), nor q8's (cpu_q8.h):
 * an activation moves by at most 2^-23 of its block's largest |x| (x
 * itself is a float: its rounding is about 2^-24 of |x|), and a block's
 * 32 products and their sum are exact where fp32 rounds each, so a row's
 * error against exact arithmetic is about fp32's or below (the tests hold
 * it to a bound against the reference); one fixed arithmetic, the same bits
 * at every level and for any thread split.  Q4_0, Q4_1 and Q8_0; the other
 * types run the fast kernels.
 *
 *   prep, per token and block of 32 elements x_e:
 *     amax = max |x_e|.  A block with a NaN or infinite x: scale NaN, every
 *     digit 0.  amax 0: scale 1, every digit 0.  Else E = e - 23 for
 *     amax = f 2^e, f in [0.5, 1) (frexpf), and E + 1 where amax 2^-E is
 *     over 8355711 (so that three digits hold it); X_e = x_e 2^-E rounded
 *     to the nearest integer, ties to even (|X_e| <= 8355711);
 *     its digits in base 256, each in [-128, 127]: X_e = 65536 c2 + 256 c1
 *     + c0; scale = 2^E as a float (ldexpf: 0 below 2^-149, so a block
 *     whose amax is under about 2^-126 counts for nothing);
 *     xs = (float)(sum of the X_e) * scale (Q4_1's offsets);
 *     s_k = the sum of the c_k (Q4_0's -8).
 *   a weight row's dot product: its blocks in order, a block's integers
 *   q_e (Q4's nibbles 0..15, Q8_0's int8), scale d (and Q4_1's offset m):
 *     p_k = sum of q_e c_k,e over the block, in integers, minus 8 s_k for
 *     Q4_0 (exact);
 *     P = fmaf((float)p_2, 65536, (float)(256 p_1 + p_0)) (for Q4 one
 *     rounding: both operands are exact floats, |256 p_1 + p_0| < 2^24;
 *     for Q8_0 the second conversion may round too, at most 2^-24 of a
 *     part under 2^-7 of P's size);
 *     acc = fmaf(d * scale, P, acc);
 *     Q4_1: macc = fmaf(m, xs, macc).
 *   out = (acc + macc) + bias.
 *
 * The packed layout (ld_cpu_i24_pack): q8's with sixteen rows a group, so
 * that a 32-bit lane of a 512-bit register is a row.  Rows in groups of
 * sixteen (the rope row order applied), a group's blocks in order, a block
 * of the group the sixteen rows' d (f16), then Q4_1's sixteen m, then the
 * integers in chunks of 64 bytes (four for Q4, eight for Q8_0): chunk c
 * holds each row's bytes 4c .. 4c+3 of its block (row r at bytes 4r ..
 * 4r+3; a Q4 byte: elements j and j+16).  A matrix's packed size is its size (rows past the last group of
 * sixteen are not packed, and are read where they are).
 *
 * Levels: the portable C one (reads the rows where they are; also the
 * prep), AVX-512 with VNNI (reads the packed copy: sixteen rows a pass, a
 * chunk's integers against four activations' digits by vpdpbusd; a range of
 * rows as four streams, a group of each quarter of the range in turn) and
 * AVX2 (the same from the packed copy, each group as two halves of eight
 * rows, by vpmaddubsw as q8's AVX2 kernel).
 */
#ifndef LD_CPU_I24_H
#define LD_CPU_I24_H

#include <stddef.h>

#include "kernels/ref/ref_ops.h"

/* The packed layout's rows a group: the 32-bit lanes of a 512-bit
 * register. */
#define LD_CPU_I24_GROUP_ROWS 16

/* Whether the variant has a kernel for weights of type dt (Q4_0, Q4_1,
 * Q8_0; else the caller runs the fast matmul of cpu_ops.h). */
int ld_cpu_i24_supports(ld_kdt dt);

/* Floats of `prep` for T tokens of K (a multiple of 32) activations, and
 * the prep step itself: x [T][K] as above, once per matmul. */
size_t ld_cpu_i24_prep_size(int T, int K);
void ld_cpu_i24_prep(float *prep, const float *x, int T, int K);
void ld_cpu_i24_prep_at(int level, float *prep, const float *x, int T, int K); /* level as below */

/* Bytes of the packed layout of N rows of K of type dt (one that
 * ld_cpu_i24_supports): those of the whole groups of sixteen rows, 0 for
 * fewer.  ld_cpu_i24_pack writes it to dst from the rows at w (rope_hd as
 * the matmul's). */
size_t ld_cpu_i24_packed_size(ld_kdt dt, int K, int N);
void ld_cpu_i24_pack(void *dst, const void *w, ld_kdt dt, int K, int N, int rope_hd);

/* out[t][n] = x[t] . w[rope_row(n)] (+ bias[n]) for t in [0, T), n in
 * [i0, i1), as ld_ref_matmul_ex's arguments, from x's prep; dt one that
 * ld_cpu_i24_supports; packed: w's packed layout, or NULL (the portable
 * twin then).  _at: at `level` (LD_CPU_* of cpu_ops.h), capped at what
 * the machine has; every level gives the same bits. */
void ld_cpu_matmul_i24(float *out, const float *prep, const void *w, const void *packed, ld_kdt dt, const void *bias,
                       ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1);
void ld_cpu_matmul_i24_at(int level, float *out, const float *prep, const void *w, const void *packed, ld_kdt dt,
                          const void *bias, ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1);

/* The level the variant runs at on this machine: LD_CPU_AVX512 where it
 * has AVX-512 F, BW, VL and VNNI, LD_CPU_AVX2 where it has AVX2, FMA and
 * F16C, else LD_CPU_PORTABLE. */
int ld_cpu_i24_simd(void);

#endif /* LD_CPU_I24_H */
