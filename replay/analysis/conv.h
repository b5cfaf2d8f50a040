/* conv.h - conversations across requests: did the harness send back what the
 * server produced?
 *
 * The design: docs/analysis.md, "Conversations across requests". */
#ifndef LD_CONV_H
#define LD_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "ld_arena.h"
#include "finding.h"
#include "ld_error.h"
#include "parse/request/request.h"

/* What the tracker keeps of one request, in the order it keeps them: the
 * only change ld_conv_check makes to a tracker (its checks read it).  Fed
 * through ld_conv_replay in the same order, the ops of a stretch of
 * requests bring any tracker to the state ld_conv_check of those requests
 * would have left it in (the ids, evictions and memory included, given the
 * same options): how a share of a sharded run starts where one process
 * over the earlier shares' inputs would be.  The strings are views, owned
 * by whoever made the op. */
typedef struct ld_conv_op {
    uint64_t conv_key;          /* the conversation's key (see ld_conv_key) */
    uint64_t key;               /* chained hash of the request's whole array */
    const char *rid;            /* the request; also the id of a conversation it opens */
    const char *out_head;       /* the output as kept: head bytes, then tail bytes; */
    const char *out_tail;       /*   out_head NULL when the output is not known */
    size_t head_len, tail_len;
    int out_cut;                /* 1: the output's middle is missing between head and tail */
    ld_finish_kind finish;
    const char *finish_type;    /* NULL when none */
    const char *stop_str;       /* the matched stop string (not a token id); NULL */
    int64_t completion_tokens;
} ld_conv_op;

/* Told each op as ld_conv_check makes it; nonzero fails that check
 * (LD_ERR_IO). */
typedef int (*ld_conv_journal_fn)(void *ctx, const ld_conv_op *op);

typedef struct ld_conv_options {
    size_t max_conversations; /* 0 = 65536 */
    size_t max_bytes;         /* bytes of entries held (outputs, rids, bookkeeping);
                                 0 = 256 MiB */
    size_t max_entries;       /* entries per conversation; 0 = 4096 */
    size_t max_entry_bytes;   /* output bytes kept per entry; 0 = 1 MiB */
    ld_conv_journal_fn journal; /* NULL = none */
    void *journal_ctx;
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

/* Applies op (made by a tracker with the same options) as ld_conv_check of
 * its request would: the conversation made the most recently used (opened
 * under op->rid if new), the entry kept unless the same request was, the
 * memory bounds kept.  No checks, no `matched`.  LD_OK, LD_ERR_NOMEM,
 * LD_ERR_USAGE (NULL t, op or rid). */
ld_status ld_conv_replay(ld_conv_tracker *t, const ld_conv_op *op, ld_error *err);

/* The key ld_conv_check groups r into a conversation by: the chained hash
 * of its messages through the first user message (not the conversation's
 * id, which is the rid of the first request the tracker saw in it, so
 * depends on what it was fed).  0 when ld_conv_check would not check r. */
uint64_t ld_conv_key(const ld_request *r);

/* Counters so far. */
void ld_conv_tracker_stats(const ld_conv_tracker *t, ld_conv_stats *out);

/* Frees the tracker and everything it holds.  NULL ok. */
void ld_conv_tracker_free(ld_conv_tracker *t);

#endif
