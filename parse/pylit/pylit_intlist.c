/* pylit_intlist.c - the fast paths of the token-id lists that dominate
 * request logs: eight digits at a time (SWAR), whole lists counted and
 * parsed straight into the arena, or skimmed (counted, not parsed:
 * LD_PYLIT_SKIM_INT_LISTS) with SSE2 or AVX2 where the machine has them. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pylit_internal.h"

/* Up to 8 leading ASCII digits of s[0..8) at once (SWAR, as simdjson):
 * returns how many there are (8 = maybe more) and their value in *out.
 * Bytes after the first non-digit may borrow or carry into each other but
 * never into the digits before it, and they are shifted out. */
static unsigned swar_digits(const unsigned char *s, uint64_t *out)
{
    uint64_t x;
    memcpy(&x, s, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    x -= 0x3030303030303030ull;
    uint64_t m = (x | (x + 0x7676767676767676ull)) & 0x8080808080808080ull;
    unsigned n = m ? (unsigned)__builtin_ctzll(m) >> 3 : 8u;
    if (n == 0) return 0;
    x <<= 8 * (8 - n); /* left-pad with zero digits */
    x = ((x & 0x0F0F0F0F0F0F0F0Full) * 2561) >> 8;
    x = ((x & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
    *out = ((x & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
    return n;
}

/* The hot loop of request logs: `, 151644, 8948, 198` inside a token-id
 * list.  Consumes `, <1-7 digits>` items followed by ',' or `close`,
 * writing straight onto the scratch stack with the parser state in locals;
 * anything unusual (sign, leading zero, long number, float, other spacing,
 * the last bytes of the input) stops the run and the general path decides. */
ld_status ld_pyp_int_run(py_parser *p, char close)
{
    const unsigned char *b = (const unsigned char *)p->buf;
    size_t len = p->len, i = p->pos, sp = p->sp;
    while (i + 10 <= len && b[i] == ',' && b[i + 1] == ' ') {
        const unsigned char *s = b + i + 2;
        uint64_t v = 0;
        unsigned n = swar_digits(s, &v);
        if (n == 0 || n == 8 || (s[0] == '0' && n > 1)) break;
        if (s[n] != ',' && s[n] != (unsigned char)close) break;
        if (sp == p->cap) {
            p->sp = sp;
            LD_TRY(ld_pyp_grow_stack(p));
        }
        ld_py_value *o = &p->stk[sp++];
        o->kind = LD_PY_INT;
        o->flags = 0;
        o->n = 0;
        o->off = i + 2;
        o->u.i = (int64_t)v;
        i += 2 + n;
    }
    p->sp = sp;
    p->pos = i;
    return LD_OK;
}

/* Number of ',' bytes in s[0..n): eight bytes at a time, exactly (a byte
 * is zero after the XOR iff its high bit stays clear in t; the multiply
 * adds the eight flags into the top byte, with no popcount instruction
 * needed on baseline x86-64). */
static size_t count_commas(const unsigned char *s, size_t n)
{
    size_t count = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        x ^= 0x2C2C2C2C2C2C2C2Cull;
        uint64_t t = ((x & 0x7F7F7F7F7F7F7F7Full) + 0x7F7F7F7F7F7F7F7Full) | x;
        uint64_t hits = (~t & 0x8080808080808080ull) >> 7;
        count += (size_t)((hits * 0x0101010101010101ull) >> 56);
    }
    for (; i < n; i++) count += s[i] == ',';
    return count;
}

/* Decimal digits at s (before `end`, at most 18): their count, 0 if none. */
static unsigned plain_digits(const unsigned char *s, const unsigned char *end,
                             uint64_t *out)
{
    unsigned n = 0;
    uint64_t v = 0;
    while (s + n < end && n < 19 && s[n] >= '0' && s[n] <= '9')
        v = v * 10 + (uint64_t)(s[n++] - '0');
    *out = v;
    return n <= 18 ? n : 0;
}

/* Popcount of a 16-bit mask without a popcount instruction. */
static unsigned bits16(unsigned m)
{
    m = m - ((m >> 1) & 0x5555u);
    m = (m & 0x3333u) + ((m >> 2) & 0x3333u);
    m = (m + (m >> 4)) & 0x0F0Fu;
    return (m + (m >> 8)) & 0x1Fu;
}

/* Checks that s starts `D, D, ..., D]` (D: decimal digits, exactly one
 * ", " between items, as repr writes) and returns the number of items with
 * *out_close at the ']', or 0 when it is anything else (or has no ']').  One
 * pass, 16 bytes at a time with SSE2 byte classes: a space must follow each
 * comma, a digit each space, a digit come before the ']', and no item may
 * start with 0 and go on (Python has no leading zeros).  Long digit runs
 * are not bounded here (counts only). */
static size_t skim_tail(const unsigned char *s, size_t n, size_t i, size_t commas,
                        unsigned carry_c, unsigned carry_s, unsigned carry_z,
                        const unsigned char **out_close);

static size_t skim_list_sse2(const unsigned char *s, const unsigned char *end,
                             const unsigned char **out_close)
{
    size_t n = (size_t)(end - s), commas = 0, i = 0;
    unsigned carry_c = 0, carry_s = 1; /* last byte of the previous block; the
                                          list's first byte starts an item */
    unsigned carry_z = 0;              /* ... was a 0 starting an item */
    if (n == 0 || s[0] < '0' || s[0] > '9') return 0;
#if defined(__SSE2__)
    const __m128i vc = _mm_set1_epi8(','), vs = _mm_set1_epi8(' '), v0 = _mm_set1_epi8('0');
    const __m128i lo = _mm_set1_epi8((char)('0' - 128)), hi = _mm_set1_epi8((char)('9' - 128));
    const __m128i flip = _mm_set1_epi8((char)0x80);
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        unsigned c = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, vc));
        unsigned sp = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, vs));
        __m128i xs = _mm_xor_si128(x, flip); /* signed compare of unsigned bytes */
        unsigned nd = (unsigned)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmplt_epi8(xs, lo), _mm_cmpgt_epi8(xs, hi)));
        unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, v0));
        unsigned other = ~(c | sp | (0xFFFFu & ~nd)) & 0xFFFFu, valid = 0xFFFFu;
        unsigned k = other ? (unsigned)__builtin_ctz(other) : 16;
        if (other) { /* the first byte outside the classes must be the ']' */
            if (s[i + k] != ']') return 0;
            valid = (1u << k) - 1;
            c &= valid;
            sp &= valid;
        }
        if ((((c << 1) | carry_c) & valid) != sp) return 0;     /* ", " pairs */
        unsigned starts = ((sp << 1) | carry_s) & valid;        /* item starts */
        if (starts & nd) return 0;                              /* digit after ", " */
        unsigned lead0 = z & starts;                            /* an item starting 0 */
        if ((((lead0 << 1) | carry_z) & valid) & ~nd) return 0; /* ... and going on */
        commas += bits16(c);
        if (other) {
            if (k == 0 ? (carry_c | carry_s) : ((c | sp) >> (k - 1)) & 1) return 0;
            *out_close = s + i + k;
            return commas + 1;
        }
        carry_c = c >> 15;
        carry_s = sp >> 15;
        carry_z = lead0 >> 15;
    }
#endif
    return skim_tail(s, n, i, commas, carry_c, carry_s, carry_z, out_close);
}

/* The bytes after the last whole vector block, one at a time. */
static size_t skim_tail(const unsigned char *s, size_t n, size_t i, size_t commas,
                        unsigned carry_c, unsigned carry_s, unsigned carry_z,
                        const unsigned char **out_close)
{
    for (; i < n; i++) {
        unsigned char b = s[i];
        if (b == ']') {
            if (carry_c || carry_s) return 0; /* ends in ", " */
            *out_close = s + i;
            return commas + 1;
        }
        int is_c = b == ',', is_s = b == ' ', is_d = b >= '0' && b <= '9';
        if (!is_c && !is_s && !is_d) return 0;
        if (is_s != (int)carry_c || (carry_s && !is_d) || (carry_z && is_d)) return 0;
        carry_z = carry_s && b == '0';
        carry_c = (unsigned)is_c;
        carry_s = (unsigned)is_s;
        commas += (size_t)is_c;
    }
    return 0;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* The byte-class masks of one 64-byte block (two AVX2 halves): ',', ' ',
 * '0' and not-a-digit, bit k for byte k. */
typedef struct skim_masks {
    uint64_t c, sp, z, nd;
} skim_masks;

__attribute__((target("avx2")))
static skim_masks skim_classify64(const unsigned char *s)
{
    const __m256i vc = _mm256_set1_epi8(','), vs = _mm256_set1_epi8(' ');
    const __m256i v0 = _mm256_set1_epi8('0'), nine = _mm256_set1_epi8(9);
    skim_masks m = { 0, 0, 0, 0 };
    for (int h = 0; h < 2; h++) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(s + 32 * h));
        __m256i d = _mm256_sub_epi8(x, v0); /* a digit: 0..9 unsigned */
        __m256i is_d = _mm256_cmpeq_epi8(_mm256_min_epu8(d, nine), d);
        unsigned sh = 32u * (unsigned)h;
        m.c |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, vc)) << sh;
        m.sp |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, vs)) << sh;
        m.z |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, v0)) << sh;
        m.nd |= (uint64_t)(uint32_t)~_mm256_movemask_epi8(is_d) << sh;
    }
    return m;
}

/* The block that holds the first byte outside the classes (`other`, at k):
 * it must be the ']', after a digit; the checks of skim_list_sse2 on the
 * bytes before it.  The count of the list, or 0. */
static inline size_t skim_last(const unsigned char *s, size_t i, uint64_t c, uint64_t sp, uint64_t z,
                               uint64_t nd, uint64_t other, uint64_t carry_c, uint64_t carry_s,
                               uint64_t carry_z, size_t commas, const unsigned char **out_close)
{
    unsigned k = (unsigned)__builtin_ctzll(other);
    if (s[i + k] != ']') return 0;
    uint64_t valid = k ? (~0ull >> (64 - k)) : 0;
    c &= valid;
    sp &= valid;
    if ((((c << 1) | carry_c) & valid) != sp) return 0;
    uint64_t starts = ((sp << 1) | carry_s) & valid;
    if (starts & nd) return 0;
    uint64_t lead0 = z & starts;
    if ((((lead0 << 1) | carry_z) & valid) & ~nd) return 0;
    commas += (size_t)__builtin_popcountll(c);
    if (k == 0 ? (carry_c | carry_s) : ((c | sp) >> (k - 1)) & 1) return 0;
    *out_close = s + i + k;
    return commas + 1;
}

/* skim_list_sse2's checks on 64-bit masks (CLASSIFY sets c, sp, z and nd
 * for the 64 bytes at s + i): the blocks inside a list gather what breaks
 * its shape into one word, looked at once at its end, so that a block
 * costs no branch but the one that finds the end. */
#define SKIM_BLOCKS(CLASSIFY)                                                                     \
    size_t n = (size_t)(end - s), commas = 0, i = 0;                                              \
    uint64_t carry_c = 0, carry_s = 1, carry_z = 0, bad = 0;                                      \
    if (n == 0 || s[0] < '0' || s[0] > '9') return 0;                                             \
    for (; i + 64 <= n; i += 64) {                                                                \
        uint64_t c, sp, z, nd;                                                                    \
        CLASSIFY;                                                                                 \
        uint64_t other = nd & ~(c | sp);                                                          \
        if (other)                                                                                \
            return bad ? 0 : skim_last(s, i, c, sp, z, nd, other, carry_c, carry_s, carry_z,      \
                                       commas, out_close);                                        \
        uint64_t starts = (sp << 1) | carry_s, lead0 = z & starts;                                \
        bad |= (((c << 1) | carry_c) ^ sp) | (starts & nd) | (((lead0 << 1) | carry_z) & ~nd);    \
        commas += (size_t)__builtin_popcountll(c);                                                \
        carry_c = c >> 63;                                                                        \
        carry_s = sp >> 63;                                                                       \
        carry_z = lead0 >> 63;                                                                    \
    }                                                                                             \
    if (bad) return 0;                                                                            \
    return skim_tail(s, n, i, commas, (unsigned)carry_c, (unsigned)carry_s, (unsigned)carry_z, out_close)

/* skim_list_sse2 with 64-byte blocks (two AVX2 loads each) and the popcount
 * instruction: token ids are most of a request log's bytes, and this pass
 * was the largest single cost of `scan`. */
__attribute__((target("avx2,bmi,popcnt")))
static size_t skim_list_avx2(const unsigned char *s, const unsigned char *end,
                             const unsigned char **out_close)
{
    SKIM_BLOCKS({
        skim_masks m = skim_classify64(s + i);
        c = m.c;
        sp = m.sp;
        z = m.z;
        nd = m.nd;
    });
}

/* ... one AVX-512BW load a block: byte classes straight into mask registers */
__attribute__((target("avx512f,avx512bw,bmi,bmi2,popcnt")))
static size_t skim_list_avx512(const unsigned char *s, const unsigned char *end,
                               const unsigned char **out_close)
{
    const __m512i vc = _mm512_set1_epi8(','), vs = _mm512_set1_epi8(' ');
    const __m512i v0 = _mm512_set1_epi8('0'), nine = _mm512_set1_epi8(9);
    SKIM_BLOCKS({
        __m512i x = _mm512_loadu_si512((const void *)(s + i));
        c = _mm512_cmpeq_epi8_mask(x, vc);
        sp = _mm512_cmpeq_epi8_mask(x, vs);
        z = _mm512_cmpeq_epi8_mask(x, v0);
        nd = _mm512_cmpgt_epu8_mask(_mm512_sub_epi8(x, v0), nine);
    });
}
#endif

/* level as pylit_scan.h's (0 byte by byte, 1 SSE2, 2 AVX2, 3 and up
 * AVX-512BW), each where the machine has it */
size_t ld_pyp_skim_list_at(int level, const unsigned char *s, const unsigned char *end,
                           const unsigned char **out_close)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (level >= 3 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2"))
        return skim_list_avx512(s, end, out_close);
    if (level >= 2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt"))
        return skim_list_avx2(s, end, out_close);
#endif
    if (level >= 1) return skim_list_sse2(s, end, out_close);
    size_t n = (size_t)(end - s);
    if (n == 0 || s[0] < '0' || s[0] > '9') return 0;
    return skim_tail(s, n, 0, 0, 0, 1, 0, out_close);
}

static size_t skim_list(const unsigned char *s, const unsigned char *end,
                        const unsigned char **out_close)
{
    return ld_pyp_skim_list_at(3, s, end, out_close);
}

/* Token-id lists are most of a request log's bytes.  For a list of plain
 * non-negative ints written as repr() writes them, count the items first
 * (the first ']' and the commas before it), allocate the array once in the
 * arena and parse straight into it: no scratch stack, no copy.  Returns 1
 * when done; 0 leaves p untouched for the general path (any other shape). */
int ld_pyp_int_list_direct(py_parser *p, ld_py_value *out)
{
    const unsigned char *buf = (const unsigned char *)p->buf, *end = buf + p->len;
    const unsigned char *s = buf + p->pos + 1;
    if (s >= end || *s < '0' || *s > '9') return 0;
    const unsigned char *close = NULL;
    if (p->skim_here) {
        size_t count = skim_list(s, end, &close);
        if (count == 0 || close - s < 64 || count > UINT32_MAX || p->depth >= p->max_depth)
            return 0; /* short lists: the general path is fine */
        out->kind = LD_PY_LIST;
        out->flags = LD_PY_F_MARKS_KNOWN | LD_PY_F_SKIMMED;
        out->n = (uint32_t)count;
        out->off = p->pos;
        out->u.items = NULL;
        p->pos = (size_t)(close - buf) + 1;
        return 1;
    }
    close = memchr(s, ']', (size_t)(end - s));
    if (!close || close - s < 64) return 0; /* short lists: the general path is fine */
    size_t n = count_commas(s, (size_t)(close - s)) + 1;
    if (n > UINT32_MAX || p->depth >= p->max_depth) return 0;
    ld_py_value *items = ld_arena_alloc(p->arena, n * sizeof *items);
    if (!items) return 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t v = 0;
        unsigned d = s + 8 <= end ? swar_digits(s, &v) : 0;
        if (d == 0 || d == 8) d = plain_digits(s, close, &v);
        if (d == 0 || (s[0] == '0' && d > 1)) return 0;
        items[k] = (ld_py_value){ LD_PY_INT, 0, 0, (uint64_t)(s - buf), { .i = (int64_t)v } };
        s += d;
        if (k + 1 == n) break;
        if (s + 2 > close || s[0] != ',' || s[1] != ' ') return 0;
        s += 2;
    }
    if (s != close) return 0;
    out->kind = LD_PY_LIST;
    out->flags = LD_PY_F_MARKS_KNOWN;
    out->n = (uint32_t)n;
    out->off = p->pos;
    out->u.items = items;
    p->pos = (size_t)(close - buf) + 1;
    return 1;
}
