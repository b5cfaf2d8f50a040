/* ref_ops.c - see ref_ops.h. */
#include "ref_ops.h"
#include "ref_quant.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

int ld_ref_kdt_is_block(ld_kdt dt)
{
    return dt >= LD_KDT_Q4_0 && dt <= LD_KDT_Q6_K;
}

static uint32_t kdt_ggml(ld_kdt dt)
{
    switch (dt) {
    case LD_KDT_Q4_0: return LD_GGML_Q4_0;
    case LD_KDT_Q4_1: return LD_GGML_Q4_1;
    case LD_KDT_Q8_0: return LD_GGML_Q8_0;
    case LD_KDT_Q4_K: return LD_GGML_Q4_K;
    default: return LD_GGML_Q6_K;
    }
}

int ld_ref_kdt_is_scaled(ld_kdt dt)
{
    return dt == LD_KDT_F8B || dt == LD_KDT_F4B;
}

/* The codes' values, each the converter's (ld_ref_fp8_e4m3_to_f32,
 * ld_ref_ds4_e2m1_to_f32: the same bits without a libm call per element),
 * filled once per process: the first scaled_to_f32 of any thread fills them,
 * pthread_once makes the others wait for it. */
static float e4m3_lut[256], e2m1_lut[16];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;

static void lut_fill(void)
{
    for (unsigned i = 0; i < 256; i++) e4m3_lut[i] = ld_ref_fp8_e4m3_to_f32((uint8_t)i);
    for (unsigned i = 0; i < 16; i++) e2m1_lut[i] = ld_ref_ds4_e2m1_to_f32(i);
}

/* element [r][c] = code * scale[r / br][c / bc], one fp32 product, the
 * elements a scale block at a time */
static void scaled_to_f32(float *dst, const ld_f8b *f, int fp4, size_t off, size_t n)
{
    pthread_once(&lut_once, lut_fill);
    const float *lut = fp4 ? e2m1_lut : e4m3_lut;
    size_t cols = (size_t)f->cols, bc = (size_t)f->bc, nbc = (cols + bc - 1) / bc;
    size_t e = off, end = off + n;
    while (e < end) {
        size_t r = e / cols, c = e % cols;
        size_t stop = e + (bc - c % bc < cols - c ? bc - c % bc : cols - c); /* this block's end in the row */
        if (stop > end) stop = end;
        float sc = f->scale[r / (size_t)f->br * nbc + c / bc];
        if (fp4) /* two codes a byte, the low nibble first (element e is byte e / 2) */
            for (; e < stop; e++) *dst++ = lut[e % 2 ? f->q[e / 2] >> 4 : f->q[e / 2] & 15] * sc;
        else
            for (; e < stop; e++) *dst++ = lut[f->q[e]] * sc;
    }
}

void ld_ref_to_f32(float *dst, const void *src, ld_kdt dt, size_t off, size_t n)
{
    if (ld_ref_kdt_is_scaled(dt)) {
        scaled_to_f32(dst, src, dt == LD_KDT_F4B, off, n);
        return;
    }
    if (ld_ref_kdt_is_block(dt)) {
        uint32_t ty = kdt_ggml(dt);
        size_t block = 1, bytes = 0;
        ld_ref_quant_layout(ty, &block, &bytes);
        ld_ref_dequant(dst, (const unsigned char *)src + off / block * bytes, ty, n);
        return;
    }
    if (dt == LD_KDT_F32) {
        memcpy(dst, (const float *)src + off, n * sizeof *dst);
        return;
    }
    const uint16_t *h = (const uint16_t *)src + off;
    if (dt == LD_KDT_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = ld_ref_bf16_to_f32(h[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = ld_ref_f16_to_f32(h[i]);
}

static float elem(const void *p, ld_kdt dt, size_t i)
{
    if (dt == LD_KDT_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == LD_KDT_BF16 ? ld_ref_bf16_to_f32(h) : ld_ref_f16_to_f32(h);
}

void ld_ref_embed(float *out, const void *table, ld_kdt dt, int dim,
                  const int32_t *tokens, size_t i0, size_t i1)
{
    for (size_t t = i0; t < i1; t++)
        ld_ref_to_f32(out + t * (size_t)dim, table, dt, (size_t)tokens[t] * (size_t)dim, (size_t)dim);
}

void ld_ref_rmsnorm(float *out, const float *x, const void *w, ld_kdt dt,
                    int dim, float eps, size_t i0, size_t i1)
{
    for (size_t r = i0; r < i1; r++) {
        const float *xr = x + r * (size_t)dim;
        float *o = out + r * (size_t)dim;
        float ss = 0.0f;
        for (int i = 0; i < dim; i++) ss += xr[i] * xr[i];
        float inv = 1.0f / sqrtf(ss / (float)dim + eps);
        for (int i = 0; i < dim; i++) o[i] = elem(w, dt, (size_t)i) * (xr[i] * inv);
    }
}

void ld_ref_matmul(float *out, const float *x, const void *w, ld_kdt dt,
                   const void *bias, ld_kdt bias_dt, int T, int K, int N,
                   float *row, size_t i0, size_t i1)
{
    ld_ref_matmul_ex(out, x, w, dt, bias, bias_dt, T, K, N, 0, row, i0, i1);
}

void ld_ref_matmul_ex(float *out, const float *x, const void *w, ld_kdt dt,
                      const void *bias, ld_kdt bias_dt, int T, int K, int N,
                      int rope_hd, float *row, size_t i0, size_t i1)
{
    for (size_t n = i0; n < i1; n++) {
        size_t src = n;
        if (rope_hd > 0) {
            size_t hd = (size_t)rope_hd, h = n / hd, r = n % hd;
            src = h * hd + 2 * (r % (hd / 2)) + r / (hd / 2);
        }
        const float *wr;
        if (dt == LD_KDT_F32) {
            wr = (const float *)w + src * (size_t)K;
        } else {
            ld_ref_to_f32(row, w, dt, src * (size_t)K, (size_t)K);
            wr = row;
        }
        float b = bias ? elem(bias, bias_dt, n) : 0.0f;
        for (int t = 0; t < T; t++) {
            const float *xr = x + (size_t)t * (size_t)K;
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += xr[k] * wr[k];
            out[(size_t)t * (size_t)N + n] = acc + b;
        }
    }
}

void ld_ref_rope(float *x, int n_heads, int head_dim, const float *inv_freq,
                 int pos0, size_t i0, size_t i1)
{
    int half = head_dim / 2;
    for (size_t t = i0; t < i1; t++) {
        float pos = (float)(pos0 + (int)t);
        float *row = x + t * (size_t)n_heads * (size_t)head_dim;
        for (int i = 0; i < half; i++) {
            float a = pos * inv_freq[i];
            float c = cosf(a), s = sinf(a);
            for (int h = 0; h < n_heads; h++) {
                float *v = row + (size_t)h * (size_t)head_dim;
                float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * c - x1 * s;
                v[i + half] = x1 * c + x0 * s;
            }
        }
    }
}

static float dot_seq(const float *a, const float *b, int n)
{
    float d = 0.0f;
    for (int i = 0; i < n; i++) d += a[i] * b[i];
    return d;
}

static void axpy_seq(float *o, float p, const float *v, int n)
{
    for (int i = 0; i < n; i++) o[i] += p * v[i];
}

void ld_ref_attention(float *out, const float *q, const float *kcache,
                      const float *vcache, int n_heads, int n_kv, int hd,
                      int pos0, int window, float scale, float *scores,
                      size_t i0, size_t i1)
{
    ld_attention_with(dot_seq, axpy_seq, out, q, kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, scores,
                      i0, i1);
}

void ld_attn_softmax(float *sc, int n)
{
    float mx = -INFINITY;
    for (int j = 0; j < n; j++)
        if (sc[j] > mx) mx = sc[j];
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
    }
    for (int j = 0; j < n; j++) sc[j] = sc[j] / sum;
}

void ld_attention_with(ld_dot_fn dot, ld_axpy_fn axpy, float *out, const float *q, const float *kcache,
                       const float *vcache, int n_heads, int n_kv, int hd, int pos0, int window, float scale,
                       float *scores, size_t i0, size_t i1)
{
    int group = n_heads / n_kv;
    size_t qrow = (size_t)n_heads * (size_t)hd, kvrow = (size_t)n_kv * (size_t)hd;
    for (size_t it = i0; it < i1; it++) {
        int t = (int)(it / (size_t)n_heads), h = (int)(it % (size_t)n_heads);
        int pos = pos0 + t, kvh = h / group;
        int lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0, n = pos - lo + 1;
        const float *k = kcache + (size_t)lo * kvrow + (size_t)kvh * (size_t)hd;
        const float *v = vcache + (size_t)lo * kvrow + (size_t)kvh * (size_t)hd;
        const float *qh = q + (size_t)t * qrow + (size_t)h * (size_t)hd;
        float *sc = scores + lo, *o = out + (size_t)t * qrow + (size_t)h * (size_t)hd;
        for (int j = 0; j < n; j++) sc[j] = dot(qh, k + (size_t)j * kvrow, hd) * scale;
        ld_attn_softmax(sc, n);
        for (int i = 0; i < hd; i++) o[i] = 0.0f;
        for (int j = 0; j < n; j++) axpy(o, sc[j], v + (size_t)j * kvrow, hd);
    }
}

void ld_ref_swiglu(float *out, const float *gate, const float *up, size_t i0, size_t i1)
{
    for (size_t i = i0; i < i1; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void ld_ref_add(float *x, const float *y, size_t i0, size_t i1)
{
    for (size_t i = i0; i < i1; i++) x[i] += y[i];
}

void ld_ref_softmax(float *out, const float *x, int n, size_t i0, size_t i1)
{
    for (size_t r = i0; r < i1; r++) { /* each row as attention's: the same operations in order */
        float *o = out + r * (size_t)n;
        memmove(o, x + r * (size_t)n, (size_t)n * sizeof *o);
        ld_attn_softmax(o, n);
    }
}
