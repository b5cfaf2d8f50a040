/* harness.h - per-request checks that need only the request itself: the
 * message array the harness sent, the log's completeness, and the output.
 *
 * The design: docs/analysis.md, "The harness's faults in one request". */
#ifndef LD_HARNESS_H
#define LD_HARNESS_H

#include "ld_arena.h"
#include "finding.h"
#include "ld_error.h"
#include "parse/request/request.h"

/* Runs every check above on r and appends its findings to *out (in the order
 * parse error, unpaired, capture loss, truncated, empty assistant, orphan
 * tool, repetition).
 * Returns LD_OK, or LD_ERR_NOMEM when the arena (or the repetition scan's
 * temporary table) runs out; findings added before that stay in *out. */
ld_status ld_harness_check(const ld_request *r, ld_arena *arena, ld_findings *out,
                           ld_error *err);

/* 1 when a message text counts as empty for harness.empty_assistant: absent,
 * None, or present with no byte other than ASCII whitespace (when the bytes
 * were not kept: when n_chars is 0).  Truncated or abbreviated texts with
 * characters are not blank. */
int ld_harness_text_blank(const ld_text *t);

/* A request whose capture lost bytes inside a line (LD_REQ_CAPTURE_LOSS,
 * its log.capture_loss finding) or cut a line for good (LD_REQ_CAPTURE_CUT,
 * log.capture_cut): every template.* error in `list` becomes
 * info, kept as evidence, since the differences may be the capture's. */
void ld_harness_capture_loss(const ld_request *r, ld_findings *list);

#endif
