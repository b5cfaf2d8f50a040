/* capture.c - the rejoiner (capture.h): each member's capture recognised
 * from its first record, each record's piece appended to the line waiting
 * in its source (stream, container), the line handed out with its last
 * piece.  Plain members pass through untouched (no copy). */
#include <stdlib.h>
#include <string.h>

#include "capture.h"

#define MAX_SOURCES 16      /* streams and containers interleaving in one member */
#define SOURCE_NAME 128
#define DEFAULT_MAX_LINE ((size_t)1 << 30)

/* a line waiting for its last piece */
typedef struct pending {
    char name[SOURCE_NAME];
    size_t name_len;
    char *buf;
    size_t len, cap;
    uint64_t lineno, offset; /* of its first piece */
    uint64_t pieces;
    uint64_t replaced;       /* Docker: U+FFFD at its seams */
    int active;
    int dropping; /* past max_line: its pieces are dropped up to its last */
} pending;

struct ld_capture {
    ld_capture_kind forced, kind;
    int recognised;
    size_t max_line;
    pending src[MAX_SOURCES];
    char *rec;          /* a JSON record's decoded text */
    size_t rec_cap;
    char *out;          /* the line handed out last (a pending buffer, swapped) */
    size_t out_cap;
    int drained;        /* ld_capture_drain's next source */
    ld_capture_stats stats;
};

ld_status ld_capture_new(ld_capture_kind kind, size_t max_line, ld_capture **out, ld_error *err)
{
    *out = NULL;
    ld_capture *c = calloc(1, sizeof *c);
    if (!c) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a capture");
    c->forced = kind;
    c->max_line = max_line ? max_line : DEFAULT_MAX_LINE;
    ld_capture_reset(c);
    *out = c;
    return LD_OK;
}

void ld_capture_free(ld_capture *c)
{
    if (!c) return;
    for (int i = 0; i < MAX_SOURCES; i++) free(c->src[i].buf);
    free(c->rec);
    free(c->out);
    free(c);
}

void ld_capture_reset(ld_capture *c)
{
    c->kind = c->forced == LD_CAPTURE_AUTO ? LD_CAPTURE_PLAIN : c->forced;
    c->recognised = c->forced != LD_CAPTURE_AUTO;
    for (int i = 0; i < MAX_SOURCES; i++) c->src[i].active = c->src[i].dropping = 0;
    c->drained = 0;
}

ld_capture_kind ld_capture_current(const ld_capture *c)
{
    return c->kind;
}

const ld_capture_stats *ld_capture_stats_of(const ld_capture *c)
{
    return &c->stats;
}

/* the pending line of source `name` (made when new); NULL when every slot
 * holds another source's unfinished line */
static pending *source(ld_capture *c, const char *name, size_t n)
{
    if (n >= SOURCE_NAME) n = SOURCE_NAME - 1;
    pending *free_slot = NULL;
    for (int i = 0; i < MAX_SOURCES; i++) {
        pending *p = &c->src[i];
        if ((p->active || p->dropping) && p->name_len == n && !memcmp(p->name, name, n)) return p;
        if (!p->active && !p->dropping && !free_slot) free_slot = p;
    }
    if (free_slot) {
        memcpy(free_slot->name, name, n);
        free_slot->name_len = n;
    }
    return free_slot;
}

/* s appended to p's line */
static ld_status append(ld_capture *c, pending *p, const char *s, size_t n, ld_error *err)
{
    if (p->len + n + 1 > p->cap) {
        size_t cap = p->cap ? p->cap : 65536;
        while (cap < p->len + n + 1) cap *= 2;
        char *b = realloc(p->buf, cap);
        if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory rejoining a line of %zu bytes", p->len + n);
        p->buf = b;
        p->cap = cap;
    }
    (void)c;
    memcpy(p->buf + p->len, s, n);
    p->len += n;
    p->buf[p->len] = 0;
    return LD_OK;
}

/* Docker writes each byte cut off a character as U+FFFD (EF BF BD): the
 * ones at the seam of two pieces are bytes lost to its 16 KiB cut */
static uint64_t seam_replacements(const pending *p, const char *s, size_t n)
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

/* p's line handed out in *out (its buffer swapped with the capture's) */
static void hand_out(ld_capture *c, pending *p, ld_line *out)
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
    if (p->pieces > 1) {
        c->stats.rejoined_lines++;
        c->stats.joined_records += p->pieces;
    }
    p->buf = b;
    p->cap = cap;
    p->len = 0;
    p->pieces = 0;
    p->replaced = 0;
    p->active = 0;
}

/* a record that holds a whole line, handed out where it lies */
static ld_status whole_record(const ld_capture *c, const ld_line *in, const ld_capture_record *r, ld_line *out,
                              int *out_has, ld_error *err)
{
    if (r->len > c->max_line)
        return LD_FAIL(err, LD_ERR_LIMIT, in->offset, "a line longer than %zu bytes: dropped", c->max_line);
    memset(out, 0, sizeof *out);
    out->data = r->text;
    out->len = r->len;
    out->lineno = in->lineno;
    out->offset = in->offset;
    *out_has = 1;
    return LD_OK;
}

/* a record's piece into its source's line; the line out with its last piece */
static ld_status rejoin(ld_capture *c, const ld_line *in, const ld_capture_record *r, ld_line *out, int *out_has,
                        ld_error *err)
{
    pending *p = source(c, r->source ? r->source : "", r->source_len);
    if (!p) return LD_FAIL(err, LD_ERR_LIMIT, in->offset, "more than %d sources interleave their split lines",
                           MAX_SOURCES);
    if (p->dropping) {
        if (r->last) p->dropping = 0;
        return LD_OK;
    }
    if (!p->active && r->last) /* a whole line in one record: no copy */
        return whole_record(c, in, r, out, out_has, err);
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
    LD_TRY(append(c, p, r->text, r->len, err));
    if (!r->last) return LD_OK;
    uint64_t pieces = p->pieces;
    hand_out(c, p, out);
    *out_has = 1;
    return out->lost_bytes ? lost_at_seams(c, out, pieces, err) : LD_OK;
}

ld_status ld_capture_push(ld_capture *c, const ld_line *in, ld_line *out, int *out_has, ld_error *err)
{
    *out_has = 0;
    if (!c->recognised && in->len) {
        c->kind = ld_capture_recognise(in->data, in->len);
        c->recognised = 1;
        c->stats.members[c->kind]++;
    }
    if (c->kind == LD_CAPTURE_PLAIN) {
        *out = *in;
        *out_has = 1;
        return LD_OK;
    }
    c->stats.records++;
    ld_capture_record r;
    ld_status st = ld_capture_parse(c->kind, in->data, in->len, &c->rec, &c->rec_cap, &r, err);
    if (st != LD_OK) {
        if (err) {
            err->line = in->lineno;
            err->offset += in->offset;
        }
        if (st == LD_ERR_SYNTAX) c->stats.bad_records++;
        return st;
    }
    st = rejoin(c, in, &r, out, out_has, err);
    if (st != LD_OK && err && !err->line) err->line = in->lineno;
    return st;
}

ld_status ld_capture_drain(ld_capture *c, ld_line *out, int *out_has, ld_error *err)
{
    *out_has = 0;
    for (; c->drained < MAX_SOURCES; c->drained++) {
        pending *p = &c->src[c->drained];
        p->dropping = 0;
        if (!p->active) continue;
        uint64_t pieces = p->pieces;
        c->stats.unfinished_lines++;
        hand_out(c, p, out);
        *out_has = 1;
        c->drained++;
        ld_status st = LD_FAIL(err, LD_ERR_TRUNCATED, out->offset,
                               "the %s line starting at record %llu never got its last piece (%llu pieces, %zu "
                               "bytes: the writer stopped, or the capture was cut); read as it is",
                               ld_capture_name(c->kind), (unsigned long long)out->lineno,
                               (unsigned long long)pieces, out->len);
        if (err) err->line = out->lineno;
        return st;
    }
    return LD_OK;
}
