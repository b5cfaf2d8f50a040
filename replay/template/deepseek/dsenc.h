/* dsenc.h - built-in prompt encoders for the model families whose prompt
 * layout is defined by Python code instead of a Jinja chat template:
 * DeepSeek-V3.2 and DeepSeek-V4 (../shared/docs/chat-templates.md §6).
 *
 * The encoders take the OpenAI chat-completions request as the server got
 * it (a cJSON object: `messages`, `tools`, `tool_choice`, `reasoning_effort`,
 * `reasoning`, `chat_template_kwargs` with `thinking`, `task`,
 * `continue_final_message`) and write the prompt text SGLang 0.5.22 builds
 * from it: first what serving_chat.py does to the request (content None ->
 * "", part lists flattened, tool-call arguments parsed, a trailing assistant
 * message turned into a user one, an empty system message inserted first to
 * host the tools, thinking mode from chat_template_kwargs.thinking or
 * reasoning_effort; see dsenc_prep.c), then encode_messages of
 * encoding_dsv32.py / encoding_dsv4.py.  The raw client body and SGLang's
 * logged model_dump(exclude_none=True) of it give the same prompt.
 * `response_format` and `enable_thinking` do not reach these encoders in
 * SGLang and are ignored.  Checked byte for byte against SGLang's own
 * encoders (tools/gen_dsenc_cases.py -> testdata/replay/dsenc/).
 *
 * Ownership: the request is borrowed and not modified; the prompt is
 * malloc'd, NUL-terminated, owned by the caller (free()).  Thread-safe for
 * distinct outputs.
 */
#ifndef LD_DSENC_H
#define LD_DSENC_H

#include <stddef.h>

#include "ld_error.h"

struct cJSON;

typedef enum ld_dsenc_variant {
    LD_DSENC_V32 = 1, /* DeepSeek-V3.2 (encoding_dsv32.py) */
    LD_DSENC_V4 = 2   /* DeepSeek-V4 (encoding_dsv4.py) */
} ld_dsenc_variant;

/* Encodes `request` the way SGLang's chat endpoint does for `variant`.
 * `add_generation_prompt` = 1 is what SGLang sends.  0 asks for the
 * conversation without the final assistant hand-off where the format allows
 * it: when the last message is a user/developer turn, its trailing
 * `<｜Assistant｜>` + `<think>`/`</think>` (V3.2, V4) or task marker (V4) is
 * left out; nothing else changes (a V3.2 tool-result block keeps its
 * closing think token).  Errors: LD_ERR_MISMATCH for a request SGLang
 * refuses, in its request validation or in the encoder (err->msg says why and
 * starts with "message N:", N the index in request.messages, or with
 * "request:"), LD_ERR_USAGE for a request that is not an object with a
 * `messages` list or an unknown variant, LD_ERR_NOMEM. */
ld_status ld_dsenc_render(ld_dsenc_variant variant, const struct cJSON *request,
                          int add_generation_prompt, char **out, size_t *out_len,
                          ld_error *err);

#endif
