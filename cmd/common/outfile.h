/* outfile.h - writing a report or baseline to a path the user named.
 *
 * A regular file (or a path that does not exist yet) is replaced atomically:
 * the text goes to a temporary file beside it, renamed over it once complete,
 * so a reader never sees half a report and a failed write leaves the old one.
 * Anything else is written into, never replaced: a symbolic link (a report
 * path linked into a CI artefact folder) writes its target, a device or a
 * FIFO (/dev/stdout, /dev/null) is opened and written.  Every write error,
 * the last flush and close included, is reported (/dev/full fails).
 */
#ifndef LD_CLI_OUTFILE_H
#define LD_CLI_OUTFILE_H

#include <stdio.h>

/* Writes what fn(ctx, f) prints into `path`, as above.  fn returns 0 or -1.
 * Returns 0, or -1 after a line "logdiff CMD: cannot write PATH: why" on err. */
int ld_cli_write_output(const char *cmd, const char *path, int (*fn)(const void *ctx, FILE *f),
                        const void *ctx, FILE *err);

#endif
