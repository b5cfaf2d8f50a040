/* tok_bpe.c - BPE on one piece, as HF's Word::merge_all: start from one
 * symbol per byte, repeatedly merge the adjacent pair of lowest rank
 * (leftmost on ties) through a heap; a heap entry is stale when its
 * position was merged away or its pair now makes another token.  With
 * ignore_merges a piece that is a whole token is that token.  Results of
 * pieces up to TOK_CACHE_KEY bytes are kept in the tokenizer's word cache. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

#define TOK_CACHE_KEY 256
#define TOK_CACHE_BYTES (8u << 20) /* keys kept before the cache is cleared */
#define TOK_CACHE_ENTRIES (1u << 16)

typedef struct tok_merge heap_item;

static int before(const heap_item *a, const heap_item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static ld_status heap_push(tok_run *r, size_t *n, heap_item it)
{
    if (*n == r->heap_cap) {
        size_t cap = r->heap_cap ? 2 * r->heap_cap : 64;
        heap_item *h = realloc(r->heap, cap * sizeof *h);
        if (!h) return LD_FAIL(r->err, LD_ERR_NOMEM, 0, "out of memory");
        r->heap = h;
        r->heap_cap = cap;
    }
    size_t i = (*n)++;
    while (i > 0 && before(&it, &r->heap[(i - 1) / 2])) {
        r->heap[i] = r->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    r->heap[i] = it;
    return LD_OK;
}

static heap_item heap_pop(tok_run *r, size_t *n)
{
    heap_item top = r->heap[0], last = r->heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(&r->heap[c + 1], &r->heap[c])) c++;
        if (!before(&r->heap[c], &last)) break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (*n) r->heap[i] = last;
    return top;
}

/* Queues the pair starting at symbol `pos`, if it merges. */
static ld_status queue_pair(tok_run *r, size_t *hn, int32_t pos)
{
    if (pos < 0) return LD_OK;
    int32_t next = r->sym[pos].next, rank, new_id;
    if (next < 0 || !tok_merge_get(r->tok, r->sym[pos].id, r->sym[next].id, &rank, &new_id))
        return LD_OK;
    return heap_push(r, hn, (heap_item){ rank, pos, new_id });
}

/* One symbol per byte (unknown bytes: unk, or dropped); returns the count. */
static ld_status initial_symbols(tok_run *r, const char *s, size_t n, int32_t *count)
{
    if (n > r->sym_cap) {
        struct tok_sym *v = realloc(r->sym, n * sizeof *v);
        if (!v) return LD_FAIL(r->err, LD_ERR_NOMEM, 0, "out of memory");
        r->sym = v;
        r->sym_cap = n;
    }
    int32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = r->tok->byte_id[(unsigned char)s[i]];
        if (id < 0) id = r->tok->unk_id;
        if (id < 0) continue;
        r->sym[k] = (struct tok_sym){ id, k - 1, k + 1 };
        k++;
    }
    if (k) r->sym[k - 1].next = -1;
    *count = k;
    return LD_OK;
}

/* Pieces up to this many bytes merge by scanning for the lowest-ranked pair
 * instead of through the heap: the same merges (a queued pair stays valid
 * exactly while that pair is still at its position, so the heap's next valid
 * entry is always the lowest-ranked current pair, leftmost on ties). */
#define TOK_SCAN_MAX 48

static ld_status merge_scan(tok_run *r, const char *s, size_t n)
{
    int32_t id[TOK_SCAN_MAX], rank[TOK_SCAN_MAX], made[TOK_SCAN_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t t = r->tok->byte_id[(unsigned char)s[i]];
        if (t < 0) t = r->tok->unk_id;
        if (t >= 0) id[k++] = t;
    }
    for (size_t i = 0; i + 1 < k; i++)
        if (!tok_merge_get(r->tok, id[i], id[i + 1], &rank[i], &made[i])) rank[i] = INT32_MAX;
    while (k > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < k; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == INT32_MAX) break;
        id[best] = made[best];
        memmove(id + best + 1, id + best + 2, (k - best - 2) * sizeof *id);
        memmove(rank + best + 1, rank + best + 2, (k - best - 2) * sizeof *rank);
        memmove(made + best + 1, made + best + 2, (k - best - 2) * sizeof *made);
        k--;
        if (best > 0 && !tok_merge_get(r->tok, id[best - 1], id[best], &rank[best - 1], &made[best - 1]))
            rank[best - 1] = INT32_MAX;
        if (best + 1 < k && !tok_merge_get(r->tok, id[best], id[best + 1], &rank[best], &made[best]))
            rank[best] = INT32_MAX;
    }
    return ld_tok_ids_append(&r->out, id, k);
}

static ld_status merge_all(tok_run *r, const char *s, size_t n)
{
    if (n <= TOK_SCAN_MAX) return merge_scan(r, s, n);
    int32_t k = 0;
    size_t hn = 0;
    LD_TRY(initial_symbols(r, s, n, &k));
    for (int32_t i = 0; i + 1 < k; i++) LD_TRY(queue_pair(r, &hn, i));
    while (hn) {
        heap_item top = heap_pop(r, &hn);
        struct tok_sym *a = &r->sym[top.pos];
        int32_t rank, new_id;
        if (a->id < 0 || a->next < 0 || !tok_merge_get(r->tok, a->id, r->sym[a->next].id, &rank, &new_id) ||
            new_id != top.new_id)
            continue; /* stale */
        struct tok_sym *b = &r->sym[a->next];
        a->id = new_id;
        a->next = b->next;
        if (b->next >= 0) r->sym[b->next].prev = top.pos;
        b->id = -1;
        LD_TRY(queue_pair(r, &hn, a->prev));
        LD_TRY(queue_pair(r, &hn, top.pos));
    }
    for (int32_t i = k ? 0 : -1; i >= 0; i = r->sym[i].next) LD_TRY(ld_tok_ids_push(&r->out, r->sym[i].id));
    return LD_OK;
}

/* ---------------------------------------------------------------- cache */

tok_cache *ld_tok_cache_new(void)
{
    tok_cache *c = calloc(1, sizeof *c);
    if (c && pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

void ld_tok_cache_free(tok_cache *c)
{
    if (!c) return;
    pthread_mutex_destroy(&c->lock);
    free(c->slot);
    free(c->ent);
    free(c->keys.v);
    free(c->ids.v);
    free(c);
}

/* The slot of key (h, s, n): its entry, or the empty slot where it goes. */
static size_t cache_find(const tok_cache *c, uint64_t h, const char *s, size_t n)
{
    size_t i = (size_t)h & c->mask;
    for (; c->slot[i]; i = (i + 1) & c->mask) {
        const struct tok_cache_entry *e = &c->ent[c->slot[i] - 1];
        if (e->hash == h && e->key_len == n && memcmp(c->keys.v + e->key_off, s, n) == 0) break;
    }
    return i;
}

static int cache_get(tok_cache *c, uint64_t h, const char *s, size_t n, tok_ids *out)
{
    if (pthread_mutex_trylock(&c->lock) != 0) return 0;
    int hit = 0;
    if (c->slot) {
        uint32_t sl = c->slot[cache_find(c, h, s, n)];
        if (sl) {
            const struct tok_cache_entry *e = &c->ent[sl - 1];
            hit = ld_tok_ids_append(out, c->ids.v + e->ids_off, e->n_ids) == LD_OK;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return hit;
}

static void cache_clear(tok_cache *c)
{
    memset(c->slot, 0, (c->mask + 1) * sizeof *c->slot);
    c->n_ent = 0;
    c->keys.n = 0;
    c->ids.n = 0;
}

static void cache_put(tok_cache *c, uint64_t h, const char *s, size_t n, const int32_t *ids, size_t k)
{
    if (pthread_mutex_trylock(&c->lock) != 0) return;
    if (!c->slot) {
        c->mask = 2 * TOK_CACHE_ENTRIES - 1;
        c->slot = calloc(c->mask + 1, sizeof *c->slot);
        c->ent = malloc(TOK_CACHE_ENTRIES * sizeof *c->ent);
        if (!c->slot || !c->ent) {
            free(c->slot);
            free(c->ent);
            c->slot = NULL;
            c->ent = NULL;
        }
    }
    if (c->slot) {
        if (c->n_ent == TOK_CACHE_ENTRIES || c->keys.n > TOK_CACHE_BYTES) cache_clear(c);
        size_t i = cache_find(c, h, s, n);
        size_t ko = c->keys.n, io = c->ids.n;
        if (!c->slot[i] && ld_tok_buf_append(&c->keys, s, n) == LD_OK && ld_tok_ids_append(&c->ids, ids, k) == LD_OK) {
            c->ent[c->n_ent] = (struct tok_cache_entry){ h, (uint32_t)ko, (uint32_t)n, (uint32_t)io, (uint32_t)k };
            c->slot[i] = (uint32_t)++c->n_ent;
        } else {
            c->keys.n = ko;
            c->ids.n = io;
        }
    }
    pthread_mutex_unlock(&c->lock);
}

ld_status ld_tok_bpe_piece(tok_run *r, const char *s, size_t n)
{
    const ld_tok *t = r->tok;
    if (n == 1 && t->byte_id[(unsigned char)s[0]] >= 0)
        return ld_tok_ids_push(&r->out, t->byte_id[(unsigned char)s[0]]);
    if (t->ignore_merges) {
        int32_t id = ld_tok_vocab_get(t, s, n);
        if (id >= 0) return ld_tok_ids_push(&r->out, id);
    }
    if (n > TOK_CACHE_KEY) return merge_all(r, s, n);
    uint64_t h = ld_tok_hash_bytes(s, n);
    if (cache_get(t->cache, h, s, n, &r->out)) return LD_OK;
    size_t start = r->out.n;
    LD_TRY(merge_all(r, s, n));
    if (r->out.n > start) cache_put(t->cache, h, s, n, r->out.v + start, r->out.n - start);
    return LD_OK;
}
