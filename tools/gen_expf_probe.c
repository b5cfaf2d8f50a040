/* gen_expf_probe.c - lists the floats on which other builds of libm's
 * expf round otherwise than glibc's FMA build, for the probe of
 * kernels/cpu/cpu_expf.c (run by tools/gen_expf_probe.sh, which writes
 * kernels/cpu/cpu_expf_probe.h).
 *
 *   gen_expf_probe FIRST END    # floats with bits in [FIRST, END)
 *
 * For each float x of magnitude below 88 (the vector code's domain) it
 * prints `u <bits>` where the algorithm built without fused operations
 * (the model below, compiled with -ffp-contract=off) gives otherwise than
 * this machine's expf, and `c <bits>` where the correctly rounded value
 * (expl, long double, rounded to float: the oracle) does.  The libm under
 * test is the one this runs with: glibc's FMA build on an x86-64 machine
 * with FMA and AVX2. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t tab[32];
static double inv_ln2_32;

/* the algorithm of kernels/cpu/cpu_expf.c, every operation rounded on
 * its own (no fma) */
static float unfused_expf(float x)
{
    double xd = x, z = inv_ln2_32 * xd;
    volatile double kv = z + 0x1.8p52; /* rounded to double here, not kept wider */
    double kr = kv, kd = kr - 0x1.8p52, r = z - kd, s;
    uint64_t ki, t;
    memcpy(&ki, &kr, sizeof ki);
    t = tab[ki % 32] + (ki << 47);
    memcpy(&s, &t, sizeof s);
    double p = 0x1.c6af84b912394p-20 * r + 0x1.ebfce50fac4f3p-13, y = 0x1.62e42ff0c52d6p-6 * r + 1.0;
    y = p * (r * r) + y;
    return (float)(y * s);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_expf_probe FIRST END\n");
        return 2;
    }
    uint64_t first = strtoull(argv[1], NULL, 0), end = strtoull(argv[2], NULL, 0);
    for (int i = 0; i < 32; i++) {
        double d = (double)exp2l((long double)i / 32.0L);
        memcpy(&tab[i], &d, sizeof d);
        tab[i] -= (uint64_t)i << 47;
    }
    inv_ln2_32 = (double)(32.0L / logl(2.0L));
    for (uint64_t b = first; b < end && b <= UINT32_MAX; b++) {
        uint32_t u = (uint32_t)b;
        if (((u >> 20) & 0x7ff) >= 0x42b) continue;
        float x, e, o;
        memcpy(&x, &u, sizeof x);
        e = expf(x);
        o = unfused_expf(x);
        if (memcmp(&e, &o, sizeof e)) printf("u %08x\n", (unsigned)u);
        o = (float)expl((long double)x);
        if (memcmp(&e, &o, sizeof e)) printf("c %08x\n", (unsigned)u);
    }
    return 0;
}
