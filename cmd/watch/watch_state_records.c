/* watch_state_records.c - the state's records in memory (watch_state_internal.h):
 * the lists of judged requests, what a loaded document filled freed, a
 * journal source's saved mark found.  A leaf: the loop's state
 * (watch_state.c) and the file (watch_state_io.c) both use it. */
#include <stdlib.h>
#include <string.h>

#include "cmd/watch/watch_state.h"
#include "cmd/watch/watch_state_internal.h"

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

void ld_watch_judged_clear(judged_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].rid);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

void ld_watch_state_clear(ld_watch_state *st)
{
    for (size_t i = 0; i < st->n_files; i++) {
        free(st->files[i].source);
        free(st->files[i].path);
    }
    free(st->files);
    st->files = NULL;
    st->n_files = 0;
    for (size_t i = 0; i < st->n_journals; i++) {
        free(st->journals[i].source);
        free(st->journals[i].mark.cursor);
    }
    free(st->journals);
    st->journals = NULL;
    st->n_journals = 0;
    ld_watch_judged_clear(&st->before);
}

void ld_watch_state_free(ld_watch_state *st)
{
    if (!st) return;
    ld_watch_state_clear(st);
    ld_watch_judged_clear(&st->now);
    for (size_t i = 0; i < st->n_windows; i++) free(st->windows[i].path);
    free(st->windows);
    free(st->path);
    free(st);
}

const ld_watch_journal_mark *ld_watch_state_journal(const ld_watch_state *st, const char *source)
{
    for (size_t i = 0; st && i < st->n_journals; i++)
        if (!strcmp(st->journals[i].source, source)) return &st->journals[i].mark;
    return NULL;
}
