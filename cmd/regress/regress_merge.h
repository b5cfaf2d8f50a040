/* regress_merge.h - `logdiff regress --merge PARTIAL...`: the partials of
 * one sharded run read back into one ld_cli_regress_run, in share order,
 * as if one process had read every input (regress_merge.c). */
#ifndef LD_CMD_REGRESS_MERGE_H
#define LD_CMD_REGRESS_MERGE_H

#include "cmd/common/shard.h"
#include "regress_partial.h"

/* Reads paths[0..n) into run (its items, baseline entries, members,
 * problems and counts; run->inputs = every input of the run).  The
 * partials must be one run's: the same inputs and settings, each share
 * once; what is wrong (a missing share with its inputs, a duplicate with
 * both files, a bad line with its file, line and byte) is printed on
 * run->cli->err.  On success *first holds the first partial's head (its
 * inputs and settings, which run->inputs points into: free it after the
 * run).  Returns 0 or -1. */
int ld_cli_regress_merge(ld_cli_regress_run *run, char *const *paths, size_t n, ld_cli_partial_head *first);

#endif
