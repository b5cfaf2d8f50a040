/* test_jsonline.c - the in-place reader of flat JSON objects: what it
 * takes, with the values cJSON would give, and what it leaves to cJSON
 * (escapes, nesting, numbers written otherwise, unknown or repeated
 * names, anything after a value that is not JSON). */
#include <cjson/cJSON.h>
#include <string.h>

#include "replay/analysis/jsonline.h"
#include "tests/include/json_escape_oracle.h"
#include "tests/support/ld_test.h"

enum { A, B, C, N };
static const ld_jl_name names[N] = { LD_JL_NAME("a"), LD_JL_NAME("bb"), LD_JL_NAME("ccc") };

/* Reads s whole: 1 when taken (the object and nothing after it). */
static int take(const char *s, ld_jl_value *v)
{
    const char *end = s + strlen(s), *after = ld_jl_object(s, end, names, N, v);
    return after == end;
}

/* A taken object's values are cJSON's. */
static int same_as_cjson(const char *s)
{
    ld_jl_value v[N];
    if (!take(s, v)) return 0;
    cJSON *o = cJSON_Parse(s);
    int ok = o != NULL;
    for (int i = 0; ok && i < N; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, names[i].s);
        switch (v[i].type) {
        case LD_JL_ABSENT: ok = !j; break;
        case LD_JL_STRING: ok = cJSON_IsString(j) && strlen(j->valuestring) == v[i].len &&
                                !memcmp(j->valuestring, v[i].s, v[i].len); break;
        case LD_JL_NUMBER: ok = cJSON_IsNumber(j) && j->valuedouble == (double)v[i].num; break;
        case LD_JL_NULL: ok = cJSON_IsNull(j); break;
        case LD_JL_TRUE: ok = cJSON_IsTrue(j); break;
        case LD_JL_FALSE: ok = cJSON_IsFalse(j); break;
        case LD_JL_STRINGS: {
            ok = cJSON_IsArray(j) && (uint64_t)cJSON_GetArraySize(j) == v[i].num;
            size_t pos = 0, len;
            const char *e;
            for (const cJSON *k = ok ? j->child : NULL; ok && k; k = k->next)
                ok = cJSON_IsString(k) && ld_jl_next_string(&v[i], &pos, &e, &len) && strlen(k->valuestring) == len &&
                     !memcmp(k->valuestring, e, len);
            ok = ok && !ld_jl_next_string(&v[i], &pos, &e, &len);
            break;
        }
        }
    }
    cJSON_Delete(o);
    return ok;
}

static int test_jsonline_takes(void)
{
    const char *taken[] = {
        "{}",
        "{\"a\":\"x\",\"bb\":12,\"ccc\":null}",
        "{ \"ccc\" : true , \"a\" : \"\" }",
        "{\"bb\":[],\"a\":[\"k1\", \"k2\"],\"ccc\":false}",
        "{\"a\":\"caf\xc3\xa9 \xff bytes cJSON passes through\"}",
        "{\"bb\":999999999999999}",
        "{\"bb\":0}",
    };
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++)
        CHECK_MSG(same_as_cjson(taken[i]), "%s", taken[i]);
    ld_jl_value v[N];
    CHECK(take("{\"bb\":[\"x\",\"yz\"],\"a\":\"q\"}", v));
    CHECK(v[B].type == LD_JL_STRINGS && v[B].num == 2 && v[A].type == LD_JL_STRING && v[C].type == LD_JL_ABSENT);
    return 0;
}

static int test_jsonline_leaves(void)
{
    const char *left[] = {
        "{\"a\":\"x\\\"y\"}",          /* an escape */
        "{\"a\":\"x\ty\"}",            /* a control byte */
        "{\"a\":{\"bb\":1}}",          /* nested */
        "{\"a\":[1]}",                 /* an array of other than strings */
        "{\"a\":[\"x\",]}",
        "{\"bb\":-1}", "{\"bb\":1.0}", "{\"bb\":1e3}", "{\"bb\":01}", "{\"bb\":1234567890123456}",
        "{\"a\":1,\"a\":2}",            /* repeated */
        "{\"d\":1}",                    /* not the caller's */
        "{\"\\u0061\":1}",              /* a name written with an escape */
        "{\"a\":nul}", "{\"a\":truex}", "{\"a\":1", "{\"a\":1,}", "{\"a\" 1}", "\t{\"a\":1}", "[1]",
        "{\"a\":\"x\"} trailing",      /* taken, but not whole */
    };
    for (size_t i = 0; i < sizeof left / sizeof *left; i++) {
        ld_jl_value v[N];
        CHECK_MSG(!take(left[i], v), "%s", left[i]);
    }
    static const char nul[] = "{\"a\":\"x\0y\"}"; /* cJSON's string would end at the NUL */
    ld_jl_value v[N];
    CHECK(!ld_jl_object(nul, nul + sizeof nul - 1, names, N, v));
    return 0;
}

/* A string value's end is found by include/ld_json_escape.h's scan, 32
 * bytes a step: every byte value at every place of strings past two steps
 * (plain bytes around it) is taken exactly when json.dumps does not escape
 * it (CPython's table, tests/include/json_escape_oracle.h), its bytes then
 * the value, as cJSON reads them (checked for some). */
static int test_jsonline_every_byte_in_a_string(void)
{
    static const char plain[] = "abc xyz-0123:{}[],'/~\x7f";
    char s[96];
    for (size_t n = 1; n <= 72; n++)
        for (size_t at = 0; at < n; at++)
            for (unsigned b = 0; b < 256; b++) {
                memcpy(s, "{\"a\":\"", 6);
                for (size_t k = 0; k < n; k++) s[6 + k] = plain[(k * 7 + n) % (sizeof plain - 1)];
                s[6 + at] = (char)b;
                memcpy(s + 6 + n, "\"}", 3);
                const char *end = s + 6 + n + 2;
                ld_jl_value v[N];
                int taken = ld_jl_object(s, end, names, N, v) == end, plain_byte = !json_escape_oracle[b].escapes;
                CHECK_MSG(taken == plain_byte, "byte %#x at %zu of %zu", b, at, n);
                if (!taken) continue;
                CHECK(v[A].type == LD_JL_STRING && v[A].s == s + 6 && v[A].len == n);
                if (at % 8 == 0) CHECK_MSG(same_as_cjson(s), "byte %#x at %zu of %zu", b, at, n);
            }
    return 0;
}

static int test_jsonline_hex(void)
{
    uint64_t h = 0;
    CHECK(ld_jl_hex16("0123456789abcdef", 16, 1, &h) && h == 0x0123456789abcdefull);
    CHECK(ld_jl_hex16("FEDCBA9876543210", 16, 0, &h) && h == 0xfedcba9876543210ull);
    CHECK(!ld_jl_hex16("FEDCBA9876543210", 16, 1, &h));
    CHECK(!ld_jl_hex16("0123456789abcdeg", 16, 0, &h));
    CHECK(!ld_jl_hex16("0123456789abcde", 15, 0, &h));
    CHECK(!ld_jl_hex16(" 123456789abcdef", 16, 0, &h));
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_jsonline_takes),
    LD_CASE(test_jsonline_leaves),
    LD_CASE(test_jsonline_every_byte_in_a_string),
    LD_CASE(test_jsonline_hex),
};

LD_TEST_MAIN(cases)
