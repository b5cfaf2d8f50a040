/* watch_journal.c - logdiff watch's journald sources (watch_journal.h):
 * opened where the state or the options say, read a bounded amount a round
 * into the pairer, waited on, closed; their marks for the state. */
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/watch/watch_cursors.h"
#include "cmd/watch/watch_internal.h"
#include "cmd/watch/watch_journal.h"
#include "parse/capture/journal_follow.h"

#define ROUND_BYTES ((uint64_t)4 << 20) /* MESSAGE bytes a source reads in a round, as a file's */
#define ROUND_ENTRIES 65536

struct ld_watch_journal {
    char *name;                 /* the source as given ("journal:UNIT"), owned */
    ld_journal_follow *jf;      /* owned */
    ld_capture *capture;        /* owned: journald's split lines rejoined */
    uint64_t next;              /* the number the next entry read gets */
    uint64_t first;             /* the number of this run's first entry */
    ld_watch_journal_mark base; /* where this run began (its cursor owned) */
    ld_watch_cursors *cursors;  /* owned; NULL without --state */
    uint64_t rejoined;          /* the capture's rejoined lines when last counted */
    int failing;                /* the last read failed (said once) */
};

const char *ld_watch_journal_name(const ld_watch_journal *j)
{
    return j->name;
}

static void journal_free(ld_watch_journal *j)
{
    if (!j) return;
    ld_journal_follow_close(j->jf);
    ld_capture_free(j->capture);
    ld_watch_cursors_free(j->cursors);
    free(j->base.cursor);
    free(j->name);
    free(j);
}

/* positioned at the saved mark, else the head or (from_end) the tail */
static ld_status journal_start(ld_watch_journal *j, const ld_watch_journal_mark *saved, int from_end, ld_error *e)
{
    j->base.after = 1;
    if (saved && saved->cursor) {
        LD_TRY(ld_journal_follow_seek(j->jf, saved->after ? LD_JOURNAL_AFTER_CURSOR : LD_JOURNAL_AT_CURSOR,
                                      saved->cursor, e));
        j->base = *saved;
        if (!(j->base.cursor = strdup(saved->cursor))) return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory");
    } else if (from_end) {
        LD_TRY(ld_journal_follow_seek(j->jf, LD_JOURNAL_TAIL, NULL, e));
        ld_journal_follow_cursor(j->jf, &j->base.cursor, NULL); /* NULL: an empty journal */
    }
    j->next = j->first = j->base.after ? j->base.entry + 1 : j->base.entry;
    return LD_OK;
}

static ld_status journal_open(ld_watch *w, ld_watch_journal *j, const ld_watch_journal_mark *saved, ld_error *e)
{
    const char *unit = j->name + strlen(LD_WATCH_JOURNAL_PREFIX);
    LD_TRY(ld_journal_follow_open(unit, w->opts.journal_dir, &j->jf, e));
    LD_TRY(ld_capture_new(LD_CAPTURE_JOURNAL_FILE, w->max_line, &j->capture, e));
    if (w->state && !(j->cursors = ld_watch_cursors_new())) return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory");
    return journal_start(j, saved, w->opts.from_end, e);
}

static void say_following(ld_watch *w, const ld_watch_journal *j)
{
    const char *dir = w->opts.journal_dir;
    fprintf(w->cli->err, "logdiff watch: %s: following unit '%s' in %s%s\n", j->name, ld_journal_follow_unit(j->jf),
            dir ? "the journal files of " : "the system journal", dir ? dir : "");
    if (!ld_journal_follow_has_files(j->jf))
        fprintf(w->cli->err, "logdiff watch: %s: no journal file can be read yet (%s%s): waiting for one\n", j->name,
                dir ? "none in " : "a user must be in group systemd-journal or adm to read the system's",
                dir ? dir : "");
}

static int journal_append(ld_watch *w, ld_watch_journal *j)
{
    ld_watch_journal **v = realloc(w->journals, (w->n_journals + 1) * sizeof *v);
    if (!v) return -1;
    w->journals = v;
    w->journals[w->n_journals++] = j;
    return 0;
}

int ld_watch_journal_add(ld_watch *w, const char *source, const ld_watch_journal_mark *saved)
{
    ld_error e;
    ld_error_clear(&e);
    for (size_t i = 0; i < w->n_journals; i++)
        if (!strcmp(w->journals[i]->name, source)) {
            fprintf(w->cli->err, "logdiff watch: %s: given twice\n", source);
            return -1;
        }
    ld_watch_journal *j = calloc(1, sizeof *j);
    ld_status st = j && (j->name = strdup(source)) ? journal_open(w, j, saved, &e)
                                                    : LD_FAIL(&e, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK && journal_append(w, j) != 0) st = LD_FAIL(&e, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK) {
        say_following(w, j);
        return 0;
    }
    if (st == LD_ERR_USAGE && saved && saved->cursor)
        fprintf(w->cli->err, "logdiff watch: state %s: %s: %s: not reused; move it away to start afresh\n",
                w->opts.state_path, source, e.msg);
    else fprintf(w->cli->err, "logdiff watch: %s: %s\n", source, e.msg);
    journal_free(j);
    return -1;
}

/* ------------------------------------------------------------ reading */

/* a problem of the journal itself, named after the source; one that goes
 * on round after round (a read that keeps failing) is said once */
static void journal_problem(ld_watch *w, ld_watch_journal *j, ld_problem_kind kind, ld_error *e, uint64_t entry)
{
    int again = kind == LD_PROBLEM_IO && j->failing;
    j->failing = kind == LD_PROBLEM_IO;
    if (again) return;
    e->path = j->name;
    e->line = entry;
    w->hooks.on_problem(w->hooks.ctx, kind, e);
    if (w->metrics) ld_metrics_event(w->metrics, "problem");
}

/* entry n's cursor kept for the state (out of memory: a restart at it reads earlier) */
static void note_cursor(ld_watch_journal *j, uint64_t n)
{
    char *c = NULL;
    if (j->cursors && ld_journal_follow_cursor(j->jf, &c, NULL) == LD_OK) ld_watch_cursors_add(j->cursors, n, c);
}

/* One entry into the pairer; *has = 0 when there was none. */
static ld_status journal_entry(ld_watch *w, ld_watch_journal *j, uint64_t *bytes, int *has)
{
    ld_capture_record rec;
    ld_error e;
    ld_error_clear(&e);
    ld_status rs = ld_journal_follow_next(j->jf, &rec, has, &e);
    if (!*has) return LD_OK; /* nothing yet */
    if (rs != LD_OK && rs != LD_ERR_TRUNCATED) { /* tried again next round */
        journal_problem(w, j, LD_PROBLEM_IO, &e, j->next);
        *has = 0;
        return LD_OK;
    }
    uint64_t n = j->next++;
    j->failing = 0;
    if (rs == LD_ERR_TRUNCATED) journal_problem(w, j, LD_PROBLEM_CAPTURE, &e, n);
    *bytes += rec.len;
    ld_line at = { 0 };
    at.lineno = n;
    /* the record first: asking for the cursor may move what its text borrows */
    ld_status st = ld_logset_feed_record(j->capture, w->pairer, j->name, &at, &rec, &w->hooks);
    note_cursor(j, n);
    return st;
}

static int journal_poll(ld_watch *w, ld_watch_journal *j, uint64_t *out_bytes)
{
    ld_error e;
    ld_error_clear(&e);
    if (ld_journal_follow_process(j->jf, &e) != LD_OK) journal_problem(w, j, LD_PROBLEM_IO, &e, 0);
    uint64_t bytes = 0;
    int has = 1;
    for (int k = 0; has && k < ROUND_ENTRIES && bytes < ROUND_BYTES; k++)
        if (journal_entry(w, j, &bytes, &has) != LD_OK) {
            fprintf(w->cli->err, "logdiff watch: %s: out of memory\n", j->name);
            return -1;
        }
    uint64_t now = ld_capture_stats_of(j->capture)->rejoined_lines;
    w->rejoined += now - j->rejoined;
    j->rejoined = now;
    *out_bytes += bytes;
    return 0;
}

int ld_watch_journals_poll(ld_watch *w, uint64_t *out_bytes)
{
    for (size_t i = 0; i < w->n_journals; i++)
        if (journal_poll(w, w->journals[i], out_bytes) != 0) return -1;
    return 0;
}

void ld_watch_journals_wait(ld_watch *w, double seconds)
{
    struct pollfd fds[64];
    nfds_t n = 0;
    for (size_t i = 0; i < w->n_journals && n < 64; i++) {
        int fd = ld_journal_follow_fd(w->journals[i]->jf);
        if (fd >= 0) fds[n++] = (struct pollfd){ fd, POLLIN, 0 };
    }
    if (n) {
        poll(fds, n, (int)ceil(seconds * 1000.0)); /* a signal ends it (EINTR): the loop looks at *stop */
        return;
    }
    struct timespec ts = { (time_t)seconds, (long)((seconds - floor(seconds)) * 1e9) };
    nanosleep(&ts, NULL);
}

void ld_watch_journals_close(ld_watch *w)
{
    for (size_t i = 0; i < w->n_journals; i++) {
        ld_watch_journal *j = w->journals[i];
        if (!w->closing) ld_logset_drain(j->capture, w->pairer, j->name, &w->hooks);
        w->rejoined += ld_capture_stats_of(j->capture)->rejoined_lines - j->rejoined;
        journal_free(j);
    }
    free(w->journals);
    w->journals = NULL;
    w->n_journals = 0;
}

/* ------------------------------------------------------------ the state's mark */

typedef struct needed {
    ld_watch_journal *j;
    uint64_t lo;
} needed;

/* a line waiting for its last piece: read again from its first */
static void keep_pending(void *ctx, uint64_t lineno, uint64_t offset)
{
    needed *n = ctx;
    (void)offset;
    ld_watch_journal_keep(n->j, lineno);
    if (lineno < n->lo) n->lo = lineno;
}

uint64_t ld_watch_journal_first_needed(ld_watch_journal *j)
{
    needed n = { j, j->next };
    ld_capture_each_pending(j->capture, keep_pending, &n);
    return n.lo;
}

void ld_watch_journal_keep(ld_watch_journal *j, uint64_t entry)
{
    if (j->cursors) ld_watch_cursors_keep(j->cursors, entry);
}

/* *out: a copy of m */
static int mark_copy(const ld_watch_journal_mark *m, ld_watch_journal_mark *out)
{
    *out = *m;
    out->cursor = m->cursor ? strdup(m->cursor) : NULL;
    return m->cursor && !out->cursor ? -1 : 0;
}

int ld_watch_journal_mark_at(ld_watch_journal *j, uint64_t from, ld_watch_journal_mark *out, uint64_t *start)
{
    uint64_t last = j->next - 1, at = 0; /* the last entry read (when next > first) */
    const char *c = NULL;
    ld_watch_journal_mark m = j->base;
    if (j->cursors && from >= j->next && j->next > j->first) c = ld_watch_cursors_find(j->cursors, last, &at);
    else if (j->cursors && from < j->next) c = ld_watch_cursors_find(j->cursors, from, &at);
    if (c && at >= j->first) m = (ld_watch_journal_mark){ (char *)c, at, from >= j->next && at == last };
    *start = m.after ? m.entry + 1 : m.entry;
    int rc = mark_copy(&m, out);
    /* the cursors a later save may need: the kept ones (waiting lines' and
     * requests'), the last read */
    if (j->cursors) ld_watch_cursors_prune(j->cursors, last);
    return rc;
}
