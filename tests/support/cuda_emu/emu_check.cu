/* emu_check.cu - the emulator's own test (ctest cuda_emu.check): what
 * kernels rely on, each against a value computed here on the host.
 *  - thread and block coordinates over a 3-D grid of 3-D blocks;
 *  - __syncthreads: a block-wide tree sum through shared memory;
 *  - warp collectives: __shfl_xor_sync, __shfl_down_sync, __shfl_sync and
 *    __ballot_sync on a full warp and on a partial last warp;
 *  - dynamic shared memory and integer atomics;
 *  - LD_CUDA_EMU_ORDER=reverse: a racy kernel reads its neighbour's write
 *    only in the forward order;
 *  - what a GPU refuses or leaves undefined, as the launch's error: a block
 *    of 2048 threads, a grid of 0, 64 KiB of dynamic shared memory, a warp
 *    collective while lanes of the warp wait at __syncthreads, a shuffle
 *    naming lanes that have returned; and what the hardware allows in
 *    practice, __syncthreads after some threads returned;
 *  - stream capture and graphs: when a graph runs, an update, what capture
 *    refuses.
 * Built by tests/support/cuda_emu/launches.pl like the kernels' .cu files; plain
 * CUDA, so nvcc could build it for a GPU too. */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* as kernels/cuda/cuda_common.cuh */
#ifndef LD_CU_DYN_SMEM
#define LD_CU_DYN_SMEM(type, name) extern __shared__ type name[]
#endif

static int failures;

#define EXPECT(cond, ...)                                                                                             \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            printf("  FAIL %s:%d: ", __FILE__, __LINE__);                                                             \
            printf(__VA_ARGS__);                                                                                      \
            printf("\n");                                                                                             \
            failures++;                                                                                               \
        }                                                                                                             \
    } while (0)

/* ---------------------------------------------------------------- kernels */

__global__ void coords(int *out)
{
    int b = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    int t = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    int per = (int)(blockDim.x * blockDim.y * blockDim.z);
    out[b * per + t] = b * 1000 + t;
}

/* sum of in[] per block of 256 by a shared-memory tree */
__global__ void block_tree(int *out, const int *in)
{
    __shared__ int s[256];
    int t = (int)threadIdx.x;
    s[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if (t < h) s[t] += s[t + h];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

/* per lane: xor-tree sum, its down-shift by 3, lane 5's value, the ballot of odd values */
__global__ void warp_ops(int *out, const int *in, int n)
{
    int i = (int)threadIdx.x;
    int v = i < n ? in[i] : 0;
    int sum = v;
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    int down = __shfl_down_sync(0xffffffffu, v, 3);
    int five = __shfl_sync(0xffffffffu, v, 5);
    unsigned odd = __ballot_sync(0xffffffffu, v & 1);
    if (i < n) {
        out[4 * i] = sum;
        out[4 * i + 1] = down;
        out[4 * i + 2] = five;
        out[4 * i + 3] = (int)odd;
    }
}

/* a histogram through dynamic shared memory and atomics */
__global__ void histogram(int *out, const int *in, int n, int bins)
{
    LD_CU_DYN_SMEM(int, h);
    for (int b = (int)threadIdx.x; b < bins; b += (int)blockDim.x) h[b] = 0;
    __syncthreads();
    for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) atomicAdd(&h[in[i] % bins], 1);
    __syncthreads();
    for (int b = (int)threadIdx.x; b < bins; b += (int)blockDim.x) out[b] = h[b];
}

__global__ void half_barrier(int *out)
{
    if (threadIdx.x < 32) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void split_warp(int *out)
{
    if (threadIdx.x < 16) __syncwarp(); /* lanes 16.. wait at the block's barrier */
    else __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void shuffle_after_return(int *out)
{
    if (threadIdx.x & 1) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 2);
}

/* a race: each thread reads its left neighbour's slot with no barrier
 * between the write and the read */
__global__ void racy_neighbour(int *out)
{
    __shared__ int s[64];
    int t = (int)threadIdx.x;
    s[t] = t + 1;
    out[t] = t ? s[t - 1] : 0;
}

/* each block reads a static __shared__ value before any thread writes it
 * (undefined on a GPU), then writes its block number there */
__global__ void read_before_write(int *out)
{
    __shared__ int s[4], one;
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = s[3];
        out[2 * blockIdx.x + 1] = one;
    }
    __syncthreads();
    if (threadIdx.x == 0) s[3] = one = (int)blockIdx.x + 100;
}

__global__ void nothing(int *out)
{
    (void)out;
}

/* ---------------------------------------------------------------- checks */

static int *dev_ints(const int *host, int n)
{
    int *d = NULL;
    if (cudaMalloc((void **)&d, (size_t)n * sizeof(int)) != cudaSuccess) abort();
    if (host && cudaMemcpy(d, host, (size_t)n * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess) abort();
    return d;
}

static void to_host(int *host, const int *d, int n)
{
    if (cudaMemcpy(host, d, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) abort();
}

static void check_coords(void)
{
    int n = 2 * 3 * 2 * (4 * 2 * 3), *d = dev_ints(NULL, n), h[288];
    coords<<<dim3(2, 3, 2), dim3(4, 2, 3)>>>(d);
    EXPECT(cudaGetLastError() == cudaSuccess, "coords launch");
    to_host(h, d, n);
    for (int b = 0; b < 12; b++)
        for (int t = 0; t < 24; t++) EXPECT(h[b * 24 + t] == b * 1000 + t, "coords block %d thread %d", b, t);
    cudaFree(d);
}

static void check_block_tree(void)
{
    int in[3 * 256], want[3] = {0}, got[3];
    for (int i = 0; i < 3 * 256; i++) in[i] = (i * 7919) % 1000 - 500, want[i / 256] += in[i];
    int *din = dev_ints(in, 3 * 256), *dout = dev_ints(NULL, 3);
    block_tree<<<3, 256>>>(dout, din);
    EXPECT(cudaGetLastError() == cudaSuccess, "block_tree launch");
    to_host(got, dout, 3);
    for (int b = 0; b < 3; b++) EXPECT(got[b] == want[b], "block %d sum %d, want %d", b, got[b], want[b]);
    cudaFree(din);
    cudaFree(dout);
}

/* a full warp (n 32) and a partial one (n 20: lanes past it do not exist) */
static void check_warp(int n)
{
    int in[32], got[128], sum = 0;
    unsigned odd = 0;
    for (int i = 0; i < n; i++) in[i] = 3 * i * i + 1, sum += in[i], odd |= (unsigned)(in[i] & 1) << i;
    int *din = dev_ints(in, n), *dout = dev_ints(NULL, 4 * n);
    warp_ops<<<1, n>>>(dout, din, n);
    EXPECT(cudaGetLastError() == cudaSuccess, "warp_ops launch (%d lanes)", n);
    to_host(got, dout, 4 * n);
    for (int i = 0; i < n; i++) {
        if (n == 32) EXPECT(got[4 * i] == sum, "lane %d xor sum %d, want %d", i, got[4 * i], sum);
        int down = i + 3 < n ? in[i + 3] : in[i]; /* past the warp's lanes: its own value */
        EXPECT(got[4 * i + 1] == down, "lane %d down-shift %d, want %d (%d lanes)", i, got[4 * i + 1], down, n);
        EXPECT(got[4 * i + 2] == in[5], "lane %d lane 5's %d, want %d", i, got[4 * i + 2], in[5]);
        EXPECT((unsigned)got[4 * i + 3] == odd, "lane %d ballot %#x, want %#x", i, (unsigned)got[4 * i + 3], odd);
    }
    cudaFree(din);
    cudaFree(dout);
}

static void check_histogram(void)
{
    enum { N = 5000, BINS = 37 };
    int in[N], want[BINS] = {0}, got[BINS];
    for (int i = 0; i < N; i++) in[i] = (i * 2654435761u) >> 7 & 0xffff, want[in[i] % BINS]++;
    int *din = dev_ints(in, N), *dout = dev_ints(NULL, BINS);
    histogram<<<1, 128, BINS * sizeof(int)>>>(dout, din, N, BINS);
    EXPECT(cudaGetLastError() == cudaSuccess, "histogram launch");
    to_host(got, dout, BINS);
    for (int b = 0; b < BINS; b++) EXPECT(got[b] == want[b], "bin %d: %d, want %d", b, got[b], want[b]);
    cudaFree(din);
    cudaFree(dout);
}

/* launches a GPU refuses or cannot finish: an error, and the next launch clean */
static void check_refusals(void)
{
    int *d = dev_ints(NULL, 1024);
    nothing<<<1, 2048>>>(d);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "a block of 2048 threads");
    nothing<<<0, 32>>>(d);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "a grid of 0 blocks");
    nothing<<<1, 32, 64 * 1024>>>(d);
    EXPECT(cudaGetLastError() != cudaSuccess, "64 KiB of dynamic shared memory without the opt-in");
    half_barrier<<<1, 64>>>(d);
    EXPECT(cudaGetLastError() == cudaSuccess, "__syncthreads after some threads returned (they count as arrived)");
    split_warp<<<1, 64>>>(d);
    EXPECT(cudaGetLastError() == cudaErrorLaunchFailure, "__syncwarp while half the warp waits at __syncthreads");
    shuffle_after_return<<<1, 32>>>(d);
    EXPECT(cudaGetLastError() == cudaErrorLaunchFailure, "a full-mask shuffle after half the warp returned");
    nothing<<<1, 32>>>(d);
    EXPECT(cudaGetLastError() == cudaSuccess, "a launch after the failures");
    cudaFree(d);
}

/* the emulator's thread order (LD_CUDA_EMU_ORDER): forward, the race above
 * reads what it hoped for; reverse, each read comes before its write (and
 * finds the previous launch's values or the NaN fill) */
static void check_order(void)
{
    const char *o = getenv("LD_CUDA_EMU_ORDER");
    int reverse = o && !strcmp(o, "reverse"), got[64], *d = dev_ints(NULL, 64), hoped = 0;
    racy_neighbour<<<1, 64>>>(d);
    EXPECT(cudaGetLastError() == cudaSuccess, "racy_neighbour launch");
    to_host(got, d, 64);
    for (int t = 1; t < 64; t++) hoped += got[t] == t;
    EXPECT(reverse ? hoped < 63 : hoped == 63, "%s order: %d of 63 reads saw their neighbour's write",
           reverse ? "reverse" : "forward", hoped);
    cudaFree(d);
}

/* static __shared__ variables hold the 0xff fill at each block's start,
 * not zeros nor the previous block's (or launch's) values */
static void check_shared_poison(void)
{
    int got[8], *d = dev_ints(NULL, 8);
    for (int launch = 0; launch < 2; launch++) {
        read_before_write<<<4, 32>>>(d);
        EXPECT(cudaGetLastError() == cudaSuccess, "read_before_write launch");
        to_host(got, d, 8);
        for (int i = 0; i < 8; i++)
            EXPECT(got[i] == -1, "launch %d block %d: a static __shared__ int read %d before its write, want -1",
                   launch, i / 2, got[i]);
    }
    cudaFree(d);
}

/* copies whose kind names the wrong side, a memset of host memory, the
 * free of a host pointer: refused (cudaErrorInvalidValue), the right ones
 * done; pinned host memory is host memory */
static void check_copy_sides(void)
{
    int h[16] = {0}, h2[16] = {0}, *pinned = NULL, *d = dev_ints(NULL, 16);
    EXPECT(cudaHostAlloc((void **)&pinned, sizeof h, 0) == cudaSuccess, "cudaHostAlloc");
    printf("  seven refusals expected on stderr:\n");
    fflush(stdout);
    EXPECT(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess, "HtoD to device memory");
    EXPECT(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess, "DtoH to host memory");
    EXPECT(cudaMemcpy(d, pinned, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess, "HtoD from pinned memory");
    EXPECT(cudaMemcpy(h2, h, sizeof h, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "HtoD to host memory");
    EXPECT(cudaMemcpy(d, h, sizeof h, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "DtoH to device memory");
    EXPECT(cudaMemcpy(d, h, sizeof h, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue, "DtoD from host memory");
    EXPECT(cudaMemcpy(d + 8, d, sizeof h, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue,
           "DtoD past the allocation's end");
    EXPECT(cudaMemset(h, 0, sizeof h) == cudaErrorInvalidValue, "memset of host memory");
    EXPECT(cudaMemcpy2D(d, 16, h, 16, 16, 4, cudaMemcpyHostToDevice) == cudaSuccess, "2D HtoD, 4 rows");
    EXPECT(cudaMemcpy2D(d, 32, h, 16, 16, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "2D HtoD whose last row leaves the allocation");
    EXPECT(cudaFree(h) == cudaErrorInvalidValue, "cudaFree of host memory");
    cudaFreeHost(pinned);
    cudaFree(d);
}

__global__ void add_to(int *x, int v)
{
    x[threadIdx.x] += v;
}

/* graph `g` instantiated or updated into *exec, then launched; 0 or the error */
static cudaError_t launch_graph(cudaGraphExec_t *exec, cudaGraph_t g)
{
    cudaError_t e = *exec ? cudaGraphExecUpdate(*exec, g, NULL) : cudaGraphInstantiate(exec, g, 0);
    return e ? e : cudaGraphLaunch(*exec, cudaStreamPerThread);
}

/* stream capture and graphs (emu_graph.c): a captured launch and copy run
 * only when the graph is launched, and after cudaGraphLaunch returns (a
 * pinned source rewritten before the next wait is what the copy reads);
 * an update takes new arguments of the same topology and refuses another;
 * what the runtime refuses during capture invalidates it */
static void check_graphs(void)
{
    int *d = dev_ints(NULL, 4), *pinned = NULL, h[4] = {1, 2, 3, 4}, out[4];
    EXPECT(cudaHostAlloc((void **)&pinned, sizeof h, 0) == cudaSuccess, "cudaHostAlloc");
    memcpy(pinned, h, sizeof h);
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    EXPECT(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed) == cudaSuccess, "begin");
    EXPECT(cudaMemcpyAsync(d, pinned, sizeof h, cudaMemcpyHostToDevice, cudaStreamPerThread) == cudaSuccess, "copy");
    add_to<<<1, 4>>>(d, 10);
    EXPECT(cudaGetLastError() == cudaSuccess, "captured launch");
    EXPECT(cudaStreamEndCapture(cudaStreamPerThread, &g) == cudaSuccess && g, "end");
    EXPECT(launch_graph(&exec, g) == cudaSuccess, "first launch");
    pinned[0] = 100; /* before the graph has run: the copy reads it */
    EXPECT(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess, "read");
    EXPECT(out[0] == 110 && out[3] == 14, "the graph ran after its launch: %d %d", out[0], out[3]);
    cudaGraphDestroy(g);
    /* the same topology, another argument: updated */
    cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed);
    cudaMemcpyAsync(d, pinned, sizeof h, cudaMemcpyHostToDevice, cudaStreamPerThread);
    add_to<<<1, 4>>>(d, 20);
    cudaStreamEndCapture(cudaStreamPerThread, &g);
    EXPECT(launch_graph(&exec, g) == cudaSuccess, "updated launch");
    EXPECT(cudaStreamSynchronize(cudaStreamPerThread) == cudaSuccess, "sync");
    cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost);
    EXPECT(out[0] == 120 && out[1] == 22, "the update's argument: %d %d", out[0], out[1]);
    cudaGraphDestroy(g);
    /* another topology: the update refused, the graph as it was */
    cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed);
    add_to<<<1, 4>>>(d, 1);
    cudaStreamEndCapture(cudaStreamPerThread, &g);
    EXPECT(cudaGraphExecUpdate(exec, g, NULL) == cudaErrorGraphExecUpdateFailure, "a topology change updated");
    cudaGraphDestroy(g);
    printf("  four capture refusals expected on stderr:\n");
    fflush(stdout);
    cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed);
    EXPECT(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost) == cudaErrorStreamCaptureUnsupported,
           "a synchronous copy during capture");
    EXPECT(cudaStreamEndCapture(cudaStreamPerThread, &g) == cudaErrorStreamCaptureInvalidated && !g,
           "a capture after a refusal");
    cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed);
    EXPECT(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, cudaStreamPerThread) ==
               cudaErrorStreamCaptureUnsupported,
           "a captured copy from pageable memory");
    cudaStreamEndCapture(cudaStreamPerThread, &g);
    cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed);
    EXPECT(cudaFree(d) == cudaErrorStreamCaptureUnsupported, "cudaFree during capture");
    cudaStreamEndCapture(cudaStreamPerThread, &g);
    EXPECT(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeRelaxed) != cudaSuccess,
           "a capture of the legacy stream");
    cudaGraphExecDestroy(exec);
    cudaFreeHost(pinned);
    cudaFree(d);
}

int main(void)
{
    check_coords();
    check_block_tree();
    check_warp(32);
    check_warp(20);
    check_histogram();
    check_refusals();
    check_order();
    check_shared_poison();
    check_copy_sides();
    check_graphs();
    printf("%s: %d failures\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
