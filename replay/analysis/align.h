/* align.h - align a request's message array with the templated prompt text,
 * without knowing the chat template, and derive findings from it.
 *
 * The design: docs/analysis.md, "Locating each message in the templated prompt". */
#ifndef LD_ALIGN_H
#define LD_ALIGN_H

#include <stddef.h>

#include "ld_arena.h"
#include "finding.h"
#include "ld_error.h"

/* ------------------------------------------------------------------ input */

/* One tool call of an assistant message (borrowed views). */
typedef struct ld_align_tool_call {
    const char *id;            /* NUL-terminated or NULL */
    const char *name;          /* function name */
    size_t name_len;
    const char *arguments;     /* JSON text (see arguments_is_object) */
    size_t arguments_len;
    int arguments_is_object;   /* 1: arguments were a JSON object and this is
                                  its serialisation; 0: a JSON string's value */
} ld_align_tool_call;

/* One message of the request (borrowed views, owned by the caller). */
typedef struct ld_align_msg {
    const char *role;          /* NUL-terminated: system, user, assistant, tool, developer... */
    const char *content;       /* text content (may contain <think>...</think>) */
    size_t content_len;
    int content_present;       /* 0: content absent/null */
    int content_truncated;     /* logger cut: head [0,cut) tail [cut,len), the middle unknown */
    size_t content_cut;
    const char *reasoning;     /* reasoning_content / reasoning field, NULL if none */
    size_t reasoning_len;
    const ld_align_tool_call *tool_calls;
    size_t n_tool_calls;
    const char *tool_call_id;  /* tool messages; NUL-terminated or NULL */
    const char *name;          /* NUL-terminated or NULL */
} ld_align_msg;

/* Optional facts about the prompt bytes (owned by the caller). */
typedef struct ld_align_prompt_info {
    int truncated;             /* the logger cut the prompt: bytes [0,cut) are the
                                  head, [cut,len) the tail, an unknown middle is gone */
    size_t cut;
} ld_align_prompt_info;

/* ----------------------------------------------------------------- output */

typedef enum {
    LD_ALIGN_PART_CONTENT = 0,    /* visible content (after any </think>) */
    LD_ALIGN_PART_REASONING,      /* reasoning field, or <think> text in content */
    LD_ALIGN_PART_TOOL_NAME,      /* tool_calls[tool_index].function.name */
    LD_ALIGN_PART_TOOL_ARGS,      /* tool_calls[tool_index].function.arguments */
    LD_ALIGN_PART_TOOL_RESULT     /* content of a role "tool" message */
} ld_align_part_kind;

typedef enum {
    LD_ALIGN_FOUND = 0,   /* the whole part is in the prompt (maybe normalised) */
    LD_ALIGN_PARTLY,      /* pieces found, the rest altered or missing */
    LD_ALIGN_ABSENT,      /* not in the prompt */
    LD_ALIGN_UNKNOWN      /* cannot tell: a logger cut hides it (log.message_hidden) */
} ld_align_state;

typedef enum {
    LD_ALIGN_HOW_NONE = 0,
    LD_ALIGN_HOW_EXACT,         /* byte for byte (edge whitespace included) */
    LD_ALIGN_HOW_STRIPPED,      /* edge whitespace stripped */
    LD_ALIGN_HOW_ESCAPED,       /* inside a JSON string literal (escaped quotes) */
    LD_ALIGN_HOW_JSON,          /* equal as JSON (spacing, key order) */
    LD_ALIGN_HOW_JSON_ESCAPED,  /* equal as JSON after decoding a JSON string */
    LD_ALIGN_HOW_VALUES,        /* every leaf value printed in order (key/value markup) */
    LD_ALIGN_HOW_CUT,           /* matched on what a logger cut (of the part or of the
                                   prompt) left visible; the rest hidden by it */
    LD_ALIGN_HOW_ANCHORS        /* PARTLY: head/tail anchors matched around a difference */
} ld_align_how;

/* A run of the part's text found verbatim in the prompt. */
typedef struct ld_align_piece {
    size_t text_off;    /* offset in the part's text */
    size_t len;
    size_t prompt_off;
} ld_align_piece;

typedef struct ld_align_part {
    ld_align_part_kind kind;
    size_t tool_index;          /* TOOL_NAME/TOOL_ARGS: index in tool_calls */
    size_t text_off, text_len;  /* the part inside its message field (for CONTENT:
                                   the visible text, before edge stripping) */
    ld_align_state state;
    ld_align_how how;
    size_t start, end;          /* prompt span [start,end), FOUND/PARTLY only */
    size_t first_diff;          /* PARTLY: first differing offset in the part text */
    size_t first_diff_prompt;   /* PARTLY: prompt offset of that difference */
    ld_align_piece pieces[2];   /* PARTLY (ANCHORS): matched head and tail */
    size_t n_pieces;
} ld_align_part;

typedef struct ld_align_msg_result {
    int found;                  /* some part FOUND or PARTLY */
    size_t start, end;          /* span of the found parts, valid when found */
    int in_order;               /* found by the forward search */
    int fallback_skipped;       /* the fallback budget ran out before it */
    ld_align_part *parts;       /* arena */
    size_t n_parts;
} ld_align_msg_result;

/* Finding kinds: the template.* kinds of finding.h (one list of kinds for
 * the whole project; compare by strcmp). */
#define LD_ALIGN_DROPPED_MESSAGE    LD_K_TEMPLATE_DROPPED             /* error */
#define LD_ALIGN_MANGLED_MESSAGE    LD_K_TEMPLATE_MANGLED             /* error */
#define LD_ALIGN_ORDER              LD_K_TEMPLATE_ORDER               /* error */
#define LD_ALIGN_DROPPED_TOOL_CALL  LD_K_TEMPLATE_DROPPED_TOOL_CALL   /* error */
#define LD_ALIGN_REASONING_STRIPPED LD_K_TEMPLATE_REASONING_STRIPPED  /* info */
#define LD_ALIGN_MESSAGE_HIDDEN     LD_K_LOG_MESSAGE_HIDDEN           /* error: the log cannot tell */
#define LD_ALIGN_SEV_ERROR "error"
#define LD_ALIGN_SEV_INFO "info"

typedef struct ld_align_finding {
    const char *kind;           /* LD_ALIGN_* above (static) */
    const char *severity;       /* LD_ALIGN_SEV_* (static) */
    size_t msg_index;
    size_t part_index;          /* index into that message's parts */
    const char *detail;         /* one line, arena */
    size_t text_off;            /* evidence: offset in the part text */
    size_t text_len;
    size_t prompt_off;          /* evidence: prompt offset (search position when absent) */
    size_t prompt_len;
    const char *text_excerpt;   /* <= LD_ALIGN_EXCERPT bytes of the message side, arena, NUL-terminated */
    const char *prompt_excerpt; /* <= LD_ALIGN_EXCERPT bytes of the prompt side, arena, NUL-terminated */
} ld_align_finding;

#define LD_ALIGN_EXCERPT 48
#define LD_ALIGN_FALLBACK_FACTOR 16

typedef struct ld_align_result {
    ld_align_msg_result *msgs;  /* n_msgs entries, parallel to the input */
    size_t n_msgs;
    ld_align_finding *findings; /* in message order */
    size_t n_findings;
    size_t n_errors;            /* findings of severity "error" */
} ld_align_result;

/* Align msgs[0..n) with prompt[0..prompt_len).  info may be NULL.  On LD_OK,
 * *out points to a result in `arena` (see ownership above).  Errors:
 * LD_ERR_USAGE for NULL pointers, LD_ERR_NOMEM when the arena (or malloc for
 * temporaries) fails.  Nothing is printed. */
ld_status ld_align_run(const ld_align_msg *msgs, size_t n, const char *prompt,
                       size_t prompt_len, const ld_align_prompt_info *info,
                       ld_arena *arena, ld_align_result **out, ld_error *err);

/* Static names for printing. */
const char *ld_align_state_name(ld_align_state s);
const char *ld_align_how_name(ld_align_how h);
const char *ld_align_part_kind_name(ld_align_part_kind k);

#endif
