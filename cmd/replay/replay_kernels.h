/* replay_kernels.h - the output of `logdiff replay --compare-kernels`
 * and --check (replay/run/replay_compare.h): a table, or one JSON object. */
#ifndef LD_CMD_REPLAY_KERNELS_H
#define LD_CMD_REPLAY_KERNELS_H

#include <stdio.h>

#include "replay/run/replay_compare.h"

void ld_cli_print_kernel_cmp(FILE *f, const char *rid, const ld_kernel_cmp_report *rep, int json);

/* `--check OTHER`: per plane the two backends' largest row error and
 * element difference, and the logged tokens' changes */
void ld_cli_print_backend_cmp(FILE *f, const char *rid, const ld_backend_cmp *c, int json);

#endif
