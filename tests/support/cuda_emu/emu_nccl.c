/* emu_nccl.c - the NCCL calls engine/tp/comm_nccl.c makes, for the emulator
 * (tests/support/cuda_emu): the ranks are threads of this process over the
 * emulated devices (LD_CUDA_EMU_DEVICES), so that comm_nccl.c's code, its
 * host and device paths, runs in CI without GPUs or libnccl's transport.
 * Linked instead of libnccl; the prototypes are nccl.h's own, so a
 * mismatch does not compile.
 *
 * What is emulated, and how close it is:
 *  - a communicator group: ncclCommInitAll (one process, ndev ranks, a
 *    rank a thread) or ncclGetUniqueId + ncclCommInitRank: a rank a
 *    process (or a thread), as NCCL's bootstrap across machines.  The id
 *    names a rendezvous file and the ranks meet there through
 *    engine/tp/comm_shm.c (the processes of one machine sharing a mapping),
 *    whose all-gather moves the floats between the emulated devices'
 *    memory of each process;
 *  - ncclAllGather of ncclFloat: every rank's send [count] into every
 *    rank's recv [nranks][count] in rank order.  The emulator's streams run
 *    their work to its end at each call, so what the stream ordered before
 *    the collective is done when it starts (launched CUDA graphs are
 *    drained first); the ranks meet at a barrier, copy, and meet again
 *    before any returns (a send buffer is reusable after).  The device
 *    checks NCCL makes in effect: the calling thread's current device is
 *    the communicator's, both buffers are device memory, nothing is being
 *    captured (the emulator does not put collectives in graphs);
 *  - ncclCommAbort: the group's waiting ranks leave with an error, later
 *    collectives fail; the aborted communicators stay reachable (NCCL
 *    frees them; here a rank may still be leaving its barrier);
 *  - ncclCommGetAsyncError: ncclRemoteError once the group of a process's
 *    communicator failed (a rank aborted, or its process gone);
 *  - a nonblocking communicator (ncclCommInitRankConfig, config.blocking
 *    0): the join runs on a thread of its own and the call returns
 *    ncclInProgress, ncclCommGetAsyncError saying so until the group is
 *    made (ncclSuccess) or the join failed (its error).  ncclCommAbort of
 *    one still joining leaves the thread to free it (NCCL frees an
 *    aborted communicator) and removes rank 0's rendezvous name, as the
 *    root of NCCL's bootstrap closes its socket.  Its first collective
 *    and ncclCommFinalize return ncclInProgress, their work done, and
 *    the next poll or two say so, as NCCL's connection of peers at a
 *    first collective may: what comm_nccl.c must poll through;
 *  - ncclGetErrorString, ncclGetLastError (the last failure's reason).
 * Not emulated: other collectives and types, ncclGroupStart/End, streams'
 * asynchrony (a real collective returns before it runs). */
#include <nccl.h>

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/tp/comm.h"
#include "emu_sched.h"

#define ID_PREFIX "logdiff-emu-nccl:"
#define JOIN_TIMEOUT_S 600.0 /* as a bootstrap would wait for the others */

typedef struct emu_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int size, arrived, refs, aborted;
    unsigned gen;           /* barrier generations */
    const void **send;      /* [size]: the send buffers of the collective */
    size_t *count;          /* [size]: their counts (all must agree) */
} emu_group;

enum { READY, JOINING, JOIN_FAILED };

struct ncclComm {
    emu_group *g;      /* ncclCommInitAll's, or */
    ld_comm *shm;      /* ncclCommInitRank's */
    int rank, size, device;
    char last[256];
    struct ncclComm *next_aborted;
    /* a nonblocking one's (ncclCommInitRankConfig), under mu */
    int nonblocking, state, abandoned, collectives, polls_pending;
    ncclResult_t join_result;
    pthread_mutex_t mu;
    char path[NCCL_UNIQUE_ID_BYTES + 1]; /* the rendezvous */
};

static struct {
    pthread_mutex_t mu;
    unsigned ids;
    struct ncclComm *aborted; /* kept reachable (above) */
} R = {PTHREAD_MUTEX_INITIALIZER, 0, NULL};

static _Thread_local char last_error[256];

static ncclResult_t fail(ncclComm_t c, ncclResult_t r, const char *msg)
{
    snprintf(c ? c->last : last_error, sizeof last_error, "%s", msg);
    return r;
}

static emu_group *group_new(int size)
{
    emu_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->send = calloc((size_t)size, sizeof *g->send);
    g->count = calloc((size_t)size, sizeof *g->count);
    if (!g->send || !g->count) {
        free(g->send);
        free(g->count);
        free(g);
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->size = size;
    return g;
}

static void group_free(emu_group *g)
{
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->send);
    free(g->count);
    free(g);
}

static void group_unref(emu_group *g)
{
    pthread_mutex_lock(&g->mu);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) group_free(g);
}

static ncclComm_t comm_new(emu_group *g, int rank, int size, int device)
{
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->g = g;
    c->rank = rank;
    c->size = size;
    c->device = device;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static void comm_free(ncclComm_t c)
{
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* every rank of g at this point (1), or the group aborted (0) */
static int barrier(emu_group *g)
{
    pthread_mutex_lock(&g->mu);
    unsigned gen = g->gen;
    if (!g->aborted && ++g->arrived == g->size) {
        g->arrived = 0;
        g->gen++;
        pthread_cond_broadcast(&g->cv);
    }
    while (g->gen == gen && !g->aborted) pthread_cond_wait(&g->cv, &g->mu);
    int ok = g->gen != gen;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

/* The id: the rendezvous file's name, new to this process and call. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    memset(uniqueId, 0, sizeof *uniqueId);
    pthread_mutex_lock(&R.mu);
    unsigned n = ++R.ids;
    pthread_mutex_unlock(&R.mu);
    const char *tmp = getenv("TMPDIR");
    int len = snprintf(uniqueId->internal, sizeof uniqueId->internal, ID_PREFIX "%s/logdiff-emu-nccl-%d-%u",
                       tmp && *tmp ? tmp : "/tmp", (int)getpid(), n);
    if (len < 0 || (size_t)len >= sizeof uniqueId->internal)
        return fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: TMPDIR is too long for the emulator's id");
    return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    int have = 0;
    cudaGetDeviceCount(&have);
    if (ndev < 1) return fail(NULL, ncclInvalidArgument, "ncclCommInitAll: ndev < 1");
    for (int k = 0; k < ndev; k++) {
        int d = devlist ? devlist[k] : k;
        if (d < 0 || d >= have) return fail(NULL, ncclInvalidArgument, "ncclCommInitAll: no such device");
    }
    emu_group *g = group_new(ndev);
    if (!g) return fail(NULL, ncclSystemError, "out of memory");
    g->refs = ndev;
    for (int k = 0; k < ndev; k++) {
        comm[k] = comm_new(g, k, ndev, devlist ? devlist[k] : k);
        if (comm[k]) continue;
        while (k-- > 0) comm_free(comm[k]);
        group_free(g);
        return fail(NULL, ncclSystemError, "out of memory");
    }
    return ncclSuccess;
}

/* A communicator of rank `rank` of nranks for the id (its rendezvous in
 * c->path), not joined yet; NULL with the reason in last_error. */
static ncclComm_t rank_comm(int nranks, ncclUniqueId commId, int rank, ncclResult_t *r)
{
    const char *bad = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks) bad = "ncclCommInitRank: rank";
    else if (strncmp(commId.internal, ID_PREFIX, strlen(ID_PREFIX)) != 0)
        bad = "ncclCommInitRank: not an id of the emulator's ncclGetUniqueId";
    if (bad) {
        *r = fail(NULL, ncclInvalidArgument, bad);
        return NULL;
    }
    int device = 0;
    cudaGetDevice(&device);
    ncclComm_t c = comm_new(NULL, rank, nranks, device);
    if (!c) {
        *r = fail(NULL, ncclSystemError, "out of memory");
        return NULL;
    }
    memcpy(c->path, commId.internal + strlen(ID_PREFIX), NCCL_UNIQUE_ID_BYTES - strlen(ID_PREFIX));
    return c;
}

/* c joins its group's file (rank 0 creates it); ncclSuccess once all
 * have, as NCCL's bootstrap returns, else the error, its reason in msg */
static ncclResult_t join(ncclComm_t c, ld_comm **shm, char *msg, size_t cap)
{
    ld_error err;
    if (ld_comm_shm_join(c->path, c->size, c->rank, JOIN_TIMEOUT_S, 0, shm, &err) == LD_OK) return ncclSuccess;
    snprintf(msg, cap, "ncclCommInitRank: %.200s", err.msg);
    return err.code == LD_ERR_USAGE ? ncclInvalidUsage : ncclSystemError;
}

/* Every rank, in whatever process, joins the file the id names; the call
 * returns once all have. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    ncclResult_t r;
    ncclComm_t c = rank_comm(nranks, commId, rank, &r);
    if (!c) return r;
    r = join(c, &c->shm, last_error, sizeof last_error);
    if (r != ncclSuccess) {
        comm_free(c);
        return r;
    }
    *comm = c;
    return ncclSuccess;
}

/* A nonblocking communicator's join (above): the result into c, or, c
 * abandoned meanwhile (aborted), c freed. */
static void *join_main(void *arg)
{
    ncclComm_t c = arg;
    ld_comm *shm = NULL;
    char msg[256];
    ncclResult_t r = join(c, &shm, msg, sizeof msg);
    pthread_mutex_lock(&c->mu);
    int gone = c->abandoned;
    if (!gone) {
        c->shm = shm;
        c->join_result = r;
        c->state = r == ncclSuccess ? READY : JOIN_FAILED;
        if (r != ncclSuccess) snprintf(c->last, sizeof c->last, "%s", msg);
    }
    pthread_mutex_unlock(&c->mu);
    if (gone) {
        ld_comm_destroy(shm);
        comm_free(c);
    }
    return NULL;
}

/* ncclCommInitRank, or with config->blocking == 0 the join on a thread of
 * its own: ncclInProgress at once (the header's nonblocking communicator) */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    if (!config || config->blocking != 0) return ncclCommInitRank(comm, nranks, commId, rank);
    ncclResult_t r;
    ncclComm_t c = rank_comm(nranks, commId, rank, &r);
    if (!c) return r;
    c->nonblocking = 1;
    c->state = JOINING;
    pthread_t t;
    if (pthread_create(&t, NULL, join_main, c) != 0) {
        comm_free(c);
        return fail(NULL, ncclSystemError, "ncclCommInitRankConfig: no thread for the join");
    }
    pthread_detach(t);
    *comm = c;
    return ncclInProgress;
}

/* A nonblocking communicator's call done, said to be in progress for the
 * next `polls` polls */
static ncclResult_t in_progress(ncclComm_t c, int polls)
{
    pthread_mutex_lock(&c->mu);
    c->polls_pending = polls;
    pthread_mutex_unlock(&c->mu);
    return ncclInProgress;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    return comm->nonblocking ? in_progress(comm, 1) : ncclSuccess;
}

/* what NCCL would refuse of this call, as its message (NULL: none) */
static const char *misuse(ncclComm_t c, const void *send, void *recv, size_t count)
{
    int device = -1;
    cudaGetDevice(&device);
    if (device != c->device) return "ncclAllGather: the current device is not the communicator's";
    if (ld_emu_capturing()) return "ncclAllGather: the emulator does not capture collectives";
    if (!ld_emu_device_range(send, count * sizeof(float)))
        return "ncclAllGather: the send buffer is not device memory";
    if (!ld_emu_device_range(recv, count * sizeof(float) * (size_t)c->size))
        return "ncclAllGather: the receive buffer is not device memory";
    return NULL;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    (void)stream; /* the emulator's streams are in order and done at each call */
    if (datatype != ncclFloat) return fail(comm, ncclInvalidArgument, "ncclAllGather: the emulator gathers floats");
    const char *bad = misuse(comm, sendbuff, recvbuff, sendcount);
    if (bad) return fail(comm, ncclInvalidUsage, bad);
    ld_emu_graphs_drain(); /* the graphs launched before it have run */
    if (comm->nonblocking && comm->state != READY)
        return fail(comm, ncclInvalidUsage, "ncclAllGather: the communicator is not made yet");
    if (comm->shm) {
        ld_error err;
        ld_status st = ld_comm_all_gather(comm->shm, sendbuff, recvbuff, sendcount, &err);
        if (st != LD_OK) return fail(comm, st == LD_ERR_MISMATCH ? ncclRemoteError : ncclSystemError, err.msg);
        return comm->nonblocking && comm->collectives++ == 0 ? in_progress(comm, 2) : ncclSuccess;
    }
    emu_group *g = comm->g;
    pthread_mutex_lock(&g->mu);
    g->send[comm->rank] = sendbuff;
    g->count[comm->rank] = sendcount;
    pthread_mutex_unlock(&g->mu);
    if (!barrier(g)) return fail(comm, ncclRemoteError, "another rank aborted the communicator");
    ncclResult_t r = ncclSuccess;
    size_t bytes = sendcount * sizeof(float);
    for (int k = 0; k < g->size && r == ncclSuccess; k++) {
        if (g->count[k] != sendcount) r = fail(comm, ncclInvalidUsage, "ncclAllGather: the ranks' counts differ");
        else memcpy((char *)recvbuff + (size_t)k * bytes, g->send[k], bytes);
    }
    if (!barrier(g)) return fail(comm, ncclRemoteError, "another rank aborted the communicator");
    return r;
}

/* A nonblocking communicator still joining, abandoned to its thread: 1
 * (rank 0's rendezvous removed), else 0 */
static int abandon_joining(ncclComm_t c)
{
    pthread_mutex_lock(&c->mu);
    int joining = c->nonblocking && c->state == JOINING;
    if (joining) c->abandoned = 1;
    pthread_mutex_unlock(&c->mu);
    if (joining && c->rank == 0) unlink(c->path);
    return joining;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm || abandon_joining(comm)) return ncclSuccess;
    if (comm->shm) {
        ld_comm_abort(comm->shm);
    } else {
        emu_group *g = comm->g;
        pthread_mutex_lock(&g->mu);
        g->aborted = 1;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_lock(&R.mu);
    comm->next_aborted = R.aborted;
    R.aborted = comm;
    pthread_mutex_unlock(&R.mu);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm || abandon_joining(comm)) return ncclSuccess;
    emu_group *g = comm->g;
    ld_comm_destroy(comm->shm);
    comm_free(comm);
    if (g) group_unref(g);
    return ncclSuccess;
}

/* A process's communicator reports its group's failure (a rank aborted
 * or gone) as NCCL reports a peer lost: ncclRemoteError. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    pthread_mutex_lock(&comm->mu);
    ncclResult_t r = comm->state == JOINING ? ncclInProgress : comm->state == JOIN_FAILED ? comm->join_result
                   : comm->polls_pending > 0 ? ncclInProgress : ncclSuccess;
    if (comm->polls_pending > 0 && comm->state == READY) comm->polls_pending--;
    pthread_mutex_unlock(&comm->mu);
    if (r == ncclSuccess && comm->shm && ld_comm_shm_failed(comm->shm)) r = ncclRemoteError;
    *asyncError = r;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    return comm ? comm->last : last_error;
}
