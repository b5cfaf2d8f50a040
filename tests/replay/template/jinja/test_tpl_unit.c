/* test_tpl_unit.c - unit tests of the template interpreter: lexer
 * whitespace rules, loops, scoping, expressions, slicing, every filter, test
 * and method implemented, and errors with their template line.  Expected
 * values come from Python jinja2 (tools/gen_tpl_unit_cases.py ->
 * testdata/replay/tpl/cases.json); a case whose name contains the argument
 * filter runs alone. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "replay/template/jinja/tpl.h"

static int run_case(const cJSON *c)
{
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const char *src = cJSON_GetObjectItem(c, "template")->valuestring;
    const cJSON *expect = cJSON_GetObjectItem(c, "expect"), *error = cJSON_GetObjectItem(c, "error");
    const cJSON *eline = cJSON_GetObjectItem(c, "error_line");
    ld_tpl *t = NULL;
    ld_error err;
    ld_error_clear(&err);
    ld_status s = ld_tpl_compile(src, strlen(src), &t, &err);
    char *out = NULL;
    size_t n = 0;
    ld_arena a;
    ld_arena_init(&a, 0);
    if (s == LD_OK) {
        ld_tpl_value *ctx = ld_tpl_value_from_json(&a, cJSON_GetObjectItem(c, "context"));
        s = ld_tpl_render(t, ctx, NULL, &out, &n, &err);
    }
    int rc = 0;
    if (error) {
        if (s == LD_OK) rc = 1, fprintf(stderr, "  %s: rendered \"%s\", Python raised %s\n", name, out, error->valuestring);
        else if (eline && err.line != (uint64_t)eline->valueint)
            rc = 1, fprintf(stderr, "  %s: error at line %llu, want line %d (%s)\n", name, (unsigned long long)err.line,
                            eline->valueint, err.msg);
        else if (strstr(error->valuestring, "TemplateError: ") == error->valuestring) {
            char want[300];
            snprintf(want, sizeof want, "'%s'", error->valuestring + 15);
            if (!strstr(err.msg, want)) rc = 1, fprintf(stderr, "  %s: message %s lacks %s\n", name, err.msg, want);
        }
        if (!rc && !strstr(err.msg, "column")) rc = 1, fprintf(stderr, "  %s: no column in '%s'\n", name, err.msg);
    } else if (s != LD_OK) {
        rc = 1, fprintf(stderr, "  %s: line %llu: %s\n", name, (unsigned long long)err.line, err.msg);
    } else if (strlen(expect->valuestring) != n || memcmp(out, expect->valuestring, n) != 0) {
        rc = 1, fprintf(stderr, "  %s:\n    want \"%s\"\n    got  \"%s\"\n", name, expect->valuestring, out);
    }
    free(out);
    ld_arena_release(&a);
    ld_tpl_free(t);
    return rc;
}

static int run_prefix(const char *prefix)
{
    char *js = ld_test_slurp(LD_TESTDATA_DIR "/replay/tpl/cases.json");
    cJSON *all = js ? cJSON_Parse(js) : NULL;
    /* keep whole floats (2.0) floats, as Python's json does */
    CHECK(all && ld_tpl_json_keep_floats(all, js, strlen(js)) == LD_OK);
    free(js);
    int failed = 0, n = 0;
    for (const cJSON *c = all->child; c; c = c->next) {
        if (strncmp(cJSON_GetObjectItem(c, "name")->valuestring, prefix, strlen(prefix)) != 0) continue;
        n++;
        failed += run_case(c);
    }
    cJSON_Delete(all);
    CHECK(n > 0);
    CHECK_EQ_INT(failed, 0);
    return 0;
}

static int test_tpl_whitespace(void) { return run_prefix("ws_"); }
static int test_tpl_loops(void) { return run_prefix("loop_"); }
static int test_tpl_scoping(void) { return run_prefix("scope_"); }
static int test_tpl_macros(void) { return run_prefix("macro_"); }
static int test_tpl_expressions(void) { return run_prefix("expr_"); }
static int test_tpl_tests(void) { return run_prefix("tests"); }
static int test_tpl_filters(void) { return run_prefix("f_"); }
static int test_tpl_methods(void) { return run_prefix("m_"); }
static int test_tpl_globals(void) { return run_prefix("g_"); }
static int test_tpl_errors(void) { return run_prefix("err_"); }
static int test_tpl_statements(void) { return run_prefix("stmt_"); }

/* sandbox limits end in LD_ERR_LIMIT, not a crash or a hang */
static int test_tpl_limits(void)
{
    static const char *const srcs[] = {
        "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
        "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
        "{% for i in range(10000) %}{{ 'xxxxxxxxxx' * 100 }}{% endfor %}",
    };
    ld_tpl_limits lim = {8, 10000, 100000, 0, NULL, NULL};
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        ld_tpl *t;
        ld_error err;
        char *out = NULL;
        size_t n;
        CHECK(ld_tpl_compile(srcs[i], strlen(srcs[i]), &t, &err) == LD_OK);
        CHECK_EQ_INT(ld_tpl_render(t, NULL, &lim, &out, &n, &err), LD_ERR_LIMIT);
        CHECK(out == NULL);
        ld_tpl_free(t);
    }
    return 0;
}

/* Python's ints are unbounded: a result beyond 64 bits is refused, never
 * wrapped around */
static int test_tpl_int_overflow(void)
{
    static const char *const srcs[] = {
        "{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 - 2 }}", "{{ 4294967296 * 4294967296 }}",
        "{{ 3 ** 41 }}", "{{ 0x7FFFFFFFFFFFFFFF * 2 }}", "{{ 99999999999999999999 }}",
    };
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        ld_tpl *t = NULL;
        ld_error err;
        char *out = NULL;
        size_t n;
        ld_status s = ld_tpl_compile(srcs[i], strlen(srcs[i]), &t, &err);
        if (s == LD_OK) s = ld_tpl_render(t, NULL, NULL, &out, &n, &err);
        CHECK_MSG(s == LD_ERR_UNSUPPORTED, "%s: status %d", srcs[i], (int)s);
        CHECK(out == NULL);
        ld_tpl_free(t);
    }
    const char *ok = "{{ 3 ** 39 }} {{ (-2) ** 63 }} {{ 0 ** 5 }} {{ (-1) ** 1001 }}";
    ld_tpl *t = NULL;
    ld_error err;
    char *out = NULL;
    size_t n;
    CHECK(ld_tpl_compile(ok, strlen(ok), &t, &err) == LD_OK);
    CHECK(ld_tpl_render(t, NULL, NULL, &out, &n, &err) == LD_OK);
    CHECK_EQ_STR(out, "4052555153018976267 -9223372036854775808 0 -1");
    free(out);
    ld_tpl_free(t);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_tpl_whitespace), LD_CASE(test_tpl_loops),   LD_CASE(test_tpl_scoping),
    LD_CASE(test_tpl_macros),     LD_CASE(test_tpl_expressions), LD_CASE(test_tpl_tests),
    LD_CASE(test_tpl_filters),    LD_CASE(test_tpl_methods), LD_CASE(test_tpl_globals),
    LD_CASE(test_tpl_errors),     LD_CASE(test_tpl_statements), LD_CASE(test_tpl_limits),
    LD_CASE(test_tpl_int_overflow),
};

LD_TEST_MAIN(cases)
