/* cpu_avx512.c - the Q4_0 / Q4_1 / Q8_0 matmul of cpu_ops.h with AVX-512F:
 * a block's sixteen lanes in one register, half the instructions of the
 * AVX2 code (which holds them in two) for the same bits.  Compiled with
 * target attributes, called only when the machine has AVX-512F (and AVX2,
 * FMA, F16C); see ld_cpu_simd. */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f,avx2,fma,f16c")))

/* hsum16(a) = hsum8(a[l] + a[8 + l]) (cpu_ops.h) */
AVX512_INLINE float hsum16(__m512 v)
{
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 a = _mm256_add_ps(lo, hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* d of a block in every lane: the f16 broadcast, then widened (exact) */
AVX512_INLINE __m512 block_scale(const unsigned char *b)
{
    short h;
    memcpy(&h, b, sizeof h);
    return _mm512_cvtph_ps(_mm256_set1_epi16(h));
}

/* group g (16 elements) of a block in lane order */
AVX512_INLINE __m512 decode_group(const unsigned char *b, const ld_kdt dt, int g)
{
    if (dt == LD_KDT_Q8_0)
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2 + 16 * g))));
    /* lane j: 32-bit half j % 2 of the word, shifted by 4 (j / 2) */
    const __m512i sh = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
    long long word;
    memcpy(&word, b + (dt == LD_KDT_Q4_1 ? 4 : 2) + 8 * g, sizeof word);
    __m512i v = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi64(word), sh), _mm512_set1_epi32(15));
    if (dt == LD_KDT_Q4_0) v = _mm512_sub_epi32(v, _mm512_set1_epi32(8));
    return _mm512_cvtepi32_ps(v);
}

AVX512_INLINE void q32_tile(const ld_cpu_mm *m, const unsigned char *wrow, const ld_kdt dt, int t0, const int tn,
                            size_t n, float bias)
{
    __m512 acc[LD_CPU_TILE];
    float macc[LD_CPU_TILE];
    for (int tt = 0; tt < tn; tt++) {
        acc[tt] = _mm512_setzero_ps();
        macc[tt] = 0.0f;
    }
    int nb = m->K / LD_CPU_QB;
    size_t bytes = ld_cpu_q32_bytes(dt);
    for (int b = 0; b < nb; b++) {
        const unsigned char *blk = wrow + (size_t)b * bytes;
        __m512 q0 = decode_group(blk, dt, 0), q1 = decode_group(blk, dt, 1);
        __m512 d = block_scale(blk);
        for (int tt = 0; tt < tn; tt++) {
            const float *xv = m->xq + (size_t)(t0 + tt) * (size_t)m->K + (size_t)b * LD_CPU_QB;
            __m512 s = _mm512_fmadd_ps(q0, _mm512_loadu_ps(xv), _mm512_setzero_ps());
            s = _mm512_fmadd_ps(q1, _mm512_loadu_ps(xv + 16), s);
            acc[tt] = _mm512_fmadd_ps(d, s, acc[tt]);
        }
        if (dt == LD_KDT_Q4_1) {
            float mn = _cvtsh_ss(ld_cpu_le16(blk + 2));
            for (int tt = 0; tt < tn; tt++)
                macc[tt] = fmaf(mn, m->xs[(size_t)(t0 + tt) * (size_t)nb + (size_t)b], macc[tt]);
        }
    }
    for (int tt = 0; tt < tn; tt++)
        m->out[(size_t)(t0 + tt) * (size_t)m->N + n] = (hsum16(acc[tt]) + macc[tt]) + bias;
}

AVX512_INLINE void q32_pair(const ld_cpu_mm *m, const ld_kdt dt, size_t n0)
{
    const unsigned char *w0 = (const unsigned char *)m->w + ld_cpu_src_row(n0, m->rope_hd) * m->row_bytes;
    const unsigned char *w1 = (const unsigned char *)m->w + ld_cpu_src_row(n0 + 1, m->rope_hd) * m->row_bytes;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    float macc0 = 0.0f, macc1 = 0.0f;
    int nb = m->K / LD_CPU_QB;
    size_t bytes = ld_cpu_q32_bytes(dt);
    for (int b = 0; b < nb; b++) {
        const unsigned char *b0 = w0 + (size_t)b * bytes, *b1 = w1 + (size_t)b * bytes;
        const float *xv = m->xq + (size_t)b * LD_CPU_QB;
        __m512 x0 = _mm512_loadu_ps(xv), x1 = _mm512_loadu_ps(xv + 16);
        __m512 s0 = _mm512_fmadd_ps(decode_group(b0, dt, 0), x0, _mm512_setzero_ps());
        __m512 s1 = _mm512_fmadd_ps(decode_group(b1, dt, 0), x0, _mm512_setzero_ps());
        s0 = _mm512_fmadd_ps(decode_group(b0, dt, 1), x1, s0);
        s1 = _mm512_fmadd_ps(decode_group(b1, dt, 1), x1, s1);
        a0 = _mm512_fmadd_ps(block_scale(b0), s0, a0);
        a1 = _mm512_fmadd_ps(block_scale(b1), s1, a1);
        if (dt == LD_KDT_Q4_1) {
            macc0 = fmaf(_cvtsh_ss(ld_cpu_le16(b0 + 2)), m->xs[b], macc0);
            macc1 = fmaf(_cvtsh_ss(ld_cpu_le16(b1 + 2)), m->xs[b], macc1);
        }
    }
    m->out[n0] = (hsum16(a0) + macc0) + ld_cpu_bias(m, n0);
    m->out[n0 + 1] = (hsum16(a1) + macc1) + ld_cpu_bias(m, n0 + 1);
}

AVX512_INLINE void q32_rows(const ld_cpu_mm *m, const ld_kdt dt, size_t i0, size_t i1)
{
    if (m->T == 1)
        for (; i0 + 1 < i1; i0 += 2) q32_pair(m, dt, i0);
    for (size_t n = i0; n < i1; n++) {
        const unsigned char *wrow = (const unsigned char *)m->w + ld_cpu_src_row(n, m->rope_hd) * m->row_bytes;
        float bias = ld_cpu_bias(m, n);
        for (int t0 = 0; t0 < m->T; t0 += LD_CPU_TILE) {
            switch (m->T - t0) {
            case 1: q32_tile(m, wrow, dt, t0, 1, n, bias); break;
            case 2: q32_tile(m, wrow, dt, t0, 2, n, bias); break;
            case 3: q32_tile(m, wrow, dt, t0, 3, n, bias); break;
            default: q32_tile(m, wrow, dt, t0, 4, n, bias); break;
            }
        }
    }
}

AVX512 void ld_cpu_q32_rows_avx512(const ld_cpu_mm *m, size_t i0, size_t i1)
{
    if (m->dt == LD_KDT_Q4_0) q32_rows(m, LD_KDT_Q4_0, i0, i1);
    else if (m->dt == LD_KDT_Q4_1) q32_rows(m, LD_KDT_Q4_1, i0, i1);
    else q32_rows(m, LD_KDT_Q8_0, i0, i1);
}

#else /* not x86-64: never called (ld_cpu_simd() is 0) */
void ld_cpu_q32_rows_avx512(const ld_cpu_mm *m, size_t i0, size_t i1) { (void)m; (void)i0; (void)i1; }
#endif
