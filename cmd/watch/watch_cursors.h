/* watch_cursors.h - a journal source's cursors by entry number, for
 * --state (watch_journal.h): every entry read since the last save, then
 * only the entries a save marked as needed.  Entries come in increasing
 * order; lookups are binary searches.  Owns its cursors. */
#ifndef LD_CMD_WATCH_CURSORS_H
#define LD_CMD_WATCH_CURSORS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ld_watch_cursors ld_watch_cursors;

ld_watch_cursors *ld_watch_cursors_new(void);
void ld_watch_cursors_free(ld_watch_cursors *t);

/* Entry `entry`'s cursor, taken over (freed with the table; on failure at
 * once), after every entry added before.  0, or -1 out of memory. */
int ld_watch_cursors_add(ld_watch_cursors *t, uint64_t entry, char *cursor);

/* Marks entry `entry` kept by the next prune; nothing when it is not held. */
void ld_watch_cursors_keep(ld_watch_cursors *t, uint64_t entry);

/* The cursor of the last entry held at or before `entry` (borrowed until
 * the next prune), its number in *at; NULL when none. */
const char *ld_watch_cursors_find(const ld_watch_cursors *t, uint64_t entry, uint64_t *at);

/* Forgets every cursor not marked kept, but entry `also` (the last read);
 * clears the marks. */
void ld_watch_cursors_prune(ld_watch_cursors *t, uint64_t also);

/* Cursors held. */
size_t ld_watch_cursors_count(const ld_watch_cursors *t);

#endif
