/* regress.h - what `logdiff regress` knows after a run, shared by its
 * writers (text and JSON on stdout, JUnit XML, HTML).
 *
 * Every request gets an ld_cli_regress_item, in judging order (input order, then the
 * order the pairer completed them).  Items whose verdict is not ok keep
 * their record and verdict (findings, alignment) for the reports; ok ones
 * keep only what the baseline and the summary need, so memory grows with
 * the failing requests, not with the logs.
 */
#ifndef LD_CMD_REGRESS_H
#define LD_CMD_REGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "replay/analysis/baseline.h"
#include "cmd/cmd.h"
#include "cmd/common/convopts.h"
#include "replay/analysis/diff.h"
#include "regress_read.h"
#include "replay/judge.h"
#include "replay/analysis/rerender.h"

typedef struct ld_cli_regress_item {
    const char *rid;            /* NULL: a line that failed to parse */
    const char *key;            /* the baseline key: rid, or "(parse error) label:line" */
    const char *label;          /* the member inside its input (JUnit classname) */
    const char *where;          /* "member:line" as logdiff diff prints it */
    const char *verdict;        /* static */
    const char *conversation;   /* conversation id, NULL if none */
    uint64_t conv_key;          /* its key (replay/analysis/conv.h ld_conv_key), 0 if none */
    size_t input;
    /* kept when the verdict is not ok, else NULL */
    ld_request *req;
    ld_verdict *v;
    ld_arena *arena;            /* holds *v */
    /* the comparison with the baseline (SAME without one) */
    ld_change change;
    const ld_baseline_entry *before;
    const char *const *new_errors;
    size_t n_new_errors;
} ld_cli_regress_item;

typedef struct ld_cli_regress_member {
    size_t input;
    const char *name, *label;
    uint64_t lines, request_lines;
    int failed;                 /* could not be read (fully): see the problems */
} ld_cli_regress_member;

typedef struct ld_cli_regress_problem {
    size_t input;
    const char *name;           /* the input or member that could not be read */
    const char *msg;            /* "name: reason" */
} ld_cli_regress_problem;

typedef struct ld_cli_regress_run {
    struct ld_cli *cli;
    char *const *inputs;
    size_t n_inputs;
    ld_arena strings;           /* every string of items and members */
    ld_cli_regress_item *items;
    size_t n_items, cap_items;
    ld_cli_regress_member *members;
    size_t n_members, cap_members;
    ld_cli_regress_problem *problems;       /* inputs or members that could not be read */
    size_t n_problems, cap_problems;
    uint64_t io_errors;
    uint64_t capture_problems; /* lines lost or damaged in their capture (also exit 2) */
    uint64_t over_limit;       /* of those, lines longer than --max-line */
    int failed;                 /* out of memory */
    /* judging */
    ld_differ *differ;
    ld_judge_checks checks;     /* --template / --tokenizer (members NULL = off) */
    ld_cli_conv_opts conv_opts; /* --conversation-memory, --max-conversations */
    ld_conv_stats conv;         /* the conversation state when judging ended */
    /* the baseline file and the comparison */
    const char *baseline_path;
    int updating;               /* --update-baseline: no comparison */
    ld_baseline base, cur;
    ld_baseline_diff diff;
    const char *template_desc;  /* --template SRC / --model DIR, for the reports */
    /* --partial: this share (shard_index of shard_count) of all the inputs,
     * whose inputs [share_first, ...) are `inputs` */
    char *const *all_inputs;
    size_t n_all_inputs, share_first;
    long shard_index, shard_count;
    /* conversations across shares (regress_convshare.c): the share's ops,
     * and the digests of the journals it started from (--conv-from) */
    struct ld_cli_journal *journal;
    uint64_t *conv_from;
    int conv_preloaded;
    uint64_t preload_evicted;   /* evictions while starting from them */
    int track_only;             /* --conv-journal alone: follow conversations, judge nothing */
} ld_cli_regress_run;

/* Sink callbacks for ld_cli_regress_read_inputs (regress_collect.c). */
void ld_cli_regress_on_record(void *ctx, size_t input, ld_request *r, const char *label);
void ld_cli_regress_on_member(void *ctx, size_t input, const ld_cli_regress_member_info *m);
void ld_cli_regress_on_problem(void *ctx, size_t input, ld_problem_kind kind, const ld_error *e);

/* Room for one more item, member or problem at the end of its list,
 * zeroed; NULL on out of memory.  ld_cli_regress_keep: a copy of s in
 * run->strings (NULL for NULL, or on out of memory). */
ld_cli_regress_item *ld_cli_regress_new_item(ld_cli_regress_run *run);
ld_cli_regress_member *ld_cli_regress_new_member(ld_cli_regress_run *run);
ld_cli_regress_problem *ld_cli_regress_new_problem(ld_cli_regress_run *run);
const char *ld_cli_regress_keep(ld_cli_regress_run *run, const char *s);

/* After reading: the run's baseline, sorted, and (unless updating) the
 * comparison with run->base, copied into the items.  Returns 0 or -1
 * (message printed). */
int ld_cli_regress_compare(ld_cli_regress_run *run);

void ld_cli_regress_run_free(ld_cli_regress_run *run);

/* The order reports list items in: regressions first, then new failing,
 * other not-ok, fixed, improved, ok; by key within each.  A malloc'd array
 * of item indices (NULL on out of memory). */
size_t *ld_cli_regress_report_order(const ld_cli_regress_run *run);

/* Members that held no request line (not a log: skipped). */
int ld_cli_regress_member_is_skipped(const ld_cli_regress_member *m);

/* Writers.  Each returns 0, or -1 with the reason printed. */
int ld_cli_regress_write_text(const ld_cli_regress_run *run, FILE *out, int verbose);
int ld_cli_regress_write_json(const ld_cli_regress_run *run, FILE *out);
int ld_cli_regress_write_junit(const ld_cli_regress_run *run, FILE *out);
int ld_cli_regress_write_html(const ld_cli_regress_run *run, FILE *out);

#endif
