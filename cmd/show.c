/* show.c - `logdiff show --rid RID LOG...`: everything about one request. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "parse/pylit/pylit_json.h"
#include "cmd/common/logread.h"
#include "cmd/common/options.h"
#include "cmd/format/showfmt.h"

static const char *const show_usage[] = {
    "logdiff show --rid RID [--json] [--full] LOG...",
    "",
    "Shows one request: where its lines are, its parameters (model, temperature,",
    "max tokens, tools, template kwargs), a table of its messages, the templated",
    "prompt, the output and its finish reason.  --json gives the same as one JSON",
    "object with full texts and the parsed log values.  Exit status: 0 shown,",
    "1 shown but a part is missing or was truncated by the logger, 2 not found or",
    "usage/I/O error.",
    NULL
};

typedef struct show_state {
    const char *rid;
    ld_request **found;
    size_t n_found, cap;
    int oom;
} show_state;

/* r is rid's record, or its sub-request, or holds rid's as its prefill peer */
static int matches(const ld_request *r, const char *rid)
{
    return (r->rid && !strcmp(r->rid, rid)) || (r->parent_rid && !strcmp(r->parent_rid, rid)) ||
           (r->peer && matches(r->peer, rid));
}

static int on_request(void *ctx, ld_request *r)
{
    show_state *s = ctx;
    if (!matches(r, s->rid)) return 0;
    if (s->n_found == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        ld_request **nf = realloc(s->found, cap * sizeof *nf);
        if (!nf) { s->oom = 1; return 0; }
        s->found = nf;
        s->cap = cap;
    }
    s->found[s->n_found++] = r;
    return LD_PAIR_TAKE;
}

int cmd_show(int argc, char **argv, struct ld_cli *cli)
{
    show_state s = { 0 };
    int json = 0, full = 0;
    ld_cli_capture_opts capture = { 0 };
    const ld_cli_option options[] = {
        { LD_OPT_STRING, 0, "rid", &s.rid, "RID", "the request id to show (required)" },
        { LD_OPT_BOOL, 0, "json", &json, NULL, "one JSON object with full texts" },
        { LD_OPT_BOOL, 0, "full", &full, NULL, "print long prompts and outputs whole" },
        LD_CLI_CAPTURE_OPTIONS(capture),
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_cli_parse_options(argc, argv, show_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    if (!s.rid || n_args == 0) {
        fprintf(cli->err, "logdiff show: %s\n", !s.rid ? "--rid RID is required" : "no log given");
        return LD_EXIT_TROUBLE;
    }
    ld_pair_options opts = { 0 };
    opts.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES | LD_PAIR_KEEP_INTERNAL;
    opts.only_rid = s.rid;
    ld_cli_logread lr = { cli, 0, 0, { 0 }, { 0 }, capture };
    if (ld_cli_logread_run(&lr, argv + 1, n_args, &opts, on_request, &s) != 0 || s.oom) {
        for (size_t i = 0; i < s.n_found; i++) ld_request_free(s.found[i]);
        free(s.found);
        return LD_EXIT_TROUBLE;
    }
    int status = LD_EXIT_SAME;
    if (s.n_found == 0) {
        fprintf(cli->err, "logdiff show: no request with rid '%s' in the logs given\n", s.rid);
        status = LD_EXIT_TROUBLE;
    }
    for (size_t i = 0; i < s.n_found; i++) {
        ld_request *r = s.found[i];
        if (json) ld_cli_show_json(cli->out, r);
        else ld_cli_show_text(cli, r, full);
        if (r->flags & (LD_REQ_UNPAIRED | LD_REQ_AMBIGUOUS | LD_REQ_TRUNCATED)) status = LD_EXIT_DIFF;
        ld_request_free(r);
    }
    free(s.found);
    if (lr.stats.io_errors) status = LD_EXIT_TROUBLE;
    return status;
}
