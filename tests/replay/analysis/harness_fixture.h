/* harness_fixture.h - runs a fixture of testdata/replay/harness (written by
 * tools/gen_harness_fixtures.py) through the real reader and pairer
 * (logset.h, pair.h with LD_PAIR_KEEP_TEXT), ld_harness_check and
 * ld_conv_check, and compares the findings per rid with <name>.expect.json.
 * Shared by test_harness.c and test_conv.c (static functions, one copy each). */
#ifndef HARNESS_FIXTURE_H
#define HARNESS_FIXTURE_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/analysis/conv.h"
#include "replay/analysis/harness.h"
#include "tests/support/ld_test.h"
#include "parse/logset.h"
#include "parse/pair/pair.h"

#define HF_MAX 64

typedef struct hf_rec {
    char *rid;             /* NULL for an error record */
    char *path;            /* error records: member */
    uint64_t line;         /* error records */
    char *kinds;           /* sorted, unique, joined by ',' */
    char *conv;            /* conversation id or NULL */
    char *related[8];      /* "kind=rid" */
    int n_related;
    char *calls;           /* "id|name|args|obj;..." */
} hf_rec;

typedef struct hf_run {
    ld_conv_tracker *conv;
    hf_rec recs[HF_MAX];
    int n;
    int failed;
    char details[HF_MAX * 4][600]; /* every finding detail, for sanity checks */
    int n_details;
} hf_run;

static char *hf_dup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    memcpy(d, s, n + 1);
    return d;
}

static int hf_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "a,b,c" of the unique sorted strings */
static char *hf_join(const char **v, int n)
{
    qsort(v, (size_t)n, sizeof *v, hf_cmp);
    char buf[1024] = "";
    for (int i = 0; i < n; i++) {
        if (i && !strcmp(v[i], v[i - 1])) continue;
        if (buf[0]) strcat(buf, ",");
        strncat(buf, v[i], sizeof buf - strlen(buf) - 2);
    }
    return hf_dup(buf);
}

static void hf_calls(hf_rec *rec, const ld_request *r)
{
    char buf[8192] = "";
    for (int64_t i = 0; i < r->n_messages; i++)
        for (uint32_t k = 0; r->messages[i].tool_calls && k < r->messages[i].n_tool_calls; k++) {
            const ld_tool_call *tc = &r->messages[i].tool_calls[k];
            size_t at = strlen(buf);
            snprintf(buf + at, sizeof buf - at, "%s|%s|%s|%d;", tc->id ? tc->id : "-",
                     tc->name ? tc->name : "-", tc->arguments.bytes ? tc->arguments.bytes : "-",
                     (tc->flags & LD_TOOL_ARGS_OBJECT) != 0);
        }
    rec->calls = hf_dup(buf);
}

static int hf_emit(void *ctx, ld_request *r)
{
    hf_run *run = ctx;
    if (run->n >= HF_MAX) return 0;
    hf_rec *rec = &run->recs[run->n++];
    memset(rec, 0, sizeof *rec);
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_findings f = {0};
    const char *cid = NULL;
    ld_error e;
    if (ld_harness_check(r, &a, &f, &e) != LD_OK || ld_conv_check(run->conv, r, &a, &f, &cid, &e) != LD_OK) {
        fprintf(stderr, "  check failed: %s\n", e.msg);
        run->failed = 1;
    }
    const char *kinds[64];
    int nk = 0;
    for (size_t i = 0; i < f.n && nk < 64; i++) {
        kinds[nk++] = f.v[i].kind;
        if (f.v[i].related_rid && rec->n_related < 8) {
            char kv[300];
            snprintf(kv, sizeof kv, "%s=%s", f.v[i].kind, f.v[i].related_rid);
            rec->related[rec->n_related++] = hf_dup(kv);
        }
        if (run->n_details < HF_MAX * 4)
            snprintf(run->details[run->n_details++], 600, "%s %s: %s", r->rid ? r->rid : "-",
                     f.v[i].kind, f.v[i].detail);
    }
    rec->kinds = hf_join(kinds, nk);
    rec->rid = hf_dup(r->rid);
    rec->conv = hf_dup(cid);
    if (r->flags & LD_REQ_ERROR) {
        rec->path = hf_dup(r->error.path);
        rec->line = r->error.line;
    }
    hf_calls(rec, r);
    ld_arena_release(&a);
    return 0;
}


static void hf_free(hf_run *run)
{
    for (int i = 0; i < run->n; i++) {
        hf_rec *r = &run->recs[i];
        free(r->rid), free(r->path), free(r->kinds), free(r->conv), free(r->calls);
        for (int k = 0; k < r->n_related; k++) free(r->related[k]);
    }
    ld_conv_tracker_free(run->conv);
    free(run);
}

/* Reads the fixture's files in order into one pairer; NULL when absent. */
static hf_run *hf_read(const char *name, cJSON **out_doc, const ld_conv_options *co)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/replay/harness/%s.expect.json", LD_TESTDATA_DIR, name);
    char *txt = ld_test_slurp(path);
    *out_doc = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!*out_doc) return NULL;
    char *paths[8];
    size_t n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(*out_doc, "files")) {
        char p[1024];
        snprintf(p, sizeof p, "%s/replay/harness/%s", LD_TESTDATA_DIR, f->valuestring);
        if (n < 8) paths[n++] = hf_dup(p);
    }
    hf_run *run = calloc(1, sizeof *run);
    ld_pair_options o = {0};
    o.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_ERROR_RECORDS;
    ld_pairer *p = NULL;
    ld_error e;
    ld_logset_stats st;
    memset(&st, 0, sizeof st);
    if (ld_conv_tracker_new(co, &run->conv, &e) || ld_pairer_new(&o, hf_emit, run, &p, &e) ||
        ld_logset_run(paths, n, p, NULL, NULL, &st, &e))
        run->failed = 1;
    ld_pairer_free(p);
    for (size_t i = 0; i < n; i++) free(paths[i]);
    return run;
}

static const hf_rec *hf_find(const hf_run *run, const char *rid)
{
    for (int i = 0; i < run->n; i++)
        if (run->recs[i].rid && !strcmp(run->recs[i].rid, rid)) return &run->recs[i];
    return NULL;
}

static int hf_has_related(const hf_rec *r, const char *kind, const char *rid)
{
    char kv[300];
    snprintf(kv, sizeof kv, "%s=%s", kind, rid);
    for (int k = 0; k < r->n_related; k++)
        if (!strcmp(r->related[k], kv)) return 1;
    return 0;
}

static int hf_check_kinds(const hf_rec *r, const cJSON *x)
{
    const char *v[32];
    int n = 0;
    const cJSON *k;
    /* template.* kinds come from the aligner, which these harness and
     * conversation tests do not run (tests/cli/diff_fixtures.sh does) */
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(x, "kinds"))
        if (n < 32 && strncmp(k->valuestring, "template.", 9) != 0) v[n++] = k->valuestring;
    char *want = hf_join(v, n);
    int bad = strcmp(want, r->kinds) != 0;
    if (bad) fprintf(stderr, "  %s: kinds [%s], want [%s]\n", r->rid ? r->rid : "-", r->kinds, want);
    free(want);
    return bad;
}

/* Conversation ids: same label <-> same id; null label <-> no id. */
static int hf_check_convs(const hf_run *run, const cJSON *reqs)
{
    int bad = 0;
    const cJSON *x, *y;
    cJSON_ArrayForEach(x, reqs) {
        const hf_rec *a = hf_find(run, cJSON_GetObjectItem(x, "rid")->valuestring);
        const cJSON *la = cJSON_GetObjectItem(x, "conversation");
        if (!a) continue;
        if (cJSON_IsNull(la) != !a->conv)
            bad |= fprintf(stderr, "  %s: conversation id %s\n", a->rid, a->conv ? a->conv : "(none)") > 0;
        cJSON_ArrayForEach(y, reqs) {
            const hf_rec *b = hf_find(run, cJSON_GetObjectItem(y, "rid")->valuestring);
            const cJSON *lb = cJSON_GetObjectItem(y, "conversation");
            if (!b || !a->conv || !b->conv || !cJSON_IsString(la) || !cJSON_IsString(lb)) continue;
            int same_label = !strcmp(la->valuestring, lb->valuestring);
            if (same_label != !strcmp(a->conv, b->conv))
                bad |= fprintf(stderr, "  %s (%s) vs %s (%s): conversation ids %s / %s\n", a->rid,
                               la->valuestring, b->rid, lb->valuestring, a->conv, b->conv) > 0;
        }
    }
    return bad;
}

static int hf_check_calls(const hf_rec *r, const cJSON *x)
{
    const cJSON *tcs = cJSON_GetObjectItem(x, "tool_calls"), *c;
    if (!tcs) return 0;
    char buf[8192] = "";
    cJSON_ArrayForEach(c, tcs) {
        size_t at = strlen(buf);
        snprintf(buf + at, sizeof buf - at, "%s|%s|%s|%d;", cJSON_GetArrayItem(c, 0)->valuestring,
                 cJSON_GetArrayItem(c, 1)->valuestring, cJSON_GetArrayItem(c, 2)->valuestring,
                 cJSON_IsTrue(cJSON_GetArrayItem(c, 3)));
    }
    if (!strcmp(buf, r->calls)) return 0;
    fprintf(stderr, "  %s: tool calls\n    got  %s\n    want %s\n", r->rid, r->calls, buf);
    return 1;
}

/* The whole comparison for one fixture; 0 = as expected, LD_SKIP if absent. */
static int hf_fixture(const char *name)
{
    cJSON *doc;
    hf_run *run = hf_read(name, &doc, NULL);
    if (!run) SKIP("no fixture %s (run tools/gen_harness_fixtures.py)", name);
    int bad = run->failed;
    const cJSON *reqs = cJSON_GetObjectItem(doc, "requests"), *x, *rel;
    int n_err = cJSON_GetArraySize(cJSON_GetObjectItem(doc, "errors"));
    if (run->n != cJSON_GetArraySize(reqs) + n_err)
        bad |= fprintf(stderr, "  %d records, want %d\n", run->n, cJSON_GetArraySize(reqs) + n_err) > 0;
    cJSON_ArrayForEach(x, reqs) {
        const char *rid = cJSON_GetObjectItem(x, "rid")->valuestring;
        const hf_rec *r = hf_find(run, rid);
        if (!r) {
            bad |= fprintf(stderr, "  %s: no record\n", rid) > 0;
            continue;
        }
        bad |= hf_check_kinds(r, x);
        bad |= hf_check_calls(r, x);
        cJSON_ArrayForEach(rel, cJSON_GetObjectItem(x, "related"))
            if (!hf_has_related(r, rel->string, rel->valuestring))
                bad |= fprintf(stderr, "  %s: %s should name %s\n", rid, rel->string, rel->valuestring) > 0;
    }
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(doc, "errors")) {
        int found = 0;
        for (int i = 0; i < run->n; i++) {
            const hf_rec *r = &run->recs[i];
            if (r->rid || !r->path || r->line != (uint64_t)cJSON_GetObjectItem(x, "line")->valuedouble)
                continue;
            found = 1;
            if (!strstr(r->path, cJSON_GetObjectItem(x, "file")->valuestring))
                bad |= fprintf(stderr, "  error record path %s\n", r->path) > 0;
            bad |= hf_check_kinds(r, x);
        }
        if (!found) bad |= fprintf(stderr, "  no error record for line %d\n",
                                   (int)cJSON_GetObjectItem(x, "line")->valuedouble) > 0;
    }
    bad |= hf_check_convs(run, reqs);
    if (bad || getenv("HF_VERBOSE"))
        for (int i = 0; i < run->n_details; i++) fprintf(stderr, "    %s\n", run->details[i]);
    if (bad) fprintf(stderr, "  ^ in fixture %s\n", name);
    hf_free(run);
    cJSON_Delete(doc);
    return bad;
}

#endif
