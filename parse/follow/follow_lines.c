/* follow_lines.c - one open file's bytes read and cut into lines.
 *
 * One buffer a file, buf[start, end) the bytes read and not yet delivered
 * (a partial line, usually empty between polls).  Reads of FL_CHUNK append
 * at `end`; every complete line is delivered from the buffer; the partial
 * rest is moved to the front before the next read.  The buffer grows to
 * hold the longest partial line (bounded by max_line: a longer one is
 * skipped) and shrinks back when it is idle.  A regular file is read with
 * pread() at read_pos; a stream (stdin, a FIFO) only when poll() says it is
 * readable, so it never blocks.
 *
 * Ownership: the file owns the buffer; lines borrow it for the hook's call.
 */
#include "follow_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Keeps the first FL_HEAD bytes of the file and the FL_TAIL before
 * read_pos, as read, for the truncation check. */
static void note_samples(fl_file *file, const char *bytes, size_t n)
{
    uint64_t at = file->read_pos;
    if (at < FL_HEAD && at == file->head_len) {
        size_t k = FL_HEAD - (size_t)at < n ? FL_HEAD - (size_t)at : n;
        memcpy(file->head + at, bytes, k);
        file->head_len += k;
    }
    if (n >= FL_TAIL) {
        memcpy(file->tail, bytes + n - FL_TAIL, FL_TAIL);
        file->tail_len = FL_TAIL;
        return;
    }
    size_t keep = file->tail_len < FL_TAIL - n ? file->tail_len : FL_TAIL - n;
    memmove(file->tail, file->tail + file->tail_len - keep, keep);
    memcpy(file->tail + keep, bytes, n);
    file->tail_len = keep + n;
}

static ld_status resize(fl_file *file, size_t cap, ld_error *err)
{
    char *nb = realloc(file->buf, cap);
    if (!nb) return LD_FAIL(err, LD_ERR_NOMEM, file->read_pos, "'%s': line buffer of %zu bytes", file->pub.path, cap);
    file->buf = nb;
    file->cap = cap;
    return LD_OK;
}

/* Moves the held bytes to the front; at least FL_CHUNK free after them. */
static ld_status make_room(fl_file *file, ld_error *err)
{
    if (file->start > 0) {
        size_t keep = file->end - file->start;
        memmove(file->buf, file->buf + file->start, keep);
        file->base += file->start;
        file->scan -= file->start;
        file->end = keep;
        file->start = 0;
    }
    if (file->cap > FL_SHRINK_AT && file->end + FL_CHUNK <= 2 * FL_CHUNK)
        LD_TRY(resize(file, 2 * FL_CHUNK, err));
    if (file->cap - file->end >= FL_CHUNK) return LD_OK;
    size_t grown = file->cap + file->cap / 2;
    if (grown < file->end + FL_CHUNK) grown = file->end + FL_CHUNK;
    if (grown < 2 * FL_CHUNK) grown = 2 * FL_CHUNK;
    return resize(file, grown, err);
}

static ld_status emit(ld_follow *f, fl_file *file, size_t len, int terminated, ld_error *err)
{
    ld_line ln;
    memset(&ln, 0, sizeof ln);
    ln.data = file->buf + file->start;
    ln.offset = file->base + file->start;
    ln.crlf = terminated && len > 0 && ln.data[len - 1] == '\r';
    ln.len = len - (size_t)ln.crlf;
    ln.unterminated = !terminated;
    ln.lineno = ++file->pub.lineno;
    file->start += len + (terminated ? 1 : 0);
    file->scan = file->start;
    file->pub.offset = file->base + file->start;
    return fl_deliver(f, file, &ln, err);
}

/* A line past max_line starting at buf[start]: told, counted, skipped. */
static void too_long(ld_follow *f, fl_file *file)
{
    uint64_t off = file->base + file->start;
    file->pub.lineno++;
    FL_PROBLEM(f, file, LD_ERR_LIMIT, file->pub.path, file->pub.lineno, off,
               "'%s' line %llu: line longer than %zu bytes skipped", file->pub.path,
               (unsigned long long)file->pub.lineno, f->max_line);
}

/* Discards up to the next \n; 1 when it was found (reading lines goes on). */
static int skip(fl_file *file)
{
    const char *nl = memchr(file->buf + file->start, '\n', file->end - file->start);
    if (!nl) {
        file->base += file->end;
        file->start = file->end = file->scan = 0;
        file->pub.offset = file->read_pos;
        return 0;
    }
    file->start = file->scan = (size_t)(nl - file->buf) + 1;
    file->pub.offset = file->base + file->start;
    file->skipping = file->skip_quiet = 0;
    return 1;
}

/* Delivers every complete line held. */
static ld_status split(ld_follow *f, fl_file *file, ld_error *err)
{
    for (;;) {
        if (file->skipping && !skip(file)) return LD_OK;
        const char *nl = file->end > file->scan ? memchr(file->buf + file->scan, '\n', file->end - file->scan) : NULL;
        if (!nl) {
            file->scan = file->end;
            if (file->end - file->start <= f->max_line) return LD_OK;
            too_long(f, file);
            file->skipping = 1;
            continue;
        }
        size_t len = (size_t)(nl - file->buf) - file->start;
        if (len > f->max_line) {
            too_long(f, file);
            file->start = file->scan = (size_t)(nl - file->buf) + 1;
            file->pub.offset = file->base + file->start;
            continue;
        }
        LD_TRY(emit(f, file, len, 1, err));
    }
}

/* One read into buf[end, end + want).  *got: bytes; *eof: the file ended
 * (or the stream closed); *more: another read may give more now. */
static void read_once(ld_follow *f, fl_file *file, size_t want, size_t *got, int *eof, int *more)
{
    *got = 0;
    *eof = *more = 0;
    if (file->stream) {
        struct pollfd p = {.fd = file->fd, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0) return;
    }
    ssize_t n;
    do {
        n = file->stream ? read(file->fd, file->buf + file->end, want)
                         : pread(file->fd, file->buf + file->end, want, (off_t)file->read_pos);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        file->failed = 1;
        FL_PROBLEM(f, file, LD_ERR_IO, file->pub.path, file->pub.lineno + 1, file->read_pos,
                   "cannot read '%s': %s", file->pub.path, strerror(errno));
        return;
    }
    *got = (size_t)n;
    *eof = n == 0 || (!file->stream && (size_t)n < want);
    *more = !*eof;
}

ld_status fl_file_read(ld_follow *f, fl_file *file, uint64_t *out_bytes, int *out_eof, ld_error *err)
{
    *out_bytes = 0;
    *out_eof = 0;
    if (file->buf) LD_TRY(split(f, file, err)); /* lines a refusing hook left */
    int more = 1;
    while (more && *out_bytes < f->max_read && !file->failed) {
        LD_TRY(make_room(file, err));
        size_t want = file->cap - file->end, got;
        if (want > f->max_read - *out_bytes) want = (size_t)(f->max_read - *out_bytes);
        read_once(f, file, want, &got, out_eof, &more);
        if (got) {
            note_samples(file, file->buf + file->end, got);
            file->end += got;
            file->read_pos += got;
            *out_bytes += got;
            LD_TRY(split(f, file, err));
        }
    }
    if (file->buf && file->start == file->end && file->cap > FL_SHRINK_AT) {
        free(file->buf);
        file->buf = NULL;
        file->base = file->read_pos;
        file->cap = file->start = file->end = file->scan = 0;
    }
    return LD_OK;
}

ld_status fl_file_flush(ld_follow *f, fl_file *file, ld_error *err)
{
    if (file->skipping || !file->buf || file->end == file->start) return LD_OK;
    return emit(f, file, file->end - file->start, 0, err);
}
