/* test_align_escape.c - the aligner's JSON-escaped search (align_find.c: the
 * bytes that need escaping found by include/ld_json_escape.h's scan): a text
 * whose escaped form is in the prompt is found there, at the place CPython's
 * json.dumps says (tests/include/json_escape_oracle.h, written by
 * tools/gen_json_escape_oracle.py: what json.dumps writes for each byte),
 * with the bytes to escape at every offset around the 16- and 32-byte
 * steps, none, or all. */
#include "replay/analysis/align_find.h"
#include "tests/include/json_escape_oracle.h"
#include "tests/support/ld_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x853C49E6748FEA9Bull;

static unsigned rnd(unsigned m)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)((rng >> 11) % m);
}

/* json.dumps(ensure_ascii=False)'s body of a string: CPython's, byte by
 * byte (the oracle). */
static size_t escape(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        memcpy(out + o, json_escape_oracle[c].body, json_escape_oracle[c].len);
        o += json_escape_oracle[c].len;
    }
    return o;
}

static int test_align_escape_found_at_every_offset(void)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyz ,.:{}[]\xc3\xa9\xe6\x88\x91\x7f\xff";
    char esc[256], t[300], prompt[2048];
    unsigned n_esc = 0;
    for (unsigned b = 0; b < 256; b++) /* every byte json.dumps escapes */
        if (json_escape_oracle[b].escapes) esc[n_esc++] = (char)b;
    CHECK(n_esc == 34);
    int escaped_seen = 0;
    for (int round = 0; round < 4000; round++) {
        size_t n = 3 + rnd(round < 2000 ? 40 : 200);
        unsigned mode = rnd(4); /* 0: none to escape, 1: one, 2: a few, 3: many */
        for (size_t i = 0; i < n; i++) t[i] = plain[rnd(sizeof plain - 1)];
        if (mode == 1) t[1 + rnd((unsigned)n - 2)] = esc[rnd(n_esc)];
        for (unsigned k = mode >= 2 ? 1 + rnd(mode == 2 ? 3 : 60) : 0; k > 0; k--)
            t[1 + rnd((unsigned)n - 2)] = esc[rnd(n_esc)];
        t[0] = t[n - 1] = 'q'; /* no blanks at the edges: the whole text is searched */
        size_t lead = rnd(40), at = lead;
        memset(prompt, 'x', lead);
        at += escape(t, n, prompt + at);
        memset(prompt + at, 'y', 30);
        at += 30;
        ld_af_prompt pr = {prompt, at, 0, 0};
        ld_af_hit h;
        CHECK(ld_af_find(&pr, 0, at, t, n, 0, &h) == 0);
        char e[1600];
        size_t elen = escape(t, n, e);
        int needs = elen != n;
        escaped_seen += needs;
        CHECK_MSG(h.state == LD_ALIGN_FOUND, "round %d", round);
        CHECK_MSG(h.how == (needs ? LD_ALIGN_HOW_ESCAPED : LD_ALIGN_HOW_EXACT), "round %d how %d",
                  round, (int)h.how);
        CHECK_MSG(h.start == lead && h.end == lead + elen, "round %d: [%zu, %zu) not [%zu, %zu)",
                  round, h.start, h.end, lead, lead + elen);
    }
    CHECK(escaped_seen > 2000);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_align_escape_found_at_every_offset),
};

LD_TEST_MAIN(cases)
