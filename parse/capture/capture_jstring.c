/* capture_jstring.c - JSON strings decoded fast, for the wrappers' fast
 * paths (capture_docker.c, capture_journal.c): eight bytes a step over the
 * runs a string holds as they are.  Whatever is unusual (a \u0000, a lone
 * surrogate, a control byte) is "not mine", and cJSON decides. */
#include <stdint.h>
#include <string.h>

#include "capture_internal.h"

static int hex4(const char *s, unsigned *v)
{
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
        if (d == 16) return -1;
        x = x << 4 | d;
    }
    *v = x;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* \uXXXX (and its low half when a high surrogate) at s[0..n): the bytes
 * used, 0 when it is not one this path takes */
static size_t unicode_escape(const char *s, size_t n, char *o, size_t *out)
{
    unsigned hi, lo;
    if (n < 6 || hex4(s + 2, &hi) || hi == 0 || (hi >= 0xDC00 && hi <= 0xDFFF)) return 0;
    if (hi < 0xD800 || hi > 0xDBFF) return *out = put_utf8(o, hi), 6;
    if (n < 12 || s[6] != '\\' || s[7] != 'u' || hex4(s + 8, &lo) || lo < 0xDC00 || lo > 0xDFFF) return 0;
    *out = put_utf8(o, 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
    return 12;
}

/* The run of bytes from s[i] that the string holds as they are, copied to
 * o + *k as it is found: sixteen bytes a step stored whole before their
 * stops are looked at (decoding never grows the text, so o + *k + 16 <=
 * o + i + 16 <= o + n stays inside o's room).  Its end. */
static size_t copy_run(const char *s, size_t i, size_t n, char *o, size_t *k)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), high3 = _mm_set1_epi8((char)0xE0);
    for (; i + 16 <= n;) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        _mm_storeu_si128((__m128i *)(void *)(o + *k), v);
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                    _mm_cmpeq_epi8(_mm_and_si128(v, high3), _mm_setzero_si128()));
        unsigned m = (unsigned)_mm_movemask_epi8(stop);
        if (m) {
            unsigned at = (unsigned)__builtin_ctz(m);
            *k += at;
            return i + at;
        }
        i += 16;
        *k += 16;
    }
#endif
    size_t run = ld_capture_json_run(s, i, n);
    memmove(o + *k, s + i, run - i);
    *k += run - i;
    return run;
}

/* A JSON string's body at s[0..n) (after its opening quote) decoded into o
 * (room for n bytes: decoding never grows it); its length in *o_len and the
 * bytes read, closing quote included, in *used.  -1: not one this path takes. */
int ld_capture_json_unescape(const char *s, size_t n, char *o, size_t *o_len, size_t *used)
{
    size_t i = 0, k = 0;
    while (i < n) {
        i = copy_run(s, i, n, o, &k);
        if (i == n || (unsigned char)s[i] < 0x20) return -1;
        if (s[i] == '"') return *o_len = k, *used = i + 1, 0;
        if (i + 1 >= n) return -1;
        static const char simple[256] = {['"'] = '"',  ['\\'] = '\\', ['/'] = '/',  ['b'] = '\b',
                                         ['f'] = '\f', ['n'] = '\n',  ['r'] = '\r', ['t'] = '\t'};
        char e = simple[(unsigned char)s[i + 1]];
        if (e) {
            o[k++] = e;
            i += 2;
            continue;
        }
        size_t w = 0, u = s[i + 1] == 'u' ? unicode_escape(s + i, n - i, o + k, &w) : 0;
        if (!u) return -1;
        k += w;
        i += u;
    }
    return -1;
}
