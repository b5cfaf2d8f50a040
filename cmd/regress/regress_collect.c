/* regress_collect.c - `logdiff regress`: judging each record as it arrives
 * (in input order), keeping what the reports need, and the comparison with
 * the baseline. */
#include <stdlib.h>
#include <string.h>

#include "replay/judge.h"
#include "cmd/common/logread.h"
#include "regress.h"

/* Identity and place of the request; 0 or -1 (out of memory). */
static int describe(ld_cli_regress_run *run, ld_cli_regress_item *it, const ld_request *r, const ld_verdict *v,
                    const char *label, size_t input)
{
    char where[1024], key[1024];
    const ld_source *src = NULL;
    ld_cli_request_where(r, where, sizeof where, &src);
    uint64_t line = (r->flags & LD_REQ_ERROR) ? r->error.line : src ? src->line : 0;
    snprintf(key, sizeof key, "(no rid) %s:%llu", label, (unsigned long long)line);
    it->rid = ld_cli_regress_keep(run, r->rid);
    it->key = r->rid ? it->rid : ld_cli_regress_keep(run, key);
    it->label = ld_cli_regress_keep(run, label);
    it->where = ld_cli_regress_keep(run, where);
    it->conversation = ld_cli_regress_keep(run, v->conversation);
    it->conv_key = v->conversation ? ld_conv_key(r) : 0;
    it->verdict = v->verdict;
    it->input = input;
    return it->key && it->label && it->where && (it->conversation || !v->conversation) ? 0 : -1;
}

static void fail(ld_cli_regress_run *run, const char *what)
{
    if (!run->failed) fprintf(run->cli->err, "logdiff regress: %s\n", what);
    run->failed = 1;
}

/* A share's first pass (--conv-journal alone): the conversation tracker
 * only, which writes the journal. */
static void track_only(ld_cli_regress_run *run, ld_request *r)
{
    ld_arena a;
    ld_error e;
    ld_error_clear(&e);
    ld_arena_init(&a, 0);
    if (!run->failed && ld_differ_track(run->differ, r, &a, &e) != LD_OK) fail(run, e.msg);
    ld_arena_release(&a);
    ld_request_free(r);
}

void ld_cli_regress_on_record(void *ctx, size_t input, ld_request *r, const char *label)
{
    ld_cli_regress_run *run = ctx;
    if (run->track_only) { track_only(run, r); return; }
    ld_arena *a = run->failed ? NULL : malloc(sizeof *a);
    ld_verdict *v = NULL;
    ld_error e;
    ld_error_clear(&e);
    if (a) ld_arena_init(a, 0);
    if (a && (v = ld_arena_alloc(a, sizeof *v)) &&
        ld_judge_request(run->differ, &run->checks, r, a, v, &e) == LD_OK) {
        ld_cli_regress_item *it = ld_cli_regress_new_item(run);
        if (!it || describe(run, it, r, v, label, input) != 0 ||
            ld_baseline_add_kept(&run->cur, it->rid, it->key, v->verdict, &v->findings,
                                 ld_baseline_request_hash(r), run->n_items - 1, &e) != LD_OK) {
            fail(run, "out of memory keeping the verdicts");
        } else if (strcmp(v->verdict, "ok")) {
            it->req = r;
            it->v = v;
            it->arena = a;
            return;
        }
    } else if (!run->failed) {
        fail(run, e.msg[0] ? e.msg : "out of memory judging a request");
    }
    if (a) ld_arena_release(a);
    free(a);
    ld_request_free(r);
}

void ld_cli_regress_on_member(void *ctx, size_t input, const ld_cli_regress_member_info *m)
{
    ld_cli_regress_run *run = ctx;
    ld_cli_regress_member *mb = ld_cli_regress_new_member(run);
    if (!mb) { fail(run, "out of memory listing members"); return; }
    mb->input = input;
    mb->name = ld_cli_regress_keep(run, m->name);
    mb->label = ld_cli_regress_keep(run, m->label);
    mb->lines = m->lines;
    mb->request_lines = m->request_lines;
    mb->failed = m->error != NULL;
}

void ld_cli_regress_on_problem(void *ctx, size_t input, ld_problem_kind kind, const ld_error *e)
{
    ld_cli_regress_run *run = ctx;
    char msg[600];
    if (e->line)
        snprintf(msg, sizeof msg, "%s:%llu: byte %llu: %s", e->path ? e->path : "-",
                 (unsigned long long)e->line, (unsigned long long)e->offset, e->msg);
    else if (e->offset)
        snprintf(msg, sizeof msg, "%s: byte %llu: %s", e->path ? e->path : "-",
                 (unsigned long long)e->offset, e->msg);
    else
        snprintf(msg, sizeof msg, "%s: %s", e->path ? e->path : "-", e->msg);
    fprintf(run->cli->err, "logdiff regress: %s\n", msg);
    if (kind == LD_PROBLEM_LINE) return; /* the line is a record too */
    if (kind == LD_PROBLEM_CAPTURE) run->capture_problems++; /* a line lost in its capture */
    if (e->code == LD_ERR_LIMIT) run->over_limit++;
    else run->io_errors++;
    ld_cli_regress_problem *p = ld_cli_regress_new_problem(run);
    if (!p) { fail(run, "out of memory listing problems"); return; }
    p->input = input;
    p->name = ld_cli_regress_keep(run, e->path ? e->path : "-");
    p->msg = ld_cli_regress_keep(run, msg);
}

int ld_cli_regress_member_is_skipped(const ld_cli_regress_member *m)
{
    return !m->failed && m->request_lines == 0;
}

int ld_cli_regress_compare(ld_cli_regress_run *run)
{
    ld_error e;
    ld_error_clear(&e);
    ld_baseline_sort(&run->cur);
    if (run->updating) return 0;
    if (ld_baseline_compare(&run->base, &run->cur, &run->diff, &e) != LD_OK) {
        fail(run, e.msg);
        return -1;
    }
    for (size_t j = 0; j < run->cur.n; j++) {
        ld_cli_regress_item *it = &run->items[run->cur.v[j].tag];
        it->change = run->diff.change[j];
        it->before = run->diff.before[j];
        it->new_errors = run->diff.new_errors[j];
        it->n_new_errors = run->diff.n_new_errors[j];
    }
    return 0;
}

/* 0 regressions, 1 other not ok, 2 fixed or improved, 3 the rest. */
static int report_rank(const ld_cli_regress_item *it)
{
    if (ld_change_is_regression(it->change)) return 0;
    if (strcmp(it->verdict, "ok")) return 1;
    if (it->change == LD_CHANGE_FIXED || it->change == LD_CHANGE_IMPROVED) return 2;
    return 3;
}

size_t *ld_cli_regress_report_order(const ld_cli_regress_run *run)
{
    size_t n = run->cur.n, at[4] = { 0, 0, 0, 0 };
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    unsigned char *rank = malloc(n ? n : 1);
    if (!order || !rank) { free(order); free(rank); return NULL; }
    for (size_t j = 0; j < n; j++) at[rank[j] = (unsigned char)report_rank(&run->items[run->cur.v[j].tag])]++;
    for (size_t r = 0, sum = 0; r < 4; r++) { /* where each rank starts */
        size_t c = at[r];
        at[r] = sum;
        sum += c;
    }
    for (size_t j = 0; j < n; j++) order[at[rank[j]]++] = run->cur.v[j].tag; /* the baseline's order (by key) within each */
    free(rank);
    return order;
}
