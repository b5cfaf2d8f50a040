/* host_tensor.h - views of host tensors (backend.h's ld_host_tensor). */
#ifndef LD_HOST_TENSOR_H
#define LD_HOST_TENSOR_H

#include "backend.h"

/* elements per block and bytes per block along a row of t: plain types 1
 * and the element size, the GGML blocks theirs (ggml's layouts), FP8 1 and
 * 1, FP4 2 and 1 (bytes 0: a storage type not known here) */
void ld_host_block(const ld_host_tensor *t, size_t *elems, size_t *bytes);

/* *out = rows [r0, r0 + n) of matrix t, sharing its bytes (and its scale
 * grid for LD_WQ_F8B / LD_WQ_F4B, whose view must start on a scale block:
 * r0 a multiple of scale_br, else LD_ERR_UNSUPPORTED naming `name`).
 * A range outside the matrix or a rope row order cut inside a head is
 * LD_ERR_USAGE. */
ld_status ld_host_rows(const ld_host_tensor *t, const char *name, int64_t r0, int64_t n, ld_host_tensor *out,
                       ld_error *err);

#endif /* LD_HOST_TENSOR_H */
