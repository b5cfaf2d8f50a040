/* pair_pd.c - one request, two servers.  Under SGLang's prefill/decode
 * disaggregation the router posts each request to a prefill and a decode
 * server with one bootstrap room, and both log it: two records, with two
 * rids unless the client named one.  A complete record of the router
 * (ld_request_pd_routed) is held here until the other server's record of
 * its room comes, then the two are handed out as one: the decode server's
 * record (its output is the answer) with the prefill server's as its peer,
 * and what the two servers logged differently flagged (LD_PD_DIFF_*).
 * A record whose partner never comes is handed out alone (LD_PD_ALONE) at
 * the end, or earlier when too many wait (the oldest first).
 *
 * The prefill server is told by how it ends: its scheduler stops after one
 * token with finish `length` 0 (ld_request_pd_prefill_end). */
#include <stdlib.h>
#include <string.h>

#include "pair_internal.h"

#define PD_BUCKETS 4096u
#define PD_MAX_HELD_BYTES ((size_t)1 << 30)

struct ld_pd_held {
    ld_request *r;
    char *queue;                  /* the writer it came from (pair_feed.c's queue_key) */
    struct ld_pd_held *hnext;     /* bucket chain */
    struct ld_pd_held *prev, *next; /* age list, oldest first */
    uint64_t born;                /* the pairer's clock when it began to wait */
};

static size_t bucket_of(int64_t room)
{
    uint64_t h = (uint64_t)room * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 52) & (PD_BUCKETS - 1);
}

static size_t max_held(const ld_pairer *p)
{
    return p->opts.max_open ? p->opts.max_open : (size_t)1 << 16;
}

static void unlink_held(ld_pairer *p, ld_pd_held *h)
{
    ld_pd_held **pp = &p->pd_buckets[bucket_of(h->r->bootstrap_room)];
    while (*pp && *pp != h) pp = &(*pp)->hnext;
    if (*pp) *pp = h->hnext;
    if (h->prev) h->prev->next = h->next;
    else p->pd_oldest = h->next;
    if (h->next) h->next->prev = h->prev;
    else p->pd_newest = h->prev;
    p->pd_held--;
    p->pd_held_bytes -= h->r->arena.held_bytes;
}

/* Hands out the oldest held record alone. */
static void release_oldest(ld_pairer *p)
{
    ld_pd_held *h = p->pd_oldest;
    unlink_held(p, h);
    ld_request *r = h->r;
    free(h->queue);
    free(h);
    r->pd |= LD_PD_ALONE | (ld_request_pd_prefill_end(r) ? LD_PD_PREFILL : 0);
    p->stats.pd_alone++;
    ld_pair_emit(p, r);
}

/* Two records of one room are one request's when they come from two
 * writers, or when one ends as the prefill server's and the other not. */
static int partners(const ld_pd_held *h, const ld_request *r, const char *queue)
{
    if (strcmp(h->queue, queue) != 0) return 1;
    return ld_request_pd_prefill_end(h->r) != ld_request_pd_prefill_end(r);
}

/* output tokens as logged; -1 unknown */
static int64_t output_len(const ld_request *r)
{
    if (r->n_output_ids >= 0) return r->n_output_ids;
    return r->completion_tokens != LD_UNSET_INT ? r->completion_tokens : -1;
}

/* Which of a (held, earlier) and b (later) is the prefill server's. */
static int a_is_prefill(const ld_request *a, const ld_request *b, unsigned *flags)
{
    int pa = ld_request_pd_prefill_end(a), pb = ld_request_pd_prefill_end(b);
    if (pa != pb) return pa;
    *flags |= LD_PD_ROLES_GUESSED;
    return output_len(a) <= output_len(b);
}

static void compare(ld_request *d, const ld_request *pf)
{
    static const unsigned diff_bit[LD_DIGEST_COUNT] = {LD_PD_DIFF_MESSAGES, LD_PD_DIFF_PROMPT, LD_PD_DIFF_IDS};
    for (int k = 0; k < LD_DIGEST_COUNT; k++) {
        unsigned bit = 1u << k;
        if (!d->digest[k] || !pf->digest[k]) continue; /* one did not log it */
        if ((d->digest_marked & bit) != (pf->digest_marked & bit)) continue; /* one cut it */
        if (d->digest[k] != pf->digest[k]) d->pd |= diff_bit[k];
    }
}

static void join(ld_pairer *p, ld_request *a, ld_request *b)
{
    unsigned flags = LD_PD_JOINED;
    int a_pf = a_is_prefill(a, b, &flags);
    ld_request *d = a_pf ? b : a, *pf = a_pf ? a : b;
    if (d->rid && pf->rid && !strcmp(d->rid, pf->rid)) flags |= LD_PD_BY_RID;
    d->pd |= flags;
    pf->pd |= LD_PD_PREFILL;
    d->peer = pf;
    compare(d, pf);
    p->stats.pd_joined++;
    if (flags & LD_PD_BY_RID) p->stats.pd_by_rid++;
    if (d->pd & LD_PD_DIFF) p->stats.pd_differ++;
    ld_pair_emit(p, d);
}

static ld_status hold(ld_pairer *p, ld_request *r, const char *queue)
{
    if (!p->pd_buckets && !(p->pd_buckets = calloc(PD_BUCKETS, sizeof *p->pd_buckets)))
        return LD_ERR_NOMEM;
    ld_pd_held *h = calloc(1, sizeof *h);
    char *q = strdup(queue ? queue : "");
    if (!h || !q) {
        free(h);
        free(q);
        return LD_ERR_NOMEM;
    }
    h->r = r;
    h->queue = q;
    h->born = p->clock;
    size_t k = bucket_of(r->bootstrap_room);
    h->hnext = p->pd_buckets[k];
    p->pd_buckets[k] = h;
    h->prev = p->pd_newest;
    if (p->pd_newest) p->pd_newest->next = h;
    else p->pd_oldest = h;
    p->pd_newest = h;
    p->pd_held++;
    p->pd_held_bytes += r->arena.held_bytes;
    while (p->pd_held > max_held(p) || (p->pd_held > 1 && p->pd_held_bytes > PD_MAX_HELD_BYTES))
        release_oldest(p);
    return LD_OK;
}

void ld_pair_pd_offer(ld_pairer *p, ld_request *r, const char *queue)
{
    if (!ld_request_pd_routed(r) || (r->flags & (LD_REQ_ERROR | LD_REQ_INTERNAL))) {
        ld_pair_emit(p, r);
        return;
    }
    if (!queue) queue = "";
    ld_pd_held *h = p->pd_buckets ? p->pd_buckets[bucket_of(r->bootstrap_room)] : NULL;
    for (; h; h = h->hnext)
        if (h->r->bootstrap_room == r->bootstrap_room && partners(h, r, queue)) break;
    if (h) {
        unlink_held(p, h);
        ld_request *a = h->r;
        free(h->queue);
        free(h);
        join(p, a, r);
        return;
    }
    if (hold(p, r, queue) != LD_OK) { /* out of memory: the record goes alone */
        r->pd |= LD_PD_ALONE;
        p->stats.pd_alone++;
        ld_pair_emit(p, r);
    }
}

void ld_pair_pd_flush(ld_pairer *p)
{
    while (p->pd_oldest) release_oldest(p);
}

void ld_pair_pd_each(const ld_pairer *p, void (*fn)(void *ctx, const ld_request *r), void *ctx)
{
    for (const ld_pd_held *h = p->pd_oldest; h; h = h->next) fn(ctx, h->r);
}

size_t ld_pair_pd_expire(ld_pairer *p, uint64_t before)
{
    size_t n = 0;
    for (; p->pd_oldest && p->pd_oldest->born < before; n++) release_oldest(p);
    return n;
}

void ld_pair_pd_free(ld_pairer *p)
{
    while (p->pd_oldest) {
        ld_pd_held *h = p->pd_oldest;
        unlink_held(p, h);
        ld_request_free(h->r);
        free(h->queue);
        free(h);
    }
    free(p->pd_buckets);
    p->pd_buckets = NULL;
}
