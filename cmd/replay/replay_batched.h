/* replay_batched.h - `logdiff replay --batch-with RIDS`: the requests to
 * batch with, and the report (replay/run/replay_batch.h): a line, or one JSON
 * object. */
#ifndef LD_CMD_REPLAY_BATCHED_H
#define LD_CMD_REPLAY_BATCHED_H

#include <stdio.h>

#include "replay/run/replay_batch.h"

/* The comma-separated rids of `list` into *rids [*n] (malloc'd; the
 * strings point into the copy *buf, also malloc'd): 0, or -1 with a
 * message in msg (an empty rid, one named twice, `rid` itself). */
int ld_cli_batch_rids_parse(const char *list, const char *rid, char **buf, const char ***rids, size_t *n, char *msg,
                        size_t cap);

void ld_cli_print_batch_report(FILE *f, const char *rid, const char *const *with, size_t n_with,
                           const ld_replay_batch_report *rep, int json);

#endif
