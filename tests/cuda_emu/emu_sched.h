/* emu_sched.h - the CUDA emulator's thread scheduler (emu_sched.c), the C
 * side of tests/cuda_emu/cuda_emu.cuh.
 *
 * A launch runs its blocks one after another on the calling OS thread; a
 * block's threads are fibers, each running the kernel until it
 * reaches a barrier (__syncthreads: every live thread of the block; a warp
 * collective: every live lane of its warp) or returns.  Fibers never run at
 * the same time, so shared memory and integer atomics need no locking; the
 * order between two barriers is thread order (or its reverse, with
 * LD_CUDA_EMU_ORDER=reverse, blocks too), which a correct kernel cannot
 * depend on.  What a GPU would reject or leave undefined is an error of the
 * launch (cudaGetLastError, with a message on stderr): a launch shape out of
 * the device's limits, a barrier some threads never reach (a deadlock), a
 * warp collective whose lanes have exited or wait at __syncthreads. */
#ifndef LD_EMU_SCHED_H
#define LD_EMU_SCHED_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the launch error codes (the CUDA runtime's numbers) */
#define LD_EMU_ERR_CONFIG 9   /* cudaErrorInvalidConfiguration */
#define LD_EMU_ERR_LAUNCH 719 /* cudaErrorLaunchFailure */

/* bytes per lane of a warp's exchange area (ld_emu_warp_slots) */
#define LD_EMU_SLOT 64

/* the dynamic shared memory a block may take without an opt-in attribute */
#define LD_EMU_DYN_SMEM_MAX (48u * 1024u)

typedef struct ld_emu_dim {
    unsigned x, y, z;
} ld_emu_dim;

/* run body(ctx) once per thread of grid x block; smem bytes of dynamic
 * shared memory per block; name (the kernel's) for messages.  Returns 0 or
 * the launch's error, also kept for ld_emu_take_error. */
int ld_emu_run(ld_emu_dim grid, ld_emu_dim block, size_t smem, void (*body)(void *), void *ctx, const char *name);

/* the pending launch error (0: none), cleared: cudaGetLastError's */
int ld_emu_take_error(void);

/* the running thread's coordinates */
const ld_emu_dim *ld_emu_thread_idx(void);
const ld_emu_dim *ld_emu_block_idx(void);
const ld_emu_dim *ld_emu_block_dim(void);
const ld_emu_dim *ld_emu_grid_dim(void);
int ld_emu_lane(void);

/* barriers: the block's live threads; the live lanes of `mask` in this
 * thread's warp (every lane of the mask must be live and reach it) */
void ld_emu_block_sync(void);
void ld_emu_warp_sync(unsigned mask);

/* the exchange area of this lane's next warp collective: 32 lanes x
 * LD_EMU_SLOT bytes.  Two alternate, so a collective is one barrier (write
 * your slot, ld_emu_warp_sync, read): a lane cannot write the area of its
 * collective n + 2 before every lane has passed the barrier of n + 1, so
 * after each has read n's. */
unsigned char *ld_emu_warp_slots(void);

/* the lanes of the running warp that exist (a block's last warp may be
 * partial) as a mask */
unsigned ld_emu_warp_lanes(void);

/* the block's dynamic shared memory */
void *ld_emu_dyn_smem(void);

/* A static __shared__ variable (bytes at p) reached by a thread of the
 * running block: the first of its threads to reach the declaration fills
 * it with 0xff bytes (NaN as floats, -1 as integers, an invalid pointer),
 * as the dynamic shared memory is at each block; a GPU leaves it
 * undefined, so a kernel that reads it before writing it fails here, not
 * by luck of a zero.  launches.pl appends the call to each declaration. */
#define LD_EMU_MAX_SHARED_VARS 32
void ld_emu_shared_poison(void *p, size_t bytes);

/* The launch census (emu_census.c), process-wide: ld_emu_run counts each
 * launch, failed ones too, under its kernel's name (and emu_runtime.c
 * each copy and memset, under "memcpy HtoD" and the like).  ld_emu_launches: the
 * launches so far of `name`, or of every kernel when NULL; ld_emu_census:
 * the table, most launched first, to f (LD_CUDA_EMU_CENSUS=1 prints it to
 * stderr at exit); ld_emu_census_reset: every count back to 0. */
void ld_emu_census_count(const char *name);
long ld_emu_launches(const char *name);
void ld_emu_census_reset(void);
void ld_emu_census(FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* LD_EMU_SCHED_H */
