/* backend_cuda_internal.h - what the CUDA backend's files share.  The
 * backend is cut by concept, each file calling only those below it:
 * backend_cuda.c the making, the op table, buffers and weights;
 * backend_cuda_ds.c V3/V3.2's MLA, router and indexer and mHC;
 * backend_cuda_moe.c the routers with the routed experts;
 * backend_cuda_ds4_attention.c V4's attention; backend_cuda_fused.c the
 * projections run together; backend_cuda_dense.c a dense decoder's ops and
 * the matmul; backend_cuda_core.c errors, device constants, sync ints.
 * Included by those files only, and only where the backend is built
 * (LD_CUDA_BACKEND). */
#ifndef LD_BACKEND_CUDA_INTERNAL_H
#define LD_BACKEND_CUDA_INTERNAL_H

#include "backend_cuda.h"
#include "logdiff_config.h"

/* the backend itself is built with CUDA, or over the mock or the emulator
 * of cuda_ops.h (backend_cuda.c's stubs say "built without CUDA" else) */
#if LD_HAVE_CUDA || defined(LD_CUDA_MOCK) || defined(LD_CUDA_EMU)
#define LD_CUDA_BACKEND 1

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_ops.h"
#include "engine/backend/ds4_op_args.h"
#include "engine/backend/ds_op_args.h"
#include "engine/backend/moe_args.h"
#include "kernels/ref/ref_ops.h"

struct ld_buf {
    float *d; /* device */
    size_t n;
    int view; /* buf_view's: d is another buffer's */
};

struct ld_weight {
    void *d; /* device copy of the host bytes (LD_KDT_F8B: the e4m3 bytes, F4B: the packed e2m1 ones) */
    float *scale; /* LD_KDT_F8B / F4B: device copy of the scale grid, else NULL */
    int br, bc;   /* LD_KDT_F8B / F4B: the scale blocks */
    ld_kdt dt;
    int64_t rows, cols;
    int rope_hd;
};

typedef struct cuda_backend {
    ld_backend base;
    int device;
    ld_cuda_kernels k;
    int unbound;     /* graphs=N entered by each thread that runs it, not by its creator */
    int32_t *tokens; /* device scratch for embed's token ids */
    size_t tokens_cap;
    float *freq; /* device scratch for rope's inverse frequencies */
    size_t freq_cap;
    float *work; /* attention workspace */
    size_t work_cap;
    int32_t *zeros; /* zero token ids: an FP8 matmul's bias rows by embed */
    size_t zeros_cap;
    float *bias_rows; /* [<= BIAS_ROWS][N] fp32 copies of an FP8 matmul's bias */
    size_t bias_rows_cap;
    int32_t *ds_i; /* DeepSeek ops: selections in, expert ids / top-k out */
    size_t ds_i_cap;
    float *ds_f; /* DeepSeek ops: router bias and weights, indexer scores */
    size_t ds_f_cap;
    float *ones; /* ds4_qkv's unit RMSNorm weight: ones_n ones, uploaded once */
    size_t ones_cap, ones_n;
    unsigned char *moe_up; /* the moe entry's upload: plan, weights, grouped tables */
    size_t moe_up_cap;
    int32_t *picks; /* ds4_index_attention's picks, kept on the device */
    size_t picks_cap;
    int32_t *sync; /* block counts of the kernels whose last block finishes (zero between launches) */
    size_t sync_cap;
    struct const_slot *consts; /* CONST_SLOTS host constants kept on the device */
} cuda_backend;

/* the custom attention runs its queries in tiles whose workspace stays
 * under this many floats (or one query's, when that is more) */
#define ATT_WORK_FLOATS ((size_t)16 << 20)

/* an ld_error for CUDA code `code` of op `what` (LD_ERR_NOMEM for an
 * allocation, else LD_ERR_CUDA) */
ld_status ld_cuda_fail(ld_error *err, const char *what, int code);

/* a CUDA call of op `what`: a non-zero code returns an ld_error naming it */
#define CU(what, expr)                                      \
    do {                                                    \
        int cu_e_ = (expr);                                 \
        if (cu_e_) return ld_cuda_fail(err, (what), cu_e_); \
    } while (0)

/* the kernel op runs on: LD_CU_CUSTOM or LD_CU_REF (the kernel spec) */
static inline int variant(const cuda_backend *cb, int op)
{
    return cb->k.custom[op] ? LD_CU_CUSTOM : LD_CU_REF;
}

/* grows a device scratch array to `bytes` */
static inline ld_status scratch(void **p, size_t *cap, size_t bytes, const char *what, ld_error *err)
{
    if (bytes <= *cap) return LD_OK;
    ld_cu_free(*p);
    *p = NULL;
    *cap = 0;
    CU(what, ld_cu_malloc(p, bytes));
    *cap = bytes;
    return LD_OK;
}

/* a type of whole floats (F32, F16 or BF16: what ld_elem_f, the norms and
 * the custom matmul read), not a block or block-scaled one */
static inline int plain_dt(ld_kdt dt)
{
    return dt == LD_KDT_F32 || dt == LD_KDT_F16 || dt == LD_KDT_BF16;
}

/* LD_ERR_USAGE unless floats [off, off + n) lie in b */
static inline ld_status range(const ld_buf *b, size_t off, size_t n, ld_error *err)
{
    if (off > b->n || n > b->n - off)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "range [%zu, +%zu) outside a buffer of %zu floats", off, n, b->n);
    return LD_OK;
}

/* ---- backend_cuda_core.c: the constants kept on the device (freed with the
 * backend), the sync ints */
void ld_cuda_consts_free(cuda_backend *cb);
ld_status ld_cuda_const_dev(cuda_backend *cb, const void *key, const void *a, size_t na, const void *b, size_t nb,
                            void **dev, const char *what, ld_error *err);
ld_status ld_cuda_const_one(cuda_backend *cb, const void *a, size_t na, void **dev, const char *what, ld_error *err);
ld_status ld_cuda_sync_ints(cuda_backend *cb, size_t n, int32_t **out, const char *what, ld_error *err);
/* ---- backend_cuda_dense.c: a dense decoder's ops, the matmul and its group
 * tables */
ld_status ld_cuda_embed(ld_backend *be, ld_buf *out, const ld_weight *table, const int32_t *tokens, int T, ld_error *err);
ld_status ld_cuda_rmsnorm(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, int rows, float eps,
                         ld_error *err);
ld_status ld_cuda_rope(ld_backend *be, ld_buf *x, int T, int n_heads, int head_dim, int pos0, const float *inv_freq,
                      ld_error *err);
ld_status ld_cuda_kv_store(ld_backend *be, ld_buf *cache, const ld_buf *src, int T, int pos0, int row, ld_error *err);
ld_status ld_cuda_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kcache, const ld_buf *vcache,
                           int T, int pos0, int n_heads, int n_kv, int head_dim, int window, float scale, ld_error *err);
ld_status ld_cuda_swiglu(ld_backend *be, ld_buf *out, const ld_buf *gate, const ld_buf *up, size_t n, ld_error *err);
ld_status ld_cuda_add(ld_backend *be, ld_buf *x, const ld_buf *y, size_t n, ld_error *err);
ld_status ld_cuda_softmax(ld_backend *be, ld_buf *out, const ld_buf *x, int rows, int n, ld_error *err);
void ld_cuda_mm_group(ld_cu_mm_group *g, const ld_weight *w, const float *x, float *out, int rows, size_t ldx,
                      size_t ldo);
int ld_cuda_fp8_group_ok(const cuda_backend *cb, ld_weight *const *ws, int G, int T);
int ld_cuda_matmul_tc(const cuda_backend *cb, const ld_weight *w);
ld_status ld_cuda_matmul(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *w, const ld_weight *bias,
                         int T, ld_error *err);

/* ---- the ops of backend.h by file (the table is backend_cuda.c's) */
/* backend_cuda_ds.c */
ld_status ld_cuda_mla_latent(ld_backend *be, ld_buf *o_lat, const ld_buf *q_abs, const ld_buf *q, const ld_buf *ckv,
                             const ld_buf *kpe, int T, int pos0, int n_heads, int dn, int dr, int c, float scale,
                             const int32_t *sel, int k, int split, ld_error *err);
ld_status ld_cuda_mla_absorb_q(ld_backend *be, ld_buf *q_abs, const ld_buf *q, const ld_weight *w, int T, int n_heads,
                               int dn, int dr, int dv, int c, ld_error *err);
ld_status ld_cuda_mla_absorb_out(ld_backend *be, ld_buf *out, const ld_buf *o_lat, const ld_weight *w, int T,
                                 int n_heads, int dn, int dv, int c, ld_error *err);
ld_status ld_cuda_ds_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias, int T,
                           int E, int n_group, int topk_group, int top_k, int norm, float scale, ld_error *err);
ld_status ld_cuda_index_topk(ld_backend *be, int32_t *sel, const ld_buf *q, const ld_buf *w, const ld_buf *keys, int T,
                             int pos0, int n_heads, int dim, int k, ld_error *err);
ld_status ld_cuda_hc_pre(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                         const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                         float norm_eps, float hc_eps, int mhc, ld_error *err);
ld_status ld_cuda_hc_pre_norm(ld_backend *be, ld_buf *post, ld_buf *comb, ld_buf *collapsed, const ld_buf *X,
                              const ld_buf *fn, const float *base, const float *scale, int T, int N, int D, int iters,
                              float norm_eps, float hc_eps, int mhc, const ld_weight *w, float eps, ld_buf *normed,
                              ld_error *err);
ld_status ld_cuda_hc_post(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *f, const ld_buf *post,
                          const ld_buf *comb, int T, int N, int D, ld_error *err);
ld_status ld_cuda_ds4_hc_head(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                              float scale, int T, int N, int D, float norm_eps, float hc_eps, ld_error *err);
ld_status ld_cuda_ds4_hc_head_norm(ld_backend *be, ld_buf *out, const ld_buf *X, const ld_buf *fn, const float *base,
                                   float scale, int T, int N, int D, float norm_eps, float hc_eps, const ld_weight *w,
                                   float eps, ld_buf *normed, ld_error *err);
/* backend_cuda_moe.c */
ld_status ld_cuda_ds4_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias,
                            const int32_t *hash, int T, int E, int K, float scale, ld_error *err);
ld_status ld_cuda_moe(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T, int K,
                      const ld_moe_expert *experts, int E, const ld_moe_expert *shared, int act, float limit,
                      int combine, float fused_scale, ld_error *err);
ld_status ld_cuda_ds4_route_moe(ld_backend *be, ld_buf *y, const ld_buf *x, ld_buf *logits, const ld_weight *router,
                                const float *bias, const int32_t *hash, int T, int E, int K, float scale,
                                const ld_moe_expert *experts, const ld_moe_expert *shared, int act, float limit,
                                int combine, float fused_scale, int32_t *idx, float *w, ld_error *err);
ld_status ld_cuda_ds4_route_moe_post(ld_backend *be, const ld_hc_post_call *p, const ld_buf *x, ld_buf *logits,
                                     const ld_weight *router, const float *bias, const int32_t *hash, int T, int E,
                                     int K, float scale, const ld_moe_expert *experts, const ld_moe_expert *shared,
                                     int act, float limit, int combine, float fused_scale, int32_t *idx, float *w,
                                     ld_error *err);
ld_status ld_cuda_matmul_hc_post(ld_backend *be, const ld_hc_post_call *p, const ld_buf *x, const ld_weight *w, int T,
                                 ld_error *err);
/* backend_cuda_ds4_attention.c */
ld_status ld_cuda_ds4_qkv(ld_backend *be, ld_buf *q, ld_buf *kvc, const ld_buf *kv, int T, int pos0, int H, int hd,
                          int kv_rows, float eps, const ld_ds4_rot *rope, ld_error *err);
ld_status ld_cuda_ds4_compress(ld_backend *be, const ld_ds4_comp_bufs *c, const ld_buf *kv, const ld_buf *gate, int T,
                               int pos0, float eps, const ld_ds4_rot *rope, int index_variant, ld_error *err);
ld_status ld_cuda_ds4_index(ld_backend *be, int32_t *sel, ld_buf *q, ld_buf *w, const ld_buf *keys, int T, int pos0,
                            int n_heads, int dim, int ratio, int k, const ld_ds4_rot *rope, int index_variant,
                            ld_error *err);
ld_status ld_cuda_ds4_attention(ld_backend *be, ld_buf *out, const ld_buf *q, const ld_buf *kvc,
                                const ld_buf *entries, const int32_t *sel, int k, const ld_buf *sinks, int T, int pos0,
                                int H, int hd, int kv_rows, int window, int ratio, float scale,
                                const ld_ds4_rot *rope, ld_error *err);
ld_status ld_cuda_ds4_index_attention(ld_backend *be, const ld_ds4_index_call *ix, const ld_ds4_attn_call *at, int T,
                                      int pos0, int32_t *sel, ld_error *err);
/* backend_cuda_fused.c */
ld_status ld_cuda_copy_cols(ld_backend *be, ld_buf *dst, size_t dst_ld, size_t dst_off, const ld_buf *src,
                            size_t src_ld, size_t src_off, int rows, size_t cols, ld_error *err);
ld_status ld_cuda_matmul_blockdiag(ld_backend *be, ld_buf *out, const ld_buf *x, ld_weight *const *ws, int G, int T,
                                   ld_error *err);
ld_status ld_cuda_matmul_fanout(ld_backend *be, ld_buf *const *outs, const ld_buf *x, ld_weight *const *ws, int n,
                                int T, ld_weight *const *norms, float eps, ld_error *err);
ld_status ld_cuda_rmsnorm2(ld_backend *be, ld_buf *out_a, const ld_buf *x_a, const ld_weight *w_a, ld_buf *out_b,
                           const ld_buf *x_b, const ld_weight *w_b, int rows, float eps, ld_error *err);

#else
#define LD_CUDA_BACKEND 0
#endif

#endif /* LD_BACKEND_CUDA_INTERNAL_H */
