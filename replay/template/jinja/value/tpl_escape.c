/* tpl_escape.c - string escaping of Python's repr() and json.dumps():
 * repr escapes what str.isprintable() rejects (control characters, format
 * characters such as U+200D and U+FEFF, separators such as U+00A0 and
 * U+2028, private use); json.dumps escapes control characters and, with
 * ensure_ascii, everything outside ASCII (as \uXXXX, surrogate pairs above
 * U+FFFF).  Limit: unassigned code points, which Python's repr also
 * escapes, are printed as they are. */
#include <stdio.h>
#include <string.h>

#include "ld_json_escape.h"
#include "replay/template/jinja/tpl_internal.h"

static void puts_(tv_buf *b, const char *s) { ld_tv_buf_put(b, s, strlen(s)); }

/* not printable for Python: categories Cc, Cf, Zs (but the space), Zl, Zp,
 * Co, Cs */
static bool unprintable(uint32_t c)
{
    static const uint32_t ranges[][2] = {
        {0x00, 0x1F},       {0x7F, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},
        {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},     {0x1680, 0x1680},
        {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},   {0x205F, 0x2064},   {0x2066, 0x206F},
        {0x3000, 0x3000},   {0xD800, 0xF8FF},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD},
        {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
        {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (c >= ranges[i][0] && c <= ranges[i][1]) return true;
    return false;
}

void ld_tv_str_repr(tv_buf *b, const char *s, size_t n)
{
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    ld_tv_buf_putc(b, q);
    for (size_t i = 0; i < n && !b->failed;) {
        size_t j = i; /* copy the run of plain ASCII in one go */
        while (j < n && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] < 0x7F && s[j] != '\\' && s[j] != q) j++;
        ld_tv_buf_put(b, s + i, j - i);
        if ((i = j) == n) break;
        uint32_t c;
        size_t k = ld_tv_utf8_decode(s + i, n - i, &c);
        char e[16];
        if (c == '\\' || c == (uint32_t)q) ld_tv_buf_putc(b, '\\'), ld_tv_buf_putc(b, (char)c);
        else if (c == '\n') puts_(b, "\\n");
        else if (c == '\r') puts_(b, "\\r");
        else if (c == '\t') puts_(b, "\\t");
        else if (c != 0xFFFFFFFF && unprintable(c)) {
            if (c < 0x100) snprintf(e, sizeof e, "\\x%02x", (unsigned)c);
            else if (c < 0x10000) snprintf(e, sizeof e, "\\u%04x", (unsigned)c);
            else snprintf(e, sizeof e, "\\U%08x", (unsigned)c);
            puts_(b, e);
        } else ld_tv_buf_put(b, s + i, k);
        i += k;
    }
    ld_tv_buf_putc(b, q);
}

#if defined(__SSE2__)
/* The bits of the 16 bytes at s that json.dumps escapes (bit i: s[i]) */
static inline unsigned json_special16(const char *s)
{
    return ld_json_escape_mask16(_mm_loadu_si128((const __m128i *)(const void *)s));
}
#endif

/* The escape json.dumps writes for the byte c (ld_json_escapes): \" \\ \n
 * \r \t \b \f, or \u00XX; its length (6 at most). */
static size_t json_escape(unsigned char c, char *e)
{
    static const char hex[] = "0123456789abcdef";
    static const char short_esc[32] = {['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r'};
    e[0] = '\\';
    if (c == '"' || c == '\\') return e[1] = (char)c, 2;
    if (short_esc[c]) return e[1] = short_esc[c], 2;
    memcpy(e + 1, "u00", 3);
    e[4] = hex[c >> 4], e[5] = hex[c & 15];
    return 6;
}

/* json_escape's escapes by byte (c < 0x60: the control bytes, '"' and
 * '\\'), each padded to 8 bytes with its length in the last: written as
 * one 8-byte word, without json_escape's branches on its kind (a tool
 * result has an escape every few dozen bytes, of mixed kinds). */
#define JSON_HEX(d) ((d) < 10 ? '0' + (d) : 'a' + (d) - 10)
#define JSON_ESC_U(c) {'\\', 'u', '0', '0', JSON_HEX((c) >> 4), JSON_HEX((c) & 15), 0, 6}
#define JSON_ESC_2(x) {'\\', (x), 0, 0, 0, 0, 0, 2}
static const char json_esc8[0x60][8] = {
    JSON_ESC_U(0x00), JSON_ESC_U(0x01), JSON_ESC_U(0x02), JSON_ESC_U(0x03), JSON_ESC_U(0x04), JSON_ESC_U(0x05),
    JSON_ESC_U(0x06), JSON_ESC_U(0x07), JSON_ESC_2('b'),  JSON_ESC_2('t'),  JSON_ESC_2('n'),  JSON_ESC_U(0x0B),
    JSON_ESC_2('f'),  JSON_ESC_2('r'),  JSON_ESC_U(0x0E), JSON_ESC_U(0x0F), JSON_ESC_U(0x10), JSON_ESC_U(0x11),
    JSON_ESC_U(0x12), JSON_ESC_U(0x13), JSON_ESC_U(0x14), JSON_ESC_U(0x15), JSON_ESC_U(0x16), JSON_ESC_U(0x17),
    JSON_ESC_U(0x18), JSON_ESC_U(0x19), JSON_ESC_U(0x1A), JSON_ESC_U(0x1B), JSON_ESC_U(0x1C), JSON_ESC_U(0x1D),
    JSON_ESC_U(0x1E), JSON_ESC_U(0x1F), ['"'] = JSON_ESC_2('"'), ['\\'] = JSON_ESC_2('\\'),
};
#undef JSON_HEX
#undef JSON_ESC_U
#undef JSON_ESC_2

/* json_escape of c written at d as a whole 8-byte word (d has room for
 * 8); where the escape ends */
static inline char *json_escape8(unsigned char c, char *d)
{
    memcpy(d, json_esc8[c], 8);
    return d + json_esc8[c][7];
}

#if defined(__SSE2__)
/* The plain bytes of s from i on copied to *d 16 at a time, while 16 bytes
 * of s are left and 16 bytes of room before `room`: each step stores the
 * 16 bytes it read, then keeps them up to the first byte to escape.  The
 * index where it stopped; *special when s[i] there is to be escaped. */
static inline size_t json_copy_plain16(const char *s, size_t i, size_t n, char **d, const char *room,
                                       bool *special)
{
    char *o = *d;
    while (i + 16 <= n && o + 16 <= room) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        _mm_storeu_si128((__m128i *)(void *)o, x);
        unsigned bits = json_special16(s + i);
        if (bits) {
            size_t k = (size_t)__builtin_ctz(bits);
            *d = o + k, *special = true;
            return i + k;
        }
        i += 16, o += 16;
    }
    *d = o;
    return i;
}
#endif

/* The first k in [i, n) where s[k] is to be escaped, else n: when fewer
 * than 16 bytes are left of a string of 16 or more (the tail of a string
 * the 32- or 16-byte copy steps went over), its last 16 are read at once,
 * inline; else ld_json_next_escape's steps. */
static inline size_t json_next_escape(const char *s, size_t i, size_t n)
{
#if defined(__SSE2__)
    if (n >= 16 && n - i < 16) {
        unsigned bits = json_special16(s + n - 16) >> (16 - (n - i));
        return bits ? i + (size_t)__builtin_ctz(bits) : n;
    }
#endif
    return ld_json_next_escape(s, i, n);
}

/* One step of json_str_utf8 from s[i] (i < n): the plain bytes up to the
 * next byte to escape copied to *d (json_copy_plain16 while `room` allows,
 * then json_next_escape); the index of that byte, or n. */
static inline size_t json_copy_run(const char *s, size_t i, size_t n, char **d, const char *room)
{
    bool special = false;
#if defined(__SSE2__)
    i = json_copy_plain16(s, i, n, d, room, &special);
#else
    (void)room;
#endif
    if (special) return i;
    size_t j = json_next_escape(s, i, n);
    ld_tv_copy(*d, s + i, j - i);
    *d += j - i;
    return j;
}

/* json.dumps(s, ensure_ascii=False) of s[0..n) written at d, which has room
 * for the worst (every byte a 6-byte escape, the quotes, the NUL) and 16
 * bytes more: no check for room anywhere.  Where it ends. */
static char *json_str_roomy(char *d, const char *s, size_t n)
{
    const char *room = d + 6 * n + 3 + 16; /* json_copy_plain16's bound, never reached */
    *d++ = '"';
#if defined(__SSE2__)
    if (n <= 16) { /* a key or a short value (a tool's schema has dozens): one test, one store */
        char t[16] = {0};
        ld_tv_copy(t, s, n);
        if ((json_special16(t) & ((1u << n) - 1)) == 0) { /* the bytes of s only, not the zeros after them */
            memcpy(d, t, 16); /* 17 <= 6 * n + 19 bytes of room */
            d += n;
            *d++ = '"';
            *d = 0;
            return d;
        }
    }
#endif
    for (size_t i = 0; (i = json_copy_run(s, i, n, &d, room)) < n; i++)
        d = json_escape8((unsigned char)s[i], d); /* its 8 bytes fit: 6 * i + 9 <= 6 * n + 3 */
    *d++ = '"';
    *d = 0;
    return d;
}

#if defined(LD_JSON_ESCAPE_X86)
#define LD_JSON_AVX2 1

/* The 32 bytes at s stored at d */
__attribute__((target("avx2")))
static inline void json_store32(char *d, const char *s)
{
    _mm256_storeu_si256((__m256i *)(void *)d, _mm256_loadu_si256((const __m256i *)(const void *)s));
}

/* The bits of the 32 bytes x that json.dumps escapes (bit i: byte i) */
__attribute__((target("avx2")))
static inline unsigned json_special32(__m256i x) { return ld_json_escape_mask32(x); }

/* s[0..m) copied to d, m < 32 (the mask says so to the compiler, which
 * cannot tell on its own: else it warns of a memcpy of more) */
static inline void json_copy_short(char *d, const char *s, size_t m) { ld_tv_copy(d, s, m & 31); }

/* The 32 bytes s[i..i+32) (i + 32 <= n) written at d, whose bytes to
 * escape are `bits` (not 0): every escape of the block from its one mask,
 * the plain bytes between them stored 32 at a time where 32 bytes of s are
 * left to read (d has room: the roomy bound), else copied exactly.  Where
 * the block ends in d. */
__attribute__((target("avx2")))
static inline char *json_block32_escapes(char *d, const char *s, size_t i, size_t n, unsigned bits)
{
    size_t k = (size_t)__builtin_ctz(bits), at; /* the block's bytes before `at` are written */
    d = json_escape8((unsigned char)s[i + k], d + k); /* the bytes before the first escape are in place */
    for (at = k + 1, bits &= bits - 1; bits; at = k + 1, bits &= bits - 1) {
        k = (size_t)__builtin_ctz(bits);
        if (k > at) { /* the plain bytes s[i+at .. i+k) */
            if (i + at + 32 <= n) json_store32(d, s + i + at);
            else json_copy_short(d, s + i + at, k - at);
            d += k - at;
        }
        d = json_escape8((unsigned char)s[i + k], d);
    }
    if (at < 32) { /* the plain bytes after the last escape */
        if (i + at + 32 <= n) json_store32(d, s + i + at);
        else json_copy_short(d, s + i + at, 32 - at);
        d += 32 - at;
    }
    return d;
}

/* json_str_roomy 32 bytes a step while 32 are left (a block's escapes all
 * found from its one mask: a tool result has one every few dozen bytes),
 * then as json_copy_run copies them (16, then the tail).  Writes stay
 * within the roomy bound: at s[j] the output has at most 1 + 6 * j bytes,
 * and a 32-byte store at s[j] happens only while j + 32 <= n. */
__attribute__((target("avx2")))
static char *json_str_roomy_avx2(char *d, const char *s, size_t n)
{
    const char *room = d + 6 * n + 3 + 16; /* as json_str_roomy's, never reached */
    *d++ = '"';
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        unsigned bits = json_special32(x);
        _mm256_storeu_si256((__m256i *)(void *)d, x);
        d = bits ? json_block32_escapes(d, s, i, n, bits) : d + 32;
    }
    for (; (i = json_copy_run(s, i, n, &d, room)) < n; i++) d = json_escape8((unsigned char)s[i], d);
    *d++ = '"';
    *d = 0;
    return d;
}
#endif

/* json_str_roomy, 32 bytes a step where the CPU has AVX2 and the string
 * is long enough for one */
static char *json_str_roomy_any(char *d, const char *s, size_t n)
{
#if defined(LD_JSON_AVX2)
    if (n >= 32 && __builtin_cpu_supports("avx2")) return json_str_roomy_avx2(d, s, n);
#endif
    return json_str_roomy(d, s, n);
}

/* b has room for json_str_roomy's worst within its capacity and its max */
static inline bool json_str_roomy_fits(const tv_buf *b, size_t n)
{
    size_t worst = 6 * n + 2;
    return !b->failed && n < SIZE_MAX / 8 && worst + 16 < b->cap - b->len && (!b->max || b->len + worst <= b->max);
}

/* Strings up to this long (a tool result) get room for their worst made
 * when b lacks it, so that they too take the roomy path */
#define JSON_ROOMY_RESERVE_MAX 65536

/* json_str_roomy_fits, after growing b to the worst where it may grow
 * (within its max; the growth doubles, as any put's would) */
static inline bool json_str_make_room(tv_buf *b, size_t n)
{
    if (json_str_roomy_fits(b, n)) return true;
    size_t room = 6 * n + 2 + 17; /* the worst, the 16 bytes of slack, the NUL */
    if (b->failed || n > JSON_ROOMY_RESERVE_MAX || (b->max && b->len + room > b->max)) return false;
    return ld_tv_buf_reserve(b, room) && json_str_roomy_fits(b, n);
}

/* Out of line (the ensure_ascii form too), so that ld_tv_json_str's
 * usual path, the roomy one, is a call without a frame of its own */
#if defined(__GNUC__)
#define JSON_COLD __attribute__((noinline))
#else
#define JSON_COLD
#endif

/* json.dumps(s, ensure_ascii=False) where b has not the room for the
 * worst: room is made for the text and its quotes at once; before an
 * escape, b keeps room for what is left and the escape (which writes up to
 * 5 bytes more than it reads), so that nothing in between checks.  Where b
 * has 16 bytes of slack, the text is scanned and copied in the same 16-byte
 * steps (json_copy_plain16): read once, without a call per run. */
static JSON_COLD void json_str_checked(tv_buf *b, const char *s, size_t n)
{
    if (n > SIZE_MAX / 2 || !ld_tv_buf_reserve(b, n + 2)) {
        b->failed = true;
        return;
    }
    char *d = b->p + b->len;
    *d++ = '"';
    for (size_t i = 0; (i = json_copy_run(s, i, n, &d, b->p + b->cap - 1)) < n; i++) { /* the NUL's byte stays free */
        b->len = (size_t)(d - b->p);
        if (b->cap - b->len < (n - i) + 7) { /* the escape, the rest, the quote, the NUL */
            if (!ld_tv_buf_reserve(b, (n - i) + 6)) return;
            d = b->p + b->len;
        }
        d += json_escape((unsigned char)s[i], d);
    }
    *d++ = '"';
    *d = 0;
    b->len = (size_t)(d - b->p);
}

static JSON_COLD void json_str_ascii(tv_buf *b, const char *s, size_t n);

/* json.dumps(s, ensure_ascii=ascii).  Without ensure_ascii everything but
 * ld_json_escapes' bytes is copied as it is, in runs, straight into b; when b
 * has (or can be given) room for the worst within its max, json_str_roomy
 * writes it without a check. */
void ld_tv_json_str(tv_buf *b, const char *s, size_t n, bool ascii)
{
    if (ascii) json_str_ascii(b, s, n);
    else if (json_str_make_room(b, n)) b->len = (size_t)(json_str_roomy_any(b->p + b->len, s, n) - b->p);
    else json_str_checked(b, s, n);
}

/* json.dumps(s, ensure_ascii=True): a code point at a time */
static JSON_COLD void json_str_ascii(tv_buf *b, const char *s, size_t n)
{
    ld_tv_buf_putc(b, '"');
    for (size_t i = 0; i < n && !b->failed;) {
        uint32_t c;
        size_t k = ld_tv_utf8_decode(s + i, n - i, &c);
        char e[16];
        switch (c) {
        case '"': puts_(b, "\\\""); break;
        case '\\': puts_(b, "\\\\"); break;
        case '\n': puts_(b, "\\n"); break;
        case '\r': puts_(b, "\\r"); break;
        case '\t': puts_(b, "\\t"); break;
        case '\b': puts_(b, "\\b"); break;
        case '\f': puts_(b, "\\f"); break;
        default:
            if (c < 0x20 || (c >= 0x7F && c != 0xFFFFFFFF)) {
                if (c > 0xFFFF)
                    snprintf(e, sizeof e, "\\u%04x\\u%04x", (unsigned)(0xD800 + ((c - 0x10000) >> 10)),
                             (unsigned)(0xDC00 + ((c - 0x10000) & 0x3FF)));
                else
                    snprintf(e, sizeof e, "\\u%04x", (unsigned)c);
                puts_(b, e);
            } else {
                ld_tv_buf_put(b, s + i, k);
            }
        }
        i += k;
    }
    ld_tv_buf_putc(b, '"');
}
