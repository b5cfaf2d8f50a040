/* test_tp.c - tensor parallelism's communicators and launches
 * (engine/tp/comm.h, tp_forward.h): the ordered all-reduce on values where
 * the order matters, the grouping of ranks into nodes, the abort; NCCL's
 * communicator (on the CUDA emulator's NCCL in CI: its bootstrap bounded,
 * its watchdog, its refusals), the split on GPUs (one a rank, shared) and
 * each rank a process of its own.  The dense models' splits:
 * test_tp_dense.c. */
#include "tests/support/tp_check.h"

/* ------------------------------------------------------------ the communicator */

/* One rank's part of a collective run on its own thread. */
typedef struct rank_job {
    ld_comm *c;
    float *buf;       /* all_reduce in place */
    float *recv;      /* all_gather [size][n], NULL: reduce only */
    size_t n;
    int abort_instead;
    ld_status st;
    ld_error err;
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    ld_error_clear(&j->err);
    if (j->abort_instead) {
        ld_comm_abort(j->c);
        j->st = LD_OK;
        return NULL;
    }
    j->st = j->recv ? ld_comm_all_gather(j->c, j->buf, j->recv, j->n, &j->err) : LD_OK;
    if (j->st == LD_OK) j->st = ld_comm_all_reduce_sum(j->c, j->buf, j->n, &j->err);
    if (j->st == LD_OK) j->st = ld_comm_barrier(j->c, &j->err);
    return NULL;
}

/* Runs the jobs of a group (one thread each) and destroys the handles. */
static int run_group(ld_comm **c, rank_job *jobs, int size)
{
    pthread_t th[16];
    for (int r = 0; r < size; r++) {
        jobs[r].c = c[r];
        CHECK(pthread_create(&th[r], NULL, rank_main, &jobs[r]) == 0);
    }
    for (int r = 0; r < size; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < size; r++) ld_comm_destroy(c[r]);
    return 0;
}

/* 1e8 + 1 rounds to 1e8 in fp32 (the spacing there is 8), so the sum of
 * (1e8, 1, -1e8) is 0 in rank order and 1 when -1e8 comes before the 1: the
 * order a ring all-reduce would use for a chunk starting at rank 2. */
static int test_tp_ordered_sum_order(void)
{
    const float p[3] = {1e8f, 1.0f, -1e8f};
    float in_order = p[0];
    in_order += p[1];
    in_order += p[2];
    float ring_from_2 = p[2];
    ring_from_2 += p[0];
    ring_from_2 += p[1];
    CHECK(in_order == 0.0f && ring_from_2 == 1.0f); /* the order matters here */
    float out;
    ld_comm_ordered_sum(p, 3, 1, &out);
    CHECK(out == 0.0f);
    const float rot[3] = {p[2], p[0], p[1]};
    ld_comm_ordered_sum(rot, 3, 1, &out);
    CHECK(out == 1.0f);
    /* one part is copied as it is: -0 stays -0 */
    const float mz = -0.0f;
    ld_comm_ordered_sum(&mz, 1, 1, &out);
    CHECK(out == 0.0f && signbit(out));
    /* on simulated ranks, flat and one rank per node: every rank gets 0 */
    for (int nodes = 1; nodes <= 3; nodes += 2) {
        ld_comm *c[3];
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_comm_sim_create(3, nodes, c, &err) == LD_OK, "%s", err.msg);
        float buf[3][2] = {{p[0], 2.0f}, {p[1], 3.0f}, {p[2], 4.0f}};
        rank_job jobs[3] = {{0}};
        for (int r = 0; r < 3; r++) jobs[r] = (rank_job){.buf = buf[r], .n = 2};
        if (run_group(c, jobs, 3)) return 1;
        for (int r = 0; r < 3; r++) {
            CHECK_MSG(jobs[r].st == LD_OK, "%s", jobs[r].err.msg);
            CHECK(buf[r][0] == 0.0f && buf[r][1] == 9.0f);
        }
    }
    return 0;
}

/* 4 ranks flat, in 2 nodes of 2, in 4 nodes of 1: the gathered parts and
 * the sums are the same bytes; the traffic counters see the node level. */
static int test_tp_sim_node_grouping(void)
{
    enum { R = 4, N = 1000 };
    static float src[R][N], buf[3][R][N], recv[3][R][R * N];
    uint32_t x = 12345;
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) {
            x = x * 1664525u + 1013904223u;
            src[r][i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * (r % 2 ? 1e6f : 1e-3f);
        }
    const int groupings[3] = {1, 2, 4};
    double inter[3];
    for (int gi = 0; gi < 3; gi++) {
        ld_comm *c[R];
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_comm_sim_create(R, groupings[gi], c, &err) == LD_OK, "%s", err.msg);
        for (int r = 0; r < R; r++) CHECK(c[r]->rank == r && c[r]->node == r / (R / groupings[gi]));
        rank_job jobs[R];
        memcpy(buf[gi], src, sizeof src);
        for (int r = 0; r < R; r++) jobs[r] = (rank_job){.buf = buf[gi][r], .recv = recv[gi][r], .n = N};
        double intra;
        /* the counters, read before the handles go */
        pthread_t th[R];
        for (int r = 0; r < R; r++) {
            jobs[r].c = c[r];
            CHECK(pthread_create(&th[r], NULL, rank_main, &jobs[r]) == 0);
        }
        for (int r = 0; r < R; r++) pthread_join(th[r], NULL);
        ld_comm_sim_traffic(c[0], &intra, &inter[gi]);
        for (int r = 0; r < R; r++) ld_comm_destroy(c[r]);
        for (int r = 0; r < R; r++) {
            CHECK_MSG(jobs[r].st == LD_OK, "%s", jobs[r].err.msg);
            CHECK(memcmp(recv[gi][r], src, sizeof src) == 0); /* the gather is a copy, rank order */
            CHECK(memcmp(buf[gi][r], buf[gi][0], sizeof buf[gi][0]) == 0); /* same bits on every rank */
        }
        fprintf(stderr, "  %d ranks in %d node(s): intra %.0f B, inter %.0f B over two all-gathers\n", R,
                groupings[gi], intra, inter[gi]);
    }
    CHECK(memcmp(buf[0], buf[1], sizeof buf[0]) == 0 && memcmp(buf[0], buf[2], sizeof buf[0]) == 0);
    /* the sum is the rank-order expression */
    for (int i = 0; i < N; i++) {
        float e = src[0][i];
        for (int r = 1; r < R; r++) e += src[r][i];
        CHECK(buf[0][0][i] == e);
    }
    /* flat: nothing between nodes; 2 nodes: each leader receives the other
     * node's 2 blocks per gather (2 gathers: the explicit one and the
     * reduce's); 4 nodes: 3 blocks each */
    CHECK(inter[0] == 0);
    CHECK(inter[1] == 2.0 * 2 * (2.0 * N * sizeof(float)));
    CHECK(inter[2] == 2.0 * 4 * (3.0 * N * sizeof(float)));
    return 0;
}

/* A rank that fails aborts the group: the others leave their collective
 * with an error instead of waiting for ever. */
static int test_tp_sim_abort(void)
{
    ld_comm *c[3];
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_comm_sim_create(3, 1, c, &err) == LD_OK);
    float b[3][4] = {{0}};
    rank_job jobs[3];
    for (int r = 0; r < 3; r++) jobs[r] = (rank_job){.buf = b[r], .n = 4, .abort_instead = r == 2};
    if (run_group(c, jobs, 3)) return 1;
    CHECK(jobs[0].st != LD_OK && jobs[1].st != LD_OK);
    CHECK_MSG(strstr(jobs[0].err.msg, "another rank") != NULL, "%s", jobs[0].err.msg);
    /* bad sizes */
    CHECK(ld_comm_sim_create(4, 3, c, &err) == LD_ERR_USAGE);
    CHECK(ld_comm_sim_create(0, 1, c, &err) == LD_ERR_USAGE);
    return 0;
}

/* a rank joining the group of `id` on its own thread, as each process of a
 * multi-node group does, then its collectives (rank_main) */
typedef struct rank_join {
    const unsigned char *id;
    int rank;
    rank_job job;
} rank_join;

static void *join_main(void *arg)
{
    rank_join *j = arg;
    j->job.st = ld_comm_nccl_create_rank(j->id, 2, j->rank, j->rank, 0, &j->job.c, &j->job.err);
    if (j->job.st != LD_OK) return NULL;
    rank_main(&j->job);
    ld_comm_destroy(j->job.c);
    return NULL;
}

/* ld_comm_nccl_unique_id + ld_comm_nccl_create_rank on two threads (device
 * r for rank r): the same gather and sum as ld_comm_nccl_create_all's */
static int nccl_by_rank(float b[2][5], float g[2][10])
{
    unsigned char id[LD_COMM_NCCL_ID_BYTES];
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_comm_nccl_unique_id(id, &err) == LD_OK, "%s", err.msg);
    rank_join j[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 5; i++) b[r][i] = (float)(r * 100 + i);
        j[r] = (rank_join){id, r, {.buf = b[r], .recv = g[r], .n = 5}};
        CHECK(pthread_create(&th[r], NULL, join_main, &j[r]) == 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
        CHECK_MSG(j[r].job.st == LD_OK, "rank %d: %s", r, j[r].job.err.msg);
        for (int i = 0; i < 5; i++)
            CHECK(g[r][i] == (float)i && g[r][5 + i] == (float)(100 + i) && b[r][i] == (float)(100 + 2 * i));
    }
    return 0;
}

/* The watchdog of a process's communicator (comm_nccl.c).  Rank 1 aborts
 * its own and leaves; rank 0, calling nothing meanwhile, finds its
 * communicator aborted by its watchdog (NCCL's asynchronous error polled)
 * when it next calls a collective.  Without the watchdog the message would
 * be the all-gather's own; ld_comm_check, asked before, voids nothing (no
 * collective was queued).  Or (stall) rank 1 stays, alive, calling
 * nothing until rank 0 is done: rank 0's collective, which NCCL would wait
 * for without end, fails once it is timeout_s old, saying so, and
 * ld_comm_check after it says what was queued is void. */
typedef struct watch_job {
    const unsigned char *id;
    int rank, stall;
    double timeout_s;
    atomic_int *left; /* rank 1 has aborted (stall: rank 0 is done) */
    atomic_int *made; /* the ranks past their making (rank 1 aborts after both: a making still being polled
                         may see a peer's abort as its own failure) */
    ld_status st, check_st;
    ld_error err, check_err;
    double took_s;
} watch_job;

static void *watch_main(void *arg)
{
    watch_job *j = arg;
    ld_comm *c = NULL;
    j->st = ld_comm_nccl_create_rank(j->id, 2, j->rank, j->rank, j->timeout_s, &c, &j->err);
    atomic_fetch_add(j->made, 1);
    if (j->st != LD_OK) {
        atomic_store(j->left, 1);
        return NULL;
    }
    float one = 1.0f;
    if (j->rank == 1 && j->stall) {
        while (!atomic_load(j->left)) nanosleep(&(struct timespec){0, 10000000L}, NULL);
    } else if (j->rank == 1) {
        while (atomic_load(j->made) < 2) nanosleep(&(struct timespec){0, 1000000L}, NULL);
        ld_comm_abort(c);
        atomic_store(j->left, 1);
    } else if (j->stall) {
        double t0 = ld_comm_now_s();
        j->st = ld_comm_all_reduce_sum(c, &one, 1, &j->err);
        j->took_s = ld_comm_now_s() - t0;
        j->check_st = ld_comm_check(c, &j->check_err);
        atomic_store(j->left, 1);
    } else {
        while (!atomic_load(j->left)) nanosleep(&(struct timespec){0, 10000000L}, NULL);
        nanosleep(&(struct timespec){0, 500000000L}, NULL); /* five of the watchdog's polls */
        j->check_st = ld_comm_check(c, &j->check_err); /* nothing was queued: nothing void */
        j->st = ld_comm_all_reduce_sum(c, &one, 1, &j->err);
    }
    ld_comm_destroy(c);
    return NULL;
}

static int watch_pair(watch_job j[2], int stall, double timeout_s)
{
    unsigned char id[LD_COMM_NCCL_ID_BYTES];
    ld_error err;
    CHECK_MSG(ld_comm_nccl_unique_id(id, &err) == LD_OK, "%s", err.msg);
    atomic_int left, made;
    atomic_init(&left, 0);
    atomic_init(&made, 0);
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        j[r] = (watch_job){.id = id, .rank = r, .stall = stall, .timeout_s = timeout_s, .left = &left, .made = &made};
        CHECK(pthread_create(&th[r], NULL, watch_main, &j[r]) == 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    return 0;
}

static int nccl_watchdog(void)
{
    watch_job j[2];
    if (watch_pair(j, 0, 0)) return 1;
    CHECK_MSG(j[1].st == LD_OK, "rank 1: %s", j[1].err.msg);
    CHECK_MSG(j[0].st == LD_ERR_MISMATCH && strstr(j[0].err.msg, "NCCL's asynchronous error"),
              "rank 0 after rank 1 left: %d %s", j[0].st, j[0].err.msg);
    CHECK_MSG(j[0].check_st == LD_OK, "aborted with nothing queued, yet void: %s", j[0].check_err.msg);
    fprintf(stderr, "  nccl watchdog: %s\n", j[0].err.msg);
    /* a stalled peer, timeout 0.5 s: rank 0 fails after it (and the grace
       its thread is given in a call: the emulator's collectives run there) */
    if (watch_pair(j, 1, 0.5)) return 1;
    CHECK_MSG(j[0].st == LD_ERR_MISMATCH && strstr(j[0].err.msg, "not complete 0.5 s after it was queued") &&
              strstr(j[0].err.msg, "stalled"), "rank 0 with rank 1 stalled: %d %s", j[0].st, j[0].err.msg);
    CHECK_MSG(j[0].check_st == LD_ERR_MISMATCH && strstr(j[0].check_err.msg, "stalled"), "check after: %d %s",
              j[0].check_st, j[0].check_err.msg);
    CHECK_MSG(j[0].took_s >= 0.5 && j[0].took_s < 30, "rank 0 left its collective after %.2f s", j[0].took_s);
    fprintf(stderr, "  nccl watchdog, a stalled peer: after %.2f s: %s\n", j[0].took_s, j[0].err.msg);
    return 0;
}

/* A group whose rank 1 never joins: rank 0's making fails at its timeout
 * (comm_nccl.c's nonblocking making, polled and aborted), where NCCL's
 * bootstrap would wait for ever, saying so. */
static int nccl_join_bounded(void)
{
    unsigned char id[LD_COMM_NCCL_ID_BYTES];
    ld_error err;
    CHECK_MSG(ld_comm_nccl_unique_id(id, &err) == LD_OK, "%s", err.msg);
    ld_comm *c = NULL;
    double t0 = ld_comm_now_s();
    ld_status st = ld_comm_nccl_create_rank(id, 2, 0, 0, 0.5, &c, &err);
    double took = ld_comm_now_s() - t0;
    CHECK_MSG(st == LD_ERR_IO && !c && strstr(err.msg, "the group of 2 was not made within 0.5 s"), "%d %s", st,
              err.msg);
    CHECK_MSG(took >= 0.5 && took < 30, "rank 0 alone gave up after %.2f s", took);
    fprintf(stderr, "  nccl, rank 1 never joining: after %.2f s: %s\n", took, err.msg);
    return 0;
}

/* The NCCL communicator's collectives on host memory (copied to the
 * device, gathered, summed there in rank order, copied back) on two GPUs,
 * made in one process and by the multi-process bootstrap, and its abort: a rank that aborts releases the other from its
 * collective.  Where there is no NCCL or no two GPUs, a clear refusal.
 * CI runs it on the CUDA emulator's two devices and NCCL (ctest
 * engine.tp.tp.emu). */
static int test_tp_cuda_nccl_comm(void)
{
    ld_comm *c[2];
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_comm_nccl_create_all(2, NULL, c, &err);
    if (st != LD_OK) {
        fprintf(stderr, "  nccl over 2 devices: %s\n", err.msg);
        CHECK_MSG(st == LD_ERR_UNSUPPORTED && (strstr(err.msg, "CUDA") || strstr(err.msg, "NCCL")), "%s", err.msg);
        return 0;
    }
    enum { N = 5 };
    float b[2][N], g[2][2 * N];
    rank_job jobs[2];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < N; i++) b[r][i] = (float)(r * 10 + i) + 0.25f;
        jobs[r] = (rank_job){.buf = b[r], .recv = g[r], .n = N};
    }
    if (run_group(c, jobs, 2)) return 1;
    for (int r = 0; r < 2; r++) {
        CHECK_MSG(jobs[r].st == LD_OK, "rank %d: %s", r, jobs[r].err.msg);
        for (int i = 0; i < N; i++) {
            CHECK(g[r][i] == (float)i + 0.25f && g[r][N + i] == (float)(10 + i) + 0.25f); /* rank order */
            CHECK(b[r][i] == ((float)i + 0.25f) + ((float)(10 + i) + 0.25f));
        }
    }
    /* the multi-process bootstrap (engine/README.md, multi-node): one id,
       then each rank joins on its own thread as a process would */
    if (nccl_by_rank(b, g)) return 1;
    if (nccl_watchdog()) return 1;
    if (nccl_join_bounded()) return 1;
    CHECK(ld_comm_nccl_create_all(2, NULL, c, &err) == LD_OK);
    for (int r = 0; r < 2; r++) jobs[r] = (rank_job){.buf = b[r], .n = N, .abort_instead = r == 1};
    if (run_group(c, jobs, 2)) return 1;
    CHECK_MSG(jobs[0].st != LD_OK && jobs[0].err.msg[0], "rank 0 left its collective without an error");
    fprintf(stderr, "  nccl over 2 devices: gather and ordered sum right (one process, and a rank a thread joining by "
                    "id); after an abort: %s\n", jobs[0].err.msg);
    return 0;
}

#if defined(LD_CUDA_EMU) && defined(LD_EMU_HAVE_NCCL)
#include <cuda_runtime_api.h>
#include <nccl.h>

/* The emulator's NCCL (tests/support/cuda_emu/emu_nccl.c) refuses what NCCL
 * refuses, so that the communicator's passing runs mean it called NCCL as
 * a GPU needs: buffers not in device memory, another device current than
 * the communicator's, a type it does not gather; the last error says why. */
static int test_tp_cuda_emu_nccl_refusals(void)
{
    ncclComm_t c[2];
    CHECK(ncclCommInitAll(c, 2, NULL) == ncclSuccess);
    float host[4] = {0}, *d_send = NULL, *d_recv = NULL;
    CHECK(cudaSetDevice(0) == cudaSuccess);
    CHECK(cudaMalloc((void **)&d_send, 2 * sizeof host) == cudaSuccess); /* room for 8: recv is the short one */
    CHECK(cudaMalloc((void **)&d_recv, 2 * sizeof host) == cudaSuccess);
    CHECK(ncclAllGather(host, d_recv, 4, ncclFloat, c[0], 0) == ncclInvalidUsage);
    CHECK_MSG(strstr(ncclGetLastError(c[0]), "send buffer is not device memory"), "%s", ncclGetLastError(c[0]));
    CHECK(ncclAllGather(d_send, d_recv, 8, ncclFloat, c[0], 0) == ncclInvalidUsage); /* recv holds 2 x 4 */
    CHECK_MSG(strstr(ncclGetLastError(c[0]), "receive buffer"), "%s", ncclGetLastError(c[0]));
    CHECK(ncclAllGather(d_send, d_recv, 4, ncclFloat, c[1], 0) == ncclInvalidUsage); /* device 0 current */
    CHECK_MSG(strstr(ncclGetLastError(c[1]), "current device"), "%s", ncclGetLastError(c[1]));
    CHECK(ncclAllGather(d_send, d_recv, 4, ncclHalf, c[0], 0) == ncclInvalidArgument);
    CHECK(strcmp(ncclGetErrorString(ncclInvalidUsage), "invalid usage") == 0);
    CHECK(cudaFree(d_send) == cudaSuccess && cudaFree(d_recv) == cudaSuccess);
    CHECK(ncclCommDestroy(c[0]) == ncclSuccess && ncclCommDestroy(c[1]) == ncclSuccess);
    return 0;
}
#define EMU_NCCL_CASES LD_CASE(test_tp_cuda_emu_nccl_refusals),
#else
#define EMU_NCCL_CASES
#endif

#ifdef LD_CUDA_EMU
#include "tests/support/cuda_emu/emu_sched.h"
/* graphs the emulator launched so far, every thread's */
static long graph_launches(void)
{
    return ld_emu_launches("graph launch");
}
#else
static long graph_launches(void)
{
    return -1; /* a GPU's are counted per thread (ld_cu_graph_stats_get): not here */
}
#endif

/* CUDA graphs under tensor parallelism: every rank on a thread of its own
 * in graph mode, the capture held around each collective (comm_nccl.c;
 * with the ranks sharing `gpus` GPUs, around nothing: their reduce waits
 * on the host).  The logits of `want` (TP 2 without graphs) bit for bit,
 * in one call and token by token, with graphs of 64 and of 5 operations
 * (a capture's end falling anywhere, next to a collective too).  On the
 * emulator (whose NCCL refuses a collective during capture) both ranks
 * launch graphs: TP 2 launches twice TP 1's with graphs of 64.  Graphs of
 * 5 also end at each collective (what is captured is launched there and
 * the count starts again, cuda_ops.h), so TP 2 launches at least twice
 * TP 1's: exactly twice only where the operations between two
 * collectives come in fives. */
static int check_tp_graphs(const ld_model *m, const seq *q, const float *want, int gpus)
{
    size_t nl = (size_t)q->T * (size_t)m->cfg.vocab;
    float *g = malloc(nl * sizeof *g);
    CHECK(g);
    static const char *const specs[] = {"graphs=on", "graphs=5"};
    for (int i = 0; i < 2; i++)
        for (int call = 0; call <= 1; call++) {
            ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = "cuda", .kernels = specs[i], .threads = 1, .gpus = gpus};
            ld_error err;
            long before = graph_launches();
            CHECK_MSG(run_tp(m, &o, 64, call, q->tokens, q->T, g, NULL, &err) == LD_OK, "%s: %s", specs[i], err.msg);
            long two = graph_launches() - before;
            CHECK_MSG(memcmp(g, want, nl * sizeof *g) == 0, "cuda tp 2 %s (%s): not the bits without graphs", specs[i],
                      call ? "token by token" : "one call");
            o.n = 1;
            before = graph_launches();
            CHECK_MSG(run_tp(m, &o, 64, call, q->tokens, q->T, g, NULL, &err) == LD_OK, "%s", err.msg);
            long one = graph_launches() - before;
            int small = strcmp(specs[i], "graphs=on") != 0;
            if (one >= 0)
                CHECK_MSG(one > 0 && (small ? two >= 2 * one : two == 2 * one),
                          "%s: tp 2 launched %ld graphs, tp 1 %ld", specs[i], two, one);
            fprintf(stderr, "  cuda tp 2%s %s, %s: bitwise without graphs (graphs launched: tp 1 %ld, tp 2 %ld)\n",
                    gpus == 1 ? " on one GPU" : "", specs[i], call ? "token by token" : "one call", one, two);
        }
    free(g);
    return 0;
}

/* the CUDA cases' model: qwen3, ref.json's first sequence, room for two
 * runs' logits [T][vocab] */
typedef struct qwen3_run {
    ld_model *m;
    seq q;
    size_t nl;
    float *a, *b;
} qwen3_run;

static int qwen3_open(qwen3_run *r)
{
    memset(r, 0, sizeof *r);
    if (open_model("qwen3", &r->m)) return 1;
    load_seq(0, &r->q);
    r->nl = (size_t)r->q.T * (size_t)r->m->cfg.vocab;
    r->a = malloc(r->nl * sizeof *r->a);
    r->b = malloc(r->nl * sizeof *r->b);
    CHECK(r->a && r->b);
    return 0;
}

static int qwen3_close(qwen3_run *r)
{
    free(r->a);
    free(r->b);
    ld_model_close(r->m);
    return 0;
}

/* logits of the sequence within 1e-5 (normalised) of transformers' */
static int near_transformers(const qwen3_run *r, const float *logits, const char *what)
{
    float *ref = load_f32(MDIR "qwen3", "ref-a.logits.f32", r->nl);
    CHECK(ref);
    double mx, e = nerr(logits, ref, r->nl, &mx);
    free(ref);
    fprintf(stderr, "  %s: logits nerr %.3g (max|d| %.3g) vs transformers\n", what, e, mx);
    CHECK_MSG(e < 1e-5, "%s: logits nerr %.3g vs transformers", what, e);
    return 0;
}

static int test_tp_cuda_nccl(void)
{
    qwen3_run r;
    if (qwen3_open(&r)) return 1;
    ld_model *m = r.m;
    seq q = r.q;
    size_t nl = r.nl;
    float *a = r.a, *b = r.b;
    ld_error err;
    ld_error_clear(&err);
    ld_tp_opts o = {.n = 1, .n_nodes = 1, .backend = "cuda", .kernels = NULL, .threads = 1};
    ld_status st = run_tp(m, &o, 64, 0, q.tokens, q.T, a, NULL, &err);
    if (st != LD_OK) {
        fprintf(stderr, "  cuda tp 1: %s (nccl in this build: %s)\n", err.msg, ld_comm_nccl_available() ? "yes" : "no");
        CHECK_MSG(st == LD_ERR_UNSUPPORTED && (strstr(err.msg, "CUDA") || strstr(err.msg, "NCCL")), "%s", err.msg);
        return qwen3_close(&r);
    }
    /* a GPU and NCCL: the plain CUDA forward gives the same bits */
    ld_backend *be = NULL;
    ld_session *s = NULL;
    CHECK_MSG(ld_backend_cuda_create(0, NULL, &be, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_session_create(m, be, 64, 64, &s, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_session_eval(s, q.tokens, q.T, b, NULL, &err) == LD_OK, "%s", err.msg);
    ld_session_destroy(s);
    ld_backend_destroy(be);
    CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "cuda tp 1 over NCCL differs from the plain CUDA forward");
    fprintf(stderr, "  cuda tp 1 over NCCL: bitwise the plain CUDA forward\n");
    /* the reduce on the device (buf_mem: the CUDA buffer in place) and
     * through the host (no buf_mem: NCCL's staging) give the same bits */
    if (run_path(m, &o, 1, 0, &q, b, NULL, NULL, NULL)) return 1;
    CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "cuda tp 1: the reduce on the device and through the host differ");
    o.n = 2;
    int gpus = 0, nccl = 0;
    CHECK_MSG(ld_tp_cuda_placement(&o, &gpus, &nccl, &err) == LD_OK, "%s", err.msg);
    st = nccl ? run_tp(m, &o, 64, 0, q.tokens, q.T, a, NULL, &err) : LD_ERR_UNSUPPORTED;
    if (!nccl) /* the ranks would share a GPU: test_tp_cuda_shared_gpu */
        snprintf(err.msg, sizeof err.msg, "not over NCCL here (%d GPU%s)", gpus, gpus > 1 ? "s" : "");
    if (st == LD_OK) {
        if (near_transformers(&r, a, "cuda tp 2 over NCCL")) return 1;
        CHECK(run_tp(m, &o, 64, 1, q.tokens, q.T, b, NULL, &err) == LD_OK);
        CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "cuda tp 2: prefill and token by token differ");
        if (run_path(m, &o, 1, 0, &q, b, NULL, NULL, NULL)) return 1;
        CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "cuda tp 2: the reduce on the device and through the host differ");
        if (check_tp_graphs(m, &q, a, 0)) return 1;
    } else {
        fprintf(stderr, "  cuda tp 2: %s\n", err.msg);
        CHECK(st == LD_ERR_UNSUPPORTED);
    }
    return qwen3_close(&r);
}

/* Ranks sharing GPUs (ld_tp_opts.gpus below the ranks: a model split N
 * ways on fewer cards, as on a one-GPU machine, where NCCL refuses two
 * ranks on a device): rank k on GPU k % gpus, the collectives through host
 * memory.  TP 2 on one GPU: within 1e-5 of transformers, prefill and token
 * by token bitwise, with CUDA graphs bitwise (check_tp_graphs),
 * the session reporting its placement; where NCCL and two GPUs are there
 * (the emulator with two devices), bitwise TP 2 over NCCL: the transport
 * does not change the bits.  More GPUs than the machine has: refused. */
static int test_tp_cuda_shared_gpu(void)
{
    qwen3_run r;
    if (qwen3_open(&r)) return 1;
    ld_model *m = r.m;
    seq q = r.q;
    size_t nl = r.nl;
    float *a = r.a, *b = r.b;
    ld_error err;
    ld_error_clear(&err);
    ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = "cuda", .threads = 1, .gpus = 1};
    ld_tp_session *s = NULL;
    ld_status st = ld_tp_session_create(m, &o, 64, 64, &s, &err);
    if (st != LD_OK) {
        fprintf(stderr, "  cuda tp 2 on one GPU: %s\n", err.msg);
        CHECK_MSG(st == LD_ERR_UNSUPPORTED && strstr(err.msg, "CUDA"), "%s", err.msg);
        return qwen3_close(&r);
    }
    CHECK_EQ_INT(ld_tp_session_gpus(s), 1);
    CHECK_MSG(!strcmp(ld_tp_session_comm(s, 0)->ops->name, "sim"), "%s", ld_tp_session_comm(s, 0)->ops->name);
    ld_tp_session_destroy(s);
    CHECK_MSG(run_tp(m, &o, 64, 0, q.tokens, q.T, a, NULL, &err) == LD_OK, "%s", err.msg);
    if (near_transformers(&r, a, "cuda tp 2 on one GPU")) return 1;
    CHECK_MSG(run_tp(m, &o, 64, 1, q.tokens, q.T, b, NULL, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "cuda tp 2 on one GPU: prefill and token by token differ");
    if (check_tp_graphs(m, &q, a, 1)) return 1;
    ld_tp_opts on = o;
    on.gpus = 0; /* one a rank, over NCCL, where there are two */
    int gpus = 0, nccl = 0;
    CHECK(ld_tp_cuda_placement(&on, &gpus, &nccl, &err) == LD_OK);
    if (nccl) {
        CHECK_MSG(run_tp(m, &on, 64, 0, q.tokens, q.T, b, NULL, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "cuda tp 2: over NCCL and on one GPU through the host differ");
        fprintf(stderr, "  cuda tp 2 over NCCL (2 GPUs): bitwise the ranks sharing one GPU\n");
    } else {
        fprintf(stderr, "  cuda tp 2 over NCCL: not here (%d GPU%s, NCCL %s)\n", gpus, gpus > 1 ? "s" : "",
                ld_comm_nccl_available() ? "built" : "not built");
    }
    ld_tp_opts over = o;
    over.gpus = ld_backend_cuda_device_count() + 1;
    CHECK(ld_test_expect_fail(ld_tp_session_create(m, &over, 64, 64, &s, &err), LD_ERR_USAGE, &err,
                              "GPUs asked for: this machine has") == 0);
    return qwen3_close(&r);
}

/* ------------------------------------------------------------ processes */

/* Rank `rank` of a group of n processes over the shared mapping at
 * `path`: the sequence in calls of 5 tokens (4 for the rank `short_rank`,
 * which puts the ranks out of step), its logits to
 * <path>.<rank>.  The exit code: 0, 1 for a failed eval (after writing the
 * error), 2 and up for a broken harness. */
static int process_rank(const ld_model *m, const char *backend, int n, int rank, const char *path, const seq *q,
                        int short_rank)
{
    ld_comm *c = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_comm_shm_join(path, n, rank, 30.0, 30.0, &c, &err) != LD_OK) {
        fprintf(stderr, "  rank %d: %s\n", rank, err.msg);
        return 2;
    }
    size_t V = (size_t)m->cfg.vocab;
    float *l = malloc((size_t)q->T * V * sizeof *l);
    if (!l) return 3;
    ld_tp_opts o = {.n = n, .n_nodes = 1, .backend = backend, .threads = 1, .comm = c};
    int T = q->T;
    ld_status st = run_tp(m, &o, 64, rank == short_rank ? 4 : 5, q->tokens, T, l, NULL, &err);
    char out[700];
    snprintf(out, sizeof out, "%s.%d", path, rank);
    FILE *f = fopen(out, "wb");
    if (!f) return 4;
    if (st == LD_OK) fwrite(l, sizeof *l, (size_t)T * V, f);
    else fputs(err.msg, f);
    fclose(f);
    free(l);
    ld_comm_destroy(c);
    return st == LD_OK ? 0 : 1;
}

/* Forks the n ranks; exits[r] their exit codes. */
static int fork_ranks(const ld_model *m, const char *backend, int n, const char *path, const seq *q, int short_rank,
                      int *exits)
{
    pid_t pid[8];
    for (int r = 0; r < n; r++) {
        fflush(NULL);
        pid[r] = fork();
        if (pid[r] < 0) return 1;
        if (pid[r] == 0) _exit(process_rank(m, backend, n, r, path, q, short_rank));
    }
    for (int r = 0; r < n; r++) {
        int ws = 0;
        if (waitpid(pid[r], &ws, 0) != pid[r]) return 1;
        exits[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 100;
    }
    return 0;
}

/* What ld_tp_opts.comm is for: each rank a process of its own (as on a
 * multi-node deployment, one process a GPU), joined through the shared
 * mapping.  Every process's logits are bitwise the one-process group's
 * (threads over the simulated communicator): the ordered sum does not
 * depend on the transport.  A rank out of step (another token count)
 * ends every rank with an error instead of a hang. */
static int test_tp_processes(void)
{
    static const struct { const char *name; int n; const char *backend; } runs[] = {
        {"qwen3", 2, "cpu"}, {"qwen2", 2, "ref"}, {"smollm", 4, "cpu"}, {"llama3", 2, "cpu"}};
    char dir[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ld-tp-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(dir) != NULL);
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        ld_model *m = NULL;
        if (open_model(runs[i].name, &m)) return 1;
        seq q;
        load_seq(1, &q);
        size_t V = (size_t)m->cfg.vocab, T = (size_t)q.T;
        float *want = malloc(T * V * sizeof *want);
        CHECK(want);
        ld_tp_opts o = {.n = runs[i].n, .n_nodes = 1, .backend = runs[i].backend, .threads = 1};
        ld_error err;
        CHECK_MSG(run_tp(m, &o, 64, 0, q.tokens, q.T, want, NULL, &err) == LD_OK, "%s", err.msg);
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, runs[i].name);
        for (int out_of_step = 0; out_of_step <= 1; out_of_step++) {
            int exits[8];
            CHECK(fork_ranks(m, runs[i].backend, runs[i].n, path, &q, out_of_step ? 1 : -1, exits) == 0);
            for (int r = 0; r < runs[i].n; r++) {
                char out[700];
                snprintf(out, sizeof out, "%s.%d", path, r);
                size_t bytes = 0;
                unsigned char *got = ld_test_read_bytes(out, &bytes);
                unlink(out);
                CHECK_MSG(got, "%s: rank %d wrote nothing (exit %d)", runs[i].name, r, exits[r]);
                if (out_of_step) {
                    CHECK_MSG(exits[r] == 1, "%s rank %d out of step: exit %d", runs[i].name, r, exits[r]);
                    fprintf(stderr, "  %s out of step, rank %d: %.*s\n", runs[i].name, r, (int)bytes, got);
                } else {
                    CHECK_MSG(exits[r] == 0 && bytes == T * V * sizeof(float) && memcmp(got, want, bytes) == 0,
                              "%s tp %d: rank %d's logits (exit %d, %zu bytes) are not the threads' bits",
                              runs[i].name, runs[i].n, r, exits[r], bytes);
                }
                free(got);
            }
        }
        fprintf(stderr, "  %-8s tp %d (%s) as %d processes: every rank bitwise the threads' logits\n", runs[i].name,
                runs[i].n, runs[i].backend, runs[i].n);
        free(want);
        ld_model_close(m);
    }
    rmdir(dir);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_tp_ordered_sum_order), LD_CASE(test_tp_sim_node_grouping), LD_CASE(test_tp_sim_abort),
    LD_CASE(test_tp_cuda_nccl_comm), LD_CASE(test_tp_cuda_nccl),
    LD_CASE(test_tp_cuda_shared_gpu), LD_CASE(test_tp_processes), EMU_NCCL_CASES
};

LD_TEST_MAIN(tests)
