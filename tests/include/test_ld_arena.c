/* test_ld_arena.c - the bump allocator (include/ld_arena.c), and above all
 * ld_arena_adopt: what src handed out survives in dst, src is empty, dst
 * keeps allocating from its own current block, a cap refuses and moves
 * nothing, and releasing dst frees every block (ASan's leak check runs this
 * test too). */
#include "ld_arena.h"
#include "tests/support/ld_test.h"

#include <stdint.h>
#include <string.h>

/* n pieces of sizes 1..n*37 filled with a pattern of their index. */
static int fill_pieces(ld_arena *a, char **p, size_t *len, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        len[i] = 1 + (i * 37) % 5000;
        p[i] = ld_arena_alloc(a, len[i]);
        CHECK(p[i] != NULL);
        CHECK(((uintptr_t)p[i] & 7u) == 0);
        memset(p[i], (int)(i & 0xff), len[i]);
    }
    return 0;
}

static int pieces_intact(char **p, const size_t *len, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < len[i]; k++)
            CHECK_MSG((unsigned char)p[i][k] == (i & 0xff), "piece %zu byte %zu changed", i, k);
    return 0;
}

static int test_ld_arena_adopt_keeps_contents(void)
{
    enum { N = 200 }; /* ~500 KB: several blocks in each arena */
    char *pd[N], *ps[N];
    size_t ld[N], ls[N];
    ld_arena dst, src;
    ld_arena_init(&dst, 0);
    ld_arena_init(&src, 0);
    if (fill_pieces(&dst, pd, ld, N) || fill_pieces(&src, ps, ls, N)) return 1;
    size_t held = dst.held_bytes + src.held_bytes, used = dst.used_bytes + src.used_bytes;
    CHECK(ld_arena_adopt(&dst, &src) == 1);
    CHECK(src.head == NULL && src.held_bytes == 0 && src.used_bytes == 0);
    CHECK(dst.held_bytes == held && dst.used_bytes == used);
    /* dst's current block is still the one it allocates from */
    char *before = ld_arena_alloc(&dst, 8), *after = ld_arena_alloc(&dst, 8);
    CHECK(before && after == before + 8);
    if (pieces_intact(pd, ld, N) || pieces_intact(ps, ls, N)) return 1;
    /* the emptied src works as a fresh arena */
    CHECK(ld_arena_alloc(&src, 100) != NULL);
    ld_arena_release(&src);
    ld_arena_release(&dst);
    CHECK(dst.head == NULL && dst.held_bytes == 0);
    return 0;
}

static int test_ld_arena_adopt_into_empty(void)
{
    ld_arena dst, src;
    ld_arena_init(&dst, 0);
    ld_arena_init(&src, 0);
    char *s = ld_arena_memdup(&src, "kept", 4);
    CHECK(s != NULL);
    CHECK(ld_arena_adopt(&dst, &src) == 1);
    CHECK(dst.head != NULL && src.head == NULL);
    CHECK(strcmp(s, "kept") == 0);
    char *t = ld_arena_memdup(&dst, "more", 4); /* in the adopted block's free room */
    CHECK(t == s + 8);
    CHECK(ld_arena_adopt(&dst, &src) == 1); /* an empty src: nothing to do */
    ld_arena_release(&dst);
    return 0;
}

static int test_ld_arena_adopt_respects_cap(void)
{
    ld_arena dst, src;
    ld_arena_init(&dst, 100000);
    ld_arena_init(&src, 0);
    CHECK(ld_arena_alloc(&dst, 1000) != NULL);
    CHECK(ld_arena_alloc(&src, 50000) != NULL); /* a 64 KiB block: dst would hold 128 KiB */
    size_t dh = dst.held_bytes, sh = src.held_bytes;
    CHECK(ld_arena_adopt(&dst, &src) == 0);
    CHECK(dst.held_bytes == dh && src.held_bytes == sh && src.head != NULL);
    ld_arena_release(&src);
    ld_arena_release(&dst);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_ld_arena_adopt_keeps_contents),
    LD_CASE(test_ld_arena_adopt_into_empty),
    LD_CASE(test_ld_arena_adopt_respects_cap),
};

LD_TEST_MAIN(cases)
