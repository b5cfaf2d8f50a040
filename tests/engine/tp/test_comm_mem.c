/* test_comm_mem.c - reducing memory where it lives (engine/tp/comm.h's
 * all_reduce_sum_mem, backend.h's buf_mem, mem_kind.h): the CPU backends
 * give their buffers' host memory with buf_read's range check; the
 * simulated communicator reduces host memory in place with the ordered
 * sum's bits (-0 kept, the rank order where it matters) on 1, 2 and 3
 * ranks, flat and in nodes, counted apart from the buffer path, and
 * refuses CUDA memory having done nothing; a communicator without the op
 * refuses every kind. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/tp/comm.h"
#include "tests/support/ld_test.h"

enum { MAX_RANKS = 3, MAX_N = 64 };

/* One rank's call, run on its own thread. */
typedef struct mem_job {
    ld_comm *c;
    float buf[MAX_N];
    size_t n;
    int kind, device;
    int via_buffer; /* all_reduce_sum instead of all_reduce_sum_mem */
    ld_status st;
    ld_error err;
} mem_job;

static void *job_main(void *arg)
{
    mem_job *j = arg;
    ld_error_clear(&j->err);
    ld_mem m = {j->buf, j->kind, j->device};
    j->st = j->via_buffer ? ld_comm_all_reduce_sum(j->c, j->buf, j->n, &j->err)
                          : ld_comm_all_reduce_sum_mem(j->c, &m, j->n, &j->err);
    return NULL;
}

/* Runs every rank's job on a thread of its own, over the group c. */
static int run_jobs(ld_comm **c, mem_job *jobs, int size)
{
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < size; r++) {
        jobs[r].c = c[r];
        CHECK(pthread_create(&th[r], NULL, job_main, &jobs[r]) == 0);
    }
    for (int r = 0; r < size; r++) pthread_join(th[r], NULL);
    return 0;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* parts [size][n] reduced in place on `size` simulated ranks in `nodes`
 * nodes: every rank holds want [n], bit for bit, and the group counted
 * `size` in-place reduces and no buffer one. */
static int check_in_place(int size, int nodes, const float *parts, size_t n, const float *want)
{
    ld_comm *c[MAX_RANKS];
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_comm_sim_create(size, nodes, c, &err) == LD_OK, "%s", err.msg);
    mem_job jobs[MAX_RANKS];
    for (int r = 0; r < size; r++) {
        jobs[r] = (mem_job){.n = n, .kind = LD_MEM_HOST};
        memcpy(jobs[r].buf, parts + (size_t)r * n, n * sizeof *parts);
    }
    if (run_jobs(c, jobs, size)) return 1;
    uint64_t in_place, buffer;
    ld_comm_sim_reduces(c[0], &in_place, &buffer);
    for (int r = 0; r < size; r++) ld_comm_destroy(c[r]);
    for (int r = 0; r < size; r++) {
        CHECK_MSG(jobs[r].st == LD_OK, "%s", jobs[r].err.msg);
        for (size_t i = 0; i < n; i++)
            CHECK_MSG(bits(jobs[r].buf[i]) == bits(want[i]), "%d ranks in %d node(s), rank %d [%zu]: %a, want %a",
                      size, nodes, r, i, (double)jobs[r].buf[i], (double)want[i]);
    }
    CHECK_MSG(in_place == (uint64_t)size && buffer == 0, "counted %llu in place, %llu buffer",
              (unsigned long long)in_place, (unsigned long long)buffer);
    return 0;
}

/* The ordered sum's bits: one rank copies (-0 stays -0, no 0 + p); two
 * ranks keep -0 only where both are -0; on three, (1e8, 1, -1e8) is 0 in
 * rank order (1e8 + 1 rounds back to 1e8) while (1e8, -1e8, 1) is 1. */
static int test_comm_mem_ordered_bits(void)
{
    const float one[4] = {-0.0f, 1.5f, 1e8f, -3.25e-7f};
    if (check_in_place(1, 1, one, 4, one)) return 1;

    const float two[2][5] = {{-0.0f, -0.0f, 0.0f, 1e8f, 0.1f}, {-0.0f, 0.0f, -0.0f, 1.0f, 0.2f}};
    const float two_want[5] = {-0.0f, 0.0f, 0.0f, 1e8f, 0.1f + 0.2f};
    CHECK(signbit(two_want[0]) && !signbit(two_want[1]));
    if (check_in_place(2, 1, &two[0][0], 5, two_want) || check_in_place(2, 2, &two[0][0], 5, two_want)) return 1;

    const float three[3][5] = {{1e8f, 1e8f, -0.0f, -0.0f, 1.0f},
                               {1.0f, -1e8f, -0.0f, 0.0f, 1e-8f},
                               {-1e8f, 1.0f, -0.0f, -0.0f, 1e-8f}};
    /* the last column: 1 + 1e-8 rounds to 1 twice over in rank order */
    const float three_want[5] = {0.0f, 1.0f, -0.0f, 0.0f, 1.0f};
    for (int nodes = 1; nodes <= 3; nodes += 2)
        if (check_in_place(3, nodes, &three[0][0], 5, three_want)) return 1;
    return 0;
}

/* The in-place reduce is the buffer reduce's bits, the rank-order
 * expression, on values whose sum depends on the order: a large part,
 * nearly its negation, a small one (lost in the reverse order, where it
 * meets the large one first). */
static int test_comm_mem_same_as_buffer(void)
{
    enum { R = 3, N = MAX_N };
    float parts[R][N];
    uint32_t x = 2463534242u;
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            float u = (float)(x >> 8) / 16777216.0f - 0.5f;
            parts[r][i] = r == 0 ? u * 3e7f : r == 1 ? -parts[0][i] + u * 64.0f : u;
        }
    int order_matters = 0;
    for (int i = 0; i < N; i++) order_matters += (parts[0][i] + parts[1][i]) + parts[2][i] !=
                                                 (parts[2][i] + parts[1][i]) + parts[0][i];
    CHECK(order_matters > N / 4);
    mem_job out[2][R];
    for (int via = 0; via < 2; via++) {
        ld_comm *c[R];
        ld_error err;
        ld_error_clear(&err);
        CHECK(ld_comm_sim_create(R, 1, c, &err) == LD_OK);
        for (int r = 0; r < R; r++) {
            out[via][r] = (mem_job){.n = N, .kind = LD_MEM_HOST, .via_buffer = via};
            memcpy(out[via][r].buf, parts[r], sizeof parts[r]);
        }
        if (run_jobs(c, out[via], R)) return 1;
        uint64_t in_place, buffer;
        ld_comm_sim_reduces(c[0], &in_place, &buffer);
        for (int r = 0; r < R; r++) ld_comm_destroy(c[r]);
        CHECK(in_place == (via ? 0u : (uint64_t)R) && buffer == (via ? (uint64_t)R : 0u));
        for (int r = 0; r < R; r++) CHECK_MSG(out[via][r].st == LD_OK, "%s", out[via][r].err.msg);
    }
    for (int r = 0; r < R; r++) CHECK(memcmp(out[0][r].buf, out[1][r].buf, sizeof out[0][r].buf) == 0);
    for (int i = 0; i < N; i++) CHECK(out[0][0].buf[i] == (parts[0][i] + parts[1][i]) + parts[2][i]);
    return 0;
}

/* CUDA memory (or a kind unknown) is refused on every rank before anything
 * happens: the buffers as they were, no byte moved, nothing counted; the
 * group still works afterwards. */
static int test_comm_mem_cuda_refused(void)
{
    enum { R = 2 };
    ld_comm *c[R];
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_comm_sim_create(R, 2, c, &err) == LD_OK);
    const int kinds[2] = {LD_MEM_CUDA, 7};
    mem_job jobs[R];
    for (int k = 0; k < 2; k++) {
        for (int r = 0; r < R; r++) jobs[r] = (mem_job){.buf = {1.0f + (float)r, -0.0f}, .n = 2, .kind = kinds[k]};
        if (run_jobs(c, jobs, R)) return 1;
        for (int r = 0; r < R; r++) {
            CHECK_MSG(jobs[r].st == LD_ERR_UNSUPPORTED, "kind %d: %d %s", kinds[k], jobs[r].st, jobs[r].err.msg);
            CHECK(jobs[r].buf[0] == 1.0f + (float)r && signbit(jobs[r].buf[1]));
        }
    }
    CHECK_MSG(strstr(jobs[0].err.msg, "host memory"), "%s", jobs[0].err.msg);
    double intra, inter;
    uint64_t in_place, buffer;
    ld_comm_sim_traffic(c[0], &intra, &inter);
    ld_comm_sim_reduces(c[0], &in_place, &buffer);
    CHECK(intra == 0 && inter == 0 && in_place == 0 && buffer == 0);
    /* not left half-way through a collective: a host reduce still works */
    for (int r = 0; r < R; r++) jobs[r] = (mem_job){.buf = {1.0f + (float)r}, .n = 1, .kind = LD_MEM_HOST};
    if (run_jobs(c, jobs, R)) return 1;
    for (int r = 0; r < R; r++) CHECK_MSG(jobs[r].st == LD_OK && jobs[r].buf[0] == 3.0f, "%s", jobs[r].err.msg);
    for (int r = 0; r < R; r++) ld_comm_destroy(c[r]);
    return 0;
}

/* A communicator whose table has no all_reduce_sum_mem refuses every
 * kind without calling anything. */
static int test_comm_mem_optional_op(void)
{
    ld_comm *c[1];
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_comm_sim_create(1, 1, c, &err) == LD_OK);
    ld_comm_ops ops = *c[0]->ops;
    ops.all_reduce_sum_mem = NULL;
    ld_comm bare = *c[0];
    bare.ops = &ops;
    float v = -0.0f;
    ld_mem m = {&v, LD_MEM_HOST, 0};
    CHECK(ld_comm_all_reduce_sum_mem(&bare, &m, 1, &err) == LD_ERR_UNSUPPORTED && signbit(v));
    CHECK_MSG(strstr(err.msg, "sim communicator"), "%s", err.msg);
    uint64_t in_place, buffer;
    ld_comm_sim_reduces(c[0], &in_place, &buffer);
    CHECK(in_place == 0 && buffer == 0);
    ld_comm_destroy(c[0]);
    return 0;
}

/* buf_mem on both CPU backends: the buffer's own host memory at the
 * offset (a write there is what buf_read reads), buf_read's range check. */
static int test_comm_mem_cpu_buf_mem(void)
{
    for (int fast = 0; fast < 2; fast++) {
        ld_backend *be = NULL;
        ld_buf *b = NULL;
        ld_error err;
        ld_error_clear(&err);
        CHECK(ld_backend_cpu_create_ex(1, fast, NULL, &be, &err) == LD_OK);
        CHECK(be->ops->buf_mem);
        CHECK(be->ops->buf_alloc(be, 6, &b, &err) == LD_OK);
        ld_mem m = {NULL, 0, -1};
        CHECK_MSG(be->ops->buf_mem(be, b, 2, 4, &m, &err) == LD_OK, "%s", err.msg);
        CHECK(m.kind == LD_MEM_HOST && m.device == 0 && m.p);
        for (int i = 0; i < 4; i++) m.p[i] = 10.0f + (float)i;
        float got[6];
        CHECK(be->ops->buf_read(be, b, 0, got, 6, &err) == LD_OK);
        CHECK(got[0] == 0.0f && got[1] == 0.0f && got[2] == 10.0f && got[5] == 13.0f);
        CHECK(be->ops->buf_mem(be, b, 6, 0, &m, &err) == LD_OK); /* empty, at the end */
        CHECK(be->ops->buf_mem(be, b, 3, 4, &m, &err) == LD_ERR_USAGE);
        CHECK_MSG(strstr(err.msg, "outside a buffer of 6"), "%s", err.msg);
        CHECK(be->ops->buf_mem(be, b, 7, 0, &m, &err) == LD_ERR_USAGE);
        CHECK(be->ops->buf_mem(be, b, 1, SIZE_MAX, &m, &err) == LD_ERR_USAGE);
        be->ops->buf_free(be, b);
        ld_backend_destroy(be);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_comm_mem_ordered_bits),  LD_CASE(test_comm_mem_same_as_buffer),
    LD_CASE(test_comm_mem_cuda_refused),  LD_CASE(test_comm_mem_optional_op),
    LD_CASE(test_comm_mem_cpu_buf_mem),
};

LD_TEST_MAIN(cases)
