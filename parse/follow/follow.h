/* follow.h - following log files as `tail -F` does: sources read as they
 * grow, across rotations, truncations, deletions and files that appear later,
 * cut into lines.
 *
 * A source is a file path, a directory or "-" (standard input).  Nothing is
 * opened by ld_follow_add(); each ld_follow_poll() looks at every source
 * (stat/fstat, a directory listing), reads what is new (a bounded amount per
 * file) and delivers the complete lines through the hooks.  No inotify, no
 * threads, no sleeping: the caller polls (every 100-200 ms) and sleeps when a
 * poll read nothing.
 *
 * What is detected, and how:
 * - rename-and-create rotation: the path names another file (dev, ino) than
 *   the one open: ROTATED; the open file is read to its end (what the writer
 *   put there after the rename included, up to the poll that finds its end;
 *   what it writes there later is lost, as with tail), CLOSED, then the new
 *   file OPENED and read from 0.  One file at a time: while the old one
 *   drains (more than max_read left), the new one waits.
 * - copytruncate: the file (same identity) is shorter than what was read, or
 *   it changed size or mtime and its first 32 bytes or the 16 bytes before
 *   the read position are no longer what was read there: TRUNCATED, read
 *   again from 0 (a partial line held is first delivered as unterminated).
 *   Window: a file truncated and written again past the read position between
 *   two polls with the same first 32 bytes and the same 16 bytes before the
 *   old read position is not noticed (its first bytes up to that position are
 *   taken as read); bytes the writer appended between the last poll and
 *   logrotate's copy are in the copy only (as with tail).  A file rewritten
 *   in place (not appended to) reads as truncated.
 * - deletion: the path no longer exists: GONE; the open file is read to its
 *   end and CLOSED; when the path exists again it is OPENED, from 0 (a new
 *   file, even if moved back: an inode number freed is soon given again).
 * - a read error: a PROBLEM; the file stays open, unread, until its path
 *   moves away from it (then CLOSED), so it is not read again from 0.
 * - a path that does not exist yet: waited for (a NOTE at the first poll),
 *   OPENED when it appears.
 * - directories: listed every poll; every regular, non-hidden file is
 *   followed (names sorted when several appear at once); a file renamed inside
 *   the directory keeps its identity and is not read again; a file whose
 *   identity is no longer in the directory is GONE.  Compressed files (*.gz,
 *   *.zst, *.xz, *.bz2) are not followed (a NOTE, once a directory).
 * - standard input: read only when poll() says it is readable, so a quiet
 *   pipe never blocks the other sources; its end is ENDED then CLOSED.
 * A file's partial last line is held until its \n arrives; it is delivered
 * (line->unterminated set) only when the file is CLOSED or TRUNCATED.
 * Not noticed: the same file given twice (as a path and in a directory, or
 * two links) is read twice; a file moved out of a followed directory and back
 * is read again from 0; a saved identity (add_at) whose inode number the
 * file system has given to another file is taken for it.
 *
 * Names (file->path): a path source's files are named by the source string
 * (a saved file found beside it by its own name, x.log.1); a directory's by
 * "DIR/NAME" as first listed (kept across renames inside it: a rotated
 * x.log.1 stays open, read on, under "DIR/x.log", until it leaves the
 * directory); stdin's "-".
 *
 * Ownership: the follower owns its files and their buffers; an ld_follow_file
 * is valid from its OPENED to the end of its CLOSED event, and its `user`
 * is the caller's.  A line borrows the follower's buffer for the call only.
 * Hooks must not call the follower back.  Errors carry the path (borrowed
 * from the follower: valid for the call), line and byte offset.  Library
 * code: never prints, never exits.  Not thread-safe; one follower a thread.
 */
#ifndef LD_FOLLOW_H
#define LD_FOLLOW_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"
#include "parse/input/input.h"

typedef struct ld_follow ld_follow;

typedef struct ld_follow_file {      /* one file being read; owned by the follower */
    const char *path;                /* the name it was opened by ("-" for stdin) */
    uint64_t dev, ino;               /* its identity (0, 0 for stdin) */
    uint64_t offset;                 /* bytes consumed (the next line starts here) */
    uint64_t lineno;                 /* lines delivered so far (or skipped as too long) */
    void *user;                      /* the caller's (e.g. a capture per file) */
} ld_follow_file;

typedef enum ld_follow_event {
    LD_FOLLOW_OPENED,    /* a file is now read (from file->offset) */
    LD_FOLLOW_ROTATED,   /* its path names a new file (rename-and-create); the old one is read to its end, then CLOSED */
    LD_FOLLOW_TRUNCATED, /* the file became shorter than what was read (copytruncate): read again from 0 */
    LD_FOLLOW_GONE,      /* its path no longer exists (what is open is still read to its end) */
    LD_FOLLOW_CLOSED,    /* the follower is done with the file (its last partial line was delivered first, as unterminated); file->user is the caller's to free now */
    LD_FOLLOW_ENDED,     /* standard input reached end of file (then CLOSED) */
    LD_FOLLOW_PROBLEM,   /* a source cannot be read, a line past max_line skipped, ...: err says what (path, line, offset) */
    LD_FOLLOW_NOTE       /* no problem, worth telling once: a path that does not exist yet (waited for),
                            compressed files left out of a directory; file NULL, err NULL */
} ld_follow_event;

typedef struct ld_follow_hooks {
    /* a complete line (without its \n; crlf set as ld_linereader does) of
     * `file`; line->offset/lineno as in the file; returning non-LD_OK stops
     * ld_follow_poll with that status (the line counts as delivered: the
     * next poll goes on after it).  NULL: lines are dropped. */
    ld_status (*on_line)(void *ctx, ld_follow_file *file, const ld_line *line);
    /* every event; err only for LD_FOLLOW_PROBLEM (else NULL); msg a short
     * human sentence naming the path.  `file` is NULL for what concerns a
     * source with no file open (a path that cannot be opened, a directory
     * that cannot be listed, a saved file not found, a NOTE): err->path (for
     * PROBLEM) or msg names it.  NULL: events are not told. */
    void (*on_event)(void *ctx, ld_follow_event ev, ld_follow_file *file, const char *msg, const ld_error *err);
    void *ctx;
} ld_follow_hooks;

typedef struct ld_follow_options {
    size_t max_line;      /* a line longer is skipped (PROBLEM with LD_ERR_LIMIT) and reading goes on at the next \n; 0 = 1 GiB */
    int from_end;         /* files that exist when added start at their end (default 0: from the start);
                             at the start of their last line when it is not finished yet; line numbers
                             then count from there */
} ld_follow_options;

/* opts NULL: the defaults; hooks NULL: nothing delivered.  Both copied. */
ld_status ld_follow_new(const ld_follow_options *opts, const ld_follow_hooks *hooks, ld_follow **out, ld_error *err);

/* Tuning, after ld_follow_new and before the first poll.  max_read: bytes
 * read from one file in one poll (0: 4 MiB).  stdin_fd: the descriptor "-"
 * reads (standard input, 0, by default; tests give a pipe's read end); the
 * follower never closes it nor changes its flags. */
void ld_follow_set_max_read(ld_follow *f, size_t max_read);
void ld_follow_set_stdin_fd(ld_follow *f, int fd);

/* A source: a file path (may not exist yet: waited for), a directory (every
 * regular, non-hidden file in it, now and later; not recursive; compressed
 * rotations *.gz *.zst *.xz *.bz2 are skipped, said once), or "-" (stdin,
 * read non-blocking).  What it is is decided now (a path that is not a
 * directory now is followed as a file).  Nothing is opened before the next
 * ld_follow_poll().  LD_ERR_USAGE: an empty source, one given twice, "-"
 * twice; LD_ERR_NOMEM. */
ld_status ld_follow_add(ld_follow *f, const char *source, ld_error *err);

/* The same, resuming: the file of identity (dev, ino) at `offset` with
 * `lineno` lines before it (a saved state).  When the path now names another
 * file, the saved one is looked for by identity among the files of the
 * path's directory (a rotated x.log.1) and read from offset first, then the
 * new one from 0; when it is found nowhere, PROBLEM (the bytes after the
 * saved offset of that file are lost: say so) and the current file from 0.
 * When the identity matches but the file is shorter than offset: OPENED (at
 * the saved offset), TRUNCATED, from 0.  A directory source takes one call
 * per saved file (same source string, before the first poll): each saved
 * identity is looked for in the directory, the directory's other files read
 * from 0.  A later add_at of a source already polled: LD_ERR_USAGE.  "-"
 * resumes nothing (a pipe): as ld_follow_add. */
ld_status ld_follow_add_at(ld_follow *f, const char *source, uint64_t dev, uint64_t ino, uint64_t offset,
                           uint64_t lineno, ld_error *err);

/* Reads what is new in every source (at most max_read, 4 MiB, per file per
 * call so one busy file cannot starve the rest), checks every path for
 * rotation, truncation, disappearance and new files, and delivers the
 * complete lines.  *out_bytes: bytes read this call (0: nothing new: the
 * caller sleeps).  Returns LD_OK, or on_line's status (err: the path, line
 * and offset of the line it refused), or LD_ERR_NOMEM.  Problems with the
 * sources are PROBLEM events, not a status. */
ld_status ld_follow_poll(ld_follow *f, uint64_t *out_bytes, ld_error *err);

/* 1 while some source may still produce lines (0 only when every source was
 * stdin and it ended, or there is no source). */
int ld_follow_live(const ld_follow *f);

/* Each open file, for a saved state: `source` is the string it was added
 * under (give it back to ld_follow_add_at with the file's dev, ino, offset
 * and lineno). */
void ld_follow_each(ld_follow *f, void (*fn)(void *ctx, const ld_follow_file *file, const char *source), void *ctx);

/* Closes every file (CLOSED events, partial lines delivered as unterminated
 * first) and frees. NULL ok. */
void ld_follow_free(ld_follow *f);

#endif /* LD_FOLLOW_H */
