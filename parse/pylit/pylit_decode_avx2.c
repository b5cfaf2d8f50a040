/* pylit_decode_avx2.c - the counted decode (ld_py_str_decode_count) on
 * machines with AVX2 but no byte compress (pylit_scan.h's levels 2 and 3):
 * ld_pyp_decode_count's contract, 32 bytes a step.  Each block is stored
 * whole and kept up to its first backslash; a one-byte escape there is
 * decoded and the next block read from the byte after it.  The same blocks
 * judge the raw bytes as UTF-8 with pylit_scan.c's nibble tables and count
 * the continuation bytes kept, so the decoded text needs no second pass
 * (why the raw bytes may decide: decode_counted in pylit_str.c). */
#include "pylit_internal.h"
#include "pylit_scan.h"

#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

#define TARGET_AVX2 __attribute__((target("avx2,bmi,popcnt")))
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* What the blocks are compared with and looked up in, set once a call */
typedef struct avx2_consts {
    __m256i before_hi, before_lo, byte_hi; /* ld_pyp_utf8_tables, in both 128-bit lanes */
    __m256i nib, backslash, lead_min;
} avx2_consts;

/* What the blocks add up */
typedef struct avx2_count {
    __m256i bad; /* not zero: a byte broke a UTF-8 rule */
    size_t cont; /* continuation bytes kept */
} avx2_count;

TARGET_AVX2
static __m256i both_lanes(const unsigned char *table)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)table));
}

TARGET_AVX2
static avx2_consts consts_avx2(void)
{
    return (avx2_consts){ both_lanes(ld_pyp_utf8_tables[0]), both_lanes(ld_pyp_utf8_tables[1]),
                          both_lanes(ld_pyp_utf8_tables[2]), _mm256_set1_epi8(0x0F),
                          _mm256_set1_epi8('\\'), _mm256_set1_epi8((char)0xC0) };
}

static ALWAYS_INLINE TARGET_AVX2 __m256i load32(const unsigned char *at)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)at);
}

/* pylit_scan.c's utf8_table_errors, 32 bytes (vpshufb looks each byte up
 * in its own lane's copy of a table): not zero at a byte of x that breaks a
 * rule with the bytes before it (p1, p2, p3: one, two, three before) */
static ALWAYS_INLINE TARGET_AVX2 __m256i utf8_errors(__m256i x, __m256i p1, __m256i p2, __m256i p3,
                                                     const avx2_consts *c)
{
    __m256i t1 = _mm256_shuffle_epi8(c->before_hi, _mm256_and_si256(_mm256_srli_epi16(p1, 4), c->nib));
    __m256i t2 = _mm256_shuffle_epi8(c->before_lo, _mm256_and_si256(p1, c->nib));
    __m256i t3 = _mm256_shuffle_epi8(c->byte_hi, _mm256_and_si256(_mm256_srli_epi16(x, 4), c->nib));
    __m256i third = _mm256_subs_epu8(p2, _mm256_set1_epi8(0x60));  /* >= 0x80 where p2 >= E0 */
    __m256i fourth = _mm256_subs_epu8(p3, _mm256_set1_epi8(0x70)); /* >= 0x80 where p3 >= F0 */
    __m256i due = _mm256_and_si256(_mm256_or_si256(third, fourth), _mm256_set1_epi8((char)0x80));
    return _mm256_xor_si256(_mm256_and_si256(_mm256_and_si256(t1, t2), t3), due);
}

/* One block: the 32 bytes at `at` (at[-3..-1] readable) stored whole at d,
 * judged as UTF-8 into st->bad unless they and the three before them are
 * ASCII, and their continuation bytes before the first backslash added to
 * st->cont.  Returns the block's backslashes, bit k for byte k.  Bytes past
 * the backslash are judged here and again by the block read after it: they
 * are the raw text's own, with the right bytes before them, so a byte
 * judged twice is judged the same. */
static ALWAYS_INLINE TARGET_AVX2 uint32_t copy_block(const unsigned char *at, char *d, avx2_count *st,
                                                     const avx2_consts *c)
{
    __m256i x = load32(at);
    _mm256_storeu_si256((__m256i *)(void *)d, x);
    uint32_t bs = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, c->backslash));
    __m256i p3 = load32(at - 3);
    if (_mm256_movemask_epi8(_mm256_or_si256(x, p3))) { /* UTF-8 here, or a character before reaches in */
        st->bad = _mm256_or_si256(st->bad, utf8_errors(x, load32(at - 1), load32(at - 2), p3, c));
        /* continuation bytes: 80-BF, below C0 as signed bytes */
        uint32_t cont = (uint32_t)_mm256_movemask_epi8(_mm256_cmpgt_epi8(c->lead_min, x));
        st->cont += (size_t)__builtin_popcount(cont & ~bs & (bs - 1)); /* before the first backslash */
    }
    return bs;
}

/* copy_block for a block the text's start or end cuts (raw[i..] with fewer
 * than 32 bytes, or fewer than three before it): read from a copy with
 * zeros before raw[0] and after its end, and only the bytes kept written to
 * d (up to the first backslash or the text's end; d may have no room for
 * more).  *span: the text's bytes in the block. */
TARGET_AVX2
static uint32_t edge_block(const unsigned char *u, size_t n, size_t i, char *d, size_t *span, avx2_count *st,
                           const avx2_consts *c)
{
    unsigned char in[3 + 32] = { 0 };
    char out[32];
    size_t before = i < 3 ? i : 3, len = n - i < 32 ? n - i : 32;
    memcpy(in + 3 - before, u + i - before, before);
    memcpy(in + 3, u + i, len);
    uint32_t bs = copy_block(in + 3, out, st, c);
    memcpy(d, out, bs ? (size_t)__builtin_ctz(bs) : len);
    *span = len;
    return bs;
}

/* Past a block read at raw[*i] (its backslashes bs, span bytes of the
 * text) and the *o bytes written for it: on to the next block, or where it
 * has a backslash, past a one-byte escape there (decoded into dst).
 * Returns 1 at an escape of another kind (raw[*i] its backslash).  inside:
 * the text goes on past the block (a backslash has a byte after it). */
static ALWAYS_INLINE int past_block(const unsigned char *u, size_t n, int inside, uint32_t bs, size_t span,
                                    size_t *i, size_t *o, char *dst)
{
    if (!bs) {
        *i += span;
        *o += span;
        return 0;
    }
    unsigned k = (unsigned)__builtin_ctz(bs);
    *i += k; /* raw[*i] is the backslash */
    *o += k;
    char sc = inside || *i + 1 < n ? ld_pyp_one_byte_escapes[u[*i + 1]] : 0;
    if (!sc) return 1; /* another kind: the caller's, from its backslash */
    dst[(*o)++] = sc;
    *i += 2;
    return 0;
}

TARGET_AVX2
size_t ld_pyp_decode_count_avx2(const char *raw, size_t n, size_t from, char *dst, size_t *stop, size_t *cont,
                                uint64_t *bad)
{
    const unsigned char *u = (const unsigned char *)raw;
    const avx2_consts c = consts_avx2();
    avx2_count st = { _mm256_setzero_si256(), 0 };
    size_t i = from, o = 0, span; /* o <= i - from: a whole store at dst + o fits while i + 32 <= n */
    uint32_t bs;
    while (i < 3 && i < n) { /* fewer than three bytes before */
        bs = edge_block(u, n, i, dst + o, &span, &st, &c);
        if (past_block(u, n, 0, bs, span, &i, &o, dst)) goto done;
    }
    const size_t end = n > 32 ? n - 32 : 0;
    while (i < end) { /* whole blocks with a byte after them: a backslash's next byte is in the text */
        bs = copy_block(u + i, dst + o, &st, &c);
        if (past_block(u, n, 1, bs, 32, &i, &o, dst)) goto done;
    }
    while (i < n) { /* the last 32 bytes or fewer */
        bs = edge_block(u, n, i, dst + o, &span, &st, &c);
        if (past_block(u, n, 0, bs, span, &i, &o, dst)) goto done;
    }
done:
    *stop = i;
    *cont += st.cont;
    *bad |= !_mm256_testz_si256(st.bad, st.bad);
    return o;
}

#else

size_t ld_pyp_decode_count_avx2(const char *raw, size_t n, size_t from, char *dst, size_t *stop, size_t *cont,
                                uint64_t *bad)
{
    (void)raw;
    (void)n;
    (void)dst;
    (void)cont;
    (void)bad;
    *stop = from;
    return 0;
}

#endif
