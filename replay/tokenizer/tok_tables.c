/* tok_tables.c - ld_tok_from_tables: the vocabulary and merge hash maps,
 * the per-id byte strings, added-token sets, pre-tokenizers and
 * post-processing ids; lookups and release. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

#define TOK_MAX_IDS (1u << 26)

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

static void vocab_put(ld_tok *t, int32_t id)
{
    const ld_tok_str *k = &t->model[id];
    size_t i = ld_tok_hash_bytes(k->s, k->n) & t->vmask;
    for (; t->vmap[i] >= 0; i = (i + 1) & t->vmask)
        if (t->model[t->vmap[i]].n == k->n && memcmp(t->model[t->vmap[i]].s, k->s, k->n) == 0)
            return; /* the same bytes twice: the first id stays */
    t->vmap[i] = id;
}

static void merge_put(ld_tok *t, int32_t a, int32_t b, int32_t rank, int32_t new_id)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & t->mmask;
    while (t->merge[i].key != UINT64_MAX && t->merge[i].key != key) i = (i + 1) & t->mmask;
    t->merge[i] = (struct tok_merge_slot){ key, rank, new_id }; /* a repeated pair: its last rank, as HF */
}

/* Copies the model tokens (decoded from byte-level form) and fills vmap. */
static ld_status build_vocab(ld_tok *t, const ld_tok_spec *sp, char **pool, ld_error *err)
{
    t->vmask = pow2_at_least(sp->n_tokens * 2) - 1;
    t->vmap = malloc((t->vmask + 1) * sizeof *t->vmap);
    if (!t->vmap) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    memset(t->vmap, 0xff, (t->vmask + 1) * sizeof *t->vmap);
    for (size_t id = 0; id < sp->n_tokens; id++) {
        const ld_tok_str *s = &sp->tokens[id];
        if (!s->s) continue;
        size_t n = ld_tok_bytelevel_decode(s->s, s->n, *pool);
        int mappable = n != (size_t)-1;
        if (!mappable) memcpy(*pool, s->s, n = s->n);
        t->model[id] = (ld_tok_str){ *pool, n };
        *pool += n;
        t->dec[id] = t->model[id];
        if (t->decoder != LD_TOK_DEC_BYTELEVEL) { /* decoding gives the token as written */
            memcpy(*pool, s->s, s->n);
            t->dec[id] = (ld_tok_str){ *pool, s->n };
            *pool += s->n;
        }
        if (mappable) vocab_put(t, (int32_t)id);
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = ld_tok_vocab_get(t, &c, 1);
    }
    return LD_OK;
}

static ld_status build_merges(ld_tok *t, const ld_tok_spec *sp, ld_error *err)
{
    t->mmask = pow2_at_least(sp->n_merges * 2) - 1;
    t->merge = malloc((t->mmask + 1) * sizeof *t->merge);
    if (!t->merge) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (size_t i = 0; i <= t->mmask; i++) t->merge[i].key = UINT64_MAX;
    tok_buf both = { 0 };
    ld_status st = LD_OK;
    for (size_t i = 0; i < sp->n_merges && st == LD_OK; i++) {
        const ld_tok_str *a = &sp->merges[2 * i], *b = &sp->merges[2 * i + 1];
        both.n = 0;
        if ((st = ld_tok_buf_reserve(&both, a->n + b->n + 1)) != LD_OK) break;
        size_t na = ld_tok_bytelevel_decode(a->s, a->n, both.v);
        size_t nb = na == (size_t)-1 ? na : ld_tok_bytelevel_decode(b->s, b->n, both.v + na);
        if (nb == (size_t)-1) continue; /* not byte-level text: can never apply */
        int32_t ia = ld_tok_vocab_get(t, both.v, na), ib = ld_tok_vocab_get(t, both.v + na, nb);
        int32_t inew = ld_tok_vocab_get(t, both.v, na + nb);
        if (ia < 0 || ib < 0 || inew < 0)
            st = LD_FAIL(err, LD_ERR_MISMATCH, i, "merge %zu '%.*s %.*s': %s not in the vocabulary", i,
                         (int)(a->n > 60 ? 60 : a->n), a->s, (int)(b->n > 60 ? 60 : b->n), b->s,
                         ia < 0 || ib < 0 ? "a part is" : "the merged token is");
        else
            merge_put(t, ia, ib, (int32_t)i, inew);
    }
    free(both.v);
    return st;
}

/* Added tokens: decode strings, and the two match sets. */
static ld_status build_added(ld_tok *t, const ld_tok_spec *sp, char **pool, ld_error *err)
{
    tok_added *raw = calloc(sp->n_added + 1, sizeof *raw), *nrm = calloc(sp->n_added + 1, sizeof *nrm);
    tok_buf normed = { 0 };
    size_t n_raw = 0, n_nrm = 0;
    ld_status st = raw && nrm ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (size_t i = 0; i < sp->n_added && st == LD_OK; i++) {
        const ld_tok_added_spec *a = &sp->added[i];
        size_t n = t->decoder == LD_TOK_DEC_BYTELEVEL ? ld_tok_bytelevel_decode(a->content.s, a->content.n, *pool)
                                                      : (size_t)-1;
        if (n == (size_t)-1) memcpy(*pool, a->content.s, n = a->content.n);
        t->dec[a->id] = (ld_tok_str){ *pool, n };
        t->is_added[a->id] = 1;
        *pool += n;
        if (a->content.n == 0) continue; /* an empty token never matches */
        tok_added e = { a->id, a->flags, a->content.s, a->content.n };
        if (!(a->flags & LD_TOK_A_NORMALIZED) || t->n_norm == 0) {
            raw[n_raw++] = e;
            continue;
        }
        size_t at = normed.n; /* match the normalized content */
        st = ld_tok_normalize(t->norm, t->n_norm, a->content.s, a->content.n, &normed);
        e.s = (const char *)(uintptr_t)at; /* offset for now: normed.v may move */
        e.n = normed.n - at;
        if (e.n) nrm[n_nrm++] = e;
    }
    for (size_t i = 0; i < n_nrm; i++) nrm[i].s = normed.v + (uintptr_t)nrm[i].s;
    if (st == LD_OK && (ld_tok_trie_build(&t->raw_added, raw, n_raw) != LD_OK ||
                        ld_tok_trie_build(&t->norm_added, nrm, n_nrm) != LD_OK))
        st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    free(raw);
    free(nrm);
    free(normed.v);
    return st;
}

static ld_status check_spec(const ld_tok_spec *sp, size_t *n_ids, size_t *pool_len, ld_error *err)
{
    size_t n = sp->n_tokens, len = 0;
    if (sp->n_tokens > TOK_MAX_IDS) return LD_FAIL(err, LD_ERR_LIMIT, 0, "%zu tokens: too many", sp->n_tokens);
    for (size_t i = 0; i < sp->n_tokens; i++) len += sp->tokens[i].s ? sp->tokens[i].n : 0;
    for (size_t i = 0; i < sp->n_added; i++) {
        int32_t id = sp->added[i].id;
        if (id < 0 || (size_t)id >= TOK_MAX_IDS)
            return LD_FAIL(err, LD_ERR_USAGE, i, "added token %zu: id %d out of range", i, (int)id);
        if ((size_t)id >= n) n = (size_t)id + 1;
        len += sp->added[i].content.n;
    }
    for (size_t i = 0; i < sp->n_prefix + sp->n_suffix; i++) {
        int32_t id = i < sp->n_prefix ? sp->prefix[i] : sp->suffix[i - sp->n_prefix];
        if (id < 0 || (size_t)id >= n)
            return LD_FAIL(err, LD_ERR_USAGE, i, "special token id %d is not in the vocabulary", (int)id);
    }
    if (sp->unk_id >= 0 && (size_t)sp->unk_id >= n)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "unk id %d is not in the vocabulary", (int)sp->unk_id);
    int byte_level = 0;
    for (size_t i = 0; i < sp->n_pre; i++) {
        if (byte_level && sp->pre[i].kind == LD_TOK_PRE_SPLIT)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, i, "a Split after the ByteLevel pre-tokenizer is not supported");
        byte_level |= sp->pre[i].kind == LD_TOK_PRE_BYTELEVEL;
    }
    if (!byte_level)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "BPE without a ByteLevel pre-tokenizer is not supported");
    *n_ids = n;
    *pool_len = len;
    return LD_OK;
}

static ld_status copy_ids(int32_t **dst, const int32_t *src, size_t n)
{
    if (!n) return LD_OK;
    if (!(*dst = malloc(n * sizeof **dst))) return LD_ERR_NOMEM;
    memcpy(*dst, src, n * sizeof **dst);
    return LD_OK;
}

static ld_status build(ld_tok *t, const ld_tok_spec *sp, size_t pool_len, ld_error *err)
{
    t->model = calloc(t->n_ids, sizeof *t->model);
    t->dec = calloc(t->n_ids, sizeof *t->dec);
    t->is_added = calloc(t->n_ids, 1);
    t->pool = malloc(2 * pool_len + 1);
    t->norm = malloc((sp->n_norm + 1) * sizeof *t->norm);
    t->pre = calloc(sp->n_pre + 1, sizeof *t->pre);
    if (!t->model || !t->dec || !t->is_added || !t->pool || !t->norm || !t->pre ||
        copy_ids(&t->prefix, sp->prefix, sp->n_prefix) != LD_OK ||
        copy_ids(&t->suffix, sp->suffix, sp->n_suffix) != LD_OK || !(t->cache = ld_tok_cache_new()))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    t->n_prefix = sp->n_prefix;
    t->n_suffix = sp->n_suffix;
    if (sp->n_norm) memcpy(t->norm, sp->norm, sp->n_norm * sizeof *t->norm);
    t->n_norm = sp->n_norm;
    char *pool = t->pool;
    LD_TRY(build_vocab(t, sp, &pool, err));
    LD_TRY(build_merges(t, sp, err));
    LD_TRY(build_added(t, sp, &pool, err));
    for (; t->n_pre < sp->n_pre; t->n_pre++)
        LD_TRY(ld_tok_pre_compile(&t->pre[t->n_pre], &sp->pre[t->n_pre], err));
    return LD_OK;
}

ld_status ld_tok_from_tables(const ld_tok_spec *sp, ld_tok **out, ld_error *err)
{
    size_t n_ids = 0, pool_len = 0;
    *out = NULL;
    LD_TRY(check_spec(sp, &n_ids, &pool_len, err));
    ld_tok *t = calloc(1, sizeof *t);
    if (!t) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    t->n_ids = n_ids;
    t->unk_id = sp->unk_id;
    t->ignore_merges = sp->ignore_merges;
    t->decoder = sp->decoder;
    ld_status st = build(t, sp, pool_len, err);
    if (st != LD_OK) {
        ld_tok_free(t);
        return st;
    }
    *out = t;
    return LD_OK;
}

size_t ld_tok_n_ids(const ld_tok *tok) { return tok->n_ids; }

int32_t ld_tok_find(const ld_tok *t, const char *s, size_t n)
{
    for (size_t id = 0; id < t->n_ids; id++)
        if (t->is_added[id] && t->dec[id].n == n && memcmp(t->dec[id].s, s, n) == 0) return (int32_t)id;
    return ld_tok_vocab_get(t, s, n);
}

void ld_tok_free(ld_tok *t)
{
    if (!t) return;
    free(t->model);
    free(t->dec);
    free(t->is_added);
    free(t->pool);
    free(t->vmap);
    free(t->merge);
    ld_tok_trie_free(&t->raw_added);
    ld_tok_trie_free(&t->norm_added);
    free(t->norm);
    for (size_t i = 0; i < t->n_pre; i++) pcre2_code_free(t->pre[i].re);
    free(t->pre);
    free(t->prefix);
    free(t->suffix);
    ld_tok_cache_free(t->cache);
    free(t);
}
