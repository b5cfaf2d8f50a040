/* test_conv.c - conversations across requests (replay/analysis/conv.c): fixtures of
 * testdata/replay/harness (tools/gen_harness_fixtures.py) through the real
 * reader and pairer, plus evidence, eviction and memory bounds. */
#include "harness_fixture.h"

static int test_conv_fixture_classic_interrupt(void) { return hf_fixture("classic-interrupt"); }
static int test_conv_fixture_healthy_no_findings(void) { return hf_fixture("healthy"); }
static int test_conv_fixture_altered(void) { return hf_fixture("altered"); }
static int test_conv_fixture_interleaved(void) { return hf_fixture("interleaved"); }
static int test_conv_fixture_two_files(void) { return hf_fixture("two-files"); }
static int test_conv_fixture_logger_cut(void) { return hf_fixture("logger-cut"); }

/* ------------------------------------------------------------ line by line */

typedef struct seq {
    ld_conv_tracker *t;
    ld_arena arena;
    ld_findings f[16];
    const char *conv[16];
    uint64_t key[16];  /* ld_conv_key */
    char rid[16][32];
    int n;
} seq;

static int seq_emit(void *ctx, ld_request *r)
{
    seq *s = ctx;
    if (s->n >= 16) return 0;
    int i = s->n++;
    snprintf(s->rid[i], sizeof s->rid[i], "%s", r->rid ? r->rid : "-");
    memset(&s->f[i], 0, sizeof s->f[i]);
    s->key[i] = ld_conv_key(r);
    if (ld_harness_check(r, &s->arena, &s->f[i], NULL) ||
        ld_conv_check(s->t, r, &s->arena, &s->f[i], &s->conv[i], NULL))
        s->rid[i][0] = '!';
    return 0;
}

/* One request: Receive OpenAI (messages), Receive, Finish with `out` and `fin`. */
static void req_lines(char *buf, size_t n, const char *rid, const char *msgs, const char *out,
                      const char *fin)
{
    snprintf(buf, n,
             "Receive OpenAI: obj={'model': 'm', 'messages': [%s]}\n"
             "Receive: obj=G(rid='%s', text=None, input_ids=[1])\n"
             "Finish: obj=G(rid='%s', text=\"%s\", input_ids=[1]), out={'text': %s, "
             "'meta_info': {'finish_reason': %s}}",
             msgs, rid, rid, msgs /* the prompt contains every user message */, out, fin);
}

/* Feeds reqs (cut into lines in place) through a pairer into tracker t,
 * which s then owns. */
static int seq_run_on(seq *s, ld_conv_tracker *t, char *const *reqs, int n)
{
    memset(s, 0, sizeof *s);
    ld_arena_init(&s->arena, 0);
    s->t = t;
    ld_pair_options po = {0};
    po.flags = LD_PAIR_KEEP_TEXT;
    ld_pairer *p;
    if (ld_pairer_new(&po, seq_emit, s, &p, NULL)) return -1;
    int bad = 0;
    uint64_t lineno = 0;
    for (int i = 0; i < n; i++) {
        char *save = NULL;
        for (char *l = strtok_r(reqs[i], "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            ld_line line = {l, strlen(l), ++lineno, 0, 0, 0, 0, NULL, 0};
            ld_line_result res;
            if (ld_pairer_feed_line(p, "m", &line, &res, NULL) != LD_OK) bad++;
        }
    }
    ld_pairer_finish(p, NULL);
    ld_pairer_free(p);
    return bad;
}

static int seq_run(seq *s, const ld_conv_options *o, char *const *reqs, int n)
{
    ld_conv_tracker *t;
    if (ld_conv_tracker_new(o, &t, NULL)) return -1;
    return seq_run_on(s, t, reqs, n);
}

static void seq_free(seq *s)
{
    ld_conv_tracker_free(s->t);
    ld_arena_release(&s->arena);
}

static const ld_finding *kind_of(const ld_findings *f, const char *kind)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].kind, kind)) return &f->v[i];
    return NULL;
}

#define SU "{'role': 'system', 'content': 'S'}, {'role': 'user', 'content': 'fix the bug'}"
#define STOP "{'type': 'stop', 'matched': 7}"
#define ABORT "{'type': 'abort', 'message': 'client gone'}"

static int test_conv_stale_evidence_interrupted(void)
{
    static char a[1024], b[1024];
    req_lines(a, sizeof a, "p1", SU, "'Let me open main.c and look at'", ABORT);
    req_lines(b, sizeof b, "p2", SU ", {'role': 'assistant', 'content': ''}, "
              "{'role': 'user', 'content': 'go on'}", "'ok'", STOP);
    char *reqs[] = {a, b};
    seq s;
    CHECK_EQ_INT(seq_run(&s, NULL, reqs, 2), 0);
    CHECK_EQ_INT(s.n, 2);
    CHECK_EQ_INT(s.f[0].n, 0);
    const ld_finding *st = kind_of(&s.f[1], LD_K_HARNESS_STALE_ASSISTANT);
    const ld_finding *em = kind_of(&s.f[1], LD_K_HARNESS_EMPTY_ASSISTANT);
    CHECK(st && em);
    CHECK_EQ_INT(st->message, 2);
    CHECK_EQ_INT(st->expected_len, 30);
    CHECK_EQ_INT(st->actual_len, 0);
    CHECK_EQ_INT(st->first_diff, 0);
    CHECK_EQ_STR(st->related_rid, "p1");
    CHECK(st->prompt_excerpt && !strncmp(st->prompt_excerpt, "Let me open", 11));
    CHECK(strstr(st->detail, "sent back empty") && strstr(st->detail, "abort"));
    CHECK_EQ_STR(em->related_rid, "p1");
    CHECK(strstr(em->detail, "request p1") && strstr(em->detail, "abort"));
    CHECK(s.conv[0] && s.conv[1] && !strcmp(s.conv[0], "p1") && !strcmp(s.conv[1], "p1"));
    CHECK(!strcmp(ld_verdict_of(&s.f[1]), "harness"));
    seq_free(&s);
    return 0;
}

static int test_conv_edit_offset_and_excerpts(void)
{
    static char a[1024], b[1024];
    req_lines(a, sizeof a, "e1", SU, "'  The bug is in parse_int: it ignores the sign.\\n'", STOP);
    req_lines(b, sizeof b, "e2", SU ", {'role': 'assistant', 'content': 'The bug is in parse_int: "
              "it ignores overflow.'}, {'role': 'user', 'content': 'fix it'}", "'ok'", STOP);
    char *reqs[] = {a, b};
    seq s;
    CHECK_EQ_INT(seq_run(&s, NULL, reqs, 2), 0);
    const ld_finding *st = kind_of(&s.f[1], LD_K_HARNESS_STALE_ASSISTANT);
    CHECK(st && s.f[1].n == 1);
    CHECK_EQ_INT(st->first_diff, 36); /* after "...it ignores " (edge spaces trimmed) */
    CHECK_EQ_INT(st->array_offset, 36);
    CHECK_EQ_INT(st->expected_len, 45);
    CHECK_EQ_INT(st->actual_len, 45);
    CHECK(strstr(st->array_excerpt, "overflow") && strstr(st->prompt_excerpt, "the sign"));
    CHECK(strstr(st->detail, "was edited"));
    seq_free(&s);
    return 0;
}

static int test_conv_benign_forms(void)
{
    /* reasoning inline vs reasoning_content, edge whitespace, stop string,
     * a retry: the message equals the second of two outputs for one array */
    static char a[1024], a2[1024], b[1024], c[1024], d[1024];
    req_lines(a, sizeof a, "b1", SU, "'first try'", ABORT);
    req_lines(a2, sizeof a2, "b1r", SU, "'<think>R1</think>\\n\\nAnswer one. DONE'",
              "{'type': 'stop', 'matched': 'DONE'}");
    req_lines(b, sizeof b, "b2", SU ", {'role': 'assistant', 'content': 'Answer one.', "
              "'reasoning_content': 'R1'}, {'role': 'user', 'content': 'q2'}", "'R2</think>Two.'", STOP);
    req_lines(c, sizeof c, "b3", SU ", {'role': 'assistant', 'content': '<think>R1</think>Answer one.'}, "
              "{'role': 'user', 'content': 'q2'}, {'role': 'assistant', 'content': '\\n Two. '}, "
              "{'role': 'user', 'content': 'q3'}", "'Three.'", STOP);
    req_lines(d, sizeof d, "b4", SU ", {'role': 'assistant', 'content': 'Answer one.'}, "
              "{'role': 'user', 'content': 'q2'}, {'role': 'assistant', 'content': 'Two.', "
              "'reasoning_content': 'R2'}, {'role': 'user', 'content': 'q3'}, "
              "{'role': 'assistant', 'content': 'Three.'}, {'role': 'user', 'content': 'q4'}", "'x'", STOP);
    char *reqs[] = {a, a2, b, c, d};
    seq s;
    CHECK_EQ_INT(seq_run(&s, NULL, reqs, 5), 0);
    CHECK_EQ_INT(s.n, 5);
    for (int i = 0; i < 5; i++) CHECK_MSG(s.f[i].n == 0, "%s: %s", s.rid[i], s.f[i].v[0].detail);
    ld_conv_stats st;
    ld_conv_tracker_stats(s.t, &st);
    CHECK_EQ_INT(st.conversations, 1);
    CHECK_EQ_INT(st.matched, 6); /* b2: 1, b3: 2, b4: 3 */
    seq_free(&s);
    return 0;
}

static int test_conv_reasoning_changed(void)
{
    static char a[1024], b[1024];
    req_lines(a, sizeof a, "r1", SU, "'<think>Check the sign.</think>Fixed.'", STOP);
    req_lines(b, sizeof b, "r2", SU ", {'role': 'assistant', 'content': 'Fixed.', "
              "'reasoning_content': 'Something else entirely.'}, {'role': 'user', 'content': 'ok'}",
              "'x'", STOP);
    char *reqs[] = {a, b};
    seq s;
    CHECK_EQ_INT(seq_run(&s, NULL, reqs, 2), 0);
    const ld_finding *st = kind_of(&s.f[1], LD_K_HARNESS_STALE_ASSISTANT);
    CHECK(st && strstr(st->detail, "reasoning"));
    seq_free(&s);
    return 0;
}

/* Conversations A, B, C with max_conversations = 2: A is evicted when C
 * arrives, so A's edited second turn is no longer checked (and no memory of
 * it is held), while C's is. */
static int test_conv_lru_eviction(void)
{
    static char r[6][1024];
    req_lines(r[0], 1024, "A1", "{'role': 'user', 'content': 'conv A'}", "'alpha'", STOP);
    req_lines(r[1], 1024, "B1", "{'role': 'user', 'content': 'conv B'}", "'beta'", STOP);
    req_lines(r[2], 1024, "C1", "{'role': 'user', 'content': 'conv C'}", "'gamma'", STOP);
    req_lines(r[3], 1024, "A2", "{'role': 'user', 'content': 'conv A'}, {'role': 'assistant', "
              "'content': 'EDITED'}, {'role': 'user', 'content': 'more A'}", "'x'", STOP);
    req_lines(r[4], 1024, "C2", "{'role': 'user', 'content': 'conv C'}, {'role': 'assistant', "
              "'content': 'EDITED'}, {'role': 'user', 'content': 'more C'}", "'x'", STOP);
    char *reqs[] = {r[0], r[1], r[2], r[3], r[4]};
    ld_conv_options o = {0};
    o.max_conversations = 2;
    seq s;
    CHECK_EQ_INT(seq_run(&s, &o, reqs, 5), 0);
    CHECK_EQ_INT(s.n, 5);
    CHECK_EQ_INT(s.f[3].n, 0); /* A evicted: its producer is gone */
    CHECK(kind_of(&s.f[4], LD_K_HARNESS_STALE_ASSISTANT)); /* C still known */
    CHECK_EQ_STR(s.conv[3], "A2"); /* A started again under a new id */
    ld_conv_stats st;
    ld_conv_tracker_stats(s.t, &st);
    CHECK(st.conversations <= 2);
    CHECK(st.evicted >= 2);
    seq_free(&s);
    return 0;
}

/* The byte cap bounds memory whatever the number of requests. */
static int test_conv_byte_cap(void)
{
    ld_conv_options o = {0};
    o.max_bytes = 16 << 10;
    ld_conv_tracker *t;
    CHECK(ld_conv_tracker_new(&o, &t, NULL) == LD_OK);
    static char lines[1024];
    ld_conv_stats st;
    for (int i = 0; i < 2000; i++) {
        char msgs[128], out[64];
        snprintf(msgs, sizeof msgs, "{'role': 'user', 'content': 'question %d'}", i);
        snprintf(out, sizeof out, "'answer number %d, with some more words to hold'", i);
        req_lines(lines, sizeof lines, "x", msgs, out, STOP);
        seq s;
        char *reqs[] = {lines};
        memset(&s, 0, sizeof s);
        ld_arena_init(&s.arena, 0);
        s.t = t;
        ld_pair_options po = {0};
        po.flags = LD_PAIR_KEEP_TEXT;
        ld_pairer *p;
        CHECK(ld_pairer_new(&po, seq_emit, &s, &p, NULL) == LD_OK);
        char *save = NULL;
        for (char *l = strtok_r(reqs[0], "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            ld_line line = {l, strlen(l), 1, 0, 0, 0, 0, NULL, 0};
            ld_line_result res;
            ld_pairer_feed_line(p, "m", &line, &res, NULL);
        }
        ld_pairer_free(p);
        ld_arena_release(&s.arena);
        CHECK(s.n == 1 && s.rid[0][0] != '!');
        ld_conv_tracker_stats(t, &st);
        CHECK(st.bytes <= o.max_bytes);
    }
    CHECK(st.evicted > 1000);
    CHECK(st.peak_bytes <= o.max_bytes + 1024);
    ld_conv_tracker_free(t);
    return 0;
}

/* The key groups what the tracker groups, whatever was seen first: the
 * id is the first rid seen, the key the first turn's hash. */
static int test_conv_key(void)
{
    static char a[1024], b[1024], c[1024];
    req_lines(a, sizeof a, "k1", SU, "'done'", STOP);
    req_lines(b, sizeof b, "k2", SU ", {'role': 'assistant', 'content': 'done'}, "
              "{'role': 'user', 'content': 'and the tests?'}", "'ok'", STOP);
    req_lines(c, sizeof c, "k3", "{'role': 'system', 'content': 'T'}, {'role': 'user', 'content': 'fix the bug'}",
              "'ok'", STOP);
    char *reqs[] = {b, a, c}; /* the later turn first: it gives the id */
    seq s;
    CHECK_EQ_INT(seq_run(&s, NULL, reqs, 3), 0);
    CHECK_EQ_INT(s.n, 3);
    CHECK(s.key[0] != 0 && s.key[0] == s.key[1] && s.key[2] != s.key[0]);
    CHECK(s.conv[0] && s.conv[1] && !strcmp(s.conv[0], "k2") && !strcmp(s.conv[1], "k2"));
    CHECK(s.conv[2] && !strcmp(s.conv[2], "k3"));
    seq_free(&s);
    return 0;
}

/* A first turn of 300 bytes with one byte changed, wherever it lies (in
 * the hash's lanes of 128 bytes, its steps of 16, its tail), or one byte
 * shorter: another conversation's key; the same text again: the same key. */
static int test_conv_key_every_byte(void)
{
    enum { LEN = 300 };
    static const int at[] = {0, 17, 64, 127, 128, 200, 255, 299};
    enum { NV = sizeof at / sizeof at[0], NR = NV + 3 };
    static char lines[NR][2048];
    char *reqs[NR];
    for (int i = 0; i < NR; i++) {
        char text[LEN + 1], msgs[LEN + 64], rid[16];
        for (int j = 0; j < LEN; j++) text[j] = (char)('a' + (j * 7) % 26);
        text[i == NV ? LEN - 1 : LEN] = 0; /* request NV: one byte shorter; the last two: unchanged */
        if (i < NV) text[at[i]] = text[at[i]] == 'z' ? 'y' : 'z';
        snprintf(msgs, sizeof msgs, "{'role': 'user', 'content': '%s'}", text);
        snprintf(rid, sizeof rid, "b%d", i);
        req_lines(lines[i], sizeof lines[i], rid, msgs, "'ok'", STOP);
        reqs[i] = lines[i];
    }
    seq s;
    CHECK_EQ_INT(seq_run(&s, NULL, reqs, NR), 0);
    CHECK_EQ_INT(s.n, NR);
    CHECK(s.key[NV + 1] == s.key[NV + 2]); /* the unchanged text, twice */
    for (int i = 0; i <= NV; i++)
        for (int j = i + 1; j < NR; j++)
            CHECK_MSG(s.key[i] != s.key[j], "requests %d and %d: the same key for different first turns", i, j);
    seq_free(&s);
    return 0;
}

static int test_conv_no_messages_no_id(void)
{
    static char a[512] = "Receive: obj=G(rid='z', text='hi', input_ids=[1])\n"
                         "Finish: obj=G(rid='z', text='hi'), out={'text': 'yo', 'meta_info': {}}";
    char *reqs[] = {a};
    seq s;
    CHECK_EQ_INT(seq_run(&s, NULL, reqs, 1), 0);
    CHECK_EQ_INT(s.n, 1);
    CHECK(!s.conv[0] && s.key[0] == 0);
    /* no conversation finding; only the note that no message array was logged
     * (info: a plain /generate prompt has no template to check) */
    CHECK_EQ_INT(s.f[0].n, 1);
    CHECK_EQ_STR(s.f[0].v[0].kind, LD_K_LOG_NO_MESSAGES);
    CHECK_EQ_INT(s.f[0].v[0].severity, LD_SEV_INFO);
    seq_free(&s);
    return 0;
}

/* ------------------------------------------------------------ replay */

typedef struct journal {
    ld_arena arena;
    ld_conv_op op[32];
    int n;
} journal;

static const char *dup_or_null(ld_arena *a, const char *p, size_t n)
{
    return p ? ld_arena_memdup(a, p, n) : NULL;
}

static int journal_op(void *ctx, const ld_conv_op *op)
{
    journal *j = ctx;
    if (j->n >= 32) return -1;
    ld_conv_op *c = &j->op[j->n++];
    *c = *op;
    c->rid = dup_or_null(&j->arena, op->rid, strlen(op->rid));
    c->out_head = dup_or_null(&j->arena, op->out_head, op->head_len);
    c->out_tail = dup_or_null(&j->arena, op->out_tail, op->tail_len);
    c->finish_type = dup_or_null(&j->arena, op->finish_type, op->finish_type ? strlen(op->finish_type) : 0);
    c->stop_str = dup_or_null(&j->arena, op->stop_str, op->stop_str ? strlen(op->stop_str) : 0);
    return 0;
}

/* Findings of one request as one comparable string. */
static void findings_text(const ld_findings *f, const char *conv, char *buf, size_t n)
{
    int k = snprintf(buf, n, "conv=%s;", conv ? conv : "-");
    for (size_t i = 0; i < f->n && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, "%s|%s|%s;", f->v[i].kind, f->v[i].detail,
                      f->v[i].related_rid ? f->v[i].related_rid : "-");
}

/* One tracker over every request, its ops journalled; then, for every
 * split k, a tracker fed the first k requests' ops and ld_conv_check of
 * the rest must judge the rest as the one tracker did (ids, findings,
 * evictions). */
static int replay_equals_checks(const ld_conv_options *base, const char *const *src, int n)
{
    static char copy[16][1024];
    journal j;
    memset(&j, 0, sizeof j);
    ld_arena_init(&j.arena, 0);
    ld_conv_options o = base ? *base : (ld_conv_options){0};
    o.journal = journal_op, o.journal_ctx = &j;
    char *reqs[16];
    for (int i = 0; i < n; i++) reqs[i] = strcpy(copy[i], src[i]);
    seq all;
    CHECK_EQ_INT(seq_run(&all, &o, reqs, n), 0);
    CHECK_EQ_INT(all.n, n);
    CHECK_EQ_INT(j.n, n); /* one op a checkable request, kept or not */
    ld_conv_stats want;
    ld_conv_tracker_stats(all.t, &want);
    for (int k = 0; k <= n; k++) {
        ld_conv_tracker *t;
        CHECK(ld_conv_tracker_new(base, &t, NULL) == LD_OK);
        for (int i = 0; i < k; i++) CHECK(ld_conv_replay(t, &j.op[i], NULL) == LD_OK);
        for (int i = k; i < n; i++) reqs[i - k] = strcpy(copy[i], src[i]);
        seq rest;
        CHECK_EQ_INT(seq_run_on(&rest, t, reqs, n - k), 0);
        CHECK_EQ_INT(rest.n, n - k);
        for (int i = k; i < n; i++) {
            char a[2048], b[2048];
            findings_text(&all.f[i], all.conv[i], a, sizeof a);
            findings_text(&rest.f[i - k], rest.conv[i - k], b, sizeof b);
            CHECK_MSG(!strcmp(a, b), "split %d, request %d: %s vs %s", k, i, a, b);
        }
        ld_conv_stats got;
        ld_conv_tracker_stats(t, &got);
        CHECK_EQ_INT(got.conversations, want.conversations);
        CHECK_EQ_INT(got.entries, want.entries);
        CHECK_EQ_INT(got.bytes, want.bytes);
        CHECK_EQ_INT(got.evicted, want.evicted);
        seq_free(&rest);
    }
    seq_free(&all);
    ld_arena_release(&j.arena);
    return 0;
}

static int test_conv_replay_stale_and_benign(void)
{
    static char r[7][1024];
    req_lines(r[0], 1024, "p1", SU, "'Let me open main.c and look at'", ABORT);
    req_lines(r[1], 1024, "b1r", SU, "'<think>R1</think>\\n\\nAnswer one. DONE'",
              "{'type': 'stop', 'matched': 'DONE'}");
    req_lines(r[2], 1024, "p2", SU ", {'role': 'assistant', 'content': ''}, "
              "{'role': 'user', 'content': 'go on'}", "'ok'", STOP);
    req_lines(r[3], 1024, "b2", SU ", {'role': 'assistant', 'content': 'Answer one.', "
              "'reasoning_content': 'R1'}, {'role': 'user', 'content': 'q2'}", "'R2</think>Two.'", STOP);
    req_lines(r[4], 1024, "b2", SU ", {'role': 'assistant', 'content': 'Answer one.', "
              "'reasoning_content': 'R1'}, {'role': 'user', 'content': 'q2'}", "'R2</think>Two.'", STOP);
    req_lines(r[5], 1024, "b3", SU ", {'role': 'assistant', 'content': 'Answer one.'}, "
              "{'role': 'user', 'content': 'q2'}, {'role': 'assistant', 'content': 'Two, edited'}, "
              "{'role': 'user', 'content': 'q3'}", "'Three.'", STOP);
    req_lines(r[6], 1024, "o1", "{'role': 'user', 'content': 'other'}", "'x'", STOP);
    const char *src[] = {r[0], r[1], r[2], r[3], r[4], r[5], r[6]};
    return replay_equals_checks(NULL, src, 7);
}

/* Evictions by count and by bytes come out the same after a replay. */
static int test_conv_replay_evictions(void)
{
    static char r[6][1024];
    req_lines(r[0], 1024, "A1", "{'role': 'user', 'content': 'conv A'}", "'alpha'", STOP);
    req_lines(r[1], 1024, "B1", "{'role': 'user', 'content': 'conv B'}", "'beta'", STOP);
    req_lines(r[2], 1024, "C1", "{'role': 'user', 'content': 'conv C'}", "'gamma'", STOP);
    req_lines(r[3], 1024, "A2", "{'role': 'user', 'content': 'conv A'}, {'role': 'assistant', "
              "'content': 'EDITED'}, {'role': 'user', 'content': 'more A'}", "'x'", STOP);
    req_lines(r[4], 1024, "C2", "{'role': 'user', 'content': 'conv C'}, {'role': 'assistant', "
              "'content': 'EDITED'}, {'role': 'user', 'content': 'more C'}", "'x'", STOP);
    req_lines(r[5], 1024, "B2", "{'role': 'user', 'content': 'conv B'}, {'role': 'assistant', "
              "'content': 'beta'}, {'role': 'user', 'content': 'more B'}", "'y'", STOP);
    const char *src[] = {r[0], r[1], r[2], r[3], r[4], r[5]};
    ld_conv_options o = {0};
    o.max_conversations = 2;
    CHECK_EQ_INT(replay_equals_checks(&o, src, 6), 0);
    o.max_conversations = 0;
    o.max_bytes = 700; /* about three entries */
    CHECK_EQ_INT(replay_equals_checks(&o, src, 6), 0);
    o.max_bytes = 0;
    o.max_entry_bytes = 3; /* outputs kept as head + tail */
    return replay_equals_checks(&o, src, 6);
}

static const ld_test_case cases[] = {
    LD_CASE(test_conv_fixture_classic_interrupt),
    LD_CASE(test_conv_fixture_healthy_no_findings),
    LD_CASE(test_conv_fixture_altered),
    LD_CASE(test_conv_fixture_interleaved),
    LD_CASE(test_conv_fixture_two_files),
    LD_CASE(test_conv_fixture_logger_cut),
    LD_CASE(test_conv_stale_evidence_interrupted),
    LD_CASE(test_conv_edit_offset_and_excerpts),
    LD_CASE(test_conv_benign_forms),
    LD_CASE(test_conv_reasoning_changed),
    LD_CASE(test_conv_lru_eviction),
    LD_CASE(test_conv_key),
    LD_CASE(test_conv_key_every_byte),
    LD_CASE(test_conv_byte_cap),
    LD_CASE(test_conv_no_messages_no_id),
    LD_CASE(test_conv_replay_stale_and_benign),
    LD_CASE(test_conv_replay_evictions),
};

LD_TEST_MAIN(cases)
