/* replay_args.c - `logdiff replay`'s options checked and completed: the
 * numbers parsed, the modes that do not go together refused, the rank of a
 * group of processes taken from the environment as launchers set it. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay_cli.h"

/* *v from the environment variable `name` when set; a problem when it is
 * not an integer from 0 to 1023 */
static const char *env_int(const char *name, long *v)
{
    const char *s = getenv(name);
    if (!s || !*s) return NULL;
    char *end = NULL;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (*end || errno || x < 0 || x > 1023) return name;
    *v = x;
    return NULL;
}

/* the first of `names` set in the environment into *v (left as it is when
 * none is); a problem naming the variable when it is not an integer */
static const char *env_first(const char *const *names, long *v)
{
    const char *bad = NULL;
    for (int i = 0; names[i] && *v < 0 && !bad; i++) bad = env_int(names[i], v);
    return bad;
}

/* The options of --tp-rank completed from the environment and checked;
 * a problem to report, or NULL.  Besides our own variables, the rank and
 * the local rank as launchers set them: torchrun-style (RANK, LOCAL_RANK),
 * Slurm's srun, Open MPI's mpirun; those only with a rendezvous given. */
static const char *tp_proc_resolve(ld_cli_tp_proc *p, long tp, char *msg, size_t cap)
{
    static const char *const own_rank[] = {"LD_TP_RANK", NULL}, *const own_device[] = {"LD_TP_DEVICE", NULL};
    static const char *const launcher_rank[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", NULL};
    static const char *const launcher_device[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", NULL};
    if (!p->rendezvous) p->rendezvous = getenv("LD_TP_RENDEZVOUS");
    if (p->rendezvous && !*p->rendezvous) p->rendezvous = NULL;
    int given = p->device >= 0 || p->transport; /* --tp-device or --tp-transport itself, not the environment's */
    if (!p->transport) p->transport = getenv("LD_TP_TRANSPORT");
    if (p->transport && !*p->transport) p->transport = NULL;
    const char *bad = env_first(own_rank, &p->rank);
    if (!bad) bad = env_first(own_device, &p->device);
    if (!bad && p->rendezvous) bad = env_first(launcher_rank, &p->rank);
    if (!bad && p->rendezvous) bad = env_first(launcher_device, &p->device);
    if (bad) {
        snprintf(msg, cap, "%s: give an integer from 0 to 1023", bad);
        return msg;
    }
    if (p->rank < 0 && !p->rendezvous) /* not a group of processes */
        return given ? "--tp-device, --tp-transport: give them with --tp-rank and --tp-rendezvous" : NULL;
    if (p->rank < 0 || !p->rendezvous) return "--tp-rank and --tp-rendezvous go together";
    if (tp < 1) return "--tp-rank: give --tp N too (the group's size)";
    if (p->rank >= tp) {
        snprintf(msg, cap, "--tp-rank: give 0 to %ld", tp - 1);
        return msg;
    }
    if (p->timeout < 1 || p->timeout > 86400) return "--tp-timeout: give 1 to 86400 seconds";
    return NULL; /* a device still < 0: the transport's default (replay.h) */
}

/* --tp N in a step that srun started with several tasks: the group is
 * the step's tasks (SLURM_STEP_NUM_TASKS, else SLURM_NTASKS, must be N;
 * each task's rank and local rank come from SLURM_PROCID / SLURM_LOCALID
 * above) and, unless one is given, they meet at a file named after the job
 * and step in the directory the job was submitted from (SLURM_SUBMIT_DIR:
 * on a cluster, storage every node sees), as torchrun-style launchers
 * derive theirs.  A problem to report, or NULL. */
static const char *srun_group(ld_cli_replay_args *a, char *msg, size_t cap)
{
    const char *step = getenv("SLURM_STEP_ID"), *job = getenv("SLURM_JOB_ID");
    long tasks = -1;
    if (a->tp < 1 || !step || !*step || !job || !*job || getenv("LD_TP_RANK")) return NULL;
    const char *bad = env_first((const char *const[]){ "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", NULL }, &tasks);
    if (bad) {
        snprintf(msg, cap, "%s: not a task count", bad);
        return msg;
    }
    if (tasks <= 1) return NULL; /* one task: a process on its own, as without srun */
    if (tasks != a->tp) {
        snprintf(msg, cap, "--tp %ld, but srun started %ld tasks: give --tp %ld or srun -n %ld", a->tp, tasks,
                 tasks, a->tp);
        return msg;
    }
    const char *rdv = getenv("LD_TP_RENDEZVOUS");
    if (a->proc.rendezvous || (rdv && *rdv)) return NULL;
    const char *dir = getenv("SLURM_SUBMIT_DIR");
    int n = snprintf(a->proc.srun_rendezvous, sizeof a->proc.srun_rendezvous, "%s/.logdiff-tp-%s.%s",
                     dir && *dir ? dir : ".", job, step);
    if (n < 0 || (size_t)n >= sizeof a->proc.srun_rendezvous) return "SLURM_SUBMIT_DIR: too long a path";
    a->proc.rendezvous = a->proc.srun_rendezvous;
    return NULL;
}

/* "A-B" or "A" (layer numbers from 0, A <= B): the slice [A, B + 1); 0 or -1 */
static int parse_layers(const char *s, int *first, int *last)
{
    char *end = NULL;
    errno = 0;
    long a = strtol(s, &end, 10), b = a;
    if (end == s || errno || a < 0 || a > 100000 || !isdigit((unsigned char)s[0])) return -1;
    if (*end == '-') {
        const char *t = end + 1;
        if (!isdigit((unsigned char)*t)) return -1;
        b = strtol(t, &end, 10);
        if (errno || b < a || b > 100000) return -1;
    }
    if (*end) return -1;
    *first = (int)a;
    *last = (int)b + 1;
    return 0;
}

/* the numbers and names given, each in its range */
static const char *value_problem(const ld_cli_replay_args *a, int n_logs)
{
    const char *b = a->backend, *c = a->check;
    if (!a->model) return "--model DIR is required";
    if (!a->rid) return "--rid RID is required";
    if (n_logs == 0) return "no log given";
    if (a->top_k < 1 || a->top_k > LD_REPLAY_MAX_TOP_K) return "--top-k: give 1 to 64";
    if (a->max_tokens < 0 || a->max_tokens > 4096) return "--max-tokens: give 0 to 4096";
    if (a->threads < 0 || a->threads > 1024) return "--threads: give 1 to 1024";
    if (strcmp(b, "cpu") && strcmp(b, "ref") && strcmp(b, "cuda")) return "--backend: give cpu, ref or cuda";
    if (c && strcmp(c, "cpu") && strcmp(c, "ref") && strcmp(c, "cuda")) return "--check: give cpu, ref or cuda";
    if (a->tp < 0 || a->tp > 64) return "--tp: give 1 to 64";
    if (a->dump_dir && !a->dump_dir[0]) return "--dump-layers: give a directory";
    return NULL;
}

/* the options that go only with others, or not with others */
static const char *mode_problem(const ld_cli_replay_args *a)
{
    if (a->check && (a->compare || a->dump_dir || a->seed))
        return "--check: not with --compare-kernels, --dump-layers or --seed";
    if (a->check_layers && !a->check) return "--check-layers: give it with --check BACKEND";
    if (a->positions && !a->dump_dir) return "--positions: give it with --dump-layers DIR";
    if (a->compare && (a->dump_dir || a->kernels || a->seed))
        return "--compare-kernels: not with --dump-layers, --kernels or --seed";
    if (a->batch_with && (a->check || a->compare || a->dump_dir || a->seed))
        return "--batch-with: not with --check, --compare-kernels, --dump-layers or --seed";
    return NULL;
}

/* --near-tie, --seed and --check-layers parsed into *a */
static const char *parse_problem(ld_cli_replay_args *a)
{
    a->nt = LD_REPLAY_NEAR_TIE;
    if (a->near_tie) {
        char *end = NULL;
        a->nt = strtod(a->near_tie, &end);
        if (end == a->near_tie || *end || !(a->nt >= 0) || isinf(a->nt)) return "--near-tie: give a number of nats >= 0";
    }
    if (a->seed) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(a->seed, &end, 10);
        if (end == a->seed || *end || errno || a->seed[0] == '-' || a->seed[0] == '+' || a->seed[0] == ' ')
            return "--seed: give an integer from 0 to 18446744073709551615";
        a->sampling.seed = (uint64_t)v;
    }
    if (a->check_layers && parse_layers(a->check_layers, &a->first, &a->last) != 0)
        return "--check-layers: give A-B (0 <= A <= B) or A, layer numbers from 0";
    return NULL;
}

int ld_cli_replay_check(struct ld_cli *cli, ld_cli_replay_args *a, int n_logs)
{
    a->sampling = (ld_replay_sampling){ 0, { NAN, 0, NAN, NAN } };
    char tp_msg[160];
    const char *problem = value_problem(a, n_logs);
    if (!problem) problem = mode_problem(a);
    if (!problem) problem = parse_problem(a);
    if (!problem) problem = srun_group(a, tp_msg, sizeof tp_msg);
    if (!problem) problem = tp_proc_resolve(&a->proc, a->tp, tp_msg, sizeof tp_msg);
    if (problem) {
        fprintf(cli->err, LD_CLI_REPLAY_PFX "%s\n", problem);
        return -1;
    }
    ld_error err;
    ld_error_clear(&err);
    if (a->kernels && ld_replay_kernels_check(a->backend, a->kernels, &err) != LD_OK) {
        fprintf(cli->err, LD_CLI_REPLAY_PFX "--kernels: %s\n", err.msg);
        return -1;
    }
    if (a->positions && ld_replay_positions_parse(a->positions, &a->want, &err) != LD_OK) {
        fprintf(cli->err, LD_CLI_REPLAY_PFX "--positions: %s\n", err.msg);
        return -1;
    }
    if (a->threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        a->threads = n < 1 ? 1 : n > 64 ? 64 : n;
    }
    return 0;
}
