/* ref_dtype.c - see ref_dtype.h.  A leaf: every reference kernel file
 * converts through it, none through another. */
#include "ref_dtype.h"

#include <math.h>
#include <string.h>

float ld_ref_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float ld_ref_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023u, u;
    if (e == 31) {
        u = s | 0x7f800000u | (m << 13);            /* inf, nan */
    } else if (e) {
        u = s | ((e + 112u) << 23) | (m << 13);     /* normal */
    } else if (!m) {
        u = s;                                      /* zero */
    } else {                                        /* subnormal: normalise */
        e = 113;
        while (!(m & 1024u)) {
            m <<= 1;
            e--;
        }
        u = s | (e << 23) | ((m & 1023u) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float ld_ref_fp8_e4m3_to_f32(uint8_t v)
{
    int e = (v >> 3) & 15, m = v & 7;
    float r;
    if (e == 15 && m == 7) r = NAN;
    else if (e == 0) r = ldexpf((float)m, -9);
    else r = ldexpf((float)(8 + m), e - 10);
    return v & 0x80 ? -r : r;
}

float ld_ref_ds4_e2m1_to_f32(unsigned code)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float v = mag[code & 7];
    return code & 8 ? -v : v;
}

float ld_ref_ds4_e8m0_to_f32(uint8_t v)
{
    if (v == 255) return NAN;
    return ldexpf(1.0f, (int)v - 127);
}

float ld_var_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return x; /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even */
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}
