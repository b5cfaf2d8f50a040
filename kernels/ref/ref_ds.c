/* ref_ds.c - see ref_ds.h. */
#include "ref_ds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_variants.h"

static float elem(const void *p, ld_kdt dt, size_t i)
{
    if (dt == LD_KDT_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == LD_KDT_BF16 ? ld_ref_bf16_to_f32(h) : ld_ref_f16_to_f32(h);
}

void ld_ref_ds_rope_ex(float *x, size_t row_stride, size_t off, int n_heads, size_t head_stride, int dim,
                       const float *inv_freq, float attn_factor, int interleave, int pos0, int bf16_table, size_t i0,
                       size_t i1)
{
    int half = dim / 2;
    for (size_t t = i0; t < i1; t++) {
        float pos = (float)(pos0 + (int)t);
        float *row = x + t * row_stride + off;
        for (int i = 0; i < half; i++) {
            float a = pos * inv_freq[i];
            float c = cosf(a) * attn_factor, s = sinf(a) * attn_factor;
            if (bf16_table) {
                c = ld_var_bf16_round(c);
                s = ld_var_bf16_round(s);
            }
            int i0p = interleave ? 2 * i : i, i1p = interleave ? 2 * i + 1 : i + half;
            for (int h = 0; h < n_heads; h++) {
                float *v = row + (size_t)h * head_stride;
                float x0 = v[i0p], x1 = v[i1p];
                v[i0p] = x0 * c - x1 * s;
                v[i1p] = x1 * c + x0 * s;
            }
        }
    }
}

void ld_ref_ds_rope(float *x, size_t row_stride, size_t off, int n_heads, size_t head_stride, int dim,
                    const float *inv_freq, float attn_factor, int interleave, int pos0, size_t i0, size_t i1)
{
    ld_ref_ds_rope_ex(x, row_stride, off, n_heads, head_stride, dim, inv_freq, attn_factor, interleave, pos0, 0, i0,
                      i1);
}

/* softmax of scores[0..n) in place (max subtracted), returns the sum */
static float softmax_exp(float *scores, int n, float mx)
{
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    return sum;
}

/* the j-th position query t attends to (sel NULL: all of 0..n-1) */
static inline int pos_at(const int32_t *sel, int j)
{
    return sel ? (int)sel[j] : j;
}

static void mla_attention(float *out, const float *q, const float *kv, const float *kpe, int n_heads, int dn, int dr,
                          int dv, int pos0, float scale, float *scores, const int32_t *sel, int k, size_t i0,
                          size_t i1)
{
    size_t qrow = (size_t)n_heads * (size_t)(dn + dr), kvrow = (size_t)n_heads * (size_t)(dn + dv);
    for (size_t it = i0; it < i1; it++) {
        int t = (int)(it / (size_t)n_heads), h = (int)(it % (size_t)n_heads);
        int n = pos0 + t + 1;
        const int32_t *st = sel ? sel + (size_t)t * (size_t)k : NULL;
        if (sel && n > k) n = k;
        const float *qn = q + (size_t)t * qrow + (size_t)h * (size_t)(dn + dr), *qp = qn + dn;
        float mx = -INFINITY;
        for (int j = 0; j < n; j++) {
            int s = pos_at(st, j);
            const float *kn = kv + (size_t)s * kvrow + (size_t)h * (size_t)(dn + dv), *kp = kpe + (size_t)s * (size_t)dr;
            float d = 0.0f;
            for (int i = 0; i < dn; i++) d += qn[i] * kn[i];
            for (int i = 0; i < dr; i++) d += qp[i] * kp[i];
            d *= scale;
            scores[j] = d;
            if (d > mx) mx = d;
        }
        float sum = softmax_exp(scores, n, mx);
        float *o = out + ((size_t)t * (size_t)n_heads + (size_t)h) * (size_t)dv;
        for (int i = 0; i < dv; i++) o[i] = 0.0f;
        for (int j = 0; j < n; j++) {
            float p = scores[j] / sum;
            const float *v = kv + (size_t)pos_at(st, j) * kvrow + (size_t)h * (size_t)(dn + dv) + dn;
            for (int i = 0; i < dv; i++) o[i] += p * v[i];
        }
    }
}

void ld_ref_mla_attention(float *out, const float *q, const float *kv, const float *kpe, int n_heads, int dn,
                          int dr, int dv, int pos0, float scale, float *scores, size_t i0, size_t i1)
{
    mla_attention(out, q, kv, kpe, n_heads, dn, dr, dv, pos0, scale, scores, NULL, 0, i0, i1);
}

void ld_ref_mla_attention_sparse(float *out, const float *q, const float *kv, const float *kpe, int n_heads, int dn,
                                 int dr, int dv, int pos0, float scale, float *scores, const int32_t *sel, int k,
                                 size_t i0, size_t i1)
{
    mla_attention(out, q, kv, kpe, n_heads, dn, dr, dv, pos0, scale, scores, sel, k, i0, i1);
}

void ld_ref_mla_absorb_q(float *q_abs, const float *q, const void *w, ld_kdt dt, int n_heads, int dn, int dr,
                         int dv, int c, size_t i0, size_t i1)
{
    size_t qrow = (size_t)n_heads * (size_t)(dn + dr);
    for (size_t it = i0; it < i1; it++) {
        int t = (int)(it / (size_t)n_heads), h = (int)(it % (size_t)n_heads);
        const float *qn = q + (size_t)t * qrow + (size_t)h * (size_t)(dn + dr);
        float *o = q_abs + it * (size_t)c;
        size_t r0 = (size_t)h * (size_t)(dn + dv);
        for (int j = 0; j < c; j++) {
            float acc = 0.0f;
            for (int d = 0; d < dn; d++) acc += qn[d] * elem(w, dt, (r0 + (size_t)d) * (size_t)c + (size_t)j);
            o[j] = acc;
        }
    }
}

static void latent_attention(float *o_lat, const float *q_abs, const float *q, const float *ckv, const float *kpe,
                             int n_heads, int dn, int dr, int c, int pos0, float scale, float *scores,
                             const int32_t *sel, int k, size_t i0, size_t i1)
{
    size_t qrow = (size_t)n_heads * (size_t)(dn + dr);
    for (size_t it = i0; it < i1; it++) {
        int t = (int)(it / (size_t)n_heads), h = (int)(it % (size_t)n_heads);
        int n = pos0 + t + 1;
        const int32_t *st = sel ? sel + (size_t)t * (size_t)k : NULL;
        if (sel && n > k) n = k;
        const float *qa = q_abs + it * (size_t)c;
        const float *qp = q + (size_t)t * qrow + (size_t)h * (size_t)(dn + dr) + dn;
        float mx = -INFINITY;
        for (int j = 0; j < n; j++) {
            int s = pos_at(st, j);
            const float *kc = ckv + (size_t)s * (size_t)c, *kp = kpe + (size_t)s * (size_t)dr;
            float d = 0.0f;
            for (int i = 0; i < c; i++) d += qa[i] * kc[i];
            for (int i = 0; i < dr; i++) d += qp[i] * kp[i];
            d *= scale;
            scores[j] = d;
            if (d > mx) mx = d;
        }
        float sum = softmax_exp(scores, n, mx);
        float *o = o_lat + it * (size_t)c;
        for (int i = 0; i < c; i++) o[i] = 0.0f;
        for (int j = 0; j < n; j++) {
            float p = scores[j] / sum;
            const float *kc = ckv + (size_t)pos_at(st, j) * (size_t)c;
            for (int i = 0; i < c; i++) o[i] += p * kc[i];
        }
    }
}

void ld_ref_mla_latent_attention(float *o_lat, const float *q_abs, const float *q, const float *ckv,
                                 const float *kpe, int n_heads, int dn, int dr, int c, int pos0, float scale,
                                 float *scores, size_t i0, size_t i1)
{
    latent_attention(o_lat, q_abs, q, ckv, kpe, n_heads, dn, dr, c, pos0, scale, scores, NULL, 0, i0, i1);
}

void ld_ref_mla_latent_attention_sparse(float *o_lat, const float *q_abs, const float *q, const float *ckv,
                                        const float *kpe, int n_heads, int dn, int dr, int c, int pos0, float scale,
                                        float *scores, const int32_t *sel, int k, size_t i0, size_t i1)
{
    latent_attention(o_lat, q_abs, q, ckv, kpe, n_heads, dn, dr, c, pos0, scale, scores, sel, k, i0, i1);
}

void ld_ref_mla_absorb_out(float *out, const float *o_lat, const void *w, ld_kdt dt, int n_heads, int dn, int dv,
                           int c, size_t i0, size_t i1)
{
    for (size_t it = i0; it < i1; it++) {
        int h = (int)(it % (size_t)n_heads);
        const float *ol = o_lat + it * (size_t)c;
        float *o = out + it * (size_t)dv;
        size_t r0 = (size_t)h * (size_t)(dn + dv) + (size_t)dn;
        for (int i = 0; i < dv; i++) {
            float acc = 0.0f;
            for (int j = 0; j < c; j++) acc += elem(w, dt, (r0 + (size_t)i) * (size_t)c + (size_t)j) * ol[j];
            o[i] = acc;
        }
    }
}

/* a before b: score descending, then index ascending (NaN never first) */
static int better(float sa, int a, float sb, int b)
{
    return sa > sb || (sa == sb && a < b) || (sb != sb && sa == sa);
}

#define LD_DS_MAX_EXPERTS 1024

void ld_ref_ds_route(int32_t *idx, float *w, const float *logits, const float *bias, int E, int n_group,
                     int topk_group, int top_k, int norm, float scale, size_t i0, size_t i1)
{
    float s[LD_DS_MAX_EXPERTS], sc[LD_DS_MAX_EXPERTS], gs[LD_DS_MAX_EXPERTS];
    unsigned char keep[LD_DS_MAX_EXPERTS];
    int chosen[LD_DS_MAX_EXPERTS];
    int per = E / n_group;
    for (size_t t = i0; t < i1; t++) {
        const float *l = logits + t * (size_t)E;
        for (int e = 0; e < E; e++) {
            s[e] = 1.0f / (1.0f + expf(-l[e]));
            sc[e] = bias ? s[e] + bias[e] : s[e];
        }
        /* group scores: the two best of each group, summed best first */
        for (int g = 0; g < n_group; g++) {
            int b1 = -1, b2 = -1;
            for (int e = g * per; e < (g + 1) * per; e++) {
                if (b1 < 0 || better(sc[e], e, sc[b1], b1)) {
                    b2 = b1;
                    b1 = e;
                } else if (b2 < 0 || better(sc[e], e, sc[b2], b2)) {
                    b2 = e;
                }
            }
            gs[g] = sc[b1] + sc[b2];
            keep[g] = 0;
        }
        for (int k = 0; k < topk_group; k++) {
            int best = -1;
            for (int g = 0; g < n_group; g++)
                if (!keep[g] && (best < 0 || better(gs[g], g, gs[best], best))) best = g;
            keep[best] = 1;
        }
        /* experts: top_k of the kept groups, in selection order */
        for (int k = 0; k < top_k; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                if (!keep[e / per]) continue;
                int taken = 0;
                for (int j = 0; j < k; j++) taken |= chosen[j] == e;
                if (!taken && (best < 0 || better(sc[e], e, sc[best], best))) best = e;
            }
            chosen[k] = best;
        }
        float sum = 0.0f;
        for (int k = 0; k < top_k; k++) sum += s[chosen[k]];
        /* ascending expert id (the order the experts are combined in) */
        for (int a = 1; a < top_k; a++)
            for (int b = a; b > 0 && chosen[b - 1] > chosen[b]; b--) {
                int tmp = chosen[b];
                chosen[b] = chosen[b - 1];
                chosen[b - 1] = tmp;
            }
        for (int k = 0; k < top_k; k++) {
            float v = s[chosen[k]];
            if (norm) v = v / sum;
            idx[t * (size_t)top_k + (size_t)k] = chosen[k];
            w[t * (size_t)top_k + (size_t)k] = v * scale;
        }
    }
}

void ld_ref_ds_layernorm(float *x, size_t row_stride, const float *w, const float *b, int dim, float eps, size_t i0,
                         size_t i1)
{
    for (size_t r = i0; r < i1; r++) {
        float *v = x + r * row_stride;
        float sum = 0.0f;
        for (int i = 0; i < dim; i++) sum += v[i];
        float mean = sum / (float)dim, ss = 0.0f;
        for (int i = 0; i < dim; i++) {
            float d = v[i] - mean;
            ss += d * d;
        }
        float rstd = 1.0f / sqrtf(ss / (float)dim + eps);
        for (int i = 0; i < dim; i++) v[i] = (v[i] - mean) * rstd * w[i] + b[i];
    }
}

void ld_ref_ds_index_scores(float *scores, const float *q, const float *w, const float *keys, int n_heads, int dim,
                            int n)
{
    float wscale = 1.0f / sqrtf((float)n_heads), qscale = 1.0f / sqrtf((float)dim);
    for (int s = 0; s < n; s++) {
        const float *k = keys + (size_t)s * (size_t)dim;
        float acc = 0.0f;
        for (int h = 0; h < n_heads; h++) {
            const float *qh = q + (size_t)h * (size_t)dim;
            float d = 0.0f;
            for (int i = 0; i < dim; i++) d += qh[i] * k[i];
            d *= qscale;
            if (d < 0.0f) d = 0.0f; /* relu (a NaN stays NaN, as torch's) */
            acc += (w[h] * wscale) * d;
        }
        scores[s] = acc;
    }
}

/* position a ranks above b: score descending, NaN last, then index ascending */
static int ranks_above(const float *sc, int32_t a, int32_t b)
{
    float x = sc[a], y = sc[b];
    int xn = x != x, yn = y != y;
    if (xn != yn) return yn;
    if (!xn && x != y) return x > y;
    return a < b;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int ld_ref_ds_topk(int32_t *idx, const float *scores, int n, int k, int32_t *heap)
{
    int m = n < k ? n : k, len = 0;
    if (m <= 0) return 0;
    /* heap[0] is the worst of the best so far */
    for (int32_t s = 0; s < n; s++) {
        if (len < m) {
            int i = len++;
            heap[i] = s;
            while (i > 0 && ranks_above(scores, heap[(i - 1) / 2], heap[i])) {
                int32_t t = heap[i];
                heap[i] = heap[(i - 1) / 2];
                heap[(i - 1) / 2] = t;
                i = (i - 1) / 2;
            }
        } else if (ranks_above(scores, s, heap[0])) {
            heap[0] = s;
            for (int i = 0;;) {
                int l = 2 * i + 1, r = l + 1, w = i;
                if (l < len && ranks_above(scores, heap[w], heap[l])) w = l;
                if (r < len && ranks_above(scores, heap[w], heap[r])) w = r;
                if (w == i) break;
                int32_t t = heap[i];
                heap[i] = heap[w];
                heap[w] = t;
                i = w;
            }
        }
    }
    memcpy(idx, heap, (size_t)m * sizeof *idx);
    qsort(idx, (size_t)m, sizeof *idx, cmp_i32);
    return m;
}

void ld_ref_ds_axpy(float *y, const float *x, float w, size_t i0, size_t i1)
{
    for (size_t i = i0; i < i1; i++) y[i] += x[i] * w;
}

void ld_ref_ds_scale(float *y, float w, size_t i0, size_t i1)
{
    for (size_t i = i0; i < i1; i++) y[i] = y[i] * w;
}

void ld_ref_fp8_block_dequant(float *out, const uint8_t *q, const float *scale_inv, size_t rows, size_t cols,
                              size_t b0, size_t b1, size_t i0, size_t i1)
{
    size_t nb = (cols + b1 - 1) / b1;
    (void)rows;
    for (size_t r = i0; r < i1; r++) {
        const float *srow = scale_inv + r / b0 * nb;
        for (size_t c = 0; c < cols; c++) out[r * cols + c] = ld_ref_fp8_e4m3_to_f32(q[r * cols + c]) * srow[c / b1];
    }
}

int ld_ref_moe_gather(int *rows, float *w, float *xe, const float *x, const int32_t *idx, const float *wts,
                      size_t N, size_t K, size_t D, int e)
{
    int cnt = 0;
    for (size_t t = 0; t < N; t++)
        for (size_t k = 0; k < K; k++)
            if (idx[t * K + k] == e) {
                rows[cnt] = (int)t;
                w[cnt] = wts[t * K + k];
                memcpy(xe + (size_t)cnt * D, x + t * D, D * sizeof *x);
                cnt++;
            }
    return cnt;
}
