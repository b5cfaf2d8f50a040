/* pair.c - joins request-log lines into ld_request records (see pair.h):
 * the pairer's lifecycle and a record's completion (its OpenAI join
 * settled, the parts it misses named).  Open records live in
 * pair_table.c's hash table and age list; `Receive OpenAI` lines are
 * queued per member (as records with a deep copy of their payload) and
 * joined by pair_openai.c; pair_feed.c takes each line. */
#include "pair.h"

#include <stdlib.h>
#include <string.h>

#include "parse/line/logline.h"
#include "pair_internal.h"
#include "parse/request/request_fill.h"
#include "parse/request/request_text.h"

static void set_missing(ld_pairer *p, ld_request *r)
{
    unsigned m = 0, s = r->seen;
    if (r->engine == LD_ENGINE_VLLM) {
        if (!(s & LD_PART_BIT(LD_PART_VLLM_RECEIVED))) m |= LD_PART_BIT(LD_PART_VLLM_RECEIVED);
        if (p->seen_vllm_generated && !(s & LD_PART_BIT(LD_PART_VLLM_GENERATED)))
            m |= LD_PART_BIT(LD_PART_VLLM_GENERATED);
    } else if (!(s & LD_PART_BIT(LD_PART_INOUT))) {
        if (!(s & LD_PART_BIT(LD_PART_RECEIVE))) m |= LD_PART_BIT(LD_PART_RECEIVE);
        if (!(s & LD_PART_BIT(LD_PART_FINISH))) m |= LD_PART_BIT(LD_PART_FINISH);
    }
    r->missing = m;
    if (m) r->flags |= LD_REQ_UNPAIRED;
}

static void set_confirmation(ld_request *r, const ld_open *o)
{
    if (o->ambiguous) r->flags |= LD_REQ_AMBIGUOUS;
    if (!(r->seen & LD_PART_BIT(LD_PART_OPENAI))) return;
    if (o->checked && !o->confirmed) r->flags |= LD_REQ_AMBIGUOUS;
    else if (!o->confirmed) r->flags |= LD_REQ_UNCONFIRMED;
}

/* Removes an open record and hands it out. */
void ld_pair_complete(ld_pairer *p, ld_open *o)
{
    ld_pair_unlink(p, o);
    ld_request *r = o->r;
    ld_pair_openai_settle(p, o, NULL); /* out of memory: the record goes without it */
    set_missing(p, r);
    set_confirmation(r, o);
    char *key_end = r->rid ? strchr(r->rid, LD_PAIR_KEY_SEP) : NULL;
    if (key_end) *key_end = '\0'; /* the writer added to a PD line's key (pair_feed.c) */
    ld_pair_pd_offer(p, r, o->queue);
    free(o->queue);
    free(o);
}

void ld_pair_evict(ld_pairer *p)
{
    while (p->opts.max_open && p->stats.open > p->opts.max_open && p->oldest)
        ld_pair_complete(p, p->oldest);
}

ld_status ld_pairer_new(const ld_pair_options *opts, ld_pair_emit_fn emit,
                        void *ctx, ld_pairer **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_logline_init(err));
    ld_pairer *p = calloc(1, sizeof *p);
    if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the pairer");
    if (opts) p->opts = *opts;
    if (!p->opts.json_trunc_half) p->opts.json_trunc_half = 1024;
    p->emit = emit;
    p->ctx = ctx;
    ld_arena_init(&p->line_arena, 0);
    if (ld_pair_table_grow(p) != LD_OK) {
        free(p);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the pairer");
    }
    *out = p;
    return LD_OK;
}

const ld_pair_stats *ld_pairer_stats(const ld_pairer *p)
{
    return &p->stats;
}

ld_status ld_pairer_finish(ld_pairer *p, ld_error *err)
{
    (void)err;
    while (p->oldest) ld_pair_complete(p, p->oldest);
    ld_pair_pd_flush(p);
    ld_pair_flush_openai(p);
    return LD_OK;
}

void ld_pairer_set_clock(ld_pairer *p, uint64_t now)
{
    p->clock = now;
}

/* Oldest first in each list (the open records' age list is in the order
 * they were opened, so the stamps only grow along it). */
size_t ld_pairer_expire(ld_pairer *p, uint64_t before)
{
    size_t n = 0;
    for (; p->oldest && p->oldest->born < before; n++) ld_pair_complete(p, p->oldest);
    n += ld_pair_pd_expire(p, before);
    n += ld_pair_expire_openai(p, before);
    return n;
}

void ld_pairer_each_waiting(const ld_pairer *p, void (*fn)(void *ctx, const ld_request *r), void *ctx)
{
    for (const ld_open *o = p->oldest; o; o = o->next) {
        fn(ctx, o->r);
        if (o->q) fn(ctx, o->q->r); /* its OpenAI line, joined but not applied yet */
    }
    ld_pair_pd_each(p, fn, ctx);
    for (const ld_pending_openai *q = p->pending; q; q = q->next) fn(ctx, q->r);
}

void ld_pairer_free(ld_pairer *p)
{
    if (!p) return;
    while (p->oldest) {
        ld_open *o = p->oldest;
        ld_pair_unlink(p, o);
        ld_request_free(o->r);
        ld_pair_free_openai(o->q);
        free(o->queue);
        free(o);
    }
    for (ld_pending_openai *q = p->pending; q;) {
        ld_pending_openai *next = q->next;
        ld_pair_free_openai(q);
        q = next;
    }
    ld_pair_pd_free(p);
    free(p->buckets);
    ld_arena_release(&p->line_arena);
    free(p);
}
