/* outfile.c - see outfile.h. */
#define _POSIX_C_SOURCE 200809L
#include "outfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when path is absent or a regular file that is not a symbolic link. */
static int replaceable(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT;
    return S_ISREG(st.st_mode);
}

/* Runs fn into f and closes f; -1 (errno set) on any failure. */
static int fill(FILE *f, int (*fn)(const void *, FILE *), const void *ctx)
{
    int rc = fn(ctx, f);
    int saved = errno;
    if (ferror(f) && rc == 0) rc = -1;
    if (fflush(f) != 0) { rc = -1; saved = errno; }
    if (fclose(f) != 0 && rc == 0) { rc = -1; saved = errno; }
    errno = saved;
    return rc;
}

static int write_in_place(const char *path, int (*fn)(const void *, FILE *), const void *ctx)
{
    FILE *f = fopen(path, "wb");
    return f ? fill(f, fn, ctx) : -1;
}

/* The mode the replaced file had, else what fopen would have given a new
 * one (mkstemp makes 0600). */
static mode_t mode_for(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) return st.st_mode & 07777;
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* A temporary file in path's directory, renamed over path when complete. */
static int write_replacing(const char *path, int (*fn)(const void *, FILE *), const void *ctx)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp) { errno = ENOMEM; return -1; }
    snprintf(tmp, n, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f) close(fd);
    int rc = f ? fill(f, fn, ctx) : -1;
    if (rc == 0 && chmod(tmp, mode_for(path)) != 0) rc = -1;
    if (rc == 0 && rename(tmp, path) != 0) rc = -1;
    int saved = errno;
    if (rc != 0 && fd >= 0) remove(tmp);
    free(tmp);
    errno = saved;
    return rc;
}

int ld_cli_write_output(const char *cmd, const char *path, int (*fn)(const void *ctx, FILE *f),
                        const void *ctx, FILE *err)
{
    errno = 0;
    int rc = replaceable(path) ? write_replacing(path, fn, ctx) : write_in_place(path, fn, ctx);
    if (rc != 0)
        fprintf(err, "logdiff %s: cannot write %s: %s\n", cmd, path,
                errno ? strerror(errno) : "the report could not be written");
    return rc;
}
