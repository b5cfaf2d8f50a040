/* test_dsenc.c - the DeepSeek-V3.2 / V4 prompt encoders (replay/template/deepseek/dsenc*.c)
 * against SGLang's own encoders: every case of testdata/replay/dsenc/
 * {v32,v4}.json (tools/gen_dsenc_cases.py) must give the same bytes, or be
 * refused when SGLang refuses it; plus hand-written checks of the API.
 * Running the executable with a case-name fragment as argument runs only the
 * matching test functions. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/deepseek/dsenc.h"
#include "tests/support/ld_test.h"

/* Prints up to 60 bytes of `s` around `off`, escaping control bytes. */
static void excerpt(const char *label, const char *s, size_t n, size_t off)
{
    size_t from = off > 30 ? off - 30 : 0, to = off + 30 < n ? off + 30 : n;
    fprintf(stderr, "    %s ...", label);
    for (size_t i = from; i < to; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n') fputs("\\n", stderr);
        else if (ch < 0x20) fprintf(stderr, "\\x%02x", ch);
        else fputc(ch, stderr);
    }
    fputs("...\n", stderr);
}

static int run_case(ld_dsenc_variant variant, const cJSON *c)
{
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *expect = cJSON_GetObjectItem(c, "expect"), *error = cJSON_GetObjectItem(c, "error");
    char *out = NULL;
    size_t n = 0;
    ld_error err;
    ld_error_clear(&err);
    ld_status s = ld_dsenc_render(variant, cJSON_GetObjectItem(c, "request"), 1, &out, &n, &err);
    int rc = 0;
    if (error) {
        if (s != LD_ERR_MISMATCH)
            rc = 1, fprintf(stderr, "  %s: want the refusal \"%s\", got status %d (%s)\n", name, error->valuestring,
                            (int)s, s == LD_OK ? "rendered" : err.msg);
        else if (strncmp(err.msg, "message ", 8) != 0 && strncmp(err.msg, "request: ", 9) != 0)
            rc = 1, fprintf(stderr, "  %s: refusal '%s' names neither a message nor the request\n", name, err.msg);
    } else if (s != LD_OK) {
        rc = 1, fprintf(stderr, "  %s: refused (%s)\n", name, err.msg);
    } else {
        const char *want = expect->valuestring;
        size_t wn = strlen(want), off = 0;
        while (off < n && off < wn && out[off] == want[off]) off++;
        if (off != n || off != wn) {
            rc = 1;
            fprintf(stderr, "  %s: differs at byte %zu (got %zu bytes, want %zu)\n", name, off, n, wn);
            excerpt("want", want, wn, off);
            excerpt("got ", out, n, off);
        }
    }
    free(out);
    return rc;
}

static int run_file(ld_dsenc_variant variant, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/replay/dsenc/%s", LD_TESTDATA_DIR, file);
    char *js = ld_test_slurp(path);
    cJSON *all = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK_MSG(all, "cannot read %s", path);
    int failed = 0, n = 0;
    for (const cJSON *c = all->child; c; c = c->next, n++) failed += run_case(variant, c);
    cJSON_Delete(all);
    fprintf(stderr, "  %s: %d of %d cases match\n", file, n - failed, n);
    CHECK(n >= 20);
    CHECK_EQ_INT(failed, 0);
    return 0;
}

static int test_dsenc_v32_cases(void) { return run_file(LD_DSENC_V32, "v32.json"); }
static int test_dsenc_v4_cases(void) { return run_file(LD_DSENC_V4, "v4.json"); }

/* Renders the JSON text `req`; returns the status, output in *out. */
static ld_status render(ld_dsenc_variant v, const char *req, int gen, char **out, ld_error *err)
{
    cJSON *j = cJSON_Parse(req);
    size_t n = 0;
    ld_error_clear(err);
    ld_status s = ld_dsenc_render(v, j, gen, out, &n, err);
    cJSON_Delete(j);
    return s;
}

static int test_dsenc_usage_errors(void)
{
    char *out = NULL;
    ld_error err;
    CHECK_EQ_INT(render(LD_DSENC_V32, "[1, 2]", 1, &out, &err), LD_ERR_USAGE);
    CHECK(out == NULL);
    CHECK_EQ_INT(render(LD_DSENC_V4, "{\"messages\": \"hi\"}", 1, &out, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(render(LD_DSENC_V4, "{}", 1, &out, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(render((ld_dsenc_variant)7, "{\"messages\": []}", 1, &out, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_dsenc_render(LD_DSENC_V4, NULL, 1, &out, &(size_t){ 0 }, &err), LD_ERR_USAGE);
    return 0;
}

static int test_dsenc_refusal_names_message(void)
{
    char *out = NULL;
    ld_error err;
    const char *req = "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                      "\"content\": \"\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": \"{x\"}}]}, "
                      "{\"role\": \"user\", \"content\": \"k\"}]}";
    CHECK_EQ_INT(render(LD_DSENC_V32, req, 1, &out, &err), LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "message 1") != NULL, "%s", err.msg);
    CHECK_EQ_INT(render(LD_DSENC_V4, "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
                                     "\"developer\", \"content\": \"\"}]}", 1, &out, &err), LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "message 1") != NULL, "%s", err.msg);
    return 0;
}

/* add_generation_prompt = 0 leaves out the final assistant hand-off. */
static int test_dsenc_no_generation_prompt(void)
{
    const char *req = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                      "\"chat_template_kwargs\": {\"thinking\": true}}";
    char *with = NULL, *without = NULL;
    ld_error err;
    CHECK_EQ_INT(render(LD_DSENC_V4, req, 1, &with, &err), LD_OK);
    CHECK_EQ_INT(render(LD_DSENC_V4, req, 0, &without, &err), LD_OK);
    CHECK_EQ_STR(with, "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c><\xef\xbd\x9cUser\xef\xbd\x9c>"
                       "Hi<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>");
    CHECK(strlen(without) < strlen(with) && strncmp(with, without, strlen(without)) == 0);
    CHECK(strstr(without, "Assistant") == NULL);
    free(with);
    free(without);
    CHECK_EQ_INT(render(LD_DSENC_V32, req, 0, &without, &err), LD_OK);
    CHECK(strstr(without, "Assistant") == NULL);
    free(without);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_dsenc_v32_cases),
    LD_CASE(test_dsenc_v4_cases),
    LD_CASE(test_dsenc_usage_errors),
    LD_CASE(test_dsenc_refusal_names_message),
    LD_CASE(test_dsenc_no_generation_prompt),
};

LD_TEST_MAIN(cases)
