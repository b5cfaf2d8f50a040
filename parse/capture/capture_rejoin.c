/* capture_rejoin.c - the pieces of a line rejoined by its capture's marks
 * (Docker's missing \n, CRI's P, journald's _LINE_BREAK=line-max), per
 * source: each record's piece added to the line waiting in its source, the
 * line handed out with its last piece.  A line whole in one record is
 * handed out where it lies; the fast paths decode a piece straight to the
 * end of its line, so rejoining copies no byte twice. */
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"

/* Docker writes each byte cut off a character as U+FFFD (EF BF BD): the
 * ones at the seam of two pieces are bytes lost to its 16 KiB cut */
static uint64_t seam_replacements(const ld_capture_pending *p, const char *s, size_t n)
{
    uint64_t k = 0;
    for (size_t e = p->len; e >= 3 && !memcmp(p->buf + e - 3, "\xef\xbf\xbd", 3); e -= 3) k++;
    for (size_t b = 0; b + 3 <= n && !memcmp(s + b, "\xef\xbf\xbd", 3); b += 3) k++;
    return k;
}

/* A whole line that lost bytes at Docker's cuts: a problem of its own, so
 * that what differs there is not blamed on the template; the line is still
 * read as it is. */
static ld_status lost_at_seams(ld_capture *c, const ld_line *line, uint64_t pieces, ld_error *err)
{
    c->stats.replaced_bytes += line->lost_bytes;
    c->stats.damaged_lines++;
    ld_status st = LD_FAIL(err, LD_ERR_TRUNCATED, line->offset,
                           "the line starting at record %llu was cut inside a character by Docker's 16 KiB "
                           "split: %llu bytes written as U+FFFD are lost (%llu pieces); read as it is, but "
                           "differences there are the capture's",
                           (unsigned long long)line->lineno, (unsigned long long)line->lost_bytes,
                           (unsigned long long)pieces);
    if (err) err->line = line->lineno;
    return st;
}

/* The piece's bytes at the end of p's line: already there when decoded in
 * place, else copied.  (Not a swap of the record buffer for a first piece:
 * buffers of different sizes changing hands make the allocator map and
 * unmap pages on every line.) */
static ld_status take_bytes(ld_capture *c, ld_capture_pending *p, const ld_capture_record *r, int in_place,
                            ld_error *err)
{
    if (!in_place) return ld_capture_append(c, p, r->text, r->len, err);
    p->len += r->len;
    p->buf[p->len] = 0;
    return LD_OK;
}

/* a piece of p's line arrived (its bytes at r->text, or in place at the
 * end of p's line); the line out with its last piece */
ld_status ld_capture_add_piece(ld_capture *c, ld_capture_pending *p, const ld_line *in, const ld_capture_record *r,
                           int in_place, ld_line *out, int *out_has, ld_error *err)
{
    if (!p->active) {
        p->active = 1;
        p->lineno = in->lineno;
        p->offset = in->offset;
    } else if (c->kind == LD_CAPTURE_DOCKER) {
        p->replaced += seam_replacements(p, r->text, r->len);
    }
    p->pieces++;
    if (p->len + r->len > c->max_line) {
        uint64_t first = p->lineno;
        p->active = 0;
        p->len = 0;
        p->pieces = 0;
        p->dropping = !r->last;
        ld_status st = LD_FAIL(err, LD_ERR_LIMIT, p->offset,
                               "the line starting at record %llu is longer than %zu bytes rejoined: dropped",
                               (unsigned long long)first, c->max_line);
        if (err) err->line = first;
        return st;
    }
    LD_TRY(take_bytes(c, p, r, in_place, err));
    c->last_piece = p;
    if (!r->last) return LD_OK;
    uint64_t pieces = p->pieces;
    ld_capture_hand_out(c, p, out);
    *out_has = 1;
    return out->lost_bytes ? lost_at_seams(c, out, pieces, err) : LD_OK;
}

/* a record's piece into its source's line; the line out with its last piece */
ld_status ld_capture_rejoin(ld_capture *c, const ld_line *in, const ld_capture_record *r, ld_line *out, int *out_has,
                            ld_error *err)
{
    ld_capture_pending *p = ld_capture_source(c, r->source ? r->source : "", r->source_len);
    if (!p) return LD_FAIL(err, LD_ERR_LIMIT, in->offset, "more than %d sources interleave their split lines",
                           LD_CAPTURE_MAX_SOURCES);
    if (p->dropping) {
        if (r->last) p->dropping = 0;
        return LD_OK;
    }
    if (!p->active && r->last) /* a whole line in one record: no copy */
        return ld_capture_whole_record(c, in, r, out, out_has, err);
    return ld_capture_add_piece(c, p, in, r, 0, out, out_has, err);
}
