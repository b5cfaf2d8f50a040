/* align.c - align a message array with the templated prompt (see align.h).
 *
 * Two passes.  Pass 1 anchors each message by its primary part (visible
 * content, or a tool result), searching forward from the previous anchor
 * within a window, then the rest of the prompt, then (out of order) the part
 * before the cursor; the last two are charged to a budget that keeps the
 * whole run linear.  Pass 2 walks the messages again and looks for the
 * secondary parts (reasoning, tool-call names and arguments) only between the
 * neighbouring in-order anchors, so a name or value that also occurs in
 * another turn is not taken for this one.
 */
#include "align_internal.h"

#include <stdlib.h>
#include <string.h>

#define NEAR_WINDOW (64u * 1024u) /* first forward search: this much + 4x the text */

static const char THINK_OPEN[] = "<think>";
static const char THINK_CLOSE[] = "</think>";

static int role_is(const char *role, const char *name)
{
    return role && strcmp(role, name) == 0;
}

static int nonblank(const char *t, size_t len)
{
    size_t off, l;
    if (!t) return 0;
    ld_af_strip(t, len, &off, &l);
    return l > 0;
}

/* Visible text and reasoning of one message (split at the last </think>). */
static void split_msg(const ld_align_msg *m, ld_align_work *w)
{
    const char *c = m->content_present ? m->content : NULL;
    size_t len = c ? m->content_len : 0;
    memset(w, 0, sizeof *w);
    w->primary = w->reasoning = -1;
    w->is_system = role_is(m->role, "system") || role_is(m->role, "developer");
    w->vis = c;
    w->vis_len = len;
    const char *close = c && !role_is(m->role, "tool")
                            ? ld_af_last(c, len, THINK_CLOSE, sizeof THINK_CLOSE - 1) : NULL;
    if (close) {
        size_t k = (size_t)(close - c);
        const char *open = ld_af_mem(c, k, THINK_OPEN, sizeof THINK_OPEN - 1);
        size_t b = open ? (size_t)(open - c) + sizeof THINK_OPEN - 1 : 0;
        w->rsn = c + b;
        w->rsn_len = k - b;
        w->vis = close + sizeof THINK_CLOSE - 1;
        w->vis_len = len - k - (sizeof THINK_CLOSE - 1);
        w->has_think_only = !nonblank(w->vis, w->vis_len);
    }
    if (m->reasoning && nonblank(m->reasoning, m->reasoning_len)) {
        w->rsn = m->reasoning;
        w->rsn_len = m->reasoning_len;
    }
    if (c && m->content_truncated && m->content_cut < len) {
        const char *cut = c + m->content_cut;
        if (cut > w->vis && cut < w->vis + w->vis_len) {
            w->vis_cut = 1;
            w->vis_cut_at = (size_t)(cut - w->vis);
        }
    }
}

static ld_align_part *add_part(ld_align_msg_result *r, ld_align_part_kind kind, size_t tool,
                               const char *field, const char *text, size_t len)
{
    ld_align_part *p = &r->parts[r->n_parts++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->tool_index = tool;
    p->text_off = field && text ? (size_t)(text - field) : 0;
    p->text_len = len;
    p->state = LD_ALIGN_ABSENT;
    return p;
}

static ld_status prep_msg(const ld_align_msg *m, ld_align_work *w, ld_align_msg_result *r,
                          ld_arena *arena, ld_error *err)
{
    split_msg(m, w);
    size_t cap = 2 + 2 * m->n_tool_calls;
    memset(r, 0, sizeof *r);
    r->parts = ld_arena_alloc(arena, cap * sizeof *r->parts);
    if (!r->parts) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for alignment parts");
    if (nonblank(w->vis, w->vis_len)) {
        w->primary = (int)r->n_parts;
        add_part(r, role_is(m->role, "tool") ? LD_ALIGN_PART_TOOL_RESULT : LD_ALIGN_PART_CONTENT,
                 0, m->content, w->vis, w->vis_len);
    }
    if (nonblank(w->rsn, w->rsn_len)) {
        w->reasoning = (int)r->n_parts;
        const char *field = w->rsn == m->reasoning ? m->reasoning : m->content;
        add_part(r, LD_ALIGN_PART_REASONING, 0, field, w->rsn, w->rsn_len);
    }
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const ld_align_tool_call *tc = &m->tool_calls[k];
        if (tc->name && tc->name_len)
            add_part(r, LD_ALIGN_PART_TOOL_NAME, k, tc->name, tc->name, tc->name_len);
        if (tc->arguments && tc->arguments_len)
            add_part(r, LD_ALIGN_PART_TOOL_ARGS, k, tc->arguments, tc->arguments,
                     tc->arguments_len);
    }
    return LD_OK;
}

static void hit_to_part(const ld_af_hit *h, ld_align_part *p)
{
    p->state = h->state;
    p->how = h->how;
    p->start = h->start;
    p->end = h->end;
    p->first_diff = h->first_diff;
    p->first_diff_prompt = h->first_diff_prompt;
    p->n_pieces = h->n_pieces;
    memcpy(p->pieces, h->pieces, sizeof p->pieces);
}

/* The primary text, honouring a logger cut inside it: head and tail are
 * searched separately.  Both found: FOUND/CUT.  One, with the prompt's cut
 * where the other would be: FOUND/CUT; with a whole prompt: PARTLY (the
 * logged other end is not there); else UNKNOWN. */
static int find_primary(const ld_af_prompt *pr, size_t lo, size_t hi, const ld_align_work *w,
                        unsigned flags, ld_af_hit *h)
{
    if (!w->vis_cut) return ld_af_find(pr, lo, hi, w->vis, w->vis_len, flags, h);
    ld_af_hit a, b;
    if (ld_af_find(pr, lo, hi, w->vis, w->vis_cut_at, 0, &a) < 0) return -1;
    size_t from = a.state == LD_ALIGN_FOUND ? a.end : lo;
    const char *tail = w->vis + w->vis_cut_at;
    size_t tail_len = w->vis_len - w->vis_cut_at;
    if (ld_af_find(pr, from, hi, tail, tail_len, 0, &b) < 0) return -1;
    int fa = a.state == LD_ALIGN_FOUND, fb = b.state == LD_ALIGN_FOUND;
    /* the middle the logger left out may be long: the tail can lie past the window */
    if (fa && !fb && hi < pr->len) {
        if (ld_af_find(pr, from, pr->len, tail, tail_len, 0, &b) < 0) return -1;
        fb = b.state == LD_ALIGN_FOUND;
    }
    *h = fa ? a : b;
    if (fa && fb) {
        h->how = LD_ALIGN_HOW_CUT;
        h->end = b.end;
    } else if (fa || fb) {
        size_t gap_lo = fa ? a.end : lo, gap_hi = fb ? b.start : hi;
        if (pr->has_cut && gap_lo <= pr->cut && pr->cut <= gap_hi) {
            h->how = LD_ALIGN_HOW_CUT; /* the other end lies in the prompt's cut */
        } else if (!pr->has_cut) { /* the logged other end is not in a whole prompt */
            h->state = LD_ALIGN_PARTLY;
            h->how = LD_ALIGN_HOW_ANCHORS;
            h->first_diff = fa ? (size_t)(tail - w->vis) : 0;
            h->first_diff_prompt = fa ? a.end : b.start;
        } else {
            h->state = LD_ALIGN_UNKNOWN;
        }
    }
    return 0;
}

typedef struct pass1 {
    const ld_af_prompt *pr;
    size_t cursor;
    size_t budget;      /* bytes left for searches beyond the near window */
} pass1;

static int charge(pass1 *s, size_t lo, size_t hi)
{
    size_t n = hi > lo ? hi - lo : 0;
    if (n > s->budget) return 0;
    s->budget -= n;
    return 1;
}

/* Pass 1 for one message: returns -1 on allocation failure. */
static int anchor_msg(pass1 *s, const ld_align_work *w, ld_align_msg_result *r)
{
    ld_af_hit h;
    size_t len = s->pr->len;
    unsigned fl = LD_AF_PARTIAL | (r->parts[w->primary].kind == LD_ALIGN_PART_TOOL_RESULT
                                       ? LD_AF_JSON : 0);
    if (w->is_system) {
        if (!charge(s, 0, len)) { r->fallback_skipped = 1; return 0; }
        if (find_primary(s->pr, 0, len, w, fl, &h) < 0) return -1;
        hit_to_part(&h, &r->parts[w->primary]);
        return 0;
    }
    size_t near = s->cursor + NEAR_WINDOW + 4 * w->vis_len;
    if (near > len) near = len;
    if (find_primary(s->pr, s->cursor, near, w, fl, &h) < 0) return -1;
    if (h.state == LD_ALIGN_ABSENT && near < len) {
        size_t from = near > w->vis_len ? near - w->vis_len : 0;
        if (from < s->cursor) from = s->cursor;
        if (!charge(s, from, len)) r->fallback_skipped = 1;
        else if (find_primary(s->pr, from, len, w, fl, &h) < 0) return -1;
    }
    if (h.state == LD_ALIGN_FOUND || h.state == LD_ALIGN_PARTLY) {
        r->in_order = 1;
        s->cursor = h.end;
    } else if (h.state == LD_ALIGN_ABSENT && s->cursor > 0 && !r->fallback_skipped) {
        size_t hi = s->cursor + w->vis_len < len ? s->cursor + w->vis_len : len;
        if (!charge(s, 0, hi)) r->fallback_skipped = 1;
        else if (find_primary(s->pr, 0, hi, w, fl, &h) < 0) return -1;
    }
    hit_to_part(&h, &r->parts[w->primary]);
    return 0;
}

/* In-order anchors, sorted by position: the neighbours of a position. */
typedef struct anchors {
    const ld_align_msg_result *res;
    const ld_align_work *work;
    size_t *idx;
    size_t n;
} anchors;

static const ld_align_part *anchor_of(const anchors *a, size_t k)
{
    size_t i = a->idx[k];
    return &a->res[i].parts[a->work[i].primary];
}

/* End of the last in-order anchor ending at or before pos (0 if none). */
static size_t anchor_before(const anchors *a, size_t pos)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (anchor_of(a, mid)->end <= pos) lo = mid + 1;
        else hi = mid;
    }
    return lo ? anchor_of(a, lo - 1)->end : 0;
}

/* Start of the first in-order anchor starting at or after pos (len if none). */
static size_t anchor_after(const anchors *a, size_t pos, size_t len)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (anchor_of(a, mid)->start < pos) lo = mid + 1;
        else hi = mid;
    }
    return lo < a->n ? anchor_of(a, lo)->start : len;
}

static int is_hit(const ld_align_part *p)
{
    return p->state == LD_ALIGN_FOUND || p->state == LD_ALIGN_PARTLY;
}

static void mark_hidden(const ld_af_prompt *pr, size_t lo, size_t hi, ld_align_part *p)
{
    if (p->state == LD_ALIGN_ABSENT && pr->has_cut && lo <= pr->cut && pr->cut <= hi)
        p->state = LD_ALIGN_UNKNOWN;
}

/* Pass 2 for one message's reasoning and tool calls inside [lo,hi). */
static int find_secondary(const ld_af_prompt *pr, const ld_align_msg *m, const ld_align_work *w,
                          ld_align_msg_result *r, size_t lo, size_t hi)
{
    ld_af_hit h;
    const ld_align_part *prim = w->primary >= 0 ? &r->parts[w->primary] : NULL;
    if (w->reasoning >= 0) {
        size_t rhi = prim && is_hit(prim) && prim->start >= lo ? prim->start : hi;
        if (ld_af_find(pr, lo, rhi, w->rsn, w->rsn_len, LD_AF_PARTIAL, &h) < 0) return -1;
        hit_to_part(&h, &r->parts[w->reasoning]);
        mark_hidden(pr, lo, rhi, &r->parts[w->reasoning]);
    }
    size_t pos = lo;
    for (size_t i = 0; i < r->n_parts; i++) {
        ld_align_part *p = &r->parts[i];
        if (p->kind != LD_ALIGN_PART_TOOL_ARGS && p->kind != LD_ALIGN_PART_TOOL_NAME) continue;
        const ld_align_tool_call *tc = &m->tool_calls[p->tool_index];
        ld_align_part *args = p->kind == LD_ALIGN_PART_TOOL_ARGS ? p
                              : (i + 1 < r->n_parts && r->parts[i + 1].kind == LD_ALIGN_PART_TOOL_ARGS
                                     ? &r->parts[i + 1] : NULL);
        ld_align_part *name = p->kind == LD_ALIGN_PART_TOOL_NAME ? p : NULL;
        if (args) {
            if (ld_af_find(pr, pos, hi, tc->arguments, tc->arguments_len,
                           LD_AF_JSON | LD_AF_VALUES, &h) < 0) return -1;
            hit_to_part(&h, args);
            mark_hidden(pr, pos, hi, args);
        }
        if (name) { /* templates print the name before the arguments */
            size_t nhi = args && is_hit(args) ? args->start : hi;
            if (ld_af_find(pr, pos, nhi, tc->name, tc->name_len, 0, &h) < 0) return -1;
            hit_to_part(&h, name);
            mark_hidden(pr, pos, nhi, name);
        }
        if (args && is_hit(args)) pos = args->end;
        else if (name && is_hit(name)) pos = name->end;
        if (name && args) i++;
    }
    return 0;
}

static void msg_span(ld_align_msg_result *r)
{
    for (size_t i = 0; i < r->n_parts; i++) {
        const ld_align_part *p = &r->parts[i];
        if (!is_hit(p)) continue;
        if (!r->found || p->start < r->start) r->start = p->start;
        if (!r->found || p->end > r->end) r->end = p->end;
        r->found = 1;
    }
}

static int pass2(const ld_af_prompt *pr, const ld_align_msg *msgs, const ld_align_work *work,
                 ld_align_msg_result *res, size_t n, const anchors *a)
{
    size_t cursor = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        const ld_align_work *w = &work[i];
        ld_align_msg_result *r = &res[i];
        ld_align_part *prim = w->primary >= 0 ? &r->parts[w->primary] : NULL;
        while (k < a->n && a->idx[k] <= i) k++;
        size_t next = k < a->n ? anchor_of(a, k)->start : pr->len;
        size_t lo = cursor, hi = next;
        int ordered = !w->is_system && (!prim || r->in_order || !is_hit(prim));
        if (!ordered) {
            if (prim && is_hit(prim)) {
                lo = anchor_before(a, prim->start);
                hi = anchor_after(a, prim->end, pr->len);
            } else {
                lo = hi = 0; /* a system message that is not there */
            }
        }
        if (hi < lo) hi = lo;
        if (prim && !r->fallback_skipped) mark_hidden(pr, lo, hi, prim);
        if (find_secondary(pr, &msgs[i], w, r, lo, hi) < 0) return -1;
        msg_span(r);
        if (ordered && r->found && r->end > cursor) cursor = r->end;
    }
    return 0;
}

static ld_status run_passes(const ld_align_msg *msgs, size_t n, const ld_af_prompt *pr,
                            ld_align_work *work, ld_align_msg_result *res, ld_error *err)
{
    pass1 s = {pr, 0, LD_ALIGN_FALLBACK_FACTOR * pr->len + (1u << 20)};
    for (size_t i = 0; i < n; i++)
        if (work[i].primary >= 0 && anchor_msg(&s, &work[i], &res[i]) < 0)
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory while aligning message %zu", i);
    anchors a = {res, work, malloc((n ? n : 1) * sizeof(size_t)), 0};
    if (!a.idx) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for alignment anchors");
    for (size_t i = 0; i < n; i++)
        if (work[i].primary >= 0 && res[i].in_order) a.idx[a.n++] = i;
    int rc = pass2(pr, msgs, work, res, n, &a);
    free(a.idx);
    if (rc < 0) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory while aligning tool calls");
    return LD_OK;
}

ld_status ld_align_run(const ld_align_msg *msgs, size_t n, const char *prompt,
                       size_t prompt_len, const ld_align_prompt_info *info,
                       ld_arena *arena, ld_align_result **out, ld_error *err)
{
    if ((!msgs && n) || (!prompt && prompt_len) || !arena || !out)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ld_align_run: null argument");
    ld_af_prompt pr = {prompt ? prompt : "", prompt_len, 0, 0};
    if (info && info->truncated && info->cut <= prompt_len) {
        pr.has_cut = 1;
        pr.cut = info->cut;
    }
    ld_align_result *res = ld_arena_alloc(arena, sizeof *res);
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) cap += 3 + 3 * msgs[i].n_tool_calls;
    if (res) memset(res, 0, sizeof *res);
    if (res) res->msgs = ld_arena_alloc(arena, (n ? n : 1) * sizeof *res->msgs);
    if (res && res->msgs) res->findings = ld_arena_alloc(arena, (cap ? cap : 1) * sizeof *res->findings);
    ld_align_work *work = malloc((n ? n : 1) * sizeof *work);
    ld_status st = LD_OK;
    if (!res || !res->msgs || !res->findings || !work)
        st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the alignment of %zu messages", n);
    for (size_t i = 0; st == LD_OK && i < n; i++)
        st = prep_msg(&msgs[i], &work[i], &res->msgs[i], arena, err);
    if (st == LD_OK) {
        res->n_msgs = n;
        st = run_passes(msgs, n, &pr, work, res->msgs, err);
    }
    if (st == LD_OK) st = ld_align_report(msgs, work, &pr, res, cap, arena, err);
    free(work);
    if (st == LD_OK) *out = res;
    return st;
}

const char *ld_align_state_name(ld_align_state s)
{
    switch (s) {
    case LD_ALIGN_FOUND: return "found";
    case LD_ALIGN_PARTLY: return "partly";
    case LD_ALIGN_ABSENT: return "absent";
    case LD_ALIGN_UNKNOWN: return "unknown";
    }
    return "?";
}

const char *ld_align_how_name(ld_align_how h)
{
    static const char *const names[] = {"none", "exact", "stripped", "escaped", "json",
                                        "json_escaped", "values", "cut", "anchors"};
    return (unsigned)h < sizeof names / sizeof names[0] ? names[h] : "?";
}

