/* capture_unmarked.c - rejoining where the capture marks nothing
 * (journalctl's text formats, -o cat, syslog): a request line whose literal
 * is still open at the end of a record (capture_open.c) goes on with its
 * source's next records until it closes; a new line before that means the
 * capture cut it for good.  And what a capture left out of a record
 * (journalctl's null, "[N blob data]") for every capture. */
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"

/* the line of p handed out as cut for good: what arrived of it */
static ld_status cut_for_good(ld_capture *c, ld_capture_pending *p, ld_line *out, uint64_t at_line, const char *why,
                              ld_error *err)
{
    uint64_t pieces = p->pieces;
    c->stats.cut_lines++;
    ld_capture_hand_out(c, p, out);
    ld_status st = LD_FAIL(err, LD_ERR_TRUNCATED, out->offset,
                           "the line starting at record %llu was cut for good at record %llu (%s): %llu "
                           "pieces, %zu bytes kept; read as it is",
                           (unsigned long long)out->lineno, (unsigned long long)at_line, why,
                           (unsigned long long)pieces, out->len);
    if (err) err->line = out->lineno;
    return st;
}

/* a record that begins a line: whole (handed out where it lies, or kept
 * for ld_capture_pop when a cut line went out first), or the first piece
 * of a line whose literal it leaves open */
static ld_status begin_line(ld_capture *c, ld_capture_pending *p, const ld_line *in, const ld_capture_record *r,
                            const ld_literal_scan *scanned, ld_line *out, int *out_has, ld_error *err)
{
    ld_literal_scan scan;
    if (scanned) scan = *scanned;
    else ld_literal_begin_line(&scan, r->text, r->len);
    if (!ld_literal_open(&scan)) {
        if (!*out_has) return ld_capture_whole_record(c, in, r, out, out_has, err);
        ld_status st = ld_capture_whole_record(c, in, r, &c->ready, &c->has_ready, NULL);
        if (st != LD_OK) c->has_ready = 0; /* past max_line: dropped (the cut line's problem is reported) */
        return LD_OK;
    }
    if (r->len > c->max_line) {
        p->dropping = 1;
        return LD_FAIL(err, LD_ERR_LIMIT, in->offset, "a line longer than %zu bytes: dropped", c->max_line);
    }
    p->active = p->open = 1;
    p->lineno = in->lineno;
    p->offset = in->offset;
    p->pieces = 1;
    p->scan = scan;
    return ld_capture_append(c, p, r->text, r->len, err);
}

/* a record that goes on with p's open line */
static ld_status go_on(ld_capture *c, ld_capture_pending *p, const ld_line *in, const ld_capture_record *r, ld_line *out,
                       int *out_has, ld_error *err)
{
    p->pieces++;
    if (p->len + r->len > c->max_line) {
        uint64_t first = p->lineno;
        p->active = 0;
        p->len = p->pieces = 0;
        p->dropping = 1;
        ld_status st = LD_FAIL(err, LD_ERR_LIMIT, p->offset,
                               "the line starting at record %llu is longer than %zu bytes rejoined: dropped",
                               (unsigned long long)first, c->max_line);
        if (err) err->line = first;
        return st;
    }
    (void)in;
    LD_TRY(ld_capture_append(c, p, r->text, r->len, err));
    ld_literal_feed(&p->scan, r->text, r->len);
    if (ld_literal_open(&p->scan)) return LD_OK;
    ld_capture_hand_out(c, p, out);
    *out_has = 1;
    return LD_OK;
}

/* A plain file holds the server's lines as it wrote them: one whose
 * literal does not close and that nothing went on with was not cut (an old
 * logger's unescaped quotes, a line the server itself cut short) */
int ld_capture_quiet_open(const ld_capture *c, const ld_capture_pending *p)
{
    return c->kind == LD_CAPTURE_PLAIN && p->pieces == 1;
}

ld_status ld_capture_unmarked(ld_capture *c, const ld_line *in, const ld_capture_record *r,
                              const ld_literal_scan *scanned, ld_line *out, int *out_has, ld_error *err)
{
    ld_capture_pending *p = ld_capture_source(c, r->source ? r->source : "", r->source_len);
    if (!p) return LD_FAIL(err, LD_ERR_LIMIT, in->offset, "more than %d sources interleave their split lines",
                           LD_CAPTURE_MAX_SOURCES);
    int starts = !(p->active || p->dropping) || ld_open_starts_line(r->text, r->len); /* asked only when it matters */
    if (p->dropping) {
        if (!starts) return LD_OK; /* a piece of a line already reported */
        p->dropping = 0;
    }
    if (p->active && !starts) return go_on(c, p, in, r, out, out_has, err);
    ld_status st = LD_OK;
    if (p->active && ld_capture_quiet_open(c, p)) { /* the server's own line, not closed: the pairer judges it */
        ld_capture_hand_out(c, p, out);
        *out_has = 1;
    } else if (p->active) { /* a new line while the last one's literal is open */
        st = cut_for_good(c, p, out, in->lineno, "a new line began before its literal closed", err);
        *out_has = 1;
    }
    ld_status b = begin_line(c, p, in, r, scanned, out, out_has, st == LD_OK ? err : NULL);
    return st != LD_OK ? st : b;
}

/* a record whose text the capture left out: its source's line is cut for
 * good (what came of it is handed out) and the rest of it dropped */
ld_status ld_capture_lost_piece(ld_capture *c, const ld_line *in, const ld_capture_record *r, int marks, ld_line *out,
                            int *out_has, ld_error *err)
{
    c->stats.lost_records++;
    ld_capture_pending *p = ld_capture_source(c, r->source ? r->source : "", r->source_len);
    if (p && p->active) {
        ld_status st = cut_for_good(c, p, out, in->lineno, r->lost, err);
        *out_has = 1;
        p->dropping = marks ? !r->last : 1;
        return st;
    }
    if (p) p->dropping = marks ? !r->last : 1;
    ld_status st = LD_FAIL(err, LD_ERR_TRUNCATED, in->offset, "record %llu lost its text: %s",
                           (unsigned long long)in->lineno, r->lost);
    if (err) err->line = in->lineno;
    return st;
}

