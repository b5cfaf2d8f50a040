/* ref_quant.c - see ref_quant.h. */
#include "ref_quant.h"

#include <string.h>

#include "ref_ops.h"

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static float half(const uint8_t *p)
{
    return ld_ref_f16_to_f32(le16(p));
}

int ld_ref_quant_layout(uint32_t type, size_t *block, size_t *bytes)
{
    size_t b, s;
    switch (type) {
    case LD_GGML_F32: b = 1; s = 4; break;
    case LD_GGML_F16: b = 1; s = 2; break;
    case LD_GGML_BF16: b = 1; s = 2; break;
    case LD_GGML_Q4_0: b = 32; s = 18; break;
    case LD_GGML_Q4_1: b = 32; s = 20; break;
    case LD_GGML_Q8_0: b = 32; s = 34; break;
    case LD_GGML_Q4_K: b = 256; s = 144; break;
    case LD_GGML_Q6_K: b = 256; s = 210; break;
    default: return 0;
    }
    if (block) *block = b;
    if (bytes) *bytes = s;
    return 1;
}

static void q4_0(float *y, const uint8_t *b)
{
    float d = half(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((int)(qs[j] & 15) - 8);
        y[j + 16] = d * (float)((int)(qs[j] >> 4) - 8);
    }
}

static void q4_1(float *y, const uint8_t *b)
{
    float d = half(b), m = half(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 15) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

static void q8_0(float *y, const uint8_t *b)
{
    float d = half(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* the 6-bit scale and min of sub-block j < 8 of a Q4_K block */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void q4_k(float *y, const uint8_t *b)
{
    float d = half(b), dmin = half(b + 2);
    const uint8_t *scales = b + 4, *qs = b + 16;
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        k_scale_min(scales, j, &sc, &mn);
        float dl = d * (float)sc, ml = dmin * (float)mn;
        const uint8_t *q = qs + 32 * (j / 2);
        int shift = (j % 2) * 4;
        for (int i = 0; i < 32; i++) y[32 * j + i] = dl * (float)((q[i] >> shift) & 15) - ml;
    }
}

static void q6_k(float *y, const uint8_t *b)
{
    const uint8_t *ql = b, *qh = b + 128, *sc = b + 192;
    float d = half(b + 208);
    for (int i = 0; i < 256; i++) {
        int h = i / 128, r = i % 128;
        int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
        int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        float dl = d * (float)(int8_t)sc[i / 16];
        y[i] = dl * (float)((lo | (hi << 4)) - 32);
    }
}

int ld_ref_dequant(float *dst, const void *src, uint32_t type, size_t n)
{
    const uint8_t *p = src;
    size_t block, bytes;
    if (!ld_ref_quant_layout(type, &block, &bytes)) return 0;
    switch (type) {
    case LD_GGML_F32:
        memcpy(dst, p, n * sizeof *dst);
        return 1;
    case LD_GGML_F16:
        for (size_t i = 0; i < n; i++) dst[i] = half(p + 2 * i);
        return 1;
    case LD_GGML_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = ld_ref_bf16_to_f32(le16(p + 2 * i));
        return 1;
    default: break;
    }
    void (*fn)(float *, const uint8_t *) = type == LD_GGML_Q4_0 ? q4_0
                                         : type == LD_GGML_Q4_1 ? q4_1
                                         : type == LD_GGML_Q8_0 ? q8_0
                                         : type == LD_GGML_Q4_K ? q4_k
                                                                : q6_k;
    for (size_t i = 0; i < n / block; i++) fn(dst + i * block, p + i * bytes);
    return 1;
}
