/* ld_arena.c - see ld_arena.h. */
#include "ld_arena.h"

#include <stdlib.h>
#include <string.h>

struct ld_arena_block {
    ld_arena_block *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    max_align_t data[]; /* alignment for any payload */
};

enum { LD_ARENA_MIN_BLOCK = 64 * 1024 };

void ld_arena_init(ld_arena *a, size_t max_bytes)
{
    memset(a, 0, sizeof *a);
    a->max_bytes = max_bytes;
}

static ld_arena_block *new_block(ld_arena *a, size_t need)
{
    size_t size = a->head ? a->head->size * 2 : LD_ARENA_MIN_BLOCK;
    if (size < need) size = need;
    if (a->max_bytes && a->held_bytes + size > a->max_bytes) {
        if (a->held_bytes + need > a->max_bytes) return NULL;
        size = need;
    }
    ld_arena_block *b = malloc(sizeof *b + size);
    if (!b) return NULL;
    b->next = a->head;
    b->size = size;
    b->used = 0;
    a->head = b;
    a->held_bytes += size;
    return b;
}

void *ld_arena_alloc(ld_arena *a, size_t n)
{
    size_t need = (n + 7u) & ~(size_t)7u;
    if (need < n) return NULL; /* overflow */
    ld_arena_block *b = a->head;
    if (!b || b->size - b->used < need) {
        b = new_block(a, need);
        if (!b) return NULL;
    }
    void *p = (char *)b->data + b->used;
    b->used += need;
    a->used_bytes += need;
    return p;
}

char *ld_arena_memdup(ld_arena *a, const void *p, size_t n)
{
    char *q = ld_arena_alloc(a, n + 1);
    if (!q) return NULL;
    if (n) memcpy(q, p, n);
    q[n] = '\0';
    return q;
}

int ld_arena_adopt(ld_arena *dst, ld_arena *src)
{
    if (!src->head) return 1;
    if (dst->max_bytes && dst->held_bytes + src->held_bytes > dst->max_bytes) return 0;
    ld_arena_block *last = src->head;
    while (last->next) last = last->next;
    if (dst->head) { /* behind dst's current block: its free room stays the one used */
        last->next = dst->head->next;
        dst->head->next = src->head;
    } else {
        dst->head = src->head;
    }
    dst->held_bytes += src->held_bytes;
    dst->used_bytes += src->used_bytes;
    src->head = NULL;
    src->held_bytes = src->used_bytes = 0;
    return 1;
}

void ld_arena_reset(ld_arena *a)
{
    ld_arena_block *keep = NULL;
    ld_arena_block *b = a->head;
    while (b) {
        ld_arena_block *next = b->next;
        if (!keep || b->size > keep->size) {
            if (keep) free(keep);
            keep = b;
        } else {
            free(b);
        }
        b = next;
    }
    a->head = keep;
    a->held_bytes = 0;
    if (keep) {
        keep->next = NULL;
        keep->used = 0;
        a->held_bytes = keep->size;
    }
    a->used_bytes = 0;
}

void ld_arena_release(ld_arena *a)
{
    ld_arena_block *b = a->head;
    while (b) {
        ld_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->held_bytes = a->used_bytes = 0;
}
