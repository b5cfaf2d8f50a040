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
 *     xs = the block's sum, in the fast kernels' order (cpu_ops.h);
 *     qsum = the sum of the q_e (an integer).
 *   a weight row's dot product: its blocks in order, a block's integer
 *   weights v_e (q - 8 for Q4_0, q for Q4_1, the int8 for Q8_0) and scale
 *   d (and Q4_1's offset m):
 *     p = sum of v_e q_e over the block's 32 elements, in integers (exact,
 *     and exact as a float: |p| <= 32 * 128 * 127 < 2^24);
 *     s = d * dx (fp32); acc = fma(s, p, acc);
 *     Q4_1: macc = fma(m, xs, macc).
 *   out = (acc + macc) + bias.
 *
 * The packed layout (ld_cpu_q8_pack): what the SIMD level reads.  Rows in
 * groups of eight (the rope row order applied), a group's blocks in order,
 * a block of the group the eight rows' d (f16), then Q4_1's eight m, then
 * the integers in chunks of 32 bytes: chunk c holds each row's four bytes
 * 4c .. 4c+3 of its block (row r at bytes 4r .. 4r+3), so that a 32-bit
 * lane is a row: Q4 blocks have four chunks (a byte: elements j and j+16),
 * Q8_0 blocks eight.  The same bytes as the rows', moved: a matrix's packed
 * size is its size (rows past the last group of eight are not packed, and
 * are read where they are).
 *
 * Levels: the portable C one (reads the rows where they are) and AVX2 (with
 * FMA and F16C; reads the packed copy: eight rows a pass, a chunk's bytes
 * against the block's activations four at a time by vpmaddubsw, every
 * pass's p in the lanes of one register; a range of rows as four streams,
 * a group of each quarter of the range in turn, which one core reads
 * faster than one stream; without a packed copy it packs each group as it
 * goes, slower).  Neither the streams nor the thread split change a row's
 * arithmetic. */
#ifndef LD_CPU_Q8_H
#define LD_CPU_Q8_H

#include <stddef.h>

#include "kernels/ref/ref_ops.h"

/* The packed layout's rows a group: the 32-bit lanes of a 256-bit
 * register. */
#define LD_CPU_Q8_GROUP_ROWS 8

/* Whether the variant has a kernel for weights of type dt (else the
 * caller runs the fast matmul of cpu_ops.h). */
int ld_cpu_q8_supports(ld_kdt dt);

/* Floats of `prep` for T tokens of K (a multiple of 32) activations, and
 * the prep step itself: x [T][K] quantized as above, once per matmul. */
size_t ld_cpu_q8_prep_size(int T, int K);
void ld_cpu_q8_prep(float *prep, const float *x, int T, int K);
void ld_cpu_q8_prep_at(int level, float *prep, const float *x, int T, int K); /* level as below */

/* Bytes of the packed layout of N rows of K of type dt (one that
 * ld_cpu_q8_supports): those of the whole groups of eight rows, 0 for
 * fewer than eight.  ld_cpu_q8_pack writes it to dst from the rows at w
 * (rope_hd as the matmul's). */
size_t ld_cpu_q8_packed_size(ld_kdt dt, int K, int N);
void ld_cpu_q8_pack(void *dst, const void *w, ld_kdt dt, int K, int N, int rope_hd);
void ld_cpu_q8_pack_at(int level, void *dst, const void *w, ld_kdt dt, int K, int N, int rope_hd); /* the same bytes */

/* out[t][n] = x[t] . w[rope_row(n)] (+ bias[n]) for t in [0, T), n in
 * [i0, i1), as ld_ref_matmul_ex's arguments, from x's prep; dt one that
 * ld_cpu_q8_supports; packed: w's packed layout, or NULL (packed a group
 * at a time as the matmul runs).  _at: at `level` (LD_CPU_* of cpu_ops.h), capped at what the
 * machine has; every level gives the same bits. */
void ld_cpu_matmul_q8(float *out, const float *prep, const void *w, const void *packed, ld_kdt dt, const void *bias,
                      ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1);
void ld_cpu_matmul_q8_at(int level, float *out, const float *prep, const void *w, const void *packed, ld_kdt dt,
                         const void *bias, ld_kdt bias_dt, int T, int K, int N, int rope_hd, size_t i0, size_t i1);

/* The level ld_cpu_q8_prep runs at on this machine (AVX-512 where it has
 * AVX-512 F, BW, VL and VNNI); ld_cpu_matmul_q8's is at most AVX2. */
int ld_cpu_q8_simd(void);

/* The sum of 8 lanes, pairwise in the order every level reduces in (the
 * prep's block sums). */
static inline float ld_cpu_q8_hsum8(const float *a)
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

#endif /* LD_CPU_Q8_H */
