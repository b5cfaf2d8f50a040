/* regress_lines.c - see regress_lines.h. */
#define _DEFAULT_SOURCE /* MAP_POPULATE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "regress_lines.h"

ld_status ld_cli_lines_next_raw(ld_cli_lines *lr, int *more, ld_error *e)
{
    *more = lr->pos < lr->len;
    if (!*more) return LD_OK;
    const char *start = lr->text + lr->pos;
    const char *nl = memchr(start, '\n', lr->len - lr->pos);
    size_t n = nl ? (size_t)(nl - start) : lr->len - lr->pos;
    lr->line++;
    lr->line_offset = lr->pos;
    lr->pos += n + (nl != NULL);
    lr->raw = start;
    lr->raw_len = n;
    return nl ? LD_OK : LD_FAIL(e, LD_ERR_TRUNCATED, 0, "the last line has no end: the file was cut");
}

ld_status ld_cli_lines_next(ld_cli_lines *lr, cJSON **out, ld_error *e)
{
    int more;
    *out = NULL;
    ld_status st = ld_cli_lines_next_raw(lr, &more, e);
    if (st != LD_OK || !more) return st;
    *out = cJSON_ParseWithLength(lr->raw, lr->raw_len);
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

int ld_cli_map_file(const char *path, char **text, size_t *len)
{
#if defined(MAP_POPULATE)
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    void *m = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size < SIZE_MAX)
        m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (fd >= 0) close(fd);
    if (m == MAP_FAILED) return -1;
    *text = m;
    *len = (size_t)st.st_size;
    return 0;
#else
    (void)path; (void)text; (void)len;
    return -1;
#endif
}

void ld_cli_unmap_file(char *text, size_t len)
{
    if (text) munmap(text, len);
}
