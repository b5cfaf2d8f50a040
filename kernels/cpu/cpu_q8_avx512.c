/* cpu_q8_avx512.c - the prep of cpu_q8.h (the activations quantized) with
 * AVX-512.  The matmul itself runs the packed layout's AVX2 kernel on these
 * machines too (cpu_q8_avx2.c).  Compiled with target attributes, called
 * only when the machine has AVX-512 F, BW, VL and VNNI (ld_cpu_q8_simd). */
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "cpu_q8_x86.h"

#define Q8_TARGET "avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c"
#define Q8 __attribute__((target(Q8_TARGET)))

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
        xs[b] = ld_x86_hsum8(l);
    }
}

#else /* not x86-64: never called (ld_cpu_q8_simd() is portable) */
void ld_cpu_q8_quantize_avx512(int8_t *q, float *dx, float *xs, const float *x, size_t nblk)
{
    (void)q;
    (void)dx;
    (void)xs;
    (void)x;
    (void)nblk;
}
#endif
