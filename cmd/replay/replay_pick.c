/* replay_pick.c - `logdiff replay` reading the logs: the request to replay
 * (its rid, the only sub-request of a batch with that parent rid, or the
 * prefill server's record of a prefill/decode pair, by its own rid) and
 * the ones --batch-with names, each kept whole as the pairer emits it. */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/logread.h"
#include "cmd/replay/replay_batched.h"
#include "replay_cli.h"

static int on_request(void *ctx, ld_request *r)
{
    ld_cli_replay_pick *s = ctx;
    for (size_t i = 0; r->rid && i < s->n_with; i++)
        if (!s->with_r[i] && !strcmp(r->rid, s->with[i])) {
            s->with_r[i] = r;
            return LD_PAIR_TAKE;
        }
    int own = r->rid && !strcmp(r->rid, s->rid); /* a shared (client's) rid: the decode server's */
    if (!own && r->peer && r->peer->rid && !strcmp(r->peer->rid, s->rid) && s->n_exact++ == 0) {
        s->exact = r->peer; /* the prefill server's record of a joined pair: replay what it did */
        r->peer = NULL;
        return 0;
    }
    if (own) {
        if (s->n_exact++ == 0) {
            s->exact = r;
            return LD_PAIR_TAKE;
        }
    } else if (r->parent_rid && !strcmp(r->parent_rid, s->rid)) {
        if (s->n_sub++ == 0) {
            s->sub = r;
            return LD_PAIR_TAKE;
        }
    }
    return 0;
}

/* --batch-with's rids into s; 0, or -1 printed */
static int batch_rids(struct ld_cli *cli, const ld_cli_replay_args *a, ld_cli_replay_pick *s)
{
    char msg[256];
    if (ld_cli_batch_rids_parse(a->batch_with, a->rid, &s->with_buf, &s->with, &s->n_with, msg, sizeof msg) != 0 ||
        !(s->with_r = calloc(s->n_with, sizeof *s->with_r))) {
        fprintf(cli->err, LD_CLI_REPLAY_PFX "%s\n", s->with ? msg : "out of memory");
        return -1;
    }
    return 0;
}

int ld_cli_replay_read(struct ld_cli *cli, const ld_cli_replay_args *a, char **logs, int n_logs,
                       ld_cli_replay_pick *s, const ld_request **r)
{
    *r = NULL;
    s->rid = a->rid;
    if (a->batch_with && batch_rids(cli, a, s) != 0) return -1;
    ld_pair_options popts = { 0 };
    popts.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES | LD_PAIR_KEEP_INTERNAL;
    popts.only_rid = a->batch_with ? NULL : a->rid; /* several requests kept: every record's values */
    ld_cli_logread lr = { cli, 0, 0, { 0 }, { 0 }, a->capture };
    if (ld_cli_logread_run(&lr, logs, n_logs, &popts, on_request, s) != 0 || lr.stats.io_errors) return -1;
    *r = s->exact ? s->exact : s->n_sub == 1 ? s->sub : NULL;
    if (!*r && s->n_sub > 1)
        fprintf(cli->err, LD_CLI_REPLAY_PFX "'%s' is a batch of %zu requests: give the rid of one of them\n", a->rid,
                s->n_sub);
    else if (!*r)
        fprintf(cli->err, LD_CLI_REPLAY_PFX "no request with rid '%s' in the logs given\n", a->rid);
    else if (s->n_exact > 1)
        fprintf(cli->err, LD_CLI_REPLAY_PFX "warning: %zu requests have rid '%s'; replaying the first\n", s->n_exact,
                a->rid);
    return *r ? 0 : -1;
}

void ld_cli_replay_pick_free(ld_cli_replay_pick *s)
{
    ld_request_free(s->exact);
    ld_request_free(s->sub);
    for (size_t i = 0; s->with_r && i < s->n_with; i++) ld_request_free(s->with_r[i]);
    free(s->with_r);
    free(s->with);
    free(s->with_buf);
}
