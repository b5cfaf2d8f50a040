/* logset.h - reads a set of log inputs (files, directories, "-") line by line
 * into a pairer: the loop every subcommand that reads logs shares.
 *
 * Directories are expanded to the regular files below them, sorted by name
 * (hidden entries skipped), so `logdiff scan logs/` works on a log folder.
 * Problems never stop the run: an input that cannot be opened, a corrupt
 * member or a line that fails to parse is reported through the hooks and
 * counted, and reading goes on with the rest.
 * Not thread-safe (one run per thread); no global state.
 */
#ifndef LD_LOGSET_H
#define LD_LOGSET_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"
#include "parse/capture/capture.h"
#include "parse/pair/pair.h"

typedef enum ld_problem_kind {
    LD_PROBLEM_IO = 0,     /* file or member could not be read (err->path names it) */
    LD_PROBLEM_LINE = 1,   /* a request line failed to parse (path, line, offset) */
    LD_PROBLEM_CAPTURE = 2 /* a line lost or cut before the pairer saw it:
                              a record not of its capture, a line past the
                              limit (the line reader's or the rejoiner's), one
                              that never got its last piece
                              (parse/capture/capture.h) */
} ld_problem_kind;

typedef struct ld_logset_hooks {
    /* Called for every problem; `err` is valid for the call only. */
    void (*on_problem)(void *ctx, ld_problem_kind kind, const ld_error *err);
    /* Called now and then with bytes of input consumed so far (compressed
     * bytes for compressed files) out of `total` (0 when unknown). */
    void (*on_progress)(void *ctx, uint64_t done, uint64_t total,
                        const char *member);
    void *ctx;
} ld_logset_hooks;

typedef struct ld_logset_stats {
    uint64_t inputs;       /* files (and stdin) opened */
    uint64_t members;      /* members read (1 per non-archive input) */
    uint64_t bytes;        /* decompressed bytes of lines delivered */
    uint64_t io_errors;    /* inputs/members that could not be read (fully) */
    uint64_t line_errors;  /* request lines that failed to parse */
    size_t peak_line_buffer; /* largest line buffer held, bytes */
    uint64_t capture_problems; /* LD_PROBLEM_CAPTURE reported */
    uint64_t over_limit;   /* of those, lines past a size limit (LD_ERR_LIMIT: the line
                              reader's or a capture's max_line), skipped */
    ld_capture_stats capture; /* the captures recognised, the lines rejoined */
} ld_logset_stats;

/* How the inputs are read. */
typedef struct ld_logset_options {
    ld_capture_kind capture; /* every member's, or LD_CAPTURE_AUTO: each
                                recognised from its first record */
    size_t max_line;         /* a line (rejoined or not) past this is skipped; 0: 1 GiB */
} ld_logset_options;

/* Expands directories in paths[0..n) into a new array of paths (files kept
 * in order, each directory replaced by its sorted regular files, recursively).
 * *out_paths and each string are malloc'd: free with ld_logset_free_paths().
 * A path that does not exist is kept (opening it reports the error later). */
ld_status ld_logset_expand(const char *const *paths, size_t n,
                           char ***out_paths, size_t *out_n, ld_error *err);

/* The same, telling `note` (may be NULL) one line for each place the walk
 * did not go twice: a directory met again by device and inode (a symbolic
 * link loop, or a second link to it: walked once, each loop told once) and a
 * file met again (a link to a file already listed: read once). */
typedef void (*ld_logset_note_fn)(void *ctx, const char *msg);
ld_status ld_logset_expand_noted(const char *const *paths, size_t n, ld_logset_note_fn note,
                                 void *ctx, char ***out_paths, size_t *out_n, ld_error *err);
void ld_logset_free_paths(char **paths, size_t n);

/* Sum of the sizes of regular files among paths (0 for stdin/pipes). */
uint64_t ld_logset_total_bytes(char *const *paths, size_t n);

/* Reads every input (already expanded) into `pairer`, each member's lines
 * unwrapped from their capture and rejoined (parse/capture/; opts NULL:
 * recognised by content), then calls ld_pairer_finish().  Returns LD_OK
 * unless memory ran out; all other problems go to hooks->on_problem and the
 * counters. */
ld_status ld_logset_run(char *const *paths, size_t n, ld_pairer *pairer,
                        const ld_logset_hooks *hooks, const ld_logset_options *opts,
                        ld_logset_stats *stats, ld_error *err);

/* For readers of their own (logdiff regress's workers): one physical line
 * of `member` through capture `c` into `pairer`, and at the member's end
 * the lines still waiting for their last piece.  Capture problems go to
 * hooks->on_problem as LD_PROBLEM_CAPTURE, a line the pairer cannot parse as
 * LD_PROBLEM_LINE.  LD_ERR_NOMEM, else LD_OK. */
ld_status ld_logset_feed(ld_capture *c, ld_pairer *pairer, const char *member, const ld_line *line,
                         const ld_logset_hooks *hooks);
void ld_logset_drain(ld_capture *c, ld_pairer *pairer, const char *member, const ld_logset_hooks *hooks);

/* The same for a journald entry read by a reader of its own (a journal
 * file's, a followed unit's: parse/capture/journal_follow.h): one record
 * of the journal-file capture, `at` its entry number (lineno) and offset. */
ld_status ld_logset_feed_record(ld_capture *c, ld_pairer *pairer, const char *member, const ld_line *at,
                                const ld_capture_record *rec, const ld_logset_hooks *hooks);

/* For readers of their own: a journal file's entries (journald's own
 * *.journal, parse/capture/journal_file.h) through capture `c` into
 * `pairer`, then drained; *entries and *bytes: what was read.  A file that
 * cannot be opened (or a build without libsystemd) is LD_PROBLEM_IO to the
 * hooks and LD_ERR_IO; LD_ERR_NOMEM; else LD_OK. */
ld_status ld_logset_journal_file(ld_capture *c, ld_pairer *pairer, const char *path, const ld_logset_hooks *hooks,
                                 uint64_t *entries, uint64_t *bytes);

/* 1 when the current member of `in` is named as journald names its files:
 * an archive's `*.journal` or `*.journal~` member (a tar of
 * /var/log/journal), or such a file compressed (`.gz`, `.zst`, `.xz`,
 * `.bz2`) alone or in an archive. */
int ld_logset_journal_member(const ld_input *in);

/* Such a member read as ld_logset_journal_file reads a file: sd-journal
 * reads files, not streams, so the member is copied to a temporary file
 * (in $TMPDIR, else /tmp) that is removed after; its lines and problems
 * are named after the member.  *bytes: the member's size.  A member that
 * does not begin as a journal file, or that cannot be copied, is
 * LD_PROBLEM_IO to the hooks and LD_ERR_IO. */
ld_status ld_logset_journal_member_read(ld_capture *c, ld_pairer *pairer, ld_input *in,
                                        const ld_logset_hooks *hooks, uint64_t *entries, uint64_t *bytes);

#endif
