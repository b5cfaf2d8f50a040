/* model_internal.h - what the weight loaders (model.c for safetensors,
 * model_gguf.c for GGUF, ds_model.c) share. */
#ifndef LD_MODEL_INTERNAL_H
#define LD_MODEL_INTERNAL_H

#include <stdint.h>

#include "ld_error.h"
#include "model.h"

/* Checks tensor `name` against the shape the config implies: [rows, cols],
 * or a vector of `cols` when rows == 0.  `shape` (row-major, `n_dims`
 * dims) is NULL when the file has no such tensor.  LD_ERR_MISMATCH naming the
 * tensor, the shape found and the one expected; err->offset = `offset`. */
ld_status ld_model_check_shape(const char *name, const uint64_t *shape, int n_dims, int64_t rows,
                               int64_t cols, uint64_t offset, ld_error *err);

/* Binds FP8 weight `t` (`name`, [rows, cols], dtype F8_E4M3) as
 * LD_WQ_F8B: its bytes and its `<name>_scale_inv` (F32
 * [ceil(rows / br), ceil(cols / bc)], 4-byte aligned) read in place from
 * the mapping of `st`, nothing copied.  A missing or misshapen scale
 * tensor is LD_ERR_MISMATCH naming it; another dtype or a misaligned one
 * LD_ERR_UNSUPPORTED. */
ld_status ld_model_bind_f8b(const ld_safetensors *st, int br, int bc, ld_model_tensor *mt, const ld_st_tensor *t,
                            const char *name, int64_t rows, int64_t cols, ld_error *err);

#endif
