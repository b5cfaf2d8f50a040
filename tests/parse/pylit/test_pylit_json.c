/* test_pylit_json.c - a log's bytes as a JSON string (ld_json_text,
 * ld_json_write_text), against CPython: pylit_json_oracle.h, written by
 * tools/gen_pylit_json_oracle.py (json.dumps of the text read as logdiff
 * reads a log, WTF-8 surrogates and surrogateescape'd bytes, with the
 * writer's two choices the script documents), not a table of ours.
 *
 * The writer copies runs of printable ASCII found 32 bytes a step (AVX2;
 * 16 or 8 elsewhere) and looks at the bytes between runs, and at runs of
 * fewer than 8, one at a time.  So every byte value and every UTF-8 kind
 * of the oracle's units goes at every place of strings past two 64-byte
 * steps, among printable ASCII: there what each is written as does not
 * depend on its neighbours, and the expected text is the oracle's bodies
 * one after another.  Units go next to each other too (never a cut
 * sequence before a continuation byte, which would complete it), and long
 * strings of every kind, built by the script's generator, are checked
 * against its hash of their JSON text.
 */
#include "parse/pylit/pylit_json.h"
#include "tests/parse/pylit/pylit_json_oracle.h"
#include "tests/support/ld_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_UNITS (sizeof pylit_json_unit_oracle / sizeof pylit_json_unit_oracle[0])
#define N_CASES (sizeof pylit_json_case_oracle / sizeof pylit_json_case_oracle[0])

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* A printable ASCII byte the oracle keeps as it is (not '"', '\\') */
static unsigned char plain_byte(void)
{
    for (;;) {
        unsigned char b = (unsigned char)(0x20 + xorshift(&rng) % 95);
        if (pylit_json_byte_oracle[b].len == 1 && (unsigned char)pylit_json_byte_oracle[b].body[0] == b) return b;
    }
}

/* A text and the JSON text it must give, built up together */
typedef struct text {
    unsigned char in[256];
    size_t n;
    char want[1600];
    size_t want_len;
} text;

static void start(text *t) { t->n = t->want_len = 0; }

static void add(text *t, const void *in, size_t n, const char *body, size_t body_len)
{
    memcpy(t->in + t->n, in, n);
    t->n += n;
    memcpy(t->want + t->want_len, body, body_len);
    t->want_len += body_len;
}

static void add_plain(text *t, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        unsigned char b = plain_byte();
        add(t, &b, 1, (const char *)&b, 1);
    }
}

static void add_byte(text *t, unsigned char b)
{
    add(t, &b, 1, pylit_json_byte_oracle[b].body, pylit_json_byte_oracle[b].len);
}

static void add_unit(text *t, size_t u)
{
    add(t, pylit_json_unit_oracle[u].bytes, pylit_json_unit_oracle[u].len, pylit_json_unit_oracle[u].body,
        pylit_json_unit_oracle[u].body_len);
}

/* ld_json_text's literal of s[0..n), malloc'd (NULL when it failed) */
static char *text_literal(const unsigned char *s, size_t n)
{
    cJSON *item = ld_json_text((const char *)s, n);
    char *lit = item && item->valuestring ? strdup(item->valuestring) : NULL;
    cJSON_Delete(item);
    return lit;
}

/* ld_json_write_text's literal of s[0..n), malloc'd; *len its length */
static char *written_literal(const unsigned char *s, size_t n, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    int rc = ld_json_write_text(f, (const char *)s, n);
    fclose(f);
    if (rc == 0) return buf;
    free(buf);
    return NULL;
}

/* s[0..n) gives '"' want '"' through ld_json_text, and through
 * ld_json_write_text too when `written` */
static int gives(const unsigned char *s, size_t n, const char *want, size_t want_len, int written)
{
    size_t len = 0;
    char *lit = text_literal(s, n);
    int ok = lit && strlen(lit) == want_len + 2 && lit[0] == '"' && !memcmp(lit + 1, want, want_len) &&
             lit[want_len + 1] == '"';
    if (ok && written) {
        char *w = written_literal(s, n, &len);
        ok = w && len == want_len + 2 && !memcmp(w, lit, len);
        free(w);
    }
    if (!ok) {
        fprintf(stderr, "  input (%zu bytes):", n);
        for (size_t k = 0; k < n; k++) fprintf(stderr, " %02x", s[k]);
        fprintf(stderr, "\n  got  %s\n  want \"%.*s\"\n", lit ? lit : "(null)", (int)want_len, want);
    }
    free(lit);
    return ok;
}

static int gives_text(const text *t, int written) { return gives(t->in, t->n, t->want, t->want_len, written); }

static int test_pylit_json_every_byte_alone(void)
{
    for (unsigned b = 0; b < 256; b++) {
        unsigned char s = (unsigned char)b;
        CHECK_MSG(gives(&s, 1, pylit_json_byte_oracle[b].body, pylit_json_byte_oracle[b].len, 1), "byte %#x", b);
    }
    CHECK(gives((const unsigned char *)"", 0, "", 0, 1));
    return 0;
}

/* The lengths of the strings below: every one past a 64-byte step and its
 * tail, and each side of the next 32-byte steps */
static const size_t lengths[] = {95, 96, 97, 127, 128, 129, 136};
#define N_SHORT 72

static size_t length_at(size_t k) { return k < N_SHORT ? k + 1 : lengths[k - N_SHORT]; }

static int test_pylit_json_every_byte_at_every_place(void)
{
    for (size_t li = 0; li < N_SHORT + sizeof lengths / sizeof lengths[0]; li++) {
        size_t n = length_at(li);
        for (size_t at = 0; at < n; at++)
            for (unsigned b = 0; b < 256; b++) {
                text t;
                start(&t);
                add_plain(&t, at);
                add_byte(&t, (unsigned char)b);
                add_plain(&t, n - at - 1);
                CHECK_MSG(gives_text(&t, b % 64 == 0), "byte %#x at %zu of %zu", b, at, n);
            }
    }
    return 0;
}

static int test_pylit_json_every_unit_at_every_place(void)
{
    for (size_t u = 0; u < N_UNITS; u++)
        for (size_t li = 0; li < N_SHORT + sizeof lengths / sizeof lengths[0]; li++) {
            size_t n = length_at(li);
            for (size_t at = 0; at + pylit_json_unit_oracle[u].len <= n; at++) {
                text t;
                start(&t);
                add_plain(&t, at);
                add_unit(&t, u);
                add_plain(&t, n - t.n);
                CHECK_MSG(gives_text(&t, at % 16 == 0), "unit %zu at %zu of %zu", u, at, n);
            }
        }
    return 0;
}

/* Two units one after the other (not a cut sequence then continuation
 * bytes), at each place of the first 40 of 80 plain bytes; and three, the
 * last after a plain byte */
static int test_pylit_json_units_next_to_each_other(void)
{
    for (size_t u = 0; u < N_UNITS; u++)
        for (size_t v = 0; v < N_UNITS; v++) {
            unsigned char first = (unsigned char)pylit_json_unit_oracle[v].bytes[0];
            if (pylit_json_unit_oracle[u].open && first >= 0x80 && first < 0xC0) continue;
            for (size_t at = 0; at < 40; at++) {
                text t;
                start(&t);
                add_plain(&t, at);
                add_unit(&t, u);
                add_unit(&t, v);
                add_plain(&t, 1);
                add_unit(&t, (u + v) % N_UNITS);
                add_plain(&t, 80 - at);
                CHECK_MSG(gives_text(&t, at % 8 == 0), "units %zu, %zu at %zu", u, v, at);
            }
        }
    return 0;
}

/* gen_pylit_json_oracle.py's random_text, the same bytes */
static void random_text(uint64_t seed, size_t n, unsigned char *out)
{
    static const unsigned char stops[8] = {0x00, '\n', '\t', '"', '\\', 0x7F, 0x1F, 0x08};
    uint64_t x = seed;
    size_t len = 0;
    while (len < n) {
        uint64_t r = xorshift(&x), v = r >> 8;
        unsigned kind = (unsigned)(r % 16);
        if (kind < 9) out[len++] = (unsigned char)(0x20 + v % 95);
        else if (kind == 9) out[len++] = (unsigned char)(v % 256);
        else if (kind == 10) out[len++] = stops[v % 8];
        else if (kind == 11) out[len++] = (unsigned char)(0x80 + v % 64);
        else if (kind == 12) out[len++] = (unsigned char)(0xC0 + v % 64);
        else {
            size_t u = (size_t)(v % N_UNITS);
            memcpy(out + len, pylit_json_unit_oracle[u].bytes, pylit_json_unit_oracle[u].len);
            len += pylit_json_unit_oracle[u].len;
        }
    }
}

/* Every surrogate's WTF-8 (ED A0 80 to ED BF BF), each followed by sep
 * when sep is nonzero; its length */
static size_t all_surrogates(unsigned char *out, unsigned char sep)
{
    size_t len = 0;
    for (unsigned hi = 0; hi < 32; hi++)
        for (unsigned lo = 0; lo < 64; lo++) {
            out[len++] = 0xED;
            out[len++] = (unsigned char)(0xA0 + hi);
            out[len++] = (unsigned char)(0x80 + lo);
            if (sep) out[len++] = sep;
        }
    return len;
}

static uint64_t fnv1a64(const char *s, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t k = 0; k < n; k++) h = (h ^ (unsigned char)s[k]) * 0x100000001B3ull;
    return h;
}

/* The case's JSON text, both ways, has the oracle's length and hash */
static int case_matches(size_t c, const unsigned char *in, size_t n)
{
    size_t len = 0;
    char *lit = text_literal(in, n), *w = written_literal(in, n, &len);
    int ok = lit && w && strlen(lit) == pylit_json_case_oracle[c].json_len && len == strlen(lit) &&
             !memcmp(lit, w, len) && fnv1a64(lit, len) == pylit_json_case_oracle[c].json_fnv;
    if (!ok)
        fprintf(stderr, "  case %zu (tools/gen_pylit_json_oracle.py --show %zu): %zu bytes, fnv %016llx\n", c, c,
                lit ? strlen(lit) : 0, lit ? (unsigned long long)fnv1a64(lit, strlen(lit)) : 0ull);
    free(lit);
    free(w);
    return ok;
}

static int test_pylit_json_long_strings(void)
{
    for (size_t c = 0; c < N_CASES; c++) {
        uint64_t seed = pylit_json_case_oracle[c].seed;
        size_t n = pylit_json_case_oracle[c].n, cap = seed < 2 ? 2048 * 4 : n + 6;
        unsigned char *in = malloc(cap);
        CHECK(in);
        if (seed < 2) n = all_surrogates(in, seed ? 'x' : 0);
        else random_text(seed, n, in);
        unsigned char *exact = malloc(n ? n : 1); /* the text at the end of its allocation, for ASan */
        if (exact) memcpy(exact, in, n);
        free(in);
        CHECK(exact);
        int ok = case_matches(c, exact, n);
        free(exact);
        CHECK_MSG(ok, "case %zu", c);
    }
    return 0;
}

static int test_pylit_json_null(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f);
    int rc = ld_json_write_text(f, NULL, 3);
    fclose(f);
    CHECK(rc == 0 && len == 4 && !memcmp(buf, "null", 4));
    free(buf);
    cJSON *item = ld_json_text(NULL, 3);
    CHECK(cJSON_IsNull(item));
    cJSON_Delete(item);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_pylit_json_every_byte_alone),
    LD_CASE(test_pylit_json_every_byte_at_every_place),
    LD_CASE(test_pylit_json_every_unit_at_every_place),
    LD_CASE(test_pylit_json_units_next_to_each_other),
    LD_CASE(test_pylit_json_long_strings),
    LD_CASE(test_pylit_json_null),
};

LD_TEST_MAIN(cases)
