/* regress_opts.h - `logdiff regress`'s options, shared by its modes: one
 * process over every input (regress.c), one share writing a partial and
 * the merge of the partials (regress_shard.c). */
#ifndef LD_CMD_REGRESS_OPTS_H
#define LD_CMD_REGRESS_OPTS_H

#include "cmd/common/checks.h"
#include "cmd/common/convopts.h"
#include "cmd/common/logread.h"
#include "regress.h"
#include "regress_partial.h"

typedef struct ld_cli_regress_opts {
    int json, verbose, update, no_conv, merge;
    long jobs;
    const char *baseline, *junit, *html, *tpl, *model, *tokenizer, *server, *replay;
    const char *replay_backend, *shard, *partial, *conv_journal, *conv_from;
    ld_cli_capture_opts capture;
    long replay_tp;
    ld_cli_conv_opts conv;
    const char *bos, *eos;
} ld_cli_regress_opts;

/* The option combinations of --shard, --partial and --merge; 0, or -1
 * with the reason printed. */
int ld_cli_regress_check_modes(const ld_cli_regress_opts *o, int n_args, struct ld_cli *cli);

/* --partial: the share of inputs[0..n) this process judges, into
 * run->inputs (0, or -1 with the reason printed); after judging, the
 * partial written (0 or -1). */
int ld_cli_regress_pick_share(ld_cli_regress_run *run, const ld_cli_regress_opts *o, char *const *inputs,
                              size_t n);
int ld_cli_regress_write_share(ld_cli_regress_run *run, const ld_cli_regress_opts *o);

/* What the verdicts depend on besides the inputs (the head's "settings"):
 * a new cJSON object, NULL on out of memory. */
cJSON *ld_cli_regress_settings(const ld_cli_regress_run *run, const ld_cli_regress_opts *o);

/* Conversations across shares (regress_convshare.c), each 0, or -1 with the
 * reason printed: _begin before the differ is made (its tracker's ops
 * digested, and kept for --conv-journal), _preload once it is (--conv-from
 * DIR: the journals of the shares before this one replayed), _end after
 * judging (--conv-journal written); _free at the end of the run. */
int ld_cli_regress_conv_begin(ld_cli_regress_run *run, const ld_cli_regress_opts *o, ld_diff_options *dopts);
int ld_cli_regress_conv_preload(ld_cli_regress_run *run, const ld_cli_regress_opts *o);
int ld_cli_regress_conv_end(ld_cli_regress_run *run, const ld_cli_regress_opts *o);
void ld_cli_regress_conv_free(ld_cli_regress_run *run);

/* --merge: the partials read into run, template description and
 * conversation options from their settings (0, or -1 with the reason
 * printed; free *head after the run). */
int ld_cli_regress_read_merge(ld_cli_regress_run *run, char *const *paths, size_t n, ld_cli_partial_head *head);

#endif
