/* capture_record.c - one record of each wrapped capture (capture.h): which
 * capture a line looks like, and its text, source and whether it ends the
 * server's line.  The JSON wrappers are read with cJSON. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"

static const char *const names[LD_CAPTURE_COUNT] = {"plain",        "docker-json",    "cri",
                                                     "kubectl-prefix", "shipper-json", "journal-json",
                                                     "journal-export", "journal-text", "syslog",
                                                     "journal-file"};

const char *ld_capture_name(ld_capture_kind k)
{
    return k >= 0 && k < LD_CAPTURE_COUNT ? names[k] : "auto";
}

int ld_capture_by_name(const char *name)
{
    if (!strcmp(name, "auto")) return LD_CAPTURE_AUTO;
    for (int k = 0; k < LD_CAPTURE_COUNT; k++)
        if (!strcmp(name, names[k])) return k;
    return -2;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* RFC 3339 with optional fraction and a zone (`2026-05-01T10:00:00.123456789Z`,
 * `...+02:00`): its length, or 0 */
static size_t rfc3339_len(const char *s, size_t n)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    size_t i = 0;
    for (; shape[i]; i++) {
        if (i >= n) return 0;
        if (shape[i] == 'd' ? !is_digit(s[i]) : s[i] != shape[i]) return 0;
    }
    if (i < n && s[i] == '.') {
        size_t f = ++i;
        while (i < n && is_digit(s[i])) i++;
        if (i == f) return 0;
    }
    if (i < n && s[i] == 'Z') return i + 1;
    if (i + 6 <= n && (s[i] == '+' || s[i] == '-') && is_digit(s[i + 1]) && is_digit(s[i + 2]) && s[i + 3] == ':' &&
        is_digit(s[i + 4]) && is_digit(s[i + 5]))
        return i + 6;
    return 0;
}

/* `<time> <stdout|stderr> <P|F>[:tags] `: the text's offset, or 0 */
static size_t cri_head(const char *s, size_t n, const char **stream, size_t *stream_len, int *last)
{
    size_t i = rfc3339_len(s, n);
    if (!i || i >= n || s[i] != ' ') return 0;
    const char *st = s + ++i;
    size_t k = n - i >= 7 && !memcmp(st, "stdout ", 7) ? 6 : n - i >= 7 && !memcmp(st, "stderr ", 7) ? 6 : 0;
    if (!k) return 0;
    i += k + 1;
    if (i >= n || (s[i] != 'P' && s[i] != 'F')) return 0;
    *last = s[i] == 'F';
    *stream = st;
    *stream_len = k;
    while (i < n && s[i] != ' ') i++; /* P, F, or P:<more tags> */
    return i >= n ? n : i + 1;        /* n: an empty piece */
}

/* `[pod/<pod>/<container>] `: the text's offset, or 0 */
static size_t kubectl_head(const char *s, size_t n)
{
    if (n < 6 || memcmp(s, "[pod/", 5)) return 0;
    const char *close = memchr(s, ']', n < 512 ? n : 512);
    if (!close || (size_t)(close - s) + 1 >= n || close[1] != ' ') return 0;
    int slashes = 0;
    for (const char *p = s + 5; p < close; p++) {
        if (*p == ' ') return 0;
        slashes += *p == '/';
    }
    return slashes == 1 ? (size_t)(close - s) + 2 : 0;
}

/* the shippers' line field, in the order they are looked for */
static const cJSON *shipper_text(const cJSON *o)
{
    static const char *const fields[] = {"message", "log", "msg", "line"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, fields[i]);
        if (cJSON_IsString(f)) return f;
    }
    return NULL;
}

/* SGLang's own JSON lines (--log-requests-format json) are not a wrapper */
static int sglang_json(const cJSON *o)
{
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    return cJSON_IsString(ev) && !strncmp(ev->valuestring, "request.", 8);
}

/* Docker's json-file record: "log", "time", maybe "stream" and "attrs",
 * nothing else (a shipper's record may carry a "log" too) */
static int docker_json(const cJSON *o)
{
    int n = 0, has_log = 0, has_time = 0;
    for (const cJSON *f = o->child; f; f = f->next, n++) {
        if (!strcmp(f->string, "log")) has_log = cJSON_IsString(f);
        else if (!strcmp(f->string, "time")) has_time = cJSON_IsString(f);
        else if (strcmp(f->string, "stream") && strcmp(f->string, "attrs")) return 0;
    }
    return has_log && has_time && n <= 4;
}

/* journalctl's JSON: MESSAGE, and its __CURSOR or __REALTIME_TIMESTAMP */
static int journal_json(const cJSON *o)
{
    return cJSON_GetObjectItemCaseSensitive(o, "MESSAGE") &&
           (cJSON_GetObjectItemCaseSensitive(o, "__CURSOR") ||
            cJSON_GetObjectItemCaseSensitive(o, "__REALTIME_TIMESTAMP"));
}

/* a JSON line's wrapper (json-seq's RS first or not), read once */
static ld_capture_kind json_kind(const char *line, size_t len)
{
    int seq = line[0] == '\x1e';
    cJSON *o = cJSON_ParseWithLength(line + seq, len - (size_t)seq);
    ld_capture_kind k = LD_CAPTURE_PLAIN;
    if (cJSON_IsObject(o) && journal_json(o)) k = LD_CAPTURE_JOURNAL_JSON;
    else if (cJSON_IsObject(o) && !seq && !sglang_json(o))
        k = docker_json(o) ? LD_CAPTURE_DOCKER : shipper_text(o) ? LD_CAPTURE_SHIPPER : LD_CAPTURE_PLAIN;
    cJSON_Delete(o);
    return k;
}

/* the first line journalctl -o export writes of an entry */
static int export_like(const char *line, size_t len)
{
    static const char *const first[] = {"__CURSOR=", "__REALTIME_TIMESTAMP=", "__MONOTONIC_TIMESTAMP="};
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
        if (len >= strlen(first[i]) && !memcmp(line, first[i], strlen(first[i]))) return 1;
    return 0;
}

ld_capture_kind ld_capture_recognise(const char *line, size_t len)
{
    if (!len) return LD_CAPTURE_PLAIN;
    if (line[0] == '\x1e' || line[0] == '{') return json_kind(line, len);
    if (line[0] == '_' && export_like(line, len)) return LD_CAPTURE_JOURNAL_EXPORT;
    const char *st;
    size_t sl;
    int last;
    if (is_digit(line[0]) && cri_head(line, len, &st, &sl, &last)) return LD_CAPTURE_CRI;
    if (line[0] == '[' && kubectl_head(line, len)) return LD_CAPTURE_KUBECTL;
    return ld_capture_text_kind(line, len);
}

/* a JSON wrapper's line field, decoded into *buf; its source from `key` */
ld_status ld_capture_parse_json(ld_capture_kind kind, const char *line, size_t len, char **buf, size_t *cap,
                                ld_capture_record *rec, ld_error *err)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "a %s record that is not a JSON object", ld_capture_name(kind));
    }
    const cJSON *t = kind == LD_CAPTURE_DOCKER ? cJSON_GetObjectItemCaseSensitive(o, "log") : shipper_text(o);
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(o, "stream");
    if (!cJSON_IsString(t)) {
        cJSON_Delete(o);
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "a %s record without its line (%s)", ld_capture_name(kind),
                       kind == LD_CAPTURE_DOCKER ? "\"log\"" : "\"message\", \"log\", \"msg\" or \"line\"");
    }
    size_t n = strlen(t->valuestring), sn = cJSON_IsString(src) ? strlen(src->valuestring) : 0;
    /* "<text>\0<source>\0": the source's name after the text in one buffer */
    ld_status st = ld_capture_reserve(n + 1 + sn + 1, buf, cap, err);
    if (st == LD_OK) {
        memcpy(*buf, t->valuestring, n + 1);
        memcpy(*buf + n + 1, sn ? src->valuestring : "", sn);
        (*buf)[n + 1 + sn] = 0;
        int newline = n > 0 && (*buf)[n - 1] == '\n';
        n -= (size_t)newline;
        if (newline && n && (*buf)[n - 1] == '\r') n--;
        rec->last = newline || kind == LD_CAPTURE_SHIPPER; /* a shipper's record is a whole line */
        rec->text = *buf;
        rec->len = n;
        rec->source = *buf + strlen(*buf) + 1;
        rec->source_len = sn;
    }
    cJSON_Delete(o);
    return st;
}

/* a journal-json record the fast way, its text then its source in buf */
static int journal_fast(const char *line, size_t len, char *buf, ld_capture_record *rec)
{
    ld_journal_spans js;
    if (ld_capture_journal_spans(line, len, &js) || ld_capture_journal_decode(&js, buf, rec)) return -1;
    char *src = buf + rec->len + 1;
    memcpy(src, js.src, js.src_len + 1);
    rec->source = src;
    return 0;
}

ld_status ld_capture_parse(ld_capture_kind kind, const char *line, size_t len, char **buf, size_t *cap,
                           ld_capture_record *rec, ld_error *err)
{
    memset(rec, 0, sizeof *rec);
    size_t at;
    switch (kind) {
    case LD_CAPTURE_DOCKER:
        if (ld_capture_reserve(len + 16, buf, cap, err) != LD_OK) return LD_ERR_NOMEM;
        if (!ld_capture_docker_fast(line, len, *buf, rec)) return LD_OK;
        memset(rec, 0, sizeof *rec);
        return ld_capture_parse_json(kind, line, len, buf, cap, rec, err);
    case LD_CAPTURE_SHIPPER:
        return ld_capture_parse_json(kind, line, len, buf, cap, rec, err);
    case LD_CAPTURE_CRI:
        if (!(at = cri_head(line, len, &rec->source, &rec->source_len, &rec->last)))
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "not a CRI record (`<RFC 3339 time> <stdout|stderr> <P|F> <text>`)");
        rec->text = line + at;
        rec->len = len - at;
        return LD_OK;
    case LD_CAPTURE_JOURNAL_JSON:
        if (ld_capture_reserve(len + 16 + LD_CAPTURE_SOURCE_NAME, buf, cap, err) != LD_OK) return LD_ERR_NOMEM;
        if (!journal_fast(line, len, *buf, rec)) return LD_OK;
        memset(rec, 0, sizeof *rec);
        return ld_capture_parse_journal_json(line, len, buf, cap, rec, err);
    case LD_CAPTURE_JOURNAL_TEXT:
    case LD_CAPTURE_SYSLOG:
        return ld_capture_parse_text(line, len, rec, err);
    case LD_CAPTURE_KUBECTL:
        if (!(at = kubectl_head(line, len)))
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "a line without kubectl's `[pod/<pod>/<container>] ` prefix");
        rec->text = line + at;
        rec->len = len - at;
        rec->source = line + 1;
        rec->source_len = at - 3;
        rec->last = 1;
        return LD_OK;
    default:
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a %s member is not read one line at a time", ld_capture_name(kind));
    }
}
