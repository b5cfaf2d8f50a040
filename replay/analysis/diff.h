/* diff.h - the verdict on one logged request: which layer lost the
 * conversation, with the evidence.
 *
 * ld_differ_judge() runs, for one request record (parse/request/request.h, read
 * with LD_PAIR_KEEP_TEXT):
 *   - the per-request checks of harness.h (empty assistant turns, orphan tool
 *     calls, log truncation, unpaired parts, parse errors, repetition);
 *   - the conversation checks of conv.h against the earlier requests of the
 *     same conversation (records must be fed in completion order, as the
 *     pairer emits them);
 *   - the alignment of the message array with the templated prompt (align.h),
 *     whose findings are the template.* kinds.
 * The verdict is ld_verdict_of() of the findings (finding.h).
 *
 * Ownership: the differ owns the conversation state (bounded by
 * ld_conv_options); each verdict's findings, strings and alignment live in
 * the arena passed to ld_differ_judge().  Not thread-safe: one differ per
 * stream of requests.
 */
#ifndef LD_DIFF_H
#define LD_DIFF_H

#include "align.h"
#include "conv.h"
#include "finding.h"
#include "parse/request/request.h"

typedef struct ld_diff_options {
    ld_conv_options conv;  /* zeros: conv.h defaults */
    int no_conversations;  /* judge each request alone */
} ld_diff_options;

typedef struct ld_verdict {
    ld_findings findings;          /* in the order the checks ran */
    const char *verdict;           /* "ok", "harness", "template", "kernels",
                                      "sampling" or "log" (static) */
    const char *conversation;      /* conversation id (arena), NULL if none */
    const ld_align_result *align;  /* NULL when no alignment ran */
    int aligned;                   /* 1 when messages and prompt were compared */
} ld_verdict;

typedef struct ld_differ ld_differ;

ld_status ld_differ_new(const ld_diff_options *opts, ld_differ **out, ld_error *err);

/* Judges r into *out (arena-owned).  Errors: LD_ERR_NOMEM. */
ld_status ld_differ_judge(ld_differ *d, const ld_request *r, ld_arena *arena,
                          ld_verdict *out, ld_error *err);

/* Only the alignment of ld_differ_judge (out->align, out->aligned; no
 * findings, no conversation): a pure function of r's messages and prompt,
 * for a verdict read back from elsewhere (`regress --merge`) whose
 * findings came with it.  Errors: LD_ERR_NOMEM. */
ld_status ld_differ_align_only(const ld_request *r, ld_arena *arena, ld_verdict *out, ld_error *err);

/* Conversation counters (for the summary and memory accounting). */
void ld_differ_conv_stats(const ld_differ *d, ld_conv_stats *out);

/* Only what ld_differ_judge does to the conversation tracker for r (its
 * checks' findings dropped): a share's first pass of a sharded run, which
 * writes what the tracker keeps and judges nothing.  LD_OK, LD_ERR_NOMEM,
 * or the journal's LD_ERR_IO. */
ld_status ld_differ_track(ld_differ *d, const ld_request *r, ld_arena *arena, ld_error *err);

/* Brings the conversation tracker forward by op (conv.h ld_conv_replay),
 * as if op's request had been judged: how a share of a sharded run starts
 * from the shares before it.  LD_OK (nothing to do when conversations are
 * off), LD_ERR_NOMEM. */
ld_status ld_differ_conv_replay(ld_differ *d, const ld_conv_op *op, ld_error *err);

void ld_differ_free(ld_differ *d);

#endif
