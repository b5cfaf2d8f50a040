/* metrics_textfile.c - ld_metrics_write_textfile (metrics.h): the render
 * written beside its path and renamed over it. */
#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes all n bytes of s to fd; 0, or -1 with errno. */
static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsync of path's directory, so that the rename itself is durable; best
 * effort (some file systems refuse fsync on a directory). */
static void sync_directory(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

/* text into the temporary file fd (closed here), made readable by the
 * collector; 0, or -1 with errno and what failed in *what. */
static int fill_temporary(int fd, const char *text, size_t len, const char **what)
{
    int rc = 0;
    if (fchmod(fd, 0644) != 0) { *what = "chmod"; rc = -1; }
    if (rc == 0 && write_all(fd, text, len) != 0) { *what = "write"; rc = -1; }
    if (rc == 0 && fsync(fd) != 0) { *what = "fsync"; rc = -1; }
    int saved = errno;
    if (close(fd) != 0 && rc == 0) { *what = "close"; rc = -1; saved = errno; }
    errno = saved;
    return rc;
}

int ld_metrics_write_textfile(ld_metrics *m, const char *path, double now, ld_error *err)
{
    size_t len = 0;
    char *text = ld_metrics_render(m, now, &len);
    size_t n = strlen(path) + 8;
    char *tmp = text ? malloc(n) : NULL;
    if (!tmp) {
        free(text);
        LD_FAIL(err, LD_ERR_NOMEM, 0, "cannot write metrics to '%s': out of memory", path);
        return -1;
    }
    snprintf(tmp, n, "%s.XXXXXX", path);
    const char *what = "creating a temporary file beside it";
    int fd = mkstemp(tmp);
    int rc = fd >= 0 ? fill_temporary(fd, text, len, &what) : -1;
    if (rc == 0 && rename(tmp, path) != 0) { what = "rename"; rc = -1; }
    int saved = errno;
    if (rc != 0 && fd >= 0) unlink(tmp);
    if (rc == 0) sync_directory(path);
    if (rc != 0)
        LD_FAIL(err, LD_ERR_IO, 0, "cannot write metrics to '%s': %s: %s", path, what,
                strerror(saved));
    free(tmp);
    free(text);
    return rc;
}
