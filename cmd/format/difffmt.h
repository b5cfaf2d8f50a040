/* difffmt.h - how `logdiff diff` reports verdicts: one line per request and
 * its findings with excerpts side by side for people, JSON Lines for
 * scripts, and the summary. */
#ifndef LD_CMD_DIFFFMT_H
#define LD_CMD_DIFFFMT_H

#include <stdint.h>

#include "cmd/cmd.h"
#include "replay/analysis/diff.h"
#include "cmd/common/convopts.h"
#include "cmd/common/logread.h"
#include "replay/judge.h"

enum { LD_N_VERDICTS = 6 };

typedef struct ld_cli_diff_report {
    struct ld_cli *cli;
    int json, verbose;
    const char *only_rid;
    ld_differ *differ;
    ld_judge_checks checks;      /* --template / --tokenizer checks (members NULL = off) */
    ld_arena arena;          /* per request, reset after each */
    uint64_t n_reported, n_not_ok;
    uint64_t per_verdict[LD_N_VERDICTS];
    int failed;              /* out of memory while judging */
    ld_cli_conv_opts conv;   /* --conversation-memory, --max-conversations */
    /* called once a request is reported (logdiff watch's metrics); NULL: none */
    void (*on_judged)(void *ctx, const ld_request *r, const ld_verdict *v);
    void *on_judged_ctx;
} ld_cli_diff_report;

void ld_cli_diff_report_init(ld_cli_diff_report *rep, struct ld_cli *cli);

/* Pairer callback: judges and prints one request. */
int ld_cli_diff_report_request(void *ctx, ld_request *r);

/* Pairer callback: r given to the differ for its conversations only (a
 * request judged and reported earlier: logdiff watch's warm-up); nothing
 * printed or counted. */
int ld_cli_diff_report_feed(void *ctx, ld_request *r);

/* Requests per verdict (people: stdout; scripts: stderr on a terminal). */
void ld_cli_diff_report_summary(ld_cli_diff_report *rep, const ld_cli_logread *lr);

#endif
