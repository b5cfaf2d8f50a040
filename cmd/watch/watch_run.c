/* watch_run.c - ld_watch_run(): the pairer, the state, the follower and the
 * journald units set up around watch_loop.c's rounds, and taken down after. */
#include <stdlib.h>
#include <string.h>

#include "cmd/watch/watch_internal.h"
#include "cmd/watch/watch_journal.h"
#include "cmd/watch/watch_state.h"

/* a problem of a capture or of the pairer (a line that does not parse) */
static void on_problem(void *ctx, ld_problem_kind kind, const ld_error *e)
{
    ld_watch *w = ctx;
    if (ld_watch_warmup_covers(w->state, e->path, e->offset)) return; /* said before the restart */
    if (kind == LD_PROBLEM_CAPTURE) w->lr->stats.capture_problems++;
    if (kind == LD_PROBLEM_CAPTURE && e->code == LD_ERR_LIMIT) w->lr->stats.over_limit++;
    if (kind == LD_PROBLEM_LINE) w->lr->stats.line_errors++;
    if (kind == LD_PROBLEM_IO) w->lr->stats.io_errors++;
    ld_cli_logread_problem(w->lr, kind, e);
}

static int make_pairer(ld_watch *w, unsigned flags)
{
    ld_pair_options o = { 0 };
    o.flags = flags;
    o.max_open = 65536; /* as diff: the oldest goes out unpaired past this many */
    ld_error e;
    ld_error_clear(&e);
    if (ld_pairer_new(&o, w->emit, w, &w->pairer, &e) != LD_OK) {
        fprintf(w->cli->err, "logdiff watch: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int add_sources(ld_watch *w, char **sources, int n)
{
    for (int i = 0; i < n; i++) {
        if (ld_watch_journal_is(sources[i])) {
            if (ld_watch_journal_add(w, sources[i], ld_watch_state_journal(w->state, sources[i])) != 0) return -1;
            continue;
        }
        ld_error e;
        ld_error_clear(&e);
        if (ld_watch_state_add_source(w->state, w->follow, sources[i], &e) != LD_OK) {
            fprintf(w->cli->err, "logdiff watch: %s: %s\n", sources[i], e.msg);
            return -1;
        }
    }
    return 0;
}

static int make_follower(ld_watch *w, char **sources, int n)
{
    ld_follow_options fo = { w->max_line, w->opts.from_end };
    ld_follow_hooks fh = ld_watch_follow_hooks_for(w);
    ld_error e;
    ld_error_clear(&e);
    if (ld_follow_new(&fo, &fh, &w->follow, &e) != LD_OK) {
        fprintf(w->cli->err, "logdiff watch: %s\n", e.msg);
        return -1;
    }
    return add_sources(w, sources, n);
}

static void take_down(ld_watch *w)
{
    /* with a state saved, the lines read again next time are not judged now
     * (without one, watch_loop.c's end has already closed the files) */
    w->closing = w->state != NULL;
    ld_follow_free(w->follow);
    w->follow = NULL;
    ld_watch_journals_close(w);
    ld_pairer_free(w->pairer);
    ld_watch_state_free(w->state);
}

int ld_watch_run(ld_cli_diff_report *rep, ld_cli_logread *lr, ld_metrics *metrics,
                 const ld_watch_opts *opts, char **sources, int n, volatile sig_atomic_t *stop)
{
    ld_watch w = { 0 };
    w.cli = rep->cli;
    w.rep = rep;
    w.lr = lr;
    w.metrics = metrics;
    w.opts = *opts;
    w.t0 = ld_watch_monotonic();
    w.hooks = (ld_logset_hooks){ on_problem, NULL, &w };
    ld_logset_options lo = { LD_CAPTURE_AUTO, 0 };
    if (ld_cli_capture_options(lr->cli, &lr->capture, &lo) != 0) return LD_EXIT_TROUBLE;
    w.capture = lo.capture;
    w.max_line = lo.max_line;
    ld_watch_hook_init(&w);
    unsigned flags = LD_PAIR_KEEP_TEXT | LD_PAIR_ERROR_RECORDS |
                     (ld_judge_needs_values(&rep->checks) ? LD_PAIR_KEEP_VALUES : 0);
    int rc = 0;
    if (opts->state_path && !(w.state = ld_watch_state_open(opts->state_path, w.cli->err))) rc = -1;
    ld_watch_state_set_warmup(w.state, opts->state_warmup);
    if (rc == 0) rc = make_pairer(&w, flags);
    if (rc == 0) rc = make_follower(&w, sources, n);
    if (rc == 0) rc = ld_watch_loop(&w, stop);
    lr->pair_stats = w.pairer ? *ld_pairer_stats(w.pairer) : lr->pair_stats;
    if (w.skipped_again)
        fprintf(w.cli->err, "logdiff watch: %llu requests read again after the restart were judged before it: not reported twice\n",
                (unsigned long long)w.skipped_again);
    if (w.warmed)
        fprintf(w.cli->err, "logdiff watch: %llu requests judged before the restart read again for their conversations (--state-warmup)\n",
                (unsigned long long)w.warmed);
    take_down(&w);
    return rc == 0 ? 0 : LD_EXIT_TROUBLE;
}
