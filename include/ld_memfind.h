/* ld_memfind.h - substring search, the one every layer uses.
 *
 * The first occurrence of a needle in a haystack, as memmem finds it, but
 * quick on what logdiff searches most: a message's text (tens to thousands
 * of bytes) in a prompt of up to megabytes.  Candidates are the places
 * whose first and last bytes are the needle's, 64 (AVX2, chosen at run
 * time) or 16 (SSE2) places a step, found byte by byte elsewhere; only they
 * are compared whole.  After a few candidates that were not a match
 * (repetitive text) the rest goes to the C library's memmem, which keeps
 * the time linear in hn + nn whatever the text.
 */
#ifndef LD_MEMFIND_H
#define LD_MEMFIND_H

#include <stddef.h>

/* The first place in h[0..hn) where n[0..nn) occurs, or NULL; h when nn is
 * 0 (the empty needle is found at once, as Python's str.find finds it). */
const char *ld_memfind(const char *h, size_t hn, const char *n, size_t nn);

/* The block steps ld_memfind may take, for the tests: each level also takes
 * the ones below it for what is left, the bytes last.  A level the build or
 * the machine lacks falls back to the next one below. */
enum { LD_MEMFIND_BYTES = 0, LD_MEMFIND_SSE2 = 1, LD_MEMFIND_AVX2 = 2 };

/* ld_memfind with the highest step capped at `level`; the same answer at
 * every level. */
const char *ld_memfind_level(int level, const char *h, size_t hn, const char *n, size_t nn);

#endif
