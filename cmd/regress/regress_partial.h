/* regress_partial.h - one share's result of `logdiff regress`, written by
 * `--shard I/N --partial FILE` and read back by `--merge`.
 *
 * The file (JSON Lines, so that a merge of many reads one line at a time):
 *   {"format": "logdiff-regress-partial", "version": 1,
 *    "shard": {"index": I, "count": N}, "share": {"first": a, "end": b},
 *    "inputs": [every INPUT of the run, as given], "settings": {...},
 *    "conv": {"digest": hex, "from": [hex, ...]}}
 *                           the digest of the share's conversation ops
 *                           (regress_journal.h) and, when it started from
 *                           the journals of the shares before it
 *                           (--conv-from), theirs in share order
 *   {"member": {...}} ...   the members read, in reading order
 *   {"problem": {...}} ...  the inputs or members that could not be read
 *   {"item": {...}} ...     every request in judging order: identity, verdict,
 *                           baseline kinds and hash; a request that is not
 *                           ok also its findings and its record (request_json.h);
 *                           left out when so: "rid" (none), "key" (the rid),
 *                           "conversation" (none), "errors" / "info" (empty)
 *   {"end": {counts}}       what was written, so that a cut file is caught
 * Everything a report shows is in it, so `--merge` writes byte for byte
 * what one process over all INPUTs writes; the alignment the HTML report
 * draws is computed again from the record (a pure function of it).
 */
#ifndef LD_CMD_REGRESS_PARTIAL_H
#define LD_CMD_REGRESS_PARTIAL_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "regress.h"

#define LD_PARTIAL_FORMAT "logdiff-regress-partial"
#define LD_PARTIAL_VERSION 2

/* A partial's first line. */
typedef struct ld_cli_partial_head {
    long index, count;          /* the share: index/count */
    size_t first, end;          /* its inputs [first, end) of all inputs */
    char **inputs;              /* every input of the run (read: malloc'd, with the strings) */
    size_t n_inputs;
    cJSON *settings;            /* the judging options; owned (read: parsed) */
    int journal;                /* 1: the head of a conversation journal (regress_journal.h),
                                   which has no "conv" */
    uint64_t conv_digest;       /* "conv": the digest of the share's own conversation ops */
    int conv_preloaded;         /* 1: it started from the journals of shares 0..index-1, */
    uint64_t *conv_from;        /*   whose digests these are (index of them; malloc'd) */
} ld_cli_partial_head;

void ld_cli_partial_head_free(ld_cli_partial_head *h);

/* Writes h as a file's first line (a journal's when h->journal).  0 or -1. */
int ld_cli_partial_write_head(const ld_cli_partial_head *h, FILE *f);

/* Writes run (its items, members, problems and counts; inputs numbered
 * from h->first) as a partial with header h.  0, or -1 (out of memory or
 * a write error: the caller's outfile reports it). */
int ld_cli_regress_write_partial(const ld_cli_regress_run *run, const ld_cli_partial_head *h, FILE *f);

/* Reads the first line of text[0..len) into *h: a partial's, or a
 * journal's (h->journal set).  LD_ERR_SYNTAX (neither, a bad field:
 * e.line/e.offset say where), LD_ERR_UNSUPPORTED (another version). */
ld_status ld_cli_partial_read_head(const char *text, size_t len, ld_cli_partial_head *h, ld_error *e);

/* Appends the rest of a partial (after its first line; h is what that
 * line said) to run: items
 * (baseline entries into run->cur, records kept for the not-ok ones),
 * members, problems and counts.  Errors as above, LD_ERR_TRUNCATED when
 * the file ends before its "end" line, LD_ERR_NOMEM. */
ld_status ld_cli_partial_read_body(const char *text, size_t len, const ld_cli_partial_head *h,
                                   ld_cli_regress_run *run, ld_error *e);

#endif
