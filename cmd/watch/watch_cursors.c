/* watch_cursors.c - see watch_cursors.h. */
#include "cmd/watch/watch_cursors.h"

#include <stdlib.h>

typedef struct held {
    uint64_t entry;
    char *cursor; /* owned */
    int keep;
} held;

struct ld_watch_cursors {
    held *v;
    size_t n, cap;
};

ld_watch_cursors *ld_watch_cursors_new(void)
{
    return calloc(1, sizeof(ld_watch_cursors));
}

void ld_watch_cursors_free(ld_watch_cursors *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->v[i].cursor);
    free(t->v);
    free(t);
}

int ld_watch_cursors_add(ld_watch_cursors *t, uint64_t entry, char *cursor)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        held *v = realloc(t->v, cap * sizeof *v);
        if (!v) {
            free(cursor);
            return -1;
        }
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = (held){ entry, cursor, 0 };
    return 0;
}

/* the index of the last entry at or before `entry`; -1 when none */
static long last_at_or_before(const ld_watch_cursors *t, uint64_t entry)
{
    size_t lo = 0, hi = t->n; /* the first index past `entry` is in [lo, hi] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].entry <= entry) lo = mid + 1;
        else hi = mid;
    }
    return (long)lo - 1;
}

void ld_watch_cursors_keep(ld_watch_cursors *t, uint64_t entry)
{
    long i = last_at_or_before(t, entry);
    if (i >= 0 && t->v[i].entry == entry) t->v[i].keep = 1;
}

const char *ld_watch_cursors_find(const ld_watch_cursors *t, uint64_t entry, uint64_t *at)
{
    long i = last_at_or_before(t, entry);
    if (i < 0) return NULL;
    *at = t->v[i].entry;
    return t->v[i].cursor;
}

void ld_watch_cursors_prune(ld_watch_cursors *t, uint64_t also)
{
    size_t kept = 0;
    for (size_t i = 0; i < t->n; i++) {
        held h = t->v[i];
        if (!h.keep && h.entry != also) {
            free(h.cursor);
            continue;
        }
        h.keep = 0;
        t->v[kept++] = h;
    }
    t->n = kept;
    if (t->cap > 1024 && t->n < t->cap / 4) { /* a burst's room given back */
        held *v = realloc(t->v, (t->cap / 2) * sizeof *v);
        if (v) t->v = v, t->cap /= 2;
    }
}

size_t ld_watch_cursors_count(const ld_watch_cursors *t)
{
    return t->n;
}
