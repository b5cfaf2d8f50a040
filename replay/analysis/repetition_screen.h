/* repetition_screen.h - internal to replay/analysis/repetition*.c: a cheap
 * screen that rules out, for most outputs, every stretch the full search of
 * repetition.c could report, so that the full search (a hash-table probe at
 * every byte) runs only on the outputs that might loop.
 *
 * Exact by construction: it answers 0 only when no periodic stretch of the
 * text passes the thresholds of repetition.h (the proof is in
 * repetition_screen.c), so ld_repetition_find's answer does not depend on
 * it.  Cost: one pass of 64-byte blocks classified with AVX-512BW, AVX2 or
 * SSE2 (whichever the machine has; byte by byte elsewhere) and a short
 * hash-table step at each start of a word of 4 bytes or more.  Memory: a
 * table of n/2 bytes and an array of 4n bytes, from
 * scratch when small (as the full search's table), else malloc'd and freed
 * in the call.  Thread safety: none shared.
 */
#ifndef LD_REPETITION_SCREEN_H
#define LD_REPETITION_SCREEN_H

#include <stddef.h>
#include <stdint.h>

#include "ld_arena.h"

/* 0 when s[0..n) (n <= LD_REP_MAX_SCAN) holds no stretch that
 * ld_repetition_find could report; 1 when it may (also when the screen's
 * memory cannot be had, or the text is too repetitive to screen cheaply). */
int ld_rep_screen(const char *s, size_t n, ld_arena *scratch);

/* The same with the block classification of at most the given level: 0 byte
 * by byte (what builds without SSE2 run), 1 SSE2, 2 AVX2, 3 AVX-512BW (a
 * level the machine lacks falls to the best one below it), for the tests:
 * the same answer at every level. */
#define LD_REP_SCREEN_BEST 3
int ld_rep_screen_at(int level, const char *s, size_t n, ld_arena *scratch);

/* ld_rep_screen_at(0, ...). */
int ld_rep_screen_bytes(const char *s, size_t n, ld_arena *scratch);

/* For the tests: the masks of the 64 bytes of s[0..n) from at (zeros past
 * n), classified at the given level: bit j of out[0] set when byte at + j is
 * a word byte (an ASCII letter or digit, or >= 0x80), of out[1] when it is
 * >= 0x80, of out[2] when it is >= 0xC0. */
void ld_rep_screen_masks(int level, const char *s, size_t n, size_t at, uint64_t out[3]);

#endif
