/* comm.h - a communicator between the ranks of a tensor-parallel group
 * (tp_forward.h): N ranks, each holding one shard of the model, exchange
 * float buffers.  Three implementations:
 *
 *  - comm_sim.c: the N ranks are threads of one process sharing memory
 *    (the CPU backends), optionally grouped into simulated nodes;
 *  - comm_shm.c: the N ranks are processes of one machine meeting in a
 *    mapped file (host memory; the multi-process launch without NCCL);
 *  - comm_nccl.c: NCCL, one rank per GPU, one process driving the GPUs of
 *    a machine (ncclCommInitAll) or one process per rank joined through
 *    NCCL's bootstrap (ncclGetUniqueId / ncclCommInitRank); built only
 *    where CUDA and NCCL are found, else its constructors say so.
 *
 * The design: docs/engine-tp.md, "Communicators: determinism, memory, failure". */
#ifndef LD_COMM_H
#define LD_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"
#include "engine/backend/mem_kind.h"
#include "engine/engine.h"

typedef struct ld_comm ld_comm;

typedef struct ld_comm_ops {
    const char *name; /* "sim", "nccl" */
    /* recv [size][n] = every rank's send [n], in rank order */
    ld_status (*all_gather)(ld_comm *c, const float *send, float *recv, size_t n, ld_error *err);
    /* buf [n] = the ordered sum of every rank's buf (all-gather + local sum) */
    ld_status (*all_reduce_sum)(ld_comm *c, float *buf, size_t n, ld_error *err);
    /* Optional (NULL: refuses every kind): m->p [n] = the ordered sum of
     * every rank's m->p, in place in memory of kind m->kind (for
     * LD_MEM_CUDA on device m->device).  LD_ERR_UNSUPPORTED, nothing done,
     * for a kind this communicator cannot reduce where it is. */
    ld_status (*all_reduce_sum_mem)(ld_comm *c, const ld_mem *m, size_t n, ld_error *err);
    ld_status (*barrier)(ld_comm *c, ld_error *err);
    /* Optional (NULL: LD_OK, every collective complete when it returns):
     * where collectives run after their call returns (a process's NCCL
     * rank), LD_OK unless the group was aborted while one of this rank's
     * was queued, else why (a rank failed, left, or stalled past the
     * timeout): the work queued after an aborted collective ran on what it
     * left, so a result read back since is void.  Without waiting. */
    ld_status (*check)(ld_comm *c, ld_error *err);
    /* wakes the ranks waiting in a collective with an error; any rank may
     * call it, from any thread */
    void (*abort)(ld_comm *c);
    /* frees this rank's handle (a group's shared state goes with the last) */
    void (*destroy)(ld_comm *c);
} ld_comm_ops;

/* One rank's handle.  node / n_nodes: which simulated (or real) node the
 * rank sits on (ranks are numbered node by node: node = rank / (size /
 * n_nodes)). */
struct ld_comm {
    const ld_comm_ops *ops;
    int rank, size;
    int node, n_nodes;
};

static inline ld_status ld_comm_all_gather(ld_comm *c, const float *send, float *recv, size_t n, ld_error *err)
{
    return c->ops->all_gather(c, send, recv, n, err);
}

static inline ld_status ld_comm_all_reduce_sum(ld_comm *c, float *buf, size_t n, ld_error *err)
{
    return c->ops->all_reduce_sum(c, buf, n, err);
}

/* The ordered sum in place where m says the floats live (the op above);
 * LD_ERR_UNSUPPORTED, nothing done and no collective started, where the
 * communicator cannot reduce that kind in place: the same answer on every
 * rank for the same kind (see Memory above). */
static inline ld_status ld_comm_all_reduce_sum_mem(ld_comm *c, const ld_mem *m, size_t n, ld_error *err)
{
    if (!c->ops->all_reduce_sum_mem)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "the %s communicator reduces host buffers only", c->ops->name);
    return c->ops->all_reduce_sum_mem(c, m, n, err);
}

static inline ld_status ld_comm_barrier(ld_comm *c, ld_error *err)
{
    return c->ops->barrier(c, err);
}

static inline ld_status ld_comm_check(ld_comm *c, ld_error *err)
{
    return c->ops->check ? c->ops->check(c, err) : LD_OK;
}

static inline void ld_comm_abort(ld_comm *c)
{
    if (c) c->ops->abort(c);
}


/* out[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ... for i < n,
 * parts being [n_parts][n] (n_parts >= 1; one part is copied as it is, no
 * 0 + p that would turn -0 into +0).  `out` may be parts[0]. */
void ld_comm_ordered_sum(const float *parts, int n_parts, size_t n, float *out);

/* The same sum of parts `stride` floats apart (stride >= n): part p is
 * parts[p * stride .. p * stride + n). */
void ld_comm_ordered_sum_strided(const float *parts, size_t stride, int n_parts, size_t n, float *out);

/* ---------------------------------------------------------------- sim */

/* A group of `size` simulated ranks in `n_nodes` nodes (size a multiple of
 * n_nodes; 1 = flat): out[r] is rank r's handle, to be used by one thread
 * each and destroyed each (any order).  The all-gather of a grouped
 * communicator runs in two levels as a multi-node one would: the ranks of
 * a node gather into the node's buffer, the node leaders (local rank 0)
 * exchange the node blocks, and each rank copies the whole; the result is
 * the flat one, bit for bit (it is a copy).  Each level counts the bytes it
 * moves (ld_comm_sim_traffic).  Errors: LD_ERR_USAGE for sizes out of
 * range, LD_ERR_NOMEM. */
ld_status ld_comm_sim_create(int size, int n_nodes, ld_comm **out, ld_error *err);

/* Bytes the group's all-gathers moved so far within nodes and between
 * nodes (a rank's contribution counted once per receiving rank or node). */
void ld_comm_sim_traffic(const ld_comm *c, double *intra_bytes, double *inter_bytes);

/* The all-reduces the group's ranks ran so far, each rank's call counted:
 * in place (all_reduce_sum_mem on host memory) and on the caller's buffer
 * (all_reduce_sum; barriers not counted).  LD_MEM_CUDA, refused, is not
 * counted.  c: a handle of ld_comm_sim_create's; read it while no rank is
 * in a collective. */
void ld_comm_sim_reduces(const ld_comm *c, uint64_t *n_in_place, uint64_t *n_buffer);

/* ---------------------------------------------------------------- shm */

/* Rank `rank` of a group of `size` processes of this machine (1 to
 * LD_COMM_SHM_MAX_RANKS), meeting at `path` (a new name, best on a tmpfs
 * such as /dev/shm; the same on every rank): rank 0 creates it, the others
 * wait for it; every call returns once all `size` have joined, and rank 0
 * then removes the name.  Host memory only (all_reduce_sum_mem refuses the
 * other kinds); a rank whose process exits mid-run aborts the group (seen
 * at once from the ranks of its pid namespace; from another, such as
 * another container's, through the mutex it held or wait_s).  Errors: LD_ERR_USAGE for a bad rank
 * or size, a name that exists already (rank 0: a run that did not finish
 * left it), a group of another size; LD_ERR_IO for file errors and for
 * ranks missing at timeout_s (<= 0: wait for ever); LD_ERR_MISMATCH when
 * another rank failed while joining.  wait_s (<= 0: for ever) bounds each
 * wait of a collective for the others: past it the group is aborted and
 * its collectives fail naming the ranks that had not arrived (alive but
 * stalled: a rank that exits is seen at once). */
#define LD_COMM_SHM_MAX_RANKS 64
ld_status ld_comm_shm_join(const char *path, int size, int rank, double timeout_s, double wait_s, ld_comm **out,
                           ld_error *err);

/* 1 once the group of `c` (a handle of ld_comm_shm_join) is aborted, or a
 * rank's process is found gone now (which aborts it); without waiting, from
 * any thread.  What a transport's asynchronous error reports (the CUDA
 * emulator's ncclCommGetAsyncError). */
int ld_comm_shm_failed(ld_comm *c);

/* ---------------------------------------------------------------- join */



/* ---------------------------------------------------------------- nccl */



/* One process driving `size` GPUs (devices devices[0..size), NULL: 0..size-1)
 * through ncclCommInitAll: out[r] is rank r's handle, bound to its device;
 * rank r's collectives must be called from a thread that drives that
 * device (the TP forward runs one thread per rank).  Errors:
 * LD_ERR_UNSUPPORTED in a build without NCCL or with fewer devices,
 * LD_ERR_CUDA for NCCL/CUDA failures (NCCL's message). */
ld_status ld_comm_nccl_create_all(int size, const int *devices, ld_comm **out, ld_error *err);

/* NCCL's bootstrap across processes (and nodes): rank 0 calls
 * ld_comm_nccl_unique_id and shares the 128 bytes out of band (a file on
 * shared storage, an environment variable, a TCP rendezvous); every
 * process then calls ld_comm_nccl_create_rank with it, its rank, the group
 * size and its local device.  timeout_s (<= 0: none) bounds the making of
 * the group (a rank that never joins: LD_ERR_IO, where NCCL is 2.14 or
 * newer, whose nonblocking making can be polled and aborted; older ones
 * wait for it) and each
 * collective: one not complete that long after it was queued (a peer
 * alive but stalled, which NCCL itself waits for without end) aborts the
 * communicator, and this rank's collectives and ld_comm_check fail saying
 * so (comm_nccl.c's watchdog). */
#define LD_COMM_NCCL_ID_BYTES 128
ld_status ld_comm_nccl_unique_id(unsigned char id[LD_COMM_NCCL_ID_BYTES], ld_error *err);
ld_status ld_comm_nccl_create_rank(const unsigned char id[LD_COMM_NCCL_ID_BYTES], int size, int rank, int device,
                                   double timeout_s, ld_comm **out, ld_error *err);

#endif /* LD_COMM_H */
