/* watch_state_io.c - the state file as JSON: read at the start, written
 * atomically (cmd/common/outfile.c) at each save.
 *
 *   {"logdiff_watch_state": 1, "logdiff": "0.x",
 *    "files": [{"source": S, "path": P, "dev": N, "ino": N, "offset": N, "line": N,
 *               "warmup": N, "warmup_line": N}],
 *    "journals": [{"source": S, "cursor": C, "entry": N, "after": B}],
 *    "judged": [{"path": P, "offset": N, "rid": R}]}
 *
 * "journals" came later in format 1: a state without it is read as having
 * none (and a logdiff before it reads this one's files and judged alike).
 * A judged request's "offset" is its journal entry's number when "path"
 * names a journal source.  A file's "warmup" and "warmup_line" (both or
 * neither; at most "offset" and "line") came later too: where the restart
 * reads again in silence for the conversations (watch_warmup.h); a state
 * without them has no warm-up, and a logdiff before them ignores them.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "logdiff_config.h"
#include "cmd/common/outfile.h"
#include "parse/input/slurp.h"
#include "cmd/watch/watch_state.h"
#include "cmd/watch/watch_state_internal.h"

/* ------------------------------------------------------------ reading */

static int get_u64(const cJSON *o, const char *key, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0) return -1;
    *out = (uint64_t)v->valuedouble;
    return 0;
}

static const char *get_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* a file's warm-up start: absent, none (at the resume offset) */
static int load_warmup(const cJSON *o, saved_file *s)
{
    int has = cJSON_GetObjectItemCaseSensitive(o, "warmup") != NULL;
    int has_line = cJSON_GetObjectItemCaseSensitive(o, "warmup_line") != NULL;
    s->warmup = s->offset;
    s->warmup_line = s->line;
    if (!has && !has_line) return 0;
    if (has != has_line || get_u64(o, "warmup", &s->warmup) || get_u64(o, "warmup_line", &s->warmup_line))
        return -1;
    if (s->warmup > s->offset || s->warmup_line > s->line) return -1;
    if (s->warmup == s->offset) s->warmup_line = s->line; /* none */
    return 0;
}

static int load_file_entry(ld_watch_state *st, const cJSON *o)
{
    saved_file s = { 0 };
    const char *source = get_str(o, "source"), *path = get_str(o, "path");
    if (!source || !path || get_u64(o, "dev", &s.dev) || get_u64(o, "ino", &s.ino) ||
        get_u64(o, "offset", &s.offset) || get_u64(o, "line", &s.line) || load_warmup(o, &s) != 0)
        return -1;
    saved_file *v = realloc(st->files, (st->n_files + 1) * sizeof *v);
    if (!v) return -1;
    st->files = v;
    s.source = strdup(source);
    s.path = strdup(path);
    if (!s.source || !s.path) {
        free(s.source);
        free(s.path);
        return -1;
    }
    st->files[st->n_files++] = s;
    return 0;
}

/* a cursor as sd-journal writes them: printable ASCII, no quote, bounded */
static int cursor_ok(const char *c)
{
    size_t n = strlen(c);
    if (!n || n > 1024) return 0;
    for (size_t i = 0; i < n; i++)
        if (c[i] < 0x21 || c[i] > 0x7e) return 0;
    return 1;
}

static int load_journal_entry(ld_watch_state *st, const cJSON *o)
{
    saved_journal s = { 0 };
    const char *source = get_str(o, "source"), *cursor = get_str(o, "cursor");
    const cJSON *after = cJSON_GetObjectItemCaseSensitive(o, "after");
    if (!source || !ld_watch_journal_is(source) || !cursor || !cursor_ok(cursor) || !cJSON_IsBool(after) ||
        get_u64(o, "entry", &s.mark.entry) || ld_watch_state_journal(st, source))
        return -1;
    s.mark.after = cJSON_IsTrue(after);
    saved_journal *v = realloc(st->journals, (st->n_journals + 1) * sizeof *v);
    if (!v) return -1;
    st->journals = v;
    s.source = strdup(source);
    s.mark.cursor = strdup(cursor);
    if (!s.source || !s.mark.cursor) {
        free(s.source);
        free(s.mark.cursor);
        return -1;
    }
    st->journals[st->n_journals++] = s;
    return 0;
}

static int load_judged_entry(ld_watch_state *st, const cJSON *o)
{
    const char *path = get_str(o, "path"), *rid = get_str(o, "rid");
    uint64_t offset;
    if (!path || !rid || get_u64(o, "offset", &offset)) return -1;
    return ld_watch_judged_add(&st->before, path, offset, rid);
}

/* Fills st from the document; a sentence saying what is wrong, or NULL. */
static const char *load_doc(ld_watch_state *st, const cJSON *doc)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(doc, "logdiff_watch_state");
    if (!cJSON_IsNumber(fmt)) return "not a logdiff watch state (no \"logdiff_watch_state\" member)";
    if (fmt->valuedouble != LD_WATCH_STATE_FORMAT)
        return "written in another format version (this logdiff reads format 1)";
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(doc, "files");
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(doc, "judged");
    if (!cJSON_IsArray(files) || !cJSON_IsArray(jd)) return "\"files\" or \"judged\" is missing";
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(doc, "journals"); /* may be absent */
    if (jn && !cJSON_IsArray(jn)) return "\"journals\" is not an array";
    const cJSON *o;
    cJSON_ArrayForEach(o, files) if (load_file_entry(st, o) != 0) return "a \"files\" entry is not understood";
    cJSON_ArrayForEach(o, jn) if (load_journal_entry(st, o) != 0) return "a \"journals\" entry is not understood";
    cJSON_ArrayForEach(o, jd) if (load_judged_entry(st, o) != 0) return "a \"judged\" entry is not understood";
    return NULL;
}

const char *ld_watch_state_parse(ld_watch_state *st, const char *text, size_t len, char *why, size_t cap)
{
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    const char *bad = NULL;
    if (!doc) {
        snprintf(why, cap, "byte %llu: not JSON", (unsigned long long)(end ? (size_t)(end - text) : 0));
        bad = why;
    } else bad = load_doc(st, doc);
    cJSON_Delete(doc);
    if (bad) ld_watch_state_clear(st);
    return bad;
}

ld_watch_state *ld_watch_state_open(const char *path, FILE *err)
{
    ld_watch_state *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        fprintf(err, "logdiff watch: out of memory for the state\n");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f && errno == ENOENT) return st; /* the first run */
    if (!f) {
        fprintf(err, "logdiff watch: state %s: cannot open: %s\n", path, strerror(errno));
        ld_watch_state_free(st);
        return NULL;
    }
    size_t len = 0;
    char *text = NULL, buf[64];
    ld_error e;
    ld_error_clear(&e);
    ld_status rs = ld_slurp_stream(f, &text, &len, &e);
    fclose(f);
    const char *why = rs != LD_OK ? e.msg : ld_watch_state_parse(st, text, len, buf, sizeof buf);
    free(text);
    if (why) {
        fprintf(err, "logdiff watch: state %s: %s: not reused; move it away to start afresh\n", path, why);
        ld_watch_state_free(st);
        return NULL;
    }
    return st;
}

/* ------------------------------------------------------------ writing */

static int print_text(const void *ctx, FILE *f)
{
    return fputs((const char *)ctx, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
}

/* a count or position exactly (cJSON's own numbers keep 15 digits) */
static void add_u64(cJSON *o, const char *key, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    cJSON_AddRawToObject(o, key, text);
}

static cJSON *file_json(const saved_file *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "source", s->source);
    cJSON_AddStringToObject(o, "path", s->path);
    add_u64(o, "dev", s->dev);
    add_u64(o, "ino", s->ino);
    add_u64(o, "offset", s->offset);
    add_u64(o, "line", s->line);
    if (s->warmup < s->offset) {
        add_u64(o, "warmup", s->warmup);
        add_u64(o, "warmup_line", s->warmup_line);
    }
    return o;
}

static cJSON *journal_json(const saved_journal *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "source", s->source);
    cJSON_AddStringToObject(o, "cursor", s->mark.cursor);
    add_u64(o, "entry", s->mark.entry);
    cJSON_AddBoolToObject(o, "after", s->mark.after);
    return o;
}

static cJSON *judged_json(const judged *j)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "path", j->path);
    add_u64(o, "offset", j->offset);
    cJSON_AddStringToObject(o, "rid", j->rid);
    return o;
}

char *ld_watch_state_text(const ld_watch_state *st, const saved_file *files, size_t n_files,
                          const saved_journal *journals, size_t n_journals)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *fa = cJSON_CreateArray(), *jn = cJSON_CreateArray(), *ja = cJSON_CreateArray();
    if (!doc || !fa || !jn || !ja) {
        cJSON_Delete(doc);
        cJSON_Delete(fa);
        cJSON_Delete(jn);
        cJSON_Delete(ja);
        return NULL;
    }
    cJSON_AddNumberToObject(doc, "logdiff_watch_state", LD_WATCH_STATE_FORMAT);
    cJSON_AddStringToObject(doc, "logdiff", LD_VERSION);
    cJSON_AddItemToObject(doc, "files", fa);
    cJSON_AddItemToObject(doc, "journals", jn);
    cJSON_AddItemToObject(doc, "judged", ja);
    for (size_t i = 0; i < n_files; i++) cJSON_AddItemToArray(fa, file_json(&files[i]));
    for (size_t i = 0; i < n_journals; i++)
        if (journals[i].mark.cursor) cJSON_AddItemToArray(jn, journal_json(&journals[i]));
    for (size_t i = 0; i < st->now.n; i++) cJSON_AddItemToArray(ja, judged_json(&st->now.v[i]));
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    return text;
}

int ld_watch_state_write(const ld_watch_state *st, const saved_file *files, size_t n_files,
                         const saved_journal *journals, size_t n_journals, FILE *err)
{
    char *text = ld_watch_state_text(st, files, n_files, journals, n_journals);
    if (!text) {
        fprintf(err, "logdiff watch: out of memory for the state\n");
        return -1;
    }
    int rc = ld_cli_write_output("watch", st->path, print_text, text, err);
    free(text);
    return rc;
}
