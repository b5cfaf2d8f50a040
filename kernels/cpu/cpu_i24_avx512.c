/* cpu_i24_avx512.c - the i24 matmul of cpu_i24.h with AVX-512 and VNNI,
 * from the packed layout: sixteen rows of one token a pass, row r in
 * 32-bit lane r, or the sixteen rows of each of four groups far apart, a
 * block of each in turn (four streams from memory, as q8's).  A chunk's
 * nibbles, the low ones (elements 4c .. 4c+3 of each row) and the high
 * (4c+16 ..), or Q8_0's bytes plus 128, against the four activations'
 * digits they meet, broadcast to every lane, by vpdpbusd (unsigned times
 * signed bytes, four products summed into 32 bits: exact); lane r is then row
 * r's p_0, p_1, p_2, and its P, scale, offset and output arithmetic are the
 * twin's (cpu_i24_portable.c), lane for lane.  And the prep.  Compiled with
 * target attributes, called only when the machine has AVX-512 F, BW, VL
 * and VNNI (ld_cpu_i24_simd). */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define I24_TARGET "avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c"
#define I24 __attribute__((target(I24_TARGET)))
#define I24_INLINE static inline __attribute__((always_inline, target(I24_TARGET)))

/* bytes ahead of a block that a pass asks the cache for (q8's distance) */
#define PREFETCH_AHEAD 1536
#define ROWS LD_CPU_I24_GROUP_ROWS
#define QB LD_CPU_QB

/* digits c[e .. e+3] in every 32-bit lane */
I24_INLINE __m512i digits4(const int8_t *c)
{
    int32_t v;
    memcpy(&v, c, sizeof v);
    return _mm512_set1_epi32(v);
}

/* p[k] += the unsigned bytes u against digits k of the elements e .. e+3
 * they meet, for k = 0, 1, 2 */
I24_INLINE void dot3(__m512i p[3], __m512i u, const int8_t *dig, int e)
{
    for (int k = 0; k < 3; k++) p[k] = _mm512_dpbusd_epi32(p[k], u, digits4(dig + k * QB + e));
}

/* the sixteen rows' P of one block (ints: its chunks) against the block's
 * digits dig [3][32]: each chunk's integers made unsigned (Q4's nibbles as
 * they are, Q8_0's bytes plus 128), that offset times the digit sums taken
 * off after (Q4_0's 8, Q8_0's 128) */
I24_INLINE __m512 group_block_dot(const unsigned char *ints, const ld_kdt dt, const int8_t *dig, const int32_t *dsum)
{
    const __m512i m15 = _mm512_set1_epi8(15), flip = _mm512_set1_epi8(-128);
    __m512i p[3] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    if (dt == LD_KDT_Q8_0) {
        for (int c = 0; c < 8; c++)
            dot3(p, _mm512_xor_si512(_mm512_loadu_si512((const void *)(ints + 64 * c)), flip), dig, 4 * c);
    } else {
        for (int c = 0; c < 4; c++) {
            __m512i w = _mm512_loadu_si512((const void *)(ints + 64 * c));
            dot3(p, _mm512_and_si512(w, m15), dig, 4 * c);
            dot3(p, _mm512_and_si512(_mm512_srli_epi16(w, 4), m15), dig, 16 + 4 * c);
        }
    }
    const int off = dt == LD_KDT_Q8_0 ? 128 : dt == LD_KDT_Q4_0 ? 8 : 0;
    for (int k = 0; k < 3 && off; k++) p[k] = _mm512_sub_epi32(p[k], _mm512_set1_epi32(off * dsum[k]));
    __m512 low = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(p[1], 8), p[0]));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[2]), _mm512_set1_ps(65536.0f), low);
}

/* outputs [16g[s], 16g[s]+16) of token t from each of the ns groups whose
 * bytes start at gp[s] (dt and ns constants once inlined), a block of each
 * group in turn: ns streams from memory */
I24_INLINE void groups_pass(const ld_cpu_i24mm *m, const ld_kdt dt, const int ns, const unsigned char *const gp[],
                            const size_t g[], int t)
{
    size_t nb = (size_t)(m->K / QB), step = ROWS * ld_cpu_q32_bytes(dt), tb = (size_t)t * nb;
    size_t head = ROWS * ld_cpu_q32_head(dt); /* the sixteen d, then Q4_1's sixteen m */
    const int8_t *dig = m->dig + 3 * QB * tb;
    const float *scale = m->scale + tb, *xs = m->xs + tb;
    const int32_t *dsum = m->dsum + 3 * tb;
    __m512 acc[LD_CPU_I24_STREAMS], macc[LD_CPU_I24_STREAMS];
#pragma GCC unroll 4
    for (int s = 0; s < ns; s++) acc[s] = macc[s] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int s = 0; s < ns; s++) {
            const unsigned char *blk = gp[s] + b * step;
            for (size_t o = 0; o < step; o += 64) _mm_prefetch((const char *)blk + PREFETCH_AHEAD + o, _MM_HINT_T0);
            __m512 P = group_block_dot(blk + head, dt, dig + 3 * QB * b, dsum + 3 * b);
            __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)blk)),
                                     _mm512_set1_ps(scale[b]));
            acc[s] = _mm512_fmadd_ps(d, P, acc[s]);
            if (dt == LD_KDT_Q4_1)
                macc[s] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 32))),
                                          _mm512_set1_ps(xs[b]), macc[s]);
        }
    }
    for (int s = 0; s < ns; s++) {
        float bias[ROWS] = {0};
        if (m->bias) ld_ref_to_f32(bias, m->bias, m->bias_dt, ROWS * g[s], ROWS);
        _mm512_storeu_ps(m->out + (size_t)t * (size_t)m->N + ROWS * g[s],
                         _mm512_add_ps(_mm512_add_ps(acc[s], macc[s]), _mm512_loadu_ps(bias)));
    }
}

/* every token of the groups before the next groups: their bytes are read
 * from memory once, then from L1 */
I24_INLINE void groups_all_tokens(const ld_cpu_i24mm *m, const int ns, const unsigned char *const gp[],
                                  const size_t g[])
{
    for (int t = 0; t < m->T; t++) {
        if (m->dt == LD_KDT_Q4_0) groups_pass(m, LD_KDT_Q4_0, ns, gp, g, t);
        else if (m->dt == LD_KDT_Q4_1) groups_pass(m, LD_KDT_Q4_1, ns, gp, g, t);
        else groups_pass(m, LD_KDT_Q8_0, ns, gp, g, t);
    }
}

I24 void ld_cpu_i24_group_avx512(const ld_cpu_i24mm *m, const unsigned char *gp, size_t g)
{
    groups_all_tokens(m, 1, &gp, &g);
}

I24 void ld_cpu_i24_streams_avx512(const ld_cpu_i24mm *m, const unsigned char *const gp[LD_CPU_I24_STREAMS],
                                   const size_t g[LD_CPU_I24_STREAMS])
{
    groups_all_tokens(m, LD_CPU_I24_STREAMS, gp, g);
}

/* X's digits (cpu_i24.c's digits(), lane for lane): c0 and c1 the low
 * byte sign-extended, each step's rest divided by 256 exactly */
I24_INLINE void split3(__m512i X, __m512i c[3])
{
    c[0] = _mm512_srai_epi32(_mm512_slli_epi32(X, 24), 24);
    __m512i r = _mm512_srai_epi32(_mm512_sub_epi32(X, c[0]), 8);
    c[1] = _mm512_srai_epi32(_mm512_slli_epi32(r, 24), 24);
    c[2] = _mm512_srai_epi32(_mm512_sub_epi32(r, c[1]), 8);
}

/* The prep of cpu_i24.h, cpu_i24.c's prep_block lane for lane: amax by
 * vmaxps of |x| (exact; a block with a NaN or infinite x found by the
 * compare first), E by the same function, x 2^-E by vscalefps (exact, as
 * ldexpf), rounded by vcvtps2dq to nearest even (as rintf), the digits and
 * their sums in integers (any order: exact). */
I24 void ld_cpu_i24_prep_avx512(int8_t *dig, float *scale, float *xs, int32_t *dsum, const float *x, size_t nblk)
{
    const __m512 fmax = _mm512_set1_ps(3.40282347e38f);
    for (size_t b = 0; b < nblk; b++, x += QB, dig += 3 * QB, dsum += 3) {
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
        __mmask16 ok = _mm512_cmp_ps_mask(a0, fmax, _CMP_LE_OQ) & _mm512_cmp_ps_mask(a1, fmax, _CMP_LE_OQ);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        if (ok != 0xFFFF || amax == 0.0f) {
            memset(dig, 0, 3 * QB);
            dsum[0] = dsum[1] = dsum[2] = 0;
            scale[b] = ok == 0xFFFF ? 1.0f : NAN;
            xs[b] = ok == 0xFFFF ? 0.0f : NAN;
            continue;
        }
        int E = ld_cpu_i24_block_exp(amax);
        __m512 ne = _mm512_set1_ps((float)-E);
        __m512i X0 = _mm512_cvt_roundps_epi32(_mm512_scalef_ps(v0, ne), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512i X1 = _mm512_cvt_roundps_epi32(_mm512_scalef_ps(v1, ne), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512i c0[3], c1[3];
        split3(X0, c0);
        split3(X1, c1);
        for (int k = 0; k < 3; k++) {
            _mm_storeu_si128((__m128i *)(void *)(dig + k * QB), _mm512_cvtepi32_epi8(c0[k]));
            _mm_storeu_si128((__m128i *)(void *)(dig + k * QB + 16), _mm512_cvtepi32_epi8(c1[k]));
            dsum[k] = _mm512_reduce_add_epi32(_mm512_add_epi32(c0[k], c1[k]));
        }
        scale[b] = ld_cpu_i24_pow2(E);
        xs[b] = (float)_mm512_reduce_add_epi32(_mm512_add_epi32(X0, X1)) * scale[b];
    }
}

#else /* not x86-64: never called (ld_cpu_i24_simd() is portable) */
void ld_cpu_i24_group_avx512(const ld_cpu_i24mm *m, const unsigned char *gp, size_t g)
{
    (void)m;
    (void)gp;
    (void)g;
}
void ld_cpu_i24_streams_avx512(const ld_cpu_i24mm *m, const unsigned char *const gp[LD_CPU_I24_STREAMS],
                               const size_t g[LD_CPU_I24_STREAMS])
{
    (void)m;
    (void)gp;
    (void)g;
}
void ld_cpu_i24_prep_avx512(int8_t *dig, float *scale, float *xs, int32_t *dsum, const float *x, size_t nblk)
{
    (void)dig;
    (void)scale;
    (void)xs;
    (void)dsum;
    (void)x;
    (void)nblk;
}
#endif
