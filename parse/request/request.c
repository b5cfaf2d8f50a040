/* request.c - the request record: lifecycle, copies, names. */
#include "request.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "request_fill.h"
#include "request_text.h"

const char *ld_engine_name(ld_engine e)
{
    return e == LD_ENGINE_VLLM ? "vllm" : "sglang";
}

const char *ld_part_name(ld_part p)
{
    static const char *names[LD_PART_COUNT] = {
        "openai", "receive", "finish", "inout", "vllm_received", "vllm_details", "vllm_generated"};
    return (unsigned)p < LD_PART_COUNT ? names[p] : "?";
}

ld_request *ld_request_new(size_t max_bytes)
{
    ld_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    ld_arena_init(&r->arena, max_bytes);
    r->sub_index = -1;
    r->n_messages = -1;
    r->n_tools = -1;
    r->temperature = r->top_p = NAN;
    r->top_k = r->max_tokens = r->n = LD_UNSET_INT;
    r->stream = -1;
    r->n_input_ids = r->n_output_ids = -1;
    r->finish_length = LD_UNSET_INT;
    r->prompt_tokens = r->completion_tokens = r->cached_tokens = LD_UNSET_INT;
    r->e2e_latency = NAN;
    r->bootstrap_room = LD_UNSET_INT;
    return r;
}

void ld_request_free(ld_request *r)
{
    if (!r) return;
    ld_request_free(r->peer);
    ld_arena_release(&r->arena);
    free(r);
}

const char *ld_request_strdup(ld_request *r, const char *s, size_t n)
{
    if (!s) return NULL;
    return ld_arena_memdup(&r->arena, s, n);
}

void ld_request_set_source(ld_request *r, ld_part part, const char *member,
                           uint64_t line, uint64_t offset, uint64_t lost_bytes)
{
    if ((unsigned)part >= LD_PART_COUNT) return;
    if (r->seen & LD_PART_BIT(part)) r->flags |= LD_REQ_DUPLICATE;
    r->seen |= LD_PART_BIT(part);
    r->src[part].member = member ? ld_request_strdup(r, member, strlen(member)) : NULL;
    r->src[part].line = line;
    r->src[part].offset = offset;
    r->src[part].lost_bytes = lost_bytes;
    if (lost_bytes) r->flags |= LD_REQ_CAPTURE_LOSS;
    /* a later whole copy of the part replaces a cut one (ld_request_set_cut marks it again) */
    r->src[part].cut_at = 0;
    r->src[part].cut_field = NULL;
    r->flags &= ~LD_REQ_CAPTURE_CUT;
    for (int p = 0; p < LD_PART_COUNT; p++)
        if (r->src[p].cut_at) r->flags |= LD_REQ_CAPTURE_CUT;
}

void ld_request_set_cut(ld_request *r, ld_part part, uint64_t cut_at, const char *field, size_t n)
{
    if ((unsigned)part >= LD_PART_COUNT || !cut_at) return;
    size_t k = 0;
    while (k < n && k < 48 && field[k] != '=' && field[k] != ',' && field[k] != ')') k++;
    while (k && field[0] == ' ') field++, k--;
    r->src[part].cut_at = cut_at;
    r->src[part].cut_field = ld_request_strdup(r, field, k);
    r->flags |= LD_REQ_CAPTURE_CUT;
}

int ld_py_has_marker(const ld_py_value *v)
{
    if (!v) return 0;
    switch (v->kind) {
    case LD_PY_TRUNC:
    case LD_PY_ABBREV:
    case LD_PY_ELLIPSIS:
        return 1;
    default:
        break;
    }
    if (v->flags & LD_PY_F_MARKS_KNOWN) return (v->flags & LD_PY_F_MARKED) != 0;
    switch (v->kind) { /* trees not built by the parser (JSON lines) */
    case LD_PY_LIST:
    case LD_PY_TUPLE:
    case LD_PY_SET:
        for (uint32_t i = 0; i < v->n; i++)
            if (ld_py_has_marker(&v->u.items[i])) return 1;
        return 0;
    case LD_PY_DICT:
        for (uint32_t i = 0; i < 2 * v->n; i++)
            if (ld_py_has_marker(&v->u.items[i])) return 1;
        return 0;
    case LD_PY_CALL:
        for (uint32_t i = 0; i < v->u.call->n_args; i++)
            if (ld_py_has_marker(&v->u.call->args[i])) return 1;
        return 0;
    default:
        return 0;
    }
}

ld_status ld_request_decode(const ld_fill_ctx *ctx, const ld_py_value *v,
                            const char **out, size_t *out_len, ld_error *err)
{
    ld_decode_memo *m = ctx->memo;
    if (m && m->v == v) {
        *out = m->s;
        *out_len = m->n;
        return LD_OK;
    }
    LD_TRY(ld_py_str_decode(v, ctx->scratch, out, out_len, err));
    if (m && (v->flags & LD_PY_F_ESCAPED) && v->n > 256) { /* worth remembering */
        m->v = v;
        m->s = *out;
        m->n = *out_len;
    }
    return LD_OK;
}

/* ---------------------------------------------------------------- clone */

static int clone_items(ld_arena *a, ld_py_value *dst, const ld_py_value *src, size_t n);

static int clone_call(ld_arena *a, ld_py_value *dst, const ld_py_call *c)
{
    ld_py_call *nc = ld_arena_alloc(a, sizeof *nc);
    if (!nc) return -1;
    *nc = *c;
    nc->name = ld_arena_memdup(a, c->name ? c->name : "", c->name_len);
    nc->arg_names = ld_arena_alloc(a, (c->n_args + 1) * sizeof *nc->arg_names);
    nc->arg_name_lens = ld_arena_alloc(a, (c->n_args + 1) * sizeof *nc->arg_name_lens);
    nc->args = ld_arena_alloc(a, (c->n_args + 1) * sizeof *nc->args);
    if (!nc->name || !nc->arg_names || !nc->arg_name_lens || !nc->args) return -1;
    for (uint32_t i = 0; i < c->n_args; i++) {
        nc->arg_name_lens[i] = c->arg_name_lens ? c->arg_name_lens[i] : 0;
        nc->arg_names[i] = c->arg_names && c->arg_names[i]
                               ? ld_arena_memdup(a, c->arg_names[i], nc->arg_name_lens[i])
                               : NULL;
    }
    if (clone_items(a, nc->args, c->args, c->n_args)) return -1;
    dst->u.call = nc;
    return 0;
}

static int clone_into(ld_arena *a, ld_py_value *dst, const ld_py_value *src)
{
    *dst = *src;
    switch (src->kind) {
    case LD_PY_STR: case LD_PY_BYTES: case LD_PY_NAME: case LD_PY_OPAQUE:
        dst->u.raw = ld_arena_memdup(a, src->u.raw ? src->u.raw : "", src->n);
        return dst->u.raw ? 0 : -1;
    case LD_PY_INT:
        if (!(src->flags & LD_PY_F_BIGINT)) return 0;
        dst->u.raw = ld_arena_memdup(a, src->u.raw, src->n);
        return dst->u.raw ? 0 : -1;
    case LD_PY_LIST: case LD_PY_TUPLE: case LD_PY_SET: case LD_PY_TRUNC: {
        if (src->kind == LD_PY_LIST && (src->flags & LD_PY_F_SKIMMED)) return 0; /* count only */
        size_t n = src->kind == LD_PY_TRUNC ? 2 : src->n;
        dst->u.items = ld_arena_alloc(a, (n + 1) * sizeof *dst->u.items);
        return dst->u.items ? clone_items(a, dst->u.items, src->u.items, n) : -1;
    }
    case LD_PY_DICT:
        dst->u.items = ld_arena_alloc(a, (2 * (size_t)src->n + 1) * sizeof *dst->u.items);
        return dst->u.items ? clone_items(a, dst->u.items, src->u.items, 2 * (size_t)src->n) : -1;
    case LD_PY_CALL:
        return clone_call(a, dst, src->u.call);
    case LD_PY_ABBREV: {
        ld_py_abbrev *ab = ld_arena_alloc(a, sizeof *ab);
        if (!ab) return -1;
        *ab = *src->u.abbrev;
        ab->key = ld_arena_memdup(a, ab->key ? ab->key : "", ab->key_len);
        ab->digest = ld_arena_memdup(a, ab->digest ? ab->digest : "", ab->digest_len);
        dst->u.abbrev = ab;
        return ab->key && ab->digest ? 0 : -1;
    }
    default:
        return 0;
    }
}

static int clone_items(ld_arena *a, ld_py_value *dst, const ld_py_value *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (clone_into(a, &dst[i], &src[i])) return -1;
    return 0;
}

ld_py_value *ld_py_value_clone(ld_arena *arena, const ld_py_value *v)
{
    if (!v) return NULL;
    ld_py_value *c = ld_arena_alloc(arena, sizeof *c);
    if (!c || clone_into(arena, c, v)) return NULL;
    return c;
}

/* obj's input_ids list for sub-request `sub` (-1 = single), or NULL. */
static const ld_py_value *ids_of(const ld_py_value *obj, int32_t sub)
{
    const ld_py_value *ids = obj ? ld_req_get(obj, "input_ids") : NULL;
    if (ids && ids->kind == LD_PY_LIST && ids->n > 0 && ids->u.items &&
        ids->u.items[0].kind == LD_PY_LIST)
        ids = sub >= 0 && (uint32_t)sub < ids->n ? &ids->u.items[sub] : NULL;
    return ids && (ids->kind == LD_PY_LIST || ids->kind == LD_PY_TRUNC) ? ids : NULL;
}

/* The ids of list `v` (a LIST, or the head of a cut one when `head` is
 * set) into a malloc'd array; `what` names the field in errors. */
static ld_status ids_from(const ld_py_value *v, const char *what, int head, int32_t **ids, size_t *n,
                          ld_error *err)
{
    if (v->kind == LD_PY_TRUNC) {
        if (!head) return LD_FAIL(err, LD_ERR_TRUNCATED, v->off, "the logger cut the %s list", what);
        v = &v->u.items[0];
        if (v->kind != LD_PY_LIST) return LD_FAIL(err, LD_ERR_TRUNCATED, v->off, "the logger cut the %s list", what);
    }
    if (v->n && !v->u.items) return LD_FAIL(err, LD_ERR_MISMATCH, v->off, "the %s were counted, not kept", what);
    int32_t *out = malloc((v->n ? v->n : 1) * sizeof *out);
    if (!out) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for %s", what);
    for (uint32_t i = 0; i < v->n; i++) {
        const ld_py_value *x = &v->u.items[i];
        if (x->kind != LD_PY_INT || (x->flags & LD_PY_F_BIGINT) || x->u.i < 0 || x->u.i > INT32_MAX) {
            free(out);
            return LD_FAIL(err, LD_ERR_SYNTAX, x->off, "%s[%u] is not a token id", what, i);
        }
        out[i] = (int32_t)x->u.i;
    }
    *ids = out;
    *n = v->n;
    return LD_OK;
}

ld_status ld_request_input_ids(const ld_request *r, int32_t **ids, size_t *n, ld_error *err)
{
    *ids = NULL;
    *n = 0;
    const ld_py_value *v = ids_of(r->finish_obj, r->sub_index);
    if (!v) v = ids_of(r->receive_obj, r->sub_index);
    if (!v && r->vllm_prompt_ids && (r->flags & LD_REQ_IDS_HEAD_ONLY))
        return LD_FAIL(err, LD_ERR_TRUNCATED, r->vllm_prompt_ids->off,
                       "vLLM logged %u prompt_token_ids, its --max-log-len: the list may be cut", r->vllm_prompt_ids->n);
    if (!v) v = r->vllm_prompt_ids;
    if (!v) return LD_FAIL(err, LD_ERR_MISMATCH, 0, "the log holds no input_ids for this request");
    return ids_from(v, "input_ids", 0, ids, n, err);
}

/* out's output_ids list for sub-request `sub` (-1 = single), or NULL. */
static const ld_py_value *out_ids_of(const ld_py_value *out, int32_t sub)
{
    const ld_py_value *ids = out ? ld_req_get(out, "output_ids") : NULL;
    if (ids && ids->kind == LD_PY_LIST && ids->n > 0 && ids->u.items &&
        ids->u.items[0].kind == LD_PY_LIST)
        ids = sub >= 0 && (uint32_t)sub < ids->n ? &ids->u.items[sub] : NULL;
    return ids && (ids->kind == LD_PY_LIST || ids->kind == LD_PY_TRUNC) ? ids : NULL;
}

static ld_status output_ids(const ld_request *r, int head, int32_t **ids, size_t *n, ld_error *err)
{
    *ids = NULL;
    *n = 0;
    const ld_py_value *v = out_ids_of(r->out, r->sub_index);
    if (!v) v = r->vllm_output_ids;
    if (!v) return LD_FAIL(err, LD_ERR_MISMATCH, 0, "the log holds no output_ids for this request");
    return ids_from(v, "output_ids", head, ids, n, err);
}

ld_status ld_request_output_ids(const ld_request *r, int32_t **ids, size_t *n, ld_error *err)
{
    return output_ids(r, 0, ids, n, err);
}

ld_status ld_request_output_ids_head(const ld_request *r, int32_t **ids, size_t *n, ld_error *err)
{
    return output_ids(r, 1, ids, n, err);
}

const ld_py_value *ld_req_get(const ld_py_value *obj, const char *name)
{
    if (!obj) return NULL;
    if (obj->kind == LD_PY_CALL) return ld_py_call_get(obj, name);
    if (obj->kind == LD_PY_DICT) return ld_py_dict_get(obj, name);
    return NULL;
}
