/* chat_render.h - the prompt a server builds from an OpenAI chat-completions
 * request: through a Jinja chat template with the context HF transformers'
 * apply_chat_template gives it, or through a built-in encoder (dsenc.h).
 *
 * The template sees what transformers 5.x's apply_chat_template gives it:
 * `messages` (keys whose value is None dropped; a reasoning under any of
 * reasoning_content / thinking / reasoning also given as both `thinking` and
 * `reasoning_content`), `tools` and `documents` (None when absent),
 * `add_generation_prompt`, `bos_token` / `eos_token` (the options', else the
 * source's; undefined when neither has one) and every key of the request's
 * `chat_template_kwargs`.  A built-in encoder takes the request as the
 * server got it and does the server's preprocessing itself (dsenc.h).
 *
 * Ownership: `src` and `request` are borrowed; the prompt is malloc'd,
 * NUL-terminated and owned by the caller (free()).  Thread-safe.
 */
#ifndef LD_CHAT_RENDER_H
#define LD_CHAT_RENDER_H

#include <stddef.h>

#include "ld_arena.h"
#include "ld_error.h"
#include "replay/template/jinja/tpl.h"
#include "tpl_source.h"

struct cJSON;

typedef struct ld_chat_opts {
    const char *bos_token;      /* overrides the source's; NULL = source's */
    const char *eos_token;      /* overrides the source's; NULL = source's */
    int no_generation_prompt;   /* add_generation_prompt=False */
    const ld_tpl_limits *limits; /* NULL = defaults (tpl.h) */
    ld_arena *scratch;          /* NULL = fresh memory per render; else the
                                   caller's arena, reset after each render so
                                   that repeated renders reuse its memory */
} ld_chat_opts;

/* Renders `request` (a JSON object with a `messages` list) through `src`.
 * `opts` may be NULL.  Errors: LD_ERR_USAGE (no `messages` list), the
 * errors of ld_tpl_render (a template's refusal is LD_ERR_MISMATCH with
 * err->line set) or of ld_dsenc_render, LD_ERR_NOMEM. */
ld_status ld_chat_render(const ld_tpl_source *src, const struct cJSON *request,
                         const ld_chat_opts *opts, char **out, size_t *out_len,
                         ld_error *err);

/* The template context of `request` (above) for a Jinja source, built in
 * `arena` (values borrow strings from `request`, which must outlive them):
 * for callers that render it several times with ld_tpl_render_in.  Errors:
 * LD_ERR_USAGE (no `messages` list), LD_ERR_NOMEM. */
ld_status ld_chat_context(const ld_tpl_source *src, const struct cJSON *request,
                          const ld_chat_opts *opts, ld_arena *arena, ld_tpl_value **out,
                          ld_error *err);

#endif
