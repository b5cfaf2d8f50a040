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

/* The one-byte escapes, by the byte after the backslash; 0: not one (the
 * decoders of pylit_str.c and pylit_decode_avx2.c share it). */
const char ld_pyp_one_byte_escapes[256] = {
    ['\\'] = '\\', ['\''] = '\'', ['"'] = '"', ['a'] = '\a', ['b'] = '\b',
    ['f'] = '\f', ['n'] = '\n', ['r'] = '\r', ['t'] = '\t', ['v'] = '\v',
};

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

/* The counted decode's state from block to block. */
typedef struct count_state {
    uint64_t carry;     /* the next block's first byte is escaped */
    uint64_t tail;      /* the last block's last three bytes: one is not ASCII */
    __m512i bad;        /* not zero: a byte broke a UTF-8 rule */
    size_t cont;        /* continuation bytes kept */
    size_t o;           /* bytes written */
} count_state;

/* The bytes of `at` (64 through mask m; at[-3..-1] readable) */
#define LOAD_MASKED(m, at) ((m) == ~0ull ? _mm512_loadu_si512((const void *)(at)) \
                                         : _mm512_maskz_loadu_epi8((m), (const void *)(at)))

/* Where permutex2var takes the bytes one, two, three before each byte of a
 * block (before_idx + 3 - k): 61-63 from the vector before it */
static const unsigned char before_idx[67] = {
    61,  62,  63,  64,  65,  66,  67,  68,  69,  70,  71,  72,  73,  74,  75,  76,  77,
    78,  79,  80,  81,  82,  83,  84,  85,  86,  87,  88,  89,  90,  91,  92,  93,  94,
    95,  96,  97,  98,  99,  100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127,
};

/* The k bytes before each byte of block x: from `before` (its bytes 61-63)
 * when given, else read at at - k */
#define BYTES_BEFORE(k, at, m, x, before)                                                          \
    ((before) ? _mm512_permutex2var_epi8(*(before), _mm512_loadu_si512((const void *)(before_idx + 3 - (k))), (x)) \
              : LOAD_MASKED((m), (at) - (k)))


/* UTF-8 judged by tables rather than by compares (the compares of
 * count_valid_avx512 are a dozen a block on the port that the decoder's
 * shuffles and compress use too).  What a byte and the one before it may
 * be, as three nibbles (the one before's high and low, the byte's high),
 * each looked up in a table of the errors it allows; a pair is wrong when
 * a bit survives in all three:
 *   0x01 a lead (C0-FF) not followed by a continuation byte (80-BF)
 *   0x02 a continuation byte after ASCII
 *   0x04 E0 then 80-9F (overlong)        0x08 F5-FF then a continuation
 *   0x10 C0 or C1 then a continuation    0x20 F4 then 90-BF (past U+10FFFF)
 *   0x40 F0 then 80-8F (overlong)        0x80 a continuation after one
 * (ED A0-BF, the WTF-8 surrogates, is allowed, as ld_utf8_count_chars
 * allows it).  0x80 is right where the byte is a third or fourth one (two
 * or three bytes after E0-FF or F0-FF) and wrong where it is missing
 * there: xor with that.  Whatever breaks count_valid_avx512's rules gives
 * a byte that is not zero here, at that byte or at the one after it (C0,
 * C1 and F5-FF are judged with their next byte, and a text ending on a
 * lead is the caller's to catch). */
const unsigned char ld_pyp_utf8_tables[3][16] = {
    { 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x02, 0x80, 0x80, 0x80, 0x80, 0x11, 0x01, 0x05, 0x69 },
    { 0xD7, 0x93, 0x83, 0x83, 0xA3, 0x8B, 0x8B, 0x8B, 0x8B, 0x8B, 0x8B, 0x8B, 0x8B, 0x8B, 0x8B, 0x8B },
    { 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0xDE, 0xBE, 0xBA, 0xBA, 0x01, 0x01, 0x01, 0x01 },
};

/* A table of ld_pyp_utf8_tables in each 16-byte lane, for vpshufb */
#define UTF8_TABLE(k) _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)ld_pyp_utf8_tables[k]))

TARGET_VBMI2
static inline __attribute__((always_inline)) __m512i utf8_table_errors(__m512i x, __m512i p1, __m512i p2, __m512i p3)
{
    const __m512i nib = _mm512_set1_epi8(0x0F);
    __m512i t1 = _mm512_shuffle_epi8(UTF8_TABLE(0), _mm512_and_si512(_mm512_srli_epi16(p1, 4), nib));
    __m512i t2 = _mm512_shuffle_epi8(UTF8_TABLE(1), _mm512_and_si512(p1, nib));
    __m512i t3 = _mm512_shuffle_epi8(UTF8_TABLE(2), _mm512_and_si512(_mm512_srli_epi16(x, 4), nib));
    __m512i third = _mm512_subs_epu8(p2, _mm512_set1_epi8(0x60));  /* >= 0x80 where p2 >= E0 */
    __m512i fourth = _mm512_subs_epu8(p3, _mm512_set1_epi8(0x70)); /* >= 0x80 where p3 >= F0 */
    __m512i due = _mm512_and_si512(_mm512_or_si512(third, fourth), _mm512_set1_epi8((char)0x80));
    return _mm512_xor_si512(_mm512_ternarylogic_epi32(t1, t2, t3, 0x80), due); /* t1 & t2 & t3 */
}

/* One block of decode_count_vbmi2, its bytes at `at` through mask m (zeros
 * past the text's end), the three bytes before them at at[-3..-1] or, for a
 * text's first block, in bytes 61-63 of *before:
 * decoded into d + st->o as decode_vbmi2 decodes, judged as UTF-8
 * (utf8_table_errors; an ASCII block after ASCII not looked at),
 * its kept continuation bytes counted.  Returns the index of the first
 * escaped byte of another kind, 64 when there is none. */
TARGET_VBMI2
static inline __attribute__((always_inline)) unsigned count_block(const char *at, uint64_t m, const __m512i *before,
                                                                  char *d, count_state *st, const block_classes *c,
                                                                  __m512i un_lo, __m512i un_hi)
{
    __m512i x = LOAD_MASKED(m, at);
    uint64_t bs, simple;
    classify_block_avx512(x, c, &bs, &simple);
    uint64_t esc = escaped_bytes(bs, &st->carry), other = esc & ~simple;
    uint64_t keep = ~(bs & ~esc) & m;
    unsigned k = other ? (unsigned)__builtin_ctzll(other) : 64;
    if (other) keep &= k ? (1ull << (k - 1)) - 1 : 0; /* another kind: the caller's */
    uint64_t hi = _mm512_movepi8_mask(x);
    if (hi | st->tail) { /* UTF-8 here, or a character of the block before may reach in */
        __m512i p1 = BYTES_BEFORE(1, at, m, x, before), p2 = BYTES_BEFORE(2, at, m, x, before);
        __m512i p3 = BYTES_BEFORE(3, at, m, x, before);
        st->bad = _mm512_or_si512(st->bad, _mm512_maskz_mov_epi8(m, utf8_table_errors(x, p1, p2, p3)));
        /* continuation bytes: bit 7 set and bit 6 clear (movepi8_mask takes bit 7
         * off another port than compares) */
        uint64_t lead = _mm512_movepi8_mask(_mm512_and_si512(x, _mm512_add_epi8(x, x)));
        st->cont += (size_t)__builtin_popcountll(hi & ~lead & keep);
    }
    st->tail = hi >> 61;
    __m512i y = _mm512_mask_blend_epi8(esc, x, _mm512_permutex2var_epi8(un_lo, x, un_hi));
    __m512i packed = _mm512_maskz_compress_epi8(keep, y);
    size_t kept = (size_t)__builtin_popcountll(keep);
    if (m == ~0ull) _mm512_storeu_si512((void *)(d + st->o), packed); /* room: o <= the raw bytes read */
    else _mm512_mask_storeu_epi8((void *)(d + st->o), (1ull << kept) - 1, packed);
    st->o += kept;
    return k;
}

/* decode_vbmi2 to the end of the text (the last block through masks) that
 * also judges the raw bytes as UTF-8 and counts the continuation bytes it
 * keeps (count_block).  Bytes past an escape of another kind are judged
 * too: they are the raw text's own, with the right bytes before them, so a
 * byte judged twice is judged the same.  A first block with fewer than
 * three bytes before it in raw takes them from a vector (zeros before
 * raw[0]). */
TARGET_VBMI2
static size_t decode_count_vbmi2(const char *raw, size_t n, size_t from, char *d, size_t *stop, size_t *cont_out,
                                 uint64_t *bad_out)
{
    const block_classes c = block_classes_avx512();
    const __m512i un_lo = _mm512_loadu_si512((const void *)unescape_tbl);
    const __m512i un_hi = _mm512_loadu_si512((const void *)(unescape_tbl + 64));
    count_state st = { 0, 0, _mm512_setzero_si512(), 0, 0 };
    size_t i = from;
    unsigned k = 64;
    if (i < 3 && i < n) { /* fewer than three bytes before: the first block alone */
        uint32_t w = 0;   /* raw[i-1] in its byte 3, raw[i-2] in 2, raw[i-3] in 1 */
        for (size_t b = 1; b <= i; b++) w |= (uint32_t)(unsigned char)raw[i - b] << (8 * (4 - b));
        __m512i before = _mm512_maskz_set1_epi32(0x8000, (int)w); /* its bytes 60-63 */
        size_t len = n - i < 64 ? n - i : 64;
        st.tail = (w & 0x80808080u) != 0;
        k = count_block(raw + i, len == 64 ? ~0ull : (1ull << len) - 1, &before, d, &st, &c, un_lo, un_hi);
        i += k < 64 ? k : len;
    } else if (i < n) {
        st.tail = ((unsigned char)raw[i - 1] | (unsigned char)raw[i - 2] | (unsigned char)raw[i - 3]) >> 7;
    }
    while (k == 64 && i + 64 <= n) {
        k = count_block(raw + i, ~0ull, NULL, d, &st, &c, un_lo, un_hi);
        i += k;
    }
    if (k == 64 && i < n) { /* the last bytes, through masks */
        k = count_block(raw + i, (1ull << (n - i)) - 1, NULL, d, &st, &c, un_lo, un_hi);
        i += k < 64 ? k : n - i;
    }
    *stop = k < 64 || st.carry ? i - 1 : i; /* the backslash of another kind's escape */
    *cont_out += st.cont;
    *bad_out |= _mm512_test_epi8_mask(st.bad, st.bad);
    return st.o;
}
#endif

size_t ld_pyp_decode_count(const char *raw, size_t n, size_t from, char *dst, size_t *stop, size_t *cont,
                           uint64_t *bad)
{
#if defined(LD_SCAN_X86)
    if (ld_pyp_scan_level() >= 4) return decode_count_vbmi2(raw, n, from, dst, stop, cont, bad);
#endif
    (void)raw;
    (void)n;
    (void)dst;
    (void)cont;
    (void)bad;
    *stop = from;
    return 0;
}

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
