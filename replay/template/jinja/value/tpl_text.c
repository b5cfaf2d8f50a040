/* tpl_text.c - the text the interpreter writes and reads: the growing
 * output buffer, UTF-8 decoding and Python's line breaks.  The leaf of the
 * interpreter's value and builtins files. */
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

/* ---------------------------------------------------------------- buffers */

void ld_tv_buf_put(tv_buf *b, const char *s, size_t n)
{
    if (b->failed || !n) return;
    if (b->max && b->len + n > b->max) { b->failed = true; return; }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->failed = true; return; }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void ld_tv_buf_putc(tv_buf *b, char c) { ld_tv_buf_put(b, &c, 1); }

size_t ld_tv_utf8_decode(const char *str, size_t n, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned char c = s[0];
    size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (k == 0 || k > n) return *cp = 0xFFFFFFFF, 1; /* a stray byte: copied as is */
    uint32_t v = k == 1 ? c : k == 2 ? (c & 0x1Fu) : k == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return *cp = 0xFFFFFFFF, 1;
        v = v << 6 | (s[i] & 0x3Fu);
    }
    return *cp = v, k;
}

/* length of the line break at s (Python's str.splitlines), 0 if none */
size_t ld_tv_line_break(const char *s, size_t n)
{
    unsigned char c = (unsigned char)s[0];
    if (c == '\r') return n > 1 && s[1] == '\n' ? 2 : 1;
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1E)) return 1;
    if (c == 0xC2 && n > 1 && (unsigned char)s[1] == 0x85) return 2;
    if (c == 0xE2 && n > 2 && (unsigned char)s[1] == 0x80 && ((unsigned char)s[2] == 0xA8 || (unsigned char)s[2] == 0xA9))
        return 3;
    return 0;
}
