/* align_report.c - findings derived from an alignment (see align.h for the
 * kinds).  Everything is allocated in the caller's arena. */
#include "align_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DETAIL_MAX 200

typedef struct report {
    const ld_align_msg *msgs;
    const ld_align_work *work;
    const ld_af_prompt *pr;
    ld_align_result *res;
    size_t cap;
    ld_arena *arena;
} report;

static const char *field_of(const ld_align_msg *m, const ld_align_work *w,
                            const ld_align_part *p)
{
    switch (p->kind) {
    case LD_ALIGN_PART_TOOL_NAME: return m->tool_calls[p->tool_index].name;
    case LD_ALIGN_PART_TOOL_ARGS: return m->tool_calls[p->tool_index].arguments;
    case LD_ALIGN_PART_REASONING: return w->rsn == m->reasoning ? m->reasoning : m->content;
    default: return m->content;
    }
}

/* Copy of s[off..off+len) cut to LD_ALIGN_EXCERPT bytes on UTF-8 boundaries. */
static const char *excerpt(ld_arena *a, const char *s, size_t slen, size_t off, size_t len)
{
    if (!s || off > slen) return ld_arena_memdup(a, "", 0);
    if (len > slen - off) len = slen - off;
    while (len && ((unsigned char)s[off] & 0xC0) == 0x80) off++, len--;
    if (len > LD_ALIGN_EXCERPT) {
        len = LD_ALIGN_EXCERPT;
        while (len && ((unsigned char)s[off + len] & 0xC0) == 0x80) len--;
    }
    return ld_arena_memdup(a, s + off, len);
}

/* Appends one finding; the evidence comes from part p (may be NULL). */
#if defined(__GNUC__)
__attribute__((format(printf, 8, 9)))
#endif
static ld_status add(report *rp, const char *kind, const char *sev, size_t mi, size_t pi,
                     size_t prompt_off, size_t prompt_len, const char *fmt, ...)
{
    ld_align_result *res = rp->res;
    if (res->n_findings >= rp->cap) return LD_OK; /* cannot happen: sized by the caller */
    ld_align_finding *f = &res->findings[res->n_findings];
    const ld_align_msg *m = &rp->msgs[mi];
    const ld_align_part *p = pi < res->msgs[mi].n_parts ? &res->msgs[mi].parts[pi] : NULL;
    char *d = ld_arena_alloc(rp->arena, DETAIL_MAX);
    if (!d) return LD_ERR_NOMEM;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, DETAIL_MAX, fmt, ap);
    va_end(ap);
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->severity = sev;
    f->msg_index = mi;
    f->part_index = pi;
    f->detail = d;
    f->prompt_off = prompt_off;
    f->prompt_len = prompt_len;
    const char *field = p ? field_of(m, &rp->work[mi], p) : NULL;
    size_t flen = p ? p->text_off + p->text_len : 0;
    if (p) {
        f->text_off = p->state == LD_ALIGN_PARTLY ? p->first_diff : 0;
        f->text_len = p->text_len - (f->text_off < p->text_len ? f->text_off : p->text_len);
    }
    f->text_excerpt = excerpt(rp->arena, field, flen, p ? p->text_off + f->text_off : 0,
                              f->text_len);
    f->prompt_excerpt = excerpt(rp->arena, rp->pr->p, rp->pr->len, prompt_off,
                                prompt_len ? prompt_len : LD_ALIGN_EXCERPT);
    if (!f->text_excerpt || !f->prompt_excerpt || !d) return LD_ERR_NOMEM;
    if (!strcmp(sev, LD_ALIGN_SEV_ERROR)) res->n_errors++;
    res->n_findings++;
    return LD_OK;
}

static const char *role_of(const ld_align_msg *m) { return m->role ? m->role : "?"; }

/* A part the logger's cut keeps from view: the log cannot say whether the
 * template kept it, so the request is not ok (verdict log). */
static ld_status report_hidden(report *rp, size_t mi, size_t pi, size_t expect)
{
    const ld_align_part *p = &rp->res->msgs[mi].parts[pi];
    if (rp->pr->has_cut)
        return add(rp, LD_ALIGN_MESSAGE_HIDDEN, LD_ALIGN_SEV_ERROR, mi, pi, rp->pr->cut, 0,
                   "message %zu (%s): %s (%zu bytes) lies where the logger cut the prompt (at "
                   "byte %zu): whether the template kept it cannot be told from this log", mi,
                   role_of(&rp->msgs[mi]), ld_align_part_kind_name(p->kind), p->text_len,
                   rp->pr->cut);
    return add(rp, LD_ALIGN_MESSAGE_HIDDEN, LD_ALIGN_SEV_ERROR, mi, pi, expect, 0,
               "message %zu (%s): the logger cut its %s (%zu bytes) in the message array and "
               "only one end of it is in the prompt: the log cannot tell what became of the rest",
               mi, role_of(&rp->msgs[mi]), ld_align_part_kind_name(p->kind), p->text_len);
}

/* dropped / mangled content; reasoning-only turns that lost the reasoning. */
static ld_status report_primary(report *rp, const ld_align_work *w, size_t mi, size_t expect)
{
    const ld_align_msg *m = &rp->msgs[mi];
    const ld_align_msg_result *r = &rp->res->msgs[mi];
    if (w->primary >= 0) {
        const ld_align_part *p = &r->parts[w->primary];
        const char *what = ld_align_part_kind_name(p->kind);
        if (p->state == LD_ALIGN_ABSENT)
            return add(rp, LD_ALIGN_DROPPED_MESSAGE, LD_ALIGN_SEV_ERROR, mi, (size_t)w->primary,
                       expect, 0, "message %zu (%s): %s (%zu bytes) is not in the prompt%s", mi,
                       role_of(m), what, p->text_len,
                       r->fallback_skipped ? " (search budget exhausted)" : "");
        if (p->state == LD_ALIGN_UNKNOWN) return report_hidden(rp, mi, (size_t)w->primary, expect);
        if (p->state == LD_ALIGN_PARTLY)
            return add(rp, LD_ALIGN_MANGLED_MESSAGE, LD_ALIGN_SEV_ERROR, mi, (size_t)w->primary,
                       p->first_diff_prompt, 0,
                       "message %zu (%s): %s differs from the prompt at byte %zu of %zu", mi,
                       role_of(m), what, p->first_diff, p->text_len);
        return LD_OK;
    }
    if (w->reasoning < 0 || m->n_tool_calls) return LD_OK;
    const ld_align_part *p = &r->parts[w->reasoning];
    if (p->state == LD_ALIGN_UNKNOWN) return report_hidden(rp, mi, (size_t)w->reasoning, expect);
    if (p->state == LD_ALIGN_ABSENT)
        return add(rp, LD_ALIGN_DROPPED_MESSAGE, LD_ALIGN_SEV_ERROR, mi, (size_t)w->reasoning,
                   expect, 0, "message %zu (%s): its only text, reasoning (%zu bytes), is not in "
                   "the prompt: the model saw an empty turn", mi, role_of(m), p->text_len);
    return LD_OK;
}

static ld_status report_secondary(report *rp, const ld_align_work *w, size_t mi, size_t expect)
{
    const ld_align_msg *m = &rp->msgs[mi];
    const ld_align_msg_result *r = &rp->res->msgs[mi];
    for (size_t i = 0; i < r->n_parts; i++) {
        const ld_align_part *p = &r->parts[i];
        if ((int)i == w->primary) continue;
        if (p->state == LD_ALIGN_PARTLY)
            LD_TRY(add(rp, LD_ALIGN_MANGLED_MESSAGE, LD_ALIGN_SEV_ERROR, mi, i,
                       p->first_diff_prompt, 0, "message %zu (%s): %s differs from the prompt "
                       "at byte %zu of %zu", mi, role_of(m), ld_align_part_kind_name(p->kind),
                       p->first_diff, p->text_len));
        if (p->kind == LD_ALIGN_PART_REASONING && p->state == LD_ALIGN_ABSENT && r->found)
            LD_TRY(add(rp, LD_ALIGN_REASONING_STRIPPED, LD_ALIGN_SEV_INFO, mi, i, r->start,
                       r->end - r->start, "message %zu (%s): reasoning (%zu bytes) not in the "
                       "prompt, visible content kept", mi, role_of(m), p->text_len));
        if (p->kind == LD_ALIGN_PART_TOOL_NAME || p->kind == LD_ALIGN_PART_TOOL_ARGS) {
            size_t k = p->tool_index, j = i;
            int absent = 1, hidden = 1;
            while (j < r->n_parts && r->parts[j].kind != LD_ALIGN_PART_REASONING &&
                   r->parts[j].tool_index == k &&
                   (r->parts[j].kind == LD_ALIGN_PART_TOOL_NAME ||
                    r->parts[j].kind == LD_ALIGN_PART_TOOL_ARGS)) {
                if (r->parts[j].state != LD_ALIGN_ABSENT) absent = 0;
                if (r->parts[j].state != LD_ALIGN_UNKNOWN) hidden = 0;
                j++;
            }
            if (absent)
                LD_TRY(add(rp, LD_ALIGN_DROPPED_TOOL_CALL, LD_ALIGN_SEV_ERROR, mi, i, expect, 0,
                           "message %zu (%s): tool call %zu is not in the prompt", mi,
                           role_of(m), k));
            else if (hidden && (w->primary < 0 ||
                                r->parts[w->primary].state != LD_ALIGN_UNKNOWN))
                LD_TRY(report_hidden(rp, mi, i, expect));
            i = j - 1;
        }
    }
    return LD_OK;
}

ld_status ld_align_report(const ld_align_msg *msgs, const ld_align_work *work,
                          const ld_af_prompt *pr, ld_align_result *res, size_t cap,
                          ld_arena *arena, ld_error *err)
{
    report rp = {msgs, work, pr, res, cap, arena};
    size_t expect = 0, max_start = 0, max_from = 0;
    int any = 0;
    for (size_t i = 0; i < res->n_msgs; i++) {
        const ld_align_msg_result *r = &res->msgs[i];
        ld_status st = report_primary(&rp, &work[i], i, expect);
        if (st == LD_OK) st = report_secondary(&rp, &work[i], i, expect);
        if (st == LD_OK && r->found && !work[i].is_system) {
            if (any && r->start < max_start)
                st = add(&rp, LD_ALIGN_ORDER, LD_ALIGN_SEV_ERROR, i,
                         work[i].primary >= 0 ? (size_t)work[i].primary : 0, r->start,
                         r->end - r->start, "message %zu (%s) is in the prompt before message "
                         "%zu", i, role_of(&msgs[i]), max_from);
            if (!any || r->start >= max_start) {
                max_start = r->start;
                max_from = i;
            }
            any = 1;
            if (r->end > expect) expect = r->end;
        }
        if (st != LD_OK) return LD_FAIL(err, st, 0, "out of memory for alignment findings");
    }
    return LD_OK;
}

const char *ld_align_part_kind_name(ld_align_part_kind k)
{
    static const char *const names[] = {"content", "reasoning", "tool_name", "tool_arguments",
                                        "tool_result"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}
