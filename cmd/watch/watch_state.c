/* watch_state.c - logdiff watch's --state FILE (watch_state.h): loaded at
 * the start, saved every second and at the end. */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/logread.h"
#include "cmd/watch/watch_state.h"
#include "cmd/watch/watch_state_internal.h"

/* where r's first line is: its lines from there on are read again after a
 * restart (NULL: a record with no line, an error record) */
static const ld_source *first_part(const ld_request *r)
{
    const ld_source *s = ld_cli_request_first_part(r);
    return s && s->member ? s : NULL;
}

int ld_watch_judged_add(judged_list *l, const char *path, uint64_t offset, const char *rid)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        judged *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    judged j = { strdup(path), offset, strdup(rid) };
    if (!j.path || !j.rid) {
        free(j.path);
        free(j.rid);
        return -1;
    }
    l->v[l->n++] = j;
    return 0;
}

static void judged_clear(judged_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].rid);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

void ld_watch_state_free(ld_watch_state *st)
{
    if (!st) return;
    for (size_t i = 0; i < st->n_files; i++) {
        free(st->files[i].source);
        free(st->files[i].path);
    }
    free(st->files);
    judged_clear(&st->before);
    judged_clear(&st->now);
    free(st->path);
    free(st);
}

int ld_watch_state_was_judged(ld_watch_state *st, const ld_request *r)
{
    const ld_source *s = st && r->rid ? first_part(r) : NULL;
    if (!s) return 0;
    for (size_t i = 0; i < st->before.n; i++) {
        judged *j = &st->before.v[i];
        if (j->offset != s->offset || strcmp(j->rid, r->rid) || strcmp(j->path, s->member)) continue;
        /* each comes again once: the list shrinks as the restart's lines are read */
        free(j->path);
        free(j->rid);
        *j = st->before.v[--st->before.n];
        return 1;
    }
    return 0;
}

void ld_watch_state_note_judged(ld_watch_state *st, const ld_request *r)
{
    const ld_source *s = st && r->rid ? first_part(r) : NULL;
    if (s) ld_watch_judged_add(&st->now, s->member, s->offset, r->rid); /* out of memory: it may be judged again */
}

int ld_watch_state_save_due(const ld_watch_state *st, double now)
{
    return now - st->saved_at >= 1.0;
}

/* Every file saved for `source` (a directory's files, a file and its rotated
 * sibling still being read) resumes where it was; a source with none saved
 * starts afresh. */
ld_status ld_watch_state_add_source(ld_watch_state *st, ld_follow *f, const char *source, ld_error *err)
{
    int resumed = 0;
    for (size_t i = 0; st && i < st->n_files; i++) {
        const saved_file *s = &st->files[i];
        if (strcmp(s->source, source)) continue;
        LD_TRY(ld_follow_add_at(f, source, s->dev, s->ino, s->offset, s->line, err));
        resumed = 1;
    }
    return resumed ? LD_OK : ld_follow_add(f, source, err);
}

/* ------------------------------------------------------------ saving */

typedef struct positions {
    saved_file *v;
    size_t n, cap;
    int nomem;
} positions;

static void add_position(void *ctx, const ld_follow_file *file, const char *source)
{
    positions *p = ctx;
    if (p->nomem || !file->ino) return; /* standard input: nothing to resume */
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        saved_file *v = realloc(p->v, cap * sizeof *v);
        if (!v) {
            p->nomem = 1;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    saved_file s = { strdup(source), strdup(file->path), file->dev, file->ino, file->offset, file->lineno };
    if (!s.source || !s.path) {
        free(s.source);
        free(s.path);
        p->nomem = 1;
        return;
    }
    p->v[p->n++] = s;
}

/* a request still waiting: its file must be read again from its first line */
static void pull_back(void *ctx, const ld_request *r)
{
    positions *p = ctx;
    const ld_source *s = first_part(r);
    if (!s) return;
    for (size_t i = 0; i < p->n; i++) {
        saved_file *f = &p->v[i];
        if (strcmp(f->path, s->member) || s->offset >= f->offset) continue;
        f->offset = s->offset;
        f->line = s->line ? s->line - 1 : 0;
    }
}

/* keeps the judged requests whose lines will be read again */
static void prune_judged(judged_list *l, const positions *p)
{
    size_t kept = 0;
    for (size_t i = 0; i < l->n; i++) {
        judged *j = &l->v[i];
        int again = 0;
        for (size_t k = 0; k < p->n && !again; k++)
            again = !strcmp(p->v[k].path, j->path) && j->offset >= p->v[k].offset;
        if (again) l->v[kept++] = *j;
        else {
            free(j->path);
            free(j->rid);
        }
    }
    l->n = kept;
}

static void positions_free(positions *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].source);
        free(p->v[i].path);
    }
    free(p->v);
}

int ld_watch_state_save(ld_watch_state *st, ld_follow *f, const ld_pairer *pairer, double now, FILE *err)
{
    positions p = { 0 };
    ld_follow_each(f, add_position, &p);
    ld_pairer_each_waiting(pairer, pull_back, &p);
    int rc = -1;
    if (p.nomem) fprintf(err, "logdiff watch: out of memory for the state\n");
    else {
        prune_judged(&st->now, &p);
        prune_judged(&st->before, &p); /* those read past without coming again */
        rc = ld_watch_state_write(st, p.v, p.n, err);
    }
    positions_free(&p);
    st->saved_at = now;
    return rc;
}
