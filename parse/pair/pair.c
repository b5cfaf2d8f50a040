/* pair.c - joins request-log lines into ld_request records (see pair.h).
 *
 * Open records live in a hash table keyed by rid and in an age list (oldest
 * first, for max_open).  `Receive OpenAI` lines are queued per member (as
 * records with a deep copy of their payload) and joined by pair_openai.c. */
#include "pair.h"

#include <stdlib.h>
#include <string.h>

#include "parse/line/logline.h"
#include "pair_internal.h"
#include "parse/request/request_fill.h"
#include "parse/request/request_text.h"

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static ld_status table_grow(ld_pairer *p)
{
    size_t nb = p->n_buckets ? p->n_buckets * 2 : 256;
    ld_open **b = calloc(nb, sizeof *b);
    if (!b) return LD_ERR_NOMEM;
    for (size_t i = 0; i < p->n_buckets; i++) {
        ld_open *o = p->buckets[i];
        while (o) {
            ld_open *next = o->hnext;
            size_t k = hash_str(o->r->rid) & (nb - 1);
            o->hnext = b[k];
            b[k] = o;
            o = next;
        }
    }
    free(p->buckets);
    p->buckets = b;
    p->n_buckets = nb;
    return LD_OK;
}

ld_open *ld_pair_lookup(ld_pairer *p, const char *rid)
{
    if (!p->n_buckets) return NULL;
    for (ld_open *o = p->buckets[hash_str(rid) & (p->n_buckets - 1)]; o; o = o->hnext)
        if (!strcmp(o->r->rid, rid)) return o;
    return NULL;
}

static void unlink_open(ld_pairer *p, ld_open *o)
{
    ld_open **pp = &p->buckets[hash_str(o->r->rid) & (p->n_buckets - 1)];
    while (*pp && *pp != o) pp = &(*pp)->hnext;
    if (*pp) *pp = o->hnext;
    if (o->prev) o->prev->next = o->next;
    else p->oldest = o->next;
    if (o->next) o->next->prev = o->prev;
    else p->newest = o->prev;
    p->stats.open--;
}

/* Creates an open record for rid (copied). */
ld_status ld_pair_create(ld_pairer *p, const char *rid, ld_open **out, ld_error *err)
{
    if (p->stats.open + 1 > p->n_buckets) LD_TRY(table_grow(p));
    ld_open *o = calloc(1, sizeof *o);
    ld_request *r = ld_request_new(p->opts.max_record_bytes);
    if (!o || !r) {
        free(o);
        ld_request_free(r);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a request");
    }
    r->rid = ld_request_strdup(r, rid, strlen(rid));
    if (!r->rid) {
        free(o);
        ld_request_free(r);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a request");
    }
    o->r = r;
    size_t k = hash_str(rid) & (p->n_buckets - 1);
    o->hnext = p->buckets[k];
    p->buckets[k] = o;
    o->prev = p->newest;
    if (p->newest) p->newest->next = o;
    else p->oldest = o;
    p->newest = o;
    p->stats.open++;
    if (p->stats.open > p->stats.max_open_seen) p->stats.max_open_seen = p->stats.open;
    *out = o;
    return LD_OK;
}

void ld_pair_emit(ld_pairer *p, ld_request *r)
{
    p->stats.emitted++;
    if (!p->emit || p->emit(p->ctx, r) != LD_PAIR_TAKE) ld_request_free(r);
}

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
    unlink_open(p, o);
    ld_request *r = o->r;
    ld_pair_openai_settle(p, o, NULL); /* out of memory: the record goes without it */
    set_missing(p, r);
    set_confirmation(r, o);
    free(o);
    ld_pair_emit(p, r);
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
    if (table_grow(p) != LD_OK) {
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
    ld_pair_flush_openai(p);
    return LD_OK;
}

void ld_pairer_free(ld_pairer *p)
{
    if (!p) return;
    while (p->oldest) {
        ld_open *o = p->oldest;
        unlink_open(p, o);
        ld_request_free(o->r);
        ld_pair_free_openai(o->q);
        free(o);
    }
    for (ld_pending_openai *q = p->pending; q;) {
        ld_pending_openai *next = q->next;
        ld_pair_free_openai(q);
        q = next;
    }
    free(p->buckets);
    ld_arena_release(&p->line_arena);
    free(p);
}
