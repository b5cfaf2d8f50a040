/* cuda_pointwise.cu - rope, the KV copy, swiglu, add, softmax.  The
 * element-wise ops have nothing to reduce: both kernels compute the
 * reference's expression per element (ref: one thread per element; custom:
 * a grid-stride loop of four elements per step, or for RoPE one cos/sin per
 * (token, frequency) shared by the heads).  Softmax reduces over a row: ref
 * is ld_ref_softmax's loop on one thread per row, custom a block per row
 * with a fixed tree. */
#include <cuda_runtime.h>

#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

#define FULL 0xffffffffu

static unsigned blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 0x7fffffffu ? 0x7fffffffu : b);
}

/* grid-stride launches: enough blocks for the device, never more than n
 * needs */
static unsigned stride_blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65536 ? 65536 : b);
}

/* ------------------------------------------------------------ rope */

/* one thread per (t, h, i < hd/2): the pair (i, i + hd/2) of head h */
__global__ void rope_ref(float *x, int T, int n_heads, int hd, const float *inv_freq, int pos0)
{
    int half = hd / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)n_heads * (size_t)half) return;
    int i = (int)(idx % (size_t)half);
    size_t th = idx / (size_t)half; /* t * n_heads + h */
    int t = (int)(th / (size_t)n_heads);
    float pos = (float)(pos0 + t);
    float a = pos * inv_freq[i];
    float c = cosf(a), s = sinf(a);
    float *v = x + th * (size_t)hd;
    float x0 = v[i], x1 = v[i + half];
    v[i] = x0 * c - x1 * s;
    v[i + half] = x1 * c + x0 * s;
}

/* one thread per (t, i): cos and sin once, applied to every head */
__global__ void rope_custom(float *x, int T, int n_heads, int hd, const float *inv_freq, int pos0)
{
    int half = hd / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)half) return;
    int i = (int)(idx % (size_t)half), t = (int)(idx / (size_t)half);
    float pos = (float)(pos0 + t);
    float a = pos * inv_freq[i];
    float c = cosf(a), s = sinf(a);
    float *row = x + (size_t)t * (size_t)n_heads * (size_t)hd;
    for (int h = 0; h < n_heads; h++) {
        float *v = row + (size_t)h * (size_t)hd;
        float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x1 * c + x0 * s;
    }
}

extern "C" int ld_cu_rope(int v, float *x, int T, int n_heads, int hd, const float *inv_freq, int pos0)
{
    if (T <= 0 || n_heads <= 0 || hd < 2) return 0;
    size_t half = (size_t)(hd / 2);
    if (v == LD_CU_REF) {
        size_t n = (size_t)T * (size_t)n_heads * half;
        rope_ref<<<blocks_for(n, 256), 256>>>(x, T, n_heads, hd, inv_freq, pos0);
    } else {
        size_t n = (size_t)T * half;
        rope_custom<<<blocks_for(n, 128), 128>>>(x, T, n_heads, hd, inv_freq, pos0);
    }
    return ld_cu_launched();
}

/* ------------------------------------------------------------ copy */

__global__ void copy_ref(float *dst, const float *src, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

extern "C" int ld_cu_copy(int v, float *dst, const float *src, size_t n)
{
    if (!n) return 0;
    if (v == LD_CU_REF) {
        copy_ref<<<blocks_for(n, 256), 256>>>(dst, src, n);
        return ld_cu_launched();
    }
    cudaError_t e = cudaMemcpyAsync(dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice, cudaStreamPerThread);
    return e != cudaSuccess ? (int)e : ld_cu_launched(); /* counted as a graph's operation */
}

/* ------------------------------------------------------------ swiglu, add */

__device__ __forceinline__ float silu_mul(float g, float u)
{
    return g / (1.0f + expf(-g)) * u;
}

__global__ void swiglu_ref(float *out, const float *gate, const float *up, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = silu_mul(gate[i], up[i]);
}

/* grid-stride over groups of four elements, the tail one by one */
__global__ void swiglu_custom(float *out, const float *gate, const float *up, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = n / 4;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < n4; g += stride) {
        size_t i = g * 4;
        float a0 = gate[i], a1 = gate[i + 1], a2 = gate[i + 2], a3 = gate[i + 3];
        float u0 = up[i], u1 = up[i + 1], u2 = up[i + 2], u3 = up[i + 3];
        out[i] = silu_mul(a0, u0);
        out[i + 1] = silu_mul(a1, u1);
        out[i + 2] = silu_mul(a2, u2);
        out[i + 3] = silu_mul(a3, u3);
    }
    for (size_t i = n4 * 4 + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = silu_mul(gate[i], up[i]);
}

extern "C" int ld_cu_swiglu(int v, float *out, const float *gate, const float *up, size_t n)
{
    if (!n) return 0;
    if (v == LD_CU_REF) swiglu_ref<<<blocks_for(n, 256), 256>>>(out, gate, up, n);
    else swiglu_custom<<<stride_blocks((n + 3) / 4, 256), 256>>>(out, gate, up, n);
    return ld_cu_launched();
}

__global__ void add_ref(float *x, const float *y, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

__global__ void add_custom(float *x, const float *y, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = n / 4;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < n4; g += stride) {
        size_t i = g * 4;
        x[i] += y[i];
        x[i + 1] += y[i + 1];
        x[i + 2] += y[i + 2];
        x[i + 3] += y[i + 3];
    }
    for (size_t i = n4 * 4 + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[i] += y[i];
}

extern "C" int ld_cu_add(int v, float *x, const float *y, size_t n)
{
    if (!n) return 0;
    if (v == LD_CU_REF) add_ref<<<blocks_for(n, 256), 256>>>(x, y, n);
    else add_custom<<<stride_blocks((n + 3) / 4, 256), 256>>>(x, y, n);
    return ld_cu_launched();
}

/* ------------------------------------------------------------ softmax */

/* one thread per row: ld_ref_softmax's loop (in place safe as the C is) */
__global__ void softmax_ref(float *out, const float *x, int rows, int n)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *xr = x + (size_t)r * (size_t)n;
    float *o = out + (size_t)r * (size_t)n;
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (xr[i] > mx) mx = xr[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        o[i] = expf(xr[i] - mx);
        sum += o[i];
    }
    for (int i = 0; i < n; i++) o[i] /= sum;
}

#define SM_THREADS 256

/* one block per row: max (exact in any order), thread j's partial sum of
 * exp over i = j + 256 m (m ascending), the fixed tree, then each thread
 * rewrites the elements it read */
__global__ void softmax_custom(float *out, const float *x, int n)
{
    __shared__ float sh[SM_THREADS];
    const float *xr = x + (size_t)blockIdx.x * (size_t)n;
    float *o = out + (size_t)blockIdx.x * (size_t)n;
    int j = threadIdx.x;
    float mx = -INFINITY;
    for (int i = j; i < n; i += SM_THREADS)
        if (xr[i] > mx) mx = xr[i];
    sh[j] = mx;
    __syncthreads();
    for (int s = SM_THREADS / 2; s > 0; s >>= 1) {
        if (j < s && sh[j + s] > sh[j]) sh[j] = sh[j + s];
        __syncthreads();
    }
    mx = sh[0];
    __syncthreads();
    float p = 0.0f;
    for (int i = j; i < n; i += SM_THREADS) p += expf(xr[i] - mx);
    sh[j] = p;
    __syncthreads();
    for (int s = SM_THREADS / 2; s > 0; s >>= 1) {
        if (j < s) sh[j] += sh[j + s];
        __syncthreads();
    }
    float sum = sh[0];
    for (int i = j; i < n; i += SM_THREADS) o[i] = expf(xr[i] - mx) / sum;
}

extern "C" int ld_cu_softmax(int v, float *out, const float *x, int rows, int n)
{
    if (rows <= 0 || n <= 0) return 0;
    if (v == LD_CU_REF) softmax_ref<<<blocks_for((size_t)rows, 64), 64>>>(out, x, rows, n);
    else softmax_custom<<<(unsigned)rows, SM_THREADS>>>(out, x, n);
    return ld_cu_launched();
}
