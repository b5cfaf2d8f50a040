/* align_mem.c - substring search for the aligner (see align_find.h):
 * ld_af_mem (first occurrence) and ld_af_last (last occurrence).
 *
 * Every message of every request is searched for in its prompt, and every
 * message's content for "</think>", so these run over most of the bytes of
 * a log.  The first occurrence is the base's ld_memfind (candidates by
 * first and last byte, a block at a time, linear in the worst case).
 */
#define _GNU_SOURCE /* memrchr */
#include "align_find.h"

#include <string.h>

#include "ld_memfind.h"

/* The aligner has no use for the empty needle: not found (ld_memfind finds
 * it at once). */
const char *ld_af_mem(const char *h, size_t hlen, const char *n, size_t nlen)
{
    return nlen ? ld_memfind(h, hlen, n, nlen) : NULL;
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
