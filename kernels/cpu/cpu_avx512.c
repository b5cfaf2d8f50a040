/* cpu_avx512.c - the Q4_0 / Q4_1 / Q8_0 matmul of cpu_ops.h with AVX-512F:
 * a block's sixteen lanes in one register, half the instructions of the
 * AVX2 code (which holds them in two) for the same bits.  Decode (one
 * token) takes sixteen or eight rows a pass (a group of the packed copy,
 * cpu_pack16.c, where there is one); prefill four rows against a tile of
 * four tokens, so that a decoded block serves four tokens and a token's x
 * of a block four rows (q32_rt), the rows read where they lie in the
 * packed copy or in w.  Compiled with
 * target attributes, called only when the machine has AVX-512F and VL (and AVX2,
 * FMA, F16C); see ld_cpu_simd. */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <limits.h>
#include <math.h>
#include <string.h>

#include "cpu_avx512.h"

/* hsum16(a) = hsum8(a[l] + a[8 + l]) (cpu_ops.h) */
AVX512_INLINE float hsum16(__m512 v)
{
    return ld_x86_hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), ld_avx512_upper_half(v)));
}

/* hsum16 of sixteen registers at once, the same additions (operands in
 * the same order) by shuffles that pair the registers' halves: lane 4k + i
 * of the result is hsum16(a[4i + k]). */
AVX512_INLINE __m512 hsum16x16(const __m512 a[16])
{
    __m512 v[8], u[4], w[2];
    for (int i = 0; i < 8; i++) /* [a[2i][l] + a[2i][8+l] | a[2i+1]'s], l = 0..7 */
        v[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xee));
    for (int j = 0; j < 4; j++) /* 128-bit chunk c: v[l] + v[4+l] (l = 0..3) of a[4j + c] */
        u[j] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0x88),
                             _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0xdd));
    for (int n = 0; n < 2; n++) /* chunk c: u0 + u2, u1 + u3 of a[8n + c], then of a[8n + 4 + c] */
        w[n] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * n], u[2 * n + 1], 0x44),
                             _mm512_shuffle_ps(u[2 * n], u[2 * n + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xdd));
}

/* hsum16(a[j]) into s[j], j = 0..15: hsum16x16's lanes in the
 * accumulators' order */
AVX512_INLINE void hsums16(const __m512 a[16], float s[16])
{
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(s, _mm512_permutexvar_ps(order, hsum16x16(a)));
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
    memcpy(&word, b + ld_cpu_q32_head(dt) + 8 * g, sizeof word);
    /* vpermps reads only the low four bits of each index: the nibble
     * selects its value (q, or q - 8 for Q4_0) from a table, which is the
     * mask and the conversion in one instruction */
    const __m512 val = dt == LD_KDT_Q4_0
        ? _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)
        : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_set1_epi64(word), sh), val);
}

/* acc + d * (q0 . x0 + q1 . x1) lane-wise for the block at blk (its two
 * groups): a decode's step of one row, the fast kernels' order */
AVX512_INLINE __m512 row_block(const unsigned char *blk, const ld_kdt dt, __m512 x0, __m512 x1, float d, __m512 acc)
{
    __m512 s = _mm512_fmadd_ps(decode_group(blk, dt, 0), x0, _mm512_setzero_ps());
    s = _mm512_fmadd_ps(decode_group(blk, dt, 1), x1, s);
    return _mm512_fmadd_ps(_mm512_set1_ps(d), s, acc);
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

/* R rows (8 or 16, a compile-time constant: every loop over the rows is
 * unrolled and the accumulators live in registers) of one token (decode)
 * in one pass over their blocks: the rows' scales (and Q4_1 offsets) of a
 * block come with one gather and one conversion, the offset sums of the
 * rows run in the lanes of one register (lane r: row r's sequential macc,
 * same order), and the x of a block is loaded once for all rows.  Sixteen
 * accumulators and the decode's registers still fit in the thirty-two.
 * The same arithmetic per row as q32_pair, so the same bits. */
AVX512_INLINE void q32_rows_r(const ld_cpu_mm *m, const ld_kdt dt, size_t n0, const int R)
{
    int off[16] = {0};
    for (int r = 0; r < R; r++) off[r] = (int)(ld_cpu_src_row(n0 + (size_t)r, m->rope_hd) * m->row_bytes);
    const __m512i voff = _mm512_loadu_si512(off);
    __m512 a[16], macc = _mm512_setzero_ps(); /* R = 8: macc8 */
    __m256 macc8 = _mm256_setzero_ps();
    for (int r = 0; r < 16; r++) a[r] = _mm512_setzero_ps();
    float dsc[16];
    int nb = m->K / LD_CPU_QB;
    size_t bytes = ld_cpu_q32_bytes(dt);
    const unsigned char *wb = (const unsigned char *)m->w;
    /* the bytes of the next R rows (where the rows are in order), a
     * block's worth per row and step: the hardware prefetcher alone does
     * not keep a core's loads ahead of this loop */
    const char *w0 = (const char *)m->w;
    size_t pf = (n0 + (size_t)R) * m->row_bytes, pf_end = (size_t)m->N * m->row_bytes, pf_step = (size_t)R * bytes;
    for (int b = 0; b < nb; b++, wb += bytes, pf += pf_step) {
        for (size_t o = pf; o < pf + pf_step && o < pf_end; o += 64) _mm_prefetch(w0 + o, _MM_HINT_T0);
        /* lane r: the first 32 bits of row r's block b, d (and m above it) */
        if (R == 16) {
            __m512i dm = _mm512_i32gather_epi32(voff, (const int *)wb, 1);
            _mm512_storeu_ps(dsc, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)));
            if (dt == LD_KDT_Q4_1)
                macc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))),
                                       _mm512_set1_ps(m->xs[b]), macc);
        } else {
            __m256i dm = _mm256_i32gather_epi32((const int *)wb, _mm512_castsi512_si256(voff), 1);
            _mm256_storeu_ps(dsc, _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm)));
            if (dt == LD_KDT_Q4_1)
                macc8 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16))),
                                        _mm256_set1_ps(m->xs[b]), macc8);
        }
        /* make the compiler read the scales back as broadcasts from memory
         * (free on the load ports) rather than shuffle them out of a register */
        __asm__("" : "+m"(dsc));
        const float *xv = m->xq + (size_t)b * LD_CPU_QB;
        __m512 x0 = _mm512_loadu_ps(xv), x1 = _mm512_loadu_ps(xv + 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) a[r] = row_block(wb + off[r], dt, x0, x1, dsc[r], a[r]);
    }
    float h[16], mc[16];
    hsums16(a, h); /* rows past R: zeros, unused */
    _mm512_storeu_ps(mc, R == 16 ? macc : _mm512_castps256_ps512(macc8));
    for (int r = 0; r < R; r++) m->out[n0 + (size_t)r] = (h[r] + mc[r]) + ld_cpu_bias(m, n0 + (size_t)r);
}

/* How far ahead of a packed group's block a decode pass asks for its
 * bytes: into L1 (PACK_AHEAD), and, further on, into L2 (PACK_FAR), which
 * keeps more lines on their way than L1's fill buffers alone.  Tuned in
 * the engine, whose outputs stay in cache (bench_engine, SmolLM2 Q4_1
 * decode on the 2-core Xeon, interleaved rounds).  Into L1 alone: 1536
 * 124-127 tok/s at 1 thread, 2048 125-127, 3072 128-131, 4096 120-124, 6144
 * 108-116; 2 threads 1536 198-222, 3072 234-243.  With L2 as well, 16 KiB
 * ahead, against L1 alone at 3072 (4 rounds): 1 thread 126.7-142.3 against
 * 126.4-130.5, 2 threads 261.6-278.5 against 228.5-245.8 (6 KiB to 24 KiB
 * alike, 32 KiB less; into L2 alone, at 3072: no better); after a prompt
 * of 128 (7 rounds), 1 thread 113.2-130.0 against 118.7-127.4 (the host's
 * noise), 2 threads 233.8-248.7 against 209.5-227.6.  bench_matmul's
 * 256 MB matvec had put 1536 alone first: its 3 MB of outputs miss the
 * caches and hold fill buffers that the engine's do not. */
#define PACK_AHEAD 3072
#define PACK_FAR 16384
/* into L1 for a batch's first half-group pass (q32_half_pair), which
 * computes twice as much a byte (L2 as the decode's): a batch of 4 at 1
 * thread 180-183 tok/s at 1536, 179 at 3072; with L2, 181-184 against
 * 176-180 (3 rounds) */
#define PAIR_AHEAD 1536

/* The prefetches of a batch's pass (q32_half_pair) for the packed block at
 * blk (step bytes), all at the block's start: its bytes `near` on into L1,
 * PACK_FAR on into L2 (a decode pass spreads them: prefetch_row) */
AVX512_INLINE void prefetch_block(const unsigned char *blk, size_t step, size_t near)
{
    for (size_t o = 0; o < step; o += 64) {
        _mm_prefetch((const char *)blk + near + o, _MM_HINT_T0);
        _mm_prefetch((const char *)blk + PACK_FAR + o, _MM_HINT_T1);
    }
}

/* A decode pass's prefetches, spread over its sixteen rows: at row r,
 * every (16 / lines)th, line r / (16 / lines) of the block's `lines`
 * (Q4_1 five, at rows 0, 3, .. 12; Q8_0 nine, at rows 0 .. 8).  Issued
 * together at the block's start, the prefetches wait on one another for
 * the L2's queue while the block's arithmetic waits behind them; among the
 * rows, each goes out while the rows before it compute.  bench_engine
 * (SmolLM2 Q4_1 decode, interleaved, two sets of 3 rounds after a
 * 128-token prompt): 1 thread 101-105 -> 108-114 tok/s and 105-107 ->
 * 107-112, 2 threads 202-219 -> 210-218 and 201-213 -> 219-223; after a
 * 16-token prompt (4 rounds) 112-120 -> 121-127 and 240-251 -> 245-255;
 * bench_matmul's memory rate 11.5 -> 12.3-12.5 GB/s (Q4_1, K 576 and
 * 1536).  Every second row alike; the batch's half pass (q32_half_pair)
 * keeps its burst. */
AVX512_INLINE void prefetch_row(const unsigned char *blk, const size_t step, const int r)
{
    const int lines = (int)((step + 63) / 64), every = LD_CPU_PACK_ROWS / lines;
    if (r % every || r / every >= lines) return;
    _mm_prefetch((const char *)blk + PACK_AHEAD + (r / every) * 64, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + PACK_FAR + (r / every) * 64, _MM_HINT_T1);
}

/* Sixteen outputs [n0, n0 + 16) of one token (decode) from their packed
 * group gp (cpu_internal.h): q32_rows_r's arithmetic lane for lane (the
 * same bits), but a block's sixteen scales (and offsets) in one load and
 * conversion, not a gather, and the group's bytes read in order, one
 * stream: from memory 12-13 GB/s where the rows as they lie gave 8-11
 * (bench_matmul, Q4_1 K=576 and 1536). */
AVX512_INLINE void q32_group(const ld_cpu_mm *m, const ld_kdt dt, const unsigned char *gp, size_t n0, int t)
{
    const size_t hd = ld_cpu_q32_head(dt), ib = ld_cpu_q32_bytes(dt) - hd, step = ld_cpu_pack16_step(dt);
    __m512 a[16], macc = _mm512_setzero_ps();
    for (int r = 0; r < 16; r++) a[r] = _mm512_setzero_ps();
    float dsc[16];
    int nb = m->K / LD_CPU_QB;
    const float *xq = m->xq + (size_t)t * (size_t)m->K, *xs = dt == LD_KDT_Q4_1 ? m->xs + (size_t)t * (size_t)nb : NULL;
    float *out = m->out + (size_t)t * (size_t)m->N;
    for (int b = 0; b < nb; b++) {
        const unsigned char *blk = gp + (size_t)b * step;
        _mm512_storeu_ps(dsc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)blk)));
        if (dt == LD_KDT_Q4_1)
            macc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 32))),
                                   _mm512_set1_ps(xs[b]), macc);
        __asm__("" : "+m"(dsc)); /* the scales back as broadcasts from memory, as q32_rows_r's */
        const float *xv = xq + (size_t)b * LD_CPU_QB;
        __m512 x0 = _mm512_loadu_ps(xv), x1 = _mm512_loadu_ps(xv + 16);
        const unsigned char *ints = blk + LD_CPU_PACK_ROWS * hd - hd; /* decode_group skips a head */
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) {
            prefetch_row(blk, step, r);
            a[r] = row_block(ints + (size_t)r * ib, dt, x0, x1, dsc[r], a[r]);
        }
    }
    float h[16], mc[16];
    hsums16(a, h);
    _mm512_storeu_ps(mc, macc);
    for (int r = 0; r < 16; r++) out[n0 + (size_t)r] = (h[r] + mc[r]) + ld_cpu_bias(m, n0 + (size_t)r);
}

/* Half h of a packed group (outputs n0 + 8h .. n0 + 8h + 7) for two tokens,
 * t and t + 1: q32_group's arithmetic for each (row, token), a row's
 * block decoded once for both.  Half 0 reads the group from memory (and
 * prefetches), half 1 again from L1. */
AVX512_INLINE void q32_half_pair(const ld_cpu_mm *m, const ld_kdt dt, const unsigned char *gp, size_t n0, int h, int t)
{
    const size_t hd = ld_cpu_q32_head(dt), ib = ld_cpu_q32_bytes(dt) - hd, step = ld_cpu_pack16_step(dt);
    const size_t K = (size_t)m->K;
    __m512 a[16]; /* a[2r + u]: row 8h + r, token t + u */
    __m256 macc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int j = 0; j < 16; j++) a[j] = _mm512_setzero_ps();
    float dsc[8];
    int nb = m->K / LD_CPU_QB;
    const float *xq = m->xq + (size_t)t * K, *xs = dt == LD_KDT_Q4_1 ? m->xs + (size_t)t * (size_t)nb : NULL;
    for (int b = 0; b < nb; b++) {
        const unsigned char *blk = gp + (size_t)b * step;
        if (h == 0) prefetch_block(blk, step, PAIR_AHEAD);
        _mm256_storeu_ps(dsc, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 16 * h))));
        if (dt == LD_KDT_Q4_1) {
            __m256 mo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 32 + 16 * h)));
            macc[0] = _mm256_fmadd_ps(mo, _mm256_set1_ps(xs[b]), macc[0]);
            macc[1] = _mm256_fmadd_ps(mo, _mm256_set1_ps(xs[(size_t)nb + (size_t)b]), macc[1]);
        }
        __asm__("" : "+m"(dsc));
        const float *xv = xq + (size_t)b * LD_CPU_QB;
        __m512 x00 = _mm512_loadu_ps(xv), x01 = _mm512_loadu_ps(xv + 16);
        __m512 x10 = _mm512_loadu_ps(xv + K), x11 = _mm512_loadu_ps(xv + K + 16);
        const unsigned char *ints = blk + LD_CPU_PACK_ROWS * hd - hd + (size_t)(8 * h) * ib;
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            const unsigned char *rb = ints + (size_t)r * ib;
            __m512 q0 = decode_group(rb, dt, 0), q1 = decode_group(rb, dt, 1), d = _mm512_set1_ps(dsc[r]);
            __m512 s0 = _mm512_fmadd_ps(q1, x01, _mm512_fmadd_ps(q0, x00, _mm512_setzero_ps()));
            __m512 s1 = _mm512_fmadd_ps(q1, x11, _mm512_fmadd_ps(q0, x10, _mm512_setzero_ps()));
            a[2 * r] = _mm512_fmadd_ps(d, s0, a[2 * r]);
            a[2 * r + 1] = _mm512_fmadd_ps(d, s1, a[2 * r + 1]);
        }
    }
    float hs[16], mc[2][8];
    hsums16(a, hs);
    _mm256_storeu_ps(mc[0], macc[0]);
    _mm256_storeu_ps(mc[1], macc[1]);
    for (int j = 0; j < 16; j++) {
        int r = j / 2, u = j % 2;
        size_t n = n0 + (size_t)(8 * h + r);
        m->out[(size_t)(t + u) * (size_t)m->N + n] = (hs[j] + mc[u][r]) + ld_cpu_bias(m, n);
    }
}

/* The whole packed groups [*g0, *g1) among outputs [i0, i1): 0 when there
 * are none (no packed copy, or no whole group in the range). */
static inline int packed_groups(const ld_cpu_mm *m, size_t i0, size_t i1, size_t *g0, size_t *g1)
{
    size_t whole = m->packed ? (size_t)m->N / LD_CPU_PACK_ROWS * LD_CPU_PACK_ROWS : 0;
    *g0 = (i0 + LD_CPU_PACK_ROWS - 1) / LD_CPU_PACK_ROWS;
    *g1 = (i1 < whole ? i1 : whole) / LD_CPU_PACK_ROWS;
    return *g0 < *g1;
}

AVX512_INLINE void q32_rows_plain(const ld_cpu_mm *m, const ld_kdt dt, size_t i0, size_t i1)
{
    if (m->T == 1) {
        if ((size_t)m->N * m->row_bytes <= INT_MAX) { /* the gathers' offsets are ints */
            for (; i0 + 15 < i1; i0 += 16) q32_rows_r(m, dt, i0, 16);
            for (; i0 + 7 < i1; i0 += 8) q32_rows_r(m, dt, i0, 8);
        }
        for (; i0 + 1 < i1; i0 += 2) q32_pair(m, dt, i0);
    }
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

/* Outputs [i0, i1) of a decode (T = 1): the whole packed groups from the
 * packed copy, the rest from the rows as they lie */
AVX512_INLINE void q32_rows(const ld_cpu_mm *m, const ld_kdt dt, size_t i0, size_t i1)
{
    size_t g0, g1;
    if (!packed_groups(m, i0, i1, &g0, &g1)) {
        q32_rows_plain(m, dt, i0, i1);
        return;
    }
    size_t gb = ld_cpu_pack16_group_bytes(dt, m->K);
    q32_rows_plain(m, dt, i0, g0 * LD_CPU_PACK_ROWS);
    for (size_t g = g0; g < g1; g++) q32_group(m, dt, m->packed + g * gb, g * LD_CPU_PACK_ROWS, 0);
    q32_rows_plain(m, dt, g1 * LD_CPU_PACK_ROWS, i1);
}

AVX512 void ld_cpu_q32_rows_avx512(const ld_cpu_mm *m, size_t i0, size_t i1)
{
    if (m->dt == LD_KDT_Q4_0) q32_rows(m, LD_KDT_Q4_0, i0, i1);
    else if (m->dt == LD_KDT_Q4_1) q32_rows(m, LD_KDT_Q4_1, i0, i1);
    else q32_rows(m, LD_KDT_Q8_0, i0, i1);
}

/* ---------------------------------------------------------------- prefill tiles */

/* Where a prefill reads row n (output n's weight row): block b's integers
 * at blk + b * stride (a block pointer, as decode_group takes), its d at
 * sc + b * stride and Q4_1's m moff bytes after it.  In the packed copy
 * where it holds the row (rows of whole groups), else in w. */
typedef struct q32_row {
    const unsigned char *blk, *sc;
    size_t stride, moff;
} q32_row;

AVX512_INLINE q32_row row_at(const ld_cpu_mm *m, const ld_kdt dt, size_t n)
{
    size_t g = n / LD_CPU_PACK_ROWS, r = n % LD_CPU_PACK_ROWS, hd = ld_cpu_q32_head(dt);
    if (m->packed && g < (size_t)m->N / LD_CPU_PACK_ROWS) {
        const unsigned char *gp = m->packed + g * ld_cpu_pack16_group_bytes(dt, m->K);
        return (q32_row){gp + LD_CPU_PACK_ROWS * hd + r * (ld_cpu_q32_bytes(dt) - hd) - hd, gp + 2 * r,
                         ld_cpu_pack16_step(dt), 2 * LD_CPU_PACK_ROWS};
    }
    const unsigned char *w = (const unsigned char *)m->w + ld_cpu_src_row(n, m->rope_hd) * m->row_bytes;
    return (q32_row){w, w, ld_cpu_q32_bytes(dt), 2};
}

/* Prefill: R rows (R <= 4) against a tile of TN tokens (TN <= 4), each
 * (row, token) with q32_tile's arithmetic, so the same bits.  A row's two
 * groups are decoded once for the tile, a token's x of the block loaded
 * once for the rows: three fmas a block and (row, token) and one decode
 * per row and token, where q32_tile loads x again for every row.  The
 * scales come as fp32 from the panel's table (d of row r in dm[8b + r], m
 * in dm[8b + 4 + r]) as broadcasts from memory; Q4_1's offset sums of the
 * sixteen (row, token) pairs run in the lanes of one register (lane
 * 4t + r: the chain macc = fma(m_r, xs_t, macc) of q32_tile), against the
 * tile's block sums xs16. */
AVX512_INLINE void q32_rt(const ld_cpu_mm *m, const ld_kdt dt, const q32_row w[4], const float *dm, const int R,
                          int t0, const int TN, size_t n0)
{
    __m512 acc[4][4], macc = _mm512_setzero_ps();
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TN; t++) acc[r][t] = _mm512_setzero_ps();
    int nb = m->K / LD_CPU_QB;
    size_t K = (size_t)m->K;
    const float *x = m->xq + (size_t)t0 * K;
    const float *xs16 = dt == LD_KDT_Q4_1 ? m->xs16 + (size_t)(t0 / LD_CPU_TILE) * (size_t)nb * 16 : NULL;
    for (int b = 0; b < nb; b++, x += LD_CPU_QB, dm += 8) {
        __m512 x0[4], x1[4];
        for (int t = 0; t < TN; t++) {
            x0[t] = _mm512_loadu_ps(x + (size_t)t * K);
            x1[t] = _mm512_loadu_ps(x + (size_t)t * K + 16);
        }
        for (int r = 0; r < R; r++) {
            const unsigned char *blk = w[r].blk + (size_t)b * w[r].stride;
            __m512 q0 = decode_group(blk, dt, 0), q1 = decode_group(blk, dt, 1);
            for (int t = 0; t < TN; t++) {
                __m512 s = _mm512_fmadd_ps(q1, x1[t], _mm512_mul_ps(q0, x0[t]));
                acc[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(dm[r]), s, acc[r][t]);
            }
        }
        if (dt == LD_KDT_Q4_1)
            macc = _mm512_fmadd_ps(_mm512_broadcast_f32x4(_mm_loadu_ps(dm + 4)), _mm512_loadu_ps(xs16 + 16 * b), macc);
    }
    __m512 a[16];
    for (int r = 0; r < 4; r++)
        for (int t = 0; t < 4; t++) a[4 * r + t] = r < R && t < TN ? acc[r][t] : _mm512_setzero_ps();
    float bias[4] = {0};
    for (int r = 0; r < R; r++) bias[r] = ld_cpu_bias(m, n0 + (size_t)r);
    /* lane 4t + r: (hsum16 + macc) + bias of (row r, token t) */
    __m512 o = _mm512_add_ps(_mm512_add_ps(hsum16x16(a), macc), _mm512_broadcast_f32x4(_mm_loadu_ps(bias)));
    for (int t = 0; t < TN; t++) {
        float *dst = m->out + (size_t)(t0 + t) * (size_t)m->N + n0;
        __m128 v = _mm512_extractf32x4_ps(o, 0);
        if (t == 1) v = _mm512_extractf32x4_ps(o, 1);
        if (t == 2) v = _mm512_extractf32x4_ps(o, 2);
        if (t == 3) v = _mm512_extractf32x4_ps(o, 3);
        if (R == 4) _mm_storeu_ps(dst, v);
        else _mm_mask_storeu_ps(dst, (__mmask8)((1u << R) - 1), v);
    }
}

AVX512_INLINE void q32_rt_rows(const ld_cpu_mm *m, const ld_kdt dt, const q32_row w[4], const float *dm,
                               const int R, int t0, size_t n0)
{
    switch (m->T - t0) {
    case 1: q32_rt(m, dt, w, dm, R, t0, 1, n0); break;
    case 2: q32_rt(m, dt, w, dm, R, t0, 2, n0); break;
    case 3: q32_rt(m, dt, w, dm, R, t0, 3, n0); break;
    default: q32_rt(m, dt, w, dm, R, t0, 4, n0); break;
    }
}

/* the weight rows n .. n+3 of a panel ending at p1 (in place of those at or
 * past p1 row n again: their sums are never stored) */
AVX512_INLINE void group_rows(const ld_cpu_mm *m, const ld_kdt dt, size_t n, size_t p1, q32_row w[4])
{
    for (size_t r = 0; r < 4; r++) w[r] = row_at(m, dt, n + r < p1 ? n + r : n);
}

/* the scales and offsets of the rows w as fp32 into dm (q32_rt's table):
 * a block's four headers in one conversion */
AVX512_INLINE void group_scales(const ld_cpu_mm *m, const ld_kdt dt, const q32_row w[4], float *dm)
{
    int nb = m->K / LD_CPU_QB;
    /* [d0, m0, d1, m1, ...] to [d0, d1, d2, d3, m0, m1, m2, m3]; m = 0 but for Q4_1 */
    const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (int b = 0; b < nb; b++, dm += 8) {
        uint32_t h[4];
        for (int r = 0; r < 4; r++) {
            const unsigned char *d = w[r].sc + (size_t)b * w[r].stride;
            h[r] = ld_cpu_le16(d) | (dt == LD_KDT_Q4_1 ? (uint32_t)ld_cpu_le16(d + w[r].moff) << 16 : 0);
        }
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)h);
        _mm256_storeu_ps(dm, _mm256_permutevar8x32_ps(_mm256_cvtph_ps(v), order));
    }
}

/* Outputs [i0, i1) of all T tokens: panels of rows (in L2) swept by one
 * tile of tokens after the other (in L1), four rows at a time. */
AVX512_INLINE void q32_tiles_plain(const ld_cpu_mm *m, const ld_kdt dt, float *scratch, size_t i0, size_t i1)
{
    size_t P = ld_cpu_q32_panel_rows(dt, m->K), group = (size_t)(m->K / LD_CPU_QB) * 8;
    for (size_t p0 = i0; p0 < i1; p0 += P) {
        size_t p1 = i1 - p0 < P ? i1 : p0 + P;
        q32_row w[4];
        for (size_t n = p0; n < p1; n += 4) {
            group_rows(m, dt, n, p1, w);
            group_scales(m, dt, w, scratch + (n - p0) / 4 * group);
        }
        for (int t0 = 0; t0 < m->T; t0 += LD_CPU_TILE)
            for (size_t n = p0; n < p1; n += 4) {
                const float *dm = scratch + (n - p0) / 4 * group;
                group_rows(m, dt, n, p1, w);
                switch (p1 - n) {
                case 1: q32_rt_rows(m, dt, w, dm, 1, t0, n); break;
                case 2: q32_rt_rows(m, dt, w, dm, 2, t0, n); break;
                case 3: q32_rt_rows(m, dt, w, dm, 3, t0, n); break;
                default: q32_rt_rows(m, dt, w, dm, 4, t0, n); break;
                }
            }
    }
}

/* Outputs [i0, i1) of T > 1 tokens.  A batch of a few (one tile) takes a
 * packed group two tokens at a time (q32_half_pair; a token left over as
 * decode does): its bytes come from memory once, as one stream, then from
 * L1, where the tiles would walk each group four times at the stride of a
 * block.  SmolLM2 at 1 thread (bench_engine --batch B, interleaved): B = 4
 * 152-156 tok/s by tiles from the rows as they lie, 103 by tiles from the
 * packed copy, 148-149 a token at a time, 171-173 two at a time; B = 2
 * 106-124 by tiles, 140-149 a token at a time, 155-161 two at a time.  The
 * same bits: each (row, token) is q32_tile's arithmetic either way. */
AVX512_INLINE void batch_groups_dt(const ld_cpu_mm *m, const ld_kdt dt, size_t g0, size_t g1)
{
    size_t gb = ld_cpu_pack16_group_bytes(dt, m->K);
    for (size_t g = g0; g < g1; g++) {
        const unsigned char *gp = m->packed + g * gb;
        int t = 0;
        for (; t + 1 < m->T; t += 2) {
            q32_half_pair(m, dt, gp, g * LD_CPU_PACK_ROWS, 0, t);
            q32_half_pair(m, dt, gp, g * LD_CPU_PACK_ROWS, 1, t);
        }
        if (t < m->T) q32_group(m, dt, gp, g * LD_CPU_PACK_ROWS, t);
    }
}

/* A batch's whole packed groups [g0, g1).  Out of line: inlined beside
 * the tiles' loops (one function, ld_cpu_q32_tiles_avx512), a change to
 * it moved a 64-token prefill by 20% (the tiles' code itself the same). */
static AVX512 __attribute__((noinline)) void batch_groups(const ld_cpu_mm *m, size_t g0, size_t g1)
{
    if (m->dt == LD_KDT_Q4_0) batch_groups_dt(m, LD_KDT_Q4_0, g0, g1);
    else if (m->dt == LD_KDT_Q4_1) batch_groups_dt(m, LD_KDT_Q4_1, g0, g1);
    else batch_groups_dt(m, LD_KDT_Q8_0, g0, g1);
}

AVX512_INLINE void q32_tiles(const ld_cpu_mm *m, const ld_kdt dt, float *scratch, size_t i0, size_t i1)
{
    size_t g0, g1;
    if (m->T > LD_CPU_TILE || !packed_groups(m, i0, i1, &g0, &g1)) {
        q32_tiles_plain(m, dt, scratch, i0, i1);
        return;
    }
    q32_tiles_plain(m, dt, scratch, i0, g0 * LD_CPU_PACK_ROWS);
    batch_groups(m, g0, g1);
    q32_tiles_plain(m, dt, scratch, g1 * LD_CPU_PACK_ROWS, i1);
}

AVX512 void ld_cpu_q32_tiles_avx512(const ld_cpu_mm *m, float *scratch, size_t i0, size_t i1)
{
    if (m->dt == LD_KDT_Q4_0) q32_tiles(m, LD_KDT_Q4_0, scratch, i0, i1);
    else if (m->dt == LD_KDT_Q4_1) q32_tiles(m, LD_KDT_Q4_1, scratch, i0, i1);
    else q32_tiles(m, LD_KDT_Q8_0, scratch, i0, i1);
}

/* ---------------------------------------------------------------- activations */

/* block_sums' sum of 32 floats: lane l of ((v[l] + v[8 + l]) + v[16 + l]) +
 * v[24 + l], then ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) */
AVX512_INLINE float block_sum(const float *v)
{
    return ld_x86_hsum8(_mm256_add_ps(
        _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8)), _mm256_loadu_ps(v + 16)),
        _mm256_loadu_ps(v + 24)));
}

AVX512 int ld_cpu_prep_avx512(float *xq, float *xe, float *xs, const float *x, size_t nblk, const int elem[32])
{
    const __m512i e0 = _mm512_loadu_si512(elem), e1 = _mm512_loadu_si512(elem + 16);
    const __m512 scale = _mm512_setr_ps(1.0f, 1.0f, 0x1p-4f, 0x1p-4f, 0x1p-8f, 0x1p-8f, 0x1p-12f, 0x1p-12f, 1.0f, 1.0f,
                                        0x1p-4f, 0x1p-4f, 0x1p-8f, 0x1p-8f, 0x1p-12f, 0x1p-12f);
    const __m512i mag = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
    const __m512i tiny = _mm512_set1_epi32(0x067fffff);
    __mmask16 inexact = 0;
    for (size_t b = 0; b < nblk; b++, x += LD_CPU_QB, xq += LD_CPU_QB, xe += LD_CPU_QB) {
        __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
        __m512 l[2] = {_mm512_permutex2var_ps(lo, e0, hi), _mm512_permutex2var_ps(lo, e1, hi)};
        for (int h = 0; h < 2; h++) {
            _mm512_storeu_ps(xq + 16 * h, l[h]);
            _mm512_storeu_ps(xe + 16 * h, _mm512_mul_ps(l[h], scale));
            /* scaled_lanes' test, 0 < |v| < 2^-114, in unsigned integers */
            __m512i m = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(l[h]), mag), one);
            inexact |= _mm512_cmplt_epu32_mask(m, tiny);
        }
        if (xs) xs[b] = block_sum(x);
    }
    return inexact != 0;
}

/* ---------------------------------------------------------------- block-scaled rows */

/* Sixteen E4M3 codes times sc: as cpu_avx2.c's e4m3_halves (the codes'
 * values times 2^-8 as fp16, exact, the NaN magnitude as the fp16 NaN
 * 0x7e00), widened in one register, the exact product by 2^8, then the
 * reference's one rounding by the scale. */
AVX512_INLINE __m512 e4m3_scaled(__m128i codes, __m512 sc)
{
    __m256i w = _mm256_cvtepu8_epi16(codes);
    __m256i mag = _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16(0x3f80));
    __m256i nan = _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x3f80));
    mag = _mm256_xor_si256(mag, _mm256_and_si256(nan, _mm256_set1_epi16(0x3f80 ^ 0x7e00)));
    __m256i h = _mm256_or_si256(mag, _mm256_and_si256(_mm256_slli_epi16(w, 8), _mm256_set1_epi16((short)0x8000)));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f)), sc);
}

/* Sixteen E2M1 codes (bytes b[0..8), the low nibble first) times sc: the
 * nibble indexes the sixteen values with one vpermps (it reads the low four
 * bits of each index). */
AVX512_INLINE __m512 e2m1_scaled(__m128i bytes, __m512 sc)
{
    const __m512 val = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    __m512i i = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(bytes, bytes)); /* lane j: byte j / 2 */
    i = _mm512_srlv_epi32(i, _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4));
    return _mm512_mul_ps(_mm512_permutexvar_ps(i, val), sc);
}

AVX512_INLINE void f8_block(float *dst, const uint8_t *q, size_t n, float sc)
{
    __m512 s = _mm512_set1_ps(sc);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, e4m3_scaled(_mm_loadu_si128((const __m128i *)(q + i)), s));
    if (i < n) { /* the last codes through a buffer: the same arithmetic */
        unsigned char b[16] = {0};
        float o[16];
        memcpy(b, q + i, n - i);
        _mm512_storeu_ps(o, e4m3_scaled(_mm_loadu_si128((const __m128i *)b), s));
        memcpy(dst + i, o, (n - i) * sizeof *o);
    }
}

AVX512_INLINE void f4_block(float *dst, const uint8_t *q, size_t n, float sc)
{
    __m512 s = _mm512_set1_ps(sc);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, e2m1_scaled(_mm_loadl_epi64((const __m128i *)(q + i / 2)), s));
    if (i < n) {
        unsigned char b[16] = {0};
        float o[16];
        memcpy(b, q + i / 2, (n - i + 1) / 2);
        _mm512_storeu_ps(o, e2m1_scaled(_mm_loadu_si128((const __m128i *)b), s));
        memcpy(dst + i, o, (n - i) * sizeof *o);
    }
}

/* the blocks of a run (cpu_internal.h): first codes, then bc a block */
AVX512 void ld_cpu_f8_run_avx512(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc)
{
    for (size_t done = 0, len = first; done < n; done += len, len = bc, sc++)
        f8_block(dst + done, q + done, len < n - done ? len : n - done, *sc);
}

AVX512 void ld_cpu_f4_run_avx512(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc)
{
    for (size_t done = 0, len = first; done < n; done += len, len = bc, sc++)
        f4_block(dst + done, q + done / 2, len < n - done ? len : n - done, *sc);
}

/* Decode's plain_rows (cpu_ops.c) over block-scaled rows whose scale
 * blocks are whole vectors, with the conversion in registers: sixteen codes
 * of each row converted as f8_block / f4_block convert them, their two
 * halves summed in order into the row's eight lanes as
 * ld_cpu_plain_rows_avx2 sums them, so the same bits without the trip
 * through scratch. */
AVX512_INLINE void scaled_rows(float acc[LD_CPU_ROWS][8], const ld_f8b *f, const int fp4,
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
        __m512 sc[LD_CPU_ROWS];
        for (int r = 0; r < LD_CPU_ROWS; r++) sc[r] = _mm512_set1_ps(s[r][b]);
        size_t end = (b + 1) * bc < K ? (b + 1) * bc : K;
        for (size_t k = b * bc; k < end; k += 16) {
            __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
            for (int r = 0; r < LD_CPU_ROWS; r++) {
                __m512 v = fp4 ? e2m1_scaled(_mm_loadl_epi64((const __m128i *)(q[r] + k / 2)), sc[r])
                               : e4m3_scaled(_mm_loadu_si128((const __m128i *)(q[r] + k)), sc[r]);
                a[r] = _mm256_fmadd_ps(_mm512_castps512_ps256(v), x0, a[r]);
                a[r] = _mm256_fmadd_ps(ld_avx512_upper_half(v), x1, a[r]);
            }
        }
    }
    for (int r = 0; r < LD_CPU_ROWS; r++) _mm256_storeu_ps(acc[r], a[r]);
}

AVX512 void ld_cpu_scaled_rows_avx512(float acc[LD_CPU_ROWS][8], const ld_f8b *f, ld_kdt dt,
                                      const size_t src[LD_CPU_ROWS], const float *x)
{
    if (dt == LD_KDT_F4B) scaled_rows(acc, f, 1, src, x);
    else scaled_rows(acc, f, 0, src, x);
}

#else /* not x86-64: never called (ld_cpu_simd() is 0) */
int ld_cpu_prep_avx512(float *xq, float *xe, float *xs, const float *x, size_t nblk, const int elem[32])
{
    (void)xq; (void)xe; (void)xs; (void)x; (void)nblk; (void)elem;
    return 1;
}
void ld_cpu_q32_rows_avx512(const ld_cpu_mm *m, size_t i0, size_t i1) { (void)m; (void)i0; (void)i1; }
void ld_cpu_q32_tiles_avx512(const ld_cpu_mm *m, float *scratch, size_t i0, size_t i1)
{
    (void)m; (void)scratch; (void)i0; (void)i1;
}
void ld_cpu_scaled_rows_avx512(float acc[LD_CPU_ROWS][8], const ld_f8b *f, ld_kdt dt,
                               const size_t src[LD_CPU_ROWS], const float *x)
{
    (void)acc; (void)f; (void)dt; (void)src; (void)x;
}
void ld_cpu_f8_run_avx512(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc)
{
    (void)dst; (void)q; (void)n; (void)sc; (void)first; (void)bc;
}
void ld_cpu_f4_run_avx512(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc)
{
    (void)dst; (void)q; (void)n; (void)sc; (void)first; (void)bc;
}
#endif
