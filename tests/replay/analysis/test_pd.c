/* test_pd.c - template.servers_differ (replay/analysis/pd.c): what a
 * prefill/decode pair's two servers logged differently, with its evidence. */
#include <stdio.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "parse/pair/pair.h"
#include "replay/analysis/pd.h"

static ld_request *got;

static int take(void *ctx, ld_request *r)
{
    (void)ctx;
    if (got) return 0;
    got = r;
    return LD_PAIR_TAKE;
}

static void feed(ld_pairer *p, const char *member, const char *line)
{
    ld_line l = {line, strlen(line), 1, 0, 0, 0, 0, NULL, 0};
    ld_line_result res;
    ld_error e;
    ld_pairer_feed_line(p, member, &l, &res, &e);
}

/* one server's OpenAI, Receive and Finish lines for room 42 */
static void serve(ld_pairer *p, const char *member, const char *rid, const char *user,
                  const char *prompt, int prefill)
{
    char line[2048];
    snprintf(line, sizeof line, "Receive OpenAI: obj={'bootstrap_host': 'h', 'bootstrap_room': 42, "
             "'messages': [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': '%s'}]}", user);
    feed(p, member, line);
    snprintf(line, sizeof line, "Receive: obj=G(rid='%s', text='%s', bootstrap_host='h', bootstrap_room=42)", rid, prompt);
    feed(p, member, line);
    snprintf(line, sizeof line, "Finish: obj=G(rid='%s', text='%s', bootstrap_host='h', bootstrap_room=42), "
             "out={'text': 'ok', 'output_ids': [%s], 'meta_info': {'finish_reason': %s}}", rid, prompt,
             prefill ? "1" : "1, 2", prefill ? "{'type': 'length', 'length': 0}" : "{'type': 'stop'}");
    feed(p, member, line);
}

static ld_request *pair_of(const char *user_p, const char *prompt_p, const char *user_d, const char *prompt_d)
{
    ld_pair_options o = {0};
    o.flags = LD_PAIR_KEEP_TEXT;
    ld_pairer *p = NULL;
    ld_error e;
    got = NULL;
    if (ld_pairer_new(&o, take, NULL, &p, &e) != LD_OK) return NULL;
    serve(p, "prefill.log", "p1", user_p, prompt_p, 1);
    serve(p, "decode.log", "d1", user_d, prompt_d, 0);
    ld_pairer_finish(p, &e);
    ld_pairer_free(p);
    return got;
}

static ld_arena arena; /* the findings' */

/* ld_pd_check's findings for r; n is SIZE_MAX when it failed */
static ld_findings findings_of(const ld_request *r)
{
    ld_findings f = {0};
    ld_error e;
    if (ld_pd_check(r, &arena, &f, &e) != LD_OK) f.n = (size_t)-1;
    return f;
}

static int test_pd_prompts_differ(void)
{
    ld_request *r = pair_of("Where?", "<sys>Be brief.</sys><u>Where?</u>", "Where?", "<sys>Be brief</sys><u>Where?</u>");
    CHECK(r && r->peer);
    CHECK_EQ_INT(r->pd, LD_PD_JOINED | LD_PD_DIFF_PROMPT);
    ld_arena_init(&arena, 0);
    ld_findings f = findings_of(r);
    CHECK_EQ_INT(f.n, 1);
    CHECK_EQ_STR(f.v[0].kind, LD_K_TEMPLATE_SERVERS_DIFFER);
    CHECK(f.v[0].severity == LD_SEV_ERROR && f.v[0].message == -1);
    CHECK_EQ_STR(f.v[0].related_rid, "p1");
    CHECK_EQ_INT(f.v[0].first_diff, 13); /* "<sys>Be brief" then '<' against '.' */
    CHECK(strstr(f.v[0].detail, "prefill.log:1") && strstr(f.v[0].detail, "different templated prompts for"));
    CHECK(strstr(f.v[0].array_excerpt, "brief.</sys>") && strstr(f.v[0].prompt_excerpt, "brief</sys>"));
    CHECK_EQ_STR(ld_verdict_of(&f), "template");
    ld_arena_release(&arena);
    ld_request_free(r);
    return 0;
}

static int test_pd_messages_differ(void)
{
    /* (an OpenAI line joins its server's request only when its last user
     * message is in that server's prompt) */
    ld_request *r = pair_of("Where now?", "<u>Where now?</u>", "Where?", "<u>Where?</u>");
    CHECK(r && r->peer);
    CHECK_EQ_INT(r->pd, LD_PD_JOINED | LD_PD_DIFF_MESSAGES | LD_PD_DIFF_PROMPT);
    ld_arena_init(&arena, 0);
    ld_findings f = findings_of(r);
    CHECK(f.n == 1 && f.v[0].message == 1 && strstr(f.v[0].detail, "different message arrays and templated prompts for"));
    CHECK_EQ_INT(f.v[0].first_diff, 8); /* "<u>Where" then " now" against "?" */
    ld_arena_release(&arena);
    ld_request_free(r);
    return 0;
}

static int test_pd_same_is_silent(void)
{
    ld_request *r = pair_of("Where?", "<u>Where?</u>", "Where?", "<u>Where?</u>");
    CHECK(r && r->peer && r->pd == LD_PD_JOINED);
    ld_arena_init(&arena, 0);
    ld_findings f = findings_of(r);
    CHECK_EQ_INT(f.n, 0);
    ld_arena_release(&arena);
    ld_request_free(r);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_pd_prompts_differ),
    LD_CASE(test_pd_messages_differ),
    LD_CASE(test_pd_same_is_silent),
};

LD_TEST_MAIN(cases)
