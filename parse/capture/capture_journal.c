/* capture_journal.c - one record of journalctl's JSON (`-o json`, and
 * `-o json-seq`, which puts an RS byte before each): the line in MESSAGE,
 * the cut in _LINE_BREAK, the source in _STREAM_ID (one process's stdout)
 * or, where an entry has none, its host, unit, identifier and pid.
 *
 * journalctl prints MESSAGE as a string, as an array of byte values where
 * it is not valid UTF-8 (a 48 KiB cut inside a character does that), and
 * as null where it is longer than 4096 bytes and journalctl was not given
 * --all: the request lines logdiff reads are that long, so the last is a
 * loss named with its remedy.
 *
 * journalctl writes the fields in no fixed order, so the fast path walks the
 * object once, noting where the wanted fields lie, and decodes only those;
 * anything it does not take (a \u escape outside MESSAGE, a number, a
 * nested object) goes to cJSON, which decides.  The fuzz target checks the
 * two against each other. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"

const char *const ld_journal_field_names[LD_JF_COUNT] = {
    "MESSAGE", "_LINE_BREAK", "_STREAM_ID", "_HOSTNAME", "_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER", "_PID"};

/* where a wanted field's value lies: a string's body (escapes undecoded),
 * an array's body, or null */
typedef ld_journal_span span;

#define NULL_LOST                                                                                                \
    "journalctl printed MESSAGE as null (it leaves out fields over 4096 bytes unless given --all): run it with " \
    "-a, or -o export"

static size_t ws(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* a string's body from s[i] (past its quote): the offset past its closing
 * quote, 0 when the fast path does not take it */
static size_t skip_string(const char *s, size_t i, size_t n, int any_escape)
{
    for (;;) {
        i = ld_capture_json_run(s, i, n);
        if (i >= n || (unsigned char)s[i] < 0x20) return 0;
        if (s[i] == '"') return i + 1;
        if (i + 1 >= n || !strchr(any_escape ? "\"\\/bfnrtu" : "\"\\/bfnrt", s[i + 1]) || !s[i + 1]) return 0;
        i += 2;
    }
}

/* `[n,n,...]` of byte values from s[i] (past '['): past ']', or 0 */
static size_t skip_bytes(const char *s, size_t i, size_t n)
{
    i = ws(s, i, n);
    if (i < n && s[i] == ']') return i + 1;
    for (;;) {
        size_t d = i;
        unsigned v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && i - d < 4) v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == d || v > 255 || (i - d > 1 && s[d] == '0')) return 0;
        i = ws(s, i, n);
        if (i < n && s[i] == ']') return i + 1;
        if (i >= n || s[i] != ',') return 0;
        i = ws(s, i + 1, n);
    }
}

static int wanted(const char *key, size_t len)
{
    for (int f = 0; f < LD_JF_COUNT; f++)
        if (strlen(ld_journal_field_names[f]) == len && !memcmp(ld_journal_field_names[f], key, len)) return f;
    return -1;
}

/* One walk over a flat object: the wanted fields' spans (the first of a
 * repeated key, as cJSON finds it); -1 when the fast path does not take it.
 * MESSAGE is only passed over here: it is decoded once its source says
 * where its bytes go (ld_capture_journal_decode). */
static int walk(const char *s, size_t n, span f[LD_JF_COUNT])
{
    memset(f, 0, LD_JF_COUNT * sizeof *f);
    size_t i = ws(s, 0, n);
    if (i >= n || s[i++] != '{') return -1;
    i = ws(s, i, n);
    if (i < n && s[i] == '}') return ws(s, i + 1, n) == n ? 0 : -1;
    for (;;) {
        if (i >= n || s[i] != '"') return -1;
        size_t k = ++i, e = ld_capture_json_run(s, i, n);
        if (e >= n || s[e] != '"') return -1; /* an escaped or broken key */
        int w = wanted(s + k, e - k);
        i = ws(s, e + 1, n);
        if (i >= n || s[i] != ':') return -1;
        i = ws(s, i + 1, n);
        size_t v = i, end;
        char type;
        if (i < n && s[i] == '"') end = skip_string(s, i + 1, n, w == LD_JF_MESSAGE && !f[w].type), type = 's';
        else if (i < n && s[i] == '[') end = skip_bytes(s, i + 1, n), type = 'a';
        else if (n - i >= 4 && !memcmp(s + i, "null", 4)) end = i + 4, type = 'n';
        else return -1;
        if (!end) return -1;
        if (w >= 0 && w != LD_JF_MESSAGE && type == 's' && memchr(s + v + 1, '\\', end - v - 2))
            return -1; /* a source's name is compared as written: cJSON decodes the escapes */
        if (w >= 0 && !f[w].type) {
            f[w].at = s + v + 1;
            f[w].len = type == 'n' ? 0 : end - v - 2;
            f[w].type = type;
        }
        i = ws(s, end, n);
        if (i < n && s[i] == '}') return ws(s, i + 1, n) == n ? 0 : -1;
        if (i >= n || s[i] != ',') return -1;
        i = ws(s, i + 1, n);
    }
}

/* byte values `n,n,...` into o: how many */
static size_t decode_bytes(const char *s, size_t n, char *o)
{
    size_t k = 0, i = 0;
    for (;;) {
        while (i < n && (s[i] < '0' || s[i] > '9')) i++; /* spaces, commas (skip_bytes checked them) */
        if (i >= n) return k;
        unsigned v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') v = v * 10 + (unsigned)(s[i++] - '0');
        o[k++] = (char)v;
    }
}

size_t ld_capture_journal_source(char *o, size_t cap, const ld_journal_span *who)
{
    size_t k = 0;
    int stream = who[0].type == 's';
    for (int p = stream ? 0 : 1; p < (stream ? 1 : 5); p++) {
        const span *x = &who[p];
        if (x->type != 's') continue;
        if (k && k + 1 < cap) o[k++] = ' ';
        size_t n = x->len < cap - 1 - k ? x->len : cap - 1 - k;
        memcpy(o + k, x->at, n);
        k += n;
    }
    o[k] = 0;
    return k;
}

int ld_capture_journal_spans(const char *line, size_t len, ld_journal_spans *js)
{
    if (len && line[0] == '\x1e') line++, len--; /* json-seq */
    if (walk(line, len, js->f) || !js->f[LD_JF_MESSAGE].type) return -1;
    js->src_len = ld_capture_journal_source(js->src, sizeof js->src, &js->f[LD_JF_STREAM_ID]);
    const span *lb = &js->f[LD_JF_LINE_BREAK];
    js->last = !(lb->type == 's' && lb->len == 8 && !memcmp(lb->at, "line-max", 8));
    return 0;
}

int ld_capture_journal_decode(const ld_journal_spans *js, char *dst, ld_capture_record *rec)
{
    const span *m = &js->f[LD_JF_MESSAGE];
    size_t text_len = 0, used;
    memset(rec, 0, sizeof *rec);
    if (m->type == 's' && ld_capture_json_unescape(m->at, m->len + 1, dst, &text_len, &used))
        return -1; /* a \u escape the fast path does not take */
    if (m->type == 'a') text_len = decode_bytes(m->at, m->len, dst);
    if (m->type == 'n') rec->lost = NULL_LOST;
    dst[text_len] = 0;
    rec->text = dst;
    rec->len = text_len;
    rec->source = js->src;
    rec->source_len = js->src_len;
    rec->last = js->last;
    return 0;
}

/* cJSON's view of a wanted field as a span of decoded text (strings) */
static void cjson_span(const cJSON *o, int w, span *x)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, ld_journal_field_names[w]);
    memset(x, 0, sizeof *x);
    if (cJSON_IsString(v)) x->at = v->valuestring, x->len = strlen(v->valuestring), x->type = 's';
    else if (cJSON_IsNull(v)) x->type = 'n';
    else if (v) x->type = 'x';
}

/* MESSAGE as cJSON reads it: its bytes into *buf */
static ld_status cjson_message(const cJSON *o, size_t len, char **buf, size_t *cap, size_t *text_len, ld_error *err)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "MESSAGE");
    LD_TRY(ld_capture_reserve(2 * len + 16 + LD_CAPTURE_SOURCE_NAME, buf, cap, err));
    if (cJSON_IsString(m)) {
        *text_len = strlen(m->valuestring);
        memcpy(*buf, m->valuestring, *text_len);
        return LD_OK;
    }
    size_t k = 0;
    for (const cJSON *b = cJSON_IsArray(m) ? m->child : NULL; b; b = b->next) {
        if (!cJSON_IsNumber(b) || b->valuedouble < 0 || b->valuedouble > 255 || b->valuedouble != (int)b->valuedouble)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "a journal-json MESSAGE array that holds more than byte values");
        (*buf)[k++] = (char)b->valueint;
    }
    *text_len = k;
    return LD_OK;
}

ld_status ld_capture_parse_journal_json(const char *line, size_t len, char **buf, size_t *cap,
                                        ld_capture_record *rec, ld_error *err)
{
    memset(rec, 0, sizeof *rec);
    if (len && line[0] == '\x1e') line++, len--;
    cJSON *o = cJSON_ParseWithLength(line, len);
    ld_status st = LD_OK;
    span f[LD_JF_COUNT];
    if (!cJSON_IsObject(o)) st = LD_FAIL(err, LD_ERR_SYNTAX, 0, "a journal-json record that is not a JSON object");
    for (int w = 0; st == LD_OK && w < LD_JF_COUNT; w++) cjson_span(o, w, &f[w]);
    const cJSON *m = o ? cJSON_GetObjectItemCaseSensitive(o, "MESSAGE") : NULL;
    if (st == LD_OK && !cJSON_IsString(m) && !cJSON_IsArray(m) && !cJSON_IsNull(m))
        st = LD_FAIL(err, LD_ERR_SYNTAX, 0, "a journal-json record without MESSAGE (a string, bytes or null)");
    size_t text_len = 0;
    if (st == LD_OK && !cJSON_IsNull(m)) st = cjson_message(o, len, buf, cap, &text_len, err);
    if (st == LD_OK && cJSON_IsNull(m)) {
        st = ld_capture_reserve(2 * len + 16 + LD_CAPTURE_SOURCE_NAME, buf, cap, err);
        rec->lost = NULL_LOST;
    }
    if (st == LD_OK) {
        (*buf)[text_len] = 0;
        char *src = *buf + text_len + 1;
        rec->source_len = ld_capture_journal_source(src, LD_CAPTURE_SOURCE_NAME, &f[LD_JF_STREAM_ID]);
        rec->text = *buf;
        rec->len = text_len;
        rec->source = src;
        rec->last = !(f[LD_JF_LINE_BREAK].type == 's' && !strcmp(f[LD_JF_LINE_BREAK].at, "line-max"));
    }
    cJSON_Delete(o);
    return st;
}
