/* journal_file.h - native journal files (`*.journal`, as copied from
 * /var/log/journal) read entry by entry with systemd's own library
 * (libsystemd's sd-journal, Debian libsystemd-dev), each entry a record of
 * the journal-file capture: MESSAGE, _LINE_BREAK, the source.  Writing a
 * reader of journald's on-disk format (compressed fields, hash tables,
 * entry arrays) ourselves is what the library exists for.
 *
 * Optional at build time like CUDA: built without libsystemd (no
 * LD_HAVE_LIBSYSTEMD), a journal file is recognised and refused with what
 * to do instead.  Not thread-safe: one reader per thread. */
#ifndef LD_JOURNAL_FILE_H
#define LD_JOURNAL_FILE_H

#include <stdint.h>

#include "ld_error.h"
#include "parse/capture/capture.h"

typedef struct ld_journal_file ld_journal_file;

/* 1 when the file at path begins as a journal file does ("LPKSHHRH"). */
int ld_journal_file_is(const char *path);

/* 1 when this build reads journal files. */
int ld_journal_file_available(void);

/* Opens path; LD_ERR_UNSUPPORTED without libsystemd, LD_ERR_IO when it
 * cannot be read (err->msg says why). */
ld_status ld_journal_file_open(const char *path, ld_journal_file **out, ld_error *err);

/* The next entry as a record (its text and source borrowed until the next
 * call), *entry its number (1-based); *has = 0 at the end.  An entry
 * without MESSAGE is a record with skip set.  LD_ERR_IO for an entry that
 * cannot be read (the reader goes on with the next). */
ld_status ld_journal_file_next(ld_journal_file *f, ld_capture_record *rec, uint64_t *entry, int *has,
                               ld_error *err);

void ld_journal_file_close(ld_journal_file *f);

#endif
