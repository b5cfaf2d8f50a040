/* capture_text.c - the text captures of journald and syslog: each line a
 * prefix (time, host, identifier[pid]) and the server's line after it.
 *
 *   journalctl -o short          May 01 10:00:00 gpu01 python3[4242]: <line>
 *              -o short-precise  May 01 10:00:00.000001 gpu01 python3[4242]: <line>
 *              -o short-iso      2026-05-01T10:00:00+0000 gpu01 python3[4242]: <line>
 *              -o short-iso-precise, rsyslog's RFC 3339 files (+00:00)
 *              -o short-unix     1777629600.000001 gpu01 python3[4242]: <line>
 *   RFC 3164                     <14>May 01 10:00:00 gpu01 python3[4242]: <line>
 *   RFC 5424                     <14>1 2026-05-01T10:00:00Z gpu01 python3 4242 - - <line>
 *
 * journalctl leaves the host out where the entry has none, prints
 * `-- Boot <id> --` between boots, indents the further lines of a message
 * that holds newlines, and prints a text that is not valid UTF-8 (a 48 KiB
 * cut inside a character) as `[48.0K blob data]` unless given --all. */
#include <string.h>

#include "capture_internal.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* s[0..n) matches shape ('d' a digit, ' ' a space or a digit, others as they are) */
static int shaped(const char *s, size_t n, const char *shape)
{
    size_t k = strlen(shape);
    if (n < k) return 0;
    for (size_t i = 0; i < k; i++) {
        char c = shape[i], x = s[i];
        if (c == 'd' ? !is_digit(x) : c == ' ' ? !(x == ' ' || is_digit(x)) : c == 'a' ? !(x >= 'A' && x <= 'z')
                                                                                         : x != c)
            return 0;
    }
    return 1;
}

static size_t fraction(const char *s, size_t i, size_t n)
{
    if (i < n && s[i] == '.') {
        size_t f = ++i;
        while (i < n && is_digit(s[i])) i++;
        return i == f ? 0 : i;
    }
    return i;
}

/* `May 01 10:00:00[.ffffff]`, `2026-05-01T10:00:00[.ffffff](Z|+0000|+00:00)`,
 * `1777629600[.ffffff]`: its length, or 0 */
static size_t stamp_len(const char *s, size_t n)
{
    size_t i = 0;
    if (shaped(s, n, "aaa  d dd:dd:dd")) i = fraction(s, 15, n);
    else if (shaped(s, n, "dddd-dd-ddTdd:dd:dd")) {
        i = fraction(s, 19, n);
        if (i && i < n && s[i] == 'Z') i++;
        else if (i && shaped(s + i, n - i, "+dd:dd")) i += 6;
        else if (i && shaped(s + i, n - i, "+dddd")) i += 5;
        else if (i && shaped(s + i, n - i, "-dd:dd")) i += 6;
        else if (i && shaped(s + i, n - i, "-dddd")) i += 5;
        else return 0;
    } else if (shaped(s, n, "dddddddddd")) {
        i = 10;
        while (i < n && is_digit(s[i])) i++;
        i = fraction(s, i, n);
    }
    return i;
}

/* `<PRI>`: its length, or 0 */
static size_t pri_len(const char *s, size_t n)
{
    if (n < 3 || s[0] != '<') return 0;
    size_t i = 1;
    while (i < n && i <= 4 && is_digit(s[i])) i++;
    return i > 1 && i < n && s[i] == '>' ? i + 1 : 0;
}

/* the end of the space-free word at s[i..n) */
static size_t word_end(const char *s, size_t i, size_t n)
{
    while (i < n && s[i] != ' ') i++;
    return i;
}

/* `[host ]ident[pid]: ` at s[i..n): the text's offset, or 0; the source is
 * everything from i to the colon */
static size_t ident_head(const char *s, size_t i, size_t n, ld_capture_record *r)
{
    size_t a = word_end(s, i, n);
    if (a == i || a >= n) return 0;
    size_t colon = s[a - 1] == ':' ? a - 1 : 0;
    if (!colon) { /* the first word was the host */
        size_t b = word_end(s, a + 1, n);
        if (b == a + 1 || b > n || s[b - 1] != ':') return 0;
        colon = b - 1;
    }
    r->source = s + i;
    r->source_len = colon - i;
    return colon + 1 < n && s[colon + 1] == ' ' ? colon + 2 : colon + 1;
}

/* RFC 5424 after `<PRI>1 `: `time host app procid msgid sd [BOM]msg` */
static size_t rfc5424_head(const char *s, size_t i, size_t n, ld_capture_record *r)
{
    size_t t = stamp_len(s + i, n - i);
    if (!(t || (i < n && s[i] == '-')) ) return 0;
    i += t ? t : 1;
    if (i >= n || s[i] != ' ') return 0;
    size_t src = ++i;
    for (int f = 0; f < 3; f++) { /* host, app, procid */
        i = word_end(s, i, n);
        if (i >= n) return 0;
        i++;
    }
    r->source = s + src;
    r->source_len = i - 1 - src;
    i = word_end(s, i, n); /* msgid */
    if (i >= n) return i;
    i++;
    if (i < n && s[i] == '-') i++;
    else {
        while (i < n && s[i] == '[') { /* structured data: [id k="v"...] */
            int esc = 0;
            for (i++; i < n && (esc || s[i] != ']'); i++) esc = !esc && s[i] == '\\';
            if (i >= n) return 0;
            i++;
        }
    }
    if (i < n && s[i] == ' ') i++;
    if (n - i >= 3 && !memcmp(s + i, "\xef\xbb\xbf", 3)) i += 3;
    return i;
}

/* 1 when the text is journalctl's `[48.0K blob data]` (what it printed for
 * a text that is not valid UTF-8) */
static int blob(const char *s, size_t n)
{
    static const char tail[] = " blob data]";
    size_t k = sizeof tail - 1;
    if (n < k + 3 || s[0] != '[' || memcmp(s + n - k, tail, k)) return 0;
    for (size_t i = 1; i < n - k; i++)
        if (!is_digit(s[i]) && s[i] != '.' && !strchr("BKMGT", s[i])) return 0;
    return 1;
}

/* the capture a text line looks like: LD_CAPTURE_SYSLOG, _JOURNAL_TEXT or _PLAIN */
ld_capture_kind ld_capture_text_kind(const char *s, size_t n)
{
    ld_capture_record r;
    size_t p = pri_len(s, n);
    if (p && p + 2 <= n && s[p] == '1' && s[p + 1] == ' ' && rfc5424_head(s, p + 2, n, &r)) return LD_CAPTURE_SYSLOG;
    size_t t = stamp_len(s + p, n - p);
    if (!t || p + t >= n || s[p + t] != ' ' || !ident_head(s, p + t + 1, n, &r)) return LD_CAPTURE_PLAIN;
    return p ? LD_CAPTURE_SYSLOG : LD_CAPTURE_JOURNAL_TEXT;
}

ld_status ld_capture_parse_text(const char *s, size_t n, ld_capture_record *r, ld_error *err)
{
    if (n >= 6 && !memcmp(s, "-- ", 3) && !memcmp(s + n - 3, " --", 3)) {
        r->skip = 1; /* journalctl's "-- Boot 0123... --", "-- No entries --" */
        return LD_OK;
    }
    if (n && s[0] == ' ') { /* journalctl's indented further line of a message with newlines */
        size_t i = 0;
        while (i < n && s[i] == ' ') i++;
        r->text = s + i;
        r->len = n - i;
        r->last = 1;
        return LD_OK;
    }
    size_t at = 0, p = pri_len(s, n);
    if (p && p + 2 <= n && s[p] == '1' && s[p + 1] == ' ') at = rfc5424_head(s, p + 2, n, r);
    if (!at) {
        size_t t = stamp_len(s + p, n - p);
        if (t && p + t < n && s[p + t] == ' ') at = ident_head(s, p + t + 1, n, r);
    }
    if (!at)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "not a journalctl or syslog line (`<time> [host] <identifier>[<pid>]: <text>`)");
    r->text = s + at;
    r->len = n - at;
    r->last = 1;
    if (blob(r->text, r->len)) {
        r->lost = "journalctl printed it as \"[N blob data]\" (it is not valid UTF-8: journald's 48 KiB cut "
                  "fell inside a character); run journalctl with --all (-a), or -o json or -o export";
        r->len = 0;
    }
    return LD_OK;
}
