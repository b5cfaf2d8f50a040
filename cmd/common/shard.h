/* shard.h - `--shard I/N`: which share of the INPUTs this process takes, so
 * that N processes on N nodes split one run between them.
 *
 * A share is a contiguous block of the input list: share I of N holds the
 * inputs [I*n/N, (I+1)*n/N).  The rule needs nothing but the list, so every
 * node decides alike; blocks (not every N-th input) keep each share's
 * output in input order, so the shares' outputs in share order read as one
 * process's.  An INPUT is never split: it is what logdiff pairs on its own
 * (a server's rotated files given as one directory or archive).
 *
 * `--shard auto` takes I and N from the scheduler that started the process:
 * a Slurm job array (SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT, or
 * SLURM_ARRAY_TASK_MIN/MAX/STEP) or a Kubernetes Indexed Job
 * (JOB_COMPLETION_INDEX; Kubernetes sets no count, so `auto/N` gives it).
 */
#ifndef LD_CMD_SHARD_H
#define LD_CMD_SHARD_H

#include <stddef.h>

typedef struct ld_cli_shard {
    long index, count;    /* 0 <= index < count; 0/1: no sharding */
    const char *from;     /* where I/N came from: "--shard", "Slurm", "Kubernetes" */
} ld_cli_shard;

/* The environment as a function, so that tests can give their own. */
typedef char *(*ld_cli_getenv_fn)(const char *name); /* getenv() */

/* Parses SPEC ("I/N", "auto" or "auto/N") into *out, reading the
 * scheduler's variables through `env` for auto.  Returns 0, or -1 with the
 * reason in msg[0..cap). */
int ld_cli_shard_parse(const char *spec, ld_cli_getenv_fn env, ld_cli_shard *out, char *msg,
                       size_t cap);

/* The inputs [*first, *end) of share s of n_inputs. */
void ld_cli_shard_range(const ld_cli_shard *s, size_t n_inputs, size_t *first, size_t *end);

#endif
