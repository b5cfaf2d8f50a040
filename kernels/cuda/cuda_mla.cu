/* cuda_mla.cu - MLA decode on the device: latent attention, dense or
 * over the indexer's selection (ld_cu_mla_latent, split over the keys), and
 * kv_b_proj absorbed into the query and the output (ld_cu_mla_absorb_q,
 * ld_cu_mla_absorb_out). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_common.cuh"
#include "cuda_mm_warp.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

/* ================================================================ MLA decode */

/* the j-th key of query t: its position */
__device__ __forceinline__ int mla_pos(const int32_t *st, int j)
{
    return st ? (int)st[j] : j;
}

__device__ __forceinline__ float mla_score(const float *qa, const float *qp, const float *kc, const float *kp, int c,
                                           int dr, float scale)
{
    float d = 0.0f;
    for (int i = 0; i < c; i++) d += qa[i] * kc[i];
    for (int i = 0; i < dr; i++) d += qp[i] * kp[i];
    return d * scale;
}

/* one thread per (t, h, i): the scores recomputed for the max, the sum and
 * the weighted sum, each the C reference's loop */
__global__ void mla_ref(float *o_lat, const float *q_abs, const float *q, const float *ckv, const float *kpe, int T,
                        int H, int dn, int dr, int c, int pos0, float scale, const int32_t *sel, int k)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)H * (size_t)c) return;
    size_t it = idx / (size_t)c;
    int i = (int)(idx % (size_t)c), t = (int)(it / (size_t)H), h = (int)(it % (size_t)H);
    int n = pos0 + t + 1;
    const int32_t *st = sel ? sel + (size_t)t * (size_t)k : NULL;
    if (sel && n > k) n = k;
    const float *qa = q_abs + it * (size_t)c;
    const float *qp = q + (size_t)t * (size_t)H * (size_t)(dn + dr) + (size_t)h * (size_t)(dn + dr) + dn;
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        int s = mla_pos(st, j);
        float d = mla_score(qa, qp, ckv + (size_t)s * (size_t)c, kpe + (size_t)s * (size_t)dr, c, dr, scale);
        if (d > mx) mx = d;
    }
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        int s = mla_pos(st, j);
        sum += expf(mla_score(qa, qp, ckv + (size_t)s * (size_t)c, kpe + (size_t)s * (size_t)dr, c, dr, scale) - mx);
    }
    float o = 0.0f;
    for (int j = 0; j < n; j++) {
        int s = mla_pos(st, j);
        float p = expf(mla_score(qa, qp, ckv + (size_t)s * (size_t)c, kpe + (size_t)s * (size_t)dr, c, dr, scale) -
                       mx) /
                  sum;
        o += p * ckv[(size_t)s * (size_t)c + (size_t)i];
    }
    o_lat[idx] = o;
}

#define MLA_THREADS 128
#define MLA_HG 8      /* heads per block of the split kernel (they share the latent reads) */
#define MLA_KC 8      /* keys per chunk staged in shared memory */
#define MLA_GTHREADS 256
#define MLA_RMAX 3    /* c <= MLA_RMAX * MLA_GTHREADS */
#define MLA_MAXW 704  /* c + dr: (MLA_HG + MLA_KC) * (c + dr) floats of shared memory */

/* mla_split's scores: the split's cnt keys (positions ps) staged MLA_KC at
 * a time as [ckv | kpe] rows in kv, each read by every head of the group;
 * per (head, key) a warp's dot (lanes over the latent then the rope part,
 * fmaf in order, shuffle tree) * scale into pe[h][j] */
static __device__ __forceinline__ void mla_split_scores(float (*pe)[LD_CU_MLA_SPLIT], float *kv, const float *qs,
                                                        const int *ps, int cnt, int hn, const float *ckv,
                                                        const float *kpe, int c, int dr, float scale)
{
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, W = c + dr;
    for (int j0 = 0; j0 < cnt; j0 += MLA_KC) {
        int kn = cnt - j0 < MLA_KC ? cnt - j0 : MLA_KC;
        for (int x = tid; x < kn * W; x += MLA_GTHREADS) {
            int j = x / W, i = x % W;
            size_t pos = (size_t)ps[j0 + j];
            kv[x] = i < c ? ckv[pos * (size_t)c + (size_t)i] : kpe[pos * (size_t)dr + (size_t)(i - c)];
        }
        __syncthreads();
        for (int pr = w; pr < hn * kn; pr += MLA_GTHREADS / 32) {
            int h = pr / kn, j = pr % kn;
            const float *qh = qs + h * W, *kr = kv + j * W;
            float d = 0.0f;
            for (int i = lane; i < c; i += 32) d = fmaf(qh[i], kr[i], d);
            for (int i = lane; i < dr; i += 32) d = fmaf(qh[c + i], kr[c + i], d);
            d = ld_warp_sum(d);
            if (lane == 0) pe[h][j0 + j] = d * scale;
        }
        __syncthreads();
    }
}

/* per head (a thread each): the max of its scores, their exps in place and
 * the exps' sum, in key order, into ml[h] = (m, l) */
static __device__ __forceinline__ void mla_split_softmax(float (*pe)[LD_CU_MLA_SPLIT], float (*ml)[2], int cnt,
                                                         int hn)
{
    int tid = threadIdx.x;
    if (tid < hn) {
        float m = -INFINITY, l = 0.0f;
        for (int j = 0; j < cnt; j++) m = fmaxf(m, pe[tid][j]);
        for (int j = 0; j < cnt; j++) {
            pe[tid][j] = expf(pe[tid][j] - m);
            l += pe[tid][j];
        }
        ml[tid][0] = m;
        ml[tid][1] = l;
    }
    __syncthreads();
}

/* o[h][r] = sum_j p[h][j] ckv[j][i], i = tid + r * MLA_GTHREADS (key
 * order, fmaf), the keys' latent rows staged again in kv */
static __device__ __forceinline__ void mla_split_values(float (&o)[MLA_HG][MLA_RMAX], float (*pe)[LD_CU_MLA_SPLIT],
                                                        float *kv, const int *ps, int cnt, int hn, const float *ckv,
                                                        int c, int W)
{
    int tid = threadIdx.x;
#pragma unroll
    for (int h = 0; h < MLA_HG; h++)
#pragma unroll
        for (int r = 0; r < MLA_RMAX; r++) o[h][r] = 0.0f;
    for (int j0 = 0; j0 < cnt; j0 += MLA_KC) {
        int kn = cnt - j0 < MLA_KC ? cnt - j0 : MLA_KC;
        for (int x = tid; x < kn * c; x += MLA_GTHREADS) {
            int j = x / c, i = x % c;
            kv[j * W + i] = ckv[(size_t)ps[j0 + j] * (size_t)c + (size_t)i];
        }
        __syncthreads();
        for (int j = 0; j < kn; j++) {
#pragma unroll
            for (int h = 0; h < MLA_HG; h++) {
                if (h < hn) {
                    float p = pe[h][j0 + j];
#pragma unroll
                    for (int r = 0; r < MLA_RMAX; r++) {
                        int i = tid + r * MLA_GTHREADS;
                        if (i < c) o[h][r] = fmaf(p, kv[j * W + i], o[h][r]);
                    }
                }
            }
        }
        __syncthreads();
    }
}

/* block (t, group of MLA_HG heads, split s): the query rows staged in
 * shared memory, then the split's scores, softmax and weighted latent sum
 * (the helpers above); each head's record rec(t, h, s) = (m, l, o[c]) for
 * mla_merge (an empty split: m = -inf, l = 0). */
__global__ void __launch_bounds__(MLA_GTHREADS)
    mla_split(float *work, const float *q_abs, const float *q, const float *ckv, const float *kpe, int H, int dn,
              int dr, int c, int pos0, float scale, const int32_t *sel, int k, int nsplit)
{
    LD_CU_DYN_SMEM(float, sm); /* qs [MLA_HG][c + dr], kv [MLA_KC][c + dr] */
    __shared__ float pe[MLA_HG][LD_CU_MLA_SPLIT];
    __shared__ float ml[MLA_HG][2];
    __shared__ int ps[LD_CU_MLA_SPLIT];
    int ng = (H + MLA_HG - 1) / MLA_HG;
    int t = (int)(blockIdx.x / (unsigned)ng), h0 = (int)(blockIdx.x % (unsigned)ng) * MLA_HG;
    int s = blockIdx.y, tid = threadIdx.x;
    int hn = H - h0 < MLA_HG ? H - h0 : MLA_HG, W = c + dr;
    int n = pos0 + t + 1;
    const int32_t *st = sel ? sel + (size_t)t * (size_t)k : NULL;
    if (sel && n > k) n = k;
    int a = s * LD_CU_MLA_SPLIT, b = a + LD_CU_MLA_SPLIT < n ? a + LD_CU_MLA_SPLIT : n;
    size_t row0 = (size_t)t * (size_t)H + (size_t)h0;
    if (a >= b) {
        for (int h = tid; h < hn; h += MLA_GTHREADS) {
            float *rec = work + ((row0 + (size_t)h) * (size_t)nsplit + (size_t)s) * (size_t)(c + 2);
            rec[0] = -INFINITY;
            rec[1] = 0.0f;
        }
        return;
    }
    int cnt = b - a;
    float *qs = sm, *kv = sm + MLA_HG * W;
    for (int x = tid; x < hn * W; x += MLA_GTHREADS) {
        int h = x / W, i = x % W;
        size_t row = row0 + (size_t)h;
        qs[x] = i < c ? q_abs[row * (size_t)c + (size_t)i] : q[row * (size_t)(dn + dr) + (size_t)(dn + i - c)];
    }
    for (int j = tid; j < cnt; j += MLA_GTHREADS) ps[j] = mla_pos(st, a + j);
    __syncthreads();
    mla_split_scores(pe, kv, qs, ps, cnt, hn, ckv, kpe, c, dr, scale);
    mla_split_softmax(pe, ml, cnt, hn);
    float o[MLA_HG][MLA_RMAX];
    mla_split_values(o, pe, kv, ps, cnt, hn, ckv, c, W);
#pragma unroll
    for (int h = 0; h < MLA_HG; h++) {
        if (h < hn) {
            float *rec = work + ((row0 + (size_t)h) * (size_t)nsplit + (size_t)s) * (size_t)(c + 2);
            if (tid == 0) {
                rec[0] = ml[h][0];
                rec[1] = ml[h][1];
            }
#pragma unroll
            for (int r = 0; r < MLA_RMAX; r++) {
                int i = tid + r * MLA_GTHREADS;
                if (i < c) rec[2 + i] = o[h][r];
            }
        }
    }
}

/* block per row: the splits merged in ascending order */
__global__ void __launch_bounds__(MLA_THREADS) mla_merge(float *o_lat, const float *work, int c, int nsplit)
{
    size_t row = blockIdx.x;
    const float *recs = work + row * (size_t)nsplit * (size_t)(c + 2);
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) {
        const float *rec = recs + (size_t)s * (size_t)(c + 2);
        if (rec[1] > 0.0f) M = fmaxf(M, rec[0]);
    }
    float L = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        const float *rec = recs + (size_t)s * (size_t)(c + 2);
        if (rec[1] > 0.0f) L = fmaf(rec[1], expf(rec[0] - M), L);
    }
    for (int i = threadIdx.x; i < c; i += MLA_THREADS) {
        float o = 0.0f;
        for (int s = 0; s < nsplit; s++) {
            const float *rec = recs + (size_t)s * (size_t)(c + 2);
            if (rec[1] > 0.0f) o = fmaf(rec[2 + i], expf(rec[0] - M), o);
        }
        o_lat[row * (size_t)c + (size_t)i] = o / L;
    }
}

static int mla_nsplit(int T, int pos0, const int32_t *sel, int k)
{
    int nmax = pos0 + T;
    if (sel && nmax > k) nmax = k;
    return (nmax + LD_CU_MLA_SPLIT - 1) / LD_CU_MLA_SPLIT;
}

extern "C" size_t ld_cu_mla_latent_work(int v, int T, int n_heads, int c, int pos0, const int32_t *sel, int k)
{
    if (v == LD_CU_REF || T <= 0) return 0;
    return (size_t)T * (size_t)n_heads * (size_t)mla_nsplit(T, pos0, sel, k) * (size_t)(c + 2);
}

extern "C" int ld_cu_mla_latent(int v, float *o_lat, const float *q_abs, const float *q, const float *ckv,
                                const float *kpe, int T, int n_heads, int dn, int dr, int c, int pos0, float scale,
                                const int32_t *sel, int k, float *work, size_t work_floats)
{
    if (T <= 0 || n_heads <= 0 || c <= 0) return 0;
    if (dn < 0 || dr < 0 || pos0 < 0 || (sel && k < 1)) return INVAL;
    if (v == LD_CU_REF) {
        size_t n = (size_t)T * (size_t)n_heads * (size_t)c;
        mla_ref<<<ld_cu_blocks(n, 128), 128>>>(o_lat, q_abs, q, ckv, kpe, T, n_heads, dn, dr, c, pos0, scale, sel,
                                               k);
        return ld_cu_launched();
    }
    int nsplit = mla_nsplit(T, pos0, sel, k);
    if (nsplit > 65535 || c + dr > MLA_MAXW || c > MLA_RMAX * MLA_GTHREADS) return INVAL;
    if (work_floats < ld_cu_mla_latent_work(v, T, n_heads, c, pos0, sel, k)) return INVAL;
    size_t rows = (size_t)T * (size_t)n_heads;
    size_t groups = (size_t)T * (size_t)((n_heads + MLA_HG - 1) / MLA_HG);
    if (groups > 0x7fffffffu) return INVAL;
    mla_split<<<dim3((unsigned)groups, (unsigned)nsplit), MLA_GTHREADS,
                (size_t)(MLA_HG + MLA_KC) * (size_t)(c + dr) * sizeof(float)>>>(work, q_abs, q, ckv, kpe, n_heads, dn,
                                                                             dr, c, pos0, scale, sel, k, nsplit);
    int e = ld_cu_launched();
    if (e) return e;
    mla_merge<<<(unsigned)rows, MLA_THREADS>>>(o_lat, work, c, nsplit);
    return ld_cu_launched();
}

/* ---------------------------------------------------------------- absorb */

#define ABS_ROWS 8 /* tokens per thread (absorb_q) or warp (absorb_out) */

__global__ void absorb_q_ref(float *q_abs, const float *q, const void *w, int dt, int T, int H, int dn, int dr,
                             int dv, int c)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)H * (size_t)c) return;
    size_t it = idx / (size_t)c;
    int j = (int)(idx % (size_t)c), t = (int)(it / (size_t)H), h = (int)(it % (size_t)H);
    const float *qn = q + ((size_t)t * (size_t)H + (size_t)h) * (size_t)(dn + dr);
    size_t r0 = (size_t)h * (size_t)(dn + dv);
    float acc = 0.0f;
    for (int d = 0; d < dn; d++) acc += qn[d] * ld_elem_f(w, dt, (r0 + (size_t)d) * (size_t)c + (size_t)j);
    q_abs[idx] = acc;
}

/* thread (h, j) of block (j tile, h, token tile) */
__global__ void absorb_q_custom(float *q_abs, const float *q, const void *w, int dt, int T, int H, int dn, int dr,
                                int dv, int c)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y, t0 = blockIdx.z * ABS_ROWS;
    if (j >= c) return;
    int nt = T - t0 < ABS_ROWS ? T - t0 : ABS_ROWS;
    size_t r0 = (size_t)h * (size_t)(dn + dv), qrow = (size_t)H * (size_t)(dn + dr);
    const float *qb = q + (size_t)t0 * qrow + (size_t)h * (size_t)(dn + dr);
    float acc[ABS_ROWS];
#pragma unroll
    for (int r = 0; r < ABS_ROWS; r++) acc[r] = 0.0f;
    for (int d = 0; d < dn; d++) {
        float wv = ld_elem_f(w, dt, (r0 + (size_t)d) * (size_t)c + (size_t)j);
#pragma unroll
        for (int r = 0; r < ABS_ROWS; r++)
            if (r < nt) acc[r] = fmaf(qb[(size_t)r * qrow + (size_t)d], wv, acc[r]);
    }
    for (int r = 0; r < nt; r++) q_abs[(((size_t)(t0 + r)) * (size_t)H + (size_t)h) * (size_t)c + (size_t)j] = acc[r];
}

__global__ void absorb_out_ref(float *out, const float *o_lat, const void *w, int dt, int T, int H, int dn, int dv,
                               int c)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)H * (size_t)dv) return;
    size_t it = idx / (size_t)dv;
    int i = (int)(idx % (size_t)dv), h = (int)(it % (size_t)H);
    const float *ol = o_lat + it * (size_t)c;
    size_t r = ((size_t)h * (size_t)(dn + dv) + (size_t)dn + (size_t)i) * (size_t)c;
    float acc = 0.0f;
    for (int j = 0; j < c; j++) acc += ld_elem_f(w, dt, r + (size_t)j) * ol[j];
    out[idx] = acc;
}

/* a warp per (h, i) and up to ABS_ROWS tokens: lanes over j, fmaf, tree */
__global__ void absorb_out_custom(float *out, const float *o_lat, const void *w, int dt, int T, int H, int dn, int dv,
                                  int c)
{
    int lane = threadIdx.x & 31, i = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), h = blockIdx.y;
    int t0 = blockIdx.z * ABS_ROWS;
    if (i >= dv) return;
    int nt = T - t0 < ABS_ROWS ? T - t0 : ABS_ROWS;
    size_t r = ((size_t)h * (size_t)(dn + dv) + (size_t)dn + (size_t)i) * (size_t)c;
    float acc[ABS_ROWS];
#pragma unroll
    for (int k = 0; k < ABS_ROWS; k++) acc[k] = 0.0f;
    for (int j = lane; j < c; j += 32) {
        float wv = ld_elem_f(w, dt, r + (size_t)j);
#pragma unroll
        for (int k = 0; k < ABS_ROWS; k++)
            if (k < nt) acc[k] = fmaf(wv, o_lat[(((size_t)(t0 + k)) * (size_t)H + (size_t)h) * (size_t)c + (size_t)j],
                                      acc[k]);
    }
#pragma unroll
    for (int k = 0; k < ABS_ROWS; k++) {
        float sum = ld_warp_sum(acc[k]);
        if (lane == 0 && k < nt) out[(((size_t)(t0 + k)) * (size_t)H + (size_t)h) * (size_t)dv + (size_t)i] = sum;
    }
}

static int absorb_dt_ok(ld_kdt dt)
{
    return dt == LD_KDT_F32 || dt == LD_KDT_F16 || dt == LD_KDT_BF16;
}

extern "C" int ld_cu_mla_absorb_q(int v, float *q_abs, const float *q, const void *w, ld_kdt dt, int T, int n_heads,
                                  int dn, int dr, int dv, int c)
{
    if (T <= 0 || n_heads <= 0 || c <= 0) return 0;
    if (!absorb_dt_ok(dt) || dn < 0 || dr < 0 || dv < 0) return INVAL;
    if (v == LD_CU_REF) {
        absorb_q_ref<<<ld_cu_blocks((size_t)T * (size_t)n_heads * (size_t)c, 128), 128>>>(q_abs, q, w, (int)dt, T,
                                                                                           n_heads, dn, dr, dv, c);
        return ld_cu_launched();
    }
    unsigned gz = (unsigned)((T + ABS_ROWS - 1) / ABS_ROWS);
    if (n_heads > 65535 || gz > 65535) return INVAL;
    absorb_q_custom<<<dim3((unsigned)((c + 127) / 128), (unsigned)n_heads, gz), 128>>>(q_abs, q, w, (int)dt, T,
                                                                                       n_heads, dn, dr, dv, c);
    return ld_cu_launched();
}

extern "C" int ld_cu_mla_absorb_out(int v, float *out, const float *o_lat, const void *w, ld_kdt dt, int T,
                                    int n_heads, int dn, int dv, int c)
{
    if (T <= 0 || n_heads <= 0 || dv <= 0) return 0;
    if (!absorb_dt_ok(dt) || dn < 0 || c < 0) return INVAL;
    if (v == LD_CU_REF) {
        absorb_out_ref<<<ld_cu_blocks((size_t)T * (size_t)n_heads * (size_t)dv, 128), 128>>>(out, o_lat, w, (int)dt,
                                                                                              T, n_heads, dn, dv, c);
        return ld_cu_launched();
    }
    unsigned gz = (unsigned)((T + ABS_ROWS - 1) / ABS_ROWS);
    if (n_heads > 65535 || gz > 65535) return INVAL;
    absorb_out_custom<<<dim3((unsigned)((dv + 7) / 8), (unsigned)n_heads, gz), 256>>>(out, o_lat, w, (int)dt, T,
                                                                                      n_heads, dn, dv, c);
    return ld_cu_launched();
}
