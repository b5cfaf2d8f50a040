/* cpu_avx2.c - the fast kernels of cpu_ops.h on x86-64 with AVX2, FMA and
 * F16C (compiled for them with target attributes, called only when the
 * machine has them; see ld_cpu_simd).  The blocks' sixteen lanes are two
 * registers of eight (lo = lanes 0-7, hi = lanes 8-15), lane for lane the
 * same arithmetic as the portable twin and the AVX-512 code, so all three
 * give the same bits. */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_q8_x86.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* [d, m, 0, 0] of a block (m = 0 but for Q4_1): its f16 header in one
 * load and one conversion (exact); d goes to every lane by a broadcast,
 * m into Q4_1's offset sums */
AVX2_INLINE __m128 block_dm(const unsigned char *b, const ld_kdt dt)
{
    int h = 0;
    memcpy(&h, b, ld_cpu_q32_head(dt)); /* little-endian: d low, m high */
    return _mm_cvtph_ps(_mm_cvtsi32_si128(h));
}

/* Q4's lane shifts (decode_group), then the nibble mask */
static const int32_t q4_consts[16] __attribute__((aligned(32))) = {0, 0, 4, 4, 8, 8, 12, 12,
                                                                   15, 15, 15, 15, 15, 15, 15, 15};

/* q4_consts as decode_group's sh and m15; reload: read from memory at each
 * call (the empty asm hides that the pointer is the same), so that they
 * hold no register across the loop where the accumulators need them all */
AVX2_INLINE void q4_consts_get(__m256i *sh, __m256i *m15, int reload)
{
    const int32_t *c = q4_consts;
    if (reload) __asm__("" : "+r"(c));
    *sh = _mm256_load_si256((const __m256i *)c);
    *m15 = _mm256_load_si256((const __m256i *)(c + 8));
}

/* group g (16 elements) of a block in lane order: q[0] lanes 0-7, q[1] 8-15 */
AVX2_INLINE void decode_group(const unsigned char *b, const ld_kdt dt, int g, __m256 q[2], int reload)
{
    if (dt == LD_KDT_Q8_0) {
        for (int h = 0; h < 2; h++)
            q[h] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + 16 * g + 8 * h))));
        return;
    }
    /* a broadcast 64-bit word: lane j takes 32-bit half j % 2 shifted by
     * 4 (j / 2), so no cross-lane shuffle; lanes 8-15 the same shifted by
     * 16 more (one constant: the registers are the scarce thing here) */
    __m256i sh, m15;
    q4_consts_get(&sh, &m15, reload);
    long long word;
    memcpy(&word, b + ld_cpu_q32_head(dt) + 8 * g, sizeof word);
    __m256i t = _mm256_srlv_epi32(_mm256_set1_epi64x(word), sh);
    __m256i lo = _mm256_and_si256(t, m15);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi32(t, 16), m15);
    if (dt == LD_KDT_Q4_0) {
        lo = _mm256_sub_epi32(lo, _mm256_set1_epi32(8));
        hi = _mm256_sub_epi32(hi, _mm256_set1_epi32(8));
    }
    q[0] = _mm256_cvtepi32_ps(lo);
    q[1] = _mm256_cvtepi32_ps(hi);
}

/* the scaled decode's constants: lane j of either register keeps nibble
 * j / 2 of its 32-bit half where it lies (q 2^e, e = 4 (j / 2)), then
 * Q4_0's 8 at the same place */
static const int32_t q4e_consts[16] __attribute__((aligned(32))) = {
    0xF, 0xF, 0xF0, 0xF0, 0xF00, 0xF00, 0xF000, 0xF000, 8, 8, 0x80, 0x80, 0x800, 0x800, 0x8000, 0x8000};

/* decode_group's lanes as q 2^e for x 2^-e (ld_cpu_mm's xe): the same
 * products with one shift, not three.  lo masks the broadcast word; hi,
 * nibbles 4-7 of each half, masks it shifted down sixteen bits. */
AVX2_INLINE void decode_group_e(const unsigned char *b, const ld_kdt dt, int g, __m256 q[2], int reload)
{
    const int32_t *c = q4e_consts;
    if (reload) __asm__("" : "+r"(c)); /* as q4_consts_get's */
    long long word;
    memcpy(&word, b + ld_cpu_q32_head(dt) + 8 * g, sizeof word);
    __m256i v = _mm256_set1_epi64x(word), mask = _mm256_load_si256((const __m256i *)c);
    __m256i lo = _mm256_and_si256(v, mask), hi = _mm256_and_si256(_mm256_srli_epi32(v, 16), mask);
    if (dt == LD_KDT_Q4_0) {
        __m256i eight = _mm256_load_si256((const __m256i *)(c + 8));
        lo = _mm256_sub_epi32(lo, eight);
        hi = _mm256_sub_epi32(hi, eight);
    }
    q[0] = _mm256_cvtepi32_ps(lo);
    q[1] = _mm256_cvtepi32_ps(hi);
}

/* a block's two groups in lane order (q[0..1] group 0, q[2..3] group 1):
 * scaled (m->xe) or not */
AVX2_INLINE void decode_block(const unsigned char *b, const ld_kdt dt, __m256 q[4], int reload, int scaled)
{
    if (scaled && dt != LD_KDT_Q8_0) {
        decode_group_e(b, dt, 0, q, reload);
        decode_group_e(b, dt, 1, q + 2, reload);
        return;
    }
    decode_group(b, dt, 0, q, reload);
    decode_group(b, dt, 1, q + 2, reload);
}

/* a block's sixteen lane sums for one token, x in lane order (xv: the
 * block's 32 values): s[j] = fma(q1[j], x1[j], fma(q0[j], x0[j], 0)).
 * The inner fma with 0 is a multiply here (one register less): the two
 * differ only in the sign of a zero product (fma gives +0), which can
 * reach s only as s = -0 where the twin has +0, and then d * s is a zero
 * added to an accumulator that is never -0 (it starts at +0, and x + y
 * rounds to -0 only when both are -0), so the outputs are the same bits. */
AVX2_INLINE void block_sums16(const __m256 q[4], const float *xv, __m256 s[2])
{
    s[0] = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(xv + 16), _mm256_mul_ps(q[0], _mm256_loadu_ps(xv)));
    s[1] = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xv + 24), _mm256_mul_ps(q[1], _mm256_loadu_ps(xv + 8)));
}

/* block b of a tile of tokens: their sums folded into acc, the offsets
 * (Q4_1) into macc; x0 is token t0's row of xq (or xe: scaled) */
AVX2_INLINE void tile_block(const ld_cpu_mm *m, const unsigned char *blk, const ld_kdt dt, const float *x0, int b,
                            const float *xs, const int tn, __m256 acc[LD_CPU_TILE][2], __m128 *macc, int scaled)
{
    __m256 q[4];
    decode_block(blk, dt, q, 1, scaled);
    __m128 dm = block_dm(blk, dt);
    __m256 d = _mm256_broadcastss_ps(dm);
    for (int tt = 0; tt < tn; tt++) {
        __m256 s[2];
        block_sums16(q, x0 + (size_t)tt * (size_t)m->K + (size_t)b * LD_CPU_QB, s);
        acc[tt][0] = _mm256_fmadd_ps(d, s[0], acc[tt][0]);
        acc[tt][1] = _mm256_fmadd_ps(d, s[1], acc[tt][1]);
    }
    if (dt == LD_KDT_Q4_1) {
        int nb = m->K / LD_CPU_QB;
        float v[4] = {0};
        for (int tt = 0; tt < tn; tt++) v[tt] = xs[(size_t)tt * (size_t)nb + (size_t)b];
        *macc = _mm_fmadd_ps(_mm_permute_ps(dm, 0x55), _mm_loadu_ps(v), *macc);
    }
}

/* tokens [t0, t0+tn) of output n; dt and tn constant at each call site.
 * A block is decoded once for the tile; the tokens' offset sums (Q4_1)
 * run side by side in the lanes of one register, each lane the scalar
 * chain macc = fma(m, xs, macc) of the portable twin. */
AVX2_INLINE void q32_tile(const ld_cpu_mm *m, const unsigned char *wrow, const ld_kdt dt, int t0, const int tn,
                          size_t n, float bias, int scaled)
{
    __m256 acc[LD_CPU_TILE][2];
    __m128 macc = _mm_setzero_ps();
    for (int tt = 0; tt < tn; tt++) acc[tt][0] = acc[tt][1] = _mm256_setzero_ps();
    int nb = m->K / LD_CPU_QB;
    size_t bytes = ld_cpu_q32_bytes(dt);
    const float *x0 = (scaled ? m->xe : m->xq) + (size_t)t0 * (size_t)m->K;
    const float *xs = dt == LD_KDT_Q4_1 ? m->xs + (size_t)t0 * (size_t)nb : NULL;
    for (int b = 0; b < nb; b++) tile_block(m, wrow + (size_t)b * bytes, dt, x0, b, xs, tn, acc, &macc, scaled);
    float mv[4];
    _mm_storeu_ps(mv, macc);
    for (int tt = 0; tt < tn; tt++)
        m->out[(size_t)(t0 + tt) * (size_t)m->N + n] = (ld_x86_hsum8(_mm256_add_ps(acc[tt][0], acc[tt][1])) + mv[tt]) + bias;
}

/* block b of q32_pair's two rows */
AVX2_INLINE void pair_block(const ld_cpu_mm *m, const ld_kdt dt, const unsigned char *b0, const unsigned char *b1,
                            const float *xv, int b, __m256 a0[2], __m256 a1[2], __m128 *macc, int scaled)
{
    __m256 q[4], s[2];
    __m128 dm0 = block_dm(b0, dt), dm1 = block_dm(b1, dt);
    decode_block(b0, dt, q, 0, scaled);
    block_sums16(q, xv, s);
    __m256 d = _mm256_broadcastss_ps(dm0);
    a0[0] = _mm256_fmadd_ps(d, s[0], a0[0]);
    a0[1] = _mm256_fmadd_ps(d, s[1], a0[1]);
    /* x again from memory (L1), not kept in four registers across the
     * rows: the empty asm hides that the pointer is the same */
    __asm__("" : "+r"(xv));
    decode_block(b1, dt, q, 0, scaled);
    block_sums16(q, xv, s);
    d = _mm256_broadcastss_ps(dm1);
    a1[0] = _mm256_fmadd_ps(d, s[0], a1[0]);
    a1[1] = _mm256_fmadd_ps(d, s[1], a1[1]);
    if (dt == LD_KDT_Q4_1) *macc = _mm_fmadd_ps(_mm_unpacklo_ps(dm0, dm1), _mm_broadcast_ss(m->xs + b), *macc);
}

/* one token, outputs n0 and n0 + 1 at once (decode): each row's arithmetic
 * is q32_tile's.  A row's block is summed and folded before the other's
 * (x read again from L1), so that the live registers stay under sixteen:
 * accumulators spilled to the stack put a store and a load into every
 * loop-carried chain.  The two rows' offset sums (Q4_1) share one fma:
 * lanes 2 and 3 of [d0, d1, m0, m1] * xs. */
AVX2_INLINE void q32_pair(const ld_cpu_mm *m, const ld_kdt dt, size_t n0, int scaled)
{
    const unsigned char *w0 = (const unsigned char *)m->w + ld_cpu_src_row(n0, m->rope_hd) * m->row_bytes;
    const unsigned char *w1 = (const unsigned char *)m->w + ld_cpu_src_row(n0 + 1, m->rope_hd) * m->row_bytes;
    __m256 a0[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, a1[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 macc = _mm_setzero_ps();
    int nb = m->K / LD_CPU_QB;
    size_t bytes = ld_cpu_q32_bytes(dt);
    const float *x = scaled ? m->xe : m->xq;
    /* the same block of the rows eight ahead (where rows are in order): the
     * hardware prefetcher alone does not keep a core's loads ahead of the
     * arithmetic (bench/README.md) */
    size_t pf = (n0 + 8) * m->row_bytes, pf_end = (size_t)m->N * m->row_bytes;
    for (int b = 0; b < nb; b++, pf += 2 * bytes) {
        if (pf < pf_end) _mm_prefetch((const char *)m->w + pf, _MM_HINT_T0);
        pair_block(m, dt, w0 + (size_t)b * bytes, w1 + (size_t)b * bytes, x + (size_t)b * LD_CPU_QB, b, a0, a1,
                   &macc, scaled);
    }
    float mv[4];
    _mm_storeu_ps(mv, macc);
    m->out[n0] = (ld_x86_hsum8(_mm256_add_ps(a0[0], a0[1])) + mv[2]) + ld_cpu_bias(m, n0);
    m->out[n0 + 1] = (ld_x86_hsum8(_mm256_add_ps(a1[0], a1[1])) + mv[3]) + ld_cpu_bias(m, n0 + 1);
}

AVX2_INLINE void q32_rows(const ld_cpu_mm *m, const ld_kdt dt, size_t i0, size_t i1, int scaled)
{
    if (m->T == 1)
        for (; i0 + 1 < i1; i0 += 2) q32_pair(m, dt, i0, scaled);
    for (size_t n = i0; n < i1; n++) {
        const unsigned char *wrow = (const unsigned char *)m->w + ld_cpu_src_row(n, m->rope_hd) * m->row_bytes;
        float bias = ld_cpu_bias(m, n);
        for (int t0 = 0; t0 < m->T; t0 += LD_CPU_TILE) {
            switch (m->T - t0) {
            case 1: q32_tile(m, wrow, dt, t0, 1, n, bias, scaled); break;
            case 2: q32_tile(m, wrow, dt, t0, 2, n, bias, scaled); break;
            case 3: q32_tile(m, wrow, dt, t0, 3, n, bias, scaled); break;
            default: q32_tile(m, wrow, dt, t0, 4, n, bias, scaled); break;
            }
        }
    }
}

AVX2 void ld_cpu_q32_rows_avx2(const ld_cpu_mm *m, size_t i0, size_t i1)
{
    if (m->dt == LD_KDT_Q4_0 && m->xe) q32_rows(m, LD_KDT_Q4_0, i0, i1, 1);
    else if (m->dt == LD_KDT_Q4_0) q32_rows(m, LD_KDT_Q4_0, i0, i1, 0);
    else if (m->dt == LD_KDT_Q4_1 && m->xe) q32_rows(m, LD_KDT_Q4_1, i0, i1, 1);
    else if (m->dt == LD_KDT_Q4_1) q32_rows(m, LD_KDT_Q4_1, i0, i1, 0);
    else q32_rows(m, LD_KDT_Q8_0, i0, i1, 0);
}

AVX2_INLINE void plain_tile(const ld_cpu_mm *m, const float *wr, int t0, const int tn, size_t n, float bias)
{
    __m256 acc[LD_CPU_TILE];
    float tail[LD_CPU_TILE];
    for (int tt = 0; tt < tn; tt++) {
        acc[tt] = _mm256_setzero_ps();
        tail[tt] = 0.0f;
    }
    int K = m->K, k8 = K - K % 8;
    for (int k = 0; k < k8; k += 8) {
        __m256 w = _mm256_loadu_ps(wr + k);
        for (int tt = 0; tt < tn; tt++)
            acc[tt] = _mm256_fmadd_ps(w, _mm256_loadu_ps(m->x + (size_t)(t0 + tt) * (size_t)K + k), acc[tt]);
    }
    for (int tt = 0; tt < tn; tt++) {
        const float *xr = m->x + (size_t)(t0 + tt) * (size_t)K;
        for (int k = k8; k < K; k++) tail[tt] = fmaf(wr[k], xr[k], tail[tt]);
        m->out[(size_t)(t0 + tt) * (size_t)m->N + n] = (ld_x86_hsum8(acc[tt]) + tail[tt]) + bias;
    }
}

AVX2 void ld_cpu_plain_tile_avx2(const ld_cpu_mm *m, const float *wr, int t0, int tn, size_t n, float bias)
{
    switch (tn) {
    case 1: plain_tile(m, wr, t0, 1, n, bias); break;
    case 2: plain_tile(m, wr, t0, 2, n, bias); break;
    case 3: plain_tile(m, wr, t0, 3, n, bias); break;
    default: plain_tile(m, wr, t0, 4, n, bias); break;
    }
}

/* ---------------------------------------------------------------- block-scaled rows */

/* Sixteen E4M3 codes as fp16 of the codes' values times 2^-8, exactly:
 * magnitude bits 0-6 at fp16 bits 7-13 and the sign at bit 15 (an E4M3
 * subnormal is an fp16 subnormal); the NaN magnitude 0x7f becomes the fp16
 * NaN 0x7e00, which F16C widens to 0x7fc00000, the reference's NAN (and
 * with the sign its -NAN, 0xffc00000).  By way of fp16 because F16C widens
 * subnormal halves at full speed, where an fp32 subnormal times 2^120
 * takes a microcode assist (some 40 times slower, measured). */
AVX2_INLINE __m256i e4m3_halves(__m128i codes)
{
    __m256i w = _mm256_cvtepu8_epi16(codes);
    __m256i mag = _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16(0x3f80));
    __m256i nan = _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x3f80));
    mag = _mm256_xor_si256(mag, _mm256_and_si256(nan, _mm256_set1_epi16(0x3f80 ^ 0x7e00)));
    return _mm256_or_si256(mag, _mm256_and_si256(_mm256_slli_epi16(w, 8), _mm256_set1_epi16((short)0x8000)));
}

/* eight of those halves as the codes' values times the scale: the exact
 * product by 2^8, then the one rounding of the reference's value * sc (a
 * NaN stays the same NaN) */
AVX2_INLINE __m256 e4m3_scaled(__m128i halves, __m256 sc)
{
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtph_ps(halves), _mm256_set1_ps(256.0f)), sc);
}

AVX2_INLINE void f8_store16(float *dst, __m128i codes, __m256 sc)
{
    __m256i h = e4m3_halves(codes);
    _mm256_storeu_ps(dst, e4m3_scaled(_mm256_castsi256_si128(h), sc));
    _mm256_storeu_ps(dst + 8, e4m3_scaled(_mm256_extracti128_si256(h, 1), sc));
}

/* Eight E2M1 codes (bytes b[0..4), the low nibble first) times sc: vpermps
 * takes the magnitude from the low three bits, bit 3 is the sign. */
AVX2_INLINE __m256 e2m1_scaled(__m128i bytes, __m256 sc)
{
    const __m256 mag = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    __m256i i = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(bytes, bytes)); /* lane j: byte j / 2 */
    i = _mm256_srlv_epi32(i, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
    __m256i sign = _mm256_slli_epi32(i, 28);
    __m256 v = _mm256_or_ps(_mm256_permutevar8x32_ps(mag, i),
                            _mm256_castsi256_ps(_mm256_and_si256(sign, _mm256_set1_epi32(INT32_MIN))));
    return _mm256_mul_ps(v, sc);
}

AVX2_INLINE void f4_store16(float *dst, __m128i bytes, __m256 sc)
{
    _mm256_storeu_ps(dst, e2m1_scaled(bytes, sc));
    _mm256_storeu_ps(dst + 8, e2m1_scaled(_mm_srli_si128(bytes, 4), sc));
}

AVX2_INLINE void f8_block(float *dst, const uint8_t *q, size_t n, float sc)
{
    __m256 s = _mm256_set1_ps(sc);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) f8_store16(dst + i, _mm_loadu_si128((const __m128i *)(q + i)), s);
    if (i < n) { /* the last codes through a buffer: the same arithmetic */
        unsigned char b[16] = {0};
        float o[16];
        memcpy(b, q + i, n - i);
        f8_store16(o, _mm_loadu_si128((const __m128i *)b), s);
        memcpy(dst + i, o, (n - i) * sizeof *o);
    }
}

AVX2_INLINE void f4_block(float *dst, const uint8_t *q, size_t n, float sc)
{
    __m256 s = _mm256_set1_ps(sc);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) f4_store16(dst + i, _mm_loadl_epi64((const __m128i *)(q + i / 2)), s);
    if (i < n) {
        unsigned char b[16] = {0};
        float o[16];
        memcpy(b, q + i / 2, (n - i + 1) / 2);
        f4_store16(o, _mm_loadu_si128((const __m128i *)b), s);
        memcpy(dst + i, o, (n - i) * sizeof *o);
    }
}

/* the blocks of a run (cpu_internal.h): first codes, then bc a block */
AVX2 void ld_cpu_f8_run_avx2(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc)
{
    for (size_t done = 0, len = first; done < n; done += len, len = bc, sc++)
        f8_block(dst + done, q + done, len < n - done ? len : n - done, *sc);
}

AVX2 void ld_cpu_f4_run_avx2(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc)
{
    for (size_t done = 0, len = first; done < n; done += len, len = bc, sc++)
        f4_block(dst + done, q + done / 2, len < n - done ? len : n - done, *sc);
}

/* eight F16 values as the reference converts them: F16C for every finite
 * or infinite value (exact, subnormals included), the NaN lanes (exponent
 * 31, mantissa not 0) rebuilt as sign | 0x7f800000 | mantissa << 13 */
AVX2_INLINE __m256 f16_eight(__m128i v)
{
    __m256i w = _mm256_cvtepu16_epi32(v);
    __m256i mag = _mm256_and_si256(w, _mm256_set1_epi32(0x7fff));
    __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7c00));
    __m256i raw = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                                  _mm256_or_si256(_mm256_set1_epi32(0x7f800000),
                                                  _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3ff)), 13)));
    return _mm256_blendv_ps(_mm256_cvtph_ps(v), _mm256_castsi256_ps(raw), _mm256_castsi256_ps(nan));
}

AVX2 void ld_cpu_half_run_avx2(float *dst, const uint16_t *h, size_t n, int bf16)
{
    size_t n8 = n - n % 8;
    for (size_t i = 0; i < n8; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(h + i));
        __m256 f = bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)) : f16_eight(v);
        _mm256_storeu_ps(dst + i, f);
    }
    for (size_t i = n8; i < n; i++) dst[i] = bf16 ? ld_ref_bf16_to_f32(h[i]) : ld_ref_f16_to_f32(h[i]);
}

AVX2 void ld_cpu_plain_rows_avx2(float acc[LD_CPU_ROWS][8], float tail[LD_CPU_ROWS], const float *const wr[LD_CPU_ROWS],
                                 const float *x, int n)
{
    __m256 a[LD_CPU_ROWS];
    for (int r = 0; r < LD_CPU_ROWS; r++) a[r] = _mm256_loadu_ps(acc[r]);
    int n8 = n - n % 8;
    for (int k = 0; k < n8; k += 8) {
        __m256 xv = _mm256_loadu_ps(x + k);
        for (int r = 0; r < LD_CPU_ROWS; r++) a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(wr[r] + k), xv, a[r]);
    }
    for (int r = 0; r < LD_CPU_ROWS; r++) {
        _mm256_storeu_ps(acc[r], a[r]);
        for (int k = n8; k < n; k++) tail[r] = fmaf(wr[r][k], x[k], tail[r]);
    }
}

/* ld_cpu_scaled_rows_avx512's sums with this file's conversion (sixteen
 * codes of a row as two vectors of eight, each summed as it comes). */
AVX2_INLINE void scaled_rows(float acc[LD_CPU_ROWS][8], const ld_f8b *f, const int fp4,
                             const size_t src[LD_CPU_ROWS], const float *x)
{
    size_t K = (size_t)f->cols, bc = (size_t)f->bc, nbc = (K + bc - 1) / bc;
    const uint8_t *q[LD_CPU_ROWS];
    const float *s[LD_CPU_ROWS];
    __m256 a[LD_CPU_ROWS];
    for (int r = 0; r < LD_CPU_ROWS; r++) {
        q[r] = f->q + (fp4 ? src[r] * K / 2 : src[r] * K);
        s[r] = f->scale + src[r] / (size_t)f->br * nbc;
        a[r] = _mm256_loadu_ps(acc[r]);
    }
    for (size_t b = 0; b < nbc; b++) {
        __m256 sc[LD_CPU_ROWS];
        for (int r = 0; r < LD_CPU_ROWS; r++) sc[r] = _mm256_set1_ps(s[r][b]);
        size_t end = (b + 1) * bc < K ? (b + 1) * bc : K;
        for (size_t k = b * bc; k < end; k += 16) {
            __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
            for (int r = 0; r < LD_CPU_ROWS; r++) {
                __m256 v0, v1;
                if (fp4) {
                    __m128i b8 = _mm_loadl_epi64((const __m128i *)(q[r] + k / 2));
                    v0 = e2m1_scaled(b8, sc[r]);
                    v1 = e2m1_scaled(_mm_srli_si128(b8, 4), sc[r]);
                } else {
                    __m256i h = e4m3_halves(_mm_loadu_si128((const __m128i *)(q[r] + k)));
                    v0 = e4m3_scaled(_mm256_castsi256_si128(h), sc[r]);
                    v1 = e4m3_scaled(_mm256_extracti128_si256(h, 1), sc[r]);
                }
                a[r] = _mm256_fmadd_ps(v0, x0, a[r]);
                a[r] = _mm256_fmadd_ps(v1, x1, a[r]);
            }
        }
    }
    for (int r = 0; r < LD_CPU_ROWS; r++) _mm256_storeu_ps(acc[r], a[r]);
}

AVX2 void ld_cpu_scaled_rows_avx2(float acc[LD_CPU_ROWS][8], const ld_f8b *f, ld_kdt dt,
                                  const size_t src[LD_CPU_ROWS], const float *x)
{
    if (dt == LD_KDT_F4B) scaled_rows(acc, f, 1, src, x);
    else scaled_rows(acc, f, 0, src, x);
}

AVX2 float ld_cpu_dot_avx2(const float *a, const float *b, int n)
{
    int n8 = n - n % 8;
    __m256 acc = _mm256_setzero_ps();
    for (int k = 0; k < n8; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    float tail = 0.0f;
    for (int k = n8; k < n; k++) tail = fmaf(a[k], b[k], tail);
    return ld_x86_hsum8(acc) + tail;
}

AVX2 void ld_cpu_axpy_avx2(float *o, float p, const float *v, int n)
{
    int n8 = n - n % 8;
    __m256 pv = _mm256_set1_ps(p);
    for (int i = 0; i < n8; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(o + i)));
    for (int i = n8; i < n; i++) o[i] = fmaf(p, v[i], o[i]);
}

/* ---------------------------------------------------------------- attention of one head */

/* sc[j] = ld_cpu_dot_avx2(q, k + j * kvrow, hd) * scale, j in [0, n), for
 * hd a multiple of 8: four positions' dot products side by side (each its
 * own chain of fmas, as ld_cpu_dot_avx2 sums it, then hsum8), so that the
 * chains fill the pipeline where one position alone waits on its fma
 * latency; q's vectors loaded once for the four. */
/* hsum8 of eight registers at once, the same additions (operands in the
 * same order) by shuffles that pair the registers' halves: lane p of the
 * result is ld_x86_hsum8(a[p]) */
AVX2_INLINE __m256 hsum8x8(const __m256 a[8])
{
    __m256 b[4], c[2];
    for (int i = 0; i < 4; i++) /* [a[2i][l] + a[2i][4+l] | a[2i+1]'s], l = 0..3 */
        b[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
    for (int i = 0; i < 2; i++) /* half h: (02), (13) of a[4i + h], then of a[4i + 2 + h] */
        c[i] = _mm256_add_ps(_mm256_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                             _mm256_shuffle_ps(b[2 * i], b[2 * i + 1], 0xee));
    /* half h: (02) + (13) of a[h], a[2 + h], a[4 + h], a[6 + h] */
    __m256 s = _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], 0x88), _mm256_shuffle_ps(c[0], c[1], 0xdd));
    return _mm256_permutevar8x32_ps(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* the scores of positions [j, j + P) (P = 4 or 8): their dot products side
 * by side, eight lanes each as ld_cpu_dot_avx2 sums them */
AVX2_INLINE void scores_p(float *sc, const float *q, const float *k0, size_t kvrow, int hd, float scale, const int P,
                          const int ahead)
{
    __m256 a[8];
    for (int p = 0; p < 8; p++) a[p] = _mm256_setzero_ps();
    for (int i = 0; i < hd; i += 8) {
        if (ahead && i % 16 == 0) /* a cache line of each row */
            for (int p = 0; p < P; p++)
                _mm_prefetch((const char *)(k0 + (size_t)(p + LD_CPU_ATT_AHEAD) * kvrow + i), _MM_HINT_T0);
        __m256 qv = _mm256_loadu_ps(q + i);
        for (int p = 0; p < P; p++) a[p] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + (size_t)p * kvrow + i), a[p]);
    }
    /* ld_cpu_dot_avx2's "ld_x86_hsum8(acc) + tail" with no tail: + 0.0f */
    __m256 s = _mm256_mul_ps(_mm256_add_ps(hsum8x8(a), _mm256_setzero_ps()), _mm256_set1_ps(scale));
    if (P == 8) _mm256_storeu_ps(sc, s);
    else _mm_storeu_ps(sc, _mm256_castps256_ps128(s));
}

/* eight positions at a time: eight independent chains keep both fma
 * units busy where four wait on the fma latency, and their sums come in
 * one register */
AVX2_INLINE void scores(float *sc, const float *q, const float *k, size_t kvrow, int n, int hd, float scale,
                        const int ahead)
{
    int j = 0;
    for (; j + 8 <= n; j += 8) scores_p(sc + j, q, k + (size_t)j * kvrow, kvrow, hd, scale, 8, ahead);
    for (; j + 4 <= n; j += 4) scores_p(sc + j, q, k + (size_t)j * kvrow, kvrow, hd, scale, 4, ahead);
    for (; j < n; j++) sc[j] = ld_cpu_dot_avx2(q, k + (size_t)j * kvrow, hd) * scale;
}

AVX2 void ld_cpu_scores_avx2(float *sc, const float *q, const float *k, size_t kvrow, int n, int hd, float scale)
{
    scores(sc, q, k, kvrow, n, hd, scale, 0);
}

AVX2 void ld_cpu_scores_ahead_avx2(float *sc, const float *q, const float *k, size_t kvrow, int n, int hd, float scale)
{
    scores(sc, q, k, kvrow, n, hd, scale, 1);
}

/* the maximum of sc[0..n) as ld_attn_softmax takes it: in eight lanes,
 * vmaxps(x, m) being (x > m ? x : m), the reference's test, NaNs never
 * taken; the lanes' maxima then give the same value (only the sign of a
 * zero maximum could differ, and x - 0 is x - (-0) for every x but a zero,
 * whose exponential is 1 either way) */
AVX2_INLINE float softmax_max(const float *sc, int n)
{
    int n8 = n - n % 8, j;
    __m256 m8 = _mm256_set1_ps(-INFINITY);
    for (j = 0; j < n8; j += 8) m8 = _mm256_max_ps(_mm256_loadu_ps(sc + j), m8);
    float lanes[8], mx = -INFINITY;
    _mm256_storeu_ps(lanes, m8);
    for (int l = 0; l < 8; l++)
        if (lanes[l] > mx) mx = lanes[l];
    for (; j < n; j++)
        if (sc[j] > mx) mx = sc[j];
    return mx;
}

/* s + row[from] + ... + row[n - 1], in that order (the reference's) */
static inline float sum_from(float s, const float *row, int from, int n)
{
    for (int j = from; j < n; j++) s += row[j];
    return s;
}

/* sum[r] = the sequential sum of rows[r][0..n[r]) for four rows, their
 * chains side by side up to the shortest row, then each alone */
AVX2_INLINE void sums4(float sum[4], float *const *rows, const int *n)
{
    int m = n[0];
    for (int r = 1; r < 4; r++) m = n[r] < m ? n[r] : m;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    const float *a = rows[0], *b = rows[1], *c = rows[2], *d = rows[3];
    for (int j = 0; j < m; j++) s0 += a[j], s1 += b[j], s2 += c[j], s3 += d[j];
    sum[0] = s0, sum[1] = s1, sum[2] = s2, sum[3] = s3;
    for (int r = 0; r < 4; r++) sum[r] = sum_from(sum[r], rows[r], m, n[r]);
}

/* ld_attn_softmax (kernels/ref/ref_ops.c) of `count` rows, each with its
 * bits: the maximum in eight lanes (softmax_max); the exponentials libm's
 * expf, as the reference calls it, eight or sixteen at a time
 * (ld_cpu_exp_shifted at exp_level, cpu_expf.c); each
 * row's sum in order, four rows' chains side by side (one chain waits on
 * each addition); the divisions eight at a time, each the same IEEE
 * division.  The scalar maximum was a chain of dependent maxss, libm's
 * calls most of what was left, then the sums' chains. */
AVX2 void ld_cpu_softmax_rows_avx2(float *const *rows, const int *n, int count, int exp_level)
{
    float sum[4];
    for (int r0 = 0; r0 < count; r0 += 4) {
        int k = count - r0 < 4 ? count - r0 : 4;
        for (int r = r0; r < r0 + k; r++) ld_cpu_exp_shifted(exp_level, rows[r], n[r], softmax_max(rows[r], n[r]));
        if (k == 4) sums4(sum, rows + r0, n + r0);
        else
            for (int r = 0; r < k; r++) sum[r] = sum_from(0.0f, rows[r0 + r], 0, n[r0 + r]);
        for (int r = 0; r < k; r++) {
            float *sc = rows[r0 + r];
            int len = n[r0 + r], n8 = len - len % 8, j;
            __m256 s8 = _mm256_set1_ps(sum[r]);
            for (j = 0; j < n8; j += 8) _mm256_storeu_ps(sc + j, _mm256_div_ps(_mm256_loadu_ps(sc + j), s8));
            for (; j < len; j++) sc[j] = sc[j] / sum[r];
        }
    }
}

/* o[c, c + 8 NV) of the output: for j in order o[i] = fma(p[j], v_j[i],
 * o[i]) as ld_cpu_axpy_avx2 does it, with the NV vectors of o held in
 * registers over all the positions instead of stored and reloaded for each */
AVX2_INLINE void attn_cols(float *o, const float *p, const float *v, size_t kvrow, int n, const int NV,
                           const int ahead)
{
    __m256 acc[8];
    for (int u = 0; u < NV; u++) acc[u] = _mm256_loadu_ps(o + 8 * u);
    for (int j = 0; j < n; j++, v += kvrow) {
        if (ahead) /* a cache line: two vectors */
            for (int u = 0; u < NV; u += 2)
                _mm_prefetch((const char *)(v + (size_t)LD_CPU_ATT_AHEAD * kvrow + 8 * u), _MM_HINT_T0);
        __m256 pv = _mm256_set1_ps(p[j]);
        for (int u = 0; u < NV; u++) acc[u] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + 8 * u), acc[u]);
    }
    for (int u = 0; u < NV; u++) _mm256_storeu_ps(o + 8 * u, acc[u]);
}

/* o[0, hd) += p[j] v_j for j in [0, n), the sums of ld_cpu_axpy_avx2 over
 * the positions in order (hd a multiple of 8): 64 columns at a time */
AVX2_INLINE void attn_out(float *o, const float *p, const float *v, size_t kvrow, int n, int hd, const int ahead)
{
    int c = 0;
    for (; c + 64 <= hd; c += 64) attn_cols(o + c, p, v + c, kvrow, n, 8, ahead);
    for (; c + 8 <= hd; c += 8) attn_cols(o + c, p, v + c, kvrow, n, 1, ahead);
}

AVX2 void ld_cpu_attn_out_avx2(float *o, const float *p, const float *v, size_t kvrow, int n, int hd)
{
    attn_out(o, p, v, kvrow, n, hd, 0);
}

AVX2 void ld_cpu_attn_out_ahead_avx2(float *o, const float *p, const float *v, size_t kvrow, int n, int hd)
{
    attn_out(o, p, v, kvrow, n, hd, 1);
}

#else /* not x86-64: never called (ld_cpu_simd() is 0) */
void ld_cpu_q32_rows_avx2(const ld_cpu_mm *m, size_t i0, size_t i1) { (void)m; (void)i0; (void)i1; }
void ld_cpu_plain_tile_avx2(const ld_cpu_mm *m, const float *wr, int t0, int tn, size_t n, float bias)
{
    (void)m; (void)wr; (void)t0; (void)tn; (void)n; (void)bias;
}
void ld_cpu_plain_rows_avx2(float acc[LD_CPU_ROWS][8], float tail[LD_CPU_ROWS], const float *const wr[LD_CPU_ROWS],
                            const float *x, int n)
{
    (void)acc; (void)tail; (void)wr; (void)x; (void)n;
}
void ld_cpu_scaled_rows_avx2(float acc[LD_CPU_ROWS][8], const ld_f8b *f, ld_kdt dt,
                             const size_t src[LD_CPU_ROWS], const float *x)
{
    (void)acc; (void)f; (void)dt; (void)src; (void)x;
}
float ld_cpu_dot_avx2(const float *a, const float *b, int n) { (void)a; (void)b; (void)n; return 0.0f; }
void ld_cpu_f8_run_avx2(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc)
{
    (void)dst; (void)q; (void)n; (void)sc; (void)first; (void)bc;
}
void ld_cpu_f4_run_avx2(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc)
{
    (void)dst; (void)q; (void)n; (void)sc; (void)first; (void)bc;
}
void ld_cpu_axpy_avx2(float *o, float p, const float *v, int n) { (void)o; (void)p; (void)v; (void)n; }
void ld_cpu_scores_avx2(float *sc, const float *q, const float *k, size_t kvrow, int n, int hd, float scale)
{
    (void)sc; (void)q; (void)k; (void)kvrow; (void)n; (void)hd; (void)scale;
}
void ld_cpu_attn_out_avx2(float *o, const float *p, const float *v, size_t kvrow, int n, int hd)
{
    (void)o; (void)p; (void)v; (void)kvrow; (void)n; (void)hd;
}
void ld_cpu_scores_ahead_avx2(float *sc, const float *q, const float *k, size_t kvrow, int n, int hd, float scale)
{
    (void)sc; (void)q; (void)k; (void)kvrow; (void)n; (void)hd; (void)scale;
}
void ld_cpu_attn_out_ahead_avx2(float *o, const float *p, const float *v, size_t kvrow, int n, int hd)
{
    (void)o; (void)p; (void)v; (void)kvrow; (void)n; (void)hd;
}
void ld_cpu_softmax_rows_avx2(float *const *rows, const int *n, int count, int exp_level)
{
    (void)rows; (void)n; (void)count; (void)exp_level;
}
#endif
