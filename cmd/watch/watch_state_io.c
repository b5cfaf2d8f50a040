/* watch_state_io.c - the state file as JSON: read at the start, written
 * atomically (cmd/common/outfile.c) at each save.
 *
 *   {"logdiff_watch_state": 1, "logdiff": "0.x",
 *    "files": [{"source": S, "path": P, "dev": N, "ino": N, "offset": N, "line": N}],
 *    "judged": [{"path": P, "offset": N, "rid": R}]}
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

static int load_file_entry(ld_watch_state *st, const cJSON *o)
{
    saved_file s = { 0 };
    const char *source = get_str(o, "source"), *path = get_str(o, "path");
    if (!source || !path || get_u64(o, "dev", &s.dev) || get_u64(o, "ino", &s.ino) ||
        get_u64(o, "offset", &s.offset) || get_u64(o, "line", &s.line))
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
    const cJSON *o;
    cJSON_ArrayForEach(o, files) if (load_file_entry(st, o) != 0) return "a \"files\" entry is not understood";
    cJSON_ArrayForEach(o, jd) if (load_judged_entry(st, o) != 0) return "a \"judged\" entry is not understood";
    return NULL;
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
    char *text = NULL;
    ld_error e;
    ld_error_clear(&e);
    ld_status rs = ld_slurp_stream(f, &text, &len, &e);
    fclose(f);
    const char *end = NULL;
    cJSON *doc = rs == LD_OK ? cJSON_ParseWithLengthOpts(text, len, &end, 0) : NULL;
    const char *why = rs != LD_OK ? e.msg : !doc ? NULL : load_doc(st, doc);
    if (text && !doc)
        fprintf(err, "logdiff watch: state %s: byte %llu: not JSON: not reused; move it away to start afresh\n",
                path, (unsigned long long)(end ? (size_t)(end - text) : 0));
    else if (why)
        fprintf(err, "logdiff watch: state %s: %s: not reused; move it away to start afresh\n", path, why);
    cJSON_Delete(doc);
    free(text);
    if (!doc || why) {
        ld_watch_state_free(st);
        return NULL;
    }
    return st;
}

/* ------------------------------------------------------------ writing */

static int print_doc(const void *ctx, FILE *f)
{
    char *text = cJSON_PrintUnformatted((const cJSON *)ctx);
    if (!text) return -1;
    int rc = fputs(text, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
    free(text);
    return rc;
}

static cJSON *file_json(const saved_file *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "source", s->source);
    cJSON_AddStringToObject(o, "path", s->path);
    cJSON_AddNumberToObject(o, "dev", (double)s->dev);
    cJSON_AddNumberToObject(o, "ino", (double)s->ino);
    cJSON_AddNumberToObject(o, "offset", (double)s->offset);
    cJSON_AddNumberToObject(o, "line", (double)s->line);
    return o;
}

static cJSON *judged_json(const judged *j)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "path", j->path);
    cJSON_AddNumberToObject(o, "offset", (double)j->offset);
    cJSON_AddStringToObject(o, "rid", j->rid);
    return o;
}

int ld_watch_state_write(const ld_watch_state *st, const saved_file *files, size_t n_files, FILE *err)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *fa = cJSON_CreateArray(), *ja = cJSON_CreateArray();
    if (!doc || !fa || !ja) {
        cJSON_Delete(doc);
        cJSON_Delete(fa);
        cJSON_Delete(ja);
        fprintf(err, "logdiff watch: out of memory for the state\n");
        return -1;
    }
    cJSON_AddNumberToObject(doc, "logdiff_watch_state", LD_WATCH_STATE_FORMAT);
    cJSON_AddStringToObject(doc, "logdiff", LD_VERSION);
    cJSON_AddItemToObject(doc, "files", fa);
    cJSON_AddItemToObject(doc, "judged", ja);
    for (size_t i = 0; i < n_files; i++) cJSON_AddItemToArray(fa, file_json(&files[i]));
    for (size_t i = 0; i < st->now.n; i++) cJSON_AddItemToArray(ja, judged_json(&st->now.v[i]));
    int rc = ld_cli_write_output("watch", st->path, print_doc, doc, err);
    cJSON_Delete(doc);
    return rc;
}
