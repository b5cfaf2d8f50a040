/* dsenc_v4.c - the DeepSeek-V4 prompt format (SGLang's
 * encoding_dsv4.encode_messages, ../shared/docs/chat-templates.md §6.1).
 *
 * Before rendering, the encoder rewrites the conversation: tool messages
 * become <tool_result> blocks of a user turn (merged with neighbouring user
 * messages), the blocks are put in the order of the preceding assistant's
 * tool_calls, and in thinking mode without any tools the reasoning of
 * assistant turns before the last user turn is dropped (and developer
 * messages before it too).  Each turn is then written on its own, followed by
 * the `<｜Assistant｜>` hand-off when a user/developer turn is last or is
 * followed by an assistant turn. */
#include <stdlib.h>
#include <string.h>

#include "dsenc_internal.h"

#define REFUSE(err, ...) LD_FAIL((err), LD_ERR_MISMATCH, 0, __VA_ARGS__)

static const char TOOLS_HEAD[] =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<" DS_DSML "tool_calls>\" block like the following:\n\n"
    "<" DS_DSML "tool_calls>\n"
    "<" DS_DSML "invoke name=\"$TOOL_NAME\">\n"
    "<" DS_DSML "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" DS_DSML "parameter>\n"
    "...\n"
    "</" DS_DSML "invoke>\n"
    "<" DS_DSML "invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</" DS_DSML "invoke>\n"
    "</" DS_DSML "tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
    "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by " DS_THINK "), you MUST output your complete reasoning inside "
    DS_THINK "..." DS_THINK_END " BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after " DS_THINK_END " with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
static const char TOOLS_TAIL[] =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

/* The "preview" profile's text for reasoning_effort "max" ("high" and the
 * default add nothing). */
static const char EFFORT_MAX[] =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

/* The rewritten conversation; `msgs` and the block arrays live in `arena`
 * (the strings are borrowed from the ds_conv). */
typedef struct v4_conv {
    ds_msg *msgs;
    size_t n;
    bool drop_thinking; /* effective drop_thinking: no message has tools */
    ld_arena arena;
} v4_conv;

/* ---- rewriting ---------------------------------------------------------- */

static bool is_merged_user(const v4_conv *v)
{
    return v->n && v->msgs[v->n - 1].role == DS_ROLE_USER && v->msgs[v->n - 1].blocks;
}

/* Room for the blocks of a merged user turn starting at source message i:
 * the run of user/tool messages from there. */
static size_t run_length(const ds_conv *c, size_t i)
{
    size_t k = i;
    while (k < c->n && (c->msgs[k].role == DS_ROLE_USER || c->msgs[k].role == DS_ROLE_TOOL)) k++;
    return k - i;
}

/* merge_tool_messages: a tool message joins the user turn before it (or
 * starts one); a user message joins a user turn before it unless that one
 * carries a task. */
static bool merge_one(v4_conv *v, const ds_conv *c, size_t i)
{
    const ds_msg *m = &c->msgs[i];
    bool tool = m->role == DS_ROLE_TOOL;
    ds_block blk = { tool, m->content, tool ? m->tool_call_id : NULL };
    if (m->role != DS_ROLE_USER && !tool) {
        v->msgs[v->n++] = *m;
        return true;
    }
    if (is_merged_user(v) && (tool || !v->msgs[v->n - 1].task)) {
        ds_msg *u = &v->msgs[v->n - 1];
        u->blocks[u->n_blocks++] = blk;
        return true;
    }
    ds_msg *u = &v->msgs[v->n++];
    memset(u, 0, sizeof *u);
    u->role = DS_ROLE_USER;
    u->req_index = m->req_index;
    u->content = tool ? "" : m->content;
    u->task = tool ? NULL : m->task;
    u->blocks = ld_arena_alloc(&v->arena, run_length(c, i) * sizeof *u->blocks);
    if (!u->blocks) return false;
    u->blocks[u->n_blocks++] = blk;
    return true;
}

/* Position of tool call `id` in `calls` (the last one with that id), 0 when
 * unknown: the sort key sort_tool_results_by_call_order uses. */
static size_t call_order(const ds_msg *calls, const char *id)
{
    size_t order = 0;
    for (size_t k = 0; id && k < calls->n_calls; k++)
        if (calls->calls[k].id && calls->calls[k].id[0] && strcmp(calls->calls[k].id, id) == 0) order = k;
    return order;
}

static bool has_ids(const ds_msg *calls)
{
    for (size_t k = 0; calls && k < calls->n_calls; k++)
        if (calls->calls[k].id && calls->calls[k].id[0]) return true;
    return false;
}

/* Stable insertion sort of the tool-result blocks of `u` (text blocks keep
 * their places) by their call's position in `calls`. */
static void sort_results(ds_msg *u, const ds_msg *calls)
{
    size_t n_tools = 0;
    for (size_t k = 0; k < u->n_blocks; k++) n_tools += u->blocks[k].is_tool_result;
    if (n_tools < 2 || !has_ids(calls)) return;
    for (size_t k = 1; k < u->n_blocks; k++) {
        if (!u->blocks[k].is_tool_result) continue;
        ds_block cur = u->blocks[k];
        size_t key = call_order(calls, cur.tool_call_id);
        size_t j = k; /* slot cur moves into */
        for (size_t p = k; p-- > 0;) {
            if (!u->blocks[p].is_tool_result) continue;
            if (call_order(calls, u->blocks[p].tool_call_id) <= key) break;
            u->blocks[j] = u->blocks[p]; /* shift tool blocks only, over text blocks */
            j = p;
        }
        u->blocks[j] = cur;
    }
}

/* sort_tool_results_by_call_order: against the latest assistant with
 * tool calls. */
static void sort_all_results(v4_conv *v)
{
    const ds_msg *calls = NULL;
    for (size_t i = 0; i < v->n; i++) {
        ds_msg *m = &v->msgs[i];
        if (m->role == DS_ROLE_ASSISTANT && m->n_calls) calls = m;
        else if (m->role == DS_ROLE_USER && m->blocks && calls) sort_results(m, calls);
    }
}

static long last_user_index(const v4_conv *v)
{
    for (size_t i = v->n; i-- > 0;)
        if (v->msgs[i].role == DS_ROLE_USER || v->msgs[i].role == DS_ROLE_DEVELOPER) return (long)i;
    return -1;
}

/* _drop_thinking_messages: before the last user turn, assistant turns lose
 * their reasoning and turns other than user/system/latest_reminder go. */
static void drop_thinking(v4_conv *v)
{
    long last_user = last_user_index(v);
    size_t out = 0;
    for (size_t i = 0; i < v->n; i++) {
        ds_msg m = v->msgs[i];
        bool keep = m.role == DS_ROLE_USER || m.role == DS_ROLE_SYSTEM || m.role == DS_ROLE_LATEST_REMINDER ||
                    (long)i >= last_user;
        if (!keep && m.role == DS_ROLE_ASSISTANT) m.reasoning = NULL, keep = true;
        if (keep) v->msgs[out++] = m;
    }
    v->n = out;
}

static ld_status rewrite(v4_conv *v, const ds_conv *c, ld_error *err)
{
    memset(v, 0, sizeof *v);
    ld_arena_init(&v->arena, 0);
    if (!(v->msgs = ld_arena_alloc(&v->arena, c->n * sizeof *v->msgs)))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (size_t i = 0; i < c->n; i++)
        if (!merge_one(v, c, i)) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    sort_all_results(v);
    v->drop_thinking = true;
    for (size_t i = 0; i < v->n; i++)
        if (v->msgs[i].tools) v->drop_thinking = false;
    if (c->thinking && v->drop_thinking) drop_thinking(v);
    return LD_OK;
}

/* ---- rendering ------------------------------------------------------------ */

static ld_status put_tools(ds_buf *b, const ds_msg *m, ld_error *err)
{
    return ld_dsenc_put_tools_section(b, m, TOOLS_HEAD, TOOLS_TAIL, err);
}

static void put_user_blocks(ds_buf *b, const ds_msg *m)
{
    ld_dsenc_puts(b, DS_USER);
    for (size_t k = 0; k < m->n_blocks; k++) {
        if (k) ld_dsenc_puts(b, "\n\n");
        if (m->blocks[k].is_tool_result) ld_dsenc_puts(b, "<tool_result>");
        ld_dsenc_puts(b, m->blocks[k].text);
        if (m->blocks[k].is_tool_result) ld_dsenc_puts(b, "</tool_result>");
    }
    if (!m->blocks) ld_dsenc_puts(b, m->content);
}

static ld_status put_assistant(ds_buf *b, const v4_conv *v, const ds_conv *c, size_t i, long last_user,
                               ld_error *err)
{
    const ds_msg *m = &v->msgs[i];
    bool prev_has_task = i > 0 && v->msgs[i - 1].task; /* a task answer has no thinking part */
    if (c->thinking && !prev_has_task && (!v->drop_thinking || (long)i > last_user)) {
        ld_dsenc_puts(b, m->reasoning ? m->reasoning : "");
        ld_dsenc_puts(b, DS_THINK_END);
    }
    ld_dsenc_puts(b, m->content);
    if (m->n_calls) LD_TRY(ld_dsenc_put_tool_calls(b, m, "tool_calls", err));
    ld_dsenc_puts(b, DS_EOS);
    return LD_OK;
}

static ld_status put_body(ds_buf *b, const v4_conv *v, const ds_conv *c, size_t i, long last_user, ld_error *err)
{
    const ds_msg *m = &v->msgs[i];
    switch (m->role) {
    case DS_ROLE_SYSTEM:
        ld_dsenc_puts(b, m->content);
        return put_tools(b, m, err);
    case DS_ROLE_DEVELOPER:
        if (!*m->content) return REFUSE(err, "message %d: a developer message needs content", m->req_index);
        ld_dsenc_puts(b, DS_USER);
        ld_dsenc_puts(b, m->content);
        return put_tools(b, m, err);
    case DS_ROLE_USER: put_user_blocks(b, m); return LD_OK;
    case DS_ROLE_LATEST_REMINDER:
        ld_dsenc_puts(b, DS_LATEST_REMINDER);
        ld_dsenc_puts(b, m->content);
        return LD_OK;
    case DS_ROLE_ASSISTANT: return put_assistant(b, v, c, i, last_user, err);
    default: return REFUSE(err, "message %d: role not supported by the DeepSeek-V4 encoder", m->req_index);
    }
}

/* What follows a turn that is last or is followed by an assistant or
 * latest_reminder turn: a task token, or the assistant hand-off. */
static void put_transition(ds_buf *b, const v4_conv *v, const ds_conv *c, size_t i, long last_user)
{
    const ds_msg *m = &v->msgs[i];
    if (i + 1 < v->n && v->msgs[i + 1].role != DS_ROLE_ASSISTANT && v->msgs[i + 1].role != DS_ROLE_LATEST_REMINDER)
        return;
    if (m->task && strcmp(m->task, "action") != 0) {
        ld_dsenc_puts(b, "<\xef\xbd\x9c");
        ld_dsenc_puts(b, m->task);
        ld_dsenc_puts(b, "\xef\xbd\x9c>");
    } else if (m->task) {
        ld_dsenc_puts(b, DS_ASSISTANT);
        ld_dsenc_puts(b, c->thinking ? DS_THINK : DS_THINK_END);
        ld_dsenc_puts(b, "<\xef\xbd\x9c" "action\xef\xbd\x9c>");
    } else if (m->role == DS_ROLE_USER || m->role == DS_ROLE_DEVELOPER) {
        ld_dsenc_puts(b, DS_ASSISTANT);
        bool open = c->thinking && (!v->drop_thinking || (long)i >= last_user);
        ld_dsenc_puts(b, open ? DS_THINK : DS_THINK_END);
    }
}

ld_status ld_dsenc_encode_v4(const ds_conv *c, int add_generation_prompt, ds_buf *out, ld_error *err)
{
    v4_conv v;
    ld_status s = rewrite(&v, c, err);
    long last_user = last_user_index(&v);
    if (s == LD_OK) ld_dsenc_puts(out, DS_BOS);
    for (size_t i = 0; s == LD_OK && i < v.n; i++) {
        if (i == 0 && c->thinking && c->effort_max) ld_dsenc_puts(out, EFFORT_MAX);
        s = put_body(out, &v, c, i, last_user, err);
        if (s == LD_OK && (add_generation_prompt || i + 1 < v.n)) put_transition(out, &v, c, i, last_user);
    }
    ld_arena_release(&v.arena);
    return s;
}
