/* dsenc_text.c - the text buffer and the writers shared by the DeepSeek
 * encoders: JSON values (json.dumps), tool schemas as SGLang dumps them, and
 * the DSML tool-call block. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "dsenc_internal.h"
#include "replay/template/jinja/tpl.h"

void ld_dsenc_put(ds_buf *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void ld_dsenc_puts(ds_buf *b, const char *s) { ld_dsenc_put(b, s, strlen(s)); }

ld_status ld_dsenc_put_json(ds_buf *b, const cJSON *j, ld_error *err)
{
    char *s = NULL;
    size_t n = 0;
    LD_TRY(ld_tpl_json_dumps(j, -1, &s, &n, err));
    ld_dsenc_put(b, s, n);
    free(s);
    return LD_OK;
}

bool ld_dsenc_truthy(const cJSON *j)
{
    if (!j || cJSON_IsNull(j) || cJSON_IsFalse(j)) return false;
    if (cJSON_IsNumber(j)) return j->valuedouble != 0;
    if (cJSON_IsString(j)) return j->valuestring[0] != 0;
    if (cJSON_IsArray(j) || cJSON_IsObject(j)) return j->child != NULL;
    return true;
}

/* A JSON value, or `null` for an absent one. */
static ld_status put_json_or_null(ds_buf *b, const cJSON *j, ld_error *err)
{
    if (!j) {
        ld_dsenc_puts(b, "null");
        return LD_OK;
    }
    return ld_dsenc_put_json(b, j, err);
}

/* SGLang renders tool["function"] of protocol.Tool.model_dump(): the fields
 * of its Function model in declaration order whatever order the client used,
 * absent ones as their defaults, and defer_loading only when set on the
 * function or (propagated) on the tool.  dsenc_prep.c validated the types. */
ld_status ld_dsenc_put_tool_schema(ds_buf *b, const cJSON *tool, ld_error *err)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    const cJSON *defer = cJSON_GetObjectItemCaseSensitive(fn, "defer_loading");
    if (!defer || cJSON_IsNull(defer)) defer = cJSON_GetObjectItemCaseSensitive(tool, "defer_loading");
    ld_dsenc_puts(b, "{\"description\": ");
    LD_TRY(put_json_or_null(b, cJSON_IsNull(desc) ? NULL : desc, err));
    ld_dsenc_puts(b, ", \"name\": ");
    LD_TRY(ld_dsenc_put_json(b, cJSON_GetObjectItemCaseSensitive(fn, "name"), err));
    ld_dsenc_puts(b, ", \"parameters\": ");
    LD_TRY(put_json_or_null(b, params, err));
    ld_dsenc_puts(b, ", \"strict\": ");
    ld_dsenc_puts(b, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fn, "strict")) ? "true" : "false");
    if (defer && !cJSON_IsNull(defer)) ld_dsenc_puts(b, cJSON_IsTrue(defer) ? ", \"defer_loading\": true" : ", \"defer_loading\": false");
    ld_dsenc_puts(b, "}");
    return LD_OK;
}

ld_status ld_dsenc_put_tool_schemas(ds_buf *b, const cJSON *tools, ld_error *err)
{
    for (const cJSON *t = tools->child; t; t = t->next) {
        if (t != tools->child) ld_dsenc_puts(b, "\n");
        LD_TRY(ld_dsenc_put_tool_schema(b, t, err));
    }
    return LD_OK;
}

/* The argument a Python dict keeps for key `a->string`: json.loads keeps a
 * repeated key at its first place with its last value.  NULL when `a` is a
 * repeat of an earlier key. */
static const cJSON *dict_entry(const cJSON *args, const cJSON *a)
{
    for (const cJSON *p = args->child; p != a; p = p->next)
        if (strcmp(p->string, a->string) == 0) return NULL;
    const cJSON *last = a;
    for (const cJSON *n = a->next; n; n = n->next)
        if (strcmp(n->string, a->string) == 0) last = n;
    return last;
}

/* One `<｜DSML｜parameter ...>` line per argument: strings raw with
 * string="true", everything else as JSON with string="false". */
static ld_status put_parameters(ds_buf *b, const cJSON *args, ld_error *err)
{
    bool first = true;
    for (const cJSON *k = args->child; k; k = k->next) {
        const cJSON *a = dict_entry(args, k);
        if (!a) continue;
        if (!first) ld_dsenc_puts(b, "\n");
        first = false;
        ld_dsenc_puts(b, "<" DS_DSML "parameter name=\"");
        ld_dsenc_puts(b, a->string);
        ld_dsenc_puts(b, cJSON_IsString(a) ? "\" string=\"true\">" : "\" string=\"false\">");
        if (cJSON_IsString(a)) ld_dsenc_puts(b, a->valuestring);
        else LD_TRY(ld_dsenc_put_json(b, a, err));
        ld_dsenc_puts(b, "</" DS_DSML "parameter>");
    }
    return LD_OK;
}

ld_status ld_dsenc_put_tool_calls(ds_buf *b, const ds_msg *m, const char *block, ld_error *err)
{
    ld_dsenc_puts(b, "\n\n<" DS_DSML);
    ld_dsenc_puts(b, block);
    ld_dsenc_puts(b, ">\n");
    for (size_t i = 0; i < m->n_calls; i++) {
        const ds_call *c = &m->calls[i];
        if (!cJSON_IsObject(c->args))
            return LD_FAIL(err, LD_ERR_MISMATCH, 0,
                           "message %d: tool call %zu: 'function.arguments' must be a JSON object",
                           m->req_index, i);
        if (i) ld_dsenc_puts(b, "\n");
        ld_dsenc_puts(b, "<" DS_DSML "invoke name=\"");
        ld_dsenc_puts(b, c->name ? c->name : "None"); /* str.format of None */
        ld_dsenc_puts(b, "\">\n");
        LD_TRY(put_parameters(b, c->args, err));
        ld_dsenc_puts(b, "\n</" DS_DSML "invoke>");
    }
    ld_dsenc_puts(b, "\n</" DS_DSML);
    ld_dsenc_puts(b, block);
    ld_dsenc_puts(b, ">");
    return LD_OK;
}

ld_status ld_dsenc_put_tools_section(ds_buf *b, const ds_msg *m, const char *head, const char *tail,
                               ld_error *err)
{
    if (!m->tools) return LD_OK;
    ld_dsenc_puts(b, "\n\n");
    ld_dsenc_puts(b, head);
    LD_TRY(ld_dsenc_put_tool_schemas(b, m->tools, err));
    ld_dsenc_puts(b, tail);
    return LD_OK;
}
