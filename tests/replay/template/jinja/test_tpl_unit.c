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
        /* tojson written straight into the output: still capped by it */
        "{% set s = 'x' * 60000 %}{{ s | tojson }}{{ s | tojson }}",
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

/* Renders src under lim (NULL: the defaults); the status, the output freed,
 * the error's message copied into msg */
static ld_status render_msg(const char *src, const ld_tpl_limits *lim, char *msg, size_t msz, char **out)
{
    ld_tpl *t = NULL;
    ld_error err;
    size_t n;
    ld_error_clear(&err);
    *out = NULL;
    ld_status s = ld_tpl_compile(src, strlen(src), &t, &err);
    if (s == LD_OK) s = ld_tpl_render(t, NULL, lim, out, &n, &err);
    snprintf(msg, msz, "%s", err.msg);
    ld_tpl_free(t);
    return s;
}

/* Each srcs[i][0] must fail with LD_ERR_LIMIT, its message beginning with
 * srcs[i][1] (the filter) and naming `limit`. */
static int expect_limit_errors(const char *const (*srcs)[2], size_t n, const ld_tpl_limits *lim,
                               const char *limit)
{
    for (size_t i = 0; i < n; i++) {
        char msg[256], *out;
        ld_status s = render_msg(srcs[i][0], lim, msg, sizeof msg, &out);
        free(out);
        CHECK_MSG(s == LD_ERR_LIMIT, "%s: status %d (%s)", srcs[i][0], (int)s, msg);
        CHECK_MSG(strstr(msg, srcs[i][1]) == msg && strstr(msg, limit), "%s: %s", srcs[i][0], msg);
    }
    return 0;
}

/* A result past the memory limit is refused with LD_ERR_LIMIT naming the
 * filter and the limit, never cut short, and before it is built: these
 * would take a gigabyte and seconds to minutes each (the test would hang
 * if the size were found after the work). */
static int test_tpl_limits_charged_first(void)
{
    static const char *const srcs[][2] = {
        {"{{ '%.1000000000f' | format(1.0) }}", "format: "},
        {"{{ '%1000000000d' | format(1) }}", "format: "},
        {"{{ '%-1000000000s|' | format('x') }}", "format: "},
        {"{{ '%.1000000000d' | format(1) }}", "format: "},
        {"{{ 'x' | center(1000000000) }}", "center: "},
        {"{{ '{:1000000000}'.format('x') }}", "str.format: "},
        {"{{ '{:.1000000000f}'.format(1.0) }}", "str.format: "},
        {"{{ 'a\nb' | indent(1000000000) }}", "indent: "},
        {"{{ ('x\n' * 100000) | indent(' ' * 10000) }}", "indent: "},
        {"{{ {'a': 1} | tojson(indent=1000000000) }}", "tojson: "},
        {"{{ ('x' * 1000) | replace('', 'y' * 1000000) }}", "replace: "},
        {"{{ ('x' * 1000) | replace('x', 'y' * 1000000) }}", "replace: "},
        {"{{ 'x' | batch(1000000000, 'y') | list }}", "batch: "},
        {"{{ [1] | slice(1000000000) | list }}", "slice: "},
        {"{{ [1] * 1000000000 }}", "'*': "},
        {"{{ range(1000) | join('x' * 1000000) }}", "join: "},
        {"{{ ('x' * 1000000).join(range(1000) | map('string')) }}", "str.join: "},
    };
    return expect_limit_errors(srcs, sizeof srcs / sizeof srcs[0], NULL, "memory limit of 536870912 bytes");
}

/* Under a small memory limit: what fits is made in full, what does not is
 * refused as the memory grows; a string doubled again and again by
 * replace stops at the replace that would pass the limit */
static int test_tpl_limits_memory(void)
{
    ld_tpl_limits lim = {0, 0, 0, (size_t)4 << 20, NULL, NULL};
    char msg[256], *out;
    CHECK_EQ_INT(render_msg("{{ 'ab' | center(300000) | length }}|{{ '%300000d' | format(7) | length }}", &lim, msg, sizeof msg, &out), LD_OK);
    CHECK_EQ_STR(out, "300000|300000");
    free(out);
    static const char *const srcs[][2] = {
        {"{{ 'x' | center(5000000) }}", "center: "},
        {"{{ '%5000000s' | format('x') }}", "format: "},
        {"{{ '{:>5000000}'.format('x') }}", "str.format: "},
        {"{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s | replace('a', 'aa') %}{% endfor %}", "replace: "},
        {"{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s | replace('b', 'bb') %}{% endfor %}", "replace: "},
        {"{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s | center(ns.s | length * 2) %}{% endfor %}", "center: "},
        {"{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ('a\n' ~ ns.s) | indent(ns.s | length) %}{% endfor %}", "indent: "},
        /* a list holding one string many times prints far more than it holds */
        {"{% set s = 'x' * 100000 %}{{ ([s] * 100) | string }}", "str(): "},
        {"{% set s = 'x' * 100000 %}{{ ([s] * 100) | tojson }}", "tojson: "},
        {"{% set s = 'x' * 100000 %}{{ ([s] * 100) | join }}", "join: "},
    };
    return expect_limit_errors(srcs, sizeof srcs / sizeof srcs[0], &lim, "memory limit of 4194304 bytes");
}

/* Conversions to int whose value Python holds as a big int: refused with
 * the value in the message (LD_ERR_UNSUPPORTED, as arithmetic beyond 64
 * bits), never undefined behaviour or a wrapped number.  The digits are
 * Python's: int(1e30) == 1000000000000000019884624838656. */
static int test_tpl_int_conversions_beyond_64_bits(void)
{
    static const char *const srcs[][2] = {
        {"{{ '99999999999999999999' | int }}", "99999999999999999999"},
        {"{{ '-9223372036854775809' | int }}", "-9223372036854775809"},
        {"{{ '9223372036854775808' | int }}", "9223372036854775808"},
        {"{{ '0x10000000000000000' | int(base=16) }}", "0x10000000000000000"},
        {"{{ 1e30 | int }}", "1000000000000000019884624838656"},
        {"{{ '1e30' | int }}", "1000000000000000019884624838656"},
        {"{{ 9.3e18 | int }}", "9300000000000000000"},
        {"{{ '%d' | format(1e30) }}", "1000000000000000019884624838656"},
        {"{{ '%i' | format(-1e19) }}", "-10000000000000000000"},
        {"{{ ((-2) ** 63) | abs }}", "9223372036854775808"},
        {"{{ [2 ** 62, 2 ** 62] | sum }}", "beyond 64 bits"},
    };
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        char msg[256], *out;
        ld_status s = render_msg(srcs[i][0], NULL, msg, sizeof msg, &out);
        CHECK_MSG(s == LD_ERR_UNSUPPORTED, "%s: status %d, output %s (%s)", srcs[i][0], (int)s, out ? out : "-", msg);
        free(out);
        CHECK_MSG(strstr(msg, "beyond 64 bits") && strstr(msg, srcs[i][1]), "%s: %s", srcs[i][0], msg);
    }
    return 0;
}

/* src rendered with the context `ctx_json`: its output, or its error
 * message (both NUL-terminated into buf); the status */
static ld_status render_ctx(const char *src, const char *ctx_json, char *buf, size_t size)
{
    ld_tpl *t = NULL;
    ld_error err;
    ld_arena a;
    char *out = NULL;
    size_t n;
    ld_error_clear(&err);
    ld_arena_init(&a, 0);
    cJSON *j = cJSON_Parse(ctx_json);
    ld_tpl_value *ctx = j ? ld_tpl_value_from_json(&a, j) : NULL;
    ld_status s = ctx ? ld_tpl_compile(src, strlen(src), &t, &err) : LD_ERR_USAGE;
    if (s == LD_OK) s = ld_tpl_render(t, ctx, NULL, &out, &n, &err);
    snprintf(buf, size, "%s", s == LD_OK ? out : err.msg);
    free(out);
    ld_tpl_free(t);
    cJSON_Delete(j);
    ld_arena_release(&a);
    return s;
}

/* The evaluator's fast paths give what the general ones give (expected
 * values from Python jinja2 3.1.6 as transformers sets it up): `{{ a + b +
 * ... }}` written piece by piece, with the errors of a sum that is not all
 * strings; a loop's scope emptied between iterations; names and attribute
 * keys matched by pointer or by bytes; an attribute named like a mutating
 * method refused only on the type that has the method (a list's on a dict is
 * the dict's key, as in Python). */
static int test_tpl_fast_paths(void)
{
    static const char *const words =
        "{\"d\": {\"append\": \"K\", \"pop\": \"K\", \"insert\": \"K\", \"extend\": \"K\", \"remove\": \"K\", "
        "\"clear\": \"K\", \"sort\": \"K\", \"reverse\": \"K\", \"update\": \"K\", \"setdefault\": \"K\", "
        "\"popitem\": \"K\", \"get\": \"K\", \"items\": \"K\", \"keys\": \"K\", \"values\": \"K\", "
        "\"index\": \"K\", \"count\": \"K\", \"role\": \"K\", \"content\": \"K\"}, \"x\": \"X\"}";
    static const char *const ok[][2] = {
        {"{% for w in ['append', 'pop', 'insert', 'extend', 'remove', 'clear', 'sort', 'reverse', 'update', "
         "'setdefault', 'popitem', 'get', 'items', 'keys', 'values', 'index', 'count', 'role', 'content'] %}"
         "{{ (d[w] == 'K') | string | first }}{% endfor %}", "TTTTTTTTTTTTTTTTTTT"},
        {"{{ (d.append == 'K') | string | first }}{{ (d.pop == 'K') | string | first }}"
         "{{ (d.insert == 'K') | string | first }}{{ (d.extend == 'K') | string | first }}"
         "{{ (d.remove == 'K') | string | first }}{{ (d.clear == 'K') | string | first }}"
         "{{ (d.sort == 'K') | string | first }}{{ (d.reverse == 'K') | string | first }}"
         "{{ (d.update == 'K') | string | first }}{{ (d.setdefault == 'K') | string | first }}"
         "{{ (d.popitem == 'K') | string | first }}{{ (d.get == 'K') | string | first }}"
         "{{ (d.items == 'K') | string | first }}{{ (d.keys == 'K') | string | first }}"
         "{{ (d.values == 'K') | string | first }}{{ (d.index == 'K') | string | first }}"
         "{{ (d.count == 'K') | string | first }}{{ (d.role == 'K') | string | first }}"
         "{{ (d.content == 'K') | string | first }}", "TFTTTFTTFFFFFFFTTTT"},
        {"{{ [1, 2].update is defined }}{{ [1].append is defined }}", "FalseFalse"},
        {"{{ 'a' + 'b' + 'c' }}|{{ [1] + [2] + [3] }}|{{ 1 + 2 + 3 }}|{{ 'a' + x + ('c' | upper) }}", "abc|[1, 2, 3]|6|aXC"},
        {"{% for x in ['a', 'b'] %}{% if x == 'b' %}{{ y is defined }}{% endif %}{% set y = 1 %}{% endfor %}", "False"},
        {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{{ loop.index }}{% endfor %}", "3172"},
        {"{% set ns = namespace(a=1, b=2) %}{% set ns.b = 5 %}{% set ns.c = 3 %}{{ ns.a }}{{ ns.b }}{{ ns.c }}", "153"},
        {"{{ '  x ' | trim }}|{{ 'y' | trim }}|{{ x | trim }}", "x|y|X"},
    };
    static const char *const bad[][2] = {
        {"{{ 'a' + 1 + 'b' }}", "can only concatenate str (not \"int\") to str"},
        {"{{ 'a' + 'b' + 1 }}", "can only concatenate str (not \"int\") to str"},
        {"{{ 1 + 'a' + 'b' }}", "unsupported operand type(s) for +: 'int' and 'str'"},
        {"{{ 'a' + undefined_x + 'b' }}", "'undefined_x' is undefined"},
    };
    char buf[512];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ld_status s = render_ctx(ok[i][0], words, buf, sizeof buf);
        CHECK_MSG(s == LD_OK && strcmp(buf, ok[i][1]) == 0, "%s: status %d, got \"%s\", want \"%s\"", ok[i][0], (int)s,
                  buf, ok[i][1]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_status s = render_ctx(bad[i][0], words, buf, sizeof buf);
        CHECK_MSG(s == LD_ERR_MISMATCH && strstr(buf, bad[i][1]), "%s: status %d, %s", bad[i][0], (int)s, buf);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_tpl_whitespace), LD_CASE(test_tpl_loops),   LD_CASE(test_tpl_scoping),
    LD_CASE(test_tpl_macros),     LD_CASE(test_tpl_expressions), LD_CASE(test_tpl_tests),
    LD_CASE(test_tpl_filters),    LD_CASE(test_tpl_methods), LD_CASE(test_tpl_globals),
    LD_CASE(test_tpl_errors),     LD_CASE(test_tpl_statements), LD_CASE(test_tpl_limits),
    LD_CASE(test_tpl_int_overflow), LD_CASE(test_tpl_limits_charged_first), LD_CASE(test_tpl_limits_memory),
    LD_CASE(test_tpl_int_conversions_beyond_64_bits), LD_CASE(test_tpl_fast_paths),
};

LD_TEST_MAIN(cases)
