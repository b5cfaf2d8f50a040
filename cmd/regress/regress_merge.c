/* regress_merge.c - `logdiff regress --merge PARTIAL...`: the shares'
 * partial results put together in share order, which is input order, so
 * that the comparison and every report come out as one process over all
 * INPUTs writes them.  The partials must be one run's: the same inputs,
 * the same judging settings, every share exactly once. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/input/slurp.h"
#include "regress_lines.h"
#include "regress_merge.h"

static int say(ld_cli_regress_run *run, const char *path, const ld_error *e)
{
    if (e->line)
        fprintf(run->cli->err, "logdiff regress: %s:%llu: byte %llu: %s\n", path, (unsigned long long)e->line,
                (unsigned long long)e->offset, e->msg);
    else
        fprintf(run->cli->err, "logdiff regress: %s: %s\n", path, e->msg);
    return -1;
}

static int read_heads(ld_cli_regress_run *run, char *const *paths, size_t n, ld_cli_partial_head *heads)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        ld_error e;
        ld_error_clear(&e);
        size_t len = 0;
        char *line = ld_cli_first_line(paths[i], &len, &e);
        if (!line || ld_cli_partial_read_head(line, len, &heads[i], &e) != LD_OK) rc = say(run, paths[i], &e);
        free(line);
    }
    return rc;
}

/* 1 when a and b print alike. */
static int same_json(const cJSON *a, const cJSON *b)
{
    return cJSON_Compare(a, b, 1);
}

static int same_inputs(const ld_cli_partial_head *a, const ld_cli_partial_head *b)
{
    if (a->n_inputs != b->n_inputs) return 0;
    for (size_t i = 0; i < a->n_inputs; i++)
        if (strcmp(a->inputs[i], b->inputs[i])) return 0;
    return 1;
}

/* Each partial against the first: one run's shares. */
static int check_alike(ld_cli_regress_run *run, char *const *paths, size_t n, const ld_cli_partial_head *h)
{
    FILE *err = run->cli->err;
    for (size_t i = 1; i < n; i++) {
        const char *why = h[i].count != h[0].count ? "another number of shares"
                          : !same_inputs(&h[i], &h[0]) ? "another list of inputs"
                          : !same_json(h[i].settings, h[0].settings) ? "other judging settings" : NULL;
        if (why) {
            fprintf(err, "logdiff regress: %s and %s are not shares of one run: %s\n", paths[0], paths[i], why);
            return -1;
        }
    }
    return 0;
}

static void list_inputs(FILE *f, const ld_cli_partial_head *h, size_t first, size_t end)
{
    if (first == end) { fputs("(none: more shares than inputs)", f); return; }
    for (size_t i = first; i < end && i < first + 5; i++) fprintf(f, "%s%s", i > first ? ", " : "", h->inputs[i]);
    if (end - first > 5) fprintf(f, " and %zu more", end - first - 5);
}

/* order[s] = the partial of share s; every share once, its inputs as the
 * rule gives them. */
static int order_shares(ld_cli_regress_run *run, char *const *paths, size_t n, const ld_cli_partial_head *h,
                        size_t *order)
{
    FILE *err = run->cli->err;
    size_t count = (size_t)h[0].count;
    int rc = 0;
    for (size_t s = 0; s < count; s++) order[s] = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t s = (size_t)h[i].index, first, end;
        ld_cli_shard shard = { h[i].index, h[i].count, NULL };
        ld_cli_shard_range(&shard, h[i].n_inputs, &first, &end);
        if (first != h[i].first || end != h[i].end) {
            fprintf(err, "logdiff regress: %s: share %zu/%zu holds inputs %zu..%zu, not %zu..%zu as sharing "
                    "gives them\n", paths[i], s, count, h[i].first, h[i].end, first, end);
            rc = -1;
        } else if (order[s] != SIZE_MAX) {
            fprintf(err, "logdiff regress: share %zu/%zu is there twice: %s and %s\n", s, count, paths[order[s]],
                    paths[i]);
            rc = -1;
        } else {
            order[s] = i;
        }
    }
    size_t missing = 0;
    for (size_t s = 0; s < count; s++) {
        if (order[s] != SIZE_MAX || ++missing > 10) continue;
        size_t first, end;
        ld_cli_shard shard = { (long)s, (long)count, NULL };
        ld_cli_shard_range(&shard, h[0].n_inputs, &first, &end);
        fprintf(err, "logdiff regress: share %zu/%zu is missing: no partial for its inputs: ", s, count);
        list_inputs(err, &h[0], first, end);
        fputc('\n', err);
        rc = -1;
    }
    if (missing > 10) fprintf(err, "logdiff regress: and %zu more shares of %zu are missing\n", missing - 10, count);
    return rc;
}

static int read_bodies(ld_cli_regress_run *run, char *const *paths, const ld_cli_partial_head *h,
                       const size_t *order, size_t count)
{
    for (size_t s = 0; s < count; s++) {
        const char *path = paths[order[s]];
        ld_error e;
        ld_error_clear(&e);
        char *text = NULL;
        size_t len = 0;
        int mapped = ld_cli_map_file(path, &text, &len) == 0;
        ld_status st = mapped ? LD_OK : ld_slurp_file(path, &text, &len, &e);
        if (st == LD_OK) st = ld_cli_partial_read_body(text, len, &h[order[s]], run, &e);
        if (mapped) ld_cli_unmap_file(text, len);
        else free(text);
        if (st != LD_OK) return say(run, path, &e);
    }
    return 0;
}

typedef struct conv_at {
    uint64_t id;      /* the conversation's key (ld_conv_key) */
    uint32_t share;
    uint32_t item;    /* for an example */
} conv_at;

static int cmp_conv(const void *pa, const void *pb)
{
    const conv_at *a = pa, *b = pb;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return (a->share > b->share) - (a->share < b->share);
}

/* Shares that started from the journals of the shares before them
 * (--conv-from) must have started from these shares' (their ops' digests):
 * 0, or -1 naming the first that did not.  preloaded[s] = 1 for those. */
static int check_conv_from(ld_cli_regress_run *run, char *const *paths, const ld_cli_partial_head *h,
                           const size_t *order, size_t count, char *preloaded)
{
    for (size_t s = 0; s < count; s++) {
        const ld_cli_partial_head *p = &h[order[s]];
        preloaded[s] = s == 0 || p->conv_preloaded;
        for (size_t j = 0; p->conv_preloaded && j < s; j++)
            if (p->conv_from[j] != h[order[j]].conv_digest) {
                fprintf(run->cli->err, "logdiff regress: %s: share %zu/%zu started from a conversation journal "
                        "of share %zu/%zu other than the one its partial %s stands for: run the share again "
                        "with --conv-from the journals of this run\n", paths[order[s]], s, count, j, count,
                        paths[order[j]]);
                return -1;
            }
    }
    return 0;
}

/* Conversations with requests in several shares, the later ones judged
 * without the earlier shares' turns (no --conv-from): a turn was not
 * checked against an earlier turn in another share.  Said on stderr (the
 * reports are the shares' verdicts).  Grouped by their key, the hash of the
 * first turn (the ids are the first rid each share saw, so differ between
 * shares). */
static void note_split_conversations(ld_cli_regress_run *run, const size_t *share_end, size_t count,
                                     const char *preloaded)
{
    conv_at *v = malloc((run->n_items ? run->n_items : 1) * sizeof *v);
    if (!v) return;
    size_t n = 0, s = 0, split = 0;
    for (size_t i = 0; i < run->n_items; i++) {
        while (s < count && i >= share_end[s]) s++;
        if (run->items[i].conv_key) v[n++] = (conv_at){ run->items[i].conv_key, (uint32_t)s, (uint32_t)i };
    }
    qsort(v, n, sizeof *v, cmp_conv);
    const char *example = NULL;
    for (size_t i = 0, j; i < n; i = j) { /* a group of one conversation's requests */
        int several = 0;
        for (j = i + 1; j < n && v[j].id == v[i].id; j++)
            several |= v[j].share != v[i].share && !preloaded[v[j].share]; /* sorted: v[i] the first share */
        if (several && !split++) example = run->items[v[i].item].key;
    }
    if (split)
        fprintf(run->cli->err, "logdiff regress: note: %zu conversation%s (e.g. the one of request %s) "
                "had requests in more than one share; each share checked a turn against the earlier turns "
                "it read itself: run the shares with --conv-journal, then --conv-from (docs/cluster/), or give "
                "the logs of a conversation's servers to one share\n", split, split == 1 ? "" : "s", example);
    free(v);
}

int ld_cli_regress_merge(ld_cli_regress_run *run, char *const *paths, size_t n, ld_cli_partial_head *first)
{
    ld_cli_partial_head *h = calloc(n, sizeof *h);
    size_t *order = NULL, *share_end = NULL;
    char *preloaded = NULL;
    int rc = h ? read_heads(run, paths, n, h) : -1;
    rc = rc || check_alike(run, paths, n, h);
    size_t count = rc ? 0 : (size_t)h[0].count;
    if (!rc && (!(order = malloc(count * sizeof *order)) || !(share_end = malloc(count * sizeof *share_end)) ||
                !(preloaded = malloc(count))))
        rc = -1;
    rc = rc || order_shares(run, paths, n, h, order) || check_conv_from(run, paths, h, order, count, preloaded);
    for (size_t s = 0; !rc && s < count; s++) {
        rc = read_bodies(run, paths, h, order + s, 1);
        share_end[s] = run->n_items;
    }
    if (!rc) {
        note_split_conversations(run, share_end, count, preloaded);
        *first = h[0];
        memset(&h[0], 0, sizeof h[0]);
        run->inputs = first->inputs;
        run->n_inputs = first->n_inputs;
    }
    for (size_t i = 0; h && i < n; i++) ld_cli_partial_head_free(&h[i]);
    free(h);
    free(order);
    free(share_end);
    free(preloaded);
    return rc ? -1 : 0;
}
