/* harness.h - per-request checks that need only the request itself: the
 * message array the harness sent, the log's completeness, and the output.
 *
 * Findings (kinds in finding.h):
 *   harness.empty_assistant (error)  an assistant message in the history whose
 *       content is absent, None, "" or whitespace only (ASCII space, \t, \n,
 *       \r, \v, \f; see ld_harness_text_blank) and that has no tool calls,
 *       whatever its reasoning field holds.  A trailing assistant message (the
 *       last of the array: a prefill the model continues) is not history and
 *       is not checked.  ld_conv_check (conv.h) completes the detail with the
 *       request that produced the message when it knows it.
 *   harness.orphan_tool (error)  a tool result whose tool_call_id matches no
 *       tool call of an earlier assistant message (or, without an id, a tool
 *       result with no earlier tool call at all), and a tool call that no
 *       tool result answers before the next user or assistant message.  Needs
 *       the tool calls (LD_PAIR_KEEP_TEXT); skipped when they were not kept.
 *   log.truncated (info or error)  the logger cut or left out a field the
 *       comparison needs.  error when the field is gone entirely (levels 0/1
 *       leave out the templated prompt and output text; an abbreviated
 *       <text: N chars, blake2b=...> prompt or message): those checks cannot
 *       run, so the request cannot be called "ok".  info when head and tail
 *       are kept (level 2's 2048-char cut, vLLM's head-only prompt): checks
 *       run on what is visible.  One finding for the prompt, one for the
 *       output, one for all messages together (message = the first cut one).
 *   log.unpaired (error)  a Receive without its Finish or the reverse
 *       (request->missing), with the likely causes of log-formats.md section 9:
 *       a missing Finish is not evidence of a dropped message.
 *   log.parse_error (error)  an LD_REQ_ERROR record (a request line that failed
 *       to parse), with its path, line, byte offset and reason.
 *   sampling.repetition (error)  the output loops (repetition.h); the detail
 *       names the unit, the count and the temperature / top_p in force.
 *
 * Ownership: findings and their strings go to `arena` (finding.h); the
 * request is only read.  Thread safety: none shared; no global state.
 */
#ifndef LD_HARNESS_H
#define LD_HARNESS_H

#include "ld_arena.h"
#include "finding.h"
#include "ld_error.h"
#include "parse/request/request.h"

/* Runs every check above on r and appends its findings to *out (in the order
 * parse error, unpaired, truncated, empty assistant, orphan tool, repetition).
 * Returns LD_OK, or LD_ERR_NOMEM when the arena (or the repetition scan's
 * temporary table) runs out; findings added before that stay in *out. */
ld_status ld_harness_check(const ld_request *r, ld_arena *arena, ld_findings *out,
                           ld_error *err);

/* 1 when a message text counts as empty for harness.empty_assistant: absent,
 * None, or present with no byte other than ASCII whitespace (when the bytes
 * were not kept: when n_chars is 0).  Truncated or abbreviated texts with
 * characters are not blank. */
int ld_harness_text_blank(const ld_text *t);

#endif
