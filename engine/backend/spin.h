/* spin.h - one step of a spin-wait, for the engine's thread pool
 * (backend/cpu/backend_ref_pool.c), and a bounded spin on a barrier's generation for the
 * tensor-parallel communicators (comm_sim.c, comm_shm.c). */
#ifndef LD_SPIN_H
#define LD_SPIN_H

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

/* A pause, and every 64th step the core to whoever else wants it (a thread
 * descheduled on a busy machine gets to run). */
static inline void ld_spin_relax(unsigned i)
{
    if ((i & 63) == 63) {
        sched_yield();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until *gen is no longer `seen` or *stop is set, for at most
 * max_ns: a barrier's waiters spin briefly before they sleep (a decode step
 * runs two all-reduces per layer, each microseconds apart across ranks,
 * and a condition variable's wake-up costs tens of microseconds). */
static inline void ld_spin_on_gen(const atomic_uint *gen, unsigned seen, const atomic_int *stop, long max_ns)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 1; atomic_load(gen) == seen && !atomic_load(stop); i++) {
        ld_spin_relax(i);
        if ((i & 255) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > max_ns) return;
        }
    }
}

#endif /* LD_SPIN_H */
