/* follow_dir.c - a directory followed: every regular, non-hidden file in
 * it, now and later, each by its identity.
 *
 * Every poll lists the directory.  A file still listed under any name (a
 * rotation renaming x.log to x.log.1) goes on being read where it was; one
 * no longer listed is GONE (read to its end, closed); an identity not open
 * yet is a new file, opened from 0 (or at a saved state's offset).
 * Compressed files are left out (said once).  Files are read in the order
 * they were opened, each with its own budget.
 */
#include "follow_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int listed(const fl_entry *e, size_t n, uint64_t dev, uint64_t ino)
{
    for (size_t i = 0; i < n; i++)
        if (e[i].dev == dev && e[i].ino == ino) return 1;
    return 0;
}

static fl_hint *hint_for(fl_source *s, uint64_t dev, uint64_t ino)
{
    for (size_t i = 0; i < s->nhints; i++)
        if (!s->hints[i].used && s->hints[i].dev == dev && s->hints[i].ino == ino) return &s->hints[i];
    return NULL;
}

ld_status fl_dir_snapshot(fl_source *s, ld_error *err)
{
    fl_entry *e;
    size_t n;
    int rc = fl_list_dir(s->name, &e, &n);
    if (rc == ENOMEM) return LD_FAIL(err, LD_ERR_NOMEM, 0, "'%s': directory listing", s->name);
    fl_hint *h = n ? calloc(n, sizeof *h) : NULL;
    if (n && !h) {
        fl_list_free(e, n);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "'%s': directory listing", s->name);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].regular) h[k++] = (fl_hint){.dev = e[i].dev, .ino = e[i].ino, .offset = e[i].size};
    fl_list_free(e, n);
    free(s->hints);
    s->hints = h;
    s->nhints = k;
    return LD_OK;
}

/* The open files no longer listed are GONE; the others checked for
 * truncation. */
static ld_status check_files(ld_follow *f, fl_source *s, const fl_entry *e, size_t n, ld_error *err)
{
    for (size_t i = 0; i < s->nfiles; i++) {
        fl_file *file = s->files[i];
        if (file->draining) continue;
        if (!listed(e, n, file->pub.dev, file->pub.ino)) {
            file->draining = 1;
            fl_event(f, LD_FOLLOW_GONE, file, "'%s' is no longer in '%s': reading what is open to its end",
                     file->pub.path, s->name);
            continue;
        }
        LD_TRY(fl_trunc_check(f, file, err));
    }
    return LD_OK;
}

/* Opens the listed files not followed yet. */
static ld_status open_new(ld_follow *f, fl_source *s, const fl_entry *e, size_t n, ld_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const fl_entry *x = &e[i];
        if (!x->regular || x->name[0] == '.' || fl_source_has(s, x->dev, x->ino)) continue;
        if (fl_name_compressed(x->name)) {
            if (!s->said_compressed)
                fl_event(f, LD_FOLLOW_NOTE, NULL,
                         "'%s': compressed files (as '%s') are not followed; read them with logdiff scan",
                         s->name, x->path);
            s->said_compressed = 1;
            continue;
        }
        fl_hint *h = hint_for(s, x->dev, x->ino);
        fl_file *file;
        LD_TRY(fl_source_open(f, s, x->path, h, &file, err));
        if (file && h && h->dev == file->pub.dev && h->ino == file->pub.ino) h->used = 1;
    }
    return LD_OK;
}

/* Saved states whose file was not found in the directory. */
static void tell_unused(ld_follow *f, fl_source *s)
{
    for (size_t i = 0; i < s->nhints; i++) {
        const fl_hint *h = &s->hints[i];
        if (h->used || !h->resume) continue;
        FL_PROBLEM(f, NULL, LD_ERR_IO, s->name, h->lineno, h->offset,
                   "'%s': the file read before (device %llu, inode %llu) is no longer there: "
                   "what it got after byte %llu (line %llu) is lost",
                   s->name, (unsigned long long)h->dev, (unsigned long long)h->ino,
                   (unsigned long long)h->offset, (unsigned long long)h->lineno);
    }
    free(s->hints);
    s->hints = NULL;
    s->nhints = 0;
}

/* Every file read, each with its own budget; a draining one closed at its
 * end (a failed one at once; until it leaves the directory it stays open,
 * unread, so that it is not opened again). */
static ld_status read_files(ld_follow *f, fl_source *s, uint64_t *out_bytes, ld_error *err)
{
    for (size_t i = 0; i < s->nfiles;) {
        fl_file *file = s->files[i];
        uint64_t got;
        int eof;
        ld_status st = fl_file_read(f, file, &got, &eof, err);
        *out_bytes += got;
        if (st != LD_OK) return st;
        if (!file->draining || (!eof && !file->failed)) {
            i++;
            continue;
        }
        st = fl_file_flush(f, file, err);
        fl_source_close_file(f, s, i);
        if (st != LD_OK) return st;
    }
    return LD_OK;
}

ld_status fl_dir_poll(ld_follow *f, fl_source *s, uint64_t *out_bytes, ld_error *err)
{
    *out_bytes = 0;
    fl_entry *e = NULL;
    size_t n = 0;
    int rc = fl_list_dir(s->name, &e, &n);
    if (rc == ENOMEM) return LD_FAIL(err, LD_ERR_NOMEM, 0, "'%s': directory listing", s->name);
    ld_status st = LD_OK;
    if (rc == 0 || rc == ENOENT || rc == ENOTDIR) { /* a directory gone: so are its files */
        st = check_files(f, s, e, n, err);
        if (st == LD_OK) st = open_new(f, s, e, n, err);
        if (rc == 0) s->said_errno = 0;
    } else if (rc != s->said_errno) {
        FL_PROBLEM(f, NULL, LD_ERR_IO, s->name, 0, 0, "cannot list '%s': %s", s->name, strerror(rc));
        s->said_errno = rc;
    }
    fl_list_free(e, n);
    LD_TRY(st);
    if (!s->started && rc == 0) { /* saved states looked for once the directory could be listed */
        s->started = 1;
        tell_unused(f, s);
    }
    return read_files(f, s, out_bytes, err);
}
