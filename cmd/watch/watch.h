/* watch.h - `logdiff watch`'s loop: sources followed as `tail -F` follows
 * them (parse/follow/), each file's lines unwrapped from its capture into
 * one pairer, each request judged and reported as diff reports it as soon
 * as it is complete, or as unpaired once it has waited --unpaired-after,
 * with the metrics (metrics.h) kept up to date and the read positions
 * saved (watch_state.h).
 *
 * cmd/watch.c parses the options and calls ld_watch_run(); the loop runs
 * until every source has ended (standard input closed) or *stop is set (a
 * signal). */
#ifndef LD_CMD_WATCH_H
#define LD_CMD_WATCH_H

#include <signal.h>
#include <stdint.h>

#include "cmd/common/logread.h"
#include "cmd/format/difffmt.h"
#include "cmd/watch/metrics.h"

typedef struct ld_watch_opts {
    double unpaired_after;        /* seconds a request waits for its Finish line */
    double poll_interval;         /* seconds between looks at quiet sources */
    double textfile_interval;     /* seconds between rewrites of the textfile */
    int from_end;                 /* files that exist at the start: from their end */
    const char *state_path;       /* --state FILE; NULL: none */
    const char *metrics_textfile; /* --metrics-textfile PATH; NULL: none */
    const char *journal_dir;      /* --journal-dir DIR: journal:UNIT read there; NULL: the system journal */
    uint64_t state_warmup;        /* --state-warmup: bytes read again in silence after a restart (0: none) */
} ld_watch_opts;

/* Follows sources[0..n) until they end or *stop becomes nonzero.  `rep`
 * (its differ and checks loaded) judges and prints; `lr` reports problems
 * and holds the capture options; `metrics` may be NULL.  Returns 0, or
 * LD_EXIT_TROUBLE after a message on cli->err (a state file that cannot be
 * used, out of memory, nothing to follow). */
int ld_watch_run(ld_cli_diff_report *rep, ld_cli_logread *lr, ld_metrics *metrics,
                 const ld_watch_opts *opts, char **sources, int n, volatile sig_atomic_t *stop);

/* "30s", "10m", "2h", "1.5" (seconds): seconds into *out; -1 when not a
 * duration from 0.01 s to 7 days. */
int ld_watch_parse_duration(const char *s, double *out);

#endif
