/* progress.h - a progress bar on standard error, only on a terminal and only
 * for inputs large enough to need one.  Redrawn at most ten times a second. */
#ifndef LD_CMD_PROGRESS_H
#define LD_CMD_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct ld_cli_progress {
    FILE *f;         /* NULL = disabled */
    uint64_t total;  /* bytes expected; 0 if unknown */
    double started;  /* seconds */
    double drawn;    /* time of the last redraw */
    int visible;     /* something is on the line and must be erased */
} ld_cli_progress;

/* Enables the bar when `tty` and total_bytes >= min_bytes (or unknown). */
void ld_cli_progress_init(ld_cli_progress *p, FILE *f, int tty, uint64_t total_bytes,
                      uint64_t min_bytes);
void ld_cli_progress_update(ld_cli_progress *p, uint64_t done_bytes, const char *what);
/* Erases the bar so that normal output can follow. */
void ld_cli_progress_done(ld_cli_progress *p);

double ld_cli_now_seconds(void);

#endif
