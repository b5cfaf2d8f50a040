/* cpu_internal.h - what the fast CPU kernels share (cpu_ops.c, the
 * portable twin and the dispatch; cpu_avx2.c; cpu_avx512.c): the block
 * layout, the lane order of cpu_ops.h, and the per-instruction-set entry
 * points.  Not for use outside kernels/. */
#ifndef LD_CPU_INTERNAL_H
#define LD_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ref_ops.h"

#define LD_CPU_QB 32  /* elements per block of Q4_0 / Q4_1 / Q8_0 */
#define LD_CPU_TILE 4 /* tokens per pass over a weight row */

/* One matmul as the kernels see it. */
typedef struct ld_cpu_mm {
    float *out;        /* [T][N] */
    const float *x;    /* [T][K], in element order */
    const float *xq;   /* [T][K] in lane order (cpu_ops.h) for the blocks */
    const float *xs;   /* Q4_1: [T][K/32] block sums of x; else NULL */
    const void *w;
    ld_kdt dt;
    const void *bias;  /* NULL: none */
    ld_kdt bias_dt;
    int T, K, N, rope_hd;
    size_t row_bytes;  /* bytes of a weight row of blocks */
} ld_cpu_mm;

static inline int ld_cpu_is_q32(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 || dt == LD_KDT_Q4_1 || dt == LD_KDT_Q8_0;
}

static inline size_t ld_cpu_q32_bytes(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 ? 18 : dt == LD_KDT_Q4_1 ? 20 : 34;
}

static inline uint16_t ld_cpu_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

/* the weight row holding output n (see ld_ref_matmul_ex) */
static inline size_t ld_cpu_src_row(size_t n, int rope_hd)
{
    if (rope_hd <= 0) return n;
    size_t hd = (size_t)rope_hd, h = n / hd, r = n % hd;
    return h * hd + 2 * (r % (hd / 2)) + r / (hd / 2);
}

/* bias[n] as fp32, 0 when none */
float ld_cpu_bias(const ld_cpu_mm *m, size_t n);

/* Outputs [i0, i1) of a Q4_0 / Q4_1 / Q8_0 matmul (all T tokens). */
void ld_cpu_q32_rows_avx2(const ld_cpu_mm *m, size_t i0, size_t i1);
void ld_cpu_q32_rows_avx512(const ld_cpu_mm *m, size_t i0, size_t i1);

/* Tokens [t0, t0+tn) (tn <= LD_CPU_TILE) of output n from the fp32 row wr. */
void ld_cpu_plain_tile_avx2(const ld_cpu_mm *m, const float *wr, int t0, int tn, size_t n, float bias);

/* The plain dot product and o += p v of cpu_ops.h. */
float ld_cpu_dot_avx2(const float *a, const float *b, int n);
void ld_cpu_axpy_avx2(float *o, float p, const float *v, int n);

#endif /* LD_CPU_INTERNAL_H */
