/* cpu_i24_portable.c - the portable twin of the i24 matmul's output
 * (cpu_i24.h): one output row of one token, the reference the AVX-512 level
 * matches bit for bit.  It reads the rows where they are, not their packed
 * copy: the tests' comparison of the levels checks the packing too. */
#include <math.h>
#include <stdint.h>

#include "cpu_internal.h"

#define QB LD_CPU_QB

/* the block's P of cpu_i24.h: its three digit dot products, exact, then
 * combined (one rounding for Q4_0 / Q4_1) */
static float block_dot(const unsigned char *qs, const int8_t *dig, const int32_t *dsum, ld_kdt dt)
{
    int32_t p[3];
    for (int k = 0; k < 3; k++) {
        const int8_t *c = dig + k * QB;
        int32_t s = 0;
        if (dt == LD_KDT_Q8_0)
            for (int e = 0; e < QB; e++) s += (int8_t)qs[e] * c[e];
        else
            for (int e = 0; e < QB / 2; e++) s += (qs[e] & 15) * c[e] + (qs[e] >> 4) * c[e + QB / 2];
        p[k] = dt == LD_KDT_Q4_0 ? s - 8 * dsum[k] : s;
    }
    return fmaf((float)p[2], 65536.0f, (float)(256 * p[1] + p[0]));
}

void ld_cpu_i24_out_portable(const ld_cpu_i24mm *m, size_t n, int t)
{
    int nb = m->K / QB;
    size_t bytes = ld_cpu_q32_bytes(m->dt), head = ld_cpu_q32_head(m->dt), tb = (size_t)t * (size_t)nb;
    const unsigned char *wr = (const unsigned char *)m->w + ld_cpu_src_row(n, m->rope_hd) * m->row_bytes;
    float acc = 0.0f, macc = 0.0f;
    for (int b = 0; b < nb; b++) {
        const unsigned char *blk = wr + (size_t)b * bytes;
        size_t i = tb + (size_t)b;
        float d = ld_ref_f16_to_f32(ld_cpu_le16(blk));
        float P = block_dot(blk + head, m->dig + 3 * QB * i, m->dsum + 3 * i, m->dt);
        acc = fmaf(d * m->scale[i], P, acc);
        if (m->dt == LD_KDT_Q4_1) macc = fmaf(ld_ref_f16_to_f32(ld_cpu_le16(blk + 2)), m->xs[i], macc);
    }
    float bias = 0.0f;
    if (m->bias) ld_ref_to_f32(&bias, m->bias, m->bias_dt, n, 1);
    m->out[(size_t)t * (size_t)m->N + n] = (acc + macc) + bias;
}
