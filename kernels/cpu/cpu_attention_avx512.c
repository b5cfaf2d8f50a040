/* cpu_attention_avx512.c - the grouped attention of cpu_ops.c
 * (attention_groups) with AVX-512F: the scores and outputs of the heads
 * that share a kv head, each k and v row read once for them and asked for
 * LD_CPU_ATT_AHEAD positions ahead; each (head, position) the chains of
 * the AVX2 code, so the same bits.  Compiled with target attributes, called only
 * when the machine has AVX-512F and VL; see ld_cpu_simd. */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "cpu_avx512.h"

/* hsum8 (cpu_q8_x86.h: ((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7)), operands
 * in that order) of the sixteen eight-lane vectors z[p] = [A_p | B_p],
 * p = 0..7: the same additions by shuffles, four 128-bit chunks at a
 * time.  Lane p of the result: A_p's sum; lane 8 + p: B_p's. */
AVX512_INLINE __m512 hsum8_pairs(const __m512 z[8])
{
    __m512 w[4], t[2];
    for (int k = 0; k < 4; k++) /* chunks [A_2k, B_2k, A_2k+1, B_2k+1], each lo + hi: [a0+a4 .. a3+a7] */
        w[k] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * k], z[2 * k + 1], 0x88),
                             _mm512_shuffle_f32x4(z[2 * k], z[2 * k + 1], 0xdd));
    for (int k = 0; k < 2; k++) /* chunk c: [x0+x2, x1+x3] of w[2k]'s chunk c, then of w[2k+1]'s */
        t[k] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * k], w[2 * k + 1], 0x44),
                             _mm512_shuffle_ps(w[2 * k], w[2 * k + 1], 0xee));
    /* lane 4c + k: the sum of w[k]'s chunk c */
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], 0x88), _mm512_shuffle_ps(t[0], t[1], 0xdd));
    /* w[k]'s chunks: A_2k, B_2k, A_2k+1, B_2k+1 */
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15), r);
}

/* [a[0..8) | b[0..8)], and [a[0..8) | a[0..8)] (one load), with AVX-512F
 * alone (the f32x8 forms are AVX-512DQ) */
AVX512_INLINE __m512 halves(const float *a, const float *b)
{
    __m512d lo = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(a)));
    return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(_mm256_loadu_ps(b)), 1));
}

AVX512_INLINE __m512 halves_same(const float *a)
{
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)(const void *)a)));
}

/* How far ahead the grouped scores and outputs ask for a kv head's rows
 * of k and v, LD_CPU_ATT_AHEAD (cpu_internal.h), was chosen here:
 * bench_attention on the 2-core Xeon (30 layers of SmolLM2's 9 heads over
 * 3 kv heads of 64, context 256, 1 thread, 3 interleaved rounds):
 * 1192-1234 us a step without, 839-942 16 ahead, 718-758 32, 689-784 48,
 * 775-898 64, 743-965 96; in the engine (bench_engine, a 128-token prompt,
 * 128 decoded) 2 threads 1.05-1.06x.  Prefetches past the cache's end are
 * hints and never fault. */

/* The scores of positions [j, j + 8) of G heads (2 <= G <= 4) sharing a kv
 * head, q[g]'s vectors two heads to a register: a k vector read once,
 * broadcast to both halves, for all of them; each (head, position) the
 * eight chains of ld_cpu_dot_avx2, then hsum8, + 0, * scale. */
AVX512_INLINE void scores_group8(float *const sc[LD_CPU_ATT_GROUP], const float *const q[LD_CPU_ATT_GROUP],
                                 const float *k, size_t kvrow, int hd, float scale, const int G)
{
    __m512 a[2][8];
    for (int h = 0; h < 2; h++)
        for (int p = 0; p < 8; p++) a[h][p] = _mm512_setzero_ps();
    for (int i = 0; i < hd; i += 8) {
        __m512 q01 = halves(q[0] + i, q[1] + i), q23 = G > 2 ? halves(q[2] + i, q[G > 3 ? 3 : 2] + i) : q01;
        if (i % 16 == 0) /* a cache line of each row */
            for (int p = 0; p < 8; p++)
                _mm_prefetch((const char *)(k + (size_t)(p + LD_CPU_ATT_AHEAD) * kvrow + i), _MM_HINT_T0);
        for (int p = 0; p < 8; p++) {
            __m512 kb = halves_same(k + (size_t)p * kvrow + i);
            a[0][p] = _mm512_fmadd_ps(q01, kb, a[0][p]);
            if (G > 2) a[1][p] = _mm512_fmadd_ps(q23, kb, a[1][p]);
        }
    }
    const __m512 sv = _mm512_set1_ps(scale);
    for (int h = 0; h < (G > 2 ? 2 : 1); h++) {
        __m512 r = _mm512_mul_ps(_mm512_add_ps(hsum8_pairs(a[h]), _mm512_setzero_ps()), sv);
        _mm256_storeu_ps(sc[2 * h], _mm512_castps512_ps256(r));
        if (2 * h + 1 < G) _mm256_storeu_ps(sc[2 * h + 1], ld_avx512_upper_half(r));
    }
}

AVX512_INLINE void scores_group(float *const sc[LD_CPU_ATT_GROUP], const float *const q[LD_CPU_ATT_GROUP],
                                const float *k, size_t kvrow, int n, int hd, float scale, const int G)
{
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        float *s[LD_CPU_ATT_GROUP];
        for (int g = 0; g < G; g++) s[g] = sc[g] + j;
        scores_group8(s, q, k + (size_t)j * kvrow, kvrow, hd, scale, G);
    }
    if (j < n)
        for (int g = 0; g < G; g++) ld_cpu_scores_avx2(sc[g] + j, q[g], k + (size_t)j * kvrow, kvrow, n - j, hd, scale);
}

AVX512 void ld_cpu_scores_group_avx512(float *const sc[LD_CPU_ATT_GROUP], const float *const q[LD_CPU_ATT_GROUP],
                                       const float *k, size_t kvrow, int n, int hd, float scale, int G)
{
    switch (G) {
    case 2: scores_group(sc, q, k, kvrow, n, hd, scale, 2); break;
    case 3: scores_group(sc, q, k, kvrow, n, hd, scale, 3); break;
    default: scores_group(sc, q, k, kvrow, n, hd, scale, 4); break;
    }
}

/* o[g][c, c + 16 NV) of G heads: for j in order o[i] = fma(p[g][j], v_j[i],
 * o[i]) as ld_cpu_attn_out_avx2 does it (each element's chain the same,
 * sixteen lanes a register instead of eight), v_j read once for the G
 * heads; the G NV accumulators in registers over all the positions */
AVX512_INLINE void attn_cols_group(float *const o[LD_CPU_ATT_GROUP], const float *const p[LD_CPU_ATT_GROUP],
                                   const float *v, size_t c, size_t kvrow, int n, const int G, const int NV)
{
    __m512 acc[LD_CPU_ATT_GROUP][4];
    for (int g = 0; g < G; g++)
        for (int u = 0; u < NV; u++) acc[g][u] = _mm512_loadu_ps(o[g] + c + 16 * u);
    v += c;
    for (int j = 0; j < n; j++, v += kvrow) {
        for (int u = 0; u < NV; u++)
            _mm_prefetch((const char *)(v + (size_t)LD_CPU_ATT_AHEAD * kvrow + 16 * u), _MM_HINT_T0);
        __m512 vv[4];
        for (int u = 0; u < NV; u++) vv[u] = _mm512_loadu_ps(v + 16 * u);
        for (int g = 0; g < G; g++) {
            __m512 pv = _mm512_set1_ps(p[g][j]);
            for (int u = 0; u < NV; u++) acc[g][u] = _mm512_fmadd_ps(pv, vv[u], acc[g][u]);
        }
    }
    for (int g = 0; g < G; g++)
        for (int u = 0; u < NV; u++) _mm512_storeu_ps(o[g] + c + 16 * u, acc[g][u]);
}

AVX512_INLINE void attn_out_group(float *const o[LD_CPU_ATT_GROUP], const float *const p[LD_CPU_ATT_GROUP],
                                  const float *v, size_t kvrow, int n, int hd, const int G)
{
    int c = 0;
    for (; c + 64 <= hd; c += 64) attn_cols_group(o, p, v, (size_t)c, kvrow, n, G, 4);
    for (; c + 16 <= hd; c += 16) attn_cols_group(o, p, v, (size_t)c, kvrow, n, G, 1);
}

AVX512 void ld_cpu_attn_out_group_avx512(float *const o[LD_CPU_ATT_GROUP], const float *const p[LD_CPU_ATT_GROUP],
                                         const float *v, size_t kvrow, int n, int hd, int G)
{
    switch (G) {
    case 2: attn_out_group(o, p, v, kvrow, n, hd, 2); break;
    case 3: attn_out_group(o, p, v, kvrow, n, hd, 3); break;
    default: attn_out_group(o, p, v, kvrow, n, hd, 4); break;
    }
}

#else /* not x86-64: never called (ld_cpu_simd() is 0) */
void ld_cpu_attn_out_group_avx512(float *const o[LD_CPU_ATT_GROUP], const float *const p[LD_CPU_ATT_GROUP],
                                  const float *v, size_t kvrow, int n, int hd, int G)
{
    (void)o; (void)p; (void)v; (void)kvrow; (void)n; (void)hd; (void)G;
}
void ld_cpu_scores_group_avx512(float *const sc[LD_CPU_ATT_GROUP], const float *const q[LD_CPU_ATT_GROUP],
                                const float *k, size_t kvrow, int n, int hd, float scale, int G)
{
    (void)sc; (void)q; (void)k; (void)kvrow; (void)n; (void)hd; (void)scale; (void)G;
}
#endif
