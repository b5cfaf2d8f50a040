/* watch_loop.c - logdiff watch's loop: follow, unwrap, pair, judge, expire,
 * count, save (watch.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/watch/watch.h"
#include "cmd/watch/watch_internal.h"
#include "cmd/watch/watch_journal.h"
#include "cmd/watch/watch_state.h"

double ld_watch_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* the pairer's clock: milliseconds since the loop began */
static uint64_t clock_ms(const ld_watch *w)
{
    return (uint64_t)((ld_watch_monotonic() - w->t0) * 1000.0);
}

/* a request out of the pairer: judged and reported unless the saved state
 * says it was before the restart */
static int on_request(void *ctx, ld_request *r)
{
    ld_watch *w = ctx;
    ld_warm_kind warm = ld_watch_warmup_kind(w->state, r);
    if (warm == LD_WARM_FEED) w->warmed++;
    if (warm == LD_WARM_FEED) return ld_cli_diff_report_feed(w->rep, r); /* judged before the restart */
    if (warm == LD_WARM_DROP) return 0;
    int before = ld_watch_state_was_judged(w->state, r);
    ld_watch_state_note_judged(w->state, r); /* kept until its lines are behind the saved positions */
    if (before) {
        w->skipped_again++;
        return 0;
    }
    return ld_cli_diff_report_request(w->rep, r);
}

static void on_judged(void *ctx, const ld_request *r, const ld_verdict *v)
{
    ld_watch *w = ctx;
    w->emitted_since_flush++;
    if (!w->metrics) return;
    uint64_t bytes = r->prompt.bytes ? r->prompt.len : 0;
    uint64_t msgs = r->n_messages > 0 ? (uint64_t)r->n_messages : 0;
    ld_metrics_judged(w->metrics, v->verdict, bytes, msgs, ld_metrics_now());
    static const char *const sev[] = { "info", "error" };
    for (size_t i = 0; i < v->findings.n; i++)
        ld_metrics_finding(w->metrics, v->findings.v[i].kind, sev[v->findings.v[i].severity == LD_SEV_ERROR]);
}

/* the pairer's and the captures' counters since the last call, into the metrics */
static void count_lines(ld_watch *w)
{
    const ld_pair_stats *s = ld_pairer_stats(w->pairer);
    if (w->metrics) {
        ld_metrics_lines(w->metrics, "parsed", s->request_lines - w->counted.request_lines);
        ld_metrics_lines(w->metrics, "skipped", s->skipped - w->counted.skipped);
        ld_metrics_lines(w->metrics, "error", s->errors - w->counted.errors);
        ld_metrics_capture(w->metrics, w->rejoined - w->rejoined_counted, s->cut_lines - w->counted.cut_lines);
    }
    w->rejoined_counted = w->rejoined;
    w->counted = *s;
}

static void update_gauges(ld_watch *w)
{
    if (!w->metrics) return;
    ld_conv_stats cs;
    ld_differ_conv_stats(w->rep->differ, &cs);
    ld_metrics_gauges(w->metrics, ld_pairer_stats(w->pairer)->open, cs.conversations);
}

static void write_textfile(ld_watch *w, int force)
{
    if (!w->metrics || !w->opts.metrics_textfile) return;
    double now = ld_watch_monotonic();
    if (!force && now - w->textfile_at < w->opts.textfile_interval) return;
    w->textfile_at = now;
    ld_error e;
    ld_error_clear(&e);
    if (ld_metrics_write_textfile(w->metrics, w->opts.metrics_textfile, ld_metrics_now(), &e) != 0 &&
        !w->textfile_failed) {
        fprintf(w->cli->err, "logdiff watch: %s (the metrics textfile; going on)\n", e.msg);
        w->textfile_failed = 1; /* said once; tried again each time */
    }
}

/* One round: what the sources have, the requests that waited too long, the
 * counters, the state.  *out_bytes: bytes read (0: quiet). */
static int one_round(ld_watch *w, uint64_t *out_bytes)
{
    ld_error e;
    ld_error_clear(&e);
    ld_pairer_set_clock(w->pairer, clock_ms(w));
    ld_status st = ld_follow_poll(w->follow, out_bytes, &e);
    if (st != LD_OK) {
        fprintf(w->cli->err, "logdiff watch: %s\n", e.msg);
        return -1;
    }
    if (ld_watch_journals_poll(w, out_bytes) != 0) return -1;
    uint64_t wait_ms = (uint64_t)(w->opts.unpaired_after * 1000.0);
    uint64_t now = clock_ms(w);
    if (now > wait_ms) ld_pairer_expire(w->pairer, now - wait_ms);
    if (w->metrics) ld_metrics_bytes(w->metrics, *out_bytes);
    count_lines(w);
    update_gauges(w);
    write_textfile(w, 0);
    double now_s = ld_watch_monotonic();
    if (w->state && ld_watch_state_save_due(w->state, now_s))
        ld_watch_state_save(w->state, w->follow, w->journals, w->n_journals, w->pairer, now_s,
                            w->cli->err); /* said; going on */
    if ((w->emitted_since_flush || *out_bytes) && fflush(w->cli->out) != 0) {
        /* the reader of the verdicts went away (a closed pipe): nothing to go on for */
        fprintf(w->cli->err, "logdiff watch: cannot write the verdicts: %s\n", strerror(errno));
        return -1;
    }
    w->emitted_since_flush = 0;
    return 0;
}

/* The end: with a state file the open requests wait for the next run (their
 * lines are read again from the saved positions); without one, or when the
 * sources ended, they are judged now as unpaired, as diff does at the end. */
static int finish(ld_watch *w, int sources_ended)
{
    ld_error e;
    ld_error_clear(&e);
    int rc = 0;
    if (w->state && ld_watch_state_save(w->state, w->follow, w->journals, w->n_journals, w->pairer,
                                        ld_watch_monotonic(), w->cli->err) != 0)
        rc = -1;
    if (!w->state || sources_ended) {
        /* the sources closed first: their captures' last lines into the pairer */
        ld_follow_free(w->follow);
        w->follow = NULL;
        ld_watch_journals_close(w);
        ld_pairer_finish(w->pairer, &e);
    }
    count_lines(w);
    update_gauges(w);
    write_textfile(w, 1);
    fflush(w->cli->out);
    return rc;
}

int ld_watch_loop(ld_watch *w, volatile sig_atomic_t *stop)
{
    int ended = 0;
    while (!*stop) {
        uint64_t bytes = 0;
        if (one_round(w, &bytes) != 0) return -1;
        if (!ld_follow_live(w->follow) && !w->n_journals) { /* a journal never ends */
            ended = 1;
            break;
        }
        /* quiet: the poll interval, or less when a journal changes */
        if (!bytes && !*stop) ld_watch_journals_wait(w, w->opts.poll_interval);
    }
    return finish(w, ended);
}

int ld_watch_parse_duration(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v)) return -1;
    double unit = 1;
    if (*end == 's') end++;
    else if (*end == 'm') unit = 60, end++;
    else if (*end == 'h') unit = 3600, end++;
    if (*end) return -1;
    v *= unit;
    if (v < 0.01 || v > 7 * 86400.0) return -1;
    *out = v;
    return 0;
}

/* hooks handed on */
void ld_watch_hook_init(ld_watch *w)
{
    w->rep->on_judged = on_judged;
    w->rep->on_judged_ctx = w;
    w->emit = on_request;
}
