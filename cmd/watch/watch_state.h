/* watch_state.h - logdiff watch's --state FILE: where to go on reading
 * after a restart, so that no request is judged twice or missed.
 *
 * What is saved, per file followed: its identity (device, inode) and a
 * position to read again from: the first line of the oldest request still
 * waiting for its Finish (its lines must be read again to pair it), or the
 * read position when none waits.  Per journald unit followed
 * (watch_journal.h): the cursor of the entry holding that first line (or
 * of a line journald split whose last piece has not come), or of the last
 * entry read, and its number.  Requests judged after that position are
 * listed by rid (with their first line's offset, or entry for a journal):
 * when their lines come again they are not judged twice.
 * The file is JSON ({"logdiff_watch_state": 1, ...}), written atomically
 * (a temporary file renamed over it).  One that cannot be read as such, or
 * of another format version, is an error that names it: it is never
 * silently reused nor overwritten.
 *
 * Limits, said in the README: a rotated file is known by its path while it
 * is read to its end; a line of a file whose capture pieces (Docker's 16
 * KiB parts) straddle the stop is read from its next piece only, and said
 * as cut (a journal's is read again from its first piece); a journal entry
 * whose cursor is gone (vacuumed) is said, and reading goes on after it; the
 * conversations followed before the restart are not saved: a file's
 * warm-up offset (watch_warmup.h, up to --state-warmup bytes before its
 * position) is, and the restart reads from there in silence to rebuild
 * them (a journal has none: its conversations start anew). */
#ifndef LD_CMD_WATCH_STATE_H
#define LD_CMD_WATCH_STATE_H

#include <stdint.h>
#include <stdio.h>

#include "cmd/watch/watch_journal.h"
#include "parse/follow/follow.h"
#include "parse/pair/pair.h"

typedef struct ld_watch_state ld_watch_state;

/* Opens the state at `path`: loaded when the file exists, empty when it does
 * not.  NULL after a line on err ("logdiff watch: state PATH: why") when it
 * exists but is not a state this version wrote, or cannot be read. */
ld_watch_state *ld_watch_state_open(const char *path, FILE *err);
void ld_watch_state_free(ld_watch_state *st);

/* Adds `source` to the follower where the saved state says (ld_follow_add_at),
 * else from its start (ld_follow_add).  LD_OK or the follower's error. */
ld_status ld_watch_state_add_source(ld_watch_state *st, ld_follow *f, const char *source, ld_error *err);

/* The saved mark of journal source `source` (borrowed from st), NULL when
 * none (or st NULL). */
const ld_watch_journal_mark *ld_watch_state_journal(const ld_watch_state *st, const char *source);

/* 1 when r was judged before the restart (its lines are read again). NULL st: 0. */
int ld_watch_state_was_judged(ld_watch_state *st, const ld_request *r);
/* Remembers that r was judged (for the next save). NULL st: nothing. */
void ld_watch_state_note_judged(ld_watch_state *st, const ld_request *r);

/* --state-warmup: bytes before each file's resume offset read again in
 * silence after the next restart, for the conversations (watch_warmup.h);
 * 0: none, and a saved warm-up is not used either. */
void ld_watch_state_set_warmup(ld_watch_state *st, uint64_t bytes);

/* 1 when the last save is a second or more before `now` (the caller's
 * monotonic seconds, as given to ld_watch_state_save). */
int ld_watch_state_save_due(const ld_watch_state *st, double now);
/* Saves the positions of f's files and of the journal sources
 * journals[0..n_journals) and what `pairer` still waits for, at time
 * `now`.  0, or -1 after a line on err. */
int ld_watch_state_save(ld_watch_state *st, ld_follow *f, ld_watch_journal **journals, size_t n_journals,
                        const ld_pairer *pairer, double now, FILE *err);

#endif
