/* cpu_q8_x86.h - what the x86-64 q8 kernels (cpu_q8_avx2.c,
 * cpu_q8_avx512.c) share: AVX2-level helpers, which the AVX-512 code inlines
 * too (its target holds AVX2's); the fast kernels, AVX2 (cpu_avx2.c) and
 * AVX-512 (cpu_avx512.h), take the hsum8 from here as well.  Include
 * inside their x86-64 sections. */
#ifndef LD_CPU_Q8_X86_H
#define LD_CPU_Q8_X86_H

#include <immintrin.h>

#define LD_Q8_X86_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)): the hsum8 of cpu_q8.h
 * and of cpu_ops.h */
LD_Q8_X86_INLINE float ld_x86_hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

#endif /* LD_CPU_Q8_X86_H */
