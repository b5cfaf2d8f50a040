/* pair.h - join request-log lines into ld_request records.
 *
 * Feed every line of every input (in file order; several files, e.g. prefill
 * and decode servers or rotated files, one after the other) to one pairer.
 * Each line is recognised (logline.h) and is either a request line (parsed and
 * merged into the open record of its rid), another line (skipped, counted)
 * or a request line that fails to parse (error, counted).
 *
 * Pairing: by rid.  A `Receive OpenAI:` line has no rid; it is held per
 * member and joined to the FOLLOWING `Receive:` line of the same member; the
 * join is checked by content when the record is emitted (the last user
 * message must occur in the templated prompt; LD_REQ_UNCONFIRMED when there
 * is no prompt to check, LD_REQ_AMBIGUOUS when the check fails).  A batch or
 * n>1 Receive (list-valued rid/text/input_ids/sampling_params, or a string rid
 * expanded as `{rid}_{i}`) becomes one record per sub-request, and each
 * `Finish:` pairs by its own rid.  HEALTH_CHECK_* requests are counted in
 * ld_pair_stats.health_checks and never emitted.
 *
 * Prefill/decode disaggregation (pair_pd.c): the records of one request
 * logged by a prefill and a decode server (one bootstrap room) are handed
 * out as one, the decode server's with the prefill server's as its `peer`;
 * such records wait for their partner (at most max_open, else 65536, and
 * 1 GiB) and go alone (LD_PD_ALONE) when it never comes.  Lines of two
 * servers interleaved in one capture are told apart by their writer.
 *
 * Emission: a record goes to the callback as soon as it is complete (its
 * Finish / legacy in-out / vLLM Generated line seen); the rest are emitted by
 * ld_pairer_finish() with `missing` and LD_REQ_UNPAIRED set.  So memory is
 * bounded by the number of open requests (and by max_open, when set, which
 * emits the oldest open record early as unpaired).
 *
 * Errors: ld_pairer_feed_line() returns the line's status and fills `err`
 * (path = member name, line, offset = byte offset of the error in the member).
 * With LD_PAIR_ERROR_RECORDS the callback also receives one record per bad
 * request line with LD_REQ_ERROR set, rid NULL and `error` filled.
 *
 * Ownership: the pairer copies what it keeps (member names, values); nothing
 * borrows the caller's line after feed_line returns.  Records passed to the
 * callback are freed when it returns 0; returning LD_PAIR_TAKE hands the
 * record to the callback's owner (free it with ld_request_free()).
 * Not thread-safe: one pairer per thread.
 */
#ifndef LD_PAIR_H
#define LD_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "parse/input/input.h"
#include "ld_error.h"
#include "parse/request/request.h"

/* ld_pair_options.flags */
#define LD_PAIR_KEEP_TEXT 0x01u     /* keep prompt/output/message texts (else only counts) */
#define LD_PAIR_KEEP_VALUES 0x02u   /* keep deep copies of obj/out value trees */
#define LD_PAIR_ERROR_RECORDS 0x04u /* also emit LD_REQ_ERROR records for bad lines */
#define LD_PAIR_KEEP_INTERNAL 0x08u /* emit HEALTH_CHECK_* records too (flagged INTERNAL) */

typedef struct ld_pair_options {
    unsigned flags;          /* LD_PAIR_* */
    const char *only_rid;    /* when set, KEEP_TEXT/KEEP_VALUES apply only to records whose
                                rid (or parent rid) equals it; borrowed, must outlive the pairer */
    size_t max_open;         /* 0 = unlimited; else the oldest open record is emitted
                                (unpaired) when more are open */
    uint64_t vllm_max_log_len; /* 0 = unknown; vLLM prompts of at least this many chars get
                                  LD_TEXT_HEAD_ONLY */
    uint32_t json_trunc_half; /* JSON-mode truncation half length; 0 = 1024 (level 2) */
    size_t max_record_bytes;  /* arena cap per record; 0 = unlimited */
} ld_pair_options;

/* Return LD_PAIR_TAKE from the callback to keep the record. */
#define LD_PAIR_TAKE 1

/* Called once per finished record, in emission order.  Return 0 (pairer
 * frees the record) or LD_PAIR_TAKE.  Must not call back into the pairer. */
typedef int (*ld_pair_emit_fn)(void *ctx, ld_request *req);

typedef struct ld_pair_stats {
    uint64_t lines;          /* every line fed */
    uint64_t request_lines;  /* recognised and parsed request lines */
    uint64_t skipped;        /* not request lines */
    uint64_t errors;         /* request lines that failed to parse */
    uint64_t health_checks;  /* HEALTH_CHECK_* requests: their Receive (or legacy in/out)
                                lines, not their Finish lines (all in request_lines) */
    uint64_t emitted;        /* records handed to the callback (errors included) */
    uint64_t open;           /* records currently open */
    uint64_t max_open_seen;  /* high-water mark of `open` */
    uint64_t cut_lines;      /* request lines cut for good, read up to their last whole field
                                (also in request_lines) */
    /* prefill/decode disaggregation (pair_pd.c): records of SGLang's PD router */
    uint64_t pd_joined;      /* requests whose prefill and decode records became one */
    uint64_t pd_by_rid;      /* of those, joined where both servers logged one rid */
    uint64_t pd_differ;      /* of those, the two servers logged different messages,
                                prompts or input ids */
    uint64_t pd_alone;       /* records whose other server's record was not found */
    /* invariant: lines == request_lines + skipped + errors */
} ld_pair_stats;

/* Result of one line. */
typedef enum ld_line_result {
    LD_LINE_PARSED = 0,   /* request line, merged */
    LD_LINE_SKIPPED = 1,  /* not a request line */
    LD_LINE_ERROR = 2     /* request line that failed to parse; see err */
} ld_line_result;

typedef struct ld_pairer ld_pairer;

/* Creates a pairer.  `opts` is copied (only_rid stays borrowed); NULL = all
 * defaults (counts only).  Returns LD_ERR_NOMEM on failure. */
ld_status ld_pairer_new(const ld_pair_options *opts, ld_pair_emit_fn emit,
                        void *ctx, ld_pairer **out, ld_error *err);

/* Feeds one line of member `member_name` (borrowed for the call only).
 * *out_result says what the line was.  Returns LD_OK for parsed and skipped
 * lines; for a bad request line returns the parse status (LD_ERR_SYNTAX,
 * LD_ERR_TRUNCATED, LD_ERR_LIMIT) with err->path = member_name (borrowed!),
 * err->line, err->offset = line->offset + offset inside the line, and the
 * reason; the pairer stays usable.  LD_ERR_NOMEM is fatal for the record but
 * not for the pairer.  May call the callback. */
ld_status ld_pairer_feed_line(ld_pairer *p, const char *member_name,
                              const ld_line *line, ld_line_result *out_result,
                              ld_error *err);

/* Emits every open record (unpaired, with `missing` set) and any held
 * `Receive OpenAI` line without a Receive (as an OpenAI-only record).  The
 * pairer may be fed again afterwards. */
ld_status ld_pairer_finish(ld_pairer *p, ld_error *err);

/* Watching a log as it is written (logdiff watch): records wait for their
 * Finish line, but not forever.  The caller keeps a clock of its own (any
 * unit that only grows, e.g. seconds): ld_pairer_set_clock() sets the time
 * that records opened from now on are stamped with (open records, held
 * `Receive OpenAI` lines, prefill/decode records waiting for their
 * partner), and ld_pairer_expire() emits every one stamped before `before`
 * as ld_pairer_finish() would (unpaired, `missing` set).  A pairer whose
 * clock is never set stamps 0 and expire(p, 1) is finish() for the records
 * alone.  Returns the number emitted. */
void ld_pairer_set_clock(ld_pairer *p, uint64_t now);
size_t ld_pairer_expire(ld_pairer *p, uint64_t before);

/* Calls fn for every record still waiting: open, held for its
 * prefill/decode partner, or a held `Receive OpenAI` line (what a watcher
 * that stops must read again next time: their src[] say where).  fn must
 * not call back into the pairer. */
void ld_pairer_each_waiting(const ld_pairer *p, void (*fn)(void *ctx, const ld_request *r), void *ctx);

/* Counters so far. */
const ld_pair_stats *ld_pairer_stats(const ld_pairer *p);

/* Frees the pairer and any open records without emitting them.  NULL ok. */
void ld_pairer_free(ld_pairer *p);

#endif /* LD_PAIR_H */
