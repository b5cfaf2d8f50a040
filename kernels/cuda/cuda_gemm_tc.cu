/* cuda_gemm_tc.cu - the tensor-core GEMM of BF16 weights (ld_cu_matmul_tc,
 * see cuda_ops.h): out[T][N] = bf16(x)[T][K] . w[N][K]^T (+ bias), fp32
 * accumulation in mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32.
 *
 * Tiles: a block of 8 warps computes BM = 128 token rows by BN = 128 (or
 * 64, by N) output columns, stepping through K in slices of BK = 32 staged
 * in shared memory, two slices in flight: the next slice of w is copied
 * with cp.async (16 bytes a copy, zero-filled past N and K) and the next
 * slice of x read into registers while the current one is multiplied; x is
 * rounded to bf16 (nearest even) when it is written to shared memory, past
 * T and K as zeros.  Each warp owns 64 rows by BN / 4 columns: 4 x (BN/32)
 * m16n8 accumulators of 4 floats per lane, fed by fragments loaded as
 * 32-bit words at the positions cuda_mma_layout.h gives (rows padded to 40
 * bf16 so that a fragment load hits 32 distinct banks).
 *
 * Determinism: every output's sum is the chain of mma's over k = 0..15,
 * 16..31, ... in ascending order, starting from zero; nothing else is
 * added into it (no split-K, no atomics).  The mma computes each output
 * row from that row of A only, and padding rows and columns are zeros, so
 * a row's bits depend on its own inputs and on N and K, never on T or on
 * which other rows share its tile.  The tile width is chosen by N alone.
 *
 * Requirements (ld_cu_matmul_tc_supported): BF16 weights, K > 0 and a
 * multiple of 8 (16-byte rows of w and x for the copies), an sm_80+
 * device; x, w 16-byte aligned (device allocations are). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdint.h>

#include "cuda_mma_layout.h"
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define TC_BM 128                 /* token rows per block */
#define TC_BK 32                  /* k per shared-memory slice */
#define TC_LD (TC_BK + 8)         /* a staged row: 40 bf16 = 80 bytes */
#define TC_THREADS 256            /* 8 warps: 2 along M, 4 along N */
#define TC_WM (TC_BM / 2)         /* rows per warp */
#define TC_MT (TC_WM / LD_MMA_M)  /* m16 tiles per warp */
#define TC_A_LOADS (TC_BM * TC_BK / 4 / TC_THREADS) /* float4 of x per thread and slice */

/* ------------------------------------------------------------ PTX */

#ifndef LD_CU_EMU /* tests/support/cuda_emu/cuda_emu.cuh runs these four on the CPU */
/* 16 bytes global -> shared, asynchronously; `bytes` (0 or 16) are read,
 * the rest of the 16 zero-filled */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void cp_async_wait_all(void)
{
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* c += a . b, one m16n8k16 (fragments as cuda_mma_layout.h) */
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

/* ------------------------------------------------------------ elements */

/* two floats rounded to bf16 (nearest even), packed: lo in the low half */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
    return l | (h << 16);
}

/* the weight row of output column n (ld_ref_matmul_ex's rope order) */
__device__ __forceinline__ size_t tc_src_row(int n, int rope_hd)
{
    if (rope_hd <= 0) return (size_t)n;
    int h = n / rope_hd, r = n % rope_hd, half = rope_hd / 2;
    return (size_t)h * rope_hd + 2 * (r % half) + r / half;
}

/* bias[n] as fp32 (F32, F16, BF16: exact conversions, as ref_quant.c's) */
__device__ __forceinline__ float tc_bias(const void *bias, int dt, int n)
{
    if (!bias) return 0.0f;
    const unsigned short *h = (const unsigned short *)bias;
    if (dt == LD_KDT_F16) return __half2float(__ushort_as_half(h[n]));
    if (dt == LD_KDT_BF16) return __uint_as_float((uint32_t)h[n] << 16);
    return ((const float *)bias)[n];
}

/* ------------------------------------------------------------ staging */

/* this thread's TC_A_LOADS float4 of x's slice at k0 (zeros past T, K) */
__device__ __forceinline__ void load_x(float4 r[TC_A_LOADS], const float *x, int T, int K, int m0, int k0)
{
#pragma unroll
    for (int j = 0; j < TC_A_LOADS; j++) {
        int idx = (int)threadIdx.x + j * TC_THREADS, row = idx / (TC_BK / 4), c = (idx % (TC_BK / 4)) * 4;
        int m = m0 + row, k = k0 + c;
        r[j] = m < T && k < K ? __ldg((const float4 *)(x + (size_t)m * (size_t)K + k)) : make_float4(0, 0, 0, 0);
    }
}

/* ... rounded to bf16 into the staged A slice [TC_BM][TC_LD] */
__device__ __forceinline__ void store_x(uint16_t *as, const float4 r[TC_A_LOADS])
{
#pragma unroll
    for (int j = 0; j < TC_A_LOADS; j++) {
        int idx = (int)threadIdx.x + j * TC_THREADS, row = idx / (TC_BK / 4), c = (idx % (TC_BK / 4)) * 4;
        *(uint2 *)(as + row * TC_LD + c) = make_uint2(pack_bf16(r[j].x, r[j].y), pack_bf16(r[j].z, r[j].w));
    }
}

/* w's slice at k0 for columns n0.. into the staged B slice [BN][TC_LD],
 * 16 bytes (8 bf16) a copy, zeros past N and K */
template <int BN>
__device__ __forceinline__ void load_w(uint16_t *bs, const uint16_t *w, int N, int K, int n0, int k0, int rope_hd)
{
    for (int idx = (int)threadIdx.x; idx < BN * (TC_BK / 8); idx += TC_THREADS) {
        int row = idx / (TC_BK / 8), c = (idx % (TC_BK / 8)) * 8;
        int n = n0 + row, k = k0 + c, ok = n < N && k < K;
        const uint16_t *src = ok ? w + tc_src_row(n, rope_hd) * (size_t)K + k : w;
        cp_async16(bs + row * TC_LD + c, src, ok ? 16 : 0);
    }
}

/* ------------------------------------------------------------ kernel */

/* one staged slice through the warp's mma's: 2 k16 steps, in k order */
template <int NT>
__device__ __forceinline__ void mma_slice(float acc[TC_MT][NT][4], const uint16_t *as, const uint16_t *bs, int wm,
                                          int wn, int lane)
{
#pragma unroll
    for (int ks = 0; ks < TC_BK; ks += LD_MMA_K) {
        uint32_t a[TC_MT][4], b[NT][2];
#pragma unroll
        for (int mi = 0; mi < TC_MT; mi++) {
            const uint16_t *t = as + (wm + mi * LD_MMA_M) * TC_LD + ks; /* the m16 x k16 tile */
#pragma unroll
            for (int r = 0; r < 4; r++) a[mi][r] = *(const uint32_t *)(t + ld_mma_a_off(lane, r, TC_LD));
        }
#pragma unroll
        for (int ni = 0; ni < NT; ni++) {
            const uint16_t *t = bs + (wn + ni * LD_MMA_N) * TC_LD + ks; /* the n8 x k16 tile */
#pragma unroll
            for (int r = 0; r < 2; r++) b[ni][r] = *(const uint32_t *)(t + ld_mma_b_off(lane, r, TC_LD));
        }
#pragma unroll
        for (int mi = 0; mi < TC_MT; mi++)
#pragma unroll
            for (int ni = 0; ni < NT; ni++) mma_bf16(acc[mi][ni], a[mi], b[ni]);
    }
}

/* the accumulators (+ bias) to out, inside T x N */
template <int NT>
__device__ __forceinline__ void store_out(float *out, float acc[TC_MT][NT][4], const void *bias, int bias_dt, int T,
                                          int N, int m0, int n0, int lane)
{
#pragma unroll
    for (int mi = 0; mi < TC_MT; mi++)
#pragma unroll
        for (int ni = 0; ni < NT; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int m = m0 + mi * LD_MMA_M + ld_mma_c_row(lane, i), n = n0 + ni * LD_MMA_N + ld_mma_c_col(lane, i);
                if (m < T && n < N) out[(size_t)m * (size_t)N + n] = acc[mi][ni][i] + tc_bias(bias, bias_dt, n);
            }
}

/* BN = 4 warps x NT n8 tiles x 8 columns */
template <int NT>
__global__ void __launch_bounds__(TC_THREADS)
    gemm_tc(float *out, const float *x, const uint16_t *w, const void *bias, int bias_dt, int T, int K, int N,
            int rope_hd)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int BN = 4 * NT * LD_MMA_N;
    __shared__ __align__(16) uint16_t as[2][TC_BM * TC_LD];
    __shared__ __align__(16) uint16_t bs[2][BN * TC_LD];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int wm = (warp / 4) * TC_WM, wn = (warp % 4) * NT * LD_MMA_N;
    int m0 = blockIdx.y * TC_BM, n0 = blockIdx.x * BN, nk = (K + TC_BK - 1) / TC_BK;
    float acc[TC_MT][NT][4];
#pragma unroll
    for (int mi = 0; mi < TC_MT; mi++)
#pragma unroll
        for (int ni = 0; ni < NT; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mi][ni][i] = 0.0f;
    float4 xr[TC_A_LOADS];
    load_w<BN>(bs[0], w, N, K, n0, 0, rope_hd);
    cp_async_commit();
    load_x(xr, x, T, K, m0, 0);
    store_x(as[0], xr);
    cp_async_wait_all();
    __syncthreads();
    for (int kt = 0; kt < nk; kt++) {
        int cur = kt & 1, more = kt + 1 < nk;
        if (more) { /* the next slice on its way while this one is multiplied */
            load_w<BN>(bs[cur ^ 1], w, N, K, n0, (kt + 1) * TC_BK, rope_hd);
            cp_async_commit();
            load_x(xr, x, T, K, m0, (kt + 1) * TC_BK);
        }
        mma_slice<NT>(acc, as[cur], bs[cur], wm, wn, lane);
        if (more) store_x(as[cur ^ 1], xr);
        cp_async_wait_all();
        __syncthreads(); /* the next slice is in; this one is free again */
    }
    store_out<NT>(out, acc, bias, bias_dt, T, N, m0 + wm, n0 + wn, lane);
#else
    (void)out, (void)x, (void)w, (void)bias, (void)bias_dt, (void)T, (void)K, (void)N, (void)rope_hd;
#endif
}

/* ------------------------------------------------------------ launcher */

extern "C" int ld_cu_matmul_tc_supported(ld_kdt dt, int K)
{
    return dt == LD_KDT_BF16 && K > 0 && K % 8 == 0;
}

/* 1 when the current device runs the kernel (sm_80 or later) */
static int device_has_mma(int *code)
{
    int dev = 0, major = 0;
    *code = (int)cudaGetDevice(&dev);
    if (!*code) *code = (int)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    return !*code && major >= 8;
}

/* columns per block: 128, or 64 where N is small enough that 128-wide
 * tiles would leave most of the device idle (a function of N only) */
#define TC_NARROW_N 4096

extern "C" int ld_cu_matmul_tc(float *out, const float *x, const void *w, ld_kdt dt, const void *bias,
                               ld_kdt bias_dt, int T, int K, int N, int rope_hd)
{
    if (T <= 0 || N <= 0) return 0;
    if (!ld_cu_matmul_tc_supported(dt, K)) return (int)cudaErrorInvalidValue;
    if (bias && bias_dt != LD_KDT_F32 && bias_dt != LD_KDT_F16 && bias_dt != LD_KDT_BF16)
        return (int)cudaErrorInvalidValue;
    if (((uintptr_t)x | (uintptr_t)w) & 15) return (int)cudaErrorMisalignedAddress;
    int code;
    if (!device_has_mma(&code)) return code ? code : (int)cudaErrorNoKernelImageForDevice;
    unsigned gy = (unsigned)((T + TC_BM - 1) / TC_BM);
    if (gy > 65535u) return (int)cudaErrorInvalidValue;
    const uint16_t *wb = (const uint16_t *)w;
    if (N <= TC_NARROW_N) {
        dim3 grid((unsigned)((N + 63) / 64), gy);
        gemm_tc<2><<<grid, TC_THREADS>>>(out, x, wb, bias, (int)bias_dt, T, K, N, rope_hd);
    } else {
        dim3 grid((unsigned)((N + 127) / 128), gy);
        gemm_tc<4><<<grid, TC_THREADS>>>(out, x, wb, bias, (int)bias_dt, T, K, N, rope_hd);
    }
    return ld_cu_launched();
}
