/* test_baseline.c - the baseline file of `logdiff regress`: writing and
 * reading it back, what the reader refuses (another version, hand edits),
 * and the comparison rules. */
#include <stdlib.h>
#include <string.h>

#include "replay/analysis/baseline.h"
#include "tests/support/ld_test.h"

/* A finding list of the given kinds (severity from the kind's name). */
static ld_findings findings_of(ld_arena *a, const char *const *kinds, size_t n)
{
    ld_findings f = { 0 };
    for (size_t i = 0; i < n; i++) {
        ld_severity sev = strstr(kinds[i], "faithful") ? LD_SEV_INFO : LD_SEV_ERROR;
        ld_findings_add(&f, a, kinds[i], sev, -1, "x");
    }
    return f;
}

static int add(ld_baseline *b, ld_arena *a, const char *rid, const char *verdict,
               const char *const *kinds, size_t n, uint64_t hash, size_t tag)
{
    ld_findings f = findings_of(a, kinds, n);
    return ld_baseline_add(b, rid, "(no rid) x:1", verdict, &f, hash, tag, NULL) == LD_OK ? 0 : -1;
}

/* Writes b and reads it back into out; the text in *text (malloc'd). */
static int round_trip(const ld_baseline *b, ld_baseline *out, char **text)
{
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f || ld_baseline_write(b, f, NULL) != LD_OK) return -1;
    fclose(f);
    ld_baseline_init(out);
    ld_error e;
    ld_error_clear(&e);
    if (ld_baseline_parse(*text, len, out, &e) != LD_OK) {
        fprintf(stderr, "  parse: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int test_baseline_round_trip(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_baseline b;
    ld_baseline_init(&b);
    const char *const tpl[] = { LD_K_TEMPLATE_DROPPED, LD_K_TEMPLATE_FAITHFUL, LD_K_TEMPLATE_DROPPED };
    CHECK(add(&b, &a, "zeta", "ok", NULL, 0, 1, 0) == 0);
    CHECK(add(&b, &a, "alpha", "template", tpl, 3, 0xfedcba9876543210ull, 1) == 0);
    CHECK(add(&b, &a, "zeta", "ok", NULL, 0, 2, 2) == 0);          /* a repeated rid */
    CHECK(add(&b, &a, "bad\xff\"q", "ok", NULL, 0, 3, 3) == 0);    /* not UTF-8 */
    ld_baseline_sort(&b);
    CHECK_EQ_STR(b.v[0].rid, "alpha");
    CHECK_EQ_INT(b.v[0].n_errors, 1); /* distinct */
    CHECK_EQ_INT(b.v[0].n_info, 1);
    CHECK_EQ_INT(b.v[3].occurrence, 1);
    CHECK_EQ_INT(b.v[3].tag, 2);
    ld_baseline back;
    char *text = NULL;
    CHECK(round_trip(&b, &back, &text) == 0);
    CHECK(strstr(text, "\"rid_hex\": \"626164ff2271\"") != NULL);
    CHECK(strstr(text, "{\"rid\": \"zeta\", \"occurrence\": 1,") != NULL);
    CHECK(strstr(text, "\"hash\": \"fedcba9876543210\"") != NULL);
    CHECK_EQ_INT(back.n, 4);
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ_STR(back.v[i].rid, b.v[i].rid);
        CHECK_EQ_STR(back.v[i].verdict, b.v[i].verdict);
        CHECK_EQ_INT(back.v[i].occurrence, b.v[i].occurrence);
        CHECK(back.v[i].hash == b.v[i].hash);
        CHECK_EQ_INT(back.v[i].n_errors, b.v[i].n_errors);
    }
    /* the same verdicts give the same bytes */
    char *again = NULL;
    ld_baseline back2;
    CHECK(round_trip(&back, &back2, &again) == 0);
    CHECK_EQ_STR(again, text);
    free(text);
    free(again);
    ld_baseline_free(&back);
    ld_baseline_free(&back2);
    ld_baseline_free(&b);
    ld_arena_release(&a);
    return 0;
}

/* Parses `text`; returns the status and the message in msg. */
static ld_status parse(const char *text, char *msg, size_t cap)
{
    ld_baseline b;
    ld_baseline_init(&b);
    ld_error e;
    ld_error_clear(&e);
    ld_status st = ld_baseline_parse(text, strlen(text), &b, &e);
    snprintf(msg, cap, "%s", e.msg);
    ld_baseline_free(&b);
    return st;
}

#define HEAD "{\"format\": \"logdiff-regress-baseline\", \"version\": 1, \"requests\": [\n"
#define ENTRY(rest) "{\"rid\": \"a\", " rest "}"

static int test_baseline_refuses(void)
{
    char msg[256];
    CHECK_EQ_INT(parse(HEAD ENTRY("\"verdict\": \"ok\", \"errors\": [], \"info\": [], "
                                  "\"hash\": \"0000000000000001\"") "]}", msg, sizeof msg), LD_OK);
    CHECK_EQ_INT(parse("{\"format\": \"logdiff-regress-baseline\", \"version\": 2, \"requests\": []}",
                       msg, sizeof msg), LD_ERR_UNSUPPORTED);
    CHECK(strstr(msg, "version 2") && strstr(msg, "reads version 1"));
    CHECK_EQ_INT(parse("{\"requests\": []}", msg, sizeof msg), LD_ERR_UNSUPPORTED);
    CHECK(strstr(msg, "not a logdiff baseline"));
    CHECK_EQ_INT(parse(HEAD "{\"rid\": \"a\",\n oops]}", msg, sizeof msg), LD_ERR_SYNTAX);
    CHECK_EQ_INT(parse(HEAD ENTRY("\"verdict\": \"fine\", \"errors\": [], \"info\": [], "
                                  "\"hash\": \"0000000000000001\"") "]}", msg, sizeof msg), LD_ERR_SYNTAX);
    CHECK(strstr(msg, "request 1 (rid 'a')") && strstr(msg, "verdict"));
    CHECK_EQ_INT(parse(HEAD ENTRY("\"verdict\": \"template\", \"errors\": [\"template.droped\"], "
                                  "\"info\": [], \"hash\": \"0000000000000001\"") "]}", msg, sizeof msg),
                 LD_ERR_SYNTAX);
    CHECK(strstr(msg, "unknown finding kind 'template.droped'"));
    /* edited to ok without removing the error: the verdict does not follow */
    CHECK_EQ_INT(parse(HEAD ENTRY("\"verdict\": \"ok\", \"errors\": [\"template.dropped_message\"], "
                                  "\"info\": [], \"hash\": \"0000000000000001\"") "]}", msg, sizeof msg),
                 LD_ERR_SYNTAX);
    CHECK(strstr(msg, "does not follow"));
    CHECK_EQ_INT(parse(HEAD ENTRY("\"verdict\": \"ok\", \"errors\": [], \"info\": [], "
                                  "\"hash\": \"xyz\"") "]}", msg, sizeof msg), LD_ERR_SYNTAX);
    CHECK_EQ_INT(parse(HEAD ENTRY("\"verdict\": \"ok\", \"errors\": [], \"info\": [], \"hash\": "
                                  "\"0000000000000001\", \"note\": 1") "]}", msg, sizeof msg), LD_ERR_SYNTAX);
    CHECK(strstr(msg, "unknown field \"note\""));
    CHECK_EQ_INT(parse(HEAD ENTRY("\"verdict\": \"ok\", \"errors\": [], \"info\": [], "
                                  "\"hash\": \"0000000000000001\"") ",\n"
                       ENTRY("\"verdict\": \"ok\", \"errors\": [], \"info\": [], "
                             "\"hash\": \"0000000000000002\"") "]}", msg, sizeof msg), LD_ERR_SYNTAX);
    CHECK(strstr(msg, "twice"));
    return 0;
}

/* The layout ld_baseline_write gives is read a line at a time; any other
 * layout of the same JSON reads the same, and a damaged line is reported
 * at its line whichever reader met it. */
static int test_baseline_layouts(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_baseline b, back;
    ld_baseline_init(&b);
    const char *const tpl[] = { LD_K_TEMPLATE_DROPPED, LD_K_TEMPLATE_FAITHFUL };
    for (int i = 0; i < 5; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "r%d", 4 - i);
        CHECK(add(&b, &a, rid, i % 2 ? "template" : "ok", i % 2 ? tpl : NULL, i % 2 ? 2 : 0, (uint64_t)i, (size_t)i) == 0);
    }
    ld_baseline_sort(&b);
    char *text = NULL;
    CHECK(round_trip(&b, &back, &text) == 0);
    ld_baseline_free(&back);
    size_t len = strlen(text);
    char *one_line = strdup(text), *spaced = malloc(2 * len + 1);
    for (char *p = one_line; *p; p++) if (*p == '\n') *p = ' ';
    size_t k = 0;
    for (size_t i = 0; i < len; i++) { if (text[i] == ',') spaced[k++] = '\n'; spaced[k++] = text[i]; }
    spaced[k] = 0;
    const char *variants[] = { text, one_line, spaced };
    for (int v = 0; v < 3; v++) {
        ld_baseline_init(&back);
        ld_error e;
        ld_error_clear(&e);
        CHECK_MSG(ld_baseline_parse(variants[v], strlen(variants[v]), &back, &e) == LD_OK, "layout %d: %s", v, e.msg);
        CHECK_EQ_INT(back.n, b.n);
        for (size_t i = 0; i < b.n; i++) {
            CHECK_EQ_STR(back.v[i].rid, b.v[i].rid);
            CHECK_EQ_STR(back.v[i].verdict, b.v[i].verdict);
            CHECK(back.v[i].hash == b.v[i].hash && back.v[i].n_errors == b.v[i].n_errors &&
                  back.v[i].n_info == b.v[i].n_info);
        }
        ld_baseline_free(&back);
    }
    /* line 3 (the second request) damaged: a syntax error at line 3 */
    char *line3 = strchr(strchr(text, '\n') + 1, '\n') + 1;
    memcpy(line3, "{\"rid\": [", 10);
    ld_baseline_init(&back);
    ld_error e;
    ld_error_clear(&e);
    CHECK(ld_baseline_parse(text, len, &back, &e) == LD_ERR_SYNTAX);
    CHECK_MSG(e.line == 3, "line %llu: %s", (unsigned long long)e.line, e.msg);
    ld_baseline_free(&back);
    free(text);
    free(one_line);
    free(spaced);
    ld_baseline_free(&b);
    ld_arena_release(&a);
    return 0;
}

/* Every kind finding.h defines is one a baseline may hold: else a baseline
 * written with it could not be read back. */
static int test_baseline_knows_every_kind(void)
{
    FILE *f = fopen(LD_SOURCE_DIR "/replay/analysis/finding.h", "r");
    CHECK(f != NULL);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128], kind[128];
        if (sscanf(line, "#define LD_K_%127s \"%127[^\"]\"", name, kind) != 2) continue;
        char text[512], msg[256];
        snprintf(text, sizeof text, HEAD ENTRY("\"verdict\": \"ok\", \"errors\": [], \"info\": "
                 "[\"%s\"], \"hash\": \"0000000000000001\"") "]}", kind);
        CHECK_MSG(parse(text, msg, sizeof msg) == LD_OK, "%s: %s", kind, msg);
        n++;
    }
    fclose(f);
    CHECK(n >= 15);
    return 0;
}

static int test_baseline_compare(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_baseline was, now;
    ld_baseline_init(&was);
    ld_baseline_init(&now);
    const char *const drop[] = { LD_K_TEMPLATE_DROPPED };
    const char *const both[] = { LD_K_TEMPLATE_DROPPED, LD_K_TEMPLATE_MANGLED };
    const char *const empty[] = { LD_K_HARNESS_EMPTY_ASSISTANT };
    CHECK(add(&was, &a, "broke", "ok", NULL, 0, 1, 0) == 0);
    CHECK(add(&was, &a, "worse", "template", drop, 1, 1, 1) == 0);
    CHECK(add(&was, &a, "fixed", "template", drop, 1, 1, 2) == 0);
    CHECK(add(&was, &a, "better", "template", both, 2, 1, 3) == 0);
    CHECK(add(&was, &a, "same", "harness", empty, 1, 1, 4) == 0);
    CHECK(add(&was, &a, "gone", "ok", NULL, 0, 1, 5) == 0);
    CHECK(add(&now, &a, "broke", "template", drop, 1, 1, 0) == 0);
    CHECK(add(&now, &a, "worse", "template", both, 2, 1, 1) == 0);
    CHECK(add(&now, &a, "fixed", "ok", NULL, 0, 1, 2) == 0);
    CHECK(add(&now, &a, "better", "template", drop, 1, 1, 3) == 0);
    CHECK(add(&now, &a, "same", "harness", empty, 1, 1, 4) == 0);
    CHECK(add(&now, &a, "newbad", "harness", empty, 1, 1, 5) == 0);
    CHECK(add(&now, &a, "newok", "ok", NULL, 0, 1, 6) == 0);
    ld_baseline_sort(&was);
    ld_baseline_sort(&now);
    ld_baseline_diff d;
    CHECK(ld_baseline_compare(&was, &now, &d, NULL) == LD_OK);
    static const struct { const char *rid; ld_change c; size_t n_new; } want[] = {
        { "better", LD_CHANGE_IMPROVED, 0 }, { "broke", LD_CHANGE_REGRESSED, 1 },
        { "fixed", LD_CHANGE_FIXED, 0 },     { "newbad", LD_CHANGE_NEW_FAILING, 1 },
        { "newok", LD_CHANGE_NEW, 0 },       { "same", LD_CHANGE_SAME, 0 },
        { "worse", LD_CHANGE_REGRESSED, 1 },
    };
    CHECK_EQ_INT(now.n, 7);
    for (size_t i = 0; i < 7; i++) {
        CHECK_EQ_STR(now.v[i].rid, want[i].rid);
        CHECK_MSG(d.change[i] == want[i].c, "%s: %s", want[i].rid, ld_change_name(d.change[i]));
        CHECK_EQ_INT(d.n_new_errors[i], want[i].n_new);
    }
    CHECK_EQ_STR(d.new_errors[6][0], LD_K_TEMPLATE_MANGLED);
    CHECK_EQ_INT(d.n_missing, 1);
    CHECK_EQ_STR(was.v[d.missing[0]].rid, "gone");
    CHECK_EQ_INT(d.count[LD_CHANGE_REGRESSED], 2);
    ld_baseline_diff_free(&d);
    ld_baseline_free(&was);
    ld_baseline_free(&now);
    ld_arena_release(&a);
    return 0;
}

static int test_baseline_utf8(void)
{
    CHECK_EQ_INT(ld_utf8_seq_len("a", 1), 1);
    CHECK_EQ_INT(ld_utf8_seq_len("\xc3\xa9", 2), 2);
    CHECK_EQ_INT(ld_utf8_seq_len("\xf0\x9f\x98\x80", 4), 4);
    CHECK_EQ_INT(ld_utf8_seq_len("\xc0\xaf", 2), 0);      /* overlong */
    CHECK_EQ_INT(ld_utf8_seq_len("\xed\xa0\x80", 3), 0);  /* lone surrogate (WTF-8) */
    CHECK_EQ_INT(ld_utf8_seq_len("\xf4\x90\x80\x80", 4), 0);
    CHECK_EQ_INT(ld_utf8_seq_len("\xe2\x82", 2), 0);      /* cut */
    CHECK_EQ_INT(ld_utf8_seq_len("\xff", 1), 0);
    return 0;
}

/* Lines read in place and lines left to cJSON (an escape in a rid, an
 * upper-case hash refused with its message) in one file, out of order:
 * the entries sorted as ever, the tags their places in the file. */
static int test_baseline_lines_either_way(void)
{
    ld_baseline b;
    ld_baseline_init(&b);
    ld_error e;
    ld_error_clear(&e);
    const char *text = HEAD ENTRY("\"verdict\": \"ok\", \"errors\": [], \"info\": [], \"hash\": \"0000000000000001\"") ",\n"
                       "{\"rid\": \"\\u0040q\\\"\", \"occurrence\": 2, \"verdict\": \"harness\", "
                       "\"errors\": [\"harness.empty_assistant\"], \"info\": [], \"hash\": \"00000000000000ff\"},\n"
                       "{\"rid\": \"@q\", \"verdict\": \"template\", \"errors\": [\"template.order\", "
                       "\"template.dropped_message\", \"template.order\"], \"info\": [\"template.faithful\"], "
                       "\"hash\": \"00000000000000fe\"}\n]}\n";
    CHECK_MSG(ld_baseline_parse(text, strlen(text), &b, &e) == LD_OK, "%s", e.msg);
    CHECK_EQ_INT(b.n, 3);
    CHECK_EQ_STR(b.v[0].rid, "@q");
    CHECK_EQ_INT(b.v[0].tag, 2);
    CHECK_EQ_INT(b.v[0].n_errors, 2);
    CHECK_EQ_STR(b.v[0].errors[0], "template.dropped_message");
    CHECK_EQ_INT(b.v[0].n_info, 1);
    CHECK_EQ_STR(b.v[1].rid, "@q\"");
    CHECK_EQ_INT(b.v[1].occurrence, 2);
    CHECK(b.v[1].hash == 0xff);
    CHECK_EQ_STR(b.v[2].rid, "a");
    ld_baseline_free(&b);
    char msg[256];
    CHECK_EQ_INT(parse(HEAD ENTRY("\"verdict\": \"ok\", \"errors\": [], \"info\": [], "
                                  "\"hash\": \"00000000000000FF\"") "]}", msg, sizeof msg), LD_ERR_SYNTAX);
    CHECK(strstr(msg, "\"hash\" is not 16 lower-case hex digits"));
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_baseline_round_trip),
    LD_CASE(test_baseline_refuses),
    LD_CASE(test_baseline_layouts),
    LD_CASE(test_baseline_knows_every_kind),
    LD_CASE(test_baseline_compare),
    LD_CASE(test_baseline_utf8),
    LD_CASE(test_baseline_lines_either_way),
};

LD_TEST_MAIN(cases)
