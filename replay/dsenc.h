/* dsenc.h - built-in prompt encoders for the model families whose prompt
 * layout is defined by Python code instead of a Jinja chat template:
 * DeepSeek-V3.2 and DeepSeek-V4 (../shared/docs/chat-templates.md §6).
 *
 * The encoders take the OpenAI chat-completions request as the server got
 * it (a cJSON object: `messages`, `tools`, `response_format`,
 * `reasoning_effort`, `chat_template_kwargs` with `thinking` /
 * `enable_thinking`) and write the prompt text SGLang builds from it.
 * They are checked against SGLang's own encoders (tools/gen_dsenc_cases.py).
 *
 * Ownership: the request is borrowed and not modified; the prompt is
 * malloc'd, NUL-terminated, owned by the caller (free()).
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
 * `add_generation_prompt` = 0 asks for the conversation without the final
 * assistant hand-off where the format allows it.  Errors: LD_ERR_MISMATCH
 * for a request the reference encoder refuses (err->msg says why, naming the
 * message index), LD_ERR_USAGE for a request that is not an object with a
 * `messages` list, LD_ERR_NOMEM. */
ld_status ld_dsenc_render(ld_dsenc_variant variant, const struct cJSON *request,
                          int add_generation_prompt, char **out, size_t *out_len,
                          ld_error *err);

#endif
