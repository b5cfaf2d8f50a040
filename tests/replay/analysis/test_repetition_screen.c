/* test_repetition_screen.c - ld_repetition_find with its screen
 * (replay/analysis/repetition_screen.c) against the same search without the
 * screen, the oracle: the same answer, field for field, on
 * random, periodic (periods 1..300), near-periodic, corpus and long texts;
 * and the screen's classifications (byte by byte, SSE2, AVX2, AVX-512BW, as
 * far as the machine has them) agree, with each other and with a byte
 * oracle. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "replay/analysis/repetition.h"
#include "replay/analysis/repetition_screen.h"

/* ------------------------------------------------------------ the oracle:
 * repetition.c's search without its screen (the search itself is checked
 * against a brute force in test_repetition.c). */

static size_t o_letters(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0xC0) k++;
    }
    return k;
}

static int oracle(const char *s, size_t n, ld_repetition *out)
{
    int found = 0;
    memset(out, 0, sizeof *out);
    if (ld_repetition_find_unscreened(s, n, NULL, out, &found, NULL) != LD_OK) abort();
    return found;
}

/* ------------------------------------------------------------ comparing */

static long g_texts, g_loops, g_screened_out;

/* The library's answer (without and with a scratch arena) is the oracle's;
 * the screen's two classifications agree; a text the screen lets through
 * ends with the oracle's answer all the same. */
static int same_answer(const char *s, size_t n, ld_arena *arena)
{
    ld_repetition want, got, got_a;
    memset(&got, 0, sizeof got);
    memset(&got_a, 0, sizeof got_a);
    int fw = oracle(s, n, &want), fg = -1, fa = -1;
    if (ld_repetition_find(s, n, NULL, &got, &fg, NULL) != LD_OK) return 0;
    if (ld_repetition_find(s, n, arena, &got_a, &fa, NULL) != LD_OK) return 0;
    if (fg != fw || fa != fw) {
        fprintf(stderr, "  n=%zu: found %d/%d, oracle %d (start %zu len %zu unit %zu)\n", n, fg,
                fa, fw, want.start, want.len, want.unit_len);
        return 0;
    }
    if (fw && (memcmp(&got, &want, sizeof got) || memcmp(&got_a, &want, sizeof got))) {
        fprintf(stderr, "  n=%zu: got %zu+%zu unit %zu, oracle %zu+%zu unit %zu\n", n, got.start,
                got.len, got.unit_len, want.start, want.len, want.unit_len);
        return 0;
    }
    size_t base = n > LD_REP_MAX_SCAN ? n - LD_REP_MAX_SCAN : 0;
    int sc = ld_rep_screen(s + base, n - base, NULL);
    if (sc != ld_rep_screen_bytes(s + base, n - base, NULL)) {
        fprintf(stderr, "  n=%zu: SSE2 and byte screens differ\n", n);
        return 0;
    }
    for (int level = 1; level < LD_REP_SCREEN_BEST; level++) {
        if (ld_rep_screen_at(level, s + base, n - base, NULL) != sc) {
            fprintf(stderr, "  n=%zu: the screen at level %d differs\n", n, level);
            return 0;
        }
    }
    if (fw && !sc) {
        fprintf(stderr, "  n=%zu: the screen ruled out a loop\n", n);
        return 0;
    }
    g_texts++;
    g_loops += fw;
    g_screened_out += !sc;
    ld_arena_reset(arena);
    return 1;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint32_t rnd(uint32_t m)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 16) % m);
}

static const char *const WORDS[] = {"the", "file", "is", "open", "and", "we", "check", "it",
                                    "again", "now", "ok", "x", "i", "a", "ha", "no", "value",
                                    "returns", "error", "\xe6\x88\x91", "\xe4\xbb\xac",
                                    "\xe6\x96\x87\xe4\xbb\xb6", "0", "42", "--", "|", "{}",
                                    "\"k\":", "abcdefghijklmnopqrstuvwxyz0123456789"};
static const char *const SEPS[] = {" ", " ", " ", ", ", ". ", "\n", "\n\n", "\t", "", "-", "/"};

/* n bytes of words and separators drawn from small sets (many short
 * repeats), blanks at the end. */
static size_t prose(char *b, size_t n)
{
    size_t at = 0;
    while (at < n) {
        const char *w = WORDS[rnd(sizeof WORDS / sizeof WORDS[0])];
        const char *sp = SEPS[rnd(sizeof SEPS / sizeof SEPS[0])];
        size_t lw = strlen(w), ls = strlen(sp);
        if (at + lw + ls > n) break;
        memcpy(b + at, w, lw);
        memcpy(b + at + lw, sp, ls);
        at += lw + ls;
    }
    memset(b + at, ' ', n - at);
    return n;
}

/* Bytes from an alphabet of k symbols (letters, spaces, punctuation, UTF-8). */
static void bytes_of(char *b, size_t n, unsigned k)
{
    static const char alpha[] = "ab ,.\n\xe6\x88" "cdefXYZ01{}\"\xc3\xa9\xff\x80";
    for (size_t i = 0; i < n; i++) b[i] = alpha[rnd(k < sizeof alpha - 1 ? k : sizeof alpha - 1)];
}

/* A unit of p bytes (from prose or bytes) written over [at, at+len), then
 * maybe a few bytes changed. */
static void periodic(char *b, size_t at, size_t len, size_t p, int mutations)
{
    char unit[512];
    if (rnd(2)) {
        prose(unit, p);
    } else {
        bytes_of(unit, p, 2 + rnd(20));
    }
    for (size_t i = 0; i < len; i++) b[at + i] = unit[i % p];
    for (int m = 0; m < mutations; m++) b[at + rnd((uint32_t)len)] = (char)('A' + rnd(26));
}

static int test_repetition_screen_random_texts(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    char *b = malloc(20000);
    for (int t = 0; t < 3000; t++) {
        size_t n = 1 + rnd(t < 2000 ? 600 : 8000);
        if (rnd(2)) n = prose(b, n);
        else bytes_of(b, n, 1 + rnd(24));
        CHECK_MSG(same_answer(b, n, &a), "random text %d", t);
    }
    free(b);
    ld_arena_release(&a);
    return 0;
}

/* Every period 1..300, the stretch at the start, the middle or the end of
 * the text, from a little under to well over the thresholds, whole or with
 * a byte or two changed. */
static int test_repetition_screen_periods(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    size_t cap = 4096 + 300 * 24;
    char *b = malloc(cap);
    for (size_t p = 1; p <= 300; p++) {
        for (int round = 0; round < 12; round++) {
            size_t need = p < 16 ? 20 * p : p < 64 ? 6 * p : 3 * p;
            if (need < 64) need = 64;
            size_t len = need - 3 + rnd((uint32_t)(need / 2 + 8));
            size_t before = round % 3 == 0 ? 0 : rnd(800), after = round % 3 == 2 ? 0 : rnd(800);
            size_t n = before + len + after;
            if (rnd(2)) prose(b, n); else bytes_of(b, n, 3 + rnd(20));
            periodic(b, before, len, p, round >= 8 ? 1 + rnd(2) : 0);
            CHECK_MSG(same_answer(b, n, &a), "period %zu round %d", p, round);
        }
    }
    free(b);
    ld_arena_release(&a);
    return 0;
}

/* Several stretches of different periods in one text, and texts made of a
 * few sentences said again and again in changing order (repeats that are
 * not loops, the screen's costly case). */
static int test_repetition_screen_mixed(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    char *b = malloc(60000);
    for (int t = 0; t < 400; t++) {
        size_t n = prose(b, 2000 + rnd(20000));
        for (int k = rnd(4); k > 0; k--) {
            size_t p = 1 + rnd(200), len = 40 + rnd(900);
            if (len + 1 >= n) continue;
            periodic(b, rnd((uint32_t)(n - len)), len, p, rnd(3) == 0);
        }
        CHECK_MSG(same_answer(b, n, &a), "mixed text %d", t);
    }
    static const char *const sent[] = {
        "The service started returning 502 errors shortly after the deploy. ",
        "Could you explain why the retry policy did not kick in here? ",
        "We are seeing p99 latency climb whenever the batch size exceeds 64.\n",
        "Refactor the function so that it streams the file. ",
        "ok. "};
    for (int t = 0; t < 300; t++) {
        size_t n = 0, want = 500 + rnd(30000);
        while (n < want) {
            const char *s = sent[rnd(t % 2 ? 5 : 3)];
            memcpy(b + n, s, strlen(s));
            n += strlen(s);
        }
        CHECK_MSG(same_answer(b, n, &a), "sentences %d", t);
    }
    free(b);
    ld_arena_release(&a);
    return 0;
}

static int test_repetition_screen_corpus(void)
{
    static const char *const files[] = {"parse/pylit/pylit.c", "README.md", "CMakeLists.txt",
                                        "replay/analysis/repetition.c", "tools/gen_bench_log.py",
                                        "docs/README.md"};
    ld_arena a;
    ld_arena_init(&a, 0);
    int n = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", LD_SOURCE_DIR, files[i]);
        char *s = ld_test_slurp(path);
        if (!s) continue;
        size_t len = strlen(s);
        CHECK_MSG(same_answer(s, len, &a), "%s", files[i]);
        for (int k = 0; k < 20; k++) { /* pieces, and pieces with a loop pasted in */
            size_t from = rnd((uint32_t)len), m = rnd((uint32_t)(len - from) + 1);
            CHECK_MSG(same_answer(s + from, m, &a), "%s [%zu, +%zu)", files[i], from, m);
            if (m > 400) {
                char *c = malloc(m);
                memcpy(c, s + from, m);
                size_t p = 1 + rnd(120), l = 64 + rnd(300);
                if (l < m) {
                    size_t at = rnd((uint32_t)(m - l));
                    for (size_t j = 0; j < l; j++) c[at + j] = c[at + j % p];
                }
                CHECK_MSG(same_answer(c, m, &a), "%s with a loop", files[i]);
                free(c);
            }
        }
        free(s);
        n++;
    }
    ld_arena_release(&a);
    if (!n) SKIP("no source files found under %s", LD_SOURCE_DIR);
    return 0;
}

/* Past the arena's share (the screen's and the search's tables malloc'd),
 * and past LD_REP_MAX_SCAN (only the tail looked at). */
static int test_repetition_screen_long_texts(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    size_t sizes[] = {LD_REP_ARENA_SLOTS / 2 + 1000, LD_REP_ARENA_SLOTS * 2, LD_REP_MAX_SCAN + 5000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        char *b = malloc(n);
        for (int v = 0; v < 3; v++) {
            prose(b, n);
            if (v == 1) periodic(b, n - 3000, 3000, 1 + rnd(250), 0);    /* a loop at the end */
            if (v == 2) periodic(b, 100, 5000, 1 + rnd(250), 0);         /* at the start: cut off past the max */
            CHECK_MSG(same_answer(b, n, &a), "n=%zu variant %d", n, v);
        }
        free(b);
    }
    ld_arena_release(&a);
    return 0;
}

/* ------------------------------------------------------------ the screen's own claim */

/* Whether s[0..n) holds a stretch the search could report, by brute force:
 * every period, every longest stretch of it, the thresholds of
 * repetition.h.  What the screen must let through. */
static int has_reportable(const char *s, size_t n)
{
    for (size_t p = 1; 3 * p <= n; p++) {
        size_t need = p < LD_REP_SHORT_UNIT ? LD_REP_SHORT_COUNT * p
                      : p < LD_REP_LONG_UNIT ? LD_REP_MID_COUNT * p : LD_REP_LONG_COUNT * p;
        if (need < LD_REP_MIN_BYTES) need = LD_REP_MIN_BYTES;
        for (size_t i = 0; i + p < n;) {
            if (s[i] != s[i + p]) { i++; continue; }
            size_t from = i;
            while (i + p < n && s[i] == s[i + p]) i++;
            if (i - from + p >= need && o_letters(s + from, p) >= LD_REP_MIN_LETTERS) return 1;
        }
    }
    return 0;
}

/* A unit T T' where T' is T with one byte more in a long word: every key of
 * the unit comes back within it (at |T| or |T'|), so the anchor one period
 * back is not the newest of its bucket; the screen must still find it. */
static size_t twin_unit(char *u, size_t words, size_t run)
{
    size_t at = 0;
    for (int half = 0; half < 2; half++) {
        uint64_t save = rng;
        rng = 12345 + words;
        for (size_t w = 0; w < words; w++) {
            const char *x = WORDS[rnd(19)];
            memcpy(u + at, x, strlen(x));
            at += strlen(x);
            u[at++] = ' ';
        }
        rng = save;
        memset(u + at, 'a', run + (size_t)half);
        at += run + (size_t)half;
        u[at++] = ' ';
    }
    return at;
}

static int test_repetition_screen_lets_through_every_stretch(void)
{
    char *b = malloc(8192);
    int checked = 0;
    for (int t = 0; t < 600; t++) {
        size_t n;
        if (t % 3 == 0) { /* the T T' unit, three times and a bit, in prose */
            char u[1024];
            size_t p = twin_unit(u, 2 + rnd(8), 16 + rnd(30)), before = rnd(200);
            n = before + 3 * p + rnd((uint32_t)p) + rnd(200);
            prose(b, n);
            for (size_t i = 0; i + before < n && i < 3 * p + p / 2; i++) b[before + i] = u[i % p];
        } else {
            n = 100 + rnd(1500);
            if (rnd(2)) prose(b, n); else bytes_of(b, n, 2 + rnd(20));
            size_t p = 1 + rnd(160), len = 40 + rnd(700);
            if (len < n) periodic(b, rnd((uint32_t)(n - len)), len, p, rnd(4) == 0);
        }
        if (!has_reportable(b, n)) continue;
        checked++;
        CHECK_MSG(ld_rep_screen(b, n, NULL) == 1, "text %d (n=%zu)", t, n);
        CHECK_MSG(ld_rep_screen_bytes(b, n, NULL) == 1, "text %d (n=%zu)", t, n);
        for (int level = 1; level < LD_REP_SCREEN_BEST; level++)
            CHECK_MSG(ld_rep_screen_at(level, b, n, NULL) == 1, "text %d (n=%zu) level %d", t, n, level);
    }
    free(b);
    CHECK(checked > 200);
    return 0;
}

/* Loops of short words (no anchor in them) just long enough to report, at
 * every offset of the screen's 64-byte blocks, amid long words (anchors
 * every few bytes): the run of positions without an anchor is all that
 * shows them. */
static int test_repetition_screen_short_word_loops(void)
{
    static const char *const units[] = {"ha ", "no ", "ab", "a b ", "xy-", "ok, "};
    static const char filler[] = "elephant giraffes mountains ";
    ld_arena a;
    ld_arena_init(&a, 0);
    char b[512];
    int checked = 0;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t p = strlen(units[u]);
        for (size_t len = 60; len <= 72; len++) {
            for (size_t off = 0; off < 130; off++) {
                size_t n = 0;
                for (size_t i = 0; i < off; i++) b[n++] = filler[i % (sizeof filler - 1)];
                for (size_t i = 0; i < len; i++) b[n++] = units[u][i % p];
                for (size_t i = 0; i < 100; i++) b[n++] = filler[i % (sizeof filler - 1)];
                CHECK_MSG(same_answer(b, n, &a), "unit \"%s\" len %zu off %zu", units[u], len, off);
                if (!has_reportable(b, n)) continue;
                checked++;
                CHECK_MSG(ld_rep_screen(b, n, NULL) == 1, "unit \"%s\" len %zu off %zu", units[u],
                          len, off);
                CHECK_MSG(ld_rep_screen_bytes(b, n, NULL) == 1, "unit \"%s\" len %zu off %zu",
                          units[u], len, off);
                for (int level = 1; level < LD_REP_SCREEN_BEST; level++)
                    CHECK_MSG(ld_rep_screen_at(level, b, n, NULL) == 1, "unit \"%s\" len %zu off %zu level %d",
                              units[u], len, off, level);
            }
        }
    }
    ld_arena_release(&a);
    CHECK(checked > 1000);
    return 0;
}

/* Loops of one to three bytes a period, 64 to 67 bytes long (64 is the
 * shortest stretch to report only for periods of 3 or less), between a few
 * bytes of letters, separators and UTF-8 bytes: the shortest runs without
 * an anchor that hide a loop.  Case B of the screen's proof: at 64 bytes
 * such a run holds I's 60 positions and b-3 (which is no anchor, or b-3-p
 * in I would be one), 61 in all; a RUN_MAX of 62 rules some of these loops
 * out, where the other tests first notice 64. */
static int test_repetition_screen_tightest_bare_runs(void)
{
    static const unsigned char alphabet[] = {'a', 'b', 'Z', '0', ' ', '-', '\n', 0xC3, 0xA9, 0xE6, 0x88};
    ld_arena a;
    ld_arena_init(&a, 0);
    char b[128];
    int checked = 0;
    for (int t = 0; t < 200000; t++) {
        size_t p = 1 + rnd(3), len = 64 + rnd(4), before = rnd(10), after = rnd(10), n = 0;
        unsigned char unit[3];
        for (size_t i = 0; i < p; i++) unit[i] = alphabet[rnd(sizeof alphabet)];
        for (size_t i = 0; i < before; i++) b[n++] = (char)alphabet[rnd(sizeof alphabet)];
        for (size_t i = 0; i < len; i++) b[n++] = (char)unit[i % p];
        for (size_t i = 0; i < after; i++) b[n++] = (char)alphabet[rnd(sizeof alphabet)];
        if (!has_reportable(b, n)) continue;
        checked++;
        if (t % 16 == 0) CHECK_MSG(same_answer(b, n, &a), "text %d (p %zu, %zu bytes)", t, p, len);
        for (int level = 0; level <= LD_REP_SCREEN_BEST; level++)
            CHECK_MSG(ld_rep_screen_at(level, b, n, NULL) == 1, "text %d (p %zu, %zu bytes) level %d", t, p, len,
                      level);
    }
    ld_arena_release(&a);
    CHECK(checked > 50000);
    return 0;
}

/* A key said twice at distance p with different words around it (a pair
 * that fails the test, and whose range of failures the screen remembers),
 * then a loop of period p whose unit starts with the same key, a few bytes
 * to a few units later: the remembered range must not reach the loop, and
 * the search finds it (its windows' last sighting can be the pair's: the
 * walks of repetition.c try the earlier ones). */
static int test_repetition_screen_failed_pair_before_loop(void)
{
    static const char key[] = "elephantine giraffes ";
    size_t lk = sizeof key - 1;
    ld_arena a;
    ld_arena_init(&a, 0);
    char *b = malloc(8192), unit[512];
    int checked = 0;
    for (size_t p = 24; p <= 220; p += 7) {
        for (size_t gap = 1; gap < 4 * p; gap += 1 + p / 5) {
            size_t n = prose(b, 40 + rnd(60)), y0 = n;
            memcpy(b + n, key, lk);
            n += lk;
            n += prose(b + n, p - lk);
            b[y0 + lk] = 'Q'; /* no word of prose starts so: after y0 + p the text differs */
            memcpy(b + n, key, lk);
            n += lk;
            n += prose(b + n, gap);
            memcpy(unit, key, lk);
            prose(unit + lk, p - lk);
            size_t need = p < 16 ? 20 * p : p < 64 ? 6 * p : 3 * p;
            for (size_t i = 0; i < need + p / 2; i++) b[n + i] = unit[i % p];
            n += need + p / 2;
            n += prose(b + n, 30);
            CHECK_MSG(same_answer(b, n, &a), "p %zu gap %zu", p, gap);
            if (!has_reportable(b, n)) continue;
            for (int level = 0; level <= LD_REP_SCREEN_BEST; level++)
                CHECK_MSG(ld_rep_screen_at(level, b, n, NULL) == 1, "p %zu gap %zu level %d", p, gap, level);
            ld_repetition r;
            CHECK_MSG(oracle(b, n, &r) == 1, "p %zu gap %zu: the search missed the loop", p, gap);
            checked++;
        }
    }
    free(b);
    ld_arena_release(&a);
    CHECK(checked > 100);
    return 0;
}

/* A unit of p bytes of short words (no anchor in them) with the bytes of
 * cluster (its anchors: long words, or characters after non-ASCII ones)
 * from offset o, wrapping past the unit's end, blanks around it. */
static void cluster_unit(char *u, size_t p, size_t o, const char *cluster)
{
    static const char *const shorts[] = {"ab", "is", "no", "x", "it", "a", "cd", "ok"};
    size_t at = 0, lc = strlen(cluster);
    while (at < p) {
        const char *w = shorts[rnd(sizeof shorts / sizeof shorts[0])];
        for (size_t i = 0; w[i] && at < p; i++) u[at++] = w[i];
        if (at < p) u[at++] = rnd(3) ? ' ' : ',';
    }
    u[(o + p - 1) % p] = ' ';
    for (size_t i = 0; i < lc; i++) u[(o + i) % p] = cluster[i];
    u[(o + lc) % p] = ' ';
}

/* Loops of periods around 64 just long enough to report (or a few bytes
 * longer), whose unit holds its anchors in one cluster, at every offset,
 * after a long word, a letter or a non-ASCII character: at 64 and more,
 * the test of a pair needs a stretch of 2p around it and could_pass probes
 * p before and after the anchor, so that with the cluster at the unit's end
 * the only pairs one period apart sit at the probes' reach, fewer than
 * RUN_MAX positions apart.  A probe placed 5 bytes or more farther out (or
 * a range of failures remembered that much too wide) rules such a loop out
 * (p 64, the cluster from offset 59, a letter before the loop); 4 bytes or
 * fewer cannot: the anchors of one period would then stand RUN_MAX apart,
 * or the loop's first byte pair with the one a period on.  The answers:
 * the brute force's and the unscreened search's. */
static int test_repetition_screen_probe_edges(void)
{
    static const char *const clusters[] = {
        "wxyz", "wxyzwxyzwx", "wxyz wxyz", "\xc3\xa9", "\xc3\xa9\xc3\xa9", "\xc3\xa9\xc3\xa9\xc3\xa9",
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", "\xe6\x88\x91\xe4\xbb\xac",
        "\xc3\xa9\xe6\x88\x91\xc3\xa9q"};
    /* around the loop: no byte of the units, so that no probe agrees by chance */
    static const char filler[] = "ELEPHANT_GIRAFFES_MOUNTAINS_CARAVANS_";
    ld_arena a;
    ld_arena_init(&a, 0);
    char *b = malloc(1024), unit[128];
    int checked = 0;
    for (size_t p = 60; p <= 72; p++) {
        size_t need = p < 64 ? 6 * p : 3 * p;
        for (size_t c = 0; c < sizeof clusters / sizeof clusters[0]; c++) {
            for (size_t o = 0; o < 3 * p; o++) { /* before the loop: "\n", "_Q", then 0xD0 0xB6 */
                cluster_unit(unit, p, o % p, clusters[c]);
                size_t len = need + (rnd(3) ? 0 : 1 + rnd(4)), n = 0;
                for (size_t i = 0; i < 40; i++) b[n++] = filler[i % (sizeof filler - 1)];
                if (o < p) b[n - 1] = '\n'; /* differs from the unit's last byte: the loop starts here */
                else if (o < 2 * p) memcpy(b + n - 2, "_Q", 2);
                else memcpy(b + n - 1, "\xd0\xb6", 2), n++;
                for (size_t i = 0; i < len; i++) b[n++] = unit[i % p];
                b[n++] = '|'; /* and ends here */
                for (size_t i = 0; i < 40; i++) b[n++] = filler[i % (sizeof filler - 1)];
                CHECK_MSG(same_answer(b, n, &a), "p %zu cluster %zu at %zu", p, c, o);
                if (!has_reportable(b, n)) continue;
                checked++;
                for (int level = 0; level <= LD_REP_SCREEN_BEST; level++)
                    CHECK_MSG(ld_rep_screen_at(level, b, n, NULL) == 1,
                              "p %zu cluster %zu at %zu level %d", p, c, o, level);
            }
        }
    }
    free(b);
    ld_arena_release(&a);
    CHECK(checked > 10000);
    return 0;
}

/* ------------------------------------------------------------ the levels */

static int o_word_byte(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* Every level's masks of the block at at of s[0..n) are the byte oracle's. */
static int masks_right(const char *s, size_t n, size_t at)
{
    uint64_t want[3] = {0, 0, 0};
    for (size_t j = 0; j < 64 && at + j < n; j++) {
        unsigned char c = (unsigned char)s[at + j];
        want[0] |= (uint64_t)o_word_byte(c) << j;
        want[1] |= (uint64_t)(c >= 0x80) << j;
        want[2] |= (uint64_t)(c >= 0xC0) << j;
    }
    for (int level = 0; level <= LD_REP_SCREEN_BEST; level++) {
        uint64_t got[3];
        ld_rep_screen_masks(level, s, n, at, got);
        if (memcmp(got, want, sizeof got)) {
            fprintf(stderr, "  level %d, n=%zu at %zu: %016llx %016llx %016llx, want %016llx %016llx %016llx\n",
                    level, n, at, (unsigned long long)got[0], (unsigned long long)got[1],
                    (unsigned long long)got[2], (unsigned long long)want[0],
                    (unsigned long long)want[1], (unsigned long long)want[2]);
            return 0;
        }
    }
    return 1;
}

/* Every byte value at every offset of a block, and texts ending at every
 * offset of their last block (the bytes past the end are not word bytes):
 * the classifications of all levels against the byte oracle. */
static int test_repetition_screen_masks_every_level(void)
{
    unsigned char all[256 + 64];
    for (int i = 0; i < 256 + 64; i++) all[i] = (unsigned char)(i * 7 + 3); /* each value, shifted */
    for (size_t at = 0; at < 256; at += 64)
        for (size_t shift = 0; shift < 64; shift++)
            CHECK_MSG(masks_right((const char *)all + shift, 256, at), "all bytes, shift %zu", shift);
    char *b = malloc(300);
    for (int t = 0; t < 400; t++) {
        size_t n = (size_t)t % 200 + 1;
        for (size_t i = 0; i < n; i++) b[i] = (char)rnd(256);
        for (size_t at = 0; at < n + 64; at += 64)
            CHECK_MSG(masks_right(b, n, at), "random bytes %d, n=%zu, at %zu", t, n, at);
    }
    free(b);
    return 0;
}

/* Texts of 64..260 bytes (one to five blocks, every length around the
 * blocks' edges) of prose, UTF-8 and bytes next to the classes' edges ('/',
 * ':', '@', '[', '`', '{', 0x7F, 0x80, 0xBF, 0xC0, 0xFF), with and without a
 * loop: every level gives the byte-by-byte screen's answer, and the
 * oracle's where it must. */
static int test_repetition_screen_levels_at_block_edges(void)
{
    static const char edge[] = "/0:9@aA[zZ`{\x7f\x80\xbf\xc0\xff \xe6\x88\x91,.";
    ld_arena a;
    ld_arena_init(&a, 0);
    char b[512];
    for (int t = 0; t < 3000; t++) {
        size_t n = 64 + (size_t)t % 197;
        switch (t % 3) {
        case 0: prose(b, n); break;
        case 1: for (size_t i = 0; i < n; i++) b[i] = edge[rnd(sizeof edge - 1)]; break;
        default: bytes_of(b, n, 2 + rnd(22)); break;
        }
        if (rnd(2)) {
            size_t p = 1 + rnd(40), len = 60 + rnd((uint32_t)(n - 59));
            periodic(b, rnd((uint32_t)(n - len + 1)), len, p, rnd(4) == 0);
        }
        CHECK_MSG(same_answer(b, n, &a), "edge text %d (n=%zu)", t, n);
        int want = ld_rep_screen_bytes(b, n, NULL);
        for (int level = 1; level <= LD_REP_SCREEN_BEST; level++)
            CHECK_MSG(ld_rep_screen_at(level, b, n, NULL) == want, "edge text %d (n=%zu) level %d", t,
                      n, level);
        if (has_reportable(b, n)) CHECK_MSG(want == 1, "edge text %d (n=%zu)", t, n);
    }
    ld_arena_release(&a);
    return 0;
}

/* The screen lets through what it must, and rules out ordinary text (what
 * makes it pay): most of the texts above had no loop and were ruled out. */
static int test_repetition_screen_rules_out_prose(void)
{
    static const char text[] =
        "logdiff reads the request logs of SGLang and vLLM servers and tells, for every "
        "request, whether the agent harness sent a broken message array, whether the chat "
        "template dropped something, or whether the log itself is incomplete. The tests run "
        "with ctest; the build needs libcjson, pcre2, zstd and libarchive.\n";
    CHECK_EQ_INT(ld_rep_screen(text, sizeof text - 1, NULL), 0);
    CHECK_EQ_INT(ld_rep_screen_bytes(text, sizeof text - 1, NULL), 0);
    char loop[2048] = "";
    for (int i = 0; i < 30; i++) strcat(loop, "I will now check the file. ");
    CHECK_EQ_INT(ld_rep_screen(loop, strlen(loop), NULL), 1);
    char hex[200];
    for (int i = 0; i < 80; i++) hex[i] = "0123456789abcdef"[rnd(16)];
    hex[80] = 0; /* 80 word bytes and no word start: let through */
    CHECK_EQ_INT(ld_rep_screen(hex, 80, NULL), 1);
    fprintf(stderr, "  %ld texts compared, %ld loops, %ld ruled out by the screen\n", g_texts,
            g_loops, g_screened_out);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_repetition_screen_random_texts),
    LD_CASE(test_repetition_screen_periods),
    LD_CASE(test_repetition_screen_mixed),
    LD_CASE(test_repetition_screen_corpus),
    LD_CASE(test_repetition_screen_long_texts),
    LD_CASE(test_repetition_screen_lets_through_every_stretch),
    LD_CASE(test_repetition_screen_short_word_loops),
    LD_CASE(test_repetition_screen_tightest_bare_runs),
    LD_CASE(test_repetition_screen_failed_pair_before_loop),
    LD_CASE(test_repetition_screen_probe_edges),
    LD_CASE(test_repetition_screen_masks_every_level),
    LD_CASE(test_repetition_screen_levels_at_block_edges),
    LD_CASE(test_repetition_screen_rules_out_prose),
};

LD_TEST_MAIN(cases)
