/* emu_sched.h - the CUDA emulator's thread scheduler (emu_sched.c), the C
 * side of tests/support/cuda_emu/cuda_emu.cuh.
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

/* The journal (emu_census.c): while on, every GPU operation in order with
 * what a CUDA graph's node would hold of it: a launch's kernel, shape and
 * each argument's bytes (hashed), a copy's or memset's device addresses
 * and size.  What it is for: a step whose operations and arguments are
 * the same token after token can be captured once and replayed as a
 * graph, and a diff of two tokens' journals names every argument that
 * still changes (tests/engine/backend/test_cuda_launches.c). */
#define LD_EMU_OP_ARGS 40
typedef struct ld_emu_op {
    const char *name; /* the kernel's, or "memcpy HtoD" and the like */
    unsigned grid[3], block[3];
    size_t smem;
    int n_args; /* arguments kept (a launch's beyond LD_EMU_OP_ARGS fold into the last) */
    unsigned long long arg[LD_EMU_OP_ARGS];
} ld_emu_op;
int ld_emu_journal_on(void);
void ld_emu_journal_start(void);
void ld_emu_journal_add(const ld_emu_op *op);
/* the operations since ld_emu_journal_start, journal off; *ops the
 * caller's to free (NULL and 0 when none or no memory) */
size_t ld_emu_journal_stop(ld_emu_op **ops);
/* a copy or memset in the journal: its device ends (0 for a host one) */
void ld_emu_journal_copy(const char *name, const void *dst, const void *src, size_t bytes);

/* 1 when [p, p + n) lies in one live device allocation (emu_runtime.c;
 * emu_nccl.c checks a collective's buffers with it) */
int ld_emu_device_range(const void *p, size_t n);

/* Stream capture (emu_graph.c): ld_emu_capturing, this thread's stream
 * records instead of running; ld_emu_capture_kernel keeps a launch as a
 * node (body(ctx) per thread when the graph runs, drop(ctx) when the last
 * graph holding it goes; journal: its entry, or NULL); ld_emu_capture_copy
 * a copy (kind: a cudaMemcpyKind) or, kind < 0, a memset of memset_value;
 * ld_emu_capture_refuse: `fn`, a call the runtime refuses during capture,
 * invalidates it (0 when not capturing, else the error to return);
 * ld_emu_capture_stream: the legacy stream named (an error: the emulated
 * kernels use the per-thread default stream, as nvcc's --default-stream
 * per-thread gives them), 0 otherwise. */
int ld_emu_capturing(void);
void ld_emu_capture_kernel(const void *kernel, const char *name, ld_emu_dim grid, ld_emu_dim block, size_t smem,
                           void (*body)(void *), void *ctx, void (*drop)(void *), const ld_emu_op *journal);
int ld_emu_capture_copy(void *dst, const void *src, size_t bytes, int kind, int memset_value);
int ld_emu_capture_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows, int kind);
int ld_emu_capture_refuse(const char *fn);
int ld_emu_capture_stream(void *stream, const char *fn);
/* ld_emu_graphs_drain: run the graphs launched and not yet run (before
 * what the stream orders after them), keeping their first error for the
 * next wait; ld_emu_graphs_wait: a wait (a drain, then that error, or 0,
 * taken) */
void ld_emu_graphs_drain(void);
int ld_emu_graphs_wait(void);

#ifdef __cplusplus
}
#endif

#endif /* LD_EMU_SCHED_H */
