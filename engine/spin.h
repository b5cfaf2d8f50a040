/* spin.h - one step of a spin-wait, for the engine's thread pool
 * (backend_ref.c) and the simulated tensor-parallel ranks (comm_sim.c). */
#ifndef LD_SPIN_H
#define LD_SPIN_H

#include <sched.h>

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

#endif /* LD_SPIN_H */
