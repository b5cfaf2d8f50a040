/* logset.c - see logset.h. */
#include "logset.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse/capture/journal_file.h"
#include "parse/input/input.h"

/* ------------------------------------------------------------ paths */

typedef struct path_list {
    char **v;
    size_t n, cap;
} path_list;

static int push_path(path_list *l, const char *p)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(p))) return -1;
    l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory walk: the files found, and every file and directory met so
 * far by device and inode, so that a symlink loop or a second link to the
 * same place is not followed (linear lookups: log trees hold few entries). */
typedef struct node_id { dev_t dev; ino_t ino; } node_id;

typedef struct walk {
    path_list out;
    node_id *seen;          /* directories walked and files listed */
    char **seen_path;       /* the path each was first met by */
    size_t n_seen, cap_seen;
    ld_logset_note_fn note;
    void *ctx;
} walk;

/* The path `id` was first met by, or NULL. */
static const char *seen_before(const walk *w, const struct stat *st)
{
    for (size_t i = 0; i < w->n_seen; i++)
        if (w->seen[i].dev == st->st_dev && w->seen[i].ino == st->st_ino) return w->seen_path[i];
    return NULL;
}

static int remember(walk *w, const struct stat *st, const char *path)
{
    if (w->n_seen == w->cap_seen) {
        size_t cap = w->cap_seen ? w->cap_seen * 2 : 32;
        node_id *s = realloc(w->seen, cap * sizeof *s);
        if (s) w->seen = s;
        char **p = s ? realloc(w->seen_path, cap * sizeof *p) : NULL;
        if (!p) return -1;
        w->seen_path = p;
        w->cap_seen = cap;
    }
    if (!(w->seen_path[w->n_seen] = strdup(path))) return -1;
    w->seen[w->n_seen++] = (node_id){ st->st_dev, st->st_ino };
    return 0;
}

static void say(walk *w, const char *fmt, const char *a, const char *b)
{
    char msg[1024];
    if (!w->note) return;
    snprintf(msg, sizeof msg, fmt, a, b);
    w->note(w->ctx, msg);
}

/* The entries of `dir` (hidden ones aside), sorted by name, into *names. */
static int list_dir(DIR *d, const char *dir, path_list *names)
{
    struct dirent *e;
    const char *sep = dir[strlen(dir) - 1] == '/' ? "" : "/";
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *full = malloc(len);
        if (!full) return -1;
        snprintf(full, len, "%s%s%s", dir, sep, e->d_name);
        int rc = push_path(names, full);
        free(full);
        if (rc) return -1;
    }
    if (names->n) qsort(names->v, names->n, sizeof *names->v, cmp_str);
    return 0;
}

static int walk_dir(walk *w, const char *dir);

/* One entry of a directory: a file listed once, a directory walked once. */
static int walk_entry(walk *w, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))) return 0;
    const char *first = seen_before(w, &st);
    if (first && S_ISDIR(st.st_mode)) {
        say(w, "%s leads back to %s (a symbolic link loop or a second link): not walked again",
            path, first);
        return 0;
    }
    if (first) {
        say(w, "%s is the same file as %s: read once", path, first);
        return 0;
    }
    if (remember(w, &st, path)) return -1;
    return S_ISDIR(st.st_mode) ? walk_dir(w, path) : push_path(&w->out, path);
}

static int is_link(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

/* Symbolic links after the other entries, each kept in name order. */
static int links_last(path_list *names)
{
    char **v = malloc((names->n ? names->n : 1) * sizeof *v);
    if (!v) return -1;
    size_t k = 0, last = names->n;
    for (size_t i = 0; i < names->n; i++) { /* links fill v from the end, reversed */
        if (is_link(names->v[i])) v[--last] = names->v[i];
        else v[k++] = names->v[i];
    }
    for (size_t a = last, b = names->n; a + 1 < b; a++, b--) {
        char *t = v[a];
        v[a] = v[b - 1];
        v[b - 1] = t;
    }
    free(names->v);
    names->v = v;
    names->cap = names->n;
    return 0;
}

/* Appends the regular files under `dir`, sorted, depth-first; symbolic links
 * after the rest, so that what two paths reach is named by the real one. */
static int walk_dir(walk *w, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return push_path(&w->out, dir); /* reported when opened */
    path_list names = { 0 };
    int rc = list_dir(d, dir, &names);
    closedir(d);
    if (rc == 0) rc = links_last(&names);
    for (size_t i = 0; i < names.n && rc == 0; i++) rc = walk_entry(w, names.v[i]);
    ld_logset_free_paths(names.v, names.n);
    return rc;
}

ld_status ld_logset_expand_noted(const char *const *paths, size_t n, ld_logset_note_fn note,
                                 void *ctx, char ***out_paths, size_t *out_n, ld_error *err)
{
    walk w = { .note = note, .ctx = ctx };
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct stat st;
        if (strcmp(paths[i], "-") != 0 && stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode))
            rc = walk_entry(&w, paths[i]);
        else
            rc = push_path(&w.out, paths[i]);
    }
    ld_logset_free_paths(w.seen_path, w.n_seen);
    free(w.seen);
    if (rc != 0) {
        ld_logset_free_paths(w.out.v, w.out.n);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory listing inputs");
    }
    *out_paths = w.out.v;
    *out_n = w.out.n;
    return LD_OK;
}

ld_status ld_logset_expand(const char *const *paths, size_t n,
                           char ***out_paths, size_t *out_n, ld_error *err)
{
    return ld_logset_expand_noted(paths, n, NULL, NULL, out_paths, out_n, err);
}

void ld_logset_free_paths(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

uint64_t ld_logset_total_bytes(char *const *paths, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (strcmp(paths[i], "-") != 0 && stat(paths[i], &st) == 0 &&
            S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    return total;
}

/* ------------------------------------------------------------ reading */

typedef struct run_state {
    ld_pairer *pairer;
    const ld_logset_hooks *hooks;
    ld_logset_stats *stats;
    ld_capture *capture;
    size_t max_line;      /* 0: the line reader's default */
    uint64_t done_before; /* bytes of inputs finished before this one */
    uint64_t total;
    uint64_t lines_since_progress;
    ld_logset_hooks counting; /* count_problem over this state */
} run_state;

static void problem(run_state *s, ld_problem_kind kind, const ld_error *e)
{
    if (kind == LD_PROBLEM_IO) s->stats->io_errors++;
    else if (kind == LD_PROBLEM_CAPTURE) s->stats->capture_problems++;
    else s->stats->line_errors++;
    if (e && e->code == LD_ERR_LIMIT) s->stats->over_limit++;
    if (s->hooks && s->hooks->on_problem)
        s->hooks->on_problem(s->hooks->ctx, kind, e);
}

static void progress(run_state *s, ld_input *in, const char *member)
{
    if (!s->hooks || !s->hooks->on_progress) return;
    s->hooks->on_progress(s->hooks->ctx,
                          s->done_before + ld_input_bytes_consumed(in),
                          s->total, member);
}

static void report(const ld_logset_hooks *hooks, ld_problem_kind kind, const char *member, ld_error *e)
{
    if (!e->path) e->path = member;
    if (hooks && hooks->on_problem) hooks->on_problem(hooks->ctx, kind, e);
}

/* one whole line (unwrapped, rejoined) to the pairer */
static void feed_whole(ld_pairer *pairer, const char *member, const ld_line *line, const ld_logset_hooks *hooks)
{
    ld_line_result res;
    ld_error e;
    ld_error_clear(&e);
    ld_pairer_feed_line(pairer, member, line, &res, &e);
    if (res == LD_LINE_ERROR) report(hooks, LD_PROBLEM_LINE, member, &e);
}

/* What one push made of a record: its problem reported, its line (and a
 * second one the same record made whole) to the pairer */
static ld_status push_done(ld_capture *c, ld_pairer *pairer, const char *member, ld_status st, ld_error *e,
                           ld_line *whole, int has, const ld_logset_hooks *hooks)
{
    if (st == LD_ERR_NOMEM) return st;
    if (st != LD_OK) report(hooks, LD_PROBLEM_CAPTURE, member, e);
    for (; has; ld_capture_pop(c, whole, &has, NULL)) feed_whole(pairer, member, whole, hooks);
    return LD_OK;
}

/* a line, and the first bytes of the next one when the reader holds them
 * (ld_capture_push_ahead) */
static ld_status feed_ahead(ld_capture *c, ld_pairer *pairer, const char *member, const ld_line *line,
                            const char *next, size_t next_len, const ld_logset_hooks *hooks)
{
    ld_line whole;
    int has = 0;
    ld_error e;
    ld_error_clear(&e);
    ld_status st = ld_capture_push_ahead(c, line, next, next_len, &whole, &has, &e);
    return push_done(c, pairer, member, st, &e, &whole, has, hooks);
}

ld_status ld_logset_feed(ld_capture *c, ld_pairer *pairer, const char *member, const ld_line *line,
                         const ld_logset_hooks *hooks)
{
    return feed_ahead(c, pairer, member, line, NULL, 0, hooks);
}

ld_status ld_logset_feed_record(ld_capture *c, ld_pairer *pairer, const char *member, const ld_line *at,
                                const ld_capture_record *rec, const ld_logset_hooks *hooks)
{
    ld_line whole;
    int has = 0;
    ld_error e;
    ld_error_clear(&e);
    ld_status st = ld_capture_push_record(c, LD_CAPTURE_JOURNAL_FILE, at, rec, &whole, &has, &e);
    return push_done(c, pairer, member, st, &e, &whole, has, hooks);
}

void ld_logset_drain(ld_capture *c, ld_pairer *pairer, const char *member, const ld_logset_hooks *hooks)
{
    for (;;) {
        ld_line whole;
        int has = 0;
        ld_error e;
        ld_error_clear(&e);
        ld_status st = ld_capture_drain(c, &whole, &has, &e);
        if (!has) return;
        if (st != LD_OK) report(hooks, LD_PROBLEM_CAPTURE, member, &e);
        feed_whole(pairer, member, &whole, hooks);
    }
}

/* the problems of a run counted, then passed on */
static void count_problem(void *ctx, ld_problem_kind kind, const ld_error *e)
{
    run_state *s = ctx;
    problem(s, kind, e);
}

/* Reads the current member to its end (or its first unrecoverable error). */
static ld_status read_member(run_state *s, ld_input *in, ld_linereader *r)
{
    const char *member = ld_input_member_name(in);
    ld_capture_reset(s->capture);
    for (;;) {
        ld_line line;
        int has = 0;
        ld_error e;
        ld_error_clear(&e);
        ld_status st = ld_linereader_next(r, &line, &has, &e);
        if (st == LD_ERR_LIMIT) { /* a line lost: as a capture's limit */
            if (!e.path) e.path = member;
            problem(s, LD_PROBLEM_CAPTURE, &e);
            continue;
        }
        if (st != LD_OK) {
            if (!e.path) e.path = member;
            problem(s, LD_PROBLEM_IO, &e);
            ld_logset_drain(s->capture, s->pairer, member, &s->counting);
            return st == LD_ERR_NOMEM ? st : LD_OK;
        }
        if (!has) break;
        s->stats->bytes += line.len;
        const char *next = NULL;
        size_t next_len = 0;
        if (!ld_linereader_peek(r, 16, &next, &next_len)) next = NULL;
        LD_TRY(feed_ahead(s->capture, s->pairer, member, &line, next, next_len, &s->counting));
        if (++s->lines_since_progress >= 64) {
            s->lines_since_progress = 0;
            progress(s, in, member);
        }
    }
    ld_logset_drain(s->capture, s->pairer, member, &s->counting);
    return LD_OK;
}

/* Every member of one opened input. */
static ld_status read_input(run_state *s, ld_input *in)
{
    ld_linereader *r = NULL;
    ld_error e;
    ld_error_clear(&e);
    if (ld_linereader_new(in, s->max_line, &r, &e) != LD_OK) return LD_ERR_NOMEM;
    ld_status st = LD_OK;
    int failures = 0;
    for (;;) {
        s->stats->members++;
        if (ld_logset_journal_member(in)) { /* journald's own file inside an archive */
            uint64_t entries, bytes;
            st = ld_logset_journal_member_read(s->capture, s->pairer, in, &s->counting, &entries, &bytes);
            s->stats->bytes += bytes;
            st = st == LD_ERR_NOMEM ? st : LD_OK;
        } else {
            st = read_member(s, in, r);
        }
        if (st != LD_OK) break;
        int has = 0;
        ld_error_clear(&e);
        while (ld_input_next_member(in, &has, &e) != LD_OK) {
            if (!e.path) e.path = ld_input_member_name(in);
            problem(s, LD_PROBLEM_IO, &e);
            ld_error_clear(&e);
            /* libarchive cannot always resynchronise after a bad header */
            if (++failures >= 16) { has = 0; break; }
        }
        if (!has) break;
        ld_linereader_reset(r);
    }
    if (ld_linereader_peak_bytes(r) > s->stats->peak_line_buffer)
        s->stats->peak_line_buffer = ld_linereader_peak_bytes(r);
    ld_linereader_free(r);
    return st;
}

/* The entries of the journal file at `path`, its lines and problems
 * named `name` (the file, or the archive member it was copied from). */
static ld_status journal_entries(ld_capture *c, ld_pairer *pairer, const char *path, const char *name,
                                 const ld_logset_hooks *hooks, uint64_t *entries, uint64_t *bytes)
{
    ld_journal_file *f = NULL;
    ld_error e;
    ld_error_clear(&e);
    *entries = *bytes = 0;
    if (ld_journal_file_open(path, &f, &e) != LD_OK) {
        report(hooks, LD_PROBLEM_IO, name, &e);
        return LD_ERR_IO;
    }
    ld_status st = LD_OK;
    ld_capture_reset(c);
    for (;;) {
        ld_capture_record r;
        ld_line at = {0};
        int has = 0;
        ld_error_clear(&e);
        ld_status rs = ld_journal_file_next(f, &r, &at.lineno, &has, &e);
        if (!has) break;
        *entries = at.lineno;
        if (rs != LD_OK) {
            e.line = at.lineno;
            report(hooks, LD_PROBLEM_IO, name, &e);
            continue;
        }
        *bytes += r.len;
        if ((st = ld_logset_feed_record(c, pairer, name, &at, &r, hooks)) != LD_OK) break;
    }
    ld_logset_drain(c, pairer, name, hooks);
    ld_journal_file_close(f);
    return st;
}

ld_status ld_logset_journal_file(ld_capture *c, ld_pairer *pairer, const char *path, const ld_logset_hooks *hooks,
                                 uint64_t *entries, uint64_t *bytes)
{
    return journal_entries(c, pairer, path, path, hooks, entries, bytes);
}

int ld_logset_journal_member(const ld_input *in)
{
    const char *name = ld_input_member_name(in), *dot = strstr(name ? name : "", ".journal");
    if (!dot) return 0;
    for (const char *next; (next = strstr(dot + 1, ".journal")) != NULL;) dot = next;
    dot += strlen(".journal");
    if (*dot == '~') dot++;
    int compressed = !strcmp(dot, ".gz") || !strcmp(dot, ".zst") || !strcmp(dot, ".xz") || !strcmp(dot, ".bz2");
    /* a plain file was looked at already (ld_journal_file_is), and one named
     * so that holds text is read as text */
    return compressed || (!*dot && ld_input_is_archive(in));
}

/* The current member of `in` copied into a new temporary file (its path
 * into tmp, PATH_MAX bytes); *bytes what was copied. */
static ld_status spool_member(ld_input *in, char *tmp, uint64_t *bytes, ld_error *err)
{
    const char *dir = getenv("TMPDIR");
    snprintf(tmp, PATH_MAX, "%s/logdiff-journal-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0) return LD_FAIL(err, LD_ERR_IO, 0, "cannot make a temporary file for it in %s: %s",
                               dir && *dir ? dir : "/tmp", strerror(errno));
    char buf[1 << 16];
    ld_status st = LD_OK;
    for (size_t n = 1; st == LD_OK && n;) {
        st = ld_input_read(in, buf, sizeof buf, &n, err);
        if (st == LD_OK && n && write(fd, buf, n) != (ssize_t)n)
            st = LD_FAIL(err, LD_ERR_IO, (size_t)*bytes, "cannot copy it to %s: %s", tmp, strerror(errno));
        *bytes += n;
    }
    if (close(fd) != 0 && st == LD_OK) st = LD_FAIL(err, LD_ERR_IO, 0, "cannot write %s: %s", tmp, strerror(errno));
    if (st != LD_OK) unlink(tmp);
    return st;
}

ld_status ld_logset_journal_member_read(ld_capture *c, ld_pairer *pairer, ld_input *in,
                                        const ld_logset_hooks *hooks, uint64_t *entries, uint64_t *bytes)
{
    char tmp[PATH_MAX];
    const char *name = ld_input_member_name(in);
    ld_error e;
    ld_error_clear(&e);
    *entries = *bytes = 0;
    ld_status st = spool_member(in, tmp, bytes, &e);
    if (st == LD_OK && !ld_journal_file_is(tmp)) {
        unlink(tmp);
        st = LD_FAIL(&e, LD_ERR_SYNTAX, 0, "named as a journal file, but it does not begin as one "
                     "(journald's \"LPKSHHRH\"): not read");
    }
    if (st != LD_OK) {
        report(hooks, LD_PROBLEM_IO, name, &e);
        return st == LD_ERR_NOMEM ? st : LD_ERR_IO;
    }
    uint64_t copied = *bytes;
    st = journal_entries(c, pairer, tmp, name, hooks, entries, bytes);
    *bytes = copied;
    unlink(tmp);
    return st;
}


ld_status ld_logset_run(char *const *paths, size_t n, ld_pairer *pairer,
                        const ld_logset_hooks *hooks, const ld_logset_options *opts,
                        ld_logset_stats *stats, ld_error *err)
{
    run_state s = { pairer, hooks, stats, NULL, opts ? opts->max_line : 0, 0, ld_logset_total_bytes(paths, n), 0,
                    { count_problem, NULL, NULL } };
    s.counting.ctx = &s;
    memset(stats, 0, sizeof *stats);
    LD_TRY(ld_capture_new(opts ? opts->capture : LD_CAPTURE_AUTO, opts ? opts->max_line : 0, &s.capture, err));
    for (size_t i = 0; i < n; i++) {
        if (ld_journal_file_is(paths[i])) { /* journald's own files: libsystemd reads them */
            uint64_t entries, bytes;
            ld_status js = ld_logset_journal_file(s.capture, pairer, paths[i], &s.counting, &entries, &bytes);
            if (js == LD_ERR_NOMEM) {
                ld_capture_free(s.capture);
                return LD_FAIL(err, js, 0, "out of memory reading '%s'", paths[i]);
            }
            if (js == LD_OK) stats->inputs++, stats->members++, stats->bytes += bytes;
            continue;
        }
        ld_input *in = NULL;
        ld_error e;
        ld_error_clear(&e);
        if (ld_input_open(paths[i], &in, &e) != LD_OK) {
            if (!e.path) e.path = paths[i];
            problem(&s, LD_PROBLEM_IO, &e);
            continue;
        }
        stats->inputs++;
        ld_status st = read_input(&s, in);
        s.done_before += ld_input_bytes_consumed(in);
        ld_input_close(in);
        if (st != LD_OK) {
            ld_capture_free(s.capture);
            return LD_FAIL(err, st, 0, "out of memory reading '%s'", paths[i]);
        }
    }
    stats->capture = *ld_capture_stats_of(s.capture);
    ld_capture_free(s.capture);
    return ld_pairer_finish(pairer, err);
}
