/* test_finding_json.c - a finding as JSON and back
 * (replay/analysis/finding_json.c): every field comes back exactly, an
 * evidence number that does not apply stays unset, excerpts with a log's
 * odd bytes survive; a kind this logdiff does not know, a bad severity or
 * a bad number is an error naming the field. */
#include <string.h>

#include "replay/analysis/finding_json.h"
#include "tests/support/ld_test.h"

static int same(const char *a, const char *b)
{
    return a && b ? !strcmp(a, b) : a == b;
}

static int test_finding_json_round_trip(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_findings in = { NULL, 0, 0 }, out = { NULL, 0, 0 };
    ld_finding *f = ld_findings_add(&in, &a, LD_K_HARNESS_STALE_ASSISTANT, LD_SEV_ERROR, 2, "message %d differs", 2);
    f->array_offset = 0;
    f->expected_len = 142;
    f->actual_len = -5;
    f->first_diff = 9007199254740991LL; /* 2^53 - 1: the largest a JSON number keeps */
    f->array_excerpt = "sent \xff back";
    f->prompt_excerpt = "lone \xed\xa0\x80 surrogate";
    f->related_rid = "demo-interrupted-1";
    f->unified_diff = "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n";
    ld_findings_add(&in, &a, LD_K_TEMPLATE_FAITHFUL, LD_SEV_INFO, -1, "same bytes");
    for (size_t i = 0; i < in.n; i++) {
        cJSON *j = ld_finding_json(&in.v[i]);
        char *p = cJSON_PrintUnformatted(j);
        cJSON *back = cJSON_Parse(p);
        ld_error e;
        ld_error_clear(&e);
        CHECK_MSG(ld_finding_from_json(back, &a, &out, &e) == LD_OK, "%s: %s", p, e.msg);
        free(p);
        cJSON_Delete(j);
        cJSON_Delete(back);
    }
    CHECK(out.n == 2);
    for (size_t i = 0; i < 2; i++) {
        const ld_finding *x = &in.v[i], *y = &out.v[i];
        CHECK(!strcmp(x->kind, y->kind) && x->severity == y->severity && x->message == y->message);
        CHECK(same(x->detail, y->detail) && same(x->array_excerpt, y->array_excerpt) &&
              same(x->prompt_excerpt, y->prompt_excerpt) && same(x->related_rid, y->related_rid) &&
              same(x->unified_diff, y->unified_diff));
        CHECK(x->array_offset == y->array_offset && x->prompt_offset == y->prompt_offset &&
              x->expected_len == y->expected_len && x->actual_len == y->actual_len && x->first_diff == y->first_diff);
    }
    CHECK(out.v[0].prompt_offset == LD_NO_VALUE && out.v[1].array_excerpt == NULL);
    ld_arena_release(&a);
    return 0;
}

static int test_finding_json_errors(void)
{
    const char *ok = "\"detail\":\"d\",\"array_offset\":null,\"prompt_offset\":null,\"expected_len\":null,"
                     "\"actual_len\":null,\"first_diff\":null";
    const char *bad[][2] = {
        { "{\"kind\":\"harness.nonsense\",\"severity\":\"error\",\"message\":1,%s}", "kind" },
        { "{\"kind\":\"log.truncated\",\"severity\":\"fatal\",\"message\":1,%s}", "severity" },
        { "{\"kind\":\"log.truncated\",\"severity\":\"info\",\"message\":-2,%s}", "message" },
        { "{\"kind\":\"log.truncated\",\"severity\":\"info\",\"message\":0.5,%s}", "message" },
        { "{\"kind\":\"log.truncated\",\"severity\":\"info\",\"message\":1,%s,\"array_excerpt\":3}", "array_excerpt" },
        { "{\"kind\":\"log.truncated\",\"severity\":\"info\",\"message\":1,\"detail\":null}", "detail" },
        { "[1]", "(the finding)" },
    };
    ld_arena a;
    ld_arena_init(&a, 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[600];
        snprintf(text, sizeof text, bad[i][0], ok);
        cJSON *j = cJSON_Parse(text);
        ld_findings list = { NULL, 0, 0 };
        ld_error e;
        ld_error_clear(&e);
        CHECK_MSG(j && ld_finding_from_json(j, &a, &list, &e) == LD_ERR_SYNTAX && list.n == 0, "%s", text);
        CHECK_MSG(strstr(e.msg, bad[i][1]) != NULL, "%s: %s", text, e.msg);
        cJSON_Delete(j);
    }
    ld_arena_release(&a);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_finding_json_round_trip),
    LD_CASE(test_finding_json_errors),
};

LD_TEST_MAIN(cases)
