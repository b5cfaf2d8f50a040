/* server_prep.c - server-side preprocessing of chat requests
 * (server_prep.h). */
#include "server_prep.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <string.h>

int ld_server_by_name(const char *name)
{
    if (!strcmp(name, "hf") || !strcmp(name, "none")) return LD_SERVER_HF;
    if (!strcmp(name, "sglang")) return LD_SERVER_SGLANG;
    return -1;
}

static cJSON *item(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}


/* A copy of obj[key], or None when absent/None; NULL on out of memory. */
static cJSON *copy_or_null(const cJSON *obj, const char *key)
{
    const cJSON *v = item(obj, key);
    return v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull();
}


static int add(cJSON *obj, const char *key, cJSON *v)
{
    return v && cJSON_AddItemToObject(obj, key, v);
}


static int is_text_part(const cJSON *p)
{
    const cJSON *type = item(p, "type"), *text = item(p, "text");
    return cJSON_IsString(type) && cJSON_IsString(text) &&
           (!strcmp(type->valuestring, "text") || !strcmp(type->valuestring, "input_text"));
}


/* "a b c" from a list of text parts ({"type": "text", "text": ...} or
 * strings), as normalize_tool_content does; NULL when one part is not text. */
static cJSON *joined_text_parts(const cJSON *parts)
{
    size_t len = 0;
    for (const cJSON *p = parts->child; p; p = p->next) {
        const cJSON *t = cJSON_IsString(p) ? p : item(p, "text");
        const cJSON *type = item(p, "type");
        if (!cJSON_IsString(p) && !(cJSON_IsString(type) && !strcmp(type->valuestring, "text")))
            return NULL;
        len += (cJSON_IsString(t) ? strlen(t->valuestring) : 0) + 1;
    }
    char *buf = cJSON_malloc(len + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (const cJSON *p = parts->child; p; p = p->next) {
        const cJSON *t = cJSON_IsString(p) ? p : item(p, "text");
        if (o) buf[o++] = ' ';
        if (cJSON_IsString(t)) {
            size_t n = strlen(t->valuestring);
            memcpy(buf + o, t->valuestring, n);
            o += n;
        }
    }
    buf[o] = 0;
    cJSON *s = cJSON_CreateString(buf);
    cJSON_free(buf);
    return s;
}


/* A content-part list for a template that wants strings: the text parts
 * joined by " " ("" when there are none), as process_content_for_template_format
 * does for the "string" content format. */
static cJSON *flattened_parts(const cJSON *parts)
{
    size_t len = 1;
    for (const cJSON *p = parts->child; p; p = p->next)
        if (is_text_part(p)) len += strlen(item(p, "text")->valuestring) + 1;
    char *buf = cJSON_malloc(len);
    if (!buf) return NULL;
    size_t o = 0;
    for (const cJSON *p = parts->child; p; p = p->next) {
        if (!is_text_part(p)) continue;
        const char *t = item(p, "text")->valuestring;
        if (o) buf[o++] = ' ';
        memcpy(buf + o, t, strlen(t));
        o += strlen(t);
    }
    buf[o] = 0;
    cJSON *s = cJSON_CreateString(buf);
    cJSON_free(buf);
    return s;
}


/* A content-part list for a template that loops over parts (SGLang's
 * "openai" format): text parts as {"type": "text", "text": ...}, media
 * parts as {"type": "image"} / "video" / "audio", tool_reference parts as
 * they are, anything else dropped. */
static cJSON *normalized_parts(const cJSON *parts)
{
    static const struct { const char *from, *to; } media[] = {
        { "image_url", "image" }, { "input_image", "image" },
        { "video_url", "video" }, { "audio_url", "audio" },
    };
    cJSON *list = cJSON_CreateArray();
    for (const cJSON *p = parts->child; list && p; p = p->next) {
        const cJSON *type = item(p, "type");
        const char *t = cJSON_IsString(type) ? type->valuestring : "";
        cJSON *o = NULL;
        if (is_text_part(p)) {
            o = cJSON_CreateObject();
            if (o && !(add(o, "type", cJSON_CreateString("text")) &&
                       add(o, "text", cJSON_Duplicate(item(p, "text"), 1))))
                cJSON_Delete(o), o = NULL;
        } else if (!strcmp(t, "tool_reference")) {
            o = cJSON_Duplicate(p, 1);
        } else {
            size_t i = 0;
            while (i < sizeof media / sizeof media[0] && strcmp(t, media[i].from)) i++;
            if (i == sizeof media / sizeof media[0]) continue; /* a part SGLang leaves out */
            o = cJSON_CreateObject();
            if (o && !add(o, "type", cJSON_CreateString(media[i].to))) cJSON_Delete(o), o = NULL;
        }
        if (!o || !cJSON_AddItemToArray(list, o)) return cJSON_Delete(o), cJSON_Delete(list), NULL;
    }
    return list;
}

/* The content the template sees: None -> ""; a part list flattened for
 * "string" templates, and for tool messages of "openai" templates when every
 * part is text (normalize_tool_content). */
static cJSON *content_of(const cJSON *m, const char *role, int parts_ok)
{
    const cJSON *c = item(m, "content");
    if (!c || cJSON_IsNull(c)) return cJSON_CreateString("");
    if (cJSON_IsArray(c) && !parts_ok) return flattened_parts(c);
    if (cJSON_IsArray(c) && !strcmp(role, "tool")) {
        cJSON *joined = joined_text_parts(c);
        if (joined) return joined;
    }
    return cJSON_IsArray(c) ? normalized_parts(c) : cJSON_Duplicate(c, 1);
}


/* The parsed arguments of a tool call given as a JSON string (NULL when
 * they are not a string); *bad when the string is not a JSON object. */
static cJSON *parsed_arguments(const cJSON *args, int *bad)
{
    *bad = 0;
    if (!cJSON_IsString(args)) return NULL;
    cJSON *parsed = cJSON_Parse(args->valuestring);
    if (!cJSON_IsObject(parsed)) {
        cJSON_Delete(parsed);
        *bad = 1;
        return NULL;
    }
    return parsed;
}


/* One tool call as ToolCall.model_dump(), arguments parsed. */
static ld_status tool_call_of(const cJSON *tc, size_t msg_index, cJSON **out, ld_error *err)
{
    const cJSON *fn = item(tc, "function");
    int bad = 0;
    cJSON *args = parsed_arguments(item(fn, "arguments"), &bad);
    if (bad)
        return LD_FAIL(err, LD_ERR_MISMATCH, 0,
                       "message %zu: tool call arguments are not a JSON object "
                       "(SGLang refuses such a request)", msg_index);
    if (!args) args = copy_or_null(fn, "arguments");
    const cJSON *type = item(tc, "type");
    cJSON *f = cJSON_CreateObject();
    int ok = f && add(f, "name", copy_or_null(fn, "name"));
    if (ok) ok = add(f, "arguments", args), args = NULL;
    cJSON_Delete(args);
    cJSON *o = ok ? cJSON_CreateObject() : NULL;
    ok = o && add(o, "id", copy_or_null(tc, "id")) && add(o, "index", copy_or_null(tc, "index")) &&
         add(o, "type", type ? cJSON_Duplicate(type, 1) : cJSON_CreateString("function"));
    if (ok) ok = add(o, "function", f), f = NULL;
    cJSON_Delete(f);
    if (!ok) {
        cJSON_Delete(o);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory preparing tool calls");
    }
    *out = o;
    return LD_OK;
}


static ld_status tool_calls_of(const cJSON *m, size_t msg_index, cJSON **out, ld_error *err)
{
    const cJSON *tcs = item(m, "tool_calls");
    if (!cJSON_IsArray(tcs)) {
        *out = copy_or_null(m, "tool_calls");
        return *out ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    cJSON *list = cJSON_CreateArray();
    if (!list) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (const cJSON *tc = tcs->child; tc; tc = tc->next) {
        cJSON *one = NULL;
        ld_status st = tool_call_of(tc, msg_index, &one, err);
        if (st != LD_OK) {
            cJSON_Delete(list);
            return st;
        }
        cJSON_AddItemToArray(list, one);
    }
    *out = list;
    return LD_OK;
}


/* One message as the template sees it: SGLang dumps the request model
 * (unknown keys are gone, a user message keeps role and content only), sets
 * content None to "", then drops every key whose value is None. */
static ld_status message_of(const cJSON *m, size_t msg_index, int parts_ok, cJSON **out,
                            ld_error *err)
{
    static const char *const fields[] = { "tool_call_id", "name", "phase",
                                          "reasoning_content", "tool_calls", "tools", "prefix" };
    const cJSON *r = item(m, "role");
    const char *role = cJSON_IsString(r) ? r->valuestring : "";
    cJSON *content = content_of(m, role, parts_ok);
    /* a part list kept for the template is set again after the other keys,
     * so it comes last (process_content_for_template_format) */
    int content_last = parts_ok && cJSON_IsArray(item(m, "content"));
    cJSON *o = cJSON_CreateObject();
    int ok = o && content && add(o, "role", cJSON_CreateString(role));
    if (ok && !content_last) ok = add(o, "content", content), content = NULL;
    for (size_t i = 0; ok && strcmp(role, "user") && i < sizeof fields / sizeof fields[0]; i++) {
        const cJSON *v = item(m, fields[i]);
        if (!v || cJSON_IsNull(v)) continue;
        if (strcmp(fields[i], "tool_calls")) {
            ok = add(o, fields[i], cJSON_Duplicate(v, 1));
            continue;
        }
        cJSON *tcs = NULL;
        ld_status st = tool_calls_of(m, msg_index, &tcs, err);
        if (st != LD_OK) {
            cJSON_Delete(o);
            cJSON_Delete(content);
            return st;
        }
        ok = add(o, "tool_calls", tcs);
    }
    if (ok && content_last) ok = add(o, "content", content), content = NULL;
    cJSON_Delete(content);
    if (!ok) {
        cJSON_Delete(o);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory preparing messages");
    }
    *out = o;
    return LD_OK;
}


/* A function object as Function.model_dump(): the client's keys in its
 * order (strict / defer_loading only when set), then description and
 * parameters as None when the client left them out. */
static cJSON *function_of(const cJSON *fn)
{
    static const char *const fields[] = { "description", "name", "parameters",
                                          "strict", "defer_loading" };
    const size_t n_fields = sizeof fields / sizeof fields[0];
    cJSON *o = cJSON_CreateObject();
    for (const cJSON *k = cJSON_IsObject(fn) ? fn->child : NULL; o && k; k = k->next) {
        size_t i = 0;
        while (i < n_fields && strcmp(k->string, fields[i])) i++;
        if (i == n_fields || (i >= 3 && cJSON_IsNull(k)) || item(o, k->string))
            continue; /* unknown to the model, or a None that is not dumped */
        if (!add(o, k->string, cJSON_Duplicate(k, 1))) return cJSON_Delete(o), NULL;
    }
    for (size_t i = 0; o && i < 3; i++)
        if (!item(o, fields[i]) && !add(o, fields[i], cJSON_CreateNull())) {
            cJSON_Delete(o);
            return NULL;
        }
    return o;
}


static int tool_chosen(const cJSON *tool, const cJSON *choice)
{
    if (!cJSON_IsObject(choice)) return 1;
    const cJSON *want = item(item(choice, "function"), "name");
    const cJSON *name = item(item(tool, "function"), "name");
    return cJSON_IsString(want) && cJSON_IsString(name) &&
           !strcmp(want->valuestring, name->valuestring);
}


/* The tools list SGLang gives the template; NULL in *out when none. */
static ld_status tools_of(const cJSON *req, cJSON **out, ld_error *err)
{
    const cJSON *tools = item(req, "tools"), *choice = item(req, "tool_choice");
    *out = NULL;
    if (!cJSON_IsArray(tools) || !tools->child) return LD_OK;
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) return LD_OK;
    cJSON *list = cJSON_CreateArray();
    int ok = list != NULL;
    for (const cJSON *t = tools->child; ok && t; t = t->next) {
        if (!tool_chosen(t, choice)) continue;
        const cJSON *type = item(t, "type");
        cJSON *o = cJSON_CreateObject();
        ok = o && add(o, "type", type ? cJSON_Duplicate(type, 1) : cJSON_CreateString("function")) &&
             add(o, "function", function_of(item(t, "function"))) &&
             add(o, "defer_loading", copy_or_null(t, "defer_loading"));
        if (ok) cJSON_AddItemToArray(list, o);
        else cJSON_Delete(o);
    }
    if (!ok) {
        cJSON_Delete(list);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory preparing tools");
    }
    if (!list->child) cJSON_Delete(list), list = NULL;
    *out = list;
    return LD_OK;
}


/* reasoning_effort, then chat_template_kwargs (which win). */
static cJSON *template_kwargs_of(const cJSON *req)
{
    cJSON *kw = cJSON_CreateObject();
    const cJSON *effort = item(req, "reasoning_effort");
    if (kw && effort && !cJSON_IsNull(effort) &&
        !add(kw, "reasoning_effort", cJSON_Duplicate(effort, 1)))
        return cJSON_Delete(kw), NULL;
    const cJSON *given = item(req, "chat_template_kwargs");
    for (const cJSON *k = cJSON_IsObject(given) ? given->child : NULL; kw && k; k = k->next) {
        cJSON *v = cJSON_Duplicate(k, 1);
        int ok = v && (item(kw, k->string) /* dict.update keeps the key's place */
                       ? cJSON_ReplaceItemInObjectCaseSensitive(kw, k->string, v)
                       : cJSON_AddItemToObject(kw, k->string, v));
        if (!ok) return cJSON_Delete(v), cJSON_Delete(kw), NULL;
    }
    return kw;
}


static ld_status prepare_sglang(const cJSON *req, int parts_ok, cJSON *out, ld_error *err)
{
    cJSON *msgs = cJSON_AddArrayToObject(out, "messages");
    if (!msgs) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    size_t i = 0;
    for (const cJSON *m = item(req, "messages")->child; m; m = m->next, i++) {
        cJSON *one = NULL;
        LD_TRY(message_of(m, i, parts_ok, &one, err));
        cJSON_AddItemToArray(msgs, one);
    }
    cJSON *tools = NULL;
    LD_TRY(tools_of(req, &tools, err));
    if (tools) cJSON_AddItemToObject(out, "tools", tools);
    cJSON *kw = template_kwargs_of(req);
    if (!add(out, "chat_template_kwargs", kw))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    return LD_OK;
}


ld_status ld_server_prepare(ld_server_kind kind, int content_parts, const cJSON *request,
                            cJSON **out, ld_error *err)
{
    *out = NULL;
    if (!cJSON_IsObject(request) || !cJSON_IsArray(item(request, "messages")))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "the request has no 'messages' list");
    if (kind == LD_SERVER_HF) {
        *out = cJSON_Duplicate(request, 1);
        return *out ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    cJSON *o = cJSON_CreateObject();
    if (!o) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = prepare_sglang(request, content_parts, o, err);
    if (st != LD_OK) {
        cJSON_Delete(o);
        return st;
    }
    *out = o;
    return LD_OK;
}


int ld_server_flatten_tools(cJSON *prepared)
{
    cJSON *tools = item(prepared, "tools");
    int changed = 0;
    for (cJSON *t = cJSON_IsArray(tools) ? tools->child : NULL; t; t = t->next) {
        cJSON *fn = item(t, "function");
        if (!fn) continue;
        cJSON *bare = cJSON_DetachItemViaPointer(t, fn);
        cJSON_ReplaceItemViaPointer(tools, t, bare);
        t = bare;
        changed = 1;
    }
    return changed;
}


static int has_word(const char *s, size_t len, const char *w)
{
    size_t n = strlen(w);
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(s + i, w, n)) return 1;
    return 0;
}

/* s[i..] is `message`, `msg` or `m` then `.content`, `['content']` or
 * `["content"]` (spaces allowed around the brackets). */
static int is_content_access(const char *s, size_t len, size_t i)
{
    static const char *const vars[] = { "message", "msg", "m" };
    for (size_t v = 0; v < 3; v++) {
        size_t n = strlen(vars[v]), j = i + n;
        if (j > len || memcmp(s + i, vars[v], n)) continue;
        while (j < len && s[j] == ' ') j++;
        static const char *const keys[] = { ".content", "['content']", "[\"content\"]" };
        for (size_t k = 0; k < 3; k++) {
            size_t m = strlen(keys[k]);
            if (j + m <= len && !memcmp(s + j, keys[k], m) &&
                (j + m == len || !(isalnum((unsigned char)s[j + m]) || s[j + m] == '_')))
                return 1;
        }
    }
    return 0;
}

int ld_server_template_wants_parts(const char *src, size_t len)
{
    static const char *const media[] = { "image", "audio", "video", "vision" };
    for (size_t i = 0; i < 4; i++)
        if (has_word(src, len, media[i])) return 1;
    /* a `for NAME in EXPR` whose EXPR starts with a content access */
    for (size_t i = 0; i + 4 <= len; i++) {
        if (memcmp(src + i, "for ", 4) || (i && (isalnum((unsigned char)src[i - 1]) || src[i - 1] == '_')))
            continue;
        size_t j = i + 4;
        while (j < len && src[j] != '%' && src[j] != '}' && memcmp(src + j, " in ", 4)) j++;
        if (j + 4 > len || memcmp(src + j, " in ", 4)) continue;
        j += 4;
        while (j < len && (src[j] == ' ' || src[j] == '(')) j++;
        if (is_content_access(src, len, j)) return 1;
    }
    return 0;
}
