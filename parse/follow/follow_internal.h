/* follow_internal.h - the follower's state and what its files share.
 *
 * Calls go one way (tools/check-cycles.py): follow.c (lifecycle, the poll
 * loop) -> follow_path.c, follow_dir.c, follow_stdin.c (one kind of source
 * each) -> follow_source.c (a source's files) -> follow_trunc.c
 * (copytruncate) -> follow_file.c (one open file: opened, positioned,
 * closed) -> follow_lines.c (its bytes read and cut into lines) ->
 * follow_event.c (hooks out); follow_list.c (directory listings) is a leaf
 * used by path and directory sources.
 *
 * Ownership: ld_follow owns its sources; a source owns its files (in the
 * order they are read), its name and its hints; a file owns its descriptor
 * (except stdin's), its path and its buffer.
 */
#ifndef LD_FOLLOW_INTERNAL_H
#define LD_FOLLOW_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "follow.h"

enum {
    FL_HEAD = 32,                        /* first bytes kept to see a file rewritten */
    FL_TAIL = 16,                        /* bytes before the read position, the same */
    FL_CHUNK = 64 * 1024,                /* one read() */
    FL_SHRINK_AT = 4 * 1024 * 1024       /* a buffer above this shrinks when idle */
};
#define FL_DEFAULT_MAX_LINE ((size_t)1 << 30)
#define FL_DEFAULT_MAX_READ ((size_t)4 << 20)

/* One open file (the caller sees `pub`). */
typedef struct fl_file {
    ld_follow_file pub;    /* first member: an ld_follow_file * is an fl_file * */
    int fd;                /* owned, unless is_stdin */
    int is_stdin;
    int stream;            /* not a regular file: poll() then read(); no truncation checks */
    int draining;          /* rotated or gone: read to its end, then closed */
    int failed;            /* a read failed (told): not read again; closed once draining */
    int skipping;          /* discarding up to the next \n (a line past max_line) */
    int skip_quiet;        /* the same for the fragment before a from-end start (no problem told) */
    char *buf;             /* owned; NULL until the first read */
    size_t cap, start, end, scan; /* held bytes buf[start, end); no \n in buf[start, scan) */
    uint64_t base;         /* file offset of buf[0] */
    uint64_t read_pos;     /* bytes read from the file: base + end */
    unsigned char head[FL_HEAD];  /* the file's first head_len bytes as read */
    size_t head_len;
    unsigned char tail[FL_TAIL];  /* the tail_len bytes before read_pos as read */
    size_t tail_len;
    int64_t last_size;     /* st_size and st_mtim at the last truncation check */
    struct timespec last_mtime;
} fl_file;

typedef enum fl_kind { FL_PATH, FL_DIR, FL_STDIN } fl_kind;

/* Where a file found by identity starts: a saved state (resume) or, with
 * from_end, the size the file had when added. */
typedef struct fl_hint {
    uint64_t dev, ino, offset, lineno;
    int resume;            /* 1: add_at (not finding it is a problem); 0: from_end */
    int used;
} fl_hint;

typedef struct fl_source {
    fl_kind kind;
    char *name;            /* owned: the string it was added by */
    fl_file **files;       /* owned; path: all but the last draining, read in order */
    size_t nfiles, capfiles;
    fl_hint *hints;        /* owned; consumed at the first poll (cur_hint kept for the path) */
    size_t nhints;
    int started;           /* polled once */
    int said_errno;        /* the open/stat/listing error last told (0: none) */
    int said_compressed;   /* the NOTE about compressed files was given */
    int ended;             /* stdin: done */
    /* path: where the file open under the path starts, if it is that file */
    fl_hint cur_hint;
    int has_cur_hint;
} fl_source;

struct ld_follow {
    ld_follow_hooks hooks;
    size_t max_line, max_read;
    int from_end, stdin_fd;
    fl_source **src;       /* owned */
    size_t nsrc, capsrc;
};

/* ---- follow_event.c: hooks out */
void fl_event(ld_follow *f, ld_follow_event ev, fl_file *file, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
void fl_problem_at(ld_follow *f, fl_file *file, const char *where, int where_line, ld_status code,
                   const char *path, uint64_t line, uint64_t off, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 9, 10)))
#endif
    ;
#ifndef NDEBUG
#define FL_PROBLEM(f, file, code, path, line, off, ...) \
    fl_problem_at((f), (file), __FILE__, __LINE__, (code), (path), (line), (off), __VA_ARGS__)
#else
#define FL_PROBLEM(f, file, code, path, line, off, ...) \
    fl_problem_at((f), (file), NULL, 0, (code), (path), (line), (off), __VA_ARGS__)
#endif
ld_status fl_deliver(ld_follow *f, fl_file *file, const ld_line *line, ld_error *err);

/* ---- follow_file.c (opened, positioned, closed) and follow_lines.c (read, cut into lines): one open file */
/* Opens `path` (non-blocking, close-on-exec).  LD_OK with *out NULL and
 * *out_errno set when it cannot be opened; LD_ERR_NOMEM. */
ld_status fl_file_open(const char *path, fl_file **out, int *out_errno, ld_error *err);
ld_status fl_file_stdin(int fd, fl_file **out, ld_error *err);
/* Positions a file just opened: at `offset` with `lineno` lines before it. */
void fl_file_start(fl_file *file, uint64_t offset, uint64_t lineno);
/* ...or at the start of the last line begun before `size` (from_end). */
void fl_file_start_end(fl_file *file, uint64_t size);
/* Reads up to f->max_read bytes and delivers the complete lines.  *out_eof:
 * the file ended (for now: a regular file) or closed (a stream).  A read
 * error is a PROBLEM and sets file->failed. */
ld_status fl_file_read(ld_follow *f, fl_file *file, uint64_t *out_bytes, int *out_eof, ld_error *err);
/* The partial line held, delivered as unterminated (nothing when none). */
ld_status fl_file_flush(ld_follow *f, fl_file *file, ld_error *err);
void fl_file_rewind(fl_file *file);      /* back to byte 0, line 0, nothing held */
/* Flushes (on_line's status ignored), CLOSED, frees.  NULL ok. */
void fl_file_close(ld_follow *f, fl_file *file);
/* 1 when the bytes read at the start and just before read_pos are still
 * the file's (pread), 0 when they changed or cannot be read. */
int fl_file_samples_match(const fl_file *file);

/* ---- follow_trunc.c: copytruncate */
/* TRUNCATED (partial delivered, back to 0) when the file is shorter than
 * what was read or its samples changed; returns the flush's on_line status. */
ld_status fl_trunc_check(ld_follow *f, fl_file *file, ld_error *err);

/* ---- follow_list.c: directory listings (a leaf) */
typedef struct fl_entry {
    char *path;            /* owned: the directory's prefix + the name */
    const char *name;      /* inside path */
    uint64_t dev, ino, size;
    int regular;           /* a regular file (through symbolic links) */
} fl_entry;
/* Entries of directory `dir` ("" = the current one) but . and .., stat'ed
 * through links, sorted by name; an entry gone before its stat left out.
 * Returns 0 or the errno of the listing (ENOMEM included). */
int fl_list_dir(const char *dir, fl_entry **out, size_t *out_n);
void fl_list_free(fl_entry *e, size_t n);
int fl_name_compressed(const char *name);
char *fl_path_join(const char *dir, const char *name);  /* malloc'd; NULL: no memory */
char *fl_path_dir(const char *path);  /* malloc'd: the part up to its last '/', "" if none */

/* ---- follow_source.c: a source's list of files */
/* Room for one more file, so that appending one just opened cannot fail. */
ld_status fl_source_reserve(fl_source *s, ld_error *err);
void fl_source_close_file(ld_follow *f, fl_source *s, size_t i);  /* fl_file_close, removed */
int fl_source_has(const fl_source *s, uint64_t dev, uint64_t ino);  /* a file of it is that one */
/* Opens `path` into s: positioned at `hint` when the file opened is the
 * hint's, else at 0; OPENED; checked for truncation (a saved offset past
 * its end).  *out NULL when it cannot be opened: a PROBLEM (once per
 * errno; none for a path gone since). */
ld_status fl_source_open(ld_follow *f, fl_source *s, const char *path, const fl_hint *hint, fl_file **out,
                         ld_error *err);

/* ---- sources (follow_path.c, follow_dir.c, follow_stdin.c) */
ld_status fl_path_poll(ld_follow *f, fl_source *s, uint64_t *out_bytes, ld_error *err);
ld_status fl_dir_poll(ld_follow *f, fl_source *s, uint64_t *out_bytes, ld_error *err);
ld_status fl_dir_snapshot(fl_source *s, ld_error *err);  /* from_end: every file's size now */
ld_status fl_stdin_poll(ld_follow *f, fl_source *s, uint64_t *out_bytes, ld_error *err);

#endif /* LD_FOLLOW_INTERNAL_H */
