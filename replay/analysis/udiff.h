/* udiff.h - a short unified diff of two texts for people: one hunk around
 * the lines that differ (the texts with their common leading and trailing
 * lines taken off), a few lines of context, long lines and long runs of
 * changed lines shortened with a visible marker.  Meant for evidence, not
 * for patch(1).
 *
 * Ownership: the diff text lives in `arena`.
 */
#ifndef LD_UDIFF_H
#define LD_UDIFF_H

#include <stddef.h>

#include "ld_arena.h"

typedef struct ld_udiff_opts {
    size_t context;       /* lines of context on each side [3] */
    size_t max_lines;     /* changed lines shown per side [8] */
    size_t max_line_len;  /* bytes shown of one line [160] */
} ld_udiff_opts;

/* The diff of `a` (shown with '-') against `b` ('+'), headed by
 * "--- a_label" / "+++ b_label"; "" when the texts are equal.  `opts` may be
 * NULL.  NULL on out of memory. */
const char *ld_udiff(const char *a, size_t a_len, const char *b, size_t b_len,
                     const char *a_label, const char *b_label,
                     const ld_udiff_opts *opts, ld_arena *arena);

#endif
