/* tok_decode.c - ids back to bytes: each token's bytes (byte-level decoded
 * where every character is one of the 256, else the token's own UTF-8, as
 * HF's ByteLevel decoder), concatenated with nothing replaced; without a
 * decoder, the tokens as written joined by spaces (HF's default). */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

ld_status ld_tok_decode(const ld_tok *t, const int32_t *ids, size_t n, char **out, size_t *len, ld_error *err)
{
    size_t total = 1;
    *out = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_ids || !t->dec[ids[i]].s)
            return LD_FAIL(err, LD_ERR_USAGE, i, "token id %ld is not in the vocabulary", (long)ids[i]);
        total += t->dec[ids[i]].n + 1;
    }
    char *buf = malloc(total);
    if (!buf) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && t->decoder == LD_TOK_DEC_NONE) buf[o++] = ' ';
        memcpy(buf + o, t->dec[ids[i]].s, t->dec[ids[i]].n);
        o += t->dec[ids[i]].n;
    }
    buf[o] = 0;
    *out = buf;
    *len = o;
    return LD_OK;
}
