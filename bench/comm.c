/* bench/comm.c - the tensor-parallel all-reduce on the CPU communicators
 * (engine/tp/comm.h): ranks as threads of one process (comm_sim.c) and as
 * processes meeting in a shared mapping (comm_shm.c, the multi-process
 * launch), at a decode step's size (one row of the hidden width) and a
 * prefill chunk's (64 rows), against a baseline measured in the same run:
 * memcpy of the bytes one rank must at least move (its own floats in,
 * every rank's floats out: (1 + ranks) x the message).
 *
 * Prints `name  baseline  logdiff  unit  ratio` lines (bench/README.md):
 * microseconds an all-reduce, then the baseline's microseconds for the
 * same bytes, ratio = logdiff / baseline.  Nothing is asserted.
 *
 *   bench_comm [--iters N]                                               */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include "engine/tp/comm.h"
#include "membw.h"

typedef struct job {
    ld_comm *c;
    size_t n;
    int iters;
    double seconds; /* rank 0: the time of the iterations */
    int failed;
} job;

/* iters all-reduces of n floats on c, after one to warm up; the time
 * between two barriers */
static void run_reduces(job *j)
{
    float *buf = malloc(j->n * sizeof *buf);
    ld_error err;
    if (!buf) {
        j->failed = 1;
        ld_comm_abort(j->c);
        return;
    }
    for (size_t i = 0; i < j->n; i++) buf[i] = (float)(i % 7) * 0.25f;
    j->failed = ld_comm_all_reduce_sum(j->c, buf, j->n, &err) != LD_OK || ld_comm_barrier(j->c, &err) != LD_OK;
    double t0 = ld_bench_now();
    for (int k = 0; k < j->iters && !j->failed; k++) {
        for (size_t i = 0; i < j->n; i++) buf[i] *= 0.5f; /* keep the sums finite */
        j->failed = ld_comm_all_reduce_sum(j->c, buf, j->n, &err) != LD_OK;
    }
    if (!j->failed) j->failed = ld_comm_barrier(j->c, &err) != LD_OK;
    j->seconds = ld_bench_now() - t0;
    free(buf);
}

static void *thread_main(void *arg)
{
    run_reduces(arg);
    return NULL;
}

/* seconds an all-reduce over `ranks` threads (comm_sim.c); < 0: failed */
static double time_threads(int ranks, size_t n, int iters)
{
    ld_comm *c[16];
    ld_error err;
    if (ld_comm_sim_create(ranks, 1, c, &err) != LD_OK) return -1;
    job jobs[16];
    pthread_t th[16];
    for (int r = 0; r < ranks; r++) jobs[r] = (job){c[r], n, iters, 0, 0};
    for (int r = 1; r < ranks; r++) pthread_create(&th[r], NULL, thread_main, &jobs[r]);
    run_reduces(&jobs[0]);
    int failed = jobs[0].failed;
    for (int r = 1; r < ranks; r++) {
        pthread_join(th[r], NULL);
        failed |= jobs[r].failed;
    }
    for (int r = 0; r < ranks; r++) ld_comm_destroy(c[r]);
    return failed ? -1 : jobs[0].seconds / iters;
}

/* seconds an all-reduce over `ranks` processes (comm_shm.c); < 0: failed */
static double time_processes(int ranks, size_t n, int iters)
{
    char path[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/ld-bench-comm-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp ? tmp : "/tmp",
             (int)getpid());
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid[16];
    for (int r = 0; r < ranks; r++) {
        fflush(NULL);
        pid[r] = fork();
        if (pid[r] < 0) return -1;
        if (pid[r] == 0) {
            ld_error err;
            job j = {NULL, n, iters, 0, 0};
            if (ld_comm_shm_join(path, ranks, r, 30.0, 30.0, &j.c, &err) != LD_OK) _exit(2);
            run_reduces(&j);
            ld_comm_destroy(j.c);
            if (r == 0 && write(fd[1], &j.seconds, sizeof j.seconds) != (ssize_t)sizeof j.seconds) _exit(3);
            _exit(j.failed);
        }
    }
    close(fd[1]);
    double s = -1;
    if (read(fd[0], &s, sizeof s) != (ssize_t)sizeof s) s = -1;
    close(fd[0]);
    int failed = 0;
    for (int r = 0; r < ranks; r++) {
        int ws = 0;
        waitpid(pid[r], &ws, 0);
        failed |= !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
    }
    unlink(path);
    return failed || s < 0 ? -1 : s / iters;
}

/* seconds to memcpy `bytes` (best of 5 runs of enough copies) */
static double time_memcpy(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) return -1;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    int reps = (int)(((size_t)64 << 20) / bytes) + 1;
    double best = 1e30;
    for (int run = 0; run < 5; run++) {
        double t0 = ld_bench_now();
        for (int k = 0; k < reps; k++) {
            memcpy(k & 1 ? a : b, k & 1 ? b : a, bytes);
            __asm__ __volatile__("" ::: "memory");
        }
        double t = (ld_bench_now() - t0) / reps;
        if (t < best) best = t;
    }
    free(a);
    free(b);
    return best;
}

int main(int argc, char **argv)
{
    int iters = 200;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_comm [--iters N]\n");
            return 2;
        }
    }
    if (iters < 1) iters = 1;
    static const struct { const char *what; size_t n; } sizes[] = {
        {"decode row 7168", 7168}, {"prefill 64x7168", 64 * 7168}};
    static const int rank_counts[] = {2, 4};
    int status = 0;
    printf("%-44s %12s %12s %5s %7s\n", "name", "baseline", "logdiff", "unit", "ratio");
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t ri = 0; ri < sizeof rank_counts / sizeof *rank_counts; ri++) {
            int R = rank_counts[ri];
            size_t n = sizes[si].n;
            double base = time_memcpy((size_t)(1 + R) * n * sizeof(float));
            int it = n > 100000 ? (iters / 10 > 0 ? iters / 10 : 1) : iters;
            double th = time_threads(R, n, it), pr = time_processes(R, n, it);
            char name[96];
            snprintf(name, sizeof name, "allreduce %s, %d threads", sizes[si].what, R);
            if (th < 0) status = 2;
            else printf("%-44s %12.2f %12.2f %5s %7.2f\n", name, base * 1e6, th * 1e6, "us", th / base);
            snprintf(name, sizeof name, "allreduce %s, %d processes", sizes[si].what, R);
            if (pr < 0) status = 2;
            else printf("%-44s %12.2f %12.2f %5s %7.2f\n", name, base * 1e6, pr * 1e6, "us", pr / base);
        }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("machine: %ld cores; baseline: memcpy of (1 + ranks) x the message's floats, best of 5\n", cores);
    if (status) printf("some measurements could not run\n");
    return status;
}
