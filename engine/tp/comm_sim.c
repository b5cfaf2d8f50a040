/* comm_sim.c - the simulated communicator of comm.h: ranks are threads of
 * one process sharing memory.
 *
 * Synchronisation is a barrier of our own (mutex, condition variable and a
 * generation counter, spun on briefly before sleeping) rather than
 * pthread_barrier_t, because a rank that
 * fails must be able to wake the others (ld_comm_abort): a pthread barrier
 * cannot be left early.
 *
 * all_gather, flat group (one node): every rank publishes its send
 * pointer; after a barrier each copies every rank's buffer into its recv in
 * rank order; a second barrier keeps the send buffers alive until all have
 * read them.  Grouped (n_nodes > 1), as a two-level multi-node all-gather:
 * (1) each node's leader copies its ranks' buffers into its node block,
 * (2) the leaders exchange the node blocks (the inter-node step) into a
 * full [size][n] copy each, (3) every rank copies its leader's full copy.
 * Either way recv is a copy of the same bytes in the same order, so the
 * grouping never changes a result.
 *
 * all_reduce_sum_mem: host memory is what every rank already shares, so
 * the in-place reduce is all_reduce_sum on it (counted apart,
 * ld_comm_sim_reduces); CUDA memory is refused before anything is done.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "engine/backend/spin.h"

#define SPIN_NS 100000L /* how long a rank waiting at a barrier spins before it sleeps */

typedef struct sim_group {
    int size, n_nodes, per_node;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, refs;
    atomic_int aborted;
    atomic_uint gen;      /* barrier generation: bumped under `mu`, spun on without it */
    const float **send;   /* [size] the pointers published by each rank */
    size_t *n;            /* [size] the count each rank passed */
    float **node_block;   /* [size] leaders only: their node's [per_node][n] */
    float **full;         /* [size] leaders only: the whole [size][n] */
    size_t *cap;          /* [size] the largest n node_block / full hold */
    double *intra, *inter; /* [size] bytes received by each rank, per level */
    uint64_t *n_in_place, *n_buffer; /* [size] each rank's all-reduces, per entry point */
} sim_group;

typedef struct sim_rank {
    ld_comm base;
    sim_group *g;
    float *scratch;       /* all_reduce's gathered parts */
    size_t scratch_cap;
} sim_rank;

static ld_status aborted_error(ld_error *err)
{
    return LD_FAIL(err, LD_ERR_MISMATCH, 0, "another rank of the tensor-parallel group failed");
}

/* Waits until every rank arrives; an error when the group is aborted
 * before that.  The last to arrive bumps the generation; the others spin
 * on it for up to SPIN_NS (a decode step runs two all-reduces per layer,
 * each microseconds apart across ranks, and a condition variable's wake-up
 * costs tens of microseconds), then sleep on the condition variable. */
static ld_status sim_wait(sim_group *g, ld_error *err)
{
    pthread_mutex_lock(&g->mu);
    if (atomic_load(&g->aborted)) {
        pthread_mutex_unlock(&g->mu);
        return aborted_error(err);
    }
    unsigned gen = atomic_load(&g->gen);
    if (++g->arrived == g->size) {
        g->arrived = 0;
        atomic_fetch_add(&g->gen, 1);
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        return LD_OK;
    }
    pthread_mutex_unlock(&g->mu);
    ld_spin_on_gen(&g->gen, gen, &g->aborted, SPIN_NS);
    pthread_mutex_lock(&g->mu);
    while (atomic_load(&g->gen) == gen && !atomic_load(&g->aborted)) pthread_cond_wait(&g->cv, &g->mu);
    int failed = atomic_load(&g->gen) == gen; /* woken by an abort, not by the last arrival */
    pthread_mutex_unlock(&g->mu);
    return failed ? aborted_error(err) : LD_OK;
}

static int grow(float **p, size_t *cap, size_t n)
{
    if (n <= *cap) return 1;
    float *q = realloc(*p, n * sizeof *q);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

static ld_status gather_flat(sim_rank *r, float *recv, size_t n, ld_error *err)
{
    sim_group *g = r->g;
    for (int k = 0; k < g->size; k++) {
        memcpy(recv + (size_t)k * n, g->send[k], n * sizeof *recv);
        if (k != r->base.rank) g->intra[r->base.rank] += (double)n * sizeof *recv;
    }
    return sim_wait(g, err); /* the senders' buffers stay until all have read */
}

static ld_status gather_nodes(sim_rank *r, float *recv, size_t n, ld_error *err)
{
    sim_group *g = r->g;
    int rank = r->base.rank, P = g->per_node, node = r->base.node, leader = node * P;
    size_t bytes = n * sizeof *recv;
    if (rank == leader) { /* (1) within the node */
        if (n > g->cap[rank]) {
            size_t c1 = 0, c2 = 0;
            free(g->node_block[rank]);
            free(g->full[rank]);
            g->node_block[rank] = g->full[rank] = NULL;
            g->cap[rank] = 0;
            if (!grow(&g->node_block[rank], &c1, (size_t)P * n) || !grow(&g->full[rank], &c2, (size_t)g->size * n)) {
                ld_comm_abort(&r->base);
                return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
            }
            g->cap[rank] = n;
        }
        for (int k = 0; k < P; k++) {
            memcpy(g->node_block[rank] + (size_t)k * n, g->send[leader + k], bytes);
            if (k) g->intra[rank] += (double)bytes;
        }
    }
    LD_TRY(sim_wait(g, err));
    if (rank == leader) /* (2) between the nodes' leaders */
        for (int k = 0; k < g->n_nodes; k++) {
            memcpy(g->full[rank] + (size_t)k * P * n, g->node_block[k * P], (size_t)P * bytes);
            if (k != node) g->inter[rank] += (double)P * (double)bytes;
        }
    LD_TRY(sim_wait(g, err));
    memcpy(recv, g->full[leader], (size_t)g->size * bytes); /* (3) back within the node */
    if (rank != leader) g->intra[rank] += (double)g->size * (double)bytes;
    return sim_wait(g, err);
}

static ld_status sim_all_gather(ld_comm *c, const float *send, float *recv, size_t n, ld_error *err)
{
    sim_rank *r = (sim_rank *)c;
    sim_group *g = r->g;
    g->send[c->rank] = send;
    g->n[c->rank] = n;
    LD_TRY(sim_wait(g, err));
    for (int k = 0; k < g->size; k++)
        if (g->n[k] != n) {
            ld_comm_abort(c);
            return LD_FAIL(err, LD_ERR_MISMATCH, 0, "all_gather: rank %d sent %zu floats, rank %d %zu", c->rank, n,
                           k, g->n[k]);
        }
    return g->n_nodes == 1 ? gather_flat(r, recv, n, err) : gather_nodes(r, recv, n, err);
}

/* buf = the ordered sum of every rank's buf: gathered, then summed locally */
static ld_status reduce_host(ld_comm *c, float *buf, size_t n, ld_error *err)
{
    sim_rank *r = (sim_rank *)c;
    if (!grow(&r->scratch, &r->scratch_cap, (size_t)c->size * n)) {
        ld_comm_abort(c);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    LD_TRY(sim_all_gather(c, buf, r->scratch, n, err));
    ld_comm_ordered_sum(r->scratch, c->size, n, buf);
    return LD_OK;
}

static ld_status sim_all_reduce_sum(ld_comm *c, float *buf, size_t n, ld_error *err)
{
    ((sim_rank *)c)->g->n_buffer[c->rank]++;
    return reduce_host(c, buf, n, err);
}

static ld_status sim_all_reduce_sum_mem(ld_comm *c, const ld_mem *m, size_t n, ld_error *err)
{
    if (m->kind != LD_MEM_HOST)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "the simulated communicator reduces host memory in place, not "
                       "memory of kind %d", m->kind);
    ((sim_rank *)c)->g->n_in_place[c->rank]++;
    return reduce_host(c, m->p, n, err);
}

static ld_status sim_barrier(ld_comm *c, ld_error *err)
{
    return sim_wait(((sim_rank *)c)->g, err);
}

static void sim_abort(ld_comm *c)
{
    sim_group *g = ((sim_rank *)c)->g;
    pthread_mutex_lock(&g->mu);
    atomic_store(&g->aborted, 1);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void group_free(sim_group *g)
{
    if (g->node_block)
        for (int k = 0; k < g->size; k++) {
            free(g->node_block[k]);
            free(g->full[k]);
        }
    free(g->send);
    free(g->n);
    free(g->node_block);
    free(g->full);
    free(g->cap);
    free(g->intra);
    free(g->inter);
    free(g->n_in_place);
    free(g->n_buffer);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static void sim_destroy(ld_comm *c)
{
    sim_rank *r = (sim_rank *)c;
    sim_group *g = r->g;
    pthread_mutex_lock(&g->mu);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) group_free(g);
    free(r->scratch);
    free(r);
}

static const ld_comm_ops sim_ops = {
    .name = "sim",
    .all_gather = sim_all_gather,
    .all_reduce_sum = sim_all_reduce_sum,
    .all_reduce_sum_mem = sim_all_reduce_sum_mem,
    .barrier = sim_barrier,
    .abort = sim_abort,
    .destroy = sim_destroy,
};

void ld_comm_sim_traffic(const ld_comm *c, double *intra_bytes, double *inter_bytes)
{
    const sim_group *g = ((const sim_rank *)c)->g;
    double a = 0, b = 0;
    for (int k = 0; k < g->size; k++) {
        a += g->intra[k];
        b += g->inter[k];
    }
    *intra_bytes = a;
    *inter_bytes = b;
}

void ld_comm_sim_reduces(const ld_comm *c, uint64_t *n_in_place, uint64_t *n_buffer)
{
    const sim_group *g = ((const sim_rank *)c)->g;
    uint64_t a = 0, b = 0;
    for (int k = 0; k < g->size; k++) {
        a += g->n_in_place[k];
        b += g->n_buffer[k];
    }
    *n_in_place = a;
    *n_buffer = b;
}

static sim_group *group_new(int size, int n_nodes)
{
    sim_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->size = size;
    g->n_nodes = n_nodes;
    g->per_node = size / n_nodes;
    g->refs = size;
    atomic_init(&g->aborted, 0);
    atomic_init(&g->gen, 0u);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->send = calloc((size_t)size, sizeof *g->send);
    g->n = calloc((size_t)size, sizeof *g->n);
    g->node_block = calloc((size_t)size, sizeof *g->node_block);
    g->full = calloc((size_t)size, sizeof *g->full);
    g->cap = calloc((size_t)size, sizeof *g->cap);
    g->intra = calloc((size_t)size, sizeof *g->intra);
    g->inter = calloc((size_t)size, sizeof *g->inter);
    g->n_in_place = calloc((size_t)size, sizeof *g->n_in_place);
    g->n_buffer = calloc((size_t)size, sizeof *g->n_buffer);
    if (!g->send || !g->n || !g->node_block || !g->full || !g->cap || !g->intra || !g->inter || !g->n_in_place ||
        !g->n_buffer) {
        group_free(g);
        return NULL;
    }
    return g;
}

ld_status ld_comm_sim_create(int size, int n_nodes, ld_comm **out, ld_error *err)
{
    if (size < 1 || size > 1024 || n_nodes < 1 || size % n_nodes)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a group of %d ranks in %d nodes: give 1 to 1024 ranks, a multiple "
                       "of the node count", size, n_nodes);
    sim_group *g = group_new(size, n_nodes);
    if (!g) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int k = 0; k < size; k++) {
        sim_rank *r = calloc(1, sizeof *r);
        if (!r) {
            for (int j = 0; j < k; j++) free(out[j]);
            group_free(g);
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        }
        r->base = (ld_comm){&sim_ops, k, size, k / g->per_node, n_nodes};
        r->g = g;
        out[k] = &r->base;
    }
    return LD_OK;
}
