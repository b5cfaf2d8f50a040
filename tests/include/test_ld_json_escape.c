/* test_ld_json_escape.c - the bytes json.dumps escapes (include/ld_json_escape.h).
 *
 * The oracle is CPython's json.dumps, byte by byte (json_escape_oracle.h,
 * written by tools/gen_json_escape_oracle.py), not a table of ours.  Every
 * width of the class (a byte, a word, 16 and 32 bytes) is checked with
 * every byte at every place of its block, among plain bytes and among
 * random ones; every level of the scan with every byte at every place of
 * strings of every length up to past two 32-byte steps, from every start,
 * the bytes before the start random (the last step rereads them), each
 * string at the end of its own allocation (ASan sees a read past it).
 * All of it twice: for json.dumps' class (ensure_ascii=False) and for the
 * _ascii class (ensure_ascii=True: the oracle's escapes_ascii).
 */
#include "ld_json_escape.h"
#include "tests/include/json_escape_oracle.h"
#include "tests/support/ld_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const int levels[] = { LD_JSON_ESCAPE_WORDS, LD_JSON_ESCAPE_SSE2, LD_JSON_ESCAPE_AVX2 };
#define N_LEVELS (sizeof levels / sizeof levels[0])

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static unsigned rnd(unsigned m)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)((rng >> 11) % m);
}

/* The class under test: 0 json.dumps' (ensure_ascii=False), 1 ensure_ascii=True's */
static int ascii_class;

static int escapes(unsigned char b)
{
    return ascii_class ? json_escape_oracle[b].escapes_ascii : json_escape_oracle[b].escapes;
}

/* A random byte json.dumps keeps as it is */
static unsigned char plain_byte(void)
{
    unsigned char b;
    do b = (unsigned char)rnd(256); while (escapes(b));
    return b;
}

/* w bytes at p: random plain bytes (any == 0) or random bytes of any kind */
static void fill(unsigned char *p, size_t w, int any)
{
    for (size_t k = 0; k < w; k++) p[k] = any ? (unsigned char)rnd(256) : plain_byte();
}

static int test_class_is_cpythons(void)
{
    for (unsigned b = 0; b < 256; b++) {
        CHECK_MSG(ld_json_escapes((unsigned char)b) == json_escape_oracle[b].escapes, "byte %#x", b);
        CHECK_MSG(ld_json_escapes_ascii((unsigned char)b) == json_escape_oracle[b].escapes_ascii, "byte %#x", b);
        /* ensure_ascii=True is another class: DEL and every byte >= 0x80 more */
        CHECK_MSG(json_escape_oracle[b].escapes_ascii == (json_escape_oracle[b].escapes || b >= 0x7F), "byte %#x", b);
    }
    return 0;
}

/* The oracle's answer for a block of w bytes: bit k when p[k] escapes */
static uint64_t want_bits(const unsigned char *p, size_t w)
{
    uint64_t bits = 0;
    for (size_t k = 0; k < w; k++) bits |= (uint64_t)escapes(p[k]) << k;
    return bits;
}

/* ld_json_escape_word's flags (bit 7 of each byte) as one bit a byte, in
 * memory order whatever the byte order; UINT64_MAX when a byte has any
 * other bit set (never) */
static uint64_t word_bits(const unsigned char *p)
{
    uint64_t x, f, bits = 0;
    unsigned char flags[8];
    memcpy(&x, p, 8);
    f = ascii_class ? ld_json_escape_ascii_word(x) : ld_json_escape_word(x);
    memcpy(flags, &f, 8);
    for (size_t k = 0; k < 8; k++) {
        if (flags[k] & ~0x80u) return UINT64_MAX;
        bits |= (uint64_t)(flags[k] >> 7) << k;
    }
    return bits;
}

#if defined(LD_JSON_ESCAPE_X86)
__attribute__((target("avx2")))
static uint64_t mask32_bits(const unsigned char *p)
{
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return ascii_class ? ld_json_escape_ascii_mask32(x) : ld_json_escape_mask32(x);
}
#endif

/* The block of w bytes at p by the width w: 8 (word), 16 (SSE2), 32 (AVX2,
 * where the machine has it; else the oracle's answer, nothing checked) */
static uint64_t block_bits(size_t w, const unsigned char *p)
{
    if (w == 8) return word_bits(p);
#if defined(__SSE2__)
    if (w == 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        return ascii_class ? ld_json_escape_ascii_mask16(x) : ld_json_escape_mask16(x);
    }
#endif
#if defined(LD_JSON_ESCAPE_X86)
    if (w == 32 && __builtin_cpu_supports("avx2")) return mask32_bits(p);
#endif
    return want_bits(p, w);
}

static int test_every_byte_at_every_place_of_a_block(void)
{
    static const size_t widths[] = {8, 16, 32};
    unsigned char blk[32];
    for (size_t wi = 0; wi < 3; wi++) {
        size_t w = widths[wi];
        for (int any = 0; any < 2; any++)
            for (size_t at = 0; at < w; at++)
                for (unsigned b = 0; b < 256; b++)
                    for (int round = 0; round < 4; round++) {
                        fill(blk, w, any);
                        blk[at] = (unsigned char)b;
                        uint64_t got = block_bits(w, blk), want = want_bits(blk, w);
                        CHECK_MSG(got == want, "class %d, width %zu, byte %#x at %zu (%s): %#llx, want %#llx",
                                  ascii_class, w, b, at, any ? "random" : "plain", (unsigned long long)got,
                                  (unsigned long long)want);
                    }
    }
    return 0;
}

/* The definition: the first k in [i, n) whose byte escapes, else n */
static size_t want_next(const unsigned char *s, size_t i, size_t n)
{
    while (i < n && !escapes(s[i])) i++;
    return i < n ? i : n;
}

/* The scan of the class under test */
static size_t next_at(int level, const unsigned char *s, size_t i, size_t n)
{
    return ascii_class ? ld_json_next_escape_ascii_level(level, (const char *)s, i, n)
                       : ld_json_next_escape_level(level, (const char *)s, i, n);
}

static int levels_agree(const unsigned char *s, size_t i, size_t n)
{
    size_t want = want_next(s, i, n);
    for (size_t k = 0; k < N_LEVELS; k++) {
        size_t got = next_at(levels[k], s, i, n);
        CHECK_MSG(got == want, "class %d, level %d, n %zu, from %zu: %zu, want %zu", ascii_class, levels[k], n, i,
                  got, want);
    }
    CHECK(ascii_class ? ld_json_next_escape_ascii((const char *)s, i, n) == want
                      : ld_json_next_escape((const char *)s, i, n) == want);
    return 0;
}

/* Strings of n = 0..80: every byte b at every place p, plain bytes from the
 * start i on and random ones before it, from i = 0, p, p + 1 and a random
 * i; then dense random strings from every i. */
static int test_next_escape_every_byte_every_place(void)
{
    for (size_t n = 0; n <= 80; n++) {
        unsigned char *s = malloc(n ? n : 1);
        CHECK(s);
        for (size_t p = 0; p < n; p++)
            for (unsigned b = 0; b < 256; b++) {
                size_t starts[] = {0, p, p + 1, rnd((unsigned)n + 1)};
                for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
                    size_t i = starts[k];
                    fill(s, i, 1);
                    fill(s + i, n - i, 0);
                    s[p] = (unsigned char)b;
                    if (levels_agree(s, i, n)) return free(s), 1;
                }
            }
        for (int round = 0; round < 20; round++) {
            fill(s, n, 1);
            for (size_t k = 0; k < n; k++)
                if (escapes(s[k]) && rnd(4)) s[k] = plain_byte(); /* about one in 30 escapes */
            for (size_t i = 0; i <= n + 1; i++)
                if (levels_agree(s, i, n)) return free(s), 1;
        }
        free(s);
    }
    return 0;
}

/* Long strings (a tool result): one byte to escape, or none, at every place
 * of the last 100 and a random one before */
static int test_next_escape_long(void)
{
    for (size_t n = 200; n <= 4200; n += 1000) {
        unsigned char *s = malloc(n);
        CHECK(s);
        for (size_t p = n - 100; p <= n; p++) {
            fill(s, n, 0);
            if (p < n) s[p] = '\\';
            if (levels_agree(s, 0, n) || levels_agree(s, rnd((unsigned)n), n)) return free(s), 1;
            s[rnd((unsigned)(n - 100))] = '\n';
            if (levels_agree(s, 0, n) || levels_agree(s, n - 100 - rnd(40), n)) return free(s), 1;
        }
        free(s);
    }
    return 0;
}

/* The tests above for ensure_ascii=True's class */
static int in_ascii_class(int (*test)(void))
{
    ascii_class = 1;
    int rc = test();
    ascii_class = 0;
    return rc;
}

static int test_ascii_every_byte_at_every_place_of_a_block(void)
{
    return in_ascii_class(test_every_byte_at_every_place_of_a_block);
}

static int test_ascii_next_escape_every_byte_every_place(void)
{
    return in_ascii_class(test_next_escape_every_byte_every_place);
}

static int test_ascii_next_escape_long(void) { return in_ascii_class(test_next_escape_long); }

static const ld_test_case cases[] = {
    LD_CASE(test_class_is_cpythons),
    LD_CASE(test_every_byte_at_every_place_of_a_block),
    LD_CASE(test_next_escape_every_byte_every_place),
    LD_CASE(test_next_escape_long),
    LD_CASE(test_ascii_every_byte_at_every_place_of_a_block),
    LD_CASE(test_ascii_next_escape_every_byte_every_place),
    LD_CASE(test_ascii_next_escape_long),
};

LD_TEST_MAIN(cases)
