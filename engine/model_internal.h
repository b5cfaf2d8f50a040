/* model_internal.h - what the two weight loaders (model.c for safetensors,
 * model_gguf.c for GGUF) share. */
#ifndef LD_MODEL_INTERNAL_H
#define LD_MODEL_INTERNAL_H

#include <stdint.h>

#include "ld_error.h"

/* Checks tensor `name` against the shape the config implies: [rows, cols],
 * or a vector of `cols` when rows == 0.  `shape` (row-major, `n_dims`
 * dims) is NULL when the file has no such tensor.  LD_ERR_MISMATCH naming the
 * tensor, the shape found and the one expected; err->offset = `offset`. */
ld_status ld_model_check_shape(const char *name, const uint64_t *shape, int n_dims, int64_t rows,
                               int64_t cols, uint64_t offset, ld_error *err);

#endif
