/* watch_files.c - what logdiff watch does with each file the follower
 * reads: a capture of its own (the lines unwrapped from Docker, journald,
 * CRI... and rejoined, as diff reads a member), its lines into the one
 * pairer, and a word on stderr when a source rotates, is cut short or
 * goes away. */
#include <stdlib.h>
#include <string.h>

#include "cmd/watch/watch_internal.h"

#include "cmd/watch/watch_state.h"

typedef ld_watch_file watch_file;

static ld_status on_line(void *ctx, ld_follow_file *file, const ld_line *line)
{
    ld_watch *w = ctx;
    watch_file *wf = file->user;
    if (!wf || w->closing) return LD_OK; /* no capture: said at OPENED */
    if (w->state) ld_watch_marks_line(&wf->marks, w->opts.state_warmup, line->offset, line->lineno);
    ld_status st = ld_logset_feed(wf->capture, w->pairer, file->path, line, &w->hooks);
    uint64_t now = ld_capture_stats_of(wf->capture)->rejoined_lines;
    w->rejoined += now - wf->rejoined;
    wf->rejoined = now;
    return st;
}

static void opened(ld_watch *w, ld_follow_file *file)
{
    watch_file *wf = calloc(1, sizeof *wf);
    ld_error e;
    ld_error_clear(&e);
    if (!wf || ld_capture_new(w->capture, w->max_line, &wf->capture, &e) != LD_OK) {
        fprintf(w->cli->err, "logdiff watch: %s: out of memory for its capture: not read\n", file->path);
        free(wf);
        return;
    }
    file->user = wf;
    ld_watch_warmup_opened(w->state, file);
}

static void closed(ld_watch *w, ld_follow_file *file)
{
    watch_file *wf = file->user;
    if (!wf) return;
    if (!w->closing) ld_logset_drain(wf->capture, w->pairer, file->path, &w->hooks);
    w->rejoined += ld_capture_stats_of(wf->capture)->rejoined_lines - wf->rejoined;
    ld_capture_free(wf->capture);
    ld_watch_marks_release(&wf->marks);
    free(wf);
    file->user = NULL;
}

/* the metrics' name of an event that people hear of */
static const char *event_name(ld_follow_event ev)
{
    switch (ev) {
    case LD_FOLLOW_ROTATED: return "rotated";
    case LD_FOLLOW_TRUNCATED: return "truncated";
    case LD_FOLLOW_GONE: return "gone";
    case LD_FOLLOW_ENDED: return "ended";
    case LD_FOLLOW_PROBLEM: return "problem";
    default: return NULL;
    }
}

static void on_event(void *ctx, ld_follow_event ev, ld_follow_file *file, const char *msg, const ld_error *err)
{
    ld_watch *w = ctx;
    if (ev == LD_FOLLOW_OPENED) opened(w, file);
    else if (ev == LD_FOLLOW_TRUNCATED) ld_watch_warmup_truncated(w->state, file);
    else if (ev == LD_FOLLOW_CLOSED) closed(w, file);
    const char *name = event_name(ev);
    if (name && w->metrics) ld_metrics_event(w->metrics, name);
    if (ev == LD_FOLLOW_PROBLEM && err) /* counted and said as the captures' and the pairer's are */
        w->hooks.on_problem(w->hooks.ctx, err->code == LD_ERR_LIMIT ? LD_PROBLEM_CAPTURE : LD_PROBLEM_IO, err);
    else if ((name || ev == LD_FOLLOW_OPENED || ev == LD_FOLLOW_NOTE) && msg) {
        fprintf(w->cli->err, "logdiff watch: %s\n", msg); /* the follower's sentence names the path */
    }
}

ld_follow_hooks ld_watch_follow_hooks_for(ld_watch *w)
{
    ld_follow_hooks h = { on_line, on_event, w };
    return h;
}
