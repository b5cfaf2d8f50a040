/* watch_state_internal.h - the state's records, shared by watch_state.c
 * (positions, judged requests) and watch_state_io.c (the JSON file).
 * Not public. */
#ifndef LD_CMD_WATCH_STATE_INTERNAL_H
#define LD_CMD_WATCH_STATE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#define LD_WATCH_STATE_FORMAT 1

/* a file's saved position (strings malloc'd) */
typedef struct saved_file {
    char *source, *path;
    uint64_t dev, ino, offset, line;
} saved_file;

/* a request judged: where its first line is, its rid (malloc'd) */
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
    judged_list before; /* judged before the restart (loaded) */
    judged_list now;    /* judged in this run, not yet behind the saved positions */
    double saved_at;    /* monotonic seconds of the last save */
};

/* 0, or -1 out of memory */
int ld_watch_judged_add(judged_list *l, const char *path, uint64_t offset, const char *rid);
/* Writes the document: files[0..n) and st->now.  0, or -1 after a line on err. */
int ld_watch_state_write(const struct ld_watch_state *st, const saved_file *files, size_t n_files, FILE *err);

#endif
