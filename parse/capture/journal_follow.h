/* journal_follow.h - one systemd unit's entries in journald's journal,
 * followed as they are written (what `journalctl -f -u UNIT` shows), each
 * entry a record of the journal-file capture (MESSAGE whole, any bytes;
 * _LINE_BREAK; the writer) for the rejoiner (capture.h), with its cursor
 * for a saved state.  Read with libsystemd's sd-journal, like journal
 * files (journal_file.h); built without it, opening one says so.
 *
 * The journal is the system's (sd_journal_open: every journal file the
 * user may read, local only) or the files of one directory
 * (sd_journal_open_directory, as `journalctl -D DIR`: a copy, or what
 * systemd-journal-remote writes), matched on _SYSTEMD_UNIT.  No threads,
 * no sleeping: the caller waits on ld_journal_follow_fd (poll(2), readable
 * when the journal changed) or polls, then calls ld_journal_follow_process
 * and reads entries until there are none.
 *
 * Ownership: a record's text and source are borrowed until the next call
 * on the follower.  Errors name the unit; library code never prints.  Not
 * thread-safe: one follower a thread. */
#ifndef LD_JOURNAL_FOLLOW_H
#define LD_JOURNAL_FOLLOW_H

#include "ld_error.h"
#include "parse/capture/capture.h"

typedef struct ld_journal_follow ld_journal_follow;

typedef enum ld_journal_from {
    LD_JOURNAL_HEAD,         /* the unit's oldest entry still in the journal */
    LD_JOURNAL_TAIL,         /* the entries written after the seek */
    LD_JOURNAL_AT_CURSOR,    /* the cursor's entry, then on */
    LD_JOURNAL_AFTER_CURSOR  /* the entries after the cursor's */
} ld_journal_from;

/* 1 when this build follows journald units (libsystemd). */
int ld_journal_follow_available(void);

/* Opens the journal (dir NULL: the system's; else that directory's files)
 * matched on _SYSTEMD_UNIT=unit ("sglang" is taken for "sglang.service",
 * as journalctl -u takes it).  Positioned at the head.  LD_ERR_UNSUPPORTED
 * without libsystemd, LD_ERR_USAGE for an empty unit, LD_ERR_IO when the
 * journal cannot be opened (err->msg says why), LD_ERR_NOMEM. */
ld_status ld_journal_follow_open(const char *unit, const char *dir, ld_journal_follow **out, ld_error *err);

/* The unit matched ("sglang.service"), borrowed. */
const char *ld_journal_follow_unit(const ld_journal_follow *j);

/* 1 when some journal file could be opened (0: none yet in the
 * directory, or none this user may read: the caller says so; entries are
 * read once files appear). */
int ld_journal_follow_has_files(const ld_journal_follow *j);

/* Where the next read starts.  A cursor (from ld_journal_follow_cursor,
 * of this journal) is for the two cursor positions only; when its entry is
 * no longer in the journal (rotated away, vacuumed), the first read
 * returns LD_ERR_TRUNCATED with the entry after where it was.  LD_ERR_USAGE
 * for a cursor journald does not take (err->msg says so), LD_ERR_IO. */
ld_status ld_journal_follow_seek(ld_journal_follow *j, ld_journal_from from, const char *cursor, ld_error *err);

/* The next entry as a record; *has = 0 when there is none yet.  An entry
 * without MESSAGE is a record with skip set.  Errors: LD_ERR_IO when the
 * journal cannot be read on (*has = 1, the record skipped; libsystemd
 * itself leaves out files it finds corrupt, so the next call may go on);
 * LD_ERR_TRUNCATED with *has = 1 and the record for the first entry after a
 * cursor seek whose entry was not found. */
ld_status ld_journal_follow_next(ld_journal_follow *j, ld_capture_record *rec, int *has, ld_error *err);

/* The cursor of the entry the follower is on (malloc'd, the caller frees
 * it): the last one read, or after a tail seek the last one before it.
 * LD_ERR_USAGE when on none (nothing read since a head or cursor seek, an
 * empty journal), LD_ERR_NOMEM, LD_ERR_IO. */
ld_status ld_journal_follow_cursor(ld_journal_follow *j, char **out, ld_error *err);

/* A descriptor that poll(2) sees readable when the journal changed, or -1
 * when there is none (then poll every 100-200 ms).  Owned by the follower. */
int ld_journal_follow_fd(const ld_journal_follow *j);

/* Takes in what changed (new entries, files rotated or added); call before
 * reading, after the descriptor was readable or the poll interval passed.
 * LD_ERR_IO. */
ld_status ld_journal_follow_process(ld_journal_follow *j, ld_error *err);

void ld_journal_follow_close(ld_journal_follow *j);

#endif
