/* watch_journal.h - logdiff watch's journald sources: `journal:UNIT`, the
 * unit followed in the system's journal or in --journal-dir's files
 * (parse/capture/journal_follow.h), its entries through a capture of their
 * own (journald's split lines rejoined by _LINE_BREAK and stream, as diff
 * reads a journal file) into the run's pairer.  Entries are numbered from
 * the first one read (a request's "line"), the numbering carried over a
 * restart by --state.
 *
 * For --state (watch_state.h), each source keeps the cursors of the entries
 * a restart may have to read again: every entry read since the last save,
 * and at a save only those the save marks as needed (the first entry of a
 * request still waiting, of a line still waiting for its last piece) and
 * the last one read.  Its mark is where the next run starts: at the needed
 * entry's cursor, or after the last read.
 *
 * The sources belong to one run (watch_internal.h's ld_watch); not
 * thread-safe. */
#ifndef LD_CMD_WATCH_JOURNAL_H
#define LD_CMD_WATCH_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ld_error.h"

#define LD_WATCH_JOURNAL_PREFIX "journal:"

typedef struct ld_watch ld_watch;
typedef struct ld_watch_journal ld_watch_journal;

/* Where a journal source is read from (again). */
typedef struct ld_watch_journal_mark {
    char *cursor;   /* malloc'd; NULL: none (the source starts as without a state) */
    uint64_t entry; /* the number of the cursor's entry (0: before the first) */
    int after;      /* 1: that entry was read, go on after it; 0: read it again */
} ld_watch_journal_mark;

/* 1 when `source` names a journald unit ("journal:UNIT"). */
static inline int ld_watch_journal_is(const char *source)
{
    return !strncmp(source, LD_WATCH_JOURNAL_PREFIX, sizeof LD_WATCH_JOURNAL_PREFIX - 1);
}

/* Adds `source` to w's journal sources, positioned at `saved` (NULL:
 * head, or tail with from_end); w->opts.journal_dir names the directory
 * (NULL: the system journal).  With w->state, cursors are kept.  -1 after
 * a message on w->cli->err (built without libsystemd, a journal that
 * cannot be opened, out of memory). */
int ld_watch_journal_add(ld_watch *w, const char *source, const ld_watch_journal_mark *saved);

/* Reads what is new in every journal source (a bounded amount each) into
 * w's pairer; *out_bytes: MESSAGE bytes read.  0, or -1 after a message
 * (out of memory). */
int ld_watch_journals_poll(ld_watch *w, uint64_t *out_bytes);

/* Waits up to `seconds` for a journal to change (poll(2) on their
 * descriptors; a plain sleep without any); a signal ends it early. */
void ld_watch_journals_wait(ld_watch *w, double seconds);

/* Closes every journal source: its lines still waiting for a piece go to
 * the pairer first (as at a member's end) unless w->closing. */
void ld_watch_journals_close(ld_watch *w);

/* ---- for the state's save */

const char *ld_watch_journal_name(const ld_watch_journal *j);
/* The first entry a restart must read: the next one to be read, or the
 * first of a line still waiting for its last piece (its cursor kept). */
uint64_t ld_watch_journal_first_needed(ld_watch_journal *j);
/* Entry `entry` (a waiting request's first line) is needed: its cursor kept. */
void ld_watch_journal_keep(ld_watch_journal *j, uint64_t entry);
/* The mark for a restart at entry `from` (no later than first_needed's)
 * into *out (its cursor malloc'd, the caller's), then every cursor not
 * kept forgotten.  The mark starts before `from` when that entry's cursor
 * could not be had; *start: the first entry the next run reads.  -1: out
 * of memory. */
int ld_watch_journal_mark_at(ld_watch_journal *j, uint64_t from, ld_watch_journal_mark *out, uint64_t *start);

#endif
