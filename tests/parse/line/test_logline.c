/* test_logline.c - recognition of request-log lines (prefixes, kinds), JSON
 * truncation markers, vLLM fields and error offsets.  Expected values are
 * written by hand from ../shared/docs/log-formats.md. */
#include <string.h>

#include "tests/support/ld_test.h"
#include "parse/line/logline.h"
#include "parse/line/logline_scan.h"
#include "parse/pylit/pylit_scan.h"

typedef struct kind_case {
    const char *line;
    ld_logline_kind kind;
    const char *ts; /* NULL = none */
} kind_case;

static const kind_case KINDS[] = {
    {"[2025-03-03 17:53:04] Receive: obj=GenerateReqInput(rid='a')", LD_LOGLINE_SG_RECEIVE,
     "2025-03-03 17:53:04"},
    {"[2025-03-03 17:53:04.123 DP0 TP1 EP1] Finish: obj=G(rid='a'), out={}", LD_LOGLINE_SG_FINISH,
     "2025-03-03 17:53:04.123"},
    {"[16:43:29 TP0] Receive: obj=G(rid='a')", LD_LOGLINE_SG_RECEIVE, "16:43:29"},
    {"Receive OpenAI: obj={'model': 'm'}", LD_LOGLINE_SG_OPENAI, NULL},
    {"Receive OpenAI: obj={'model': 'm'}, headers={'x-smg-routing-key': 'k'}", LD_LOGLINE_SG_OPENAI, NULL},
    {"2025-05-14T17:45:10.901234567Z stdout F [2025-05-14 17:45:10] Receive: obj=G()",
     LD_LOGLINE_SG_RECEIVE, "2025-05-14 17:45:10"},
    {"2025-05-14 17:45:10.901 1647689 kserve.trace Receive: obj=G()", LD_LOGLINE_SG_RECEIVE,
     "2025-05-14 17:45:10.901"},
    {" in=GenerateReqInput(text=None), out={}", LD_LOGLINE_SG_INOUT, NULL},
    {"Config logging: obj=ConfigureLoggingReq(log_requests=True)", LD_LOGLINE_OTHER, NULL},
    {"error: 'Receive: obj=G()' in a message", LD_LOGLINE_OTHER, NULL},
    {"[2025-03-03 17:53:04] INFO:     10.27.1.1:65179 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
     LD_LOGLINE_OTHER, NULL},
    {"[2025-11-03 18:48:33 TP0] Prefill batch, #new-seq: 1, #new-token: 64", LD_LOGLINE_OTHER, NULL},
    {"", LD_LOGLINE_OTHER, NULL},
    {"INFO 04-10 03:35:45 [logger.py:39] Received request c-1: prompt: 'x', params: "
     "SamplingParams(n=1), prompt_token_ids: None, lora_request: None.",
     LD_LOGLINE_VLLM_RECEIVED, "04-10 03:35:45"},
    {"(APIServer pid=9) DEBUG 02-13 11:33:33 [logger.py:50] Request c-1 details: prompt: 'x', "
     "prompt_token_ids: [1], prompt_embeds shape: None.",
     LD_LOGLINE_VLLM_DETAILS, "02-13 11:33:33"},
    {"INFO 02-13 11:33:34 [logger.py:60] Generated response c-1 (streaming complete): output: 'y', "
     "output_token_ids: [2, 3], finish_reason: stop",
     LD_LOGLINE_VLLM_GENERATED, "02-13 11:33:34"},
    {"INFO 02-02 09:05:42 async_llm_engine.py:110] Finished request cmpl-1.", LD_LOGLINE_OTHER, NULL},
    {"{\"timestamp\": \"2026-03-15T10:00:00\", \"event\": \"request.received\", \"rid\": \"a\", "
     "\"obj\": {\"rid\": \"a\"}}",
     LD_LOGLINE_SG_RECEIVE, "2026-03-15T10:00:00"},
    {"{\"timestamp\": \"2026-03-15T10:00:00\", \"event\": \"request.received.openai\", \"obj\": {}}",
     LD_LOGLINE_SG_OPENAI, "2026-03-15T10:00:00"},
    {"{\"timestamp\": \"2026-03-15T10:00:00\", \"event\": \"request.finished\", \"rid\": \"a\", "
     "\"obj\": {}, \"out\": {}}",
     LD_LOGLINE_SG_FINISH, "2026-03-15T10:00:00"},
    {"{\"level\": \"info\", \"msg\": \"hello\"}", LD_LOGLINE_OTHER, NULL},
    /* start-up lines, every era: not fragments of a request (issue 29).  SGLang
     * prints `server_args=` + the ServerArgs dataclass's repr (0.5.23:
     * entrypoints/engine.py:311; the same since 2024) and the scheduler's
     * capacities (managers/scheduler.py:1269; older builds end at context_len) */
    {"[2024-11-25 00:47:01] server_args=ServerArgs(model_path='m', tokenizer_path='m', tokenizer_mode='auto', "
     "skip_tokenizer_init=False, load_format='auto', trust_remote_code=False, dtype='auto')", LD_LOGLINE_OTHER, NULL},
    {"[2026-02-27 14:33:04] server_args=ServerArgs(model_path='/m/', tokenizer_path='/m/', tokenizer_mode='auto', "
     "tokenizer_worker_num=1, skip_tokenizer_init=False, load_format='auto', model_loader_extra_config='{}', "
     "stream_interval=1, stream_output=False, lora_paths=None)", LD_LOGLINE_OTHER, NULL},
    {"[2025-02-17 05:27:24 TP0] max_total_num_tokens=712400, chunked_prefill_size=8192, max_prefill_tokens=16384, "
     "max_running_requests=50, context_len=163840", LD_LOGLINE_OTHER, NULL},
    {"[2025-08-11 17:17:03] max_total_num_tokens=665690, chunked_prefill_size=8192, max_prefill_tokens=16384, "
     "max_running_requests=4096, context_len=65536, available_gpu_mem=13.50 GB", LD_LOGLINE_OTHER, NULL},
    {"[2026-05-13 02:13:59 DP0 TP0 EP0] Load weight end. type=DeepseekV4ForCausalLM, dtype=torch.bfloat16, "
     "avail mem=61.10 GB, mem usage=74.52 GB.", LD_LOGLINE_OTHER, NULL},
    /* vLLM: LLMEngine's and EngineCore's "with config:", the CLI's args */
    {"INFO 04-18 10:00:00 llm_engine.py:98] Initializing an LLM engine (v0.4.1) with config: model='m', "
     "speculative_config=None, tokenizer='m', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None",
     LD_LOGLINE_OTHER, NULL},
    {"INFO 05-01 10:00:00 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model='m', "
     "speculative_config=None, tokenizer='m', skip_tokenizer_init=False, tokenizer_mode=auto, dtype=torch.bfloat16",
     LD_LOGLINE_OTHER, NULL},
    {"INFO 03-07 12:29:02 api_server.py:912] args: Namespace(subparser='serve', model_tag='x', config='', "
     "host=None, port=8000, uvicorn_log_level='info')", LD_LOGLINE_OTHER, NULL},
    {"INFO 05-01 10:00:00 [cli_args.py:300] non-default args: {'model': 'm', 'max_model_len': 8192}",
     LD_LOGLINE_OTHER, NULL},
    /* and a fragment still is one: it begins inside a record's fields */
    {"t_processor=None, bootstrap_host=None, bootstrap_port=None, bootstrap_room=None, stream=True",
     LD_LOGLINE_FRAGMENT, NULL},
};

static int test_logline_kinds_and_prefixes(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) {
        const kind_case *c = &KINDS[i];
        ld_logline l;
        ld_error e;
        ld_error_clear(&e);
        ld_arena_reset(&a);
        ld_status st = ld_logline_parse(c->line, strlen(c->line), 0, &a, &l, &e);
        if (c->kind == LD_LOGLINE_FRAGMENT) { /* recognised, and never parsed */
            CHECK_MSG(st != LD_OK && strstr(e.msg, "starts inside a request record"), "case %zu", i);
            ld_logline_classify(c->line, strlen(c->line), &l);
            CHECK_MSG(l.kind == LD_LOGLINE_FRAGMENT, "case %zu: kind %d", i, (int)l.kind);
            continue;
        }
        CHECK_MSG(st == LD_OK, "case %zu: %s", i, e.msg);
        CHECK_MSG(l.kind == c->kind, "case %zu: kind %d want %d", i, (int)l.kind, (int)c->kind);
        if (c->ts) {
            CHECK_MSG(l.ts && l.ts_len == strlen(c->ts) && !memcmp(l.ts, c->ts, l.ts_len),
                      "case %zu: ts '%.*s'", i, (int)l.ts_len, l.ts ? l.ts : "");
        } else if (c->kind != LD_LOGLINE_OTHER) {
            CHECK_MSG(!l.ts, "case %zu: unexpected ts", i);
        }
    }
    ld_arena_release(&a);
    return 0;
}

static int test_logline_sglang_fields(void)
{
    const char *line = "[2026-01-01 00:00:00] Finish: obj=GenerateReqInput(rid='r1', text='ab' ... 'yz'), "
                       "headers={'x-smg-routing-key': 'k'}, out={'text': 'ok', 'meta_info': {}}";
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_logline l;
    ld_error e;
    CHECK(ld_logline_parse(line, strlen(line), 0, &a, &l, &e) == LD_OK);
    CHECK(l.kind == LD_LOGLINE_SG_FINISH);
    CHECK(l.obj && l.obj->kind == LD_PY_CALL);
    CHECK(l.headers && l.headers->kind == LD_PY_DICT);
    CHECK(l.out && l.out->kind == LD_PY_DICT);
    const ld_py_value *t = ld_py_call_get(l.obj, "text");
    CHECK(t && t->kind == LD_PY_TRUNC);
    CHECK_EQ_INT(l.body_off, strlen("[2026-01-01 00:00:00] Finish: "));
    ld_arena_release(&a);
    return 0;
}

static int test_logline_json_truncation(void)
{
    /* half = 4: a cut string has 2*4+3 = 11 characters, a cut list 2*4+1 = 9 items */
    const char *line = "{\"timestamp\": \"t\", \"event\": \"request.received\", \"rid\": \"a\", \"obj\": "
                       "{\"cut\": \"ABCD...MNOP\", \"long\": \"ABCD...MNOPQ\", \"lit\": \"...\", "
                       "\"cjk\": \"\u4f60\u597d\u4f60\u597d...\u4f60\u597d\u4f60\u597d\", "
                       "\"l\": [0, 1, 2, 3, \"...\", 6, 7, 8, 9], \"m\": [0, 1, \"...\", 3]}}";
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_logline l;
    ld_error e;
    CHECK(ld_logline_parse(line, strlen(line), 4, &a, &l, &e) == LD_OK);
    CHECK(l.json && l.kind == LD_LOGLINE_SG_RECEIVE);
    const ld_py_value *cut = ld_py_dict_get(l.obj, "cut");
    CHECK(cut && cut->kind == LD_PY_TRUNC);
    CHECK(cut->u.items[0].n == 4 && !memcmp(cut->u.items[0].u.raw, "ABCD", 4));
    CHECK(cut->u.items[1].n == 4 && !memcmp(cut->u.items[1].u.raw, "MNOP", 4));
    CHECK(cut->u.items[0].flags & LD_PY_F_JSON);
    CHECK(ld_py_dict_get(l.obj, "long")->kind == LD_PY_STR);
    CHECK(ld_py_dict_get(l.obj, "lit")->kind == LD_PY_STR);
    const ld_py_value *cjk = ld_py_dict_get(l.obj, "cjk");
    CHECK(cjk && cjk->kind == LD_PY_TRUNC && cjk->u.items[0].n == 12);
    const ld_py_value *lst = ld_py_dict_get(l.obj, "l");
    CHECK(lst && lst->kind == LD_PY_LIST && lst->n == 9);
    CHECK(lst->u.items[4].kind == LD_PY_ELLIPSIS);
    CHECK(lst->u.items[5].kind == LD_PY_INT && lst->u.items[5].u.i == 6);
    const ld_py_value *m = ld_py_dict_get(l.obj, "m");
    CHECK(m && m->u.items[2].kind == LD_PY_STR);
    CHECK(l.rid && l.rid->kind == LD_PY_STR);
    ld_arena_release(&a);
    return 0;
}

static int test_logline_vllm_fields(void)
{
    const char *line = "INFO 02-02 09:05:41 async_llm_engine.py:431] Received request cmpl-1-0: "
                       "prompt: 'a\\nb', prefix_pos: None,sampling params: SamplingParams(n=1, "
                       "temperature=0.5, max_tokens=5), prompt token ids: [1, 2, 3], lora_request: None.";
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_logline l;
    ld_error e;
    CHECK(ld_logline_parse(line, strlen(line), 0, &a, &l, &e) == LD_OK);
    CHECK(l.kind == LD_LOGLINE_VLLM_RECEIVED);
    CHECK(l.vllm_rid_len == 8 && !memcmp(l.vllm_rid, "cmpl-1-0", 8));
    CHECK(l.vllm_prompt && l.vllm_prompt->kind == LD_PY_STR);
    CHECK(l.vllm_params && l.vllm_params->kind == LD_PY_CALL);
    CHECK(l.vllm_prompt_ids && l.vllm_prompt_ids->n == 3);
    const char *gen = "INFO 02-13 11:33:34 [logger.py:60] Generated response c-1 (streaming delta): "
                      "output: 'y', output_token_ids: [2], finish_reason: None";
    ld_arena_reset(&a);
    CHECK(ld_logline_parse(gen, strlen(gen), 0, &a, &l, &e) == LD_OK);
    CHECK(l.kind == LD_LOGLINE_VLLM_GENERATED && l.vllm_streaming == 1);
    CHECK(l.vllm_finish_len == 4 && !memcmp(l.vllm_finish, "None", 4));
    ld_arena_release(&a);
    return 0;
}

static int test_logline_error_offsets(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_logline l;
    ld_error e;
    /* cut inside a string literal: error at the end of the line, message
     * names where the literal started (line-relative) */
    const char *cut = "[2025-02-20 16:56:30] Receive: obj=GenerateReqInput(text='Who is";
    size_t q = (size_t)(strchr(cut, '\'') - cut);
    ld_error_clear(&e);
    ld_status st = ld_logline_parse(cut, strlen(cut), 0, &a, &l, &e);
    CHECK(st == LD_ERR_TRUNCATED || st == LD_ERR_SYNTAX);
    CHECK_EQ_INT(e.offset, strlen(cut));
    char want[32];
    snprintf(want, sizeof want, "byte %zu", q);
    CHECK_MSG(strstr(e.msg, want) != NULL, "msg '%s' lacks '%s'", e.msg, want);
    /* a syntax error in the middle */
    const char *bad = "Receive: obj=G(rid='a', x=@)";
    ld_arena_reset(&a);
    ld_error_clear(&e);
    CHECK(ld_logline_parse(bad, strlen(bad), 0, &a, &l, &e) == LD_ERR_SYNTAX);
    CHECK_EQ_INT(e.offset, (size_t)(strchr(bad, '@') - bad));
    /* a line that starts inside a record */
    const char *frag = "t_processor=None, bootstrap_host=None, bootstrap_port=None, priority=35)";
    ld_arena_reset(&a);
    ld_error_clear(&e);
    st = ld_logline_parse(frag, strlen(frag), 0, &a, &l, &e);
    CHECK(st == LD_ERR_TRUNCATED && l.kind == LD_LOGLINE_FRAGMENT);
    CHECK_EQ_INT(e.offset, 0);
    /* JSON cut at the end */
    const char *js = "{\"timestamp\": \"t\", \"event\": \"request.received\", \"rid\": \"a\", \"obj\": {\"text\": \"abc";
    ld_arena_reset(&a);
    ld_error_clear(&e);
    st = ld_logline_parse(js, strlen(js), 0, &a, &l, &e);
    CHECK(st == LD_ERR_TRUNCATED || st == LD_ERR_SYNTAX);
    CHECK(e.msg[0]);
    /* vLLM prompt cut */
    const char *vl = "INFO 04-10 03:35:45 [logger.py:39] Received request c-1: prompt: 'abc";
    ld_arena_reset(&a);
    ld_error_clear(&e);
    st = ld_logline_parse(vl, strlen(vl), 0, &a, &l, &e);
    CHECK(st == LD_ERR_TRUNCATED || st == LD_ERR_SYNTAX);
    CHECK_EQ_INT(e.offset, strlen(vl));
    ld_arena_release(&a);
    return 0;
}

static int test_logline_long_other_line_is_cheap(void)
{
    /* a long line without a marker in its first window is OTHER even if a
     * marker appears far later */
    size_t n = 200000;
    char *s = malloc(n + 64);
    CHECK(s);
    memset(s, 'x', n);
    strcpy(s + n, " Receive: obj=G()");
    ld_logline l;
    ld_logline_classify(s, strlen(s), &l);
    free(s);
    CHECK(l.kind == LD_LOGLINE_OTHER);
    return 0;
}

/* A line cut for good is read up to its last whole field: cut inside a
 * nested dict, inside a string, right after a comma, and a Finish line cut
 * in its out= before out's first field (obj is whole) */
static int test_logline_cut_for_good(void)
{
    static const struct {
        const char *line;
        const char *last_field; /* the last field kept in obj (NULL: none checked) */
        const char *gone;       /* a field the cut took */
        const char *field;      /* ld_logline.cut_field's start */
        int has_out;
    } cases[] = {
        {"[2026-05-30 18:57:08] Receive: obj=GenerateReqInput(rid='r1', text=None, sampling_params={'a': 1, 'b",
         "text", "sampling_params", "sampling_params", 0},
        {"[t] Receive: obj=GenerateReqInput(rid='r2', text='it\\'s, a (cut", "rid", "text", "text", 0},
        {" in=GenerateReqInput(text=None, rid='r3', return_logprob=False,", "return_logprob", NULL, "", 0},
        {"[t] Finish: obj=GenerateReqInput(rid='r4', stream=True), out={'text", "stream", NULL, "out", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ld_arena a;
        ld_arena_init(&a, 0);
        ld_logline l;
        ld_error e;
        const char *line = cases[i].line;
        CHECK_MSG(ld_logline_parse(line, strlen(line), 0, &a, &l, &e) == LD_ERR_TRUNCATED, "case %zu: whole", i);
        CHECK_MSG(ld_logline_parse_cut(line, strlen(line), 0, &a, &l, &e) == LD_OK, "case %zu: %s", i, e.msg);
        CHECK_EQ_INT(l.cut_at, strlen(line));
        const ld_py_value *rid = ld_py_call_get(l.obj, "rid");
        CHECK_MSG(rid && rid->kind == LD_PY_STR, "case %zu: rid", i);
        if (cases[i].last_field) CHECK_MSG(ld_py_call_get(l.obj, cases[i].last_field), "case %zu: kept", i);
        if (cases[i].gone) CHECK_MSG(!ld_py_call_get(l.obj, cases[i].gone), "case %zu: gone", i);
        CHECK_MSG(!strncmp(l.cut_field + strspn(l.cut_field, " "), cases[i].field, strlen(cases[i].field)),
                  "case %zu: cut field '%.*s'", i, (int)l.cut_field_len, l.cut_field);
        CHECK_MSG(!l.out == !cases[i].has_out, "case %zu: out", i);
        ld_arena_release(&a);
    }
    /* nothing whole before the cut, and a line that is whole */
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_logline l;
    ld_error e;
    const char *early = "[t] Receive: obj=GenerateReqInput(rid='r5";
    CHECK(ld_logline_parse_cut(early, strlen(early), 0, &a, &l, &e) == LD_ERR_TRUNCATED);
    ld_arena_release(&a);
    return 0;
}

/* ------------------------------------------------------------ literal scan
 * ld_literal_feed (SIMD, 16, 32 or 64 bytes a step, at every level the
 * machine has) against the rules applied
 * one byte at a time, with every structural byte at every block offset and
 * the text fed in pieces. */

static void ref_structural(ld_literal_scan *o, char ch, uint64_t at)
{
    if (ch == '\'' || ch == '"') {
        o->quote = ch;
    } else if (ch == '(' || ch == '[' || ch == '{') {
        if (!o->depth++) {
            o->outer = ch == '(' ? ')' : ch == '[' ? ']' : '}';
            o->field_end = 0;
        }
    } else if (ch == ')' || ch == ']' || ch == '}') {
        if (!o->depth) o->active = 0;
        else o->depth--;
    } else if (ch == ',') {
        if (o->depth == 1) o->field_end = at;
        else if (!o->depth) o->value_end = at;
    }
}

static void ref_feed(ld_literal_scan *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && o->active; i++) {
        if (!o->quote) ref_structural(o, s[i], o->fed + i);
        else if (o->escape) o->escape = 0;
        else if (s[i] == '\\') o->escape = 1;
        else if (s[i] == o->quote) o->quote = 0;
    }
    o->fed += n;
}

static int same_scan(const ld_literal_scan *a, const ld_literal_scan *b)
{
    CHECK_EQ_INT(a->active, b->active);
    CHECK_EQ_INT(a->depth, b->depth);
    CHECK_EQ_INT(a->quote, b->quote);
    CHECK_EQ_INT(a->escape, b->escape);
    CHECK_EQ_INT(a->fed, b->fed);
    if (!a->active) return 0; /* where it stopped: the rest is not looked at */
    CHECK_EQ_INT(a->outer, b->outer);
    CHECK_EQ_INT(a->field_end, b->field_end);
    CHECK_EQ_INT(a->value_end, b->value_end);
    return 0;
}

static int test_logline_literal_scan_blocks(void)
{
    static const char base[] =
        "{'ids': [151644, 8948, 198, 2610, 525, 1207, 2, 33, 444, 5555, 66666, 7, 88, 999, 1010, 11, "
        "12, 131313, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25], 'text': 'it\\'s \\\\ a \"q\" "
        "(not) [a] {bracket}, ok', \"d\": \"x'y\\\"z\", 'n': (1, 2), 'e': {}}, 7, {'k': [1]}";
    static const char subst[] = { '\'', '"', '(', ')', '[', ']', '{', '}', ',', '\\', 'x', '7' };
    char buf[sizeof base];
    size_t n = sizeof base - 1;
    uint32_t r = 77;
    for (int level = 0; level <= ld_pyp_scan_level(); level++) /* every block reader here */
    for (size_t at = 0; at <= n; at++)
        for (size_t k = 0; k < sizeof subst; k++) {
            memcpy(buf, base, n);
            if (at < n) buf[at] = subst[k];
            ld_literal_scan a, b;
            ld_literal_start(&a);
            ld_literal_start(&b);
            for (size_t i = 0; i < n;) { /* pieces of 1 to 200 bytes */
                r = r * 1103515245u + 12345u;
                size_t piece = 1 + (r >> 16) % 200;
                if (piece > n - i) piece = n - i;
                ld_literal_feed_at(level, &a, buf + i, piece);
                ref_feed(&b, buf + i, piece);
                i += piece;
            }
            if (same_scan(&a, &b)) {
                fprintf(stderr, "  level %d, byte %zu set to '%c'\n", level, at, subst[k]);
                return 1;
            }
        }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_logline_cut_for_good),
    LD_CASE(test_logline_kinds_and_prefixes),
    LD_CASE(test_logline_sglang_fields),
    LD_CASE(test_logline_json_truncation),
    LD_CASE(test_logline_vllm_fields),
    LD_CASE(test_logline_error_offsets),
    LD_CASE(test_logline_long_other_line_is_cheap),
    LD_CASE(test_logline_literal_scan_blocks),
};

LD_TEST_MAIN(cases)
