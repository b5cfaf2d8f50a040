/* regress_text.c - `logdiff regress` on stdout: a line per request that
 * changed (people) or a JSON object per request (scripts), and the summary. */
#include <stdlib.h>
#include <string.h>

#include "parse/pylit/pylit_json.h"
#include "regress.h"

/* The status word of an item: the change, "recorded" when writing the
 * baseline, "not-ok" for a request that fails as it did before. */
static const char *status_of(const ld_cli_regress_run *run, const ld_cli_regress_item *it)
{
    if (run->updating) return "recorded";
    if (it->change == LD_CHANGE_SAME && strcmp(it->verdict, "ok")) return "not-ok";
    return ld_change_name(it->change);
}

static int listed(const ld_cli_regress_run *run, const ld_cli_regress_item *it, int verbose)
{
    if (verbose) return 1;
    if (run->updating) return 0;
    return it->change != LD_CHANGE_SAME && it->change != LD_CHANGE_NEW;
}

static void print_errors(FILE *f, const ld_cli_regress_item *it)
{
    for (size_t i = 0; it->v && i < it->v->findings.n; i++) {
        const ld_finding *g = &it->v->findings.v[i];
        if (g->severity != LD_SEV_ERROR) continue;
        fprintf(f, "    error %s", g->kind);
        if (g->message >= 0) fprintf(f, " [message %lld]", (long long)g->message);
        fprintf(f, ": %s\n", g->detail);
    }
}

static void print_item(const ld_cli_regress_run *run, FILE *f, const ld_cli_regress_item *it)
{
    int up = ld_change_is_regression(it->change) && !run->updating;
    char change[64];
    snprintf(change, sizeof change, "%s -> %s", it->before ? it->before->verdict : "(new)", it->verdict);
    fprintf(f, "%-12s %-32s %-22s %s", up ? "REGRESSED" : status_of(run, it), it->key,
            run->updating ? it->verdict : change, it->where);
    for (size_t i = 0; i < it->n_new_errors; i++)
        fprintf(f, "%s%s", i ? ", " : "  new: ", it->new_errors[i]);
    fputc('\n', f);
    if (up) print_errors(f, it);
}

static void print_summary(const ld_cli_regress_run *run, FILE *f)
{
    size_t ok = 0, skipped = 0;
    for (size_t i = 0; i < run->n_items; i++) ok += !strcmp(run->items[i].verdict, "ok");
    for (size_t i = 0; i < run->n_members; i++) skipped += ld_cli_regress_member_is_skipped(&run->members[i]);
    const size_t *c = run->diff.count;
    fprintf(f, "\n%zu requests: %zu ok, %zu not ok", run->n_items, ok, run->n_items - ok);
    if (run->updating)
        fprintf(f, "; baseline %s written", run->baseline_path);
    else
        fprintf(f, "; %zu regressed, %zu new failing, %zu fixed, %zu improved, %zu new, "
                "%zu missing", c[LD_CHANGE_REGRESSED], c[LD_CHANGE_NEW_FAILING], c[LD_CHANGE_FIXED],
                c[LD_CHANGE_IMPROVED], c[LD_CHANGE_NEW], run->diff.n_missing);
    fprintf(f, "; %zu members skipped, %llu input errors", skipped, (unsigned long long)run->io_errors);
    if (run->capture_problems)
        fprintf(f, ", %llu lines lost or damaged in their capture", (unsigned long long)run->capture_problems);
    if (run->over_limit)
        fprintf(f, " (%llu longer than the line-size limit)", (unsigned long long)run->over_limit);
    fputc('\n', f);
    char conv[512];
    if (*ld_cli_conv_summary(&run->conv, &run->conv_opts, conv, sizeof conv)) fprintf(f, "%s\n", conv);
}

int ld_cli_regress_write_text(const ld_cli_regress_run *run, FILE *f, int verbose)
{
    size_t *order = ld_cli_regress_report_order(run);
    if (!order) return -1;
    for (size_t k = 0; k < run->cur.n; k++)
        if (listed(run, &run->items[order[k]], verbose)) print_item(run, f, &run->items[order[k]]);
    for (size_t k = 0; k < run->diff.n_missing; k++) {
        const ld_baseline_entry *e = &run->base.v[run->diff.missing[k]];
        fprintf(f, "%-12s %-32s (was %s)\n", "missing", e->rid, e->verdict);
    }
    for (size_t i = 0; i < run->n_members; i++)
        if (ld_cli_regress_member_is_skipped(&run->members[i]))
            fprintf(f, "%-12s %s: not a log (no request line in %llu lines)\n", "skipped",
                    run->members[i].name, (unsigned long long)run->members[i].lines);
    for (size_t i = 0; i < run->n_problems; i++)
        fprintf(f, "%-12s %s\n", "unreadable", run->problems[i].msg);
    print_summary(run, f);
    free(order);
    return 0;
}

/* A line being put together, written with one fwrite (a million of them
 * from a merge: a write and an escape call per value took most of it). */
typedef struct line_buf {
    FILE *f;
    size_t n;
    char b[1024];
} line_buf;

static void lb_flush(line_buf *l)
{
    if (l->n) fwrite(l->b, 1, l->n, l->f);
    l->n = 0;
}

static void lb_put(line_buf *l, const char *s, size_t n)
{
    if (l->n + n > sizeof l->b) lb_flush(l);
    if (n > sizeof l->b) { fwrite(s, 1, n, l->f); return; }
    memcpy(l->b + l->n, s, n);
    l->n += n;
}

#define LB_LIT(l, lit) lb_put((l), lit, sizeof lit - 1)

/* s as ld_json_write_cstr writes it: printable ASCII but for a quote and
 * a backslash as it is, anything else through it. */
static void lb_text(line_buf *l, const char *s)
{
    size_t n = 0;
    if (s)
        for (; (unsigned char)s[n] >= 0x20 && (unsigned char)s[n] < 0x80 && s[n] != '"' && s[n] != '\\'; n++) {}
    if (!s || s[n] || n + 2 > sizeof l->b) {
        lb_flush(l);
        ld_json_write_cstr(l->f, s);
        return;
    }
    if (l->n + n + 2 > sizeof l->b) lb_flush(l);
    l->b[l->n++] = '"';
    memcpy(l->b + l->n, s, n);
    l->n += n;
    l->b[l->n++] = '"';
}

static void kinds_line(line_buf *l, const char *const *k, size_t n)
{
    LB_LIT(l, "[");
    for (size_t i = 0; i < n; i++) {
        if (i) LB_LIT(l, ",");
        lb_text(l, k[i]);
    }
    LB_LIT(l, "]");
}

/* One request's object, printed as cJSON prints it unformatted (a million
 * of them from a merge: building and freeing an item tree each took a
 * third of the run). */
static void item_line(FILE *f, const ld_cli_regress_run *run, const ld_cli_regress_item *it,
                      const ld_baseline_entry *now)
{
    line_buf l;
    l.f = f;
    l.n = 0;
    LB_LIT(&l, "{\"rid\":");
    lb_text(&l, it->rid);
    LB_LIT(&l, ",\"key\":");
    lb_text(&l, it->key);
    LB_LIT(&l, ",\"status\":");
    lb_text(&l, status_of(run, it));
    if (!run->updating && ld_change_is_regression(it->change)) LB_LIT(&l, ",\"regression\":true,\"verdict\":");
    else LB_LIT(&l, ",\"regression\":false,\"verdict\":");
    lb_text(&l, it->verdict);
    LB_LIT(&l, ",\"before\":");
    lb_text(&l, it->before ? it->before->verdict : NULL);
    LB_LIT(&l, ",\"errors\":");
    kinds_line(&l, now->errors, now->n_errors);
    LB_LIT(&l, ",\"new_errors\":");
    kinds_line(&l, it->new_errors, it->n_new_errors);
    LB_LIT(&l, ",\"member\":");
    lb_text(&l, it->label);
    LB_LIT(&l, ",\"where\":");
    lb_text(&l, it->where);
    LB_LIT(&l, "}\n");
    lb_flush(&l);
}

static cJSON *other_json(const char *rid, const char *status, const char *before,
                         const char *member, const char *reason)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "rid", ld_json_cstr(rid));
    cJSON_AddItemToObject(o, "status", cJSON_CreateString(status));
    cJSON_AddItemToObject(o, "before", ld_json_cstr(before));
    cJSON_AddItemToObject(o, "member", ld_json_cstr(member));
    cJSON_AddItemToObject(o, "reason", ld_json_cstr(reason));
    return o;
}

int ld_cli_regress_write_json(const ld_cli_regress_run *run, FILE *f)
{
    /* the run's entries in key order, so that each item finds its own */
    for (size_t j = 0; j < run->cur.n; j++)
        item_line(f, run, &run->items[run->cur.v[j].tag], &run->cur.v[j]);
    for (size_t k = 0; k < run->diff.n_missing; k++) {
        const ld_baseline_entry *e = &run->base.v[run->diff.missing[k]];
        ld_json_print_line(f, other_json(e->rid, "missing", e->verdict, NULL,
                                         "in the baseline, not in the inputs"));
    }
    for (size_t i = 0; i < run->n_members; i++)
        if (ld_cli_regress_member_is_skipped(&run->members[i]))
            ld_json_print_line(f, other_json(NULL, "skipped", NULL, run->members[i].name,
                                             "not a log: no request line"));
    for (size_t i = 0; i < run->n_problems; i++)
        ld_json_print_line(f, other_json(NULL, "unreadable", NULL, run->problems[i].name,
                                         run->problems[i].msg));
    return 0;
}
