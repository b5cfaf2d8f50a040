/* dsenc_v32.c - the DeepSeek-V3.2 prompt format (SGLang's
 * encoding_dsv32.encode_messages, ../shared/docs/chat-templates.md §6.2):
 * BOS, the system text (+ tools section), `<｜User｜>TEXT<｜Assistant｜>`
 * followed by `<think>` (thinking mode, last user turn) or `</think>`,
 * assistant turns `[REASONING</think>]CONTENT[DSML function_calls]<EOS>`,
 * and tool results as `<function_results>` blocks. */
#include <string.h>

#include "dsenc_internal.h"

#define REFUSE(err, ...) LD_FAIL((err), LD_ERR_MISMATCH, 0, __VA_ARGS__)

static const char TOOLS_HEAD[] =
    "## Tools\n"
    "You have access to a set of tools you can use to answer the user's question.\n"
    "You can invoke functions by writing a \"<" DS_DSML "function_calls>\" block like the following as part of "
    "your reply to the user:\n"
    "<" DS_DSML "function_calls>\n"
    "<" DS_DSML "invoke name=\"$FUNCTION_NAME\">\n"
    "<" DS_DSML "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" DS_DSML "parameter>\n"
    "...\n"
    "</" DS_DSML "invoke>\n"
    "<" DS_DSML "invoke name=\"$FUNCTION_NAME2\">\n"
    "...\n"
    "</" DS_DSML "invoke>\n"
    "</" DS_DSML "function_calls>\n"
    "String and scalar parameters should be specified as is without any escaping or quotes, while lists and "
    "objects should use JSON format. The \"string\" attribute should be set to \"true\" for string type "
    "parameters and \"false\" for other types (numbers, booleans, arrays, objects).\n"
    "If the thinking_mode is enabled, then after function results you should strongly consider outputting a "
    "thinking block. Here is an example:\n"
    "<" DS_DSML "function_calls>\n"
    "...\n"
    "</" DS_DSML "function_calls>\n"
    "<function_results>\n"
    "...\n"
    "</function_results>\n"
    DS_THINK "...thinking about results" DS_THINK_END "\n"
    "Here are the functions available in JSONSchema format:\n"
    "<functions>\n";
static const char TOOLS_TAIL[] = "\n</functions>\n";

static ld_status put_tools(ds_buf *b, const ds_msg *m, ld_error *err)
{
    return ld_dsenc_put_tools_section(b, m, TOOLS_HEAD, TOOLS_TAIL, err);
}

/* The closing part of a user turn: the assistant hand-off. */
static void put_user_end(ds_buf *b, bool open_thinking, bool hand_off)
{
    if (!hand_off) return;
    ld_dsenc_puts(b, DS_ASSISTANT);
    ld_dsenc_puts(b, open_thinking ? DS_THINK : DS_THINK_END);
}

/* A tool result: its place among the calls of the assistant message before
 * the run of tool messages decides whether it opens/closes the block. */
static ld_status put_tool_result(ds_buf *b, const ds_conv *c, size_t i, long last_user, ld_error *err)
{
    size_t p = i;
    while (p > 0 && c->msgs[p - 1].role == DS_ROLE_TOOL) p--;
    const ds_msg *m = &c->msgs[i];
    if (p == 0 || c->msgs[p - 1].role != DS_ROLE_ASSISTANT)
        return REFUSE(err, "message %d: tool result without a preceding assistant message", m->req_index);
    const ds_msg *a = &c->msgs[p - 1];
    size_t order = i - p + 1;
    if (a->n_calls < order)
        return REFUSE(err, "message %d: tool result without a matching assistant tool call", m->req_index);
    if (order == 1) ld_dsenc_puts(b, "\n\n<function_results>");
    ld_dsenc_puts(b, "\n<result>");
    ld_dsenc_puts(b, m->content);
    ld_dsenc_puts(b, "</result>");
    if (order == a->n_calls) {
        ld_dsenc_puts(b, "\n</function_results>\n\n");
        ld_dsenc_puts(b, (long)i >= last_user && c->thinking ? DS_THINK : DS_THINK_END);
    }
    return LD_OK;
}

static ld_status put_assistant(ds_buf *b, const ds_conv *c, size_t i, long last_user, ld_error *err)
{
    const ds_msg *m = &c->msgs[i];
    if (c->thinking && (long)i > last_user) {
        if (!(m->reasoning && *m->reasoning) && !m->n_calls)
            return REFUSE(err, "message %d: thinking mode needs reasoning_content or tool_calls on an assistant "
                               "message after the last user message", m->req_index);
        ld_dsenc_puts(b, m->reasoning ? m->reasoning : "");
        ld_dsenc_puts(b, DS_THINK_END);
    }
    ld_dsenc_puts(b, m->content);
    if (m->n_calls) LD_TRY(ld_dsenc_put_tool_calls(b, m, "function_calls", err));
    ld_dsenc_puts(b, DS_EOS);
    return LD_OK;
}

static ld_status put_message(ds_buf *b, const ds_conv *c, size_t i, long last_user, bool hand_off, ld_error *err)
{
    const ds_msg *m = &c->msgs[i];
    bool open_thinking = (long)i == last_user && c->thinking;
    switch (m->role) {
    case DS_ROLE_SYSTEM:
        ld_dsenc_puts(b, m->content);
        return put_tools(b, m, err);
    case DS_ROLE_DEVELOPER:
        if (!*m->content) return REFUSE(err, "message %d: a developer message needs content", m->req_index);
        ld_dsenc_puts(b, DS_USER);
        LD_TRY(put_tools(b, m, err));
        ld_dsenc_puts(b, "\n\n# The user's message is: ");
        ld_dsenc_puts(b, m->content);
        put_user_end(b, open_thinking, hand_off);
        return LD_OK;
    case DS_ROLE_USER:
        ld_dsenc_puts(b, DS_USER);
        ld_dsenc_puts(b, m->content);
        put_user_end(b, open_thinking, hand_off);
        return LD_OK;
    case DS_ROLE_TOOL: return put_tool_result(b, c, i, last_user, err);
    case DS_ROLE_ASSISTANT: return put_assistant(b, c, i, last_user, err);
    default: return REFUSE(err, "message %d: role not supported by the DeepSeek-V3.2 encoder", m->req_index);
    }
}

static long last_user_index(const ds_conv *c)
{
    for (size_t i = c->n; i-- > 0;)
        if (c->msgs[i].role == DS_ROLE_USER || c->msgs[i].role == DS_ROLE_DEVELOPER) return (long)i;
    return -1;
}

ld_status ld_dsenc_encode_v32(const ds_conv *c, int add_generation_prompt, ds_buf *out, ld_error *err)
{
    long last_user = last_user_index(c);
    /* In thinking mode the encoder drops every message before the last user
     * message that is not user/system/tool/assistant, then still renders the
     * original count: SGLang fails with "index out of range". */
    for (long i = 0; c->thinking && i < last_user; i++) {
        ds_role r = c->msgs[i].role;
        if (r != DS_ROLE_USER && r != DS_ROLE_SYSTEM && r != DS_ROLE_TOOL && r != DS_ROLE_ASSISTANT)
            return REFUSE(err, "message %d: a developer message before the last user message is dropped in "
                               "thinking mode and the encoder fails", c->msgs[i].req_index);
    }
    ld_dsenc_puts(out, DS_BOS);
    for (size_t i = 0; i < c->n; i++)
        LD_TRY(put_message(out, c, i, last_user, add_generation_prompt || i + 1 < c->n, err));
    return LD_OK;
}
