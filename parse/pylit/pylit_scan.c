/* pylit_scan.c - the end of a quoted string, 64 bytes a step (pylit_scan.h). */
#include "pylit_scan.h"
#include "pylit_internal.h"

#include <stdatomic.h>
#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define LD_SCAN_X86 1
/* BMI's andn keeps the mask arithmetic in general registers (without it
 * the compiler uses the AVX-512 mask registers' kandn, and moves) */
#define TARGET_AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,bmi,bmi2,popcnt")))
#define TARGET_VBMI2 __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi,bmi2,popcnt")))
#endif

/* From s[i] (escaped when esc) byte by byte. */
static size_t end_bytewise(const char *s, size_t i, size_t n, char q, int esc, int *escape,
                           int *backslash)
{
    if (esc) {
        if (i >= n) {
            *escape = 1;
            return n;
        }
        if (s[i] == '\\') *backslash = 1;
        i++;
    }
    for (; i < n; i++) {
        char c = s[i];
        if (c == q) {
            *escape = 0;
            return i;
        }
        if (c == '\\') {
            *backslash = 1;
            if (++i >= n) {
                *escape = 1;
                return n;
            }
        }
    }
    *escape = 0;
    return n;
}

/* One block's masks (backslashes in bs, quotes in qm) by the caller's
 * reader, then the block judged: the first quote not escaped ends the
 * string.  Expanded in each reader's function so that the masks stay in
 * registers. */
#define STRING_END_BLOCKS(READ)                                                       \
    uint64_t carry = *escape != 0, seen = 0;                                          \
    size_t i = 0;                                                                     \
    for (; i + 64 <= n; i += 64) {                                                    \
        uint64_t bs, qm;                                                              \
        READ;                                                                         \
        uint64_t close = qm & ~escaped_bytes(bs, &carry);                             \
        if (close) {                                                                  \
            unsigned k = (unsigned)__builtin_ctzll(close);                            \
            if (seen | (bs & ((1ull << k) - 1))) *backslash = 1;                      \
            *escape = 0;                                                              \
            return i + k;                                                             \
        }                                                                             \
        seen |= bs;                                                                   \
    }                                                                                 \
    if (seen) *backslash = 1;                                                         \
    return end_bytewise(s, i, n, q, (int)carry, escape, backslash)

#if defined(__SSE2__)
static uint64_t mask16(__m128i x, __m128i v)
{
    return (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, v));
}

static size_t end_sse2(const char *s, size_t n, char q, int *escape, int *backslash)
{
    const __m128i vb = _mm_set1_epi8('\\'), vq = _mm_set1_epi8(q);
    STRING_END_BLOCKS({
        bs = qm = 0;
        for (int h = 0; h < 4; h++) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16 * h));
            bs |= mask16(x, vb) << (16 * h);
            qm |= mask16(x, vq) << (16 * h);
        }
    });
}
#endif

#if defined(LD_SCAN_X86)
TARGET_AVX2
static size_t end_avx2(const char *s, size_t n, char q, int *escape, int *backslash)
{
    const __m256i vb = _mm256_set1_epi8('\\'), vq = _mm256_set1_epi8(q);
    STRING_END_BLOCKS({
        __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
        bs = (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, vb)) |
             (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, vb)) << 32;
        qm = (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, vq)) |
             (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, vq)) << 32;
    });
}

TARGET_AVX512
static size_t end_avx512(const char *s, size_t n, char q, int *escape, int *backslash)
{
    const __m512i vb = _mm512_set1_epi8('\\'), vq = _mm512_set1_epi8(q);
    STRING_END_BLOCKS({
        __m512i x = _mm512_loadu_si512((const void *)(s + i));
        bs = _mm512_cmpeq_epi8_mask(x, vb);
        qm = _mm512_cmpeq_epi8_mask(x, vq);
        IN_GPR(bs);
        IN_GPR(qm);
    });
}
#endif

/* ---------------------------------------------------------------- escapes */

static int is_simple(unsigned char c)
{
    static const unsigned char hi[16] = {SIMPLE_HI}, lo[16] = {SIMPLE_LO};
    return (hi[c >> 4] & lo[c & 15]) != 0;
}

/* Counts a block's escapes (backslashes bs, one-byte escapes' second bytes
 * in simple) and stops at the first of another kind. */
#define SIMPLE_ESCAPES_BLOCKS(READ)                                                   \
    uint64_t carry = 0;                                                               \
    size_t i = 0, count = 0;                                                          \
    for (; i + 64 <= n; i += 64) {                                                    \
        uint64_t bs, simple;                                                          \
        READ;                                                                         \
        uint64_t esc = escaped_bytes(bs, &carry), other = esc & ~simple;              \
        if (other) {                                                                  \
            unsigned k = (unsigned)__builtin_ctzll(other);                            \
            *stop = i + k - 1;                                                        \
            return count + (size_t)__builtin_popcountll(esc & ((1ull << k) - 1));     \
        }                                                                             \
        count += (size_t)__builtin_popcountll(esc);                                   \
    }                                                                                 \
    *stop = carry ? i - 1 : i;                                                        \
    return count

/* Byte by byte classes of the escaped bytes only (SSE2 has no shuffle). */
#if defined(__SSE2__)
static size_t simple_sse2(const char *s, size_t n, size_t *stop)
{
    const __m128i vb = _mm_set1_epi8('\\');
    SIMPLE_ESCAPES_BLOCKS({
        bs = simple = 0;
        for (int h = 0; h < 4; h++) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16 * h));
            bs |= mask16(x, vb) << (16 * h);
        }
        uint64_t e = bs << 1 | carry; /* a superset of the escaped bytes */
        for (; e; e &= e - 1) {
            unsigned k = (unsigned)__builtin_ctzll(e);
            if (i + k < n && is_simple((unsigned char)s[i + k])) simple |= 1ull << k;
        }
    });
}
#endif

#if defined(LD_SCAN_X86)
TARGET_AVX2
static uint64_t simple32(__m256i x, __m256i hi_tbl, __m256i lo_tbl)
{
    const __m256i nib = _mm256_set1_epi8(0x0F);
    __m256i hi = _mm256_shuffle_epi8(hi_tbl, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib));
    __m256i lo = _mm256_shuffle_epi8(lo_tbl, _mm256_and_si256(x, nib));
    __m256i none = _mm256_cmpeq_epi8(_mm256_and_si256(hi, lo), _mm256_setzero_si256());
    return (uint32_t)~_mm256_movemask_epi8(none);
}

TARGET_AVX2
static size_t simple_avx2(const char *s, size_t n, size_t *stop)
{
    const __m256i vb = _mm256_set1_epi8('\\');
    const __m256i hi_tbl = _mm256_setr_epi8(SIMPLE_HI, SIMPLE_HI), lo_tbl = _mm256_setr_epi8(SIMPLE_LO, SIMPLE_LO);
    SIMPLE_ESCAPES_BLOCKS({
        __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
        bs = (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, vb)) |
             (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, vb)) << 32;
        simple = simple32(lo, hi_tbl, lo_tbl) | simple32(hi, hi_tbl, lo_tbl) << 32;
    });
}

TARGET_AVX512
static size_t simple_avx512(const char *s, size_t n, size_t *stop)
{
    const block_classes c = block_classes_avx512();
    SIMPLE_ESCAPES_BLOCKS(classify_block_avx512(_mm512_loadu_si512((const void *)(s + i)), &c, &bs, &simple));
}
#endif

#if defined(LD_SCAN_X86)
/* What the second byte of a one-byte escape stands for, by its low seven
 * bits (every other byte as it is). */
static const unsigned char unescape_tbl[128] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
    44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
    66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87,
    88, 89, 90, 91, 92, 93, 94, 95, 96, '\a', '\b', 99, 100, 101, '\f', 103, 104, 105, 106, 107,
    108, 109, '\n', 111, 112, 113, '\r', 115, '\t', 117, '\v', 119, 120, 121, 122, 123, 124, 125,
    126, 127,
};

/* Each block: the escaped bytes (all one-byte escapes) replaced by what
 * they stand for, the backslashes before them dropped, the rest moved
 * together by vpcompressb and stored whole. */
TARGET_VBMI2
static size_t decode_vbmi2(const char *s, size_t n, char *d, size_t *stop)
{
    const block_classes c = block_classes_avx512();
    const __m512i un_lo = _mm512_loadu_si512((const void *)unescape_tbl);
    const __m512i un_hi = _mm512_loadu_si512((const void *)(unescape_tbl + 64));
    uint64_t carry = 0;
    size_t i = 0, o = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i x = _mm512_loadu_si512((const void *)(s + i));
        uint64_t bs, simple;
        classify_block_avx512(x, &c, &bs, &simple);
        uint64_t esc = escaped_bytes(bs, &carry), other = esc & ~simple;
        uint64_t keep = ~(bs & ~esc); /* all but the backslashes that escape */
        if (other) { /* another kind: the caller's, from its backslash */
            unsigned k = (unsigned)__builtin_ctzll(other);
            keep &= k ? (1ull << (k - 1)) - 1 : 0;
            i += k;
            carry = 1;
        }
        __m512i y = _mm512_mask_blend_epi8(esc, x, _mm512_permutex2var_epi8(un_lo, x, un_hi));
        _mm512_storeu_si512((void *)(d + o), _mm512_maskz_compress_epi8(keep, y));
        o += (size_t)__builtin_popcountll(keep);
        if (other) break;
    }
    *stop = carry ? i - 1 : i;
    return o;
}
#endif

size_t ld_pyp_decode_simple_at(int level, const char *raw, size_t n, char *dst, size_t *stop)
{
    if (level > ld_pyp_scan_level()) level = ld_pyp_scan_level();
#if defined(LD_SCAN_X86)
    if (level >= 4) return decode_vbmi2(raw, n, dst, stop);
#endif
    (void)raw;
    (void)n;
    (void)dst;
    *stop = 0;
    return 0;
}

size_t ld_pyp_decode_simple(const char *raw, size_t n, char *dst, size_t *stop)
{
    return ld_pyp_decode_simple_at(4, raw, n, dst, stop);
}

size_t ld_pyp_simple_escapes_at(int level, const char *s, size_t n, size_t *stop)
{
    if (level > ld_pyp_scan_level()) level = ld_pyp_scan_level();
#if defined(LD_SCAN_X86)
    if (level >= 3) return simple_avx512(s, n, stop);
    if (level == 2) return simple_avx2(s, n, stop);
#endif
#if defined(__SSE2__)
    if (level >= 1) return simple_sse2(s, n, stop);
#endif
    (void)s;
    (void)n;
    *stop = 0;
    return 0;
}

size_t ld_pyp_simple_escapes(const char *s, size_t n, size_t *stop)
{
    return ld_pyp_simple_escapes_at(3, s, n, stop);
}

#if defined(LD_SCAN_X86)
static int machine_level(void)
{
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("bmi") ||
        !__builtin_cpu_supports("bmi2") || !__builtin_cpu_supports("popcnt"))
        return 1;
    if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512f")) return 2;
    return __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("avx512vbmi") ? 4 : 3;
}
#endif

int ld_pyp_scan_level(void)
{
#if defined(LD_SCAN_X86)
    /* asked once per string: the answer is kept (any thread may store it,
     * all store the same) */
    static _Atomic int known = -1;
    int level = atomic_load_explicit(&known, memory_order_relaxed);
    if (level < 0) {
        level = machine_level();
        atomic_store_explicit(&known, level, memory_order_relaxed);
    }
    return level;
#elif defined(__SSE2__)
    return 1;
#else
    return 0;
#endif
}

size_t ld_pyp_string_end_at(int level, const char *s, size_t n, char q, int *escape, int *backslash)
{
    if (level > ld_pyp_scan_level()) level = ld_pyp_scan_level();
#if defined(LD_SCAN_X86)
    if (level >= 3) return end_avx512(s, n, q, escape, backslash);
    if (level == 2) return end_avx2(s, n, q, escape, backslash);
#endif
#if defined(__SSE2__)
    if (level >= 1) return end_sse2(s, n, q, escape, backslash);
#endif
    return end_bytewise(s, 0, n, q, *escape != 0, escape, backslash);
}

size_t ld_pyp_string_end(const char *s, size_t n, char q, int *escape, int *backslash)
{
    return ld_pyp_string_end_at(3, s, n, q, escape, backslash);
}
