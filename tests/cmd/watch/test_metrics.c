/* test_metrics.c - logdiff watch's metrics (cmd/watch/metrics*.{h,c}): the
 * render of a known set of calls read back by independent readers
 * (promtool check metrics; the Python prometheus_client parser through
 * check_exposition.py), label escaping and bounds, the histograms, the
 * textfile's atomic replacement, the HTTP server and its address errors. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/watch/metrics.h"
#include "cmd/watch/metrics_http.h"
#include "cmd/watch/metrics_listen.h"
#include "tests/support/ld_test.h"
#include "metrics_calls.h"

#define WATCH_TESTS LD_SOURCE_DIR "/tests/cmd/watch"

/* ---------------------------------------------------------------- helpers */

static char *known_render(size_t *len)
{
    ld_metrics *m = ld_metrics_new();
    if (!m) return NULL;
    ld_test_metrics_known_calls(m);
    char *text = ld_metrics_render(m, LD_TEST_RENDER_AT, len);
    ld_metrics_free(m);
    return text;
}

/* a fresh directory under /tmp (the caller removes it), in out */
static int temp_dir(char *out, size_t size)
{
    snprintf(out, size, "/tmp/ld-watch-metrics-XXXXXX");
    return mkdtemp(out) ? 0 : -1;
}

static int write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int rc = fwrite(text, 1, len, f) == len ? 0 : -1;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

/* the number of entries of dir besides . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

/* the exit status of a shell command (-1 when it could not run) */
static int run_status(const char *cmd)
{
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static int have_program(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return run_status(cmd) == 0;
}

/* the value of the sample line that starts with `series ` in text, or -1 */
static double sample_value(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ') return strtod(p + n + 1, NULL);
    return -1;
}

/* ---------------------------------------------------------------- render */

static int test_metrics_render_known_lines(void)
{
    size_t len = 0;
    char *t = known_render(&len);
    CHECK(t);
    CHECK_EQ_INT(len, strlen(t));
    CHECK(len > 0 && t[len - 1] == '\n');
    CHECK(strstr(t, "# HELP logdiff_requests_judged_total ") != NULL);
    CHECK(strstr(t, "# TYPE logdiff_requests_judged_total counter\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_requests_judged_total{verdict=\"ok\"} 3\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_requests_judged_total{verdict=\"sampling\"} 0\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_findings_total{kind=\"harness.empty_assistant\",severity=\"warning\"} 2\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_lines_read_total{status=\"parsed\"} 125\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_read_bytes_total 123456800\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_source_events_total{event=\"gone\"} 0\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_open_requests 5\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_conversations 40\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_last_request_timestamp_seconds 1700000001\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_seconds_since_last_request 41.25\n") != NULL);
    CHECK(strstr(t, "# TYPE logdiff_prompt_bytes histogram\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_build_info{version=\"") != NULL);
    /* every family's TYPE comes once, before its samples */
    CHECK(strstr(t, "# TYPE logdiff_findings_total counter\n") <
          strstr(t, "\nlogdiff_findings_total{"));
    free(t);
    return 0;
}

static int test_metrics_label_escaping(void)
{
    size_t len = 0;
    char *t = known_render(&len);
    CHECK(t);
    /* odd"kind\with<newline>newline: \" \\ \n in the label value */
    CHECK_MSG(strstr(t, "{kind=\"odd\\\"kind\\\\with\\nnewline\",severity=\"info\"} 1\n") != NULL,
              "%s", t);
    free(t);

    ld_metrics *m = ld_metrics_new();
    CHECK(m);
    ld_metrics_finding(m, "bad\xff\xfe" "utf8", "");     /* not UTF-8; empty */
    char longer[400];
    memset(longer, 'k', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    ld_metrics_finding(m, longer, "error");
    t = ld_metrics_render(m, 0, &len);
    CHECK(t);
    CHECK(strstr(t, "{kind=\"bad\xEF\xBF\xBD\xEF\xBF\xBDutf8\",severity=\"unknown\"} 1\n") != NULL);
    char cut[160];
    snprintf(cut, sizeof cut, "{kind=\"%.*s\",severity", 128, longer);
    CHECK(strstr(t, cut) != NULL);
    free(t);
    ld_metrics_free(m);
    return 0;
}

static int test_metrics_label_sets_bounded(void)
{
    ld_metrics *m = ld_metrics_new();
    CHECK(m);
    char kind[32];
    for (int i = 0; i < 300; i++) {
        snprintf(kind, sizeof kind, "kind.%03d", i);
        ld_metrics_finding(m, kind, "info");
    }
    ld_metrics_finding(m, "kind.000", "info"); /* an existing series still counts */
    size_t len = 0;
    char *t = ld_metrics_render(m, 0, &len);
    CHECK(t);
    CHECK_EQ_INT(sample_value(t, "logdiff_findings_total{kind=\"kind.000\",severity=\"info\"}"), 2);
    CHECK_EQ_INT(sample_value(t, "logdiff_findings_total{kind=\"kind.254\",severity=\"info\"}"), 1);
    CHECK_EQ_INT(sample_value(t, "logdiff_findings_total{kind=\"kind.255\",severity=\"info\"}"), -1);
    CHECK_EQ_INT(sample_value(t, "logdiff_findings_total{kind=\"other\",severity=\"other\"}"), 45);
    int series = 0;
    for (const char *p = t; (p = strstr(p, "\nlogdiff_findings_total{")) != NULL; p++) series++;
    CHECK_EQ_INT(series, 256);
    free(t);
    ld_metrics_free(m);
    return 0;
}

static int test_metrics_last_request_absent_before_first(void)
{
    ld_metrics *m = ld_metrics_new();
    CHECK(m);
    size_t len = 0;
    char *t = ld_metrics_render(m, 1e9, &len);
    CHECK(t);
    CHECK(strstr(t, "logdiff_last_request_timestamp_seconds") == NULL);
    CHECK(strstr(t, "logdiff_seconds_since_last_request") == NULL);
    CHECK(strstr(t, "logdiff_findings_total") == NULL); /* no finding yet: no family */
    CHECK(strstr(t, "\nlogdiff_requests_judged_total{verdict=\"harness\"} 0\n") != NULL);
    CHECK(strstr(t, "\nlogdiff_prompt_bytes_count 0\n") != NULL);
    CHECK(sample_value(t, "logdiff_start_time_seconds") > 1.6e9);
    free(t);
    ld_metrics_judged(m, "ok", 10, 1, 2000.0);
    t = ld_metrics_render(m, 1990.0, &len); /* a clock stepped back: never negative */
    CHECK(t);
    CHECK_EQ_INT(sample_value(t, "logdiff_seconds_since_last_request"), 0);
    CHECK_EQ_INT(sample_value(t, "logdiff_last_request_timestamp_seconds"), 2000);
    free(t);
    ld_metrics_free(m);
    return 0;
}

static int test_metrics_histogram_cumulative(void)
{
    size_t len = 0;
    char *t = known_render(&len);
    CHECK(t);
    /* prompts 500, 1024, 5000, 4194304, 10000000 */
    static const struct { const char *le; int n; } prompt[] = {
        {"1024", 2}, {"4096", 2}, {"16384", 3}, {"65536", 3}, {"262144", 3},
        {"1048576", 3}, {"4194304", 4}, {"+Inf", 5}};
    char series[96];
    for (size_t i = 0; i < sizeof prompt / sizeof prompt[0]; i++) {
        snprintf(series, sizeof series, "logdiff_prompt_bytes_bucket{le=\"%s\"}", prompt[i].le);
        CHECK_MSG(sample_value(t, series) == prompt[i].n, "%s", series);
    }
    CHECK_EQ_INT(sample_value(t, "logdiff_prompt_bytes_sum"), 500 + 1024 + 5000 + 4194304 + 10000000);
    CHECK_EQ_INT(sample_value(t, "logdiff_prompt_bytes_count"), 5);
    /* messages 1, 2, 3, 512, 1000 */
    CHECK_EQ_INT(sample_value(t, "logdiff_request_messages_bucket{le=\"1\"}"), 1);
    CHECK_EQ_INT(sample_value(t, "logdiff_request_messages_bucket{le=\"2\"}"), 2);
    CHECK_EQ_INT(sample_value(t, "logdiff_request_messages_bucket{le=\"4\"}"), 3);
    CHECK_EQ_INT(sample_value(t, "logdiff_request_messages_bucket{le=\"256\"}"), 3);
    CHECK_EQ_INT(sample_value(t, "logdiff_request_messages_bucket{le=\"512\"}"), 4);
    CHECK_EQ_INT(sample_value(t, "logdiff_request_messages_bucket{le=\"+Inf\"}"), 5);
    CHECK_EQ_INT(sample_value(t, "logdiff_request_messages_sum"), 1 + 2 + 3 + 512 + 1000);
    free(t);
    return 0;
}

/* ---------------------------------------------------------------- oracles */

static int test_metrics_promtool_check(void)
{
    if (!have_program("promtool")) SKIP("promtool not found (Debian: apt-get install prometheus)");
    char dir[64], path[128], cmd[512];
    CHECK(temp_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/known.prom", dir);
    size_t len = 0;
    char *t = known_render(&len);
    CHECK(t && write_file(path, t, len) == 0);
    free(t);
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
    int rc = run_status(cmd);
    remove(path);
    rmdir(dir);
    CHECK_MSG(rc == 0, "promtool check metrics: exit %d", rc);
    return 0;
}

static int test_metrics_python_parser_values(void)
{
    char dir[64], path[128], cmd[512];
    CHECK(temp_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/known.prom", dir);
    size_t len = 0;
    char *t = known_render(&len);
    CHECK(t && write_file(path, t, len) == 0);
    free(t);
    snprintf(cmd, sizeof cmd, "python3 %s/check_exposition.py %s", WATCH_TESTS, path);
    int rc = run_status(cmd);
    /* the python3 first in PATH may not be Debian's, where tools/setup.sh
     * installs python3-prometheus-client */
    if (rc == 77 && access("/usr/bin/python3", X_OK) == 0) {
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/check_exposition.py %s", WATCH_TESTS, path);
        rc = run_status(cmd);
    }
    remove(path);
    rmdir(dir);
    if (rc == 77) SKIP("prometheus_client not installed (python3-prometheus-client, or pip install prometheus-client)");
    CHECK_MSG(rc == 0, "check_exposition.py: exit %d", rc);
    return 0;
}

/* ---------------------------------------------------------------- threads */

typedef struct judge_job {
    ld_metrics *m;
    int n;
} judge_job;

static void *judge_many(void *arg)
{
    judge_job *j = arg;
    for (int i = 0; i < j->n; i++) {
        ld_metrics_judged(j->m, i % 2 ? "ok" : "log", 2048, 4, 100.0);
        ld_metrics_lines(j->m, "parsed", 1);
        if (i % 100 == 0) free(ld_metrics_render(j->m, 101.0, NULL));
    }
    return NULL;
}

static int test_metrics_threads_count_exactly(void)
{
    ld_metrics *m = ld_metrics_new();
    CHECK(m);
    enum { THREADS = 4, EACH = 2000 };
    pthread_t th[THREADS];
    judge_job job = {m, EACH};
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, judge_many, &job) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    char *t = ld_metrics_render(m, 101.0, NULL);
    CHECK(t);
    CHECK_EQ_INT(sample_value(t, "logdiff_requests_judged_total{verdict=\"ok\"}"), THREADS * EACH / 2);
    CHECK_EQ_INT(sample_value(t, "logdiff_lines_read_total{status=\"parsed\"}"), THREADS * EACH);
    CHECK_EQ_INT(sample_value(t, "logdiff_prompt_bytes_count"), THREADS * EACH);
    free(t);
    ld_metrics_free(m);
    return 0;
}

/* ---------------------------------------------------------------- textfile */

typedef struct reader_job {
    const char *path;
    atomic_int stop;
    int reads, partial;
} reader_job;

/* reads the file again and again while it is being replaced: each read
 * must be one whole render */
static void *read_repeatedly(void *arg)
{
    reader_job *r = arg;
    while (!atomic_load(&r->stop)) {
        char *t = ld_test_slurp(r->path);
        if (!t) continue; /* not there yet */
        size_t n = strlen(t);
        if (strncmp(t, "# HELP logdiff_build_info ", 26) != 0 || n == 0 || t[n - 1] != '\n' ||
            !strstr(t, "\nlogdiff_request_messages_count "))
            r->partial++;
        r->reads++;
        free(t);
    }
    return NULL;
}

static int test_metrics_textfile_atomic(void)
{
    char dir[64], path[128];
    CHECK(temp_dir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/logdiff.prom", dir);
    ld_metrics *m = ld_metrics_new();
    CHECK(m);
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_metrics_write_textfile(m, path, 10.0, &err) == 0);
    ld_test_metrics_known_calls(m);
    CHECK(ld_metrics_write_textfile(m, path, LD_TEST_RENDER_AT, &err) == 0);
    char *want = ld_metrics_render(m, LD_TEST_RENDER_AT, NULL);
    char *got = ld_test_slurp(path);
    CHECK(want && got);
    CHECK(strcmp(want, got) == 0);
    free(want);
    free(got);
    CHECK_EQ_INT(count_entries(dir), 1); /* no temporary file left */

    reader_job r = {.path = path, .reads = 0, .partial = 0};
    atomic_init(&r.stop, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, read_repeatedly, &r) == 0);
    for (int i = 0; i < 300; i++) {
        ld_metrics_judged(m, "ok", (uint64_t)i * 1000, 3, LD_TEST_JUDGED_AT);
        if (ld_metrics_write_textfile(m, path, LD_TEST_RENDER_AT, &err) != 0) break;
    }
    atomic_store(&r.stop, 1);
    pthread_join(th, NULL);
    CHECK_MSG(err.code == LD_OK, "%s", err.msg);
    CHECK_MSG(r.partial == 0, "%d of %d reads saw a partial file", r.partial, r.reads);
    CHECK(r.reads > 0);
    CHECK_EQ_INT(count_entries(dir), 1);
    remove(path);
    rmdir(dir);

    /* a directory that does not exist: the path and the reason said */
    CHECK(ld_metrics_write_textfile(m, "/nonexistent-ld-dir/x.prom", 0, &err) == -1);
    CHECK_EQ_INT(err.code, LD_ERR_IO);
    CHECK_MSG(strstr(err.msg, "/nonexistent-ld-dir/x.prom") && strstr(err.msg, "No such file"), "%s",
              err.msg);
    ld_metrics_free(m);
    return 0;
}

/* ---------------------------------------------------------------- listen */

static int test_metrics_listen_address_errors(void)
{
    static const struct { const char *addr, *says; } bad[] = {
        {"9464", "expected ADDR:PORT"},
        {"::1:9464", "in brackets"},
        {"[::1:9464", "in brackets"},
        {"127.0.0.1:", "0 to 65535"},
        {"127.0.0.1:65536", "0 to 65535"},
        {"127.0.0.1:94x4", "0 to 65535"},
        {"no-such-host.invalid:9464", "no-such-host.invalid"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_metrics_listen(bad[i].addr, &err) == -1, "%s", bad[i].addr);
        CHECK_MSG(strstr(err.msg, bad[i].says) != NULL, "%s: %s", bad[i].addr, err.msg);
    }
    ld_error err;
    int fd = ld_metrics_listen(":0", &err); /* every interface, a free port */
    CHECK_MSG(fd >= 0, "%s", err.msg);
    CHECK(ld_metrics_listen_port(fd) > 0);
    close(fd);
    return 0;
}

/* ---------------------------------------------------------------- http */

/* One HTTP/1.0 request to host:port; the whole answer (malloc'd) or NULL. */
static char *http_fetch(int family, const char *host, int port, const char *request)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        inet_pton(AF_INET, host, &a->sin_addr);
        len = sizeof *a;
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        inet_pton(AF_INET6, host, &a->sin6_addr);
        len = sizeof *a;
    }
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0) return NULL;
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 ||
        write(fd, request, strlen(request)) != (ssize_t)strlen(request)) {
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while (buf && (r = read(fd, buf + n, cap - n - 1)) > 0) {
        n += (size_t)r;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) { free(buf); buf = NULL; }
            buf = b;
        }
    }
    close(fd);
    if (buf) buf[n] = 0;
    return buf;
}

static int check_served(int family, const char *host, int port, const char *want_body)
{
    char *a = http_fetch(family, host, port, "GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n");
    CHECK(a);
    CHECK_MSG(strncmp(a, "HTTP/1.0 200", 12) == 0 || strncmp(a, "HTTP/1.1 200", 12) == 0, "%.80s", a);
    CHECK_MSG(strstr(a, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != NULL, "%.400s", a);
    const char *body = strstr(a, "\r\n\r\n");
    CHECK(body);
    body += 4;
    /* the same render but for seconds since the last request, computed
     * when served: compare the text up to that family */
    const char *cut = strstr(want_body, "# HELP logdiff_seconds_since_last_request");
    CHECK(cut);
    CHECK(strncmp(body, want_body, (size_t)(cut - want_body)) == 0);
    CHECK(strstr(body, "\nlogdiff_request_messages_count 5\n") != NULL);
    free(a);

    a = http_fetch(family, host, port, "GET /other HTTP/1.0\r\n\r\n");
    CHECK(a);
    CHECK_MSG(strncmp(a + 9, "404", 3) == 0, "%.80s", a);
    free(a);
    a = http_fetch(family, host, port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    CHECK(a);
    CHECK_MSG(strncmp(a + 9, "405", 3) == 0, "%.80s", a);
    free(a);
    return 0;
}

static int test_metrics_http_serves(void)
{
    ld_metrics *m = ld_metrics_new();
    CHECK(m);
    ld_test_metrics_known_calls(m);
    ld_error err;
    ld_error_clear(&err);
    ld_metrics_http *h = ld_metrics_http_start(m, "127.0.0.1:0", &err);
#ifndef LD_HAVE_MICROHTTPD
    CHECK(!h);
    CHECK_EQ_STR(err.msg, "built without libmicrohttpd: use --metrics-textfile");
    ld_metrics_free(m);
    SKIP("built without libmicrohttpd (libmicrohttpd-dev): only its refusal checked");
#endif
    CHECK_MSG(h, "%s", err.msg);
    int port = ld_metrics_http_port(h);
    CHECK(port > 0);
    char *want = ld_metrics_render(m, 0, NULL);
    CHECK(want);
    int rc = check_served(AF_INET, "127.0.0.1", port, want);

    /* a second server on the same port: refused, the address named */
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    ld_error err2;
    ld_error_clear(&err2);
    ld_metrics_http *h2 = ld_metrics_http_start(m, addr, &err2);
    CHECK(!h2);
    CHECK_MSG(strstr(err2.msg, addr) && strstr(err2.msg, "address already in use"), "%s", err2.msg);
    ld_metrics_http_stop(h);

    /* after stop the port is free again */
    h = ld_metrics_http_start(m, addr, &err);
    CHECK_MSG(h, "%s", err.msg);
    ld_metrics_http_stop(h);
    free(want);
    ld_metrics_free(m);
    return rc;
}

static int test_metrics_http_ipv6(void)
{
#ifndef LD_HAVE_MICROHTTPD
    SKIP("built without libmicrohttpd");
#else
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    if (probe < 0) SKIP("no IPv6 on this host");
    close(probe);
    ld_metrics *m = ld_metrics_new();
    CHECK(m);
    ld_test_metrics_known_calls(m);
    ld_error err;
    ld_error_clear(&err);
    ld_metrics_http *h = ld_metrics_http_start(m, "[::1]:0", &err);
    if (!h) {
        ld_metrics_free(m);
        SKIP("cannot listen on [::1] here: %s", err.msg);
    }
    char *want = ld_metrics_render(m, 0, NULL);
    int rc = want ? check_served(AF_INET6, "::1", ld_metrics_http_port(h), want) : 1;
    ld_metrics_http_stop(h);
    free(want);
    ld_metrics_free(m);
    return rc;
#endif
}

static const ld_test_case cases[] = {
    LD_CASE(test_metrics_render_known_lines),
    LD_CASE(test_metrics_label_escaping),
    LD_CASE(test_metrics_label_sets_bounded),
    LD_CASE(test_metrics_last_request_absent_before_first),
    LD_CASE(test_metrics_histogram_cumulative),
    LD_CASE(test_metrics_promtool_check),
    LD_CASE(test_metrics_python_parser_values),
    LD_CASE(test_metrics_threads_count_exactly),
    LD_CASE(test_metrics_textfile_atomic),
    LD_CASE(test_metrics_listen_address_errors),
    LD_CASE(test_metrics_http_serves),
    LD_CASE(test_metrics_http_ipv6),
};

LD_TEST_MAIN(cases)
