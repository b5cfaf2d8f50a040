/* test_repetition.c - degenerate-repetition detection (replay/analysis/repetition.c):
 * loops fire, ordinary prose, code, tables, lists and JSON do not. */
#include <stdint.h>
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

/* ------------------------------------------------------------ against a brute force */

static size_t b_letters(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0xC0) k++;
    }
    return k;
}

/* The bytes a stretch of period p must cover, from repetition.h's words. */
static size_t b_need(size_t p)
{
    size_t copies = p < LD_REP_SHORT_UNIT ? LD_REP_SHORT_COUNT : p < LD_REP_LONG_UNIT ? LD_REP_MID_COUNT
                                                                                      : LD_REP_LONG_COUNT;
    return copies * p < LD_REP_MIN_BYTES ? LD_REP_MIN_BYTES : copies * p;
}

/* The letters of the shortest unit of the p-periodic s[0..p): those of its
 * shortest period (64 "a" are a unit of one letter, not "aa" twice). */
static size_t b_unit_letters(const char *s, size_t p)
{
    size_t q = 1;
    for (;; q++) {
        if (p % q) continue;
        size_t k = q;
        while (k < p && s[k] == s[k - q]) k++;
        if (k == p) break;
    }
    return b_letters(s, q);
}

/* The length of the longest reportable stretch of s[0..n) (0: none), by
 * brute force: every period p, every longest stretch where s[k] == s[k+p]
 * holds, its length against the thresholds, its unit's letters. */
static size_t brute_longest(const char *s, size_t n)
{
    size_t best = 0;
    for (size_t p = 1; 3 * p <= n; p++) {
        for (size_t i = 0; i + p < n;) {
            if (s[i] != s[i + p]) { i++; continue; }
            size_t from = i;
            while (i + p < n && s[i] == s[i + p]) i++;
            size_t len = i - from + p;
            if (len >= b_need(p) && len > best && b_unit_letters(s + from, p) >= LD_REP_MIN_LETTERS)
                best = len;
        }
    }
    return best;
}

/* What the search reports is a reportable stretch: periodic with its unit,
 * long enough, letters in the unit, the count and the unit's copy right. */
static int valid_report(const char *s, const ld_repetition *r)
{
    size_t u = r->unit_len;
    if (!u || r->len < b_need(u) || r->count != r->len / u) return 0;
    for (size_t k = r->start + u; k < r->start + r->len; k++)
        if (s[k] != s[k - u]) return 0;
    if (r->unit_off < r->start || r->unit_off >= r->start + u) return 0;
    return b_unit_letters(s + r->start, u) >= LD_REP_MIN_LETTERS;
}

static uint64_t b_rng = 0x9E3779B97F4A7C15ull;

static size_t b_rnd(size_t m)
{
    b_rng ^= b_rng << 13;
    b_rng ^= b_rng >> 7;
    b_rng ^= b_rng << 17;
    return (size_t)(b_rng % m);
}

/* Random bytes of one of a few alphabets: prose-like words, two letters
 * (windows come back often), UTF-8 characters, letters and punctuation. */
static void fill(char *b, size_t n, int kind)
{
    static const char *const words[] = {"the ", "file ", "is ", "open ", "and ", "we ", "check ",
                                        "it ", "again ", "elephantine ", "giraffes ", ", ", ".\n"};
    static const char *const cjk[] = {"\xe6\x88\x91", "\xe4\xbb\xac", "\xe9\x9c\x80", "\xe8\xa6\x81", "\xc3\xa9", " "};
    size_t at = 0;
    while (at < n) {
        const char *w = kind == 0 ? words[b_rnd(13)] : kind == 2 ? cjk[b_rnd(6)] : NULL;
        char one[2] = {kind == 1 ? "ab"[b_rnd(2)] : "ab .,x"[b_rnd(6)], 0};
        if (!w) w = one;
        for (size_t k = 0; w[k] && at < n; k++) b[at++] = w[k];
    }
}

/* A text likely to hold a loop the nearest sighting does not show: a unit
 * of 1..200 bytes (some with a window twice in it, some with every window
 * twice: the nearest sighting is never a unit back), copies of it around
 * the thresholds, before it copies of its windows at other distances (the
 * unit's start twice, a few bytes apart or a unit apart), between filler. */
static size_t tricky_text(char *b, size_t cap)
{
    int kind = (int)b_rnd(4);
    size_t p = 1 + (b_rnd(3) ? b_rnd(64) : b_rnd(200)), n = 0;
    char unit[256];
    fill(unit, p, kind);
    if (p > 24 && b_rnd(2)) { /* a window twice in the unit */
        size_t len = 8 + b_rnd(p / 2 - 7), to = len + b_rnd(p - 2 * len + 1);
        memcpy(unit + to, unit, len);
    } else if (b_rnd(3) == 0) { /* every window twice: (x F)(x F)(y F)(y F)..., |F| >= 7 */
        size_t m = 2 + b_rnd(3), f = 7 + b_rnd(14);
        char filler[24];
        fill(filler, f, kind);
        p = 0;
        for (size_t k = 0; k < 2 * m; k++) {
            unit[p++] = "xyzq"[k / 2];
            memcpy(unit + p, filler, f);
            p += f;
        }
    }
    size_t copies = (b_need(p) + p - 1) / p, lead = b_rnd(80);
    copies = copies + b_rnd(3) - (copies > 1 ? 1 : 0);
    fill(b, lead, kind);
    n = lead;
    for (int e = (int)b_rnd(4); e > 0; e--) { /* earlier sightings of the unit's windows */
        size_t len = 8 + b_rnd(16), gap = b_rnd(2 * p + 40);
        if (len > p) len = p;
        memcpy(b + n, unit + b_rnd(p - len + 1), len);
        n += len;
        fill(b + n, gap, kind);
        n += gap;
    }
    for (size_t i = 0; i < copies * p + b_rnd(p) && n < cap - 100; i++) b[n++] = unit[i % p];
    size_t tail = b_rnd(60);
    fill(b + n, tail, kind);
    return n + tail;
}

static int check_against_brute(const char *b, size_t n, const char *what, int t)
{
    ld_repetition r;
    int f = -1;
    CHECK(ld_repetition_find(b, n, NULL, &r, &f, NULL) == LD_OK);
    size_t want = brute_longest(b, n);
    CHECK_MSG(f == (want > 0), "%s %d (n=%zu): found %d, brute force %zu", what, t, n, f, want);
    if (f) {
        CHECK_MSG(valid_report(b, &r), "%s %d: %zu+%zu unit %zu", what, t, r.start, r.len, r.unit_len);
        CHECK_MSG(r.len == want, "%s %d: reported %zu bytes, the longest is %zu", what, t, r.len, want);
    }
    return 0;
}

static int test_repetition_matches_brute_force(void)
{
    char *b = malloc(4096);
    int loops = 0;
    for (int t = 0; t < 1500; t++) {
        size_t n = tricky_text(b, 4096 - 100);
        if (check_against_brute(b, n, "text", t)) return 1;
        loops += brute_longest(b, n) > 0;
    }
    free(b);
    CHECK(loops > 500);
    return 0;
}

/* Loops of exactly the bytes they need, whose every window comes back
 * within the unit (the nearest sighting is never a unit back), at every
 * offset over two units: the walks must reach a unit back from some
 * position of each, however the loop falls on the multiples of 2^z. */
static int test_repetition_shortest_loops_at_every_offset(void)
{
    static const size_t fillers[] = {7, 15, 16, 17, 8, 31};
    char *b = malloc(4096), unit[512];
    for (size_t u = 0; u < sizeof fillers / sizeof fillers[0]; u++) {
        size_t f = fillers[u], m = u < 4 ? 2 : 3, p = 0;
        for (size_t k = 0; k < 2 * m; k++) { /* (x F)(x F)(y F)(y F)... */
            unit[p++] = "xyz"[k / 2];
            for (size_t i = 0; i < f; i++) unit[p++] = "elephantine giraffes, wide awake"[i];
        }
        for (size_t off = 0; off < 2 * p; off++) {
            fill(b, off, 0);
            size_t n = off;
            for (size_t i = 0; i < b_need(p); i++) b[n++] = unit[(i + off) % p];
            n += (size_t)sprintf(b + n, "... and no more.");
            if (check_against_brute(b, n, "shortest loop", (int)(p * 1000 + off))) return 1;
            CHECK(brute_longest(b, n) >= b_need(p));
        }
    }
    free(b);
    return 0;
}

/* Loops the nearest sighting never follows: a de Bruijn unit (every 8-byte
 * window twice in it), a unit of a few bytes that passes only as a multiple
 * (18 copies of 6 bytes are 6 of 18; but 70 "z" are no loop of "zz"), and the pair of
 * the screen's test (a key twice, then its loop). */
static int test_repetition_loops_the_nearest_sighting_hides(void)
{
    char *b = malloc(4096);
    char db[520];
    unsigned char seen[512] = {1}; /* B(2,9) by the prefer-one rule, from 9 zeros */
    unsigned v = 0;
    size_t k = 9;
    memset(db, 'a', 9);
    for (; k < 520; k++) {
        unsigned one = ((v << 1) | 1) & 511, zero = (v << 1) & 511;
        v = !seen[one] ? one : zero;
        if (seen[v]) break;
        seen[v] = 1;
        db[k] = "ab"[v & 1];
    }
    CHECK_EQ_INT(k, 520); /* every 9 bits once: every 8 twice in the 512 of a turn */
    size_t n = 0;
    for (size_t i = 0; i < 3 * 512 + 7; i++) b[n++] = db[i % 512];
    if (check_against_brute(b, n, "de Bruijn", 0)) return 1;
    char *s = repeat("Then: ", "abcde ", 18, " done.");
    if (check_against_brute(s, strlen(s), "18 x 6 bytes", 0)) return 1;
    ld_repetition r;
    CHECK_EQ_INT(found_in(s, &r), 1);
    CHECK_EQ_INT(r.unit_len, 18);
    free(s);
    s = repeat("Zz", "z", 70, " said the dog");
    if (check_against_brute(s, strlen(s), "70 z", 0)) return 1;
    CHECK_EQ_INT(found_in(s, &r), 0); /* a unit of one letter, however many */
    free(s);
    s = repeat("Zz", "z ", 70, " said the dog");
    if (check_against_brute(s, strlen(s), "70 z", 0)) return 1;
    CHECK_EQ_INT(found_in(s, &r), 0);
    free(s);
    /* the gate's case: a key at distance 24 twice, then a loop of 24 */
    n = (size_t)sprintf(b, "we check the file. elephantine giraQfes and more. elephantine giraffes wide ");
    for (int i = 0; i < 6 * 24 + 12; i++) b[n++] = "elephantine giraffes ok "[i % 24];
    n += (size_t)sprintf(b + n, " and that was all.");
    if (check_against_brute(b, n, "pair before loop", 0)) return 1;
    free(b);
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
    LD_CASE(test_repetition_matches_brute_force),
    LD_CASE(test_repetition_shortest_loops_at_every_offset),
    LD_CASE(test_repetition_loops_the_nearest_sighting_hides),
};

LD_TEST_MAIN(cases)
