/* capture.h - the wrappers production captures put around a server's log
 * lines, recognised by content per member, and the long lines they split
 * rejoined.
 *
 * The captures: Docker's json-file driver (a JSON object a piece, a line cut
 * at 16 KiB into pieces of which only the last ends in "\n"), CRI's files
 * (containerd / CRI-O under Kubernetes: `<time> <stream> <P|F> <text>`, P a
 * piece with more to come, F the last), `kubectl logs --prefix`
 * (`[pod/<pod>/<container>] ` before each line, already joined) and the JSON
 * lines of log shippers (the line in `message`, `log`, `msg` or `line`).
 * journald, as journalctl prints it (JSON, json-seq, the export format,
 * the short text formats) and syslog lines with their prefixes: journald
 * cuts a line at LineMax (48 KiB) and marks the pieces `_LINE_BREAK=
 * line-max` where its output keeps fields; where it does not (the text
 * formats, -o cat, a plain file) a request line whose Python or JSON
 * literal is still open at the end of a record goes on with the next
 * record of the same source, byte for byte.
 * What each capture does to a line: docs/formats.md, "Captures".
 *
 * Lines go in one physical line at a time (ld_capture_push) and come out
 * one logical line at a time, with the line number and byte offset of its
 * first piece; pieces of different streams (stdout / stderr, containers)
 * may interleave.  A line still waiting for its last piece at the end of a
 * member comes out of ld_capture_drain with the problem named.
 *
 * Ownership: a returned ld_line borrows the capture's buffer or the input
 * line, valid until the next call.  Memory is bounded by max_line bytes a
 * stream.  Not thread-safe: one capture per reader.
 */
#ifndef LD_CAPTURE_H
#define LD_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"
#include "parse/input/input.h"

typedef enum ld_capture_kind {
    LD_CAPTURE_AUTO = -1, /* recognised from each member's first record */
    LD_CAPTURE_PLAIN = 0, /* the server's own lines (a file, a terminal, journalctl -o cat) */
    LD_CAPTURE_DOCKER,    /* Docker's json-file driver */
    LD_CAPTURE_CRI,       /* containerd / CRI-O (Kubernetes' /var/log/pods) */
    LD_CAPTURE_KUBECTL,   /* kubectl logs --prefix */
    LD_CAPTURE_SHIPPER,   /* JSON lines of Vector, Fluent Bit, Loki, Elastic... */
    LD_CAPTURE_JOURNAL_JSON,   /* journalctl -o json / json-seq */
    LD_CAPTURE_JOURNAL_EXPORT, /* journalctl -o export (journald's export format) */
    LD_CAPTURE_JOURNAL_TEXT,   /* journalctl -o short, short-iso, short-precise, short-unix (and
                                  rsyslog's files, which look the same) */
    LD_CAPTURE_SYSLOG,         /* syslog lines with their <PRI>: RFC 3164, RFC 5424 */
    LD_CAPTURE_JOURNAL_FILE,   /* a native *.journal file (journal_file.h), entry by entry */
    LD_CAPTURE_COUNT
} ld_capture_kind;

/* "plain", "docker-json", "cri", "kubectl-prefix", "shipper-json",
 * "journal-json", "journal-export", "journal-text", "syslog", "journal-file" */
const char *ld_capture_name(ld_capture_kind k);

/* The kind of a name above, "auto" for LD_CAPTURE_AUTO; -2 when unknown. */
int ld_capture_by_name(const char *name);

/* What a capture recognised and rejoined, summed over the members read. */
typedef struct ld_capture_stats {
    uint64_t members[LD_CAPTURE_COUNT]; /* members read, by their capture */
    uint64_t records;                   /* physical lines of wrapped members */
    uint64_t joined_records;            /* pieces that were rejoined into a longer line */
    uint64_t rejoined_lines;            /* lines made of more than one piece */
    uint64_t unfinished_lines;          /* lines whose last piece never came */
    uint64_t bad_records;               /* records that were not what their capture writes */
    uint64_t replaced_bytes;            /* Docker: bytes it wrote as U+FFFD (a cut inside a character) */
    uint64_t damaged_lines;             /* lines that lost those bytes */
    uint64_t marked_joins;              /* pieces joined by the capture's own mark (_LINE_BREAK=line-max,
                                           CRI's P, Docker's missing \n) */
    uint64_t open_joins;                /* pieces joined because the line's literal was still open
                                           (captures without marks: journalctl's text, -o cat, syslog) */
    uint64_t cut_lines;                 /* lines cut for good: a piece lost, or a new line before
                                           the literal closed */
    uint64_t lost_records;              /* records whose text the capture left out (journalctl's
                                           "[N blob data]", a MESSAGE printed as null) */
} ld_capture_stats;

typedef struct ld_capture ld_capture;
typedef struct ld_capture_record ld_capture_record; /* below */

/* A capture of `kind` (LD_CAPTURE_AUTO: recognised per member); a line
 * rejoined past max_line bytes (0: 1 GiB) is an LD_ERR_LIMIT problem and is
 * dropped to its last piece. */
ld_status ld_capture_new(ld_capture_kind kind, size_t max_line, ld_capture **out, ld_error *err);
void ld_capture_free(ld_capture *c);

/* A new member begins: nothing may be pending (drain first); its capture is
 * recognised again from its first record. */
void ld_capture_reset(ld_capture *c);

/* The current member's capture (LD_CAPTURE_PLAIN before its first record
 * when recognising). */
ld_capture_kind ld_capture_current(const ld_capture *c);

/* One physical line in; *out_has = 1 with a whole line in *out.  Errors:
 * LD_ERR_SYNTAX for a record that is not what its capture writes (err->line,
 * err->offset: where; the record is skipped), LD_ERR_LIMIT for a line past
 * max_line (dropped), LD_ERR_TRUNCATED with *out_has = 1 for a Docker line
 * rejoined whole but with bytes lost at a cut inside a character (the caller
 * reports it and may still read the line); the capture goes on after each.
 * err->line and err->offset name the line's first record. */
ld_status ld_capture_push(ld_capture *c, const ld_line *in, ld_line *out, int *out_has, ld_error *err);

/* ld_capture_push for a reader that holds what follows the line: `next`,
 * the first next_len bytes of the member's next line, which is pushed right
 * after this one (NULL when unknown).  A plain line whose next line begins
 * as a server's line does (by its prefix, capture_open.c) is handed out
 * without following its literal: had the literal stayed open, the line
 * would wait for that next line, which ends it unchanged (a plain file's
 * quiet open line), so the pairer gets the same lines in the same order;
 * the caller vouches that the next line fits in max_line. */
ld_status ld_capture_push_ahead(ld_capture *c, const ld_line *in, const char *next, size_t next_len,
                                ld_line *out, int *out_has, ld_error *err);

/* A record read by a reader of its own (a journal file's entry:
 * journal_file.h) through the rejoiner, as ld_capture_push does with a
 * line's; `at` gives its number (lineno) and offset.  The member's capture
 * is `kind` unless it was already named. */
ld_status ld_capture_push_record(ld_capture *c, ld_capture_kind kind, const ld_line *at, const ld_capture_record *r,
                                 ld_line *out, int *out_has, ld_error *err);

/* After a push, a line that became whole with it besides the one handed
 * out (a new line that showed an earlier one of its source was cut for
 * good): *out_has = 1 with it; call until *out_has = 0. */
ld_status ld_capture_pop(ld_capture *c, ld_line *out, int *out_has, ld_error *err);

/* At the end of a member, the lines still waiting for their last piece, one
 * a call: *out_has = 1 with what arrived of it and an LD_ERR_TRUNCATED
 * problem in err (the caller reports it and may still read the line);
 * *out_has = 0 when none is left. */
ld_status ld_capture_drain(ld_capture *c, ld_line *out, int *out_has, ld_error *err);

const ld_capture_stats *ld_capture_stats_of(const ld_capture *c);

/* Each line still waiting for its last piece: where its first piece was
 * (the lineno and offset the push gave it), for a reader that must read
 * again from there after a restart (logdiff watch's state). */
void ld_capture_each_pending(const ld_capture *c, void (*fn)(void *ctx, uint64_t lineno, uint64_t offset),
                             void *ctx);

/* ---- the record parsers (capture_record.c), for the rejoiner and tests */

/* One record of a wrapped capture: its text (the piece of the server's
 * line; `owned` when decoded into the caller's buffer `buf`), the source
 * it belongs to (stream, container), whether the line ends with it. */
struct ld_capture_record {
    const char *text;
    size_t len;
    const char *source;
    size_t source_len;
    int last;              /* the line's last piece */
    uint64_t replaced;     /* Docker: U+FFFD it wrote for bytes cut off a character */
    int skip;              /* not a line of the server's (journalctl's "-- Boot ... --") */
    const char *lost;      /* the text was left out by the capture: why (journalctl's
                              "[N blob data]", MESSAGE printed as null); text is empty */
};

/* The capture a record looks like (LD_CAPTURE_PLAIN when none). */
ld_capture_kind ld_capture_recognise(const char *line, size_t len);

/* Parses `line` as a record of `kind` (not PLAIN).  JSON wrappers decode
 * their text into *buf (grown with realloc, the caller's to free).
 * LD_ERR_SYNTAX with err->offset for anything else; LD_ERR_NOMEM. */
ld_status ld_capture_parse(ld_capture_kind kind, const char *line, size_t len, char **buf, size_t *cap,
                           ld_capture_record *rec, ld_error *err);

#endif /* LD_CAPTURE_H */
