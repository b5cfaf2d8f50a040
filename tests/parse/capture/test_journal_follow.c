/* test_journal_follow.c - parse/capture/journal_follow.h: a unit's entries
 * followed in a journal that grows while it is read.
 *
 * The journal is written by systemd's own systemd-journal-remote from
 * journald's export format (journal-export(5)) on a pipe, into a fresh
 * directory: entries of the unit (a MESSAGE that is not UTF-8, one of 100
 * KB, one marked _LINE_BREAK=line-max, one without MESSAGE) and of another
 * unit between them.  The oracle is the bytes the test wrote.  Skips (77)
 * without systemd-journal-remote; without libsystemd at build time, checks
 * that opening one says so. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "parse/capture/journal_follow.h"
#include "tests/support/ld_test.h"

#define REMOTE "/lib/systemd/systemd-journal-remote"

/* ---------------------------------------------------------------- the writer */

typedef struct remote {
    pid_t pid;
    int fd; /* its standard input */
    char dir[256];
    uint64_t t;
} remote;

static int remote_start(remote *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s/ld-jf-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int p[2];
    if (!mkdtemp(r->dir) || pipe(p) != 0) return -1;
    char out[320];
    snprintf(out, sizeof out, "%s/live.journal", r->dir);
    if ((r->pid = fork()) == 0) {
        dup2(p[0], 0);
        close(p[0]), close(p[1]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2);
        execl(REMOTE, REMOTE, "-o", out, "-", (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    r->fd = p[1];
    r->t = 1763630040000000ull;
    return r->pid > 0 ? 0 : -1;
}

static void put(remote *r, const void *s, size_t n)
{
    for (size_t k = 0; k < n;) {
        ssize_t w = write(r->fd, (const char *)s + k, n - k);
        if (w <= 0) return;
        k += (size_t)w;
    }
}

static void put_field(remote *r, const char *name, const char *v)
{
    char line[512];
    int n = snprintf(line, sizeof line, "%s=%s\n", name, v);
    put(r, line, (size_t)n);
}

/* one entry of `unit`; msg NULL: none; MESSAGE in the binary form (any bytes) */
static void entry(remote *r, const char *unit, const char *msg, size_t len, int line_max)
{
    char num[32];
    r->t += 1000;
    snprintf(num, sizeof num, "%llu", (unsigned long long)r->t);
    put_field(r, "__REALTIME_TIMESTAMP", num);
    snprintf(num, sizeof num, "%llu", (unsigned long long)(r->t - 1763630000000000ull));
    put_field(r, "__MONOTONIC_TIMESTAMP", num);
    put_field(r, "_BOOT_ID", "0123456789abcdef0123456789abcdef");
    put_field(r, "_SYSTEMD_UNIT", unit);
    put_field(r, "_STREAM_ID", !strcmp(unit, "a.service") ? "000000000000000000000000000000aa" : "bb");
    if (line_max) put_field(r, "_LINE_BREAK", "line-max");
    if (msg) {
        unsigned char le[8];
        for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)len >> (8 * i));
        put(r, "MESSAGE\n", 8);
        put(r, le, 8);
        put(r, msg, len);
        put(r, "\n", 1);
    }
    put(r, "\n", 1);
}

static void remote_stop(remote *r)
{
    if (r->fd > 0) close(r->fd);
    if (r->pid > 0) waitpid(r->pid, NULL, 0);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", r->dir);
}

/* ---------------------------------------------------------------- the reader */

typedef struct got {
    char *text[16];
    size_t len[16];
    int last[16], skip[16];
    char source[16][64];
    int n, truncated;
} got;

static void got_free(got *g)
{
    for (int i = 0; i < g->n; i++) free(g->text[i]);
    memset(g, 0, sizeof *g);
}

/* reads until `want` records came or `rounds` waits of 100 ms passed, as a
 * caller waits: poll, process, read */
static int read_rounds(ld_journal_follow *j, got *g, int want, int rounds)
{
    for (int round = 0; round < rounds && g->n < want; round++) {
        CHECK(ld_journal_follow_process(j, NULL) == LD_OK);
        int has = 1;
        while (has && g->n < want && g->n < 16) {
            ld_capture_record rec;
            ld_error e;
            ld_error_clear(&e);
            ld_status st = ld_journal_follow_next(j, &rec, &has, &e);
            if (!has) break;
            CHECK_MSG(st == LD_OK || st == LD_ERR_TRUNCATED, "%s", e.msg);
            g->truncated += st == LD_ERR_TRUNCATED;
            g->text[g->n] = rec.text ? malloc(rec.len + 1) : NULL;
            if (rec.text) memcpy(g->text[g->n], rec.text, rec.len);
            g->len[g->n] = rec.len;
            g->last[g->n] = rec.last;
            g->skip[g->n] = rec.skip;
            snprintf(g->source[g->n], sizeof g->source[0], "%.*s", (int)rec.source_len, rec.source);
            g->n++;
        }
        struct pollfd p = { ld_journal_follow_fd(j), POLLIN, 0 };
        if (g->n < want) poll(&p, p.fd >= 0 ? 1 : 0, 100);
    }
    return 0;
}

static int read_until(ld_journal_follow *j, got *g, int want)
{
    return read_rounds(j, g, want, 100);
}

static int skip_without_remote(void)
{
    return access(REMOTE, X_OK) != 0;
}

/* ---------------------------------------------------------------- cases */

static int test_journal_follow_without_libsystemd(void)
{
    if (ld_journal_follow_available()) SKIP("built with libsystemd");
    ld_journal_follow *j = NULL;
    ld_error e;
    ld_error_clear(&e);
    CHECK_EQ_INT(ld_journal_follow_open("sglang", "/tmp", &j, &e), LD_ERR_UNSUPPORTED);
    CHECK(j == NULL && strstr(e.msg, "built without libsystemd") && strstr(e.msg, "sglang.service"));
    return 0;
}

static int test_journal_follow_unit_names(void)
{
    if (!ld_journal_follow_available()) SKIP("built without libsystemd");
    char dir[] = "/tmp/ld-jf-names-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    ld_journal_follow *j = NULL;
    ld_error e;
    ld_error_clear(&e);
    CHECK(ld_journal_follow_open("sglang", dir, &j, &e) == LD_OK);
    CHECK_EQ_STR(ld_journal_follow_unit(j), "sglang.service");
    CHECK(!ld_journal_follow_has_files(j)); /* an empty directory: nothing yet, no error */
    ld_capture_record rec;
    int has = 1;
    CHECK(ld_journal_follow_next(j, &rec, &has, NULL) == LD_OK && !has);
    char *c = NULL;
    CHECK_EQ_INT(ld_journal_follow_cursor(j, &c, NULL), LD_ERR_USAGE); /* on no entry */
    ld_journal_follow_close(j);
    CHECK(ld_journal_follow_open("sglang@2.socket", dir, &j, NULL) == LD_OK);
    CHECK_EQ_STR(ld_journal_follow_unit(j), "sglang@2.socket");
    ld_journal_follow_close(j);
    CHECK_EQ_INT(ld_journal_follow_open("", dir, &j, NULL), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_journal_follow_open("x", "/nonexistent/ld-jf", &j, &e), LD_ERR_IO);
    CHECK(strstr(e.msg, "/nonexistent/ld-jf") != NULL);
    rmdir(dir);
    return 0;
}

/* the unit's entries only, whole, as they are written; more after the end */
static int check_reads_as_written(remote *r, ld_journal_follow *j)
{
    static char big[100000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
    entry(r, "a.service", "one \xff\xfe not UTF-8", 16, 0);
    entry(r, "b.service", "another unit's", 14, 0);
    entry(r, "a.service", big, sizeof big, 1);
    entry(r, "a.service", NULL, 0, 0);
    got g = { 0 };
    CHECK(read_until(j, &g, 3) == 0);
    CHECK_EQ_INT(g.n, 3);
    CHECK(g.len[0] == 16 && !memcmp(g.text[0], "one \xff\xfe not UTF-8", 16) && g.last[0]);
    CHECK_EQ_STR(g.source[0], "000000000000000000000000000000aa");
    CHECK(g.len[1] == sizeof big && !memcmp(g.text[1], big, sizeof big) && !g.last[1]); /* whole: no 64 KiB cap */
    CHECK(g.skip[2] && g.text[2] == NULL);
    got_free(&g);
    entry(r, "a.service", "later", 5, 0);
    CHECK(read_until(j, &g, 1) == 0);
    CHECK(g.n == 1 && g.len[0] == 5 && !memcmp(g.text[0], "later", 5) && !g.truncated);
    got_free(&g);
    return 0;
}

static int test_journal_follow_reads_as_written(void)
{
    if (!ld_journal_follow_available()) SKIP("built without libsystemd");
    if (skip_without_remote()) SKIP("%s missing (Debian systemd-journal-remote)", REMOTE);
    remote r;
    CHECK(remote_start(&r) == 0);
    ld_journal_follow *j = NULL;
    ld_error e;
    ld_error_clear(&e);
    int rc = ld_journal_follow_open("a", r.dir, &j, &e) == LD_OK ? check_reads_as_written(&r, j) : 1;
    ld_journal_follow_close(j);
    remote_stop(&r);
    return rc;
}

/* a cursor's entry again, the one after it, a cursor whose entry is gone, the tail */
static int check_cursors(remote *r, ld_journal_follow *j)
{
    const char *msgs[] = { "m1", "m2", "m3" };
    for (int i = 0; i < 3; i++) entry(r, "a.service", msgs[i], 2, 0);
    got g = { 0 };
    char *c2 = NULL;
    CHECK(read_until(j, &g, 3) == 0 && g.n == 3);
    got_free(&g);
    CHECK(ld_journal_follow_seek(j, LD_JOURNAL_HEAD, NULL, NULL) == LD_OK);
    CHECK(read_until(j, &g, 2) == 0 && g.n == 2 && !memcmp(g.text[1], "m2", 2));
    got_free(&g);
    CHECK(ld_journal_follow_cursor(j, &c2, NULL) == LD_OK);
    CHECK(ld_journal_follow_seek(j, LD_JOURNAL_AT_CURSOR, c2, NULL) == LD_OK);
    CHECK(read_until(j, &g, 2) == 0 && g.n == 2 && !memcmp(g.text[0], "m2", 2) && !g.truncated);
    got_free(&g);
    CHECK(ld_journal_follow_seek(j, LD_JOURNAL_AFTER_CURSOR, c2, NULL) == LD_OK);
    CHECK(read_until(j, &g, 1) == 0 && g.n == 1 && !memcmp(g.text[0], "m3", 2) && !g.truncated);
    got_free(&g);
    /* the same position, but an entry of other contents (its hash): not found */
    char *x = strstr(c2, ";x=");
    CHECK(x != NULL);
    x[3] = x[3] == '0' ? '1' : '0';
    CHECK(ld_journal_follow_seek(j, LD_JOURNAL_AFTER_CURSOR, c2, NULL) == LD_OK);
    CHECK(read_until(j, &g, 1) == 0 && g.n >= 1 && g.truncated == 1);
    got_free(&g);
    free(c2);
    ld_error e;
    ld_error_clear(&e);
    CHECK_EQ_INT(ld_journal_follow_seek(j, LD_JOURNAL_AT_CURSOR, "nonsense", &e), LD_ERR_USAGE);
    CHECK(strstr(e.msg, "'nonsense' is not a journal cursor") != NULL);
    CHECK(ld_journal_follow_seek(j, LD_JOURNAL_TAIL, NULL, NULL) == LD_OK);
    CHECK(ld_journal_follow_cursor(j, &c2, NULL) == LD_OK); /* on the last entry: m3 */
    free(c2);
    CHECK(read_rounds(j, &g, 1, 3) == 0 && g.n == 0); /* nothing written since */
    entry(r, "a.service", "m4", 2, 0);
    CHECK(read_until(j, &g, 1) == 0 && g.n == 1 && !memcmp(g.text[0], "m4", 2));
    got_free(&g);
    return 0;
}

static int test_journal_follow_cursors(void)
{
    if (!ld_journal_follow_available()) SKIP("built without libsystemd");
    if (skip_without_remote()) SKIP("%s missing (Debian systemd-journal-remote)", REMOTE);
    remote r;
    CHECK(remote_start(&r) == 0);
    ld_journal_follow *j = NULL;
    int rc = ld_journal_follow_open("a.service", r.dir, &j, NULL) == LD_OK ? check_cursors(&r, j) : 1;
    ld_journal_follow_close(j);
    remote_stop(&r);
    return rc;
}

static const ld_test_case cases[] = {
    LD_CASE(test_journal_follow_without_libsystemd),
    LD_CASE(test_journal_follow_unit_names),
    LD_CASE(test_journal_follow_reads_as_written),
    LD_CASE(test_journal_follow_cursors),
};

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN); /* a writer gone: write() fails, the checks say so */
    return ld_test_run(cases, sizeof cases / sizeof cases[0], argc, argv);
}
