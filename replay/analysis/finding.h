/* finding.h - what `logdiff diff` reports about a request: findings with a
 * stable kind, a severity and the evidence, and the verdict they add up to.
 *
 * Kinds are stable strings (scripts match on them); the category is the part
 * before the dot.  The verdict of a request is "ok" when no finding is an
 * error, otherwise the category of its first error finding in the order
 * harness, template, kernels, sampling, log (ld_verdict_of).
 *
 * Ownership: an ld_findings list and every string of its findings live in
 * the arena given to ld_findings_add(); nothing is freed on its own.
 * Not thread-safe; no global state.
 */
#ifndef LD_FINDING_H
#define LD_FINDING_H

#include <stddef.h>
#include <stdint.h>

#include "ld_arena.h"
#include "ld_error.h"

/* The kinds (issue "logdiff diff"). */
#define LD_K_HARNESS_EMPTY_ASSISTANT "harness.empty_assistant"
#define LD_K_HARNESS_STALE_ASSISTANT "harness.stale_assistant"
#define LD_K_HARNESS_ORPHAN_TOOL "harness.orphan_tool"
#define LD_K_TEMPLATE_DROPPED "template.dropped_message"
#define LD_K_TEMPLATE_MANGLED "template.mangled_message"
#define LD_K_TEMPLATE_ORDER "template.order"
#define LD_K_TEMPLATE_DROPPED_TOOL_CALL "template.dropped_tool_call"
#define LD_K_TEMPLATE_REASONING_STRIPPED "template.reasoning_stripped"
#define LD_K_TEMPLATE_FAITHFUL "template.faithful"
#define LD_K_TEMPLATE_RENDER_MISMATCH "template.render_mismatch"
#define LD_K_TEMPLATE_NOT_RENDERED "template.not_rendered"
#define LD_K_TEMPLATE_TOKENS_FAITHFUL "template.tokens_faithful"
#define LD_K_TEMPLATE_TOKEN_MISMATCH "template.token_mismatch"
#define LD_K_TEMPLATE_TOKENS_NOT_CHECKED "template.tokens_not_checked"
#define LD_K_TEMPLATE_SERVERS_DIFFER "template.servers_differ"
#define LD_K_LOG_TRUNCATED "log.truncated"
#define LD_K_LOG_UNPAIRED "log.unpaired"
#define LD_K_LOG_PARSE_ERROR "log.parse_error"
#define LD_K_LOG_CAPTURE_LOSS "log.capture_loss"
#define LD_K_LOG_CAPTURE_CUT "log.capture_cut"
#define LD_K_LOG_MESSAGE_HIDDEN "log.message_hidden"
#define LD_K_LOG_NO_MESSAGES "log.no_messages"
#define LD_K_SAMPLING_REPETITION "sampling.repetition"
#define LD_K_KERNELS_DIVERGENCE "kernels.divergence"
#define LD_K_KERNELS_CONSISTENT "kernels.consistent"
#define LD_K_KERNELS_NOT_REPLAYED "kernels.not_replayed"

typedef enum ld_severity { LD_SEV_INFO = 0, LD_SEV_ERROR = 1 } ld_severity;

#define LD_NO_VALUE INT64_MIN /* an evidence number that does not apply */

typedef struct ld_finding {
    const char *kind;       /* one of LD_K_* (static) */
    ld_severity severity;
    int64_t message;        /* index in the message array; -1 when none */
    const char *detail;     /* one line for people */
    /* evidence; LD_NO_VALUE / NULL when it does not apply */
    int64_t array_offset;   /* byte offset in the message's text */
    int64_t prompt_offset;  /* byte offset in the templated prompt */
    int64_t expected_len;   /* e.g. bytes the server produced / the array holds */
    int64_t actual_len;     /* e.g. bytes the harness sent back / the prompt holds */
    int64_t first_diff;     /* first differing byte offset */
    const char *array_excerpt;  /* short excerpt from the array side */
    const char *prompt_excerpt; /* short excerpt from the prompt / other side */
    const char *related_rid;    /* another request this finding points at */
    const char *unified_diff;   /* a short unified diff of the two sides */
} ld_finding;

typedef struct ld_findings {
    ld_finding *v;
    size_t n, cap;
} ld_findings;

/* Appends a finding of `kind` with every evidence field unset and returns
 * it for the caller to fill (detail formatted printf-style into the arena);
 * NULL on out of memory. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
ld_finding *ld_findings_add(ld_findings *list, ld_arena *arena, const char *kind,
                            ld_severity sev, int64_t message, const char *fmt, ...);

/* A short excerpt of s[off, off+len) for evidence: at most `max_chars`
 * characters around it, "..." where the text goes on, cut at UTF-8
 * boundaries (a character the text itself ends inside, as a token's bytes
 * may, is left out), the text's bytes as they are (reports quote them:
 * cmd/common/quote.h).  Copied into the arena; NULL on out of memory. */
const char *ld_excerpt(ld_arena *arena, const char *s, size_t s_len, size_t off,
                       size_t max_chars);

/* The static kind string (one of LD_K_*) equal to s, or NULL: every kind
 * is listed once, in finding.c, next to the definitions above. */
const char *ld_kind_static(const char *s);

/* The static verdict string ("ok", "harness", ...) equal to s, or NULL. */
const char *ld_verdict_static(const char *s);

/* "harness", "template", ... : the category of a kind (static string). */
const char *ld_kind_category(const char *kind);

/* "ok" or the category of the first error finding, by category rank
 * harness < template < kernels < sampling < log (static string). */
const char *ld_verdict_of(const ld_findings *list);

#endif
