/* emu_nccl.c - the NCCL calls engine/comm_nccl.c makes, for the emulator
 * (tests/cuda_emu): the ranks are threads of this process over the
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
 *    engine/comm_shm.c (the processes of one machine sharing a mapping),
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

#include "comm.h"
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

struct ncclComm {
    emu_group *g;      /* ncclCommInitAll's, or */
    ld_comm *shm;      /* ncclCommInitRank's */
    int rank, size, device;
    char last[256];
    struct ncclComm *next_aborted;
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
    return c;
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
        while (k-- > 0) free(comm[k]);
        group_free(g);
        return fail(NULL, ncclSystemError, "out of memory");
    }
    return ncclSuccess;
}

/* Every rank, in whatever process, joins the file the id names (rank 0
 * creates it); the call returns once all have, as NCCL's does. */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    if (nranks < 1 || rank < 0 || rank >= nranks) return fail(NULL, ncclInvalidArgument, "ncclCommInitRank: rank");
    char id[NCCL_UNIQUE_ID_BYTES + 1];
    memcpy(id, commId.internal, NCCL_UNIQUE_ID_BYTES);
    id[NCCL_UNIQUE_ID_BYTES] = 0;
    if (strncmp(id, ID_PREFIX, strlen(ID_PREFIX)) != 0)
        return fail(NULL, ncclInvalidArgument, "ncclCommInitRank: not an id of the emulator's ncclGetUniqueId");
    int device = 0;
    cudaGetDevice(&device);
    ncclComm_t c = comm_new(NULL, rank, nranks, device);
    if (!c) return fail(NULL, ncclSystemError, "out of memory");
    ld_error err;
    if (ld_comm_shm_join(id + strlen(ID_PREFIX), nranks, rank, JOIN_TIMEOUT_S, 0, &c->shm, &err) != LD_OK) {
        free(c);
        snprintf(last_error, sizeof last_error, "ncclCommInitRank: %.200s", err.msg);
        return err.code == LD_ERR_USAGE ? ncclInvalidUsage : ncclSystemError;
    }
    *comm = c;
    return ncclSuccess;
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
    if (comm->shm) {
        ld_error err;
        ld_status st = ld_comm_all_gather(comm->shm, sendbuff, recvbuff, sendcount, &err);
        if (st == LD_OK) return ncclSuccess;
        return fail(comm, st == LD_ERR_MISMATCH ? ncclRemoteError : ncclSystemError, err.msg);
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

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
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
    if (!comm) return ncclSuccess;
    emu_group *g = comm->g;
    ld_comm_destroy(comm->shm);
    free(comm);
    if (g) group_unref(g);
    return ncclSuccess;
}

/* A process's communicator reports its group's failure (a rank aborted
 * or gone) as NCCL reports a peer lost: ncclRemoteError. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    *asyncError = comm->shm && ld_comm_shm_failed(comm->shm) ? ncclRemoteError : ncclSuccess;
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
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    return comm ? comm->last : last_error;
}
