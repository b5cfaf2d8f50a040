/* align_find.h - internal to replay/analysis/align*.c: find one part's text in a window
 * of the prompt, under the known normalisations (see align.h).
 *
 * Ownership: borrows everything; temporaries are malloc'd and freed inside.
 * Not thread-unsafe beyond its arguments.
 */
#ifndef LD_ALIGN_FIND_H
#define LD_ALIGN_FIND_H

#include <stddef.h>

#include "align.h"

typedef struct ld_af_prompt {
    const char *p;
    size_t len;
    int has_cut;
    size_t cut;
} ld_af_prompt;

typedef struct ld_af_hit {
    ld_align_state state;
    ld_align_how how;
    size_t start, end;
    size_t first_diff, first_diff_prompt;
    ld_align_piece pieces[2];
    size_t n_pieces;
} ld_af_hit;

#define LD_AF_PARTIAL 1u  /* head/tail anchors when the whole text is not there */
#define LD_AF_JSON 2u     /* JSON forms (re-serialised, compared as JSON) */
#define LD_AF_VALUES 4u   /* leaf values of a JSON object printed in order */

/* Searches text t[0..tlen) in prompt bytes [lo,hi).  Fills *out (state ABSENT
 * when nothing matched; FOUND how CUT when the text runs into or out of the
 * prompt's cut and what is visible matches; UNKNOWN when a partial match
 * stops at the cut).  Returns 0, or -1 when a temporary allocation failed. */
int ld_af_find(const ld_af_prompt *pr, size_t lo, size_t hi, const char *t,
               size_t tlen, unsigned flags, ld_af_hit *out);

/* First occurrence of n[0..nlen) in h[0..hlen), or NULL (also when nlen
 * is 0): the base's ld_memfind, linear in hlen + nlen (align_mem.c). */
const char *ld_af_mem(const char *h, size_t hlen, const char *n, size_t nlen);

/* Last occurrence of n[0..nlen) in h[0..hlen) (the greatest start), or NULL.
 * For short needles: each occurrence of n[0] costs a compare of nlen bytes. */
const char *ld_af_last(const char *h, size_t hlen, const char *n, size_t nlen);

/* t without edge whitespace (space, tab, CR, LF): offset and length. */
void ld_af_strip(const char *t, size_t tlen, size_t *off, size_t *len);

#endif
