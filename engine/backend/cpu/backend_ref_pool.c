/* backend_ref_pool.c - the CPU backends' thread pool: each op's items cut
 * into one contiguous range per thread, or handed out first come, first
 * served; workers spin for a while before they sleep (backend_ref_internal.h
 * says why); per-thread scratch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ref_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>


/* Which thread computes an item never changes the item's result (each is
 * computed whole by one call, scratch is per thread and rewritten per
 * item), so ranges may also be handed out first come, first served: the
 * matmuls are, so that a thread slowed by the other's memory traffic does
 * not leave the other waiting. */
static void run_chunk(ref_backend *rb, task_fn fn, void *ctx, size_t n, int tid)
{
    if (rb->grain) {
        size_t g = rb->grain, i0;
        while ((i0 = atomic_fetch_add_explicit(&rb->next, g, memory_order_relaxed)) < n)
            fn(ctx, tid, i0, n - i0 < g ? n : i0 + g);
        return;
    }
    size_t nt = (size_t)rb->n_threads;
    size_t i0 = n * (size_t)tid / nt, i1 = n * (size_t)(tid + 1) / nt;
    if (i0 < i1) fn(ctx, tid, i0, i1);
}

static long elapsed_ns(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}


/* The sleeps on both sides follow one rule: the sleeper announces itself
 * (sleepers, caller_asleep) before its last look at the condition, the
 * waker changes the condition before it looks for a sleeper, both with
 * sequentially consistent atomics.  So either the waker sees the sleeper
 * and signals under the mutex (which the sleeper holds until it waits), or
 * the sleeper's last look sees the change and it does not wait. */

/* spins until gen != seen or quit, then sleeps until then */
static unsigned wait_for_work(ref_backend *rb, unsigned seen)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 0;; i++) {
        unsigned g = atomic_load_explicit(&rb->gen, memory_order_acquire);
        if (g != seen || atomic_load(&rb->quit)) return g;
        ld_spin_relax(i);
        if ((i & 255) == 255 && elapsed_ns(&t0) > SPIN_NS) break;
    }
    pthread_mutex_lock(&rb->mu);
    atomic_fetch_add(&rb->sleepers, 1);
    unsigned g;
    while ((g = atomic_load(&rb->gen)) == seen && !atomic_load(&rb->quit)) pthread_cond_wait(&rb->go, &rb->mu);
    atomic_fetch_sub(&rb->sleepers, 1);
    pthread_mutex_unlock(&rb->mu);
    return g;
}

/* the last worker of a run: wakes the caller if it sleeps */
static void run_done(ref_backend *rb)
{
    if (!atomic_load(&rb->caller_asleep)) return;
    pthread_mutex_lock(&rb->mu);
    pthread_cond_signal(&rb->done);
    pthread_mutex_unlock(&rb->mu);
}

void *ld_refb_worker(void *arg)
{
    ref_backend *rb = ((worker_arg *)arg)->rb;
    int tid = ((worker_arg *)arg)->tid;
    free(arg);
    unsigned seen = 0; /* workers start before the first run */
    for (;;) {
        seen = wait_for_work(rb, seen);
        if (atomic_load(&rb->quit)) break;
        run_chunk(rb, rb->fn, rb->ctx, rb->n_items, tid);
        if (atomic_fetch_sub(&rb->pending, 1) == 1) run_done(rb);
    }
    return NULL;
}

void ld_refb_run_grain(ref_backend *rb, task_fn fn, void *ctx, size_t n, size_t grain)
{
    if (rb->n_threads == 1 || n < 2) {
        if (n) fn(ctx, 0, 0, n);
        return;
    }
    rb->fn = fn;
    rb->ctx = ctx;
    rb->n_items = n;
    rb->grain = grain;
    atomic_store_explicit(&rb->next, 0, memory_order_relaxed);
    atomic_store_explicit(&rb->pending, rb->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&rb->gen, 1);
    if (atomic_load(&rb->sleepers)) { /* wakes the workers that went to sleep */
        pthread_mutex_lock(&rb->mu);
        pthread_cond_broadcast(&rb->go);
        pthread_mutex_unlock(&rb->mu);
    }
    run_chunk(rb, fn, ctx, n, 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 0; atomic_load_explicit(&rb->pending, memory_order_acquire); i++) {
        ld_spin_relax(i);
        if ((i & 255) == 255 && elapsed_ns(&t0) > SPIN_NS) break;
    }
    if (!atomic_load(&rb->pending)) return; /* the spin saw them finish */
    pthread_mutex_lock(&rb->mu);
    atomic_store(&rb->caller_asleep, 1);
    while (atomic_load(&rb->pending)) pthread_cond_wait(&rb->done, &rb->mu);
    atomic_store(&rb->caller_asleep, 0);
    pthread_mutex_unlock(&rb->mu);
}

void ld_refb_run(ref_backend *rb, task_fn fn, void *ctx, size_t n)
{
    ld_refb_run_grain(rb, fn, ctx, n, 0);
}

/* n items of about `work` multiply-adds in all, one at a time from the
 * pool, or on the calling thread when that is too little to hand off
 * (which thread computes an item changes nothing in it) */
void ld_refb_run_items(ref_backend *rb, task_fn fn, void *ctx, size_t n, double work)
{
    if (work < SMALL_WORK) {
        if (n) fn(ctx, 0, 0, n);
        return;
    }
    ld_refb_run_grain(rb, fn, ctx, n, 1);
}

ld_status ld_refb_need_scratch(ref_backend *rb, size_t n, ld_error *err)
{
    if (n <= rb->scratch_cap) return LD_OK;
    for (int i = 0; i < rb->n_threads; i++) {
        float *p = realloc(rb->scratch[i], n * sizeof *p);
        if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for %zu floats of scratch", n);
        rb->scratch[i] = p;
    }
    rb->scratch_cap = n;
    return LD_OK;
}

ld_status ld_refb_need_iscratch(ref_backend *rb, size_t n, ld_error *err)
{
    if (n <= rb->iscratch_cap) return LD_OK;
    for (int i = 0; i < rb->n_threads; i++) {
        int32_t *p = realloc(rb->iscratch[i], n * sizeof *p);
        if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for %zu int32 of scratch", n);
        rb->iscratch[i] = p;
    }
    rb->iscratch_cap = n;
    return LD_OK;
}
