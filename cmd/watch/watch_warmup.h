/* watch_warmup.h - logdiff watch's warm-up after a restart with --state:
 * the conversations are not saved; instead each file is read again, in
 * silence, from a line start at most --state-warmup bytes (64 MiB by
 * default, 0: off) before its resume offset, and the requests judged
 * before the restart that lie there are fed to the conversation tracker
 * only, so that a later turn is judged with its earlier ones.
 *
 * Two halves:
 * - marks: line starts of one open file, taken as its lines are read (one
 *   every window/16 bytes, thinned past 1024), from which a save picks the
 *   warm-up offset: the first mark at most `window` bytes before the
 *   resume offset.  Owned by the file's ld_watch_file.
 * - windows: after a restart, per file read from a warm-up offset, where
 *   the silent part ends (the saved resume offset).  A request with a line
 *   there is not printed, counted or reported unpaired: fed to the differ
 *   when it is whole and began there, else dropped.  Owned by the state.
 * Out of memory: no mark is taken (a save then records no warm-up), no
 * window is opened (a window's requests are then judged as before the
 * warm-up existed: without their earlier turns, never twice). */
#ifndef LD_CMD_WATCH_WARMUP_H
#define LD_CMD_WATCH_WARMUP_H

#include <stdint.h>

#include "parse/follow/follow.h"
#include "parse/request/request.h"

#define LD_WATCH_WARMUP_DEFAULT "64M"

typedef struct ld_watch_mark {
    uint64_t offset, line; /* a line's first byte; the lines before it */
} ld_watch_mark;

typedef struct ld_watch_marks {
    ld_watch_mark *v;
    size_t n, cap;
    uint64_t step; /* bytes between marks (window/16, doubled at each thinning) */
} ld_watch_marks;

/* A line of the file read: at `offset`, 1-based `lineno`.  A line before the
 * last mark (the file read again from 0) starts the marks afresh. */
void ld_watch_marks_line(ld_watch_marks *m, uint64_t window, uint64_t offset, uint64_t lineno);
/* The warm-up start for `resume`: the first mark in [resume - window,
 * resume] into *offset, *line (1); else 0 and nothing set.  Marks before
 * resume - window are dropped (they will never be needed again). */
int ld_watch_marks_start(ld_watch_marks *m, uint64_t window, uint64_t resume, uint64_t *offset, uint64_t *line);
void ld_watch_marks_release(ld_watch_marks *m);

typedef struct ld_watch_state ld_watch_state; /* watch_state.h */

/* The window of a file opened where the state's warm-up said (its identity
 * and offset): opened; a window of the same name with another identity (a
 * new file at that path) closed. NULL st: nothing. */
void ld_watch_warmup_opened(ld_watch_state *st, const ld_follow_file *file);
/* The file was read again from 0 (copytruncate): its window closed. */
void ld_watch_warmup_truncated(ld_watch_state *st, const ld_follow_file *file);

typedef enum ld_warm_kind {
    LD_WARM_NO,   /* not in a window: judged and reported as ever */
    LD_WARM_FEED, /* judged before the restart: to the conversations only */
    LD_WARM_DROP  /* cut by the window's start, or unpaired there: dropped */
} ld_warm_kind;

/* What to do with request r (NULL st: LD_WARM_NO). */
ld_warm_kind ld_watch_warmup_kind(const ld_watch_state *st, const ld_request *r);
/* 1 when byte `offset` of the file named `path` lies in a window (a
 * problem there was said before the restart). */
int ld_watch_warmup_covers(const ld_watch_state *st, const char *path, uint64_t offset);
/* The end of the window of `path` with identity (dev, ino) into *offset,
 * *line: 1, or 0 when it has none. */
int ld_watch_warmup_end(const ld_watch_state *st, const char *path, uint64_t dev, uint64_t ino, uint64_t *offset,
                        uint64_t *line);
/* The windows freed. */
void ld_watch_warmup_release(ld_watch_state *st);

#endif
