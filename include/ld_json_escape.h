/* ld_json_escape.h - the bytes of a string that json.dumps escapes, found
 * many at a time: the template interpreter's tojson and the aligner's
 * JSON-escaped search share this one definition.
 *
 * json.dumps(s, ensure_ascii=False) (transformers' tojson, and how a chat
 * template's tool arguments reach a prompt) copies a string's UTF-8 as it
 * is except the control bytes (< 0x20), '"' and '\\'.  Not DEL nor the
 * bytes >= 0x80: those the default ensure_ascii=True escapes too, and that
 * is a different class (tools/gen_json_escape_oracle.py's table has both).
 *
 * The class in four widths, each exact byte by byte: a byte, an 8-byte
 * word (portable), 16 bytes (SSE2, part of x86-64), 32 bytes (AVX2, for
 * code compiled or marked for it); and the scan that uses the widest the
 * machine has.
 *
 * The second class, ensure_ascii=True's (the "_ascii" names below), is the
 * bytes a writer of JSON strings that has more to do with non-ASCII bytes
 * stops at: parse/pylit/pylit_json.c copies the runs between them and looks
 * at each one (its UTF-8 checked, a surrogate or an invalid byte escaped).
 */
#ifndef LD_JSON_ESCAPE_H
#define LD_JSON_ESCAPE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define LD_JSON_ESCAPE_X86 1
#endif

/* Whether json.dumps escapes the byte c */
static inline int ld_json_escapes(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

/* Bit 7 of each byte of the word x that json.dumps escapes, the others 0.
 * Exact for every byte: (b & 0x7F) + k carries into bit 7 of its own byte
 * only (at most 0xFE), never into the next.  x ^ 2 turns '"' (0x22) into
 * 0x20 and keeps the control bytes below 0x20: "below 0x21" is both. */
static inline uint64_t ld_json_escape_word(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, low7 = ones * 0x7F;
    uint64_t q = x ^ (ones * 0x02), bs = x ^ (ones * '\\');
    uint64_t ge_21 = ((q & low7) + ones * (0x80 - 0x21)) | q; /* bit 7: q >= 0x21 */
    uint64_t nonzero = ((bs & low7) + low7) | bs;               /* bit 7: bs != 0 */
    return ~(ge_21 & nonzero) & (ones * 0x80);
}

#if defined(__SSE2__)
/* The bits of the 16 bytes x that json.dumps escapes (bit i: byte i); the
 * same x ^ 2 trick, min(y, 0x20) == y being y <= 0x20. */
static inline unsigned ld_json_escape_mask16(__m128i x)
{
    __m128i y = _mm_xor_si128(x, _mm_set1_epi8(0x02));
    __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(y, _mm_set1_epi8(0x20)), y);
    __m128i m = _mm_or_si128(low, _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')));
    return (unsigned)_mm_movemask_epi8(m);
}
#endif

#if defined(LD_JSON_ESCAPE_X86)
/* ld_json_escape_mask16 for 32 bytes; only for code marked or built for
 * AVX2 (the caller checks the machine has it) */
__attribute__((target("avx2")))
static inline unsigned ld_json_escape_mask32(__m256i x)
{
    __m256i y = _mm256_xor_si256(x, _mm256_set1_epi8(0x02));
    __m256i low = _mm256_cmpeq_epi8(_mm256_min_epu8(y, _mm256_set1_epi8(0x20)), y);
    __m256i m = _mm256_or_si256(low, _mm256_cmpeq_epi8(x, _mm256_set1_epi8('\\')));
    return (unsigned)_mm256_movemask_epi8(m);
}
#endif

/* The first k in [i, n) where json.dumps escapes s[k], else n (also when
 * i >= n).  s[0..n) must be readable: the last step rereads bytes before
 * i rather than going a byte at a time. */
size_t ld_json_next_escape(const char *s, size_t i, size_t n);

/* The widest step ld_json_next_escape may take, for the tests: words of 8
 * bytes (and single bytes where fewer than 8 are left), 16 (SSE2), 32
 * (AVX2).  A level the build or the machine lacks falls back to the next
 * one below. */
enum { LD_JSON_ESCAPE_WORDS = 0, LD_JSON_ESCAPE_SSE2 = 1, LD_JSON_ESCAPE_AVX2 = 2 };

/* ld_json_next_escape with the widest step capped at `level`: the same
 * answer at every level. */
size_t ld_json_next_escape_level(int level, const char *s, size_t i, size_t n);

/* Whether json.dumps with its default ensure_ascii=True escapes the byte c:
 * the class above, DEL and every byte >= 0x80 */
static inline int ld_json_escapes_ascii(unsigned char c) { return ld_json_escapes(c) || c >= 0x7F; }

/* ld_json_escape_word for ensure_ascii=True's class: (b & 0x7F) + 1 has bit
 * 7 set when the low 7 bits are all ones (0x7F, 0xFF), b itself when b >= 0x80 */
static inline uint64_t ld_json_escape_ascii_word(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, low7 = ones * 0x7F;
    uint64_t high = ((x & low7) + ones) | x;
    return ld_json_escape_word(x) | (high & (ones * 0x80));
}

#if defined(__SSE2__)
/* ld_json_escape_mask16 for ensure_ascii=True's class; max(x, 0x7F) == x
 * being x >= 0x7F */
static inline unsigned ld_json_escape_ascii_mask16(__m128i x)
{
    __m128i high = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x7F)), x);
    return ld_json_escape_mask16(x) | (unsigned)_mm_movemask_epi8(high);
}
#endif

#if defined(LD_JSON_ESCAPE_X86)
/* ld_json_escape_ascii_mask16 for 32 bytes (AVX2, as ld_json_escape_mask32) */
__attribute__((target("avx2")))
static inline unsigned ld_json_escape_ascii_mask32(__m256i x)
{
    __m256i high = _mm256_cmpeq_epi8(_mm256_max_epu8(x, _mm256_set1_epi8(0x7F)), x);
    return ld_json_escape_mask32(x) | (unsigned)_mm256_movemask_epi8(high);
}
#endif

/* ld_json_next_escape and ld_json_next_escape_level for ensure_ascii=True's
 * class: the first k in [i, n) where ld_json_escapes_ascii(s[k]), else n;
 * the same reads and the same levels */
size_t ld_json_next_escape_ascii(const char *s, size_t i, size_t n);
size_t ld_json_next_escape_ascii_level(int level, const char *s, size_t i, size_t n);

#endif
