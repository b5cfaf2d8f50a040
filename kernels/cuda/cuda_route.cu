/* cuda_route.cu - DeepSeek's routers on the device: V3's noaux_tc
 * (sigmoid, grouped top-k; ld_cu_ds_route) and V4's sqrt-softplus or hash
 * routing (ld_cu_ds4_route), fused with the router's matmul, the MoE plan
 * and the grouped launches' tables where asked. */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_blockq.cuh"
#include "cuda_common.cuh"
#include "cuda_moe_plan.cuh"
#include "cuda_mm_warp.cuh"
#include "cuda_ops.h"

#define INVAL ((int)cudaErrorInvalidValue)

/* ================================================================ routers */

#define MAXE 1024
#define MAXG 64 /* groups, and experts chosen per token */

/* ld_ref_ds_route's better(): score descending, index ascending, NaN never
 * first (the same choices as ld_ranks_before for a sequential scan) */
__device__ __forceinline__ int ds_better(float sa, int a, float sb, int b)
{
    return sa > sb || (sa == sb && a < b) || (sb != sb && sa == sa);
}


__device__ __forceinline__ float sqrt_softplus(float x)
{
    return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
}

/* the per-expert values, stored (custom: shared memory) or recomputed
 * from the logits (ref: the same function, so the same bits, without a
 * thread-local array of E floats) */
struct arr_f {
    const float *a;
    __device__ float operator()(int e) const { return a[e]; }
};
struct sig_f { /* s = sigmoid(logit) (+ bias) */
    const float *l, *bias;
    int add;
    __device__ float operator()(int e) const
    {
        float s = sigmoid_f(l[e]);
        return add && bias ? s + bias[e] : s;
    }
};
struct ssp_f { /* s = sqrt(softplus(logit)) (+ bias) */
    const float *l, *bias;
    int add;
    __device__ float operator()(int e) const
    {
        float s = sqrt_softplus(l[e]);
        return add && bias ? s + bias[e] : s;
    }
};

/* the group scores (the two best of each group, summed best first) of the
 * groups g0, g0 + gstep, ... and, by the thread with `last`, the kept
 * groups; as the C reference */
template <class SC>
__device__ void ds_groups(unsigned char *keep, float *gs, SC sc, int n_group, int per, int topk_group, int g0,
                          int gstep, int last)
{
    for (int g = g0; g < n_group; g += gstep) {
        int b1 = -1, b2 = -1;
        float v1 = 0.0f, v2 = 0.0f;
        for (int e = g * per; e < (g + 1) * per; e++) {
            float x = sc(e);
            if (b1 < 0 || ds_better(x, e, v1, b1)) {
                b2 = b1;
                v2 = v1;
                b1 = e;
                v1 = x;
            } else if (b2 < 0 || ds_better(x, e, v2, b2)) {
                b2 = e;
                v2 = x;
            }
        }
        gs[g] = v1 + v2;
        keep[g] = 0;
    }
    if (gstep > 1) __syncthreads();
    if (last) {
        for (int kk = 0; kk < topk_group; kk++) {
            int best = -1;
            for (int g = 0; g < n_group; g++)
                if (!keep[g] && (best < 0 || ds_better(gs[g], g, gs[best], best))) best = g;
            keep[best] = 1;
        }
    }
}

/* sum in selection order, then ascending id, then the weights */
template <class S>
__device__ void ds_finish(int32_t *idx, float *w, int *chosen, S s, int top_k, int norm, float scale)
{
    float sum = 0.0f;
    for (int kk = 0; kk < top_k; kk++) sum += s(chosen[kk]);
    for (int a = 1; a < top_k; a++)
        for (int b = a; b > 0 && chosen[b - 1] > chosen[b]; b--) {
            int tmp = chosen[b];
            chosen[b] = chosen[b - 1];
            chosen[b - 1] = tmp;
        }
    for (int kk = 0; kk < top_k; kk++) {
        float x = s(chosen[kk]);
        if (norm) x = x / sum;
        idx[kk] = chosen[kk];
        w[kk] = x * scale;
    }
}

/* a thread per row: the C loops, s and sc recomputed where read */
__global__ void ds_route_ref(int32_t *idx, float *w, const float *logits, const float *bias, int T, int E,
                             int n_group, int topk_group, int top_k, int norm, float scale)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    float gs[MAXG];
    unsigned char keep[MAXG];
    int chosen[MAXG];
    int per = E / n_group;
    const float *l = logits + (size_t)t * (size_t)E;
    sig_f s = {l, bias, 0}, sc = {l, bias, 1};
    ds_groups(keep, gs, sc, n_group, per, topk_group, 0, 1, 1);
    for (int kk = 0; kk < top_k; kk++) {
        int best = -1;
        float bv = 0.0f;
        for (int e = 0; e < E; e++) {
            if (!keep[e / per]) continue;
            int taken = 0;
            for (int j = 0; j < kk; j++) taken |= chosen[j] == e;
            if (taken) continue;
            float x = sc(e);
            if (best < 0 || ds_better(x, e, bv, best)) {
                best = e;
                bv = x;
            }
        }
        chosen[kk] = best;
    }
    ds_finish(idx + (size_t)t * (size_t)top_k, w + (size_t)t * (size_t)top_k, chosen, s, top_k, norm, scale);
}

#define ROUTE_THREADS 256

/* the block's best eligible entry of sel[] (eligible[e] != 0) under
 * ld_ranks_before: per thread, per warp by shuffles, then over the warps
 * in order; every thread gets it (-1: none) */
__device__ int block_best(const float *sel, const unsigned char *eligible, int E, int *shb)
{
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    int best = -1;
    for (int e = tid; e < E; e += ROUTE_THREADS)
        if (eligible[e] && (best < 0 || ld_ranks_before(sel[e], e, sel[best], best))) best = e;
    for (int off = 16; off > 0; off >>= 1) {
        int o = __shfl_xor_sync(LD_CU_FULL, best, off);
        if (o >= 0 && (best < 0 || ld_ranks_before(sel[o], o, sel[best], best))) best = o;
    }
    __syncthreads();
    if (lane == 0) shb[w] = best;
    __syncthreads();
    best = -1;
    for (int i = 0; i < ROUTE_THREADS / 32; i++) {
        int o = shb[i];
        if (o >= 0 && (best < 0 || ld_ranks_before(sel[o], o, sel[best], best))) best = o;
    }
    return best;
}

/* a block per row: sigmoid and groups in parallel, the experts by top_k
 * block-wide argmax rounds over the kept, not yet chosen experts */
__global__ void __launch_bounds__(ROUTE_THREADS)
    ds_route_custom(int32_t *idx, float *w, const float *logits, const float *bias, int E, int n_group,
                    int topk_group, int top_k, int norm, float scale)
{
    __shared__ float s[MAXE], sc[MAXE], gs[MAXG];
    __shared__ unsigned char keep[MAXG], elig[MAXE];
    __shared__ int chosen[MAXG], shb[ROUTE_THREADS / 32];
    int t = blockIdx.x, tid = threadIdx.x, per = E / n_group;
    const float *l = logits + (size_t)t * (size_t)E;
    for (int e = tid; e < E; e += ROUTE_THREADS) {
        s[e] = sigmoid_f(l[e]);
        sc[e] = bias ? s[e] + bias[e] : s[e];
    }
    __syncthreads();
    arr_f sca = {sc}, sa = {s};
    ds_groups(keep, gs, sca, n_group, per, topk_group, tid, ROUTE_THREADS, tid == 0);
    __syncthreads();
    for (int e = tid; e < E; e += ROUTE_THREADS) elig[e] = keep[e / per];
    __syncthreads();
    for (int kk = 0; kk < top_k; kk++) {
        int b = block_best(sc, elig, E, shb);
        if (tid == 0) {
            chosen[kk] = b;
            elig[b] = 0;
        }
        __syncthreads();
    }
    if (tid == 0)
        ds_finish(idx + (size_t)t * (size_t)top_k, w + (size_t)t * (size_t)top_k, chosen, sa, top_k, norm, scale);
}

extern "C" int ld_cu_ds_route(int v, int32_t *idx, float *w, const float *logits, const float *bias, int T, int E,
                              int n_group, int topk_group, int top_k, int norm, float scale)
{
    if (T <= 0) return 0;
    if (E <= 0 || E > MAXE || n_group <= 0 || n_group > MAXG || E % n_group || E / n_group < 2 || topk_group < 1 ||
        topk_group > n_group || top_k < 1 || top_k > MAXG || top_k > topk_group * (E / n_group))
        return INVAL;
    if (v == LD_CU_REF) {
        ds_route_ref<<<ld_cu_blocks((size_t)T, 32), 32>>>(idx, w, logits, bias, T, E, n_group, topk_group, top_k,
                                                          norm, scale);
        return ld_cu_launched();
    }
    ds_route_custom<<<(unsigned)T, ROUTE_THREADS>>>(idx, w, logits, bias, E, n_group, topk_group, top_k, norm,
                                                    scale);
    return ld_cu_launched();
}

/* hashed: the table's order summed, then ascending; else `chosen` is
 * already ascending */
template <class S>
__device__ void ds4_finish(int32_t *idx, float *w, int32_t *chosen, S s, int K, float scale, int hashed)
{
    float sum = 0.0f;
    for (int kk = 0; kk < K; kk++) sum += s(chosen[kk]);
    if (hashed)
        for (int i = 1; i < K; i++)
            for (int j = i; j > 0 && chosen[j - 1] > chosen[j]; j--) {
                int32_t x = chosen[j];
                chosen[j] = chosen[j - 1];
                chosen[j - 1] = x;
            }
    for (int kk = 0; kk < K; kk++) {
        idx[kk] = chosen[kk];
        w[kk] = s(chosen[kk]) / (sum + 1e-20f) * scale;
    }
}

__global__ void ds4_route_ref(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                              const int32_t *tokens, int T, int E, int K, float scale)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    int32_t ch[MAXG];
    float chv[MAXG];
    const float *l = logits + (size_t)t * (size_t)E;
    ssp_f s = {l, bias, 0}, sel = {l, bias, 1};
    if (tid2eid) {
        const int32_t *row = tid2eid + (size_t)tokens[t] * (size_t)K;
        for (int kk = 0; kk < K; kk++) ch[kk] = row[kk];
    } else {
        int cnt = 0; /* ld_ref_ds4_topk: insertion (values kept beside), then ascending */
        for (int e = 0; e < E; e++) {
            float x = sel(e);
            if (cnt == K && !ld_ranks_before(x, e, chv[K - 1], ch[K - 1])) continue;
            int j = cnt < K ? cnt++ : K - 1;
            while (j > 0 && ld_ranks_before(x, e, chv[j - 1], ch[j - 1])) {
                ch[j] = ch[j - 1];
                chv[j] = chv[j - 1];
                j--;
            }
            ch[j] = e;
            chv[j] = x;
        }
        for (int i = 1; i < K; i++)
            for (int j = i; j > 0 && ch[j - 1] > ch[j]; j--) {
                int32_t x = ch[j];
                ch[j] = ch[j - 1];
                ch[j - 1] = x;
            }
    }
    ds4_finish(idx + (size_t)t * (size_t)K, w + (size_t)t * (size_t)K, ch, s, K, scale, tid2eid != NULL);
}

/* the shared memory of a V4 route row */
typedef struct ds4_route_sh {
    float s[MAXE], sel[MAXE];
    unsigned char elig[MAXE];
    int32_t ch[MAXG];
    int shb[ROUTE_THREADS / 32];
} ds4_route_sh;

/* row t of the V4 route by the block (ROUTE_THREADS threads); the caller
 * syncs before the block reuses sh */
__device__ void ds4_route_row(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                              const int32_t *tokens, int t, int E, int K, float scale, ds4_route_sh *sh)
{
    float *s = sh->s, *sel = sh->sel;
    unsigned char *elig = sh->elig;
    int32_t *ch = sh->ch;
    int *shb = sh->shb, tid = threadIdx.x;
    const float *l = logits + (size_t)t * (size_t)E;
    for (int e = tid; e < E; e += ROUTE_THREADS) {
        s[e] = sqrt_softplus(__ldcg(l + e)); /* through L2: the fused router's other blocks wrote them */
        sel[e] = bias ? s[e] + bias[e] : s[e];
        elig[e] = 1;
    }
    __syncthreads();
    arr_f sa = {s};
    if (tid2eid) {
        if (tid == 0) {
            const int32_t *row = tid2eid + (size_t)tokens[t] * (size_t)K;
            for (int kk = 0; kk < K; kk++) ch[kk] = row[kk];
            ds4_finish(idx + (size_t)t * (size_t)K, w + (size_t)t * (size_t)K, ch, sa, K, scale, 1);
        }
        return; /* every thread: the branch is the block's */
    }
    for (int kk = 0; kk < K; kk++) {
        int b = block_best(sel, elig, E, shb);
        if (tid == 0) {
            ch[kk] = b;
            elig[b] = 0;
        }
        __syncthreads();
    }
    if (tid == 0) {
        for (int i = 1; i < K; i++)
            for (int j = i; j > 0 && ch[j - 1] > ch[j]; j--) {
                int32_t x = ch[j];
                ch[j] = ch[j - 1];
                ch[j - 1] = x;
            }
        ds4_finish(idx + (size_t)t * (size_t)K, w + (size_t)t * (size_t)K, ch, sa, K, scale, 0);
    }
}

/* a block per row */
__global__ void __launch_bounds__(ROUTE_THREADS)
    ds4_route_custom(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                     const int32_t *tokens, int E, int K, float scale)
{
    __shared__ ds4_route_sh sh;
    ds4_route_row(idx, w, logits, bias, tid2eid, tokens, (int)blockIdx.x, E, K, scale, &sh);
}

/* The route, the plan and the tables of a decode step's few tokens in one
 * block of ROUTE_THREADS (E <= that): the rows in turn, then the plan,
 * then the tables, each the bits of its own kernel (integers and
 * comparisons but for the route, whose row is computed by the same code
 * with the same block size) */
__device__ void route_plan_tables_block(int32_t *idx, float *w, const float *logits, const float *bias,
                                        const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, float scale,
                                        int32_t *offsets, int32_t *rows, int32_t *row_of, ld_cu_mm_group *tab, int G,
                                        const ld_cu_moe_w *mw, const float *xe, int pick, float *g, float *u,
                                        float *eo, int D, int I)
{
    __shared__ ds4_route_sh sh;
    __shared__ int32_t cnt[ROUTE_THREADS + 1];
    __shared__ int pos[ROUTE_THREADS];
    for (int t = 0; t < T; t++) {
        ds4_route_row(idx, w, logits, bias, tid2eid, tokens, t, E, K, scale, &sh);
        __syncthreads(); /* sh reused; the row's idx and w seen by the block */
    }
    moe_plan_block(offsets, rows, row_of, idx, T * K, K, E, cnt);
    __syncthreads();
    moe_tables_block(tab, G, offsets, mw, E, xe, pick ? rows : NULL, g, u, eo, D, I, pos);
}

__global__ void __launch_bounds__(ROUTE_THREADS)
    ds4_route_plan_tables(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                          const int32_t *tokens, int T, int E, int K, float scale, int32_t *offsets, int32_t *rows,
                          int32_t *row_of, ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw, const float *xe,
                          int pick, float *g, float *u, float *eo, int D, int I)
{
    route_plan_tables_block(idx, w, logits, bias, tid2eid, tokens, T, E, K, scale, offsets, rows, row_of, tab, G, mw,
                            xe, pick, g, u, eo, D, I);
}

/* The router's logits and ds4_route_plan_tables in one launch: grid E /
 * MM_WARPS blocks, a warp a column n of r.logits [T][E] = x [T][Kx] times
 * router row n (matmul_custom's warp, its tokens MM_TT at a time: the bits
 * of ld_cu_matmul's custom kernel, + 0 as it adds a missing bias), then
 * the block that finishes last (a count in *r.sync, which it resets)
 * routes, plans and tables as ds4_route_plan_tables does, reading the
 * logits through L2 (ds4_route_row's __ldcg). */
template <int DT, int VEC>
__global__ void __launch_bounds__(ROUTE_THREADS)
    ds4_router_route(ld_cu_router r, size_t rb, int32_t *idx, float *w, const float *bias, const int32_t *tid2eid,
                     const int32_t *tokens, int T, int E, int K, float scale, int32_t *offsets, int32_t *rows,
                     int32_t *row_of, ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw, const float *xe, int pick,
                     float *g, float *u, float *eo, int D, int I)
{
    __shared__ int last;
    int lane = threadIdx.x & 31, n = blockIdx.x * MM_WARPS + (threadIdx.x >> 5);
    for (int t0 = 0; n < E && t0 < T; t0 += MM_TT) {
        int nt = T - t0 < MM_TT ? T - t0 : MM_TT;
        float acc[MM_TT];
        mm_warp_sums<DT, VEC>(acc, (const uint8_t *)r.w + (size_t)n * rb, r.x + (size_t)t0 * (size_t)r.K, r.K, nt,
                              lane);
#pragma unroll
        for (int tt = 0; tt < MM_TT; tt++)
            if (lane == 0 && tt < nt) r.logits[(size_t)(t0 + tt) * (size_t)E + n] = acc[tt] + 0.0f;
    }
    if (!ld_cu_last_block(r.sync, (int)gridDim.x, &last)) return; /* the logits written */
    route_plan_tables_block(idx, w, r.logits, bias, tid2eid, tokens, T, E, K, scale, offsets, rows, row_of, tab, G, mw,
                            xe, pick, g, u, eo, D, I);
}

/* the limits of the one-launch route (T > 0 checked before) */
static int route_plan_args_ok(const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, int G, int D, int I)
{
    return E > 0 && E <= ROUTE_THREADS && K >= 1 && K <= E && K <= MAXG && (!tid2eid || tokens) &&
           T <= LD_CU_ROUTE_FUSED_T && G > 0 && D > 0 && I > 0;
}

extern "C" int ld_cu_ds4_route_plan_tables(int32_t *idx, float *w, const float *logits, const float *bias,
                                           const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K,
                                           float scale, int32_t *offsets, int32_t *rows, int32_t *row_of,
                                           ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw, const float *xe,
                                           int pick, float *g, float *u, float *eo, int D, int I)
{
    static_assert(ROUTE_THREADS == LD_CU_ROUTE_FUSED_E, "one thread an expert in the tables");
    if (T <= 0) return 0;
    if (!route_plan_args_ok(tid2eid, tokens, T, E, K, G, D, I)) return INVAL;
    ds4_route_plan_tables<<<1, ROUTE_THREADS>>>(idx, w, logits, bias, tid2eid, tokens, T, E, K, scale, offsets, rows,
                                                row_of, tab, G, mw, xe, pick, g, u, eo, D, I);
    return ld_cu_launched();
}

extern "C" int ld_cu_ds4_router_route_plan_tables(const ld_cu_router *r, int32_t *idx, float *w, const float *bias,
                                                  const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K,
                                                  float scale, int32_t *offsets, int32_t *rows, int32_t *row_of,
                                                  ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw, const float *xe,
                                                  int pick, float *g, float *u, float *eo, int D, int I)
{
    static_assert(ROUTE_THREADS == MM_WARPS * 32, "the route's block is the matmul's");
    if (T <= 0) return 0;
    if (!route_plan_args_ok(tid2eid, tokens, T, E, K, G, D, I) || r->K <= 0 || !r->sync ||
        (r->dt != LD_KDT_F32 && r->dt != LD_KDT_F16 && r->dt != LD_KDT_BF16))
        return INVAL;
    unsigned blocks = (unsigned)((E + MM_WARPS - 1) / MM_WARPS);
    size_t rb = ld_cu_row_bytes(r->dt, r->K);
    int vec = matmul_vec(r->dt, rb, r->w); /* as ld_cu_matmul picks it for that weight */
#define RR_LAUNCH(DTY, VEC)                                                                                           \
    ds4_router_route<DTY, VEC><<<blocks, ROUTE_THREADS>>>(*r, rb, idx, w, bias, tid2eid, tokens, T, E, K, scale,     \
                                                          offsets, rows, row_of, tab, G, mw, xe, pick, g, u, eo, D, I)
    if (r->dt == LD_KDT_F32) {
        if (vec) RR_LAUNCH(LD_KDT_F32, 1);
        else RR_LAUNCH(LD_KDT_F32, 0);
    } else if (r->dt == LD_KDT_F16) {
        if (vec) RR_LAUNCH(LD_KDT_F16, 1);
        else RR_LAUNCH(LD_KDT_F16, 0);
    } else {
        if (vec) RR_LAUNCH(LD_KDT_BF16, 1);
        else RR_LAUNCH(LD_KDT_BF16, 0);
    }
#undef RR_LAUNCH
    return ld_cu_launched();
}

extern "C" int ld_cu_ds4_route(int v, int32_t *idx, float *w, const float *logits, const float *bias,
                               const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, float scale)
{
    if (T <= 0) return 0;
    if (E <= 0 || E > MAXE || K < 1 || K > E || K > MAXG || (tid2eid && !tokens)) return INVAL;
    if (v == LD_CU_REF) {
        ds4_route_ref<<<ld_cu_blocks((size_t)T, 32), 32>>>(idx, w, logits, bias, tid2eid, tokens, T, E, K, scale);
        return ld_cu_launched();
    }
    ds4_route_custom<<<(unsigned)T, ROUTE_THREADS>>>(idx, w, logits, bias, tid2eid, tokens, E, K, scale);
    return ld_cu_launched();
}
