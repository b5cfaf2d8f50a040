/* cpu_q8_avx2.c - the q8 matmul of cpu_q8.h with AVX2, for machines without
 * AVX-512 VNNI (the AMD EPYC of some sessions): a weight block's 32 integers
 * as bytes against the block's 32 quantized activations in vpmaddubsw (pairs
 * of unsigned times signed bytes into 16 bits) and vpmaddwd by ones (pairs
 * of those into 32 bits), so lane l holds p_l of cpu_q8.h, exact: no sum
 * saturates 16 bits (Q4: 2 * 15 * 127; Q8_0 as |w| against x with w's
 * signs: 2 * 128 * 127 = 32512).  Eight rows of one token a pass (four
 * for a tail), sharing the block's activations.  Compiled with target attributes, called only
 * when the machine has AVX2, FMA and F16C (ld_cpu_q8_simd). */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>

#include "cpu_q8_x86.h"

#define Q8A_TARGET "avx2,fma,f16c"
#define Q8A __attribute__((target(Q8A_TARGET)))
#define Q8A_INLINE static inline __attribute__((always_inline, target(Q8A_TARGET)))

/* lane l: the sum of the four 16-bit pairs' products of u and x, 32 bits */
Q8A_INLINE __m256i quad_dot(__m256i u, __m256i x)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
}

/* p_0 .. p_7 of one row's block against x (32 int8s, element order).  Q4:
 * the sixteen bytes in both halves, the low nibbles (elements 0-15) kept in
 * the low half, the high ones (16-31) shifted down in the high half; Q4_0's
 * offset 8 comes off as 8 * the lane's sum of x (x8, once a block for all
 * rows). */
Q8A_INLINE __m256i block_dot(const unsigned char *blk, const ld_kdt dt, __m256i x, __m256i x8)
{
    if (dt == LD_KDT_Q8_0) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
        return quad_dot(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    }
    __m256i v = ld_q8_nibbles(blk + (dt == LD_KDT_Q4_1 ? 4 : 2));
    __m256i p = quad_dot(v, x);
    return dt == LD_KDT_Q4_0 ? _mm256_sub_epi32(p, x8) : p;
}

/* Rows [n0, n0+R) of token t (R = 8 or 4, a constant once inlined: the
 * accumulators stay in registers), each row's arithmetic the portable twin's:
 * s = d * dx, acc[l] = fma(s, p_l, acc[l]), Q4_1's macc = fma(m, xs, macc)
 * in block order, out = (hsum8(acc) + macc) + bias. */
Q8A_INLINE void rows_r(const ld_cpu_q8mm *m, const ld_kdt dt, size_t n0, int t, const int R, int prefetch)
{
    const unsigned char *w[8];
    for (int r = 0; r < R; r++)
        w[r] = (const unsigned char *)m->w + ld_cpu_src_row(n0 + (size_t)r, m->rope_hd) * m->row_bytes;
    __m256 acc[8];
    float macc[8];
    for (int r = 0; r < R; r++) {
        acc[r] = _mm256_setzero_ps();
        macc[r] = 0.0f;
    }
    int nb = m->K / LD_CPU_QB;
    size_t bytes = ld_cpu_q32_bytes(dt);
    const int8_t *xq = m->xq + (size_t)t * (size_t)m->K;
    const float *xd = m->xd + (size_t)t * (size_t)nb, *xs = m->xs + (size_t)t * (size_t)nb;
    /* the bytes of the next R rows (where the rows are in order), a block's
     * worth per row and step: the hardware prefetcher alone falls behind */
    size_t pf = (n0 + R) * m->row_bytes, pf_end = prefetch ? (size_t)m->N * m->row_bytes : 0, pf_step = R * bytes;
    for (int b = 0; b < nb; b++, pf += pf_step) {
        for (size_t o = pf; o < pf + pf_step && o < pf_end; o += 64) _mm_prefetch((const char *)m->w + o, _MM_HINT_T0);
        __m256i x = _mm256_loadu_si256((const __m256i *)(xq + (size_t)b * LD_CPU_QB));
        __m256i x8 = dt == LD_KDT_Q4_0 ? quad_dot(_mm256_set1_epi8(8), x) : _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const unsigned char *blk = w[r] + (size_t)b * bytes;
            float s = _cvtsh_ss(ld_cpu_le16(blk)) * xd[b];
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(block_dot(blk, dt, x, x8)), acc[r]);
            if (dt == LD_KDT_Q4_1) macc[r] = fmaf(_cvtsh_ss(ld_cpu_le16(blk + 2)), xs[b], macc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        size_t n = n0 + (size_t)r;
        float bias = 0.0f;
        if (m->bias) ld_ref_to_f32(&bias, m->bias, m->bias_dt, n, 1);
        m->out[(size_t)t * (size_t)m->N + n] = (ld_q8_hsum8(acc[r]) + macc[r]) + bias;
    }
}

Q8A_INLINE void q8_rows(const ld_cpu_q8mm *m, const ld_kdt dt, size_t i0, size_t i1)
{
    for (; i0 + 8 <= i1; i0 += 8)
        for (int t = 0; t < m->T; t++) rows_r(m, dt, i0, t, 8, t == 0);
    for (; i0 + 4 <= i1; i0 += 4)
        for (int t = 0; t < m->T; t++) rows_r(m, dt, i0, t, 4, t == 0);
    for (size_t n = i0; n < i1; n++) /* the last rows: the same arithmetic in C */
        for (int t = 0; t < m->T; t++) ld_cpu_q8_out_portable(m, n, t);
}

Q8A void ld_cpu_q8_rows_avx2(const ld_cpu_q8mm *m, size_t i0, size_t i1)
{
    if (m->dt == LD_KDT_Q4_0) q8_rows(m, LD_KDT_Q4_0, i0, i1);
    else if (m->dt == LD_KDT_Q4_1) q8_rows(m, LD_KDT_Q4_1, i0, i1);
    else q8_rows(m, LD_KDT_Q8_0, i0, i1);
}

/* the prep of cpu_q8.h, nblk blocks of 32, the portable code's arithmetic
 * (quantize_block in cpu_q8.c) lane for lane: amax by vmaxps (a NaN |x|
 * loses to the running max, as there; max is exact, so the order of the
 * lanes does not matter), id and dx by the same scalar divisions,
 * y = x * id, |y| < 127.5 (else 0) truncated and raised by one where
 * |y| - r >= 1/2, y's sign put back (vpsignd: r is 0 where y is +-0); xs by
 * the same adds in the same order (lane l: ((x_l + x_8+l) + x_16+l) +
 * x_24+l, then hsum8). */
Q8A void ld_cpu_q8_quantize_avx2(int8_t *q, float *dx, float *xs, const float *x, size_t nblk)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), lim = _mm256_set1_ps(127.5f), half = _mm256_set1_ps(0.5f);
    for (size_t b = 0; b < nblk; b++, x += LD_CPU_QB, q += LD_CPU_QB) {
        __m256 v[4], mx = _mm256_setzero_ps();
        for (int g = 0; g < 4; g++) {
            v[g] = _mm256_loadu_ps(x + 8 * g);
            mx = _mm256_max_ps(_mm256_andnot_ps(sign, v[g]), mx); /* NaN first: mx */
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        dx[b] = amax / 127.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i r[4];
        for (int g = 0; g < 4; g++) {
            __m256 y = _mm256_mul_ps(v[g], vid), a = _mm256_andnot_ps(sign, y);
            __m256i ok = _mm256_castps_si256(_mm256_cmp_ps(a, lim, _CMP_LT_OQ)); /* NaN: false */
            __m256i t = _mm256_and_si256(_mm256_cvttps_epi32(a), ok);
            __m256i up = _mm256_and_si256(
                _mm256_castps_si256(_mm256_cmp_ps(_mm256_sub_ps(a, _mm256_cvtepi32_ps(t)), half, _CMP_GE_OQ)), ok);
            r[g] = _mm256_sign_epi32(_mm256_sub_epi32(t, up), _mm256_castps_si256(y));
        }
        /* 32 int32s (|r| <= 127) to bytes: the packs interleave the
         * registers by 128-bit halves and dwords; the permute puts the
         * dwords back in element order */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)q, p);
        xs[b] = ld_q8_hsum8(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[1]), v[2]), v[3]));
    }
}

#else /* not x86-64: never called (ld_cpu_q8_simd() is portable) */
void ld_cpu_q8_rows_avx2(const ld_cpu_q8mm *m, size_t i0, size_t i1)
{
    (void)m;
    (void)i0;
    (void)i1;
}
void ld_cpu_q8_quantize_avx2(int8_t *q, float *dx, float *xs, const float *x, size_t nblk)
{
    (void)q;
    (void)dx;
    (void)xs;
    (void)x;
    (void)nblk;
}
#endif
