/* baseline.h - the verdicts of a set of logged requests, kept in a file
 * that a CI job compares the next week's logs with (`logdiff regress`).
 *
 * The file is JSON, stable and reviewable: one request per line, sorted by
 * rid (then by occurrence, for a rid seen more than once), each with its
 * verdict, its error and info finding kinds (sorted, distinct) and a hash of
 * its content (ld_baseline_request_hash), so that a reviewer of a baseline
 * change sees exactly which requests changed and how:
 *
 *   {"format": "logdiff-regress-baseline", "version": 1, "requests": [
 *   {"rid": "a", "verdict": "ok", "errors": [], "info": [], "hash": "0f3c..."},
 *   ...
 *   ]}
 *
 * A rid that is not valid UTF-8 is written as "rid_hex" (its bytes in hex)
 * instead of "rid".  "occurrence": N appears for the N-th (N >= 1) repeat of
 * a rid.  The reader checks the format name and version (another version is
 * LD_ERR_UNSUPPORTED, naming both versions), every field (LD_ERR_SYNTAX
 * naming the entry and the field: an unknown verdict or finding kind, a
 * malformed hash, a repeated rid) and accepts entries in any order.
 *
 * Comparison (ld_baseline_compare): a request is REGRESSED when it was ok and
 * is not, or has an error kind it did not have; NEW_FAILING when it is not in
 * the baseline and is not ok; FIXED when it was not ok and is ok; IMPROVED
 * when it lost error kinds and gained none but is still not ok; NEW when it
 * is new and ok; SAME otherwise.  Baseline requests that are not in the run
 * are MISSING.  Regressions are REGRESSED and NEW_FAILING.
 *
 * Ownership: a baseline owns its entries and strings (its arena); kinds and
 * verdicts point at static strings.  Not thread-safe; no global state.
 */
#ifndef LD_BASELINE_H
#define LD_BASELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ld_arena.h"
#include "finding.h"
#include "ld_error.h"
#include "parse/request/request.h"

#define LD_BASELINE_FORMAT "logdiff-regress-baseline"
#define LD_BASELINE_VERSION 1

typedef struct ld_baseline_entry {
    const char *rid;          /* arena; never NULL */
    uint32_t occurrence;      /* 0 for the first request with this rid */
    const char *verdict;      /* static: "ok", "harness", ... */
    const char **errors;      /* static kind strings, sorted, distinct */
    size_t n_errors;
    const char **info;
    size_t n_info;
    uint64_t hash;
    size_t tag;               /* the caller's index (runs); entry index (read) */
} ld_baseline_entry;

typedef struct ld_baseline {
    ld_arena arena;
    ld_baseline_entry *v;
    size_t n, cap;
} ld_baseline;

void ld_baseline_init(ld_baseline *b);
void ld_baseline_free(ld_baseline *b);

/* Adds a request judged in this run: its rid (NULL: a record that is not a
 * request, keyed by `fallback_key`), verdict and findings (kinds copied,
 * sorted, made distinct), content hash and the caller's tag.  Entries must
 * be added in the run's judging order: occurrences count in that order.
 * Errors: LD_ERR_NOMEM, LD_ERR_USAGE (unknown verdict). */
ld_status ld_baseline_add(ld_baseline *b, const char *rid, const char *fallback_key,
                          const char *verdict, const ld_findings *findings,
                          uint64_t hash, size_t tag, ld_error *err);

/* The same, the key's bytes (rid or fallback_key) not copied: the caller
 * keeps them as long as b is used (a run's own copy of each rid: a merge
 * of a million requests keeps one). */
ld_status ld_baseline_add_kept(ld_baseline *b, const char *rid, const char *fallback_key,
                               const char *verdict, const ld_findings *findings,
                               uint64_t hash, size_t tag, ld_error *err);

/* Sorts by (rid bytes, occurrence) and numbers repeated rids: call once
 * after the last ld_baseline_add(). */
void ld_baseline_sort(ld_baseline *b);

/* Writes the file (see above).  LD_ERR_IO when writing failed. */
ld_status ld_baseline_write(const ld_baseline *b, FILE *out, ld_error *err);

/* Reads a baseline file's text (len bytes, no NUL needed) into an
 * initialised, empty baseline (sorted on return).  Errors: LD_ERR_SYNTAX
 * (not JSON, err->line = its line; or a bad field, with the entry number
 * and rid), LD_ERR_UNSUPPORTED (another format or version), LD_ERR_NOMEM. */
ld_status ld_baseline_parse(const char *text, size_t len, ld_baseline *out,
                            ld_error *err);

/* A 64-bit hash (FNV-1a) of what a verdict is judged on: the message array
 * (roles, contents, reasoning, tool calls, tool call ids and names), the
 * templated prompt, the output and the finish reason.  Stable across runs,
 * machines and logdiff versions of the same format version. */
uint64_t ld_baseline_request_hash(const ld_request *r);

/* Length of the valid UTF-8 sequence at s[0..n) (n >= 1): no overlong
 * forms, surrogates or code points past U+10FFFF; 0 when invalid.  (Also
 * what the report writers use to escape arbitrary log bytes.) */
size_t ld_utf8_seq_len(const char *s, size_t n);

typedef enum ld_change {
    LD_CHANGE_SAME = 0,
    LD_CHANGE_REGRESSED,
    LD_CHANGE_NEW_FAILING,
    LD_CHANGE_FIXED,
    LD_CHANGE_IMPROVED,
    LD_CHANGE_NEW
} ld_change;

/* "same", "regressed", "new-failing", "fixed", "improved", "new". */
const char *ld_change_name(ld_change c);

/* 1 for REGRESSED and NEW_FAILING. */
int ld_change_is_regression(ld_change c);

typedef struct ld_baseline_diff {
    size_t n;                          /* cur->n */
    ld_change *change;                 /* [cur->n], parallel to cur->v */
    const ld_baseline_entry **before;  /* [cur->n]: the baseline entry or NULL */
    const char ***new_errors;          /* [cur->n]: error kinds not in the baseline */
    size_t *n_new_errors;              /* [cur->n] */
    size_t *missing;                   /* indices into base->v, in its order */
    size_t n_missing;
    size_t count[LD_CHANGE_NEW + 1];   /* requests per change */
} ld_baseline_diff;

/* Compares a run (sorted) with a baseline (sorted).  *out is owned by the
 * caller: free with ld_baseline_diff_free().  Errors: LD_ERR_NOMEM. */
ld_status ld_baseline_compare(const ld_baseline *base, const ld_baseline *cur,
                              ld_baseline_diff *out, ld_error *err);
void ld_baseline_diff_free(ld_baseline_diff *d);

#endif
