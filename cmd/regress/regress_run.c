/* regress_run.c - the lists of a `logdiff regress` run (items, members,
 * problems), their strings and their memory: what judging the inputs
 * (regress_collect.c) and reading partials back (regress_partial_read.c)
 * both fill. */
#include <stdlib.h>
#include <string.h>

#include "regress.h"

static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return v;
    size_t c = *cap ? *cap * 2 : 256;
    void *nv = realloc(v, c * size);
    if (nv) *cap = c;
    return nv;
}

const char *ld_cli_regress_keep(ld_cli_regress_run *run, const char *s)
{
    return s ? ld_arena_memdup(&run->strings, s, strlen(s)) : NULL;
}

ld_cli_regress_item *ld_cli_regress_new_item(ld_cli_regress_run *run)
{
    ld_cli_regress_item *v = grow(run->items, &run->cap_items, run->n_items, sizeof *v);
    if (!v) return NULL;
    run->items = v;
    ld_cli_regress_item *it = &run->items[run->n_items++];
    memset(it, 0, sizeof *it);
    return it;
}

ld_cli_regress_member *ld_cli_regress_new_member(ld_cli_regress_run *run)
{
    ld_cli_regress_member *v = grow(run->members, &run->cap_members, run->n_members, sizeof *v);
    if (!v) return NULL;
    run->members = v;
    ld_cli_regress_member *mb = &run->members[run->n_members++];
    memset(mb, 0, sizeof *mb);
    return mb;
}

ld_cli_regress_problem *ld_cli_regress_new_problem(ld_cli_regress_run *run)
{
    ld_cli_regress_problem *v = grow(run->problems, &run->cap_problems, run->n_problems, sizeof *v);
    if (!v) return NULL;
    run->problems = v;
    ld_cli_regress_problem *p = &run->problems[run->n_problems++];
    memset(p, 0, sizeof *p);
    return p;
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
