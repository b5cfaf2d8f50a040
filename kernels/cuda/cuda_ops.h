/* cuda_ops.h - the CUDA kernels of the engine's ops, behind C launchers.
 *
 * Leaves like ref_ops.h: device arrays in, device arrays out, no engine
 * headers.  Every op has two kernels, chosen by `v`:
 *
 *  LD_CU_REF     one thread per output element (for the ops that run in
 *                place, rmsnorm and softmax, one thread per row: a literal
 *                port of ref_ops.c's loop), fp32, the reference's formula
 *                and its index-order summation with one accumulator; the
 *                block types are dequantized element by element exactly as
 *                ref_quant.c does.  Bitwise equal to ref_ops.c except where
 *                a transcendental (expf, sinf, cosf) is involved: CUDA's
 *                differ from the C library's by an ulp or two.
 *  LD_CU_CUSTOM  the fast kernel: warp-per-output GEMV/GEMM, block-per-row
 *                norms, split-KV attention.  Its summation order is a
 *                function of the shapes only: a fixed partition over lanes
 *                (k mod 32; for F32/F16/BF16 rows of whole 16-byte
 *                chunks, the chunks mod 32), fmaf chains in index order,
 *                then a fixed shuffle tree; attention splits the keys at absolute
 *                positions that are multiples of LD_CU_ATT_SPLIT and merges
 *                the splits in order.  So a token's row is computed the
 *                same way alone or in a batch, and prefill, chunks and
 *                token-by-token give the same bits.
 *
 * The .cu files are compiled with --fmad=false: a*b+c is two roundings
 * unless a kernel asks for fmaf.  Every launcher checks its launch
 * (cudaGetLastError) and returns the CUDA error code (0 = success); the
 * kernels run asynchronously on the calling thread's default stream
 * (nvcc's --default-stream per-thread, so that it can be captured into a
 * graph: ld_cu_graphs_begin), so a fault while
 * running is reported by a later call (a copy to the host, ld_cu_sync).
 * ld_cu_error_string turns a code into text.
 */
#ifndef LD_CUDA_OPS_H
#define LD_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ref/ref_ops.h" /* ld_kdt */

typedef enum ld_cu_variant { LD_CU_REF = 0, LD_CU_CUSTOM = 1 } ld_cu_variant;

/* keys per attention split (custom kernel); a split is the absolute
 * positions [s * LD_CU_ATT_SPLIT, (s + 1) * LD_CU_ATT_SPLIT) */
#define LD_CU_ATT_SPLIT 256
/* largest head_dim of the custom attention kernel */
#define LD_CU_ATT_MAX_HD 256

/* ---------------------------------------------------------------- runtime */

/* "no error", "out of memory"... for a code returned here (static text) */
const char *ld_cu_error_string(int code);
/* the code's symbolic name ("cudaErrorMemoryAllocation") */
const char *ld_cu_error_name(int code);
/* 1 when `code` is cudaErrorMemoryAllocation */
int ld_cu_is_oom(int code);

int ld_cu_device_count(int *n);
int ld_cu_set_device(int dev);
/* name (NUL-terminated in `cap` bytes), compute capability, SM count */
int ld_cu_device_info(int dev, char *name, size_t cap, int *major, int *minor, int *sms);
int ld_cu_malloc(void **p, size_t bytes);
int ld_cu_free(void *p);
int ld_cu_memset0(void *p, size_t bytes);
/* host to the current device: returns once src may be reused; ordered on
 * the thread's default stream after the work queued there and before what
 * is queued next, like the kernels.  A copy of up to 64 KiB does not wait
 * for the queue to drain (a pinned ring, cuda_runtime.cu); a larger one is
 * cudaMemcpy's. */
int ld_cu_h2d(void *dst, const void *src, size_t bytes);
/* device to host: waits for the work queued before it */
int ld_cu_d2h(void *dst, const void *src, size_t bytes);
int ld_cu_d2d(void *dst, const void *src, size_t bytes);
/* `rows` rows of `width` bytes, row i from src + i * src_pitch to dst + i *
 * dst_pitch (device to device, one cudaMemcpy2D; pitches in bytes) */
int ld_cu_d2d_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows);
/* waits for all work on the device, returns its first error */
int ld_cu_sync(void);
/* Events on the device's legacy default stream (where NCCL's collectives
 * are queued: engine/tp/comm_nccl.c): made, freed, recorded after the work
 * queued there so far, and *done = whether that work has run (not
 * waiting; a pending event is not an error).  Not for graph capture. */
int ld_cu_event_create(void **ev);
int ld_cu_event_destroy(void *ev);
int ld_cu_event_record_legacy(void *ev);
int ld_cu_event_done(void *ev, int *done);

/* ---------------------------------------------------------------- graphs
 * (cuda_graph.cu) A decode step is hundreds of small kernels, and each
 * launch costs the GPU a few microseconds whatever it does; a CUDA graph
 * runs a recorded sequence of them with less of that.  Between
 * ld_cu_graphs_begin and ld_cu_graphs_end the calling thread's work (its
 * launches, copies, memsets: every ld_cu_* call) is captured, `chunk`
 * operations a graph (<= 0: 64), each graph launched as it fills, so the
 * GPU runs one while the host captures the next.  A call that must wait
 * for the device (ld_cu_d2h, ld_cu_sync, ld_cu_free, a large ld_cu_h2d)
 * first launches what is captured, and the chunk count starts again from
 * 0: the chunks of two decode steps line up.  The executable graph of
 * each chunk is kept and updated in place (cudaGraphExecUpdate) while the
 * next step's chunk has its topology (the same kernels in the same order;
 * their arguments may differ), several a chunk, so the steps that also
 * complete a compressor window keep theirs.  The work done, its order and
 * its bits are those of the same calls without graphs.  The mode is the
 * thread's (its per-thread default stream: the kernels are compiled with
 * --default-stream per-thread), for all its ld_cu_* calls whoever makes
 * them; a thread in it must not change device.  Calls nest: the mode ends
 * with the last ld_cu_graphs_end. */
int ld_cu_graphs_begin(int chunk);
/* launches what is captured, waits for it, ends the mode */
int ld_cu_graphs_end(void);
/* Work another library queues on this device outside our wrappers (NCCL's
 * collectives on the legacy stream, engine/tp/comm_nccl.c) must not meet an
 * open capture: ld_cu_graphs_hold launches what this thread has captured
 * (without waiting) and stops capturing; ld_cu_graphs_release captures
 * again.  No-ops outside graph mode. */
int ld_cu_graphs_hold(void);
int ld_cu_graphs_release(void);
/* this thread's graphs so far */
typedef struct ld_cu_graph_stats {
    long ops;          /* operations captured */
    long launched;     /* graphs launched */
    long instantiated; /* executable graphs made (each a cudaGraphInstantiate) */
    long updated;      /* launched after an update of a kept one */
    long syncs;        /* captures ended by a call that waits for the device */
} ld_cu_graph_stats;
void ld_cu_graph_stats_get(ld_cu_graph_stats *s);

/* ---------------------------------------------------------------- ops
 * Shapes and types as in ref_ops.h; all pointers are device pointers. */

/* bytes of one row of `cols` values of type dt (cols a whole number of
 * blocks for the block types) */
size_t ld_cu_row_bytes(ld_kdt dt, int64_t cols);

/* out[t][0..dim) = table[tokens[t]], t < T */
int ld_cu_embed(int v, float *out, const void *table, ld_kdt dt, int dim, const int32_t *tokens, int T);

/* out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, rows r < rows; out may be x */
int ld_cu_rmsnorm(int v, float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps, int rows);
/* one array's RMSNorm as ld_cu_rmsnorm takes it: out, x [rows][dim], w
 * [dim] of dt (F32, F16, BF16) */
typedef struct ld_cu_norm_arg {
    float *out;
    const float *x;
    const void *w;
    ld_kdt dt;
    int dim;
} ld_cu_norm_arg;
/* Two arrays' RMSNorms of `rows` rows each in one launch (V4's and V3's q
 * and kv latents): bitwise ld_cu_rmsnorm(LD_CU_CUSTOM, ...) of each; a and
 * b must not overlap. */
int ld_cu_rmsnorm2(ld_cu_norm_arg a, ld_cu_norm_arg b, int rows, float eps);

/* out[t][n] = x[t] . w[rope_row(n)] (+ bias[n]), w [N][K] of type dt,
 * bias NULL or N values of bias_dt (F32/F16/BF16); see ld_ref_matmul_ex */
int ld_cu_matmul(int v, float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                 int T, int K, int N, int rope_hd);

/* One weight of ld_cu_matmul_fanout: its rows [n][K] at w (device), the
 * output [T][n] */
#define LD_CU_FAN_MAX 8
typedef struct ld_cu_fan {
    const void *w;
    float *out;
    int n;
} ld_cu_fan;
/* Projections that share an input in one launch: out_i = x [T][K] . W_i^T
 * for the G <= LD_CU_FAN_MAX weights fan[i] (host array) of one plain type
 * dt (F32, F16, BF16), no bias, rows not permuted; each output bitwise
 * ld_cu_matmul(LD_CU_CUSTOM) of its weight alone (the same warp, its
 * 16-byte path chosen per weight as that launcher chooses it).  V4's
 * compressors' kv and gate and the indexer's weights, 5 launches to 1. */
int ld_cu_matmul_fanout(const ld_cu_fan *fan, int G, const float *x, ld_kdt dt, int T, int K);

/* in-place RoPE of x [T][n_heads*hd], row t at position pos0 + t;
 * inv_freq hd/2 floats */
int ld_cu_rope(int v, float *x, int T, int n_heads, int hd, const float *inv_freq, int pos0);

/* dst[0..n) = src[0..n) (the KV store) */
int ld_cu_copy(int v, float *dst, const float *src, size_t n);

/* floats of workspace ld_cu_attention needs to run queries `tile` at a
 * time (0 for the reference kernel) */
size_t ld_cu_attention_work(int v, int tile, int n_heads, int hd, int pos0, int T);

/* causal attention, see ld_ref_attention; `work` holds `work_floats`
 * floats (custom kernel: at least ld_cu_attention_work(v, 1, ...); the
 * queries run in tiles as large as it allows, which changes no result) */
int ld_cu_attention(int v, float *out, const float *q, const float *kcache, const float *vcache, int T, int pos0,
                    int n_heads, int n_kv, int hd, int window, float scale, float *work, size_t work_floats);

/* out[i] = silu(gate[i]) * up[i]; out may be gate or up */
int ld_cu_swiglu(int v, float *out, const float *gate, const float *up, size_t n);

/* x[i] += y[i] */
int ld_cu_add(int v, float *x, const float *y, size_t n);

/* out[r] = softmax(x[r]) over n columns; out may be x */
int ld_cu_softmax(int v, float *out, const float *x, int rows, int n);

/* ================================================================ DeepSeek
 * The CUDA twins of ref_ds.h and ref_ds4.h
 * (kernels/cuda/cuda_fp8.cu, cuda_moe.cu, cuda_mla.cu, cuda_indexer.cu, cuda_route.cu, cuda_hc.cu) and of replay_sample.c's sampler
 * (kernels/cuda/cuda_sample.cu).  Same conventions as above: device pointers,
 * `v` LD_CU_REF (one thread per output, or per row where the reference's
 * loop is sequential: routers, top-k, Sinkhorn, the sampler's walk) or
 * LD_CU_CUSTOM, a CUDA error code returned (0 = success), every launch
 * checked.  No float atomics: every reduction has a fixed order. */

/* keys per split of the custom MLA decode kernel: split s is the entries
 * [s * LD_CU_MLA_SPLIT, (s + 1) * LD_CU_MLA_SPLIT) of the query's key list
 * (positions 0..pos, or its selection) */
#define LD_CU_MLA_SPLIT 64

/* out[t][n] = sum_k x[t][k] * (e4m3(q[n][k]) * scale[n / br][k / bc]), the
 * weight [N][K] an ld_f8b's data (q N*K bytes, scale [ceil(N/br)][ceil(K/bc)]
 * fp32), fp32 accumulation: ld_ref_matmul with LD_KDT_F8B.  ref: bitwise
 * the C reference's; custom: a warp per output column over up to 8 rows at
 * a time, lanes over 16-byte chunks of the row, fmaf in order, shuffle
 * tree. */
int ld_cu_fp8_matmul(int v, float *out, const float *x, const uint8_t *q, const float *scale, int T, int K, int N,
                     int br, int bc);

/* The MoE plan of T tokens with K choices each (idx [T][K], expert ids <
 * E): offsets [E + 1] (expert e's grouped rows are [offsets[e],
 * offsets[e + 1])), rows [T*K] (the token of each grouped row: by expert,
 * then in token order, as ld_ref_moe_gather), row_of [T*K] (the grouped
 * row of choice (t, k), for ld_cu_moe_combine).  ref: a thread per expert
 * (count, fill) and one for the offsets; custom: the same in one block
 * (E + 1 <= 12288; integer atomics for the counts only). */
int ld_cu_moe_plan(int v, int32_t *offsets, int32_t *rows, int32_t *row_of, const int32_t *idx, int T, int K, int E);

/* The grouped expert GEMM over FP8 block-scaled weights: out[r][n] =
 * x[rows[r]] . W_e[n] for the R grouped rows, e the expert of row r (by
 * offsets), W_e the e-th of E stacked [N][K] matrices (q [E][N][K] bytes,
 * scale [E][ceil(N/br)][ceil(K/bc)]); each row as ld_ref_matmul with
 * LD_KDT_F8B of its expert.  max_rows bounds any expert's row count (the
 * custom grid; T is enough).  ref: a thread per output; custom: per
 * expert ld_cu_fp8_matmul's warp kernel over its gathered rows. */
int ld_cu_moe_fp8_matmul(int v, float *out, const float *x, const int32_t *rows, const int32_t *offsets,
                         const uint8_t *q, const float *scale, int E, int R, int max_rows, int K, int N, int br,
                         int bc);

/* floats of workspace ld_cu_mla_latent needs (0 for the reference) */
size_t ld_cu_mla_latent_work(int v, int T, int n_heads, int c, int pos0, const int32_t *sel, int k);

/* Absorbed MLA decode/prefill over the latent cache:
 * ld_ref_mla_latent_attention (sel NULL) or
 * ld_ref_mla_latent_attention_sparse (sel [T][k], ascending positions,
 * n_t = min(k, pos0 + t + 1) of them read) for every (t, h).  custom:
 * split-K, LD_CU_MLA_SPLIT keys per split, a block per (token, 8 heads,
 * split) staging the split's latent rows in shared memory for its heads
 * (c + dr <= 704, c <= 768), each split's (max, sum, o[c]) into `work`,
 * merged in split order. */
int ld_cu_mla_latent(int v, float *o_lat, const float *q_abs, const float *q, const float *ckv, const float *kpe,
                     int T, int n_heads, int dn, int dr, int c, int pos0, float scale, const int32_t *sel, int k,
                     float *work, size_t work_floats);

/* Absorbed MLA, steps 1 and 3 (ld_ref_mla_absorb_q, ld_ref_mla_absorb_out)
 * for every (t, h), w = kv_b_proj [H*(dn+dv)][c] of type F32, F16 or BF16:
 * q_abs [T][H][c] = W_UK^T q_nope; out [T][H][dv] = W_UV o_lat.  ref: a
 * thread per output, the C loop; custom: absorb_q a thread per (h, j) over
 * up to 8 tokens (the weight read once for them, fmaf in d order),
 * absorb_out a warp per (h, i) row over up to 8 tokens (lanes over j,
 * tree). */
int ld_cu_mla_absorb_q(int v, float *q_abs, const float *q, const void *w, ld_kdt dt, int T, int n_heads, int dn,
                       int dr, int dv, int c);
int ld_cu_mla_absorb_out(int v, float *out, const float *o_lat, const void *w, ld_kdt dt, int T, int n_heads, int dn,
                         int dv, int c);

/* Lightning-indexer scores of T queries against n keys: q [T][n_heads][dim],
 * w [T][n_heads], keys [n][dim], scores [T][n].  form 0: DeepSeek-V3.2,
 * ld_ref_ds_index_scores (qscale, wscale ignored: n_heads^-0.5 and
 * dim^-0.5 as the reference computes them); form 1: DeepSeek-V4,
 * ld_ref_ds4_index_scores with the given scales.  custom: a warp per key,
 * the query heads in shared memory (n_heads * dim <= 12288). */
int ld_cu_index_scores(int v, int form, float *scores, const float *q, const float *w, const float *keys, int T,
                       int n_heads, int dim, int n, float qscale, float wscale);

/* Deterministic top-k of each row t < T of scores [T][ld]: the row's
 * n_t = n (pos0 < 0) or min(n, pos0 + t + 1) first entries, the
 * m_t = min(k, n_t) best (score descending, NaN last, then index
 * ascending) into idx[t][0..m_t) ascending, idx[t][m_t..k) = -1: the set
 * of ld_ref_ds_topk and ld_ref_ds4_topk.  ref: a thread per row
 * (insertion, O(n k)); custom: a block per row, radix select on 64-bit
 * (score, index) keys, then an ordered compaction. */
int ld_cu_topk(int v, int32_t *idx, const float *scores, int T, int ld, int n, int pos0, int k);

/* The noaux_tc router (ld_ref_ds_route) of T rows: idx, w [T][top_k].
 * bias NULL or E floats; E <= 1024, n_group <= 64, top_k <= 64.  ref: a
 * thread per row, the C loops (the sigmoids recomputed where read: the same
 * bits); custom: a block per row, the expert selection by block-wide
 * argmax rounds (a total order: the same choice). */
int ld_cu_ds_route(int v, int32_t *idx, float *w, const float *logits, const float *bias, int T, int E, int n_group,
                   int topk_group, int top_k, int norm, float scale);

/* DeepSeek-V4's router (ld_ref_ds4_route) of T rows: tid2eid NULL (top-K
 * of sqrt-softplus + bias) or [vocab][K] with tokens [T] (the hash layers:
 * row tokens[t] of the table is the experts).  idx, w [T][K]; E <= 1024,
 * K <= 64.  ref: a thread per row; custom: a block per row, K argmax
 * rounds. */
int ld_cu_ds4_route(int v, int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                    const int32_t *tokens, int T, int E, int K, float scale);

/* The expert outputs combined in a fixed order: for k = 0..K-1 (the
 * router's ascending expert ids), y[t][d] = y[t][d] + eo[row][d] * w[t][k]
 * (two roundings, ld_ref_ds_axpy's), row = row_of[t][k] (NULL: t * K + k),
 * eo the grouped GEMM's output rows [.][D].  Both kernels: the same bits. */
int ld_cu_moe_combine(int v, float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K, int D);
/* The same from y = +0 when from_zero (what a memset to zero leaves, y
 * not read), and then y = y + add[t][d] (one rounding; add NULL: none):
 * the memset, the combine and the add of the shared expert's output in
 * one launch, their bits.  K may be 0 (from_zero: y = add). */
int ld_cu_moe_combine_ex(int v, float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K, int D,
                         int from_zero, const float *add);

/* floats of workspace ld_cu_hc_pre needs: T * (1 + (2 + N) * N + N) */
size_t ld_cu_hc_work(int T, int N);

/* mHC pre-mixing with Sinkhorn-Knopp (ld_ref_ds4_hc_pre) of T tokens:
 * X [T][N][D], fn [(2+N)*N][N*D], base [(2+N)*N], scale [3]; post [T][N],
 * comb [T][N][N], collapsed [T][D].  N <= 64.  ref: four kernels (norm,
 * mix, Sinkhorn, collapse); custom: two launches, a decode step's
 * dominant cost being launches: the block-reduced norm recomputed in
 * each mixing block with a warp per mixing row, then the collapse (a
 * block per token) and the Sinkhorn side by side in one grid (T <=
 * 65535). */
int ld_cu_hc_pre(int v, float *post, float *comb, float *collapsed, const float *X, int T, int N, int D,
                 const float *fn, const float *base, const float *scale, int iters, float norm_eps, float hc_eps,
                 float *work, size_t work_floats);

/* ld_cu_hc_pre_ex's custom path (variant as there) and the RMSNorm the
 * session runs next, of the collapsed rows by w (D values of w_dt
 * LD_KDT_F32, F16 or BF16) into normed [T][D], in two launches, not
 * three: the norm in the collapse's block, a block per token.  Bitwise
 * the custom ld_cu_hc_pre_ex, then the custom ld_cu_rmsnorm (its
 * reduction order and products).  T <= 65535.  With sync (device, [T]
 * ints, zero, left zero) one launch: each token's last mixing block to be
 * done (counted in sync[t]) runs its Sinkhorn, collapse and norm; the
 * same bits. */
int ld_cu_hc_pre_norm(int variant, float *post, float *comb, float *collapsed, const float *X, int T, int N, int D,
                      const float *fn, const float *base, const float *scale, int iters, float norm_eps, float hc_eps,
                      float *work, size_t work_floats, const void *w, int w_dt, float eps, float *normed, int *sync);

/* the mHC variants of ld_cu_hc_pre_ex (backend.h's LD_DS4_MHC_*, the
 * session's mhc= choice) */
enum { LD_CU_MHC_F32 = 0, LD_CU_MHC_BF16 = 1, LD_CU_MHC_SINKHORN_BF16 = 2 };

/* ld_cu_hc_pre with a variant (ld_cu_hc_pre is LD_CU_MHC_F32):
 * LD_CU_MHC_BF16 rounds post and comb to bf16 at the end (mhc=bf16: the
 * mixing matrices cast to bf16), LD_CU_MHC_SINKHORN_BF16 rounds every
 * Sinkhorn iterate of comb to bf16 (ld_ref_ds4_hc_pre_ex with
 * bf16_sinkhorn = 1); both kernels, as ld_cu_hc_pre. */
int ld_cu_hc_pre_ex(int v, int variant, float *post, float *comb, float *collapsed, const float *X, int T, int N,
                    int D, const float *fn, const float *base, const float *scale, int iters, float norm_eps,
                    float hc_eps, float *work, size_t work_floats);

/* mHC post-mixing (ld_ref_ds4_hc_post) of T tokens: out [T][N][D] (not
 * aliasing X), f [T][D], post [T][N], comb [T][N][N].  Both kernels: the
 * same bits. */
/* ld_cu_hc_post's arguments but f, for the launchers that compute f */
typedef struct ld_cu_post {
    float *out;
    const float *X, *post, *comb;
    int N;
} ld_cu_post;
/* the routed experts' combine as ld_cu_moe_combine_ex takes it */
typedef struct ld_cu_combine {
    const float *eo;
    const int32_t *row_of;
    const float *w;
    int K;
} ld_cu_combine;
/* A block's last FP8 projection straight into the new streams: f = x [T][K]
 * . W^T (W [N = D][K], ld_cu_fp8_matmul's format), then ld_cu_hc_post(p.out,
 * p.X, f, p.post, p.comb) with p.N streams; f never stored.  Bitwise the
 * custom ld_cu_fp8_matmul and ld_cu_hc_post: one launch, not two. */
int ld_cu_fp8_matmul_post(const float *x, const uint8_t *q, const float *scale, int T, int K, int N, int br, int bc,
                          ld_cu_post p);
int ld_cu_hc_post(int v, float *out, const float *X, const float *f, const float *post, const float *comb, int T,
                  int N, int D);

/* ---------------------------------------------------------------- sampling
 * replay_sample.h's sampler on the device (kernels/cuda/cuda_sample.cu): the
 * same counter-based generator (a pure integer hash of (seed, position),
 * its top 53 bits as a double in [0, 1)) and the same filters: greedy
 * (temperature < 1e-6, NaN, or top_k == 1: the first argmax), else
 * softmax(logits / temperature) in double, sorted descending (ties: lower
 * id), top_k, top_p (on the unrenormalised cumulative sum), min_p, inverse
 * CDF with u * (kept sum).  Row t of logits [T][V] is output position
 * pos0 + t. */

/* the generator's hash and uniform at positions pos0 .. pos0 + n - 1
 * (either output may be NULL), computed on the device */
int ld_cu_sample_uniforms(uint64_t *hash, double *u, uint64_t seed, uint64_t pos0, int n);

/* bytes of workspace ld_cu_sample needs for T rows of V */
size_t ld_cu_sample_work(int v, int T, int V);

/* tokens[t] for t < T.  ref: double softmax by a thread per row, ranks by a
 * thread per (row, id) (O(V^2)), the walk by a thread per row; custom:
 * block-reduced max and sum, a bitonic sort per row, the same walk. */
int ld_cu_sample(int v, int32_t *tokens, const float *logits, int T, int V, double temperature, int64_t top_k,
                 double top_p, double min_p, uint64_t seed, uint64_t pos0, void *work, size_t work_bytes);

/* ---------------------------------------------------------------- DeepSeek-V4
 * kernels/cuda/cuda_ds4_*.cu: the twins of the rest of ref_ds4.h
 * and of V3.2's indexer LayerNorm and RoPE (ref_ds.h).  As above: v
 * is LD_CU_REF or LD_CU_CUSTOM, device arrays, T token rows at positions
 * pos0 + t, every row computed the same whatever rows run with it; 0 or a
 * CUDA error code (cudaErrorInvalidValue for a refused shape, before any
 * launch). */

/* floats of workspace ld_cu_ds4_attention needs (its arguments of the same
 * names; kpick 0 when there are no picks, has_entries 0/1).  ref: T * H *
 * (nk + 1), custom: T * H * ceil(nk / 64) * (hd + 2), nk the bound of a
 * token's key count: min(window, pos0 + T) + (kpick, or (pos0 + T) /
 * ratio without picks, or 0 without entries). */
size_t ld_cu_ds4_attention_work(int v, int T, int H, int hd, int pos0, int window, int ratio, int kpick,
                                int has_entries);

/* V4's shared-KV attention with per-head sinks (ld_ref_ds4_attention) of T
 * tokens, q [T][H][hd], out [T][H][hd].  Token t (position p = pos0 + t)
 * sees, in this order, the sliding window: positions max(0, p - window +
 * 1) .. p of the ring kv [kv_rows][hd] (row = position % kv_rows, so
 * kv_rows >= window + T - 1 for a batch), then the compressed entries
 * entries [.][hd] (NULL: none): picks [T][kpick] up to the first negative
 * (ld_cu_topk's rows; NULL: every entry w < (p + 1) / ratio).  sinks [H]
 * or NULL.  ref: a thread per (t, h) for the scores and their exps
 * (`work`), a thread per output for sum_i (e_i / sum) k_i[d]; custom
 * (hd <= 512): split-K over the key list, 64 keys a split, a block per
 * (split, 8 heads, token) (the 8 queries in shared memory, a warp per key
 * for the dot products, two keys a lane for the split's max and sum, a
 * thread per d for the unnormalised output, fmaf), then a thread per
 * output merging the splits in order with the sink.  T <= 65535. */
int ld_cu_ds4_attention(int v, float *out, const float *q, int T, int H, int hd, const float *kv, int kv_rows,
                        int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                        const float *sinks, float scale, int pos0, float *work, size_t work_floats);

/* V4's inverse RoPE of the attention output (the backend's ds4_attention
 * ends with it): each head's last rd values (rd even, <= hd), interleaved
 * pairs, row t at position pos0 + t; inv_freq [rd / 2] on the device */
typedef struct ld_cu_rot {
    const float *inv_freq;
    float af; /* the attention factor */
    int rd, bf16_table;
} ld_cu_rot;
/* V4's indexer picks of T queries in one launch: each query's heads q
 * [T][H][dim] rotated in place at pos0 + t (each head's last rot->rd
 * values, interleaved pairs), its scores [T][n] against keys [n][dim]
 * (form 1, qscale, wscale) and their top k into sel [T][k]: bitwise
 * ld_cu_ds_rope(LD_CU_CUSTOM, q, T, H dim, dim - rd, H, dim, rd, inv_freq,
 * af, 1, pos0, 0, bf16_table), ld_cu_index_scores(LD_CU_CUSTOM, 1, ...)
 * and ld_cu_topk(LD_CU_CUSTOM, sel, scores, T, n, n, -1, k).  sync: T
 * zero ints on the device, left zero.  H dim <= LD_CU_INDEX_PICK_QW, dim
 * <= 256, T <= 65535, else cudaErrorInvalidValue. */
#define LD_CU_INDEX_PICK_QW 10240
int ld_cu_ds4_index_pick(int32_t *sel, float *scores, float *q, const float *w, const float *keys, int T, int H,
                         int dim, int n, int k, float qscale, float wscale, const ld_cu_rot *rot, int pos0, int *sync);

/* ld_cu_ds4_attention (custom) whose merge de-rotates its outputs: one
 * launch fewer, bitwise ld_cu_ds4_attention(LD_CU_CUSTOM, ...) then
 * ld_cu_ds_rope(LD_CU_CUSTOM, out, T, H hd, hd - rd, H, hd, rd, inv_freq,
 * af, 1, pos0, 1, bf16_table).  With sync (device, ld_cu_ds4_attention_sync
 * ints, zero, left zero) the split and the merge in one launch: the last
 * block of a token's 8 heads to be done merges them; the same bits. */
int ld_cu_ds4_attention_rope(float *out, const float *q, int T, int H, int hd, const float *kv, int kv_rows,
                             int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                             const float *sinks, float scale, int pos0, float *work, size_t work_floats,
                             ld_cu_rot rot, int *sync);
/* the sync ints ld_cu_ds4_attention_rope counts in for T tokens of H heads */
size_t ld_cu_ds4_attention_sync(int T, int H);

/* V4's clamped SwiGLU of the routed experts (ld_ref_ds4_clamped_swiglu)
 * of T rows: out [T][F] (rows F apart) from g and u (rows `ld` apart: ld =
 * 2F, u = g + F for a fused gate/up output).  ref: a thread per element;
 * custom: four a thread (16-byte accesses; F, ld multiples of 4 and the
 * pointers aligned, else the ref kernel).  Both: the same bits. */
int ld_cu_ds4_clamped_swiglu(int v, float *out, const float *g, const float *u, int T, int F, size_t ld,
                             float limit);

/* RoPE of T rows in place: ld_ref_ds_rope_ex (V3.2, the indexer's keys
 * and queries; inverse 0) and ld_ref_ds4_rope_ex (V4: off = head_dim - dim,
 * head_stride = head_dim, interleave 1; inverse 1 rotates by -sin, the
 * de-rotation of the attention output).  x [T][row_stride], heads at off +
 * h * head_stride.  ref: a thread per (t, h, pair); custom: a block per
 * row, its cos / sin table in shared memory (dim <= 1024, else the ref
 * kernel).  Both: the same bits. */
int ld_cu_ds_rope(int v, float *x, int T, size_t row_stride, size_t off, int n_heads, size_t head_stride, int dim,
                  const float *inv_freq, float attn_factor, int interleave, int pos0, int inverse, int bf16_table);

/* floats of workspace ld_cu_ds4_hc_head needs: T * (1 + N) (ref; the
 * custom kernel needs none) */
size_t ld_cu_hc_head_work(int T, int N);

/* The final stream collapse (ld_ref_ds4_hc_head) of T tokens: X [T][N][D],
 * fn [N][N*D], base [N], out [T][D].  N <= 64.  ref: a thread per token
 * (norm), per (t, j) (mix), per (t, d) (collapse); custom: a block per
 * token (block-reduced norm, a warp per mixing row). */
int ld_cu_ds4_hc_head(int v, float *out, const float *X, int T, int N, int D, const float *fn, const float *base,
                      float scale, float norm_eps, float hc_eps, float *work, size_t work_floats);

/* The custom ld_cu_ds4_hc_head and the final RMSNorm the session runs
 * next, of out's rows by w (D values of w_dt LD_KDT_F32, F16 or BF16)
 * into normed [T][D], in one launch: bitwise the custom ld_cu_ds4_hc_head,
 * then the custom ld_cu_rmsnorm (its reduction order and products). */
int ld_cu_ds4_hc_head_norm(float *out, const float *X, int T, int N, int D, const float *fn, const float *base,
                           float scale, float norm_eps, float hc_eps, const void *w, int w_dt, float eps,
                           float *normed);

/* out [T][N] = x [T][K] . W^T with W [N][K] packed FP4 E2M1 (q [N][K/2],
 * byte k/2, low nibble for even k) times its block scale, in
 * ld_ref_ds4_dequant's format: scale [sr][sc] (fp32, or UE8M0 bytes with
 * scale_e8m0 = 1: 2^(v - 127)), sr | N, sc | K, K even; w = e2m1 * scale
 * (one product), one accumulator in k order (ref: a thread per output,
 * the C loop); custom: a warp per output column over up to 8 token rows
 * (16-byte chunks of 32 weights a lane, fmaf, the shuffle tree). */
int ld_cu_ds4_fp4_matmul(int v, float *out, const float *x, const uint8_t *q, const void *scale, int scale_e8m0,
                         int T, int K, int N, int sr, int sc);

/* ---- grouped block-scaled GEMMs: the MoE entry's experts in one launch.
 * One group is one expert's matmul over its gathered rows: out [rows][N] =
 * x [rows][K] . W^T, W [N][K] at q with its fp32 scale grid (each group its
 * own weight, all of one shape and block size).  Why: a decode step's
 * experts each have a row or two, so a launch per expert and projection
 * costs more than the weights take to read; one launch serves them all. */
typedef struct ld_cu_mm_group {
    const uint8_t *q;   /* the codes: FP8 [n][K] bytes, FP4 [n][K/2] */
    const float *scale; /* FP8 [ceil(n/br)][ceil(K/bc)], FP4 [n/br][K/bc] */
    const float *x;     /* the group's input rows [rows][K], ldx floats apart */
    float *out;         /* its output rows [rows][n], ldo floats apart */
    int rows;           /* >= 0 */
    /* its output columns n, 1 <= n <= the launch's N; 0: N.  Groups of
     * several widths over one x serve projections that share an input
     * (V4's wq_a and wkv: ld_cu_grouped_fp8_matmul with N their most). */
    int n;
    /* the row strides; 0: K and n (dense rows, the MoE's gathered ones).
     * Others serve a block-diagonal product, whose groups read and write
     * column blocks of shared rows (V4's grouped output projection). */
    size_t ldx, ldo;
    /* NULL: row r of the group's input at x + r ldx; else at x +
     * xrows[r] ldx (device, [rows]): rows picked from shared ones, the MoE's
     * experts reading their tokens' rows where they are, not gathered */
    const int32_t *xrows;
} ld_cu_mm_group;

/* G groups (tab [G] in device memory; max_rows >= every group's rows, the
 * grid's row tiles: blocks past a group's rows return at once), FP8 E4M3
 * codes.  The custom kernel only: group g's
 * outputs are bitwise those of ld_cu_fp8_matmul(LD_CU_CUSTOM) over that
 * group alone (the same warp body, its 16-byte path chosen per group as
 * that launcher chooses it: K % 16 == 0 and q 16-byte aligned); the
 * reference is that launcher per group.  G <= 65535, max_rows <= 8 *
 * 65535 (else cudaErrorInvalidValue). */
int ld_cu_grouped_fp8_matmul(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc);
/* the same over packed FP4 E2M1 (ld_cu_ds4_fp4_matmul's format with fp32
 * scales, blocks br x bc dividing N x K, K even): bitwise
 * ld_cu_ds4_fp4_matmul(LD_CU_CUSTOM, scale_e8m0 = 0, sr = N / br, sc = K /
 * bc) per group (its 16-byte path when K % 32 == 0 and the group's q and x
 * are 16-byte aligned). */
int ld_cu_grouped_fp4_matmul(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc);

/* a norm weight of ld_cu_grouped_fp8_matmul_norm: w [n] of dt (F32, F16,
 * BF16) on the device, or NULL for none */
typedef struct ld_cu_norm_w {
    const void *w;
    ld_kdt dt;
} ld_cu_norm_w;
/* ld_cu_grouped_fp8_matmul, then each group g whose norms[g].w (host
 * array [G <= LD_CU_FAN_MAX]) is set RMSNormed in place, row by row (eps):
 * the last block of a row tile to be done (counted in sync, device,
 * ceil(max_rows / 8) ints, zero, left zero) norms that tile's rows.
 * Bitwise the grouped launch, then ld_cu_rmsnorm (custom) of each. */
int ld_cu_grouped_fp8_matmul_norm(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                                  const ld_cu_norm_w *norms, float eps, int *sync);

/* The gate and up of G experts with V4's clamped SwiGLU in one launch:
 * tab [2 G], entries k < G gates and G + k the ups over the same rows of
 * the same x (as ld_cu_moe_tables lays them out); for each, the gate's
 * output rows receive silu(min(g, L)) * clamp(u, -L, L) (limit L) and the
 * up's are not written.  Bitwise the grouped GEMM of the 2 G groups, then
 * ld_cu_ds4_clamped_swiglu over each gate's rows into them: the same warp
 * dot products, the same expression.  FP8 and FP4 as the two above. */
int ld_cu_grouped_fp8_glu(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc, float limit);
int ld_cu_grouped_fp4_glu(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc, float limit);

/* One part of the MoE's mixed launches: G groups (tab on the device: [2 G]
 * gates then ups, or [G] downs) of FP8 (fp4 0) or FP4 (fp4 1) weights of
 * one block size br x bc, N output columns (a group's n may be fewer) */
typedef struct ld_cu_moe_part {
    const ld_cu_mm_group *tab;
    int G, fp4, N, br, bc;
} ld_cu_moe_part;
/* The gate/up pairs of two parts over one K in one launch, with the
 * clamped SwiGLU (the routed experts, FP4, and the shared one, FP8): each
 * part bitwise ld_cu_grouped_fp4_glu / _fp8_glu of it alone.  max_rows
 * bounds every group's rows. */
int ld_cu_grouped_glu2(ld_cu_moe_part a, ld_cu_moe_part b, int max_rows, int K, float limit);
/* The MoE's downs and its end in one launch: the routed downs (part r,
 * [G] groups of Kr columns into their tables' outputs, as the grouped
 * launch writes them), then the shared down of x [T][Ks] (FP8 q, scale,
 * blocks br x bc, r.N = D outputs) with the combine c over the routed
 * outputs and ld_cu_hc_post into p (the MoE's output never stored):
 * bitwise the grouped down launch, then the custom ld_cu_fp8_matmul,
 * ld_cu_moe_combine_ex (from zero, adding the shared output) and
 * ld_cu_hc_post.  A block
 * per 8 columns, a warp per column over every group's rows and the T
 * tokens (a decode step's few). */
int ld_cu_moe_down_post(ld_cu_moe_part r, int Kr, const float *x, const uint8_t *q, const float *scale, int T, int Ks,
                        int br, int bc, ld_cu_combine c, ld_cu_post p);

/* One expert's three weights as ld_cu_moe_tables reads them (device
 * pointers: codes and fp32 scale grids). */
typedef struct ld_cu_moe_w {
    const uint8_t *gate_q, *up_q, *down_q;
    const float *gate_s, *up_s, *down_s;
} ld_cu_moe_w;

/* The grouped launches' tables from a plan on the device (offsets [E + 1]
 * as ld_cu_moe_plan's, w [E] every expert's weights): the k-th expert in
 * ascending id with rows gets tab[k] its gate over rows xe [.][D] into g
 * [.][I], tab[G + k] its up (into u), tab[2 G + k] its down (g's rows into
 * eo [.][D]), rows at its offset; entries k >= the number of such experts
 * (G of each kind) get 0 rows.  The host never sees the plan.  One block,
 * a thread per expert (E <= 1024), the positions by a prefix count.
 * xrows NULL: xe holds the routed rows gathered in plan order; else xe is
 * the tokens' rows [T][D] and the gate and up read row xrows[i] for the
 * plan's row i (xrows: the plan's rows; no gather launch). */
int ld_cu_moe_tables(ld_cu_mm_group *tab, int G, const int32_t *offsets, const ld_cu_moe_w *w, int E, const float *xe,
                     const int32_t *xrows, float *g, float *u, float *eo, int D, int I);

/* The rows a decode step routes in one launch (ld_cu_ds4_route_plan_tables) */
#define LD_CU_ROUTE_FUSED_T 16
#define LD_CU_ROUTE_FUSED_E 256
/* ld_cu_ds4_route (custom), ld_cu_moe_plan (custom) over its idx and
 * ld_cu_moe_tables over that plan, in one launch of one block (T <=
 * LD_CU_ROUTE_FUSED_T rows, E <= LD_CU_ROUTE_FUSED_E experts, else
 * cudaErrorInvalidValue): a decode step's MoE set up by one kernel, not
 * three.  The same outputs bitwise, arguments as those three (pick:
 * the tables' xrows are the plan's rows, xe the tokens' rows). */
int ld_cu_ds4_route_plan_tables(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                                const int32_t *tokens, int T, int E, int K, float scale, int32_t *offsets,
                                int32_t *rows, int32_t *row_of, ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw,
                                const float *xe, int pick, float *g, float *u, float *eo, int D, int I);

/* The router of ld_cu_ds4_router_route_plan_tables: logits [T][E] = x
 * [T][K] times the rows of w [E][K] (of type dt: F32, F16 or BF16), as
 * ld_cu_matmul's custom kernel without a bias computes them; sync: an int
 * of device memory, zero, that the launch leaves zero. */
typedef struct ld_cu_router {
    float *logits;
    const float *x;
    const void *w;
    ld_kdt dt;
    int K;
    int *sync;
} ld_cu_router;

/* The router's matmul (r) and ld_cu_ds4_route_plan_tables over its logits
 * in one launch (E / 8 blocks computing the logits, the last one done then
 * routing, planning and tabling them): the logits and every output bitwise
 * those of ld_cu_matmul (custom) then ld_cu_ds4_route_plan_tables, the
 * same limits (cudaErrorInvalidValue beyond them, or another type). */
int ld_cu_ds4_router_route_plan_tables(const ld_cu_router *r, int32_t *idx, float *w, const float *bias,
                                       const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, float scale,
                                       int32_t *offsets, int32_t *rows, int32_t *row_of, ld_cu_mm_group *tab, int G,
                                       const ld_cu_moe_w *mw, const float *xe, int pick, float *g, float *u,
                                       float *eo, int D, int I);

/* The compressor's pooled entries w0 .. w0 + nw - 1 (ld_ref_ds4_compress,
 * before RMSNorm and RoPE) into out [nw][d]: kv, gate rows of `stride`
 * floats indexed by absolute position (ring 0), or position p at row p %
 * ring of a ring of `ring` >= 2 r rows (then nw = 1: the ring holds one
 * entry's window, read in place); ape [r][stride].  ref: a thread per
 * (entry, column), the C loop; custom: a block per (32 columns, entry),
 * the slots split over 8 parts (max, sum of exps, fmaf'd weighted sum)
 * combined in part order, one division at the end.  nw <= 65535. */
int ld_cu_ds4_compress(int v, float *out, const float *kv, const float *gate, const float *ape, int r, int d,
                       size_t stride, int overlap, int w0, int nw, int ring);

/* V4's q and kv after their projections in one launch (the custom
 * kernels' path of the backend's ds4_qkv): each head of q [T][H][hd]
 * unit-RMSNormed in place (ld_cu_rmsnorm's custom reduction, by ones) and
 * its last rd values rotated at its position (ld_cu_ds_rope's interleaved
 * pairs, not inverse); each kv row [T][hd] put at row (pos0 + t) %
 * kv_rows of the ring kvc and rotated there.  Bitwise the custom
 * ld_cu_rmsnorm, ld_cu_ds_rope and the copy it replaces.  rd even, <= hd;
 * kv_rows >= T. */
int ld_cu_ds4_qkv(float *q, float *kvc, const float *kv, int T, int H, int hd, int kv_rows, int pos0, float eps,
                  const float *inv_freq, float attn_factor, int rd, int bf16_table);

/* Rows p0 .. p0 + n - 1 (n <= ring) of two arrays a, b [n][W] into their
 * rings ra, rb [ring][W], position p at row p % ring: one launch for both
 * (a compressor's kv and gate projections of a chunk's tokens). */
int ld_cu_ring_put2(float *ra, float *rb, const float *a, const float *b, size_t W, int ring, int p0, int n);

/* V3.2's indexer LayerNorm (ld_ref_ds_layernorm) in place over `rows`
 * rows of dim floats, row_stride apart; w, b [dim].  ref: a thread per row,
 * the C loop; custom: a block per row, block-reduced sums. */
int ld_cu_ds_layernorm(int v, float *x, int rows, size_t row_stride, const float *w, const float *b, int dim,
                       float eps);

/* ---------------------------------------------------------------- tensor cores
 * kernels/cuda/cuda_gemm_tc.cu: the matmul of BF16 weights on tensor cores
 * (sm_80+, mma.sync m16n8k16 bf16 x bf16 -> fp32), the CUDA backend's
 * `matmul=tc`.  Not bitwise the reference: it computes what
 * ld_var_matmul_bf16 (ref_variants.h) does up to the order of the fp32
 * sums.  The activations x are rounded to bf16 (nearest even) as they are
 * staged (the weights are bf16 already), so every product is exact, and
 * the products are summed in fp32 inside the mma (its own order and
 * rounding within each 16-wide k step), the k steps chained in ascending
 * order from zero; then + bias[n] (fp32), as ld_cu_matmul.  The order is a
 * function of K only: no split-K, no atomics, and the mma computes a row
 * from that row alone, so a token's row has the same bits at any T and in
 * any batch.  Relative to the reference (fp32 x, one accumulator) the
 * difference is dominated by the bf16 rounding of x (2^-9 relative per
 * element). */

/* 1 when ld_cu_matmul_tc takes weights of type dt with rows of K values:
 * BF16 and K a positive multiple of 8 (16-byte rows); else use
 * ld_cu_matmul */
int ld_cu_matmul_tc_supported(ld_kdt dt, int K);

/* out[t][n] = bf16(x[t]) . w[rope_row(n)] (+ bias[n]) as above; arguments
 * as ld_cu_matmul (bias NULL or F32/F16/BF16).  x and w 16-byte aligned.
 * Errors: an unsupported (dt, K) or bias type (cudaErrorInvalidValue), a
 * misaligned pointer (cudaErrorMisalignedAddress), a device before sm_80
 * (cudaErrorNoKernelImageForDevice). */
int ld_cu_matmul_tc(float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt, int T,
                    int K, int N, int rope_hd);

#ifdef __cplusplus
}
#endif

#endif /* LD_CUDA_OPS_H */
