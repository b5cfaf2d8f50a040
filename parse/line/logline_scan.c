/* logline_scan.c - see logline_scan.h. */
#include "logline_scan.h"
#include "parse/pylit/pylit_scan.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string.h>

#define LITERAL_START_WINDOW 512 /* `obj=` lies within a line's prefix */

void ld_literal_start(ld_literal_scan *o)
{
    memset(o, 0, sizeof *o);
    o->active = 1;
}

/* The rest of a string from s[i]: its closing quote is the first quote
 * byte that no backslash escapes (each backslash escapes the byte after
 * it, so a run of them pairs up), found 64 bytes a step with no branch per
 * escape (parse/pylit/pylit_scan.c): a prompt's many "\\n" cost
 * nothing.  A backslash that ends the piece escaping leaves the next
 * piece's first byte escaped (o->escape). */
static size_t in_string(int level, ld_literal_scan *o, const char *s, size_t i, size_t n)
{
    int esc = o->escape, backslash = 0;
    size_t k = ld_pyp_string_end_at(level, s + i, n - i, o->quote, &esc, &backslash);
    o->escape = esc;
    if (k >= n - i) return n;
    o->quote = 0;
    return i + k + 1;
}

/* one byte outside strings */
static void structural(ld_literal_scan *o, char ch, uint64_t at)
{
    if (ch == '\'' || ch == '"') {
        o->quote = ch;
    } else if (ch == '(' || ch == '[' || ch == '{') {
        if (!o->depth++) {
            o->outer = ch == '(' ? ')' : ch == '[' ? ']' : '}';
            o->field_end = 0; /* a new top-level value: its own fields */
        }
    } else if (ch == ')' || ch == ']' || ch == '}') {
        if (!o->depth) o->active = 0; /* more closed than opened: not a literal this scan follows */
        else o->depth--;
    } else if (ch == ',') {
        if (o->depth == 1) o->field_end = at;
        else if (!o->depth) o->value_end = at;
    }
}

/* next_structural's byte-by-byte form: the tails, and where there is no SIMD */
static size_t next_structural_bytes(int commas, const char *s, size_t i, size_t n)
{
    for (; i < n; i++) {
        char ch = s[i];
        if (ch == '\'' || ch == '"' || ch == '(' || ch == ')' || ch == '[' || ch == ']' ||
            ch == '{' || ch == '}' || (commas && ch == ','))
            return i;
    }
    return n;
}

/* The next byte from s[i] that structural() must see: a quote or a bracket,
 * and a comma at depth 0 or 1 (deeper ones change nothing).  Token-id lists
 * are almost all digits, commas and spaces: sixteen bytes a step here, 32
 * in next_structural_avx2. */
static size_t next_structural_sse2(int commas, const char *s, size_t i, size_t n)
{
#if defined(__SSE2__)
    const __m128i q1 = _mm_set1_epi8('\''), q2 = _mm_set1_epi8('"'), c = _mm_set1_epi8(',');
    const __m128i po = _mm_set1_epi8('('), pc = _mm_set1_epi8(')'), so = _mm_set1_epi8('[');
    const __m128i sc = _mm_set1_epi8(']'), bo = _mm_set1_epi8('{'), bc = _mm_set1_epi8('}');
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q1), _mm_cmpeq_epi8(x, q2)),
                                 _mm_or_si128(_mm_cmpeq_epi8(x, po), _mm_cmpeq_epi8(x, pc)));
        m = _mm_or_si128(m, _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, so), _mm_cmpeq_epi8(x, sc)),
                                         _mm_or_si128(_mm_cmpeq_epi8(x, bo), _mm_cmpeq_epi8(x, bc))));
        if (commas) m = _mm_or_si128(m, _mm_cmpeq_epi8(x, c));
        unsigned bits = (unsigned)_mm_movemask_epi8(m);
        if (bits) return i + (size_t)__builtin_ctz(bits);
    }
#endif
    return next_structural_bytes(commas, s, i, n);
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* next_structural_sse2 32 bytes a step, the byte classes looked up by
 * nibble (one shuffle for the low four bits, one for the high four, a class
 * is a bit both agree on): quotes and brackets in QB, the comma in COMMA.
 *   " ' ( ) ,  are 0x22 0x27 0x28 0x29 0x2C;  [ ] { }  are 0x5B 0x5D 0x7B 0x7D */
enum { CLASS_QB1 = 1, CLASS_COMMA = 2, CLASS_QB2 = 4 };

__attribute__((target("avx2")))
static size_t next_structural_avx2(int commas, const char *s, size_t i, size_t n)
{
    const __m256i lo_tbl = _mm256_setr_epi8(
        0, 0, CLASS_QB1, 0, 0, 0, 0, CLASS_QB1, CLASS_QB1, CLASS_QB1, 0, CLASS_QB2, CLASS_COMMA, CLASS_QB2, 0, 0,
        0, 0, CLASS_QB1, 0, 0, 0, 0, CLASS_QB1, CLASS_QB1, CLASS_QB1, 0, CLASS_QB2, CLASS_COMMA, CLASS_QB2, 0, 0);
    const __m256i hi_tbl = _mm256_setr_epi8(
        0, 0, CLASS_QB1 | CLASS_COMMA, 0, 0, CLASS_QB2, 0, CLASS_QB2, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, CLASS_QB1 | CLASS_COMMA, 0, 0, CLASS_QB2, 0, CLASS_QB2, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i nib = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    const __m256i want = _mm256_set1_epi8((char)(CLASS_QB1 | CLASS_QB2 | (commas ? CLASS_COMMA : 0)));
    for (; i + 32 <= n; i += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i lo = _mm256_shuffle_epi8(lo_tbl, _mm256_and_si256(x, nib));
        __m256i hi = _mm256_shuffle_epi8(hi_tbl, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib));
        __m256i cls = _mm256_and_si256(_mm256_and_si256(lo, hi), want);
        unsigned bits = ~(unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(cls, zero));
        if (bits) return i + (size_t)__builtin_ctz(bits);
    }
    return next_structural_sse2(commas, s, i, n);
}

/* next_structural_avx2 64 bytes a step (AVX-512BW), the same classes */
__attribute__((target("avx512f,avx512bw")))
static size_t next_structural_avx512(int commas, const char *s, size_t i, size_t n)
{
    const __m512i lo_tbl = _mm512_broadcast_i32x4(_mm_setr_epi8(
        0, 0, CLASS_QB1, 0, 0, 0, 0, CLASS_QB1, CLASS_QB1, CLASS_QB1, 0, CLASS_QB2, CLASS_COMMA, CLASS_QB2, 0, 0));
    const __m512i hi_tbl = _mm512_broadcast_i32x4(_mm_setr_epi8(
        0, 0, CLASS_QB1 | CLASS_COMMA, 0, 0, CLASS_QB2, 0, CLASS_QB2, 0, 0, 0, 0, 0, 0, 0, 0));
    const __m512i nib = _mm512_set1_epi8(0x0F);
    const __m512i want = _mm512_set1_epi8((char)(CLASS_QB1 | CLASS_QB2 | (commas ? CLASS_COMMA : 0)));
    for (; i + 64 <= n; i += 64) {
        __m512i x = _mm512_loadu_si512((const void *)(s + i));
        __m512i lo = _mm512_shuffle_epi8(lo_tbl, _mm512_and_si512(x, nib));
        __m512i hi = _mm512_shuffle_epi8(hi_tbl, _mm512_and_si512(_mm512_srli_epi16(x, 4), nib));
        uint64_t bits = _mm512_test_epi8_mask(_mm512_and_si512(lo, hi), want);
        if (bits) return i + (size_t)__builtin_ctzll(bits);
    }
    return next_structural_avx2(commas, s, i, n);
}
#endif

/* level as parse/pylit/pylit_scan.h's: 0 byte by byte, 1 SSE2, 2 AVX2, 3
 * and up AVX-512BW, each where the machine has it */
static size_t next_structural(int level, const ld_literal_scan *o, const char *s, size_t i, size_t n)
{
    int commas = o->depth <= 1;
    if (level > ld_pyp_scan_level()) level = ld_pyp_scan_level();
#if defined(__GNUC__) && defined(__x86_64__)
    if (level >= 3 && n - i >= 64) return next_structural_avx512(commas, s, i, n);
    if (level >= 2 && n - i >= 32) return next_structural_avx2(commas, s, i, n);
#endif
    if (level >= 1) return next_structural_sse2(commas, s, i, n);
    return next_structural_bytes(commas, s, i, n);
}

void ld_literal_feed(ld_literal_scan *o, const char *s, size_t n)
{
    ld_literal_feed_at(4, o, s, n);
}

void ld_literal_feed_at(int level, ld_literal_scan *o, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && o->active) {
        if (o->quote) {
            i = in_string(level, o, s, i, n);
            continue;
        }
        i = next_structural(level, o, s, i, n);
        if (i >= n) break;
        structural(o, s[i], o->fed + i);
        i++;
    }
    o->fed += n;
}

/* where a request line's literal begins, or n when the line has none: an
 * SGLang text line's `obj=`, or a JSON line of SGLang's request events
 * ("event": "request.received" ...) in the window; any other line that
 * begins with `{` (a dict printed by something else) is not followed, so
 * that its unbalanced brackets swallow no line after it */
static size_t literal_start(const char *s, size_t n)
{
    size_t w = n < LITERAL_START_WINDOW ? n : LITERAL_START_WINDOW;
    if (n && s[0] == '{') {
        for (size_t i = 1; i + 10 <= w; i++)
            if (s[i] == '"' && !memcmp(s + i, "\"request.", 9)) return 0;
        return n;
    }
    for (size_t i = 0; i + 4 <= w; i++)
        if (s[i] == 'o' && !memcmp(s + i, "obj=", 4)) return i + 4;
    return n;
}

void ld_literal_begin_line(ld_literal_scan *o, const char *s, size_t n)
{
    memset(o, 0, sizeof *o);
    size_t at = literal_start(s, n);
    if (at == n) return;
    o->active = 1;
    ld_literal_feed(o, s + at, n - at);
}

int ld_literal_open(const ld_literal_scan *o)
{
    return o->active && (o->quote || o->depth);
}
