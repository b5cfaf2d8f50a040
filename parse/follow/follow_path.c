/* follow_path.c - a file path followed: rotation, deletion, a file that
 * appears later, a saved state resumed.
 *
 * The source's files are read in order: all but the last are draining (a
 * rotated file read to its end, a saved file found beside the path); the
 * last is the file the path names, or draining too.  The path is opened
 * again only once nothing is left to drain, so lines keep the order the
 * writer wrote them in.  A file whose read failed stays open, unread, until
 * the path moves away from it (holding it keeps its identity from being
 * given to another file); a path that names a file again after it was
 * closed is read from 0, as a new file.
 */
#include "follow_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int same(const fl_hint *h, uint64_t dev, uint64_t ino)
{
    return h->dev == dev && h->ino == ino;
}

/* A saved file the path no longer names: looked for by identity beside the
 * path (x.log.1) and read from its offset first; PROBLEM when it is gone. */
static ld_status open_sibling(ld_follow *f, fl_source *s, const fl_hint *h, ld_error *err)
{
    char *dir = fl_path_dir(s->name);
    fl_entry *e = NULL;
    size_t n = 0;
    int rc = dir ? fl_list_dir(dir, &e, &n) : ENOMEM;
    free(dir);
    if (rc == ENOMEM) return LD_FAIL(err, LD_ERR_NOMEM, 0, "'%s': directory listing", s->name);
    fl_file *file = NULL;
    ld_status st = LD_OK;
    for (size_t i = 0; i < n && !file; i++)
        if (e[i].regular && same(h, e[i].dev, e[i].ino)) st = fl_source_open(f, s, e[i].path, h, &file, err);
    fl_list_free(e, n);
    if (file) file->draining = 1;
    else if (st == LD_OK)
        FL_PROBLEM(f, NULL, LD_ERR_IO, s->name, h->lineno, h->offset,
                   "'%s': the file read before (device %llu, inode %llu) is neither there nor beside it: "
                   "what it got after byte %llu (line %llu) is lost; reading '%s' from its start",
                   s->name, (unsigned long long)h->dev, (unsigned long long)h->ino,
                   (unsigned long long)h->offset, (unsigned long long)h->lineno, s->name);
    return st;
}

/* The first poll: each saved state is the path's file (kept for when it
 * is opened) or a sibling (opened now, draining); a path not there yet is
 * told once. */
static ld_status first_poll(ld_follow *f, fl_source *s, ld_error *err)
{
    struct stat st;
    int exists = stat(s->name, &st) == 0, e = errno;
    for (size_t i = 0; i < s->nhints; i++) {
        fl_hint *h = &s->hints[i];
        if (exists && same(h, (uint64_t)st.st_dev, (uint64_t)st.st_ino)) {
            s->cur_hint = *h;
            s->has_cur_hint = 1;
        } else if (h->resume) {
            LD_TRY(open_sibling(f, s, h, err));
        }
    }
    if (!exists && (e == ENOENT || e == ENOTDIR))
        fl_event(f, LD_FOLLOW_NOTE, NULL, "'%s' does not exist (yet): waiting for it", s->name);
    return LD_OK;
}

/* Has the path moved away from the file open under it? */
static void check_rotation(ld_follow *f, fl_source *s, fl_file *cur)
{
    struct stat st;
    if (stat(s->name, &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) return; /* cannot tell: go on reading */
        cur->draining = 1;
        fl_event(f, LD_FOLLOW_GONE, cur, "'%s' no longer exists: reading what is open to its end", s->name);
    } else if ((uint64_t)st.st_dev != cur->pub.dev || (uint64_t)st.st_ino != cur->pub.ino) {
        cur->draining = 1;
        fl_event(f, LD_FOLLOW_ROTATED, cur, "'%s' names a new file: reading the old one to its end first", s->name);
    }
}

/* A draining file at its end (or failed): its partial line, CLOSED. */
static ld_status finish(ld_follow *f, fl_source *s, size_t i, ld_error *err)
{
    fl_file *file = s->files[i];
    ld_status st = fl_file_flush(f, file, err);
    fl_source_close_file(f, s, i);
    return st;
}

/* Reads the files in order; a draining one that is not at its end yet
 * holds back the ones after it. */
static ld_status read_files(ld_follow *f, fl_source *s, uint64_t *out_bytes, ld_error *err)
{
    for (size_t i = 0; i < s->nfiles;) {
        fl_file *file = s->files[i];
        uint64_t got;
        int eof;
        ld_status st = fl_file_read(f, file, &got, &eof, err);
        *out_bytes += got;
        if (st != LD_OK) return st;
        if (!file->draining) { /* the path's file (one that failed stays, unread, till the path moves) */
            i++;
            continue;
        }
        if (!eof && !file->failed) return LD_OK;
        LD_TRY(finish(f, s, i, err));
    }
    return LD_OK;
}

/* Nothing open: the file the path names now, if any. */
static ld_status open_path(ld_follow *f, fl_source *s, fl_file **out, ld_error *err)
{
    struct stat st;
    *out = NULL;
    if (stat(s->name, &st) != 0) return LD_OK;
    fl_hint hint = s->cur_hint;
    int has = s->has_cur_hint && same(&hint, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
    s->has_cur_hint = 0; /* the first file opened only: any later one is new */
    return fl_source_open(f, s, s->name, has ? &hint : NULL, out, err);
}

ld_status fl_path_poll(ld_follow *f, fl_source *s, uint64_t *out_bytes, ld_error *err)
{
    *out_bytes = 0;
    if (!s->started) {
        s->started = 1;
        LD_TRY(first_poll(f, s, err));
    }
    fl_file *cur = s->nfiles ? s->files[s->nfiles - 1] : NULL;
    if (cur && !cur->draining) {
        check_rotation(f, s, cur);
        if (!cur->draining) LD_TRY(fl_trunc_check(f, cur, err));
    }
    LD_TRY(read_files(f, s, out_bytes, err));
    if (s->nfiles) return LD_OK;
    LD_TRY(open_path(f, s, &cur, err));
    return cur ? read_files(f, s, out_bytes, err) : LD_OK;
}
