/* tpl_text.c - the text the interpreter writes and reads: the growing
 * output buffer, UTF-8 decoding and Python's line breaks.  The leaf of the
 * interpreter's value and builtins files. */
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

/* ---------------------------------------------------------------- buffers */

/* Room for n more bytes (and the NUL after them), or failed: past b->max,
 * or no memory.  With a max the capacity never grows beyond it, so a buffer
 * capped at what a render has left never holds more than that. */
bool ld_tv_buf_reserve(tv_buf *b, size_t n)
{
    if (b->failed) return false;
    if (n > SIZE_MAX - 1 - b->len || (b->max && b->len + n > b->max)) return b->failed = true, false;
    size_t need = b->len + n + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (b->max && cap > b->max + 1) cap = b->max + 1;
    char *p = realloc(b->p, cap);
    if (!p) return b->failed = true, false;
    b->p = p, b->cap = cap;
    return true;
}

void ld_tv_buf_put_grow(tv_buf *b, const char *s, size_t n)
{
    if (!n || !ld_tv_buf_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}


void ld_tv_buf_repeat(tv_buf *b, const char *s, size_t n, size_t times)
{
    size_t total;
    if (!n || !times) return;
    if (__builtin_mul_overflow(n, times, &total) || !ld_tv_buf_reserve(b, total)) {
        b->failed = true;
        return;
    }
    char *d = b->p + b->len;
    if (n == 1) memset(d, s[0], times);
    else for (size_t i = 0; i < times; i++) memcpy(d + i * n, s, n);
    b->len += total;
    b->p[b->len] = 0;
}

void ld_tv_buf_put_cp(tv_buf *b, uint32_t cp)
{
    char o[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const unsigned char lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (size_t i = n - 1; i > 0; i--, cp >>= 6) o[i] = (char)(0x80 | (cp & 63));
    o[0] = (char)(lead[n] | cp);
    ld_tv_buf_put(b, o, n);
}

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
