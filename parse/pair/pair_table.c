/* pair_table.c - the pairer's open records: a hash table keyed by rid and
 * an age list (oldest first, for max_open), and what every step of the
 * pairing shares (a record's fill context, emitting a record).  The leaf
 * of parse/pair/: pair_openai.c, pair.c and pair_feed.c build on it. */
#include <stdlib.h>
#include <string.h>

#include "pair_internal.h"
#include "parse/pylit/pylit.h"
#include "parse/request/request_fill.h"

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

ld_status ld_pair_table_grow(ld_pairer *p)
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

void ld_pair_unlink(ld_pairer *p, ld_open *o)
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
    if (p->stats.open + 1 > p->n_buckets) LD_TRY(ld_pair_table_grow(p));
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
    o->born = p->clock;
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

/* a (a record's key: its rid, maybe followed by LD_PAIR_KEY_SEP) names rid b */
static int rid_match(const char *a, const char *b)
{
    if (!a || !b) return 0;
    size_t n = strcspn(a, (const char[]){LD_PAIR_KEY_SEP, 0});
    return strlen(b) == n && !memcmp(a, b, n);
}

ld_fill_ctx ld_pair_fill_ctx(ld_pairer *p, const char *rid, const char *parent)
{
    const char *only = p->opts.only_rid;
    int sel = !only || rid_match(rid, only) || rid_match(parent, only);
    ld_fill_ctx c = {&p->line_arena, &p->memo, sel && (p->opts.flags & LD_PAIR_KEEP_TEXT),
                     sel && (p->opts.flags & LD_PAIR_KEEP_VALUES), p->opts.vllm_max_log_len,
                     p->body};
    return c;
}

ld_status ld_pair_keep_value(ld_request *r, const ld_fill_ctx *c, const ld_py_value *v,
                            const ld_py_value **dst, ld_error *err)
{
    if (!c->keep_values || !v) return LD_OK;
    *dst = ld_py_value_clone(&r->arena, v);
    return *dst ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory copying a value");
}
