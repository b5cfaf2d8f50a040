/* emu_graph.c - stream capture and CUDA graphs on the CPU, for the
 * emulator: what kernels/cuda/cuda_graph.cu does on a GPU runs here with the
 * same rules, so that its mistakes show without one.  A launched graph
 * runs later, as on a GPU: at the thread's next operation that its stream
 * orders after it (a launch, a copy, a memset), or at a wait
 * (cudaStreamSynchronize, cudaDeviceSynchronize, cudaFree, an event's),
 * so a host buffer a graph reads and the host rewrites too early shows.
 *
 * A thread's stream (the per-thread default stream: the emulator has one
 * stream a thread, cudaStreamPerThread) in capture records its launches,
 * copies and memsets as nodes instead of running them; cudaStreamEndCapture
 * hands them over as a graph, cudaGraphInstantiate makes an executable
 * graph of them, cudaGraphLaunch runs its nodes in order (the census and
 * the journal see them then, as a GPU runs them then).  What the runtime
 * refuses during capture is refused here and invalidates the capture
 * (cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated):
 * a synchronous copy or memset, cudaFree, a device, stream or event
 * synchronisation, the legacy stream.  A copy node reads its host source
 * when the graph runs, not when it was captured, as a GPU's does: a host
 * buffer changed between the two shows.  cudaGraphExecUpdate takes a
 * graph of the same topology (the same node count, each node of the same
 * kind and kernel; a copy of rows unchanged, as the runtime updates only
 * 1D copies) and refuses any other with cudaErrorGraphExecUpdateFailure,
 * leaving the executable graph as it was.  A captured copy from the host
 * must come from pinned memory (cudaHostAlloc's): the runtime cannot
 * capture a copy from pageable memory.
 *
 * Graphs and executable graphs share their node arrays (counted
 * references): an instantiation copies nothing. */
#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_sched.h"

enum node_kind { NODE_KERNEL, NODE_COPY, NODE_MEMSET };

typedef struct node {
    enum node_kind kind;
    /* kernel */
    const void *kernel;
    const char *name;
    ld_emu_dim grid, block;
    size_t smem;
    void (*body)(void *);
    void *ctx;
    void (*drop)(void *);
    ld_emu_op journal;
    /* copy, memset */
    void *dst;
    const void *src;
    size_t bytes;
    int kind_or_value; /* the copy's cudaMemcpyKind, the memset's byte */
    size_t dpitch, spitch, rows; /* a copy of rows (rows > 0): bytes a row */
} node;

typedef struct nodes {
    int refs;
    size_t n, cap;
    node *v;
} nodes;

struct CUgraph_st {
    nodes *ns;
};

struct CUgraphExec_st {
    nodes *ns;
};

static _Thread_local struct {
    int on;      /* capturing */
    int invalid; /* a refused call: the capture is lost */
    nodes *ns;
} cap;

/* the graphs launched and not yet run (a GPU runs them after
 * cudaGraphLaunch returns: here, at the thread's next operation that the
 * stream orders after them, or a wait), and the first error of one run */
#define MAX_PENDING 256
static _Thread_local struct {
    nodes *q[MAX_PENDING];
    int n, draining;
    int err;
} pend;

static nodes *nodes_new(void)
{
    nodes *ns = calloc(1, sizeof *ns);
    if (ns) ns->refs = 1;
    return ns;
}

static void nodes_unref(nodes *ns)
{
    if (!ns || --ns->refs) return;
    for (size_t i = 0; i < ns->n; i++)
        if (ns->v[i].kind == NODE_KERNEL) ns->v[i].drop(ns->v[i].ctx);
    free(ns->v);
    free(ns);
}

static int nodes_add(nodes *ns, const node *nd)
{
    if (ns->n == ns->cap) {
        size_t c = ns->cap ? 2 * ns->cap : 64;
        node *v = realloc(ns->v, c * sizeof *v);
        if (!v) return 0;
        ns->v = v;
        ns->cap = c;
    }
    ns->v[ns->n++] = *nd;
    return 1;
}

int ld_emu_capturing(void)
{
    return cap.on;
}

int ld_emu_capture_refuse(const char *fn)
{
    if (!cap.on) return 0;
    fprintf(stderr, "cuda emu: %s during stream capture (not allowed; the capture is invalidated)\n", fn);
    cap.invalid = 1;
    return cudaErrorStreamCaptureUnsupported;
}

int ld_emu_capture_stream(void *s, const char *fn)
{
    if ((cudaStream_t)s == cudaStreamLegacy) {
        fprintf(stderr, "cuda emu: %s on the legacy stream (the emulator's is the per-thread default stream)\n", fn);
        if (cap.on) cap.invalid = 1;
        return cudaErrorStreamCaptureImplicit;
    }
    return 0;
}

void ld_emu_capture_kernel(const void *kernel, const char *name, ld_emu_dim grid, ld_emu_dim block, size_t smem,
                           void (*body)(void *), void *ctx, void (*drop)(void *), const ld_emu_op *journal)
{
    node nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = NODE_KERNEL;
    nd.kernel = kernel;
    nd.name = name;
    nd.grid = grid;
    nd.block = block;
    nd.smem = smem;
    nd.body = body;
    nd.ctx = ctx;
    nd.drop = drop;
    if (journal) nd.journal = *journal;
    if (!cap.invalid && nodes_add(cap.ns, &nd)) return;
    cap.invalid = 1;
    drop(ctx);
}

int ld_emu_capture_copy(void *dst, const void *src, size_t bytes, int kind, int memset_value)
{
    node nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = kind < 0 ? NODE_MEMSET : NODE_COPY;
    nd.dst = dst;
    nd.src = src;
    nd.bytes = bytes;
    nd.kind_or_value = kind < 0 ? memset_value : kind;
    if (!cap.invalid && nodes_add(cap.ns, &nd)) return 0;
    cap.invalid = 1;
    return cudaErrorMemoryAllocation;
}

int ld_emu_capture_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows, int kind)
{
    int e = ld_emu_capture_copy(dst, src, width, kind, 0);
    if (!e) {
        node *nd = cap.ns->v + cap.ns->n - 1;
        nd->dpitch = dpitch;
        nd->spitch = spitch;
        nd->rows = rows;
    }
    return e;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    (void)mode;
    if (stream == cudaStreamLegacy) {
        fprintf(stderr, "cuda emu: cudaStreamBeginCapture on the legacy stream\n");
        return cudaErrorStreamCaptureUnsupported;
    }
    if (cap.on) return cudaErrorIllegalState;
    if (!(cap.ns = nodes_new())) return cudaErrorMemoryAllocation;
    cap.on = 1;
    cap.invalid = 0;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    (void)stream;
    *status = !cap.on ? cudaStreamCaptureStatusNone
              : cap.invalid ? cudaStreamCaptureStatusInvalidated
                            : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    (void)stream;
    *graph = NULL;
    if (!cap.on) return cudaErrorIllegalState;
    cap.on = 0;
    if (cap.invalid) {
        nodes_unref(cap.ns);
        cap.ns = NULL;
        return cudaErrorStreamCaptureInvalidated;
    }
    cudaGraph_t g = malloc(sizeof *g);
    if (!g) {
        nodes_unref(cap.ns);
        cap.ns = NULL;
        return cudaErrorMemoryAllocation;
    }
    g->ns = cap.ns;
    cap.ns = NULL;
    *graph = g;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    if (graph) nodes_unref(graph->ns);
    free(graph);
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    (void)flags;
    *exec = malloc(sizeof **exec);
    if (!*exec) return cudaErrorMemoryAllocation;
    (*exec)->ns = graph->ns;
    graph->ns->refs++;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    if (exec) nodes_unref(exec->ns);
    free(exec);
    return cudaSuccess;
}

static int same_topology(const nodes *a, const nodes *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const node *x = a->v + i, *y = b->v + i;
        if (x->kind != y->kind) return 0;
        if (x->kind == NODE_KERNEL && x->kernel != y->kernel) return 0;
        if (x->kind == NODE_COPY && x->kind_or_value != y->kind_or_value) return 0;
        /* the runtime updates 1D copies only: a copy of rows must stay as it was */
        if (x->kind == NODE_COPY && (x->rows || y->rows) &&
            (x->rows != y->rows || x->dst != y->dst || x->src != y->src || x->bytes != y->bytes ||
             x->dpitch != y->dpitch || x->spitch != y->spitch))
            return 0;
    }
    return 1;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo *info)
{
    if (info) memset(info, 0, sizeof *info);
    if (!same_topology(exec->ns, graph->ns)) {
        if (info) info->result = cudaGraphExecUpdateErrorTopologyChanged;
        return cudaErrorGraphExecUpdateFailure;
    }
    nodes_unref(exec->ns);
    exec->ns = graph->ns;
    graph->ns->refs++;
    if (info) info->result = cudaGraphExecUpdateSuccess;
    return cudaSuccess;
}

static cudaError_t run_node(const node *nd)
{
    switch (nd->kind) {
    case NODE_KERNEL: {
        if (ld_emu_journal_on()) ld_emu_journal_add(&nd->journal);
        int e = ld_emu_run(nd->grid, nd->block, nd->smem, nd->body, nd->ctx, nd->name);
        (void)ld_emu_take_error(); /* the graph launch's error, not a later cudaGetLastError's */
        return (cudaError_t)e;
    }
    case NODE_COPY:
        if (nd->rows)
            return cudaMemcpy2D(nd->dst, nd->dpitch, nd->src, nd->spitch, nd->bytes, nd->rows,
                                (enum cudaMemcpyKind)nd->kind_or_value);
        return cudaMemcpy(nd->dst, nd->src, nd->bytes, (enum cudaMemcpyKind)nd->kind_or_value);
    case NODE_MEMSET: return cudaMemset(nd->dst, nd->kind_or_value, nd->bytes);
    }
    return cudaErrorInvalidValue;
}

void ld_emu_graphs_drain(void)
{
    if (pend.draining) return; /* a graph's own copies */
    pend.draining = 1;
    for (int i = 0; i < pend.n; i++) {
        nodes *ns = pend.q[i];
        for (size_t j = 0; !pend.err && j < ns->n; j++) pend.err = run_node(ns->v + j);
        nodes_unref(ns);
    }
    pend.n = 0;
    pend.draining = 0;
}

int ld_emu_graphs_wait(void)
{
    ld_emu_graphs_drain();
    int e = pend.draining ? 0 : pend.err;
    if (!pend.draining) pend.err = 0;
    return e;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    cudaError_t e = (cudaError_t)ld_emu_capture_stream((void *)stream, "cudaGraphLaunch");
    if (e) return e;
    if (cap.on) return (cudaError_t)ld_emu_capture_refuse("cudaGraphLaunch (a child graph: not emulated)");
    if (pend.n == MAX_PENDING) ld_emu_graphs_drain();
    ld_emu_census_count("graph launch");
    pend.q[pend.n++] = exec->ns; /* the nodes as launched: a later update does not change this run */
    exec->ns->refs++;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    (void)stream;
    return cap.on ? (cudaError_t)ld_emu_capture_refuse("cudaStreamSynchronize") : (cudaError_t)ld_emu_graphs_wait();
}
