/* comm_nccl.c - the NCCL communicator of comm.h (builds with CUDA and NCCL:
 * CMake defines LD_HAVE_NCCL; elsewhere the constructors say the build has
 * no NCCL).
 *
 * One rank = one GPU.  Each rank owns device staging buffers: send [n],
 * recv [size][n], out [n].  Host memory (all_gather, all_reduce_sum, and
 * all_reduce_sum_mem on LD_MEM_HOST): all_gather copies send to the
 * device, runs ncclAllGather and copies recv back; all_reduce_sum runs the
 * same all-gather and then the ordered-sum kernel (kernels/cuda/cuda_tp.cu:
 * thread i sums recv[0][i] + recv[1][i] + ... left to right in fp32) into
 * out, copied back.  Never ncclAllReduce, whose summation order depends on
 * NCCL's algorithm, protocol and channel choices (comm.h).
 *
 * Device memory (all_reduce_sum_mem on LD_MEM_CUDA, a CUDA backend
 * buffer's as buf_mem gives it, on this rank's device): ncclAllGather
 * straight from the buffer into recv, then the ordered-sum kernel from
 * recv back into the buffer; no host copy, no synchronisation (but for
 * the cudaMalloc of a staging that grows).  NCCL lets a send buffer be
 * overwritten once the collective has completed on its stream, which the
 * kernel, queued after it, waits for.  A buffer on another device than
 * the rank's is LD_ERR_USAGE (the gather and the kernel run on the rank's).
 *
 * NCCL's calls run on the device's legacy default stream.  The CUDA
 * backend's kernels and copies run on the calling thread's per-thread
 * default stream (kernels/cuda/cuda_ops.h), a blocking stream: the legacy
 * stream waits for the work queued there before it, and work queued
 * there after waits for the legacy stream's, so the collective is ordered
 * after the kernels that produced the partial and before those that read
 * the sum (the ordered-sum kernel too); on the host path the synchronous
 * copy back waits for it.
 *
 * Abort: a rank that fails calls ld_comm_abort; for a group made by
 * ld_comm_nccl_create_all that aborts every rank's communicator
 * (ncclCommAbort), which makes the NCCL kernels the other ranks wait in
 * return with an error.  A process made by ld_comm_nccl_create_rank aborts
 * only its own: the other processes learn of it through NCCL's
 * asynchronous error, which a watchdog thread of theirs polls, aborting
 * their communicator in turn; the same thread aborts it when a collective
 * is not complete within the group's timeout, a rank being alive but
 * stalled (below).
 *
 * A create_rank communicator is made nonblocking (NCCL 2.14 on), so that
 * a rank that never joins fails the others at timeout_s instead of
 * hanging them in NCCL's bootstrap: its making, its collectives and its
 * finalisation may then return ncclInProgress, and are polled to their
 * end (init_rank, settle, finish_rank).
 *
 * Where it runs: in CI on the CUDA emulator's devices over its NCCL
 * (tests/support/cuda_emu/emu_nccl.c: the ranks threads, the all-gather a barrier
 * and copies; this file compiled a second time over it): ctest
 * engine.tp.tp.emu (`test_tp_cuda_nccl`: TP = 1 over NCCL bitwise the
 * plain CUDA forward, TP = 2 on two devices against transformers, each
 * with the reduce through the host, the CUDA backend's table without
 * buf_mem, bitwise the device path) and cli.replay_cuda_tp_emu (logdiff
 * replay --backend cuda --tp 2 end to end).  Not yet on GPUs with
 * libnccl: tools/gpu-check.sh runs both where a machine is lent.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"

#ifndef LD_HAVE_NCCL
#define LD_HAVE_NCCL 0
#endif

#if LD_HAVE_NCCL

#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "comm_file.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_tp.h"

/* A collective of a create_rank process, queued on the device and not yet
 * seen done: when it was queued, and an event recorded after it (once the
 * call returned).  FLIGHTS of them at most; the host waits for the oldest
 * beyond (every token's logits read back waits for them all anyway). */
#define FLIGHTS 64
typedef struct flight {
    void *ev;      /* made with the rank, reused */
    double t0;     /* queued at (ld_comm_now_s) */
    size_t n;      /* floats a rank */
    int recorded;  /* ev marks its end */
} flight;

/* What the ranks of one create_all share: every communicator, so that an
 * abort reaches them all. */
typedef struct nccl_group {
    pthread_mutex_t mu;
    int size, refs;
    atomic_int aborted; /* read without the lock by the collectives */
    ncclComm_t *comms;
} nccl_group;

typedef struct nccl_rank {
    ld_comm base;
    ncclComm_t comm;
    nccl_group *g;     /* NULL for a create_rank process */
    int device;
    atomic_int aborted; /* a create_rank process's: set once, by whoever aborts first */
    float *d_send, *d_recv, *d_out;
    size_t cap;        /* n the staging holds */
    /* a create_rank process's watchdog (below) */
    pthread_t watchdog;
    int watching;
    pthread_mutex_t wmu; /* the watchdog's state, the flights, call_t0 */
    pthread_cond_t wcv;
    int wstop;
    atomic_int async; /* the asynchronous error it saw (ncclSuccess: none) */
    double timeout_s; /* a collective's time to complete (<= 0: none) */
    int tracking;     /* the flights are followed (their events made) */
    flight fl[FLIGHTS];
    unsigned head, tail; /* fl[tail % FLIGHTS .. head % FLIGHTS): queued, not seen done */
    double call_t0;      /* this rank's thread is in ncclAllGather since (0: it is not) */
    atomic_int overdue;  /* the watchdog aborted for a collective past timeout_s */
    atomic_int voided;   /* it aborted while a collective was queued or being called */
    size_t overdue_n;    /* its count of floats */
} nccl_rank;

static ld_status nccl_fail(ld_error *err, const char *what, ncclResult_t r, ncclComm_t comm)
{
    const char *last = comm ? ncclGetLastError(comm) : NULL;
    return LD_FAIL(err, LD_ERR_CUDA, 0, "NCCL %s: %s%s%s", what, ncclGetErrorString(r), last && *last ? ": " : "",
                   last ? last : "");
}

static ld_status cuda_fail(ld_error *err, const char *what, int code)
{
    return LD_FAIL(err, LD_ERR_CUDA, 0, "CUDA %s: %s", what, ld_cu_error_string(code));
}

#define CU_TRY(what, call)                            \
    do {                                              \
        int cu_e_ = (call);                           \
        if (cu_e_) return cuda_fail(err, what, cu_e_); \
    } while (0)

static void free_staging(nccl_rank *r)
{
    if (r->d_send) ld_cu_free(r->d_send);
    if (r->d_recv) ld_cu_free(r->d_recv);
    if (r->d_out) ld_cu_free(r->d_out);
    r->d_send = r->d_recv = r->d_out = NULL;
    r->cap = 0;
}

static ld_status staging(nccl_rank *r, size_t n, ld_error *err)
{
    if (n <= r->cap) return LD_OK;
    free_staging(r);
    size_t b = n * sizeof(float);
    CU_TRY("staging", ld_cu_malloc((void **)&r->d_send, b));
    CU_TRY("staging", ld_cu_malloc((void **)&r->d_recv, b * (size_t)r->base.size));
    CU_TRY("staging", ld_cu_malloc((void **)&r->d_out, b));
    r->cap = n;
    return LD_OK;
}

static ld_status overdue_error(const nccl_rank *r, ld_error *err)
{
    return LD_FAIL(err, LD_ERR_MISMATCH, 0, "a collective (an all-gather of %zu float%s a rank) was not complete %g s "
                   "after it was queued: a rank of the group is alive but stalled (stopped, hung, or far slower, such "
                   "as still loading weights); this rank's communicator was aborted", r->overdue_n,
                   r->overdue_n == 1 ? "" : "s", r->timeout_s);
}

/* LD_OK while this rank's group is whole, else why not */
static ld_status group_error(const nccl_rank *r, ld_error *err)
{
    if (atomic_load(&r->overdue)) return overdue_error(r, err);
    int async = atomic_load(&r->async);
    if (async != ncclSuccess)
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "NCCL's asynchronous error on this rank's communicator: %s (another "
                       "rank's process failed or left; the communicator was aborted)",
                       ncclGetErrorString((ncclResult_t)async));
    if (atomic_load(&r->aborted) || (r->g && atomic_load(&r->g->aborted)))
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "another rank of the tensor-parallel group failed");
    return LD_OK;
}

/* an error once this rank's group is aborted; else the rank's device made current */
static ld_status enter(nccl_rank *r, ld_error *err)
{
    LD_TRY(group_error(r, err));
    CU_TRY("set device", ld_cu_set_device(r->device));
    return LD_OK;
}

/* ------------------------------------------------------------ flights
 * A create_rank process's collectives as its watchdog (below) follows
 * them; a group of create_all has no watchdog, and these do nothing. */

/* Under wmu: the oldest flights seen done are forgotten. */
static void flights_reap(nccl_rank *r)
{
    while (r->tail != r->head) {
        flight *f = &r->fl[r->tail % FLIGHTS];
        int done = 0;
        if (!f->recorded || ld_cu_event_done(f->ev, &done) != 0 || !done) return;
        r->tail++;
    }
}

/* Before ncclAllGather of n floats: the communicator not aborted (checked
 * under the watchdog's lock, so that it does not abort, freeing the
 * communicator, between this check and the call: it waits for the call
 * to end), the flight queued (the oldest waited for when FLIGHTS are). */
static ld_status flight_begin(nccl_rank *r, size_t n, ld_error *err)
{
    if (!r->watching) return LD_OK;
    pthread_mutex_lock(&r->wmu);
    flights_reap(r);
    while (r->tracking && r->head - r->tail == FLIGHTS && !atomic_load(&r->aborted)) {
        pthread_mutex_unlock(&r->wmu);
        nanosleep(&(struct timespec){0, 100000L}, NULL);
        pthread_mutex_lock(&r->wmu);
        flights_reap(r);
    }
    ld_status st = group_error(r, err);
    if (st == LD_OK && r->tracking) {
        flight *f = &r->fl[r->head++ % FLIGHTS];
        f->t0 = ld_comm_now_s();
        f->n = n;
        f->recorded = 0;
    }
    if (st == LD_OK) r->call_t0 = ld_comm_now_s();
    pthread_mutex_unlock(&r->wmu);
    return st;
}

/* After ncclAllGather returned e: the flight's end marked by its event;
 * the group's error where the watchdog aborted meanwhile (the communicator
 * is gone: not asked why the call failed). */
static ld_status flight_end(nccl_rank *r, ncclResult_t e, ld_error *err)
{
    if (!r->watching) return LD_OK;
    pthread_mutex_lock(&r->wmu);
    r->call_t0 = 0;
    ld_status st = group_error(r, err);
    if (r->tracking) {
        flight *f = &r->fl[(r->head - 1) % FLIGHTS];
        int queued = st == LD_OK && e == ncclSuccess;
        int ce = queued ? ld_cu_event_record_legacy(f->ev) : 0;
        if (queued && !ce) f->recorded = 1;
        else r->head--; /* not followed: the newest, which the watchdog never passes unrecorded */
        if (ce) st = cuda_fail(err, "event record", ce);
    }
    pthread_mutex_unlock(&r->wmu);
    return st;
}

/* A create_rank communicator is nonblocking (its making is bounded,
 * below), so a call on it may return ncclInProgress, its work still being
 * queued (NCCL connects peers at their first collective): polled until it
 * is queued or failed.  Under the watchdog's lock, which every abort takes
 * (NCCL frees an aborted communicator); once aborted, not asked again:
 * flight_end then says why. */
static ncclResult_t settle(nccl_rank *r, ncclResult_t e)
{
    while (e == ncclInProgress) {
        nanosleep(&(struct timespec){0, 100000L}, NULL);
        if (r->watching) pthread_mutex_lock(&r->wmu);
        ncclResult_t a = ncclRemoteError;
        if (!atomic_load(&r->aborted) && ncclCommGetAsyncError(r->comm, &a) != ncclSuccess) a = ncclInternalError;
        if (r->watching) pthread_mutex_unlock(&r->wmu);
        e = a;
    }
    return e;
}

/* NCCL's all-gather of the device buffer `send` [n] into d_recv [size][n],
 * on the legacy stream.  In graph mode (graphs=N, this thread capturing:
 * kernels/cuda/cuda_ops.h) the capture is held around it: what is captured so
 * far is launched first (so the gather is ordered after it, the stream
 * being a blocking one) and capture starts again after, the ordered-sum
 * kernel being the next graph's first node.  NCCL's own graph capture of
 * collectives is not used: a capture of ours spans a fixed count of
 * operations, not the collective's boundaries.  A create_rank process's
 * watchdog follows it (flight_begin, flight_end). */
static ld_status gather(nccl_rank *r, const float *send, size_t n, ld_error *err)
{
    CU_TRY("graphs: hold", ld_cu_graphs_hold());
    LD_TRY(flight_begin(r, n, err));
    ncclResult_t e = settle(r, ncclAllGather(send, r->d_recv, n, ncclFloat, r->comm, (cudaStream_t)0));
    LD_TRY(flight_end(r, e, err));
    if (e != ncclSuccess) return nccl_fail(err, "all-gather", e, r->comm);
    CU_TRY("graphs: release", ld_cu_graphs_release());
    return LD_OK;
}

/* the device all-gather of host `send` [n] into d_recv [size][n] */
static ld_status gather_on_device(nccl_rank *r, const float *send, size_t n, ld_error *err)
{
    LD_TRY(enter(r, err));
    LD_TRY(staging(r, n, err));
    CU_TRY("copy to the device", ld_cu_h2d(r->d_send, send, n * sizeof(float)));
    return gather(r, r->d_send, n, err);
}

static ld_status nc_all_gather(ld_comm *c, const float *send, float *recv, size_t n, ld_error *err)
{
    nccl_rank *r = (nccl_rank *)c;
    LD_TRY(gather_on_device(r, send, n, err));
    CU_TRY("copy to the host", ld_cu_d2h(recv, r->d_recv, n * sizeof(float) * (size_t)c->size));
    return LD_OK;
}

static ld_status nc_all_reduce_sum(ld_comm *c, float *buf, size_t n, ld_error *err)
{
    nccl_rank *r = (nccl_rank *)c;
    LD_TRY(gather_on_device(r, buf, n, err));
    CU_TRY("ordered sum", ld_cu_tp_ordered_sum(r->d_recv, c->size, n, r->d_out));
    CU_TRY("copy to the host", ld_cu_d2h(buf, r->d_out, n * sizeof(float)));
    return LD_OK;
}

/* p [n], on this rank's device, = the ordered sum of every rank's p, all on
 * the device's streams in order (above): NCCL's gather from p, the kernel
 * back into p */
static ld_status reduce_on_device(nccl_rank *r, float *p, size_t n, ld_error *err)
{
    LD_TRY(enter(r, err));
    LD_TRY(staging(r, n, err));
    LD_TRY(gather(r, p, n, err));
    CU_TRY("ordered sum", ld_cu_tp_ordered_sum(r->d_recv, r->base.size, n, p));
    return LD_OK;
}

static ld_status nc_all_reduce_sum_mem(ld_comm *c, const ld_mem *m, size_t n, ld_error *err)
{
    nccl_rank *r = (nccl_rank *)c;
    if (m->kind == LD_MEM_HOST) return nc_all_reduce_sum(c, m->p, n, err);
    if (m->kind != LD_MEM_CUDA)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "the NCCL communicator reduces host or CUDA memory, not memory "
                       "of kind %d", m->kind);
    if (m->device != r->device)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rank %d reduces on CUDA device %d, given memory of device %d",
                       c->rank, r->device, m->device);
    return reduce_on_device(r, m->p, n, err);
}

static ld_status nc_barrier(ld_comm *c, ld_error *err)
{
    float one = 1.0f;
    return nc_all_reduce_sum(c, &one, 1, err);
}

static void nc_abort(ld_comm *c)
{
    nccl_rank *r = (nccl_rank *)c;
    if (!r->g) { /* under the watchdog's lock: NCCL frees an aborted communicator, which it polls */
        if (r->watching) pthread_mutex_lock(&r->wmu);
        if (!atomic_exchange(&r->aborted, 1)) ncclCommAbort(r->comm);
        if (r->watching) pthread_mutex_unlock(&r->wmu);
        return;
    }
    pthread_mutex_lock(&r->g->mu);
    if (!atomic_load(&r->g->aborted))
        for (int k = 0; k < r->g->size; k++) ncclCommAbort(r->g->comms[k]);
    atomic_store(&r->g->aborted, 1);
    pthread_mutex_unlock(&r->g->mu);
}

static void group_free(nccl_group *g)
{
    if (!g) return;
    free(g->comms);
    free(g);
}

static void watchdog_stop(nccl_rank *r);
static void flights_free(nccl_rank *r);

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
/* What a nonblocking call on c that returned e came to: while it is
 * ncclInProgress, c's asynchronous state polled every millisecond, up to
 * `deadline` (ld_comm_now_s's clock; still ncclInProgress past it). */
static ncclResult_t poll_until(ncclComm_t c, ncclResult_t e, double deadline)
{
    while (e == ncclInProgress && ld_comm_now_s() <= deadline) {
        nanosleep(&(struct timespec){0, 1000000L}, NULL);
        ncclResult_t a = ncclInternalError;
        e = ncclCommGetAsyncError(c, &a) == ncclSuccess ? a : ncclInternalError;
    }
    return e;
}
#endif

/* A create_rank communicator, nonblocking (init_rank, below), ended: its
 * finalisation (which waits for the collectives queued) polled within
 * timeout_s, then its resources freed; aborted instead past the bound or
 * when it fails. */
static void finish_rank(nccl_rank *r)
{
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    ncclResult_t e = poll_until(r->comm, ncclCommFinalize(r->comm), ld_comm_deadline_s(r->timeout_s));
    if (e != ncclSuccess) {
        ncclCommAbort(r->comm);
        return;
    }
#endif
    ncclCommDestroy(r->comm);
}

static void nc_destroy(ld_comm *c)
{
    nccl_rank *r = (nccl_rank *)c;
    watchdog_stop(r);
    ld_cu_set_device(r->device);
    free_staging(r);
    flights_free(r);
    if (r->g) {
        pthread_mutex_lock(&r->g->mu);
        if (!atomic_load(&r->g->aborted)) ncclCommDestroy(r->comm);
        int last = --r->g->refs == 0;
        pthread_mutex_unlock(&r->g->mu);
        if (last) {
            pthread_mutex_destroy(&r->g->mu);
            group_free(r->g);
        }
    } else if (!atomic_load(&r->aborted)) {
        finish_rank(r);
    }
    free(r);
}

/* ------------------------------------------------------------ the watchdog
 * A process made by ld_comm_nccl_create_rank has no other rank in reach to
 * abort with it: when another process dies, NCCL's collectives here wait
 * for it, and with them every later wait for the device; when another
 * process is alive but stalled (stopped, hung), NCCL waits for it without
 * end.  A thread checks every WATCH_MS:
 *  - NCCL's asynchronous error: what its transport sees (a peer's
 *    connection gone);
 *  - the oldest collective queued and not seen done (its event, recorded
 *    after it on the stream): past timeout_s, a rank is stalled.
 * Either aborts the communicator, which makes NCCL's waiting kernels
 * return, so the replay ends with an error (group_error says which)
 * instead of hanging.  NCCL frees an aborted communicator: the thread does
 * not abort while this rank's thread is in ncclAllGather (call_t0, under
 * the same lock as the check before the call), unless it has been in it
 * for IN_CALL_GRACE_S: NCCL queues a collective in microseconds, and a
 * call that does not return is itself part of the hang (the emulator's
 * collectives run inside the call). */
#define WATCH_MS 100
#define IN_CALL_GRACE_S 1.0

/* Under wmu, the flights reaped: the oldest is past timeout_s (its size
 * noted). */
static int flights_overdue(nccl_rank *r)
{
    if (r->timeout_s <= 0 || !r->tracking || r->tail == r->head) return 0;
    const flight *f = &r->fl[r->tail % FLIGHTS];
    if (ld_comm_now_s() - f->t0 <= r->timeout_s) return 0;
    r->overdue_n = f->n;
    return 1;
}

/* Under wmu: why the communicator must be aborted now (0: it need not, or
 * not yet: the rank's thread is in a call, see above), and whether that
 * voids what this rank has queued. */
static int watch_tick(nccl_rank *r)
{
    flights_reap(r);
    ncclResult_t a = ncclSuccess;
    int async = ncclCommGetAsyncError(r->comm, &a) == ncclSuccess && a != ncclSuccess && a != ncclInProgress;
    int overdue = !async && flights_overdue(r);
    if (!async && !overdue) return 0;
    if (r->call_t0 && ld_comm_now_s() - r->call_t0 <= IN_CALL_GRACE_S) return 0;
    if (async) atomic_store(&r->async, (int)a);
    else atomic_store(&r->overdue, 1);
    if (r->call_t0 || r->head != r->tail || !r->tracking) atomic_store(&r->voided, 1);
    return 1;
}

static void *watchdog_main(void *arg)
{
    nccl_rank *r = arg;
    ld_cu_set_device(r->device); /* the events' (a failure leaves them unread: never done, never overdue) */
    pthread_mutex_lock(&r->wmu);
    while (!r->wstop) {
        struct timespec t = ld_comm_in_ns(WATCH_MS * 1000000L);
        pthread_cond_timedwait(&r->wcv, &r->wmu, &t);
        if (r->wstop || atomic_load(&r->aborted)) break;
        if (watch_tick(r)) {
            if (!atomic_exchange(&r->aborted, 1)) ncclCommAbort(r->comm);
            break;
        }
    }
    pthread_mutex_unlock(&r->wmu);
    return NULL;
}

static void watchdog_start(nccl_rank *r)
{
    pthread_mutex_init(&r->wmu, NULL);
    pthread_condattr_t ca; /* the monotonic clock, as ld_comm_in_ns's deadlines */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->wcv, &ca);
    pthread_condattr_destroy(&ca);
    r->watching = pthread_create(&r->watchdog, NULL, watchdog_main, r) == 0;
}

static void watchdog_stop(nccl_rank *r)
{
    if (!r->watching) return;
    pthread_mutex_lock(&r->wmu);
    r->wstop = 1;
    pthread_cond_signal(&r->wcv);
    pthread_mutex_unlock(&r->wmu);
    pthread_join(r->watchdog, NULL);
    pthread_cond_destroy(&r->wcv);
    pthread_mutex_destroy(&r->wmu);
    r->watching = 0;
}

/* the flights' events; on failure none, the flights not followed (and no
 * timeout) */
static void flights_make(nccl_rank *r)
{
    for (int i = 0; i < FLIGHTS; i++)
        if (ld_cu_event_create(&r->fl[i].ev) != 0) {
            while (i-- > 0) ld_cu_event_destroy(r->fl[i].ev);
            return;
        }
    r->tracking = 1;
}

static void flights_free(nccl_rank *r)
{
    for (int i = 0; r->tracking && i < FLIGHTS; i++) ld_cu_event_destroy(r->fl[i].ev);
}

/* A process's collectives run after their call returns: one the watchdog
 * aborted while it was queued (or being called) let the work after it run
 * on what it left, and what this rank computed since is void.  An abort
 * once every collective had completed (a peer that finished first and left)
 * voids nothing.  A group of create_all reports its failures through the
 * rank that failed (tp_forward.c). */
static ld_status nc_check(ld_comm *c, ld_error *err)
{
    nccl_rank *r = (nccl_rank *)c;
    return atomic_load(&r->voided) ? group_error(r, err) : LD_OK;
}

static const ld_comm_ops nccl_ops = {
    .name = "nccl",
    .all_gather = nc_all_gather,
    .all_reduce_sum = nc_all_reduce_sum,
    .all_reduce_sum_mem = nc_all_reduce_sum_mem,
    .barrier = nc_barrier,
    .check = nc_check,
    .abort = nc_abort,
    .destroy = nc_destroy,
};

int ld_comm_nccl_available(void)
{
    return 1;
}

static ld_status check_devices(int size, ld_error *err)
{
    int have = 0, e = ld_cu_device_count(&have);
    if (e || have < size)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "%d ranks need %d CUDA devices, this machine has %d%s%s", size, size,
                       e ? 0 : have, e ? ": " : "", e ? ld_cu_error_string(e) : "");
    return LD_OK;
}

ld_status ld_comm_nccl_create_all(int size, const int *devices, ld_comm **out, ld_error *err)
{
    if (size < 1 || size > 1024) return LD_FAIL(err, LD_ERR_USAGE, 0, "%d ranks: give 1 to 1024", size);
    LD_TRY(check_devices(size, err));
    /* everything allocated first: nothing to undo after ncclCommInitAll */
    nccl_group *g = calloc(1, sizeof *g);
    int *devs = malloc((size_t)size * sizeof *devs);
    int ok = g && devs && (g->comms = calloc((size_t)size, sizeof *g->comms)) != NULL;
    for (int k = 0; k < size; k++) out[k] = NULL;
    for (int k = 0; ok && k < size; k++) ok = (out[k] = calloc(1, sizeof(nccl_rank))) != NULL;
    ncclResult_t e = ncclSuccess;
    if (ok) {
        for (int k = 0; k < size; k++) devs[k] = devices ? devices[k] : k;
        e = ncclCommInitAll(g->comms, size, devs);
    }
    if (!ok || e != ncclSuccess) {
        for (int k = 0; k < size; k++) free(out[k]);
        group_free(g);
        free(devs);
        return ok ? nccl_fail(err, "ncclCommInitAll", e, NULL) : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    pthread_mutex_init(&g->mu, NULL);
    atomic_init(&g->aborted, 0);
    g->size = g->refs = size;
    for (int k = 0; k < size; k++) {
        nccl_rank *r = (nccl_rank *)out[k];
        r->base = (ld_comm){&nccl_ops, k, size, 0, 1};
        r->comm = g->comms[k];
        r->g = g;
        r->device = devs[k];
    }
    free(devs);
    return LD_OK;
}

ld_status ld_comm_nccl_unique_id(unsigned char id[LD_COMM_NCCL_ID_BYTES], ld_error *err)
{
    ncclUniqueId u;
    ncclResult_t e = ncclGetUniqueId(&u);
    if (e != ncclSuccess) return nccl_fail(err, "ncclGetUniqueId", e, NULL);
    memcpy(id, u.internal, LD_COMM_NCCL_ID_BYTES);
    return LD_OK;
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
/* ncclCommInitRank within timeout_s (<= 0: for ever).  NCCL's bootstrap
 * waits without end for a rank that never comes (rank 0 for the others to
 * connect), so the communicator is made nonblocking (config.blocking = 0,
 * NCCL 2.14 on): the call returns at once and its progress is polled;
 * past the deadline it is aborted.  The communicator stays nonblocking:
 * its collectives are settled (above). */
static ld_status init_rank(ncclComm_t *c, int size, ncclUniqueId u, int rank, double timeout_s, ld_error *err)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    *c = NULL;
    double deadline = ld_comm_deadline_s(timeout_s);
    ncclResult_t e = ncclCommInitRankConfig(c, size, u, rank, &config);
    if (*c) e = poll_until(*c, e, deadline);
    if (e == ncclSuccess) return LD_OK;
    ld_status st = e == ncclInProgress
                       ? LD_FAIL(err, LD_ERR_IO, 0, "NCCL's bootstrap: the group of %d was not made within %g s (a "
                                 "rank missing: not started, failed before it joined, or on a node that cannot "
                                 "reach rank 0)", size, timeout_s)
                       : nccl_fail(err, "ncclCommInitRankConfig", e, *c);
    if (*c) ncclCommAbort(*c); /* what NCCL asks of a communicator whose making failed */
    *c = NULL;
    return st;
}
#else
static ld_status init_rank(ncclComm_t *c, int size, ncclUniqueId u, int rank, double timeout_s, ld_error *err)
{
    (void)timeout_s; /* before NCCL 2.14: no nonblocking making, so no bound on it */
    ncclResult_t e = ncclCommInitRank(c, size, u, rank);
    return e == ncclSuccess ? LD_OK : nccl_fail(err, "ncclCommInitRank", e, NULL);
}
#endif

ld_status ld_comm_nccl_create_rank(const unsigned char id[LD_COMM_NCCL_ID_BYTES], int size, int rank, int device,
                                   double timeout_s, ld_comm **out, ld_error *err)
{
    if (size < 1 || rank < 0 || rank >= size)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rank %d of %d: give 0 <= rank < size", rank, size);
    LD_TRY(check_devices(device + 1, err));
    nccl_rank *r = calloc(1, sizeof *r);
    if (!r) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ncclUniqueId u;
    memcpy(u.internal, id, LD_COMM_NCCL_ID_BYTES);
    int ce = ld_cu_set_device(device);
    if (ce) {
        free(r);
        return cuda_fail(err, "set device", ce);
    }
    ld_status st = init_rank(&r->comm, size, u, rank, timeout_s, err);
    if (st != LD_OK) {
        free(r);
        return st;
    }
    r->base = (ld_comm){&nccl_ops, rank, size, 0, 1};
    r->device = device;
    atomic_init(&r->async, ncclSuccess);
    r->timeout_s = timeout_s;
    flights_make(r);
    watchdog_start(r); /* none (not started) leaves the communicator as it was, without a timeout */
    *out = &r->base;
    return LD_OK;
}

#else /* no NCCL in this build */

int ld_comm_nccl_available(void)
{
    return 0;
}

static ld_status no_nccl(ld_error *err)
{
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                   "tensor parallelism on GPUs needs NCCL: this build of logdiff has none (built without CUDA or "
                   "without nccl.h / libnccl)");
}

ld_status ld_comm_nccl_create_all(int size, const int *devices, ld_comm **out, ld_error *err)
{
    (void)size;
    (void)devices;
    (void)out;
    return no_nccl(err);
}

ld_status ld_comm_nccl_unique_id(unsigned char id[LD_COMM_NCCL_ID_BYTES], ld_error *err)
{
    (void)id;
    return no_nccl(err);
}

ld_status ld_comm_nccl_create_rank(const unsigned char id[LD_COMM_NCCL_ID_BYTES], int size, int rank, int device,
                                   double timeout_s, ld_comm **out, ld_error *err)
{
    (void)id;
    (void)size;
    (void)rank;
    (void)device;
    (void)timeout_s;
    (void)out;
    return no_nccl(err);
}

#endif
