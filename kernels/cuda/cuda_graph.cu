/* cuda_graph.cu - a thread's GPU work as CUDA graphs (cuda_ops.h's
 * ld_cu_graphs_begin): stream capture on the per-thread default stream in
 * chunks, each chunk's executable graph kept and updated in place.
 *
 * Why chunks rather than one graph a step: a graph is launched only once
 * captured, so a step captured whole would leave the GPU idle while the
 * host captures it; chunks of `chunk` operations let the GPU run chunk k
 * while the host captures k + 1.  Why capture every step rather than
 * replay a kept graph unchanged: the steps' arguments differ (positions,
 * ring slots, lengths, the host's small uploads), and an update
 * (cudaGraphExecUpdate) takes them from the new capture without
 * instantiating; the kernels need not read their scalars from the device.
 *
 * Capture runs in cudaStreamCaptureModeRelaxed, so that cudaMalloc (a
 * scratch buffer growing) may happen during it; what the runtime refuses
 * during capture (a synchronous copy, cudaFree, a device synchronisation)
 * the wrappers of cuda_runtime.cu do between two captures
 * (ld_cu_graph_pause / ld_cu_graph_resume).  Small host-to-device copies go
 * through a pinned arena whose bytes stay put until the device has read
 * them: a copy node reads its source when its graph runs, not when it was
 * captured; the arena is reused only after a wait for the device. */
#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_graph.h"
#include "cuda_ops.h"

#define GRAPH_SLOTS 64 /* chunks a step whose graphs are kept (later ones: instantiated each time) */
#define GRAPH_WAYS 4   /* graphs kept a chunk (different topologies) */
#define ARENA_BYTES ((size_t)8 << 20)

typedef struct kept_graph {
    cudaGraphExec_t exec;
    long ops;                /* its operations: a cheap first test of the topology */
    unsigned long long used; /* the tick of its last launch (the least recent is replaced) */
} kept_graph;

typedef struct graph_state {
    int on; /* ld_cu_graphs_begin calls not yet ended */
    int capturing;
    int chunk;  /* operations a graph */
    long ops;   /* operations in the open capture */
    int index;  /* the open capture's chunk since the last wait for the device */
    unsigned long long tick;
    kept_graph kept[GRAPH_SLOTS][GRAPH_WAYS];
    unsigned char *arena; /* pinned */
    size_t arena_used;
    ld_cu_graph_stats st;
} graph_state;

static thread_local graph_state G;

static int err(cudaError_t e)
{
    if (e != cudaSuccess) (void)cudaGetLastError();
    return (int)e;
}

static int capture_begin(void)
{
    int e = err(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
    G.capturing = !e;
    G.ops = 0;
    return e;
}

/* the kept graph of this chunk that `graph` updates (its operations: ops),
 * or a new one in the least recently used way; NULL and *e on failure */
static cudaGraphExec_t exec_for(cudaGraph_t graph, long ops, int *e)
{
    *e = 0;
    if (G.index >= GRAPH_SLOTS) return NULL; /* instantiated and dropped by the caller */
    kept_graph *ways = G.kept[G.index], *old = ways;
    for (int w = 0; w < GRAPH_WAYS; w++) {
        kept_graph *k = ways + w;
        if (k->exec && k->ops == ops) {
            cudaGraphExecUpdateResultInfo info;
            if (cudaGraphExecUpdate(k->exec, graph, &info) == cudaSuccess) {
                G.st.updated++;
                k->used = ++G.tick;
                return k->exec;
            }
            (void)cudaGetLastError(); /* a refused update leaves the graph as it was */
        }
        if (!k->exec || (old->exec && k->used < old->used)) old = k;
    }
    if (old->exec) (void)cudaGraphExecDestroy(old->exec);
    old->exec = NULL;
    if ((*e = err(cudaGraphInstantiate(&old->exec, graph, 0)))) {
        old->exec = NULL;
        return NULL;
    }
    G.st.instantiated++;
    old->ops = ops;
    old->used = ++G.tick;
    return old->exec;
}

/* ends the open capture and launches it; resume: capture again */
static int flush(int resume)
{
    if (!G.capturing) return resume && G.on ? capture_begin() : 0;
    cudaGraph_t graph = NULL;
    G.capturing = 0;
    int e = err(cudaStreamEndCapture(cudaStreamPerThread, &graph));
    long ops = G.ops;
    if (!e && ops) {
        cudaGraphExec_t exec = exec_for(graph, ops, &e);
        if (!e && !exec) { /* past the kept slots: a graph for this once */
            e = err(cudaGraphInstantiate(&exec, graph, 0));
            if (!e) G.st.instantiated++;
            if (!e) e = err(cudaGraphLaunch(exec, cudaStreamPerThread));
            if (exec) (void)cudaGraphExecDestroy(exec);
        } else if (!e) {
            e = err(cudaGraphLaunch(exec, cudaStreamPerThread));
        }
        if (!e) G.st.launched++;
        G.index++;
    }
    if (graph) (void)cudaGraphDestroy(graph);
    int b = resume ? capture_begin() : 0;
    return e ? e : b;
}

extern "C" int ld_cu_graph_op(int e)
{
    if (e || !G.capturing) return e;
    G.st.ops++;
    return ++G.ops >= G.chunk ? flush(1) : 0;
}

extern "C" int ld_cu_graph_capturing(void)
{
    return G.capturing;
}

extern "C" int ld_cu_graph_pause(void)
{
    if (!G.on) return 0;
    if (G.capturing) G.st.syncs++;
    return flush(0);
}

extern "C" int ld_cu_graph_resume(int waited)
{
    if (!G.on) return 0;
    if (waited) { /* the device has run every graph: the arena is free, the next chunk a step's first */
        G.arena_used = 0;
        G.index = 0;
    }
    return capture_begin();
}

extern "C" int ld_cu_graphs_hold(void)
{
    return G.on ? flush(0) : 0;
}

extern "C" int ld_cu_graphs_release(void)
{
    return G.on && !G.capturing ? capture_begin() : 0;
}

extern "C" int ld_cu_graph_wait(void)
{
    int paused = ld_cu_graph_pause();
    cudaError_t e = cudaDeviceSynchronize();
    cudaError_t l = cudaGetLastError();
    int r = ld_cu_graph_resume(1);
    return paused ? paused : e != cudaSuccess ? (int)e : l != cudaSuccess ? (int)l : r;
}

extern "C" int ld_cu_graph_h2d(void *dst, const void *src, size_t bytes, int *done)
{
    *done = 0;
    if (!G.capturing || bytes > ARENA_BYTES / 4) return 0;
    if (G.arena_used + bytes > ARENA_BYTES) { /* full: wait until the device has read it (a wait empties it) */
        int e = ld_cu_graph_wait();
        if (e) return e;
    }
    unsigned char *p = G.arena + G.arena_used;
    memcpy(p, src, bytes);
    G.arena_used += (bytes + 15) & ~(size_t)15;
    *done = 1;
    int e = err(cudaMemcpyAsync(dst, p, bytes, cudaMemcpyHostToDevice, cudaStreamPerThread));
    return ld_cu_graph_op(e);
}

extern "C" int ld_cu_graphs_begin(int chunk)
{
    if (G.on) { /* nested (two backends in graph mode on this thread): the first's chunk */
        G.on++;
        return 0;
    }
    int e = err(cudaHostAlloc((void **)&G.arena, ARENA_BYTES, cudaHostAllocPortable));
    if (e) {
        G.arena = NULL;
        return e;
    }
    G.on = 1;
    G.chunk = chunk > 0 ? chunk : 64;
    G.index = 0;
    G.arena_used = 0;
    return capture_begin();
}

extern "C" int ld_cu_graphs_end(void)
{
    if (!G.on || --G.on) return 0;
    int e = flush(0);
    int s = err(cudaStreamSynchronize(cudaStreamPerThread));
    for (int i = 0; i < GRAPH_SLOTS; i++)
        for (int w = 0; w < GRAPH_WAYS; w++)
            if (G.kept[i][w].exec) (void)cudaGraphExecDestroy(G.kept[i][w].exec);
    memset(G.kept, 0, sizeof G.kept);
    (void)cudaFreeHost(G.arena);
    G.arena = NULL;
    return e ? e : s;
}

extern "C" void ld_cu_graph_stats_get(ld_cu_graph_stats *s)
{
    *s = G.st;
}
