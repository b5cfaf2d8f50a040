/* watch.c - `logdiff watch`: diff's verdicts on a running deployment's
 * requests as they finish, with Prometheus metrics. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "cmd/common/checks.h"
#include "cmd/common/logread.h"
#include "cmd/common/options.h"
#include "cmd/format/difffmt.h"
#include "cmd/watch/metrics_http.h"
#include "cmd/watch/watch.h"
#include "cmd/watch/watch_warmup.h"

static const char *const watch_usage[] = {
    "logdiff watch [--json] [--template SRC | --model DIR] [--tokenizer SRC] SOURCE...",
    "logdiff watch --metrics-listen ADDR:PORT | --metrics-textfile PATH [--state FILE] SOURCE...",
    "",
    "Follows its sources as `tail -F` does and gives each request diff's verdict",
    "(the same lines, or with --json the same JSON records) as soon as it can be",
    "judged: at its Finish line, or as unpaired (log.unpaired) once it has waited",
    "--unpaired-after for it.  Conversations are followed across requests as diff",
    "follows them, within --conversation-memory.",
    "",
    "A SOURCE is a file (followed through rename-and-create rotation and",
    "copytruncate, and waited for when it does not exist yet), a directory (every",
    "file in it, now and later; compressed rotations are left out), '-'",
    "(standard input: journalctl -f -o json, kubectl logs -f, docker logs -f), in",
    "any capture diff reads, or journal:UNIT, a systemd unit's entries followed in",
    "the system journal (--journal-dir DIR: in the journal files of DIR), where",
    "logdiff was built with libsystemd (logdiff --version says); the lines",
    "journald splits at 48 KiB are rejoined.  Files and journals are read from",
    "their start (--from-end: from their end), or from where --state FILE says",
    "the last run stopped (a file's offset, a journal's cursor): the positions",
    "and the requests judged are saved there every second and at the end, so",
    "that a restart neither judges a request twice nor misses one.  The",
    "conversations are not saved: after a restart each file is read again in",
    "silence from up to --state-warmup SIZE (default 64M, 0: off) before where",
    "it resumes, its requests judged before given to the conversations only",
    "(not printed nor counted), so that a later turn is judged with its earlier",
    "ones; that costs reading and judging those bytes again at the start.",
    "",
    "Metrics (Prometheus text format): --metrics-listen serves /metrics,",
    "--metrics-textfile rewrites a file for node_exporter's textfile collector.",
    "docs/ops/ has a Grafana dashboard, alerting rules and a systemd unit.",
    "",
    "Runs until its sources end (standard input closed) or SIGINT/SIGTERM.  Exit",
    "status: as diff (0 every verdict ok, 1 some request not ok) when the sources",
    "ended; 0 when stopped by a signal; 2 usage or I/O error.",
    NULL
};

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal; /* no SA_RESTART: a sleep ends at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a reader of stdout that goes away: a write error, not death */
}

typedef struct watch_args {
    const char *unpaired_after, *poll;
    const char *listen;
    const char *warmup;
} watch_args;

static int parse_durations(struct ld_cli *cli, const watch_args *a, ld_watch_opts *o)
{
    if (a->unpaired_after && ld_watch_parse_duration(a->unpaired_after, &o->unpaired_after) != 0) {
        fprintf(cli->err, "logdiff watch: --unpaired-after '%s' is not a duration (30s, 10m, 1h)\n", a->unpaired_after);
        return -1;
    }
    if (a->poll && ld_watch_parse_duration(a->poll, &o->poll_interval) != 0) {
        fprintf(cli->err, "logdiff watch: --poll '%s' is not a duration (200ms as 0.2)\n", a->poll);
        return -1;
    }
    const char *warm = a->warmup ? a->warmup : LD_WATCH_WARMUP_DEFAULT;
    o->state_warmup = strcmp(warm, "0") ? ld_cli_parse_size(warm) : 0;
    if (!o->state_warmup && strcmp(warm, "0")) {
        fprintf(cli->err, "logdiff watch: --state-warmup '%s' is not 0 or a size from 1K to 64G (bytes, or with K, M, G)\n",
                warm);
        return -1;
    }
    return 0;
}

/* the metrics when asked for, and their server; -1 after a message */
static int start_metrics(struct ld_cli *cli, const watch_args *a, const ld_watch_opts *o, ld_metrics **m,
                         ld_metrics_http **http)
{
    if (!a->listen && !o->metrics_textfile) return 0;
    if (!(*m = ld_metrics_new())) {
        fprintf(cli->err, "logdiff watch: out of memory for the metrics\n");
        return -1;
    }
    if (!a->listen) return 0;
    ld_error e;
    ld_error_clear(&e);
    if (!(*http = ld_metrics_http_start(*m, a->listen, &e))) {
        fprintf(cli->err, "logdiff watch: --metrics-listen %s: %s\n", a->listen, e.msg);
        return -1;
    }
    return 0;
}

int cmd_watch(int argc, char **argv, struct ld_cli *cli)
{
    ld_cli_diff_report rep;
    ld_cli_diff_report_init(&rep, cli);
    ld_cli_check_flags f = { .server = "sglang" };
    ld_cli_checks chk = { 0 };
    ld_cli_capture_opts capture = { 0 };
    ld_watch_opts o = { 600, 0.2, 1.0, 0, NULL, NULL, NULL, 0 };
    watch_args a = { 0 };
    const ld_cli_option options[] = {
        { LD_OPT_BOOL, 0, "json", &rep.json, NULL, "JSON Lines, one object per request (as diff --json)" },
        { LD_OPT_BOOL, 'v', "verbose", &rep.verbose, NULL, "also list info findings and ok requests' findings" },
        { LD_OPT_STRING, 0, "unpaired-after", &a.unpaired_after, "TIME", "judge a request without its Finish line after TIME (default 10m)" },
        { LD_OPT_STRING, 0, "state", &o.state_path, "FILE", "keep the read positions in FILE; resume from them" },
        { LD_OPT_STRING, 0, "state-warmup", &a.warmup, "SIZE", "after a restart, read up to SIZE again in silence for the conversations (default 64M; 0: off)" },
        { LD_OPT_BOOL, 0, "from-end", &o.from_end, NULL, "files that exist at the start: from their end; journald units: from the entries written after the start" },
        { LD_OPT_STRING, 0, "journal-dir", &o.journal_dir, "DIR", "journal:UNIT reads the journal files in DIR (as journalctl -D), not the system journal" },
        { LD_OPT_STRING, 0, "metrics-listen", &a.listen, "ADDR:PORT", "serve Prometheus metrics at http://ADDR:PORT/metrics" },
        { LD_OPT_STRING, 0, "metrics-textfile", &o.metrics_textfile, "PATH", "rewrite PATH with the metrics every second (node_exporter)" },
        { LD_OPT_STRING, 0, "poll", &a.poll, "SECONDS", "how often quiet sources are looked at (default 0.2)" },
        LD_CLI_CONV_OPTIONS(rep.conv),
        LD_CLI_CHECK_OPTIONS(f, chk),
        LD_CLI_CAPTURE_OPTIONS(capture),
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_cli_parse_options(argc, argv, watch_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    if (n_args == 0) {
        fprintf(cli->err, "logdiff watch: no source given (use '-' for standard input)\n");
        return LD_EXIT_TROUBLE;
    }
    ld_diff_options dopts = { { 0 }, 0 };
    if (parse_durations(cli, &a, &o) != 0 || ld_cli_conv_options(cli, "watch", &rep.conv, &dopts.conv) != 0 ||
        ld_cli_checks_load(cli, "watch", &f, &chk) != 0)
        return LD_EXIT_TROUBLE;
    rep.checks = chk.judge;
    ld_metrics *metrics = NULL;
    ld_metrics_http *http = NULL;
    ld_error e;
    ld_error_clear(&e);
    rc = start_metrics(cli, &a, &o, &metrics, &http);
    if (rc == 0 && ld_differ_new(&dopts, &rep.differ, &e) != LD_OK) {
        fprintf(cli->err, "logdiff watch: %s\n", e.msg);
        rc = -1;
    }
    ld_cli_logread lr = { cli, rep.json, 1, { 0 }, { 0 }, capture };
    catch_stop_signals();
    if (rc == 0) rc = ld_watch_run(&rep, &lr, metrics, &o, argv + 1, n_args, &stop_requested);
    if (rc == 0) ld_cli_diff_report_summary(&rep, &lr);
    ld_metrics_http_stop(http);
    ld_metrics_free(metrics);
    ld_differ_free(rep.differ);
    ld_cli_checks_free(&chk);
    ld_arena_release(&rep.arena);
    if (rc != 0 || rep.failed) return LD_EXIT_TROUBLE;
    if (stop_requested) return LD_EXIT_SAME;
    return rep.n_not_ok || lr.stats.capture_problems ? LD_EXIT_DIFF : LD_EXIT_SAME;
}
