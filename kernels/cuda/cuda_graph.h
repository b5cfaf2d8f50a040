/* cuda_graph.h - cuda_graph.cu's hooks for the runtime wrappers of
 * cuda_runtime.cu (CUDA C++ only; the public calls are cuda_ops.h's). */
#ifndef LD_CUDA_GRAPH_H
#define LD_CUDA_GRAPH_H

#include <stddef.h>

/* the thread's stream is capturing (graph mode, between two pauses) */
extern "C" int ld_cu_graph_capturing(void);
/* before a call the runtime refuses during capture (one that waits for
 * the device, or frees): what is captured is launched, capture stops */
extern "C" int ld_cu_graph_pause(void);
/* after it: capture again; waited: the call waited for the device (every
 * graph has run: the arena may be reused, the chunks count from 0) */
extern "C" int ld_cu_graph_resume(int waited);
/* an operation queued (e: its error), counted in graph mode (the graph
 * launched once full) */
extern "C" int ld_cu_graph_op(int e);
/* waits for the device (capture paused around the wait: every graph runs
 * first), as cuda_ops.h's ld_cu_sync */
extern "C" int ld_cu_graph_wait(void);
/* a host-to-device copy captured through the pinned arena: *done = 1 when
 * it was (else the caller copies as outside graph mode) */
extern "C" int ld_cu_graph_h2d(void *dst, const void *src, size_t bytes, int *done);

#endif /* LD_CUDA_GRAPH_H */
