/* chat_render.c - an OpenAI request through a chat template or a built-in
 * encoder (chat_render.h). */
#include "chat_render.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "arena.h"
#include "dsenc.h"

static int set_token(ld_arena *a, ld_tpl_value *ctx, const char *key, const char *v)
{
    ld_tpl_value *val = v ? ld_tpl_value_str(a, v, strlen(v)) : ld_tpl_value_none(a);
    return val && ld_tpl_dict_set(a, ctx, key, val) == LD_OK;
}

static int set_json(ld_arena *a, ld_tpl_value *ctx, const char *key, const cJSON *j)
{
    ld_tpl_value *val = ld_tpl_value_from_json(a, j);
    return val && ld_tpl_dict_set(a, ctx, key, val) == LD_OK;
}

/* The context apply_chat_template builds; NULL when memory ran out. */
static ld_tpl_value *build_context(ld_arena *a, const cJSON *req, const char *bos,
                                   const char *eos, int gen_prompt)
{
    ld_tpl_value *ctx = ld_tpl_value_dict(a);
    int ok = ctx != NULL;
    ok = ok && set_json(a, ctx, "messages", cJSON_GetObjectItemCaseSensitive(req, "messages"));
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    /* the OpenAI server passes tools=None when the request has none; the
     * templates test `tools is defined` and `tools` alike, so leave it out */
    if (ok && tools && !cJSON_IsNull(tools)) ok = set_json(a, ctx, "tools", tools);
    ok = ok && ld_tpl_dict_set(a, ctx, "add_generation_prompt",
                               ld_tpl_value_bool(a, gen_prompt)) == LD_OK;
    ok = ok && set_token(a, ctx, "bos_token", bos) && set_token(a, ctx, "eos_token", eos);
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(req, "chat_template_kwargs");
    for (const cJSON *k = cJSON_IsObject(kw) ? kw->child : NULL; k && ok; k = k->next)
        ok = set_json(a, ctx, k->string, k);
    return ok ? ctx : NULL;
}

static ld_status render_jinja(const ld_tpl_source *src, const cJSON *req,
                              const ld_chat_opts *o, char **out, size_t *out_len,
                              ld_error *err)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    const char *bos = o->bos_token ? o->bos_token : src->bos_token;
    const char *eos = o->eos_token ? o->eos_token : src->eos_token;
    ld_tpl_value *ctx = build_context(&a, req, bos, eos, !o->no_generation_prompt);
    ld_status st = ctx ? ld_tpl_render(src->tpl, ctx, o->limits, out, out_len, err)
                       : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory building the template context");
    ld_arena_release(&a);
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
