/* repetition.h - find degenerate repetition (a model looping) in an output.
 *
 * What counts: a stretch of the text that is periodic, i.e. one unit of p
 * bytes written again and again back to back ("the the the ...", a sentence
 * or a paragraph said over and over, a run of identical lines).  Exact
 * repetition only; a loop whose copies differ (a counter, a changing value)
 * is not reported.  Text that merely reuses words, braces or keywords (prose,
 * code, lists, tables, JSON arrays of similar objects) is not periodic over
 * more than a few bytes and is not reported.
 *
 * Thresholds (chosen so that normal prose, C code, markdown tables and JSON
 * arrays stay silent while loops fire; see tests/replay/analysis/test_repetition.c):
 *   - the unit holds at least LD_REP_MIN_LETTERS letters (ASCII letters or
 *     non-ASCII characters), so runs of spaces, braces, "0, 0, 0", "| --- |"
 *     and "=====" never count;
 *   - the stretch covers at least LD_REP_MIN_BYTES bytes;
 *   - a short unit (< LD_REP_SHORT_UNIT bytes, a word or two) repeats at
 *     least LD_REP_SHORT_COUNT times: "ha ha ha", "no no no" or a few NULLs in
 *     an initializer are not a loop, fifty "the " are;
 *   - a unit of a phrase or a line (< LD_REP_LONG_UNIT bytes) repeats at least
 *     LD_REP_MID_COUNT times;
 *   - a longer unit (a long sentence, a paragraph) repeats at least
 *     LD_REP_LONG_COUNT times (twice can be a legitimate quote).
 * A unit may be several copies of the stretch's shortest one (18 copies of
 * 6 bytes pass as 6 of 18), the letters being those of the shortest (64
 * "a" are no loop of "aa").
 *
 * Cost: linear in the length.  A screen (repetition_screen.h: a pass of
 * 64-byte blocks and a hash-table step per start of a longer word) rules out
 * every reportable stretch for most texts; only where one may be, one pass over
 * 8-byte windows with a hash table of the last position of each window and
 * a chain of the earlier ones (2 x n slots and n links, from the caller's
 * scratch arena when given and they are at most LD_REP_ARENA_SLOTS slots in
 * all, else malloc'd and freed in the call); a run is extended byte by byte
 * against its period (the nearest sighting's distance), and at every
 * multiple i of 2^z the earlier sightings less than 2^(z+1) back are tried
 * as periods too (what makes the search miss none: the proof in
 * repetition.c).  Only the last
 * LD_REP_MAX_SCAN bytes of a longer text are looked at (a loop runs to the
 * end of the output).  Thread safety: none shared; no global state.
 */
#ifndef LD_REPETITION_H
#define LD_REPETITION_H

#include <stddef.h>

#include "ld_arena.h"
#include "ld_error.h"

#define LD_REP_MIN_LETTERS 2
#define LD_REP_MIN_BYTES 64
#define LD_REP_SHORT_UNIT 16
#define LD_REP_SHORT_COUNT 20
#define LD_REP_LONG_UNIT 64
#define LD_REP_MID_COUNT 6
#define LD_REP_LONG_COUNT 3
#define LD_REP_MAX_SCAN ((size_t)4 << 20)
#define LD_REP_ARENA_SLOTS ((size_t)1 << 18) /* 1 MiB of table; larger ones are malloc'd */

/* The copies of a unit of p bytes a stretch must hold to be reported (the
 * thresholds above; the search and its screen both ask). */
static inline size_t ld_rep_min_count(size_t p)
{
    return p < LD_REP_SHORT_UNIT ? LD_REP_SHORT_COUNT : p < LD_REP_LONG_UNIT ? LD_REP_MID_COUNT : LD_REP_LONG_COUNT;
}

/* The bytes a stretch of period p must cover: its copies, and at least
 * LD_REP_MIN_BYTES. */
static inline size_t ld_rep_need_bytes(size_t p)
{
    size_t b = ld_rep_min_count(p) * p;
    return b < LD_REP_MIN_BYTES ? LD_REP_MIN_BYTES : b;
}

typedef struct ld_repetition {
    size_t start;     /* byte offset of the periodic stretch in the text */
    size_t len;       /* bytes it covers */
    size_t unit_off;  /* offset of one copy of the unit, rotated to start at a word */
    size_t unit_len;  /* the period in bytes */
    size_t count;     /* whole copies of the unit in the stretch */
} ld_repetition;

/* Looks for the longest stretch of s[0..n) that passes the thresholds above
 * (each stretch as long as its period holds; among equally long ones the
 * first the scan meets, with its shortest passing unit).
 * *out_found = 1 and *out filled when there is one, else 0.  scratch (may be
 * NULL) lends the table's memory: it stays allocated there until the
 * caller's next reset.  The answer does not depend on scratch.  Returns
 * LD_OK, or LD_ERR_NOMEM when the temporary table cannot be allocated. */
ld_status ld_repetition_find(const char *s, size_t n, ld_arena *scratch, ld_repetition *out,
                             int *out_found, ld_error *err);

/* The same search without its screen (the tests' reference: the screen
 * must never change the answer, only save the search). */
ld_status ld_repetition_find_unscreened(const char *s, size_t n, ld_arena *scratch, ld_repetition *out,
                                        int *out_found, ld_error *err);

#endif
