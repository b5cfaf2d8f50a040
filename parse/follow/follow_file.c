/* follow_file.c - one open file: opened, positioned, checked, closed.
 *
 * Reading and cutting lines is follow_lines.c.  A file's identity is the
 * fstat of its descriptor (what was opened, whatever the path names since).
 *
 * Ownership: an fl_file owns its descriptor (not stdin's), its path and its
 * buffer; fl_file_close frees all of them after the CLOSED event.
 */
#include "follow_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static fl_file *file_new(const char *path, int fd)
{
    fl_file *file = calloc(1, sizeof *file);
    char *p = strdup(path);
    if (!file || !p) {
        free(file);
        free(p);
        return NULL;
    }
    file->pub.path = p;
    file->fd = fd;
    file->last_size = -1;
    return file;
}

ld_status fl_file_open(const char *path, fl_file **out, int *out_errno, ld_error *err)
{
    *out = NULL;
    *out_errno = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        *out_errno = errno;
        if (fd >= 0) close(fd);
        return LD_OK;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        *out_errno = EISDIR;
        return LD_OK;
    }
    fl_file *file = file_new(path, fd);
    if (!file) {
        close(fd);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "'%s': follower file", path);
    }
    file->pub.dev = (uint64_t)st.st_dev;
    file->pub.ino = (uint64_t)st.st_ino;
    file->stream = !S_ISREG(st.st_mode);
    *out = file;
    return LD_OK;
}

ld_status fl_file_stdin(int fd, fl_file **out, ld_error *err)
{
    *out = file_new("-", fd);
    if (!*out) return LD_FAIL(err, LD_ERR_NOMEM, 0, "standard input: follower file");
    (*out)->is_stdin = 1;
    (*out)->stream = 1;
    return LD_OK;
}

/* Reads `n` bytes at `off` into `dst`; 1 when all came. */
static int pread_all(int fd, void *dst, size_t n, uint64_t off)
{
    ssize_t got;
    do {
        got = pread(fd, dst, n, (off_t)off);
    } while (got < 0 && errno == EINTR);
    return got >= 0 && (size_t)got == n;
}

void fl_file_start(fl_file *file, uint64_t offset, uint64_t lineno)
{
    file->base = file->read_pos = file->pub.offset = offset;
    file->pub.lineno = lineno;
    if (file->stream || offset == 0) return;
    /* the samples the truncation check compares, as they are now */
    size_t h = offset < FL_HEAD ? (size_t)offset : FL_HEAD;
    size_t t = offset < FL_TAIL ? (size_t)offset : FL_TAIL;
    file->head_len = pread_all(file->fd, file->head, h, 0) ? h : 0;
    file->tail_len = pread_all(file->fd, file->tail, t, offset - t) ? t : 0;
}

/* from_end: at the start of the last line not finished yet (after the last
 * \n of the last 64 KiB), so no fragment is delivered; when that line began
 * earlier still, at the end, its rest skipped without a problem told. */
void fl_file_start_end(fl_file *file, uint64_t size)
{
    enum { BACK = 64 * 1024 };
    size_t n = size < BACK ? (size_t)size : BACK;
    char *b = n ? malloc(n) : NULL;
    uint64_t at = size;
    int found = n == 0;
    if (b && pread_all(file->fd, b, n, size - n)) {
        size_t i = n;
        while (i > 0 && b[i - 1] != '\n') i--;
        if (i > 0 || n == size) {   /* after the last \n, or the file's start */
            at = size - n + i;
            found = 1;
        }
    }
    free(b);
    fl_file_start(file, at, 0);
    file->skipping = file->skip_quiet = !found;
}

void fl_file_rewind(fl_file *file)
{
    file->base = file->read_pos = file->pub.offset = file->pub.lineno = 0;
    file->start = file->end = file->scan = 0;
    file->skipping = file->skip_quiet = 0;
    file->head_len = file->tail_len = 0;
    file->last_size = -1;
}

int fl_file_samples_match(const fl_file *file)
{
    unsigned char b[FL_HEAD > FL_TAIL ? FL_HEAD : FL_TAIL];
    if (file->head_len && (!pread_all(file->fd, b, file->head_len, 0) || memcmp(b, file->head, file->head_len)))
        return 0;
    if (file->tail_len && (!pread_all(file->fd, b, file->tail_len, file->read_pos - file->tail_len) ||
                           memcmp(b, file->tail, file->tail_len)))
        return 0;
    return 1;
}

void fl_file_close(ld_follow *f, fl_file *file)
{
    if (!file) return;
    ld_error ignored;
    (void)fl_file_flush(f, file, &ignored);
    fl_event(f, LD_FOLLOW_CLOSED, file, "'%s' closed after byte %llu (%llu lines)", file->pub.path,
             (unsigned long long)file->read_pos, (unsigned long long)file->pub.lineno);
    if (!file->is_stdin && file->fd >= 0) close(file->fd);
    free(file->buf);
    free((char *)file->pub.path);
    free(file);
}
