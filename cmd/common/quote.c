/* quote.c - see quote.h. */
#include "quote.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1-4), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || (n == 2 && s[0] < 0xC2) || (n == 4 && s[0] > 0xF4)) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

void ld_cli_put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        size_t n = utf8_seq(p);
        if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
            continue;
        }
        unsigned c = *p++;
        if (!n) fprintf(f, "\\x%02x", c);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc((int)c, f);
    }
    fputc('"', f);
}

char *ld_cli_quoted(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    ld_cli_put_quoted(f, s);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
