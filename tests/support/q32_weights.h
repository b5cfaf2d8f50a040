/* q32_weights.h - random Q4_0 / Q4_1 / Q8_0 weights and activations for
 * the integer matmul variants' tests (test_cpu_q8.c, test_cpu_i24.c), and
 * the rope row order the kernels read rows in.  Header-only, static. */
#ifndef LD_TEST_Q32_WEIGHTS_H
#define LD_TEST_Q32_WEIGHTS_H

#include <stdint.h>
#include <stdlib.h>

#include "kernels/ref/ref_ops.h"
#include "tests/support/fixtures.h"

static inline float q32_uniform(void) /* [-1, 1) */
{
    return (float)((double)next_u32() / 2147483648.0 - 1.0);
}

/* an f16 of magnitude in [2^lo, 2^(hi+1)) with a random sign and mantissa */
static inline uint16_t q32_rand_f16(int lo, int hi)
{
    int e = lo + (int)(next_u32() % (uint32_t)(hi - lo + 1)) + 15;
    return (uint16_t)((next_u32() & 1u) << 15 | (unsigned)e << 10 | (next_u32() & 1023u));
}

static inline size_t q32_block_bytes(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 ? 18 : dt == LD_KDT_Q4_1 ? 20 : 34;
}

/* N rows of K of type dt, random bytes with sane scales (malloc'd) */
static inline unsigned char *q32_rand_weights(ld_kdt dt, int N, int K)
{
    size_t bytes = q32_block_bytes(dt), nb = (size_t)N * (size_t)K / 32;
    unsigned char *w = malloc(nb * bytes);
    if (!w) return NULL;
    for (size_t i = 0; i < nb * bytes; i++) w[i] = (unsigned char)next_u32();
    for (size_t b = 0; b < nb; b++) {
        uint16_t d = q32_rand_f16(-9, -5), m = q32_rand_f16(-6, -3);
        unsigned char *p = w + b * bytes;
        p[0] = (unsigned char)d;
        p[1] = (unsigned char)(d >> 8);
        if (dt == LD_KDT_Q4_1) {
            p[2] = (unsigned char)m;
            p[3] = (unsigned char)(m >> 8);
        }
    }
    return w;
}

/* the weight row output n reads in the rope row order of rope_hd rows a
 * head (0: none) */
static inline size_t q32_src_row(int n, int rope_hd)
{
    if (!rope_hd) return (size_t)n;
    int h = n / rope_hd, r = n % rope_hd;
    return (size_t)(h * rope_hd + 2 * (r % (rope_hd / 2)) + r / (rope_hd / 2));
}

#endif /* LD_TEST_Q32_WEIGHTS_H */
