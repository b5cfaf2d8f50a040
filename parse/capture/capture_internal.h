/* capture_internal.h - what the capture's files share and nothing outside
 * parse/capture/ uses. */
#ifndef LD_CAPTURE_INTERNAL_H
#define LD_CAPTURE_INTERNAL_H

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "capture.h"
#include "parse/line/logline_scan.h"

#define LD_CAPTURE_SOURCE_NAME 128 /* a source's name is cut to this */

/* *buf grown (realloc) to hold n bytes; LD_ERR_NOMEM. */
ld_status ld_capture_reserve(size_t n, char **buf, size_t *cap, ld_error *err);

/* A Docker record in moby's own layout, its line decoded into out (room
 * for len bytes) (capture_docker.c): 0, or -1 when the record is anything
 * else (cJSON then reads it). */
int ld_capture_docker_fast(const char *line, size_t len, char *out, ld_capture_record *rec);

/* A JSON wrapper's record read with cJSON (any layout): its line decoded
 * into *buf, its source ("stream") after it.  LD_ERR_SYNTAX, LD_ERR_NOMEM.
 * The fuzz target checks the fast path above against it. */
ld_status ld_capture_parse_json(ld_capture_kind kind, const char *line, size_t len, char **buf, size_t *cap,
                                ld_capture_record *rec, ld_error *err);

/* ---- JSON strings (capture_jstring.c) */

/* The end of the run of bytes at s[i..n) that a JSON string holds as they
 * are: up to a quote, a backslash or a control byte.  Inline, since the
 * fast paths spend their time here: sixteen bytes a step with SSE2 (every
 * x86-64 has it), the first stop found by its mask; eight a step elsewhere
 * (a word with any stop ends the step; the bytewise loop decides). */
static inline size_t ld_capture_json_run(const char *s, size_t i, size_t n)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), high3 = _mm_set1_epi8((char)0xE0);
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                    _mm_cmpeq_epi8(_mm_and_si128(v, high3), _mm_setzero_si128()));
        unsigned m = (unsigned)_mm_movemask_epi8(stop);
        if (m) return i + (size_t)__builtin_ctz(m);
    }
#else
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (; i + 8 <= n; i += 8) {
        uint64_t v, q, b;
        memcpy(&v, s + i, 8);
        q = v ^ (ones * '"');
        b = v ^ (ones * '\\');
        if ((((q - ones) & ~q) | ((b - ones) & ~b) | ((v - ones * 0x20) & ~v)) & highs) break;
    }
#endif
    while (i < n && s[i] != '"' && s[i] != '\\' && (unsigned char)s[i] >= 0x20) i++;
    return i;
}

/* A JSON string's body at s[0..n) (after its opening quote) decoded into o
 * (room for n bytes); its length in *o_len, the bytes read with the closing
 * quote in *used.  -1: not one the fast paths take (cJSON decides). */
int ld_capture_json_unescape(const char *s, size_t n, char *o, size_t *o_len, size_t *used);

/* ---- journald (capture_journal.c, capture_export.c) */

/* A journal-json record (json-seq's RS first or not) the fast way, in two
 * steps so that its text can be decoded where it will stay: where its
 * wanted fields lie and its source (composed, cut to fit), then MESSAGE
 * decoded into dst (room for the record's length + 16 bytes).  -1 from
 * either: cJSON must read it (ld_capture_parse_journal_json). */
typedef struct ld_journal_span {
    const char *at; /* a string's body (escapes undecoded), an array's body */
    size_t len;
    char type;      /* 's', 'a', 'n' (null); 0 absent */
} ld_journal_span;
/* the journald fields every journald reader takes, in this order (the
 * writer's five last: ld_capture_journal_source) */
enum { LD_JF_MESSAGE, LD_JF_LINE_BREAK, LD_JF_STREAM_ID, LD_JF_HOSTNAME, LD_JF_UNIT, LD_JF_IDENT, LD_JF_PID,
       LD_JF_COUNT };
extern const char *const ld_journal_field_names[LD_JF_COUNT];

/* The writer of a journald entry as every journald reader names it: its
 * _STREAM_ID (one process's stdout), else "host unit identifier pid" of
 * those it has; who[0..5) are the fields from LD_JF_STREAM_ID on (type 's'
 * when present).  Into o (cap bytes, its NUL included, cut to fit): the
 * length. */
size_t ld_capture_journal_source(char *o, size_t cap, const ld_journal_span *who);

typedef struct ld_journal_spans {
    ld_journal_span f[LD_JF_COUNT];
    char src[LD_CAPTURE_SOURCE_NAME];
    size_t src_len;
    int last; /* no _LINE_BREAK=line-max */
} ld_journal_spans;
int ld_capture_journal_spans(const char *line, size_t len, ld_journal_spans *js);
int ld_capture_journal_decode(const ld_journal_spans *js, char *dst, ld_capture_record *rec);
ld_status ld_capture_parse_journal_json(const char *line, size_t len, char **buf, size_t *cap,
                                        ld_capture_record *rec, ld_error *err);

/* one entry of the export format being read */
typedef struct ld_export_entry {
    int started, broken, in_bin, has_msg, line_max;
    uint64_t lineno, offset; /* of the entry's first line */
    char *msg;
    size_t msg_len, msg_cap;
    char *bin; /* a binary value: its length's 8 bytes, then its bytes */
    size_t bin_len, bin_cap;
    char bin_name[65];
    char who[5][LD_CAPTURE_SOURCE_NAME]; /* the writer's fields (LD_JF_STREAM_ID on) */
    char source[LD_CAPTURE_SOURCE_NAME];
} ld_export_entry;

/* One physical line of an export stream; *done = 1 when it ended an entry,
 * whose record is then in *rec (borrowing the entry).  LD_ERR_SYNTAX /
 * LD_ERR_TRUNCATED for a broken entry (skipped to its blank line). */
ld_status ld_export_push(ld_export_entry *e, const ld_line *in, ld_capture_record *rec, int *done, ld_error *err);
/* At a member's end: 1 with the last entry when it had no blank line after
 * it; where it began in *lineno, *offset. */
int ld_export_finish(ld_export_entry *e, ld_capture_record *rec, uint64_t *lineno, uint64_t *offset);
void ld_export_free(ld_export_entry *e);

/* ---- the text captures (capture_text.c) */

ld_capture_kind ld_capture_text_kind(const char *s, size_t n);
ld_status ld_capture_parse_text(const char *s, size_t n, ld_capture_record *r, ld_error *err);

/* ---- where a new line begins, for the captures that mark no cuts
 * (capture_open.c): a record that begins as a server's line does (and so
 * ends any line of its source whose literal is still open) */
int ld_open_starts_line(const char *s, size_t n);
/* 1 when a line whose first n bytes are s (its newline, if any, among them)
 * surely begins as ld_open_starts_line says, by its prefix alone */
int ld_open_starts_by_prefix(const char *s, size_t n);

/* ---- the rejoiner's state (capture.c, capture_lines.c, capture_rejoin.c,
 * capture_unmarked.c) */

#define LD_CAPTURE_MAX_SOURCES 16      /* streams and containers interleaving in one member */

/* a line waiting for its last piece */
typedef struct ld_capture_pending {
    char name[LD_CAPTURE_SOURCE_NAME];
    size_t name_len;
    char *buf;
    size_t len, cap;
    uint64_t lineno, offset; /* of its first piece */
    uint64_t pieces;
    uint64_t replaced;       /* Docker: U+FFFD at its seams */
    int active;
    int dropping; /* past max_line, or a piece lost: its pieces are dropped up to its last
                     (captures without marks: up to a record that begins a new line) */
    int open;     /* joined because its literal was open (no marks) */
    ld_literal_scan scan; /* its literal, followed piece by piece (no marks) */
} ld_capture_pending;

struct ld_capture {
    ld_capture_kind forced, kind;
    int recognised;
    size_t max_line;
    ld_capture_pending src[LD_CAPTURE_MAX_SOURCES];
    char *rec;          /* a JSON record's decoded text */
    size_t rec_cap;
    char *out;          /* the line handed out last (a pending buffer, swapped) */
    size_t out_cap;
    int drained;        /* ld_capture_drain's next source */
    ld_export_entry export; /* journal-export: the entry being read */
    ld_line ready;      /* a second line made whole by one push (ld_capture_pop) */
    int has_ready;
    ld_capture_pending *last_piece; /* the line the last piece went to (the fast paths' guess) */
    ld_journal_spans spans;         /* the last journal-json record's (its source is a line's) */
    ld_capture_stats stats;
};


/* capture_lines.c: the pending line of source `name` (a free slot named
 * so when it has none); NULL when every slot holds another source's unfinished line */
ld_capture_pending *ld_capture_source(ld_capture *c, const char *name, size_t n);
/* s appended to p's line */
ld_status ld_capture_append(ld_capture *c, ld_capture_pending *p, const char *s, size_t n, ld_error *err);
/* p's line handed out in *out (its buffer swapped with the capture's) */
void ld_capture_hand_out(ld_capture *c, ld_capture_pending *p, ld_line *out);
/* a record that holds a whole line, handed out where it lies */
ld_status ld_capture_whole_record(const ld_capture *c, const ld_line *in, const ld_capture_record *r, ld_line *out,
                                  int *out_has, ld_error *err);
/* one record of the current capture to its line (capture.c) */
ld_status ld_capture_dispatch(ld_capture *c, const ld_line *in, const ld_capture_record *r, ld_line *out,
                              int *out_has, ld_error *err);
/* by marks (capture_rejoin.c) */
ld_status ld_capture_rejoin(ld_capture *c, const ld_line *in, const ld_capture_record *r, ld_line *out, int *out_has,
                            ld_error *err);
/* a piece of p's line arrived (its bytes at r->text, or in_place: already
 * decoded at the end of p's line); the line out with its last piece */
ld_status ld_capture_add_piece(ld_capture *c, ld_capture_pending *p, const ld_line *in, const ld_capture_record *r,
                               int in_place, ld_line *out, int *out_has, ld_error *err);
/* p's line has room for n more bytes and a NUL */
ld_status ld_capture_room(ld_capture_pending *p, size_t n, ld_error *err);
/* without marks, and lost text (capture_unmarked.c); `scanned`: the
 * record's literal already followed by the caller (NULL: not yet) */
ld_status ld_capture_unmarked(ld_capture *c, const ld_line *in, const ld_capture_record *r,
                              const ld_literal_scan *scanned, ld_line *out, int *out_has, ld_error *err);
ld_status ld_capture_lost_piece(ld_capture *c, const ld_line *in, const ld_capture_record *r, int marks,
                                ld_line *out, int *out_has, ld_error *err);
/* a plain member's own unclosed line, passed on quietly */
int ld_capture_quiet_open(const ld_capture *c, const ld_capture_pending *p);

#endif
