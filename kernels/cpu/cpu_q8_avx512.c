/* cpu_q8_avx512.c - the q8 matmul of cpu_q8.h with AVX-512 VNNI: weight
 * blocks' integers as bytes against the block's 32 quantized activations in
 * vpdpbusd (unsigned bytes times signed ones, four products a 32-bit lane:
 * lane l is p_l of cpu_q8.h, exact), sixteen rows of one token at a time,
 * two rows' blocks a 512-bit register (rows16), eight rows for a tail of
 * eight (rows8, a block a 256-bit register).  Compiled with target
 * attributes, called only when the machine has AVX-512 F, BW, VL and VNNI
 * (ld_cpu_q8_simd). */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <limits.h>

#include "cpu_q8_x86.h"

#define Q8_TARGET "avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c"
#define Q8 __attribute__((target(Q8_TARGET)))
#define Q8_INLINE static inline __attribute__((always_inline, target(Q8_TARGET)))

/* p_0 .. p_7 of one row's block against x (32 int8s).  Q4: the sixteen
 * bytes in both halves, the low nibbles (elements 0-15) kept in the low
 * half and the high ones (16-31) shifted down in the high half; Q4_0's
 * offset 8 comes off as 8 * the lane's sum of x (x8, once a block for all
 * rows).  Q8_0: |w| against x with w's signs, vpdpbusd's bytes being
 * unsigned on one side. */
Q8_INLINE __m256i block_dot(const unsigned char *blk, const ld_kdt dt, __m256i x, __m256i x8)
{
    if (dt == LD_KDT_Q8_0) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    }
    __m256i v = ld_q8_nibbles(blk + (dt == LD_KDT_Q4_1 ? 4 : 2));
    __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), v, x);
    return dt == LD_KDT_Q4_0 ? _mm256_sub_epi32(p, x8) : p;
}

/* What a pass over rows of one token walks: its blocks' count and size, the
 * weight pointer (advanced a block a step), the token's prep. */
typedef struct {
    int nb;
    size_t bytes;
    const unsigned char *wb;
    const int8_t *xq;
    const float *xd, *xs;
} q8_walk;

Q8_INLINE q8_walk walk_of(const ld_cpu_q8mm *m, const ld_kdt dt, int t)
{
    int nb = m->K / LD_CPU_QB;
    q8_walk k = {nb, ld_cpu_q32_bytes(dt), (const unsigned char *)m->w, m->xq + (size_t)t * (size_t)m->K,
                 m->xd + (size_t)t * (size_t)nb, m->xs + (size_t)t * (size_t)nb};
    return k;
}

/* the weight bytes [from, from + len) into the cache, those of the matrix */
Q8_INLINE void prefetch_span(const ld_cpu_q8mm *m, size_t from, size_t len)
{
    size_t end = (size_t)m->N * m->row_bytes;
    for (size_t o = from; o < from + len && o < end; o += 64) _mm_prefetch((const char *)m->w + o, _MM_HINT_T0);
}

#define ROW(r)                                                                                            \
    a[r] = _mm256_fmadd_ps(_mm256_set1_ps(sc[2 * (r)]), _mm256_cvtepi32_ps(block_dot(k.wb + off[r], dt, x, x8)), \
                           a[r])

/* Rows [n0, n0+8) of token t.  The rows' block headers come in one gather
 * and one conversion: lane 2r is row r's d, lane 2r+1 the next 16 bits
 * (Q4_1's m; unused otherwise), so s = d * dx of the eight rows is one
 * multiply and Q4_1's offset sums run in the odd lanes of one register
 * (lane 2r+1: row r's macc, same order).  prefetch: the next eight rows'
 * bytes, a block's worth per row and step (the first token's pass). */
Q8_INLINE void rows8(const ld_cpu_q8mm *m, const ld_kdt dt, size_t n0, int t, const int off[8], int prefetch)
{
    __m256 a[8];
    for (int r = 0; r < 8; r++) a[r] = _mm256_setzero_ps();
    __m512 macc = _mm512_setzero_ps();
    const __m256i voff = _mm256_loadu_si256((const __m256i *)off);
    float sc[16];
    q8_walk k = walk_of(m, dt, t);
    size_t pf = (n0 + 8) * m->row_bytes, pf_step = 8 * k.bytes;
    for (int b = 0; b < k.nb; b++, k.wb += k.bytes, pf += pf_step) {
        if (prefetch) prefetch_span(m, pf, pf_step);
        __m512 dm = _mm512_cvtph_ps(_mm256_i32gather_epi32((const int *)k.wb, voff, 1));
        _mm512_storeu_ps(sc, _mm512_mul_ps(dm, _mm512_set1_ps(k.xd[b])));
        /* read the scales back as broadcasts from memory (free on the load
         * ports) rather than shuffled out of a register */
        __asm__("" : "+m"(sc));
        if (dt == LD_KDT_Q4_1) macc = _mm512_fmadd_ps(dm, _mm512_set1_ps(k.xs[b]), macc);
        __m256i x = _mm256_loadu_si256((const __m256i *)(k.xq + (size_t)b * LD_CPU_QB));
        __m256i x8 = dt == LD_KDT_Q4_0 ? _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), x)
                                       : _mm256_setzero_si256();
        ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5); ROW(6); ROW(7);
    }
    float mc[16];
    _mm512_storeu_ps(mc, macc);
    for (int r = 0; r < 8; r++) {
        size_t n = n0 + (size_t)r;
        float bias = 0.0f;
        if (m->bias) ld_ref_to_f32(&bias, m->bias, m->bias_dt, n, 1);
        m->out[(size_t)t * (size_t)m->N + n] = (ld_q8_hsum8(a[r]) + (dt == LD_KDT_Q4_1 ? mc[2 * r + 1] : 0.0f)) + bias;
    }
}
#undef ROW

/* Two rows' block b as the 64 bytes one vpdpbusd takes against xx (the
 * block's 32 activations twice): 128-bit chunks [a lo, a hi, b lo, b hi]
 * for Q4 (the low nibbles, elements 0-15, then the high ones, 16-31),
 * [a, b] for Q8_0 with 128 added (unsigned bytes; the caller's accumulator
 * starts at -128 times the lane's sum of x, so the lane's integer is still
 * p_l of cpu_q8.h, exact).  Lanes 0-7 of the result are row a's p_0..p_7,
 * lanes 8-15 row b's. */
Q8_INLINE __m512i pair_dot(const unsigned char *a, const unsigned char *b, const ld_kdt dt, __m512i xx,
                           __m512i start)
{
    __m512i v;
    if (dt == LD_KDT_Q8_0) {
        v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
                               _mm256_loadu_si256((const __m256i *)(b + 2)), 1);
        v = _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    } else {
        const int qo = dt == LD_KDT_Q4_1 ? 4 : 2;
        v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(a + qo)));
        v = _mm512_mask_broadcast_i32x4(v, 0xff00, _mm_loadu_si128((const __m128i *)(b + qo)));
        v = _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)),
                             _mm512_set1_epi8(15));
    }
    return _mm512_dpbusd_epi32(start, v, xx);
}

/* Rows [n0, n0+16) of token t, two rows a register (pair_dot): seven
 * vector instructions a pair where rows8 takes five a row.  The rows' headers come in one gather (lane
 * r: row r's d, and Q4_1's m above it), s = d * dx of the sixteen rows is one
 * multiply, and a pair's [s_a x 8, s_b x 8] one permute of it; Q4_1's
 * offset sums run in the lanes of one register (lane r: row r's macc).
 * Each lane's fma is rows8's, so the same bits.  prefetch: the next sixteen
 * rows' bytes, a block's worth per row and step. */
Q8_INLINE void rows16(const ld_cpu_q8mm *m, const ld_kdt dt, size_t n0, int t, const int off[16], int prefetch)
{
    /* the rows' offsets, read from memory in the loop: a load each, where
     * the compiler would hold them in vector registers, a port-0 move each */
    size_t at[16];
    for (int r = 0; r < 16; r++) at[r] = (size_t)off[r];
    __m512 acc[8];
    __m512i pick[8];
    for (int p = 0; p < 8; p++) {
        acc[p] = _mm512_setzero_ps();
        pick[p] = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(2 * p), _mm512_set1_epi32(2 * p + 1));
    }
    __m512 macc = _mm512_setzero_ps();
    const __m512i voff = _mm512_loadu_si512(off);
    q8_walk k = walk_of(m, dt, t);
    size_t pf = (n0 + 16) * m->row_bytes, pf_step = 16 * k.bytes;
    for (int b = 0; b < k.nb; b++, k.wb += k.bytes, pf += pf_step) {
        if (prefetch) prefetch_span(m, pf, pf_step);
        __m512i dm = _mm512_i32gather_epi32(voff, (const int *)k.wb, 1);
        __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)), _mm512_set1_ps(k.xd[b]));
        if (dt == LD_KDT_Q4_1)
            macc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))),
                                   _mm512_set1_ps(k.xs[b]), macc);
        __m512i xx = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(k.xq + (size_t)b * LD_CPU_QB)));
        __m512i start = _mm512_setzero_si512();
        if (dt != LD_KDT_Q4_1) /* start = -(8 or 128) * the lane's sum of x */
            start = _mm512_sub_epi32(start, _mm512_dpbusd_epi32(start, _mm512_set1_epi8(dt == LD_KDT_Q4_0 ? 8 : -128),
                                                                xx));
        __asm__("" : "+m"(at));
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            __m512i d = pair_dot(k.wb + at[2 * p], k.wb + at[2 * p + 1], dt, xx, start);
            acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick[p], sc), _mm512_cvtepi32_ps(d), acc[p]);
        }
    }
    float mc[16], h[16];
    _mm512_storeu_ps(mc, macc);
#pragma GCC unroll 8
    for (int p = 0; p < 8; p++) { /* rows 2p and 2p + 1: hsum8 of each half */
        h[2 * p] = ld_q8_hsum8(_mm512_castps512_ps256(acc[p]));
        h[2 * p + 1] = ld_q8_hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p]), 1)));
    }
    for (int r = 0; r < 16; r++) {
        size_t n = n0 + (size_t)r;
        float bias = 0.0f;
        if (m->bias) ld_ref_to_f32(&bias, m->bias, m->bias_dt, n, 1);
        m->out[(size_t)t * (size_t)m->N + n] = (h[r] + (dt == LD_KDT_Q4_1 ? mc[r] : 0.0f)) + bias;
    }
}

Q8_INLINE void q8_rows(const ld_cpu_q8mm *m, const ld_kdt dt, size_t i0, size_t i1)
{
    if ((size_t)m->N * m->row_bytes <= INT_MAX) { /* the gathers' offsets are ints */
        for (; i0 + 16 <= i1; i0 += 16) {
            int off[16];
            for (int r = 0; r < 16; r++) off[r] = (int)(ld_cpu_src_row(i0 + (size_t)r, m->rope_hd) * m->row_bytes);
            for (int t = 0; t < m->T; t++) rows16(m, dt, i0, t, off, t == 0);
        }
        for (; i0 + 8 <= i1; i0 += 8) {
            int off[8];
            for (int r = 0; r < 8; r++) off[r] = (int)(ld_cpu_src_row(i0 + (size_t)r, m->rope_hd) * m->row_bytes);
            for (int t = 0; t < m->T; t++) rows8(m, dt, i0, t, off, t == 0);
        }
    }
    for (size_t n = i0; n < i1; n++) /* the last rows: the same arithmetic in C */
        for (int t = 0; t < m->T; t++) ld_cpu_q8_out_portable(m, n, t);
}

Q8 void ld_cpu_q8_rows_avx512(const ld_cpu_q8mm *m, size_t i0, size_t i1)
{
    if (m->dt == LD_KDT_Q4_0) q8_rows(m, LD_KDT_Q4_0, i0, i1);
    else if (m->dt == LD_KDT_Q4_1) q8_rows(m, LD_KDT_Q4_1, i0, i1);
    else q8_rows(m, LD_KDT_Q8_0, i0, i1);
}

/* The prep of cpu_q8.h for n blocks, as cpu_q8.c's quantize_block computes
 * it: amax by vmaxps (a NaN |x| loses to the running max, as there; max is
 * exact, so the lanes' order does not matter), id and dx the same scalar
 * divisions, y = x * id, |y| < 127.5 (else 0) truncated and raised by one
 * where |y| - r >= 1/2, the sign put back; xs by the same adds in the same
 * order (lane l: ((x_l + x_8+l) + x_16+l) + x_24+l, then hsum8). */
Q8 void ld_cpu_q8_quantize_avx512(int8_t *q, float *dx, float *xs, const float *x, size_t nblk)
{
    for (size_t b = 0; b < nblk; b++, x += LD_CPU_QB, q += LD_CPU_QB) {
        __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
        __m512 mx = _mm512_max_ps(a1, _mm512_max_ps(a0, _mm512_setzero_ps()));
        float amax = _mm512_reduce_max_ps(mx);
        float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        dx[b] = amax / 127.0f;
        __m512 vid = _mm512_set1_ps(id);
        for (int g = 0; g < 2; g++) {
            __m512 y = _mm512_mul_ps(g ? v1 : v0, vid), a = _mm512_abs_ps(y);
            __mmask16 ok = _mm512_cmp_ps_mask(a, _mm512_set1_ps(127.5f), _CMP_LT_OQ); /* NaN: false */
            __m512i r = _mm512_maskz_cvttps_epi32(ok, a);
            __mmask16 up = _mm512_mask_cmp_ps_mask(ok, _mm512_sub_ps(a, _mm512_cvtepi32_ps(r)),
                                                   _mm512_set1_ps(0.5f), _CMP_GE_OQ);
            r = _mm512_mask_add_epi32(r, up, r, _mm512_set1_epi32(1));
            __mmask16 neg = _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LT_OQ);
            r = _mm512_mask_sub_epi32(r, neg, _mm512_setzero_si512(), r);
            _mm_storeu_si128((__m128i *)(q + 16 * g), _mm512_cvtepi32_epi8(r));
        }
        __m256 l = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm512_castps512_ps256(v0), _mm256_castpd_ps(
                                     _mm512_extractf64x4_pd(_mm512_castps_pd(v0), 1))), _mm512_castps512_ps256(v1)),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v1), 1)));
        xs[b] = ld_q8_hsum8(l);
    }
}

#else /* not x86-64: never called (ld_cpu_q8_simd() is portable) */
void ld_cpu_q8_rows_avx512(const ld_cpu_q8mm *m, size_t i0, size_t i1)
{
    (void)m;
    (void)i0;
    (void)i1;
}
void ld_cpu_q8_quantize_avx512(int8_t *q, float *dx, float *xs, const float *x, size_t nblk)
{
    (void)q;
    (void)dx;
    (void)xs;
    (void)x;
    (void)nblk;
}
#endif
