/* test_thread_pool.c - the CPU backends' thread pool
 * (engine/backend/cpu/backend_ref_pool.c): every item of a run computed
 * exactly once, by ranges or first come, first served, on 2 and 3 threads;
 * and the hand-offs when a side sleeps rather than spins: workers idle
 * past SPIN_NS between runs (they sleep on `go` and must be woken), and a
 * worker that takes longer than SPIN_NS over its range (the caller sleeps
 * on `done` and must be woken).  A lost wake-up hangs the test, which
 * ctest's timeout then fails.
 *
 *   test_thread_pool [case-filter] */
#include "engine/backend/cpu/backend_ref_internal.h"
#include "tests/support/ld_test.h"

#include <time.h>

#define ITEMS 257

typedef struct pool_task {
    atomic_int count[ITEMS];
    long worker_ns; /* how long a worker (tid > 0) sleeps in each call */
} pool_task;

static void sleep_ns(long ns)
{
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

static void count_items(void *ctx, int tid, size_t i0, size_t i1)
{
    pool_task *t = ctx;
    if (tid > 0 && t->worker_ns) sleep_ns(t->worker_ns);
    for (size_t i = i0; i < i1; i++) atomic_fetch_add(&t->count[i], 1);
}

/* `runs` runs of ITEMS items with grain g, idle_ns between them; 0 when
 * every item of every run was counted once */
static int runs_count_once(ref_backend *rb, int runs, size_t grain, long idle_ns, long worker_ns)
{
    static pool_task t;
    for (int r = 0; r < runs; r++) {
        for (int i = 0; i < ITEMS; i++) atomic_store(&t.count[i], 0);
        t.worker_ns = worker_ns;
        ld_refb_run_grain(rb, count_items, &t, ITEMS, grain);
        for (int i = 0; i < ITEMS; i++)
            CHECK_MSG(atomic_load(&t.count[i]) == 1, "run %d (grain %zu, %d threads): item %d counted %d times", r,
                      grain, rb->n_threads, i, atomic_load(&t.count[i]));
        if (idle_ns) sleep_ns(idle_ns);
    }
    return 0;
}

static int with_pool(int threads, int (*body)(ref_backend *))
{
    ld_backend *be = NULL;
    ld_error err = {0};
    CHECK_MSG(ld_backend_cpu_create(threads, &be, &err) == LD_OK, "%s", err.msg);
    int rc = body((ref_backend *)be);
    be->ops->destroy(be);
    return rc;
}

/* back to back, the workers spinning */
static int spinning(ref_backend *rb)
{
    CHECK(runs_count_once(rb, 2000, 0, 0, 0) == 0);
    CHECK(runs_count_once(rb, 2000, 1, 0, 0) == 0);
    return runs_count_once(rb, 2000, 7, 0, 0);
}

/* idle three times SPIN_NS between runs: the workers asleep at each start */
static int workers_sleep(ref_backend *rb)
{
    CHECK(runs_count_once(rb, 40, 0, 3 * SPIN_NS, 0) == 0);
    return runs_count_once(rb, 40, 5, 3 * SPIN_NS, 0);
}

/* a worker's range three times SPIN_NS long: the caller asleep at each end */
static int caller_sleeps(ref_backend *rb)
{
    return runs_count_once(rb, 40, 0, 0, 3 * SPIN_NS);
}

/* idle and slow workers by turns, around SPIN_NS, so that the sleeps and
 * the wake-ups meet at many offsets */
static int mixed(ref_backend *rb)
{
    for (int k = 0; k < 60; k++) {
        long idle = (k % 3) * SPIN_NS / 2 + k * 7919L, slow = ((k + 1) % 3) * SPIN_NS / 2;
        CHECK(runs_count_once(rb, 2, (size_t)(k % 4), idle, slow) == 0);
    }
    return 0;
}

static int test_spinning_2(void) { return with_pool(2, spinning); }
static int test_spinning_3(void) { return with_pool(3, spinning); }
static int test_workers_sleep_2(void) { return with_pool(2, workers_sleep); }
static int test_workers_sleep_3(void) { return with_pool(3, workers_sleep); }
static int test_caller_sleeps_2(void) { return with_pool(2, caller_sleeps); }
static int test_caller_sleeps_3(void) { return with_pool(3, caller_sleeps); }
static int test_mixed_2(void) { return with_pool(2, mixed); }
static int test_mixed_3(void) { return with_pool(3, mixed); }

static const ld_test_case tests[] = {
    LD_CASE(test_spinning_2),      LD_CASE(test_spinning_3),      LD_CASE(test_workers_sleep_2),
    LD_CASE(test_workers_sleep_3), LD_CASE(test_caller_sleeps_2), LD_CASE(test_caller_sleeps_3),
    LD_CASE(test_mixed_2),         LD_CASE(test_mixed_3),
};

LD_TEST_MAIN(tests)
