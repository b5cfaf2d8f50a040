/* logline.h - recognise one request-log line and parse its payload.
 *
 * Kinds: SGLang text lines (`Receive OpenAI: obj=`, `Receive: obj=`,
 * `Finish: obj=...`, legacy `in=..., out=...`) with an optional
 * `[date time(.ms)( TPn ...)] ` prefix and log-shipper text before it; SGLang
 * JSON lines (`{"timestamp": ..., "event": "request...."}`); vLLM
 * `Received request`, `Request ... details:` and `Generated response` lines.
 * Everything else is LD_LOGLINE_OTHER.
 *
 * Recognition looks for the marker with memmem in the first
 * LD_LOGLINE_MARKER_WINDOW bytes before running any regex (on the short
 * prefix only), so non-request lines cost little whatever their length.
 *
 * Ownership: ld_logline's values live in the caller's arena and borrow the
 * line buffer (JSON lines: strings are copied into the arena).  Valid while
 * both are.  Thread safety: the compiled regexes are created once on first
 * use (not thread-safe at that moment; call ld_logline_init() first when
 * using several threads).
 */
#ifndef LD_LOGLINE_H
#define LD_LOGLINE_H

#include <stddef.h>
#include <stdint.h>

#include "ld_arena.h"
#include "ld_error.h"
#include "parse/pylit/pylit.h"

#define LD_LOGLINE_MARKER_WINDOW 1024

typedef enum ld_logline_kind {
    LD_LOGLINE_OTHER = 0,
    LD_LOGLINE_SG_OPENAI,     /* Receive OpenAI: obj={...} / request.received.openai */
    LD_LOGLINE_SG_RECEIVE,    /* Receive: obj=... / request.received */
    LD_LOGLINE_SG_FINISH,     /* Finish: obj=..., out=... / request.finished */
    LD_LOGLINE_SG_INOUT,      /* in=..., out=... */
    LD_LOGLINE_VLLM_RECEIVED, /* Received request ID: ... */
    LD_LOGLINE_VLLM_DETAILS,  /* Request ID details: prompt: ... */
    LD_LOGLINE_VLLM_GENERATED, /* Generated response ID...: output: ... */
    LD_LOGLINE_FRAGMENT       /* no marker, but the line starts inside a request record
                                 (`..., name=value, name=value`): its beginning is missing;
                                 ld_logline_parse always fails on it */
} ld_logline_kind;

typedef struct ld_logline {
    ld_logline_kind kind;
    int json;                  /* 1 for an SGLang JSON-mode line */
    const char *ts;            /* timestamp text (borrowed or arena); NULL if none */
    size_t ts_len;
    size_t body_off;           /* offset in the line where the parsed payload starts */
    const char *body;          /* the buffer the payload was parsed from (SGLang text lines):
                                  its values' offsets (ld_py_value.off) count from here;
                                  borrowed, NULL for other lines */

    /* SGLang (text and JSON) */
    const ld_py_value *rid;    /* JSON: top-level "rid"; NULL in text mode (inside obj) */
    const ld_py_value *obj;    /* CALL (text) or DICT (JSON / OpenAI); in= value for INOUT */
    const ld_py_value *headers;/* DICT or NULL */
    const ld_py_value *out;    /* DICT or NULL */

    /* vLLM */
    const char *vllm_rid;      /* borrowed */
    size_t vllm_rid_len;
    const ld_py_value *vllm_prompt;    /* STR, NONE or NULL (not logged) */
    const ld_py_value *vllm_params;    /* CALL SamplingParams(...) or NULL */
    const ld_py_value *vllm_prompt_ids;/* LIST, NONE or NULL */
    const ld_py_value *vllm_output;    /* STR or NULL */
    const ld_py_value *vllm_output_ids;/* LIST or NULL */
    int vllm_streaming;        /* Generated: 0 plain, 1 "(streaming delta)", 2 "(streaming complete)" */
    const char *vllm_finish;   /* borrowed finish_reason word; NULL */
    size_t vllm_finish_len;

    /* a line cut for good, read up to its last whole field (ld_logline_parse_cut) */
    size_t cut_at;             /* the bytes the line kept; 0 for a whole line */
    const char *cut_field;     /* what followed the last whole field (borrowed) */
    size_t cut_field_len;
} ld_logline;

/* In the pylit flags of ld_logline_parse_ex: a legacy `in=` line may lack
 * its `out=` (it was cut away); logline's own bit, never passed to pylit. */
#define LD_LOGLINE_CUT_OK (1u << 31)

/* Compiles the prefix regexes (idempotent).  LD_ERR_NOMEM on failure. */
ld_status ld_logline_init(ld_error *err);

/* Recognises the line's kind without parsing the payload; sets out->kind,
 * ts and body_off (everything else zero).  Never fails. */
void ld_logline_classify(const char *data, size_t len, ld_logline *out);

/* Classifies and parses.  Returns LD_OK (out->kind may be OTHER) or a parse
 * error with err->offset = byte offset within the line and err->msg the
 * reason (e.g. "line ends inside a string literal started at byte N").
 * JSON truncation is detected with half length `json_half` (0 = 1024). */
ld_status ld_logline_parse(const char *data, size_t len, uint32_t json_half,
                           ld_arena *arena, ld_logline *out, ld_error *err);

/* The same, with `pylit_flags` (LD_PYLIT_SKIM_INT_LISTS when the caller
 * needs only the counts of token-id lists) for SGLang text and JSON lines. */
ld_status ld_logline_parse_ex(const char *data, size_t len, uint32_t json_half,
                              unsigned pylit_flags, ld_arena *arena,
                              ld_logline *out, ld_error *err);

/* Internal helpers shared by the logline_*.c files. */
ld_status ld_logline_parse_json(const char *data, size_t len, size_t start,
                                uint32_t json_half, unsigned pylit_flags, ld_arena *arena,
                                ld_logline *out, ld_error *err);
void ld_logline_rebase_msg(ld_error *err, size_t off);
ld_status ld_logline_parse_vllm(const char *data, size_t len, ld_arena *arena,
                                ld_logline *out, ld_error *err);

/* An SGLang text request line cut for good (its payload ends inside the
 * record's literal: ld_logline_parse_ex failed with LD_ERR_TRUNCATED at its
 * end): parsed up to its last whole field, out->cut_at set.  The values
 * live in `arena`.  LD_ERR_TRUNCATED when nothing whole came before the cut,
 * or the line is not one this reads. */
ld_status ld_logline_parse_cut(const char *data, size_t len, unsigned pylit_flags, ld_arena *arena,
                               ld_logline *out, ld_error *err);

#endif /* LD_LOGLINE_H */
