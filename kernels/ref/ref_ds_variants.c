/* ref_ds_variants.c - see ref_ds_variants.h. */
#include "ref_ds_variants.h"

#include <math.h>

#include "ref_variants.h"

/* the score of query (qa, qp) against position s of the latent cache */
static float latent_score(const float *qa, const float *qp, const float *ckv, const float *kpe, int c, int dr, int s,
                          float scale)
{
    const float *kc = ckv + (size_t)s * (size_t)c, *kp = kpe + (size_t)s * (size_t)dr;
    float d = 0.0f;
    for (int i = 0; i < c; i++) d += qa[i] * kc[i];
    for (int i = 0; i < dr; i++) d += qp[i] * kp[i];
    return d * scale;
}

/* one split [a, b) of the attended list: scores[a..b) already hold the
 * scores; writes exp(score - m) back, o_s into part, returns l_s, *m the
 * split's max */
static float split_partial(float *part, float *scores, const int32_t *st, const float *ckv, int c, int a, int b,
                           float *m)
{
    float mx = -INFINITY, l = 0.0f;
    for (int j = a; j < b; j++)
        if (scores[j] > mx) mx = scores[j];
    for (int i = 0; i < c; i++) part[i] = 0.0f;
    for (int j = a; j < b; j++) {
        float e = expf(scores[j] - mx);
        const float *kc = ckv + (size_t)(st ? st[j] : j) * (size_t)c;
        l += e;
        for (int i = 0; i < c; i++) part[i] += e * kc[i];
    }
    *m = mx;
    return l;
}

void ld_dsv_mla_latent_attention_splitk(float *o_lat, const float *q_abs, const float *q, const float *ckv,
                                        const float *kpe, int n_heads, int dn, int dr, int c, int pos0, float scale,
                                        float *scores, float *part, const int32_t *sel, int k, int split, size_t i0,
                                        size_t i1)
{
    size_t qrow = (size_t)n_heads * (size_t)(dn + dr);
    if (split < 1) split = 1;
    for (size_t it = i0; it < i1; it++) {
        int t = (int)(it / (size_t)n_heads), h = (int)(it % (size_t)n_heads);
        int n = pos0 + t + 1;
        const int32_t *st = sel ? sel + (size_t)t * (size_t)k : NULL;
        if (sel && n > k) n = k;
        const float *qa = q_abs + it * (size_t)c;
        const float *qp = q + (size_t)t * qrow + (size_t)h * (size_t)(dn + dr) + dn;
        for (int j = 0; j < n; j++) scores[j] = latent_score(qa, qp, ckv, kpe, c, dr, st ? st[j] : j, scale);
        float *o = o_lat + it * (size_t)c;
        float M = -INFINITY, L = 0.0f;
        for (int i = 0; i < c; i++) o[i] = 0.0f;
        for (int a = 0; a < n; a += split) {
            int b = n - a < split ? n : a + split;
            float ms, ls = split_partial(part, scores, st, ckv, c, a, b, &ms);
            float nm = ms > M ? ms : M;
            float A = expf(M - nm), B = expf(ms - nm); /* A = 0 for the first split */
            L = L * A + ls * B;
            for (int i = 0; i < c; i++) o[i] = o[i] * A + part[i] * B;
            M = nm;
        }
        for (int i = 0; i < c; i++) o[i] = o[i] / L;
    }
}

int ld_dsv_hadamard(float *x, int n)
{
    if (n < 1 || (n & (n - 1))) return 0;
    for (int span = 1; span < n; span *= 2)
        for (int i = 0; i < n; i += 2 * span)
            for (int j = i; j < i + span; j++) {
                float a = x[j], b = x[j + span];
                x[j] = a + b;
                x[j + span] = a - b;
            }
    float s = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] = x[i] * s;
    return 1;
}

void ld_dsv_round_bf16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = ld_var_bf16_round(x[i]);
}

void ld_dsv_index_fp8(float *x, int rows, int dim)
{
    for (int r = 0; r < rows; r++) ld_dsv_hadamard(x + (size_t)r * (size_t)dim, dim);
    ld_var_fp8_act(x, x, rows, dim);
}
