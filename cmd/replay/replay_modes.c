/* replay_modes.c - what `logdiff replay` runs once it has its request: the
 * engine (split, a rank of a group), then one mode: a plain replay
 * (--seed, --dump-layers), --batch-with, --check BACKEND or
 * --compare-kernels.  Each returns the exit status, as diff(1). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmd/common/logread.h"
#include "cmd/replay/replay_batched.h"
#include "cmd/replay/replay_kernels.h"
#include "replay/run/replay_compare.h"
#include "replay_cli.h"

#define PFX LD_CLI_REPLAY_PFX

void ld_cli_replay_error(struct ld_cli *cli, const char *what, const ld_error *e)
{
    char at[300];
    ld_cli_error_origin(e, at, sizeof at);
    if (e->path) fprintf(cli->err, PFX "%s: %s: %s%s\n", what, e->path, e->msg, at);
    else fprintf(cli->err, PFX "%s: %s%s\n", what, e->msg, at);
}

/* --tp-rank: this process joins its group; a rank but 0 reports to /dev/null */
static int join_group(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, FILE **quiet)
{
    const ld_cli_tp_proc *p = &a->proc;
    ld_replay_tp_rank tr = { (int)p->rank, p->rendezvous, (int)p->device, (double)p->timeout, p->transport };
    ld_error err;
    ld_error_clear(&err);
    if (ld_replay_engine_join_tp(e, &tr, &err) != LD_OK) {
        fprintf(cli->err, PFX "--tp-rank %ld: %s\n", p->rank, err.msg);
        return -1;
    }
    if (p->rank > 0 && !(*quiet = fopen("/dev/null", "w"))) {
        fprintf(cli->err, PFX "/dev/null: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int ld_cli_replay_engine(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine **e, FILE **quiet)
{
    ld_error err;
    ld_error_clear(&err);
    int threads = (int)a->threads;
    /* with --tp the engine's own backend is made by the split (replay.h), once a process's GPU is known */
    if (ld_replay_engine_open(a->model, a->tp ? "cpu" : a->backend, threads, e, &err) != LD_OK) {
        ld_cli_replay_error(cli, a->model, &err);
        return -1;
    }
    if (a->kernels && !a->tp && ld_replay_engine_set_backend(*e, a->backend, a->kernels, threads, &err) != LD_OK) {
        fprintf(cli->err, PFX "%s\n", err.msg);
        return -1;
    }
    if (a->tp && ld_replay_engine_set_tp(*e, (int)a->tp, 1, a->backend, a->kernels, threads, &err) != LD_OK) {
        fprintf(cli->err, PFX "--tp %ld: %s\n", a->tp, err.msg);
        return -1;
    }
    return a->proc.rendezvous ? join_group(cli, a, *e, quiet) : 0;
}

static ld_replay_opts opts_of(const ld_cli_replay_args *a)
{
    ld_replay_opts ro = { (int)a->top_k, a->max_tokens == 0 ? -1 : (int)a->max_tokens, a->nt };
    return ro;
}

/* --batch-with: r alone and batched with the requests picked (0 identical,
 * 1 differs, 2 trouble) */
int ld_cli_replay_batch(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, const ld_request *r,
                        const ld_cli_replay_pick *s)
{
    for (size_t i = 0; i < s->n_with; i++)
        if (!s->with_r[i]) {
            fprintf(cli->err, PFX "--batch-with: no request with rid '%s' in the logs given\n", s->with[i]);
            return LD_EXIT_TROUBLE;
        }
    ld_replay_batch_report rep;
    ld_error err;
    ld_error_clear(&err);
    if (ld_replay_batch_check(e, r, (const ld_request *const *)s->with_r, s->n_with, &rep, &err) != LD_OK) {
        ld_cli_replay_error(cli, a->rid, &err);
        return LD_EXIT_TROUBLE;
    }
    ld_cli_print_batch_report(cli->out, r->rid ? r->rid : a->rid, s->with, s->n_with, &rep, a->json);
    return rep.first_diff < 0 ? LD_EXIT_SAME : LD_EXIT_DIFF;
}

/* --check BACKEND: layer by layer against another backend */
int ld_cli_replay_check_backends(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e,
                                 const ld_request *r)
{
    ld_replay_opts ro = opts_of(a);
    ld_backend_cmp cmp;
    ld_error err;
    ld_error_clear(&err);
    if (ld_replay_check_backends(e, r, &ro, a->backend, a->kernels, a->check, a->first, a->last, (int)a->threads,
                                 &cmp, &err) != LD_OK) {
        ld_cli_replay_error(cli, a->check, &err);
        return LD_EXIT_TROUBLE;
    }
    ld_cli_print_backend_cmp(cli->out, r->rid ? r->rid : a->rid, &cmp, a->json);
    ld_backend_cmp_free(&cmp);
    return LD_EXIT_SAME;
}

/* --compare-kernels: each variant against the reference */
int ld_cli_replay_compare(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, const ld_request *r)
{
    ld_replay_opts ro = opts_of(a);
    ld_kernel_cmp_report rep;
    ld_error err;
    ld_error_clear(&err);
    if (ld_replay_compare_kernels(e, r, &ro, a->backend, (int)a->threads, &rep, &err) != LD_OK) {
        ld_cli_replay_error(cli, a->rid, &err);
        return LD_EXIT_TROUBLE;
    }
    ld_cli_print_kernel_cmp(cli->out, r->rid ? r->rid : a->rid, &rep, a->json);
    ld_kernel_cmp_report_free(&rep);
    return LD_EXIT_SAME;
}

/* what a person should know about a plain replay besides its table */
static void notes(struct ld_cli *cli, const ld_cli_replay_args *a, const ld_request *r, const ld_replay_result *res,
                  const ld_replay_dump *dump)
{
    const char *rid = a->rid;
    if (res->prompt_source == LD_REPLAY_PROMPT_TOKENIZED)
        fprintf(cli->err, PFX "note: the log holds no complete input_ids for '%s': its prompt text was tokenized with "
                          "%s/tokenizer.json, special tokens parsed, nothing added\n", rid, a->model);
    if (res->output_cut) {
        char total[32] = "?";
        if (res->n_output_logged >= 0) snprintf(total, sizeof total, "%lld", (long long)res->n_output_logged);
        fprintf(cli->err, PFX "note: the logger cut the output_ids of '%s': the %zu it kept from the start (of %s) "
                          "were teacher-forced; the verdict covers those\n", rid, res->n_output, total);
    }
    if (a->seed && !res->sampled && res->greedy_from >= 0)
        fprintf(cli->err, PFX "note: --seed: '%s' logged temperature %g: the continuation is greedy\n", rid,
                r->temperature);
    if (a->dump_dir)
        fprintf(cli->err, PFX "note: hidden states of %zu of the %zu positions, %d planes of %d floats, written to "
                          "%s (manifest.json)\n", dump->n_pos, dump->seq_len, dump->n_layers + 2, dump->hidden,
                a->dump_dir);
}

/* the replay itself, and --dump-layers' files; 0 or -1 printed */
static int replay_dumped(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, const ld_request *r,
                         ld_replay_dump *dump, ld_replay_result *res)
{
    ld_replay_opts ro = opts_of(a);
    ld_replay_sampling sampling = a->sampling;
    ld_error err;
    ld_error_clear(&err);
    if (a->dump_dir && ld_replay_dump_mkdir(a->dump_dir, &err) != LD_OK) {
        fprintf(cli->err, PFX "--dump-layers: %s\n", err.msg);
        return -1;
    }
    if (a->seed) sampling.params = ld_sample_params_of(r);
    if (ld_replay_request_dump(e, r, &ro, a->seed ? &sampling : NULL, a->dump_dir ? dump : NULL, res, &err) !=
        LD_OK) {
        if (err.code == LD_ERR_USAGE && a->dump_dir) fprintf(cli->err, PFX "--positions: %s\n", err.msg);
        else ld_cli_replay_error(cli, a->rid, &err);
        return -1;
    }
    if (a->dump_dir && ld_replay_dump_write(a->dump_dir, dump, e, r->rid, &err) != LD_OK) {
        fprintf(cli->err, PFX "--dump-layers: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* a plain replay (0 consistent, 1 divergent, 2 trouble) */
int ld_cli_replay_one(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, const ld_request *r)
{
    ld_replay_result res = { 0 };
    ld_replay_dump dump = { .want = &a->want };
    int status = LD_EXIT_TROUBLE;
    if (replay_dumped(cli, a, e, r, &dump, &res) == 0) {
        if (!a->json) notes(cli, a, r, &res, &dump);
        if (a->json) ld_cli_replay_print_json(cli, r, e, &res, a->dump_dir, &dump);
        else ld_cli_replay_print_text(cli, r, e, &res);
        status = res.verdict == LD_REPLAY_DIVERGENT ? LD_EXIT_DIFF : LD_EXIT_SAME;
    }
    ld_replay_dump_free(&dump);
    ld_replay_result_free(&res);
    return status;
}
