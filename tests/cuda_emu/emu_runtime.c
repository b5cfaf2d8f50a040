/* emu_runtime.c - the CUDA runtime calls of kernels/cuda_*.cu, on the CPU,
 * for the emulator (tests/cuda_emu): device memory is host malloc, a copy
 * is memcpy, a stream and its events are trivially in order (a launch runs
 * to its end before ld_emu_launch returns).
 *
 * New device memory is filled with 0xff bytes (NaN as floats, -1 as
 * integers), as cudaMalloc leaves it undefined: a kernel that reads what no
 * one wrote shows it.  Linked instead of libcudart; the prototypes are the
 * toolkit's own (cuda_runtime_api.h), so a mismatch does not compile. */
#include <cuda_runtime_api.h>

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
    snprintf(prop->name, sizeof prop->name, "logdiff CUDA emulator (tests/cuda_emu)");
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
    return cudaSuccess;
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
    default: return "unknown error";
    }
}

/* ---------------------------------------------------------------- memory */

/* the emulated device's memory, as tests/engine/cuda_mock.c's: a larger
 * allocation fails as out of memory (instead of asking the host) */
#define DEVICE_BYTES ((size_t)64 << 30)

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    *devPtr = size <= DEVICE_BYTES ? malloc(size ? size : 1) : NULL;
    if (!*devPtr) return cudaErrorMemoryAllocation;
    memset(*devPtr, 0xff, size);
    return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
    free(devPtr);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    (void)flags;
    *pHost = malloc(size ? size : 1);
    return *pHost ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *ptr)
{
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

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    ld_emu_census_count("memset");
    memset(devPtr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    ld_emu_census_count(copy_name(kind, 0));
    if (count) memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)stream;
    return cudaMemcpy(dst, src, count, kind);
}

/* rows of `width` bytes, pitches apart; a pitch below the width is
 * cudaErrorInvalidPitchValue, as the runtime says */
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind)
{
    ld_emu_census_count(copy_name(kind, 1));
    if (height > 1 && (dpitch < width || spitch < width)) return cudaErrorInvalidPitchValue;
    for (size_t r = 0; r < height; r++) memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return cudaSuccess;
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
    (void)event;
    (void)stream;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    (void)event;
    return cudaSuccess;
}
