/* watch_warmup.c - the warm-up after a restart (watch_warmup.h): line
 * marks per open file, and the windows read in silence. */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/logread.h"
#include "cmd/watch/watch_state_internal.h"
#include "cmd/watch/watch_warmup.h"

enum { MAX_MARKS = 1024 };

/* ------------------------------------------------------------ marks */

/* every other mark dropped, the step doubled: the marks stay bounded */
static void thin(ld_watch_marks *m)
{
    size_t kept = 0;
    for (size_t i = 0; i < m->n; i += 2) m->v[kept++] = m->v[i];
    m->n = kept;
    m->step *= 2;
}

static int grow(ld_watch_marks *m)
{
    if (m->n < m->cap) return 0;
    if (m->cap >= MAX_MARKS) {
        thin(m);
        return 0;
    }
    size_t cap = m->cap ? m->cap * 2 : 16;
    ld_watch_mark *v = realloc(m->v, cap * sizeof *v);
    if (!v) return -1;
    m->v = v;
    m->cap = cap;
    return 0;
}

void ld_watch_marks_line(ld_watch_marks *m, uint64_t window, uint64_t offset, uint64_t lineno)
{
    if (!window) return;
    if (m->n && offset < m->v[m->n - 1].offset) m->n = 0; /* read again from 0 */
    if (!m->n) m->step = window / 16 ? window / 16 : 1;
    if (m->n && offset - m->v[m->n - 1].offset < m->step) return;
    if (grow(m) != 0) return;
    m->v[m->n++] = (ld_watch_mark){ offset, lineno ? lineno - 1 : 0 };
}

int ld_watch_marks_start(ld_watch_marks *m, uint64_t window, uint64_t resume, uint64_t *offset, uint64_t *line)
{
    uint64_t from = resume > window ? resume - window : 0;
    size_t i = 0;
    while (i < m->n && m->v[i].offset < from) i++;
    if (i > 0 && i < m->n) { /* the older ones will not be needed again */
        memmove(m->v, m->v + i, (m->n - i) * sizeof *m->v);
        m->n -= i;
        i = 0;
    }
    if (i >= m->n || m->v[i].offset > resume) return 0;
    *offset = m->v[i].offset;
    *line = m->v[i].line;
    return 1;
}

void ld_watch_marks_release(ld_watch_marks *m)
{
    free(m->v);
    *m = (ld_watch_marks){ 0 };
}

/* ------------------------------------------------------------ windows */

static void close_window(ld_watch_state *st, size_t i)
{
    free(st->windows[i].path);
    st->windows[i] = st->windows[--st->n_windows];
}

static void close_windows_of(ld_watch_state *st, const ld_follow_file *file, int same_identity)
{
    for (size_t i = st->n_windows; i-- > 0;) {
        const warm_window *w = &st->windows[i];
        int same = w->dev == file->dev && w->ino == file->ino;
        if (!strcmp(w->path, file->path) && same == same_identity) close_window(st, i);
    }
}

static void open_window(ld_watch_state *st, const ld_follow_file *file, const saved_file *s)
{
    warm_window *v = realloc(st->windows, (st->n_windows + 1) * sizeof *v);
    if (!v) return;
    st->windows = v;
    warm_window w = { strdup(file->path), s->dev, s->ino, s->offset, s->line };
    if (w.path) st->windows[st->n_windows++] = w;
}

void ld_watch_warmup_opened(ld_watch_state *st, const ld_follow_file *file)
{
    if (!st || !file->ino) return;
    close_windows_of(st, file, 0); /* another file at that path now */
    for (size_t i = 0; st->warmup && i < st->n_files; i++) {
        const saved_file *s = &st->files[i];
        if (s->dev == file->dev && s->ino == file->ino && s->warmup < s->offset && file->offset == s->warmup) {
            open_window(st, file, s);
            return;
        }
    }
}

void ld_watch_warmup_truncated(ld_watch_state *st, const ld_follow_file *file)
{
    if (st) close_windows_of(st, file, 1);
}

static const warm_window *window_of(const ld_watch_state *st, const char *path)
{
    for (size_t i = 0; st && path && i < st->n_windows; i++)
        if (!strcmp(st->windows[i].path, path)) return &st->windows[i];
    return NULL;
}

int ld_watch_warmup_covers(const ld_watch_state *st, const char *path, uint64_t offset)
{
    const warm_window *w = window_of(st, path);
    return w && offset < w->end;
}

/* r's earliest line in a window, and whether it has one */
static int first_in_window(const ld_watch_state *st, const ld_request *r, uint64_t *first)
{
    int in = 0;
    if (r->flags & LD_REQ_ERROR) return ld_watch_warmup_covers(st, r->error.path, r->error.offset);
    for (int p = 0; p < LD_PART_COUNT; p++) {
        const ld_source *s = &r->src[p];
        if (!s->line || !ld_watch_warmup_covers(st, s->member, s->offset)) continue;
        if (!in || s->offset < *first) *first = s->offset;
        in = 1;
    }
    return in;
}

ld_warm_kind ld_watch_warmup_kind(const ld_watch_state *st, const ld_request *r)
{
    uint64_t first = 0;
    if (!st || !st->n_windows || !first_in_window(st, r, &first)) return LD_WARM_NO;
    if (r->flags & (LD_REQ_ERROR | LD_REQ_UNPAIRED)) return LD_WARM_DROP;
    /* a whole request with a line in the window: its first line is there
     * (earlier than any other), so it was judged before the restart */
    const ld_source *s = ld_cli_request_first_part(r);
    return s && s->offset == first ? LD_WARM_FEED : LD_WARM_DROP;
}

int ld_watch_warmup_end(const ld_watch_state *st, const char *path, uint64_t dev, uint64_t ino, uint64_t *offset,
                        uint64_t *line)
{
    const warm_window *w = window_of(st, path);
    if (!w || w->dev != dev || w->ino != ino) return 0;
    *offset = w->end;
    *line = w->end_line;
    return 1;
}

void ld_watch_warmup_release(ld_watch_state *st)
{
    while (st->n_windows) close_window(st, st->n_windows - 1);
    free(st->windows);
    st->windows = NULL;
}
