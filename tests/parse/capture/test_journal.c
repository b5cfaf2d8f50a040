/* test_journal.c - parse/capture/ for journald and syslog: journalctl's
 * JSON, json-seq, export and short formats and syslog's prefixes
 * recognised; journald's 48 KiB pieces rejoined by _LINE_BREAK=line-max
 * and by source, and, where the capture marks nothing (the text formats,
 * -o cat), by the request line's literal being still open; what journalctl
 * left out of a line named.
 *
 * The records are written here by hand from journald's documentation
 * (journal-export(5), systemd.journal-fields(7), journalctl(1)'s output
 * formats, RFC 3164, RFC 5424); tests/cli/journal.sh reads journalctl's own
 * output of a real journal file. */
#include <stdint.h>

#include "parse/capture/capture_internal.h"
#include "tests/parse/capture/capture_feed.h"

static int test_journal_recognise_each(void)
{
    static const struct {
        const char *line;
        ld_capture_kind want;
    } cases[] = {
        { "{\"__CURSOR\":\"s=1\",\"MESSAGE\":\"x\",\"_PID\":\"1\"}", LD_CAPTURE_JOURNAL_JSON },
        { "{\"MESSAGE\":[104,105],\"__REALTIME_TIMESTAMP\":\"1\"}", LD_CAPTURE_JOURNAL_JSON },
        { "\x1e{\"__CURSOR\":\"s=1\",\"MESSAGE\":null}", LD_CAPTURE_JOURNAL_JSON },
        { "__CURSOR=s=fb7f;i=1", LD_CAPTURE_JOURNAL_EXPORT },
        { "__REALTIME_TIMESTAMP=1777629600000001", LD_CAPTURE_JOURNAL_EXPORT },
        { "Nov 20 09:14:00 gpu-node-1 python3[4242]: [2026-11-20 09:14:01] x", LD_CAPTURE_JOURNAL_TEXT },
        { "Nov 20 09:14:00.000001 gpu-node-1 python3[4242]: x", LD_CAPTURE_JOURNAL_TEXT },
        { "2026-11-20T09:14:00+0000 gpu-node-1 python3[4242]: x", LD_CAPTURE_JOURNAL_TEXT },
        { "2026-11-20T09:14:00.123456+00:00 gpu-node-1 sglang: x", LD_CAPTURE_JOURNAL_TEXT },
        { "1763630040.000001 gpu-node-1 python3[4242]: x", LD_CAPTURE_JOURNAL_TEXT },
        { "Nov 20 09:14:00 python3[1]: no host", LD_CAPTURE_JOURNAL_TEXT },
        { "<14>Nov 20 09:14:00 gpu-node-1 python3[4242]: x", LD_CAPTURE_SYSLOG },
        { "<14>1 2026-11-20T09:14:00.1Z gpu-node-1 python3 4242 - - x", LD_CAPTURE_SYSLOG },
        { "[2026-11-20 09:14:05] Receive: obj=GenerateReqInput(rid='a')", LD_CAPTURE_PLAIN },
        { "2026-11-20 09:14:05,123 INFO sglang: x", LD_CAPTURE_PLAIN },
        { "{\"MESSAGE\":\"no cursor, no time\"}", LD_CAPTURE_PLAIN },
        { "__OTHER=1", LD_CAPTURE_PLAIN },
    };
    for (int i = 0; i < N(cases); i++)
        CHECK_MSG(ld_capture_recognise(cases[i].line, strlen(cases[i].line)) == cases[i].want, "case %d: %s", i,
                  cases[i].line);
    return 0;
}

#define JREC(stream, extra, msg) \
    "{\"__CURSOR\":\"s=1\",\"_STREAM_ID\":\"" stream "\"," extra "\"MESSAGE\":" msg ",\"_PID\":\"7\"}"

/* two streams' pieces interleaved, one cut inside a character (bytes) */
static int test_journal_json_rejoins_by_stream(void)
{
    static const char *const recs[] = {
        JREC("a", "\"_LINE_BREAK\":\"line-max\",", "\"[t] Receive: obj={'x': '\\u00e9t\"") ,
        JREC("b", "", "\"[t] other service\""),
        /* "é" cut: C3 | A9 */
        JREC("a", "\"_LINE_BREAK\":\"line-max\",", "[101,32,195]"),
        "\x1e" JREC("a", "", "[169,39,125]"),
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[0], "[t] other service");
    CHECK_EQ_STR(r.source[0], "b"); /* the pairer queues OpenAI lines by it */
    CHECK_EQ_STR(r.line[1], "[t] Receive: obj={'x': '\xc3\xa9te \xc3\xa9'}");
    CHECK_EQ_STR(r.source[1], "a");
    CHECK_EQ_INT(r.lineno[1], 1);
    CHECK_EQ_INT(r.n_problems, 0);
    result_free(&r);
    return 0;
}

/* journalctl without --all prints a long MESSAGE as null: the line it was
 * a piece of is handed out as cut, its later pieces dropped, and said */
static int test_journal_json_null_message(void)
{
    static const char *const recs[] = {
        JREC("a", "\"_LINE_BREAK\":\"line-max\",", "\"[t] Receive: obj={'x': 'ab\""),
        JREC("a", "\"_LINE_BREAK\":\"line-max\",", "null"),
        JREC("a", "", "\"cd'}\""),
        JREC("a", "", "\"[t] next\""),
        JREC("a", "", "null"),
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[0], "[t] Receive: obj={'x': 'ab");
    CHECK_EQ_STR(r.line[1], "[t] next");
    CHECK_EQ_INT(r.n_problems, 2);
    CHECK_EQ_INT(r.problem[0], LD_ERR_TRUNCATED);
    CHECK_EQ_INT(r.problem_line[0], 1);
    CHECK_EQ_INT(r.problem_line[1], 5);
    result_free(&r);
    return 0;
}

/* the fast path and cJSON read journal records alike, whatever the order
 * of their fields, escapes and spacing */
static int test_journal_json_fast_and_cjson_agree(void)
{
    static const char *const recs[] = {
        JREC("a", "", "\"plain\""),
        "{ \"MESSAGE\" : \"sp\\\"a\\\\ced\\n\" , \"__CURSOR\" : \"c\", \"_LINE_BREAK\":\"line-max\" }",
        ("{\"_HOSTNAME\":\"h\",\"_SYSTEMD_UNIT\":\"u.service\",\"SYSLOG_IDENTIFIER\":\"py\",\"_PID\":\"9\","
         "\"MESSAGE\":\"\\ud83d\\ude00\"}"),
        "{\"MESSAGE\":[],\"__CURSOR\":\"c\"}",
        "{\"MESSAGE\":[ 104 , 105 ],\"__CURSOR\":\"c\"}",
        "{\"MESSAGE\":\"first\",\"MESSAGE\":\"second\",\"__CURSOR\":\"c\"}",
        "{\"MESSAGE\":null,\"__CURSOR\":\"c\"}",
    };
    for (int i = 0; i < N(recs); i++) {
        ld_capture_record a, b;
        char *ba = NULL, *bb = NULL;
        size_t ca = 0, cb = 0, n = strlen(recs[i]);
        CHECK_MSG(ld_capture_parse(LD_CAPTURE_JOURNAL_JSON, recs[i], n, &ba, &ca, &a, NULL) == LD_OK, "%d", i);
        CHECK_MSG(ld_capture_parse_journal_json(recs[i], n, &bb, &cb, &b, NULL) == LD_OK, "%d", i);
        CHECK_MSG(a.len == b.len && !memcmp(a.text, b.text, a.len), "case %d: text", i);
        CHECK_MSG(a.source_len == b.source_len && !memcmp(a.source, b.source, a.source_len), "case %d: source", i);
        CHECK_MSG(a.last == b.last && !a.lost == !b.lost, "case %d: last, lost", i);
        free(ba);
        free(bb);
    }
    ld_capture_record r;
    char *buf = NULL;
    size_t cap = 0;
    const char *unit = recs[2];
    CHECK(ld_capture_parse(LD_CAPTURE_JOURNAL_JSON, unit, strlen(unit), &buf, &cap, &r, NULL) == LD_OK);
    CHECK_EQ_INT(r.source_len, strlen("h u.service py 9"));
    CHECK(!memcmp(r.source, "h u.service py 9", r.source_len));
    CHECK_EQ_STR(r.text, "\xf0\x9f\x98\x80");
    free(buf);
    return 0;
}

/* the export format: text fields, a binary MESSAGE whose bytes hold
 * newlines (its length's too: 10 is "\n"), line-max pieces, an entry the
 * member ends in without its blank line */
static int test_journal_export_fields(void)
{
    static const char *const recs[] = {
        "__CURSOR=s=1", "_STREAM_ID=a", "_LINE_BREAK=line-max", "MESSAGE=[t] Receive: obj={'x': '", "",
        "__CURSOR=s=2", "_STREAM_ID=a", "MESSAGE", NULL /* the binary value's first line */, NULL, "",
        "__CURSOR=s=3", "_STREAM_ID=b", "MESSAGE=[t] last, no blank line",
    };
    /* the value "é'}\n" cut to bytes: C3 A9 27 7D 0A 78 79 7A 0A 21 (10 bytes);
     * its length's first byte is "\n", so the reader sees: "" (before it),
     * then 7 zero bytes + "\xc3\xa9'}", then "xyz", then "!" */
    const char *lines[20];
    size_t lens[20];
    int n = 0;
    for (int i = 0; i < 8; i++) lines[n] = recs[i], lens[n++] = strlen(recs[i]);
    static const char zeros_and_text[] = { 0, 0, 0, 0, 0, 0, 0, (char)0xc3, (char)0xa9, '\'', '}' };
    lines[n] = "", lens[n++] = 0;
    lines[n] = zeros_and_text, lens[n++] = sizeof zeros_and_text;
    lines[n] = "xyz", lens[n++] = 3;
    lines[n] = "!", lens[n++] = 1;
    for (int i = 10; i < N(recs); i++) lines[n] = recs[i], lens[n++] = strlen(recs[i]);
    result r;
    memset(&r, 0, sizeof r);
    ld_capture *c = NULL;
    CHECK(ld_capture_new(LD_CAPTURE_AUTO, 0, &c, NULL) == LD_OK);
    feed_n(c, lines, lens, n, &r);
    CHECK_EQ_INT(ld_capture_current(c), LD_CAPTURE_JOURNAL_EXPORT);
    CHECK_EQ_INT(r.n_problems, 0);
    CHECK_EQ_INT(r.n, 2);
    CHECK_EQ_STR(r.line[0], "[t] Receive: obj={'x': '\xc3\xa9'}\nxyz\n!");
    CHECK_EQ_INT(r.lineno[0], 1);
    CHECK_EQ_STR(r.line[1], "[t] last, no blank line");
    CHECK_EQ_INT(ld_capture_stats_of(c)->marked_joins, 1);
    ld_capture_free(c);
    result_free(&r);
    return 0;
}

/* a broken entry is reported and skipped to its blank line */
static int test_journal_export_bad_entry(void)
{
    static const char *const recs[] = {
        "__CURSOR=s=1", "not a field", "MESSAGE=lost with its entry", "",
        "__CURSOR=s=2", "MESSAGE=kept", "",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.line[0], "kept");
    CHECK_EQ_INT(r.n_problems, 1);
    CHECK_EQ_INT(r.problem[0], LD_ERR_SYNTAX);
    CHECK_EQ_INT(r.problem_line[0], 2);
    result_free(&r);
    return 0;
}

/* journalctl -o short-iso, two services interleaved: no marks, so a line
 * whose literal is open goes on with its source's next records; a banner
 * is skipped; escapes and quotes cut across records are followed */
static int test_journal_text_rejoins_open_literals(void)
{
    static const char *const recs[] = {
        "-- Journal begins at Fri 2026-11-20 09:14:00 UTC. --",
        "2026-11-20T09:14:00+0000 h python3[1]: [2026-11-20 09:14:01] Receive: obj=GenerateReqInput(text='a\\",
        "2026-11-20T09:14:00+0000 h python3[2]: [2026-11-20 09:14:01] other: it's whole",
        "2026-11-20T09:14:00+0000 h python3[1]: 'b\"(', x=[1, {'k': \"it's\"",
        "-- Boot 0123456789abcdef0123456789abcdef --",
        "2026-11-20T09:14:00+0000 h python3[1]: }])",
        "2026-11-20T09:14:00+0000 h python3[1]: [2026-11-20 09:14:02] after",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n_problems, 0);
    CHECK_EQ_INT(r.n, 3);
    CHECK_EQ_STR(r.line[0], "[2026-11-20 09:14:01] other: it's whole");
    CHECK_EQ_STR(r.source[0], "h python3[2]");
    CHECK_EQ_STR(r.line[1], "[2026-11-20 09:14:01] Receive: obj=GenerateReqInput(text='a\\'b\"(', x=[1, {'k': "
                            "\"it's\"}])");
    CHECK_EQ_INT(r.lineno[1], 2);
    CHECK_EQ_STR(r.line[2], "[2026-11-20 09:14:02] after");
    result_free(&r);
    return 0;
}

/* a line cut for good (rsyslog keeps nothing of the rest; journalctl's
 * "[N blob data]"): the part that came is handed out and said, then the next
 * line is read as usual */
static int test_journal_text_cut_for_good(void)
{
    static const char *const recs[] = {
        "<14>Nov 20 09:14:00 h sglang[1]: [2026-11-20 09:14:01] Receive: obj={'a': 'cut",
        "<14>Nov 20 09:14:00 h sglang[1]: [2026-11-20 09:14:02] Finish: obj={'a': 1}",
        "<14>Nov 20 09:14:00 h sglang[1]: [2026-11-20 09:14:03] Receive: obj={'b': 'x",
        "<14>Nov 20 09:14:00 h sglang[1]: [48.0K blob data]",
        "<14>Nov 20 09:14:00 h sglang[1]: y'}",
        "<14>1 2026-11-20T09:14:04Z h sglang 1 - [m k=\"\\]\"] [2026-11-20 09:14:04] Receive: obj={'c': 'open",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n, 4);
    CHECK_EQ_STR(r.line[0], "[2026-11-20 09:14:01] Receive: obj={'a': 'cut");
    CHECK_EQ_STR(r.line[1], "[2026-11-20 09:14:02] Finish: obj={'a': 1}");
    CHECK_EQ_STR(r.line[2], "[2026-11-20 09:14:03] Receive: obj={'b': 'x");
    CHECK_EQ_STR(r.line[3], "[2026-11-20 09:14:04] Receive: obj={'c': 'open");
    CHECK_EQ_INT(r.n_problems, 3);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(r.problem[i], LD_ERR_TRUNCATED);
    CHECK_EQ_INT(r.problem_line[0], 1);
    CHECK_EQ_INT(r.problem_line[1], 3);
    CHECK_EQ_INT(r.problem_line[2], 6);
    result_free(&r);
    return 0;
}

/* -o cat is a plain member: a split line is rejoined; a plain file's own
 * unclosed line followed by a new one is passed on quietly, in order */
static int test_journal_cat_and_plain(void)
{
    static const char *const recs[] = {
        "[2026-11-20 09:14:01] Receive: obj={\"messages\": [{\"content\": \"a \\",
        "\" b\"}]}",
        "[2026-11-20 09:14:02] Finish: obj=GenerateReqInput(text=\"it's \"quoted\" badly)",
        "[2026-11-20 09:14:03] INFO: can't happen",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n_problems, 0);
    CHECK_EQ_INT(r.n, 3);
    CHECK_EQ_STR(r.line[0], "[2026-11-20 09:14:01] Receive: obj={\"messages\": [{\"content\": \"a \\\" b\"}]}");
    CHECK_EQ_STR(r.line[1], recs[2]);
    CHECK_EQ_STR(r.line[2], recs[3]);
    result_free(&r);
    return 0;
}

/* A line that begins with `{` but is no request event (a dict some other
 * code printed, binary junk) is not followed: its open bracket swallows
 * nothing; an SGLang JSON request line cut by -o cat still is. */
static int test_journal_cat_other_braces(void)
{
    static const char *const recs[] = {
        "{'config': [1, 2, {\"x\": 'unclosed",
        "[2026-11-20 09:14:02] Receive: obj=GenerateReqInput(rid='a')",
        "{\"timestamp\": \"2026-11-20T09:14:03\", \"event\": \"request.received\", \"obj\": {\"text\": \"a ",
        "b\"}}",
    };
    result r;
    CHECK(run(LD_CAPTURE_AUTO, 0, recs, N(recs), &r) == 0);
    CHECK_EQ_INT(r.n_problems, 0);
    CHECK_EQ_INT(r.n, 3);
    CHECK_EQ_STR(r.line[0], recs[0]);
    CHECK_EQ_STR(r.line[1], recs[1]);
    CHECK_EQ_STR(r.line[2], "{\"timestamp\": \"2026-11-20T09:14:03\", \"event\": \"request.received\", \"obj\": {\"text\": \"a b\"}}");
    result_free(&r);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_journal_recognise_each),
    LD_CASE(test_journal_json_rejoins_by_stream),
    LD_CASE(test_journal_json_null_message),
    LD_CASE(test_journal_json_fast_and_cjson_agree),
    LD_CASE(test_journal_export_fields),
    LD_CASE(test_journal_export_bad_entry),
    LD_CASE(test_journal_text_rejoins_open_literals),
    LD_CASE(test_journal_text_cut_for_good),
    LD_CASE(test_journal_cat_and_plain),
    LD_CASE(test_journal_cat_other_braces),
};

LD_TEST_MAIN(cases)
