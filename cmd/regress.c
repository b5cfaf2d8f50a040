/* regress.c - `logdiff regress`: the forensic pipeline over archived logs in
 * CI, compared with a baseline of verdicts; fails when a request that was
 * healthy is not any more. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/common/checks.h"
#include "cmd/common/logread.h"
#include "cmd/common/options.h"
#include "cmd/common/outfile.h"
#include "cmd/regress/regress.h"
#include "cmd/regress/regress_lines.h"
#include "cmd/regress/regress_opts.h"

static const char *const regress_usage[] = {
    "logdiff regress --baseline FILE [--update-baseline] [--junit FILE] [--html FILE]",
    "                [--json] [--template SRC | --model DIR] [--replay DIR] [--tokenizer SRC]",
    "                [--jobs N] INPUT...",
    "   or: logdiff regress --shard I/N|auto[/N] --partial FILE [--conv-from DIR]",
    "                [--conv-journal FILE] [judging options] INPUT...",
    "   or: logdiff regress --shard I/N|auto[/N] --conv-journal FILE [judging options] INPUT...",
    "   or: logdiff regress --merge --baseline FILE [--update-baseline] [--junit FILE]",
    "                [--html FILE] [--json] PARTIAL...",
    "",
    "Judges every request of the INPUTs (logs, compressed logs, archives: tar in",
    "any compression, zip; directories) as `logdiff diff` does, with --template",
    "also re-rendering each through the chat template, and compares the verdicts",
    "with the baseline FILE.  A request that was ok and is not, or has an error",
    "finding of a kind it did not have, is a regression; so is a new request that",
    "is not ok.  Requests that got better are reported as fixed, baseline requests",
    "missing from the INPUTs are listed, archive members without any request line",
    "are skipped and listed.  --update-baseline writes the verdicts to FILE instead",
    "(JSON, one request per line, sorted by rid: review it like code).",
    "",
    "--replay DIR replays every logged output on logdiff's CPU engine",
    "(an HF model directory: config.json, safetensors) as `logdiff diff --replay`",
    "does: kernels.divergence (an error) at the first logged token the replay",
    "does not reach, kernels.consistent or kernels.not_replayed (info).",
    "--model DIR re-renders through DIR's chat template and, when DIR holds",
    "weights (*.safetensors), replays as --replay DIR does; a DIR with weights",
    "and no chat template is only replayed.  --replay-backend ref|cuda and",
    "--replay-tp N replay on that backend, split over N tensor-parallel ranks",
    "(a GPU CI runner: --replay-backend cuda --replay-tp 8).",
    "",
    "Each INPUT is read by its own thread (--jobs, default: the number of cores)",
    "and paired on its own: give the rotated files of one server as one directory",
    "or archive.  Verdicts and every output are the same whatever --jobs is.",
    "",
    "Past one machine: --shard I/N judges only the I-th of N shares of the INPUTs",
    "(0 <= I < N; a share is a run of whole INPUTs, the same on every node for the",
    "same list) and --partial FILE writes its result (versioned JSON Lines).",
    "--shard auto takes I and N from a Slurm job array (SLURM_ARRAY_TASK_ID ...)",
    "or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with N given: auto/N).",
    "--merge reads every share's partial and writes the comparison and the",
    "reports exactly as one process over all the INPUTs would; a share missing",
    "or given twice is an error that names it.",
    "",
    "Conversations across shares: a share follows the conversations of its own",
    "inputs.  For the verdicts of one process when a conversation's turns are in",
    "several shares, run the shares twice: first with --conv-journal FILE alone",
    "(what each share's conversation tracker keeps, written to FILE), then with",
    "--partial FILE --conv-from DIR, DIR holding the first run's journals: each",
    "share starts from the journals of the shares before it, as one process would",
    "have after their inputs.  --merge checks that every share did (docs/cluster/).",
    "",
    "The FILEs of --junit, --html and --update-baseline: a regular file (or a new",
    "one) is replaced whole once written, never left half-written; a symbolic",
    "link writes its target; a device or FIFO (/dev/stdout) is written into.",
    "",
    "Exit status: 0 nothing regressed (or the baseline was written), 1 something",
    "regressed, 2 usage or I/O error (an unreadable input or member, or a line its",
    "capture cut or lost, included).  With --partial: 0 the partial was written,",
    "2 it was not, or an input could not be read fully (the partial is written",
    "all the same, and the merge reports the input as one process would).",
    NULL
};

/* The whole file into a malloc'd buffer; NULL with errno on failure. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) { free(buf); buf = NULL; errno = ENOMEM; }
        else buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); errno = EIO; return NULL; }
    *len = n;
    return buf;
}

static int load_baseline(ld_cli_regress_run *run, struct ld_cli *cli)
{
    size_t len = 0;
    char *text = NULL;
    int mapped = ld_cli_map_file(run->baseline_path, &text, &len) == 0;
    if (!mapped) text = slurp(run->baseline_path, &len);
    if (!text) {
        fprintf(cli->err, "logdiff regress: cannot read the baseline %s: %s "
                "(write one with --update-baseline)\n", run->baseline_path, strerror(errno));
        return -1;
    }
    ld_error e;
    ld_error_clear(&e);
    ld_status st = ld_baseline_parse(text, len, &run->base, &e);
    if (mapped) ld_cli_unmap_file(text, len);
    else free(text);
    if (st == LD_OK) return 0;
    if (e.line)
        fprintf(cli->err, "logdiff regress: %s:%llu: %s\n", run->baseline_path,
                (unsigned long long)e.line, e.msg);
    else
        fprintf(cli->err, "logdiff regress: %s: %s\n", run->baseline_path, e.msg);
    fprintf(cli->err, "logdiff regress: the baseline was edited by hand or written by another "
            "logdiff: write it again with --update-baseline from the logs it stands for\n");
    return -1;
}

/* Writes with `fn` into path (common/outfile.h: a regular file replaced
 * atomically, anything else written into). */
static void on_walk_note(void *ctx, size_t input, const char *msg)
{
    const ld_cli_regress_run *run = ctx;
    (void)input;
    fprintf(run->cli->err, "logdiff regress: note: %s\n", msg);
}

typedef struct writer {
    const ld_cli_regress_run *run;
    int (*fn)(const ld_cli_regress_run *, FILE *);
} writer;

static int write_with(const void *ctx, FILE *f)
{
    const writer *w = ctx;
    return w->fn(w->run, f);
}

static int write_file(ld_cli_regress_run *run, const char *path, int (*fn)(const ld_cli_regress_run *, FILE *))
{
    writer w = {run, fn};
    return ld_cli_write_output("regress", path, write_with, &w, run->cli->err);
}

static int write_baseline(const ld_cli_regress_run *run, FILE *f)
{
    ld_error e;
    ld_error_clear(&e);
    return ld_baseline_write(&run->cur, f, &e) == LD_OK ? 0 : -1;
}

/* 1 when the directory holds safetensors weights. */
static int has_weights(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *de; !found && (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        found = n > 12 && !strcmp(de->d_name + n - 12, ".safetensors");
    }
    closedir(d);
    return found;
}

/* --model DIR: its chat template (when it has one) and its weights (when it
 * has them) for the replay; --replay DIR: the replay.  Sets *tpl_dir (the
 * directory to take the template from, or NULL) and *replay_dir. */
static int model_sources(const ld_cli_regress_opts *o, struct ld_cli *cli, const char **tpl_dir, const char **replay_dir)
{
    *tpl_dir = o->model;
    *replay_dir = o->replay;
    if (!o->model || !has_weights(o->model)) return 0;
    if (!o->replay) *replay_dir = o->model;
    ld_tpl_source *src = NULL;
    ld_error e;
    ld_error_clear(&e);
    if (!o->tpl && ld_tpl_source_load(o->model, NULL, &src, &e) != LD_OK) {
        fprintf(cli->err, "logdiff regress: note: --model %s: no chat template to re-render with (%s); "
                "its weights are replayed\n", o->model, e.msg);
        *tpl_dir = NULL;
    }
    ld_tpl_source_free(src);
    return 0;
}

/* --jobs and --capture. */
static int check_sources(const ld_cli_regress_opts *o, struct ld_cli *cli)
{
    ld_logset_options capture;
    if (ld_cli_capture_options(cli, &o->capture, &capture) != 0) return -1;
    if (o->jobs < 1 || o->jobs > 1024) {
        fprintf(cli->err, "logdiff regress: --jobs must be between 1 and 1024\n");
        return -1;
    }
    return 0;
}

/* Reads and judges every input, then compares; 0 or -1. */
static int run_inputs(ld_cli_regress_run *run, const ld_cli_regress_opts *o, const ld_judge_checks *checks)
{
    ld_diff_options dopts = { { 0 }, o->no_conv };
    ld_error e;
    ld_error_clear(&e);
    run->conv_opts = o->conv;
    if (ld_cli_conv_options(run->cli, "regress", &o->conv, &dopts.conv) != 0 ||
        ld_cli_regress_conv_begin(run, o, &dopts) != 0)
        return -1;
    if (ld_differ_new(&dopts, &run->differ, &e) != LD_OK) {
        fprintf(run->cli->err, "logdiff regress: %s\n", e.msg);
        return -1;
    }
    if (ld_cli_regress_conv_preload(run, o) != 0) {
        ld_differ_free(run->differ);
        run->differ = NULL;
        return -1;
    }
    run->checks = *checks;
    ld_pair_options popts = { 0 };
    popts.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_ERROR_RECORDS |
                  (ld_judge_needs_values(checks) ? LD_PAIR_KEEP_VALUES : 0);
    ld_cli_regress_sink sink = { ld_cli_regress_on_record, ld_cli_regress_on_member, ld_cli_regress_on_problem, run,
                                 on_walk_note };
    ld_logset_options capture;
    if (ld_cli_capture_options(run->cli, &o->capture, &capture) != 0) return -1;
    int rc = ld_cli_regress_read_inputs(run->inputs, run->n_inputs, (int)o->jobs, &popts, &capture, &sink, &e);
    if (rc != 0) fprintf(run->cli->err, "logdiff regress: %s\n", e.msg);
    ld_differ_conv_stats(run->differ, &run->conv);
    ld_differ_free(run->differ);
    run->differ = NULL;
    if (rc != 0 || run->failed || ld_cli_regress_conv_end(run, o) != 0) return -1;
    if (o->partial) return ld_cli_regress_write_share(run, o);
    return o->conv_journal ? 0 : ld_cli_regress_compare(run);
}

static int write_outputs(ld_cli_regress_run *run, const ld_cli_regress_opts *o)
{
    int rc = 0;
    if (o->update && write_file(run, o->baseline, write_baseline) != 0) rc = -1;
    if (o->junit && write_file(run, o->junit, ld_cli_regress_write_junit) != 0) rc = -1;
    if (o->html && write_file(run, o->html, ld_cli_regress_write_html) != 0) rc = -1;
    if ((o->json ? ld_cli_regress_write_json(run, run->cli->out)
                 : ld_cli_regress_write_text(run, run->cli->out, o->verbose)) != 0) rc = -1;
    return rc;
}

static int exit_status(const ld_cli_regress_run *run, int update)
{
    if (run->io_errors || run->capture_problems) return LD_EXIT_TROUBLE; /* not all of the input was read */
    if (update) return LD_EXIT_SAME;
    size_t regressed = run->diff.count[LD_CHANGE_REGRESSED] + run->diff.count[LD_CHANGE_NEW_FAILING];
    return regressed ? LD_EXIT_DIFF : LD_EXIT_SAME;
}

/* One process over the inputs (or, with --partial, one share of them). */
static int judge_inputs(ld_cli_regress_run *run, ld_cli_regress_opts *o, ld_cli_checks *chk, char *const *inputs,
                        size_t n)
{
    struct ld_cli *cli = run->cli;
    run->inputs = inputs;
    run->n_inputs = n;
    int share = o->partial || o->conv_journal;
    if (share && ld_cli_regress_pick_share(run, o, inputs, n) != 0) return LD_EXIT_TROUBLE;
    const char *tpl_dir = NULL, *replay_dir = NULL;
    int rc = (!o->update && !share && load_baseline(run, cli) != 0) ||
             model_sources(o, cli, &tpl_dir, &replay_dir) != 0;
    ld_cli_check_flags f = { o->tpl, tpl_dir, o->server, o->tokenizer, { replay_dir, o->replay_backend, o->replay_tp } };
    chk->rr.chat.bos_token = o->bos;
    chk->rr.chat.eos_token = o->eos;
    rc = rc || ld_cli_checks_load(cli, "regress", &f, chk) != 0;
    run->template_desc = o->tpl ? o->tpl : tpl_dir;
    if (rc || run_inputs(run, o, &chk->judge) != 0) return LD_EXIT_TROUBLE;
    if (share) return run->io_errors || run->capture_problems ? LD_EXIT_TROUBLE : LD_EXIT_SAME;
    return write_outputs(run, o) != 0 ? LD_EXIT_TROUBLE : exit_status(run, o->update);
}

/* --merge: the shares' partials instead of the inputs. */
static int merge_partials(ld_cli_regress_run *run, ld_cli_regress_opts *o, char *const *paths, size_t n)
{
    ld_cli_partial_head head;
    memset(&head, 0, sizeof head);
    int rc = (!o->update && load_baseline(run, run->cli) != 0) ||
             ld_cli_regress_read_merge(run, paths, n, &head) != 0 || write_outputs(run, o) != 0
                 ? LD_EXIT_TROUBLE : exit_status(run, o->update);
    ld_cli_regress_run_free(run);
    ld_cli_partial_head_free(&head);
    return rc;
}

int cmd_regress(int argc, char **argv, struct ld_cli *cli)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ld_cli_regress_opts o;
    memset(&o, 0, sizeof o);
    o.jobs = cores > 0 ? cores : 1;
    o.server = "sglang";
    ld_cli_checks chk = { 0 };
    const ld_cli_option options[] = {
        { LD_OPT_STRING, 0, "baseline", &o.baseline, "FILE", "the verdicts to compare with (required)" },
        { LD_OPT_BOOL, 0, "update-baseline", &o.update, NULL, "write the verdicts to the baseline FILE" },
        { LD_OPT_STRING, 0, "junit", &o.junit, "FILE", "also write a JUnit XML report" },
        { LD_OPT_STRING, 0, "html", &o.html, "FILE", "also write an HTML report (one file)" },
        { LD_OPT_BOOL, 0, "json", &o.json, NULL, "JSON Lines on stdout, one object per request" },
        { LD_OPT_BOOL, 'v', "verbose", &o.verbose, NULL, "also list unchanged requests" },
        { LD_OPT_INT, 'j', "jobs", &o.jobs, "N", "reader threads (default: the number of cores)" },
        { LD_OPT_STRING, 0, "shard", &o.shard, "I/N", "judge only share I of N of the inputs (auto: from Slurm or Kubernetes)" },
        { LD_OPT_STRING, 0, "partial", &o.partial, "FILE", "write the share's result to FILE, for --merge" },
        { LD_OPT_STRING, 0, "conv-journal", &o.conv_journal, "FILE", "write the share's conversation journal to FILE" },
        { LD_OPT_STRING, 0, "conv-from", &o.conv_from, "DIR", "start from the journals in DIR of the shares before this one" },
        { LD_OPT_BOOL, 0, "merge", &o.merge, NULL, "compare and report from the shares' partial FILEs" },
        { LD_OPT_BOOL, 0, "no-conversations", &o.no_conv, NULL, "judge each request alone" },
        LD_CLI_CONV_OPTIONS(o.conv),
        { LD_OPT_STRING, 0, "template", &o.tpl, "SRC", "re-render through this chat template too" },
        { LD_OPT_STRING, 0, "model", &o.model, "DIR", "same, with the template of this model directory; replays too when it holds weights" },
        { LD_OPT_STRING, 0, "replay", &o.replay, "DIR", "replay each logged output on logdiff's engine (model dir or GGUF)" },
        { LD_OPT_STRING, 0, "replay-backend", &o.replay_backend, "NAME", "the replay's backend: cpu (default), ref or cuda" },
        { LD_OPT_INT, 0, "replay-tp", &o.replay_tp, "N", "split the replay over N tensor-parallel ranks" },
        { LD_OPT_STRING, 0, "tokenizer", &o.tokenizer, "SRC", "check logged input ids against the prompt text" },
        { LD_OPT_STRING, 0, "server", &o.server, "NAME", "preprocessing before the template: sglang or hf" },
        { LD_OPT_STRING, 0, "bos-token", &o.bos, "S", "bos_token for the template" },
        { LD_OPT_STRING, 0, "eos-token", &o.eos, "S", "eos_token for the template" },
        LD_CLI_CAPTURE_OPTIONS(o.capture),
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_cli_parse_options(argc, argv, regress_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    if (ld_cli_regress_check_modes(&o, n_args, cli) != 0 || check_sources(&o, cli) != 0) return LD_EXIT_TROUBLE;
    ld_cli_regress_run run;
    memset(&run, 0, sizeof run);
    run.cli = cli;
    run.baseline_path = o.baseline;
    run.updating = o.update;
    ld_arena_init(&run.strings, 0);
    ld_baseline_init(&run.base);
    ld_baseline_init(&run.cur);
    if (o.merge) return merge_partials(&run, &o, argv + 1, (size_t)n_args);
    rc = judge_inputs(&run, &o, &chk, argv + 1, (size_t)n_args);
    ld_cli_regress_conv_free(&run);
    ld_cli_regress_run_free(&run);
    ld_cli_checks_free(&chk);
    return rc;
}
