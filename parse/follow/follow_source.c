/* follow_source.c - a source's list of open files, and opening one into it.
 *
 * Ownership: the source owns the files in its list; closing one removes it.
 */
#include "follow_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

ld_status fl_source_reserve(fl_source *s, ld_error *err)
{
    if (s->nfiles == s->capfiles) {
        size_t c = s->capfiles ? 2 * s->capfiles : 4;
        fl_file **nf = realloc(s->files, c * sizeof *nf);
        if (!nf) return LD_FAIL(err, LD_ERR_NOMEM, 0, "'%s': follower file list", s->name);
        s->files = nf;
        s->capfiles = c;
    }
    return LD_OK;
}

void fl_source_close_file(ld_follow *f, fl_source *s, size_t i)
{
    fl_file *file = s->files[i];
    memmove(s->files + i, s->files + i + 1, (s->nfiles - i - 1) * sizeof *s->files);
    s->nfiles--;
    fl_file_close(f, file);
}

int fl_source_has(const fl_source *s, uint64_t dev, uint64_t ino)
{
    for (size_t i = 0; i < s->nfiles; i++)
        if (s->files[i]->pub.dev == dev && s->files[i]->pub.ino == ino) return 1;
    return 0;
}

/* Where a file of identity (dev, ino) starts: at `hint` when it is that
 * file's (a saved state, or its size when added with from_end), else 0. */
static void position(fl_file *file, const fl_hint *hint)
{
    if (!hint || hint->dev != file->pub.dev || hint->ino != file->pub.ino)
        fl_file_start(file, 0, 0);
    else if (hint->resume)
        fl_file_start(file, hint->offset, hint->lineno);
    else
        fl_file_start_end(file, hint->offset);
}

ld_status fl_source_open(ld_follow *f, fl_source *s, const char *path, const fl_hint *hint, fl_file **out,
                         ld_error *err)
{
    int e;
    *out = NULL;
    LD_TRY(fl_source_reserve(s, err)); /* first: once opened, the file is told OPENED */
    LD_TRY(fl_file_open(path, out, &e, err));
    if (!*out) {
        if (e != ENOENT && e != s->said_errno)
            FL_PROBLEM(f, NULL, LD_ERR_IO, path, 0, 0, "cannot open '%s': %s", path, strerror(e));
        if (e != ENOENT) s->said_errno = e;
        return LD_OK;
    }
    s->said_errno = 0;
    fl_file *file = *out;
    s->files[s->nfiles++] = file;
    position(file, hint);
    fl_event(f, LD_FOLLOW_OPENED, file, "'%s' opened at byte %llu (after line %llu)", path,
             (unsigned long long)file->pub.offset, (unsigned long long)file->pub.lineno);
    return fl_trunc_check(f, file, err);
}
