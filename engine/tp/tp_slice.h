/* tp_slice.h - the cuts tensor parallelism makes in a bound weight, shared
 * by the dense shard (tp_shard.c) and the DeepSeek one
 * (tp_ds_shard.c), for every storage type the backends take: plain
 * F32/F16/BF16 rows, the GGML blocks (Q4_0 ... Q6_K) and the block-scaled
 * FP8 / FP4 weights (LD_WQ_F8B / LD_WQ_F4B), whose scale grid is cut along.
 *
 *  - rows [r0, r0 + n) (column-parallel): a view of the same bytes;
 *  - columns [c0, c0 + n) of every row (row-parallel, a K-slice): not
 *    contiguous, so a copy owned by an ld_tp_owned (the scale columns too);
 *  - a cut inside a block (a GGML block along the columns; a scale block
 *    either way) is LD_ERR_UNSUPPORTED naming the tensor, its type, the
 *    block and the multiple the split needs.  A cut may end a matrix on a
 *    partial last block.
 */
#ifndef LD_TP_SLICE_H
#define LD_TP_SLICE_H

#include <stddef.h>

#include "engine/models/dense/model.h"

/* the buffers a shard owns, freed together; bytes counts them */
typedef struct ld_tp_owned {
    void **p;
    size_t n, cap, bytes;
} ld_tp_owned;

/* `bytes` (at least one byte allocated) recorded in `o`; NULL when out of
 * memory */
void *ld_tp_own(ld_tp_owned *o, size_t bytes);

void ld_tp_owned_free(ld_tp_owned *o);

/* the tensor's name in its file ("?" when unnamed) into buf */
const char *ld_tp_tensor_name(const ld_model_tensor *t, char *buf, size_t cap);

/* bound (from a safetensors or GGUF file) */
int ld_tp_present(const ld_model_tensor *t);

enum { LD_TP_ROWS = 0, LD_TP_COLS = 1 };

/* Whether the cut [start, start + n) along `axis` of matrix `t` keeps its
 * blocks whole (see above); builds nothing. */
ld_status ld_tp_check_cut(const ld_model_tensor *t, int axis, int64_t start, int64_t n, ld_error *err);

/* `t` becomes its rows [r0, r0 + n): a view (ld_tp_check_cut first). */
ld_status ld_tp_slice_rows(ld_model_tensor *t, int64_t r0, int64_t n, ld_error *err);

/* `t` becomes its columns [c0, c0 + n): copies owned by `o` (ld_tp_check_cut
 * first). */
ld_status ld_tp_slice_cols(ld_tp_owned *o, ld_model_tensor *t, int64_t c0, int64_t n, ld_error *err);

/* `t` (a plain vector: a bias) becomes its elements [c0, c0 + n): a view. */
void ld_tp_slice_vector(ld_model_tensor *t, int64_t c0, int64_t n);

/* *out = the plain vector `t` as fp32, owned by `o` (NULL when `t` is
 * absent). */
ld_status ld_tp_bias_f32(ld_tp_owned *o, const ld_model_tensor *t, float **out, ld_error *err);

#endif /* LD_TP_SLICE_H */
