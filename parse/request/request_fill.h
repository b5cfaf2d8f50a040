/* request_fill.h - internal: filling an ld_request from parsed line values.
 * Used by pair.c only; not part of the public API.
 *
 * Every function copies what it keeps into r->arena (so the record never
 * borrows the line) and uses ctx->scratch (reset per line by the caller)
 * for temporary decoding. */
#ifndef LD_REQUEST_FILL_H
#define LD_REQUEST_FILL_H

#include "request.h"

/* The last string decoded on this line (the prompt is decoded for its
 * count and again for the OpenAI join check; decoding once is enough).
 * Lives with the pairer and is cleared with its line arena. */
typedef struct ld_decode_memo {
    const ld_py_value *v;
    const char *s;
    size_t n;
} ld_decode_memo;

typedef struct ld_fill_ctx {
    ld_arena *scratch;          /* per-line temporary memory */
    ld_decode_memo *memo;       /* may be NULL */
    int keep_text;              /* copy texts (else only counts) */
    int keep_values;            /* deep-copy value trees */
    uint64_t vllm_max_log_len;  /* 0 = unknown */
    const char *body;           /* ld_logline.body of the line (for skimmed id lists'
                                   digits); NULL when unknown */
} ld_fill_ctx;

/* New empty record (all fields unknown), arena capped at max_bytes (0 = none). */
ld_request *ld_request_new(size_t max_bytes);

/* Field `name` of a CALL (keyword argument) or DICT; NULL otherwise. */
const ld_py_value *ld_req_get(const ld_py_value *obj, const char *name);

/* Copies a string into the record; NULL on failure or when s is NULL. */
const char *ld_request_strdup(ld_request *r, const char *s, size_t n);

/* Records the source of a part and marks it seen; lost_bytes (the line's
 * ld_line.lost_bytes) > 0 flags the request LD_REQ_CAPTURE_LOSS. */
void ld_request_set_source(ld_request *r, ld_part part, const char *member,
                           uint64_t line, uint64_t offset, uint64_t lost_bytes);

/* Part `part` came from a line cut for good, read up to its last whole
 * field (ld_logline.cut_at, the text after it in field[0..n)): flags the
 * request LD_REQ_CAPTURE_CUT.  Nothing when cut_at is 0. */
void ld_request_set_cut(ld_request *r, ld_part part, uint64_t cut_at, const char *field, size_t n);

/* Number of sub-requests of an SGLang obj (1 for a single request) and the
 * rid of sub-request i (written to *out_rid, a decoded copy in scratch; NULL
 * when the obj has no rid).  *out_expanded = 1 when a string rid was expanded
 * as "{rid}_{i}". */
int ld_request_n_subs(const ld_py_value *obj, const ld_py_value *json_rid);
ld_status ld_request_sub_rid(const ld_fill_ctx *ctx, const ld_py_value *obj,
                             const ld_py_value *json_rid, int n_subs, int i,
                             const char **out_rid, const char **out_parent,
                             ld_error *err);

/* Fields of an SGLang GenerateReqInput (CALL or JSON dict) for sub-request
 * `sub` (-1 when single): prompt text, input ids, sampling, stream. */
ld_status ld_request_fill_obj(ld_request *r, const ld_fill_ctx *ctx,
                              const ld_py_value *obj, int sub, ld_error *err);

/* Fields of an `out=` dict: output text, output ids, meta_info. */
ld_status ld_request_fill_out(ld_request *r, const ld_fill_ctx *ctx,
                              const ld_py_value *out, ld_error *err);

/* Fields of a `Receive OpenAI` payload dict: model, messages, tools, kwargs, sampling. */
ld_status ld_request_fill_openai(ld_request *r, const ld_fill_ctx *ctx,
                                 const ld_py_value *obj, ld_error *err);

/* What ld_request_fill_openai(r, ctx, obj) gives, taken from q, a fresh
 * record that it filled from the same obj with the same context (q_flags:
 * q's flags after that fill): r's own model, sampling and stream kept,
 * messages, tool count and chat_template_kwargs copied.  The Receive
 * OpenAI line is filled once, when it is read, not again for its request. */
ld_status ld_request_copy_openai(ld_request *r, const ld_request *q, unsigned q_flags, ld_error *err);

/* ld_request_copy_openai without the copies, for a q that is freed next:
 * q's arena becomes r's (ld_arena_adopt) and r points at q's fields, so
 * every byte of q's stays valid for as long as r lives.  0, and nothing
 * taken, when r's cap refuses q's memory (then copy). */
int ld_request_move_openai(ld_request *r, ld_request *q, unsigned q_flags);

/* Copies n messages of another record (texts, tool calls) into r as its
 * message array. */
ld_status ld_request_copy_messages(ld_request *r, const ld_message *ms, int64_t n, ld_error *err);

/* Messages from a list of message dicts (also batch text=[[{...}]]). */
ld_status ld_request_fill_messages(ld_request *r, const ld_fill_ctx *ctx,
                                   const ld_py_value *list, ld_error *err);

/* vLLM fields: prompt, params, token ids, output, finish reason. */
struct ld_logline;
ld_status ld_request_fill_vllm(ld_request *r, const ld_fill_ctx *ctx,
                               const struct ld_logline *l, ld_error *err);

/* 1 if the tree holds a logger truncation / abbreviation marker. */
int ld_py_has_marker(const ld_py_value *v);

/* Element `sub` of a list-valued batch field; the value itself when sub < 0
 * or v is not a list; NULL past its end or for a skimmed list. */
const ld_py_value *ld_req_at_sub(const ld_py_value *v, int sub);

/* A record of SGLang's PD router (request_digest.c): the bootstrap host and
 * room of an obj (GenerateReqInput or OpenAI payload, sub-request `sub`),
 * and, when the record is routed (ld_request_pd_routed), the digests of what
 * it holds: the messages of an OpenAI payload (`openai` 1), the prompt and
 * the input ids of a GenerateReqInput. */
ld_status ld_request_fill_pd(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *obj,
                             int sub, int openai, ld_error *err);

/* 1 when obj (sub-request `sub`) names a bootstrap room and a real host. */
int ld_request_obj_pd_routed(const ld_fill_ctx *ctx, const ld_py_value *obj, int sub);

/* Decoded text of a STR value (JSON strings as they are) into scratch. */
ld_status ld_request_decode(const ld_fill_ctx *ctx, const ld_py_value *v,
                            const char **out, size_t *out_len, ld_error *err);

#endif /* LD_REQUEST_FILL_H */
