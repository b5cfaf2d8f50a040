/* regress_html_prompt.c - the message array and the templated prompt side
 * by side: every part of a message the aligner found in the prompt (replay/
 * align.h) becomes a span coloured by the message's role; a message the
 * template dropped is marked where it was looked for, a mangled one where
 * it first differs; what the logger cut is shaded. */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/markup.h"
#include "regress_html.h"

typedef struct span { size_t start, end, msg; int mangled; } span;
typedef struct mark { size_t pos, msg; int kind; } mark;
enum { MARK_DROPPED, MARK_DIFF, MARK_CUT };

typedef struct layout {
    span *s;
    size_t n_s;
    mark *m;
    size_t n_m;
} layout;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->start != y->start ? (x->start < y->start ? -1 : 1) : (x->end > y->end ? -1 : x->end < y->end);
}

static int cmp_mark(const void *a, const void *b)
{
    const mark *x = a, *y = b;
    return x->pos != y->pos ? (x->pos < y->pos ? -1 : 1) : (x->msg < y->msg ? -1 : x->msg > y->msg);
}

/* The message's state from the findings: "dropped", "mangled" or NULL. */
static const char *msg_state(const ld_cli_regress_item *it, size_t i)
{
    for (size_t k = 0; k < it->v->findings.n; k++) {
        const ld_finding *g = &it->v->findings.v[k];
        if (g->message != (int64_t)i || g->severity != LD_SEV_ERROR) continue;
        if (!strcmp(g->kind, LD_K_TEMPLATE_DROPPED) || !strcmp(g->kind, LD_K_TEMPLATE_DROPPED_TOOL_CALL))
            return "dropped";
        if (!strcmp(g->kind, LD_K_TEMPLATE_MANGLED) || !strcmp(g->kind, LD_K_TEMPLATE_ORDER))
            return "mangled";
    }
    return NULL;
}

static void add_parts(layout *l, const ld_align_msg_result *mr, size_t i, size_t len)
{
    for (size_t p = 0; p < mr->n_parts; p++) {
        const ld_align_part *pt = &mr->parts[p];
        if (pt->state != LD_ALIGN_FOUND && pt->state != LD_ALIGN_PARTLY) continue;
        if (pt->end > pt->start && pt->end <= len)
            l->s[l->n_s++] = (span){ pt->start, pt->end, i, pt->state == LD_ALIGN_PARTLY };
        if (pt->state == LD_ALIGN_PARTLY && pt->first_diff_prompt <= len)
            l->m[l->n_m++] = (mark){ pt->first_diff_prompt, i, MARK_DIFF };
    }
}

/* Spans and marks over the prompt, sorted, spans not overlapping. */
static int build_layout(layout *l, const ld_cli_regress_item *it)
{
    const ld_align_result *a = it->v->align;
    const ld_request *r = it->req;
    size_t n_parts = 0, len = r->prompt.len;
    for (size_t i = 0; a && i < a->n_msgs; i++) n_parts += a->msgs[i].n_parts;
    l->s = malloc((n_parts + 1) * sizeof *l->s);
    l->m = malloc((n_parts + it->v->findings.n + 2) * sizeof *l->m);
    l->n_s = l->n_m = 0;
    if (!l->s || !l->m) return -1;
    for (size_t i = 0; a && i < a->n_msgs; i++) add_parts(l, &a->msgs[i], i, len);
    for (size_t k = 0; k < it->v->findings.n; k++) {
        const ld_finding *g = &it->v->findings.v[k];
        if (!strcmp(g->kind, LD_K_TEMPLATE_DROPPED) && g->prompt_offset != LD_NO_VALUE && g->message >= 0)
            l->m[l->n_m++] = (mark){ (size_t)g->prompt_offset > len ? len : (size_t)g->prompt_offset,
                                     (size_t)g->message, MARK_DROPPED };
    }
    if (r->prompt.flags & LD_TEXT_TRUNCATED) l->m[l->n_m++] = (mark){ r->prompt.cut, 0, MARK_CUT };
    qsort(l->s, l->n_s, sizeof *l->s, cmp_span);
    qsort(l->m, l->n_m, sizeof *l->m, cmp_mark);
    size_t o = 0;
    for (size_t i = 0; i < l->n_s; i++)
        if (!o || l->s[i].start >= l->s[o - 1].end) l->s[o++] = l->s[i];
    l->n_s = o;
    return 0;
}

static void put_mark(FILE *f, size_t item, const mark *m, const ld_cli_regress_item *it)
{
    const ld_message *msg = m->msg < (size_t)(it->req->n_messages > 0 ? it->req->n_messages : 0)
                            ? &it->req->messages[m->msg] : NULL;
    const char *role = msg && msg->role ? msg->role : "?";
    if (m->kind == MARK_CUT) {
        fputs("<span class=\"cut\">[the logger cut the prompt here: the middle is not in the log]</span>", f);
    } else if (m->kind == MARK_DROPPED) {
        fprintf(f, "<a class=\"marker dropped\" href=\"#r%zu-m%zu\">&#x27C2; message %zu (", item, m->msg, m->msg);
        ld_cli_regress_html_text(f, role);
        fputs(") dropped: not in the prompt</a>", f);
    } else {
        fprintf(f, "<a class=\"marker diff\" href=\"#r%zu-m%zu\">&#x25B2; message %zu differs here</a>",
                item, m->msg, m->msg);
    }
}

/* prompt[a, b) as text, with the marks that fall inside it (and any left
 * behind) written at their places. */
static void emit_plain(FILE *f, size_t item, const ld_cli_regress_item *it, const layout *l, size_t *m,
                       size_t a, size_t b)
{
    const char *p = it->req->prompt.bytes;
    while (*m < l->n_m && l->m[*m].pos < b) {
        size_t at = l->m[*m].pos < a ? a : l->m[*m].pos;
        ld_cli_markup_text(f, p + a, at - a, LD_MARKUP_HTML);
        put_mark(f, item, &l->m[(*m)++], it);
        a = at;
    }
    ld_cli_markup_text(f, p + a, b - a, LD_MARKUP_HTML);
}

static void prompt_column(FILE *f, size_t item, const ld_cli_regress_item *it, const layout *l)
{
    const ld_request *r = it->req;
    fputs("<div class=\"prompt\"><h4>templated prompt</h4>", f);
    if (!r->prompt.bytes) {
        fputs("<p>(the log holds no prompt text)</p></div>\n", f);
        return;
    }
    fputs("<pre>", f);
    size_t pos = 0, m = 0;
    for (size_t i = 0; i < l->n_s; i++) {
        const span *s = &l->s[i];
        const ld_message *msg = &r->messages[s->msg];
        emit_plain(f, item, it, l, &m, pos, s->start);
        fprintf(f, "<span class=\"span %s%s\" title=\"message %zu (", ld_cli_regress_html_role_class(msg->role),
                s->mangled ? " mangled" : "", s->msg);
        ld_cli_markup_cstr(f, msg->role ? msg->role : "?", LD_MARKUP_ATTR);
        fputs(")\">", f);
        emit_plain(f, item, it, l, &m, s->start, s->end);
        fputs("</span>", f);
        pos = s->end;
    }
    emit_plain(f, item, it, l, &m, pos, r->prompt.len);
    while (m < l->n_m) put_mark(f, item, &l->m[m++], it);
    fputs("</pre></div>\n", f);
}

/* A text field with the logger's cut shaded. */
static void field_text(FILE *f, const ld_text *t)
{
    if (!t->bytes) {
        fputs(t->flags & LD_TEXT_NONE ? "<i>(null)</i>" : "<i>(no content)</i>", f);
        return;
    }
    size_t cut = (t->flags & LD_TEXT_TRUNCATED) && t->cut <= t->len ? t->cut : t->len;
    ld_cli_markup_text(f, t->bytes, cut, LD_MARKUP_HTML);
    if (cut < t->len || (t->flags & LD_TEXT_TRUNCATED))
        fputs("<span class=\"cut\">[the logger cut this text here]</span>", f);
    ld_cli_markup_text(f, t->bytes + cut, t->len - cut, LD_MARKUP_HTML);
}

static void message_box(FILE *f, size_t item, const ld_cli_regress_item *it, size_t i)
{
    const ld_message *m = &it->req->messages[i];
    const char *state = msg_state(it, i);
    fprintf(f, "<div class=\"msg %s%s%s\" id=\"r%zu-m%zu\"><div class=\"mhead\">%zu ",
            ld_cli_regress_html_role_class(m->role), state ? " " : "", state ? state : "", item, i, i);
    ld_cli_regress_html_text(f, m->role ? m->role : "(no role)");
    if (m->tool_call_id) { fputs(" &#8592; ", f); ld_cli_regress_html_text(f, m->tool_call_id); }
    if (state) fprintf(f, " <span class=\"state %s\">%s</span>", state, state);
    fputs("</div><pre>", f);
    field_text(f, &m->content);
    if (m->reasoning_content.bytes) { fputs("\n<i>reasoning:</i> ", f); field_text(f, &m->reasoning_content); }
    for (uint32_t k = 0; m->tool_calls && k < m->n_tool_calls; k++) {
        fputs("\n<i>tool call</i> ", f);
        ld_cli_regress_html_text(f, m->tool_calls[k].name ? m->tool_calls[k].name : "?");
        fputc(' ', f);
        field_text(f, &m->tool_calls[k].arguments);
    }
    fputs("</pre></div>\n", f);
}

void ld_cli_regress_html_side_by_side(FILE *f, size_t item, const ld_cli_regress_item *it)
{
    const ld_request *r = it->req;
    if (!r || r->n_messages <= 0 || !r->messages) {
        fputs("<p>(the log holds no message array for this request)</p>\n", f);
        return;
    }
    layout l;
    if (build_layout(&l, it) != 0) {
        free(l.s);
        free(l.m);
        return;
    }
    fputs("<div class=\"pair\"><div class=\"messages\"><h4>message array</h4>\n", f);
    for (size_t i = 0; i < (size_t)r->n_messages; i++) message_box(f, item, it, i);
    fputs("</div>\n", f);
    prompt_column(f, item, it, &l);
    fputs("</div>\n", f);
    free(l.s);
    free(l.m);
}
