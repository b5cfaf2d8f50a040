/* regress_html_req.c - one request's section of the HTML report: its
 * findings, the conversation's earlier requests, and the message array side
 * by side with the templated prompt, each message's span in the prompt
 * coloured by its role, dropped and mangled parts marked, the regions the
 * logger cut shaded. */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/markup.h"
#include "cmd/common/quote.h"
#include "regress_html.h"

typedef struct conv_ref {
    const char *conv;
    size_t item;
} conv_ref;

struct ld_cli_regress_html_convs {
    conv_ref *v;  /* items with a conversation, by (conversation, item) */
    size_t n;
};

static int cmp_conv(const void *pa, const void *pb)
{
    const conv_ref *a = pa, *b = pb;
    int c = strcmp(a->conv, b->conv);
    if (c) return c;
    return a->item < b->item ? -1 : a->item > b->item;
}

ld_cli_regress_html_convs *ld_cli_regress_html_convs_new(const ld_cli_regress_run *run)
{
    ld_cli_regress_html_convs *c = calloc(1, sizeof *c);
    if (!c || !(c->v = malloc((run->n_items ? run->n_items : 1) * sizeof *c->v))) {
        free(c);
        return NULL;
    }
    for (size_t i = 0; i < run->n_items; i++)
        if (run->items[i].conversation) c->v[c->n++] = (conv_ref){ run->items[i].conversation, i };
    if (c->n > 1) qsort(c->v, c->n, sizeof *c->v, cmp_conv);
    return c;
}

void ld_cli_regress_html_convs_free(ld_cli_regress_html_convs *c)
{
    if (c) free(c->v);
    free(c);
}

/* A link to the item's section when it has one, else its rid. */
static void item_ref(const ld_cli_regress_run *run, FILE *f, size_t i)
{
    const ld_cli_regress_item *it = &run->items[i];
    if (it->v) { fputs("<a href=\"#", f); ld_cli_regress_html_anchor(f, i); fputs("\">", f); }
    ld_cli_regress_html_text(f, it->key);
    fprintf(f, "%s (%s)", it->v ? "</a>" : "", it->verdict);
}

static void earlier_requests(const ld_cli_regress_run *run, FILE *f, size_t item, const ld_cli_regress_html_convs *c)
{
    const char *conv = run->items[item].conversation;
    if (!conv) return;
    fputs("<p class=\"conversation\">conversation ", f);
    ld_cli_regress_html_text(f, conv);
    fputs("; earlier requests: ", f);
    int any = 0;
    size_t lo = 0, hi = c->n; /* the conversation's first entry */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(c->v[mid].conv, conv) < 0) lo = mid + 1;
        else hi = mid;
    }
    for (size_t k = lo; k < c->n && !strcmp(c->v[k].conv, conv) && c->v[k].item < item; k++) {
        if (any++) fputs(", ", f);
        item_ref(run, f, c->v[k].item);
    }
    fputs(any ? "</p>\n" : "none</p>\n", f);
}

/* The item of a related rid, or SIZE_MAX. */
static size_t item_of_rid(const ld_cli_regress_run *run, const char *rid)
{
    size_t lo = 0, hi = run->cur.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(run->cur.v[mid].rid, rid) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < run->cur.n && !strcmp(run->cur.v[lo].rid, rid) ? run->cur.v[lo].tag : (size_t)-1;
}

static void excerpt(FILE *f, const char *label, const char *s)
{
    if (!s) return;
    char *q = ld_cli_quoted(s); /* the report's one quoting rule (quote.h) */
    fprintf(f, "<br><small>%s</small> <code>", label);
    ld_cli_regress_html_text(f, q ? q : s);
    fputs("</code>", f);
    free(q);
}

static void findings(const ld_cli_regress_run *run, FILE *f, const ld_cli_regress_item *it)
{
    fputs("<ul class=\"findings\">\n", f);
    for (size_t k = 0; k < it->v->findings.n; k++) {
        const ld_finding *g = &it->v->findings.v[k];
        int err = g->severity == LD_SEV_ERROR;
        fprintf(f, "<li class=\"%s\"><b>%s</b> %s", err ? "error" : "info", err ? "error" : "info", g->kind);
        if (g->message >= 0) fprintf(f, " [message %lld]", (long long)g->message);
        fputs(": ", f);
        ld_cli_regress_html_text(f, g->detail);
        int kern = !strcmp(g->kind, LD_K_KERNELS_DIVERGENCE);
        excerpt(f, kern ? "replay" : "array", g->array_excerpt);
        excerpt(f, kern ? "logged" : "prompt", g->prompt_excerpt);
        if (g->related_rid) {
            size_t r = item_of_rid(run, g->related_rid);
            fputs("<br><small>related request</small> ", f);
            if (r != (size_t)-1) item_ref(run, f, r);
            else ld_cli_regress_html_text(f, g->related_rid);
        }
        if (g->unified_diff) { fputs("<pre>", f); ld_cli_regress_html_text(f, g->unified_diff); fputs("</pre>", f); }
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
}

const char *ld_cli_regress_html_role_class(const char *role)
{
    static const char *const roles[] = { "system", "user", "assistant", "tool" };
    static const char *const classes[] = { "role-system", "role-user", "role-assistant", "role-tool" };
    for (size_t i = 0; role && i < 4; i++)
        if (!strcmp(role, roles[i])) return classes[i];
    if (role && !strcmp(role, "developer")) return "role-system";
    return "role-other";
}

void ld_cli_regress_html_request(const ld_cli_regress_run *run, FILE *f, size_t item, const ld_cli_regress_html_convs *convs)
{
    const ld_cli_regress_item *it = &run->items[item];
    int reg = ld_change_is_regression(it->change) && !run->updating;
    const char *status = ld_cli_regress_html_status(run, it);
    fprintf(f, "<section class=\"request%s\" id=\"", reg ? " regression" : "");
    ld_cli_regress_html_anchor(f, item);
    fputs("\">\n<h3>", f);
    ld_cli_regress_html_text(f, it->key);
    fprintf(f, " <span class=\"badge %s\">%s</span> <span class=\"badge\">%s</span></h3>\n",
            status, status, it->verdict);
    fputs("<p>logged at ", f);
    ld_cli_regress_html_text(f, it->where);
    fprintf(f, "; baseline verdict: %s</p>\n",
            it->before ? it->before->verdict : run->updating ? "(writing it)" : "(not in the baseline)");
    earlier_requests(run, f, item, convs);
    findings(run, f, it);
    ld_cli_regress_html_side_by_side(f, item, it);
    fputs("</section>\n", f);
}
