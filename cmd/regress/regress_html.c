/* regress_html.c - `logdiff regress --html`: one self-contained page (inline
 * CSS, no script, nothing fetched): the summary, a table of requests with
 * regressions first, and a section per request that is not ok
 * (regress_html_req.c). */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/markup.h"
#include "regress_html.h"

enum { RG_HTML_MAX_OK_ROWS = 2000 };

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "h1{font-size:1.5em}h2{margin-top:2em}"
    "table.requests{border-collapse:collapse}"
    "table.requests td,table.requests th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
    "tr.regressed td{background:#ffebee}"
    ".badge{display:inline-block;padding:0 .4em;border-radius:3px;font-weight:bold;color:#fff;background:#757575}"
    ".badge.regressed,.badge.new-failing{background:#c62828}"
    ".badge.fixed,.badge.improved{background:#2e7d32}"
    ".badge.not-ok{background:#ef6c00}"
    ".badge.ok,.badge.same,.badge.new,.badge.recorded{background:#9e9e9e}"
    "section.request{border-top:3px solid #333;margin-top:2em;padding-top:.5em}"
    "section.request.regression{border-top-color:#c62828}"
    "ul.findings li.error{color:#b71c1c}"
    ".pair{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1.3fr);gap:1em}"
    "pre{white-space:pre-wrap;word-break:break-all;margin:0;font:12px/1.35 ui-monospace,monospace}"
    ".msg{border-left:6px solid #999;margin:.4em 0;padding:.3em .5em;background:#fafafa}"
    ".msg.dropped{outline:3px dashed #c62828}"
    ".msg.mangled{outline:3px dashed #ef6c00}"
    ".mhead{font-weight:bold;margin-bottom:.2em}"
    ".state{font-weight:bold;padding:0 .3em;border-radius:3px}"
    ".state.dropped{background:#c62828;color:#fff}.state.mangled{background:#ef6c00;color:#fff}"
    ".prompt pre{border:1px solid #ccc;padding:.5em;background:#fff}"
    ".role-system{border-left-color:#1565c0}.span.role-system{background:#bbdefb}"
    ".role-user{border-left-color:#2e7d32}.span.role-user{background:#c8e6c9}"
    ".role-assistant{border-left-color:#6a1b9a}.span.role-assistant{background:#e1bee7}"
    ".role-tool{border-left-color:#e65100}.span.role-tool{background:#ffe0b2}"
    ".role-other{border-left-color:#616161}.span.role-other{background:#e0e0e0}"
    ".span.mangled{text-decoration:underline wavy #ef6c00}"
    ".marker{display:inline-block;font-weight:bold;padding:0 .3em;margin:0 .1em}"
    ".marker.dropped{background:#c62828;color:#fff}.marker.diff{background:#ef6c00;color:#fff}"
    ".cut{display:block;background:repeating-linear-gradient(45deg,#ddd,#ddd 6px,#bbb 6px,#bbb 12px);"
    "color:#333;font-style:italic;padding:.2em .5em;margin:.2em 0}"
    ".bad{background:#fdd;color:#b71c1c}"
    ".legend span{padding:0 .4em;margin-right:.5em}";

void ld_cli_regress_html_text(FILE *f, const char *s)
{
    ld_cli_markup_cstr(f, s, LD_MARKUP_HTML);
}

void ld_cli_regress_html_anchor(FILE *f, size_t item)
{
    fprintf(f, "r%zu", item);
}

const char *ld_cli_regress_html_status(const ld_cli_regress_run *run, const ld_cli_regress_item *it)
{
    if (run->updating) return "recorded";
    if (it->change == LD_CHANGE_SAME) return strcmp(it->verdict, "ok") ? "not-ok" : "ok";
    return ld_change_name(it->change);
}

static void summary(const ld_cli_regress_run *run, FILE *f)
{
    size_t ok = 0, skipped = 0;
    for (size_t i = 0; i < run->n_items; i++) ok += !strcmp(run->items[i].verdict, "ok");
    for (size_t i = 0; i < run->n_members; i++) skipped += ld_cli_regress_member_is_skipped(&run->members[i]);
    size_t reg = run->diff.count[LD_CHANGE_REGRESSED] + run->diff.count[LD_CHANGE_NEW_FAILING];
    fprintf(f, "<p class=\"summary\"><b>%zu requests</b>: %zu ok, %zu not ok. ", run->n_items, ok,
            run->n_items - ok);
    if (run->updating)
        fputs("Written as the new baseline.", f);
    else
        fprintf(f, "<span class=\"badge %s\">%zu regressed</span> %zu fixed, %zu improved, "
                "%zu new, %zu missing from the logs.", reg ? "regressed" : "ok", reg,
                run->diff.count[LD_CHANGE_FIXED], run->diff.count[LD_CHANGE_IMPROVED],
                run->diff.count[LD_CHANGE_NEW], run->diff.n_missing);
    fprintf(f, " %zu archive members skipped (not logs), %zu inputs or members unreadable.", skipped,
            run->n_problems);
    if (run->template_desc) {
        fputs(" Template: ", f);
        ld_cli_regress_html_text(f, run->template_desc);
        fputc('.', f);
    }
    fputs("</p>\n", f);
}

static void kinds_cell(FILE *f, const ld_cli_regress_item *it)
{
    fputs("<td>", f);
    for (size_t k = 0; it->v && k < it->v->findings.n; k++) {
        const ld_finding *g = &it->v->findings.v[k];
        if (g->severity != LD_SEV_ERROR) continue;
        int is_new = 0;
        for (size_t n = 0; n < it->n_new_errors; n++) is_new |= !strcmp(it->new_errors[n], g->kind);
        fprintf(f, "%s%s%s%s ", is_new ? "<b>" : "", g->kind, is_new ? " (new)" : "", is_new ? "</b>" : "");
    }
    fputs("</td>", f);
}

static void table_row(const ld_cli_regress_run *run, FILE *f, size_t idx)
{
    const ld_cli_regress_item *it = &run->items[idx];
    const char *status = ld_cli_regress_html_status(run, it);
    fprintf(f, "<tr class=\"%s\"><td><span class=\"badge %s\">%s</span></td><td>",
            ld_change_is_regression(it->change) && !run->updating ? "regressed" : "", status, status);
    if (it->v) { fputs("<a href=\"#", f); ld_cli_regress_html_anchor(f, idx); fputs("\">", f); }
    ld_cli_regress_html_text(f, it->key);
    fprintf(f, "%s</td><td>%s</td><td>%s</td>", it->v ? "</a>" : "", it->verdict,
            it->before ? it->before->verdict : run->updating ? "" : "(new)");
    kinds_cell(f, it);
    fputs("<td>", f);
    ld_cli_regress_html_text(f, it->where);
    fputs("</td></tr>\n", f);
}

static void table(const ld_cli_regress_run *run, FILE *f, const size_t *order)
{
    fputs("<h2>Requests</h2>\n<table class=\"requests\"><thead><tr><th>status</th><th>request</th>"
          "<th>verdict</th><th>baseline</th><th>error findings</th><th>logged at</th></tr></thead>"
          "<tbody>\n", f);
    size_t ok_rows = 0, ok_left = 0;
    for (size_t k = 0; k < run->cur.n; k++) {
        const ld_cli_regress_item *it = &run->items[order[k]];
        int plain = !strcmp(it->verdict, "ok") && !ld_change_is_regression(it->change) &&
                    it->change != LD_CHANGE_FIXED;
        if (plain && ok_rows >= RG_HTML_MAX_OK_ROWS) { ok_left++; continue; }
        ok_rows += plain;
        table_row(run, f, order[k]);
    }
    fputs("</tbody></table>\n", f);
    if (ok_left) fprintf(f, "<p>and %zu more ok requests.</p>\n", ok_left);
}

static void lists(const ld_cli_regress_run *run, FILE *f)
{
    if (run->diff.n_missing) {
        fputs("<h2>In the baseline, missing from the logs</h2>\n<ul class=\"missing\">\n", f);
        for (size_t k = 0; k < run->diff.n_missing; k++) {
            const ld_baseline_entry *e = &run->base.v[run->diff.missing[k]];
            fputs("<li>", f);
            ld_cli_regress_html_text(f, e->rid);
            fprintf(f, " (was %s)</li>\n", e->verdict);
        }
        fputs("</ul>\n", f);
    }
    size_t skipped = 0;
    for (size_t i = 0; i < run->n_members; i++) skipped += ld_cli_regress_member_is_skipped(&run->members[i]);
    if (skipped) {
        fputs("<h2>Skipped: not logs</h2>\n<ul class=\"skipped\">\n", f);
        for (size_t i = 0; i < run->n_members; i++)
            if (ld_cli_regress_member_is_skipped(&run->members[i])) {
                fputs("<li>", f);
                ld_cli_regress_html_text(f, run->members[i].name);
                fprintf(f, " (no request line in %llu lines)</li>\n",
                        (unsigned long long)run->members[i].lines);
            }
        fputs("</ul>\n", f);
    }
    if (run->n_problems) {
        fputs("<h2>Unreadable</h2>\n<ul class=\"unreadable\">\n", f);
        for (size_t i = 0; i < run->n_problems; i++) {
            fputs("<li>", f);
            ld_cli_regress_html_text(f, run->problems[i].msg);
            fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
    }
}

int ld_cli_regress_write_html(const ld_cli_regress_run *run, FILE *f)
{
    size_t *order = ld_cli_regress_report_order(run);
    ld_cli_regress_html_convs *convs = ld_cli_regress_html_convs_new(run);
    if (!order || !convs) { free(order); ld_cli_regress_html_convs_free(convs); return -1; }
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>logdiff regress</title>\n<style>%s</style></head><body>\n"
            "<h1>logdiff regress</h1>\n", css);
    summary(run, f);
    table(run, f, order);
    lists(run, f);
    int any = 0;
    for (size_t k = 0; k < run->cur.n; k++)
        if (run->items[order[k]].v) {
            if (!any++)
                fputs("<h2>Requests that are not ok</h2>\n<p class=\"legend\">roles: "
                      "<span class=\"span role-system\">system</span><span class=\"span role-user\">user"
                      "</span><span class=\"span role-assistant\">assistant</span><span class=\"span "
                      "role-tool\">tool</span> <span class=\"marker dropped\">dropped</span> <span "
                      "class=\"marker diff\">mangled</span></p>\n", f);
            ld_cli_regress_html_request(run, f, order[k], convs);
        }
    fputs("</body></html>\n", f);
    free(order);
    ld_cli_regress_html_convs_free(convs);
    return ferror(f) ? -1 : 0;
}
