/* cpu_q8_portable.c - the portable twin of the q8 matmul's output (cpu_q8.h):
 * one output row of one token, the reference every SIMD level matches bit for
 * bit.  It reads the rows where they are, not their packed copy: the
 * tests' comparison of the levels checks the packing too. */
#include "cpu_q8.h"

#include <math.h>
#include <stdint.h>

#include "cpu_internal.h"
#include "cpu_ops.h"

#define QB LD_CPU_QB

/* a block's integer weights (element order), d and m (0 but for Q4_1) */
static void block_ints(const unsigned char *b, ld_kdt dt, int v[QB], float *d, float *m)
{
    *d = ld_ref_f16_to_f32(ld_cpu_le16(b));
    *m = 0.0f;
    if (dt == LD_KDT_Q8_0) {
        for (int e = 0; e < QB; e++) v[e] = (int8_t)b[2 + e];
        return;
    }
    const unsigned char *qs = b + ld_cpu_q32_head(dt);
    int off = dt == LD_KDT_Q4_1 ? 0 : 8;
    if (dt == LD_KDT_Q4_1) *m = ld_ref_f16_to_f32(ld_cpu_le16(b + 2));
    for (int e = 0; e < 16; e++) {
        v[e] = (qs[e] & 15) - off;
        v[e + 16] = (qs[e] >> 4) - off;
    }
}

void ld_cpu_q8_out_portable(const ld_cpu_q8mm *m, size_t n, int t)
{
    int nb = m->K / QB;
    size_t bytes = ld_cpu_q32_bytes(m->dt);
    const unsigned char *wr = (const unsigned char *)m->w + ld_cpu_src_row(n, m->rope_hd) * m->row_bytes;
    const int8_t *xq = m->xq + (size_t)t * (size_t)m->K;
    const float *xd = m->xd + (size_t)t * (size_t)nb, *xs = m->xs + (size_t)t * (size_t)nb;
    float acc = 0.0f, macc = 0.0f;
    for (int b = 0; b < nb; b++) {
        int v[QB];
        float d, mn;
        block_ints(wr + (size_t)b * bytes, m->dt, v, &d, &mn);
        int32_t p = 0;
        for (int e = 0; e < QB; e++) p += v[e] * xq[(size_t)b * QB + (size_t)e];
        acc = fmaf(d * xd[b], (float)p, acc);
        if (m->dt == LD_KDT_Q4_1) macc = fmaf(mn, xs[b], macc);
    }
    float bias = 0.0f;
    if (m->bias) ld_ref_to_f32(&bias, m->bias, m->bias_dt, n, 1);
    m->out[(size_t)t * (size_t)m->N + n] = (acc + macc) + bias;
}
