/* test_follow.c - parse/follow/: following files as tail -F does.
 *
 * Real files in a fresh temporary directory, changed between explicit
 * polls (no sleeping, no timing): appends, partial lines, rename-and-create
 * rotation with bytes written to the old file after the rename,
 * copytruncate, files created late, deleted and created again, directories,
 * resuming saved states, over-long lines, standard input through a pipe
 * (ld_follow_set_stdin_fd), the per-file read budget.  The oracle is
 * the bytes the test wrote: every delivery and event is recorded as one text
 * line ("L name:lineno@offset text", "E EVENT name") and compared with the
 * transcript expected.  Every OPENED file gets a malloc'd `user` freed at its
 * CLOSED, so a missing CLOSED is a leak under ASan, and the counts are
 * checked too.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse/follow/follow.h"
#include "tests/support/ld_test.h"

/* ---------------------------------------------------------------- the recorder */

typedef struct rec {
    char log[1 << 16];
    size_t len;
    int opened, closed;
    int lines;
    int stop_at;   /* on_line refuses its stop_at-th line (0: never) */
    ld_error last_problem;
} rec;

static void say(rec *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say(rec *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->log + r->len, sizeof r->log - r->len, fmt, ap);
    va_end(ap);
    if (n > 0) r->len += (size_t)n;
    if (r->len >= sizeof r->log) r->len = sizeof r->log - 1;
}

static const char *base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static ld_status on_line(void *ctx, ld_follow_file *file, const ld_line *line)
{
    rec *r = ctx;
    r->lines++;
    if (line->len > 64)
        say(r, "L %s:%llu@%llu <%zu bytes>%s%s\n", base(file->path), (unsigned long long)line->lineno,
            (unsigned long long)line->offset, line->len, line->crlf ? " [crlf]" : "",
            line->unterminated ? " [unterminated]" : "");
    else
        say(r, "L %s:%llu@%llu %.*s%s%s\n", base(file->path), (unsigned long long)line->lineno,
            (unsigned long long)line->offset, (int)line->len, line->data, line->crlf ? " [crlf]" : "",
            line->unterminated ? " [unterminated]" : "");
    if (r->stop_at && r->lines == r->stop_at) return LD_ERR_USAGE;
    return LD_OK;
}

static const char *const ev_names[] = {"OPENED", "ROTATED", "TRUNCATED", "GONE",
                                       "CLOSED", "ENDED",   "PROBLEM",   "NOTE"};

static void on_event(void *ctx, ld_follow_event ev, ld_follow_file *file, const char *msg, const ld_error *err)
{
    rec *r = ctx;
    if (ev == LD_FOLLOW_OPENED) {
        r->opened++;
        file->user = malloc(16);
        say(r, "E OPENED %s@%llu\n", base(file->path), (unsigned long long)file->offset);
        return;
    }
    if (ev == LD_FOLLOW_CLOSED) {
        r->closed++;
        free(file->user);
        file->user = NULL;
    }
    if (ev == LD_FOLLOW_PROBLEM) {
        r->last_problem = *err;
        say(r, "E PROBLEM %d %s:%llu@%llu\n", (int)err->code, base(err->path), (unsigned long long)err->line,
            (unsigned long long)err->offset);
        return;
    }
    if (ev == LD_FOLLOW_NOTE) {
        say(r, "E NOTE\n");
        return;
    }
    (void)msg;
    say(r, "E %s %s\n", ev_names[ev], file ? base(file->path) : "?");
}

static int expect_log(rec *r, const char *want, int line)
{
    r->log[r->len] = 0;
    if (strcmp(r->log, want) != 0) {
        fprintf(stderr, "  test_follow.c:%d: transcript differs\n--- got:\n%s--- want:\n%s---\n", line, r->log,
                want);
        return 1;
    }
    r->len = 0;
    return 0;
}
#define EXPECT(r, want) CHECK(expect_log((r), (want), __LINE__) == 0)

/* ---------------------------------------------------------------- files */

static char tmpdir[256];

static const char *P(const char *name)
{
    static char paths[8][512];
    static int k;
    char *p = paths[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static int put(const char *path, const char *data, int append)
{
    int fd = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd < 0) return -1;
    size_t n = strlen(data);
    int ok = write(fd, data, n) == (ssize_t)n;
    close(fd);
    return ok ? 0 : -1;
}

static int fd_put(int fd, const char *data)
{
    size_t n = strlen(data);
    return write(fd, data, n) == (ssize_t)n ? 0 : -1;
}

static void clean_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char p[1024];
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            clean_dir(p);
            rmdir(p);
        } else {
            unlink(p);
        }
    }
    closedir(d);
}

static void remove_tmpdir(void)
{
    clean_dir(tmpdir);
    rmdir(tmpdir);
}

static int fresh_dir(void)
{
    if (!tmpdir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/ld_follow_XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpdir)) return -1;
        atexit(remove_tmpdir);
    }
    clean_dir(tmpdir);
    return 0;
}

/* The tuning of the next follower made (then back to the defaults). */
static size_t next_max_read;
static int next_stdin_fd;

/* A follower recording into r (the temporary directory kept as it is). */
static ld_follow *follower_keep(rec *r, const ld_follow_options *opts)
{
    memset(r, 0, sizeof *r);
    ld_follow_hooks h = {on_line, on_event, r};
    ld_follow *f = NULL;
    if (ld_follow_new(opts, &h, &f, NULL) != LD_OK) return NULL;
    ld_follow_set_max_read(f, next_max_read);
    ld_follow_set_stdin_fd(f, next_stdin_fd);
    next_max_read = 0;
    next_stdin_fd = 0;
    return f;
}

/* The same in an emptied temporary directory. */
static ld_follow *follower(rec *r, const ld_follow_options *opts)
{
    return fresh_dir() == 0 ? follower_keep(r, opts) : NULL;
}

static uint64_t poll_once(ld_follow *f)
{
    uint64_t n = 0;
    ld_error e;
    if (ld_follow_poll(f, &n, &e) != LD_OK) return UINT64_MAX;
    return n;
}

/* ---------------------------------------------------------------- cases */

static int test_follow_appended_lines(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("a.log"), "one\ntwo\r\n", 0) == 0);
    CHECK(ld_follow_add(f, P("a.log"), NULL) == LD_OK);
    CHECK(ld_follow_live(f));
    CHECK_EQ_INT(poll_once(f), 9);
    EXPECT(&r, "E OPENED a.log@0\nL a.log:1@0 one\nL a.log:2@4 two [crlf]\n");
    CHECK_EQ_INT(poll_once(f), 0);
    EXPECT(&r, "");
    CHECK(put(P("a.log"), "three\n", 1) == 0);
    CHECK_EQ_INT(poll_once(f), 6);
    EXPECT(&r, "L a.log:3@9 three\n");
    ld_follow_free(f);
    EXPECT(&r, "E CLOSED a.log\n");
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

static int test_follow_partial_line(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("a.log"), "par", 0) == 0);
    CHECK(ld_follow_add(f, P("a.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 3);
    EXPECT(&r, "E OPENED a.log@0\n");
    CHECK(put(P("a.log"), "tial\nlast", 1) == 0);
    CHECK_EQ_INT(poll_once(f), 9);
    EXPECT(&r, "L a.log:1@0 partial\n");
    ld_follow_free(f);
    EXPECT(&r, "L a.log:2@8 last [unterminated]\nE CLOSED a.log\n");
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* A line far longer than one read (64 KiB), arriving over several polls. */
static int test_follow_long_line_grows(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    size_t n = 300000;
    char *big = malloc(n + 1);
    CHECK(big);
    memset(big, 'q', n);
    big[n] = 0;
    big[n / 2] = 0;
    CHECK(put(P("a.log"), big, 0) == 0);
    CHECK(ld_follow_add(f, P("a.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), n / 2);
    big[n / 2] = 'q';
    CHECK(put(P("a.log"), big + n / 2, 1) == 0);
    free(big);
    CHECK(put(P("a.log"), "\nnext\n", 1) == 0);
    CHECK_EQ_INT(poll_once(f), n - n / 2 + 6);
    EXPECT(&r, "E OPENED a.log@0\nL a.log:1@0 <300000 bytes>\nL a.log:2@300001 next\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* logrotate's default (create): rename, then a new file; the writer goes on
 * writing to the old descriptor for a while (a line completed after the
 * rename, another one whole) before it reopens. */
static int test_follow_rename_rotation(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    int w = open(P("x.log"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    CHECK(w >= 0);
    CHECK(fd_put(w, "1\n2\npar") == 0);
    CHECK(ld_follow_add(f, P("x.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 7);
    EXPECT(&r, "E OPENED x.log@0\nL x.log:1@0 1\nL x.log:2@2 2\n");
    CHECK(rename(P("x.log"), P("x.log.1")) == 0);
    CHECK(fd_put(w, "tial\n3\ncut") == 0); /* after the rename: still the old file */
    close(w);
    CHECK(put(P("x.log"), "new1\n", 0) == 0);
    CHECK_EQ_INT(poll_once(f), 10 + 5);
    EXPECT(&r,
           "E ROTATED x.log\nL x.log:3@4 partial\nL x.log:4@12 3\nL x.log:5@14 cut [unterminated]\n"
           "E CLOSED x.log\nE OPENED x.log@0\nL x.log:1@0 new1\n");
    CHECK_EQ_INT(poll_once(f), 0);
    ld_follow_free(f);
    EXPECT(&r, "E CLOSED x.log\n");
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* The old file drained over several polls (a small read budget) before the
 * new one is opened: the writer's order is kept. */
static int test_follow_rotation_drains_first(void)
{
    rec r;
    next_max_read = 4;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("x.log"), "a\n", 0) == 0);
    CHECK(ld_follow_add(f, P("x.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 2);
    CHECK(put(P("x.log"), "bb\ncc\ndd\n", 1) == 0);
    CHECK(rename(P("x.log"), P("x.log.1")) == 0);
    CHECK(put(P("x.log"), "new\n", 0) == 0);
    CHECK_EQ_INT(poll_once(f), 4);
    CHECK_EQ_INT(poll_once(f), 4);
    CHECK_EQ_INT(poll_once(f), 1 + 4); /* the old one's last byte, then the new one's budget */
    EXPECT(&r, "E OPENED x.log@0\nL x.log:1@0 a\nE ROTATED x.log\nL x.log:2@2 bb\nL x.log:3@5 cc\n"
               "L x.log:4@8 dd\nE CLOSED x.log\nE OPENED x.log@0\nL x.log:1@0 new\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* logrotate's copytruncate: the same file made empty, written again; and
 * truncated then written past the old read position between two polls. */
static int test_follow_copytruncate(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    int w = open(P("c.log"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    CHECK(w >= 0);
    CHECK(fd_put(w, "a\nb\n") == 0);
    CHECK(ld_follow_add(f, P("c.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 4);
    CHECK(ftruncate(w, 0) == 0);
    CHECK(fd_put(w, "c\n") == 0);
    CHECK_EQ_INT(poll_once(f), 2);
    EXPECT(&r, "E OPENED c.log@0\nL c.log:1@0 a\nL c.log:2@2 b\nE TRUNCATED c.log\nL c.log:1@0 c\n");
    CHECK(ftruncate(w, 0) == 0);
    CHECK(fd_put(w, "dddd\neeee\nffff\n") == 0); /* longer than what was read: size alone cannot tell */
    CHECK_EQ_INT(poll_once(f), 15);
    EXPECT(&r, "E TRUNCATED c.log\nL c.log:1@0 dddd\nL c.log:2@5 eeee\nL c.log:3@10 ffff\n");
    CHECK(fd_put(w, "held") == 0); /* a partial line when the truncation comes: delivered first */
    CHECK_EQ_INT(poll_once(f), 4);
    CHECK(ftruncate(w, 0) == 0);
    CHECK(fd_put(w, "g\n") == 0);
    CHECK_EQ_INT(poll_once(f), 2);
    EXPECT(&r, "L c.log:4@15 held [unterminated]\nE TRUNCATED c.log\nL c.log:1@0 g\n");
    close(w);
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

static int test_follow_created_later(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(ld_follow_add(f, P("late.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 0);
    CHECK_EQ_INT(poll_once(f), 0);
    EXPECT(&r, "E NOTE\n");
    CHECK(put(P("late.log"), "here\n", 0) == 0);
    CHECK_EQ_INT(poll_once(f), 5);
    EXPECT(&r, "E OPENED late.log@0\nL late.log:1@0 here\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* Deleted while a writer holds it: what it writes after is still read;
 * the path created again is a new file from 0. */
static int test_follow_deleted_and_recreated(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    int w = open(P("d.log"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    CHECK(w >= 0);
    CHECK(fd_put(w, "a\n") == 0);
    CHECK(ld_follow_add(f, P("d.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 2);
    CHECK(unlink(P("d.log")) == 0);
    CHECK(fd_put(w, "b\n") == 0);
    close(w);
    CHECK_EQ_INT(poll_once(f), 2);
    CHECK_EQ_INT(poll_once(f), 0);
    EXPECT(&r, "E OPENED d.log@0\nL d.log:1@0 a\nE GONE d.log\nL d.log:2@2 b\nE CLOSED d.log\n");
    CHECK(put(P("d.log"), "c\n", 0) == 0);
    CHECK_EQ_INT(poll_once(f), 2);
    EXPECT(&r, "E OPENED d.log@0\nL d.log:1@0 c\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* A directory: hidden and compressed files left out, a new file found, a
 * rename inside it not read again, a rotation by rename, a removal. */
static int test_follow_directory(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(mkdir(P("logs"), 0755) == 0);
    CHECK(put(P("logs/a.log"), "a1\n", 0) == 0);
    CHECK(put(P("logs/.hidden"), "h\n", 0) == 0);
    CHECK(put(P("logs/old.log.1.gz"), "zz", 0) == 0);
    CHECK(put(P("logs/old.log.2.gz"), "zz", 0) == 0);
    CHECK(ld_follow_add(f, P("logs"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 3);
    EXPECT(&r, "E OPENED a.log@0\nE NOTE\nL a.log:1@0 a1\n");
    CHECK(put(P("logs/b.log"), "b1\n", 0) == 0);
    CHECK_EQ_INT(poll_once(f), 3);
    EXPECT(&r, "E OPENED b.log@0\nL b.log:1@0 b1\n");
    /* a.log rotated by rename inside the directory: same file, not read again */
    CHECK(rename(P("logs/a.log"), P("logs/a.log.1")) == 0);
    CHECK(put(P("logs/a.log.1"), "a2\n", 1) == 0);
    CHECK(put(P("logs/a.log"), "n1\n", 0) == 0);
    CHECK_EQ_INT(poll_once(f), 6);
    EXPECT(&r, "E OPENED a.log@0\nL a.log:2@3 a2\nL a.log:1@0 n1\n");
    CHECK(unlink(P("logs/b.log")) == 0);
    CHECK_EQ_INT(poll_once(f), 0);
    EXPECT(&r, "E GONE b.log\nE CLOSED b.log\n");
    CHECK_EQ_INT(poll_once(f), 0);
    EXPECT(&r, "");
    ld_follow_free(f);
    EXPECT(&r, "E CLOSED a.log\nE CLOSED a.log\n");
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

typedef struct saved {
    uint64_t dev, ino, offset, lineno;
    int n;
} saved;

static void save(void *ctx, const ld_follow_file *file, const char *source)
{
    saved *s = ctx;
    (void)source;
    s->dev = file->dev;
    s->ino = file->ino;
    s->offset = file->offset;
    s->lineno = file->lineno;
    s->n++;
}

/* Reads x.log ("1\n2\npar"), saves the state, frees the follower. */
static int read_and_save(saved *s)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("x.log"), "1\n2\npar", 0) == 0);
    CHECK(ld_follow_add(f, P("x.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 7);
    memset(s, 0, sizeof *s);
    ld_follow_each(f, save, s);
    CHECK_EQ_INT(s->n, 1);
    CHECK_EQ_INT(s->offset, 4); /* the partial line is not consumed */
    CHECK_EQ_INT(s->lineno, 2);
    ld_follow_free(f);
    return 0;
}

static int test_follow_resume(void)
{
    saved s;
    rec r;
    CHECK(read_and_save(&s) == 0);
    CHECK(put(P("x.log"), "tial\n3\n", 1) == 0);
    ld_follow *f = follower_keep(&r, NULL);
    CHECK(f);
    CHECK(ld_follow_add_at(f, P("x.log"), s.dev, s.ino, s.offset, s.lineno, NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 10);
    EXPECT(&r, "E OPENED x.log@4\nL x.log:3@4 partial\nL x.log:4@12 3\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* The saved file was rotated to x.log.1 (and written to after) while the
 * follower was away: read from the saved offset first, then the new x.log. */
static int test_follow_resume_rotated_sibling(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("x.log"), "1\n2\npar", 0) == 0);
    struct stat st;
    CHECK(stat(P("x.log"), &st) == 0);
    CHECK(rename(P("x.log"), P("x.log.1")) == 0);
    CHECK(put(P("x.log.1"), "tial\n", 1) == 0);
    CHECK(put(P("x.log"), "new\n", 0) == 0);
    CHECK(ld_follow_add_at(f, P("x.log"), (uint64_t)st.st_dev, (uint64_t)st.st_ino, 4, 2, NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 8 + 4);
    EXPECT(&r, "E OPENED x.log.1@4\nL x.log.1:3@4 partial\nE CLOSED x.log.1\nE OPENED x.log@0\n"
               "L x.log:1@0 new\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* A state saved while a rotated file was still draining names that file;
 * resumed, it is found beside the path and finished before the new one. */
static int test_follow_resume_saved_while_draining(void)
{
    rec r;
    saved s;
    next_max_read = 4;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("x.log"), "a\n", 0) == 0);
    CHECK(ld_follow_add(f, P("x.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 2);
    CHECK(put(P("x.log"), "bb\ncc\n", 1) == 0);
    CHECK(rename(P("x.log"), P("x.log.1")) == 0);
    CHECK(put(P("x.log"), "n\n", 0) == 0);
    CHECK_EQ_INT(poll_once(f), 4);
    memset(&s, 0, sizeof s);
    ld_follow_each(f, save, &s);
    CHECK_EQ_INT(s.n, 1);
    CHECK_EQ_INT(s.offset, 5);
    CHECK_EQ_INT(s.lineno, 2);
    ld_follow_free(f); /* its partial "c" delivered as unterminated: the caller's to ignore */
    EXPECT(&r, "E OPENED x.log@0\nL x.log:1@0 a\nE ROTATED x.log\nL x.log:2@2 bb\n"
               "L x.log:3@5 c [unterminated]\nE CLOSED x.log\n");
    f = follower_keep(&r, NULL);
    CHECK(f);
    CHECK(ld_follow_add_at(f, P("x.log"), s.dev, s.ino, s.offset, s.lineno, NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 3 + 2);
    EXPECT(&r, "E OPENED x.log.1@5\nL x.log.1:3@5 cc\nE CLOSED x.log.1\nE OPENED x.log@0\nL x.log:1@0 n\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* The saved file is nowhere: the loss is told, the current file read from 0. */
static int test_follow_resume_lost(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("x.log"), "fresh\n", 0) == 0);
    struct stat st;
    CHECK(stat(P("x.log"), &st) == 0);
    /* an identity that is not x.log's and in no file beside it */
    CHECK(ld_follow_add_at(f, P("x.log"), (uint64_t)st.st_dev, (uint64_t)st.st_ino + 1000003, 40, 7, NULL) ==
          LD_OK);
    CHECK_EQ_INT(poll_once(f), 6);
    EXPECT(&r, "E PROBLEM 1 x.log:7@40\nE OPENED x.log@0\nL x.log:1@0 fresh\n");
    CHECK(strstr(r.last_problem.msg, "lost") != NULL);
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* The saved file is there but shorter than the saved offset: from 0. */
static int test_follow_resume_truncated(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("x.log"), "z\n", 0) == 0);
    struct stat st;
    CHECK(stat(P("x.log"), &st) == 0);
    CHECK(ld_follow_add_at(f, P("x.log"), (uint64_t)st.st_dev, (uint64_t)st.st_ino, 100, 9, NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 2);
    EXPECT(&r, "E OPENED x.log@100\nE TRUNCATED x.log\nL x.log:1@0 z\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* A directory resumed: the saved file found under its rotated name, read
 * from its offset; the directory's other file from 0. */
static int test_follow_resume_directory(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(mkdir(P("logs"), 0755) == 0);
    CHECK(put(P("logs/s.log"), "old\nseen\n", 0) == 0);
    struct stat st;
    CHECK(stat(P("logs/s.log"), &st) == 0);
    CHECK(rename(P("logs/s.log"), P("logs/s.log.1")) == 0);
    CHECK(put(P("logs/s.log.1"), "unseen\n", 1) == 0);
    CHECK(put(P("logs/s.log"), "newer\n", 0) == 0);
    CHECK(ld_follow_add_at(f, P("logs"), (uint64_t)st.st_dev, (uint64_t)st.st_ino, 9, 2, NULL) == LD_OK);
    CHECK(ld_follow_add_at(f, P("logs"), (uint64_t)st.st_dev, (uint64_t)st.st_ino + 1000003, 5, 1, NULL) ==
          LD_OK);
    CHECK_EQ_INT(poll_once(f), 7 + 6);
    EXPECT(&r, "E OPENED s.log@0\nE OPENED s.log.1@9\nE PROBLEM 1 logs:1@5\nL s.log:1@0 newer\n"
               "L s.log.1:3@9 unseen\n");
    CHECK(ld_follow_add_at(f, P("logs"), 1, 2, 3, 4, NULL) == LD_ERR_USAGE); /* polled already */
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

static int test_follow_max_line(void)
{
    rec r;
    ld_follow_options o = {.max_line = 8};
    ld_follow *f = follower(&r, &o);
    CHECK(f);
    CHECK(put(P("m.log"), "short\n0123456789abc\nok\n", 0) == 0);
    CHECK(ld_follow_add(f, P("m.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 23);
    EXPECT(&r, "E OPENED m.log@0\nL m.log:1@0 short\nE PROBLEM 9 m.log:2@6\nL m.log:3@20 ok\n");
    CHECK(put(P("m.log"), "01234567890123456789", 1) == 0); /* past the limit before its \n arrives */
    CHECK_EQ_INT(poll_once(f), 20);
    EXPECT(&r, "E PROBLEM 9 m.log:4@23\n");
    CHECK(put(P("m.log"), "tail\nfine\n", 1) == 0);
    CHECK_EQ_INT(poll_once(f), 10);
    EXPECT(&r, "L m.log:5@48 fine\n");
    CHECK(put(P("m.log"), "12345678", 1) == 0); /* exactly the limit, unterminated at the end */
    CHECK_EQ_INT(poll_once(f), 8);
    ld_follow_free(f);
    EXPECT(&r, "L m.log:6@53 12345678 [unterminated]\nE CLOSED m.log\n");
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* Standard input as a pipe: a quiet pipe does not block the file beside
 * it; its end is ENDED, its partial line delivered first. */
static int test_follow_stdin_pipe(void)
{
    int p[2];
    CHECK(pipe(p) == 0);
    rec r;
    next_stdin_fd = p[0];
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    CHECK(put(P("side.log"), "s\n", 0) == 0);
    CHECK(ld_follow_add(f, "-", NULL) == LD_OK);
    CHECK(ld_follow_add(f, "-", NULL) == LD_ERR_USAGE);
    CHECK(ld_follow_add(f, P("side.log"), NULL) == LD_OK);
    CHECK_EQ_INT(poll_once(f), 2); /* would hang here if the pipe were read blocking */
    EXPECT(&r, "E OPENED -@0\nE OPENED side.log@0\nL side.log:1@0 s\n");
    CHECK(fd_put(p[1], "in1\nin") == 0);
    CHECK_EQ_INT(poll_once(f), 6);
    EXPECT(&r, "L -:1@0 in1\n");
    close(p[1]);
    CHECK_EQ_INT(poll_once(f), 0);
    EXPECT(&r, "L -:2@4 in [unterminated]\nE ENDED -\nE CLOSED -\n");
    CHECK(ld_follow_live(f)); /* side.log still may grow */
    ld_follow_free(f);
    close(p[0]);
    CHECK_EQ_INT(r.opened, r.closed);

    CHECK(pipe(p) == 0);
    next_stdin_fd = p[0];
    f = follower(&r, NULL);
    CHECK(f);
    CHECK(ld_follow_add(f, "-", NULL) == LD_OK);
    close(p[1]);
    CHECK_EQ_INT(poll_once(f), 0);
    CHECK(!ld_follow_live(f)); /* only stdin, ended */
    ld_follow_free(f);
    close(p[0]);
    EXPECT(&r, "E OPENED -@0\nE ENDED -\nE CLOSED -\n");
    return 0;
}

/* from_end: a file there when added starts at its last unfinished line. */
static int test_follow_from_end(void)
{
    rec r;
    ld_follow_options o = {.from_end = 1};
    ld_follow *f = follower(&r, &o);
    CHECK(f);
    CHECK(put(P("e.log"), "old1\nold2\npar", 0) == 0);
    CHECK(ld_follow_add(f, P("e.log"), NULL) == LD_OK);
    CHECK(ld_follow_add(f, P("later.log"), NULL) == LD_OK);
    CHECK(put(P("later.log"), "from0\n", 0) == 0); /* not there when added: from its start */
    CHECK(put(P("e.log"), "tial\nnew\n", 1) == 0);
    CHECK_EQ_INT(poll_once(f), 12 + 6);
    EXPECT(&r, "E OPENED e.log@10\nL e.log:1@10 partial\nL e.log:2@18 new\nE OPENED later.log@0\n"
               "L later.log:1@0 from0\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);

    /* a directory's files: each from its end; one added later from 0 */
    f = follower(&r, &o);
    CHECK(f);
    CHECK(mkdir(P("logs"), 0755) == 0);
    CHECK(put(P("logs/d.log"), "x\ny", 0) == 0);
    CHECK(put(P("logs/f.log"), "done\n", 0) == 0);
    CHECK(ld_follow_add(f, P("logs"), NULL) == LD_OK);
    CHECK(put(P("logs/d.log"), "z\nw\n", 1) == 0);
    CHECK(put(P("logs/g.log"), "g\n", 0) == 0);
    CHECK_EQ_INT(poll_once(f), 5 + 2);
    EXPECT(&r, "E OPENED d.log@2\nE OPENED f.log@5\nE OPENED g.log@0\nL d.log:1@2 yz\nL d.log:2@5 w\n"
               "L g.log:1@0 g\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    return 0;
}

/* A hook that refuses a line stops the poll; the next poll goes on after
 * that line, nothing lost, nothing twice. */
static int test_follow_hook_stops(void)
{
    rec r;
    ld_follow *f = follower(&r, NULL);
    CHECK(f);
    r.stop_at = 2;
    CHECK(put(P("h.log"), "a\nb\nc\n", 0) == 0);
    CHECK(ld_follow_add(f, P("h.log"), NULL) == LD_OK);
    uint64_t n = 0;
    ld_error e;
    CHECK_EQ_INT(ld_follow_poll(f, &n, &e), LD_ERR_USAGE);
    CHECK_EQ_INT(e.line, 2);
    CHECK_EQ_INT(e.offset, 2);
    CHECK_EQ_INT(poll_once(f), 0);
    EXPECT(&r, "E OPENED h.log@0\nL h.log:1@0 a\nL h.log:2@2 b\nL h.log:3@4 c\n");
    ld_follow_free(f);
    CHECK_EQ_INT(r.opened, r.closed);
    ld_follow_free(NULL);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_follow_appended_lines),
    LD_CASE(test_follow_partial_line),
    LD_CASE(test_follow_long_line_grows),
    LD_CASE(test_follow_rename_rotation),
    LD_CASE(test_follow_rotation_drains_first),
    LD_CASE(test_follow_copytruncate),
    LD_CASE(test_follow_created_later),
    LD_CASE(test_follow_deleted_and_recreated),
    LD_CASE(test_follow_directory),
    LD_CASE(test_follow_resume),
    LD_CASE(test_follow_resume_rotated_sibling),
    LD_CASE(test_follow_resume_saved_while_draining),
    LD_CASE(test_follow_resume_lost),
    LD_CASE(test_follow_resume_truncated),
    LD_CASE(test_follow_resume_directory),
    LD_CASE(test_follow_max_line),
    LD_CASE(test_follow_stdin_pipe),
    LD_CASE(test_follow_from_end),
    LD_CASE(test_follow_hook_stops),
};

LD_TEST_MAIN(cases)
