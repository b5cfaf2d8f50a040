/* regress_junit.c - `logdiff regress --junit`: JUnit XML as GitLab, Jenkins
 * and the GitHub Actions reporters read it.  One testsuite per INPUT, one
 * testcase per request (classname: the archive member, name: the rid), a
 * <failure> for each regression with its findings as message and text; an
 * <error> for each input or member that could not be read, a <skipped> for
 * each member that is not a log and, in a last suite, for each baseline
 * request missing from the inputs. */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/markup.h"
#include "cmd/common/quote.h"
#include "regress.h"

typedef struct suite_counts { size_t tests, failures, errors, skipped; } suite_counts;

static int is_failure(const ld_cli_regress_run *run, const ld_cli_regress_item *it)
{
    return !run->updating && ld_change_is_regression(it->change);
}

static suite_counts count_input(const ld_cli_regress_run *run, size_t input)
{
    suite_counts c = { 0, 0, 0, 0 };
    for (size_t i = 0; i < run->n_items; i++)
        if (run->items[i].input == input) {
            c.tests++;
            c.failures += is_failure(run, &run->items[i]);
        }
    for (size_t i = 0; i < run->n_problems; i++)
        if (run->problems[i].input == input) { c.tests++; c.errors++; }
    return c;
}

static void attr(FILE *f, const char *name, const char *value)
{
    fprintf(f, " %s=\"", name);
    ld_cli_markup_cstr(f, value, LD_MARKUP_ATTR);
    fputc('"', f);
}

/* The failure's message: the change and the new error kinds, then the first
 * new error's detail. */
static void failure_message(FILE *f, const ld_cli_regress_item *it)
{
    char head[256];
    snprintf(head, sizeof head, "%s -> %s", it->before ? it->before->verdict : "new request,",
             it->verdict);
    fputs(" message=\"", f);
    ld_cli_markup_cstr(f, head, LD_MARKUP_ATTR);
    for (size_t i = 0; i < it->n_new_errors; i++) {
        fputs(i ? ", " : ": ", f);
        ld_cli_markup_cstr(f, it->new_errors[i], LD_MARKUP_ATTR);
        for (size_t k = 0; i == 0 && k < it->v->findings.n; k++)
            if (!strcmp(it->v->findings.v[k].kind, it->new_errors[0])) {
                fputs(" (", f);
                ld_cli_markup_cstr(f, it->v->findings.v[k].detail, LD_MARKUP_ATTR);
                fputc(')', f);
                break;
            }
    }
    fputc('"', f);
}

static void finding_text(FILE *f, const ld_finding *g)
{
    fprintf(f, "%s %s", g->severity == LD_SEV_ERROR ? "error" : "info", g->kind);
    if (g->message >= 0) fprintf(f, " [message %lld]", (long long)g->message);
    fputs(": ", f);
    ld_cli_markup_cstr(f, g->detail, 0);
    fputc('\n', f);
    int kern = !strcmp(g->kind, LD_K_KERNELS_DIVERGENCE);
    char *a = ld_cli_quoted(g->array_excerpt), *p = ld_cli_quoted(g->prompt_excerpt); /* quote.h */
    if (g->array_excerpt) { fputs(kern ? "    replay: " : "    array:  ", f); ld_cli_markup_cstr(f, a ? a : g->array_excerpt, 0); fputc('\n', f); }
    if (g->prompt_excerpt) { fputs(kern ? "    logged: " : "    prompt: ", f); ld_cli_markup_cstr(f, p ? p : g->prompt_excerpt, 0); fputc('\n', f); }
    free(a);
    free(p);
    if (g->related_rid) { fputs("    related request: ", f); ld_cli_markup_cstr(f, g->related_rid, 0); fputc('\n', f); }
    if (g->unified_diff) { ld_cli_markup_cstr(f, g->unified_diff, 0); fputc('\n', f); }
}

static void testcase(const ld_cli_regress_run *run, FILE *f, const ld_cli_regress_item *it)
{
    fputs("    <testcase", f);
    attr(f, "classname", it->label);
    attr(f, "name", it->key);
    attr(f, "file", it->where);
    if (!is_failure(run, it)) {
        if (strcmp(it->verdict, "ok")) {
            fputs("><system-out>", f);
            fprintf(f, "verdict %s, as in the baseline\n", it->verdict);
            fputs("</system-out></testcase>\n", f);
        } else {
            fputs("/>\n", f);
        }
        return;
    }
    fputs(">\n      <failure", f);
    attr(f, "type", it->before ? "regressed" : "new-failing");
    failure_message(f, it);
    fputs(">request ", f);
    ld_cli_markup_cstr(f, it->key, 0);
    fprintf(f, ": verdict %s (baseline: %s), logged at ", it->verdict,
            it->before ? it->before->verdict : "not in the baseline");
    ld_cli_markup_cstr(f, it->where, 0);
    fputc('\n', f);
    for (size_t k = 0; k < it->v->findings.n; k++) finding_text(f, &it->v->findings.v[k]);
    fputs("</failure>\n    </testcase>\n", f);
}

static void error_case(FILE *f, const ld_cli_regress_problem *p)
{
    fputs("    <testcase classname=\"(input)\"", f);
    attr(f, "name", p->name);
    fputs(">\n      <error type=\"unreadable\"", f);
    attr(f, "message", p->msg);
    fputs(">", f);
    ld_cli_markup_cstr(f, p->msg, 0);
    fputs("</error>\n    </testcase>\n", f);
}

static void skipped_case(FILE *f, const char *classname, const char *name, const char *why)
{
    fputs("    <testcase", f);
    attr(f, "classname", classname);
    attr(f, "name", name);
    fputs("><skipped", f);
    attr(f, "message", why);
    fputs("/></testcase>\n", f);
}

static void input_suite(const ld_cli_regress_run *run, FILE *f, size_t input)
{
    suite_counts c = count_input(run, input);
    for (size_t i = 0; i < run->n_members; i++)
        c.skipped += run->members[i].name && ld_cli_regress_member_is_skipped(&run->members[i]) &&
                     run->members[i].input == input;
    fputs("  <testsuite", f);
    attr(f, "name", run->inputs[input]);
    fprintf(f, " tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\">\n",
            c.tests + c.skipped, c.failures, c.errors, c.skipped);
    for (size_t i = 0; i < run->n_items; i++)
        if (run->items[i].input == input) testcase(run, f, &run->items[i]);
    for (size_t i = 0; i < run->n_members; i++)
        if (run->members[i].input == input && ld_cli_regress_member_is_skipped(&run->members[i]))
            skipped_case(f, run->members[i].label, "(not a log)", "no request line: skipped");
    for (size_t i = 0; i < run->n_problems; i++)
        if (run->problems[i].input == input) error_case(f, &run->problems[i]);
    fputs("  </testsuite>\n", f);
}

int ld_cli_regress_write_junit(const ld_cli_regress_run *run, FILE *f)
{
    size_t failures = 0, skipped = run->diff.n_missing;
    for (size_t i = 0; i < run->n_items; i++) failures += is_failure(run, &run->items[i]);
    for (size_t i = 0; i < run->n_members; i++) skipped += ld_cli_regress_member_is_skipped(&run->members[i]);
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites name=\"logdiff regress\" tests=\"%zu\" failures=\"%zu\" "
            "errors=\"%zu\" skipped=\"%zu\">\n", run->n_items + run->n_problems + skipped,
            failures, run->n_problems, skipped);
    for (size_t i = 0; i < run->n_inputs; i++) input_suite(run, f, i);
    if (run->diff.n_missing) {
        fprintf(f, "  <testsuite name=\"baseline\" tests=\"%zu\" failures=\"0\" errors=\"0\" "
                "skipped=\"%zu\">\n", run->diff.n_missing, run->diff.n_missing);
        for (size_t k = 0; k < run->diff.n_missing; k++)
            skipped_case(f, "(missing)", run->base.v[run->diff.missing[k]].rid,
                         "in the baseline, not in the inputs");
        fputs("  </testsuite>\n", f);
    }
    fputs("</testsuites>\n", f);
    return ferror(f) ? -1 : 0;
}
