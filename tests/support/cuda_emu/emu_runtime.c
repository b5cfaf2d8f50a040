/* emu_runtime.c - the CUDA runtime calls of kernels/cuda_*.cu, on the CPU,
 * for the emulator (tests/support/cuda_emu): device memory is host malloc, a copy
 * is memcpy, a stream and its events are trivially in order (a launch runs
 * to its end before ld_emu_launch returns).
 *
 * New device memory is filled with 0xff bytes (NaN as floats, -1 as
 * integers), as cudaMalloc leaves it undefined: a kernel that reads what no
 * one wrote shows it.  The runtime keeps the device allocations' ranges, so
 * that a copy whose kind names the wrong side (cudaMemcpyHostToDevice to a
 * host address...) or a memset of host memory is cudaErrorInvalidValue
 * with a message, where a GPU would fail or corrupt memory.  Linked instead
 * of libcudart; the prototypes are the toolkit's own (cuda_runtime_api.h),
 * so a mismatch does not compile. */
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_sched.h"

/* devices the emulator shows: LD_CUDA_EMU_DEVICES (default 1) */
static int device_count(void)
{
    const char *s = getenv("LD_CUDA_EMU_DEVICES");
    int n = s ? atoi(s) : 1;
    return n < 0 ? 0 : n > 8 ? 8 : n;
}

static _Thread_local int current_device;

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = current_device;
    return cudaSuccess;
}

/* an H200's figures where a caller reads them (the launch limits are
 * emu_sched.c's) */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "logdiff CUDA emulator (tests/support/cuda_emu)");
    prop->major = 9;
    prop->minor = 0;
    prop->totalGlobalMem = (size_t)141 << 30;
    prop->sharedMemPerBlock = LD_EMU_DYN_SMEM_MAX;
    prop->maxThreadsPerBlock = 1024;
    prop->warpSize = 32;
    prop->multiProcessorCount = 132;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (device < 0 || device >= device_count()) return cudaErrorInvalidDevice;
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t cudaDeviceSynchronize(void)
{
    if (ld_emu_capturing()) return (cudaError_t)ld_emu_capture_refuse("cudaDeviceSynchronize");
    return (cudaError_t)ld_emu_graphs_wait();
}

cudaError_t cudaGetLastError(void)
{
    return (cudaError_t)ld_emu_take_error();
}

const char *cudaGetErrorName(cudaError_t error)
{
    switch ((int)error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorInvalidPitchValue: return "cudaErrorInvalidPitchValue";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorGraphExecUpdateFailure: return "cudaErrorGraphExecUpdateFailure";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch ((int)error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorLaunchFailure: return "unspecified launch failure (see the emulator's message)";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorGraphExecUpdateFailure: return "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update";
    case cudaErrorIllegalState: return "the operation is not permitted in the current state";
    default: return "unknown error";
    }
}

/* ---------------------------------------------------------------- memory */

/* the emulated device's memory, as tests/support/cuda_mock.c's: a larger
 * allocation fails as out of memory (instead of asking the host) */
#define DEVICE_BYTES ((size_t)64 << 30)

/* the live device allocations, sorted by address (the TP ranks allocate
 * from several host threads: under the lock) */
static struct {
    pthread_mutex_t lock;
    uintptr_t *start;
    size_t *size, n, cap;
} A = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0};

/* the index of the first allocation starting above p */
static size_t after(uintptr_t p)
{
    size_t lo = 0, hi = A.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (A.start[mid] <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int track(void *p, size_t size)
{
    pthread_mutex_lock(&A.lock);
    int ok = 1;
    if (A.n == A.cap) {
        size_t cap = A.cap ? 2 * A.cap : 256;
        uintptr_t *s = realloc(A.start, cap * sizeof *s);
        if (s) A.start = s;
        size_t *z = s ? realloc(A.size, cap * sizeof *z) : NULL;
        if (z) A.size = z, A.cap = cap;
        ok = s && z;
    }
    if (ok) {
        size_t i = after((uintptr_t)p);
        memmove(A.start + i + 1, A.start + i, (A.n - i) * sizeof *A.start);
        memmove(A.size + i + 1, A.size + i, (A.n - i) * sizeof *A.size);
        A.start[i] = (uintptr_t)p;
        A.size[i] = size ? size : 1;
        A.n++;
    }
    pthread_mutex_unlock(&A.lock);
    return ok;
}

/* 1 when p was allocated by cudaMalloc and is still live; it is then
 * forgotten */
static int untrack(void *p)
{
    pthread_mutex_lock(&A.lock);
    size_t i = after((uintptr_t)p);
    int found = i > 0 && A.start[i - 1] == (uintptr_t)p;
    if (found) {
        memmove(A.start + i - 1, A.start + i, (A.n - i) * sizeof *A.start);
        memmove(A.size + i - 1, A.size + i, (A.n - i) * sizeof *A.size);
        A.n--;
    }
    pthread_mutex_unlock(&A.lock);
    return found;
}

/* 1 when [p, p + n) lies in one device allocation */
static int on_device(const void *p, size_t n)
{
    pthread_mutex_lock(&A.lock);
    size_t i = after((uintptr_t)p);
    int in = i > 0 && (uintptr_t)p - A.start[i - 1] + (n ? n : 1) <= A.size[i - 1];
    pthread_mutex_unlock(&A.lock);
    return in;
}

int ld_emu_device_range(const void *p, size_t n)
{
    return on_device(p, n);
}

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    *devPtr = size <= DEVICE_BYTES ? malloc(size ? size : 1) : NULL;
    if (!*devPtr) return cudaErrorMemoryAllocation;
    if (!track(*devPtr, size)) {
        free(*devPtr);
        *devPtr = NULL;
        return cudaErrorMemoryAllocation;
    }
    memset(*devPtr, 0xff, size);
    return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
    if (ld_emu_capturing()) return (cudaError_t)ld_emu_capture_refuse("cudaFree");
    ld_emu_graphs_drain(); /* cudaFree waits for the device */
    if (!devPtr) return cudaSuccess;
    if (!untrack(devPtr)) {
        fprintf(stderr, "cuda emu: cudaFree(%p): not a device allocation\n", devPtr);
        return cudaErrorInvalidValue;
    }
    free(devPtr);
    return cudaSuccess;
}

/* the pinned host allocations (cudaHostAlloc's), so that a captured copy
 * from pageable memory is refused as the runtime refuses it */
#define MAX_PINNED 64
static struct {
    pthread_mutex_t lock;
    uintptr_t at[MAX_PINNED];
    size_t size[MAX_PINNED];
} H = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}};

static int pinned(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    int in = 0;
    pthread_mutex_lock(&H.lock);
    for (int i = 0; i < MAX_PINNED && !in; i++) in = H.at[i] && a >= H.at[i] && a - H.at[i] + n <= H.size[i];
    pthread_mutex_unlock(&H.lock);
    return in;
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    (void)flags;
    *pHost = malloc(size ? size : 1);
    if (!*pHost) return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&H.lock);
    for (int i = 0; i < MAX_PINNED; i++)
        if (!H.at[i]) {
            H.at[i] = (uintptr_t)*pHost;
            H.size[i] = size;
            break;
        }
    pthread_mutex_unlock(&H.lock);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
    if (ld_emu_capturing()) return (cudaError_t)ld_emu_capture_refuse("cudaFreeHost");
    pthread_mutex_lock(&H.lock);
    for (int i = 0; i < MAX_PINNED; i++)
        if (H.at[i] == (uintptr_t)ptr) H.at[i] = 0;
    pthread_mutex_unlock(&H.lock);
    free(ptr);
    return cudaSuccess;
}

/* the census's name of a copy (a GPU operation as a launch is) */
static const char *copy_name(enum cudaMemcpyKind kind, int rows)
{
    static const char *const names[2][5] = {
        {"memcpy HtoH", "memcpy HtoD", "memcpy DtoH", "memcpy DtoD", "memcpy default"},
        {"memcpy2D HtoH", "memcpy2D HtoD", "memcpy2D DtoH", "memcpy2D DtoD", "memcpy2D default"}};
    return (unsigned)kind < 5 ? names[rows][kind] : "memcpy (bad kind)";
}

/* a copy's two ends (dst's dn bytes, src's sn) on the sides its kind
 * names, each within one device allocation or outside all; else a message
 * and cudaErrorInvalidValue.  cudaMemcpyDefault: anything. */
static cudaError_t sides(const char *fn, void *dst, size_t dn, const void *src, size_t sn, enum cudaMemcpyKind kind)
{
    if (!dn || kind == cudaMemcpyDefault) return cudaSuccess;
    int want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    int d = on_device(dst, dn), s = on_device(src, sn);
    if ((unsigned)kind <= cudaMemcpyDeviceToDevice && d == want_dst && s == want_src) return cudaSuccess;
    fprintf(stderr, "cuda emu: %s, kind %d: dst %p (%zu bytes) is %s, src %p (%zu bytes) is %s\n", fn, (int)kind, dst,
            dn, d ? "device memory" : "not (all) device memory", src, sn,
            s ? "device memory" : "not (all) device memory");
    return cudaErrorInvalidValue;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    if (ld_emu_capturing()) return (cudaError_t)ld_emu_capture_refuse("cudaMemset (synchronous)");
    ld_emu_graphs_drain();
    ld_emu_census_count("memset");
    ld_emu_journal_copy("memset", devPtr, (const void *)(uintptr_t)(unsigned char)value, count);
    if (count && !on_device(devPtr, count)) {
        fprintf(stderr, "cuda emu: cudaMemset of %zu bytes at %p: not device memory\n", count, devPtr);
        return cudaErrorInvalidValue;
    }
    memset(devPtr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    if (ld_emu_capturing()) return (cudaError_t)ld_emu_capture_refuse("cudaMemcpy (synchronous)");
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDefault) { /* waits for the stream */
        cudaError_t g = (cudaError_t)ld_emu_graphs_wait();
        if (g) return g;
    } else {
        ld_emu_graphs_drain();
    }
    ld_emu_census_count(copy_name(kind, 0));
    ld_emu_journal_copy(copy_name(kind, 0), dst, src, count);
    cudaError_t e = sides("cudaMemcpy", dst, count, src, count, kind);
    if (e) return e;
    if (count) memmove(dst, src, count);
    return cudaSuccess;
}

/* on this thread's stream: a node when it is capturing (the host source
 * read when the graph runs) */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    cudaError_t e = (cudaError_t)ld_emu_capture_stream((void *)stream, "cudaMemcpyAsync");
    if (e) return e;
    if (ld_emu_capturing()) {
        if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault)
            return (cudaError_t)ld_emu_capture_refuse("cudaMemcpyAsync to the host (ours read it at once)");
        if ((e = sides("cudaMemcpyAsync", dst, count, src, count, kind))) return e;
        if (kind == cudaMemcpyHostToDevice && count && !pinned(src, count))
            return (cudaError_t)ld_emu_capture_refuse("cudaMemcpyAsync from pageable host memory");
        return (cudaError_t)ld_emu_capture_copy(dst, src, count, (int)kind, 0);
    }
    return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    cudaError_t e = (cudaError_t)ld_emu_capture_stream((void *)stream, "cudaMemsetAsync");
    if (e) return e;
    if (!ld_emu_capturing()) return cudaMemset(devPtr, value, count);
    if (count && !on_device(devPtr, count)) {
        fprintf(stderr, "cuda emu: cudaMemsetAsync of %zu bytes at %p: not device memory\n", count, devPtr);
        return cudaErrorInvalidValue;
    }
    return (cudaError_t)ld_emu_capture_copy(devPtr, NULL, count, -1, value);
}

/* rows of `width` bytes, pitches apart, as `fn` (cudaMemcpy2D and its
 * async twin) checks them: a pitch below the width is
 * cudaErrorInvalidPitchValue, as the runtime says; each side's span, its
 * first row's first byte to its last row's last, on the side its kind
 * names */
static cudaError_t rows_ok(const char *fn, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, enum cudaMemcpyKind kind)
{
    if (height > 1 && (dpitch < width || spitch < width)) return cudaErrorInvalidPitchValue;
    if (!height || !width) return cudaSuccess;
    return sides(fn, dst, (height - 1) * dpitch + width, src, (height - 1) * spitch + width, kind);
}

/* rows of `width` bytes, pitches apart (rows_ok) */
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind)
{
    if (ld_emu_capturing()) return (cudaError_t)ld_emu_capture_refuse("cudaMemcpy2D (synchronous)");
    ld_emu_graphs_drain();
    ld_emu_census_count(copy_name(kind, 1));
    ld_emu_journal_copy(copy_name(kind, 1), dst, src, width * height);
    cudaError_t e = rows_ok("cudaMemcpy2D", dst, dpitch, src, spitch, width, height, kind);
    if (e) return e;
    for (size_t r = 0; r < height; r++) memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream)
{
    cudaError_t e = (cudaError_t)ld_emu_capture_stream((void *)stream, "cudaMemcpy2DAsync");
    if (e) return e;
    if (!ld_emu_capturing()) return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyHostToDevice)
        return (cudaError_t)ld_emu_capture_refuse("cudaMemcpy2DAsync to the host (ours read it at once)");
    if ((e = rows_ok("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind))) return e;
    if (kind == cudaMemcpyHostToDevice && height && width && !pinned(src, (height - 1) * spitch + width))
        return (cudaError_t)ld_emu_capture_refuse("cudaMemcpy2DAsync from pageable host memory");
    return (cudaError_t)ld_emu_capture_rows(dst, dpitch, src, spitch, width, height, (int)kind);
}

/* ---------------------------------------------------------------- events */

/* an event handle is a pointer the runtime owns: one byte of ours */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    *event = (cudaEvent_t)malloc(1);
    return *event ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    free(event);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    if (ld_emu_capturing()) return (cudaError_t)ld_emu_capture_refuse("cudaEventRecord (a capture's event is not a record)");
    (void)event;
    (void)stream;
    return cudaSuccess;
}

/* The emulator's streams have run their work when a call returns (graphs
 * aside, drained before a collective and at each wait): a recorded event
 * is done.  Any thread may ask (comm_nccl.c's watchdog does). */
cudaError_t cudaEventQuery(cudaEvent_t event)
{
    (void)event;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    if (ld_emu_capturing()) return (cudaError_t)ld_emu_capture_refuse("cudaEventSynchronize");
    ld_emu_graphs_drain();
    (void)event;
    return cudaSuccess;
}
