/* test_ld_memfind.c - the shared substring search (include/ld_memfind.c).
 *
 * Every level (the bytes, SSE2, AVX2: each where the machine has it) is
 * checked against the definition, a plain loop over every place written
 * here: random haystacks and needles of every length 0..80 over small
 * alphabets (many candidates and near misses) and over all 256 bytes; a
 * needle at every place around the 16- and 64-place blocks and at the end;
 * texts where every candidate's first and last bytes match but nothing else
 * does, past the misses after which the search hands over to memmem; and the
 * degenerate sizes (an empty needle, one byte, longer than the haystack).
 */
#include "ld_memfind.h"
#include "tests/support/ld_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const int levels[] = { LD_MEMFIND_BYTES, LD_MEMFIND_SSE2, LD_MEMFIND_AVX2 };
#define N_LEVELS (sizeof levels / sizeof levels[0])

/* The definition: the first place i with h[i..i+nn) == n, h when nn is 0. */
static const char *plain_find(const char *h, size_t hn, const char *n, size_t nn)
{
    for (size_t i = 0; i + nn <= hn; i++)
        if (memcmp(h + i, n, nn) == 0) return h + i;
    return NULL;
}

/* Every level on h[0..hn) at `h`, against the definition's answer `want`. */
static int levels_agree(const char *h, size_t hn, const char *n, size_t nn, size_t want)
{
    for (size_t k = 0; k < N_LEVELS; k++) {
        const char *got = ld_memfind_level(levels[k], h, hn, n, nn);
        CHECK_MSG(got == (want == SIZE_MAX ? NULL : h + want), "level %d, hn %zu nn %zu: got %td, want %lld",
                  levels[k], hn, nn, got ? got - h : -1, want == SIZE_MAX ? -1LL : (long long)want);
    }
    CHECK(ld_memfind(h, hn, n, nn) == (want == SIZE_MAX ? NULL : h + want));
    return 0;
}

/* Every level against the definition, the haystack copied twice: followed
 * by the needle (a search that looks at places past the last one finds it
 * there) and alone in a block of its size (ASan sees a read past the end). */
static int agree(const char *h, size_t hn, const char *n, size_t nn)
{
    const char *def = plain_find(h, hn, n, nn);
    size_t want = def ? (size_t)(def - h) : SIZE_MAX;
    char *tempting = malloc(hn + nn + 1), *exact = malloc(hn ? hn : 1);
    CHECK(tempting && exact);
    memcpy(tempting, h, hn);
    memcpy(tempting + hn, n, nn);
    memcpy(exact, h, hn);
    int bad = levels_agree(tempting, hn, n, nn, want) || levels_agree(exact, hn, n, nn, want);
    free(tempting);
    free(exact);
    return bad;
}

/* A number in [0, k): the C library's sequence (srand(1): the same each run). */
static size_t below(size_t k)
{
    return (size_t)rand() % k;
}

/* One of the first `alpha` letters from 'a', or any byte when alpha is 256. */
static char random_byte(unsigned alpha)
{
    return (char)(alpha == 256 ? rand() : 'a' + (int)below(alpha));
}

/* Random texts of up to 4 KiB: letters from 2, 3 or 4 (many candidates, many
 * near misses) or any byte; needles of 0..80 bytes, half of them cut out of
 * the haystack, some of those with a byte changed (not there, or later). */
static int test_ld_memfind_random(void)
{
    static char h[4096];
    char n[81];
    srand(1);
    for (int round = 0; round < 6000; round++) {
        unsigned alpha = round % 5 == 4 ? 256 : 2 + (unsigned)below(3);
        size_t hn = below(round % 3 ? 300 : sizeof h), nn = below(sizeof n);
        for (size_t i = 0; i < hn; i++) h[i] = random_byte(alpha);
        if (hn >= nn && below(2)) {
            memcpy(n, h + below(hn - nn + 1), nn);
            if (nn && below(3) == 0) n[below(nn)] ^= 1;
        } else {
            for (size_t i = 0; i < nn; i++) n[i] = random_byte(alpha);
        }
        if (agree(h, hn, n, nn)) return 1;
    }
    return 0;
}

/* A needle at every place of haystacks whose places span up to three
 * 64-place blocks (every place of a block, the edges, the 16-place steps
 * and the places left after them), the rest a filler the needle never
 * matches; the filler alone; and the needle one place too late, cut by the
 * haystack's end. */
static int test_ld_memfind_every_place(void)
{
    char h[281], n[80];
    for (size_t nn = 1; nn <= sizeof n; nn += nn < 8 ? 1 : 9) {
        for (size_t k = 0; k < nn; k++) n[k] = (char)('A' + k % 26);
        for (size_t hn = nn; hn <= nn + 200 && hn < sizeof h; hn++) {
            for (size_t at = 0; at + nn <= hn; at++) {
                memset(h, '.', hn);
                memcpy(h + at, n, nn);
                for (size_t k = 0; k < N_LEVELS; k++)
                    CHECK_MSG(ld_memfind_level(levels[k], h, hn, n, nn) == h + at,
                              "level %d hn %zu nn %zu at %zu", levels[k], hn, nn, at);
            }
            memset(h, '.', hn);
            if (agree(h, hn, n, nn)) return 1;
            /* the needle one place past the last: all but its last byte */
            memcpy(h + hn - nn + 1, n, nn);
            if (levels_agree(h, hn, n, nn, SIZE_MAX)) return 1;
        }
    }
    return 0;
}

/* Places whose first and last bytes are the needle's but not the bytes
 * between ("a..Xb" for "a..Yb"), one after the other, far more of them than
 * the misses before memmem: the needle at the end, then nowhere, then twice
 * (the first one found), for needles of 2..80 bytes. */
static int test_ld_memfind_first_last_only(void)
{
    static char h[6000];
    char n[80], decoy[80];
    for (size_t nn = 2; nn <= sizeof n; nn++) {
        memset(n, 'x', nn);
        n[0] = 'a', n[nn - 1] = 'b';
        memcpy(decoy, n, nn);
        if (nn > 2) decoy[nn / 2] = 'y';
        size_t hn = 0;
        while (hn + 2 * nn <= sizeof h) memcpy(h + hn, decoy, nn), hn += nn;
        size_t at = hn;
        memcpy(h + hn, n, nn), hn += nn;
        for (size_t k = 0; k < N_LEVELS; k++)
            CHECK_MSG(ld_memfind_level(levels[k], h, hn, n, nn) == (nn > 2 ? h + at : h),
                      "level %d nn %zu", levels[k], nn);
        if (agree(h, hn - 1, n, nn) || agree(h, hn, n, nn)) return 1;
        memcpy(h + at / 2 - at / 2 % nn, n, nn); /* an earlier one */
        if (agree(h, hn, n, nn)) return 1;
    }
    return 0;
}

static int test_ld_memfind_sizes(void)
{
    const char *t = "abcab";
    for (size_t k = 0; k < N_LEVELS; k++) {
        int l = levels[k];
        CHECK(ld_memfind_level(l, t, 5, "", 0) == t);      /* empty needle: found at once */
        CHECK(ld_memfind_level(l, t, 0, "", 0) == t);      /* ... even in an empty haystack */
        CHECK(ld_memfind_level(l, t, 0, "a", 1) == NULL);
        CHECK(ld_memfind_level(l, t, 5, "b", 1) == t + 1); /* one byte */
        CHECK(ld_memfind_level(l, t, 5, "c", 1) == t + 2);
        CHECK(ld_memfind_level(l, t, 5, "d", 1) == NULL);
        CHECK(ld_memfind_level(l, t, 5, "ab", 2) == t);
        CHECK(ld_memfind_level(l, t + 1, 4, "ab", 2) == t + 3);
        CHECK(ld_memfind_level(l, t, 5, "abcab", 5) == t); /* the whole haystack */
        CHECK(ld_memfind_level(l, t, 5, "abcabc", 6) == NULL); /* longer than it */
        CHECK(ld_memfind_level(l, t, 4, "abcab", 5) == NULL);
        CHECK(ld_memfind_level(l, "\xff\x80\xff", 3, "\x80\xff", 2) != NULL); /* bytes past 127 */
    }
    return 0;
}

/* A megabyte of "aaa...a" searched for "aaa...ab" (no place ends as the
 * needle does) and for "a...aba" (every place starts and ends as it does
 * and differs only near its end: a compare of nearly the whole needle at
 * each of a million places without the handover to memmem).  The answers
 * only; the handover is what lets this finish quickly. */
static int test_ld_memfind_pathological(void)
{
    enum { HN = 1 << 20, NN = 80 };
    char *h = malloc(HN);
    char ab[NN], aba[NN];
    CHECK(h != NULL);
    memset(h, 'a', HN);
    memset(ab, 'a', NN), ab[NN - 1] = 'b';
    memset(aba, 'a', NN), aba[NN - 2] = 'b';
    for (size_t k = 0; k < N_LEVELS; k++) {
        int l = levels[k];
        CHECK(ld_memfind_level(l, h, HN, ab, NN) == NULL);
        CHECK(ld_memfind_level(l, h, HN, aba, NN) == NULL);
        memcpy(h + HN - NN, aba, NN);
        CHECK(ld_memfind_level(l, h, HN, aba, NN) == h + HN - NN);
        CHECK(ld_memfind_level(l, h, HN, ab, NN) == h + HN - NN - 1); /* up to that b */
        memcpy(h + HN - NN, ab, NN);
        CHECK(ld_memfind_level(l, h, HN, ab, NN) == h + HN - NN);
        memset(h + HN - NN, 'a', NN);
    }
    free(h);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_ld_memfind_random),
    LD_CASE(test_ld_memfind_every_place),
    LD_CASE(test_ld_memfind_first_last_only),
    LD_CASE(test_ld_memfind_sizes),
    LD_CASE(test_ld_memfind_pathological),
};

LD_TEST_MAIN(cases)
