/* test_comm_shm.c - the communicator between processes (engine/tp/comm_shm.c,
 * comm_join.c): ranks forked as processes meeting at a rendezvous file.
 * The gather is every rank's data in rank order and the reduce the
 * left-to-right float sum (checked against a sum written here, on values
 * where another order rounds differently), over sizes that cross the
 * slots' chunks; a rank that exits mid-run, an abort, a stale rendezvous
 * file, a missing rank, a group of another size, a count that differs and
 * a rank alive but stalled past the timeout each end every rank with an
 * error instead of a hang. */
#define _GNU_SOURCE /* unshare(2) */
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/tp/comm.h"
#include "tests/support/ld_test.h"

/* a fresh rendezvous name in a directory of its own */
static void fresh_path(char *buf, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/ld-shm-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) dir[0] = 0;
    snprintf(buf, cap, "%s/group", dir);
}

static void remove_path(const char *path)
{
    unlink(path);
    char dir[600];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    rmdir(dir);
}

/* rank r's i-th value: full 24-bit mantissas a few binades apart, so
 * that the order of a sum changes its rounding */
static float value(int r, size_t i)
{
    unsigned long h = (unsigned long)(r + 1) * 2654435761u ^ (unsigned long)i * 40503u;
    h = (h * 2246822519u) % (1u << 24);
    return ldexpf((float)((long)h - (1l << 23)), (int)((r * 5 + i) % 12) - 30);
}

typedef int (*rank_fn)(int rank, int size, const char *path, void *arg);

/* Runs fn as rank 0..size-1, each in a forked process; status[r] its exit
 * code (a case's line number on failure).  The ranks listed in `first`
 * (-1 ends) are waited for before the others (a dead rank reaped). */
static int run_ranks(rank_fn fn, int size, const char *path, void *arg, int *status)
{
    pid_t pid[16];
    for (int r = 0; r < size; r++) {
        pid[r] = fork();
        if (pid[r] < 0) return 1;
        if (pid[r] == 0) _exit(fn(r, size, path, arg));
    }
    for (int r = 0; r < size; r++) {
        int ws = 0;
        if (waitpid(pid[r], &ws, 0) != pid[r]) return 1;
        status[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 200 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    }
    return 0;
}

#define RANK_CHECK(cond) \
    do {                 \
        if (!(cond)) {   \
            fprintf(stderr, "  rank %d, line %d: %s\n", rank, __LINE__, #cond); \
            return 1;    \
        }                \
    } while (0)

/* fn (given arg) as `size` forked ranks at a fresh rendezvous: every rank
 * exits 0, and rank 0 has removed the rendezvous name */
static int every_rank_passes(rank_fn fn, int size, void *arg)
{
    char path[600];
    fresh_path(path, sizeof path);
    int st[16];
    CHECK(size <= 16 && run_ranks(fn, size, path, arg, st) == 0);
    for (int r = 0; r < size; r++) CHECK_MSG(st[r] == 0, "%d ranks: rank %d exit %d", size, r, st[r]);
    struct stat sb;
    CHECK_MSG(stat(path, &sb) != 0, "rank 0 removes the rendezvous name");
    remove_path(path);
    return 0;
}

/* one gather and one reduce of n floats, checked */
static int collectives(ld_comm *c, int rank, int size, size_t n)
{
    float *send = malloc(n ? n * sizeof *send : 1), *recv = malloc(n ? (size_t)size * n * sizeof *recv : 1);
    RANK_CHECK(send && recv);
    ld_error err;
    for (size_t i = 0; i < n; i++) send[i] = value(rank, i);
    RANK_CHECK(ld_comm_all_gather(c, send, recv, n, &err) == LD_OK);
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < n; i++) RANK_CHECK(recv[(size_t)r * n + i] == value(r, i));
    RANK_CHECK(ld_comm_all_reduce_sum(c, send, n, &err) == LD_OK);
    for (size_t i = 0; i < n; i++) {
        float acc = value(0, i);
        for (int r = 1; r < size; r++) acc += value(r, i);
        RANK_CHECK(memcmp(&acc, &send[i], sizeof acc) == 0);
    }
    ld_mem m = {recv, LD_MEM_HOST, 0};
    for (size_t i = 0; i < n; i++) recv[i] = value(rank, i);
    RANK_CHECK(ld_comm_all_reduce_sum_mem(c, &m, n, &err) == LD_OK);
    RANK_CHECK(memcmp(recv, send, n * sizeof *recv) == 0);
    free(send);
    free(recv);
    return 0;
}

static int rank_collectives(int rank, int size, const char *path, void *arg)
{
    (void)arg;
    ld_comm *c;
    ld_error err;
    ld_comm_join_opts o = {"shm", path, size, rank, 0, 30.0};
    if (ld_comm_join(&o, &c, &err) != LD_OK) {
        fprintf(stderr, "  rank %d: %s\n", rank, err.msg);
        return 2;
    }
    RANK_CHECK(c->rank == rank && c->size == size);
    static const size_t sizes[] = {0, 1, 0, 0, 5, 4096, 600000}; /* the last crosses the slots' chunks */
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        if (collectives(c, rank, size, sizes[k])) return 3;
    ld_mem dev = {NULL, LD_MEM_CUDA, 0};
    RANK_CHECK(ld_comm_all_reduce_sum_mem(c, &dev, 4, &err) == LD_ERR_UNSUPPORTED);
    RANK_CHECK(ld_comm_barrier(c, &err) == LD_OK);
    ld_comm_destroy(c);
    return 0;
}

static int test_comm_shm_collectives(void)
{
    /* the data can tell the order of a sum apart */
    int differs = 0;
    for (size_t i = 0; i < 64; i++) {
        float a = ((value(0, i) + value(1, i)) + value(2, i)) + value(3, i);
        float b = value(0, i) + (value(1, i) + (value(2, i) + value(3, i)));
        differs += a != b;
    }
    CHECK(differs > 0);
    for (int size = 1; size <= 4; size++)
        if (every_rank_passes(rank_collectives, size, NULL)) return 1;
    return 0;
}

/* rank `arg` leaves: exits right after joining, or aborts the group */
typedef struct leaver {
    int rank, by_abort;
} leaver;

static int rank_left_behind(int rank, int size, const char *path, void *arg)
{
    const leaver *l = arg;
    ld_comm *c;
    ld_error err;
    RANK_CHECK(ld_comm_shm_join(path, size, rank, 30.0, 30.0, &c, &err) == LD_OK);
    if (rank == l->rank) {
        if (l->by_abort) ld_comm_abort(c);
        _exit(0); /* no destroy: as a crash would */
    }
    float buf[8] = {0};
    ld_status st = ld_comm_all_reduce_sum(c, buf, 8, &err);
    if (st == LD_OK) st = ld_comm_all_reduce_sum(c, buf, 8, &err); /* a rank may pass the first before the abort */
    RANK_CHECK(st == LD_ERR_MISMATCH);
    if (!l->by_abort) RANK_CHECK(strstr(err.msg, "exited") != NULL);
    RANK_CHECK(ld_comm_barrier(c, &err) == LD_ERR_MISMATCH); /* aborted for good */
    ld_comm_destroy(c);
    return 0;
}

static int test_comm_shm_rank_gone(void)
{
    for (int by_abort = 0; by_abort <= 1; by_abort++) {
        leaver l = {2, by_abort};
        CHECK_MSG(every_rank_passes(rank_left_behind, 3, &l) == 0, "by abort: %d", by_abort);
    }
    return 0;
}

static int rank_counts_differ(int rank, int size, const char *path, void *arg)
{
    (void)arg;
    ld_comm *c;
    ld_error err;
    RANK_CHECK(ld_comm_shm_join(path, size, rank, 30.0, 30.0, &c, &err) == LD_OK);
    float buf[8] = {0};
    RANK_CHECK(ld_comm_all_reduce_sum(c, buf, rank ? 5 : 4, &err) == LD_ERR_MISMATCH);
    ld_comm_destroy(c);
    return 0;
}

static int rank_wrong_size(int rank, int size, const char *path, void *arg)
{
    (void)arg;
    ld_comm *c;
    ld_error err;
    if (rank == 1) { /* a stranger of another group size, then the real rank 1 */
        RANK_CHECK(ld_comm_shm_join(path, 3, 1, 30.0, 30.0, &c, &err) == LD_ERR_USAGE);
        RANK_CHECK(strstr(err.msg, "a group of 2 ranks, not 3") != NULL);
    }
    RANK_CHECK(ld_comm_shm_join(path, size, rank, 30.0, 30.0, &c, &err) == LD_OK);
    RANK_CHECK(ld_comm_barrier(c, &err) == LD_OK);
    ld_comm_destroy(c);
    return 0;
}

static int test_comm_shm_mismatches(void)
{
    rank_fn fns[] = {rank_counts_differ, rank_wrong_size};
    for (int k = 0; k < 2; k++) CHECK_MSG(every_rank_passes(fns[k], 2, NULL) == 0, "case %d", k);
    return 0;
}

/* Rank 1 stays alive but reaches its first collective 4 s late, the
 * group's collective timeout being 1 s: the others' reduce fails after the
 * timeout naming rank 1 as stalled (and so do its later collectives);
 * rank 1, when it comes, is told it came too late.  Without the timeout
 * the others would wait for it (and a stopped rank for ever). */
static int rank_stalls(int rank, int size, const char *path, void *arg)
{
    (void)arg;
    ld_comm *c;
    ld_error err;
    RANK_CHECK(ld_comm_shm_join(path, size, rank, 30.0, 1.0, &c, &err) == LD_OK);
    if (rank == 1) nanosleep(&(struct timespec){4, 0}, NULL);
    float buf[8] = {0};
    ld_status st = ld_comm_all_reduce_sum(c, buf, 8, &err);
    fprintf(stderr, "  rank %d: %s\n", rank, err.msg);
    RANK_CHECK(st == LD_ERR_MISMATCH);
    if (rank == 1) {
        RANK_CHECK(strstr(err.msg, "this rank (1) reached a collective more than 1 s after the others") != NULL);
    } else {
        RANK_CHECK(strstr(err.msg, "1 (pid ") != NULL && strstr(err.msg, "did not reach a collective within 1 s") &&
                   strstr(err.msg, "stalled"));
        ld_error again; /* later collectives too: the group stays aborted */
        RANK_CHECK(ld_comm_barrier(c, &again) == LD_ERR_MISMATCH && strcmp(again.msg, err.msg) == 0);
    }
    ld_comm_destroy(c);
    return 0;
}

static int test_comm_shm_stalled_rank(void)
{
    return every_rank_passes(rank_stalls, 3, NULL);
}

/* A rank in another pid namespace, as in another container sharing the
 * file: rank 1 runs in a new user and pid namespace (where it is pid 1 and
 * rank 0's pid names nothing) and waits at a barrier while rank 0 sleeps
 * half a second, long enough for its liveness ticks; it must not take
 * rank 0 for gone (it did when every pid was looked up: "rank 0 ... exited
 * in the middle of the run"). */
static int pidns_collectives(int rank, int size, const char *path)
{
    ld_comm *c;
    ld_error err;
    RANK_CHECK(ld_comm_shm_join(path, size, rank, 30.0, 30.0, &c, &err) == LD_OK);
    if (rank == 0) nanosleep(&(struct timespec){0, 500000000L}, NULL);
    ld_status st = ld_comm_barrier(c, &err);
    if (st != LD_OK) fprintf(stderr, "  rank %d: %s\n", rank, err.msg);
    RANK_CHECK(st == LD_OK);
    int bad = collectives(c, rank, size, 1000);
    ld_comm_destroy(c);
    return bad;
}

static int rank_in_own_pidns(int rank, int size, const char *path, void *arg)
{
    (void)arg;
    if (rank == 0) return pidns_collectives(rank, size, path);
    if (unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0) return 90; /* the probe said it could */
    pid_t child = fork(); /* the namespace's first process */
    if (child == 0) _exit(pidns_collectives(rank, size, path));
    int ws = 0;
    if (child < 0 || waitpid(child, &ws, 0) != child) return 91;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 92;
}

static int test_comm_shm_other_pid_namespace(void)
{
    pid_t probe = fork();
    if (probe == 0) _exit(unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0 ? 0 : errno);
    int ws = 0;
    CHECK(probe > 0 && waitpid(probe, &ws, 0) == probe && WIFEXITED(ws));
    if (WEXITSTATUS(ws) != 0)
        SKIP("this machine does not let a process make its own user and pid namespaces (unshare: %s)",
             strerror(WEXITSTATUS(ws)));
    return every_rank_passes(rank_in_own_pidns, 2, NULL);
}

static int test_comm_shm_rendezvous_refusals(void)
{
    char path[600];
    fresh_path(path, sizeof path);
    ld_comm *c;
    ld_error err;
    /* a leftover under the name: rank 0 refuses it and leaves it there */
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("leftover", f);
    fclose(f);
    CHECK(ld_comm_shm_join(path, 2, 0, 1.0, 30.0, &c, &err) == LD_ERR_USAGE);
    CHECK(strstr(err.msg, "exists") != NULL);
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    /* and another rank finding it refuses it at once, as not a group's */
    CHECK(ld_comm_shm_join(path, 2, 1, 30.0, 30.0, &c, &err) == LD_ERR_USAGE);
    CHECK_MSG(strstr(err.msg, "not a logdiff group's file") != NULL, "%s", err.msg);
    unlink(path);
    /* nobody else comes: rank 0 gives up at the timeout and removes the name */
    CHECK(ld_comm_shm_join(path, 2, 0, 0.3, 30.0, &c, &err) == LD_ERR_IO);
    CHECK_MSG(strstr(err.msg, "1 of 2 ranks joined") != NULL, "%s", err.msg);
    CHECK(stat(path, &sb) != 0);
    /* no rank 0 */
    CHECK(ld_comm_shm_join(path, 2, 1, 0.3, 30.0, &c, &err) == LD_ERR_IO);
    CHECK(strstr(err.msg, "did not create it") != NULL);
    /* usage */
    CHECK(ld_comm_shm_join(path, 2, 2, 1.0, 30.0, &c, &err) == LD_ERR_USAGE);
    CHECK(ld_comm_shm_join(path, LD_COMM_SHM_MAX_RANKS + 1, 0, 1.0, 30.0, &c, &err) == LD_ERR_USAGE);
    ld_comm_join_opts o = {"tcp", path, 2, 0, 0, 1.0};
    CHECK(ld_comm_join(&o, &c, &err) == LD_ERR_USAGE);
    o = (ld_comm_join_opts){"shm", "", 2, 0, 0, 1.0};
    CHECK(ld_comm_join(&o, &c, &err) == LD_ERR_USAGE);
    if (!ld_comm_nccl_available()) {
        o = (ld_comm_join_opts){"nccl", path, 2, 0, 0, 1.0};
        CHECK(ld_comm_join(&o, &c, &err) == LD_ERR_UNSUPPORTED);
    }
    remove_path(path);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_comm_shm_collectives),
    LD_CASE(test_comm_shm_rank_gone),
    LD_CASE(test_comm_shm_mismatches),
    LD_CASE(test_comm_shm_stalled_rank),
    LD_CASE(test_comm_shm_other_pid_namespace),
    LD_CASE(test_comm_shm_rendezvous_refusals),
};

LD_TEST_MAIN(cases)
