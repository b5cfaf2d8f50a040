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
 *                (k mod 32), fmaf chains in index order, then a fixed
 *                shuffle tree; attention splits the keys at absolute
 *                positions that are multiples of LD_CU_ATT_SPLIT and merges
 *                the splits in order.  So a token's row is computed the
 *                same way alone or in a batch, and prefill, chunks and
 *                token-by-token give the same bits.
 *
 * The .cu files are compiled with --fmad=false: a*b+c is two roundings
 * unless a kernel asks for fmaf.  Every launcher checks its launch
 * (cudaGetLastError) and returns the CUDA error code (0 = success); the
 * kernels run asynchronously on the legacy default stream, so a fault while
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

#include "ref_ops.h" /* ld_kdt */

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
int ld_cu_h2d(void *dst, const void *src, size_t bytes);
int ld_cu_d2h(void *dst, const void *src, size_t bytes);
int ld_cu_d2d(void *dst, const void *src, size_t bytes);
/* waits for all work on the device, returns its first error */
int ld_cu_sync(void);

/* ---------------------------------------------------------------- ops
 * Shapes and types as in ref_ops.h; all pointers are device pointers. */

/* bytes of one row of `cols` values of type dt (cols a whole number of
 * blocks for the block types) */
size_t ld_cu_row_bytes(ld_kdt dt, int64_t cols);

/* out[t][0..dim) = table[tokens[t]], t < T */
int ld_cu_embed(int v, float *out, const void *table, ld_kdt dt, int dim, const int32_t *tokens, int T);

/* out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, rows r < rows; out may be x */
int ld_cu_rmsnorm(int v, float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps, int rows);

/* out[t][n] = x[t] . w[rope_row(n)] (+ bias[n]), w [N][K] of type dt,
 * bias NULL or N values of bias_dt (F32/F16/BF16); see ld_ref_matmul_ex */
int ld_cu_matmul(int v, float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                 int T, int K, int N, int rope_hd);

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

#ifdef __cplusplus
}
#endif

#endif /* LD_CUDA_OPS_H */
