/* test_repetition.c - degenerate-repetition detection (replay/analysis/repetition.c):
 * loops fire, ordinary prose, code, tables, lists and JSON do not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "replay/analysis/repetition.h"

static int found_in(const char *s, ld_repetition *r)
{
    int f = 0;
    if (ld_repetition_find(s, strlen(s), NULL, r, &f, NULL) != LD_OK) return -1;
    return f;
}

static char *repeat(const char *prefix, const char *unit, int n, const char *suffix)
{
    size_t len = strlen(prefix) + strlen(unit) * (size_t)n + strlen(suffix) + 1;
    char *b = malloc(len);
    strcpy(b, prefix);
    for (int i = 0; i < n; i++) strcat(b, unit);
    strcat(b, suffix);
    return b;
}


/* ------------------------------------------------------------ must fire */

static int test_repetition_sentence_loop(void)
{
    char *s = repeat("Sure, let me look. ", "I will now check the file. ", 50, "I will now");
    ld_repetition r;
    CHECK_EQ_INT(found_in(s, &r), 1);
    CHECK_EQ_INT(r.unit_len, 27);
    CHECK(!strncmp(s + r.unit_off, "I will now check the file. ", 27));
    CHECK(r.count >= 49);
    CHECK(r.start <= 19 && r.len >= 49 * 27);
    free(s);
    return 0;
}

static int test_repetition_token_loop(void)
{
    char *s = repeat("The answer is ", "the ", 60, "");
    ld_repetition r;
    CHECK_EQ_INT(found_in(s, &r), 1);
    CHECK_EQ_INT(r.unit_len, 4);
    CHECK(r.count >= 59);
    free(s);
    return 0;
}

static int test_repetition_paragraph_loop(void)
{
    char *s = repeat("Here is the analysis.\n\n",
                     "The function returns early when the buffer is empty, so the caller never "
                     "sees the error code and keeps going with stale data.\n\n", 4, "The function");
    ld_repetition r;
    CHECK_EQ_INT(found_in(s, &r), 1);
    CHECK(r.unit_len > 100 && r.count >= 3);
    CHECK(!strncmp(s + r.unit_off, "The function", 12));
    free(s);
    return 0;
}

static int test_repetition_line_pair_loop(void)
{
    /* two alternating lines, the period is both */
    char *s = repeat("Plan:\n", "- open the config file\n- read the timeout value\n", 8, "");
    ld_repetition r;
    CHECK_EQ_INT(found_in(s, &r), 1);
    CHECK_EQ_INT(r.unit_len, 48);
    free(s);
    return 0;
}

static int test_repetition_cjk_loop(void)
{
    char *s = repeat("", "\xe6\x88\x91\xe4\xbb\xac\xe9\x9c\x80\xe8\xa6\x81\xe6\xa3\x80\xe6\x9f\xa5"
                         "\xe8\xbf\x99\xe4\xb8\xaa\xe6\x96\x87\xe4\xbb\xb6\xe3\x80\x82", 30, "");
    ld_repetition r;
    CHECK_EQ_INT(found_in(s, &r), 1); /* no spaces: found on bytes */
    CHECK_EQ_INT(r.unit_len, 33); /* 10 characters of 3 bytes and a 3-byte full stop */
    free(s);
    return 0;
}

static int test_repetition_loop_after_normal_text(void)
{
    char *s = repeat("The build failed because the linker could not find libzstd. Installing the "
                     "development package fixes it; then rerun cmake so that pkg-config finds the "
                     "library.\n\n", "Let me try again.\n", 12, "Let me");
    ld_repetition r;
    CHECK_EQ_INT(found_in(s, &r), 1);
    CHECK_EQ_INT(r.unit_len, 18);
    CHECK(r.start >= 150);
    free(s);
    return 0;
}

/* ------------------------------------------------------------ must not fire */

static int none(const char *s)
{
    ld_repetition r;
    int f = found_in(s, &r);
    if (f == 1)
        fprintf(stderr, "  fired: unit \"%.*s\" x %zu at %zu\n", (int)r.unit_len, s + r.unit_off,
                r.count, r.start);
    return f == 0;
}

static int test_repetition_prose_readme(void)
{
    CHECK(none("# logdiff\n\nlogdiff reads the request logs of SGLang and vLLM servers and tells, "
               "for every request, whether the agent harness sent a broken message array, whether "
               "the chat template dropped something, or whether the log itself is incomplete.\n\n"
               "## Install\n\nRun `cmake -S . -B build` and then `cmake --build build`. The tests "
               "run with `ctest --test-dir build`. The build needs libcjson, pcre2, zstd and "
               "libarchive; on Debian the packages are libcjson-dev, libpcre2-dev, libzstd-dev and "
               "libarchive-dev.\n\n## Usage\n\n`logdiff scan logs/` counts the requests, "
               "`logdiff show RID` prints one, and `logdiff diff logs/` gives every request a "
               "verdict. The verdict is ok, harness, template, kernels, sampling or log.\n\n"
               "## License\n\nApache-2.0.\n"));
    return 0;
}

static int test_repetition_code_table_list_json(void)
{
    static const char code[] =
        "static int depth_of(const char *s, size_t n)\n{\n    int depth = 0;\n"
        "    for (size_t i = 0; i < n; i++) {\n        if (s[i] == '{') {\n            depth++;\n"
        "        } else if (s[i] == '}') {\n            if (--depth < 0) {\n                return -1;\n"
        "            }\n        }\n    }\n    return depth;\n}\n\n"
        "static const char *names[] = {\n    \"alpha\", \"beta\", \"gamma\", \"delta\",\n};\n"
        "int x[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};\n"
        "                }\n            }\n        }\n    }\n}\n";
    CHECK(none(code));
    char table[4096] = "| name | size | kind | owner |\n|------|------|------|-------|\n";
    for (int i = 0; i < 30; i++)
        snprintf(table + strlen(table), sizeof table - strlen(table),
                 "| file%02d.c | %d | source | team |\n", i, 100 + 17 * i);
    CHECK(none(table));
    char list[4096] = "Steps:\n";
    for (int i = 1; i <= 30; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list),
                 "%d. Open the file number %d and check its header.\n", i, i);
    CHECK(none(list));
    char json[8192] = "[";
    for (int i = 0; i < 40; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{\"id\": %d, \"name\": \"item%d\", \"enabled\": true, \"tags\": [], \"owner\": null}",
                 i ? ", " : "", i, i);
    strcat(json, "]");
    CHECK(none(json));
    char sep[512] = "";
    for (int i = 0; i < 8; i++) strcat(sep, "==========|---------|  \n");
    CHECK(none(sep)); /* no letters: separators are not a loop */
    CHECK(none("ha ha ha ha ha ha, that is a good one. No no no no, not that file."));
    return 0;
}

static int test_repetition_real_sources(void)
{
    static const char *const files[] = {"parse/pylit/pylit.c", "parse/request/request_fields.c", "README.md",
                                        "tools/gen_log_fixtures.py", "CMakeLists.txt"};
    int n = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", LD_SOURCE_DIR, files[i]);
        char *s = ld_test_slurp(path);
        if (!s) continue;
        CHECK_MSG(none(s), "%s", files[i]);
        free(s);
        n++;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/log-formats.md", LD_SHARED_DIR);
    char *doc = ld_test_slurp(path);
    if (doc) {
        CHECK_MSG(none(doc), "log-formats.md");
        free(doc);
        n++;
    }
    if (!n) SKIP("no source files found under %s", LD_SOURCE_DIR);
    return 0;
}

static int test_repetition_short_and_empty_inputs(void)
{
    ld_repetition r;
    int f = 1;
    CHECK(ld_repetition_find("", 0, NULL, &r, &f, NULL) == LD_OK && !f);
    CHECK(ld_repetition_find("abcabcabc", 9, NULL, &r, &f, NULL) == LD_OK && !f);
    char *s = repeat("", "the ", 19, ""); /* under the count for short units */
    CHECK(none(s));
    free(s);
    s = repeat("", "I will now check the file. ", 5, ""); /* a line said 5 times */
    CHECK(none(s));
    free(s);
    s = repeat("", "The function returns early when the buffer is empty, so it fails.\n", 2, "");
    CHECK(none(s)); /* a paragraph twice can be a quote */
    free(s);
    return 0;
}

static int test_repetition_large_input_tail_loop(void)
{
    /* 6 MiB of varied text, then a loop: only the last 4 MiB are scanned and
     * the loop at the end is found */
    size_t n = (size_t)6 << 20, at = 0;
    char *s = malloc(n + 4096);
    unsigned x = 12345;
    while (at < n) {
        x = x * 1103515245u + 12345u;
        at += (size_t)sprintf(s + at, "w%u ", (x >> 8) % 100000);
    }
    for (int i = 0; i < 30; i++) at += (size_t)sprintf(s + at, "Retrying the request. ");
    ld_repetition r;
    int f = 0;
    CHECK(ld_repetition_find(s, at, NULL, &r, &f, NULL) == LD_OK);
    CHECK_EQ_INT(f, 1);
    CHECK_EQ_INT(r.unit_len, 22);
    CHECK(r.start >= n - 16 && r.start + r.len == at);
    free(s);
    return 0;
}

/* The table from a scratch arena (reused, never reset between texts: stale
 * slots must not leak into the next text) gives what a calloc'd one gives,
 * on loops and non-loops, small tables, one too large for the arena, and
 * with an arena whose cap refuses the table. */
static int test_repetition_scratch_same_answer(void)
{
    char *texts[6];
    texts[0] = repeat("Sure, let me look. ", "I will now check the file. ", 50, "I will now");
    texts[1] = repeat("", "The function returns early when the buffer is empty.\n", 2, "");
    texts[2] = repeat("intro ", "the ", 40, " outro");
    texts[3] = repeat("", "I will now check the file. ", 5, "");
    size_t big = LD_REP_ARENA_SLOTS; /* its table needs 2 x big slots: past the arena's share */
    texts[4] = malloc(big + 4096);
    unsigned x = 7;
    size_t at = 0;
    while (at < big) {
        x = x * 1103515245u + 12345u;
        at += (size_t)sprintf(texts[4] + at, "w%u ", (x >> 8) % 100000);
    }
    for (int i = 0; i < 30; i++) at += (size_t)sprintf(texts[4] + at, "Retrying the request. ");
    texts[5] = repeat("", "no no no ", 3, "and a plain ending of the answer here");
    ld_arena a;
    ld_arena_init(&a, 0);
    for (int round = 0; round < 4; round++) {
        if (round == 3) { /* an arena too small for any table: calloc'd, and freed */
            ld_arena_release(&a);
            ld_arena_init(&a, 1024);
        }
        for (int i = 0; i < 6; i++) {
            ld_repetition want, got;
            int fw = -1, fg = -1;
            memset(&want, 0, sizeof want);
            memset(&got, 0, sizeof got);
            size_t n = strlen(texts[i]);
            CHECK(ld_repetition_find(texts[i], n, NULL, &want, &fw, NULL) == LD_OK);
            CHECK(ld_repetition_find(texts[i], n, &a, &got, &fg, NULL) == LD_OK);
            CHECK_EQ_INT(fg, fw);
            CHECK(!memcmp(&got, &want, sizeof got));
        }
        if (round == 1) ld_arena_reset(&a);
    }
    ld_arena_release(&a);
    for (int i = 0; i < 6; i++) free(texts[i]);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_repetition_sentence_loop),
    LD_CASE(test_repetition_token_loop),
    LD_CASE(test_repetition_paragraph_loop),
    LD_CASE(test_repetition_line_pair_loop),
    LD_CASE(test_repetition_cjk_loop),
    LD_CASE(test_repetition_loop_after_normal_text),
    LD_CASE(test_repetition_prose_readme),
    LD_CASE(test_repetition_code_table_list_json),
    LD_CASE(test_repetition_real_sources),
    LD_CASE(test_repetition_short_and_empty_inputs),
    LD_CASE(test_repetition_large_input_tail_loop),
    LD_CASE(test_repetition_scratch_same_answer),
};

LD_TEST_MAIN(cases)
