/* request_fields.c - request fields from SGLang objects, out dicts, OpenAI
 * payloads and vLLM lines (log-formats.md sections 4 and 7). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parse/line/logline.h"
#include "request_fill.h"
#include "request_text.h"

static int num_d(const ld_py_value *v, double *out)
{
    if (!v) return 0;
    if (v->kind == LD_PY_FLOAT) *out = v->u.f;
    else if (v->kind == LD_PY_INT && !(v->flags & LD_PY_F_BIGINT)) *out = (double)v->u.i;
    else return 0;
    return 1;
}

static int num_i(const ld_py_value *v, int64_t *out)
{
    if (!v || v->kind != LD_PY_INT || (v->flags & LD_PY_F_BIGINT)) return 0;
    *out = v->u.i;
    return 1;
}

const ld_py_value *ld_req_at_sub(const ld_py_value *v, int sub)
{
    if (!v || sub < 0 || v->kind != LD_PY_LIST) return v;
    if (!v->u.items) return NULL; /* a skimmed int list has no elements to pick */
    return (uint32_t)sub < v->n ? &v->u.items[sub] : NULL;
}

/* Length of a list, or head+tail of a truncated list; -1 otherwise. */
static int64_t list_len(ld_request *r, const ld_py_value *v)
{
    if (!v) return -1;
    if (v->kind == LD_PY_LIST && (v->flags & LD_PY_F_SKIMMED)) return v->n;
    if (v->kind == LD_PY_LIST || v->kind == LD_PY_TUPLE) {
        int64_t n = 0;
        for (uint32_t i = 0; i < v->n; i++)
            if (v->u.items[i].kind == LD_PY_ELLIPSIS) r->flags |= LD_REQ_TRUNCATED;
            else n++;
        return n;
    }
    if (v->kind == LD_PY_TRUNC &&
        (v->u.items[0].kind == LD_PY_LIST || v->u.items[0].kind == LD_PY_TUPLE)) {
        r->flags |= LD_REQ_TRUNCATED;
        return (int64_t)v->u.items[0].n + v->u.items[1].n;
    }
    return -1;
}

static int is_batch_list(const ld_py_value *v)
{
    return v && v->kind == LD_PY_LIST && v->n > 0 && v->u.items &&
           (v->u.items[0].kind == LD_PY_LIST || v->u.items[0].kind == LD_PY_STR ||
            v->u.items[0].kind == LD_PY_TRUNC || v->u.items[0].kind == LD_PY_DICT);
}

int ld_request_n_subs(const ld_py_value *obj, const ld_py_value *json_rid)
{
    const ld_py_value *rid = json_rid ? json_rid : ld_req_get(obj, "rid");
    if (rid && rid->kind == LD_PY_LIST) return rid->n > 0 ? (int)rid->n : 1;
    const ld_py_value *text = ld_req_get(obj, "text");
    const ld_py_value *ids = ld_req_get(obj, "input_ids");
    if (text && text->kind == LD_PY_LIST && is_batch_list(text)) return (int)text->n;
    if (ids && ids->kind == LD_PY_LIST && ids->n > 0 && ids->u.items &&
        ids->u.items[0].kind == LD_PY_LIST)
        return (int)ids->n;
    int64_t n = 0;
    const ld_py_value *sp = ld_req_get(obj, "sampling_params");
    if (num_i(ld_req_get(sp, "n"), &n) && n > 1 && n < 1000000) return (int)n;
    return 1;
}

ld_status ld_request_sub_rid(const ld_fill_ctx *ctx, const ld_py_value *obj,
                             const ld_py_value *json_rid, int n_subs, int i,
                             const char **out_rid, const char **out_parent,
                             ld_error *err)
{
    const ld_py_value *rid = json_rid ? json_rid : ld_req_get(obj, "rid");
    const char *s;
    size_t n;
    *out_rid = *out_parent = NULL;
    if (rid && rid->kind == LD_PY_LIST) rid = ld_req_at_sub(rid, i);
    if (!rid || rid->kind != LD_PY_STR) return LD_OK;
    LD_TRY(ld_request_decode(ctx, rid, &s, &n, err));
    char *cp = ld_arena_memdup(ctx->scratch, s, n);
    if (!cp) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a rid");
    const ld_py_value *top = json_rid ? json_rid : ld_req_get(obj, "rid");
    if (n_subs > 1 && top->kind == LD_PY_STR) { /* expanded as {rid}_{i} */
        char *ex = ld_arena_alloc(ctx->scratch, n + 24);
        if (!ex) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a rid");
        snprintf(ex, n + 24, "%s_%d", cp, i);
        *out_parent = cp;
        *out_rid = ex;
        return LD_OK;
    }
    *out_rid = cp;
    return LD_OK;
}

static void sampling(ld_request *r, const ld_py_value *sp, int override)
{
    double d;
    int64_t i;
    if (!sp) return;
    if (num_d(ld_req_get(sp, "temperature"), &d) && (override || isnan(r->temperature)))
        r->temperature = d;
    if (num_d(ld_req_get(sp, "top_p"), &d) && (override || isnan(r->top_p))) r->top_p = d;
    if (num_i(ld_req_get(sp, "top_k"), &i) && (override || r->top_k == LD_UNSET_INT))
        r->top_k = i;
    static const char *mt[] = {"max_new_tokens", "max_tokens", "max_completion_tokens"};
    for (size_t k = 0; k < 3; k++)
        if (num_i(ld_req_get(sp, mt[k]), &i) && (override || r->max_tokens == LD_UNSET_INT)) {
            r->max_tokens = i;
            break;
        }
    if (num_i(ld_req_get(sp, "n"), &i) && (override || r->n == LD_UNSET_INT)) r->n = i;
}

static int better_text(const ld_text *old, const ld_text *nw)
{
    return (nw->flags & LD_TEXT_PRESENT) || !(old->flags & LD_TEXT_PRESENT);
}

ld_status ld_request_fill_obj(ld_request *r, const ld_fill_ctx *ctx,
                              const ld_py_value *obj, int sub, ld_error *err)
{
    const ld_py_value *text = ld_req_at_sub(ld_req_get(obj, "text"), sub);
    const ld_py_value *ids = ld_req_get(obj, "input_ids");
    if (sub >= 0 && ids && ids->kind == LD_PY_LIST && ids->n > 0 && ids->u.items &&
        ids->u.items[0].kind == LD_PY_LIST)
        ids = ld_req_at_sub(ids, sub);
    if (!ld_req_get(obj, "text") && !ld_req_get(obj, "input_ids"))
        r->flags |= LD_REQ_SKIPPED_FIELDS | LD_REQ_TRUNCATED;
    if (text && text->kind == LD_PY_LIST) { /* patched builds: messages in text= */
        LD_TRY(ld_request_fill_messages(r, ctx, text, err));
    } else {
        ld_text t;
        LD_TRY(ld_req_text(r, ctx, text, &t, err));
        if (!ld_req_get(obj, "text")) t.flags |= LD_TEXT_SKIPPED;
        if (better_text(&r->prompt, &t)) r->prompt = t;
    }
    int64_t n = list_len(r, ids);
    if (n >= 0) r->n_input_ids = n;
    sampling(r, ld_req_at_sub(ld_req_get(obj, "sampling_params"), sub), 1);
    const ld_py_value *st = ld_req_at_sub(ld_req_get(obj, "stream"), sub);
    if (st && st->kind == LD_PY_BOOL) r->stream = (int)st->u.i;
    if (ld_py_has_marker(obj)) r->flags |= LD_REQ_TRUNCATED;
    return LD_OK;
}

static const char *dup_decoded(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *v)
{
    const char *s;
    size_t n;
    char num[32];
    if (!v) return NULL;
    if (v->kind == LD_PY_INT && !(v->flags & LD_PY_F_BIGINT)) {
        snprintf(num, sizeof num, "%lld", (long long)v->u.i);
        return ld_request_strdup(r, num, strlen(num));
    }
    if (v->kind != LD_PY_STR || ld_request_decode(ctx, v, &s, &n, NULL) != LD_OK) return NULL;
    return ld_request_strdup(r, s, n);
}

static void set_finish_type(ld_request *r, const char *t)
{
    r->finish_type = t;
    if (!t) r->finish_kind = LD_FINISH_UNKNOWN;
    else if (!strcmp(t, "stop")) r->finish_kind = LD_FINISH_STOP;
    else if (!strcmp(t, "length")) r->finish_kind = LD_FINISH_LENGTH;
    else if (!strcmp(t, "abort")) r->finish_kind = LD_FINISH_ABORT;
    else r->finish_kind = LD_FINISH_OTHER;
}

static void meta_info(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *mi)
{
    const ld_py_value *fr = ld_req_get(mi, "finish_reason");
    if (fr && fr->kind == LD_PY_DICT) {
        set_finish_type(r, dup_decoded(r, ctx, ld_req_get(fr, "type")));
        r->finish_matched = dup_decoded(r, ctx, ld_req_get(fr, "matched"));
        num_i(ld_req_get(fr, "length"), &r->finish_length);
        r->finish_message = dup_decoded(r, ctx, ld_req_get(fr, "message"));
    }
    num_i(ld_req_get(mi, "prompt_tokens"), &r->prompt_tokens);
    num_i(ld_req_get(mi, "completion_tokens"), &r->completion_tokens);
    num_i(ld_req_get(mi, "cached_tokens"), &r->cached_tokens);
    num_d(ld_req_get(mi, "e2e_latency"), &r->e2e_latency);
}

ld_status ld_request_fill_out(ld_request *r, const ld_fill_ctx *ctx,
                              const ld_py_value *out, ld_error *err)
{
    if (!out || out->kind != LD_PY_DICT) return LD_OK;
    const ld_py_value *text = ld_req_get(out, "text");
    ld_text t;
    LD_TRY(ld_req_text(r, ctx, text, &t, err));
    if (!text) {
        t.flags |= LD_TEXT_SKIPPED;
        if (!ld_req_get(out, "output_ids")) r->flags |= LD_REQ_SKIPPED_FIELDS | LD_REQ_TRUNCATED;
    }
    r->output = t;
    int64_t n = list_len(r, ld_req_get(out, "output_ids"));
    if (n >= 0) r->n_output_ids = n;
    meta_info(r, ctx, ld_req_get(out, "meta_info"));
    if (ld_py_has_marker(out)) r->flags |= LD_REQ_TRUNCATED;
    return LD_OK;
}

ld_status ld_request_fill_openai(ld_request *r, const ld_fill_ctx *ctx,
                                 const ld_py_value *obj, ld_error *err)
{
    if (!obj || obj->kind != LD_PY_DICT) return LD_OK;
    if (!r->model) r->model = dup_decoded(r, ctx, ld_req_get(obj, "model"));
    LD_TRY(ld_request_fill_messages(r, ctx, ld_req_get(obj, "messages"), err));
    const ld_py_value *tools = ld_req_get(obj, "tools");
    if (tools && tools->kind == LD_PY_LIST) r->n_tools = tools->n;
    const ld_py_value *kw = ld_req_get(obj, "chat_template_kwargs");
    if (kw && !r->chat_template_kwargs) {
        r->chat_template_kwargs = ld_py_value_clone(&r->arena, kw);
        if (!r->chat_template_kwargs) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    sampling(r, obj, 0);
    const ld_py_value *st = ld_req_get(obj, "stream");
    if (st && st->kind == LD_PY_BOOL && r->stream < 0) r->stream = (int)st->u.i;
    if (ld_py_has_marker(obj)) r->flags |= LD_REQ_TRUNCATED;
    return LD_OK;
}

/* What r does not know yet of q's sampling and stream (sampling(r, obj, 0)),
 * and q's truncation. */
static void take_openai_scalars(ld_request *r, const ld_request *q, unsigned q_flags)
{
    if (isnan(r->temperature)) r->temperature = q->temperature;
    if (isnan(r->top_p)) r->top_p = q->top_p;
    if (r->top_k == LD_UNSET_INT) r->top_k = q->top_k;
    if (r->max_tokens == LD_UNSET_INT) r->max_tokens = q->max_tokens;
    if (r->n == LD_UNSET_INT) r->n = q->n;
    if (q->stream >= 0 && r->stream < 0) r->stream = q->stream;
    if (q->n_tools >= 0) r->n_tools = q->n_tools;
    r->flags |= q_flags & LD_REQ_TRUNCATED;
}

ld_status ld_request_copy_openai(ld_request *r, const ld_request *q, unsigned q_flags, ld_error *err)
{
    if (!r->model && q->model && !(r->model = ld_request_strdup(r, q->model, strlen(q->model))))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (q->n_messages >= 0) LD_TRY(ld_request_copy_messages(r, q->messages, q->n_messages, err));
    if (q->chat_template_kwargs && !r->chat_template_kwargs) {
        r->chat_template_kwargs = ld_py_value_clone(&r->arena, q->chat_template_kwargs);
        if (!r->chat_template_kwargs) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    take_openai_scalars(r, q, q_flags);
    return LD_OK;
}

int ld_request_move_openai(ld_request *r, ld_request *q, unsigned q_flags)
{
    if (!ld_arena_adopt(&r->arena, &q->arena)) return 0;
    if (!r->model) r->model = q->model;
    if (q->n_messages >= 0) {
        r->messages = q->messages;
        r->n_messages = q->n_messages;
    }
    if (!r->chat_template_kwargs) r->chat_template_kwargs = q->chat_template_kwargs;
    take_openai_scalars(r, q, q_flags);
    return 1;
}

/* an owned copy of an id list in the record */
static ld_status keep_ids(ld_request *r, const ld_py_value *v, const ld_py_value **dst, ld_error *err)
{
    *dst = ld_py_value_clone(&r->arena, v);
    return *dst ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory copying an id list");
}

ld_status ld_request_fill_vllm(ld_request *r, const ld_fill_ctx *ctx,
                               const struct ld_logline *l, ld_error *err)
{
    r->engine = LD_ENGINE_VLLM;
    if (l->vllm_prompt) {
        ld_text t;
        LD_TRY(ld_req_text(r, ctx, l->vllm_prompt, &t, err));
        if (ctx->vllm_max_log_len && t.n_chars >= ctx->vllm_max_log_len) {
            t.flags |= LD_TEXT_HEAD_ONLY;
            r->flags |= LD_REQ_TRUNCATED;
        }
        if (better_text(&r->prompt, &t)) r->prompt = t;
    }
    int64_t n = list_len(r, l->vllm_prompt_ids);
    if (n >= 0) {
        r->n_input_ids = n;
        if (ctx->vllm_max_log_len && (uint64_t)n >= ctx->vllm_max_log_len) r->flags |= LD_REQ_IDS_HEAD_ONLY;
        if (ctx->keep_values && l->vllm_prompt_ids->kind == LD_PY_LIST)
            LD_TRY(keep_ids(r, l->vllm_prompt_ids, &r->vllm_prompt_ids, err));
    }
    sampling(r, l->vllm_params, 1);
    if (l->vllm_output) LD_TRY(ld_req_text(r, ctx, l->vllm_output, &r->output, err));
    n = list_len(r, l->vllm_output_ids);
    if (n >= 0) r->n_output_ids = n;
    if (n >= 0 && l->vllm_streaming != 1 && ctx->keep_values && l->vllm_output_ids->kind == LD_PY_LIST)
        LD_TRY(keep_ids(r, l->vllm_output_ids, &r->vllm_output_ids, err));
    if (l->vllm_finish) {
        size_t k = l->vllm_finish_len;
        while (k > 0 && (l->vllm_finish[k - 1] == '.' || l->vllm_finish[k - 1] == ' ')) k--;
        char *t = (char *)ld_request_strdup(r, l->vllm_finish, k);
        set_finish_type(r, t);
    }
    return LD_OK;
}
