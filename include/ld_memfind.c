/* ld_memfind.c - substring search (ld_memfind.h).
 *
 * The places a needle of nn >= 2 bytes may start at are [0, starts).  Each
 * step finds the candidates among a block of places (first byte and last
 * byte the needle's), and try_candidates compares only those whole.  The
 * widest step the machine has goes first, then narrower ones for what is
 * left, then the bytes.
 */
#define _GNU_SOURCE /* memmem */
#include "ld_memfind.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define LD_MEMFIND_X86 1
#endif

/* False candidates before the rest goes to memmem: a text with now and then
 * a near miss stays on the fast steps, and a text made of near misses
 * ("aaaa" searched for "aaba") costs this many compares of the needle at
 * most before memmem's linear bound takes over. */
#define PROBE_MISSES 32

/* One search: the haystack, the needle (nn >= 2), the false candidates so
 * far and, once done, the answer (NULL: not there). */
typedef struct search {
    const char *h, *n;
    size_t hn, nn;
    unsigned misses;
    int done;
    const char *found;
} search;

/* Compares the candidates h[base + k], for each bit k of `bits`, whose first
 * and last bytes are the needle's: the first match found, or memmem's
 * answer for the rest after PROBE_MISSES false ones, ends the search
 * (returns 1, s->done).  Out of line: the block loops keep their registers. */
__attribute__((noinline))
static int try_candidates(search *s, size_t base, uint64_t bits)
{
    for (; bits; bits &= bits - 1) {
        size_t at = base + (size_t)__builtin_ctzll(bits);
        if (memcmp(s->h + at + 1, s->n + 1, s->nn - 2) == 0) {
            s->found = s->h + at;
            return s->done = 1;
        }
        if (++s->misses == PROBE_MISSES) {
            s->found = memmem(s->h + at + 1, s->hn - at - 1, s->n, s->nn);
            return s->done = 1;
        }
    }
    return 0;
}

/* Places [i, starts) one by one, memchr leading to each that starts with
 * the needle's first byte. */
static void steps_bytes(search *s, size_t i, size_t starts)
{
    const char last = s->n[s->nn - 1];
    while (i < starts) {
        const char *p = memchr(s->h + i, (unsigned char)s->n[0], starts - i);
        if (!p) break;
        i = (size_t)(p - s->h);
        if (p[s->nn - 1] == last && try_candidates(s, i, 1)) break;
        i++;
    }
}

/* The loop of a block step: places [i, starts) W a step while a whole step
 * fits, CANDS the candidates among the W places from s->h + i, whose last
 * bytes are at lasts + i (bit k: place i + k); returns where it stopped.
 * Expanded in each step's function: compiled for its target, its vectors
 * kept in registers. */
#define BLOCK_STEPS(W, CANDS)                                                  \
    const char *lasts = s->h + s->nn - 1;                                      \
    for (; i + (W) <= starts; i += (W)) {                                      \
        uint64_t bits = CANDS;                                                 \
        if (bits && try_candidates(s, i, bits)) break;                         \
    }                                                                          \
    return i

#if defined(__SSE2__)
static uint64_t cands_sse2(const char *p, const char *q, __m128i first, __m128i last)
{
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)q);
    __m128i both = _mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, last));
    return (uint32_t)_mm_movemask_epi8(both);
}

static size_t steps_sse2(search *s, size_t i, size_t starts)
{
    const __m128i f = _mm_set1_epi8(s->n[0]), l = _mm_set1_epi8(s->n[s->nn - 1]);
    BLOCK_STEPS(16, cands_sse2(s->h + i, lasts + i, f, l));
}
#endif

#if defined(LD_MEMFIND_X86)
__attribute__((target("avx2")))
static uint64_t cands32_avx2(const char *p, const char *q, __m256i first, __m256i last)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)q);
    __m256i both = _mm256_and_si256(_mm256_cmpeq_epi8(a, first), _mm256_cmpeq_epi8(b, last));
    return (uint32_t)_mm256_movemask_epi8(both);
}

/* 64 places a step: one test for two vectors' candidates, which are mostly
 * none. */
__attribute__((target("avx2")))
static uint64_t cands_avx2(const char *p, const char *q, __m256i first, __m256i last)
{
    return cands32_avx2(p, q, first, last) | cands32_avx2(p + 32, q + 32, first, last) << 32;
}

__attribute__((target("avx2")))
static size_t steps_avx2(search *s, size_t i, size_t starts)
{
    const __m256i f = _mm256_set1_epi8(s->n[0]), l = _mm256_set1_epi8(s->n[s->nn - 1]);
    BLOCK_STEPS(64, cands_avx2(s->h + i, lasts + i, f, l));
}
#endif

const char *ld_memfind_level(int level, const char *h, size_t hn, const char *n, size_t nn)
{
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    if (nn == 1) return memchr(h, (unsigned char)n[0], hn);
    search s = { .h = h, .n = n, .hn = hn, .nn = nn };
    size_t starts = hn - nn + 1, i = 0;
#if defined(LD_MEMFIND_X86)
    if (level >= LD_MEMFIND_AVX2 && starts >= 64 && __builtin_cpu_supports("avx2"))
        i = steps_avx2(&s, i, starts);
#endif
#if defined(__SSE2__)
    if (level >= LD_MEMFIND_SSE2 && !s.done) i = steps_sse2(&s, i, starts);
#endif
    (void)level;
    if (!s.done) steps_bytes(&s, i, starts);
    return s.found;
}

const char *ld_memfind(const char *h, size_t hn, const char *n, size_t nn)
{
    return ld_memfind_level(LD_MEMFIND_AVX2, h, hn, n, nn);
}
