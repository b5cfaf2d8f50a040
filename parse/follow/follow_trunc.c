/* follow_trunc.c - copytruncate noticed on an open file.
 *
 * Truncated: the file (same identity) is shorter than what was read, or,
 * once its size or mtime changed since the last check, its first bytes or
 * the bytes just before the read position are not what was read there (it
 * was truncated and written past the old position between two polls).  The
 * samples are compared only when the file changed: one fstat a poll, two
 * small preads when it grew.  The window left is in follow.h.
 */
#include "follow_internal.h"

#include <sys/stat.h>

static int changed(fl_file *file, const struct stat *st)
{
    int c = st->st_size != file->last_size || st->st_mtim.tv_sec != file->last_mtime.tv_sec ||
            st->st_mtim.tv_nsec != file->last_mtime.tv_nsec;
    file->last_size = st->st_size;
    file->last_mtime = st->st_mtim;
    return c;
}

ld_status fl_trunc_check(ld_follow *f, fl_file *file, ld_error *err)
{
    struct stat st;
    if (file->stream || fstat(file->fd, &st) != 0) return LD_OK;
    int shorter = (uint64_t)st.st_size < file->read_pos;
    if (!changed(file, &st) || (!shorter && fl_file_samples_match(file))) return LD_OK;
    ld_status s = fl_file_flush(f, file, err);
    uint64_t was = file->read_pos;
    fl_file_rewind(file);
    fl_event(f, LD_FOLLOW_TRUNCATED, file, "'%s' was truncated (%lld bytes now, %llu read%s): reading it again from the start",
             file->pub.path, (long long)st.st_size, (unsigned long long)was,
             shorter ? "" : ", and written again since");
    return s;
}
