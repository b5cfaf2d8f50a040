/* regress_lines.c - see regress_lines.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regress_lines.h"

ld_status ld_cli_lines_next(ld_cli_lines *lr, cJSON **out, ld_error *e)
{
    *out = NULL;
    if (lr->pos >= lr->len) return LD_OK;
    const char *start = lr->text + lr->pos;
    const char *nl = memchr(start, '\n', lr->len - lr->pos);
    size_t n = nl ? (size_t)(nl - start) : lr->len - lr->pos;
    lr->line++;
    lr->line_offset = lr->pos;
    lr->pos += n + (nl != NULL);
    lr->raw = start;
    lr->raw_len = n;
    if (!nl) return LD_FAIL(e, LD_ERR_TRUNCATED, 0, "the last line has no end: the file was cut");
    *out = cJSON_ParseWithLength(start, n);
    return *out ? LD_OK : LD_FAIL(e, LD_ERR_SYNTAX, 0, "not a JSON line");
}

char *ld_cli_first_line(const char *path, size_t *len, ld_error *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) { LD_FAIL(e, LD_ERR_IO, 0, "cannot open it: %s", strerror(errno)); return NULL; }
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getline(&buf, &cap, f);
    int bad = n < 0 && ferror(f);
    fclose(f);
    if (n < 0) {
        free(buf);
        LD_FAIL(e, bad ? LD_ERR_IO : LD_ERR_SYNTAX, 0, bad ? "cannot read it" : "an empty file");
        return NULL;
    }
    *len = (size_t)n;
    return buf;
}

