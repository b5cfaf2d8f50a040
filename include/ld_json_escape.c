/* ld_json_escape.c - the next byte json.dumps escapes (ld_json_escape.h),
 * with ensure_ascii=False (ld_json_next_escape) or True (the _ascii scan).
 *
 * Each level steps over s[i..n) a block at a time and ends with one block
 * that ends at n, its bits for the bytes before i shifted out: the blocks
 * never read outside s[0..n), and no level goes a byte at a time unless
 * fewer than 8 bytes of the whole string are left to it.
 */
#include "ld_json_escape.h"

#include <string.h>

/* The first of the bits of `flags` (bit 7 of each byte, byte 0 lowest) as
 * a byte index, for a word read from memory (little endian assumed where
 * the compiler says so; elsewhere the bytes go one at a time). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LD_JSON_WORDS 1
static size_t first_flagged(uint64_t flags) { return (size_t)__builtin_ctzll(flags) / 8; }
#endif

/* Each loop below serves both classes: `ascii` (ensure_ascii=True's class
 * when nonzero) is a constant in each caller, and the loops are inlined
 * there, so that each class gets its own code without a test per step. */
#if defined(__GNUC__)
#define LD_JSON_INLINE static inline __attribute__((always_inline))
#else
#define LD_JSON_INLINE static inline
#endif

LD_JSON_INLINE int byte_escapes(unsigned char c, int ascii)
{
    return ascii ? ld_json_escapes_ascii(c) : ld_json_escapes(c);
}

#if defined(LD_JSON_WORDS)
LD_JSON_INLINE uint64_t word_flags(uint64_t x, int ascii)
{
    return ascii ? ld_json_escape_ascii_word(x) : ld_json_escape_word(x);
}
#endif

/* 8 bytes a step, then the last 8 bytes of s once, from i on */
LD_JSON_INLINE size_t next_words(const char *s, size_t i, size_t n, int ascii)
{
#if defined(LD_JSON_WORDS)
    uint64_t x, f;
    if (n < 8) goto bytes;
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, s + i, 8);
        if ((f = word_flags(x, ascii)) != 0) return i + first_flagged(f);
    }
    if (i == n) return n;
    memcpy(&x, s + n - 8, 8);
    f = word_flags(x, ascii) >> (8 * (8 - (n - i))); /* the bytes from i on */
    return f ? i + first_flagged(f) : n;
bytes:
#endif
    while (i < n && !byte_escapes((unsigned char)s[i], ascii)) i++;
    return i;
}

#if defined(__SSE2__)
LD_JSON_INLINE unsigned mask16_at(const char *p, int ascii)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    return ascii ? ld_json_escape_ascii_mask16(x) : ld_json_escape_mask16(x);
}

/* 16 bytes a step, then the last 16 of s once (n >= 16) */
LD_JSON_INLINE size_t next_sse2(const char *s, size_t i, size_t n, int ascii)
{
    unsigned bits;
    for (; i + 16 <= n; i += 16)
        if ((bits = mask16_at(s + i, ascii)) != 0) return i + (size_t)__builtin_ctz(bits);
    if (i == n) return n;
    bits = mask16_at(s + n - 16, ascii) >> (16 - (n - i));
    return bits ? i + (size_t)__builtin_ctz(bits) : n;
}
#endif

#if defined(LD_JSON_ESCAPE_X86)
__attribute__((target("avx2")))
LD_JSON_INLINE unsigned mask32_at(const char *p, int ascii)
{
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return ascii ? ld_json_escape_ascii_mask32(x) : ld_json_escape_mask32(x);
}

/* 32 bytes a step, then the last 32 of s once (n - i >= 32); one function
 * a class, the AVX2 code kept out of the callers built without it */
__attribute__((target("avx2")))
LD_JSON_INLINE size_t next_avx2(const char *s, size_t i, size_t n, int ascii)
{
    unsigned bits;
    for (; i + 32 <= n; i += 32)
        if ((bits = mask32_at(s + i, ascii)) != 0) return i + (size_t)__builtin_ctz(bits);
    if (i == n) return n;
    bits = mask32_at(s + n - 32, ascii) >> (32 - (n - i));
    return bits ? i + (size_t)__builtin_ctz(bits) : n;
}

__attribute__((target("avx2"))) static size_t next_avx2_escape(const char *s, size_t i, size_t n)
{
    return next_avx2(s, i, n, 0);
}

__attribute__((target("avx2"))) static size_t next_avx2_escape_ascii(const char *s, size_t i, size_t n)
{
    return next_avx2(s, i, n, 1);
}
#endif

/* The widest step the level, the machine and n - i allow */
LD_JSON_INLINE size_t next_at_level(int level, const char *s, size_t i, size_t n, int ascii)
{
    if (i >= n) return n;
#if defined(LD_JSON_ESCAPE_X86)
    if (level >= LD_JSON_ESCAPE_AVX2 && n - i >= 32 && __builtin_cpu_supports("avx2"))
        return ascii ? next_avx2_escape_ascii(s, i, n) : next_avx2_escape(s, i, n);
#endif
#if defined(__SSE2__)
    if (level >= LD_JSON_ESCAPE_SSE2 && n >= 16) return next_sse2(s, i, n, ascii);
#endif
    (void)level;
    return next_words(s, i, n, ascii);
}

size_t ld_json_next_escape_level(int level, const char *s, size_t i, size_t n)
{
    return next_at_level(level, s, i, n, 0);
}

size_t ld_json_next_escape(const char *s, size_t i, size_t n)
{
    return ld_json_next_escape_level(LD_JSON_ESCAPE_AVX2, s, i, n);
}

size_t ld_json_next_escape_ascii_level(int level, const char *s, size_t i, size_t n)
{
    return next_at_level(level, s, i, n, 1);
}

size_t ld_json_next_escape_ascii(const char *s, size_t i, size_t n)
{
    return ld_json_next_escape_ascii_level(LD_JSON_ESCAPE_AVX2, s, i, n);
}
