/* test_request_json.c - a request record as JSON and back
 * (parse/request/request_json.c): texts of every kind of byte come back
 * exactly (valid UTF-8 as a JSON string, anything else as hex), with
 * their flags, cut and character counts; messages, tool calls and the
 * prompt; and a malformed object is an error naming the field. */
#include <string.h>

#include "parse/request/request_json.h"
#include "tests/support/ld_test.h"

static int same_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    if (!a || !b) return a == b;
    return an == bn && !memcmp(a, b, an) && b[bn] == 0;
}

static int same_text(const ld_text *a, const ld_text *b)
{
    return same_bytes(a->bytes, a->len, b->bytes, b->len) && a->cut == b->cut && a->n_chars == b->n_chars &&
           a->flags == b->flags;
}

static int same_cstr(const char *a, const char *b)
{
    return a && b ? !strcmp(a, b) : a == b;
}

/* JSON text -> record, through cJSON's printer and reader as a file does. */
static ld_request *round_trip(const ld_request *r)
{
    cJSON *j = ld_request_json(r);
    char *printed = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    cJSON *back = printed ? cJSON_Parse(printed) : NULL;
    free(printed);
    ld_request *out = NULL;
    ld_error e;
    ld_error_clear(&e);
    if (back && ld_request_from_json(back, &out, &e) != LD_OK) fprintf(stderr, "  %s\n", e.msg);
    cJSON_Delete(back);
    return out;
}

static ld_text text(const char *s, size_t len, unsigned flags)
{
    ld_text t = { s, len, 0, len, flags };
    return t;
}

static int test_request_json_bytes(void)
{
    /* an invalid byte, a lone surrogate as WTF-8, a NUL, 4-byte UTF-8 and
     * U+10FFFF, one past it (F4 90), an overlong slash, plain text */
    static const char odd[] = "a\xff" "b\xed\xa0\x80" "c\0d\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf";
    static const char *samples[] = { "plain \"quoted\" \\ \n\t\x01 text", "\xf4\x90\x80\x80", "\xc0\xaf", "",
                                     "\xe2\x82", "caf\xc3\xa9" };
    ld_arena a;
    ld_arena_init(&a, 0);
    for (size_t i = 0; i < 7; i++) {
        const char *s = i ? samples[i - 1] : odd;
        size_t n = i ? strlen(s) : sizeof odd - 1;
        cJSON *j = ld_json_bytes(s, n);
        char *p = cJSON_PrintUnformatted(j);
        cJSON *back = cJSON_Parse(p);
        const char *got = NULL;
        size_t len = 0;
        CHECK(back && ld_json_bytes_get(back, &a, &got, &len) == 0);
        CHECK_MSG(same_bytes(s, n, got, len), "sample %zu: %s", i, p);
        int plain = cJSON_IsString(j);
        CHECK_MSG(plain == (i == 1 || i == 4 || i == 6), "sample %zu printed as %s", i, p);
        free(p);
        cJSON_Delete(j);
        cJSON_Delete(back);
    }
    const char *got = (const char *)1;
    size_t len = 9;
    cJSON *null = cJSON_CreateNull();
    CHECK(ld_json_bytes_get(null, &a, &got, &len) == 0 && got == NULL && len == 0);
    cJSON_Delete(null);
    const char *bad[] = { "{\"hex\":\"abc\"}", "{\"hex\":\"zz\"}", "{\"hex\":\"00\",\"x\":1}", "{}", "12", "[]",
                          "{\"hex\":12}" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *j = cJSON_Parse(bad[i]);
        CHECK_MSG(ld_json_bytes_get(j, &a, &got, &len) != 0, "%s", bad[i]);
        cJSON_Delete(j);
    }
    ld_arena_release(&a);
    return 0;
}

static int test_request_json_record(void)
{
    static const char prompt[] = "<|im_start|>user\nhi \xff there<|im_end|>\n";
    ld_tool_call calls[2] = {
        { "call_1", "read_file", text("{\"path\": \"a.c\"}", 15, LD_TEXT_PRESENT), LD_TOOL_ARGS_OBJECT },
        { NULL, NULL, text("{\"x\": \"\xed\xb0\x80\"}", 12, LD_TEXT_PRESENT | LD_TEXT_TRUNCATED), 0 },
    };
    calls[1].arguments.cut = 7;
    ld_message msgs[3];
    memset(msgs, 0, sizeof msgs);
    msgs[0].role = "user";
    msgs[0].content = text("hi \xff there", 10, LD_TEXT_PRESENT);
    msgs[1].role = "assistant";
    msgs[1].content = text("", 0, LD_TEXT_PRESENT);
    msgs[1].reasoning_content = text("thinking", 8, LD_TEXT_PRESENT);
    msgs[1].tool_calls = calls;
    msgs[1].n_tool_calls = 2;
    msgs[2].role = "tool";
    msgs[2].tool_call_id = "call_1";
    msgs[2].name = "read_file";
    msgs[2].content = text(NULL, 0, LD_TEXT_NONE);
    msgs[2].n_tool_calls = 3; /* counted, not kept */
    ld_request r;
    memset(&r, 0, sizeof r);
    r.rid = "rid-\xc3\xa9";
    r.flags = LD_REQ_TRUNCATED | LD_REQ_JSON;
    r.messages = msgs;
    r.n_messages = 3;
    r.prompt = text(prompt, sizeof prompt - 1, LD_TEXT_PRESENT | LD_TEXT_TRUNCATED);
    r.prompt.cut = 12;
    r.prompt.n_chars = 999;
    ld_request *back = round_trip(&r);
    CHECK(back != NULL);
    CHECK(same_cstr(back->rid, r.rid) && back->flags == r.flags && back->n_messages == 3);
    CHECK(same_text(&back->prompt, &r.prompt));
    for (int i = 0; i < 3; i++) {
        const ld_message *m = &back->messages[i], *o = &msgs[i];
        CHECK_MSG(same_cstr(m->role, o->role) && same_text(&m->content, &o->content) &&
                  same_text(&m->reasoning_content, &o->reasoning_content) &&
                  same_cstr(m->tool_call_id, o->tool_call_id) && same_cstr(m->name, o->name) &&
                  m->n_tool_calls == o->n_tool_calls && !m->tool_calls == !o->tool_calls, "message %d", i);
    }
    for (int k = 0; k < 2; k++) {
        const ld_tool_call *c = &back->messages[1].tool_calls[k];
        CHECK_MSG(same_cstr(c->id, calls[k].id) && same_cstr(c->name, calls[k].name) &&
                  same_text(&c->arguments, &calls[k].arguments) && c->flags == calls[k].flags,
                  "call %d: len %zu cut %zu chars %llu flags %u", k, c->arguments.len, c->arguments.cut,
                  (unsigned long long)c->arguments.n_chars, c->arguments.flags);
    }
    ld_request_free(back);
    r.n_messages = -1; /* no message array known */
    r.messages = NULL;
    back = round_trip(&r);
    CHECK(back && back->n_messages == -1 && back->messages == NULL);
    ld_request_free(back);
    return 0;
}

static int test_request_json_errors(void)
{
    const char *bad[][2] = {
        { "[]", "(the record)" },
        { "{\"rid\":1,\"n_messages\":-1}", "rid" },
        { "{\"n_messages\":2,\"messages\":[{}]}", "messages" },
        { "{\"n_messages\":-2}", "n_messages" },
        { "{\"n_messages\":1.5}", "n_messages" },
        { "{\"n_messages\":-1,\"prompt\":{\"t\":\"ab\",\"c\":3}}", "c" },
        { "{\"n_messages\":-1,\"prompt\":\"ab\"}", "prompt" },
        { "{\"n_messages\":1,\"messages\":[{\"n_tool_calls\":2,\"tool_calls\":[{}]}]}", "tool_calls" },
        { "{\"n_messages\":1,\"messages\":[{\"role\":{\"hex\":\"6100\"}}]}", "role" },
        { "{\"n_messages\":1,\"messages\":[7]}", "messages" },
        { "{\"flags\":-1,\"n_messages\":-1}", "flags" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *j = cJSON_Parse(bad[i][0]);
        ld_request *r = NULL;
        ld_error e;
        ld_error_clear(&e);
        CHECK_MSG(j && ld_request_from_json(j, &r, &e) == LD_ERR_SYNTAX && !r, "%s", bad[i][0]);
        CHECK_MSG(strstr(e.msg, bad[i][1]) != NULL, "%s: %s", bad[i][0], e.msg);
        cJSON_Delete(j);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_request_json_bytes),
    LD_CASE(test_request_json_record),
    LD_CASE(test_request_json_errors),
};

LD_TEST_MAIN(cases)
