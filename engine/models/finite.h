/* finite.h - the checks behind engine.h's ld_lm_eval_checked: rows of a
 * backend buffer, or of host memory, scanned for NaN and infinities; the
 * first one found is LD_ERR_NUMERIC naming where it was computed (the
 * layer, the op, the position).  Every model family's session uses them:
 * the dense decoders after each op, the others (lm.c) on the hidden planes
 * and the logits. */
#ifndef LD_FINITE_H
#define LD_FINITE_H

#include <stddef.h>

#include "engine/backend/backend.h"
#include "ld_error.h"

/* Where the rows checked were computed: decoder layer `layer` of n_layers
 * (-1: the embeddings; n_layers: the head, the final norm and the logits),
 * the op whose output they are (NULL: the layer's output as a whole, the
 * ops within it not checked one by one), the position of the first row. */
typedef struct ld_finite_site {
    int layer, n_layers;
    const char *op;
    int pos0;
} ld_finite_site;

/* Host room for reading a backend buffer back, grown as needed; owned by
 * the session that checks (ld_finite_scratch_free). */
typedef struct ld_finite_scratch {
    float *v;
    size_t cap;
} ld_finite_scratch;

void ld_finite_scratch_free(ld_finite_scratch *s);

/* Rows [0, n) of `width` floats of x (host memory), row r at position
 * at->pos0 + r: LD_OK when every value is finite, else LD_ERR_NUMERIC
 * with the message "non-finite values: first at layer 3, op attn_out (NaN
 * at position 7)" (err->offset the position). */
ld_status ld_finite_check_host(const float *x, int n, size_t width, const ld_finite_site *at, ld_error *err);

/* The same for the n rows of b from float `off` on, read through the
 * backend into `scratch`. */
ld_status ld_finite_check_buf(ld_finite_scratch *scratch, ld_backend *be, const ld_buf *b, size_t off, int n,
                              size_t width, const ld_finite_site *at, ld_error *err);

#endif /* LD_FINITE_H */
