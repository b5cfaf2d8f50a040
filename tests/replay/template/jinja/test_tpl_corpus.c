/* test_tpl_corpus.c - differential corpus: every request of
 * testdata/replay/tpl_corpus/requests.json through every chat template of
 * ../shared/templates (and orig/), rendered by ld_chat_render (the context
 * the replay builds), against the outputs of HF transformers'
 * apply_chat_template (tools/gen_tpl_corpus.py -> goldens/<template>.json).
 *
 * A pair passes when the bytes are identical, or when both refuse: a
 * raise_exception refusal must carry the same message, another Python
 * exception must be an error here too.  The context (normalized messages,
 * tools/documents, special tokens) is chat_render.c's, so this checks it as
 * much as the interpreter. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replay/template/chat_render.h"
#include "tests/replay/tokenizer/golden_tokens.h"
#include "tests/support/ld_test.h"
#include "replay/template/jinja/tpl.h"
#include "replay/template/tpl_source.h"

#define CORPUS_DIR LD_TESTDATA_DIR "/replay/tpl_corpus"

/* A short, one-line excerpt of s[off..] for the report. */
static void excerpt(char *dst, size_t cap, const char *s, size_t len, size_t off)
{
    size_t start = off > 20 ? off - 20 : 0, j = 0;
    for (size_t i = start; i < len && i < off + 40 && j + 4 < cap; i++) {
        char c = s[i];
        if (c == '\n') dst[j++] = '\\', dst[j++] = 'n';
        else if (c == '\r') dst[j++] = '\\', dst[j++] = 'r';
        else dst[j++] = c;
    }
    dst[j] = 0;
}

/* Does the outcome (s, out, err) equal the golden `g` ({"out"} or
 * {"error"})?  `why` explains a difference. */
static bool same_outcome(const cJSON *g, ld_status s, const char *out, size_t out_len, const ld_error *err,
                         char *why, size_t why_len)
{
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(g, "out");
    const cJSON *werr = cJSON_GetObjectItemCaseSensitive(g, "error");
    if (cJSON_IsString(werr)) {
        if (s == LD_OK) return snprintf(why, why_len, "rendered, but Python raised %.300s", werr->valuestring), false;
        const char *w = werr->valuestring;
        if (strncmp(w, "TemplateError: ", 15) == 0) {
            char q[512]; /* the interpreter quotes the first 150 bytes */
            size_t wl = strlen(w + 15);
            snprintf(q, sizeof q, "'%.*s%s", (int)(wl > 150 ? 150 : wl), w + 15, wl > 150 ? "" : "'");
            if (!strstr(err->msg, q))
                return snprintf(why, why_len, "error \"%.200s\", Python raised %.200s", err->msg, w), false;
        }
        return true;
    }
    if (!cJSON_IsString(want)) return snprintf(why, why_len, "golden has neither out nor error"), false;
    if (s != LD_OK)
        return snprintf(why, why_len, "error at line %llu: %.300s", (unsigned long long)err->line, err->msg), false;
    size_t wn = strlen(want->valuestring), i = 0;
    if (wn == out_len && memcmp(want->valuestring, out, wn) == 0) return true;
    while (i < wn && i < out_len && want->valuestring[i] == out[i]) i++;
    char a[128], b[128];
    excerpt(a, sizeof a, want->valuestring, wn, i);
    excerpt(b, sizeof b, out, out_len, i);
    snprintf(why, why_len, "first difference at byte %zu (want %zu bytes, got %zu)\n      want: \"%s\"\n      got:  \"%s\"",
             i, wn, out_len, a, b);
    return false;
}

typedef struct counts {
    int pairs, match, failed;
} counts;

static void run_template(const char *tdir, const char *rel, const cJSON *reqs, counts *n)
{
    char name[256], path[4096];
    size_t j = 0; /* "orig/X.jinja" -> "orig__X" */
    for (const char *p = rel; *p && j + 3 < sizeof name; p++) {
        if (*p == '/') name[j++] = '_', name[j++] = '_';
        else name[j++] = *p;
    }
    name[j > 6 ? j - 6 : 0] = 0;
    snprintf(path, sizeof path, CORPUS_DIR "/goldens/%s.json", name);
    char *js = ld_test_slurp(path);
    cJSON *gold = js ? cJSON_Parse(js) : NULL;
    free(js);
    snprintf(path, sizeof path, "%s/%s", tdir, rel);
    ld_tpl_source *src = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (!gold || ld_tpl_source_load(path, NULL, &src, &err) != LD_OK) {
        n->failed++;
        printf("  FAIL %s: %s\n", name, gold ? err.msg : "no golden file (run tools/gen_tpl_corpus.py)");
        cJSON_Delete(gold);
        return;
    }
    ld_chat_opts opts = {0};
    ld_golden_tokens(name, &opts.bos_token, &opts.eos_token);
    for (const cJSON *r = reqs->child; r; r = r->next) {
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(gold, r->string);
        n->pairs++;
        if (!g) {
            n->failed++;
            printf("  FAIL %s / %s: no golden (run tools/gen_tpl_corpus.py)\n", name, r->string);
            continue;
        }
        opts.no_generation_prompt = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "add_generation_prompt"));
        char *out = NULL, why[1024] = "";
        size_t out_len = 0;
        ld_error_clear(&err);
        ld_status s = ld_chat_render(src, r, &opts, &out, &out_len, &err);
        if (same_outcome(g, s, out, out_len, &err, why, sizeof why)) {
            n->match++;
        } else {
            n->failed++;
            printf("  FAIL %s / %s: %s\n", name, r->string, why);
        }
        free(out);
    }
    ld_tpl_source_free(src);
    cJSON_Delete(gold);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .jinja files of dir (sorted), as "prefix" + name; returns the count. */
static size_t list_jinja(const char *dir, const char *prefix, char **names, size_t cap)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL && n < cap;) {
        size_t l = strlen(e->d_name);
        if (l > 6 && strcmp(e->d_name + l - 6, ".jinja") == 0) {
            names[n] = malloc(strlen(prefix) + l + 1);
            if (names[n]) sprintf(names[n++], "%s%s", prefix, e->d_name);
        }
    }
    if (d) closedir(d);
    qsort(names, n, sizeof *names, by_name);
    return n;
}

static int test_tpl_corpus_all(void)
{
    char tdir[1024], *names[128];
    snprintf(tdir, sizeof tdir, "%s/templates", LD_SHARED_DIR);
    size_t nt = list_jinja(tdir, "", names, 64);
    if (nt == 0) SKIP("no chat templates under %s (LD_SHARED_DIR): the corpus needs the shared templates", tdir);
    char odir[1100];
    snprintf(odir, sizeof odir, "%s/orig", tdir);
    nt += list_jinja(odir, "orig/", names + nt, 64);
    char *js = ld_test_slurp(CORPUS_DIR "/requests.json");
    CHECK_MSG(js != NULL, "cannot read %s", CORPUS_DIR "/requests.json");
    cJSON *reqs = cJSON_Parse(js);
    CHECK(reqs != NULL);
    /* keep 2.0 a float, as Python's json does */
    CHECK(ld_tpl_json_keep_floats(reqs, js, strlen(js)) == LD_OK);
    free(js);
    counts n = {0};
    for (size_t i = 0; i < nt; i++) {
        run_template(tdir, names[i], reqs, &n);
        free(names[i]);
    }
    int nreq = cJSON_GetArraySize(reqs);
    cJSON_Delete(reqs);
    printf("  corpus: %zu templates x %d requests = %d pairs: %d as transformers, %d failed\n", nt, nreq,
           n.pairs, n.match, n.failed);
    CHECK(nreq >= 24);
    CHECK_EQ_INT(n.failed, 0);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_tpl_corpus_all),
};

LD_TEST_MAIN(cases)
