/* cuda_ds4_compress.cu - DeepSeek-V4's compressor on the device (the
 * softmax pooling of a window of keys into one compressed entry) and
 * V3.2's indexer LayerNorm. */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

/* ================================================================ compressor */

/* slot s (< 2r) of entry w: its row (the position, or its row of a ring
 * of `ring` rows), column and ape row; 0 when absent (as
 * ld_ref_ds4_compress's loop) */
__device__ __forceinline__ int comp_slot(int s, int r, int d, int c, int overlap, int w, int ring, size_t *row,
                                         size_t *col, size_t *j)
{
    int first = s < r, jj = first ? s : s - r;
    if (!overlap) {
        if (!first) return 0;
        *row = (size_t)w * (size_t)r + (size_t)jj;
        *col = (size_t)c;
    } else if (first) {
        if (w == 0) return 0;
        *row = (size_t)(w - 1) * (size_t)r + (size_t)jj;
        *col = (size_t)c;
    } else {
        *row = (size_t)w * (size_t)r + (size_t)jj;
        *col = (size_t)d + (size_t)c;
    }
    if (ring) *row %= (size_t)ring;
    *j = (size_t)jj;
    return 1;
}

/* ref: a thread per (entry, column), the C loop's three passes */
__global__ void comp_ref(float *out, const float *kv, const float *gate, const float *ape, int r, int d,
                         size_t stride, int overlap, int w0, int nw, int ring)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)nw * (size_t)d) return;
    int w = w0 + (int)(idx / (size_t)d), c = (int)(idx % (size_t)d);
    float mx = -INFINITY, sum = 0.0f, acc = 0.0f;
    size_t row, col, j;
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < 2 * r; s++) {
            if (!comp_slot(s, r, d, c, overlap, w, ring, &row, &col, &j)) continue;
            float z = gate[row * stride + col] + ape[j * stride + col];
            if (pass == 0) {
                if (z > mx) mx = z;
            } else {
                sum += expf(z - mx);
            }
        }
    for (int s = 0; s < 2 * r; s++) {
        if (!comp_slot(s, r, d, c, overlap, w, ring, &row, &col, &j)) continue;
        float z = gate[row * stride + col] + ape[j * stride + col];
        acc += kv[row * stride + col] * (expf(z - mx) / sum);
    }
    out[idx] = acc;
}

#define CP_COLS 32
#define CP_PARTS 8

/* custom: a block per (32 columns, entry), 8 slot parts: part y the slots
 * y, y + 8, .. of its column (max, then sum of e and sum of e * kv, fmaf),
 * the 8 parts combined in order by part 0; out = (sum e kv) / (sum e) */
__global__ void __launch_bounds__(CP_COLS *CP_PARTS) comp_custom(float *out, const float *kv, const float *gate,
                                                                 const float *ape, int r, int d, size_t stride,
                                                                 int overlap, int w0, int ring)
{
    __shared__ float sm[CP_PARTS][CP_COLS], ss[CP_PARTS][CP_COLS], sa[CP_PARTS][CP_COLS];
    int cx = threadIdx.x, py = threadIdx.y, c = blockIdx.x * CP_COLS + cx, e = blockIdx.y, w = w0 + e;
    int cv = c < d;
    size_t row, col, j;
    float mx = -INFINITY;
    if (cv)
        for (int s = py; s < 2 * r; s += CP_PARTS)
            if (comp_slot(s, r, d, c, overlap, w, ring, &row, &col, &j))
                mx = fmaxf(mx, gate[row * stride + col] + ape[j * stride + col]);
    sm[py][cx] = mx;
    __syncthreads();
    mx = sm[0][cx];
    for (int y = 1; y < CP_PARTS; y++) mx = fmaxf(mx, sm[y][cx]);
    float sum = 0.0f, acc = 0.0f;
    if (cv)
        for (int s = py; s < 2 * r; s += CP_PARTS)
            if (comp_slot(s, r, d, c, overlap, w, ring, &row, &col, &j)) {
                float ez = expf(gate[row * stride + col] + ape[j * stride + col] - mx);
                sum += ez;
                acc = fmaf(ez, kv[row * stride + col], acc);
            }
    ss[py][cx] = sum;
    sa[py][cx] = acc;
    __syncthreads();
    if (py == 0 && cv) {
        float S = 0.0f, A = 0.0f;
        for (int y = 0; y < CP_PARTS; y++) {
            S += ss[y][cx];
            A += sa[y][cx];
        }
        out[(size_t)e * (size_t)d + (size_t)c] = A / S;
    }
}

extern "C" int ld_cu_ds4_compress(int v, float *out, const float *kv, const float *gate, const float *ape, int r,
                                  int d, size_t stride, int overlap, int w0, int nw, int ring)
{
    if (nw <= 0 || d <= 0) return 0;
    if (r <= 0 || w0 < 0 || stride < (size_t)(overlap ? 2 * d : d) || nw > 65535) return INVAL;
    if (ring && (ring < 2 * r || nw > 1)) return INVAL;
    if (v == LD_CU_REF)
        comp_ref<<<ld_cu_blocks((size_t)nw * (size_t)d, 128), 128>>>(out, kv, gate, ape, r, d, stride, overlap, w0,
                                                                      nw, ring);
    else
        comp_custom<<<dim3((unsigned)((d + CP_COLS - 1) / CP_COLS), (unsigned)nw), dim3(CP_COLS, CP_PARTS)>>>(
            out, kv, gate, ape, r, d, stride, overlap, w0, ring);
    return ld_cu_launched();
}

/* a thread per float of the n rows of a and b */
__global__ void ring_put2(float *ra, float *rb, const float *a, const float *b, size_t W, int ring, int p0, int n)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x, nw = (size_t)n * W;
    if (idx >= 2 * nw) return;
    size_t i = idx % nw, t = i / W, row = ((size_t)p0 + t) % (size_t)ring;
    if (idx < nw)
        ra[row * W + i % W] = a[i];
    else
        rb[row * W + i % W] = b[i];
}

extern "C" int ld_cu_ring_put2(float *ra, float *rb, const float *a, const float *b, size_t W, int ring, int p0,
                               int n)
{
    if (n <= 0 || W == 0) return 0;
    if (ring <= 0 || n > ring || p0 < 0) return INVAL;
    ring_put2<<<ld_cu_blocks(2 * (size_t)n * W, 256), 256>>>(ra, rb, a, b, W, ring, p0, n);
    return ld_cu_launched();
}

/* ================================================================ LayerNorm (V3.2 indexer) */

/* ref: a thread per row, the C loop */
__global__ void ln_ref(float *x, int rows, size_t row_stride, const float *w, const float *b, int dim, float eps)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float *v = x + (size_t)r * row_stride;
    float sum = 0.0f;
    for (int i = 0; i < dim; i++) sum += v[i];
    float mean = sum / (float)dim, ss = 0.0f;
    for (int i = 0; i < dim; i++) {
        float dd = v[i] - mean;
        ss += dd * dd;
    }
    float rstd = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = 0; i < dim; i++) v[i] = (v[i] - mean) * rstd * w[i] + b[i];
}

/* custom: a block per row, the two block-reduced sums */
__global__ void ln_custom(float *x, size_t row_stride, const float *w, const float *b, int dim, float eps)
{
    __shared__ float sh[32];
    float *v = x + (size_t)blockIdx.x * row_stride;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += v[i];
    sum = ld_block_sum(sum, sh);
    float mean = sum / (float)dim, ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float dd = v[i] - mean;
        ss = fmaf(dd, dd, ss);
    }
    ss = ld_block_sum(ss, sh);
    float rstd = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) v[i] = (v[i] - mean) * rstd * w[i] + b[i];
}

extern "C" int ld_cu_ds_layernorm(int v, float *x, int rows, size_t row_stride, const float *w, const float *b,
                                  int dim, float eps)
{
    if (rows <= 0 || dim <= 0) return 0;
    if (row_stride < (size_t)dim) return INVAL;
    if (v == LD_CU_REF)
        ln_ref<<<ld_cu_blocks((size_t)rows, 64), 64>>>(x, rows, row_stride, w, b, dim, eps);
    else
        ln_custom<<<(unsigned)rows, 128>>>(x, row_stride, w, b, dim, eps);
    return ld_cu_launched();
}
