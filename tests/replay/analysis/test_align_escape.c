/* test_align_escape.c - the aligner's JSON-escaped search (align_find.c: the
 * bytes that need escaping found 16 at a time): a text whose escaped form is
 * in the prompt is found there, at the place an escaper written here (as
 * json.dumps writes a string's body) says, with the bytes to escape at every
 * offset around the 16-byte steps, none, or all. */
#include "replay/analysis/align_find.h"
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

/* json.dumps(ensure_ascii=False)'s body of a string (the oracle). */
static size_t escape(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *r = NULL;
        switch (c) {
        case '"': r = "\\\""; break;
        case '\\': r = "\\\\"; break;
        case '\n': r = "\\n"; break;
        case '\r': r = "\\r"; break;
        case '\t': r = "\\t"; break;
        case '\b': r = "\\b"; break;
        case '\f': r = "\\f"; break;
        }
        if (r) {
            memcpy(out + o, r, strlen(r));
            o += strlen(r);
        } else if (c < 0x20) {
            o += (size_t)sprintf(out + o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    return o;
}

static int test_align_escape_found_at_every_offset(void)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyz ,.:{}[]\xc3\xa9\xe6\x88\x91\x7f\xff";
    static const char esc[] = "\"\\\n\r\t\b\f\x01\x1f";
    char t[300], prompt[2048];
    int escaped_seen = 0;
    for (int round = 0; round < 4000; round++) {
        size_t n = 3 + rnd(round < 2000 ? 40 : 200);
        unsigned mode = rnd(4); /* 0: none to escape, 1: one, 2: a few, 3: many */
        for (size_t i = 0; i < n; i++) t[i] = plain[rnd(sizeof plain - 1)];
        if (mode == 1) t[1 + rnd((unsigned)n - 2)] = esc[rnd(sizeof esc - 1)];
        for (unsigned k = mode >= 2 ? 1 + rnd(mode == 2 ? 3 : 60) : 0; k > 0; k--)
            t[1 + rnd((unsigned)n - 2)] = esc[rnd(sizeof esc - 1)];
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
