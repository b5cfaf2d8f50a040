/* cuda_runtime.cu - the CUDA runtime calls of cuda_ops.h (device, memory,
 * errors), so that C code never includes a CUDA header. */
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_graph.h"
#include "cuda_ops.h"

/* A failed runtime call also leaves its code as the thread's "last error",
 * which the next launcher's cudaGetLastError would report as its own:
 * each wrapper here returns the code and clears it (sticky errors, a
 * broken context, stay whatever is done). */
static int ret(cudaError_t e)
{
    if (e != cudaSuccess) (void)cudaGetLastError();
    return (int)e;
}

extern "C" const char *ld_cu_error_string(int code)
{
    return cudaGetErrorString((cudaError_t)code);
}

extern "C" const char *ld_cu_error_name(int code)
{
    return cudaGetErrorName((cudaError_t)code);
}

extern "C" int ld_cu_is_oom(int code)
{
    return code == (int)cudaErrorMemoryAllocation;
}

extern "C" int ld_cu_device_count(int *n)
{
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e != cudaSuccess) *n = 0;
    return ret(e);
}

extern "C" int ld_cu_set_device(int dev)
{
    return ret(cudaSetDevice(dev));
}

extern "C" int ld_cu_device_info(int dev, char *name, size_t cap, int *major, int *minor, int *sms)
{
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) return ret(e);
    if (name && cap) {
        size_t n = strlen(p.name);
        if (n >= cap) n = cap - 1;
        memcpy(name, p.name, n);
        name[n] = 0;
    }
    if (major) *major = p.major;
    if (minor) *minor = p.minor;
    if (sms) *sms = p.multiProcessorCount;
    return 0;
}

extern "C" int ld_cu_malloc(void **p, size_t bytes)
{
    *p = NULL;
    return ret(cudaMalloc(p, bytes ? bytes : 1));
}

/* a call the runtime refuses during stream capture, between two captures
 * in graph mode (paused: ld_cu_graph_pause's result): e, its result;
 * waited: it returned only once the stream's work had run (a copy to the
 * host does; cudaFree and a copy from pageable memory need not) */
static int uncaptured(int paused, int e, int waited)
{
    int r = ld_cu_graph_resume(waited);
    return paused ? paused : e ? e : r;
}

extern "C" int ld_cu_free(void *p)
{
    if (!p) return 0;
    int paused = ld_cu_graph_pause(); /* refused during capture */
    return uncaptured(paused, paused ? 0 : ret(cudaFree(p)), 0);
}

extern "C" int ld_cu_memset0(void *p, size_t bytes)
{
    if (!bytes) return 0;
    if (ld_cu_graph_capturing()) return ld_cu_graph_op(ret(cudaMemsetAsync(p, 0, bytes, cudaStreamPerThread)));
    return ret(cudaMemset(p, 0, bytes));
}

/* ---- small host-to-device copies without draining the queue.
 * cudaMemcpy from pageable host memory first waits for the stream's work
 * to finish (the runtime's documented behaviour), so each small upload
 * of a decode step (a MoE plan, picks, scalars) would leave the GPU idle
 * while the host queues the next kernels.  Copies of up to a slot's size
 * go through a ring of pinned slots per device instead: the bytes are
 * copied into the next slot, cudaMemcpyAsync on the legacy default stream
 * queues the transfer (ordered there with the kernels, as cudaMemcpy's
 * was), and an event marks when the slot may be written again (waited for
 * only when the ring comes round to a slot still in flight: the host is
 * then H2D_SLOTS uploads ahead of the device).  The caller's buffer is
 * free on return, as with cudaMemcpy.  The rings, 8 MiB of pinned memory
 * per device used, live as long as the process; one lock serialises the
 * copies into them (a memcpy of at most a slot).  Where a ring cannot be
 * made (pinned memory refused), or LD_CUDA_SYNC_H2D is set to anything
 * but 0 (to measure what the ring saves, or rule it out), copies are
 * cudaMemcpy's. */
#define H2D_SLOT_BYTES ((size_t)64 << 10)
#define H2D_SLOTS 128
#define H2D_MAX_DEVICES 64

typedef struct h2d_ring {
    int state;      /* 0 not made yet, 1 made, -1 could not be made */
    unsigned next;  /* the slot the next copy takes */
    unsigned char *slots; /* pinned [H2D_SLOTS][H2D_SLOT_BYTES] */
    cudaEvent_t done[H2D_SLOTS];
    unsigned char used[H2D_SLOTS];
} h2d_ring;

static h2d_ring rings[H2D_MAX_DEVICES];
static pthread_mutex_t rings_mu = PTHREAD_MUTEX_INITIALIZER;

/* the ring of the current device, made on first use */
static void ring_make(h2d_ring *r)
{
    r->state = -1;
    const char *off = getenv("LD_CUDA_SYNC_H2D");
    if (off && *off && strcmp(off, "0") != 0) return;
    if (cudaHostAlloc((void **)&r->slots, (size_t)H2D_SLOTS * H2D_SLOT_BYTES, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        r->slots = NULL;
        return;
    }
    for (int i = 0; i < H2D_SLOTS; i++)
        if (cudaEventCreateWithFlags(&r->done[i], cudaEventDisableTiming) != cudaSuccess) {
            (void)cudaGetLastError();
            while (i--) cudaEventDestroy(r->done[i]);
            cudaFreeHost(r->slots);
            r->slots = NULL;
            return;
        }
    r->state = 1;
}

static int ring_copy(h2d_ring *r, void *dst, const void *src, size_t bytes)
{
    if (r->state == 0) ring_make(r);
    if (r->state < 0) return ret(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    unsigned i = r->next;
    r->next = (i + 1) % H2D_SLOTS;
    cudaError_t e;
    if (r->used[i] && (e = cudaEventSynchronize(r->done[i])) != cudaSuccess) return ret(e);
    unsigned char *slot = r->slots + (size_t)i * H2D_SLOT_BYTES;
    memcpy(slot, src, bytes);
    if ((e = cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, cudaStreamPerThread)) != cudaSuccess)
        return ret(e);
    r->used[i] = 1;
    return ret(cudaEventRecord(r->done[i], cudaStreamPerThread));
}

/* a copy cudaMemcpy makes (it may wait for the device): between two
 * captures in graph mode */
static int h2d_sync(void *dst, const void *src, size_t bytes)
{
    int paused = ld_cu_graph_pause();
    return uncaptured(paused, paused ? 0 : ret(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice)), 0);
}

extern "C" int ld_cu_h2d(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return 0;
    int done, e = ld_cu_graph_h2d(dst, src, bytes, &done);
    if (done || e) return e;
    if (ld_cu_graph_capturing()) return h2d_sync(dst, src, bytes); /* too large for the arena */
    int dev = -1;
    if (bytes <= H2D_SLOT_BYTES && ret(cudaGetDevice(&dev))) dev = -1;
    if (dev < 0 || dev >= H2D_MAX_DEVICES) return ret(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    pthread_mutex_lock(&rings_mu);
    e = ring_copy(&rings[dev], dst, src, bytes);
    pthread_mutex_unlock(&rings_mu);
    return e;
}

extern "C" int ld_cu_d2h(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return 0;
    int paused = ld_cu_graph_pause();
    return uncaptured(paused, paused ? 0 : ret(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost)), !paused);
}

extern "C" int ld_cu_d2d(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return 0;
    if (ld_cu_graph_capturing())
        return ld_cu_graph_op(ret(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamPerThread)));
    return ret(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

extern "C" int ld_cu_d2d_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                              size_t rows)
{
    if (!width || !rows) return 0;
    if (ld_cu_graph_capturing())
        return ld_cu_graph_op(ret(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows,
                                                    cudaMemcpyDeviceToDevice, cudaStreamPerThread)));
    return ret(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice));
}

extern "C" int ld_cu_sync(void)
{
    return ld_cu_graph_wait();
}

/* ---- events on the legacy default stream, where NCCL's collectives run
 * (engine/tp/comm_nccl.c's watchdog: how far the stream has got) */
extern "C" int ld_cu_event_create(void **ev)
{
    cudaEvent_t e = NULL;
    int r = ret(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *ev = r ? NULL : (void *)e;
    return r;
}

extern "C" int ld_cu_event_destroy(void *ev)
{
    return ev ? ret(cudaEventDestroy((cudaEvent_t)ev)) : 0;
}

extern "C" int ld_cu_event_record_legacy(void *ev)
{
    return ret(cudaEventRecord((cudaEvent_t)ev, cudaStreamLegacy));
}

extern "C" int ld_cu_event_done(void *ev, int *done)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    *done = e == cudaSuccess;
    if (e != cudaErrorNotReady) return ret(e);
    (void)cudaGetLastError(); /* not ready is no error, whatever the runtime keeps of it */
    return 0;
}

extern "C" size_t ld_cu_row_bytes(ld_kdt dt, int64_t cols)
{
    size_t c = (size_t)cols;
    switch (dt) {
    case LD_KDT_F32: return c * 4;
    case LD_KDT_F16:
    case LD_KDT_BF16: return c * 2;
    case LD_KDT_Q4_0: return c / 32 * 18;
    case LD_KDT_Q4_1: return c / 32 * 20;
    case LD_KDT_Q8_0: return c / 32 * 34;
    case LD_KDT_Q4_K: return c / 256 * 144;
    case LD_KDT_Q6_K: return c / 256 * 210;
    default: return 0; /* LD_KDT_F8B: not a kernel type here (yet) */
    }
}
