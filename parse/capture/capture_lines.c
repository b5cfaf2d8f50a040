/* capture_lines.c - the lines waiting for their last piece: a slot per
 * source, grown as pieces come, handed out whole (the buffer swapped, not
 * copied), and a line whole in one record handed out where it lies.  The
 * leaf the rejoiners (capture_rejoin.c, capture_unmarked.c) share. */
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"

/* the pending line of source `name` (made when new); NULL when every slot
 * holds another source's unfinished line */
ld_capture_pending *ld_capture_source(ld_capture *c, const char *name, size_t n)
{
    if (n >= LD_CAPTURE_SOURCE_NAME) n = LD_CAPTURE_SOURCE_NAME - 1;
    ld_capture_pending *free_slot = NULL;
    for (int i = 0; i < LD_CAPTURE_MAX_SOURCES; i++) {
        ld_capture_pending *p = &c->src[i];
        if ((p->active || p->dropping) && p->name_len == n && !memcmp(p->name, name, n)) return p;
        if (!p->active && !p->dropping && !free_slot) free_slot = p;
    }
    if (free_slot) {
        memcpy(free_slot->name, name, n);
        free_slot->name_len = n;
    }
    return free_slot;
}

/* p's line has room for n more bytes and a NUL */
ld_status ld_capture_room(ld_capture_pending *p, size_t n, ld_error *err)
{
    if (p->len + n + 1 <= p->cap) return LD_OK;
    size_t cap = p->cap ? p->cap : 65536;
    while (cap < p->len + n + 1) cap *= 2;
    char *b = realloc(p->buf, cap);
    if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory rejoining a line of %zu bytes", p->len + n);
    p->buf = b;
    p->cap = cap;
    return LD_OK;
}

/* s appended to p's line */
ld_status ld_capture_append(ld_capture *c, ld_capture_pending *p, const char *s, size_t n, ld_error *err)
{
    (void)c;
    LD_TRY(ld_capture_room(p, n, err));
    memcpy(p->buf + p->len, s, n);
    p->len += n;
    p->buf[p->len] = 0;
    return LD_OK;
}

/* p's line handed out in *out (its buffer swapped with the capture's) */
void ld_capture_hand_out(ld_capture *c, ld_capture_pending *p, ld_line *out)
{
    char *b = c->out;
    size_t cap = c->out_cap;
    c->out = p->buf;
    c->out_cap = p->cap;
    memset(out, 0, sizeof *out);
    out->data = c->out ? c->out : "";
    out->len = p->len;
    out->lineno = p->lineno;
    out->offset = p->offset;
    out->lost_bytes = p->replaced;
    out->source = p->name;
    out->source_len = p->name_len;
    if (p->pieces > 1) {
        c->stats.rejoined_lines++;
        c->stats.joined_records += p->pieces;
        if (p->open) c->stats.open_joins += p->pieces - 1;
        else c->stats.marked_joins += p->pieces - 1;
    }
    p->buf = b;
    p->cap = cap;
    p->len = 0;
    p->pieces = 0;
    p->replaced = 0;
    p->active = 0;
    p->open = 0;
}

/* a record that holds a whole line, handed out where it lies */
ld_status ld_capture_whole_record(const ld_capture *c, const ld_line *in, const ld_capture_record *r, ld_line *out,
                              int *out_has, ld_error *err)
{
    if (r->len > c->max_line)
        return LD_FAIL(err, LD_ERR_LIMIT, in->offset, "a line longer than %zu bytes: dropped", c->max_line);
    memset(out, 0, sizeof *out);
    out->data = r->text;
    out->len = r->len;
    out->lineno = in->lineno;
    out->offset = in->offset;
    out->source = r->source;
    out->source_len = r->source ? r->source_len : 0;
    *out_has = 1;
    return LD_OK;
}

void ld_capture_each_pending(const ld_capture *c, void (*fn)(void *ctx, uint64_t lineno, uint64_t offset),
                             void *ctx)
{
    for (int i = 0; i < LD_CAPTURE_MAX_SOURCES; i++)
        if (c->src[i].active) fn(ctx, c->src[i].lineno, c->src[i].offset);
}
