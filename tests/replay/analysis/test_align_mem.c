/* test_align_mem.c - the aligner's substring search (replay/analysis/align_mem.c)
 * and its JSON-escaped form (align_find.c).
 *
 * ld_af_mem and ld_af_last are checked against the definition (a plain
 * loop over every start, written here) on every haystack and needle of small
 * alphabets around the 32-start blocks the search works in: needles at the
 * edges of a block, the last < 32 starts, texts that make every start a
 * candidate (the two-way fallback after PROBE_MISSES).  The escaped case's
 * expected prompt text comes from tools/gen_align_escape_case.py
 * (CPython's json.dumps(ensure_ascii=False)).
 */
#include "replay/analysis/align_find.h"
#include "tests/support/ld_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *plain_first(const char *h, size_t hlen, const char *n, size_t nlen)
{
    if (nlen == 0 || nlen > hlen) return NULL;
    for (size_t i = 0; i + nlen <= hlen; i++)
        if (memcmp(h + i, n, nlen) == 0) return h + i;
    return NULL;
}

static const char *plain_last(const char *h, size_t hlen, const char *n, size_t nlen)
{
    if (nlen == 0 || nlen > hlen) return NULL;
    for (size_t i = hlen - nlen + 1; i-- > 0;)
        if (memcmp(h + i, n, nlen) == 0) return h + i;
    return NULL;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static unsigned next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 32);
}

/* Both searches against the definition; 0 when they agree. */
static int agree(const char *h, size_t hlen, const char *n, size_t nlen)
{
    CHECK_MSG(ld_af_mem(h, hlen, n, nlen) == plain_first(h, hlen, n, nlen),
              "first: hlen %zu nlen %zu", hlen, nlen);
    CHECK_MSG(ld_af_last(h, hlen, n, nlen) == plain_last(h, hlen, n, nlen),
              "last: hlen %zu nlen %zu", hlen, nlen);
    return 0;
}

/* A needle at every offset of haystacks of every length up to 3 blocks of
 * starts, the rest of the haystack a filler that never matches. */
static int test_align_mem_every_offset(void)
{
    char h[160], n[80];
    for (size_t nlen = 1; nlen <= 70; nlen += (nlen < 10 ? 1 : 7)) {
        for (size_t k = 0; k < nlen; k++) n[k] = (char)('a' + k % 26);
        for (size_t hlen = nlen; hlen <= sizeof h; hlen++) {
            for (size_t at = 0; at + nlen <= hlen; at++) {
                memset(h, '.', hlen);
                memcpy(h + at, n, nlen);
                const char *f = ld_af_mem(h, hlen, n, nlen), *l = ld_af_last(h, hlen, n, nlen);
                CHECK_MSG(f == h + at, "first: hlen %zu nlen %zu at %zu", hlen, nlen, at);
                CHECK_MSG(l == h + at, "last: hlen %zu nlen %zu at %zu", hlen, nlen, at);
            }
            memset(h, '.', hlen);
            if (agree(h, hlen, n, nlen)) return 1;
        }
    }
    return 0;
}

/* Random texts over two or three letters: many candidates, many near
 * misses (first and last byte right, the middle wrong), several matches. */
static int test_align_mem_small_alphabets(void)
{
    char h[300], n[90];
    for (int round = 0; round < 20000; round++) {
        unsigned alpha = 2 + next_rand() % 2;
        size_t hlen = next_rand() % sizeof h, nlen = 1 + next_rand() % (round % 4 ? 12 : sizeof n);
        for (size_t i = 0; i < hlen; i++) h[i] = (char)('a' + next_rand() % alpha);
        if (hlen >= nlen && next_rand() % 2) { /* a needle cut out of the haystack */
            memcpy(n, h + next_rand() % (hlen - nlen + 1), nlen);
        } else {
            for (size_t i = 0; i < nlen; i++) n[i] = (char)('a' + next_rand() % alpha);
        }
        if (agree(h, hlen, n, nlen)) return 1;
    }
    return 0;
}

/* More than PROBE_MISSES candidates before the match: "ab...ab" with one
 * wrong byte in the middle over and over, then the needle, then more. */
static int test_align_mem_many_false_candidates(void)
{
    static char h[40000];
    const char *n = "aXXXXXXXXb";
    size_t nlen = strlen(n), len = 0;
    for (int i = 0; i < 1000; i++) len += (size_t)sprintf(h + len, "aXXXXYXXXb ");
    size_t at = len;
    len += (size_t)sprintf(h + len, "%s", n);
    for (int i = 0; i < 1000; i++) len += (size_t)sprintf(h + len, "aXXYXXXXXb ");
    CHECK(ld_af_mem(h, len, n, nlen) == h + at);
    CHECK(ld_af_last(h, len, n, nlen) == h + at);
    /* every byte the same: each start is a candidate, no match */
    memset(h, 'a', sizeof h);
    CHECK(ld_af_mem(h, sizeof h, "aaaaaaaaaab", 11) == NULL);
    CHECK(ld_af_mem(h, sizeof h, "aaaaaaaaaaa", 11) == h);
    CHECK(ld_af_last(h, sizeof h, "aaaaaaaaaaa", 11) == h + sizeof h - 11);
    return 0;
}

static int test_align_mem_edges(void)
{
    CHECK(ld_af_mem("abc", 3, "", 0) == NULL);
    CHECK(ld_af_last("abc", 3, "", 0) == NULL);
    CHECK(ld_af_mem("abc", 3, "abcd", 4) == NULL);
    CHECK(ld_af_last("abc", 3, "abcd", 4) == NULL);
    const char *t = "x</think>y</think>z";
    CHECK(ld_af_last(t, strlen(t), "</think>", 8) == t + 10);
    CHECK(ld_af_mem(t, strlen(t), "</think>", 8) == t + 1);
    return 0;
}

/* A text found only JSON-escaped in the prompt, with each kind of escape
 * json.dumps writes (quote, backslash, \n \r \t \b \f, \u00XX for the other
 * control bytes) and long runs of bytes that stay as they are. */
static int test_align_mem_escaped_form(void)
{
    const char *text = "say \"hi\" to C:\\tmp\nthen\r\ttab\b\f and \x01\x1f end, "
                       "then a long stretch of plain words that needs no escape at all";
    /* tools/gen_align_escape_case.py: json.dumps(text, ensure_ascii=False)[1:-1] */
    const char *want = "say \\\"hi\\\" to C:\\\\tmp\\nthen\\r\\ttab\\b\\f and \\u0001\\u001f end, "
                       "then a long stretch of plain words that needs no escape at all";
    char prompt[512];
    snprintf(prompt, sizeof prompt, "<user>{\"q\": \"%s\"}</user>", want);
    ld_af_prompt pr = { prompt, strlen(prompt), 0, 0 };
    ld_af_hit h;
    CHECK(ld_af_find(&pr, 0, pr.len, text, strlen(text), 0, &h) == 0);
    CHECK_EQ_INT(h.state, LD_ALIGN_FOUND);
    CHECK_EQ_INT(h.how, LD_ALIGN_HOW_ESCAPED);
    CHECK_EQ_INT(h.start, strlen("<user>{\"q\": \""));
    CHECK_EQ_INT(h.end, h.start + strlen(want));
    /* nothing to escape: the escaped form is the text, and it is not there */
    const char *plain = "plain words that are not in the prompt";
    CHECK(ld_af_find(&pr, 0, pr.len, plain, strlen(plain), 0, &h) == 0);
    CHECK_EQ_INT(h.state, LD_ALIGN_ABSENT);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_align_mem_every_offset),
    LD_CASE(test_align_mem_small_alphabets),
    LD_CASE(test_align_mem_many_false_candidates),
    LD_CASE(test_align_mem_edges),
    LD_CASE(test_align_mem_escaped_form),
};

LD_TEST_MAIN(cases)
