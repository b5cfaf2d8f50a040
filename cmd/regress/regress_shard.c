/* regress_shard.c - `logdiff regress` past one machine: --shard I/N
 * --partial FILE judges one share of the inputs and writes its partial
 * result; --merge PARTIAL... reads every share's back for the comparison
 * and the reports (regress_partial.h, regress_merge.h). */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/outfile.h"
#include "cmd/common/shard.h"
#include "parse/request/request_json.h"
#include "regress_journal.h"
#include "regress_merge.h"
#include "regress_opts.h"

static int refuse(struct ld_cli *cli, const char *why)
{
    fprintf(cli->err, "logdiff regress: %s\n", why);
    return -1;
}

/* The first judging option given, for --merge's refusal; NULL if none. */
static const char *judging_option(const ld_cli_regress_opts *o)
{
    const char *names[] = { "--template", "--model", "--replay", "--tokenizer", "--bos-token", "--eos-token",
                            "--capture", "--max-line", "--conversation-memory", "--replay-backend" };
    const char *values[] = { o->tpl, o->model, o->replay, o->tokenizer, o->bos, o->eos, o->capture.capture,
                             o->capture.max_line, o->conv.memory, o->replay_backend };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (values[i]) return names[i];
    if (o->no_conv) return "--no-conversations";
    if (o->conv.max) return "--max-conversations";
    if (o->replay_tp) return "--replay-tp";
    return strcmp(o->server, "sglang") ? "--server" : NULL;
}

int ld_cli_regress_check_modes(const ld_cli_regress_opts *o, int n_args, struct ld_cli *cli)
{
    if (o->merge) {
        const char *j = judging_option(o);
        char msg[200];
        snprintf(msg, sizeof msg, "--merge takes the judging settings from the partials: leave out %s", j ? j : "");
        if (o->shard || o->partial || o->conv_journal || o->conv_from)
            return refuse(cli, "--merge reads partials: it takes no --shard, --partial, --conv-journal or --conv-from");
        if (j) return refuse(cli, msg);
        if (!o->baseline) return refuse(cli, "--baseline FILE is required");
        return n_args ? 0 : refuse(cli, "--merge needs the partial files of every share");
    }
    if ((o->conv_journal || o->conv_from) && !o->shard)
        return refuse(cli, o->conv_journal ? "--conv-journal is a share's: give --shard too"
                                           : "--conv-from is for a share: give --shard too");
    if (o->conv_from && !o->partial)
        return refuse(cli, "--conv-from starts a share's judging: give --partial FILE for its result");
    if (o->shard && !o->partial && !o->conv_journal)
        return refuse(cli, "--shard needs --partial FILE for its result (--merge puts the shares together), "
                      "or --conv-journal FILE");
    int share = o->partial || o->conv_journal;
    if (share && (o->update || o->junit || o->html || o->json))
        return refuse(cli, "a share writes its result (--partial, --conv-journal): the baseline comparison and "
                      "the reports come from --merge");
    if (!share && !o->baseline) return refuse(cli, "--baseline FILE is required");
    return n_args ? 0 : refuse(cli, "no input given (use '-' for standard input)");
}

int ld_cli_regress_pick_share(ld_cli_regress_run *run, const ld_cli_regress_opts *o, char *const *inputs,
                              size_t n)
{
    ld_cli_shard shard = { 0, 1, "--partial" };
    char msg[400];
    if (o->shard && ld_cli_shard_parse(o->shard, getenv, &shard, msg, sizeof msg) != 0)
        return refuse(run->cli, msg);
    size_t first, end;
    ld_cli_shard_range(&shard, n, &first, &end);
    run->all_inputs = inputs;
    run->n_all_inputs = n;
    run->share_first = first;
    run->shard_index = shard.index;
    run->shard_count = shard.count;
    run->inputs = inputs + first;
    run->n_inputs = end - first;
    return 0;
}

/* So that --merge refuses shares judged differently; "report_template" is
 * what the reports name. */
cJSON *ld_cli_regress_settings(const ld_cli_regress_run *run, const ld_cli_regress_opts *o)
{
    const char *names[] = { "report_template", "template", "model", "replay", "replay_backend", "tokenizer",
                            "server", "bos_token", "eos_token", "capture", "max_line", "conversation_memory" };
    const char *values[] = { run->template_desc, o->tpl, o->model, o->replay, o->replay_backend, o->tokenizer,
                             o->server, o->bos, o->eos, o->capture.capture, o->capture.max_line, o->conv.memory };
    cJSON *s = cJSON_CreateObject();
    int ok = s != NULL;
    for (size_t i = 0; ok && i < sizeof names / sizeof *names; i++)
        ok = cJSON_AddItemToObject(s, names[i], ld_json_bytes(values[i], values[i] ? strlen(values[i]) : 0));
    ok = ok && cJSON_AddNumberToObject(s, "replay_tp", (double)o->replay_tp) &&
         cJSON_AddNumberToObject(s, "max_conversations", (double)o->conv.max) &&
         cJSON_AddBoolToObject(s, "no_conversations", o->no_conv);
    if (!ok) { cJSON_Delete(s); return NULL; }
    return s;
}

typedef struct share_writer {
    const ld_cli_regress_run *run;
    const ld_cli_partial_head *head;
} share_writer;

static int write_share_to(const void *ctx, FILE *f)
{
    const share_writer *w = ctx;
    return ld_cli_regress_write_partial(w->run, w->head, f);
}

int ld_cli_regress_write_share(ld_cli_regress_run *run, const ld_cli_regress_opts *o)
{
    ld_cli_partial_head h = { run->shard_index, run->shard_count, run->share_first,
                              run->share_first + run->n_inputs, (char **)run->all_inputs,
                              run->n_all_inputs, ld_cli_regress_settings(run, o), 0,
                              run->journal->digest, run->conv_preloaded, run->conv_from };
    if (!h.settings) return refuse(run->cli, "out of memory writing the partial");
    share_writer w = { run, &h };
    int rc = ld_cli_write_output("regress", o->partial, write_share_to, &w, run->cli->err);
    h.conv_from = NULL; /* the run's */
    cJSON_Delete(h.settings);
    if (rc != 0) return -1;
    size_t ok = 0;
    for (size_t i = 0; i < run->n_items; i++) ok += !strcmp(run->items[i].verdict, "ok");
    fprintf(run->cli->out, "share %ld/%ld: inputs %zu..%zu of %zu: %zu requests, %zu not ok; partial %s written\n",
            run->shard_index, run->shard_count, run->share_first, run->share_first + run->n_inputs,
            run->n_all_inputs, run->n_items, run->n_items - ok, o->partial);
    return 0;
}

int ld_cli_regress_read_merge(ld_cli_regress_run *run, char *const *paths, size_t n, ld_cli_partial_head *head)
{
    if (ld_cli_regress_merge(run, paths, n, head) != 0) return -1;
    const cJSON *s = head->settings;
    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(s, "report_template");
    const cJSON *memory = cJSON_GetObjectItemCaseSensitive(s, "conversation_memory");
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(s, "max_conversations");
    size_t len;
    if (ld_json_bytes_get(tpl, &run->strings, &run->template_desc, &len) != 0) run->template_desc = NULL;
    if (ld_json_bytes_get(memory, &run->strings, &run->conv_opts.memory, &len) != 0) run->conv_opts.memory = NULL;
    run->conv_opts.max = cJSON_IsNumber(max) && max->valuedouble >= 0 && max->valuedouble < 1e12
                             ? (long)max->valuedouble : 0;
    return ld_cli_regress_compare(run);
}
