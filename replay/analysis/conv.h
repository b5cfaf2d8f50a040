/* conv.h - conversations across requests: did the harness send back what the
 * server produced?
 *
 * An agent harness sends the whole history with every turn.  For an assistant
 * message at index j of request S, the request that produced it is the
 * earlier request P whose message array equals S's messages[0..j): P's output
 * became message j.  ld_conv_check compares P's output with that message:
 *
 *   harness.stale_assistant (error)  the harness sent it back emptied, cut
 *       short, edited, or with the reasoning moved (into the visible content,
 *       or the answer into reasoning_content).  Evidence: message = j,
 *       expected_len = bytes of P's visible answer, actual_len = bytes of the
 *       message's visible answer, first_diff = first differing byte of the
 *       two (after edge whitespace), array_excerpt / prompt_excerpt = the
 *       message / the output there, related_rid = P.
 *
 * Benign differences (never reported): whitespace at the edges; reasoning
 * kept in reasoning_content vs inline <think>...</think> (or a bare
 * "...</think>" when the template opened the block) when the visible answer is
 * identical; reasoning dropped from the history; the matched stop string
 * trimmed (or not); tool calls carried as tool_calls instead of the raw
 * markup (then the content must be the output's text before the markup, and
 * every call's name must occur in the output).  When the logger cut P's
 * output (head + tail) only what is visible is compared: the message must
 * start with the visible head and end with the visible tail.  When P's
 * output is not in the log (level 0/1, no Finish, abbreviated) nothing is
 * compared.  Several earlier requests with the same array (a retry, n>1):
 * the message may equal any of them; a difference is reported against the
 * newest.
 * When *out already holds a harness.empty_assistant finding for message j
 * (run ld_harness_check first), its detail is completed with P's rid, finish
 * reason and output length and its related_rid set: the classic case of an
 * interrupted answer (finish reason abort) sent back empty gives both kinds.
 *
 * Matching: each message is hashed (role, visible content with edge
 * whitespace and a leading <think> block removed, tool calls: id, name,
 * arguments; tool_call_id, name) and the hashes are chained over the array,
 * so a prefix is one 64-bit key.  Reasoning is not hashed (harnesses drop it
 * from older turns).  A conversation is the set of requests with the same
 * chained hash through the first user message (system prompt + first user
 * turn); its id is the rid of the first request seen in it.
 *
 * Order: records must come in time order; the pairer emits in completion
 * order, and an agent's next turn is received after the previous one
 * finished, so P comes before S.  A producer that comes later (an unpaired
 * record emitted at the end, a second server's file read first) is missed.
 *
 * Memory: per conversation, one entry per recorded request: its key, rid,
 * output text (copy; outputs above max_entry_bytes are kept as head and tail
 * when the logger had not cut them already, else not kept) and finish reason.
 * Bounded by max_conversations and max_bytes (least recently used
 * conversation evicted first) and max_entries per conversation (its oldest
 * entries dropped): memory depends on the open conversations, never on the
 * size of the log.
 *
 * Ownership: the tracker owns its copies (malloc); findings and the returned
 * conversation id live in the caller's arena.  Not thread-safe: one tracker
 * per thread, records in order.
 */
#ifndef LD_CONV_H
#define LD_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "ld_arena.h"
#include "finding.h"
#include "ld_error.h"
#include "parse/request/request.h"

typedef struct ld_conv_options {
    size_t max_conversations; /* 0 = 65536 */
    size_t max_bytes;         /* bytes of entries held (outputs, rids, bookkeeping);
                                 0 = 256 MiB */
    size_t max_entries;       /* entries per conversation; 0 = 4096 */
    size_t max_entry_bytes;   /* output bytes kept per entry; 0 = 1 MiB */
} ld_conv_options;

typedef struct ld_conv_stats {
    uint64_t conversations;   /* open now */
    uint64_t entries;         /* held now */
    uint64_t bytes;           /* held now */
    uint64_t peak_bytes;
    uint64_t evicted;         /* conversations evicted */
    uint64_t matched;         /* assistant messages whose producer was found */
} ld_conv_stats;

typedef struct ld_conv_tracker ld_conv_tracker;

/* New tracker; opts copied (NULL = defaults).  LD_ERR_NOMEM on failure. */
ld_status ld_conv_tracker_new(const ld_conv_options *opts, ld_conv_tracker **out,
                              ld_error *err);

/* Checks r against the requests recorded before it (appending
 * harness.stale_assistant findings to *out, completing empty_assistant ones),
 * then records r.  *out_conversation_id (may be NULL) = the conversation's id
 * copied into `arena`, or NULL when r has no message array with kept texts
 * (then nothing is checked or recorded; error records likewise).  Returns
 * LD_OK or LD_ERR_NOMEM (arena or tracker memory). */
ld_status ld_conv_check(ld_conv_tracker *t, const ld_request *r, ld_arena *arena,
                        ld_findings *out, const char **out_conversation_id, ld_error *err);

/* Counters so far. */
void ld_conv_tracker_stats(const ld_conv_tracker *t, ld_conv_stats *out);

/* Frees the tracker and everything it holds.  NULL ok. */
void ld_conv_tracker_free(ld_conv_tracker *t);

#endif
