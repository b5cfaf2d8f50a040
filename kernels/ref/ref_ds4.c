/* ref_ds4.c - see ref_ds4.h. */
#include "ref_ds4.h"

#include <math.h>
#include <string.h>

#include "ref_ds.h"
#include "ref_variants.h"

static float sigmoidf(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

void ld_ref_ds4_unit_rmsnorm(float *x, int n, float eps)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) x[i] = x[i] * inv;
}

/* m[o] = fn[o] . (X / rms(X)), o < rows; scratch N*D */
static void hc_mix(float *m, const float *X, int ND, const float *fn, int rows, float eps, float *xn)
{
    memcpy(xn, X, (size_t)ND * sizeof *xn);
    ld_ref_ds4_unit_rmsnorm(xn, ND, eps);
    for (int o = 0; o < rows; o++) {
        const float *w = fn + (size_t)o * (size_t)ND;
        float acc = 0.0f;
        for (int i = 0; i < ND; i++) acc += w[i] * xn[i];
        m[o] = acc;
    }
}

/* the Sinkhorn iterate comb [N][N] rounded to bf16 (bf16 = 1) */
static void iterate_bf16(float *comb, int N, int bf16)
{
    if (bf16)
        for (int i = 0; i < N * N; i++) comb[i] = ld_var_bf16_round(comb[i]);
}

void ld_ref_ds4_hc_pre(const float *X, int N, int D, const float *fn, const float *base, const float *scale,
                       int iters, float norm_eps, float hc_eps, float *post, float *comb, float *collapsed,
                       float *scratch)
{
    ld_ref_ds4_hc_pre_ex(X, N, D, fn, base, scale, iters, norm_eps, hc_eps, 0, post, comb, collapsed, scratch);
}

void ld_ref_ds4_hc_pre_ex(const float *X, int N, int D, const float *fn, const float *base, const float *scale,
                          int iters, float norm_eps, float hc_eps, int bf16_sinkhorn, float *post, float *comb,
                          float *collapsed, float *scratch)
{
    int ND = N * D, R = (2 + N) * N;
    float *xn = scratch, *m = scratch + ND;
    hc_mix(m, X, ND, fn, R, norm_eps, xn);
    float pre[64];
    for (int j = 0; j < N; j++) pre[j] = sigmoidf(m[j] * scale[0] + base[j]) + hc_eps;
    for (int j = 0; j < N; j++) post[j] = 2.0f * sigmoidf(m[N + j] * scale[1] + base[N + j]);
    for (int r = 0; r < N; r++) {
        float *c = comb + (size_t)r * (size_t)N;
        float mx = -INFINITY, sum = 0.0f;
        for (int k = 0; k < N; k++) {
            c[k] = m[2 * N + r * N + k] * scale[2] + base[2 * N + r * N + k];
            if (c[k] > mx) mx = c[k];
        }
        for (int k = 0; k < N; k++) {
            c[k] = expf(c[k] - mx);
            sum += c[k];
        }
        for (int k = 0; k < N; k++) c[k] = c[k] / sum + hc_eps;
    }
    iterate_bf16(comb, N, bf16_sinkhorn);
    for (int it = 0; it < (iters > 1 ? iters : 1); it++) {
        if (it > 0) { /* rows */
            for (int r = 0; r < N; r++) {
                float s = 0.0f;
                for (int k = 0; k < N; k++) s += comb[r * N + k];
                for (int k = 0; k < N; k++) comb[r * N + k] = comb[r * N + k] / (s + hc_eps);
            }
            iterate_bf16(comb, N, bf16_sinkhorn);
        }
        for (int k = 0; k < N; k++) { /* columns */
            float s = 0.0f;
            for (int r = 0; r < N; r++) s += comb[r * N + k];
            for (int r = 0; r < N; r++) comb[r * N + k] = comb[r * N + k] / (s + hc_eps);
        }
        iterate_bf16(comb, N, bf16_sinkhorn);
    }
    for (int d = 0; d < D; d++) {
        float acc = 0.0f;
        for (int j = 0; j < N; j++) acc += pre[j] * X[(size_t)j * (size_t)D + (size_t)d];
        collapsed[d] = acc;
    }
}

void ld_ref_ds4_hc_post(float *out, const float *X, const float *f, const float *post, const float *comb, int N,
                        int D)
{
    for (int k = 0; k < N; k++)
        for (int d = 0; d < D; d++) {
            float acc = 0.0f;
            for (int j = 0; j < N; j++) acc += comb[j * N + k] * X[(size_t)j * (size_t)D + (size_t)d];
            out[(size_t)k * (size_t)D + (size_t)d] = post[k] * f[d] + acc;
        }
}

void ld_ref_ds4_hc_head(float *out, const float *X, int N, int D, const float *fn, const float *base, float scale,
                        float norm_eps, float hc_eps, float *scratch)
{
    int ND = N * D;
    float *xn = scratch, *m = scratch + ND;
    hc_mix(m, X, ND, fn, N, norm_eps, xn);
    float pre[64];
    for (int j = 0; j < N; j++) pre[j] = sigmoidf(m[j] * scale + base[j]) + hc_eps;
    for (int d = 0; d < D; d++) {
        float acc = 0.0f;
        for (int j = 0; j < N; j++) acc += pre[j] * X[(size_t)j * (size_t)D + (size_t)d];
        out[d] = acc;
    }
}

void ld_ref_ds4_rope(float *x, int n_heads, int head_dim, int dim, const float *inv_freq, float attn_factor, int pos,
                     int inverse)
{
    ld_ref_ds4_rope_ex(x, n_heads, head_dim, dim, inv_freq, attn_factor, pos, inverse, 0);
}

void ld_ref_ds4_rope_ex(float *x, int n_heads, int head_dim, int dim, const float *inv_freq, float attn_factor,
                        int pos, int inverse, int bf16_table)
{
    for (int i = 0; i < dim / 2; i++) {
        float a = (float)pos * inv_freq[i];
        float c = cosf(a) * attn_factor, s = sinf(a) * attn_factor;
        if (bf16_table) {
            c = ld_var_bf16_round(c);
            s = ld_var_bf16_round(s);
        }
        if (inverse) s = -s;
        for (int h = 0; h < n_heads; h++) {
            float *p = x + (size_t)h * (size_t)head_dim + (size_t)(head_dim - dim) + 2 * (size_t)i;
            float x0 = p[0], x1 = p[1];
            p[0] = x0 * c + (-x1) * s;
            p[1] = x1 * c + x0 * s;
        }
    }
}

void ld_ref_ds4_attention(float *out, const float *q, int H, int hd, const float *const *keys, int nk,
                          const float *sinks, float scale, float *scores)
{
    for (int h = 0; h < H; h++) {
        const float *qh = q + (size_t)h * (size_t)hd;
        float *oh = out + (size_t)h * (size_t)hd;
        float mx = sinks ? sinks[h] : -INFINITY;
        for (int i = 0; i < nk; i++) {
            float acc = 0.0f;
            for (int d = 0; d < hd; d++) acc += qh[d] * keys[i][d];
            scores[i] = acc * scale;
            if (scores[i] > mx) mx = scores[i];
        }
        float sum = 0.0f;
        for (int i = 0; i < nk; i++) {
            scores[i] = expf(scores[i] - mx);
            sum += scores[i];
        }
        if (sinks) sum += expf(sinks[h] - mx);
        for (int d = 0; d < hd; d++) oh[d] = 0.0f;
        for (int i = 0; i < nk; i++) {
            float p = scores[i] / sum;
            for (int d = 0; d < hd; d++) oh[d] += p * keys[i][d];
        }
    }
}

/* Slot s (< 2r) of entry w: its row of the projections and its column
 * offset (0 or d, the overlapping half), j its ape row; 0 when the slot is
 * not used (the second half without overlap, the first half of entry 0). */
static int compress_slot(int s, int r, int d, int overlap, int w, size_t *row, size_t *col, int *j)
{
    int first = s < r;
    *j = first ? s : s - r;
    if (!overlap) {
        if (!first) return 0;
        *row = (size_t)w * (size_t)r + (size_t)*j;
        *col = 0;
    } else if (first) {
        if (w == 0) return 0;
        *row = (size_t)(w - 1) * (size_t)r + (size_t)*j;
        *col = 0;
    } else {
        *row = (size_t)w * (size_t)r + (size_t)*j;
        *col = (size_t)d;
    }
    return 1;
}

void ld_ref_ds4_compress(float *out, const float *kv, const float *gate, const float *ape, int r, int d,
                         size_t stride, int overlap, int w)
{
    /* slots: (row, column offset, ape row); at most 2r */
    for (int c = 0; c < d; c++) {
        float mx = -INFINITY, sum = 0.0f, acc = 0.0f;
        size_t row, col;
        int j;
        for (int pass = 0; pass < 2; pass++)
            for (int s = 0; s < 2 * r; s++) {
                if (!compress_slot(s, r, d, overlap, w, &row, &col, &j)) continue;
                col += (size_t)c;
                float z = gate[row * stride + col] + ape[(size_t)j * stride + col];
                if (pass == 0) {
                    if (z > mx) mx = z;
                } else {
                    sum += expf(z - mx);
                }
            }
        for (int s = 0; s < 2 * r; s++) {
            if (!compress_slot(s, r, d, overlap, w, &row, &col, &j)) continue;
            col += (size_t)c;
            float z = gate[row * stride + col] + ape[(size_t)j * stride + col];
            acc += kv[row * stride + col] * (expf(z - mx) / sum);
        }
        out[c] = acc;
    }
}

void ld_ref_ds4_index_scores(float *score, const float *q, const float *w, const float *keys, int n, int nh, int hd,
                             float qscale, float wscale)
{
    for (int s = 0; s < n; s++) {
        const float *k = keys + (size_t)s * (size_t)hd;
        float acc = 0.0f;
        for (int h = 0; h < nh; h++) {
            const float *qh = q + (size_t)h * (size_t)hd;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++) dot += qh[d] * k[d];
            float rl = dot > 0.0f ? dot : 0.0f;
            acc += (rl * qscale) * (w[h] * wscale);
        }
        score[s] = acc;
    }
}

/* a before b: score descending, NaN last, then index ascending */
static int better(const float *score, int32_t a, int32_t b)
{
    float sa = score[a], sb = score[b];
    int na = isnan(sa), nb = isnan(sb);
    if (na != nb) return nb;
    if (!na && sa != sb) return sa > sb;
    return a < b;
}

int ld_ref_ds4_topk(int32_t *idx, const float *score, int n, int k)
{
    if (k > n) k = n;
    if (k <= 0) return 0;
    /* idx[0..cnt) the best so far, best first (insertion; O(n k)) */
    int cnt = 0;
    for (int32_t s = 0; s < n; s++) {
        if (cnt == k && !better(score, s, idx[k - 1])) continue;
        int j = cnt < k ? cnt++ : k - 1;
        while (j > 0 && better(score, s, idx[j - 1])) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = s;
    }
    /* ascending */
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
            int32_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    return k;
}

static float softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

void ld_ref_ds4_route(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *hash, int E,
                      int K, float scale)
{
    float s[1024], sel[1024];
    for (int e = 0; e < E; e++) s[e] = sqrtf(softplus(logits[e]));
    float sum = 0.0f;
    if (hash) {
        for (int k = 0; k < K; k++) {
            idx[k] = hash[k];
            sum += s[hash[k]];
        }
        /* ascending id (the sum above kept the table's order) */
        for (int i = 1; i < K; i++)
            for (int j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
                int32_t t = idx[j];
                idx[j] = idx[j - 1];
                idx[j - 1] = t;
            }
    } else {
        for (int e = 0; e < E; e++) sel[e] = bias ? s[e] + bias[e] : s[e];
        ld_ref_ds4_topk(idx, sel, E, K);
        for (int k = 0; k < K; k++) sum += s[idx[k]];
    }
    for (int k = 0; k < K; k++) w[k] = s[idx[k]] / (sum + 1e-20f) * scale;
}

void ld_ref_ds4_clamped_swiglu(float *out, const float *g, const float *u, float limit, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float a = g[i] < limit ? g[i] : limit;
        float b = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        out[i] = a / (1.0f + expf(-a)) * b;
    }
}

void ld_ref_ds4_dequant(float *out, const uint8_t *q, int fp4, const float *scale, size_t rows, size_t cols,
                        size_t sr, size_t sc, size_t r0, size_t r1)
{
    size_t bm = rows / sr, bn = cols / sc;
    for (size_t r = r0; r < r1; r++) {
        const float *srow = scale + (r / bm) * sc;
        float *o = out + r * cols;
        for (size_t c = 0; c < cols; c++) {
            float v;
            if (fp4) {
                uint8_t b = q[r * (cols / 2) + c / 2];
                v = ld_ref_ds4_e2m1_to_f32(c % 2 ? (unsigned)(b >> 4) : (unsigned)(b & 15));
            } else {
                v = ld_ref_fp8_e4m3_to_f32(q[r * cols + c]);
            }
            o[c] = v * srow[c / bn];
        }
    }
}
