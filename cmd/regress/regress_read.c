/* regress_read.c - see regress_read.h: worker threads read inputs into
 * per-input event queues; the calling thread drains them in input order. */
#include "regress_read.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "parse/capture/capture.h"
#include "parse/capture/journal_file.h"
#include "parse/input/input.h"
#include "parse/line/logline.h"
#include "parse/logset.h"

enum { EV_RECORD, EV_MEMBER, EV_PROBLEM, EV_NOTE };

typedef struct ld_cli_regress_event {
    struct ld_cli_regress_event *next;
    int kind;
    ld_request *req;            /* EV_RECORD */
    char *label;                /* EV_RECORD, EV_MEMBER */
    char *name;                 /* EV_MEMBER; EV_PROBLEM: the error's path; EV_NOTE: the note */
    uint64_t lines, request_lines;
    int failed;                 /* EV_MEMBER: an I/O problem came before */
    ld_problem_kind pkind;      /* EV_PROBLEM */
    ld_error error;             /* EV_PROBLEM: path = name */
} ld_cli_regress_event;

typedef struct ld_cli_regress_queue {
    ld_cli_regress_event *head, *tail;
    size_t n_records;
    int done;
} ld_cli_regress_queue;

typedef struct ld_cli_regress_reader {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *const *inputs;
    size_t n, next, current;
    ld_cli_regress_queue *q;
    const ld_pair_options *opts;
    ld_logset_options capture;  /* the capture's kind, the longest line */
    int nomem;
} ld_cli_regress_reader;

typedef struct ld_cli_regress_worker {
    ld_cli_regress_reader *rd;
    size_t index;
    char **paths;
    size_t n_paths;
    int arg_is_dir;
    ld_capture *capture;        /* unwraps and rejoins the current input's lines */
} ld_cli_regress_worker;

static void push(ld_cli_regress_reader *rd, size_t i, ld_cli_regress_event *ev)
{
    pthread_mutex_lock(&rd->mu);
    ld_cli_regress_queue *q = &rd->q[i];
    while (ev->kind == EV_RECORD && i != rd->current && q->n_records >= LD_RG_QUEUE_CAP)
        pthread_cond_wait(&rd->cv, &rd->mu);
    if (q->tail) q->tail->next = ev;
    else q->head = ev;
    q->tail = ev;
    q->n_records += ev->kind == EV_RECORD;
    pthread_cond_broadcast(&rd->cv);
    pthread_mutex_unlock(&rd->mu);
}

static ld_cli_regress_event *new_event(ld_cli_regress_worker *w, int kind)
{
    ld_cli_regress_event *ev = calloc(1, sizeof *ev);
    if (!ev) {
        pthread_mutex_lock(&w->rd->mu);
        w->rd->nomem = 1;
        pthread_mutex_unlock(&w->rd->mu);
        return NULL;
    }
    ev->kind = kind;
    return ev;
}

/* The member inside its input (see ld_cli_regress_member_info.label), malloc'd. */
static char *label_of(const ld_cli_regress_worker *w, const char *member)
{
    const char *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; member && i < w->n_paths; i++) {
        size_t l = strlen(w->paths[i]);
        if (l > best_len && !strncmp(member, w->paths[i], l) &&
            (member[l] == '\0' || member[l] == ':')) {
            best = w->paths[i];
            best_len = l;
        }
    }
    if (!best) return strdup(member ? member : "-");
    if (member[best_len] == ':') return strdup(member + best_len + 1);
    const char *arg = w->rd->inputs[w->index];
    size_t al = strlen(arg);
    if (w->arg_is_dir && !strncmp(best, arg, al)) {
        const char *rest = best + al;
        while (*rest == '/') rest++;
        return strdup(rest);
    }
    const char *slash = strrchr(best, '/');
    return strdup(slash && slash[1] ? slash + 1 : best);
}

static int emit(void *ctx, ld_request *r)
{
    ld_cli_regress_worker *w = ctx;
    ld_cli_regress_event *ev = new_event(w, EV_RECORD);
    if (!ev) return 0;
    const char *member = (r->flags & LD_REQ_ERROR) ? r->error.path : NULL;
    for (int p = 0; p < LD_PART_COUNT && !member; p++)
        if (r->src[p].line) member = r->src[p].member;
    ev->req = r;
    ev->label = label_of(w, member);
    push(w->rd, w->index, ev);
    return LD_PAIR_TAKE;
}

static void problem(ld_cli_regress_worker *w, ld_problem_kind kind, const ld_error *e, const char *name)
{
    ld_cli_regress_event *ev = new_event(w, EV_PROBLEM);
    if (!ev) return;
    ev->pkind = kind;
    ev->error = *e;
    ev->name = strdup(e->path ? e->path : name ? name : "-");
    ev->error.path = ev->name;
    push(w->rd, w->index, ev);
}

static void on_walk_note(void *ctx, const char *msg)
{
    ld_cli_regress_worker *w = ctx;
    ld_cli_regress_event *ev = new_event(w, EV_NOTE);
    if (!ev) return;
    ev->name = strdup(msg);
    push(w->rd, w->index, ev);
}

static void member_end(ld_cli_regress_worker *w, const char *name, uint64_t lines, uint64_t reqs, int failed)
{
    ld_cli_regress_event *ev = new_event(w, EV_MEMBER);
    if (!ev) return;
    ev->name = strdup(name);
    ev->label = label_of(w, name);
    ev->lines = lines;
    ev->request_lines = reqs;
    ev->failed = failed;
    push(w->rd, w->index, ev);
}

/* the logset's problem hook: capture problems become events */
static void on_capture_problem(void *ctx, ld_problem_kind kind, const ld_error *e)
{
    if (kind != LD_PROBLEM_LINE) problem(ctx, kind, e, NULL); /* bad lines become records */
}

/* Reads the current member to its end or its first I/O error, its lines
 * unwrapped from their capture and rejoined. */
static void read_member(ld_cli_regress_worker *w, ld_input *in, ld_linereader *lr, ld_pairer *p)
{
    const char *member = ld_input_member_name(in);
    const ld_pair_stats *ps = ld_pairer_stats(p);
    uint64_t req0 = ps->request_lines + ps->errors, lines = 0;
    int failed = 0;
    ld_logset_hooks hooks = { on_capture_problem, NULL, w };
    ld_capture_reset(w->capture);
    for (;;) {
        ld_line line;
        int has = 0;
        ld_error e;
        ld_error_clear(&e);
        ld_status st = ld_linereader_next(lr, &line, &has, &e);
        if (st == LD_ERR_LIMIT) { problem(w, LD_PROBLEM_CAPTURE, &e, member); continue; }
        if (st != LD_OK) { problem(w, LD_PROBLEM_IO, &e, member); failed = 1; break; }
        if (!has) break;
        lines++;
        if (ld_logset_feed(w->capture, p, member, &line, &hooks) != LD_OK) {
            e.code = LD_ERR_NOMEM;
            snprintf(e.msg, sizeof e.msg, "out of memory rejoining a line");
            problem(w, LD_PROBLEM_IO, &e, member);
            failed = 1;
            break;
        }
    }
    ld_logset_drain(w->capture, p, member, &hooks);
    member_end(w, member, lines, ps->request_lines + ps->errors - req0, failed);
}

/* A journal file (journald's own *.journal) entry by entry: the file at
 * `path`, or when `in` is given, its current member (a tar of
 * /var/log/journal), named `name`. */
static void read_journal(ld_cli_regress_worker *w, const char *path, ld_input *in, ld_pairer *p)
{
    const ld_pair_stats *ps = ld_pairer_stats(p);
    uint64_t req0 = ps->request_lines + ps->errors, entries = 0, bytes = 0;
    ld_logset_hooks hooks = { on_capture_problem, NULL, w };
    const char *name = in ? ld_input_member_name(in) : path;
    ld_status st = in ? ld_logset_journal_member_read(w->capture, p, in, &hooks, &entries, &bytes)
                      : ld_logset_journal_file(w->capture, p, path, &hooks, &entries, &bytes);
    if (st == LD_ERR_NOMEM) {
        ld_error e;
        ld_error_clear(&e);
        e.code = LD_ERR_NOMEM;
        snprintf(e.msg, sizeof e.msg, "out of memory reading a journal file");
        problem(w, LD_PROBLEM_IO, &e, name);
    }
    member_end(w, name, entries, ps->request_lines + ps->errors - req0, st != LD_OK);
}

/* Every member of one opened file. */
static void read_file(ld_cli_regress_worker *w, ld_input *in, ld_pairer *p)
{
    ld_linereader *lr = NULL;
    ld_error e;
    ld_error_clear(&e);
    if (ld_linereader_new(in, w->rd->capture.max_line, &lr, &e) != LD_OK) { problem(w, LD_PROBLEM_IO, &e, NULL); return; }
    int failures = 0;
    for (;;) {
        if (ld_logset_journal_member(in)) read_journal(w, NULL, in, p);
        else read_member(w, in, lr, p);
        int has = 0;
        ld_error_clear(&e);
        while (ld_input_next_member(in, &has, &e) != LD_OK) {
            problem(w, LD_PROBLEM_IO, &e, ld_input_member_name(in));
            ld_error_clear(&e);
            /* libarchive cannot always resynchronise after a bad header */
            if (++failures >= 16) { has = 0; break; }
        }
        if (!has) break;
        ld_linereader_reset(lr);
    }
    ld_linereader_free(lr);
}

static void read_one_input(ld_cli_regress_worker *w)
{
    const char *arg = w->rd->inputs[w->index];
    struct stat st;
    w->arg_is_dir = strcmp(arg, "-") && stat(arg, &st) == 0 && S_ISDIR(st.st_mode);
    ld_error e;
    ld_error_clear(&e);
    ld_pairer *p = NULL;
    ld_pair_options o = *w->rd->opts;
    if (!o.max_open) o.max_open = 1 << 16; /* as logdiff diff: see logread.c */
    if (ld_logset_expand_noted(&arg, 1, on_walk_note, w, &w->paths, &w->n_paths, &e) != LD_OK ||
        ld_pairer_new(&o, emit, w, &p, &e) != LD_OK ||
        ld_capture_new(w->rd->capture.capture, w->rd->capture.max_line, &w->capture, &e) != LD_OK) {
        problem(w, LD_PROBLEM_IO, &e, arg);
        ld_pairer_free(p);
        ld_logset_free_paths(w->paths, w->n_paths);
        return;
    }
    for (size_t i = 0; i < w->n_paths; i++) {
        if (ld_journal_file_is(w->paths[i])) {
            read_journal(w, w->paths[i], NULL, p);
            continue;
        }
        ld_input *in = NULL;
        ld_error_clear(&e);
        if (ld_input_open(w->paths[i], &in, &e) != LD_OK) {
            problem(w, LD_PROBLEM_IO, &e, w->paths[i]);
            continue;
        }
        read_file(w, in, p);
        ld_input_close(in);
    }
    ld_error_clear(&e);
    if (ld_pairer_finish(p, &e) != LD_OK) problem(w, LD_PROBLEM_IO, &e, arg);
    ld_pairer_free(p);
    ld_capture_free(w->capture);
    w->capture = NULL;
    ld_logset_free_paths(w->paths, w->n_paths);
}

static void *worker_main(void *arg)
{
    ld_cli_regress_reader *rd = arg;
    for (;;) {
        pthread_mutex_lock(&rd->mu);
        size_t i = rd->next < rd->n ? rd->next++ : rd->n;
        pthread_mutex_unlock(&rd->mu);
        if (i == rd->n) return NULL;
        ld_cli_regress_worker w = { rd, i, NULL, 0, 0, NULL };
        read_one_input(&w);
        pthread_mutex_lock(&rd->mu);
        rd->q[i].done = 1;
        pthread_cond_broadcast(&rd->cv);
        pthread_mutex_unlock(&rd->mu);
    }
}

static void deliver(const ld_cli_regress_sink *sink, size_t i, ld_cli_regress_event *ev)
{
    if (ev->kind == EV_RECORD) {
        sink->on_record(sink->ctx, i, ev->req, ev->label);
    } else if (ev->kind == EV_MEMBER) {
        ld_cli_regress_member_info m = { ev->name, ev->label, ev->lines, ev->request_lines, NULL };
        ld_error e;
        ld_error_clear(&e);
        if (ev->failed) { e.code = LD_ERR_IO; e.path = ev->name; m.error = &e; }
        sink->on_member(sink->ctx, i, &m);
    } else if (ev->kind == EV_NOTE) {
        if (sink->on_note && ev->name) sink->on_note(sink->ctx, i, ev->name);
    } else {
        sink->on_problem(sink->ctx, i, ev->pkind, &ev->error);
    }
    free(ev->label);
    free(ev->name);
    free(ev);
}

/* Drains input i's queue until its worker is done with it. */
static void drain(ld_cli_regress_reader *rd, size_t i, const ld_cli_regress_sink *sink)
{
    for (;;) {
        pthread_mutex_lock(&rd->mu);
        ld_cli_regress_queue *q = &rd->q[i];
        while (!q->head && !q->done) pthread_cond_wait(&rd->cv, &rd->mu);
        ld_cli_regress_event *ev = q->head;
        if (ev) {
            q->head = ev->next;
            if (!q->head) q->tail = NULL;
            q->n_records -= ev->kind == EV_RECORD;
            pthread_cond_broadcast(&rd->cv);
        }
        pthread_mutex_unlock(&rd->mu);
        if (!ev) return;
        deliver(sink, i, ev);
    }
}

int ld_cli_regress_read_inputs(char *const *inputs, size_t n, int jobs, const ld_pair_options *opts,
                               const ld_logset_options *capture, const ld_cli_regress_sink *sink,
                               ld_error *err)
{
    ld_cli_regress_reader rd = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, inputs, n, 0, 0,
                     calloc(n ? n : 1, sizeof(ld_cli_regress_queue)), opts, *capture, 0 };
    size_t n_threads = (size_t)(jobs < 1 ? 1 : jobs) < n ? (size_t)(jobs < 1 ? 1 : jobs) : n;
    pthread_t *th = calloc(n_threads ? n_threads : 1, sizeof *th);
    size_t started = 0;
    /* the line recogniser's regexes are compiled on first use: do it here,
     * before several threads could race to (logline.h) */
    if (ld_logline_init(err) != LD_OK) n_threads = 0;
    if (rd.q && th)
        while (started < n_threads && pthread_create(&th[started], NULL, worker_main, &rd) == 0)
            started++;
    if (!started && n) {
        free(rd.q);
        free(th);
        LD_FAIL(err, LD_ERR_NOMEM, 0, "cannot start reader threads");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        drain(&rd, i, sink);
        pthread_mutex_lock(&rd.mu);
        rd.current = i + 1;
        pthread_cond_broadcast(&rd.cv);
        pthread_mutex_unlock(&rd.mu);
    }
    for (size_t t = 0; t < started; t++) pthread_join(th[t], NULL);
    free(th);
    free(rd.q);
    if (rd.nomem) {
        LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory reading the inputs");
        return -1;
    }
    return 0;
}
