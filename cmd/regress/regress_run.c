/* regress_run.c - the lists of a `logdiff regress` run (items, members,
 * problems), their strings and their memory: what judging the inputs
 * (regress_collect.c) and reading partials back (regress_partial_read.c)
 * both fill. */
#include <stdlib.h>
#include <string.h>

#include "regress.h"

/* A zeroed element appended to the list at *v (*n elements of `size`
 * bytes, room for *cap; *v may move); NULL on out of memory (the list
 * unchanged). */
static void *push(void **v, size_t *n, size_t *cap, size_t size)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        void *nv = realloc(*v, c * size);
        if (!nv) return NULL;
        *v = nv;
        *cap = c;
    }
    char *slot = (char *)*v + (*n)++ * size;
    memset(slot, 0, size);
    return slot;
}

const char *ld_cli_regress_keep(ld_cli_regress_run *run, const char *s)
{
    return s ? ld_arena_memdup(&run->strings, s, strlen(s)) : NULL;
}

ld_cli_regress_item *ld_cli_regress_new_item(ld_cli_regress_run *run)
{
    void *base = run->items;
    ld_cli_regress_item *slot = push(&base, &run->n_items, &run->cap_items, sizeof *slot);
    run->items = base;
    return slot;
}

ld_cli_regress_member *ld_cli_regress_new_member(ld_cli_regress_run *run)
{
    void *base = run->members;
    ld_cli_regress_member *slot = push(&base, &run->n_members, &run->cap_members, sizeof *slot);
    run->members = base;
    return slot;
}

ld_cli_regress_problem *ld_cli_regress_new_problem(ld_cli_regress_run *run)
{
    void *base = run->problems;
    ld_cli_regress_problem *slot = push(&base, &run->n_problems, &run->cap_problems, sizeof *slot);
    run->problems = base;
    return slot;
}

void ld_cli_regress_run_free(ld_cli_regress_run *run)
{
    for (size_t i = 0; i < run->n_items; i++) {
        ld_request_free(run->items[i].req);
        if (run->items[i].arena) ld_arena_release(run->items[i].arena);
        free(run->items[i].arena);
    }
    free(run->items);
    free(run->members);
    free(run->problems);
    ld_baseline_diff_free(&run->diff);
    ld_baseline_free(&run->base);
    ld_baseline_free(&run->cur);
    ld_arena_release(&run->strings);
}
