/* watch_state_internal.h - the state's records, shared by watch_state.c
 * (positions, judged requests), watch_state_records.c (the records in
 * memory) and watch_state_io.c (the JSON file).  Not public. */
#ifndef LD_CMD_WATCH_STATE_INTERNAL_H
#define LD_CMD_WATCH_STATE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "cmd/watch/watch_journal.h"
#include "cmd/watch/watch_warmup.h"

#define LD_WATCH_STATE_FORMAT 1

/* a file's saved position (strings malloc'd); where its warm-up starts
 * (warmup == offset: none); while saving, its open file's marks */
typedef struct saved_file {
    char *source, *path;
    uint64_t dev, ino, offset, line;
    uint64_t warmup, warmup_line;
    ld_watch_marks *marks;
} saved_file;

/* a file read in silence after the restart up to `end` (path malloc'd) */
typedef struct warm_window {
    char *path;
    uint64_t dev, ino, end, end_line;
} warm_window;

/* a journal source's saved mark (strings malloc'd) */
typedef struct saved_journal {
    char *source;
    ld_watch_journal_mark mark;
} saved_journal;

/* a request judged: where its first line is (a file's byte offset, a
 * journal's entry number), its rid (malloc'd) */
typedef struct judged {
    char *path;
    uint64_t offset;
    char *rid;
} judged;

typedef struct judged_list {
    judged *v;
    size_t n, cap;
} judged_list;

struct ld_watch_state {
    char *path;
    saved_file *files;  /* as loaded */
    size_t n_files;
    saved_journal *journals; /* as loaded */
    size_t n_journals;
    judged_list before; /* judged before the restart (loaded) */
    judged_list now;    /* judged in this run, not yet behind the saved positions */
    double saved_at;    /* monotonic seconds of the last save */
    uint64_t warmup;    /* --state-warmup: bytes read again in silence (0: none) */
    warm_window *windows; /* files being warmed up (watch_warmup.c) */
    size_t n_windows;
};

/* watch_state_records.c: 0, or -1 out of memory */
int ld_watch_judged_add(judged_list *l, const char *path, uint64_t offset, const char *rid);
void ld_watch_judged_clear(judged_list *l);
void ld_watch_state_clear(struct ld_watch_state *st); /* what a loaded document filled freed */
/* watch_state_io.c: the document of files[0..n_files), journals[0..n_journals)
 * (those with a cursor) and st->now, as text (malloc'd, the caller's; NULL:
 * out of memory). */
char *ld_watch_state_text(const struct ld_watch_state *st, const saved_file *files, size_t n_files,
                          const saved_journal *journals, size_t n_journals);
/* ...written to st->path atomically.  0, or -1 after a line on err. */
int ld_watch_state_write(const struct ld_watch_state *st, const saved_file *files, size_t n_files,
                         const saved_journal *journals, size_t n_journals, FILE *err);

/* Fills st (empty) from the document text[0..len): its files, journals and
 * judged requests (into st->before).  NULL, or a sentence saying what is
 * wrong (static, or in why[0..cap)), st then empty again.  Any bytes: the
 * fuzz target's entry (tests/fuzz/fuzz_watchstate.c). */
const char *ld_watch_state_parse(struct ld_watch_state *st, const char *text, size_t len, char *why, size_t cap);

#endif
