/* slurp.c - whole small files into memory (slurp.h). */
#include "slurp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

ld_status ld_slurp_stream(FILE *f, char **out, size_t *len, ld_error *err)
{
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - 1 - n, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory reading a file");
    if (ferror(f)) {
        free(b);
        return LD_FAIL(err, LD_ERR_IO, n, "read error: %s", strerror(errno));
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return LD_OK;
}

ld_status ld_slurp_file(const char *path, char **out, size_t *len, ld_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return LD_FAIL(err, LD_ERR_IO, 0, "cannot open '%s': %s", path, strerror(errno));
    ld_status st = ld_slurp_stream(f, out, len, err);
    fclose(f);
    if (st == LD_ERR_IO) LD_FAIL(err, LD_ERR_IO, err ? err->offset : 0, "cannot read '%s'", path);
    return st;
}
