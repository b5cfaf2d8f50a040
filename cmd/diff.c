/* diff.c - `logdiff diff`: a verdict per request (which layer lost the
 * conversation) with the evidence, and a summary. */
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "replay/analysis/diff.h"
#include "cmd/format/difffmt.h"
#include "cmd/common/checks.h"
#include "cmd/common/logread.h"
#include "cmd/common/options.h"
#include "cmd/common/shard.h"
#include "replay/analysis/rerender.h"
#include "replay/template/tpl_source.h"

static const char *const diff_usage[] = {
    "logdiff diff [--json] [--rid RID] [--verbose] [--no-conversations] LOG...",
    "logdiff diff --template SRC [--server sglang|hf] [--bos-token S] [--eos-token S] LOG...",
    "logdiff diff --replay DIR [--tokenizer SRC] LOG...",
    "",
    "Compares every request's message array with the prompt the server built",
    "from it, follows conversations across requests, and gives each request a",
    "verdict: ok, harness (the client sent a broken history), template (the",
    "templated prompt lost or mangled a turn), sampling (a degenerate output)",
    "or log (the log cannot tell).",
    "",
    "With --template (or --model), every logged message array is also rendered",
    "again through the model's chat template (a .jinja file, tokenizer_config.json,",
    "model directory or built-in encoder, as for `logdiff template`) after the",
    "server's own preprocessing (--server, default sglang), and compared with the",
    "logged prompt: template.faithful when byte for byte the same,",
    "template.render_mismatch (an error) with the first differing byte and a short",
    "unified diff when not.",
    "",
    "With --tokenizer (a tokenizer.json, a GGUF vocabulary or a model directory),",
    "the input ids a request logged are checked against its logged prompt text,",
    "re-encoded: template.tokens_faithful, or template.token_mismatch at the first",
    "differing id with both sides decoded (a double BOS, a special token the text",
    "spells out taken as text, ids of another text).",
    "",
    "With --replay (an HF model directory: config.json, safetensors, and its",
    "tokenizer.json when there is one), every request with logged output ids is",
    "replayed on logdiff's CPU engine as `logdiff replay` does (the",
    "logged input ids, else the prompt text tokenized; the logged output",
    "teacher-forced): kernels.divergence (an error: verdict kernels) at the first",
    "output position P whose logged token is outside the replay's top 5 and not",
    "a near-tie, with the logged token's rank and logprob, the replay's top-1,",
    "the top-two margin, and the context before P ('|') then the logged tokens",
    "and the replay's greedy continuation (decoded when there is a tokenizer);",
    "kernels.consistent (info) otherwise; kernels.not_replayed (info) with the",
    "reason when it cannot (no output ids, ids outside the vocabulary, a context",
    "too long, no input ids and no tokenizer for the prompt text).",
    "--replay-backend ref|cuda replays on the plain reference or the GPU (with",
    "its custom kernels, as `logdiff replay --backend cuda`), --replay-tp N",
    "splits each replay over N tensor-parallel ranks (GPUs 0..N-1 on cuda).",
    "",
    "--shard I/N reads only the I-th of N shares of the LOGs (0 <= I < N; whole",
    "LOGs, a run of them, the same on every node for the same list; auto: from a",
    "Slurm job array or, with auto/N, a Kubernetes Indexed Job), so that N",
    "machines split one run: the shares' outputs in share order are the run's.",
    "Give a server's rotated files as one directory so that a share pairs them.",
    "",
    "Exit status: 0 every verdict ok, 1 some request is not ok, 2 usage or I/O",
    "error.",
    NULL
};

/* --shard: the share of *logs[0..*n) this process reads; 0 or -1. */
static int pick_share(struct ld_cli *cli, const char *spec, char ***logs, int *n)
{
    ld_cli_shard shard;
    char msg[400];
    if (ld_cli_shard_parse(spec, getenv, &shard, msg, sizeof msg) != 0) {
        fprintf(cli->err, "logdiff diff: %s\n", msg);
        return -1;
    }
    size_t first, end;
    ld_cli_shard_range(&shard, (size_t)*n, &first, &end);
    *logs += first;
    *n = (int)(end - first);
    return 0;
}

int cmd_diff(int argc, char **argv, struct ld_cli *cli)
{
    ld_cli_diff_report rep;
    ld_cli_diff_report_init(&rep, cli);
    int no_conv = 0;
    ld_cli_check_flags f = { .server = "sglang" };
    ld_cli_checks chk = { 0 };
    ld_cli_capture_opts capture = { 0 };
    const char *shard_spec = NULL;
    const ld_cli_option options[] = {
        { LD_OPT_BOOL, 0, "json", &rep.json, NULL, "JSON Lines, one object per request" },
        { LD_OPT_STRING, 0, "rid", &rep.only_rid, "RID", "report only this request (all are read)" },
        { LD_OPT_BOOL, 'v', "verbose", &rep.verbose, NULL, "also list info findings and ok requests' findings" },
        { LD_OPT_BOOL, 0, "no-conversations", &no_conv, NULL, "judge each request alone" },
        LD_CLI_CONV_OPTIONS(rep.conv),
        LD_CLI_CHECK_OPTIONS(f, chk),
        { LD_OPT_STRING, 0, "replay", &f.replay.dir, "DIR", "replay each logged output on logdiff's engine (model dir or GGUF)" },
        { LD_OPT_STRING, 0, "replay-backend", &f.replay.backend, "NAME", "the replay's backend: cpu (default), ref or cuda" },
        { LD_OPT_INT, 0, "replay-tp", &f.replay.tp, "N", "split the replay over N tensor-parallel ranks" },
        LD_CLI_CAPTURE_OPTIONS(capture),
        { LD_OPT_STRING, 0, "shard", &shard_spec, "I/N", "read only share I of N of the LOGs (auto: from Slurm or Kubernetes)" },
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_cli_parse_options(argc, argv, diff_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    if (n_args == 0) {
        fprintf(cli->err, "logdiff diff: no log given (use '-' for standard input)\n");
        return LD_EXIT_TROUBLE;
    }
    char **logs = argv + 1;
    if (shard_spec && pick_share(cli, shard_spec, &logs, &n_args) != 0) return LD_EXIT_TROUBLE;
    ld_diff_options dopts = { { 0 }, no_conv };
    if (ld_cli_conv_options(cli, "diff", &rep.conv, &dopts.conv) != 0) return LD_EXIT_TROUBLE;
    if (ld_cli_checks_load(cli, "diff", &f, &chk) != 0) return LD_EXIT_TROUBLE;
    rep.checks = chk.judge;
    ld_error e;
    ld_error_clear(&e);
    rc = ld_differ_new(&dopts, &rep.differ, &e) == LD_OK ? 0 : -1;
    if (rc != 0) fprintf(cli->err, "logdiff diff: %s\n", e.msg);
    ld_pair_options opts = { 0 };
    opts.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_ERROR_RECORDS | (ld_judge_needs_values(&rep.checks) ? LD_PAIR_KEEP_VALUES : 0);
    ld_cli_logread lr = { cli, rep.json, 1, { 0 }, { 0 }, capture };
    if (rc == 0) rc = ld_cli_logread_run(&lr, logs, n_args, &opts, ld_cli_diff_report_request, &rep);
    if (rc == 0) ld_cli_diff_report_summary(&rep, &lr);
    ld_differ_free(rep.differ);
    ld_cli_checks_free(&chk);
    ld_arena_release(&rep.arena);
    if (rc != 0 || rep.failed || lr.stats.io_errors) return LD_EXIT_TROUBLE;
    if (lr.stats.capture_problems) rep.n_not_ok++; /* a line the capture lost or cut: reported above */
    if (rep.only_rid && !rep.n_reported) {
        fprintf(cli->err, "logdiff diff: no request with rid '%s' in the logs given\n", rep.only_rid);
        return LD_EXIT_TROUBLE;
    }
    return rep.n_not_ok ? LD_EXIT_DIFF : LD_EXIT_SAME;
}
