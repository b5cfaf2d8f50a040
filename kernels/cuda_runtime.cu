/* cuda_runtime.cu - the CUDA runtime calls of cuda_ops.h (device, memory,
 * errors), so that C code never includes a CUDA header. */
#include <cuda_runtime.h>

#include <string.h>

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

extern "C" int ld_cu_free(void *p)
{
    return p ? ret(cudaFree(p)) : 0;
}

extern "C" int ld_cu_memset0(void *p, size_t bytes)
{
    return bytes ? ret(cudaMemset(p, 0, bytes)) : 0;
}

extern "C" int ld_cu_h2d(void *dst, const void *src, size_t bytes)
{
    return bytes ? ret(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice)) : 0;
}

extern "C" int ld_cu_d2h(void *dst, const void *src, size_t bytes)
{
    return bytes ? ret(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost)) : 0;
}

extern "C" int ld_cu_d2d(void *dst, const void *src, size_t bytes)
{
    return bytes ? ret(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice)) : 0;
}

extern "C" int ld_cu_d2d_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                              size_t rows)
{
    if (!width || !rows) return 0;
    return ret(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice));
}

extern "C" int ld_cu_sync(void)
{
    cudaError_t e = cudaDeviceSynchronize();
    cudaError_t l = cudaGetLastError();
    return (int)(e != cudaSuccess ? e : l);
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
