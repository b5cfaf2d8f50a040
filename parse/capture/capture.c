/* capture.c - the rejoiner (capture.h): each member's capture recognised
 * from its first record, each record's piece appended to the line waiting
 * in its source (stream, container, journald stream), the line handed out
 * with its last piece: the one its capture marks as last, or, in captures
 * that mark nothing, the one that closes the request line's literal.
 * Lines whole in one record are handed out where they lie (no copy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"

#define DEFAULT_MAX_LINE ((size_t)1 << 30)

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
    for (int i = 0; i < LD_CAPTURE_MAX_SOURCES; i++) free(c->src[i].buf);
    free(c->rec);
    free(c->out);
    ld_export_free(&c->export);
    free(c);
}

void ld_capture_reset(ld_capture *c)
{
    c->kind = c->forced == LD_CAPTURE_AUTO ? LD_CAPTURE_PLAIN : c->forced;
    c->recognised = c->forced != LD_CAPTURE_AUTO;
    for (int i = 0; i < LD_CAPTURE_MAX_SOURCES; i++) c->src[i].active = c->src[i].dropping = 0;
    c->drained = 0;
    c->has_ready = 0;
    c->export.started = c->export.broken = c->export.in_bin = 0;
}

ld_capture_kind ld_capture_current(const ld_capture *c)
{
    return c->kind;
}

const ld_capture_stats *ld_capture_stats_of(const ld_capture *c)
{
    return &c->stats;
}

static int has_marks(ld_capture_kind k)
{
    return k != LD_CAPTURE_PLAIN && k != LD_CAPTURE_JOURNAL_TEXT && k != LD_CAPTURE_SYSLOG;
}

/* one record of the current capture to its line */
ld_status ld_capture_dispatch(ld_capture *c, const ld_line *in, const ld_capture_record *r, ld_line *out, int *out_has,
                          ld_error *err)
{
    if (r->skip) return LD_OK;
    if (r->lost) return ld_capture_lost_piece(c, in, r, has_marks(c->kind), out, out_has, err);
    if (!has_marks(c->kind)) return ld_capture_unmarked(c, in, r, NULL, out, out_has, err);
    return ld_capture_rejoin(c, in, r, out, out_has, err);
}

/* a plain line: passed on as it is unless a literal runs past it (not
 * followed when the next line, which would end it, is known to begin a
 * line: ld_capture_push_ahead) */
static ld_status plain_line(ld_capture *c, const ld_line *in, int next_starts, ld_line *out, int *out_has,
                            ld_error *err)
{
    ld_capture_record r = {in->data, in->len, "", 0, 1, 0, 0, NULL};
    ld_capture_pending *p = &c->src[0];
    if (p->active || p->dropping) return ld_capture_unmarked(c, in, &r, NULL, out, out_has, err);
    if (next_starts) {
        *out = *in;
        *out_has = 1;
        return LD_OK;
    }
    ld_literal_scan scan;
    ld_literal_begin_line(&scan, in->data, in->len);
    if (ld_literal_open(&scan)) return ld_capture_unmarked(c, in, &r, &scan, out, out_has, err);
    *out = *in;
    *out_has = 1;
    return LD_OK;
}

/* The fast paths decode a piece where its bytes will stay: at the end of
 * its source's waiting line, else in the record buffer (handed out where it
 * lies, or made the line's own by a swap), so rejoining copies nothing.
 * Each returns -1 when the fast path does not take the record (it is then
 * read the general way), else 0 with the push's status in *st. */

/* the piece in place at the end of p's line, or the record dispatched */
static int fast_done(ld_capture *c, ld_capture_pending *p, const ld_line *in, ld_capture_record *r, ld_line *out,
                     int *out_has, ld_status *st, ld_error *err)
{
    c->stats.records++;
    if (p && !r->lost && !r->skip) *st = ld_capture_add_piece(c, p, in, r, 1, out, out_has, err);
    else *st = ld_capture_dispatch(c, in, r, out, out_has, err);
    return 0;
}

/* journald's JSON: its source and cut are known before its text is
 * decoded, so every piece of a split line is decoded at the end of it */
static int push_fast_journal(ld_capture *c, const ld_line *in, ld_line *out, int *out_has, ld_status *st,
                             ld_error *err)
{
    ld_journal_spans *js = &c->spans; /* lives on: a whole line handed out names its source */
    if (ld_capture_journal_spans(in->data, in->len, js)) return -1;
    ld_capture_pending *p = ld_capture_source(c, js->src, js->src_len);
    int piece = p && !p->dropping && (p->active || !js->last);
    if (p && !(piece && ld_capture_room(p, in->len + 16, NULL) == LD_OK)) p = NULL;
    if (!p && ld_capture_reserve(in->len + 16, &c->rec, &c->rec_cap, NULL) != LD_OK) return -1;
    ld_capture_record r;
    if (ld_capture_journal_decode(js, p ? p->buf + p->len : c->rec, &r)) return -1;
    return fast_done(c, p, in, &r, out, out_has, st, err);
}

/* Docker's: its stream comes after its text, so the text goes where the
 * last piece went (a line's pieces come one after another) and is moved
 * when it proves another stream's */
static int push_fast_docker(ld_capture *c, const ld_line *in, ld_line *out, int *out_has, ld_status *st,
                            ld_error *err)
{
    ld_capture_pending *g = c->last_piece;
    if (g && !(g->active && !g->dropping && ld_capture_room(g, in->len + 16, NULL) == LD_OK)) g = NULL;
    if (!g && ld_capture_reserve(in->len + 16, &c->rec, &c->rec_cap, NULL) != LD_OK) return -1;
    char *dst = g ? g->buf + g->len : c->rec;
    ld_capture_record r;
    memset(&r, 0, sizeof r);
    if (ld_capture_docker_fast(in->data, in->len, dst, &r)) return -1;
    if (g && g != ld_capture_source(c, r.source, r.source_len)) {
        if (ld_capture_reserve(r.len + 16, &c->rec, &c->rec_cap, NULL) != LD_OK) return -1;
        memcpy(c->rec, dst, r.len);
        r.text = c->rec;
        g = NULL;
    }
    return fast_done(c, g, in, &r, out, out_has, st, err);
}

/* one line of journald's export format: a record at each entry's end */
static ld_status export_line(ld_capture *c, const ld_line *in, ld_line *out, int *out_has, ld_error *err)
{
    ld_capture_record r;
    int done = 0;
    ld_status st = ld_export_push(&c->export, in, &r, &done, err);
    if (st != LD_OK) {
        if (err) {
            err->line = in->lineno;
            err->offset += in->offset;
        }
        if (st == LD_ERR_SYNTAX || st == LD_ERR_TRUNCATED) c->stats.bad_records++;
        return st;
    }
    if (!done) return LD_OK;
    c->stats.records++;
    ld_line at = {0};
    at.lineno = c->export.lineno;
    at.offset = c->export.offset;
    return ld_capture_dispatch(c, &at, &r, out, out_has, err);
}

/* journalctl's "-- Journal begins at ... --" before the first record */
static int journal_banner(const ld_line *in)
{
    return in->len >= 6 && !memcmp(in->data, "-- ", 3) && !memcmp(in->data + in->len - 3, " --", 3);
}

ld_status ld_capture_push(ld_capture *c, const ld_line *in, ld_line *out, int *out_has, ld_error *err)
{
    return ld_capture_push_ahead(c, in, NULL, 0, out, out_has, err);
}

ld_status ld_capture_push_ahead(ld_capture *c, const ld_line *in, const char *next, size_t next_len,
                                ld_line *out, int *out_has, ld_error *err)
{
    *out_has = 0;
    c->has_ready = 0;
    if (!c->recognised && journal_banner(in)) return LD_OK; /* journalctl's, before its first record */
    if (!c->recognised && in->len) {
        c->kind = ld_capture_recognise(in->data, in->len);
        c->recognised = 1;
        c->stats.members[c->kind]++;
    }
    if (c->kind == LD_CAPTURE_PLAIN)
        return plain_line(c, in, next && !in->unterminated && ld_open_starts_by_prefix(next, next_len), out,
                          out_has, err);
    if (c->kind == LD_CAPTURE_JOURNAL_EXPORT) return export_line(c, in, out, out_has, err);
    ld_status st;
    if ((c->kind == LD_CAPTURE_DOCKER && !push_fast_docker(c, in, out, out_has, &st, err)) ||
        (c->kind == LD_CAPTURE_JOURNAL_JSON && !push_fast_journal(c, in, out, out_has, &st, err))) {
        if (st != LD_OK && err && !err->line) err->line = in->lineno;
        return st;
    }
    c->stats.records++;
    ld_capture_record r;
    memset(&r, 0, sizeof r);
    /* a record the fast path did not take goes straight to cJSON (not through
     * ld_capture_parse, which would try the fast path again) */
    if (c->kind == LD_CAPTURE_DOCKER) st = ld_capture_parse_json(c->kind, in->data, in->len, &c->rec, &c->rec_cap, &r, err);
    else if (c->kind == LD_CAPTURE_JOURNAL_JSON)
        st = ld_capture_parse_journal_json(in->data, in->len, &c->rec, &c->rec_cap, &r, err);
    else st = ld_capture_parse(c->kind, in->data, in->len, &c->rec, &c->rec_cap, &r, err);
    if (st != LD_OK) {
        if (err) {
            err->line = in->lineno;
            err->offset += in->offset;
        }
        if (st == LD_ERR_SYNTAX) c->stats.bad_records++;
        return st;
    }
    st = ld_capture_dispatch(c, in, &r, out, out_has, err);
    if (st != LD_OK && err && !err->line) err->line = in->lineno;
    return st;
}

ld_status ld_capture_push_record(ld_capture *c, ld_capture_kind kind, const ld_line *at, const ld_capture_record *r,
                                 ld_line *out, int *out_has, ld_error *err)
{
    *out_has = 0;
    c->has_ready = 0;
    if (!c->recognised) {
        c->kind = kind;
        c->recognised = 1;
        c->stats.members[kind]++;
    }
    c->stats.records++;
    ld_status st = ld_capture_dispatch(c, at, r, out, out_has, err);
    if (st != LD_OK && err && !err->line) err->line = at->lineno;
    return st;
}

ld_status ld_capture_pop(ld_capture *c, ld_line *out, int *out_has, ld_error *err)
{
    (void)err;
    *out_has = c->has_ready;
    if (c->has_ready) *out = c->ready;
    c->has_ready = 0;
    return LD_OK;
}

/* the export entry the member ended in without its blank line */
static ld_status drain_export(ld_capture *c, ld_line *out, int *out_has, ld_error *err)
{
    ld_capture_record r;
    ld_line at = {0};
    if (c->kind != LD_CAPTURE_JOURNAL_EXPORT) return LD_OK;
    int bin = c->export.in_bin;
    if (!ld_export_finish(&c->export, &r, &at.lineno, &at.offset)) {
        if (!bin) return LD_OK;
        c->stats.bad_records++;
        ld_status st = LD_FAIL(err, LD_ERR_TRUNCATED, at.offset,
                               "the journal entry starting at line %llu ends inside a binary field",
                               (unsigned long long)at.lineno);
        if (err) err->line = at.lineno;
        return st;
    }
    c->stats.records++;
    return ld_capture_dispatch(c, &at, &r, out, out_has, err);
}

ld_status ld_capture_drain(ld_capture *c, ld_line *out, int *out_has, ld_error *err)
{
    *out_has = 0;
    if (c->drained == 0 && (c->export.started || c->export.in_bin)) {
        ld_status st = drain_export(c, out, out_has, err);
        if (*out_has || st != LD_OK) return st;
    }
    for (; c->drained < LD_CAPTURE_MAX_SOURCES; c->drained++) {
        ld_capture_pending *p = &c->src[c->drained];
        p->dropping = 0;
        if (!p->active) continue;
        uint64_t pieces = p->pieces;
        int open = p->open;
        if (open && ld_capture_quiet_open(c, p)) {
            ld_capture_hand_out(c, p, out);
            *out_has = 1;
            c->drained++;
            return LD_OK;
        }
        if (open) c->stats.cut_lines++;
        else c->stats.unfinished_lines++;
        ld_capture_hand_out(c, p, out);
        *out_has = 1;
        c->drained++;
        ld_status st = open ? LD_FAIL(err, LD_ERR_TRUNCATED, out->offset,
                                      "the line starting at record %llu ends with its literal open (%llu pieces, "
                                      "%zu bytes): the capture cut it for good; read as it is",
                                      (unsigned long long)out->lineno, (unsigned long long)pieces, out->len)
                            : LD_FAIL(err, LD_ERR_TRUNCATED, out->offset,
                                      "the %s line starting at record %llu never got its last piece (%llu pieces, "
                                      "%zu bytes: the writer stopped, or the capture was cut); read as it is",
                                      ld_capture_name(c->kind), (unsigned long long)out->lineno,
                                      (unsigned long long)pieces, out->len);
        if (err) err->line = out->lineno;
        return st;
    }
    return LD_OK;
}
