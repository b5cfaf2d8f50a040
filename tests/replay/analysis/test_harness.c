/* test_harness.c - per-request checks (replay/analysis/harness.c) over the SGLang logs
 * of testdata/replay/harness (tools/gen_harness_fixtures.py decides the
 * expected findings from how each request was built), plus a few records
 * fed line by line to check details and evidence. */
#include <math.h>

#include "harness_fixture.h"

static int test_harness_fixture_classic_interrupt(void) { return hf_fixture("classic-interrupt"); }
static int test_harness_fixture_tools(void) { return hf_fixture("tools"); }
static int test_harness_fixture_level1(void) { return hf_fixture("level1"); }
static int test_harness_fixture_logger_cut(void) { return hf_fixture("logger-cut"); }
static int test_harness_fixture_unpaired(void) { return hf_fixture("unpaired"); }
static int test_harness_fixture_parse_errors(void) { return hf_fixture("parse-errors"); }
static int test_harness_fixture_repetition(void) { return hf_fixture("repetition"); }
static int test_harness_fixture_healthy(void) { return hf_fixture("healthy"); }

/* ------------------------------------------------------------ line by line */

typedef struct one {
    ld_request *recs[8];
    int n;
} one;

static int keep(void *ctx, ld_request *r)
{
    one *o = ctx;
    if (o->n >= 8) return 0;
    o->recs[o->n++] = r;
    return LD_PAIR_TAKE;
}

/* Pairs the lines (member "m") into o; returns the number of bad lines. */
static int pair_lines(one *o, const char *const *lines, size_t n)
{
    ld_pair_options opt = {0};
    opt.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_ERROR_RECORDS;
    ld_pairer *p;
    ld_error e;
    if (ld_pairer_new(&opt, keep, o, &p, &e)) return -1;
    int bad = 0;
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        ld_line l = {lines[i], strlen(lines[i]), i + 1, off, 0, 0, 0, NULL, 0};
        ld_line_result res;
        if (ld_pairer_feed_line(p, "m", &l, &res, &e) != LD_OK) bad++;
        off += l.len + 1;
    }
    ld_pairer_finish(p, &e);
    ld_pairer_free(p);
    return bad;
}

static void one_free(one *o)
{
    for (int i = 0; i < o->n; i++) ld_request_free(o->recs[i]);
}

static const ld_finding *find_kind(const ld_findings *f, const char *kind)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].kind, kind)) return &f->v[i];
    return NULL;
}

#define OPENAI(msgs) "Receive OpenAI: obj={'model': 'm', 'messages': [" msgs "], 'temperature': 0.9, 'top_p': 0.8}"
#define RECV(rid) "Receive: obj=G(rid='" rid "', text=None, input_ids=[1, 2])"
#define FIN(rid, out, fin) "Finish: obj=G(rid='" rid "', text='S U again V', input_ids=[1, 2]), out={'text': " out \
    ", 'output_ids': [5], 'meta_info': {'finish_reason': " fin ", 'completion_tokens': 1}}"

static int test_harness_empty_assistant_detail(void)
{
    static const char *const L[] = {
        OPENAI("{'role': 'system', 'content': 'S'}, {'role': 'user', 'content': 'U'}, "
               "{'role': 'assistant', 'content': '\\n\\t ', 'reasoning_content': 'I was thinking'}, "
               "{'role': 'user', 'content': 'again'}, {'role': 'assistant', 'content': None, "
               "'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{}'}}]}, "
               "{'role': 'tool', 'tool_call_id': 'c1', 'content': 'r'}, {'role': 'assistant', 'content': ''}"),
        RECV("e1"),
        FIN("e1", "'ok'", "{'type': 'stop', 'matched': 2}"),
    };
    one o = {0};
    CHECK_EQ_INT(pair_lines(&o, L, 3), 0);
    CHECK_EQ_INT(o.n, 1);
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_findings f = {0};
    CHECK(ld_harness_check(o.recs[0], &a, &f, NULL) == LD_OK);
    /* message 2 (whitespace, reasoning kept) fires; message 4 has a tool call;
     * message 6 is the trailing prefill */
    CHECK_EQ_INT(f.n, 1);
    CHECK_EQ_STR(f.v[0].kind, LD_K_HARNESS_EMPTY_ASSISTANT);
    CHECK_EQ_INT(f.v[0].message, 2);
    CHECK(f.v[0].severity == LD_SEV_ERROR);
    CHECK(strstr(f.v[0].detail, "whitespace only") && strstr(f.v[0].detail, "reasoning_content holds 14 bytes"));
    CHECK(!strcmp(ld_verdict_of(&f), "harness"));
    ld_arena_release(&a);
    one_free(&o);
    return 0;
}

static int test_harness_text_blank_rule(void)
{
    ld_text t = {0};
    CHECK(ld_harness_text_blank(&t)); /* absent */
    t.flags = LD_TEXT_NONE;
    CHECK(ld_harness_text_blank(&t));
    t = (ld_text){" \r\n\t\v\f", 6, 6, 6, LD_TEXT_PRESENT};
    CHECK(ld_harness_text_blank(&t));
    t = (ld_text){" . ", 3, 3, 3, LD_TEXT_PRESENT};
    CHECK(!ld_harness_text_blank(&t));
    t = (ld_text){"\xc2\xa0", 2, 2, 1, LD_TEXT_PRESENT}; /* NBSP is content */
    CHECK(!ld_harness_text_blank(&t));
    t = (ld_text){NULL, 0, 0, 9, LD_TEXT_PRESENT | LD_TEXT_ABBREVIATED};
    CHECK(!ld_harness_text_blank(&t));
    t = (ld_text){NULL, 0, 0, 0, LD_TEXT_PRESENT | LD_TEXT_NOT_KEPT};
    CHECK(ld_harness_text_blank(&t));
    return 0;
}

static int test_harness_orphan_tool_evidence(void)
{
    static const char *const L[] = {
        OPENAI("{'role': 'user', 'content': 'U'}, {'role': 'assistant', 'content': '', 'tool_calls': ["
               "{'id': 'c1', 'type': 'function', 'function': {'name': 'ls', 'arguments': {'d': '.'}}}, "
               "{'id': 'c2', 'type': 'function', 'function': {'name': 'cat', 'arguments': '{\"f\": 1}'}}]}, "
               "{'role': 'tool', 'tool_call_id': 'c1', 'content': 'a'}, "
               "{'role': 'tool', 'tool_call_id': 'c7', 'content': 'b'}, {'role': 'user', 'content': 'V'}"),
        RECV("o1"),
        FIN("o1", "'ok'", "{'type': 'stop', 'matched': 2}"),
    };
    one o = {0};
    CHECK_EQ_INT(pair_lines(&o, L, 3), 0);
    const ld_request *r = o.recs[0];
    CHECK_EQ_INT(r->messages[1].n_tool_calls, 2);
    CHECK_EQ_STR(r->messages[1].tool_calls[0].arguments.bytes, "{\"d\": \".\"}");
    CHECK(r->messages[1].tool_calls[0].flags & LD_TOOL_ARGS_OBJECT);
    CHECK_EQ_STR(r->messages[1].tool_calls[1].arguments.bytes, "{\"f\": 1}");
    CHECK(!(r->messages[1].tool_calls[1].flags & LD_TOOL_ARGS_OBJECT));
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_findings f = {0};
    CHECK(ld_harness_check(r, &a, &f, NULL) == LD_OK);
    CHECK_EQ_INT(f.n, 2);
    CHECK_EQ_STR(f.v[0].kind, LD_K_HARNESS_ORPHAN_TOOL); /* c7: unknown id */
    CHECK_EQ_INT(f.v[0].message, 3);
    CHECK(strstr(f.v[0].detail, "'c7'"));
    CHECK_EQ_INT(f.v[1].message, 1); /* c2: never answered before message 4 */
    CHECK(strstr(f.v[1].detail, "c2") && strstr(f.v[1].detail, "message 4"));
    ld_arena_release(&a);
    one_free(&o);
    return 0;
}

static int test_harness_unpaired_and_parse_error_details(void)
{
    static const char *const L[] = {
        RECV("u1"),
        "Finish: obj=G(rid='u2', text='x'), out={'text': 'y', 'meta_info': {}}",
        "Receive: obj=G(rid='u3 unterminated", /* cut inside its rid: nothing to read */
    };
    one o = {0};
    CHECK_EQ_INT(pair_lines(&o, L, 3), 1);
    CHECK_EQ_INT(o.n, 3);
    int seen = 0;
    for (int i = 0; i < o.n; i++) {
        ld_arena a;
        ld_arena_init(&a, 0);
        ld_findings f = {0};
        CHECK(ld_harness_check(o.recs[i], &a, &f, NULL) == LD_OK);
        const ld_request *r = o.recs[i];
        if (r->flags & LD_REQ_ERROR) {
            const ld_finding *x = find_kind(&f, LD_K_LOG_PARSE_ERROR);
            CHECK(x && f.n == 1 && strstr(x->detail, "m:3:"));
            seen |= 1;
        } else if (!strcmp(r->rid, "u1")) {
            const ld_finding *x = find_kind(&f, LD_K_LOG_UNPAIRED);
            CHECK(x && strstr(x->detail, "missing finish") && strstr(x->detail, "client disconnect") &&
                  strstr(x->detail, "EXCEEDED_MS") && strstr(x->detail, "n>1"));
            CHECK(!strcmp(ld_verdict_of(&f), "log"));
            seen |= 2;
        } else {
            const ld_finding *x = find_kind(&f, LD_K_LOG_UNPAIRED);
            CHECK(x && strstr(x->detail, "missing receive") && strstr(x->detail, "another file"));
            seen |= 4;
        }
        ld_arena_release(&a);
    }
    CHECK_EQ_INT(seen, 7);
    one_free(&o);
    return 0;
}

static int test_harness_repetition_detail(void)
{
    char line[4096], out[1600] = "";
    for (int i = 0; i < 40; i++) strcat(out, "I will now check the file. ");
    snprintf(line, sizeof line,
             "Finish: obj=G(rid='r1', text='p', sampling_params={'temperature': 1.3, 'top_p': 0.9}), "
             "out={'text': '%s', 'meta_info': {'finish_reason': {'type': 'length', 'length': 9}}}", out);
    const char *L[] = {RECV("r1"), line};
    one o = {0};
    CHECK_EQ_INT(pair_lines(&o, L, 2), 0);
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_findings f = {0};
    CHECK(ld_harness_check(o.recs[0], &a, &f, NULL) == LD_OK);
    const ld_finding *x = find_kind(&f, LD_K_SAMPLING_REPETITION);
    CHECK(x && f.n == 2 && find_kind(&f, LD_K_LOG_NO_MESSAGES)); /* a /generate request: info */
    CHECK(strstr(x->detail, "\"I will now check the file. \""));
    CHECK(strstr(x->detail, "temperature 1.3") && strstr(x->detail, "top_p 0.9"));
    CHECK(strstr(x->detail, "repeated 40 times"));
    CHECK_EQ_INT(x->expected_len, 27);
    CHECK(!strcmp(ld_verdict_of(&f), "sampling"));
    ld_arena_release(&a);
    one_free(&o);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_harness_fixture_classic_interrupt),
    LD_CASE(test_harness_fixture_tools),
    LD_CASE(test_harness_fixture_level1),
    LD_CASE(test_harness_fixture_logger_cut),
    LD_CASE(test_harness_fixture_unpaired),
    LD_CASE(test_harness_fixture_parse_errors),
    LD_CASE(test_harness_fixture_repetition),
    LD_CASE(test_harness_fixture_healthy),
    LD_CASE(test_harness_empty_assistant_detail),
    LD_CASE(test_harness_text_blank_rule),
    LD_CASE(test_harness_orphan_tool_evidence),
    LD_CASE(test_harness_unpaired_and_parse_error_details),
    LD_CASE(test_harness_repetition_detail),
};

LD_TEST_MAIN(cases)
