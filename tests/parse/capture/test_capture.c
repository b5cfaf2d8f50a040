/* test_capture.c - parse/capture/: each capture recognised by content, its
 * records unwrapped, split lines rejoined by source, and every way a record
 * or a line goes wrong reported with where it was.
 *
 * The records are written here by hand from each format's description
 * (Docker's json-file driver, the CRI log format, kubectl --prefix, the
 * shippers' JSON lines: docs/formats.md, "Captures"); what must come out is
 * the server line the pieces were cut from. */
#include <stdint.h>

#include "tests/parse/capture/capture_feed.h"


/* ---------------------------------------------------------------- names */

static int test_capture_names_round_trip(void)
{
    for (int k = LD_CAPTURE_PLAIN; k < LD_CAPTURE_COUNT; k++)
        CHECK_EQ_INT(ld_capture_by_name(ld_capture_name((ld_capture_kind)k)), k);
    CHECK_EQ_INT(ld_capture_by_name("auto"), LD_CAPTURE_AUTO);
    CHECK_EQ_INT(ld_capture_by_name("journald"), -2);
    CHECK_EQ_STR(ld_capture_name(LD_CAPTURE_DOCKER), "docker-json");
    return 0;
}

/* ---------------------------------------------------------------- recognise */

static int test_capture_recognise_each(void)
{
    static const struct { const char *line; ld_capture_kind want; } cases[] = {
        { "{\"log\":\"x\\n\",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:05.1Z\"}", LD_CAPTURE_DOCKER },
        { "{\"log\":\"x\",\"stream\":\"stdout\",\"attrs\":{\"tag\":\"a\"},\"time\":\"2026-11-20T09:14:05Z\"}",
          LD_CAPTURE_DOCKER },
        { "2026-11-20T09:14:05.123456789Z stderr F [2026-11-20 09:14:05] Receive: obj=...", LD_CAPTURE_CRI },
        { "2026-11-20T09:14:05.123+02:00 stdout P:more piece", LD_CAPTURE_CRI },
        { "[pod/sglang-0/server] [2026-11-20 09:14:05] Finish: obj=...", LD_CAPTURE_KUBECTL },
        { "{\"host\":\"n1\",\"message\":\"a line\",\"timestamp\":\"2026-11-20T09:14:05Z\"}", LD_CAPTURE_SHIPPER },
        { "{\"date\":1763630040.0,\"log\":\"a line\\n\",\"stream\":\"stderr\"}", LD_CAPTURE_SHIPPER },
        { "{\"labels\":{\"app\":\"sglang\"},\"line\":\"a line\",\"timestamp\":\"1\"}", LD_CAPTURE_SHIPPER },
        { "{\"log\":\"a line\",\"kubernetes\":{\"pod\":\"p\"},\"time\":\"t\"}", LD_CAPTURE_SHIPPER },
        /* not wrappers: the server's own lines */
        { "[2026-11-20 09:14:05] Receive: obj=GenerateReqInput(rid='a')", LD_CAPTURE_PLAIN },
        { "{\"event\": \"request.received\", \"rid\": \"a\", \"msg\": \"x\"}", LD_CAPTURE_PLAIN },
        { "{\"unrelated\": 1}", LD_CAPTURE_PLAIN },
        { "{\"log\":\"broken", LD_CAPTURE_PLAIN },
        { "2026-11-20T09:14:05Z stdin F x", LD_CAPTURE_PLAIN },
        { "2026-11-20 09:14:05 stderr F x", LD_CAPTURE_PLAIN },
        { "[pod/only-one-part] x", LD_CAPTURE_PLAIN },
        { "", LD_CAPTURE_PLAIN },
    };
    for (int i = 0; i < N(cases); i++)
        CHECK_MSG(ld_capture_recognise(cases[i].line, strlen(cases[i].line)) == cases[i].want,
                  "case %d: %s", i, cases[i].line);
    return 0;
}

/* ---------------------------------------------------------------- docker */

/* moby's escaping (\u003c for <, \u0009 for a tab) is plain JSON to read */
static int test_capture_docker_rejoins_across_streams(void)
{
    static const char *const recs[] = {
        ("{\"log\":\"[t] Receive: obj={'a': \\\"x\\u003cy\\u003e\\u0026\\u0009\",\"stream\":\"stderr\","
         "\"time\":\"2026-11-20T09:14:05.1Z\"}"),
        "{\"log\":\"INFO: 127.0.0.1 - POST\\n\",\"stream\":\"stdout\",\"time\":\"2026-11-20T09:14:05.2Z\"}",
        "{\"log\":\"\xe6\x97\xa5\\u2028 middle \",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:05.3Z\"}",
        "{\"log\":\"end'}\\n\",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:05.4Z\"}",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n_problems, 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[0], "INFO: 127.0.0.1 - POST");
    CHECK_EQ_INT(r.lineno[0], 2);
    CHECK_EQ_STR(r.line[1], "[t] Receive: obj={'a': \"x<y>&\t\xe6\x97\xa5\xe2\x80\xa8 middle end'}");
    CHECK_EQ_INT(r.lineno[1], 1); /* where its first piece is */
    CHECK_EQ_INT(r.offset[1], 0);
    CHECK_EQ_INT(r.lost[1], 0);
    result_free(&r);
    return 0;
}

/* A cut inside a character: Docker wrote each byte of it as U+FFFD; the
 * line still comes out, with the loss counted and reported. */
static int test_capture_docker_cut_inside_a_character(void)
{
    static const char *const recs[] = {
        "{\"log\":\"abc\\ufffd\",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:05Z\"}",
        "{\"log\":\"\\ufffd\\ufffddef\\n\",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:06Z\"}",
        "{\"log\":\"whole \\ufffd\\n\",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:07Z\"}",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[0], "abc\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "def");
    CHECK_EQ_INT(r.lost[0], 3);
    CHECK_EQ_INT(r.n_problems, 1);
    CHECK_EQ_INT(r.problem[0], LD_ERR_TRUNCATED);
    CHECK_EQ_INT(r.problem_line[0], 1);
    CHECK_EQ_INT(r.lost[1], 0); /* a U+FFFD the server wrote, not at a cut */
    result_free(&r);
    return 0;
}

/* moby's layout (read by the fast path) and any other key order or an
 * "attrs" (read by cJSON) give the same line; escapes as JSON defines them */
static int test_capture_docker_layouts(void)
{
    static const struct { const char *rec, *text; int last; } cases[] = {
        { "{\"log\":\"a\\/b\\b\\f\\ud83d\\ude00\\u00e9\\r\\n\",\"stream\":\"stdout\",\"time\":\"t\"}",
          "a/b\b\f\xf0\x9f\x98\x80\xc3\xa9", 1 },
        { "{\"stream\":\"stdout\",\"log\":\"a\\/b\\b\\f\\ud83d\\ude00\\u00e9\\r\\n\",\"time\":\"t\"}",
          "a/b\b\f\xf0\x9f\x98\x80\xc3\xa9", 1 },
        { "{\"log\":\"piece\\r\",\"stream\":\"stdout\",\"attrs\":{\"k\":\"v\"},\"time\":\"t\"}", "piece\r", 0 },
        { "{\"log\":\"no stream\\n\",\"time\":\"t\"}", "no stream", 1 },
        { "{\"log\":\"raw \xe6\x97\xa5 bytes \xff kept\\n\",\"stream\":\"stderr\",\"time\":\"t\"}",
          "raw \xe6\x97\xa5 bytes \xff kept", 1 },
    };
    char *buf = NULL;
    size_t cap = 0;
    for (int i = 0; i < N(cases); i++) {
        ld_capture_record r;
        CHECK_MSG(ld_capture_parse(LD_CAPTURE_DOCKER, cases[i].rec, strlen(cases[i].rec), &buf, &cap, &r, NULL) ==
                      LD_OK, "case %d", i);
        CHECK_MSG(r.len == strlen(cases[i].text) && !memcmp(r.text, cases[i].text, r.len), "case %d: %.*s", i,
                  (int)r.len, r.text);
        CHECK_MSG(r.last == cases[i].last, "case %d", i);
    }
    /* what JSON forbids: a lone surrogate half, a bad escape, a cut record */
    static const char *const bad[] = {
        "{\"log\":\"\\ud800x\",\"stream\":\"stdout\",\"time\":\"t\"}",
        "{\"log\":\"\\x41\",\"stream\":\"stdout\",\"time\":\"t\"}",
        "{\"log\":\"a\",\"stream\":\"stdout\",\"time\":\"t\"",
    };
    for (int i = 0; i < N(bad); i++) {
        ld_capture_record r;
        ld_error e;
        ld_error_clear(&e);
        CHECK_MSG(ld_capture_parse(LD_CAPTURE_DOCKER, bad[i], strlen(bad[i]), &buf, &cap, &r, &e) == LD_ERR_SYNTAX,
                  "bad %d", i);
    }
    free(buf);
    return 0;
}

/* a record that is not Docker's: skipped with its line and offset; the
 * line around it goes on */
static int test_capture_docker_bad_record(void)
{
    static const char *const recs[] = {
        "{\"log\":\"one\\n\",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:05Z\"}",
        "{\"log\":\"two, cut by the disk",
        "{\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:05Z\"}",
        "{\"log\":\"three\\n\",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:05Z\"}",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[1], "three");
    CHECK_EQ_INT(r.n_problems, 2);
    CHECK_EQ_INT(r.problem[0], LD_ERR_SYNTAX);
    CHECK_EQ_INT(r.problem_line[0], 2);
    CHECK_EQ_INT(r.problem_offset[0], strlen(recs[0]) + 1);
    CHECK_EQ_INT(r.problem[1], LD_ERR_SYNTAX);
    CHECK_EQ_INT(r.problem_line[1], 3);
    result_free(&r);
    return 0;
}

/* a container that died mid-line: what arrived comes out at the member's
 * end, with the problem named at its first record */
static int test_capture_docker_unfinished_line(void)
{
    static const char *const recs[] = {
        "{\"log\":\"done\\n\",\"stream\":\"stdout\",\"time\":\"2026-11-20T09:14:05Z\"}",
        "{\"log\":\"half a \",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:05Z\"}",
        "{\"log\":\"line\",\"stream\":\"stderr\",\"time\":\"2026-11-20T09:14:06Z\"}",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[1], "half a line");
    CHECK_EQ_INT(r.n_problems, 1);
    CHECK_EQ_INT(r.problem[0], LD_ERR_TRUNCATED);
    CHECK_EQ_INT(r.problem_line[0], 2);
    CHECK_EQ_INT(r.problem_offset[0], strlen(recs[0]) + 1);
    result_free(&r);
    return 0;
}

/* ---------------------------------------------------------------- cri */

static int test_capture_cri_partial_pieces_by_stream(void)
{
    static const char *const recs[] = {
        "2026-11-20T09:14:05.000000001Z stderr P [t] Finish: obj=Gen",
        "2026-11-20T09:14:05.000000002Z stdout F INFO: a stdout line",
        "2026-11-20T09:14:05.000000003Z stderr P erateReqInput(rid='a', text='x  y'",
        "2026-11-20T09:14:05.000000004Z stderr F ), out={}",
        "2026-11-20T09:14:05.000000005Z stderr P alone",
        "2026-11-20T09:14:05.000000006Z stderr F ",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n_problems, 0);
    CHECK_EQ_INT(r.n, 3);
    CHECK_EQ_STR(r.line[0], "INFO: a stdout line");
    CHECK_EQ_STR(r.line[1], "[t] Finish: obj=GenerateReqInput(rid='a', text='x  y'), out={}");
    CHECK_EQ_INT(r.lineno[1], 1);
    CHECK_EQ_STR(r.line[2], "alone"); /* an F with nothing after its tag */
    CHECK_EQ_INT(r.lineno[2], 5);
    result_free(&r);
    return 0;
}

/* --capture cri on a line that is not CRI's */
static int test_capture_forced_kind_rejects_others(void)
{
    static const char *const recs[] = {
        "[2026-11-20 09:14:05] Receive: obj=GenerateReqInput(rid='a')",
        "2026-11-20T09:14:05Z stdout F ok",
    };
    result r;
    CHECK(run(LD_CAPTURE_CRI, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.line[0], "ok");
    CHECK_EQ_INT(r.n_problems, 1);
    CHECK_EQ_INT(r.problem[0], LD_ERR_SYNTAX);
    CHECK_EQ_INT(r.problem_line[0], 1);
    result_free(&r);
    return 0;
}

/* ---------------------------------------------------------------- the others */

static int test_capture_kubectl_prefix_and_shippers(void)
{
    static const char *const kube[] = { "[pod/sglang-0/server] [t] Receive: obj=x", "[pod/sglang-0/server] " };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, kube, N(kube), &r) == 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[0], "[t] Receive: obj=x");
    CHECK_EQ_STR(r.line[1], "");
    result_free(&r);
    static const char *const ship[] = {
        "{\"host\":\"n1\",\"message\":\"[t] Receive: obj={'a': \\\"\\u00e9\\\"}\",\"timestamp\":\"t\"}",
        "{\"host\":\"n1\",\"message\":\"no newline needed\",\"timestamp\":\"t\"}",
        "{\"host\":\"n1\",\"timestamp\":\"t\"}",
    };
    CHECK(run(LD_CAPTURE_AUTO, 0, ship, N(ship), &r) == 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[0], "[t] Receive: obj={'a': \"\xc3\xa9\"}");
    CHECK_EQ_STR(r.line[1], "no newline needed");
    CHECK_EQ_INT(r.n_problems, 1);
    CHECK_EQ_INT(r.problem_line[0], 3);
    result_free(&r);
    return 0;
}

/* a plain member passes through untouched, a wrapped one after it is
 * recognised again */
static int test_capture_members_recognised_each(void)
{
    ld_capture *c = NULL;
    CHECK(ld_capture_new(LD_CAPTURE_AUTO, 0, &c, NULL) == LD_OK);
    static const char *const plain[] = { "[t] INFO: x", "{\"log\":\"not docker here\",\"time\":\"t\"}" };
    result r;
    memset(&r, 0, sizeof r);
    feed(c, plain, N(plain), &r);
    CHECK_EQ_INT(ld_capture_current(c), LD_CAPTURE_PLAIN);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[1], plain[1]);
    result_free(&r);
    static const char *const cri[] = { "2026-11-20T09:14:05Z stdout F y" };
    memset(&r, 0, sizeof r);
    feed(c, cri, N(cri), &r);
    CHECK_EQ_INT(ld_capture_current(c), LD_CAPTURE_CRI);
    CHECK_EQ_STR(r.line[0], "y");
    const ld_capture_stats *st = ld_capture_stats_of(c);
    CHECK_EQ_INT(st->members[LD_CAPTURE_PLAIN], 1);
    CHECK_EQ_INT(st->members[LD_CAPTURE_CRI], 1);
    CHECK_EQ_INT(st->records, 1);
    result_free(&r);
    ld_capture_free(c);
    return 0;
}

/* ---------------------------------------------------------------- limits */

/* a line past max_line is dropped to its last piece; the next one is read */
static int test_capture_line_past_the_limit(void)
{
    static const char *const recs[] = {
        "2026-11-20T09:14:05Z stderr P 0123456789",
        "2026-11-20T09:14:05Z stderr P 0123456789",
        "2026-11-20T09:14:05Z stderr F 0123456789",
        "2026-11-20T09:14:05Z stderr F short",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 15, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.line[0], "short");
    CHECK_EQ_INT(r.n_problems, 1);
    CHECK_EQ_INT(r.problem[0], LD_ERR_LIMIT);
    CHECK_EQ_INT(r.problem_line[0], 1);
    result_free(&r);
    return 0;
}

/* more sources than it keeps lines for: the extra one's piece is reported */
static int test_capture_too_many_sources(void)
{
    char text[20][80];
    const char *recs[20];
    for (int i = 0; i < 20; i++) {
        snprintf(text[i], sizeof text[i], "{\"log\":\"piece\",\"stream\":\"s%d\",\"time\":\"t\"}", i);
        recs[i] = text[i];
    }
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, 20, &r) == 0);
    CHECK_EQ_INT(r.n_problems, 20); /* 4 LIMIT at push, 16 unfinished at the end */
    CHECK_EQ_INT(r.problem[0], LD_ERR_LIMIT);
    CHECK_EQ_INT(r.problem_line[0], 17);
    CHECK_EQ_INT(r.n, 16);
    result_free(&r);
    return 0;
}

/* A plain member fed with what follows each line (ld_capture_push_ahead,
 * as the log-set reader does over a mapped file) hands out the same lines,
 * numbers, offsets and problems as one fed line by line: open literals
 * rejoined with the pieces that go on with them, left alone before a line
 * that begins one, cut for good before a request line. */
static int test_capture_plain_lookahead(void)
{
    static const char *const pieces[] = {
        "[2026-11-20 09:14:05] Receive: obj=GenerateReqInput(rid='a', text='open",
        " still inside', input_ids=[1, 2])",
        "[2026-11-20 09:14:06] Finish: obj=GenerateReqInput(rid='a'), out={'text': 'x'}",
        "[2026-11-20 09:14:07] Receive: obj=GenerateReqInput(rid='b', text='cut for good",
        "[2026-11-20 09:14:08] INFO: a line of its own",
        "{\"event\": \"request.received\", \"rid\": \"c\", \"obj\": {\"text\": \"open",
        "{\"event\": \"request.finished\", \"rid\": \"c\"}",
        "2026-11-20 09:14:09,123 python logging",
        "[2026-11",
        "x",
        "",
        "Receive: obj=GenerateReqInput(rid='d', text='x')",
        "[2026-11-20 09:14:10] Receive OpenAI: obj={'messages': [{'content': 'it\\'s",
        "'}]}",
        "[2026-11-20 09:14:11] Receive: obj=GenerateReqInput(rid='e', text='crlf\r",
        "[2026-11-20 09:14:12] Finish: obj=GenerateReqInput(rid='e'), out={}",
    };
    enum { NP = sizeof pieces / sizeof pieces[0] };
    uint32_t rnd = 12345;
    ld_capture *c1, *c2;
    CHECK_EQ_INT(ld_capture_new(LD_CAPTURE_AUTO, 0, &c1, NULL), LD_OK);
    CHECK_EQ_INT(ld_capture_new(LD_CAPTURE_AUTO, 0, &c2, NULL), LD_OK);
    for (int round = 0; round < 400; round++) {
        const char *recs[24];
        int n = 1 + round % 20;
        static char file[8192];
        size_t at[25], len = 0;
        for (int i = 0; i < n; i++) {
            rnd = rnd * 1103515245u + 12345u;
            recs[i] = i == 0 ? pieces[0] : pieces[(rnd >> 16) % NP];
            at[i] = len;
            size_t k = strlen(recs[i]);
            memcpy(file + len, recs[i], k);
            len += k;
            file[len++] = '\n';
        }
        at[n] = len;
        result a = {0}, b = {0};
        feed_n(c1, recs, NULL, n, &a);
        uint64_t off = 0;
        ld_capture_reset(c2);
        for (int i = 0; i < n; i++) {
            size_t k = strlen(recs[i]);
            ld_line in = { file + at[i], k, (uint64_t)i + 1, off, 0, 0, 0, NULL, 0}, out;
            off += k + 1;
            size_t rest = len - at[i + 1];
            int has = 0;
            ld_error e;
            ld_error_clear(&e);
            ld_status st = ld_capture_push_ahead(c2, &in, rest ? file + at[i + 1] : NULL, rest < 16 ? rest : 16,
                                                 &out, &has, &e);
            keep_problem(&b, st, &e);
            if (has) keep_line(&b, &out);
            for (ld_capture_pop(c2, &out, &has, NULL); has; ld_capture_pop(c2, &out, &has, NULL)) keep_line(&b, &out);
        }
        for (;;) {
            ld_line out;
            int has = 0;
            ld_error e;
            ld_error_clear(&e);
            ld_status st = ld_capture_drain(c2, &out, &has, &e);
            if (!has) break;
            keep_problem(&b, st, &e);
            keep_line(&b, &out);
        }
        CHECK_EQ_INT(a.n, b.n);
        for (int i = 0; i < a.n; i++) {
            CHECK_EQ_STR(a.line[i], b.line[i]);
            CHECK_EQ_INT(a.lineno[i], b.lineno[i]);
            CHECK_EQ_INT(a.offset[i], b.offset[i]);
            CHECK_EQ_INT(a.lost[i], b.lost[i]);
        }
        CHECK_EQ_INT(a.n_problems, b.n_problems);
        for (int i = 0; i < a.n_problems; i++) {
            CHECK_EQ_INT(a.problem[i], b.problem[i]);
            CHECK_EQ_INT(a.problem_line[i], b.problem_line[i]);
        }
        result_free(&a);
        result_free(&b);
    }
    ld_capture_free(c1);
    ld_capture_free(c2);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_capture_names_round_trip),
    LD_CASE(test_capture_recognise_each),
    LD_CASE(test_capture_docker_rejoins_across_streams),
    LD_CASE(test_capture_docker_cut_inside_a_character),
    LD_CASE(test_capture_docker_layouts),
    LD_CASE(test_capture_docker_bad_record),
    LD_CASE(test_capture_docker_unfinished_line),
    LD_CASE(test_capture_cri_partial_pieces_by_stream),
    LD_CASE(test_capture_forced_kind_rejects_others),
    LD_CASE(test_capture_kubectl_prefix_and_shippers),
    LD_CASE(test_capture_members_recognised_each),
    LD_CASE(test_capture_line_past_the_limit),
    LD_CASE(test_capture_too_many_sources),
    LD_CASE(test_capture_plain_lookahead),
};

LD_TEST_MAIN(cases)
