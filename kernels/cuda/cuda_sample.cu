/* cuda_sample.cu - replay_sample.c's sampler on the device (cuda_ops.h,
 * section sampling).
 *
 * The generator is the same pure integer function as ld_sample_hash (the
 * same 64-bit finaliser and constants, written again here: kernels/ never
 * includes replay/), so its numbers are the CPU's bit for bit; the test
 * (tests/kernels/cuda/test_cuda_ds.c) compares them with replay's.
 *
 * ref:    the max and the sum of exp((double)x / t - max) in index order
 *         by a thread per row (the C loop), p = e / sum; the sorted order
 *         by a thread per (row, id) counting the ids that rank before it
 *         (probability descending, then id ascending: a total order, so
 *         the ranks are a permutation); the filters and the inverse CDF by
 *         a thread per row in sorted order, the C loop.
 * custom: a block per row for the max (exact in any order) and the sum (a
 *         fixed tree: it may differ from the C sum in the last bits, so the
 *         probabilities may differ by an ulp), a bitonic sort of (p, id)
 *         per row padded to a power of two, then the same walk as ref.
 * Greedy rows (temperature < 1e-6 or NaN, or top_k == 1): the first
 * argmax, as the C argmax (a NaN at id 0 stays the answer; other NaNs never
 * win). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)
#define SAMPLE_EPS 1e-6 /* replay_sample.h's LD_SAMPLE_EPS */

/* ---------------------------------------------------------------- generator */

__host__ __device__ static inline uint64_t fmix64(uint64_t z)
{
    z ^= z >> 31;
    z *= 0x7fb5d329728ea185ULL;
    z ^= z >> 27;
    z *= 0x81dadef4bc2dd44dULL;
    z ^= z >> 33;
    return z;
}

__host__ __device__ static inline uint64_t sample_hash(uint64_t seed, uint64_t pos)
{
    uint64_t k = fmix64(seed ^ 0x6a09e667f3bcc909ULL);
    return fmix64(k + fmix64(pos * 0x9e3779b97f4a7c15ULL + 0xbb67ae8584caa73bULL));
}

__host__ __device__ static inline double sample_uniform(uint64_t seed, uint64_t pos)
{
    return (double)(sample_hash(seed, pos) >> 11) * 0x1.0p-53;
}

__global__ void uniforms_kernel(uint64_t *hash, double *u, uint64_t seed, uint64_t pos0, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (hash) hash[i] = sample_hash(seed, pos0 + (uint64_t)i);
    if (u) u[i] = sample_uniform(seed, pos0 + (uint64_t)i);
}

extern "C" int ld_cu_sample_uniforms(uint64_t *hash, double *u, uint64_t seed, uint64_t pos0, int n)
{
    if (n <= 0) return 0;
    uniforms_kernel<<<ld_cu_blocks((size_t)n, 128), 128>>>(hash, u, seed, pos0, n);
    return ld_cu_launched();
}

/* ---------------------------------------------------------------- greedy */

__global__ void greedy_ref(int32_t *tokens, const float *logits, int T, int V)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float *x = logits + (size_t)t * (size_t)V;
    int best = 0;
    for (int j = 1; j < V; j++)
        if (x[j] > x[best]) best = j;
    tokens[t] = best;
}

/* a before b: larger, then lower id; NaN after everything */
__device__ __forceinline__ int arg_before(float xa, int a, float xb, int b)
{
    return ld_ranks_before(xa, a, xb, b);
}

#define SAMPLE_THREADS 1024

__global__ void __launch_bounds__(SAMPLE_THREADS) greedy_custom(int32_t *tokens, const float *logits, int V)
{
    __shared__ int shb[32];
    int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const float *x = logits + (size_t)t * (size_t)V;
    int best = -1;
    for (int j = tid; j < V; j += SAMPLE_THREADS)
        if (best < 0 || arg_before(x[j], j, x[best], best)) best = j;
    for (int off = 16; off > 0; off >>= 1) {
        int o = __shfl_xor_sync(LD_CU_FULL, best, off);
        if (o >= 0 && (best < 0 || arg_before(x[o], o, x[best], best))) best = o;
    }
    if (lane == 0) shb[w] = best;
    __syncthreads();
    if (tid == 0) {
        best = -1;
        for (int i = 0; i < SAMPLE_THREADS / 32; i++) {
            int o = shb[i];
            if (o >= 0 && (best < 0 || arg_before(x[o], o, x[best], best))) best = o;
        }
        if (x[0] != x[0]) best = 0; /* the C loop never leaves a NaN at 0 */
        tokens[t] = best;
    }
}

/* ---------------------------------------------------------------- layout */

static int pow2_at_least(int V)
{
    int p = 1;
    while (p < V) p <<= 1;
    return p;
}

/* entries per row: V (ref) or the padded power of two (custom) */
static size_t row_len(int v, int V)
{
    return v == LD_CU_REF ? (size_t)V : (size_t)pow2_at_least(V);
}

/* [T][2] doubles (max, sum), [T][P] doubles (p), [T][P] int32 (order) */
extern "C" size_t ld_cu_sample_work(int v, int T, int V)
{
    if (T <= 0 || V <= 0) return 0;
    size_t P = row_len(v, V);
    return (size_t)T * (2 * sizeof(double) + P * (sizeof(double) + sizeof(int32_t)));
}

/* ---------------------------------------------------------------- the walk */

/* replay_sample.c's filter after its sort and ld_sampler_token's inverse
 * CDF: prob(r) the probability of rank r (by_id: p[order[r]], else p[r]) */
__device__ int32_t walk(const double *p, const int32_t *order, int by_id, int V, int64_t top_k, double top_p,
                        double min_p, double u)
{
#define PROB(r) (by_id ? p[order[(r)]] : p[(r)])
    int keep = top_k > 0 && top_k < V ? (int)top_k : V;
    if (top_p == top_p && top_p < 1) {
        double before = 0;
        for (int j = 0; j < keep; j++) {
            if (before > top_p) {
                keep = j;
                break;
            }
            before += PROB(j);
        }
    }
    if (min_p == min_p && min_p > 0) {
        double floor_p = PROB(0) * min_p;
        for (int j = 1; j < keep; j++)
            if (PROB(j) < floor_p) {
                keep = j;
                break;
            }
    }
    double sum = 0;
    for (int j = 0; j < keep; j++) sum += PROB(j);
    double target = u * sum, acc = 0;
    for (int j = 0; j < keep; j++) {
        acc += PROB(j);
        if (target < acc) return order[j];
    }
    return order[keep - 1];
#undef PROB
}

__global__ void walk_kernel(int32_t *tokens, const double *p, const int32_t *order, int by_id, size_t P, int T, int V,
                            int64_t top_k, double top_p, double min_p, uint64_t seed, uint64_t pos0)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    tokens[t] = walk(p + (size_t)t * P, order + (size_t)t * P, by_id, V, top_k, top_p, min_p,
                     sample_uniform(seed, pos0 + (uint64_t)t));
}

/* ---------------------------------------------------------------- ref */

__global__ void probs_ref(double *stats, double *p, const float *logits, int T, int V, double temp)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float *x = logits + (size_t)t * (size_t)V;
    double *pr = p + (size_t)t * (size_t)V;
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++)
        if (x[j] / temp > m) m = x[j] / temp;
    for (int j = 0; j < V; j++) {
        pr[j] = exp((double)x[j] / temp - m);
        sum += pr[j];
    }
    for (int j = 0; j < V; j++) pr[j] /= sum;
    stats[2 * (size_t)t] = m;
    stats[2 * (size_t)t + 1] = sum;
}

/* the rank of id j in its row: the ids before it (probability descending,
 * then id ascending); order[rank] = j */
__global__ void rank_ref(int32_t *order, const double *p, int T, int V)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)V) return;
    size_t t = idx / (size_t)V;
    int j = (int)(idx % (size_t)V);
    const double *pr = p + t * (size_t)V;
    double pj = pr[j];
    int rank = 0;
    for (int i = 0; i < V; i++) rank += pr[i] > pj || (pr[i] == pj && i < j);
    order[t * (size_t)V + (size_t)rank] = j;
}

/* ---------------------------------------------------------------- custom */

/* a block per row: max, exps, the tree sum, p = e / sum; ids; the padding
 * (p = -1) sorts last */
__global__ void __launch_bounds__(SAMPLE_THREADS)
    probs_custom(double *stats, double *p, int32_t *order, const float *logits, int V, size_t P, double temp)
{
    __shared__ double sh[32];
    int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const float *x = logits + (size_t)t * (size_t)V;
    double *pr = p + (size_t)t * P;
    int32_t *od = order + (size_t)t * P;
    double m = -INFINITY;
    for (int j = tid; j < V; j += SAMPLE_THREADS)
        if (x[j] / temp > m) m = x[j] / temp;
    for (int off = 16; off > 0; off >>= 1) m = fmax(m, __shfl_xor_sync(LD_CU_FULL, m, off));
    if (lane == 0) sh[w] = m;
    __syncthreads();
    m = -INFINITY;
    for (int i = 0; i < SAMPLE_THREADS / 32; i++) m = fmax(m, sh[i]);
    double part = 0;
    for (int j = tid; j < V; j += SAMPLE_THREADS) {
        double e = exp((double)x[j] / temp - m);
        pr[j] = e;
        part += e;
    }
    double sum = ld_block_sum_d(part, sh);
    for (size_t j = (size_t)tid; j < P; j += SAMPLE_THREADS) {
        if (j < (size_t)V) pr[j] /= sum;
        else pr[j] = -1.0;
        od[j] = (int32_t)j;
    }
    if (tid == 0) {
        stats[2 * (size_t)t] = m;
        stats[2 * (size_t)t + 1] = sum;
    }
}

/* one bitonic step (size k, distance jj) over every row: a thread per
 * element i whose partner i ^ jj is above it */
__global__ void bitonic_step(double *p, int32_t *order, size_t P, int T, size_t k, size_t jj)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * P) return;
    size_t t = idx / P, i = idx % P, l = i ^ jj;
    if (l <= i) return;
    double *pr = p + t * P;
    int32_t *od = order + t * P;
    double pi = pr[i], pl = pr[l];
    int32_t oi = od[i], ol = od[l];
    int l_first = pl > pi || (pl == pi && ol < oi); /* l ranks before i */
    int up = (i & k) == 0;                          /* this run sorted in rank order */
    if (up ? l_first : !l_first) {
        pr[i] = pl;
        pr[l] = pi;
        od[i] = ol;
        od[l] = oi;
    }
}

/* ---------------------------------------------------------------- launcher */

extern "C" int ld_cu_sample(int v, int32_t *tokens, const float *logits, int T, int V, double temperature,
                            int64_t top_k, double top_p, double min_p, uint64_t seed, uint64_t pos0, void *work,
                            size_t work_bytes)
{
    if (T <= 0) return 0;
    if (V <= 0) return INVAL;
    int e;
    if (!(temperature >= SAMPLE_EPS) || top_k == 1) {
        if (v == LD_CU_REF) greedy_ref<<<ld_cu_blocks((size_t)T, 64), 64>>>(tokens, logits, T, V);
        else greedy_custom<<<(unsigned)T, SAMPLE_THREADS>>>(tokens, logits, V);
        return ld_cu_launched();
    }
    if (work_bytes < ld_cu_sample_work(v, T, V)) return INVAL;
    size_t P = row_len(v, V);
    double *stats = (double *)work, *p = stats + 2 * (size_t)T;
    int32_t *order = (int32_t *)(p + (size_t)T * P);
    if (v == LD_CU_REF) {
        probs_ref<<<ld_cu_blocks((size_t)T, 64), 64>>>(stats, p, logits, T, V, temperature);
        if ((e = ld_cu_launched())) return e;
        rank_ref<<<ld_cu_blocks((size_t)T * (size_t)V, 256), 256>>>(order, p, T, V);
        if ((e = ld_cu_launched())) return e;
        walk_kernel<<<ld_cu_blocks((size_t)T, 64), 64>>>(tokens, p, order, 1, P, T, V, top_k, top_p, min_p, seed,
                                                         pos0);
        return ld_cu_launched();
    }
    probs_custom<<<(unsigned)T, SAMPLE_THREADS>>>(stats, p, order, logits, V, P, temperature);
    if ((e = ld_cu_launched())) return e;
    unsigned nb = ld_cu_blocks((size_t)T * P, 256);
    for (size_t k = 2; k <= P; k <<= 1)
        for (size_t jj = k >> 1; jj > 0; jj >>= 1) {
            bitonic_step<<<nb, 256>>>(p, order, P, T, k, jj);
            if ((e = ld_cu_launched())) return e;
        }
    walk_kernel<<<ld_cu_blocks((size_t)T, 64), 64>>>(tokens, p, order, 0, P, T, V, top_k, top_p, min_p, seed, pos0);
    return ld_cu_launched();
}
