/* cpu_avx512.h - what the AVX-512 kernels (cpu_avx512.c,
 * cpu_attention_avx512.c) share: their target attributes and a register's
 * upper half (the hsum8 of a 256-bit one: cpu_q8_x86.h).  Include inside
 * their x86-64 sections. */
#ifndef LD_CPU_AVX512_H
#define LD_CPU_AVX512_H

#include <immintrin.h>

#include "cpu_q8_x86.h" /* ld_x86_hsum8 */

#define AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))
#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512vl,avx2,fma,f16c")))

/* lanes 8..15 of v (vextractf64x4: AVX-512F has no f32x8 form) */
AVX512_INLINE __m256 ld_avx512_upper_half(__m512 v)
{
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

#endif /* LD_CPU_AVX512_H */
