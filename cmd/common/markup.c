/* markup.c - see markup.h. */
#include "markup.h"

#include <string.h>

#include "replay/analysis/baseline.h"

static void put_bad(FILE *f, unsigned char c, unsigned flags)
{
    if (flags & LD_MARKUP_HTML) fprintf(f, "<span class=\"bad\">\\x%02x</span>", c);
    else fprintf(f, "\\x%02x", c);
}

/* 1 when the UTF-8 sequence s[0..len) is a noncharacter XML forbids. */
static int xml_forbidden(const unsigned char *s, size_t len)
{
    return len == 3 && s[0] == 0xEF && s[1] == 0xBF && (s[2] == 0xBE || s[2] == 0xBF);
}

static void put_ascii(FILE *f, unsigned char c, unsigned flags)
{
    int attr = (flags & LD_MARKUP_ATTR) != 0;
    switch (c) {
    case '&': fputs("&amp;", f); return;
    case '<': fputs("&lt;", f); return;
    case '>': fputs("&gt;", f); return;
    case '"': fputs("&quot;", f); return;
    case '\'': fputs("&#39;", f); return;
    case '\n': fputs(attr ? "&#10;" : "\n", f); return;
    case '\t': fputs(attr ? "&#9;" : "\t", f); return;
    case '\r': fputs("&#13;", f); return;
    default: break;
    }
    if (c < 0x20 || c == 0x7f) put_bad(f, c, flags);
    else fputc(c, f);
}

void ld_cli_markup_text(FILE *f, const char *s, size_t n, unsigned flags)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) { put_ascii(f, u[i], flags); i++; continue; }
        size_t len = ld_utf8_seq_len(s + i, n - i);
        if (!len || xml_forbidden(u + i, len)) { put_bad(f, u[i], flags); i++; continue; }
        fwrite(s + i, 1, len, f);
        i += len;
    }
}

void ld_cli_markup_cstr(FILE *f, const char *s, unsigned flags)
{
    if (s) ld_cli_markup_text(f, s, strlen(s), flags);
}
