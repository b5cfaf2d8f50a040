/* backend.h - the op interface between the forward pass and a compute
 * backend.  The engine calls ops through the table; the backend owns its
 * buffers (fp32 activations, KV caches) and its weights.  Three backends
 * implement it: "ref", the plain-C reference (backend/cpu/, over
 * kernels/ref/), "cpu", the same with kernels/cpu/'s matmul and attention,
 * and "cuda" (backend/cuda/, over kernels/cuda/); the optional entries (the
 * DeepSeek ops, the fused ones) may be NULL, and the sessions then run
 * those steps on the host.
 *
 * Contract every backend keeps (what makes replay deterministic):
 *  - an op's result for a token row depends only on that row's inputs (and
 *    for attention, on the KV cache), never on how many rows are processed
 *    together, so one prefill, chunks and token-by-token agree bitwise;
 *  - every reduction has a fixed order, a function of the shapes only;
 *  - results do not depend on the number of threads or blocks.
 *
 * Buffers are arrays of fp32; sizes and offsets count floats.  Host arrays
 * passed to ops (token ids, inverse frequencies) are read during the call.
 */
#ifndef LD_BACKEND_H
#define LD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "ld_error.h"
#include "mem_kind.h" /* ld_mem, LD_MEM_*: buf_mem's answer */
#include "engine/formats/safetensors.h"

typedef struct ld_backend ld_backend;
typedef struct ld_buf ld_buf;       /* backend-owned fp32 array */
typedef struct ld_weight ld_weight; /* backend-owned weight */

/* GGML block types a weight may be stored in (GGUF); see kernels/
 * ref_quant.h.  Each row is a whole number of blocks. */
typedef enum ld_wquant {
    LD_WQ_NONE = 0,     /* plain `dtype` */
    LD_WQ_Q4_0, LD_WQ_Q4_1, LD_WQ_Q8_0, LD_WQ_Q4_K, LD_WQ_Q6_K,
    LD_WQ_F8B,          /* FP8 E4M3 bytes with fp32 block scales (`scale`) */
    LD_WQ_F4B           /* packed FP4 E2M1 (two a byte, low nibble first:
                           `data` holds rows * cols / 2 bytes) with fp32
                           block scales (`scale`), DeepSeek-V4's experts */
} ld_wquant;

/* A weight on the host: `rows` x `cols` (a vector has rows = 1), row-major,
 * of dtype F32, F16 or BF16 (little-endian), or of a block type when
 * `quant` is set (then `dtype` is ignored; only matrices, cols a multiple of
 * the block); `data` stays valid while the weight lives.  rope_hd > 0: the
 * rows are in the order llama.cpp's GGUF conversion gives Llama's q/k
 * projections (heads of rope_hd rows, rotation pairs adjacent); the matmul
 * gives its outputs in HF order (pairs i, i + rope_hd/2), see
 * ld_ref_matmul_ex. */
typedef struct ld_host_tensor {
    ld_dtype dtype;
    const void *data;
    int64_t rows, cols;
    ld_wquant quant;
    int rope_hd;
    /* LD_WQ_F8B: [ceil(rows / scale_br)][ceil(cols / scale_bc)] fp32, the
     * value of [r][c] being e4m3(data[r][c]) * scale[r / br][c / bc];
     * LD_WQ_F4B the same with e2m1 of [r][c]'s nibble (cols even) */
    const float *scale;
    int scale_br, scale_bc;
    /* the private read-only file mapping (a GGUF's) the data came from,
     * and its size (NULL, 0: none).  A backend that copies data lying
     * inside it may drop those pages from the resident set: they read
     * back the same from the file.  Data moved elsewhere (a copy of some
     * columns) is simply no longer inside. */
    const void *map;
    size_t map_size;
} ld_host_tensor;

/* the mHC variant of hc_pre (the session's mhc= kernel choice) */
enum { LD_DS4_MHC_F32 = 0, LD_DS4_MHC_BF16 = 1, LD_DS4_MHC_SINKHORN_BF16 = 2 };

/* An expert of the moe entry (below): its gate and up projections [I][D]
 * and down projection [D][I], all three or none (NULL: absent). */
typedef struct ld_moe_expert {
    ld_weight *gate, *up, *down;
} ld_moe_expert;

/* the moe entry's activation: silu(g) * u through the backend's swiglu op
 * (V3), or V4's silu(min(g, L)) * clamp(u, -L, L)
 * (ld_ref_ds4_clamped_swiglu) */
enum { LD_MOE_ACT_SILU = 0, LD_MOE_ACT_CLAMPED = 1 };
/* the moe entry's combine (the session's combine= kernel choice) */
enum { LD_MOE_COMBINE_REF = 0, LD_MOE_COMBINE_FUSED = 1, LD_MOE_COMBINE_BF16 = 2 };

/* the indexer operand variant of V4's compressor and indexer entries (the
 * session's indexer= kernel choice) */
enum { LD_DS4_INDEX_F32 = 0, LD_DS4_INDEX_BF16 = 1, LD_DS4_INDEX_FP8 = 2 };

/* V4's RoPE as the attention entries take it: the last `dim` values of each
 * head rotated, inv_freq [dim/2] a buffer (uploaded once by the session),
 * bf16 = 1 the rope=bf16 variant (ld_ref_ds4_rope_ex) */
/* hc_post's arguments but its input f (ds4_hc_post: out [T][N][D], X the
 * streams, post [T][N], comb [T][N][N]), for the entries that compute f and
 * mix it into the streams in one call */
typedef struct ld_hc_post_call {
    ld_buf *out;
    const ld_buf *X, *post, *comb;
    int N;
} ld_hc_post_call;

typedef struct ld_ds4_rot {
    const ld_buf *inv_freq;
    float attn_factor;
    int dim, bf16;
} ld_ds4_rot;

/* a V4 KV compressor's state and parameters in backend buffers: the rings
 * of the last 2 ratio positions' projections kv, gate [2 ratio][width],
 * the entries [.][dim], ape [ratio][width], norm [dim]; width is dim (HCA)
 * or 2 dim (CSA, overlapping windows) */
typedef struct ld_ds4_comp_bufs {
    ld_buf *kv, *gate, *entries;
    const ld_buf *ape, *norm;
    int width, dim, ratio;
} ld_ds4_comp_bufs;

/* ds4_index_attention's two halves: the indexer's arguments as ds4_index
 * takes them (its ratio: the attention's), the attention's as
 * ds4_attention takes them (its k: the indexer's) */
typedef struct ld_ds4_index_call {
    ld_buf *q, *w;
    const ld_buf *keys;
    int n_heads, dim, k;
    const ld_ds4_rot *rope;
    int variant;
} ld_ds4_index_call;

typedef struct ld_ds4_attn_call {
    ld_buf *out;
    const ld_buf *q, *kvc, *entries, *sinks;
    int H, hd, kv_rows, window, ratio;
    float scale;
    const ld_ds4_rot *rope;
} ld_ds4_attn_call;

typedef struct ld_backend_ops {
    const char *name;
    void (*destroy)(ld_backend *be);

    ld_status (*buf_alloc)(ld_backend *be, size_t n, ld_buf **out, ld_error *err);
    void (*buf_free)(ld_backend *be, ld_buf *b);
    ld_status (*buf_write)(ld_backend *be, ld_buf *b, size_t off, const float *src, size_t n, ld_error *err);
    ld_status (*buf_read)(ld_backend *be, const ld_buf *b, size_t off, float *dst, size_t n, ld_error *err);
    /* Optional (NULL: callers copy through buf_read / buf_write): where the
     * floats [off, off + n) of b live, so that a communicator can reduce
     * them where they are (tp_forward.c: NCCL on the device's memory, the
     * simulated one on the host's) instead of staging a copy.  The pointer
     * stays valid until b is freed; what a caller writes there is b's
     * content, ordered with the backend's ops as comm.h says for its kind.
     * LD_ERR_USAGE for a range outside b. */
    ld_status (*buf_mem)(ld_backend *be, ld_buf *b, size_t off, size_t n, ld_mem *out, ld_error *err);
    /* Optional (NULL: a forward pass runs one sequence at a time): a
     * buffer of the floats [off, off + n) of b, sharing b's memory, so that
     * an op can run on some rows of a larger buffer (several sequences in
     * one batch: forward.h's ld_session_eval_batch runs attention per
     * sequence on its rows).  Writes through either are seen by both; b
     * must outlive the view, which buf_free releases without touching b.
     * LD_ERR_USAGE for a range outside b. */
    ld_status (*buf_view)(ld_backend *be, ld_buf *b, size_t off, size_t n, ld_buf **out, ld_error *err);
    /* Optional (NULL: every op has run when it returns, or the backend's
     * work is ordered whatever thread queues it): waits until the work
     * queued on the backend's device by any thread has run, its first
     * error returned.  Called where work passes from one thread to another
     * (tp_forward.c: a rank's backend is made and loaded on the caller's
     * thread, then runs on the rank's), since the CUDA backend queues each
     * thread's work on that thread's own stream. */
    ld_status (*finish)(ld_backend *be, ld_error *err);

    /* The reference backend uses the host data in place (no copy). */
    ld_status (*weight_load)(ld_backend *be, const ld_host_tensor *t, ld_weight **out, ld_error *err);
    void (*weight_free)(ld_backend *be, ld_weight *w);

    /* out[t] = table[tokens[t]], t < T; tokens already checked < rows */
    ld_status (*embed)(ld_backend *be, ld_buf *out, const ld_weight *table, const int32_t *tokens, int T, ld_error *err);
    /* RMSNorm of `rows` rows of w->cols values */
    ld_status (*rmsnorm)(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, int rows, float eps, ld_error *err);
    /* out [T][w->rows] = x [T][w->cols] . w^T (+ bias); quantized rows are
     * dequantized one at a time */
    ld_status (*matmul)(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias, int T, ld_error *err);
    /* in-place RoPE of x [T][n_heads*head_dim], row t at position pos0 + t */
    ld_status (*rope)(ld_backend *be, ld_buf *x, int T, int n_heads, int head_dim, int pos0, const float *inv_freq, ld_error *err);
    /* cache rows [pos0, pos0+T) of `row` floats = src [T][row] */
    ld_status (*kv_store)(ld_backend *be, ld_buf *cache, const ld_buf *src, int T, int pos0, int row, ld_error *err);
    /* causal attention of q [T][n_heads*hd] (positions pos0...) against the
     * caches; window > 0 = sliding window; see ld_ref_attention */
    ld_status (*attention)(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kcache, const ld_buf *vcache,
                           int T, int pos0, int n_heads, int n_kv, int head_dim, int window, float scale, ld_error *err);
    ld_status (*swiglu)(ld_backend *be, ld_buf *out, const ld_buf *gate, const ld_buf *up, size_t n, ld_error *err);
    ld_status (*add)(ld_backend *be, ld_buf *x, const ld_buf *y, size_t n, ld_error *err);
    ld_status (*softmax)(ld_backend *be, ld_buf *out, const ld_buf *x, int rows, int n, ld_error *err);

    /* ---- DeepSeek ops (V3/V3.2).  Optional: NULL in a backend without
     * them; the engine then computes them on host copies with the plain-C
     * kernels of kernels/ref/ref_ds.h, which the reference backend's ops
     * are, bit for bit.  Host arrays (sel, bias, and the outputs idx, w)
     * are read or written during the call. */

    /* MLA latent attention, the absorbed form's step 2
     * (ld_ref_mla_latent_attention): for t < T (position pos0 + t), h <
     * n_heads, o_lat [T][n_heads][c] from q_abs [T][n_heads][c], the rope
     * part (the last dr of each head) of q [T][n_heads][dn + dr], the
     * latent cache ckv [S][c] and the rope keys kpe [S][dr], S >= pos0 + T.
     * sel NULL: query t attends positions 0..pos0 + t; else sel [T][k]
     * holds ascending positions of which the first min(k, pos0 + t + 1)
     * are attended (V3.2's sparse MLA, ld_ref_mla_latent_attention_sparse).
     * split 0: one softmax pass over the positions in order; split > 0:
     * split-K of `split` consecutive entries per split, folded in split
     * order (ld_dsv_mla_latent_attention_splitk).  Each (t, h) is one item
     * computed whole, so neither T nor the threads change its bits.  The
     * CUDA backend runs its spec's mla kernel (ref: one pass; custom:
     * split-K of 64 entries) for split 0 or 64 alike (either agrees with
     * both to rounding); another split is LD_ERR_UNSUPPORTED there. */
    ld_status (*mla_latent)(ld_backend *be, ld_buf *o_lat, const ld_buf *q_abs, const ld_buf *q, const ld_buf *ckv,
                            const ld_buf *kpe, int T, int pos0, int n_heads, int dn, int dr, int c, float scale,
                            const int32_t *sel, int k, int split, ld_error *err);
    /* MLA's absorbed products with w = kv_b_proj [n_heads*(dn+dv)][c] (F32,
     * F16 or BF16; another type is LD_ERR_UNSUPPORTED), per (t, h):
     * mla_absorb_q: q_abs [T][n_heads][c] = W_UK^T q_nope, the nope part of
     * q [T][n_heads][dn + dr] (ld_ref_mla_absorb_q); mla_absorb_out: out
     * [T][n_heads][dv] = W_UV o_lat, o_lat [T][n_heads][c]
     * (ld_ref_mla_absorb_out).  One accumulator per output in index order
     * (the CUDA custom kernels: their documented fixed orders). */
    ld_status (*mla_absorb_q)(ld_backend *be, ld_buf *q_abs, const ld_buf *q, const ld_weight *w, int T, int n_heads,
                              int dn, int dr, int dv, int c, ld_error *err);
    ld_status (*mla_absorb_out)(ld_backend *be, ld_buf *out, const ld_buf *o_lat, const ld_weight *w, int T,
                                int n_heads, int dn, int dv, int c, ld_error *err);
    /* The noaux_tc group-limited sigmoid router (ld_ref_ds_route) of T rows
     * of logits [T][E]: into the host arrays idx [T][top_k] (ascending
     * expert ids) and w [T][top_k] (their weights); bias NULL or E host
     * floats (the correction bias, for selection only).  The constraints
     * are ld_ref_ds_route's (E a multiple of n_group, >= 2 experts per
     * group, topk_group <= n_group, top_k <= topk_group * E / n_group,
     * E <= 1024); others are LD_ERR_USAGE.  A row's result depends on its
     * logits only. */
    ld_status (*ds_route)(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias, int T,
                          int E, int n_group, int topk_group, int top_k, int norm, float scale, ld_error *err);
    /* V3.2's lightning-indexer selection of T queries (position pos0 + t):
     * query t's scores against keys [S][dim] positions 0..pos0 + t
     * (ld_ref_ds_index_scores of q [T][n_heads][dim], w [T][n_heads]) and
     * the min(k, pos0 + t + 1) best of them (ld_ref_ds_topk: score
     * descending, then position ascending), written ascending into the host
     * array sel [T][k], -1 after them.  S >= pos0 + T. */
    ld_status (*index_topk)(ld_backend *be, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys, int T,
                            int pos0, int n_heads, int dim, int k, ld_error *err);

    /* ---- DeepSeek-V4 ops.  Optional as the above: NULL, or
     * LD_ERR_UNSUPPORTED for a variant the backend lacks (checked before
     * anything is written), and the V4 session computes them on host copies
     * with kernels/ref/ref_ds4.h's leaves, which the reference
     * backend's ops are, bit for bit (an item per token, per-thread
     * scratch: neither T nor the threads change a token's bits). */

    /* mHC pre-mixing with Sinkhorn-Knopp (ld_ref_ds4_hc_pre_ex) of T
     * tokens: X [T][N][D] the streams, fn [(2+N)*N][N*D] fp32 (a buffer),
     * base [(2+N)*N] and scale [3] host floats; out post [T][N], comb
     * [T][N][N], collapsed [T][D].  variant: LD_DS4_MHC_F32 (the
     * reference), LD_DS4_MHC_BF16 (mhc=bf16: post and comb then rounded to
     * bf16) or LD_DS4_MHC_SINKHORN_BF16 (mhc=sinkhorn-bf16: the Sinkhorn
     * iterate in bf16); another is LD_ERR_USAGE.  The CUDA backend runs its
     * spec's hc kernel (ld_cu_hc_pre_ex; custom agrees to rounding), N <= 64,
     * every variant. */
    ld_status (*hc_pre)(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                        const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                        float norm_eps, float hc_eps, int variant, ld_error *err);
    /* hc_pre, then rmsnorm of its collapsed rows by w (eps) into normed
     * [T][D], in one call (the block's input norm: fewer launches).
     * Optional (NULL, or LD_ERR_UNSUPPORTED for a kernel set or weight it
     * does not fuse, before anything is written: the session calls
     * hc_pre, then rmsnorm); the bits of those two calls. */
    ld_status (*hc_pre_norm)(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                             const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                             float norm_eps, float hc_eps, int variant, const ld_weight *w, float eps,
                             ld_buf *normed, ld_error *err);
    /* mHC post-mixing (ld_ref_ds4_hc_post) of T tokens: out [T][N][D] (not
     * aliasing X) = post[k] f[d] + sum_j comb[j][k] X[j][d] (j ascending),
     * X [T][N][D], f [T][D], post [T][N], comb [T][N][N].  Every backend
     * and kernel: the same bits. */
    ld_status (*hc_post)(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *f, const ld_buf *post,
                         const ld_buf *comb, int T, int N, int D, ld_error *err);
    /* V4's router (ld_ref_ds4_route) of T rows of logits [T][E]: into the
     * host arrays idx [T][K] (ascending expert ids) and w [T][K] (their
     * weights, times scale).  hash NULL: the top-K of sqrt(softplus(logit))
     * + bias (bias NULL or E host floats, for selection only); else the
     * host array hash [T][K], row t the token's experts (tid2eid's row of
     * the hash layers).  E <= 1024, K <= min(E, 64), hash ids in [0, E);
     * others are LD_ERR_USAGE.  A row's result depends on its inputs only;
     * the CUDA backend runs its spec's route kernel (ids equal, weights to
     * rounding). */
    ld_status (*ds4_route)(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias,
                           const int32_t *hash, int T, int E, int K, float scale, ld_error *err);

    /* ---- DeepSeek-V4's attention on the backend: the KV ring, the
     * compressor state and its entries in backend buffers.  Optional as the
     * above: the session uses the first five when all are there, and
     * ds4_hc_head on its own.
     * T = 0 is a probe: the variant is checked (LD_OK or
     * LD_ERR_UNSUPPORTED) and nothing is written, so that the session picks
     * the host path before a layer starts.  Each mirrors the host path's
     * leaves in its order, per token (the compressor: per position, in
     * order), so the reference backends give its bits whatever T and the
     * threads; the CUDA backend runs its spec's kernels (attention= for the
     * attention and the compressor, rope=, index=, rmsnorm=, hc=; ref: the
     * same formulas, custom: agree to rounding).
     * rope: V4's interleaved partial RoPE (ld_ref_ds4_rope_ex) of the last
     * rope->dim values of each head. */

    /* the queries and the new keys (ld_ref_ds4_unit_rmsnorm of each head
     * of q [T][H][hd] in place, then RoPE at pos0 + t; kv [T][hd] copied to
     * row (pos0 + t) % kv_rows of the ring kvc [kv_rows][hd] and rotated
     * there).  kv_rows >= T. */
    ld_status (*ds4_qkv)(ld_backend *be, ld_buf *q, ld_buf *kvc, const ld_buf *kv, int T, int pos0, int H, int hd,
                         int kv_rows, float eps, const ld_ds4_rot *rope, ld_error *err);
    /* the KV compressor of T positions pos0 + t in order: the projections
     * kv, gate [T][width] into the rings (position p in row p % (2 ratio)),
     * and when p + 1 is a multiple of ratio, entry w = (p + 1) / ratio - 1:
     * ld_ref_ds4_compress of its slots (window w - 1's first half when
     * width = 2 dim, then window w), ld_ref_rmsnorm with norm [dim], RoPE
     * at position w * ratio, and for the indexer's keys (index_variant
     * LD_DS4_INDEX_BF16 / _FP8) the operand rounding of the session's
     * indexer= variant (ld_dsv_round_bf16 / ld_dsv_index_fp8).  The CUDA
     * backend: LD_DS4_INDEX_F32 only. */
    ld_status (*ds4_compress)(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate, int T,
                              int pos0, float eps, const ld_ds4_rot *rope, int index_variant, ld_error *err);
    /* the lightning indexer of T queries: q [T][n_heads][dim] rotated at
     * pos0 + t and rounded to the variant's operand in place, w
     * [T][n_heads] rounded to bf16 in place for LD_DS4_INDEX_BF16; scores
     * (ld_ref_ds4_index_scores, qscale dim^-0.5, wscale n_heads^-0.5)
     * against the (pos0 + t + 1) / ratio first rows of keys [.][dim], and
     * their ld_ref_ds4_topk best ascending into the host array sel [T][k],
     * -1 after them.  The CUDA backend: LD_DS4_INDEX_F32 only. */
    ld_status (*ds4_index)(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0,
                           int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope, int index_variant,
                           ld_error *err);
    /* V4's attention of T queries q [T][H][hd] into out [T][H][hd] (not
     * aliasing q): token t (position p = pos0 + t) attends, in this order,
     * the ring kvc's positions max(0, p - window + 1) .. p, then (entries
     * not NULL) the rows of entries [.][hd] of the host array sel [T][k]
     * up to its first negative (sel NULL: every row w < (p + 1) / ratio),
     * with the sink logits sinks [H] (NULL: none), ld_ref_ds4_attention;
     * then the inverse RoPE of the output at p.  kv_rows >= window + T - 1
     * (or the whole sequence). */
    ld_status (*ds4_attention)(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kvc,
                               const ld_buf *entries, const int32_t *sel, int k, const ld_buf *sinks, int T, int pos0,
                               int H, int hd, int kv_rows, int window, int ratio, float scale,
                               const ld_ds4_rot *rope, ld_error *err);
    /* ds4_index then ds4_attention over its picks, one call (a CSA layer;
     * at->entries not NULL): sel [T][ix->k] a host array that receives the
     * picks, or NULL when the caller does not need them, which lets a
     * backend keep them where it computed them (CUDA: on the device, no
     * copy to the host and back, no wait for the device).  Optional (NULL:
     * the session makes the two calls); errors and bits as the two calls'. */
    ld_status (*ds4_index_attention)(ld_backend *be, const ld_ds4_index_call *ix, const ld_ds4_attn_call *at, int T,
                                     int pos0, int32_t *sel, ld_error *err);
    /* a block of columns: dst[r * dst_ld + dst_off + j] = src[r * src_ld +
     * src_off + j], r < rows, j < cols (the grouped output projection's
     * heads of a group, and its outputs back in place); no aliasing. */
    ld_status (*copy_cols)(ld_backend *be, ld_buf *dst, size_t dst_ld, size_t dst_off, const ld_buf *src,
                           size_t src_ld, size_t src_off, int rows, size_t cols, ld_error *err);
    /* The block-diagonal product of G weights ws[g], each [N][K], all of
     * one type, shape and block size: out[t][g N + n] = ws[g][n] . x[t][g K
     * .. g K + K) for t < T; x [T][G K], out [T][G N] (V4's grouped output
     * projection in one call: a launch, not G matmuls and 2 G copies).
     * Optional (NULL, or LD_ERR_UNSUPPORTED for weights or a kernel set it
     * does not group, before anything is written: the session copies each
     * group's columns out with copy_cols, multiplies with matmul and copies
     * the result back); the bits of those calls. */
    ld_status (*matmul_blockdiag)(ld_backend *be, ld_buf *out, const ld_buf *x, ld_weight *const *ws, int G, int T,
                                  ld_error *err);
    /* n products of one input: outs[i] [T][ws[i]->rows] = x [T][K] . ws[i]^T,
     * no bias, every ws[i] of K = ws[0]->cols columns and its own rows
     * (projections that share an input: V4's wq_a and wkv, then wq_b and
     * the indexer's wq_b, a dense decoder's q, k and v, and its gate and
     * up; one launch, or one hand-off to the CPU backends' threads, not
     * n).  x is none of outs.  With
     * norms (else NULL; an array the caller keeps): each outs[i] whose
     * norms[i] is set then rmsnorm'd in place by it (eps), as the rmsnorm
     * entry does.  Optional (NULL, or LD_ERR_UNSUPPORTED for weights,
     * norms or a kernel set it does not group, before anything is
     * written: the session calls matmul for each, then rmsnorm); the bits
     * of those calls.  ws: an array the caller keeps (the CUDA backend
     * keys its device table by it). */
    ld_status (*matmul_fanout)(ld_backend *be, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int n,
                               int T, ld_weight *const *norms, float eps, ld_error *err);
    /* rmsnorm(out_a, x_a, w_a, rows) and rmsnorm(out_b, x_b, w_b, rows) in
     * one call (the q and kv latents' norms).  Optional as matmul_fanout;
     * the bits of the two rmsnorm calls. */
    ld_status (*rmsnorm2)(ld_backend *be, ld_buf *out_a, const ld_buf *x_a, const ld_weight *w_a, ld_buf *out_b,
                          const ld_buf *x_b, const ld_weight *w_b, int rows, float eps, ld_error *err);
    /* A block's last projection straight into the new streams: hc_post(p->out,
     * p->X, f, p->post, p->comb, T, p->N, w->rows) of f = matmul(x, w) (no
     * bias), f never written.  Optional as matmul_fanout; the bits of
     * matmul into a buffer and hc_post from it. */
    ld_status (*matmul_hc_post)(ld_backend *be, const ld_hc_post_call *p, const ld_buf *x, const ld_weight *w, int T,
                                ld_error *err);
    /* the final stream collapse (ld_ref_ds4_hc_head) of T tokens: X
     * [T][N][D], fn [N][N*D] (a buffer), base [N] host floats; out [T][D].
     * The CUDA backend: N <= 64 (more is LD_ERR_UNSUPPORTED, and the
     * session collapses on the host). */
    ld_status (*ds4_hc_head)(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                             float scale, int T, int N, int D, float norm_eps, float hc_eps, ld_error *err);
    /* ds4_hc_head, then the final rmsnorm of out's rows by w into normed
     * [T][D] (eps), in fewer launches: optional (NULL, or
     * LD_ERR_UNSUPPORTED with nothing written, and the session makes the
     * two calls); the bits of those two calls. */
    ld_status (*ds4_hc_head_norm)(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                                  float scale, int T, int N, int D, float norm_eps, float hc_eps, const ld_weight *w,
                                  float eps, ld_buf *normed, ld_error *err);

    /* ---- The routed experts (DeepSeek V3 / V4 MoE).  Optional as the
     * above: NULL, or LD_ERR_UNSUPPORTED for a variant the backend lacks
     * (checked before anything is written), and the session runs its host
     * loop of kernels/ref/ref_ds.h's ld_ref_moe_gather / ld_ref_ds_axpy
     * around the backend's matmuls, which the CPU backends' entry is, bit
     * for bit.
     *
     * moe: y [T][D] (not aliasing x) from x [T][D] and the route's host
     * arrays idx, w [T][K] (each row's expert ids strictly ascending, as
     * the routers give them, each in [0, E) naming an expert of `experts`
     * [E] whose three weights are there, the chosen ones all of one width
     * I; others are LD_ERR_USAGE).  Per expert
     * e, the rows of the tokens that chose it (token order) go through
     * o_e = down_e(act(gate_e x, up_e x)) (act: LD_MOE_ACT_SILU, the
     * backend's swiglu op with its variant; LD_MOE_ACT_CLAMPED, limit L),
     * the backend's matmul over those rows.  Then per token, from y = 0,
     * the experts in ascending id (k ascending):
     *   LD_MOE_COMBINE_REF    y = y + o_e * w (two roundings: ld_ref_ds_axpy)
     *   LD_MOE_COMBINE_FUSED  the same, then y = y * fused_scale (once, on
     *                         the routed sum: ld_ref_ds_scale)
     *   LD_MOE_COMBINE_BF16   y = bf16(y + bf16(bf16(o_e) * bf16(w)))
     *                         (V3's combine=bf16)
     * and shared (NULL: none) the shared expert, same activation, over all
     * T rows: y = y + shared(x) (one rounding).  A token's bits depend on
     * its row of x and its route only, never on T or on which other tokens
     * share its experts: a matmul's row depends on that row only (the
     * contract above) and the sums are per token in a fixed order.  The
     * CPU backends: the session's host loop's calls, the same bits.  CUDA:
     * the rows gathered per expert on the device, the backend's matmul
     * (every weight type), the activation and the combine in that order
     * on the device (to rounding: expf); LD_MOE_COMBINE_BF16 is
     * LD_ERR_UNSUPPORTED there. */
    ld_status (*moe)(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T, int K,
                     const ld_moe_expert *experts, int E, const ld_moe_expert *shared, int act, float limit,
                     int combine, float fused_scale, ld_error *err);
    /* V4's router and the moe entry over its choices in one call: ds4_route
     * of logits [T][E] (bias, hash, scale as there), then moe of x into y
     * with that route (experts, shared, act, limit, combine, fused_scale as
     * there).  idx, w [T][K]: host arrays that receive the route, or NULL
     * when the caller does not need it, which lets a backend keep the route
     * where it computed it (CUDA: on the device, no copy to the host and
     * back, no wait for the device).  Optional (NULL: the session calls
     * ds4_route, then moe); LD_ERR_UNSUPPORTED for a variant moe refuses
     * (checked before anything is written).  The same bits as the two
     * calls.  router: NULL when logits holds x's router logits already;
     * else the entry first computes them into logits, matmul(logits, x,
     * router, no bias, T)'s bits (CUDA: in the route's own launch where
     * it can), so that the session hands it the router rather than run
     * the matmul itself. */
    ld_status (*ds4_route_moe)(ld_backend *be, ld_buf *y, const ld_buf *x, ld_buf *logits, const ld_weight *router,
                               const float *bias, const int32_t *hash, int T, int E, int K, float scale,
                               const ld_moe_expert *experts,
                               const ld_moe_expert *shared, int act, float limit, int combine, float fused_scale,
                               int32_t *idx, float *w, ld_error *err);
    /* ds4_route_moe whose output y goes straight into the new streams:
     * hc_post(p->out, p->X, y, p->post, p->comb, T, p->N, D), y never
     * written.  Optional (NULL, or LD_ERR_UNSUPPORTED for what it does not
     * fuse, before anything is written: the session calls ds4_route_moe,
     * then hc_post); the bits of those two calls. */
    ld_status (*ds4_route_moe_post)(ld_backend *be, const ld_hc_post_call *p, const ld_buf *x, ld_buf *logits,
                                    const ld_weight *router, const float *bias, const int32_t *hash, int T, int E, int K, float scale,
                                    const ld_moe_expert *experts, const ld_moe_expert *shared, int act, float limit,
                                    int combine, float fused_scale, int32_t *idx, float *w, ld_error *err);
} ld_backend_ops;

struct ld_backend {
    const ld_backend_ops *ops;
};


/* An optional entry's answer st (its error in *e): 0 when it refused
 * (LD_ERR_UNSUPPORTED, nothing written: the caller makes the calls it
 * stands for), else 1 with a failure's error copied to *err. */
static inline int ld_backend_answered(ld_status st, const ld_error *e, ld_error *err)
{
    if (st == LD_ERR_UNSUPPORTED) return 0;
    if (st != LD_OK && err) *err = *e;
    return 1;
}

#endif /* LD_BACKEND_H */
