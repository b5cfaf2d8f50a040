/* ld_arena.h - bump allocator for per-line / per-request parse data.
 *
 * Ownership: an ld_arena owns every block handed out by ld_arena_alloc();
 * they are all released together by ld_arena_reset() (memory kept for reuse,
 * see `keep`) or ld_arena_release().  Not thread-safe: one arena per thread.
 * A cap (max_bytes, 0 = none) turns runaway growth into LD_ERR_LIMIT instead
 * of exhausting the machine.
 */
#ifndef LD_ARENA_H
#define LD_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct ld_arena_block ld_arena_block;

typedef struct ld_arena {
    ld_arena_block *head;  /* current block (newest first) */
    size_t used_bytes;     /* bytes handed out since the last reset */
    size_t held_bytes;     /* bytes of all blocks held */
    size_t max_bytes;      /* 0 = unlimited; else alloc fails past this */
} ld_arena;

void ld_arena_init(ld_arena *a, size_t max_bytes);

/* Returns 8-byte aligned memory of n bytes, or NULL when out of memory or past
 * max_bytes.  Valid until the next reset/release. */
void *ld_arena_alloc(ld_arena *a, size_t n);

/* Copies n bytes into the arena (NUL added after them); NULL on failure. */
char *ld_arena_memdup(ld_arena *a, const void *p, size_t n);

/* Moves every block of src into dst, which frees them from then on: what
 * src handed out stays valid, now as dst's, and src is left empty (its cap
 * kept).  dst's current block stays current.  0, and nothing moved, when
 * dst's cap would be passed (the caller copies what it needs instead). */
int ld_arena_adopt(ld_arena *dst, ld_arena *src);

/* Forgets every allocation.  Keeps the largest block, frees the others, so a
 * long line does not pin memory for the rest of the run beyond one block. */
void ld_arena_reset(ld_arena *a);

/* Frees every block; the arena may be re-initialised. */
void ld_arena_release(ld_arena *a);

#endif
