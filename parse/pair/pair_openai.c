/* pair_openai.c - joining `Receive OpenAI` lines to their requests.
 *
 * The OpenAI line carries no rid.  It is logged before its `Receive:` line,
 * but with concurrent requests several OpenAI lines can come before their
 * Receive lines (the handler logs, then templates and tokenizes while other
 * requests' lines interleave).  So:
 *   1. OpenAI lines queue per member, in log order (the pending list);
 *   2. a `Receive:` takes the oldest queued line of its member tentatively
 *      (requests mostly reach the tokenizer in the order they arrived);
 *   3. the first line of the request that carries the templated prompt checks
 *      the join by content: the OpenAI line's last user message must occur in
 *      the prompt.  On a mismatch the right line is looked for among the
 *      queued ones and among the tentative joins of the member's other open
 *      requests, and the two are swapped;
 *   4. a request emitted with no prompt text to check keeps its FIFO join and
 *      is flagged unconfirmed;
 *   5. when no line fits, a prompt that lost the final message (the very
 *      fault logdiff looks for) still holds the payload's earlier user turn:
 *      the tentative join is kept on that evidence, flagged ambiguous when
 *      another line of the member could have been the one.
 */
#include <stdlib.h>
#include <string.h>

#include "ld_memfind.h"
#include "pair_internal.h"

enum {
    LD_PAIR_MAX_PENDING_OPENAI = 4096,
    TAIL_PROBE = 64,
    /* template text that may follow the final message: end-of-turn tokens,
     * the generation prompt, a thinking preamble */
    END_SLACK = 2048
};

/* The last `window` bytes of a text (all of it when shorter). */
static const char *last_bytes(const char *s, size_t n, size_t window, size_t *out_n)
{
    *out_n = n < window ? n : window;
    return s + n - *out_n;
}

/* 1 when the prompt (head h, and tail t when the logger cut its middle)
 * holds q's identifying text: near the prompt's end when it is the final
 * message (an earlier turn of the same conversation would fit anywhere).
 * A message that straddles the logger's cut is recognised by its last
 * TAIL_PROBE bytes. */
static int prompt_has_user(const ld_pending_openai *q, const char *h, size_t hn,
                           const char *t, size_t tn)
{
    if (!q->user_text) return 0;
    const char *end_part = t ? t : h;
    size_t end_n = t ? tn : hn, wn;
    if (q->anchored) {
        const char *w = last_bytes(end_part, end_n, q->user_len + END_SLACK, &wn);
        if (ld_memfind(w, wn, q->user_text, q->user_len)) return 1;
        if (!t || q->user_len <= TAIL_PROBE) return 0;
        w = last_bytes(t, tn, TAIL_PROBE + END_SLACK, &wn);
        return ld_memfind(w, wn, q->user_text + q->user_len - TAIL_PROBE, TAIL_PROBE) != NULL;
    }
    if (ld_memfind(h, hn, q->user_text, q->user_len)) return 1;
    if (!t) return 0;
    if (ld_memfind(t, tn, q->user_text, q->user_len)) return 1;
    if (q->user_len <= TAIL_PROBE) return 0;
    return ld_memfind(t, tn, q->user_text + q->user_len - TAIL_PROBE, TAIL_PROBE) ||
           ld_memfind(h, hn, q->user_text, TAIL_PROBE);
}

void ld_pair_free_openai(ld_pending_openai *q)
{
    if (!q) return;
    ld_request_free(q->r);
    free(q->member);
    free(q);
}

static uint64_t openai_line(const ld_pending_openai *q)
{
    return q->r->src[LD_PART_OPENAI].line;
}

/* Puts q back in log order among its member's queued lines. */
static void reinsert(ld_pairer *p, ld_pending_openai *q)
{
    ld_pending_openai **pp = &p->pending;
    while (*pp && !(!strcmp((*pp)->member, q->member) && openai_line(*pp) > openai_line(q)))
        pp = &(*pp)->next;
    q->next = *pp;
    *pp = q;
}

ld_status ld_pair_add_openai(ld_pairer *p, ld_pending_openai *q)
{
    size_t same = 0;
    ld_pending_openai **pp = &p->pending;
    for (; *pp; pp = &(*pp)->next) same += !strcmp((*pp)->member, q->member);
    q->next = NULL;
    *pp = q;
    /* a member whose OpenAI lines never find a Receive must not grow
     * without bound: the oldest goes out as an OpenAI-only record */
    if (same >= LD_PAIR_MAX_PENDING_OPENAI) {
        ld_pending_openai *old = ld_pair_take_oldest_openai(p, q->member);
        if (old) {
            old->next = p->pending;
            p->pending = old;
            ld_pair_flush_first(p);
        }
    }
    return LD_OK;
}

ld_pending_openai *ld_pair_take_oldest_openai(ld_pairer *p, const char *member)
{
    for (ld_pending_openai **pp = &p->pending; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->member, member)) continue;
        ld_pending_openai *q = *pp;
        *pp = q->next;
        q->next = NULL;
        return q;
    }
    return NULL;
}

/* The queued line of o's member, logged before o's Receive, that fits the
 * prompt; unlinked from the queue.  *out_more = another one fits too. */
static ld_pending_openai *take_fitting(ld_pairer *p, const ld_open *o, const char *member,
                                       const char *h, size_t hn, const char *t, size_t tn,
                                       int *out_more)
{
    const ld_source *recv = &o->r->src[LD_PART_RECEIVE];
    ld_pending_openai **found = NULL;
    *out_more = 0;
    for (ld_pending_openai **pp = &p->pending; *pp; pp = &(*pp)->next) {
        ld_pending_openai *q = *pp;
        if (strcmp(q->member, member)) continue;
        if (recv->line && o->queue && !strcmp(o->queue, member) &&
            openai_line(q) > recv->line)
            continue;
        if (!prompt_has_user(q, h, hn, t, tn)) continue;
        if (found) { *out_more = (*found)->n_messages != q->n_messages; break; }
        found = pp;
    }
    if (!found) return NULL;
    ld_pending_openai *q = *found;
    *found = q->next;
    q->next = NULL;
    return q;
}

/* 1 when another OpenAI line of the member could belong to o: one queued,
 * or the tentative line of another open request. */
static int other_candidates(const ld_pairer *p, const ld_open *o, const char *member)
{
    for (const ld_pending_openai *q = p->pending; q; q = q->next)
        if (!strcmp(q->member, member)) return 1;
    for (const ld_open *x = p->oldest; x; x = x->next)
        if (x != o && x->q && !strcmp(x->q->member, member)) return 1;
    return 0;
}

/* Another open request of the member whose tentative line fits the prompt. */
static ld_open *other_fitting(ld_pairer *p, const ld_open *o, const char *member,
                              const char *h, size_t hn, const char *t, size_t tn)
{
    for (ld_open *x = p->oldest; x; x = x->next)
        if (x != o && x->q && !strcmp(x->q->member, member) &&
            prompt_has_user(x->q, h, hn, t, tn))
            return x;
    return NULL;
}

static ld_status apply(ld_pairer *p, ld_open *o, ld_error *err)
{
    ld_pending_openai *q = o->q;
    o->q = NULL;
    ld_status st = ld_pair_apply_openai(p, q, o->r, 1, err);
    ld_pair_free_openai(q);
    return st;
}

ld_status ld_pair_openai_check(ld_pairer *p, ld_open *o, const char *h, size_t hn,
                               const char *t, size_t tn, ld_error *err)
{
    if (o->r->seen & LD_PART_BIT(LD_PART_OPENAI)) return LD_OK;
    if (!o->q && !(o->r->seen & LD_PART_BIT(LD_PART_RECEIVE))) return LD_OK;
    if (o->q && !o->q->user_text) return LD_OK; /* nothing to check with */
    o->checked = 1;
    if (o->q && prompt_has_user(o->q, h, hn, t, tn)) {
        o->confirmed = 1;
        return apply(p, o, err);
    }
    const char *member = o->q ? o->q->member : o->queue;
    if (!member) return LD_OK;
    int more = 0;
    ld_pending_openai *fit = take_fitting(p, o, member, h, hn, t, tn, &more);
    if (fit) {
        if (o->q) reinsert(p, o->q);
        o->q = fit;
        o->confirmed = 1;
        o->ambiguous = more;
        return apply(p, o, err);
    }
    ld_open *x = other_fitting(p, o, member, h, hn, t, tn);
    if (x) {
        ld_pending_openai *mine = o->q;
        o->q = x->q;
        x->q = mine;
        o->confirmed = 1;
        return apply(p, o, err);
    }
    if (o->q && o->q->anchored && o->q->earlier_user &&
        (ld_memfind(h, hn, o->q->earlier_user, o->q->earlier_user_len) ||
         (t && ld_memfind(t, tn, o->q->earlier_user, o->q->earlier_user_len)))) {
        o->ambiguous = other_candidates(p, o, member);
        o->confirmed = !o->ambiguous; /* by its earlier turn, and no rival */
        return apply(p, o, err);
    }
    /* no OpenAI line fits this prompt: the tentative one belongs elsewhere,
     * and the request is left without one, flagged */
    if (o->q) {
        reinsert(p, o->q);
        o->ambiguous = 1;
    }
    o->q = NULL;
    return LD_OK;
}

int ld_pair_openai_fits(const ld_pending_openai *q, const char *h, size_t hn,
                        const char *t, size_t tn)
{
    return prompt_has_user(q, h, hn, t, tn);
}

ld_status ld_pair_openai_settle(ld_pairer *p, ld_open *o, ld_error *err)
{
    if (!o->q) return LD_OK;
    return apply(p, o, err);
}

static void emit_openai_only(ld_pairer *p, ld_pending_openai *q)
{
    ld_request *r = q->r;
    r->missing = LD_PART_BIT(LD_PART_RECEIVE) | LD_PART_BIT(LD_PART_FINISH);
    r->flags |= LD_REQ_UNPAIRED;
    if (!(p->opts.flags & LD_PAIR_KEEP_VALUES) || p->opts.only_rid) r->openai_obj = NULL;
    q->r = NULL;
    ld_pair_free_openai(q);
    ld_pair_emit(p, r);
}

void ld_pair_flush_first(ld_pairer *p)
{
    ld_pending_openai *q = p->pending;
    if (!q) return;
    p->pending = q->next;
    emit_openai_only(p, q);
}

size_t ld_pair_expire_openai(ld_pairer *p, uint64_t before)
{
    size_t n = 0;
    ld_pending_openai **pp = &p->pending;
    while (*pp) {
        ld_pending_openai *q = *pp;
        if (q->born >= before) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        emit_openai_only(p, q);
        n++;
    }
    return n;
}

void ld_pair_flush_openai(ld_pairer *p)
{
    while (p->pending) ld_pair_flush_first(p);
}

/* What the OpenAI line said of the PD router: its room and host, and the
 * digest of its messages (pair_pd.c compares two servers' by it). */
static void copy_pd(ld_request *r, const ld_request *qr)
{
    unsigned bit = 1u << LD_DIGEST_MESSAGES;
    if (r->bootstrap_room == LD_UNSET_INT) r->bootstrap_room = qr->bootstrap_room;
    if (!r->bootstrap_host && qr->bootstrap_host)
        r->bootstrap_host = ld_request_strdup(r, qr->bootstrap_host, strlen(qr->bootstrap_host));
    if (!qr->digest[LD_DIGEST_MESSAGES]) return;
    r->digest[LD_DIGEST_MESSAGES] = qr->digest[LD_DIGEST_MESSAGES];
    r->digest_marked = (r->digest_marked & ~bit) | (qr->digest_marked & bit);
}

ld_status ld_pair_apply_openai(ld_pairer *p, ld_pending_openai *q, ld_request *r, int last_use,
                               ld_error *err)
{
    ld_request *qr = q->r;
    const ld_source *s = &qr->src[LD_PART_OPENAI];
    ld_fill_ctx c = ld_pair_fill_ctx(p, r->rid, r->parent_rid);
    ld_request_set_source(r, LD_PART_OPENAI, s->member, s->line, s->offset, s->lost_bytes);
    if (s->cut_at) ld_request_set_cut(r, LD_PART_OPENAI, s->cut_at, s->cut_field, strlen(s->cut_field));
    if (qr->timestamp) r->timestamp = ld_request_strdup(r, qr->timestamp, strlen(qr->timestamp));
    if (qr->flags & LD_REQ_JSON) r->flags |= LD_REQ_JSON;
    /* q's last request takes its memory rather than a copy of its messages */
    int moved = q->filled && last_use && ld_request_move_openai(r, qr, q->fill_flags);
    if (q->filled && !moved) LD_TRY(ld_request_copy_openai(r, qr, q->fill_flags, err));
    else if (!q->filled) LD_TRY(ld_request_fill_openai(r, &c, qr->openai_obj, err));
    copy_pd(r, qr);
    if (moved && qr->openai_obj) { /* the kept tree is r's now */
        if (c.keep_values) r->openai_obj = qr->openai_obj;
        return LD_OK;
    }
    return ld_pair_keep_value(r, &c, qr->openai_obj, &r->openai_obj, err);
}
