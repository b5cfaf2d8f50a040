/* capture_export.c - journald's export format (`journalctl -o export`, what
 * systemd-journal-remote reads): an entry is its fields, one `NAME=value`
 * line each, and a blank line after the last.  A field whose value is not
 * printable text (a newline in it, or not valid UTF-8: a 48 KiB cut inside a
 * character) is written as `NAME`, a newline, its length as 64-bit little
 * endian, the bytes and a newline; the line reader splits such a value at
 * every newline byte in it (its length's bytes too), so the pieces are put
 * together again here until the length is met.
 *
 * The entry's record: MESSAGE, `_LINE_BREAK=line-max` for a piece with more
 * to come, the source from _STREAM_ID or host, unit, identifier and pid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"

static int valid_name(const char *s, size_t n)
{
    if (!n || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return 0;
    return 1;
}

static void put_small(char *dst, size_t cap, const char *s, size_t n)
{
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

/* a field's value into the entry: MESSAGE's bytes, the source's parts */
static ld_status take_field(ld_export_entry *e, const char *name, size_t nl, const char *v, size_t n, ld_error *err)
{
#define IS(lit) (nl == sizeof(lit) - 1 && !memcmp(name, lit, nl))
#define IS2(s) (nl == strlen(s) && !memcmp(name, s, nl))
    if (IS("MESSAGE")) {
        LD_TRY(ld_capture_reserve(n + 1, &e->msg, &e->msg_cap, err));
        memcpy(e->msg, v, n);
        e->msg[n] = 0;
        e->msg_len = n;
        e->has_msg = 1;
    } else if (IS("_LINE_BREAK")) {
        e->line_max = n == 8 && !memcmp(v, "line-max", 8);
    } else {
        for (int p = 0; p < 5; p++) /* the writer's fields */
            if (IS2(ld_journal_field_names[LD_JF_STREAM_ID + p])) put_small(e->who[p], sizeof e->who[p], v, n);
    }
    return LD_OK;
#undef IS
#undef IS2
}

static void begin_entry(ld_export_entry *e, const ld_line *in)
{
    e->started = 1;
    e->lineno = in->lineno;
    e->offset = in->offset;
    e->has_msg = e->line_max = 0;
    e->msg_len = 0;
    for (int p = 0; p < 5; p++) e->who[p][0] = 0;
}

/* the entry as a record (its text borrowed from the entry) */
static void entry_record(ld_export_entry *e, ld_capture_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->text = e->msg ? e->msg : "";
    rec->len = e->msg_len;
    rec->last = !e->line_max;
    rec->skip = !e->has_msg; /* an entry without a line (journald's own, a field list) */
    ld_journal_span who[5];
    for (int p = 0; p < 5; p++) who[p] = (ld_journal_span){e->who[p], strlen(e->who[p]), e->who[p][0] ? 's' : 0};
    rec->source_len = ld_capture_journal_source(e->source, sizeof e->source, who);
    rec->source = e->source;
    e->started = 0;
}

/* a line of a binary value: its bytes (and the newline that split it) added
 * until the value's length is met */
static ld_status binary_piece(ld_export_entry *e, const ld_line *in, ld_error *err)
{
    LD_TRY(ld_capture_reserve(e->bin_len + in->len + 3, &e->bin, &e->bin_cap, err));
    memcpy(e->bin + e->bin_len, in->data, in->len);
    e->bin_len += in->len;
    if (in->crlf) e->bin[e->bin_len++] = '\r';
    uint64_t want = 0;
    if (e->bin_len >= 8) {
        for (int i = 7; i >= 0; i--) want = want << 8 | (unsigned char)e->bin[i];
        if (e->bin_len - 8 == want) {
            e->in_bin = 0;
            return take_field(e, e->bin_name, strlen(e->bin_name), e->bin + 8, (size_t)want, err);
        }
        if (e->bin_len - 8 > want) {
            e->in_bin = 0;
            e->broken = 1;
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "field %s is longer than the %llu bytes its length says",
                           e->bin_name, (unsigned long long)want);
        }
    }
    if (in->unterminated) {
        e->in_bin = 0;
        e->broken = 1;
        return LD_FAIL(err, LD_ERR_TRUNCATED, 0, "field %s ends before its %llu bytes", e->bin_name,
                       (unsigned long long)want);
    }
    e->bin[e->bin_len++] = '\n'; /* the newline the line reader took was the value's */
    return LD_OK;
}

ld_status ld_export_push(ld_export_entry *e, const ld_line *in, ld_capture_record *rec, int *done, ld_error *err)
{
    *done = 0;
    if (e->in_bin) return binary_piece(e, in, err);
    if (!in->len) { /* the blank line after an entry */
        int had = e->started && !e->broken;
        e->broken = 0;
        if (had) {
            *done = 1;
            entry_record(e, rec);
        }
        e->started = 0;
        return LD_OK;
    }
    if (!e->started) begin_entry(e, in);
    if (e->broken) return LD_OK; /* the rest of an entry already reported */
    const char *eq = memchr(in->data, '=', in->len);
    size_t nl = eq ? (size_t)(eq - in->data) : in->len;
    if (!valid_name(in->data, nl)) {
        e->broken = 1;
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "not a journal export field (`NAME=value`, or `NAME` and a binary "
                                              "value): the entry is skipped");
    }
    if (eq) return take_field(e, in->data, nl, eq + 1, in->len - nl - 1, err);
    put_small(e->bin_name, sizeof e->bin_name, in->data, nl);
    e->in_bin = 1;
    e->bin_len = 0;
    return LD_OK;
}

int ld_export_finish(ld_export_entry *e, ld_capture_record *rec, uint64_t *lineno, uint64_t *offset)
{
    int had = e->started && !e->broken && !e->in_bin;
    *lineno = e->lineno;
    *offset = e->offset;
    if (had) entry_record(e, rec);
    e->started = e->broken = e->in_bin = 0;
    return had;
}

void ld_export_free(ld_export_entry *e)
{
    free(e->msg);
    free(e->bin);
    memset(e, 0, sizeof *e);
}
