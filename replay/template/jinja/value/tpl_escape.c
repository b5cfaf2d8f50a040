/* tpl_escape.c - string escaping of Python's repr() and json.dumps():
 * repr escapes what str.isprintable() rejects (control characters, format
 * characters such as U+200D and U+FEFF, separators such as U+00A0 and
 * U+2028, private use); json.dumps escapes control characters and, with
 * ensure_ascii, everything outside ASCII (as \uXXXX, surrogate pairs above
 * U+FFFF).  Limit: unassigned code points, which Python's repr also
 * escapes, are printed as they are. */
#include <stdio.h>
#include <string.h>

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

/* Whether any of the 8 bytes of x is below 0x20, '"' or '\\' (the bytes
 * json.dumps escapes when ensure_ascii is off): the usual "has a zero byte"
 * and "has a byte below n" word tricks, exact for the question "any". */
static inline bool json_special8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), bs = x ^ (ones * '\\');
    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & high;
}

/* The length of the run at s[0..n) that json.dumps copies as it is. */
static size_t json_plain_run(const char *s, size_t n)
{
    size_t j = 0;
    for (uint64_t x; j + 8 <= n; j += 8) {
        memcpy(&x, s + j, 8);
        if (json_special8(x)) break;
    }
    while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\') j++;
    return j;
}

void ld_tv_json_str(tv_buf *b, const char *s, size_t n, bool ascii)
{
    ld_tv_buf_putc(b, '"');
    for (size_t i = 0; i < n && !b->failed;) {
        if (!ascii) { /* copy the run that needs no escape in one go */
            size_t j = i + json_plain_run(s + i, n - i);
            ld_tv_buf_put(b, s + i, j - i);
            if ((i = j) == n) break;
        }
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
            if (c < 0x20 || (ascii && c >= 0x7F && c != 0xFFFFFFFF)) {
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
