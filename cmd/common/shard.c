/* shard.c - see shard.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard.h"

enum { SHARD_MAX = 1000000 };

/* A whole decimal number in [0, LONG_MAX); -1 when s is not one. */
static long whole_number(const char *s)
{
    if (!s || *s < '0' || *s > '9') return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || *end ? -1 : v;
}

static int say(char *msg, size_t cap, const char *text)
{
    snprintf(msg, cap, "%s", text);
    return -1;
}

/* I/N: 0 <= I < N <= SHARD_MAX. */
static int parse_pair(const char *spec, long *i, long *n)
{
    const char *slash = strchr(spec, '/');
    if (!slash || slash == spec || (size_t)(slash - spec) > 20) return -1;
    char head[24];
    memcpy(head, spec, (size_t)(slash - spec));
    head[slash - spec] = 0;
    *i = whole_number(head);
    *n = whole_number(slash + 1);
    return *i < 0 || *n < 1 || *n > SHARD_MAX || *i >= *n ? -1 : 0;
}

/* A Slurm variable as a number; -1 absent, -2 not a number. */
static long slurm_var(ld_cli_getenv_fn env, const char *name)
{
    const char *v = env(name);
    if (!v || !*v) return -1;
    long x = whole_number(v);
    return x < 0 ? -2 : x;
}

/* A job array's task: I = (ID - MIN) / STEP, N = (MAX - MIN) / STEP + 1,
 * checked against COUNT where Slurm gives it; the array must be an
 * unbroken range (--array=0-3, 1-4, 0-6:2), or shares would go missing. */
static int from_slurm(ld_cli_getenv_fn env, ld_cli_shard *out, char *msg, size_t cap)
{
    long id = slurm_var(env, "SLURM_ARRAY_TASK_ID"), min = slurm_var(env, "SLURM_ARRAY_TASK_MIN");
    long max = slurm_var(env, "SLURM_ARRAY_TASK_MAX"), step = slurm_var(env, "SLURM_ARRAY_TASK_STEP");
    long count = slurm_var(env, "SLURM_ARRAY_TASK_COUNT");
    if (id < 0 || min == -2 || max == -2 || step == -2 || count == -2 || step == 0)
        return say(msg, cap, "--shard auto: SLURM_ARRAY_TASK_ID and its siblings are not whole numbers");
    if (min < 0) min = 0;
    if (step < 0) step = 1;
    if (max < 0 && count < 0)
        return say(msg, cap, "--shard auto: Slurm gives SLURM_ARRAY_TASK_ID but neither "
                   "SLURM_ARRAY_TASK_COUNT nor SLURM_ARRAY_TASK_MAX");
    long n = max >= 0 ? (max - min) / step + 1 : count;
    if (id < min || (id - min) % step || (max >= 0 && id > max) ||
        (count >= 0 && count != n) || (max >= 0 && (max - min) % step))
        return say(msg, cap, "--shard auto: the Slurm job array is not an unbroken range of "
                   "task ids (give sbatch --array=0-N-1): its shares could not all be found");
    if (n > SHARD_MAX) return say(msg, cap, "--shard auto: more than 1000000 array tasks");
    out->index = (id - min) / step;
    out->count = n;
    out->from = "Slurm";
    return 0;
}

static int from_kubernetes(ld_cli_getenv_fn env, long given_n, ld_cli_shard *out, char *msg,
                           size_t cap)
{
    long i = whole_number(env("JOB_COMPLETION_INDEX"));
    if (i < 0) return say(msg, cap, "--shard auto: JOB_COMPLETION_INDEX is not a whole number");
    if (given_n < 1)
        return say(msg, cap, "--shard auto: a Kubernetes Indexed Job gives JOB_COMPLETION_INDEX "
                   "but no count: give it as --shard auto/N, N = the Job's completions");
    if (i >= given_n) {
        snprintf(msg, cap, "--shard auto/%ld: JOB_COMPLETION_INDEX is %ld, not below %ld: "
                 "N must equal the Job's completions", given_n, i, given_n);
        return -1;
    }
    out->index = i;
    out->count = given_n;
    out->from = "Kubernetes";
    return 0;
}

static int parse_auto(const char *rest, ld_cli_getenv_fn env, ld_cli_shard *out, char *msg,
                      size_t cap)
{
    long given_n = -1;
    if (*rest) {
        given_n = rest[0] == '/' ? whole_number(rest + 1) : -1;
        if (given_n < 1 || given_n > SHARD_MAX)
            return say(msg, cap, "--shard: give I/N (0 <= I < N), auto or auto/N");
    }
    const char *slurm = env("SLURM_ARRAY_TASK_ID");
    const char *k8s = env("JOB_COMPLETION_INDEX");
    if (slurm && *slurm) {
        if (from_slurm(env, out, msg, cap) != 0) return -1;
        if (given_n > 0 && given_n != out->count) {
            snprintf(msg, cap, "--shard auto/%ld: the Slurm job array has %ld tasks", given_n,
                     out->count);
            return -1;
        }
        return 0;
    }
    if (k8s && *k8s) return from_kubernetes(env, given_n, out, msg, cap);
    return say(msg, cap, "--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor "
               "JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set: give --shard I/N");
}

int ld_cli_shard_parse(const char *spec, ld_cli_getenv_fn env, ld_cli_shard *out, char *msg,
                       size_t cap)
{
    memset(out, 0, sizeof *out);
    out->count = 1;
    if (!strncmp(spec, "auto", 4)) return parse_auto(spec + 4, env, out, msg, cap);
    long i, n;
    if (parse_pair(spec, &i, &n) != 0) {
        snprintf(msg, cap, "--shard %s: give I/N with 0 <= I < N <= %d, auto or auto/N", spec,
                 SHARD_MAX);
        return -1;
    }
    out->index = i;
    out->count = n;
    out->from = "--shard";
    return 0;
}

void ld_cli_shard_range(const ld_cli_shard *s, size_t n_inputs, size_t *first, size_t *end)
{
    unsigned long long n = n_inputs, i = (unsigned long long)s->index, c = (unsigned long long)s->count;
    *first = (size_t)(i * n / c);
    *end = (size_t)((i + 1) * n / c);
}
