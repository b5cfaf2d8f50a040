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

/* s at `lit` (a literal of length l): the next offset, or 0 */
static size_t expect(const char *s, size_t n, size_t at, const char *lit, size_t l)
{
    return at + l <= n && !memcmp(s + at, lit, l) ? at + l : 0;
}

/* a plain string value (no escapes, no control bytes) at s[at..): its end
 * past the quote, or 0 */
static size_t plain_string(const char *s, size_t n, size_t at, size_t *len)
{
    size_t end = ld_capture_json_run(s, at, n);
    if (end >= n || s[end] != '"') return 0;
    *len = end - at;
    return end + 1;
}

int ld_capture_docker_fast(const char *line, size_t len, char *out, ld_capture_record *rec)
{
    size_t at = expect(line, len, 0, "{\"log\":\"", 8), text_len, used, stream_len, time_len;
    if (!at || ld_capture_json_unescape(line + at, len - at, out, &text_len, &used)) return -1;
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
