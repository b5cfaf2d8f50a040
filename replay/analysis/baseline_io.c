/* baseline_io.c - the baseline file: writing it one request per line, and
 * reading it back with every field checked (see baseline.h). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "baseline_internal.h"
#include "jsonline.h"

/* ------------------------------------------------------------ writing */

static int valid_utf8(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t l = ld_utf8_seq_len(s + i, n - i);
        if (!l) return 0;
        i += l;
    }
    return 1;
}

/* A JSON string of valid UTF-8 text. */
static void put_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { fputc('\\', out); fputc(c, out); }
        else if (c == '\n') fputs("\\n", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

static void put_kinds(FILE *out, const char *name, const char *const *k, size_t n)
{
    fprintf(out, ", \"%s\": [", name);
    for (size_t i = 0; i < n; i++) fprintf(out, "%s\"%s\"", i ? ", " : "", k[i]);
    fputc(']', out);
}

/* ------------------------------------------- an entry's line, in memory */

static char *put_str(char *o, const char *s)
{
    size_t n = strlen(s);
    memcpy(o, s, n);
    return o + n;
}

/* What put_json_string writes, into o (room for 6 bytes a byte + 2). */
static char *json_string_into(char *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    *o++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
        else if (c == '\n') { *o++ = '\\'; *o++ = 'n'; }
        else if (c == '\t') { *o++ = '\\'; *o++ = 't'; }
        else if (c < 0x20 || c == 0x7f) { o = put_str(o, "\\u00"); *o++ = hex[c >> 4]; *o++ = hex[c & 15]; }
        else *o++ = (char)c;
    }
    *o++ = '"';
    return o;
}

static char *kinds_into(char *o, const char *name, const char *const *k, size_t n)
{
    o = put_str(o, ", \"");
    o = put_str(o, name);
    o = put_str(o, "\": [");
    for (size_t i = 0; i < n; i++) {
        if (i) o = put_str(o, ", ");
        *o++ = '"';
        o = put_str(o, k[i]);
        *o++ = '"';
    }
    *o++ = ']';
    return o;
}

/* The bytes put_entry writes for e: at most room_of(e). */
static size_t room_of(const ld_baseline_entry *e)
{
    size_t n = 6 * strlen(e->rid) + 160;
    for (size_t i = 0; i < e->n_errors; i++) n += strlen(e->errors[i]) + 4;
    for (size_t i = 0; i < e->n_info; i++) n += strlen(e->info[i]) + 4;
    return n;
}

static char *entry_into(char *o, const ld_baseline_entry *e, int utf8, int last)
{
    static const char hex[] = "0123456789abcdef";
    if (utf8) {
        o = json_string_into(put_str(o, "{\"rid\": "), e->rid);
    } else {
        o = put_str(o, "{\"rid_hex\": \"");
        for (const unsigned char *p = (const unsigned char *)e->rid; *p; p++) { *o++ = hex[*p >> 4]; *o++ = hex[*p & 15]; }
        *o++ = '"';
    }
    if (e->occurrence) o += sprintf(o, ", \"occurrence\": %" PRIu32, e->occurrence);
    o = put_str(put_str(put_str(o, ", \"verdict\": \""), e->verdict), "\"");
    o = kinds_into(o, "errors", e->errors, e->n_errors);
    o = kinds_into(o, "info", e->info, e->n_info);
    o = put_str(o, ", \"hash\": \"");
    for (int i = 60; i >= 0; i -= 4) *o++ = hex[(e->hash >> i) & 15];
    o = put_str(o, last ? "\"}\n" : "\"},\n");
    return o;
}

/* put_entry with one write (a merge writes a million). */
static void put_entry(FILE *out, const ld_baseline_entry *e, int last);

static void put_entry_line(FILE *out, const ld_baseline_entry *e, int last)
{
    char buf[1024];
    if (room_of(e) > sizeof buf) { put_entry(out, e, last); return; }
    size_t n = (size_t)(entry_into(buf, e, valid_utf8(e->rid), last) - buf);
    fwrite(buf, 1, n, out);
}

static void put_entry(FILE *out, const ld_baseline_entry *e, int last)
{
    if (valid_utf8(e->rid)) {
        fputs("{\"rid\": ", out);
        put_json_string(out, e->rid);
    } else {
        fputs("{\"rid_hex\": \"", out);
        for (const char *p = e->rid; *p; p++) fprintf(out, "%02x", (unsigned char)*p);
        fputc('"', out);
    }
    if (e->occurrence) fprintf(out, ", \"occurrence\": %" PRIu32, e->occurrence);
    fprintf(out, ", \"verdict\": \"%s\"", e->verdict);
    put_kinds(out, "errors", e->errors, e->n_errors);
    put_kinds(out, "info", e->info, e->n_info);
    fprintf(out, ", \"hash\": \"%016" PRIx64 "\"}%s\n", e->hash, last ? "" : ",");
}

ld_status ld_baseline_write(const ld_baseline *b, FILE *out, ld_error *err)
{
    fprintf(out, "{\"format\": \"%s\", \"version\": %d, \"requests\": [\n",
            LD_BASELINE_FORMAT, LD_BASELINE_VERSION);
    for (size_t i = 0; i < b->n; i++) put_entry_line(out, &b->v[i], i + 1 == b->n);
    fputs("]}\n", out);
    if (fflush(out) != 0 || ferror(out))
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot write the baseline");
    return LD_OK;
}

/* ------------------------------------------------------------ reading */

typedef struct entry_ctx {
    size_t index;       /* 1-based, for messages */
    const char *rid;    /* for messages, once known */
} entry_ctx;

/* LD_ERR_SYNTAX naming the entry. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static ld_status bad_entry(ld_error *err, const entry_ctx *c, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (c->rid)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "request %zu (rid '%.60s'): %s", c->index, c->rid, what);
    return LD_FAIL(err, LD_ERR_SYNTAX, 0, "request %zu: %s", c->index, what);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static ld_status read_rid(ld_baseline *b, const cJSON *o, entry_ctx *c, ld_baseline_entry *e,
                          ld_error *err)
{
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(o, "rid");
    const cJSON *hex = cJSON_GetObjectItemCaseSensitive(o, "rid_hex");
    if (!rid == !hex) return bad_entry(err, c, "needs exactly one of \"rid\" and \"rid_hex\"");
    if (rid) {
        if (!cJSON_IsString(rid) || !*rid->valuestring)
            return bad_entry(err, c, "\"rid\" is not a non-empty string");
        e->rid = ld_arena_memdup(&b->arena, rid->valuestring, strlen(rid->valuestring));
    } else {
        const char *h = cJSON_IsString(hex) ? hex->valuestring : NULL;
        size_t n = h ? strlen(h) : 0;
        if (!n || n % 2) return bad_entry(err, c, "\"rid_hex\" is not lower-case hex bytes");
        char *s = ld_arena_alloc(&b->arena, n / 2 + 1);
        if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory reading the baseline");
        for (size_t i = 0; i < n; i += 2) {
            int hi = hexval(h[i]), lo = hexval(h[i + 1]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return bad_entry(err, c, "\"rid_hex\" is not lower-case hex bytes");
            s[i / 2] = (char)(hi * 16 + lo);
        }
        s[n / 2] = '\0';
        e->rid = s;
    }
    if (!e->rid) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory reading the baseline");
    c->rid = e->rid;
    return LD_OK;
}

static ld_status read_kinds(ld_baseline *b, const cJSON *o, const char *name, entry_ctx *c,
                            const char ***out, size_t *n_out, ld_error *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsArray(a)) return bad_entry(err, c, "\"%s\" is not an array of finding kinds", name);
    size_t n = (size_t)cJSON_GetArraySize(a), k = 0;
    const char **list = ld_arena_alloc(&b->arena, (n ? n : 1) * sizeof *list);
    if (!list) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory reading the baseline");
    const cJSON *it;
    cJSON_ArrayForEach(it, a) {
        const char *kind = cJSON_IsString(it) ? ld_baseline_static_kind(it->valuestring) : NULL;
        if (!kind)
            return bad_entry(err, c, "\"%s\": unknown finding kind %s%.60s%s", name,
                             cJSON_IsString(it) ? "'" : "", cJSON_IsString(it) ? it->valuestring : "(not a string)",
                             cJSON_IsString(it) ? "'" : "");
        list[k++] = kind;
    }
    ld_baseline_sort_kinds(list, &k);
    *out = list;
    *n_out = k;
    return LD_OK;
}

/* The verdict must be what the error kinds add up to (finding.h). */
static ld_status check_verdict(const ld_baseline_entry *e, entry_ctx *c, ld_error *err)
{
    static const char *const rank[] = { "harness", "template", "kernels", "sampling", "log" };
    const char *want = "ok";
    for (size_t r = 0; r < sizeof rank / sizeof rank[0] && !strcmp(want, "ok"); r++)
        for (size_t i = 0; i < e->n_errors; i++)
            if (!strcmp(ld_kind_category(e->errors[i]), rank[r])) want = rank[r];
    if (strcmp(want, e->verdict))
        return bad_entry(err, c, "verdict \"%s\" does not follow from its errors (they give \"%s\")",
                         e->verdict, want);
    return LD_OK;
}

static ld_status read_hash(const cJSON *o, entry_ctx *c, ld_baseline_entry *e, ld_error *err)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "hash");
    if (!cJSON_IsString(h) || strlen(h->valuestring) != 16)
        return bad_entry(err, c, "\"hash\" is not 16 lower-case hex digits");
    for (int i = 0; i < 16; i++) {
        int v = hexval(h->valuestring[i]);
        if (v < 0) return bad_entry(err, c, "\"hash\" is not 16 lower-case hex digits");
        e->hash = e->hash << 4 | (uint64_t)v;
    }
    return LD_OK;
}

static ld_status check_fields(const cJSON *o, entry_ctx *c, ld_error *err)
{
    static const char *const known[] = { "rid", "rid_hex", "occurrence", "verdict",
                                         "errors", "info", "hash" };
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] && strcmp(it->string, known[i])) i++;
        if (i == sizeof known / sizeof known[0])
            return bad_entry(err, c, "unknown field \"%.40s\"", it->string);
    }
    return LD_OK;
}

static ld_status read_entry(ld_baseline *b, const cJSON *o, size_t index, ld_error *err)
{
    entry_ctx c = { index, NULL };
    if (!cJSON_IsObject(o)) return bad_entry(err, &c, "not an object");
    ld_baseline_entry *e = ld_baseline_push(b, err);
    if (!e) return LD_ERR_NOMEM;
    e->tag = index - 1;
    LD_TRY(read_rid(b, o, &c, e, err));
    LD_TRY(check_fields(o, &c, err));
    const cJSON *occ = cJSON_GetObjectItemCaseSensitive(o, "occurrence");
    if (occ && (!cJSON_IsNumber(occ) || occ->valuedouble < 1 || occ->valuedouble > 1e9 ||
                occ->valuedouble != (double)(uint32_t)occ->valuedouble))
        return bad_entry(err, &c, "\"occurrence\" is not a positive integer");
    e->occurrence = occ ? (uint32_t)occ->valuedouble : 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "verdict");
    e->verdict = cJSON_IsString(v) ? ld_baseline_static_verdict(v->valuestring) : NULL;
    if (!e->verdict)
        return bad_entry(err, &c, "\"verdict\" is not one of ok, harness, template, kernels, sampling, log");
    LD_TRY(read_kinds(b, o, "errors", &c, &e->errors, &e->n_errors, err));
    LD_TRY(read_kinds(b, o, "info", &c, &e->info, &e->n_info, err));
    LD_TRY(check_verdict(e, &c, err));
    return read_hash(o, &c, e, err);
}

/* A known kind or verdict of a taken text (no NUL in it); NULL when not. */
static const char *static_of(const char *s, size_t len, const char *(*known)(const char *))
{
    char name[64];
    if (len >= sizeof name) return NULL;
    memcpy(name, s, len);
    name[len] = '\0';
    return known(name);
}

/* The kinds of a STRINGS value into list[0..*n) (at most max), sorted and
 * distinct; 0 when one is not known. */
static int kinds_in_place(const ld_jl_value *a, const char **list, size_t max, size_t *n)
{
    const char *s;
    size_t len, pos = 0;
    *n = 0;
    while (ld_jl_next_string(a, &pos, &s, &len)) {
        if (*n == max || !(list[*n] = static_of(s, len, ld_baseline_static_kind))) return 0;
        ++*n;
    }
    ld_baseline_sort_kinds(list, n);
    return 1;
}

/* A copy of k[0..n) in the arena (NULL for none, as ld_baseline_add
 * leaves an empty list); *ok 0 when out of memory. */
static const char **copy_kinds(ld_baseline *b, const char *const *k, size_t n, int *ok)
{
    if (!n) return NULL;
    const char **list = ld_arena_alloc(&b->arena, n * sizeof *list);
    if (list) memcpy(list, k, n * sizeof *list);
    else *ok = 0;
    return list;
}

enum { IP_RID, IP_RID_HEX, IP_OCC, IP_VERDICT, IP_ERRORS, IP_INFO, IP_HASH, IP_COUNT, IP_KINDS = 32 };

/* An entry line's values, checked as read_entry checks them. */
typedef struct flat_entry {
    ld_jl_value f[IP_COUNT];
    ld_baseline_entry e;
    const char *errors[IP_KINDS], *info[IP_KINDS];
} flat_entry;

/* Whether t->f holds an entry read_entry reads without an error (its
 * fields into t->e, but for its rid); 0 also for one with a "rid_hex". */
static int entry_checked(flat_entry *t, size_t index)
{
    const ld_jl_value *f = t->f;
    ld_baseline_entry *e = &t->e;
    memset(e, 0, sizeof *e);
    if (f[IP_RID].type != LD_JL_STRING || !f[IP_RID].len || f[IP_RID_HEX].type != LD_JL_ABSENT) return 0;
    if (f[IP_OCC].type != LD_JL_ABSENT &&
        (f[IP_OCC].type != LD_JL_NUMBER || f[IP_OCC].num < 1 || f[IP_OCC].num > 1000000000))
        return 0;
    e->occurrence = f[IP_OCC].type == LD_JL_NUMBER ? (uint32_t)f[IP_OCC].num : 0;
    if (f[IP_VERDICT].type != LD_JL_STRING ||
        !(e->verdict = static_of(f[IP_VERDICT].s, f[IP_VERDICT].len, ld_baseline_static_verdict)))
        return 0;
    if (f[IP_ERRORS].type != LD_JL_STRINGS || f[IP_INFO].type != LD_JL_STRINGS ||
        !kinds_in_place(&f[IP_ERRORS], t->errors, IP_KINDS, &e->n_errors) ||
        !kinds_in_place(&f[IP_INFO], t->info, IP_KINDS, &e->n_info))
        return 0;
    e->errors = t->errors;
    entry_ctx c = { index, NULL };
    if ((e->n_errors || strcmp(e->verdict, "ok")) && check_verdict(e, &c, NULL) != LD_OK) return 0; /* none: ok */
    e->tag = index - 1;
    return f[IP_HASH].type == LD_JL_STRING && ld_jl_hex16(f[IP_HASH].s, f[IP_HASH].len, 1, &e->hash);
}

/* An entry line whose values ld_jl_object takes (ld_baseline_write's
 * lines, but for a rid with escapes or not UTF-8), read in place with
 * every check of read_entry; 0 (nothing done) for any other line and for
 * one read_entry would refuse, which read_entry then reads with its
 * message.  1: read (*st LD_OK, or LD_ERR_NOMEM). */
static int entry_in_place(ld_baseline *b, const char *line, size_t n, size_t index, ld_status *st, ld_error *err)
{
    static const ld_jl_name names[IP_COUNT] = {
        LD_JL_NAME("rid"), LD_JL_NAME("rid_hex"), LD_JL_NAME("occurrence"), LD_JL_NAME("verdict"),
        LD_JL_NAME("errors"), LD_JL_NAME("info"), LD_JL_NAME("hash") };
    flat_entry t;
    const char *after = ld_jl_object(line, line + n, names, IP_COUNT, t.f);
    while (after && after < line + n && *after == ' ') after++;
    if (after != line + n || !entry_checked(&t, index)) return 0;
    int ok = 1;
    t.e.rid = ld_arena_memdup(&b->arena, t.f[IP_RID].s, t.f[IP_RID].len);
    t.e.errors = copy_kinds(b, t.errors, t.e.n_errors, &ok);
    t.e.info = copy_kinds(b, t.info, t.e.n_info, &ok);
    ld_baseline_entry *slot = t.e.rid && ok ? ld_baseline_push(b, err) : NULL;
    if (slot) *slot = t.e;
    *st = slot ? LD_OK : !t.e.rid || !ok ? LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory reading the baseline")
                                         : LD_ERR_NOMEM;
    return 1;
}

static ld_status parse_whole(const char *text, size_t len, ld_baseline *out, ld_error *err);

static ld_status check_header(const cJSON *root, ld_error *err)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, LD_BASELINE_FORMAT))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "not a logdiff baseline (\"format\" is not \"%s\")", LD_BASELINE_FORMAT);
    if (!cJSON_IsNumber(ver))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "\"version\" is not a number");
    if (ver->valuedouble != LD_BASELINE_VERSION)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "baseline format version %g, this logdiff reads version %d "
                       "(no migration from version %g exists)",
                       ver->valuedouble, LD_BASELINE_VERSION, ver->valuedouble);
    if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "requests")))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "\"requests\" is not an array");
    return LD_OK;
}

static ld_status check_repeats(const ld_baseline *b, ld_error *err)
{
    for (size_t i = 1; i < b->n; i++)
        if (!strcmp(b->v[i].rid, b->v[i - 1].rid) && b->v[i].occurrence == b->v[i - 1].occurrence)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                           "requests %zu and %zu: the same rid '%.60s' (occurrence %" PRIu32 ") twice",
                           b->v[i - 1].tag + 1, b->v[i].tag + 1, b->v[i].rid, b->v[i].occurrence);
    return LD_OK;
}

static int cmp_key(const void *pa, const void *pb)
{
    const ld_baseline_entry *a = pa, *b = pb;
    int c = strcmp(a->rid, b->rid);
    if (c) return c;
    if (a->occurrence != b->occurrence) return a->occurrence < b->occurrence ? -1 : 1;
    return a->tag < b->tag ? -1 : a->tag > b->tag;
}

static ld_status syntax_error(const char *text, const char *at, ld_error *err)
{
    uint64_t line = 1;
    for (const char *p = text; p < at; p++) line += *p == '\n';
    ld_status st = LD_FAIL(err, LD_ERR_SYNTAX, (uint64_t)(at - text), "not valid JSON");
    if (err) err->line = line;
    return st;
}

/* One line of text[*pos..len) (without its newline); NULL at the end. */
static const char *next_line(const char *text, size_t len, size_t *pos, size_t *n)
{
    if (*pos >= len) return NULL;
    const char *start = text + *pos, *nl = memchr(start, '\n', len - *pos);
    *n = nl ? (size_t)(nl - start) : len - *pos;
    *pos += *n + (nl != NULL);
    return start;
}

/* The entries of the layout ld_baseline_write gives, a line at a time (a
 * million requests never make one tree of a million).  0: read (*st says
 * how it went); -1: the text has another layout or is not valid JSON,
 * which the whole-document reader reads, or reports with its position. */
static int parse_entry_lines(const char *text, size_t len, size_t pos, ld_baseline *out, ld_status *st,
                             ld_error *err)
{
    size_t n, index = 0;
    for (const char *line; (line = next_line(text, len, &pos, &n));) {
        if (n == 2 && !memcmp(line, "]}", 2)) {
            while (pos < len && (text[pos] == '\n' || text[pos] == ' ')) pos++;
            return pos == len ? 0 : -1;
        }
        int comma = n > 0 && line[n - 1] == ',';
        if (entry_in_place(out, line, n - (size_t)comma, index + 1, st, err)) { /* most lines */
            index++;
            if (*st != LD_OK) return 0;
            continue;
        }
        cJSON *o = cJSON_ParseWithLength(line, n - (size_t)comma);
        if (!o) return -1;
        *st = read_entry(out, o, ++index, err);
        cJSON_Delete(o);
        if (*st != LD_OK) return 0;
    }
    return -1; /* no closing line */
}

/* The header line ending in `"requests": [`, checked as a document with
 * its array closed; -1 when the text does not start so. */
static int parse_by_lines(const char *text, size_t len, ld_baseline *out, ld_status *st, ld_error *err)
{
    size_t pos = 0, n;
    const char *line = next_line(text, len, &pos, &n);
    if (!line || n < 2 || line[n - 1] != '[' || n > 4096) return -1;
    char head[4100];
    memcpy(head, line, n);
    memcpy(head + n, "]}", 2);
    cJSON *root = cJSON_ParseWithLength(head, n + 2);
    if (!root) return -1;
    *st = cJSON_IsObject(root) ? check_header(root, err) : LD_OK;
    int rc = cJSON_IsObject(root) ? 0 : -1;
    cJSON_Delete(root);
    if (rc != 0 || *st != LD_OK) return rc;
    return parse_entry_lines(text, len, pos, out, st, err);
}

ld_status ld_baseline_parse(const char *text, size_t len, ld_baseline *out, ld_error *err)
{
    ld_baseline lines;
    ld_baseline_init(&lines);
    ld_status st = LD_OK;
    if (out->n == 0 && parse_by_lines(text, len, &lines, &st, err) == 0) {
        size_t i = 1; /* as ld_baseline_write wrote it: in order already */
        while (st == LD_OK && i < lines.n && cmp_key(&lines.v[i - 1], &lines.v[i]) <= 0) i++;
        if (st == LD_OK && i < lines.n) qsort(lines.v, lines.n, sizeof *lines.v, cmp_key);
        if (st == LD_OK) st = check_repeats(&lines, err);
        if (st == LD_OK) {
            ld_baseline_free(out);
            *out = lines;
            return LD_OK;
        }
        ld_baseline_free(&lines);
        return st;
    }
    ld_baseline_free(&lines);
    return parse_whole(text, len, out, err);
}

/* The whole text as one document: any layout, and the place of a syntax
 * error. */
static ld_status parse_whole(const char *text, size_t len, ld_baseline *out, ld_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) return syntax_error(text, end && end >= text ? end : text, err);
    ld_status st = cJSON_IsObject(root) ? check_header(root, err)
                   : LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "not a logdiff baseline (not a JSON object)");
    size_t index = 0;
    const cJSON *it;
    if (st == LD_OK) {
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "requests")) {
            if ((st = read_entry(out, it, ++index, err)) != LD_OK) break;
        }
    }
    cJSON_Delete(root);
    if (st != LD_OK) return st;
    if (out->n > 1) qsort(out->v, out->n, sizeof *out->v, cmp_key);
    return check_repeats(out, err);
}
