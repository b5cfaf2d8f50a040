/* align_mem.c - substring search for the aligner (see align_find.h):
 * ld_af_mem (first occurrence) and ld_af_last (last occurrence).
 *
 * Every message of every request is searched for in its prompt, and every
 * message's content for "</think>", so these run over most of the bytes of
 * a log.  glibc's memmem is a byte loop for short needles; here candidates
 * are the positions whose first and last bytes match the needle's, 32 at a
 * time (AVX2 when the CPU has it), then checked with memcmp.  After
 * PROBE_MISSES candidates that were not a match (repetitive text) the rest
 * goes to glibc's two-way memmem, which keeps the bound linear.
 */
#define _GNU_SOURCE /* memmem, memrchr */
#include "align_find.h"

#include <stdint.h>
#include <string.h>

#define PROBE_MISSES 32 /* false candidates before the two-way search */

/* Candidates at p[0..32): bit k set when p[k] == first and p[k + d] == last. */
typedef uint32_t (*cand_fn)(const char *p, size_t d, unsigned char first, unsigned char last);

static uint32_t cand_plain(const char *p, size_t d, unsigned char first, unsigned char last)
{
    uint32_t bits = 0;
    for (unsigned k = 0; k < 32; k++)
        bits |= (uint32_t)((unsigned char)p[k] == first && (unsigned char)p[k + d] == last) << k;
    return bits;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2")))
static uint32_t cand_avx2(const char *p, size_t d, unsigned char first, unsigned char last)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + d));
    __m256i m = _mm256_and_si256(_mm256_cmpeq_epi8(a, _mm256_set1_epi8((char)first)),
                                 _mm256_cmpeq_epi8(b, _mm256_set1_epi8((char)last)));
    return (uint32_t)_mm256_movemask_epi8(m);
}
#endif

static cand_fn pick_cand(void)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) return cand_avx2;
#endif
    return cand_plain;
}

const char *ld_af_mem(const char *h, size_t hlen, const char *n, size_t nlen)
{
    if (nlen == 0 || nlen > hlen) return NULL;
    const unsigned char first = (unsigned char)n[0], last = (unsigned char)n[nlen - 1];
    const size_t d = nlen - 1, starts = hlen - nlen + 1; /* candidate starts: [0, starts) */
    cand_fn cand = starts >= 32 ? pick_cand() : cand_plain;
    int misses = 0;
    for (size_t i = 0; i < starts; i += 32) {
        uint32_t bits;
        if (i + 32 <= starts) {
            bits = cand(h + i, d, first, last);
        } else { /* the last < 32 starts */
            bits = 0;
            for (size_t k = i; k < starts; k++)
                bits |= (uint32_t)((unsigned char)h[k] == first &&
                                   (unsigned char)h[k + d] == last) << (k - i);
        }
        for (; bits; bits &= bits - 1) {
            size_t at = i + (size_t)__builtin_ctz(bits);
            if (memcmp(h + at + 1, n + 1, d) == 0) return h + at;
            if (++misses == PROBE_MISSES) return memmem(h + at + 1, hlen - at - 1, n, nlen);
        }
    }
    return NULL;
}

/* Backward from the end, a candidate per occurrence of the first byte: for
 * the short needles it is given ("</think>") the cost is linear. */
const char *ld_af_last(const char *h, size_t hlen, const char *n, size_t nlen)
{
    if (nlen == 0 || nlen > hlen) return NULL;
    size_t left = hlen - nlen + 1; /* starts still to look at: [0, left) */
    const char *c;
    while (left && (c = memrchr(h, n[0], left)) != NULL) {
        if (memcmp(c + 1, n + 1, nlen - 1) == 0) return c;
        left = (size_t)(c - h);
    }
    return NULL;
}
