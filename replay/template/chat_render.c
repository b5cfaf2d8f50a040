/* chat_render.c - an OpenAI request through a chat template or a built-in
 * encoder (chat_render.h). */
#include "chat_render.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "ld_arena.h"
#include "replay/template/deepseek/dsenc.h"

/* ctx[key] = the value of j (None when NULL); the key is borrowed: a
 * literal, or a key of the request, which outlives the render. */
static int set_json(ld_arena *a, ld_tpl_value *ctx, const char *key, const cJSON *j)
{
    ld_tpl_value *val = j ? ld_tpl_value_from_json_borrowed(a, j) : ld_tpl_value_none(a); /* req outlives the render */
    return val && ld_tpl_dict_set_borrowed(a, ctx, key, val) == LD_OK;
}

/* k == name: the first byte at once (keys mostly differ there), the rest
 * inline, without a call per key */
static int same_key(const char *k, const char *name)
{
    if (!k || k[0] != name[0]) return 0;
    while (*k && *k == *name) k++, name++;
    return *k == *name;
}

static int json_null(const cJSON *j) { return (j->type & 0xFF) == cJSON_NULL; }

/* Which of the names a message's reasoning goes by the key k is: 0
 * "reasoning_content", 1 "thinking", 2 "reasoning" (the order transformers
 * looks for them in), or -1; most keys are told apart by their first
 * bytes. */
static int reasoning_name(const char *k)
{
    if (!k) return -1;
    if (k[0] == 't') return same_key(k, "thinking") ? 1 : -1;
    if (k[0] != 'r' || k[1] != 'e' || k[2] != 'a') return -1;
    /* "rea...": most are the long "reasoning_content", compared by strcmp's
     * words rather than a byte at a time */
    return !strcmp(k, "reasoning_content") ? 0 : !strcmp(k, "reasoning") ? 2 : -1;
}

/* k is `thinking` or `reasoning_content`: a member a reasoning replaces */
static int reasoning_alias(const char *k)
{
    int i = reasoning_name(k);
    return i == 0 || i == 1;
}

/* What a message holds that transformers normalizes, found in one pass:
 * the reasoning under the first of its names whose (first) member is not
 * null, whether it has a `thinking` member, whether any member is null, and
 * which of its first 64 members are named `thinking` or
 * `reasoning_content` (bit i: member i). */
typedef struct msg_scan {
    const cJSON *reasoning;
    int has_thinking, has_null;
    uint64_t aliases;
} msg_scan;

static msg_scan scan_message(const cJSON *m)
{
    const cJSON *first[3] = { NULL, NULL, NULL };
    msg_scan r = { NULL, 0, 0, 0 };
    size_t at = 0;
    for (const cJSON *k = m->child; k; k = k->next, at++) {
        int i = reasoning_name(k->string);
        r.has_null |= json_null(k);
        if (i >= 0 && !first[i]) first[i] = k;
        if ((i == 0 || i == 1) && at < 64) r.aliases |= (uint64_t)1 << at; /* reasoning_alias */
    }
    for (size_t i = 0; i < 3 && !r.reasoning; i++)
        if (first[i] && !json_null(first[i])) r.reasoning = first[i];
    r.has_thinking = first[1] != NULL;
    return r;
}

/* One message as transformers hands it to the template: keys whose value is
 * None dropped; a reasoning under any name also given as `thinking` (first,
 * unless the message has it) and `reasoning_content` (in its place, else
 * last).  The members are listed, then made into a dict at once. */
static ld_tpl_value *message_value(ld_arena *a, const cJSON *m)
{
    if ((m->type & 0xFF) != cJSON_Object) return ld_tpl_value_from_json_borrowed(a, m);
    msg_scan sc = scan_message(m);
    const cJSON *reasoning = sc.reasoning;
    if (!reasoning && !sc.has_null) return ld_tpl_value_from_json_borrowed(a, m); /* nothing to normalize */
    size_t n = 2;
    for (const cJSON *k = m->child; k; k = k->next) n++;
    const char **keys = ld_arena_alloc(a, n * (sizeof *keys + sizeof(const cJSON *)));
    if (!keys) return NULL;
    const cJSON **vals = (const cJSON **)(keys + n);
    n = 0;
    if (reasoning && !sc.has_thinking) keys[n] = "thinking", vals[n++] = reasoning;
    size_t at = 0;
    for (const cJSON *k = m->child; k; k = k->next, at++) {
        if (json_null(k)) continue;
        int aliased = reasoning && (at < 64 ? (int)((sc.aliases >> at) & 1) : reasoning_alias(k->string));
        keys[n] = k->string ? k->string : "", vals[n++] = aliased ? reasoning : k;
    }
    if (reasoning) keys[n] = "reasoning_content", vals[n++] = reasoning;
    return ld_tpl_value_dict_of_json(a, n, keys, vals);
}

static ld_tpl_value *messages_value(ld_arena *a, const cJSON *msgs)
{
    size_t n = 0;
    for (const cJSON *m = msgs->child; m; m = m->next) n++;
    ld_tpl_value *list = ld_tpl_value_list_sized(a, n); /* one array, not a doubling one */
    for (const cJSON *m = msgs->child; list && m; m = m->next) {
        ld_tpl_value *v = message_value(a, m);
        if (!v || ld_tpl_list_push(a, list, v) != LD_OK) return NULL;
    }
    return list;
}

/* The context transformers' apply_chat_template (5.x) gives the template:
 * normalized messages, `tools` and `documents` always there (None when the
 * request has none), add_generation_prompt, the special tokens that are set
 * (an unset one stays undefined), then the template kwargs.  NULL when
 * memory ran out. */
static ld_tpl_value *build_context(ld_arena *a, const cJSON *req, const char *bos,
                                   const char *eos, int gen_prompt)
{
    ld_tpl_value *ctx = ld_tpl_value_dict(a);
    ld_tpl_value *msgs = ctx ? messages_value(a, cJSON_GetObjectItemCaseSensitive(req, "messages")) : NULL;
    int ok = msgs && ld_tpl_dict_set_borrowed(a, ctx, "messages", msgs) == LD_OK;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    ok = ok && set_json(a, ctx, "tools", tools && cJSON_IsArray(tools) && tools->child ? tools : NULL);
    ok = ok && set_json(a, ctx, "documents", NULL);
    ok = ok && ld_tpl_dict_set_borrowed(a, ctx, "add_generation_prompt",
                                        ld_tpl_value_bool(a, gen_prompt)) == LD_OK;
    if (ok && bos) ok = ld_tpl_dict_set_borrowed(a, ctx, "bos_token", ld_tpl_value_str(a, bos, strlen(bos))) == LD_OK;
    if (ok && eos) ok = ld_tpl_dict_set_borrowed(a, ctx, "eos_token", ld_tpl_value_str(a, eos, strlen(eos))) == LD_OK;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(req, "chat_template_kwargs");
    for (const cJSON *k = cJSON_IsObject(kw) ? kw->child : NULL; k && ok; k = k->next)
        ok = set_json(a, ctx, k->string, k);
    return ok ? ctx : NULL;
}

ld_status ld_chat_context(const ld_tpl_source *src, const cJSON *request, const ld_chat_opts *opts,
                          ld_arena *arena, ld_tpl_value **out, ld_error *err)
{
    static const ld_chat_opts no_opts;
    const ld_chat_opts *o = opts ? opts : &no_opts;
    const char *bos = o->bos_token ? o->bos_token : src->bos_token;
    const char *eos = o->eos_token ? o->eos_token : src->eos_token;
    if (!cJSON_IsObject(request) ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(request, "messages")))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "the request has no 'messages' list");
    *out = build_context(arena, request, bos, eos, !o->no_generation_prompt);
    return *out ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory building the template context");
}

static ld_status render_jinja(const ld_tpl_source *src, const cJSON *req,
                              const ld_chat_opts *o, char **out, size_t *out_len,
                              ld_error *err)
{
    ld_arena own, *a = o->scratch;
    if (!a) ld_arena_init(a = &own, 0);
    ld_tpl_value *ctx = NULL;
    ld_status st = ld_chat_context(src, req, o, a, &ctx, err);
    if (st == LD_OK) st = ld_tpl_render_in(src->tpl, ctx, o->limits, a, out, out_len, err);
    if (a == &own) ld_arena_release(a);
    else ld_arena_reset(a);
    return st;
}

ld_status ld_chat_render(const ld_tpl_source *src, const cJSON *request,
                         const ld_chat_opts *opts, char **out, size_t *out_len,
                         ld_error *err)
{
    static const ld_chat_opts no_opts;
    const ld_chat_opts *o = opts ? opts : &no_opts;
    *out = NULL;
    *out_len = 0;
    if (!cJSON_IsObject(request) ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(request, "messages")))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "the request has no 'messages' list");
    switch (src->kind) {
    case LD_TPL_JINJA:
        return render_jinja(src, request, o, out, out_len, err);
    case LD_TPL_DEEPSEEK_V32:
        return ld_dsenc_render(LD_DSENC_V32, request, !o->no_generation_prompt, out, out_len, err);
    case LD_TPL_DEEPSEEK_V4:
        return ld_dsenc_render(LD_DSENC_V4, request, !o->no_generation_prompt, out, out_len, err);
    }
    return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s': unknown template kind", src->template_path);
}
