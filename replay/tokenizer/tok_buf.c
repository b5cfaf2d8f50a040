/* tok_buf.c - the growing byte and id arrays every step of the tokenizer
 * writes into (tok_internal.h's tok_buf, tok_ids).  A leaf. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

ld_status ld_tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (extra <= b->cap - b->n) return LD_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < extra) {
        if (cap > SIZE_MAX / 2) return LD_ERR_NOMEM;
        cap *= 2;
    }
    char *v = realloc(b->v, cap);
    if (!v) return LD_ERR_NOMEM;
    b->v = v;
    b->cap = cap;
    return LD_OK;
}

ld_status ld_tok_buf_append(tok_buf *b, const char *s, size_t n)
{
    if (n == 0) return LD_OK;
    LD_TRY(ld_tok_buf_reserve(b, n));
    memcpy(b->v + b->n, s, n);
    b->n += n;
    return LD_OK;
}

ld_status ld_tok_ids_append(tok_ids *a, const int32_t *v, size_t n)
{
    if (n > a->cap - a->n) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap - a->n < n) {
            if (cap > SIZE_MAX / 8) return LD_ERR_NOMEM;
            cap *= 2;
        }
        int32_t *nv = realloc(a->v, cap * sizeof *nv);
        if (!nv) return LD_ERR_NOMEM;
        a->v = nv;
        a->cap = cap;
    }
    if (n) memcpy(a->v + a->n, v, n * sizeof *v);
    a->n += n;
    return LD_OK;
}

ld_status ld_tok_ids_push(tok_ids *a, int32_t id) { return ld_tok_ids_append(a, &id, 1); }
