/* rerender.h - re-rendering a logged request through the model's chat
 * template and comparing the result with the prompt the server logged.
 *
 * Identical means the server's templating was faithful, so a lost turn was
 * lost upstream (the harness) or by the template's own design; different
 * means the server (its template, its preprocessing) built another prompt,
 * and the first differing byte is the evidence.  Findings (finding.h):
 *   template.faithful        info: byte for byte the same (maybe up to the
 *                             BOS text, or within what the logger kept);
 *   template.render_mismatch error: first differing offset in the logged
 *                             prompt, both sides' excerpts, a short unified
 *                             diff; or the template refuses the array the
 *                             server built a prompt from;
 *   template.not_rendered    info: why no comparison was possible (no
 *                             logged array, an array or prompt cut by the
 *                             logger, token ids only, a feature logdiff's
 *                             renderer lacks).
 * The logged prompt may begin with the BOS text the tokenizer adds (the
 * Finish text is a decode of the input ids) or lack the template's BOS; both
 * are accepted and said in the detail.  A prompt the logger cut is compared
 * head and tail.  A template given no BOS (a bare .jinja) that prints
 * bos_token is compared after the logged prompt's leading special token,
 * and the detail says how to pass it.  strftime_now() prints the day the
 * request was logged (r->timestamp; today when the log gives no date); when
 * the template printed a date and the render differs, the days either side
 * are tried (a server clock in another time zone than its logger's); the
 * date used is said in the detail.
 *
 * Ownership: everything is borrowed; findings and their strings live in the
 * arena.  Thread-safe for distinct arenas and finding lists.
 */
#ifndef LD_RERENDER_H
#define LD_RERENDER_H

#include "replay/template/chat_render.h"
#include "finding.h"
#include "parse/request/request.h"
#include "replay/template/server_prep.h"

struct cJSON;

typedef struct ld_rerender {
    const ld_tpl_source *src;  /* the model's template or built-in encoder */
    ld_server_kind server;     /* preprocessing the server did */
    int content_parts;         /* the template's content format
                                  (ld_server_template_wants_parts) */
    ld_chat_opts chat;         /* bos/eos overrides, limits */
} ld_rerender;

/* Re-renders `request` (the logged OpenAI request as plain JSON, NULL when
 * the log has none) and compares it with r->prompt; appends the findings
 * to `out`.  Errors: LD_ERR_NOMEM only (everything else is a finding). */
ld_status ld_rerender_check(const ld_rerender *rr, const ld_request *r,
                            const struct cJSON *request, ld_arena *arena,
                            ld_findings *out, ld_error *err);

#endif
