/* server_prep.h - what a server does to an OpenAI chat request before its
 * chat template sees it, so that a re-render from the logged request gives
 * the prompt the server really built.
 *
 * Profiles:
 * - LD_SERVER_HF: none; the request body goes to apply_chat_template as it
 *   is (`logdiff template` by default).
 * - LD_SERVER_SGLANG: SGLang's chat endpoint (serving_chat.py and
 *   parser/jinja_template_utils.py, described from sglang 0.5.23).  The
 *   logged `Receive OpenAI` object is the request's
 *   model_dump(exclude_none=True); the template sees:
 *     * each message as SGLang's model keeps it (keys unknown to the model
 *       are gone; a user message keeps role and content only), content None
 *       as "", and no key whose value is None;
 *     * a content-part list flattened to its text parts joined by " " when
 *       the template wants strings (content_parts = 0, SGLang's "string"
 *       format); kept as a list for templates that loop over message
 *       content ("openai" format: see ld_server_template_wants_parts), as
 *       {"type": "text", "text": ...} / {"type": "image"} / ... parts and
 *       moved after the message's other keys, where a tool message whose
 *       parts are all text is still joined by " ";
 *     * a tool call as {id, index, type, function {name, arguments}} with
 *       arguments given as a JSON string parsed into an object (SGLang
 *       refuses the request when they do not parse as a JSON object);
 *     * tools only when tool_choice is not "none" (a named tool_choice keeps
 *       that tool only), each as {type, function, defer_loading: None} with
 *       the function's keys in the client's order, then description /
 *       parameters as None when the client left them out;
 *     * reasoning_effort, when set, as a template variable, then every key
 *       of chat_template_kwargs.
 *   Not modelled: image/audio/video parts (SGLang replaces them by
 *   {"type": "image"} and the like), continue_final_message.
 *
 * Ownership: the input is borrowed; *out is a new cJSON tree the caller
 * deletes (cJSON_Delete).
 */
#ifndef LD_SERVER_PREP_H
#define LD_SERVER_PREP_H

#include "ld_error.h"

struct cJSON;

typedef enum ld_server_kind {
    LD_SERVER_HF = 0,
    LD_SERVER_SGLANG = 1
} ld_server_kind;

/* "hf" / "none" or "sglang" -> the profile; -1 for an unknown name. */
int ld_server_by_name(const char *name);

/* The request as the template context builder (chat_render.h) must see it
 * for `kind`; `content_parts` is the template's content format (above).
 * Errors: LD_ERR_USAGE (not an object with a `messages` list),
 * LD_ERR_MISMATCH (a request the server would refuse: err->msg says why and
 * names the message index), LD_ERR_NOMEM. */
ld_status ld_server_prepare(ld_server_kind kind, int content_parts,
                            const struct cJSON *request, struct cJSON **out,
                            ld_error *err);

/* SGLang's guess of a template's content format: 1 ("openai": content-part
 * lists are kept) when the source mentions image/audio/video/vision or
 * loops over message.content (also msg.content, m.content, with filters or
 * slices), else 0 ("string").  A textual scan of SGLang's AST rule. */
int ld_server_template_wants_parts(const char *src, size_t len);

/* SGLang's second try when a template fails with the OpenAI tool wrapper:
 * every tool {type, function} becomes its bare function object.  Returns
 * 1 when something changed. */
int ld_server_flatten_tools(struct cJSON *prepared);

#endif
