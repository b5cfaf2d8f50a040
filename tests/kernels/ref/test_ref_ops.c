/* test_ref_ops.c - each plain-C reference kernel (kernels/ref/ref_ops.h)
 * against the naive formula in double precision on small random inputs,
 * the half-precision conversions on exact values, and the range splitting
 * the threads rely on (any split gives the same bits). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ops.h"

static uint32_t rng = 12345;

static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = frand();
}

static uint16_t to_bf16(float f) /* truncation: exact values for the test */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static double rel(const float *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static int test_ref_half_conversions(void)
{
    CHECK(ld_ref_f16_to_f32(0x3c00) == 1.0f);
    CHECK(ld_ref_f16_to_f32(0xc000) == -2.0f);
    CHECK(ld_ref_f16_to_f32(0x3555) == 0x1.554p-2f);
    CHECK(ld_ref_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(ld_ref_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    CHECK(ld_ref_f16_to_f32(0x0400) == 0x1p-14f);
    CHECK(ld_ref_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(isinf(ld_ref_f16_to_f32(0x7c00)) && ld_ref_f16_to_f32(0xfc00) < 0);
    CHECK(isnan(ld_ref_f16_to_f32(0x7e00)));
    float nz = ld_ref_f16_to_f32(0x8000);
    CHECK(nz == 0 && signbit(nz));
    CHECK(ld_ref_bf16_to_f32(0x3f80) == 1.0f && ld_ref_bf16_to_f32(0xc040) == -3.0f);
    CHECK(isinf(ld_ref_bf16_to_f32(0x7f80)));
    return 0;
}

static int test_ref_matmul(void)
{
    enum { T = 3, K = 37, N = 5 };
    float x[T * K], w[N * K], bias[N], out[T * N], out2[T * N], row[K];
    uint16_t wb[N * K];
    fill(x, T * K);
    fill(w, N * K);
    fill(bias, N);
    for (int i = 0; i < N * K; i++) {
        wb[i] = to_bf16(w[i]);
        w[i] = ld_ref_bf16_to_f32(wb[i]); /* so that both types hold the same values */
    }
    double ref[T * N];
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double a = bias[n];
            for (int k = 0; k < K; k++) a += (double)x[t * K + k] * w[n * K + k];
            ref[t * N + n] = a;
        }
    ld_ref_matmul(out, x, w, LD_KDT_F32, bias, LD_KDT_F32, T, K, N, row, 0, N);
    CHECK_MSG(rel(out, ref, T * N) < 1e-6, "%g", rel(out, ref, T * N));
    /* bf16 storage: the same bits as the f32 copy; split ranges: same bits */
    ld_ref_matmul(out2, x, wb, LD_KDT_BF16, bias, LD_KDT_F32, T, K, N, row, 0, 2);
    ld_ref_matmul(out2, x, wb, LD_KDT_BF16, bias, LD_KDT_F32, T, K, N, row, 2, N);
    CHECK(memcmp(out, out2, sizeof out) == 0);
    /* one token at a time gives the same bits as three */
    for (int t = 0; t < T; t++) {
        float o1[N];
        ld_ref_matmul(o1, x + t * K, w, LD_KDT_F32, bias, LD_KDT_F32, 1, K, N, row, 0, N);
        CHECK(memcmp(o1, out + t * N, sizeof o1) == 0);
    }
    /* f16 storage of small integers is exact */
    uint16_t wh[N * K];
    for (int i = 0; i < N * K; i++) {
        int v = (i * 7) % 11 - 5;
        w[i] = (float)v;
        wh[i] = v == 0 ? 0 : (uint16_t)((v < 0 ? 0x8000 : 0) | ((15 + (int)floor(log2(abs(v)))) << 10) |
                                       (uint16_t)((abs(v) * 1024 >> (int)floor(log2(abs(v)))) & 1023));
    }
    for (int i = 0; i < N * K; i++) CHECK(ld_ref_f16_to_f32(wh[i]) == w[i]);
    ld_ref_matmul(out, x, w, LD_KDT_F32, NULL, LD_KDT_F32, T, K, N, row, 0, N);
    ld_ref_matmul(out2, x, wh, LD_KDT_F16, NULL, LD_KDT_F32, T, K, N, row, 0, N);
    CHECK(memcmp(out, out2, sizeof out) == 0);
    return 0;
}

static int test_ref_rmsnorm_softmax_swiglu(void)
{
    enum { R = 3, D = 24 };
    float x[R * D], w[D], out[R * D];
    double ref[R * D];
    fill(x, R * D);
    fill(w, D);
    ld_ref_rmsnorm(out, x, w, LD_KDT_F32, D, 1e-5f, 0, R);
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[r * D + i] * x[r * D + i];
        double inv = 1 / sqrt(ss / D + 1e-5);
        for (int i = 0; i < D; i++) ref[r * D + i] = x[r * D + i] * inv * w[i];
    }
    CHECK(rel(out, ref, R * D) < 1e-6);
    /* in place, as Qwen3's q/k norm uses it */
    float y[R * D];
    memcpy(y, x, sizeof y);
    ld_ref_rmsnorm(y, y, w, LD_KDT_F32, D, 1e-5f, 0, R);
    CHECK(memcmp(y, out, sizeof y) == 0);

    ld_ref_softmax(out, x, D, 0, R);
    for (int r = 0; r < R; r++) {
        double mx = -1e300, s = 0;
        for (int i = 0; i < D; i++) mx = fmax(mx, x[r * D + i]);
        for (int i = 0; i < D; i++) s += exp(x[r * D + i] - mx);
        for (int i = 0; i < D; i++) ref[r * D + i] = exp(x[r * D + i] - mx) / s;
    }
    CHECK(rel(out, ref, R * D) < 1e-6);

    float g[D], u[D];
    fill(g, D);
    fill(u, D);
    ld_ref_swiglu(out, g, u, 0, D);
    for (int i = 0; i < D; i++) ref[i] = g[i] / (1 + exp(-(double)g[i])) * u[i];
    CHECK(rel(out, ref, D) < 1e-6);
    memcpy(y, x, sizeof y);
    ld_ref_add(y, g, 0, D);
    for (int i = 0; i < D; i++) CHECK(y[i] == x[i] + g[i]);
    return 0;
}

static int test_ref_rope(void)
{
    enum { T = 4, H = 2, HD = 8 };
    float x[T * H * HD], inv[HD / 2];
    double ref[T * H * HD];
    fill(x, T * H * HD);
    for (int i = 0; i < HD / 2; i++) inv[i] = (float)pow(100.0, -2.0 * i / HD);
    int pos0 = 5;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < HD / 2; i++) {
                const float *v = x + (t * H + h) * HD;
                double a = (double)(pos0 + t) * inv[i];
                ref[(t * H + h) * HD + i] = v[i] * cos(a) - v[i + HD / 2] * sin(a);
                ref[(t * H + h) * HD + i + HD / 2] = v[i + HD / 2] * cos(a) + v[i] * sin(a);
            }
    ld_ref_rope(x, H, HD, inv, pos0, 0, T);
    CHECK_MSG(rel(x, ref, T * H * HD) < 1e-6, "%g", rel(x, ref, T * H * HD));
    return 0;
}

static int attention_case(int window)
{
    enum { T = 3, P = 7, H = 4, KVH = 2, HD = 8 };
    int pos0 = P - T;
    float q[T * H * HD], k[P * KVH * HD], v[P * KVH * HD], out[T * H * HD], scores[P];
    double ref[T * H * HD];
    fill(q, T * H * HD);
    fill(k, P * KVH * HD);
    fill(v, P * KVH * HD);
    float scale = 1 / sqrtf(HD);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            int pos = pos0 + t, kh = h / (H / KVH), lo = window ? pos - window + 1 : 0;
            if (lo < 0) lo = 0;
            double s[P], mx = -1e300, sum = 0;
            for (int j = lo; j <= pos; j++) {
                double d = 0;
                for (int i = 0; i < HD; i++) d += (double)q[(t * H + h) * HD + i] * k[(j * KVH + kh) * HD + i];
                s[j] = d * scale;
                mx = fmax(mx, s[j]);
            }
            for (int j = lo; j <= pos; j++) sum += exp(s[j] - mx);
            for (int i = 0; i < HD; i++) {
                double o = 0;
                for (int j = lo; j <= pos; j++) o += exp(s[j] - mx) / sum * v[(j * KVH + kh) * HD + i];
                ref[(t * H + h) * HD + i] = o;
            }
        }
    ld_ref_attention(out, q, k, v, H, KVH, HD, pos0, window, scale, scores, 0, 5);
    ld_ref_attention(out, q, k, v, H, KVH, HD, pos0, window, scale, scores, 5, T * H);
    CHECK_MSG(rel(out, ref, T * H * HD) < 1e-6, "window %d: %g", window, rel(out, ref, T * H * HD));
    return 0;
}

static int test_ref_attention(void)
{
    return attention_case(0) || attention_case(3) || attention_case(1);
}

static int test_ref_embed(void)
{
    uint16_t table[4 * 3];
    for (int i = 0; i < 12; i++) table[i] = to_bf16((float)i);
    int32_t toks[2] = {3, 1};
    float out[6];
    ld_ref_embed(out, table, LD_KDT_BF16, 3, toks, 0, 2);
    CHECK(out[0] == 9 && out[2] == 11 && out[3] == 3 && out[5] == 5);
    return 0;
}

/* LD_KDT_F4B: packed E2M1 codes (the OCP MX spec's FP4 values, written
 * here from the spec: 0, 0.5, 1, 1.5, 2, 3, 4, 6, the sign the code's bit
 * 3), the low nibble first, times a block scale over a grid that does not
 * divide the matrix (3 x 10 in blocks of 2 x 4: a partial block each way);
 * through ld_ref_to_f32 at any offset, and a matmul of it equals the
 * matmul of the expanded fp32 matrix bitwise */
static int test_ref_f4b(void)
{
    static const float mx_fp4[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    enum { R = 3, C = 10, BR = 2, BC = 4, NBC = (C + BC - 1) / BC };
    uint8_t q[R * C / 2];
    float scale[((R + BR - 1) / BR) * NBC], expect[R * C];
    for (size_t i = 0; i < sizeof scale / sizeof scale[0]; i++) scale[i] = ldexpf(1.0f, (int)i - 2);
    for (int i = 0; i < R * C / 2; i++) q[i] = (uint8_t)(i * 37 + 11);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            int e = r * C + c, code = e % 2 ? q[e / 2] >> 4 : q[e / 2] & 15;
            float v = mx_fp4[code & 7] * (code & 8 ? -1.0f : 1.0f);
            expect[e] = v * scale[(r / BR) * NBC + c / BC];
        }
    ld_f8b f = {q, scale, R, C, BR, BC};
    CHECK(ld_ref_kdt_is_scaled(LD_KDT_F4B) && ld_ref_kdt_is_scaled(LD_KDT_F8B) && !ld_ref_kdt_is_scaled(LD_KDT_BF16));
    float got[R * C];
    for (int off = 0; off < R * C; off += 7) {
        int n = R * C - off < 7 ? R * C - off : 7;
        ld_ref_to_f32(got, &f, LD_KDT_F4B, (size_t)off, (size_t)n);
        CHECK(memcmp(got, expect + off, (size_t)n * sizeof *got) == 0);
    }
    float x[2 * C], o4[2 * R], o32[2 * R], row[C];
    fill(x, 2 * C);
    ld_ref_matmul(o4, x, &f, LD_KDT_F4B, NULL, LD_KDT_F32, 2, C, R, row, 0, R);
    ld_ref_matmul(o32, x, expect, LD_KDT_F32, NULL, LD_KDT_F32, 2, C, R, row, 0, R);
    CHECK(memcmp(o4, o32, sizeof o4) == 0);
    return 0;
}

/* LD_KDT_F8B through ld_ref_to_f32 (a table of the 256 codes per call)
 * equals the scalar converter times the block scale for every code, NaNs
 * included, at offsets that start inside a block */
static int test_ref_f8b_codes(void)
{
    enum { R = 2, C = 256, BR = 1, BC = 96, NBC = (C + BC - 1) / BC };
    uint8_t q[R * C];
    float scale[R * NBC], expect[R * C], got[R * C];
    for (int i = 0; i < R * C; i++) q[i] = (uint8_t)(i * 7 + 3);
    for (int i = 0; i < R * NBC; i++) scale[i] = ldexpf(1.0f, -i);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) expect[r * C + c] = ld_ref_fp8_e4m3_to_f32(q[r * C + c]) * scale[r * NBC + c / BC];
    ld_f8b f = {q, scale, R, C, BR, BC};
    for (int off = 0; off < R * C; off += 77) {
        int n = R * C - off < 150 ? R * C - off : 150;
        ld_ref_to_f32(got, &f, LD_KDT_F8B, (size_t)off, (size_t)n);
        CHECK(memcmp(got, expect + off, (size_t)n * sizeof *got) == 0);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_ref_f4b),
    LD_CASE(test_ref_f8b_codes),
    LD_CASE(test_ref_half_conversions),
    LD_CASE(test_ref_matmul),
    LD_CASE(test_ref_rmsnorm_softmax_swiglu),
    LD_CASE(test_ref_rope),
    LD_CASE(test_ref_attention),
    LD_CASE(test_ref_embed),
};

LD_TEST_MAIN(cases)
