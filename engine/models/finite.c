/* finite.c - see finite.h. */
#include "finite.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ld_finite_scratch_free(ld_finite_scratch *s)
{
    free(s->v);
    s->v = NULL;
    s->cap = 0;
}

/* "layer 3, op attn_out", "the embeddings, op embed", "layer 3's output" */
static void site_name(const ld_finite_site *at, char *buf, size_t cap)
{
    if (at->layer < 0) snprintf(buf, cap, "the embeddings");
    else if (at->layer >= at->n_layers) snprintf(buf, cap, "the head");
    else snprintf(buf, cap, "layer %d", at->layer);
    size_t k = strlen(buf);
    if (at->op) snprintf(buf + k, cap - k, ", op %s", at->op);
    else snprintf(buf + k, cap - k, "'s output");
}

ld_status ld_finite_check_host(const float *x, int n, size_t width, const ld_finite_site *at, ld_error *err)
{
    size_t total = (size_t)(n > 0 ? n : 0) * width;
    for (size_t i = 0; i < total; i++) {
        if (isfinite(x[i])) continue;
        char where[96];
        site_name(at, where, sizeof where);
        int64_t pos = (int64_t)at->pos0 + (int64_t)(i / width);
        return LD_FAIL(err, LD_ERR_NUMERIC, (uint64_t)pos, "non-finite values: first at %s (%s at position %lld)",
                       where, isnan(x[i]) ? "NaN" : x[i] > 0 ? "+inf" : "-inf", (long long)pos);
    }
    return LD_OK;
}

ld_status ld_finite_check_buf(ld_finite_scratch *scratch, ld_backend *be, const ld_buf *b, size_t off, int n,
                              size_t width, const ld_finite_site *at, ld_error *err)
{
    size_t total = (size_t)(n > 0 ? n : 0) * width;
    if (!total) return LD_OK;
    if (total > scratch->cap) {
        float *v = realloc(scratch->v, total * sizeof *v);
        if (!v) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        scratch->v = v;
        scratch->cap = total;
    }
    LD_TRY(be->ops->buf_read(be, b, off, scratch->v, total, err));
    return ld_finite_check_host(scratch->v, n, width, at, err);
}
