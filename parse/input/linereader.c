/* linereader.c - cuts the current member of an ld_input into lines.
 *
 * One buffer, refilled with large reads.  Lines are found with memchr and
 * returned as pointers into the buffer; only the partial line at the end of
 * the buffer is moved to the front on a refill.  The buffer grows to hold the
 * longest line (by half again, so the peak stays under ~1.5x that line plus
 * one read) and shrinks back once the long line is gone.
 *
 * A plain regular file is read through ld_input_map() instead: lines point
 * into the mapping (no copy at all), and every LR_RELEASE bytes the part
 * already handed out is given back so the mapped pages do not accumulate.
 *
 * Ownership: the reader owns its buffer; the ld_input is borrowed.
 */
#include "input.h"

#include <stdlib.h>
#include <string.h>

enum {
    LR_CHUNK = 1024 * 1024,             /* smallest read handed to the input */
    LR_DEFAULT_CAP = 2 * LR_CHUNK,      /* normal buffer size */
    LR_SHRINK_AT = 4 * LR_DEFAULT_CAP,  /* shrink back when above this */
    LR_RELEASE = 4 * 1024 * 1024        /* mapped bytes given back at a time */
};

#define LR_DEFAULT_MAX_LINE ((size_t)1 << 30)

struct ld_linereader {
    ld_input *in;     /* borrowed */
    char *buf;        /* owned */
    const char *data; /* what lines are cut from: buf, or the input's mapping */
    int mapped;       /* data is the mapping (the whole member, eof set) */
    int map_tried;    /* ld_input_map was asked for this member */
    size_t released;  /* mapping offset given back so far */
    size_t cap;
    size_t start;     /* first byte of the next line */
    size_t end;       /* end of valid data */
    size_t scan;      /* no '\n' in [start, scan) */
    uint64_t base;    /* member offset of buf[0] */
    uint64_t lineno;  /* lines handed out (or skipped) so far */
    size_t max_line;
    size_t peak;
    int eof;          /* the member ended */
    int failed;       /* the input reported an error; the member is over */
    int skipping;     /* discarding the rest of an over-long line */
};

ld_status ld_linereader_new(ld_input *in, size_t max_line_bytes,
                            ld_linereader **out, ld_error *err)
{
    *out = NULL;
    ld_linereader *r = calloc(1, sizeof *r);
    if (!r) return LD_FAIL(err, LD_ERR_NOMEM, 0, "line reader");
    r->buf = malloc(LR_DEFAULT_CAP);
    if (!r->buf) {
        free(r);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "line reader buffer");
    }
    r->in = in;
    r->data = r->buf;
    r->cap = LR_DEFAULT_CAP;
    r->peak = r->cap;
    r->max_line = max_line_bytes ? max_line_bytes : LR_DEFAULT_MAX_LINE;
    *out = r;
    return LD_OK;
}

static ld_status resize(ld_linereader *r, size_t cap, ld_error *err)
{
    char *nb = realloc(r->buf, cap);
    if (!nb)
        return LD_FAIL(err, LD_ERR_NOMEM, r->base + r->start,
                       "line buffer of %zu bytes", cap);
    r->buf = nb;
    r->data = nb;
    r->cap = cap;
    if (cap > r->peak) r->peak = cap;
    return LD_OK;
}

/* Moves the partial line to the front, sizes the buffer so that at least
 * LR_CHUNK bytes are free, and reads once.  Sets eof on end of member. */
static ld_status refill(ld_linereader *r, ld_error *err)
{
    if (r->start > 0) {
        size_t keep = r->end - r->start;
        memmove(r->buf, r->buf + r->start, keep);
        r->base += r->start;
        r->scan -= r->start;
        r->end = keep;
        r->start = 0;
    }
    if (r->cap > LR_SHRINK_AT && r->end + LR_CHUNK <= LR_DEFAULT_CAP)
        LD_TRY(resize(r, LR_DEFAULT_CAP, err));
    if (r->cap - r->end < LR_CHUNK) {
        size_t grown = r->cap + r->cap / 2;
        if (grown < r->end + LR_CHUNK) grown = r->end + LR_CHUNK;
        LD_TRY(resize(r, grown, err));
    }
    size_t n = 0;
    ld_status st = ld_input_read(r->in, r->buf + r->end, r->cap - r->end, &n,
                                 err);
    if (st != LD_OK) {
        r->failed = 1;
        if (err) err->line = r->lineno + 1;
        return st;
    }
    if (n == 0) r->eof = 1;
    r->end += n;
    return LD_OK;
}

/* Discards up to and including the next '\n'.  Returns with skipping == 0
 * when done, or with eof/failed set when the member ended first. */
static ld_status skip_line(ld_linereader *r, ld_error *err)
{
    while (r->skipping) {
        const char *nl = memchr(r->data + r->start, '\n', r->end - r->start);
        if (nl) {
            r->start = (size_t)(nl - r->data) + 1;
            r->scan = r->start;
            r->skipping = 0;
            break;
        }
        r->base += r->end;
        r->start = r->end = r->scan = 0;
        if (r->eof || r->failed) {
            r->skipping = 0;
            break;
        }
        LD_TRY(refill(r, err));
    }
    return LD_OK;
}

/* Switches to the input's mapping when it has one (plain regular file). */
static void try_map(ld_linereader *r)
{
    const char *m;
    size_t n;
    r->map_tried = 1;
    if (r->end != 0 || !ld_input_map(r->in, &m, &n)) return;
    r->data = m;
    r->mapped = 1;
    r->start = r->scan = 0;
    r->end = n;
    r->eof = 1;
    r->released = 0;
}

static void emit(ld_linereader *r, ld_line *out, size_t stop, int terminated)
{
    /* the previous line (before start) is no longer borrowed by the caller */
    if (r->mapped && r->start - r->released >= LR_RELEASE) {
        ld_input_map_release(r->in, r->start);
        r->released = r->start;
    }
    size_t len = stop - r->start;
    out->data = r->data + r->start;
    out->offset = r->base + r->start;
    out->lineno = ++r->lineno;
    out->crlf = terminated && len > 0 && out->data[len - 1] == '\r';
    out->len = len - (size_t)out->crlf;
    out->unterminated = !terminated;
    out->lost_bytes = 0;
    out->source = NULL;
    out->source_len = 0;
    r->start = terminated ? stop + 1 : stop;
    r->scan = r->start;
}

static ld_status too_long(ld_linereader *r, ld_error *err)
{
    uint64_t off = r->base + r->start;
    r->lineno++;
    r->skipping = 1;
    if (err) {
        err->path = ld_input_member_name(r->in);
        err->line = r->lineno;
    }
    return LD_FAIL(err, LD_ERR_LIMIT, off, "line longer than %zu bytes",
                   r->max_line);
}

ld_status ld_linereader_next(ld_linereader *r, ld_line *out, int *out_has,
                             ld_error *err)
{
    *out_has = 0;
    for (;;) {
        if (r->skipping) LD_TRY(skip_line(r, err));
        if (!r->map_tried) try_map(r);
        const char *nl = r->end > r->scan
                             ? memchr(r->data + r->scan, '\n', r->end - r->scan)
                             : NULL;
        if (nl && (size_t)(nl - r->data) - r->start > r->max_line) {
            ld_status st = too_long(r, err);
            r->skipping = 0;  /* its end is already here */
            r->start = r->scan = (size_t)(nl - r->data) + 1;
            return st;
        }
        if (nl) {
            emit(r, out, (size_t)(nl - r->data), 1);
            *out_has = 1;
            return LD_OK;
        }
        r->scan = r->end;
        if (r->failed) return LD_OK;  /* the partial line died with the error */
        if (r->end - r->start > r->max_line) return too_long(r, err);
        if (r->eof) {
            if (r->mapped) { /* all of it handed out (progress reaches 100%) */
                ld_input_map_release(r->in, r->start == r->end ? r->end : r->start);
                r->released = r->start;
            }
            if (r->start == r->end) return LD_OK;
            emit(r, out, r->end, 0);
            *out_has = 1;
            return LD_OK;
        }
        LD_TRY(refill(r, err));
    }
}

int ld_linereader_peek(const ld_linereader *r, size_t want, const char **s, size_t *n)
{
    if (!r->mapped || r->skipping || r->failed || r->start >= r->end) return 0;
    size_t rest = r->end - r->start;
    if (rest > r->max_line) return 0; /* a line there might be too long */
    *s = r->data + r->start;
    *n = rest < want ? rest : want;
    return 1;
}

void ld_linereader_reset(ld_linereader *r)
{
    r->data = r->buf;
    r->mapped = r->map_tried = 0;
    r->released = 0;
    r->start = r->end = r->scan = 0;
    r->base = 0;
    r->lineno = 0;
    r->eof = r->failed = r->skipping = 0;
}

size_t ld_linereader_peak_bytes(const ld_linereader *r) { return r->peak; }

void ld_linereader_free(ld_linereader *r)
{
    if (!r) return;
    free(r->buf);
    free(r);
}
