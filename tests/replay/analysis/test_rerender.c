/* test_rerender.c - the pieces of `logdiff diff --template`: SGLang's
 * preprocessing of a logged request (server_prep.h), SGLang's guess of a
 * template's content format, and the short unified diff (udiff.h).
 * Expected values come from SGLang's own code and Python's difflib
 * (tools/gen_rerender_fixtures.py -> testdata/replay/rerender/vectors.json);
 * the end-to-end checks are in tests/cli/diff_template.sh. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "replay/template/server_prep.h"
#include "replay/template/jinja/tpl.h"
#include "replay/analysis/udiff.h"

static cJSON *vectors(const char *key)
{
    static cJSON *root;
    if (!root) {
        char *text = ld_test_slurp(LD_TESTDATA_DIR "/replay/rerender/vectors.json");
        root = text ? cJSON_Parse(text) : NULL;
        free(text);
    }
    return cJSON_GetObjectItemCaseSensitive(root, key);
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* json.dumps of prepared[key] (NULL when absent) equals `want` (NULL = None). */
static int dumps_equal(const char *name, const cJSON *prepared, const char *key, const char *want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(prepared, key);
    char *got = NULL;
    size_t n = 0;
    if (v && ld_tpl_json_dumps(v, -1, &got, &n, NULL) != LD_OK) return 0;
    int same = (!got && !want) || (got && want && !strcmp(got, want));
    if (!same)
        fprintf(stderr, "  %s: %s\n    got  %s\n    want %s\n", name, key, got ? got : "None",
                want ? want : "None");
    free(got);
    return same;
}

static int test_server_prep_sglang_vectors(void)
{
    const cJSON *list = vectors("prep");
    CHECK(cJSON_GetArraySize(list) >= 10);
    int bad = 0;
    for (const cJSON *v = list->child; v; v = v->next) {
        const char *name = str(v, "name");
        int parts = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "content_parts"));
        cJSON *out = NULL;
        ld_status st = ld_server_prepare(LD_SERVER_SGLANG, parts,
                                         cJSON_GetObjectItemCaseSensitive(v, "logged"), &out, NULL);
        CHECK_MSG(st == LD_OK, "%s: status %d", name, st);
        bad += !dumps_equal(name, out, "messages", str(v, "messages"));
        bad += !dumps_equal(name, out, "tools", str(v, "tools"));
        bad += !dumps_equal(name, out, "chat_template_kwargs", str(v, "kwargs"));
        cJSON_Delete(out);
    }
    CHECK_EQ_INT(bad, 0);
    return 0;
}

static int test_server_prep_refuses_bad_arguments(void)
{
    cJSON *req = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, "
                             "{\"role\": \"assistant\", \"tool_calls\": [{\"function\": "
                             "{\"name\": \"f\", \"arguments\": \"{not json\"}}]}]}");
    cJSON *out = NULL;
    ld_error e;
    ld_error_clear(&e);
    CHECK_EQ_INT(ld_server_prepare(LD_SERVER_SGLANG, 0, req, &out, &e), LD_ERR_MISMATCH);
    CHECK(strstr(e.msg, "message 1") != NULL);
    CHECK(out == NULL);
    CHECK_EQ_INT(ld_server_prepare(LD_SERVER_SGLANG, 0, cJSON_GetObjectItem(req, "messages"),
                                   &out, &e), LD_ERR_USAGE);
    cJSON_Delete(req);
    return 0;
}

static int test_server_prep_hf_is_identity(void)
{
    const cJSON *v = vectors("prep")->child;
    const cJSON *logged = cJSON_GetObjectItemCaseSensitive(v, "logged");
    cJSON *out = NULL;
    CHECK_EQ_INT(ld_server_prepare(LD_SERVER_HF, 0, logged, &out, NULL), LD_OK);
    CHECK(cJSON_Compare(out, logged, 1));
    cJSON_Delete(out);
    CHECK_EQ_INT(ld_server_by_name("hf"), LD_SERVER_HF);
    CHECK_EQ_INT(ld_server_by_name("sglang"), LD_SERVER_SGLANG);
    CHECK_EQ_INT(ld_server_by_name("vllm"), -1);
    return 0;
}

static int test_server_flatten_tools(void)
{
    cJSON *p = cJSON_Parse("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a\"}},"
                           " {\"name\": \"b\"}]}");
    CHECK_EQ_INT(ld_server_flatten_tools(p), 1);
    char *s = cJSON_PrintUnformatted(p);
    CHECK_EQ_STR(s, "{\"tools\":[{\"name\":\"a\"},{\"name\":\"b\"}]}");
    free(s);
    CHECK_EQ_INT(ld_server_flatten_tools(p), 0);
    cJSON_Delete(p);
    return 0;
}

static int test_content_format_like_sglang(void)
{
    const cJSON *list = vectors("content_format");
    CHECK(cJSON_GetArraySize(list) >= 5);
    int bad = 0;
    for (const cJSON *v = list->child; v; v = v->next) {
        const char *src = str(v, "template");
        int want = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "openai"));
        if (ld_server_template_wants_parts(src, strlen(src)) != want)
            bad++, fprintf(stderr, "  %s: want %s\n", str(v, "name"), want ? "openai" : "string");
    }
    CHECK_EQ_INT(bad, 0);
    return 0;
}

static int test_udiff_like_difflib(void)
{
    const cJSON *list = vectors("udiff");
    CHECK(cJSON_GetArraySize(list) >= 5);
    ld_udiff_opts wide = { 3, 1000, 100000 }; /* nothing shortened: difflib's exact text */
    int bad = 0;
    for (const cJSON *v = list->child; v; v = v->next) {
        ld_arena a;
        ld_arena_init(&a, 0);
        const char *x = str(v, "a"), *y = str(v, "b");
        const char *d = ld_udiff(x, strlen(x), y, strlen(y), "logged", "rendered", &wide, &a);
        if (!d || strcmp(d, str(v, "diff")))
            bad++, fprintf(stderr, "  %s:\n%s\n  want:\n%s\n", str(v, "name"), d ? d : "(null)",
                           str(v, "diff"));
        ld_arena_release(&a);
    }
    CHECK_EQ_INT(bad, 0);
    return 0;
}

static int test_udiff_shortens_long_runs_and_lines(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    char x[4096] = "", y[4096] = "";
    for (int i = 0; i < 30; i++) {
        snprintf(x + strlen(x), sizeof x - strlen(x), "old %d\n", i);
        snprintf(y + strlen(y), sizeof y - strlen(y), "new %d\n", i);
    }
    ld_udiff_opts o = { 1, 4, 5 };
    const char *d = ld_udiff(x, strlen(x), y, strlen(y), "a", "b", &o, &a);
    CHECK(d != NULL);
    CHECK(strstr(d, "-[... 26 more lines]\n") != NULL);
    CHECK(strstr(d, "+[... 26 more lines]\n") != NULL);
    CHECK(strstr(d, "-old 1\n") != NULL); /* 5 bytes: shown whole */
    const char *e = ld_udiff("a very long line\n", 17, "another long line\n", 18, "a", "b", &o, &a);
    CHECK(strstr(e, "-a ver [... 11 more bytes]\n") != NULL || strstr(e, "-a ver") != NULL);
    CHECK_EQ_STR(ld_udiff("same", 4, "same", 4, "a", "b", NULL, &a), "");
    ld_arena_release(&a);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_server_prep_sglang_vectors),
    LD_CASE(test_server_prep_refuses_bad_arguments),
    LD_CASE(test_server_prep_hf_is_identity),
    LD_CASE(test_server_flatten_tools),
    LD_CASE(test_content_format_like_sglang),
    LD_CASE(test_udiff_like_difflib),
    LD_CASE(test_udiff_shortens_long_runs_and_lines),
};

LD_TEST_MAIN(cases)
