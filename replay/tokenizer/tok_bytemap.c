/* tok_bytemap.c - GPT-2's bytes_to_unicode mapping (every byte is a
 * printable character: printable Latin-1 stays itself, the 68 other bytes
 * become U+0100.. in byte order) read backwards, and UTF-8 decoding. */
#include "tok_internal.h"

/* Is byte b printable in GPT-2's sense ('!'..'~', U+00A1..U+00AC,
 * U+00AE..U+00FF)? */
static int printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

/* The byte of code point cp, or -1.  The 68 shifted bytes are, in order,
 * 0x00-0x20, 0x7F, 0x80-0xA0 and 0xAD. */
static int cp_to_byte(int32_t cp)
{
    if (cp >= 0 && cp < 256) return printable((unsigned)cp) ? cp : -1;
    if (cp < 256 || cp >= 256 + 68) return -1;
    int i = cp - 256;
    return i < 33 ? i : i == 33 ? 0x7F : i < 67 ? 0x80 + (i - 34) : 0xAD;
}

int32_t ld_tok_utf8_next(const unsigned char *s, size_t n, size_t *len)
{
    unsigned c = s[0];
    *len = 1;
    if (c < 0x80) return (int32_t)c;
    size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (k == 0 || c > 0xF4 || k > n) return -1;
    int32_t cp = (int32_t)(c & (0x7F >> k));
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const int32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    *len = k;
    return cp;
}

size_t ld_tok_bytelevel_decode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k;
        int32_t cp = ld_tok_utf8_next((const unsigned char *)s + i, n - i, &k);
        int b = cp_to_byte(cp);
        if (b < 0) return (size_t)-1;
        out[o++] = (char)b;
        i += k;
    }
    return o;
}
