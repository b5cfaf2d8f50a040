/* diff.c - `logdiff diff`: a verdict per request (which layer lost the
 * conversation) with the evidence, and a summary. */
#include <string.h>

#include "cmd.h"
#include "diff.h"
#include "difffmt.h"
#include "logread.h"
#include "options.h"

static const char *const diff_usage[] = {
    "logdiff diff [--json] [--rid RID] [--verbose] [--no-conversations] LOG...",
    "",
    "Compares every request's message array with the prompt the server built",
    "from it, follows conversations across requests, and gives each request a",
    "verdict: ok, harness (the client sent a broken history), template (the",
    "templated prompt lost or mangled a turn), sampling (a degenerate output)",
    "or log (the log cannot tell).  Exit status: 0 every verdict ok, 1 some",
    "request is not ok, 2 usage or I/O error.",
    NULL
};

int cmd_diff(int argc, char **argv, struct ld_cli *cli)
{
    ld_diff_report rep;
    ld_diff_report_init(&rep, cli);
    int no_conv = 0;
    const ld_option options[] = {
        { LD_OPT_BOOL, 0, "json", &rep.json, NULL, "JSON Lines, one object per request" },
        { LD_OPT_STRING, 0, "rid", &rep.only_rid, "RID", "report only this request (all are read)" },
        { LD_OPT_BOOL, 'v', "verbose", &rep.verbose, NULL, "also list info findings and ok requests' findings" },
        { LD_OPT_BOOL, 0, "no-conversations", &no_conv, NULL, "judge each request alone" },
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_parse_options(argc, argv, diff_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    if (n_args == 0) {
        fprintf(cli->err, "logdiff diff: no log given (use '-' for standard input)\n");
        return LD_EXIT_TROUBLE;
    }
    ld_diff_options dopts = { { 0 }, no_conv };
    ld_error e;
    ld_error_clear(&e);
    if (ld_differ_new(&dopts, &rep.differ, &e) != LD_OK) {
        fprintf(cli->err, "logdiff diff: %s\n", e.msg);
        return LD_EXIT_TROUBLE;
    }
    ld_pair_options opts = { 0 };
    opts.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_ERROR_RECORDS;
    ld_logread lr = { cli, rep.json, 1, { 0 }, { 0 } };
    rc = ld_logread_run(&lr, argv + 1, n_args, &opts, ld_diff_report_request, &rep);
    if (rc == 0) ld_diff_report_summary(&rep, &lr);
    ld_differ_free(rep.differ);
    ld_arena_release(&rep.arena);
    if (rc != 0 || rep.failed || lr.stats.io_errors) return LD_EXIT_TROUBLE;
    if (rep.only_rid && !rep.n_reported) {
        fprintf(cli->err, "logdiff diff: no request with rid '%s' in the logs given\n", rep.only_rid);
        return LD_EXIT_TROUBLE;
    }
    return rep.n_not_ok ? LD_EXIT_DIFF : LD_EXIT_SAME;
}
