/* capture_open.c - whether a request line's literal is still open at the
 * end of a record, for the captures that do not mark their cuts
 * (journalctl's text formats, -o cat, syslog): a cut record holds a Python
 * or JSON literal whose brackets or string never closed, and its next
 * record of the same source goes on with it byte for byte.
 *
 * The literal starts at a request line's `obj=` (SGLang's text lines) or at
 * a line's leading `{` (its JSON lines); other lines are never open, so an
 * apostrophe in an ordinary log line opens nothing.  The state (bracket
 * depth, the string and escape the cut fell in) is carried from record to
 * record, so every byte is looked at once however many pieces a line has. */
#include <stdint.h>
#include <string.h>

#include "capture_internal.h"
#include "parse/line/logline.h"

#define LITERAL_START_WINDOW 512 /* `obj=` lies within a line's prefix */

/* The rest of a string from s[i]: its closing quote is the first quote
 * byte with an even number of backslashes before it (each pair an escaped
 * backslash).  memchr finds the quotes, so the many
 * escapes of a prompt (\\n) cost nothing.  A backslash run that ends the
 * record leaves the next record's first byte escaped (o->escape).  `lo`:
 * the first byte a backslash before the quote may be counted from. */
static size_t in_string(ld_open_scan *o, const char *s, size_t i, size_t n)
{
    if (o->escape) { /* the byte after a cut's trailing backslash */
        o->escape = 0;
        if (++i >= n) return n;
    }
    size_t lo = i;
    for (;;) {
        const char *q = memchr(s + i, o->quote, n - i);
        size_t end = q ? (size_t)(q - s) : n, k = end;
        while (k > lo && s[k - 1] == '\\') k--;
        int escaped = (end - k) & 1;
        if (!q) {
            o->escape = escaped;
            return n;
        }
        if (!escaped) {
            o->quote = 0;
            return end + 1;
        }
        i = end + 1;
    }
}

void ld_open_feed(ld_open_scan *o, const char *s, size_t n)
{
    if (!o->active) return;
    size_t i = 0;
    while (i < n) {
        if (o->quote) {
            i = in_string(o, s, i, n);
            continue;
        }
        char ch = s[i++];
        if (ch == '\'' || ch == '"') o->quote = ch;
        else if (ch == '(' || ch == '[' || ch == '{') o->depth++;
        else if (ch == ')' || ch == ']' || ch == '}') {
            if (!o->depth) { /* more closed than opened: not a literal this scan follows */
                o->active = 0;
                return;
            }
            o->depth--;
        }
    }
}

/* where a request line's literal begins, or n when the line has none */
static size_t literal_start(const char *s, size_t n)
{
    if (n && s[0] == '{') return 0;
    size_t w = n < LITERAL_START_WINDOW ? n : LITERAL_START_WINDOW;
    for (size_t i = 0; i + 4 <= w; i++)
        if (s[i] == 'o' && !memcmp(s + i, "obj=", 4)) return i + 4;
    return n;
}

void ld_open_begin(ld_open_scan *o, const char *s, size_t n)
{
    memset(o, 0, sizeof *o);
    size_t at = literal_start(s, n);
    if (at == n) return;
    o->active = 1;
    ld_open_feed(o, s + at, n - at);
}

int ld_open_is_open(const ld_open_scan *o)
{
    return o->active && (o->quote || o->depth);
}

static int digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* SGLang's lines begin `[2026-05-01 10:00:00` (its logger's prefix) or
 * `{"` (its JSON lines); Python's logging `2026-05-01 10:00:00,123`; and a
 * request line is one wherever it starts (a health check's `Receive:` is
 * logged without the prefix) */
int ld_open_starts_line(const char *s, size_t n)
{
    if (n >= 11 && s[0] == '[' && digits(s + 1, 4) && s[5] == '-' && digits(s + 6, 2) && s[8] == '-') return 1;
    if (n >= 10 && digits(s, 4) && s[4] == '-' && digits(s + 5, 2) && s[7] == '-' && digits(s + 8, 2)) return 1;
    if (n >= 2 && s[0] == '{' && s[1] == '"') return 1;
    ld_logline l;
    ld_logline_classify(s, n, &l);
    return l.kind != LD_LOGLINE_OTHER && l.kind != LD_LOGLINE_FRAGMENT; /* a fragment goes on */
}
