/* dsenc_prep.c - what SGLang (0.5.22) does to a chat-completions request
 * before it calls encoding_dsv32 / encoding_dsv4.encode_messages:
 *
 * - protocol.py: pydantic validation of the fields the prompt depends on
 *   (a user message keeps role and content only; other roles are
 *   case-insensitive and carry reasoning_content, tool_calls, tools, ...),
 *   the tool_choice default, and normalize_reasoning_inputs, which turns
 *   `reasoning_effort` / `reasoning` into chat_template_kwargs.thinking
 *   unless the client set it;
 * - serving_chat.py _validate_request (empty messages, tool_choice against
 *   the tools, unique tool names, media parts on a text-only model),
 *   _convert_to_internal_request (chat_template_kwargs.reasoning_effort
 *   overrides reasoning_effort), _process_messages (which tools reach the
 *   encoder) and the dsv branch of _apply_jinja_template: thinking mode from
 *   chat_template_kwargs.thinking only (not enable_thinking), tool-call
 *   arguments given as JSON strings parsed (refused unless a JSON object),
 *   content None -> "", content-part lists flattened to their text parts
 *   joined by " ", a trailing assistant message turned into a user message
 *   (or cut off as the continue_final_message prefix), an empty system
 *   message inserted first when the conversation does not start with one,
 *   and the request tools attached to that first system message;
 * - V4 only: reasoning_effort passed on when the "preview" profile accepts
 *   it ("high", "max"), and `task` attached to the last user message.
 *
 * Not modelled: SGLang's rewriting of DB-style type aliases in tool
 * parameter schemas and its JSON-schema check of them, the "official"
 * DeepSeek-V4 effort profile (chosen from the model path), and env-var
 * defaults (SGLANG_DEFAULT_THINKING, SGLANG_DSV4_REASONING_EFFORT).
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "dsenc_internal.h"

#define REFUSE(err, ...) LD_FAIL((err), LD_ERR_MISMATCH, 0, __VA_ARGS__)

static const cJSON *field(const cJSON *obj, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(j) ? NULL : j; /* None and absent are the same here */
}

static bool ascii_ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a;
        if (x != *b) return false;
    }
    return *a == *b;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0) return true;
    return false;
}

/* ---- tools ---------------------------------------------------------- */

/* protocol.Tool: {"type"?: str, "function": {"name": str, "description"?:
 * str, "parameters"?: any, "strict"?: bool, "defer_loading"?: bool},
 * "defer_loading"?: bool}. */
static bool tool_ok(const cJSON *t)
{
    const cJSON *fn = field(t, "function"), *x;
    if (!cJSON_IsObject(t) || !cJSON_IsObject(fn) || !cJSON_IsString(field(fn, "name"))) return false;
    if ((x = field(t, "type")) && !cJSON_IsString(x)) return false;
    if ((x = field(fn, "description")) && !cJSON_IsString(x)) return false;
    if ((x = cJSON_GetObjectItemCaseSensitive(fn, "strict")) && !cJSON_IsBool(x)) return false;
    if ((x = field(fn, "defer_loading")) && !cJSON_IsBool(x)) return false;
    return !(x = field(t, "defer_loading")) || cJSON_IsBool(x);
}

/* A tools list: NULL when absent/None; refuses anything but a list of
 * valid tools. */
static ld_status read_tools(const cJSON *j, int index, const cJSON **out, ld_error *err)
{
    *out = NULL;
    if (!j) return LD_OK;
    if (!cJSON_IsArray(j)) return REFUSE(err, "message %d: 'tools' must be a list", index);
    for (const cJSON *t = j->child; t; t = t->next)
        if (!tool_ok(t)) return REFUSE(err, "message %d: invalid tool (needs function.name)", index);
    *out = j;
    return LD_OK;
}

static const char *tool_name(const cJSON *t)
{
    return field(field(t, "function"), "name")->valuestring;
}

/* ---- one message ------------------------------------------------------ */

/* Content None -> "", a string as is, a part list -> its text parts joined
 * by " " (process_content_for_template_format(..., "string")).  Thinking
 * parts are allowed on assistant messages only and carry no text; media
 * parts are refused because DeepSeek-V3.2/V4 are served as text-only
 * models. */
static ld_status read_content(ds_conv *c, const cJSON *j, ds_msg *m, ld_error *err)
{
    m->content = "";
    if (!j) return LD_OK;
    if (cJSON_IsString(j)) return m->content = j->valuestring, LD_OK;
    if (!cJSON_IsArray(j)) return REFUSE(err, "message %d: 'content' must be a string or a list", m->req_index);
    ds_buf b = { 0 };
    bool first = true;
    ld_status s = LD_OK;
    for (const cJSON *p = j->child; p && s == LD_OK; p = p->next) {
        const cJSON *ty = field(p, "type");
        const char *t = cJSON_IsString(ty) ? ty->valuestring : "";
        if (strcmp(t, "text") == 0 && cJSON_IsString(field(p, "text"))) {
            if (!first) ld_dsenc_puts(&b, " ");
            ld_dsenc_puts(&b, field(p, "text")->valuestring);
            first = false;
        } else if ((strcmp(t, "thinking") == 0 || strcmp(t, "reasoning") == 0) && m->role == DS_ROLE_ASSISTANT) {
            continue;
        } else if (strcmp(t, "tool_reference") == 0 && cJSON_IsString(field(p, "name"))) {
            continue;
        } else {
            s = REFUSE(err, "message %d: content part '%s' not accepted for a text-only model", m->req_index, t);
        }
    }
    if (s == LD_OK && b.failed) s = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (s == LD_OK && b.p && !(m->content = ld_arena_memdup(&c->arena, b.p, b.len)))
        s = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    free(b.p);
    return s;
}

/* Tool-call arguments as SGLang's normalize_assistant_tool_call_arguments
 * leaves them: a JSON string is parsed and must give an object. */
static ld_status read_arguments(ds_conv *c, const cJSON *a, ds_msg *m, size_t k, ld_error *err)
{
    ds_call *call = &m->calls[k];
    if (!a || cJSON_IsObject(a)) return call->args = a, LD_OK;
    if (!cJSON_IsString(a))
        return REFUSE(err, "message %d: tool call %zu: 'arguments' must be a string or an object", m->req_index, k);
    const char *end = NULL;
    cJSON *parsed = cJSON_ParseWithOpts(a->valuestring, &end, 1);
    if (!parsed)
        return REFUSE(err, "message %d: tool call %zu: 'function.arguments' must be valid JSON", m->req_index, k);
    cJSON_AddItemToArray(c->owned, parsed);
    if (!cJSON_IsObject(parsed))
        return REFUSE(err, "message %d: tool call %zu: 'function.arguments' must be a JSON object", m->req_index, k);
    call->args = parsed;
    return LD_OK;
}

static ld_status read_calls(ds_conv *c, const cJSON *j, ds_msg *m, ld_error *err)
{
    if (!j) return LD_OK;
    if (!cJSON_IsArray(j)) return REFUSE(err, "message %d: 'tool_calls' must be a list", m->req_index);
    size_t n = (size_t)cJSON_GetArraySize(j), k = 0;
    if (n && !(m->calls = ld_arena_alloc(&c->arena, n * sizeof *m->calls)))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (const cJSON *tc = j->child; tc; tc = tc->next, k++) {
        const cJSON *fn = field(tc, "function"), *name = field(fn, "name"), *id = field(tc, "id");
        if (!cJSON_IsObject(fn) || (name && !cJSON_IsString(name)) || (id && !cJSON_IsString(id)))
            return REFUSE(err, "message %d: tool call %zu: invalid", m->req_index, k);
        m->calls[k].name = name ? name->valuestring : NULL;
        m->calls[k].id = id ? id->valuestring : NULL;
        const cJSON *args = field(fn, "arguments");
        if (args && !cJSON_IsString(args) && !cJSON_IsObject(args))
            return REFUSE(err, "message %d: tool call %zu: 'arguments' must be a string or an object", m->req_index, k);
        if (m->role == DS_ROLE_ASSISTANT) LD_TRY(read_arguments(c, args, m, k, err));
        else m->calls[k].args = args;
    }
    m->n_calls = n;
    return LD_OK;
}

static ld_status read_role(const cJSON *j, ds_msg *m, ld_error *err)
{
    static const char *const names[] = { "system", "user", "assistant", "tool", "developer", "latest_reminder",
                                         "function" };
    const cJSON *r = field(j, "role");
    if (!cJSON_IsObject(j) || !cJSON_IsString(r)) return REFUSE(err, "message %d: needs a 'role'", m->req_index);
    if (strcmp(r->valuestring, "user") == 0) return m->role = DS_ROLE_USER, LD_OK;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (i != DS_ROLE_USER && ascii_ieq(r->valuestring, names[i])) return m->role = (ds_role)i, LD_OK;
    return REFUSE(err, "message %d: role '%s' is not accepted", m->req_index, r->valuestring);
}

/* A user message has role and content only (required, not None); the other
 * roles carry the generic message fields. */
static ld_status read_message(ds_conv *c, const cJSON *j, int index, ds_msg *m, ld_error *err)
{
    memset(m, 0, sizeof *m);
    m->req_index = index;
    LD_TRY(read_role(j, m, err));
    const cJSON *content = field(j, "content");
    if (m->role == DS_ROLE_USER) {
        if (!content) return REFUSE(err, "message %d: a user message needs 'content'", index);
        return read_content(c, content, m, err);
    }
    LD_TRY(read_content(c, content, m, err));
    const cJSON *rc = field(j, "reasoning_content"), *id = field(j, "tool_call_id");
    if ((rc && !cJSON_IsString(rc)) || (id && !cJSON_IsString(id)))
        return REFUSE(err, "message %d: 'reasoning_content' and 'tool_call_id' must be strings", index);
    m->reasoning = rc ? rc->valuestring : NULL;
    m->tool_call_id = id ? id->valuestring : NULL;
    LD_TRY(read_tools(field(j, "tools"), index, &m->tools, err));
    if (m->tools && !m->tools->child) m->tools = NULL; /* [] is falsy everywhere */
    return read_calls(c, field(j, "tool_calls"), m, err);
}

/* ---- request-level switches ------------------------------------------ */

static const char *const EFFORT_TIERS[] = { "none", "minimal", "low", "medium", "high", "xhigh", "max", NULL };

/* protocol.ReasoningEffortType: a tier or a float in [0, 0.99] (numeric
 * strings are coerced by pydantic's lax mode). */
static ld_status check_effort(const cJSON *e, ld_error *err)
{
    double d;
    char *end;
    if (cJSON_IsString(e) && in_list(e->valuestring, EFFORT_TIERS)) return LD_OK;
    if (cJSON_IsNumber(e)) d = e->valuedouble;
    else if (cJSON_IsString(e) && (d = strtod(e->valuestring, &end), end != e->valuestring && !*end)) (void)0;
    else return REFUSE(err, "request: invalid 'reasoning_effort'");
    if (!(d >= 0 && d <= 0.99)) return REFUSE(err, "request: 'reasoning_effort' out of [0, 0.99]");
    return LD_OK;
}

/* `reasoning: {effort | reasoning_effort, enabled | enable}`: returns the
 * effort it sets (NULL = none) and whether it switches thinking on. */
static ld_status read_reasoning_object(const cJSON *r, const cJSON **effort, bool *on, ld_error *err)
{
    static const char *const yes[] = { "1", "true", "yes", "y", "on", NULL };
    const cJSON *e = field(r, "effort");
    if (!e) e = field(r, "reasoning_effort");
    if (e) {
        LD_TRY(check_effort(e, err));
        *effort = e;
    }
    const cJSON *en = field(r, "enabled");
    if (!en) en = field(r, "enable");
    if (cJSON_IsString(en)) { /* enabled.strip().lower() in yes */
        const char *s = en->valuestring, *end = s + strlen(s);
        while (*s && strchr(" \t\n\r\f\v", *s)) s++;
        while (end > s && strchr(" \t\n\r\f\v", end[-1])) end--;
        char low[8] = { 0 };
        for (size_t n = 0; n < sizeof low - 1 && s + n < end; n++)
            low[n] = (char)(s[n] >= 'A' && s[n] <= 'Z' ? s[n] + 32 : s[n]);
        *on = end - s < (long)sizeof low && in_list(low, yes);
    } else {
        *on = ld_dsenc_truthy(en);
    }
    return LD_OK;
}

/* Thinking mode is chat_template_kwargs.thinking (truthiness) when present;
 * otherwise reasoning_effort other than "none" or reasoning.enabled turn it
 * on.  The effort reaching the V4 encoder is chat_template_kwargs
 * .reasoning_effort when set, else the request's. */
static ld_status read_thinking(const cJSON *req, ds_conv *c, ld_error *err)
{
    const cJSON *ctk = field(req, "chat_template_kwargs"), *r = field(req, "reasoning");
    if (ctk && !cJSON_IsObject(ctk)) return REFUSE(err, "request: 'chat_template_kwargs' must be an object");
    const cJSON *effort = cJSON_GetObjectItemCaseSensitive(req, "reasoning_effort");
    if (cJSON_IsBool(effort)) return REFUSE(err, "request: 'reasoning_effort' must not be a boolean");
    bool derived = false;
    if (cJSON_IsObject(r)) LD_TRY(read_reasoning_object(r, &effort, &derived, err));
    if (effort && !cJSON_IsNull(effort)) {
        LD_TRY(check_effort(effort, err));
        derived = !(cJSON_IsString(effort) && strcmp(effort->valuestring, "none") == 0);
    }
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(ctk, "thinking");
    c->thinking = th ? ld_dsenc_truthy(th) : derived;
    const cJSON *kwe = field(ctk, "reasoning_effort");
    const cJSON *final = kwe ? kwe : effort;
    c->effort_max = cJSON_IsString(final) && strcmp(final->valuestring, "max") == 0;
    return LD_OK;
}

/* ---- tools that reach the encoder -------------------------------------- */

/* protocol's tool_choice (default "none" without any tools, else "auto") and
 * _validate_request's checks.  Sets *named to the named function, if any. */
static ld_status read_tool_choice(const cJSON *req, const cJSON *tools, bool any_tools,
                                  const char **choice, const cJSON **named, ld_error *err)
{
    const cJSON *tc = field(req, "tool_choice");
    *named = NULL;
    *choice = any_tools || tools ? "auto" : "none";
    if (cJSON_IsString(tc)) {
        static const char *const ok[] = { "auto", "required", "none", NULL };
        if (!in_list(tc->valuestring, ok)) return REFUSE(err, "request: invalid 'tool_choice'");
        *choice = tc->valuestring;
    } else if (tc) {
        const cJSON *fn = field(tc, "function"), *ty = field(tc, "type");
        if (!cJSON_IsObject(fn) || (ty && !(cJSON_IsString(ty) && strcmp(ty->valuestring, "function") == 0)) ||
            (field(fn, "name") && !cJSON_IsString(field(fn, "name"))))
            return REFUSE(err, "request: invalid 'tool_choice'");
        *choice = NULL;
        *named = fn;
    }
    return LD_OK;
}

static bool name_in(const char *name, const cJSON *tools)
{
    for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next)
        if (name && strcmp(tool_name(t), name) == 0) return true;
    return false;
}

/* Tool names must be unique across the request and message tools (checked
 * only when some message has tools).  Lists 1..n-1 are the messages' (slot 0
 * is not filled yet), list n the request's. */
static bool names_unique(const ds_conv *c, const cJSON *tools)
{
    for (size_t i = 1; i <= c->n; i++) {
        const cJSON *list = i < c->n ? c->msgs[i].tools : tools;
        if (i < c->n && c->msgs[i].role != DS_ROLE_SYSTEM && c->msgs[i].role != DS_ROLE_DEVELOPER) continue;
        for (const cJSON *t = list ? list->child : NULL; t; t = t->next) {
            /* compare with the tools after t in this list and in the lists after it */
            for (const cJSON *u = t->next; u; u = u->next)
                if (strcmp(tool_name(t), tool_name(u)) == 0) return false;
            for (size_t k = i + 1; k <= c->n; k++) {
                const cJSON *other = k < c->n ? c->msgs[k].tools : tools;
                if (k < c->n && c->msgs[k].role != DS_ROLE_SYSTEM && c->msgs[k].role != DS_ROLE_DEVELOPER) continue;
                if (name_in(tool_name(t), other)) return false;
            }
        }
    }
    return true;
}

/* Whether `name` is among the request tools or a system/developer
 * message's tools (_validate_request's check of a named tool_choice). */
static bool tool_exists(const ds_conv *c, const cJSON *tools, const char *name)
{
    if (name_in(name, tools)) return true;
    for (size_t i = 1; i < c->n; i++)
        if ((c->msgs[i].role == DS_ROLE_SYSTEM || c->msgs[i].role == DS_ROLE_DEVELOPER) &&
            name_in(name, c->msgs[i].tools))
            return true;
    return false;
}

/* Sets *out to the request tools when SGLang gives them to the encoder:
 * some tool exists (request or system/developer message), tool_choice is
 * not "none", and the request has tools (one with the chosen name for a
 * named choice).  Message tools stay on their messages. */
static ld_status select_tools(const cJSON *req, const ds_conv *c, const cJSON **out, ld_error *err)
{
    const cJSON *tools, *named;
    const char *choice;
    *out = NULL;
    LD_TRY(read_tools(field(req, "tools"), -1, &tools, err));
    bool msg_tools = false;
    for (size_t i = 1; i < c->n; i++)
        if ((c->msgs[i].role == DS_ROLE_SYSTEM || c->msgs[i].role == DS_ROLE_DEVELOPER) && c->msgs[i].tools)
            msg_tools = true;
    LD_TRY(read_tool_choice(req, tools, msg_tools, &choice, &named, err));
    bool effective = msg_tools || (tools && tools->child);
    if (choice && strcmp(choice, "required") == 0 && !effective)
        return REFUSE(err, "request: tool_choice 'required' without tools");
    const cJSON *want = field(named, "name");
    const char *name = cJSON_IsString(want) ? want->valuestring : NULL;
    if (named && !tool_exists(c, tools, name))
        return REFUSE(err, "request: tool_choice names a tool that is not in the tools list");
    if (msg_tools && !names_unique(c, tools))
        return REFUSE(err, "request: tool names must be unique across request and message tools");
    if (!effective || (choice && strcmp(choice, "none") == 0)) return LD_OK;
    if (named ? name_in(name, tools) : (tools && tools->child)) *out = tools;
    return LD_OK;
}

/* ---- the whole request ----------------------------------------------- */

void ld_dsenc_conv_free(ds_conv *c)
{
    ld_arena_release(&c->arena);
    cJSON_Delete(c->owned);
    memset(c, 0, sizeof *c);
}

/* Reads request.messages into c->msgs[1..]; slot 0 is kept for the system
 * message SGLang may insert. */
static ld_status read_messages(const cJSON *msgs, ds_conv *c, ld_error *err)
{
    size_t n = (size_t)cJSON_GetArraySize(msgs);
    if (!n) return REFUSE(err, "request: messages cannot be empty");
    if (!(c->msgs = ld_arena_alloc(&c->arena, (n + 1) * sizeof *c->msgs)))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    c->n = 1;
    for (const cJSON *m = msgs->child; m; m = m->next, c->n++)
        LD_TRY(read_message(c, m, (int)c->n - 1, &c->msgs[c->n], err));
    return LD_OK;
}

/* _handle_last_assistant_message: a trailing assistant message becomes a
 * user message with its content only, or, with continue_final_message, is
 * removed and its content appended after the prompt. */
static void handle_last_assistant(const cJSON *req, ds_conv *c)
{
    ds_msg *last = &c->msgs[c->n - 1];
    if (c->n < 2 || last->role != DS_ROLE_ASSISTANT) return;
    const cJSON *cont = field(req, "continue_final_message");
    if (cJSON_IsTrue(cont) || (cJSON_IsNumber(cont) && cont->valuedouble != 0)) {
        c->prefix = last->content;
        c->n--;
        return;
    }
    int index = last->req_index;
    const char *content = last->content;
    memset(last, 0, sizeof *last);
    last->role = DS_ROLE_USER;
    last->req_index = index;
    last->content = content;
}

/* attach_task_to_last_user_message (V4). */
static ld_status attach_task(const cJSON *req, ds_conv *c, ld_dsenc_variant variant, ld_error *err)
{
    static const char *const tasks[] = { "action", "query", "authority", "domain", "title", "read_url", NULL };
    const cJSON *t = field(req, "task");
    if (!t) return LD_OK;
    if (!cJSON_IsString(t) || !in_list(t->valuestring, tasks)) return REFUSE(err, "request: invalid 'task'");
    if (variant != LD_DSENC_V4) return LD_OK; /* the V3.2 path ignores it */
    for (size_t i = c->n; i-- > 0;) {
        if (c->msgs[i].role == DS_ROLE_USER || c->msgs[i].role == DS_ROLE_DEVELOPER)
            return c->msgs[i].task = t->valuestring, LD_OK;
    }
    return REFUSE(err, "request: 'task' needs a user or developer message");
}

ld_status ld_dsenc_prepare(const cJSON *req, ld_dsenc_variant variant, ds_conv *c, ld_error *err)
{
    memset(c, 0, sizeof *c);
    ld_arena_init(&c->arena, 0);
    if (!(c->owned = cJSON_CreateArray())) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (!cJSON_IsObject(req) || !cJSON_IsArray(msgs))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "request: not an object with a 'messages' list");
    const cJSON *tools;
    LD_TRY(read_thinking(req, c, err));
    LD_TRY(read_messages(msgs, c, err));
    LD_TRY(select_tools(req, c, &tools, err));
    handle_last_assistant(req, c);
    if (c->n < 2) return REFUSE(err, "request: no message left after continue_final_message");
    if (c->msgs[1].role == DS_ROLE_SYSTEM) {
        c->msgs++; /* slot 0 unused; the arena still owns the array */
        c->n--;
    } else {
        memset(&c->msgs[0], 0, sizeof c->msgs[0]);
        c->msgs[0].role = DS_ROLE_SYSTEM;
        c->msgs[0].req_index = -1;
        c->msgs[0].content = "";
    }
    if (tools) c->msgs[0].tools = tools;
    return attach_task(req, c, variant, err);
}
