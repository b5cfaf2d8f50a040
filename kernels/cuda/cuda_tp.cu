/* cuda_tp.cu - see cuda_tp.h.  Compiled with --fmad=false like the other
 * kernels (nothing here could contract anyway: additions only). */
#include <cuda_runtime.h>

#include "cuda_tp.h"

__global__ void tp_ordered_sum(const float *parts, int n_parts, size_t n, float *out)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = parts[i];
    for (int p = 1; p < n_parts; p++) acc += parts[(size_t)p * n + i];
    out[i] = acc;
}

extern "C" int ld_cu_tp_ordered_sum(const float *parts, int n_parts, size_t n, float *out)
{
    if (n == 0) return 0;
    const unsigned threads = 256;
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 0x7fffffffu) return (int)cudaErrorInvalidValue;
    tp_ordered_sum<<<(unsigned)blocks, threads>>>(parts, n_parts, n, out);
    return (int)cudaGetLastError();
}
