/* pd.c - see pd.h. */
#include "pd.h"

#include <stdio.h>
#include <string.h>

#define EXCERPT_CHARS 60

static size_t first_diff(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* 1 when both sides hold the whole text (not cut, abbreviated or dropped) */
static int whole(const ld_text *t)
{
    return t->bytes && (t->flags & LD_TEXT_PRESENT) &&
           !(t->flags & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED | LD_TEXT_HEAD_ONLY));
}

static int same_text(const ld_text *a, const ld_text *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->bytes, b->bytes, a->len));
}

/* The prompts' first difference as evidence (decode side = "prompt", prefill side = "array"). */
static void prompt_evidence(ld_finding *f, const ld_request *d, const ld_request *p, ld_arena *a)
{
    if (!whole(&d->prompt) || !whole(&p->prompt)) return;
    size_t at = first_diff(d->prompt.bytes, d->prompt.len, p->prompt.bytes, p->prompt.len);
    f->first_diff = (int64_t)at;
    f->prompt_offset = (int64_t)at;
    f->expected_len = (int64_t)d->prompt.len;
    f->actual_len = (int64_t)p->prompt.len;
    f->prompt_excerpt = ld_excerpt(a, d->prompt.bytes, d->prompt.len, at, EXCERPT_CHARS);
    f->array_excerpt = ld_excerpt(a, p->prompt.bytes, p->prompt.len, at, EXCERPT_CHARS);
}

/* The first message the two arrays hold differently; -1 when none is found
 * in the texts kept (the difference is elsewhere: a role, a tool call). */
static int64_t first_message_diff(const ld_request *d, const ld_request *p)
{
    if (!d->messages || !p->messages) return -1;
    int64_t n = d->n_messages < p->n_messages ? d->n_messages : p->n_messages;
    for (int64_t i = 0; i < n; i++) {
        const ld_message *x = &d->messages[i], *y = &p->messages[i];
        if (!x->role != !y->role || (x->role && strcmp(x->role, y->role))) return i;
        if (whole(&x->content) && whole(&y->content) && !same_text(&x->content, &y->content)) return i;
    }
    return d->n_messages != p->n_messages ? n : -1;
}

static const char *what_differs(unsigned pd, char *buf, size_t cap)
{
    static const struct { unsigned bit; const char *name; } w[] = {
        { LD_PD_DIFF_MESSAGES, "message arrays" }, { LD_PD_DIFF_PROMPT, "templated prompts" },
        { LD_PD_DIFF_IDS, "input ids" } };
    size_t o = 0, k = 0, n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) n += (pd & w[i].bit) != 0;
    for (size_t i = 0; i < sizeof w / sizeof w[0] && o < cap; i++)
        if (pd & w[i].bit) {
            k++;
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", k == 1 ? "" : k == n ? " and " : ", ", w[i].name);
        }
    return buf;
}

ld_status ld_pd_check(const ld_request *r, ld_arena *arena, ld_findings *out, ld_error *err)
{
    if (!(r->pd & LD_PD_JOINED) || !(r->pd & LD_PD_DIFF) || !r->peer) return LD_OK;
    const ld_request *p = r->peer;
    const ld_source *ps = (p->seen & LD_PART_BIT(LD_PART_FINISH)) ? &p->src[LD_PART_FINISH]
                                                                   : &p->src[LD_PART_RECEIVE];
    int64_t msg = (r->pd & LD_PD_DIFF_MESSAGES) ? first_message_diff(r, p) : -1;
    char what[96];
    ld_finding *f = ld_findings_add(
        out, arena, LD_K_TEMPLATE_SERVERS_DIFFER, LD_SEV_ERROR, msg,
        "the prefill server (rid %s, %s:%llu) and the decode server logged different %s for this one "
        "request: two builds or two templates serve it",
        p->rid ? p->rid : "-", ps->member ? ps->member : "-", (unsigned long long)ps->line,
        what_differs(r->pd, what, sizeof what));
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
    f->related_rid = p->rid;
    if (r->pd & LD_PD_DIFF_PROMPT) prompt_evidence(f, r, p, arena);
    return LD_OK;
}
