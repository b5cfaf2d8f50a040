/* tokcheck.h - do the logged input ids say what the logged prompt text
 * says?  The prompt is re-encoded with the model's tokenizer (special tokens
 * in the text parsed, as servers tokenize rendered chat prompts; with and
 * without the tokenizer's own BOS/EOS) and compared id for id with the ids
 * the server logged.  Findings (finding.h):
 *   template.tokens_faithful    info: the same ids (saying whether the
 *                                tokenizer's BOS/EOS account for a difference);
 *   template.token_mismatch     error: the first differing id, both sides
 *                                decoded around it, and what it looks like
 *                                (a double BOS, a special token the text
 *                                spells out that the server took as text, or
 *                                the reverse, text and ids that disagree);
 *   template.tokens_not_checked info: why not (no ids or no text logged, a
 *                                list or text cut by the logger, an id
 *                                outside the vocabulary).
 * Ownership: everything borrowed; findings in the arena.
 */
#ifndef LD_TOKCHECK_H
#define LD_TOKCHECK_H

#include "finding.h"
#include "parse/request/request.h"
#include "replay/tokenizer/tok.h"

/* Checks r (read with LD_PAIR_KEEP_VALUES) with `tok`; appends findings to
 * `out`.  Errors: LD_ERR_NOMEM only. */
ld_status ld_tokcheck(const ld_tok *tok, const ld_request *r, ld_arena *arena,
                      ld_findings *out, ld_error *err);

#endif
