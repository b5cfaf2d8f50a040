/* journal_entry.h - the current entry of an sd_journal as a record of the
 * journal-file capture: MESSAGE (whole, any bytes), whether journald cut
 * the line there (_LINE_BREAK=line-max) and the writer, named as the JSON
 * and export readers name it.  Shared by the journal-file reader
 * (journal_file.c) and the unit follower (journal_follow.c); compiled only
 * with libsystemd (LD_HAVE_LIBSYSTEMD).  Not public. */
#ifndef LD_JOURNAL_ENTRY_H
#define LD_JOURNAL_ENTRY_H

#include <stddef.h>

#include "parse/capture/capture.h"

struct sd_journal;

/* Fills rec from j's current entry: its text borrowed from the journal
 * (valid until j moves), its source written into source (cap bytes, the
 * caller's).  An entry without MESSAGE is a record with skip set. */
void ld_journal_entry_record(struct sd_journal *j, char *source, size_t cap, ld_capture_record *rec);

#endif
