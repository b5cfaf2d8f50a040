/* cuda_mock_ds4.c - the mock's DeepSeek-V4 ops (cuda_mock.c): attention, clamped SwiGLU, RoPE,
 * the head, the FP4 GEMV, the compressor, the fused launches */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_mock_internal.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "replay/run/replay_sample.h"

/* ---------------------------------------------------------------- DeepSeek-V4 */

/* cuda_ds4.cu's bound of any token's key count */
static int ds4_nk_max(int T, int pos0, int window, int ratio, int kpick, int has_ent)
{
    long long last = (long long)pos0 + T;
    long long nw = window < last ? window : last;
    if (nw < 0) nw = 0;
    long long nc = 0;
    if (has_ent) nc = kpick > 0 ? kpick : ratio > 0 ? last / ratio : 0;
    long long n = nw + nc;
    return n > 0x3fffffff ? 0x3fffffff : (int)n;
}

size_t ld_cu_ds4_attention_work(int v, int T, int H, int hd, int pos0, int window, int ratio, int kpick,
                                int has_entries)
{
    if (T <= 0 || H <= 0 || hd <= 0) return 0;
    int nk = ds4_nk_max(T, pos0, window, ratio, kpick, has_entries);
    if (v == LD_CU_REF) return Z(T, H) * ((size_t)nk + 1);
    return Z(T, H) * (size_t)((nk + 63) / 64) * ((size_t)hd + 2);
}

/* token t's key rows (the window in the ring, then the entries) into keys;
 * their number */
static int ds4_keys(const float **keys, const float *kv, int kv_rows, int window, const float *ent, int ratio,
                    const int32_t *picks, int kpick, int t, int p, int hd)
{
    int lo = p - window + 1 < 0 ? 0 : p - window + 1, n = 0;
    for (int pos = lo; window > 0 && pos <= p; pos++) keys[n++] = kv + Z(pos % kv_rows, hd);
    if (!ent) return n;
    if (picks) {
        const int32_t *pr = picks + Z(t, kpick);
        for (int c = 0; c < kpick && pr[c] >= 0; c++) keys[n++] = ent + Z(pr[c], hd);
    } else if (ratio > 0) {
        for (int c = 0; c < (p + 1) / ratio; c++) keys[n++] = ent + Z(c, hd);
    }
    return n;
}

/* the extent of the entries the picks (or the positions) read */
static size_t ds4_ent_rows(const int32_t *picks, int kpick, int T, int pos0, int ratio)
{
    if (!picks) return ratio > 0 ? ((size_t)pos0 + (size_t)T) / (size_t)ratio : 0;
    int32_t mx = -1;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < kpick && picks[Z(t, kpick) + (size_t)c] >= 0; c++)
            if (picks[Z(t, kpick) + (size_t)c] > mx) mx = picks[Z(t, kpick) + (size_t)c];
    return (size_t)(mx + 1);
}

static int ds4_attention(const char *fn, int v, float *out, const float *q, int T, int H, int hd, const float *kv,
                         int kv_rows, int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                         const float *sinks, float scale, int pos0, float *work, size_t work_floats)
{
    if (T <= 0 || H <= 0) return 0;
    if (hd <= 0 || pos0 < 0 || window < 0 || (window > 0 && (!kv || kv_rows < window)) ||
        (entries && !picks && ratio <= 0) || (picks && (!entries || kpick <= 0)))
        return E_INVAL;
    if (T > 65535 || (v != LD_CU_REF && hd > 512)) return E_INVAL;
    size_t need = ld_cu_ds4_attention_work(v, T, H, hd, pos0, window, ratio, picks ? kpick : 0, entries != NULL);
    if (work_floats < need) return E_INVAL;
    ld_mock_dev(fn, "work", work, need * FB);
    size_t QH = Z(H, hd);
    ld_mock_dev(fn, "out", out, Z(T, QH) * FB);
    ld_mock_dev(fn, "q", q, Z(T, QH) * FB);
    if (window > 0) ld_mock_dev(fn, "kv", kv, Z(kv_rows, hd) * FB);
    if (picks) ld_mock_dev(fn, "picks", picks, Z(T, kpick) * IB);
    if (entries) ld_mock_dev(fn, "entries", entries, ds4_ent_rows(picks, kpick, T, pos0, ratio) * (size_t)hd * FB);
    if (sinks) ld_mock_dev(fn, "sinks", sinks, Z(H, FB));
    int nk = ds4_nk_max(T, pos0, window, ratio, picks ? kpick : 0, entries != NULL);
    const float **keys = malloc(((size_t)nk + 1) * sizeof *keys);
    float *scores = malloc(((size_t)nk + 1) * FB);
    int e = keys && scores ? 0 : E_NOMEM;
    for (int t = 0; !e && t < T; t++) {
        int n = ds4_keys(keys, kv, kv_rows, window, entries, ratio, picks, kpick, t, pos0 + t, hd);
        ld_ref_ds4_attention(out + Z(t, QH), q + Z(t, QH), H, hd, keys, n, sinks, scale, scores);
    }
    free(keys);
    free(scores);
    return e;
}

int ld_cu_ds4_attention(int v, float *out, const float *q, int T, int H, int hd, const float *kv, int kv_rows,
                        int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                        const float *sinks, float scale, int pos0, float *work, size_t work_floats)
{
    ld_mock_count(__func__);
    return ds4_attention(__func__, v, out, q, T, H, hd, kv, kv_rows, window, entries, ratio, picks, kpick, sinks,
                         scale, pos0, work, work_floats);
}

/* the attention, then the inverse RoPE of each head's last rd values */
int ld_cu_ds4_attention_rope(float *out, const float *q, int T, int H, int hd, const float *kv, int kv_rows,
                             int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                             const float *sinks, float scale, int pos0, float *work, size_t work_floats,
                             ld_cu_rot rot, int *sync)
{
    ld_mock_count(__func__);
    if (T > 0 && H > 0 && (rot.rd < 0 || rot.rd % 2 || rot.rd > hd)) return E_INVAL;
    size_t ns = ld_cu_ds4_attention_sync(T, H);
    if (sync && ns) { /* the counts: device ints, zero (the kernel leaves them so) */
        ld_mock_dev(__func__, "sync", sync, ns * sizeof *sync);
        for (size_t i = 0; i < ns; i++)
            if (sync[i]) ld_mock_die(__func__, "sync", sync, ns * sizeof *sync, "holds a nonzero count");
    }
    int e = ds4_attention(__func__, LD_CU_CUSTOM, out, q, T, H, hd, kv, kv_rows, window, entries, ratio, picks,
                          kpick, sinks, scale, pos0, work, work_floats);
    if (e || T <= 0 || H <= 0 || !rot.rd) return e;
    ld_mock_dev(__func__, "rot.inv_freq", rot.inv_freq, (size_t)(rot.rd / 2) * FB);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            ld_ref_ds4_rope_ex(out + Z(t, Z(H, hd)) + Z(h, hd) + (size_t)(hd - rot.rd), 1, rot.rd, rot.rd,
                               rot.inv_freq, rot.af, pos0 + t, 1, rot.bf16_table);
    return 0;
}

int ld_cu_ds4_clamped_swiglu(int v, float *out, const float *g, const float *u, int T, int F, size_t ld, float limit)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || F <= 0) return 0;
    if (ld < (size_t)F) return E_INVAL;
    size_t span = Z(T - 1, ld) + (size_t)F;
    ld_mock_dev(__func__, "out", out, Z(T, F) * FB);
    ld_mock_dev(__func__, "g", g, span * FB);
    ld_mock_dev(__func__, "u", u, span * FB);
    for (int t = 0; t < T; t++)
        ld_ref_ds4_clamped_swiglu(out + Z(t, F), g + Z(t, ld), u + Z(t, ld), limit, (size_t)F);
    return 0;
}

int ld_cu_ds_rope(int v, float *x, int T, size_t row_stride, size_t off, int n_heads, size_t head_stride, int dim,
                  const float *inv_freq, float attn_factor, int interleave, int pos0, int inverse, int bf16_table)
{
    (void)v;
    ld_mock_count(__func__);
    if (T <= 0 || n_heads <= 0 || dim <= 0) return 0;
    if (dim % 2 || pos0 < 0) return E_INVAL;
    ld_mock_dev(__func__, "x", x, (Z(T - 1, row_stride) + off + Z(n_heads - 1, head_stride) + (size_t)dim) * FB);
    ld_mock_dev(__func__, "inv_freq", inv_freq, (size_t)(dim / 2) * FB);
    if (!inverse) {
        ld_ref_ds_rope_ex(x, row_stride, off, n_heads, head_stride, dim, inv_freq, attn_factor, interleave, pos0,
                          bf16_table, 0, (size_t)T);
        return 0;
    }
    if (!interleave) ld_mock_die(__func__, "x", x, 0, "inverse RoPE of the rotate_half layout (V4's is interleaved)");
    for (int t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++)
            ld_ref_ds4_rope_ex(x + Z(t, row_stride) + off + Z(h, head_stride), 1, dim, dim, inv_freq, attn_factor,
                               pos0 + t, 1, bf16_table);
    return 0;
}

size_t ld_cu_hc_head_work(int T, int N)
{
    return T > 0 && N > 0 ? Z(T, 1 + N) : 0;
}

/* the head's checks and collapse (T > 0, N and D checked) */
static int hc_head_body(const char *fn_name, float *out, const float *X, int T, int N, int D, const float *fn,
                        const float *base, float scale, float norm_eps, float hc_eps)
{
    size_t n = (size_t)N, d = (size_t)D;
    ld_mock_dev(fn_name, "out", out, Z(T, d) * FB);
    ld_mock_dev(fn_name, "X", X, Z(T, n * d) * FB);
    ld_mock_dev(fn_name, "fn", fn, n * n * d * FB);
    ld_mock_dev(fn_name, "base", base, n * FB);
    float *scratch = malloc((n * d + n) * FB);
    if (!scratch) return E_NOMEM;
    for (int t = 0; t < T; t++)
        ld_ref_ds4_hc_head(out + Z(t, d), X + Z(t, n * d), N, D, fn, base, scale, norm_eps, hc_eps, scratch);
    free(scratch);
    return 0;
}

int ld_cu_ds4_hc_head(int v, float *out, const float *X, int T, int N, int D, const float *fn, const float *base,
                      float scale, float norm_eps, float hc_eps, float *work, size_t work_floats)
{
    ld_mock_count(__func__);
    if (T <= 0) return 0;
    if (N <= 0 || N > 64 || D <= 0) return E_INVAL;
    if (v == LD_CU_REF) {
        if (work_floats < ld_cu_hc_head_work(T, N)) return E_INVAL;
        ld_mock_dev(__func__, "work", work, work_floats * FB);
    }
    return hc_head_body(__func__, out, X, T, N, D, fn, base, scale, norm_eps, hc_eps);
}

int ld_cu_ds4_hc_head_norm(float *out, const float *X, int T, int N, int D, const float *fn, const float *base,
                           float scale, float norm_eps, float hc_eps, const void *w, int w_dt, float eps,
                           float *normed)
{
    ld_mock_count(__func__);
    if (T <= 0) return 0;
    if (N <= 0 || N > 64 || D <= 0 || w_dt < LD_KDT_F32 || w_dt > LD_KDT_BF16 || !normed) return E_INVAL;
    int e = hc_head_body(__func__, out, X, T, N, D, fn, base, scale, norm_eps, hc_eps);
    if (e) return e;
    ld_mock_norm_rows(__func__, normed, out, w, (ld_kdt)w_dt, D, eps, T);
    return 0;
}

int ld_cu_ds4_fp4_matmul(int v, float *out, const float *x, const uint8_t *q, const void *scale, int scale_e8m0,
                         int T, int K, int N, int sr, int sc)
{
    ld_mock_count(__func__);
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || K % 2 || sr <= 0 || sc <= 0 || N % sr || K % sc) return E_INVAL;
    if (v != LD_CU_REF && (T + 7) / 8 > 65535) return E_INVAL;
    size_t ns = Z(sr, sc);
    ld_mock_dev(__func__, "out", out, Z(T, N) * FB);
    ld_mock_dev(__func__, "x", x, Z(T, K) * FB);
    ld_mock_dev(__func__, "q", q, Z(N, K / 2));
    ld_mock_dev(__func__, "scale", scale, ns * (scale_e8m0 ? 1 : FB));
    float *s = malloc(ns * FB);
    if (!s) return E_NOMEM;
    for (size_t i = 0; i < ns; i++)
        s[i] = scale_e8m0 ? ld_ref_ds4_e8m0_to_f32(((const uint8_t *)scale)[i]) : ((const float *)scale)[i];
    ld_f8b w = {q, s, N, K, N / sr, K / sc};
    int e = ld_mock_scaled_mm(out, x, &w, LD_KDT_F4B, T, K, N);
    free(s);
    return e;
}

/* one group of a grouped GEMM: its ranges checked, its rows computed
 * into its output (into [rows][N] instead when not NULL) */
static int group_rows(const char *fn, const ld_cu_mm_group *t, int max_rows, int K, int N, int br, int bc, ld_kdt dt,
                      float *into)
{
    if (t->rows > max_rows) ld_mock_die(fn, "tab", t, sizeof *t, "has a group of more rows than max_rows");
    if (t->n < 0 || t->n > N) ld_mock_die(fn, "tab", t, sizeof *t, "has a group wider than N");
    if (t->rows <= 0) return 0;
    if (t->n) N = t->n; /* the group's own columns */
    size_t qrow = dt == LD_KDT_F4B ? (size_t)K / 2 : (size_t)K;
    size_t ldx = t->ldx ? t->ldx : (size_t)K, ldo = t->ldo ? t->ldo : (size_t)N;
    if (ldx < (size_t)K || ldo < (size_t)N) ld_mock_die(fn, "tab", t, sizeof *t, "has a row stride below its row");
    ld_mock_dev(fn, "group out", t->out, (Z(t->rows - 1, 1) * ldo + (size_t)N) * FB);
    if (t->xrows) { /* each picked row inside x's allocation */
        ld_mock_dev(fn, "group xrows", t->xrows, Z(t->rows, IB));
        for (int r = 0; r < t->rows; r++) {
            if (t->xrows[r] < 0) ld_mock_die(fn, "group xrows", t->xrows, Z(t->rows, IB), "holds a negative row");
            ld_mock_dev(fn, "group x", t->x, (Z(t->xrows[r], 1) * ldx + (size_t)K) * FB);
        }
    } else {
        ld_mock_dev(fn, "group x", t->x, (Z(t->rows - 1, 1) * ldx + (size_t)K) * FB);
    }
    ld_mock_dev(fn, "group q", t->q, Z(N, qrow));
    ld_mock_dev(fn, "group scale", t->scale, ld_mock_f8b_grid(N, K, br, bc) * FB);
    ld_f8b w = {t->q, t->scale, N, K, br, bc};
    float *out = into ? into : t->out;
    size_t ld = into ? (size_t)N : ldo;
    for (int r = 0; r < t->rows; r++) { /* a row at a time: the strides */
        const float *xr = t->x + (t->xrows ? (size_t)t->xrows[r] : (size_t)r) * ldx;
        int e = ld_mock_scaled_mm(out + (size_t)r * ld, xr, &w, dt, 1, K, N);
        if (e) return e;
    }
    return 0;
}

/* the grouped GEMMs: the table in device memory, no group over max_rows
 * (the grid would miss its rows: abort), each group's ranges inside
 * allocations, then each group as its own launcher's formula */
static int grouped_mm(const char *fn, const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                      ld_kdt dt)
{
    if (max_rows < 0 || (max_rows + 7) / 8 > 65535) return E_INVAL;
    ld_mock_dev(fn, "tab", tab, Z(G, sizeof *tab));
    for (int g = 0; g < G; g++) {
        int e = group_rows(fn, &tab[g], max_rows, K, N, br, bc, dt, NULL);
        if (e) return e;
    }
    return 0;
}

int ld_cu_grouped_fp8_matmul(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc)
{
    ld_mock_count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0 || G > 65535) return E_INVAL;
    return grouped_mm(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F8B);
}

/* the grouped launch, then each normed group's rows in place */
int ld_cu_grouped_fp8_matmul_norm(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                                  const ld_cu_norm_w *norms, float eps, int *sync)
{
    ld_mock_count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (G > LD_CU_FAN_MAX || K <= 0 || br <= 0 || bc <= 0 || !sync) return E_INVAL;
    size_t ns = (size_t)(max_rows + 7) / 8;
    if (ns) ld_mock_dev(__func__, "sync", sync, ns * sizeof *sync);
    for (size_t i = 0; i < ns; i++)
        if (sync[i]) ld_mock_die(__func__, "sync", sync, ns * sizeof *sync, "holds a nonzero count");
    int e = grouped_mm(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F8B);
    for (int g = 0; !e && g < G; g++) {
        const ld_cu_mm_group *t = &tab[g];
        if (!norms[g].w || t->rows <= 0) continue;
        if (norms[g].dt != LD_KDT_F32 && norms[g].dt != LD_KDT_F16 && norms[g].dt != LD_KDT_BF16) return E_INVAL;
        int n = t->n ? t->n : N;
        size_t ldo = t->ldo ? t->ldo : (size_t)n;
        ld_mock_dev(__func__, "norm w", norms[g].w, ld_cu_row_bytes(norms[g].dt, n));
        for (int r = 0; r < t->rows; r++)
            ld_ref_rmsnorm(t->out + (size_t)r * ldo, t->out + (size_t)r * ldo, norms[g].w, norms[g].dt, n, eps, 0, 1);
    }
    return e;
}

int ld_cu_grouped_fp4_matmul(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc)
{
    ld_mock_count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || K % 2 || br <= 0 || bc <= 0 || N % br || K % bc || G > 65535) return E_INVAL;
    return grouped_mm(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F4B);
}

/* each gate/up pair: the gate's rows into its output, the up's into a
 * host row block (the kernel never writes the ups' outputs), then the
 * clamped SwiGLU of the two into the gate's rows */
static int grouped_glu(const char *fn, const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                       ld_kdt dt, float limit)
{
    if (max_rows < 0 || (max_rows + 7) / 8 > 65535) return E_INVAL;
    ld_mock_dev(fn, "tab", tab, Z(2 * G, sizeof *tab));
    for (int k = 0; k < G; k++) {
        const ld_cu_mm_group *g = &tab[k], *u = &tab[G + k];
        if (g->rows <= 0) continue;
        if (u->rows != g->rows || u->x != g->x || u->n != g->n || u->xrows != g->xrows)
            ld_mock_die(fn, "tab", g, sizeof *g, "pairs a gate and an up of other rows or widths");
        int n = g->n > 0 && g->n <= N ? g->n : N;
        float *up = malloc(Z(g->rows, n) * FB);
        if (!up) return E_NOMEM;
        int e = group_rows(fn, g, max_rows, K, N, br, bc, dt, NULL);
        if (!e) e = group_rows(fn, u, max_rows, K, N, br, bc, dt, up);
        size_t lg = g->ldo ? g->ldo : (size_t)n;
        for (int r = 0; !e && r < g->rows; r++)
            ld_ref_ds4_clamped_swiglu(g->out + (size_t)r * lg, g->out + (size_t)r * lg, up + Z(r, n), limit, (size_t)n);
        free(up);
        if (e) return e;
    }
    return 0;
}

int ld_cu_grouped_fp8_glu(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc, float limit)
{
    ld_mock_count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0 || G > 65535) return E_INVAL;
    return grouped_glu(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F8B, limit);
}

int ld_cu_grouped_fp4_glu(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc, float limit)
{
    ld_mock_count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || K % 2 || br <= 0 || bc <= 0 || N % br || K % bc || G > 65535) return E_INVAL;
    return grouped_glu(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F4B, limit);
}

/* each part as the grouped GLU of its kind */
int ld_cu_grouped_glu2(ld_cu_moe_part a, ld_cu_moe_part b, int max_rows, int K, float limit)
{
    ld_mock_count(__func__);
    const ld_cu_moe_part *ps[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        const ld_cu_moe_part *p = ps[i];
        if (!p->G) continue;
        if (p->G < 0 || p->N <= 0 || K <= 0 || p->br <= 0 || p->bc <= 0 || (p->fp4 && (K % 2 || K % p->bc)))
            return E_INVAL;
        int e = grouped_glu(__func__, p->tab, p->G, max_rows, K, p->N, p->br, p->bc, p->fp4 ? LD_KDT_F4B : LD_KDT_F8B,
                            limit);
        if (e) return e;
    }
    return 0;
}

/* the grouped downs, then the shared down with the combine and hc_post
 * (matmul_post: counted as this launch only) */
int ld_cu_moe_down_post(ld_cu_moe_part r, int Kr, const float *x, const uint8_t *q, const float *scale, int T, int Ks,
                        int br, int bc, ld_cu_combine c, ld_cu_post p)
{
    ld_mock_count(__func__);
    if (T <= 0 || r.N <= 0) return 0;
    if (r.G < 0 || Kr <= 0 || Ks <= 0 || br <= 0 || bc <= 0 || r.br <= 0 || r.bc <= 0 || (r.fp4 && Kr % 2) ||
        p.N <= 0 || c.K < 0 || !c.eo || !c.w)
        return E_INVAL;
    int most = 0; /* the kernel walks every group's rows: no bound of its grid */
    if (r.G) ld_mock_dev(__func__, "r.tab", r.tab, Z(r.G, sizeof *r.tab));
    for (int g = 0; g < r.G; g++) most = r.tab[g].rows > most ? r.tab[g].rows : most;
    int e = r.G ? grouped_mm(__func__, r.tab, r.G, most, Kr, r.N, r.br, r.bc, r.fp4 ? LD_KDT_F4B : LD_KDT_F8B) : 0;
    return e ? e : ld_mock_matmul_post(__func__, x, q, scale, T, Ks, r.N, br, bc, p, &c);
}

int ld_cu_moe_tables(ld_cu_mm_group *tab, int G, const int32_t *offsets, const ld_cu_moe_w *w, int E, const float *xe,
                     const int32_t *xrows, float *g, float *u, float *eo, int D, int I)
{
    ld_mock_count(__func__);
    if (G <= 0) return 0;
    if (E <= 0 || E > 1024 || D <= 0 || I <= 0) return E_INVAL;
    ld_mock_dev(__func__, "tab", tab, Z(3 * G, sizeof *tab));
    ld_mock_dev(__func__, "offsets", offsets, ((size_t)E + 1) * IB);
    ld_mock_dev(__func__, "w", w, Z(E, sizeof *w));
    int k = 0;
    for (int e = 0; e < E; e++) {
        int r0 = offsets[e], cnt = offsets[e + 1] - r0;
        if (cnt <= 0) continue;
        if (k == G) ld_mock_die(__func__, "offsets", offsets, 0, "name more experts with rows than G");
        size_t rd = Z(r0, D), ri = Z(r0, I);
        const float *xg = xrows ? xe : xe + rd; /* picked rows, or gathered */
        const int32_t *xr = xrows ? xrows + r0 : NULL;
        tab[k] = (ld_cu_mm_group){w[e].gate_q, w[e].gate_s, xg, g + ri, cnt, 0, 0, 0, xr};
        tab[G + k] = (ld_cu_mm_group){w[e].up_q, w[e].up_s, xg, u + ri, cnt, 0, 0, 0, xr};
        tab[2 * G + k] = (ld_cu_mm_group){w[e].down_q, w[e].down_s, g + ri, eo + rd, cnt, 0, 0, 0, NULL};
        k++;
    }
    ld_cu_mm_group none = {NULL, NULL, NULL, NULL, 0, 0, 0, 0, NULL};
    for (; k < G; k++) tab[k] = tab[G + k] = tab[2 * G + k] = none;
    return 0;
}

/* a ring's window as the absolute rows the C reference reads: entry w's
 * slots are positions (w - 1) r .. (w + 1) r - 1 at most, copied from the
 * ring into rows [ (w - 1) r, ..) of a scratch array the reference then
 * indexes by position (below those rows: never read) */
static float *ring_window(const float *ring_rows, int ring, int r, size_t stride, int w, size_t width)
{
    size_t rows = Z(w + 1, r);
    float *abs_rows = calloc(rows * stride, FB);
    if (!abs_rows) return NULL;
    size_t p0 = w > 0 ? Z(w - 1, r) : 0;
    for (size_t p = p0; p < rows; p++)
        memcpy(abs_rows + p * stride, ring_rows + (p % (size_t)ring) * stride, width * FB);
    return abs_rows;
}

int ld_cu_ds4_compress(int v, float *out, const float *kv, const float *gate, const float *ape, int r, int d,
                       size_t stride, int overlap, int w0, int nw, int ring)
{
    (void)v;
    ld_mock_count(__func__);
    if (nw <= 0 || d <= 0) return 0;
    if (r <= 0 || w0 < 0 || stride < (size_t)(overlap ? 2 * d : d) || nw > 65535) return E_INVAL;
    if (ring && (ring < 2 * r || nw > 1)) return E_INVAL;
    size_t width = (size_t)(overlap ? 2 * d : d), rows = Z(w0 + nw, r);
    if (ring) {
        ld_mock_dev(__func__, "out", out, Z(1, d) * FB);
        ld_mock_dev(__func__, "kv ring", kv, (Z(ring - 1, 1) * stride + width) * FB);
        ld_mock_dev(__func__, "gate ring", gate, (Z(ring - 1, 1) * stride + width) * FB);
        ld_mock_dev(__func__, "ape", ape, (Z(r - 1, 1) * stride + width) * FB);
        float *k = ring_window(kv, ring, r, stride, w0, width), *g = ring_window(gate, ring, r, stride, w0, width);
        if (k && g) ld_ref_ds4_compress(out, k, g, ape, r, d, stride, overlap, w0);
        free(k);
        free(g);
        return k && g ? 0 : E_NOMEM;
    }
    ld_mock_dev(__func__, "out", out, Z(nw, d) * FB);
    ld_mock_dev(__func__, "kv", kv, (Z(rows - 1, 1) * stride + width) * FB);
    ld_mock_dev(__func__, "gate", gate, (Z(rows - 1, 1) * stride + width) * FB);
    ld_mock_dev(__func__, "ape", ape, (Z(r - 1, 1) * stride + width) * FB);
    for (int i = 0; i < nw; i++) ld_ref_ds4_compress(out + Z(i, d), kv, gate, ape, r, d, stride, overlap, w0 + i);
    return 0;
}

int ld_cu_ds4_qkv(float *q, float *kvc, const float *kv, int T, int H, int hd, int kv_rows, int pos0, float eps,
                  const float *inv_freq, float attn_factor, int rd, int bf16_table)
{
    ld_mock_count(__func__);
    if (T <= 0 || H <= 0 || hd <= 0) return 0;
    if (rd < 0 || rd % 2 || rd > hd || pos0 < 0 || kv_rows < T) return E_INVAL;
    ld_mock_dev(__func__, "q", q, Z(T, H) * (size_t)hd * FB);
    ld_mock_dev(__func__, "kvc", kvc, Z(kv_rows, hd) * FB);
    ld_mock_dev(__func__, "kv", kv, Z(T, hd) * FB);
    ld_mock_dev(__func__, "inv_freq", inv_freq, (size_t)(rd / 2) * FB);
    float *ones = malloc(Z(hd, FB));
    if (!ones) return E_NOMEM;
    for (int i = 0; i < hd; i++) ones[i] = 1.0f;
    ld_ref_rmsnorm(q, q, ones, LD_KDT_F32, hd, eps, 0, Z(T, H));
    free(ones);
    size_t off = (size_t)(hd - rd);
    ld_ref_ds_rope_ex(q, Z(H, hd), off, H, (size_t)hd, rd, inv_freq, attn_factor, 1, pos0, bf16_table, 0, (size_t)T);
    for (int t = 0; t < T; t++) {
        float *row = kvc + Z((pos0 + t) % kv_rows, hd);
        memcpy(row, kv + Z(t, hd), Z(hd, FB));
        ld_ref_ds_rope_ex(row, (size_t)hd, off, 1, (size_t)hd, rd, inv_freq, attn_factor, 1, pos0 + t, bf16_table, 0,
                          1);
    }
    return 0;
}

int ld_cu_ds4_route_plan_tables(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                                const int32_t *tokens, int T, int E, int K, float scale, int32_t *offsets,
                                int32_t *rows, int32_t *row_of, ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw,
                                const float *xe, int pick, float *g, float *u, float *eo, int D, int I)
{
    ld_mock_count(__func__);
    if (T <= 0) return 0;
    if (E <= 0 || E > LD_CU_ROUTE_FUSED_E || K < 1 || K > E || K > 64 || (tid2eid && !tokens) ||
        T > LD_CU_ROUTE_FUSED_T || G <= 0 || D <= 0 || I <= 0)
        return E_INVAL;
    /* the three launchers it stands for, in order (each counted too) */
    int e = ld_cu_ds4_route(LD_CU_CUSTOM, idx, w, logits, bias, tid2eid, tokens, T, E, K, scale);
    if (!e) e = ld_cu_moe_plan(LD_CU_CUSTOM, offsets, rows, row_of, idx, T, K, E);
    if (!e) e = ld_cu_moe_tables(tab, G, offsets, mw, E, xe, pick ? rows : NULL, g, u, eo, D, I);
    return e;
}

int ld_cu_ds4_router_route_plan_tables(const ld_cu_router *r, int32_t *idx, float *w, const float *bias,
                                       const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, float scale,
                                       int32_t *offsets, int32_t *rows, int32_t *row_of, ld_cu_mm_group *tab, int G,
                                       const ld_cu_moe_w *mw, const float *xe, int pick, float *g, float *u,
                                       float *eo, int D, int I)
{
    ld_mock_count(__func__);
    if (T <= 0) return 0;
    if (r->K <= 0 || !r->sync || (r->dt != LD_KDT_F32 && r->dt != LD_KDT_F16 && r->dt != LD_KDT_BF16)) return E_INVAL;
    ld_mock_dev(__func__, "sync", r->sync, sizeof *r->sync);
    /* the two launchers it stands for, in order (each counted too) */
    int e = ld_cu_matmul(LD_CU_CUSTOM, r->logits, r->x, r->w, r->dt, NULL, LD_KDT_F32, T, r->K, E, 0);
    if (!e)
        e = ld_cu_ds4_route_plan_tables(idx, w, r->logits, bias, tid2eid, tokens, T, E, K, scale, offsets, rows,
                                        row_of, tab, G, mw, xe, pick, g, u, eo, D, I);
    return e;
}

int ld_cu_ds4_index_pick(int32_t *sel, float *scores, float *q, const float *w, const float *keys, int T, int H,
                         int dim, int n, int k, float qscale, float wscale, const ld_cu_rot *rot, int pos0, int *sync)
{
    ld_mock_count(__func__);
    if (T <= 0 || k <= 0) return 0;
    if (H <= 0 || dim <= 0 || dim > 256 || (size_t)H * (size_t)dim > LD_CU_INDEX_PICK_QW || n <= 0 || T > 65535 ||
        rot->rd < 0 || rot->rd % 2 || rot->rd > dim || pos0 < 0 || !sync)
        return E_INVAL;
    ld_mock_dev(__func__, "sync", sync, (size_t)T * sizeof *sync);
    /* the three launchers it stands for, in order (each counted too) */
    size_t QW = (size_t)H * (size_t)dim;
    int e = ld_cu_ds_rope(LD_CU_CUSTOM, q, T, QW, (size_t)(dim - rot->rd), H, (size_t)dim, rot->rd, rot->inv_freq,
                          rot->af, 1, pos0, 0, rot->bf16_table);
    if (!e) e = ld_cu_index_scores(LD_CU_CUSTOM, 1, scores, q, w, keys, T, H, dim, n, qscale, wscale);
    if (!e) e = ld_cu_topk(LD_CU_CUSTOM, sel, scores, T, n, n, -1, k);
    return e;
}

int ld_cu_ring_put2(float *ra, float *rb, const float *a, const float *b, size_t W, int ring, int p0, int n)
{
    ld_mock_count(__func__);
    if (n <= 0 || W == 0) return 0;
    if (ring <= 0 || n > ring || p0 < 0) return E_INVAL;
    ld_mock_dev(__func__, "ring a", ra, Z(ring, W) * FB);
    ld_mock_dev(__func__, "ring b", rb, Z(ring, W) * FB);
    ld_mock_dev(__func__, "a", a, Z(n, W) * FB);
    ld_mock_dev(__func__, "b", b, Z(n, W) * FB);
    for (int t = 0; t < n; t++) {
        size_t row = ((size_t)p0 + (size_t)t) % (size_t)ring;
        memcpy(ra + row * W, a + Z(t, W), W * FB);
        memcpy(rb + row * W, b + Z(t, W), W * FB);
    }
    return 0;
}

int ld_cu_ds_layernorm(int v, float *x, int rows, size_t row_stride, const float *w, const float *b, int dim, float eps)
{
    (void)v;
    ld_mock_count(__func__);
    if (rows <= 0 || dim <= 0) return 0;
    if (row_stride < (size_t)dim) return E_INVAL;
    ld_mock_dev(__func__, "x", x, (Z(rows - 1, 1) * row_stride + (size_t)dim) * FB);
    ld_mock_dev(__func__, "w", w, Z(dim, FB));
    ld_mock_dev(__func__, "b", b, Z(dim, FB));
    ld_ref_ds_layernorm(x, row_stride, w, b, dim, eps, 0, (size_t)rows);
    return 0;
}
