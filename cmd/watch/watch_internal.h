/* watch_internal.h - the state of one `logdiff watch` run, shared by
 * watch_run.c (set-up and tear-down), watch_files.c (the follower's hooks:
 * a capture per file), watch_journal.c (the journald units) and
 * watch_loop.c (the rounds).  Not public. */
#ifndef LD_CMD_WATCH_INTERNAL_H
#define LD_CMD_WATCH_INTERNAL_H

#include "cmd/watch/watch.h"
#include "cmd/watch/watch_warmup.h"
#include "parse/follow/follow.h"
#include "parse/logset.h"
#include "parse/pair/pair.h"

typedef struct ld_watch_state ld_watch_state; /* watch_state.h */
typedef struct ld_watch_journal ld_watch_journal; /* watch_journal.h */

typedef struct ld_watch {
    struct ld_cli *cli;
    ld_cli_diff_report *rep;      /* judges and prints (borrowed) */
    ld_cli_logread *lr;           /* reports problems (borrowed) */
    ld_metrics *metrics;          /* NULL: no metrics (borrowed) */
    ld_watch_opts opts;
    ld_capture_kind capture;      /* --capture */
    size_t max_line;              /* --max-line */
    ld_pairer *pairer;            /* owned */
    ld_follow *follow;            /* owned */
    ld_watch_journal **journals;  /* owned: the journald units followed (watch_journal.h) */
    size_t n_journals;
    ld_watch_state *state;        /* owned; NULL without --state */
    ld_pair_emit_fn emit;         /* the pairer's callback (watch_loop.c) */
    ld_logset_hooks hooks;        /* problems of the captures and the pairer */
    double t0;                    /* the monotonic clock at the start */
    double textfile_at;           /* when the textfile was last written */
    int textfile_failed;          /* its failure was said */
    uint64_t emitted_since_flush; /* requests printed since stdout was flushed */
    uint64_t skipped_again;       /* requests the state says were judged before */
    uint64_t warmed;              /* requests read again in the warm-up, for the conversations */
    int closing;                  /* the state is saved: what the follower still hands
                                     over (held partial lines) waits for the next run */
    uint64_t rejoined;            /* lines the captures rejoined so far */
    uint64_t rejoined_counted;    /* of those, in the metrics */
    ld_pair_stats counted;        /* the pairer's counters in the metrics */
} ld_watch;

/* a followed file's: its capture, how many lines it had rejoined when last
 * counted, its line marks for the warm-up (watch_files.c; read by
 * watch_state.c at a save through ld_follow_file's user) */
typedef struct ld_watch_file {
    ld_capture *capture;
    uint64_t rejoined;
    ld_watch_marks marks;
} ld_watch_file;

/* watch_loop.c */
double ld_watch_monotonic(void); /* seconds (wall time: ld_metrics_now) */
void ld_watch_hook_init(ld_watch *w);
int ld_watch_loop(ld_watch *w, volatile sig_atomic_t *stop);

/* watch_files.c: the follower's hooks */
ld_follow_hooks ld_watch_follow_hooks_for(ld_watch *w);

#endif
