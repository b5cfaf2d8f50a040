/* request_digest.c - what a record of SGLang's prefill/decode router
 * carries: its bootstrap host and room, and fingerprints (64-bit digests)
 * of its message array, prompt and input ids as logged, so that the prefill
 * and the decode server's records of one request can be compared without
 * keeping their texts (parse/pair/pair_pd.c joins them).
 *
 * A digest is of the values, not of their spelling: strings decoded, ints
 * as numbers, so a text-mode and a JSON-mode line of one value agree, and a
 * token-id list counted without being kept (LD_PY_F_SKIMMED) digests as the
 * same list kept item by item. */
#include <string.h>

#include "request_fill.h"

/* SGLang's FAKE_BOOTSTRAP_HOST: warm-up and health requests, on every server */
#define FAKE_BOOTSTRAP_HOST "2.2.2.2"

static uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w * 0x9e3779b97f4a7c15ull;
    h = (h << 27 | h >> 37) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 31);
}

static uint64_t mix_bytes(uint64_t h, const char *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = mix(h, w);
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    return mix(mix(h, w), n);
}

/* A skimmed list's ints, read again from the line: `[` at body + v->off,
 * plain non-negative ints up to `]` (pylit_intlist.c checked the shape). */
static uint64_t skimmed_ints(const ld_fill_ctx *c, const ld_py_value *v, uint64_t h)
{
    if (!c->body || c->body[v->off] != '[') return mix(h, v->off); /* cannot re-read: unique */
    const char *s = c->body + v->off + 1;
    uint64_t x = 0;
    int digits = 0;
    for (;; s++) {
        if (*s >= '0' && *s <= '9') {
            x = x * 10 + (uint64_t)(*s - '0');
            digits = 1;
            continue;
        }
        if (digits) h = mix(mix(h, LD_PY_INT + 1), x);
        x = 0;
        digits = 0;
        if (*s == ']') return h;
    }
}

static uint64_t walk(const ld_fill_ctx *c, const ld_py_value *v, uint64_t h);

static uint64_t walk_items(const ld_fill_ctx *c, const ld_py_value *items, size_t n, uint64_t h)
{
    h = mix(h, n);
    for (size_t i = 0; i < n; i++) h = walk(c, &items[i], h);
    return h;
}

static uint64_t walk_string(const ld_fill_ctx *c, const ld_py_value *v, uint64_t h)
{
    const char *s;
    size_t n;
    if (v->kind == LD_PY_STR && ld_request_decode(c, v, &s, &n, NULL) == LD_OK) return mix_bytes(h, s, n);
    return mix_bytes(mix(h, v->flags), v->u.raw, v->n);
}

static uint64_t walk(const ld_fill_ctx *c, const ld_py_value *v, uint64_t h)
{
    h = mix(h, (uint64_t)v->kind + 1);
    switch (v->kind) {
    case LD_PY_BOOL: return mix(h, (uint64_t)v->u.i);
    case LD_PY_INT:
        return (v->flags & LD_PY_F_BIGINT) ? mix_bytes(h, v->u.raw, v->n) : mix(h, (uint64_t)v->u.i);
    case LD_PY_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &v->u.f, sizeof bits);
        return mix(h, bits);
    }
    case LD_PY_STR: case LD_PY_BYTES: case LD_PY_NAME: case LD_PY_OPAQUE: return walk_string(c, v, h);
    case LD_PY_LIST: case LD_PY_TUPLE: case LD_PY_SET:
        if (v->flags & LD_PY_F_SKIMMED) return skimmed_ints(c, v, mix(h, v->n));
        return walk_items(c, v->u.items, v->n, h);
    case LD_PY_DICT: return walk_items(c, v->u.items, 2 * (size_t)v->n, h);
    case LD_PY_TRUNC: return walk_items(c, v->u.items, 2, h);
    case LD_PY_CALL:
        h = mix_bytes(h, v->u.call->name, v->u.call->name_len);
        for (uint32_t i = 0; i < v->u.call->n_args; i++) {
            const char *an = v->u.call->arg_names[i];
            h = an ? mix_bytes(h, an, v->u.call->arg_name_lens[i]) : mix(h, 0);
            h = walk(c, &v->u.call->args[i], h);
        }
        return h;
    case LD_PY_ABBREV:
        return mix(mix_bytes(h, v->u.abbrev->digest, v->u.abbrev->digest_len), v->u.abbrev->n_chars);
    default: return h; /* None, ... */
    }
}

/* digest k of r from value v (nothing for an absent or None value: a
 * Receive line's text=None leaves the Finish line's prompt to count) */
static void set_digest(ld_request *r, const ld_fill_ctx *c, ld_digest_kind k, const ld_py_value *v)
{
    if (!v || v->kind == LD_PY_NONE) return;
    uint64_t h = walk(c, v, 0x6c64646967657374ull);
    r->digest[k] = h ? h : 1; /* 0 means "not logged" */
    if (ld_py_has_marker(v)) r->digest_marked |= 1u << k;
    else r->digest_marked &= ~(1u << k);
}

static const ld_py_value *sub_ids(const ld_py_value *obj, int sub)
{
    const ld_py_value *ids = ld_req_get(obj, "input_ids");
    if (sub >= 0 && ids && ids->kind == LD_PY_LIST && ids->n > 0 && ids->u.items &&
        ids->u.items[0].kind == LD_PY_LIST)
        return ld_req_at_sub(ids, sub);
    return ids;
}

static int real_host(const ld_fill_ctx *c, const ld_py_value *host, const char **s, size_t *n)
{
    if (!host || host->kind != LD_PY_STR || ld_request_decode(c, host, s, n, NULL) != LD_OK) return 0;
    return !(*n == strlen(FAKE_BOOTSTRAP_HOST) && !memcmp(*s, FAKE_BOOTSTRAP_HOST, *n));
}

int ld_request_obj_pd_routed(const ld_fill_ctx *ctx, const ld_py_value *obj, int sub)
{
    const ld_py_value *room = ld_req_at_sub(ld_req_get(obj, "bootstrap_room"), sub);
    const char *s;
    size_t n;
    return room && room->kind == LD_PY_INT && !(room->flags & LD_PY_F_BIGINT) &&
           real_host(ctx, ld_req_at_sub(ld_req_get(obj, "bootstrap_host"), sub), &s, &n);
}

ld_status ld_request_fill_pd(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *obj,
                             int sub, int openai, ld_error *err)
{
    const ld_py_value *room = ld_req_at_sub(ld_req_get(obj, "bootstrap_room"), sub);
    const ld_py_value *host = ld_req_at_sub(ld_req_get(obj, "bootstrap_host"), sub);
    const char *s;
    size_t n;
    if (room && room->kind == LD_PY_INT && !(room->flags & LD_PY_F_BIGINT)) r->bootstrap_room = room->u.i;
    if (host && host->kind == LD_PY_STR && !r->bootstrap_host && ld_request_decode(ctx, host, &s, &n, NULL) == LD_OK &&
        !(r->bootstrap_host = ld_request_strdup(r, s, n)))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a bootstrap host");
    if (!ld_request_pd_routed(r)) return LD_OK; /* what this line said, now in r */
    if (openai) {
        set_digest(r, ctx, LD_DIGEST_MESSAGES, ld_req_get(obj, "messages"));
        return LD_OK;
    }
    set_digest(r, ctx, LD_DIGEST_PROMPT, ld_req_at_sub(ld_req_get(obj, "text"), sub));
    set_digest(r, ctx, LD_DIGEST_INPUT_IDS, sub_ids(obj, sub));
    return LD_OK;
}

int ld_request_pd_routed(const ld_request *r)
{
    return r->bootstrap_room != LD_UNSET_INT && r->bootstrap_host &&
           strcmp(r->bootstrap_host, FAKE_BOOTSTRAP_HOST) != 0;
}

int ld_request_pd_prefill_end(const ld_request *r)
{
    return r->finish_kind == LD_FINISH_LENGTH && r->finish_length == 0;
}
