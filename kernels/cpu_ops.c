/* cpu_ops.c - see cpu_ops.h.  Two implementations of one arithmetic: the
 * portable C twin (fmaf on arrays of eight lanes) and, on x86-64, AVX2 with
 * FMA and F16C (the same lanes in one register).  Each works on a tile of
 * up to TILE tokens per pass over a weight row, so a prefill reads and
 * decodes each weight block once per tile; a token's result does not
 * depend on the tile it is in. */
#include "cpu_ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ref_quant.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LD_CPU_X86 1
#include <immintrin.h>
#define AVX __attribute__((target("avx2,fma,f16c")))
#define AVX_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#endif

#define TILE 4 /* tokens per pass over a weight row */
#define QB 32  /* elements per block of the Q4_0 / Q4_1 / Q8_0 types */

static int is_q32(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 || dt == LD_KDT_Q4_1 || dt == LD_KDT_Q8_0;
}

static size_t q32_bytes(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 ? 18 : dt == LD_KDT_Q4_1 ? 20 : 34;
}

static int is_q4(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 || dt == LD_KDT_Q4_1;
}

size_t ld_cpu_matmul_scratch(ld_kdt dt, int T, int K)
{
    (void)T;
    return is_q32(dt) ? 1 : (size_t)K;
}

size_t ld_cpu_matmul_prep_size(ld_kdt dt, int T, int K)
{
    size_t tk = (size_t)T * (size_t)K;
    return dt == LD_KDT_Q4_1 ? tk + tk / QB : dt == LD_KDT_Q4_0 ? tk : 0;
}

/* The element of a block of 32 in lane l of group g (cpu_ops.h): for the
 * Q4 types the layout a broadcast 32-bit word of nibbles gives without
 * shuffles, bytes 4g..4g+3's low nibbles then their high nibbles. */
static int lane_elem(ld_kdt dt, int g, int l)
{
    if (!is_q4(dt)) return 8 * g + l;
    return l < 4 ? 4 * g + l : 16 + 4 * g + (l - 4);
}

/* the weight row holding output n (see ld_ref_matmul_ex) */
static size_t src_row(size_t n, int rope_hd)
{
    if (rope_hd <= 0) return n;
    size_t hd = (size_t)rope_hd, h = n / hd, r = n % hd;
    return h * hd + 2 * (r % (hd / 2)) + r / (hd / 2);
}

static float hsum8(const float *a)
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* xs[t][b] = the sum of block b of row t (cpu_ops.h), for Q4_1's offsets:
 * over x in its own order */
static void block_sums(float *xs, const float *x, int T, int K)
{
    int nb = K / QB;
    for (int t = 0; t < T; t++)
        for (int b = 0; b < nb; b++) {
            const float *v = x + (size_t)t * (size_t)K + (size_t)b * QB;
            float lane[8];
            for (int l = 0; l < 8; l++) lane[l] = ((v[l] + v[8 + l]) + v[16 + l]) + v[24 + l];
            xs[(size_t)t * (size_t)nb + (size_t)b] = hsum8(lane);
        }
}

void ld_cpu_matmul_prep(float *prep, const float *x, ld_kdt dt, int T, int K)
{
    if (!is_q4(dt)) return;
    size_t nblk = (size_t)T * (size_t)(K / QB);
    for (size_t b = 0; b < nblk; b++)
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 8; l++) prep[b * QB + (size_t)(8 * g + l)] = x[b * QB + (size_t)lane_elem(dt, g, l)];
    if (dt == LD_KDT_Q4_1) block_sums(prep + (size_t)T * (size_t)K, x, T, K);
}

static uint16_t le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

/* ---------------------------------------------------------------- portable */

/* block `b` of a Q4_0 / Q4_1 / Q8_0 row: its integers as floats, d and m */
static void q32_decode(const unsigned char *b, ld_kdt dt, float q[QB], float *d, float *m)
{
    *d = ld_ref_f16_to_f32(le16(b));
    *m = 0.0f;
    if (dt == LD_KDT_Q8_0) {
        for (int j = 0; j < QB; j++) q[j] = (float)(int8_t)b[2 + j];
        return;
    }
    const unsigned char *qs = b + 2;
    int off = 0;
    if (dt == LD_KDT_Q4_1) {
        *m = ld_ref_f16_to_f32(le16(b + 2));
        qs = b + 4;
    } else {
        off = 8;
    }
    for (int j = 0; j < 16; j++) {
        q[j] = (float)((qs[j] & 15) - off);
        q[j + 16] = (float)((qs[j] >> 4) - off);
    }
}

static void q32_tile_portable(float *out, const float *x, const float *xs, const unsigned char *wrow, ld_kdt dt,
                              int t0, int tn, int K, int N, size_t n, float bias)
{
    float acc[TILE][8] = {{0}}, macc[TILE] = {0};
    int nb = K / QB;
    size_t bytes = q32_bytes(dt);
    for (int b = 0; b < nb; b++) {
        float q[QB], d, m;
        q32_decode(wrow + (size_t)b * bytes, dt, q, &d, &m);
        for (int tt = 0; tt < tn; tt++) {
            const float *xv = x + (size_t)(t0 + tt) * (size_t)K + (size_t)b * QB; /* in lane order */
            float s[8] = {0};
            for (int g = 0; g < 4; g++)
                for (int l = 0; l < 8; l++) s[l] = fmaf(q[lane_elem(dt, g, l)], xv[8 * g + l], s[l]);
            for (int l = 0; l < 8; l++) acc[tt][l] = fmaf(d, s[l], acc[tt][l]);
            if (dt == LD_KDT_Q4_1) macc[tt] = fmaf(m, xs[(size_t)(t0 + tt) * (size_t)nb + (size_t)b], macc[tt]);
        }
    }
    for (int tt = 0; tt < tn; tt++) out[(size_t)(t0 + tt) * (size_t)N + n] = (hsum8(acc[tt]) + macc[tt]) + bias;
}

static void plain_tile_portable(float *out, const float *x, const float *wr, int t0, int tn, int K, int N, size_t n,
                                float bias)
{
    int k8 = K - K % 8;
    for (int tt = 0; tt < tn; tt++) {
        const float *xr = x + (size_t)(t0 + tt) * (size_t)K;
        float acc[8] = {0}, tail = 0.0f;
        for (int k = 0; k < k8; k += 8)
            for (int l = 0; l < 8; l++) acc[l] = fmaf(wr[k + l], xr[k + l], acc[l]);
        for (int k = k8; k < K; k++) tail = fmaf(wr[k], xr[k], tail);
        out[(size_t)(t0 + tt) * (size_t)N + n] = (hsum8(acc) + tail) + bias;
    }
}

/* the plain-row dot product of cpu_ops.h: eight lanes, a tail, hsum8 */
static float dot_portable(const float *a, const float *b, int n)
{
    int n8 = n - n % 8;
    float acc[8] = {0}, tail = 0.0f;
    for (int k = 0; k < n8; k += 8)
        for (int l = 0; l < 8; l++) acc[l] = fmaf(a[k + l], b[k + l], acc[l]);
    for (int k = n8; k < n; k++) tail = fmaf(a[k], b[k], tail);
    return hsum8(acc) + tail;
}

/* o[i] = fma(p, v[i], o[i]) */
static void axpy_portable(float *o, float p, const float *v, int n)
{
    for (int i = 0; i < n; i++) o[i] = fmaf(p, v[i], o[i]);
}

/* ---------------------------------------------------------------- AVX2 */
#ifdef LD_CPU_X86

AVX_INLINE float hsum8_avx(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* a0+a4 .. a3+a7 */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                         /* (02)(13) */
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

AVX_INLINE void q32_decode_avx(const unsigned char *b, ld_kdt dt, __m256 q[4], float *d, float *m)
{
    *d = _cvtsh_ss(le16(b));
    *m = 0.0f;
    if (dt == LD_KDT_Q8_0) {
        for (int g = 0; g < 4; g++)
            q[g] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * g))));
        return;
    }
    /* a broadcast word of 4 bytes, each lane shifting its nibble down:
     * lane_elem's order, with no cross-lane shuffle */
    const __m256i shifts = _mm256_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28), m15 = _mm256_set1_epi32(15);
    const unsigned char *qs = b + (dt == LD_KDT_Q4_1 ? 4 : 2);
    if (dt == LD_KDT_Q4_1) *m = _cvtsh_ss(le16(b + 2));
    for (int g = 0; g < 4; g++) {
        int32_t word;
        memcpy(&word, qs + 4 * g, sizeof word);
        __m256i v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(word), shifts), m15);
        if (dt == LD_KDT_Q4_0) v = _mm256_sub_epi32(v, _mm256_set1_epi32(8));
        q[g] = _mm256_cvtepi32_ps(v);
    }
}

/* dt and tn are constants at each call site (q32_tile_avx), so the block
 * type's branches fold away and acc[] stays in registers */
AVX_INLINE void q32_tile_avx_n(float *out, const float *x, const float *xs, const unsigned char *wrow,
                               const ld_kdt dt, int t0, const int tn, int K, int N, size_t n, float bias)
{
    __m256 acc[TILE];
    float macc[TILE];
    for (int tt = 0; tt < tn; tt++) {
        acc[tt] = _mm256_setzero_ps();
        macc[tt] = 0.0f;
    }
    int nb = K / QB;
    size_t bytes = q32_bytes(dt);
    for (int b = 0; b < nb; b++) {
        __m256 q[4];
        float d, m;
        q32_decode_avx(wrow + (size_t)b * bytes, dt, q, &d, &m);
        __m256 dv = _mm256_set1_ps(d);
        for (int tt = 0; tt < tn; tt++) {
            const float *xv = x + (size_t)(t0 + tt) * (size_t)K + (size_t)b * QB;
            __m256 s = _mm256_setzero_ps();
            for (int g = 0; g < 4; g++) s = _mm256_fmadd_ps(q[g], _mm256_loadu_ps(xv + 8 * g), s);
            acc[tt] = _mm256_fmadd_ps(dv, s, acc[tt]);
            if (dt == LD_KDT_Q4_1) macc[tt] = fmaf(m, xs[(size_t)(t0 + tt) * (size_t)nb + (size_t)b], macc[tt]);
        }
    }
    for (int tt = 0; tt < tn; tt++)
        out[(size_t)(t0 + tt) * (size_t)N + n] = (hsum8_avx(acc[tt]) + macc[tt]) + bias;
}

/* One token, two weight rows at once (decode): the rows share the loads
 * of x, and their independent chains keep both FMA ports busy.  Each row's
 * arithmetic is q32_tile_avx_n's for tn = 1. */
AVX_INLINE void q32_pair_avx_n(float *out0, float *out1, const float *x, const float *xs, const unsigned char *w0,
                               const unsigned char *w1, const ld_kdt dt, int K, float bias0, float bias1)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float macc0 = 0.0f, macc1 = 0.0f;
    int nb = K / QB;
    size_t bytes = q32_bytes(dt);
    for (int b = 0; b < nb; b++) {
        __m256 q0[4], q1[4];
        float d0, m0, d1, m1;
        q32_decode_avx(w0 + (size_t)b * bytes, dt, q0, &d0, &m0);
        q32_decode_avx(w1 + (size_t)b * bytes, dt, q1, &d1, &m1);
        const float *xv = x + (size_t)b * QB;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        for (int g = 0; g < 4; g++) {
            __m256 xg = _mm256_loadu_ps(xv + 8 * g);
            s0 = _mm256_fmadd_ps(q0[g], xg, s0);
            s1 = _mm256_fmadd_ps(q1[g], xg, s1);
        }
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d0), s0, acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d1), s1, acc1);
        if (dt == LD_KDT_Q4_1) {
            macc0 = fmaf(m0, xs[b], macc0);
            macc1 = fmaf(m1, xs[b], macc1);
        }
    }
    *out0 = (hsum8_avx(acc0) + macc0) + bias0;
    *out1 = (hsum8_avx(acc1) + macc1) + bias1;
}

AVX static void q32_pair_avx(float *out0, float *out1, const float *x, const float *xs, const unsigned char *w0,
                             const unsigned char *w1, ld_kdt dt, int K, float bias0, float bias1)
{
    if (dt == LD_KDT_Q4_0) q32_pair_avx_n(out0, out1, x, xs, w0, w1, LD_KDT_Q4_0, K, bias0, bias1);
    else if (dt == LD_KDT_Q4_1) q32_pair_avx_n(out0, out1, x, xs, w0, w1, LD_KDT_Q4_1, K, bias0, bias1);
    else q32_pair_avx_n(out0, out1, x, xs, w0, w1, LD_KDT_Q8_0, K, bias0, bias1);
}

#define Q32_TILES(DT)                                                                   \
    switch (tn) {                                                                       \
    case 1: q32_tile_avx_n(out, x, xs, wrow, DT, t0, 1, K, N, n, bias); break;          \
    case 2: q32_tile_avx_n(out, x, xs, wrow, DT, t0, 2, K, N, n, bias); break;          \
    case 3: q32_tile_avx_n(out, x, xs, wrow, DT, t0, 3, K, N, n, bias); break;          \
    default: q32_tile_avx_n(out, x, xs, wrow, DT, t0, 4, K, N, n, bias); break;         \
    }

AVX static void q32_tile_avx(float *out, const float *x, const float *xs, const unsigned char *wrow, ld_kdt dt,
                             int t0, int tn, int K, int N, size_t n, float bias)
{
    if (dt == LD_KDT_Q4_0) Q32_TILES(LD_KDT_Q4_0)
    else if (dt == LD_KDT_Q4_1) Q32_TILES(LD_KDT_Q4_1)
    else Q32_TILES(LD_KDT_Q8_0)
}
#undef Q32_TILES

AVX_INLINE void plain_tile_avx_n(float *out, const float *x, const float *wr, int t0, const int tn, int K, int N,
                                 size_t n, float bias)
{
    __m256 acc[TILE];
    float tail[TILE];
    for (int tt = 0; tt < tn; tt++) {
        acc[tt] = _mm256_setzero_ps();
        tail[tt] = 0.0f;
    }
    int k8 = K - K % 8;
    for (int k = 0; k < k8; k += 8) {
        __m256 w = _mm256_loadu_ps(wr + k);
        for (int tt = 0; tt < tn; tt++)
            acc[tt] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (size_t)(t0 + tt) * (size_t)K + k), acc[tt]);
    }
    for (int tt = 0; tt < tn; tt++) {
        const float *xr = x + (size_t)(t0 + tt) * (size_t)K;
        for (int k = k8; k < K; k++) tail[tt] = fmaf(wr[k], xr[k], tail[tt]);
        out[(size_t)(t0 + tt) * (size_t)N + n] = (hsum8_avx(acc[tt]) + tail[tt]) + bias;
    }
}

AVX static void plain_tile_avx(float *out, const float *x, const float *wr, int t0, int tn, int K, int N, size_t n,
                               float bias)
{
    switch (tn) {
    case 1: plain_tile_avx_n(out, x, wr, t0, 1, K, N, n, bias); break;
    case 2: plain_tile_avx_n(out, x, wr, t0, 2, K, N, n, bias); break;
    case 3: plain_tile_avx_n(out, x, wr, t0, 3, K, N, n, bias); break;
    default: plain_tile_avx_n(out, x, wr, t0, 4, K, N, n, bias); break;
    }
}

AVX static float dot_avx(const float *a, const float *b, int n)
{
    int n8 = n - n % 8;
    __m256 acc = _mm256_setzero_ps();
    for (int k = 0; k < n8; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    float tail = 0.0f;
    for (int k = n8; k < n; k++) tail = fmaf(a[k], b[k], tail);
    return hsum8_avx(acc) + tail;
}

AVX static void axpy_avx(float *o, float p, const float *v, int n)
{
    int n8 = n - n % 8;
    __m256 pv = _mm256_set1_ps(p);
    for (int i = 0; i < n8; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(o + i)));
    for (int i = n8; i < n; i++) o[i] = fmaf(p, v[i], o[i]);
}

static int detect_simd(void)
{
    if (getenv("LD_CPU_PORTABLE")) return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

#else
static int detect_simd(void)
{
    return 0;
}
#endif /* LD_CPU_X86 */

int ld_cpu_simd(void)
{
    static atomic_int state = -1; /* -1 unknown; racing first calls agree */
    int s = atomic_load_explicit(&state, memory_order_relaxed);
    if (s < 0) {
        s = detect_simd();
        atomic_store_explicit(&state, s, memory_order_relaxed);
    }
    return s;
}

/* ---------------------------------------------------------------- matmul */

static void matmul(float *out, const float *x, const float *prep, const void *w, ld_kdt dt, const void *bias,
                   ld_kdt bias_dt, int T, int K, int N, int rope_hd, float *scratch, size_t i0, size_t i1, int simd)
{
#ifndef LD_CPU_X86
    (void)simd;
#endif
    int q32 = is_q32(dt);
    const float *xq = is_q4(dt) ? prep : x; /* the activations in lane order */
    const float *xs = dt == LD_KDT_Q4_1 ? prep + (size_t)T * (size_t)K : NULL;
    size_t row_bytes = q32 ? (size_t)(K / QB) * q32_bytes(dt) : 0;
#ifdef LD_CPU_X86
    if (simd && q32 && T == 1) /* decode: rows in pairs */
        for (; i0 + 1 < i1; i0 += 2) {
            float b0 = 0.0f, b1 = 0.0f;
            if (bias) {
                ld_ref_to_f32(&b0, bias, bias_dt, i0, 1);
                ld_ref_to_f32(&b1, bias, bias_dt, i0 + 1, 1);
            }
            const unsigned char *w0 = (const unsigned char *)w + src_row(i0, rope_hd) * row_bytes;
            const unsigned char *w1 = (const unsigned char *)w + src_row(i0 + 1, rope_hd) * row_bytes;
            q32_pair_avx(out + i0, out + i0 + 1, xq, xs, w0, w1, dt, K, b0, b1);
        }
#endif
    for (size_t n = i0; n < i1; n++) {
        size_t src = src_row(n, rope_hd);
        float b = 0.0f;
        if (bias) ld_ref_to_f32(&b, bias, bias_dt, n, 1);
        const float *wr = NULL;
        if (!q32) {
            if (dt == LD_KDT_F32) {
                wr = (const float *)w + src * (size_t)K;
            } else {
                ld_ref_to_f32(scratch, w, dt, src * (size_t)K, (size_t)K);
                wr = scratch;
            }
        }
        const unsigned char *wq = (const unsigned char *)w + src * row_bytes;
        for (int t0 = 0; t0 < T; t0 += TILE) {
            int tn = T - t0 < TILE ? T - t0 : TILE;
#ifdef LD_CPU_X86
            if (simd) {
                if (q32) q32_tile_avx(out, xq, xs, wq, dt, t0, tn, K, N, n, b);
                else plain_tile_avx(out, x, wr, t0, tn, K, N, n, b);
                continue;
            }
#endif
            if (q32) q32_tile_portable(out, xq, xs, wq, dt, t0, tn, K, N, n, b);
            else plain_tile_portable(out, x, wr, t0, tn, K, N, n, b);
        }
    }
}

void ld_cpu_matmul(float *out, const float *x, const float *prep, const void *w, ld_kdt dt, const void *bias,
                   ld_kdt bias_dt, int T, int K, int N, int rope_hd, float *scratch, size_t i0, size_t i1)
{
    matmul(out, x, prep, w, dt, bias, bias_dt, T, K, N, rope_hd, scratch, i0, i1, ld_cpu_simd());
}

void ld_cpu_matmul_portable(float *out, const float *x, const float *prep, const void *w, ld_kdt dt,
                            const void *bias, ld_kdt bias_dt, int T, int K, int N, int rope_hd, float *scratch,
                            size_t i0, size_t i1)
{
    matmul(out, x, prep, w, dt, bias, bias_dt, T, K, N, rope_hd, scratch, i0, i1, 0);
}

/* ---------------------------------------------------------------- attention */

static void attention(float *out, const float *q, const float *kcache, const float *vcache, int n_heads, int n_kv,
                      int hd, int pos0, int window, float scale, float *scores, size_t i0, size_t i1, int simd)
{
    ld_dot_fn dot = dot_portable;
    ld_axpy_fn axpy = axpy_portable;
#ifdef LD_CPU_X86
    if (simd) {
        dot = dot_avx;
        axpy = axpy_avx;
    }
#else
    (void)simd;
#endif
    ld_attention_with(dot, axpy, out, q, kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, scores, i0, i1);
}

void ld_cpu_attention(float *out, const float *q, const float *kcache, const float *vcache, int n_heads, int n_kv,
                      int hd, int pos0, int window, float scale, float *scores, size_t i0, size_t i1)
{
    attention(out, q, kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, scores, i0, i1, ld_cpu_simd());
}

void ld_cpu_attention_portable(float *out, const float *q, const float *kcache, const float *vcache, int n_heads,
                               int n_kv, int hd, int pos0, int window, float scale, float *scores, size_t i0,
                               size_t i1)
{
    attention(out, q, kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, scores, i0, i1, 0);
}
