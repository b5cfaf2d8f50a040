/* regress_journal.h - a share's conversation journal: what its conversation
 * tracker kept, request by request (replay/analysis/conv.h ld_conv_op), so
 * that a later share can start where one process over the earlier shares'
 * inputs would be (`--conv-journal FILE`, then `--conv-from DIR`).
 *
 * The file (JSON Lines):
 *   {"format": "logdiff-conv-journal", "version": 1, "shard": ..., "share": ...,
 *    "inputs": [...], "settings": {...}}   as a partial's first line
 *   {"op": {"conv": hex, "key": hex, "rid": text, "head": text, "tail": text,
 *           "cut": true, "finish": n, "type": text, "stop": text, "tokens": n}} ...
 *                                          in the order the tracker kept them;
 *                                          "head" absent when the output is not
 *                                          known, "tail", "cut", "type", "stop"
 *                                          when empty or none
 *   {"end": {"ops": n, "digest": hex}}
 * Texts are request_json.h's lossless values (a text that is not UTF-8 as
 * {"hex"}).  The digest is of the op lines' bytes: a share's partial holds
 * the digest of its own ops, and of the journals it started from, so that
 * --merge can tell that every share started from the shares before it.
 */
#ifndef LD_CMD_REGRESS_JOURNAL_H
#define LD_CMD_REGRESS_JOURNAL_H

#include <stdint.h>
#include <stdio.h>

#include "ld_error.h"
#include "regress_partial.h"
#include "replay/analysis/conv.h"

#define LD_JOURNAL_FORMAT "logdiff-conv-journal"
#define LD_JOURNAL_VERSION 1

/* The ops of one share as they come (ld_cli_journal_on_op is an
 * ld_conv_journal_fn): digested always, written to `ops` when it is set
 * (a temporary file the caller owns). */
typedef struct ld_cli_journal {
    FILE *ops;
    uint64_t digest;   /* LD_JOURNAL_DIGEST_INIT before the first op */
    uint64_t n_ops;
} ld_cli_journal;

#define LD_JOURNAL_DIGEST_INIT 0xcbf29ce484222325ull

int ld_cli_journal_on_op(void *ctx, const ld_conv_op *op);

/* Writes the journal file: head h (its format set to the journal's), the
 * ops j wrote to j->ops, the end line.  0, or -1 (a write error). */
int ld_cli_journal_write(const ld_cli_journal *j, const ld_cli_partial_head *h, FILE *f);

/* Reads the journal text[0..len) after its first line (read with
 * ld_cli_partial_read_head), calling apply(ctx, op) on each op in order;
 * *digest = the ops' digest, checked against the end line.  Errors name
 * the line (e->line, e->offset): LD_ERR_SYNTAX, LD_ERR_TRUNCATED (no end
 * line), LD_ERR_MISMATCH (the end line does not match), or what apply
 * returned. */
ld_status ld_cli_journal_read_ops(const char *text, size_t len,
                                  ld_status (*apply)(void *ctx, const ld_conv_op *op, ld_error *e),
                                  void *ctx, uint64_t *digest, ld_error *e);

#endif
