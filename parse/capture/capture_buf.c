/* capture_buf.c - the buffer a record is decoded into, grown as records
 * need (every wrapper's parser shares it; a file of its own so that none of
 * them depends on another for it). */
#include <stdlib.h>

#include "capture_internal.h"

ld_status ld_capture_reserve(size_t n, char **buf, size_t *cap, ld_error *err)
{
    if (n <= *cap) return LD_OK;
    size_t c = *cap ? *cap : 4096;
    while (c < n) c *= 2;
    char *b = realloc(*buf, c);
    if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a record of %zu bytes", n);
    *buf = b;
    *cap = c;
    return LD_OK;
}
