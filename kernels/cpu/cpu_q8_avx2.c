/* cpu_q8_avx2.c - the q8 matmul of cpu_q8.h with AVX2, from the packed
 * layout: eight rows of one token a pass, row r in 32-bit lane r, or the
 * eight rows of each of four groups far apart, a block of each in turn (four
 * streams from memory: cpu_q8.c says why).  A
 * chunk's four bytes a row against the four activations they meet,
 * broadcast to every lane, in vpmaddubsw (unsigned times signed bytes,
 * pairs summed into 16 bits); a Q4 block's eight such products summed in
 * 16 bits (none is over 2 * 15 * 127 = 3810 in size, so their sum fits)
 * and into 32 by vpmaddwd; Q8_0's as |w| against x with w's signs, each
 * into 32 bits at once (2 * 128 * 127 leaves no room to add).  Lane r is
 * then row r's p, exact, and its scale, offset and output arithmetic are
 * the twin's, lane for lane.  And the prep's quantizer.  Compiled with
 * target attributes, called only when the machine has AVX2, FMA and F16C
 * (ld_cpu_q8_simd). */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_q8_x86.h"

/* bytes ahead of a block that a pass asks the cache for: the hardware
 * prefetcher alone falls behind the stream (bench_matmul, 256 MB on the
 * 2-core AMD EPYC, three interleaved runs each: 13-14 GB/s without;
 * 14.3-17.3 with 1 KiB, 15.8-18.5 with 1.5 KiB, 12.9-17.6 with 2 KiB) */
#define PREFETCH_AHEAD 1536
#define Q8A_TARGET "avx2,fma,f16c"
#define Q8A __attribute__((target(Q8A_TARGET)))
#define Q8A_INLINE static inline __attribute__((always_inline, target(Q8A_TARGET)))

/* activations x[0..3] in every 32-bit lane */
Q8A_INLINE __m256i x4_all(const int8_t *x)
{
    int32_t v;
    memcpy(&v, x, sizeof v);
    return _mm256_set1_epi32(v);
}

/* the eight rows' p of one block (ints: its chunks) against x (its 32
 * activations); Q4_0's before the offset comes off */
Q8A_INLINE __m256i group_block_dot(const unsigned char *ints, const ld_kdt dt, const int8_t *x)
{
    const __m256i ones = _mm256_set1_epi16(1);
    if (dt == LD_KDT_Q8_0) {
        __m256i p = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            __m256i w = _mm256_loadu_si256((const __m256i *)(ints + 32 * c));
            __m256i u = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x4_all(x + 4 * c), w));
            p = _mm256_add_epi32(p, _mm256_madd_epi16(u, ones));
        }
        return p;
    }
    const __m256i m15 = _mm256_set1_epi8(15);
    __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256(); /* elements 0-15, 16-31 */
    for (int c = 0; c < 4; c++) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(ints + 32 * c));
        lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(_mm256_and_si256(w, m15), x4_all(x + 4 * c)));
        hi = _mm256_add_epi16(
            hi, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(w, 4), m15), x4_all(x + 16 + 4 * c)));
    }
    return _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones);
}

/* outputs [8g[s], 8g[s]+8) of token t from each of the ns groups whose
 * bytes start at gp[s] (dt and ns constants once inlined), a block of each
 * group in turn: ns streams from memory.  Every token's pass prefetches:
 * skipping it for all but the first made no difference to prefill (5
 * interleaved pairs) */
Q8A_INLINE void groups_pass(const ld_cpu_q8mm *m, const ld_kdt dt, const int ns, const unsigned char *const gp[],
                            const size_t g[], int t)
{
    size_t nb = (size_t)(m->K / LD_CPU_QB), step = LD_CPU_Q8_GROUP_ROWS * ld_cpu_q32_bytes(dt);
    size_t head = LD_CPU_Q8_GROUP_ROWS * ld_cpu_q32_head(dt); /* the eight d, then Q4_1's eight m */
    const int8_t *xq = m->xq + (size_t)t * (size_t)m->K;
    const float *xd = m->xd + (size_t)t * nb, *xs = m->xs + (size_t)t * nb;
    const int32_t *qsum = m->qsum + (size_t)t * nb;
    __m256 acc[LD_CPU_Q8_STREAMS], macc[LD_CPU_Q8_STREAMS];
#pragma GCC unroll 4
    for (int s = 0; s < ns; s++) acc[s] = macc[s] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int s = 0; s < ns; s++) {
            const unsigned char *blk = gp[s] + b * step;
            for (size_t o = 0; o < step; o += 64) _mm_prefetch((const char *)blk + PREFETCH_AHEAD + o, _MM_HINT_T0);
            __m256i p = group_block_dot(blk + head, dt, xq + b * LD_CPU_QB);
            if (dt == LD_KDT_Q4_0) p = _mm256_sub_epi32(p, _mm256_set1_epi32(8 * qsum[b]));
            __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk)), _mm256_broadcast_ss(xd + b));
            acc[s] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[s]);
            if (dt == LD_KDT_Q4_1)
                macc[s] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16))),
                                          _mm256_broadcast_ss(xs + b), macc[s]);
        }
    }
    for (int s = 0; s < ns; s++) {
        float bias[LD_CPU_Q8_GROUP_ROWS] = {0};
        if (m->bias) ld_ref_to_f32(bias, m->bias, m->bias_dt, LD_CPU_Q8_GROUP_ROWS * g[s], LD_CPU_Q8_GROUP_ROWS);
        _mm256_storeu_ps(m->out + (size_t)t * (size_t)m->N + LD_CPU_Q8_GROUP_ROWS * g[s],
                         _mm256_add_ps(_mm256_add_ps(acc[s], macc[s]), _mm256_loadu_ps(bias)));
    }
}

/* every token of the groups before the next groups: their bytes are read
 * from memory once, then from L1 */
Q8A_INLINE void groups_all_tokens(const ld_cpu_q8mm *m, const int ns, const unsigned char *const gp[],
                                  const size_t g[])
{
    for (int t = 0; t < m->T; t++) {
        if (m->dt == LD_KDT_Q4_0) groups_pass(m, LD_KDT_Q4_0, ns, gp, g, t);
        else if (m->dt == LD_KDT_Q4_1) groups_pass(m, LD_KDT_Q4_1, ns, gp, g, t);
        else groups_pass(m, LD_KDT_Q8_0, ns, gp, g, t);
    }
}

Q8A void ld_cpu_q8_group_avx2(const ld_cpu_q8mm *m, const unsigned char *gp, size_t g)
{
    groups_all_tokens(m, 1, &gp, &g);
}

Q8A void ld_cpu_q8_streams_avx2(const ld_cpu_q8mm *m, const unsigned char *const gp[LD_CPU_Q8_STREAMS],
                                const size_t g[LD_CPU_Q8_STREAMS])
{
    groups_all_tokens(m, LD_CPU_Q8_STREAMS, gp, g);
}

/* chunks c = 0..3 of the eight rows' sixteen bytes at s[r] + off (row r's
 * dword c to lane r of chunk c): two 4x4 transposes of dwords, by float
 * shuffles (they move bits, they compute nothing) */
Q8A_INLINE void pack_chunks4(unsigned char *o, const unsigned char *const s[LD_CPU_Q8_GROUP_ROWS], size_t off)
{
    __m128 r[8];
    for (int i = 0; i < 8; i++) r[i] = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(s[i] + off)));
    _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
    _MM_TRANSPOSE4_PS(r[4], r[5], r[6], r[7]);
    for (int c = 0; c < 4; c++)
        _mm256_storeu_ps((float *)(void *)(o + 32 * c), _mm256_set_m128(r[4 + c], r[c]));
}

Q8A void ld_cpu_q8_pack_blocks_avx2(unsigned char *o, const unsigned char *const src[LD_CPU_Q8_GROUP_ROWS], ld_kdt dt,
                                    size_t nb)
{
    size_t bytes = ld_cpu_q32_bytes(dt), head = ld_cpu_q32_head(dt);
    for (size_t b = 0, off = 0; b < nb; b++, off += bytes) {
        for (size_t h = 0; h < head; h += 2) /* d, then m */
            for (int r = 0; r < LD_CPU_Q8_GROUP_ROWS; r++, o += 2) memcpy(o, src[r] + off + h, 2);
        for (size_t c = 0; c < bytes - head; c += 16, o += 128) pack_chunks4(o, src, off + head + c);
    }
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
        xs[b] = ld_x86_hsum8(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[1]), v[2]), v[3]));
    }
}

#else /* not x86-64: never called (ld_cpu_q8_simd() is portable) */
void ld_cpu_q8_group_avx2(const ld_cpu_q8mm *m, const unsigned char *gp, size_t g)
{
    (void)m;
    (void)gp;
    (void)g;
}
void ld_cpu_q8_streams_avx2(const ld_cpu_q8mm *m, const unsigned char *const gp[LD_CPU_Q8_STREAMS],
                            const size_t g[LD_CPU_Q8_STREAMS])
{
    (void)m;
    (void)gp;
    (void)g;
}
void ld_cpu_q8_pack_blocks_avx2(unsigned char *dst, const unsigned char *const src[LD_CPU_Q8_GROUP_ROWS], ld_kdt dt,
                                size_t nb)
{
    (void)dst;
    (void)src;
    (void)dt;
    (void)nb;
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
