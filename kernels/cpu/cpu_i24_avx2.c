/* cpu_i24_avx2.c - the i24 matmul of cpu_i24.h with AVX2, from the packed
 * layout, for machines without AVX-512 VNNI: a group of sixteen rows as two
 * halves of eight (a chunk's first and second 32 bytes), row r of a half in
 * 32-bit lane r; four groups far apart a block of each in turn, as the
 * AVX-512 kernel.  A chunk's nibbles (Q8_0's bytes split in two nibbles,
 * the high one offset by 8) against four activations' digits by
 * vpmaddubsw (unsigned times signed bytes, pairs summed into 16 bits: none
 * over 2 * 15 * 128 = 3840 in size), a block's eight such sums a digit
 * added in 16 bits (at most 30720: no wrap), then into 32 by vpmaddwd:
 * lane r holds row r's p_0, p_1, p_2, exact, and the rest is the twin's
 * arithmetic lane for lane (cpu_i24_portable.c).  And the prep.  Compiled
 * with target attributes, called only when the machine has AVX2, FMA and
 * F16C (ld_cpu_i24_simd). */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define I24A_TARGET "avx2,fma,f16c"
#define I24A __attribute__((target(I24A_TARGET)))
#define I24A_INLINE static inline __attribute__((always_inline, target(I24A_TARGET)))

#define PREFETCH_AHEAD 1536 /* as the AVX-512 kernel's */
#define ROWS LD_CPU_I24_GROUP_ROWS
#define QB LD_CPU_QB

I24A_INLINE __m256i digits4(const int8_t *c)
{
    int32_t v;
    memcpy(&v, c, sizeof v);
    return _mm256_set1_epi32(v);
}

/* half h's eight rows' P of one block (ints: its four chunks of 64 bytes) */
/* Q8_0's p_k of half h: each byte w as 16 (hi - 8) + lo, its nibbles
 * lo and hi = ((w >> 4) & 15) ^ 8 unsigned, each set of products summed in
 * 16 bits as the Q4 nibbles' (at most 8 * 3840), then p_k = 16 (sum hi c -
 * 8 s_k) + sum lo c */
I24A_INLINE void q8_0_half_dots(const unsigned char *ints, int h, const int8_t *dig, const int32_t *dsum, __m256i p[3])
{
    const __m256i m15 = _mm256_set1_epi8(15), eight = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
    __m256i lo[3], hi[3];
    for (int k = 0; k < 3; k++) lo[k] = hi[k] = _mm256_setzero_si256();
    for (int c = 0; c < 8; c++) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(ints + 64 * c + 32 * h));
        __m256i l = _mm256_and_si256(w, m15), u = _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(w, 4), m15), eight);
        for (int k = 0; k < 3; k++) {
            __m256i d = digits4(dig + k * QB + 4 * c);
            lo[k] = _mm256_add_epi16(lo[k], _mm256_maddubs_epi16(l, d));
            hi[k] = _mm256_add_epi16(hi[k], _mm256_maddubs_epi16(u, d));
        }
    }
    for (int k = 0; k < 3; k++) {
        __m256i hk = _mm256_sub_epi32(_mm256_madd_epi16(hi[k], ones), _mm256_set1_epi32(8 * dsum[k]));
        p[k] = _mm256_add_epi32(_mm256_slli_epi32(hk, 4), _mm256_madd_epi16(lo[k], ones));
    }
}

/* a Q4 block's p_k of half h: the low nibbles against the digits of
 * elements 4c .., the high ones against those of 4c + 16 .., Q4_0's 8 times
 * the digit sums taken off */
I24A_INLINE void q4_half_dots(const unsigned char *ints, int h, const ld_kdt dt, const int8_t *dig,
                              const int32_t *dsum, __m256i p[3])
{
    const __m256i m15 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    __m256i s[3] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int c = 0; c < 4; c++) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(ints + 64 * c + 32 * h));
        __m256i lo = _mm256_and_si256(w, m15), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m15);
        for (int k = 0; k < 3; k++) {
            s[k] = _mm256_add_epi16(s[k], _mm256_maddubs_epi16(lo, digits4(dig + k * QB + 4 * c)));
            s[k] = _mm256_add_epi16(s[k], _mm256_maddubs_epi16(hi, digits4(dig + k * QB + 16 + 4 * c)));
        }
    }
    for (int k = 0; k < 3; k++) {
        p[k] = _mm256_madd_epi16(s[k], ones);
        if (dt == LD_KDT_Q4_0) p[k] = _mm256_sub_epi32(p[k], _mm256_set1_epi32(8 * dsum[k]));
    }
}

/* half h's eight rows' P of one block (ints: its chunks of 64 bytes) */
I24A_INLINE __m256 half_block_dot(const unsigned char *ints, int h, const ld_kdt dt, const int8_t *dig,
                                  const int32_t *dsum)
{
    __m256i p[3];
    if (dt == LD_KDT_Q8_0) q8_0_half_dots(ints, h, dig, dsum, p);
    else q4_half_dots(ints, h, dt, dig, dsum, p);
    __m256 low = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(p[1], 8), p[0]));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[2]), _mm256_set1_ps(65536.0f), low);
}

/* outputs [16g[s], 16g[s]+16) of token t from each of the ns groups at
 * gp[s], a block of each in turn (the AVX-512 kernel's order) */
I24A_INLINE void groups_pass(const ld_cpu_i24mm *m, const ld_kdt dt, const int ns, const unsigned char *const gp[],
                             const size_t g[], int t)
{
    size_t nb = (size_t)(m->K / QB), step = ROWS * ld_cpu_q32_bytes(dt), tb = (size_t)t * nb;
    size_t head = ROWS * ld_cpu_q32_head(dt);
    const int8_t *dig = m->dig + 3 * QB * tb;
    const float *scale = m->scale + tb, *xs = m->xs + tb;
    const int32_t *dsum = m->dsum + 3 * tb;
    __m256 acc[LD_CPU_I24_STREAMS][2], macc[LD_CPU_I24_STREAMS][2];
    for (int s = 0; s < ns; s++)
        for (int h = 0; h < 2; h++) acc[s][h] = macc[s][h] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int s = 0; s < ns; s++) {
            const unsigned char *blk = gp[s] + b * step;
            for (size_t o = 0; o < step; o += 64) _mm_prefetch((const char *)blk + PREFETCH_AHEAD + o, _MM_HINT_T0);
            __m256 sc = _mm256_set1_ps(scale[b]), xsb = _mm256_set1_ps(xs[b]);
            for (int h = 0; h < 2; h++) {
                __m256 P = half_block_dot(blk + head, h, dt, dig + 3 * QB * b, dsum + 3 * b);
                __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 16 * h))), sc);
                acc[s][h] = _mm256_fmadd_ps(d, P, acc[s][h]);
                if (dt == LD_KDT_Q4_1)
                    macc[s][h] = _mm256_fmadd_ps(
                        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 32 + 16 * h))), xsb,
                        macc[s][h]);
            }
        }
    }
    for (int s = 0; s < ns; s++) {
        float bias[ROWS] = {0};
        if (m->bias) ld_ref_to_f32(bias, m->bias, m->bias_dt, ROWS * g[s], ROWS);
        float *o = m->out + (size_t)t * (size_t)m->N + ROWS * g[s];
        for (int h = 0; h < 2; h++)
            _mm256_storeu_ps(o + 8 * h, _mm256_add_ps(_mm256_add_ps(acc[s][h], macc[s][h]), _mm256_loadu_ps(bias + 8 * h)));
    }
}

I24A_INLINE void groups_all_tokens(const ld_cpu_i24mm *m, const int ns, const unsigned char *const gp[],
                                   const size_t g[])
{
    for (int t = 0; t < m->T; t++) {
        if (m->dt == LD_KDT_Q4_0) groups_pass(m, LD_KDT_Q4_0, ns, gp, g, t);
        else if (m->dt == LD_KDT_Q4_1) groups_pass(m, LD_KDT_Q4_1, ns, gp, g, t);
        else groups_pass(m, LD_KDT_Q8_0, ns, gp, g, t);
    }
}

I24A void ld_cpu_i24_group_avx2(const ld_cpu_i24mm *m, const unsigned char *gp, size_t g)
{
    groups_all_tokens(m, 1, &gp, &g);
}

I24A void ld_cpu_i24_streams_avx2(const ld_cpu_i24mm *m, const unsigned char *const gp[LD_CPU_I24_STREAMS],
                                  const size_t g[LD_CPU_I24_STREAMS])
{
    groups_all_tokens(m, LD_CPU_I24_STREAMS, gp, g);
}

/* the digits of eight X (the AVX-512 prep's split, eight lanes) */
I24A_INLINE void split3(__m256i X, __m256i c[3])
{
    c[0] = _mm256_srai_epi32(_mm256_slli_epi32(X, 24), 24);
    __m256i r = _mm256_srai_epi32(_mm256_sub_epi32(X, c[0]), 8);
    c[1] = _mm256_srai_epi32(_mm256_slli_epi32(r, 24), 24);
    c[2] = _mm256_srai_epi32(_mm256_sub_epi32(r, c[1]), 8);
}

/* 32 int32s in [-128, 127] to bytes in element order (q8's packing) */
I24A_INLINE void store_bytes(int8_t *q, const __m256i r[4])
{
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    _mm256_storeu_si256((__m256i *)(void *)q, _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

I24A_INLINE int32_t hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The prep of cpu_i24.h, cpu_i24.c's prep_block lane for lane: x 2^-E as
 * two products by powers of two (each exact: 2^-E can lie past a float's
 * range, the products cannot), rounded by vcvtps2dq to nearest even (as
 * rintf), the digits and sums in integers. */
I24A void ld_cpu_i24_prep_avx2(int8_t *dig, float *scale, float *xs, int32_t *dsum, const float *x, size_t nblk)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), fmax = _mm256_set1_ps(3.40282347e38f);
    for (size_t b = 0; b < nblk; b++, x += QB, dig += 3 * QB, dsum += 3) {
        __m256 v[4], mx = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int g = 0; g < 4; g++) {
            v[g] = _mm256_loadu_ps(x + 8 * g);
            __m256 a = _mm256_andnot_ps(sign, v[g]);
            ok = _mm256_and_ps(ok, _mm256_cmp_ps(a, fmax, _CMP_LE_OQ));
            mx = _mm256_max_ps(a, mx);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
        int finite = _mm256_movemask_ps(ok) == 0xFF;
        if (!finite || amax == 0.0f) {
            memset(dig, 0, 3 * QB);
            dsum[0] = dsum[1] = dsum[2] = 0;
            scale[b] = finite ? 1.0f : NAN;
            xs[b] = finite ? 0.0f : NAN;
            continue;
        }
        int E = ld_cpu_i24_block_exp(amax), half = -E / 2;
        __m256 s1 = _mm256_set1_ps(ld_cpu_i24_pow2(half)), s2 = _mm256_set1_ps(ld_cpu_i24_pow2(-E - half));
        __m256i c[3][4], sum = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            __m256i X = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_mul_ps(v[g], s1), s2));
            __m256i d[3];
            split3(X, d);
            for (int k = 0; k < 3; k++) c[k][g] = d[k];
            sum = _mm256_add_epi32(sum, X);
        }
        for (int k = 0; k < 3; k++) {
            store_bytes(dig + k * QB, c[k]);
            dsum[k] = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(c[k][0], c[k][1]), _mm256_add_epi32(c[k][2], c[k][3])));
        }
        scale[b] = ld_cpu_i24_pow2(E);
        xs[b] = (float)hsum_epi32(sum) * scale[b];
    }
}

#else /* not x86-64: never called (ld_cpu_i24_simd() is portable) */
void ld_cpu_i24_group_avx2(const ld_cpu_i24mm *m, const unsigned char *gp, size_t g)
{
    (void)m;
    (void)gp;
    (void)g;
}
void ld_cpu_i24_streams_avx2(const ld_cpu_i24mm *m, const unsigned char *const gp[LD_CPU_I24_STREAMS],
                             const size_t g[LD_CPU_I24_STREAMS])
{
    (void)m;
    (void)gp;
    (void)g;
}
void ld_cpu_i24_prep_avx2(int8_t *dig, float *scale, float *xs, int32_t *dsum, const float *x, size_t nblk)
{
    (void)dig;
    (void)scale;
    (void)xs;
    (void)dsum;
    (void)x;
    (void)nblk;
}
#endif
