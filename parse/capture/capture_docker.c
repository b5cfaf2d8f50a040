/* capture_docker.c - the fast path for a Docker json-file record in the one
 * layout moby's jsonlog writer produces, `{"log":"...","stream":"...",
 * "time":"..."}`: its line decoded straight into the caller's buffer.
 *
 * Why not cJSON for these: it builds a tree and copies each 16 KiB string
 * twice, which makes reading a Docker log four times slower than the plain
 * log (bench/capture.sh); the issue asks for 70%.  Anything this path does
 * not recognise exactly (another key order, "attrs", a \u0000, a lone
 * surrogate, a control byte) returns "not mine" and goes to cJSON
 * (capture_record.c), which decides; so both read every record alike. */
#include <stdint.h>
#include <string.h>

#include "capture_internal.h"

/* The end of the run of bytes at s[i..n) that a JSON string holds as they
 * are: up to a quote, a backslash or a control byte.  Eight bytes a step
 * (a word with any such byte stops the step; the bytewise loop decides). */
static size_t plain_run(const char *s, size_t i, size_t n)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (; i + 8 <= n; i += 8) {
        uint64_t v, q, b;
        memcpy(&v, s + i, 8);
        q = v ^ (ones * '"');
        b = v ^ (ones * '\\');
        if ((((q - ones) & ~q) | ((b - ones) & ~b) | ((v - ones * 0x20) & ~v)) & highs) break;
    }
    while (i < n && s[i] != '"' && s[i] != '\\' && (unsigned char)s[i] >= 0x20) i++;
    return i;
}

static int hex4(const char *s, unsigned *v)
{
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
        if (d == 16) return -1;
        x = x << 4 | d;
    }
    *v = x;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* \uXXXX (and its low half when a high surrogate) at s[0..n): the bytes
 * used, 0 when it is not one this path takes */
static size_t unicode_escape(const char *s, size_t n, char *o, size_t *out)
{
    unsigned hi, lo;
    if (n < 6 || hex4(s + 2, &hi) || hi == 0 || (hi >= 0xDC00 && hi <= 0xDFFF)) return 0;
    if (hi < 0xD800 || hi > 0xDBFF) return *out = put_utf8(o, hi), 6;
    if (n < 12 || s[6] != '\\' || s[7] != 'u' || hex4(s + 8, &lo) || lo < 0xDC00 || lo > 0xDFFF) return 0;
    *out = put_utf8(o, 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
    return 12;
}

/* A JSON string's body at s[0..n) (after its opening quote) decoded into o
 * (room for n bytes: decoding never grows it); its length in *o_len and the
 * bytes read, closing quote included, in *used.  -1: not one this path takes. */
static int unescape(const char *s, size_t n, char *o, size_t *o_len, size_t *used)
{
    size_t i = 0, k = 0;
    while (i < n) {
        size_t run = plain_run(s, i, n);
        memcpy(o + k, s + i, run - i);
        k += run - i;
        i = run;
        if (i == n || (unsigned char)s[i] < 0x20) return -1;
        if (s[i] == '"') return *o_len = k, *used = i + 1, 0;
        if (i + 1 >= n) return -1;
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *e = s[i + 1] ? strchr(from, s[i + 1]) : NULL;
        if (e) {
            o[k++] = to[e - from];
            i += 2;
            continue;
        }
        size_t w = 0, u = s[i + 1] == 'u' ? unicode_escape(s + i, n - i, o + k, &w) : 0;
        if (!u) return -1;
        k += w;
        i += u;
    }
    return -1;
}

/* s at `lit` (a literal of length l): the next offset, or 0 */
static size_t expect(const char *s, size_t n, size_t at, const char *lit, size_t l)
{
    return at + l <= n && !memcmp(s + at, lit, l) ? at + l : 0;
}

/* a plain string value (no escapes, no control bytes) at s[at..): its end
 * past the quote, or 0 */
static size_t plain_string(const char *s, size_t n, size_t at, size_t *len)
{
    size_t end = plain_run(s, at, n);
    if (end >= n || s[end] != '"') return 0;
    *len = end - at;
    return end + 1;
}

int ld_capture_docker_fast(const char *line, size_t len, char *out, ld_capture_record *rec)
{
    size_t at = expect(line, len, 0, "{\"log\":\"", 8), text_len, used, stream_len, time_len;
    if (!at || unescape(line + at, len - at, out, &text_len, &used)) return -1;
    at += used;
    size_t stream_at = expect(line, len, at, ",\"stream\":\"", 11);
    if (stream_at && !(at = plain_string(line, len, stream_at, &stream_len))) return -1;
    if (!stream_at) stream_len = 0; /* moby leaves an empty stream out */
    if (!(at = expect(line, len, at, ",\"time\":\"", 9)) || !(at = plain_string(line, len, at, &time_len)) ||
        !expect(line, len, at, "}", 1) || at + 1 != len)
        return -1;
    rec->last = text_len > 0 && out[text_len - 1] == '\n';
    if (rec->last) text_len--;
    if (rec->last && text_len && out[text_len - 1] == '\r') text_len--;
    rec->text = out;
    rec->len = text_len;
    rec->source = stream_at ? line + stream_at : "";
    rec->source_len = stream_len;
    return 0;
}
