/* capture_open.c - where the captures that mark no cuts (journalctl's
 * text formats, -o cat, syslog) see a new line begin: a record that begins
 * as a server's line does ends any line of its source whose literal was
 * still open (parse/line/logline_scan.h follows the literal).  Anything
 * else goes on with that line byte for byte. */
#include <string.h>

#include "capture_internal.h"
#include "parse/line/logline.h"

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
static int prefix_starts(const char *s, size_t n)
{
    if (n >= 11 && s[0] == '[' && digits(s + 1, 4) && s[5] == '-' && digits(s + 6, 2) && s[8] == '-') return 1;
    if (n >= 10 && digits(s, 4) && s[4] == '-' && digits(s + 5, 2) && s[7] == '-' && digits(s + 8, 2)) return 1;
    return n >= 2 && s[0] == '{' && s[1] == '"';
}

int ld_open_starts_by_prefix(const char *s, size_t n)
{
    /* the line is at least as long as its bytes before a newline (a "\r"
     * before it is not the line's): with none in the first 12, at least 11 */
    size_t k = 0;
    while (k < n && k < 12 && s[k] != '\n') k++;
    if (k < 12) return 0; /* short, or too little known: the whole line judges */
    return prefix_starts(s, 11);
}

int ld_open_starts_line(const char *s, size_t n)
{
    if (prefix_starts(s, n)) return 1;
    ld_logline l;
    ld_logline_classify(s, n, &l);
    return l.kind != LD_LOGLINE_OTHER && l.kind != LD_LOGLINE_FRAGMENT; /* a fragment goes on */
}
