/* follow.c - the follower's lifecycle: sources added, every source polled
 * in turn, open files listed for a saved state, everything closed.
 *
 * What each kind of source does is its own file (follow_path.c,
 * follow_dir.c, follow_stdin.c); the semantics are in follow.h.
 *
 * Ownership: the follower owns its sources (added in order, polled in that
 * order) and, through them, every open file.
 */
#include "follow_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

ld_status ld_follow_new(const ld_follow_options *opts, const ld_follow_hooks *hooks, ld_follow **out,
                        ld_error *err)
{
    *out = NULL;
    ld_follow *f = calloc(1, sizeof *f);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "follower");
    if (hooks) f->hooks = *hooks;
    f->max_line = opts && opts->max_line ? opts->max_line : FL_DEFAULT_MAX_LINE;
    f->max_read = FL_DEFAULT_MAX_READ;
    f->from_end = opts ? opts->from_end : 0;
    f->stdin_fd = 0;
    *out = f;
    return LD_OK;
}

void ld_follow_set_max_read(ld_follow *f, size_t max_read)
{
    f->max_read = max_read ? max_read : FL_DEFAULT_MAX_READ;
}

void ld_follow_set_stdin_fd(ld_follow *f, int fd)
{
    f->stdin_fd = fd;
}

static fl_source *find(const ld_follow *f, const char *name)
{
    for (size_t i = 0; i < f->nsrc; i++)
        if (strcmp(f->src[i]->name, name) == 0) return f->src[i];
    return NULL;
}

/* A saved state for s; it replaces a from_end size of the same file. */
static ld_status add_hint(fl_source *s, const fl_hint *h, ld_error *err)
{
    for (size_t i = 0; i < s->nhints; i++)
        if (!s->hints[i].resume && s->hints[i].dev == h->dev && s->hints[i].ino == h->ino) {
            s->hints[i] = *h;
            return LD_OK;
        }
    fl_hint *nh = realloc(s->hints, (s->nhints + 1) * sizeof *nh);
    if (!nh) return LD_FAIL(err, LD_ERR_NOMEM, 0, "'%s': saved state", s->name);
    s->hints = nh;
    s->hints[s->nhints++] = *h;
    return LD_OK;
}

/* from_end: where each file there now starts (its size now). */
static ld_status snapshot(fl_source *s, ld_error *err)
{
    struct stat st;
    if (s->kind == FL_DIR) return fl_dir_snapshot(s, err);
    if (s->kind != FL_PATH || stat(s->name, &st) != 0 || !S_ISREG(st.st_mode)) return LD_OK;
    fl_hint h = {.dev = (uint64_t)st.st_dev, .ino = (uint64_t)st.st_ino, .offset = (uint64_t)st.st_size};
    return add_hint(s, &h, err);
}

static ld_status new_source(ld_follow *f, const char *name, fl_source **out, ld_error *err)
{
    struct stat st;
    fl_source *s = calloc(1, sizeof *s);
    fl_source **ns = realloc(f->src, (f->nsrc + 1) * sizeof *ns);
    if (ns) f->src = ns;
    if (!s || !ns || !(s->name = strdup(name))) {
        free(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "'%s': follower source", name);
    }
    s->kind = strcmp(name, "-") == 0 ? FL_STDIN : stat(name, &st) == 0 && S_ISDIR(st.st_mode) ? FL_DIR : FL_PATH;
    f->src[f->nsrc++] = s;
    *out = s;
    return LD_OK;
}

static ld_status add(ld_follow *f, const char *source, const fl_hint *h, ld_error *err)
{
    if (!source || !*source) return LD_FAIL(err, LD_ERR_USAGE, 0, "an empty name cannot be followed");
    fl_source *s = find(f, source);
    if (s && (!h || s->started || s->kind == FL_STDIN))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s' is followed already", source);
    if (!s) {
        LD_TRY(new_source(f, source, &s, err));
        if (f->from_end) LD_TRY(snapshot(s, err));
    }
    return h ? add_hint(s, h, err) : LD_OK;
}

ld_status ld_follow_add(ld_follow *f, const char *source, ld_error *err)
{
    return add(f, source, NULL, err);
}

ld_status ld_follow_add_at(ld_follow *f, const char *source, uint64_t dev, uint64_t ino, uint64_t offset,
                           uint64_t lineno, ld_error *err)
{
    fl_hint h = {.dev = dev, .ino = ino, .offset = offset, .lineno = lineno, .resume = 1};
    if (source && strcmp(source, "-") == 0) return add(f, source, NULL, err); /* a pipe cannot be resumed */
    return add(f, source, &h, err);
}

ld_status ld_follow_poll(ld_follow *f, uint64_t *out_bytes, ld_error *err)
{
    *out_bytes = 0;
    for (size_t i = 0; i < f->nsrc; i++) {
        fl_source *s = f->src[i];
        uint64_t got = 0;
        ld_status st = s->kind == FL_PATH  ? fl_path_poll(f, s, &got, err)
                       : s->kind == FL_DIR ? fl_dir_poll(f, s, &got, err)
                                           : fl_stdin_poll(f, s, &got, err);
        *out_bytes += got;
        if (st != LD_OK) return st;
    }
    return LD_OK;
}

int ld_follow_live(const ld_follow *f)
{
    for (size_t i = 0; i < f->nsrc; i++)
        if (f->src[i]->kind != FL_STDIN || !f->src[i]->ended) return 1;
    return 0;
}

void ld_follow_each(ld_follow *f, void (*fn)(void *ctx, const ld_follow_file *file, const char *source), void *ctx)
{
    for (size_t i = 0; i < f->nsrc; i++)
        for (size_t j = 0; j < f->src[i]->nfiles; j++) fn(ctx, &f->src[i]->files[j]->pub, f->src[i]->name);
}

void ld_follow_free(ld_follow *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->nsrc; i++) {
        fl_source *s = f->src[i];
        while (s->nfiles) fl_source_close_file(f, s, 0);
        free(s->files);
        free(s->hints);
        free(s->name);
        free(s);
    }
    free(f->src);
    free(f);
}
