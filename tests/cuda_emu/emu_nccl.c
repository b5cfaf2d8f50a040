/* emu_nccl.c - the NCCL calls engine/comm_nccl.c makes, for the emulator
 * (tests/cuda_emu): the ranks are threads of this process over the
 * emulated devices (LD_CUDA_EMU_DEVICES), so that comm_nccl.c's code, its
 * host and device paths, runs in CI without GPUs or libnccl's transport.
 * Linked instead of libnccl; the prototypes are nccl.h's own, so a
 * mismatch does not compile.
 *
 * What is emulated, and how close it is:
 *  - a communicator group: ncclCommInitAll (one process, ndev ranks) or
 *    ncclGetUniqueId + ncclCommInitRank (a rank a thread, groups found by
 *    their id);
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
 *  - ncclGetErrorString, ncclGetLastError (the last failure's reason).
 * Not emulated: other collectives and types, ncclGroupStart/End, streams'
 * asynchrony (a real collective returns before it runs). */
#include <nccl.h>

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_sched.h"

typedef struct emu_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int size, arrived, refs, joined, aborted;
    unsigned gen;           /* barrier generations */
    const void **send;      /* [size]: the send buffers of the collective */
    size_t *count;          /* [size]: their counts (all must agree) */
    char id[NCCL_UNIQUE_ID_BYTES];
    struct emu_group *next; /* ncclCommInitRank's groups still joining */
} emu_group;

struct ncclComm {
    emu_group *g;
    int rank, device;
    char last[256];
    struct ncclComm *next_aborted;
};

static struct {
    pthread_mutex_t mu;
    emu_group *joining;
    unsigned ids;
    struct ncclComm *aborted; /* kept reachable (above) */
} R = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, NULL};

static _Thread_local char last_error[256];

static ncclResult_t fail(ncclComm_t c, ncclResult_t r, const char *msg)
{
    snprintf(c ? c->last : last_error, sizeof last_error, "%s", msg);
    return r;
}

static emu_group *group_new(int size, const char *id)
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
    if (id) memcpy(g->id, id, NCCL_UNIQUE_ID_BYTES);
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

static ncclComm_t comm_new(emu_group *g, int rank, int device)
{
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->g = g;
    c->rank = rank;
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

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    memset(uniqueId, 0, sizeof *uniqueId);
    pthread_mutex_lock(&R.mu);
    unsigned n = ++R.ids;
    pthread_mutex_unlock(&R.mu);
    snprintf(uniqueId->internal, sizeof uniqueId->internal, "logdiff-emu-nccl-%u", n);
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
    emu_group *g = group_new(ndev, NULL);
    if (!g) return fail(NULL, ncclSystemError, "out of memory");
    g->refs = g->joined = ndev;
    for (int k = 0; k < ndev; k++) {
        comm[k] = comm_new(g, k, devlist ? devlist[k] : k);
        if (comm[k]) continue;
        while (k-- > 0) free(comm[k]);
        group_free(g);
        return fail(NULL, ncclSystemError, "out of memory");
    }
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    if (nranks < 1 || rank < 0 || rank >= nranks) return fail(NULL, ncclInvalidArgument, "ncclCommInitRank: rank");
    int device = 0;
    cudaGetDevice(&device);
    pthread_mutex_lock(&R.mu);
    emu_group **p = &R.joining;
    while (*p && memcmp((*p)->id, commId.internal, NCCL_UNIQUE_ID_BYTES)) p = &(*p)->next;
    emu_group *g = *p;
    if (!g && (g = group_new(nranks, commId.internal)) != NULL) {
        g->next = R.joining;
        R.joining = g;
    }
    ncclResult_t r = ncclSuccess;
    if (!g) r = fail(NULL, ncclSystemError, "out of memory");
    else if (g->size != nranks) r = fail(NULL, ncclInvalidArgument, "ncclCommInitRank: another group size");
    else if (!(*comm = comm_new(g, rank, device))) r = fail(NULL, ncclSystemError, "out of memory");
    if (r == ncclSuccess) {
        g->refs++;
        if (++g->joined == g->size) /* complete: no longer found by its id */
            for (p = &R.joining; *p; p = &(*p)->next)
                if (*p == g) {
                    *p = g->next;
                    break;
                }
    }
    pthread_mutex_unlock(&R.mu);
    return r;
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
    if (!ld_emu_device_range(recv, count * sizeof(float) * (size_t)c->g->size))
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
    emu_group *g = comm->g;
    pthread_mutex_lock(&g->mu);
    g->aborted = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
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
    free(comm);
    group_unref(g);
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
