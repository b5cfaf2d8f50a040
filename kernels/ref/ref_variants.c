/* ref_variants.c - see ref_variants.h. */
#include "ref_variants.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* the weight row of output n (ld_ref_matmul_ex's rope row order) as fp32 */
static const float *weight_row(const void *w, ld_kdt dt, int K, int rope_hd, size_t n, float *row)
{
    size_t src = n;
    if (rope_hd > 0) {
        size_t hd = (size_t)rope_hd, h = n / hd, r = n % hd;
        src = h * hd + 2 * (r % (hd / 2)) + r / (hd / 2);
    }
    if (dt == LD_KDT_F32) return (const float *)w + src * (size_t)K;
    ld_ref_to_f32(row, w, dt, src * (size_t)K, (size_t)K);
    return row;
}

static float bias_of(const void *bias, ld_kdt dt, size_t n)
{
    float b = 0.0f;
    if (bias) ld_ref_to_f32(&b, bias, dt, n, 1);
    return b;
}

void ld_var_matmul_bf16(float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                        int T, int K, int N, int rope_hd, float *row, size_t i0, size_t i1)
{
    for (size_t n = i0; n < i1; n++) {
        const float *wr = weight_row(w, dt, K, rope_hd, n, row);
        float b = bias_of(bias, bias_dt, n);
        for (int t = 0; t < T; t++) {
            const float *xr = x + (size_t)t * (size_t)K;
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += ld_var_bf16_round(xr[k]) * ld_var_bf16_round(wr[k]);
            out[(size_t)t * (size_t)N + n] = acc + b;
        }
    }
}

void ld_var_matmul_splitk(float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                          int T, int K, int N, int rope_hd, float *row, size_t i0, size_t i1)
{
    for (size_t n = i0; n < i1; n++) {
        const float *wr = weight_row(w, dt, K, rope_hd, n, row);
        float b = bias_of(bias, bias_dt, n);
        for (int t = 0; t < T; t++) {
            const float *xr = x + (size_t)t * (size_t)K;
            float acc = 0.0f;
            for (int k0 = 0; k0 < K; k0 += LD_VAR_SPLIT_K) {
                int k1 = K - k0 < LD_VAR_SPLIT_K ? K : k0 + LD_VAR_SPLIT_K;
                float part = 0.0f;
                for (int k = k0; k < k1; k++) part += xr[k] * wr[k];
                acc += part;
            }
            out[(size_t)t * (size_t)N + n] = acc + b;
        }
    }
}

void ld_var_rmsnorm_bf16(float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps, size_t i0,
                         size_t i1)
{
    ld_ref_rmsnorm(out, x, w, dt, dim, eps, i0, i1);
    for (size_t i = i0 * (size_t)dim; i < i1 * (size_t)dim; i++) out[i] = ld_var_bf16_round(out[i]);
}

void ld_var_swiglu_bf16(float *out, const float *gate, const float *up, size_t i0, size_t i1)
{
    ld_ref_swiglu(out, gate, up, i0, i1);
    for (size_t i = i0; i < i1; i++) out[i] = ld_var_bf16_round(out[i]);
}

float ld_var_e4m3_round(float v)
{
    if (isnan(v)) return v;
    float a = fabsf(v);
    if (a >= 448.0f) return copysignf(448.0f, v);
    if (a == 0.0f) return v;
    int e;
    frexpf(a, &e);                     /* a = f * 2^e, f in [0.5, 1) */
    int step = e - 1 < -6 ? -9 : e - 4; /* 3 mantissa bits; subnormals 2^-9 */
    float q = ldexpf(nearbyintf(ldexpf(a, -step)), step); /* exact scalings; ties to even */
    if (q > 448.0f) q = 448.0f;
    return copysignf(q, v);
}

void ld_var_fp8_act(float *out, const float *x, int T, int K)
{
    for (int t = 0; t < T; t++)
        for (int b = 0; b < K; b += LD_VAR_ACT_BLOCK) {
            const float *xv = x + (size_t)t * (size_t)K;
            float *ov = out + (size_t)t * (size_t)K;
            int e = K - b < LD_VAR_ACT_BLOCK ? K : b + LD_VAR_ACT_BLOCK;
            float amax = 0.0f;
            for (int k = b; k < e; k++) amax = fmaxf(amax, fabsf(xv[k]));
            float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
            for (int k = b; k < e; k++) ov[k] = ld_var_e4m3_round(xv[k] / scale) * scale;
        }
}

/* 2^ceil(log2 s) for s > 0 (exact: frexp splits s = f 2^e, f in [0.5, 1)) */
static float pow2_ceil(float s)
{
    int e;
    float f = frexpf(s, &e);
    return f == 0.5f ? s : ldexpf(1.0f, e);
}

void ld_var_fp8_act_ue8m0(float *out, const float *x, int T, int K)
{
    for (int t = 0; t < T; t++)
        for (int b = 0; b < K; b += LD_VAR_ACT_BLOCK) {
            const float *xv = x + (size_t)t * (size_t)K;
            float *ov = out + (size_t)t * (size_t)K;
            int e = K - b < LD_VAR_ACT_BLOCK ? K : b + LD_VAR_ACT_BLOCK;
            float amax = 1e-4f;
            for (int k = b; k < e; k++) amax = fmaxf(amax, fabsf(xv[k]));
            float scale = pow2_ceil(amax / 448.0f);
            for (int k = b; k < e; k++) ov[k] = ld_var_e4m3_round(xv[k] / scale) * scale;
        }
}
