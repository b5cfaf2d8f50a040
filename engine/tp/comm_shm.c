/* comm_shm.c - comm.h's communicator between processes of one machine:
 * each rank is a process (as on a multi-node deployment, where each GPU's
 * rank is one), the group meets in a file mapped by all (ld_comm_shm_join).
 * It is what lets the multi-process launch run, and be tested, on CPU
 * ranks and without a second machine; across machines the transport is
 * NCCL's (comm_nccl.c).  MPI would do this too, at the price of its
 * launcher and a large dependency for what is a test harness's transport.
 *
 * The mapping: a header (magic, group size, slot size, a process-shared
 * robust mutex and condition variable, the barrier's state, each rank's
 * pid and count) and one slot of SLOT_FLOATS floats per rank.  A
 * collective moves its floats through the slots in chunks: each rank
 * copies its chunk into its slot, a barrier, each reads every slot in rank
 * order (a gather copies them, a reduce sums them: comm.h's ordered sum,
 * the same bits as every other communicator's), a barrier before the
 * slots are reused.
 *
 * Nothing hangs when a rank dies: waits are timed, and a waiting rank
 * checks that the others' processes are still there (kill(pid, 0), and
 * /proc for a zombie not reaped yet); a rank that died holding the mutex
 * is seen through the robust mutex.  Either aborts the group.  Nor when a
 * rank is alive but stalled (stopped, hung, or far slower than the
 * others): a wait longer than the group's collective timeout aborts it,
 * naming the ranks that had not arrived (the header's `in` mask).  A rank
 * in another pid namespace (another container sharing the file) has a pid
 * that means nothing here: each rank notes its namespace, and a rank's pid
 * is looked up only from its own (the others rely on the robust mutex and
 * the timeout).
 *
 * Bootstrap: rank 0 creates the file under a temporary name, sets it up
 * and publishes it with link(2), which fails when the name exists (a
 * previous run's leftover is refused, not joined); the others wait for the
 * name, map it and sign in; once all are in, rank 0 removes the name (the
 * mappings stay). */
#define _GNU_SOURCE /* pthread robust mutexes under -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "comm_file.h"
#include "engine/backend/spin.h"

#define SHM_MAGIC 0x31306d6d6f63646cULL /* "ldcomm01" */
#define SLOT_FLOATS ((size_t)1 << 18)    /* 1 MiB a rank a chunk */
#define HEADER_BYTES ((size_t)16384)     /* the header, rounded up to whole pages */
#define SPIN_NS 100000L
#define WAIT_TICK_NS 100000000L          /* between liveness checks while asleep */

typedef struct shm_header {
    _Atomic uint64_t magic; /* set last by rank 0: a file seen with it is set up */
    int32_t size;
    int32_t slot_floats;
    pthread_mutex_t mu;     /* process-shared, robust */
    pthread_cond_t cv;      /* process-shared, CLOCK_MONOTONIC */
    atomic_uint gen;        /* barrier generation, bumped under mu */
    atomic_int aborted;
    int32_t dead;           /* the rank found gone (-1: none) */
    int32_t joined;
    uint64_t in;            /* the ranks arrived at the current barrier (bit k: rank k) */
    uint64_t stalled;       /* the ranks a timed-out wait found missing (0: none) */
    double stall_s;         /* that wait's timeout */
    int32_t pid[LD_COMM_SHM_MAX_RANKS];
    uint64_t pidns[LD_COMM_SHM_MAX_RANKS]; /* their pid namespace (0: unknown) */
    uint64_t count[LD_COMM_SHM_MAX_RANKS];
} shm_header;

_Static_assert(sizeof(shm_header) <= HEADER_BYTES, "the header fits its pages");
_Static_assert(LD_COMM_SHM_MAX_RANKS <= 64, "a rank a bit of the masks");

typedef struct shm_rank {
    ld_comm base;
    shm_header *h;
    double wait_s; /* a collective's wait for the others (<= 0: for ever) */
    uint64_t pidns; /* this process's pid namespace */
    float *slots; /* [size][slot_floats], after the header */
    size_t map_bytes;
} shm_rank;

static size_t map_bytes_of(int size)
{
    return HEADER_BYTES + (size_t)size * SLOT_FLOATS * sizeof(float);
}

static float *slot_of(const shm_rank *r, int k)
{
    return r->slots + (size_t)k * SLOT_FLOATS;
}

/* ------------------------------------------------------------ waiting */

/* "1 (pid 812), 3 (pid 815)": the ranks of `mask` */
static void ranks_text(const shm_header *h, uint64_t mask, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < h->size && len < cap; k++)
        if (mask >> k & 1)
            len += (size_t)snprintf(buf + len, cap - len, "%s%d (pid %d)", len ? ", " : "", k, h->pid[k]);
}

/* why the group is aborted, as rank `self` tells it */
static ld_status aborted_error(const shm_header *h, int self, ld_error *err)
{
    if (h->dead >= 0)
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "rank %d of the tensor-parallel group (pid %d) exited in the middle "
                       "of the run", h->dead, h->pid[h->dead]);
    if (h->stalled >> self & 1)
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "this rank (%d) reached a collective more than %g s after the others "
                       "did: they gave up on it and aborted the group", self, h->stall_s);
    if (h->stalled) {
        char who[512];
        ranks_text(h, h->stalled, who, sizeof who);
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "rank%s %s of the tensor-parallel group did not reach a collective "
                       "within %g s of the others: alive but stalled (stopped, hung, or far slower, such as still "
                       "loading weights); the group was aborted", h->stalled & (h->stalled - 1) ? "s" : "", who,
                       h->stall_s);
    }
    return LD_FAIL(err, LD_ERR_MISMATCH, 0, "another rank of the tensor-parallel group failed");
}

static void abort_locked(shm_header *h)
{
    atomic_store(&h->aborted, 1);
    pthread_cond_broadcast(&h->cv);
}

/* The mutex; a rank that died holding it leaves it inconsistent: made
 * consistent again and the group aborted (what it was doing is lost). */
static void lock(shm_header *h)
{
    if (pthread_mutex_lock(&h->mu) == EOWNERDEAD) {
        pthread_mutex_consistent(&h->mu);
        abort_locked(h);
    }
}

/* The process has exited: no such pid, or a zombie its parent has not
 * reaped yet (kill(2) still finds those). */
static int process_gone(int pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0; /* no /proc: trust kill(2) */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *close_paren = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold anything */
    return close_paren && (close_paren[1] == ' ') && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

/* the inode of /proc/self/ns/pid, which names this process's pid
 * namespace (0: no /proc) */
static uint64_t pid_namespace(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Under the lock: a rank whose process is gone aborts the group (only the
 * ranks of our pid namespace `ns` can be looked up).  Nothing when the
 * group is aborted already: the first cause is the one told (a rank that
 * aborted it for a stalled one may exit before a loaded machine wakes the
 * others, whose timed wait then ends as timed out and finds it gone). */
static void check_alive(shm_header *h, uint64_t ns)
{
    if (atomic_load(&h->aborted)) return;
    for (int k = 0; k < h->size; k++)
        if (h->pid[k] > 0 && h->pidns[k] == ns && process_gone(h->pid[k])) {
            if (h->dead < 0) h->dead = k;
            abort_locked(h);
            return;
        }
}

/* Sleeps on the condition variable for up to a tick, then checks the
 * others are alive. */
static void sleep_tick(shm_header *h, uint64_t ns)
{
    struct timespec t = ld_comm_in_ns(WAIT_TICK_NS);
    int rc = pthread_cond_timedwait(&h->cv, &h->mu, &t);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&h->mu);
        abort_locked(h);
    } else if (rc == ETIMEDOUT) {
        check_alive(h, ns);
    }
}

/* the mask of every rank */
static uint64_t all_ranks(const shm_header *h)
{
    return h->size == 64 ? ~(uint64_t)0 : ((uint64_t)1 << h->size) - 1;
}

/* Under the lock, once a wait has outlived the timeout: the ranks not
 * arrived yet are stalled, the group aborted. */
static void give_up_waiting(shm_header *h, double wait_s)
{
    h->stalled = all_ranks(h) & ~h->in;
    h->stall_s = wait_s;
    abort_locked(h);
}

/* Every rank at this point, or an error when the group is aborted first
 * (or the others do not all arrive within r->wait_s).  As comm_sim.c's:
 * the last to arrive bumps the generation, the others spin on it briefly
 * and then sleep. */
static ld_status shm_wait(shm_rank *r, ld_error *err)
{
    shm_header *h = r->h;
    int self = r->base.rank;
    lock(h);
    if (atomic_load(&h->aborted)) {
        pthread_mutex_unlock(&h->mu);
        return aborted_error(h, self, err);
    }
    unsigned gen = atomic_load(&h->gen);
    h->in |= (uint64_t)1 << self;
    if (h->in == all_ranks(h)) {
        h->in = 0;
        atomic_fetch_add(&h->gen, 1);
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
        return LD_OK;
    }
    pthread_mutex_unlock(&h->mu);
    double deadline = ld_comm_deadline_s(r->wait_s);
    ld_spin_on_gen(&h->gen, gen, &h->aborted, SPIN_NS);
    lock(h);
    while (atomic_load(&h->gen) == gen && !atomic_load(&h->aborted)) {
        if (ld_comm_now_s() > deadline) give_up_waiting(h, r->wait_s);
        else sleep_tick(h, r->pidns);
    }
    int failed = atomic_load(&h->gen) == gen;
    pthread_mutex_unlock(&h->mu);
    return failed ? aborted_error(h, self, err) : LD_OK;
}

/* ------------------------------------------------------------ collectives */

/* Every rank passes the same count: checked once the counts are all in,
 * the group aborted otherwise (the ranks are out of step for good). */
static ld_status agree_count(shm_rank *r, size_t n, ld_error *err)
{
    shm_header *h = r->h;
    h->count[r->base.rank] = n;
    LD_TRY(shm_wait(r, err));
    for (int k = 0; k < h->size; k++)
        if (h->count[k] != n) {
            ld_comm_abort(&r->base);
            return LD_FAIL(err, LD_ERR_MISMATCH, 0, "collective: rank %d passed %zu floats, rank %d %llu",
                           r->base.rank, n, k, (unsigned long long)h->count[k]);
        }
    return LD_OK;
}

/* The chunks of a collective: each rank's `send` through the slots; the
 * gather copies every slot into recv [size][n], the reduce sums them in
 * rank order into recv [n] (send may be recv). */
static ld_status move_chunks(shm_rank *r, const float *send, float *recv, size_t n, int reduce, ld_error *err)
{
    LD_TRY(agree_count(r, n, err));
    if (n == 0) /* no chunk's barriers: one so that every rank has read the counts before any writes its next */
        return shm_wait(r, err);
    int size = r->base.size;
    for (size_t off = 0; off < n; off += SLOT_FLOATS) {
        size_t m = n - off < SLOT_FLOATS ? n - off : SLOT_FLOATS;
        memcpy(slot_of(r, r->base.rank), send + off, m * sizeof *send);
        LD_TRY(shm_wait(r, err));
        if (reduce)
            ld_comm_ordered_sum_strided(r->slots, SLOT_FLOATS, size, m, recv + off);
        else
            for (int k = 0; k < size; k++) memcpy(recv + (size_t)k * n + off, slot_of(r, k), m * sizeof *recv);
        LD_TRY(shm_wait(r, err)); /* every rank has read the slots */
    }
    return LD_OK;
}

static ld_status shm_all_gather(ld_comm *c, const float *send, float *recv, size_t n, ld_error *err)
{
    return move_chunks((shm_rank *)c, send, recv, n, 0, err);
}

static ld_status shm_all_reduce_sum(ld_comm *c, float *buf, size_t n, ld_error *err)
{
    return move_chunks((shm_rank *)c, buf, buf, n, 1, err);
}

static ld_status shm_all_reduce_sum_mem(ld_comm *c, const ld_mem *m, size_t n, ld_error *err)
{
    if (m->kind != LD_MEM_HOST)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "the shared-memory communicator reduces host memory in place, "
                       "not memory of kind %d", m->kind);
    return shm_all_reduce_sum(c, m->p, n, err);
}

static ld_status shm_barrier(ld_comm *c, ld_error *err)
{
    return shm_wait((shm_rank *)c, err);
}

static void shm_abort(ld_comm *c)
{
    shm_header *h = ((shm_rank *)c)->h;
    lock(h);
    abort_locked(h);
    pthread_mutex_unlock(&h->mu);
}

static void shm_destroy(ld_comm *c)
{
    shm_rank *r = (shm_rank *)c;
    munmap(r->h, r->map_bytes);
    free(r);
}

static const ld_comm_ops shm_ops = {
    .name = "shm",
    .all_gather = shm_all_gather,
    .all_reduce_sum = shm_all_reduce_sum,
    .all_reduce_sum_mem = shm_all_reduce_sum_mem,
    .barrier = shm_barrier,
    .abort = shm_abort,
    .destroy = shm_destroy,
};

int ld_comm_shm_failed(ld_comm *c)
{
    shm_rank *r = (shm_rank *)c;
    shm_header *h = r->h;
    lock(h);
    check_alive(h, r->pidns);
    int failed = atomic_load(&h->aborted);
    pthread_mutex_unlock(&h->mu);
    return failed;
}

/* ------------------------------------------------------------ bootstrap */

static void header_init(shm_header *h, int size)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&h->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    h->size = size;
    h->slot_floats = (int32_t)SLOT_FLOATS;
    h->dead = -1;
    atomic_store(&h->magic, SHM_MAGIC); /* last: the others may look now */
}

static void *map_fd(int fd, size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Rank 0: the set-up file, published under `path`; *map NULL on failure. */
static ld_status create_file(const char *path, int size, void **map, ld_error *err)
{
    char tmp[4200];
    ld_comm_tmp_name(tmp, sizeof tmp, path);
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return LD_FAIL(err, LD_ERR_IO, 0, "%s: %s", tmp, strerror(errno));
    size_t bytes = map_bytes_of(size);
    if (ftruncate(fd, (off_t)bytes) != 0 || !(*map = map_fd(fd, bytes))) {
        ld_status st = LD_FAIL(err, LD_ERR_IO, 0, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return st;
    }
    close(fd);
    header_init(*map, size);
    ld_status st = ld_comm_publish(tmp, path, err);
    if (st != LD_OK) {
        munmap(*map, bytes);
        *map = NULL;
    }
    return st;
}

/* Ranks 1..: rank 0's file, once published (set up: link(2) publishes it
 * after header_init), mapped whole; a group of another size refused. */
static ld_status open_file(const char *path, int size, double deadline, void **map, ld_error *err)
{
    int fd;
    LD_TRY(ld_comm_open_published(path, O_RDWR, deadline, "create it", &fd, err));
    struct stat st;
    void *p = fstat(fd, &st) == 0 && (size_t)st.st_size >= HEADER_BYTES ? map_fd(fd, (size_t)st.st_size) : NULL;
    close(fd);
    const shm_header *h = p;
    if (!h || atomic_load(&h->magic) != SHM_MAGIC) {
        if (p) munmap(p, (size_t)st.st_size);
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rendezvous %s: not a logdiff group's file", path);
    }
    if (h->size == size && h->slot_floats == (int32_t)SLOT_FLOATS && (size_t)st.st_size == map_bytes_of(size)) {
        *map = p;
        return LD_OK;
    }
    int theirs = h->size;
    munmap(p, (size_t)st.st_size);
    return LD_FAIL(err, LD_ERR_USAGE, 0, "rendezvous %s: a group of %d ranks, not %d", path, theirs, size);
}

/* Signs `rank` in and waits until all have (or the deadline passes, or a
 * signed-in rank is gone). */
static ld_status sign_in(shm_header *h, const char *path, int rank, uint64_t ns, double deadline, ld_error *err)
{
    lock(h);
    if (h->pid[rank]) {
        pthread_mutex_unlock(&h->mu);
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rendezvous %s: rank %d joined twice", path, rank);
    }
    h->pidns[rank] = ns;
    h->pid[rank] = (int32_t)getpid();
    h->joined++;
    pthread_cond_broadcast(&h->cv);
    while (h->joined < h->size && !atomic_load(&h->aborted) && ld_comm_now_s() < deadline) sleep_tick(h, ns);
    /* all in is a join, even if one has aborted since: its collectives say so */
    int joined = h->joined, aborted = atomic_load(&h->aborted);
    if (joined < h->size) abort_locked(h); /* the ranks in leave too */
    pthread_mutex_unlock(&h->mu);
    if (joined == h->size) return LD_OK;
    if (aborted) return aborted_error(h, rank, err);
    return LD_FAIL(err, LD_ERR_IO, 0, "rendezvous %s: %d of %d ranks joined in time", path, joined, h->size);
}

ld_status ld_comm_shm_join(const char *path, int size, int rank, double timeout_s, double wait_s, ld_comm **out,
                           ld_error *err)
{
    *out = NULL;
    if (size < 1 || size > LD_COMM_SHM_MAX_RANKS || rank < 0 || rank >= size)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rank %d of %d: give 1 to %d ranks and a rank below their count", rank,
                       size, LD_COMM_SHM_MAX_RANKS);
    if (!path || !*path || strlen(path) > 4096) return LD_FAIL(err, LD_ERR_USAGE, 0, "a rendezvous path, please");
    shm_rank *r = calloc(1, sizeof *r);
    if (!r) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    double deadline = ld_comm_deadline_s(timeout_s);
    void *map = NULL;
    ld_status st = rank == 0 ? create_file(path, size, &map, err) : open_file(path, size, deadline, &map, err);
    if (st == LD_OK) {
        r->h = map;
        r->map_bytes = map_bytes_of(size);
        r->slots = (float *)((char *)map + HEADER_BYTES);
        r->base = (ld_comm){&shm_ops, rank, size, 0, 1};
        r->wait_s = wait_s;
        r->pidns = pid_namespace();
        st = sign_in(r->h, path, rank, r->pidns, deadline, err);
        if (rank == 0) unlink(path); /* all are in, or the group failed: the name is done with */
    }
    if (st != LD_OK) {
        if (map) munmap(map, map_bytes_of(size));
        free(r);
        return st;
    }
    *out = &r->base;
    return LD_OK;
}
