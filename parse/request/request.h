/* request.h - one request reconstructed from request-log lines.
 *
 * An ld_request is built by the pairer (pair.h) from the lines of one
 * request: SGLang `Receive OpenAI:`, `Receive:`, `Finish:` or the legacy
 * `in=..., out=...` line, or vLLM `Received request` / `Request ... details`
 * / `Generated response` lines.  See ../shared/docs/log-formats.md.
 *
 * Ownership: every ld_request owns one arena (`arena`) holding all of its
 * strings, its message array and its value trees; nothing in a record borrows
 * a line buffer.  A record handed to the pairer's callback is freed by the
 * pairer after the callback returns, unless the callback returns
 * LD_PAIR_TAKE (pair.h); then the callback's owner calls ld_request_free().
 * Not thread-safe; a record may be moved to another thread as a whole.
 *
 * Unknown numbers are LD_UNSET_INT (int64) or NAN (double); unknown strings
 * are NULL.
 */
#ifndef LD_REQUEST_H
#define LD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "ld_arena.h"
#include "ld_error.h"
#include "parse/pylit/pylit.h"

#define LD_UNSET_INT INT64_MIN

typedef enum ld_engine {
    LD_ENGINE_SGLANG = 0,
    LD_ENGINE_VLLM = 1
} ld_engine;

/* "sglang" / "vllm" */
const char *ld_engine_name(ld_engine e);

/* The lines a request can be made of. */
typedef enum ld_part {
    LD_PART_OPENAI = 0,      /* SGLang `Receive OpenAI: obj={...}` (no rid)   */
    LD_PART_RECEIVE = 1,     /* SGLang `Receive: obj=...` / request.received  */
    LD_PART_FINISH = 2,      /* SGLang `Finish: obj=..., out=...`             */
    LD_PART_INOUT = 3,       /* SGLang legacy `in=..., out=...` (complete)    */
    LD_PART_VLLM_RECEIVED = 4,  /* vLLM `Received request ID: ...`            */
    LD_PART_VLLM_DETAILS = 5,   /* vLLM `Request ID details: prompt: ...`     */
    LD_PART_VLLM_GENERATED = 6, /* vLLM `Generated response ID: output: ...`  */
    LD_PART_COUNT = 7
} ld_part;

#define LD_PART_BIT(p) (1u << (p))

/* Short stable name of a part: "openai", "receive", "finish", "inout",
 * "vllm_received", "vllm_details", "vllm_generated". */
const char *ld_part_name(ld_part p);

/* Where a part came from. */
typedef struct ld_source {
    const char *member;  /* file / archive member name; owned by the record's arena */
    uint64_t line;       /* 1-based line within the member; 0 = part not seen */
    uint64_t offset;     /* byte offset of the line's first byte in the member */
    uint64_t lost_bytes; /* bytes its capture lost inside the line (ld_line.lost_bytes) */
    uint64_t cut_at;     /* the line was cut for good and read up to its last whole field:
                            the bytes it kept (ld_logline.cut_at); 0 for a whole line */
    const char *cut_field; /* the start of what the cut took (a field's name), in the arena */
} ld_source;

/* ld_text.flags */
#define LD_TEXT_PRESENT 0x01u     /* the log shows this text (maybe cut) */
#define LD_TEXT_TRUNCATED 0x02u   /* logger kept head + tail; middle removed at `cut` */
#define LD_TEXT_ABBREVIATED 0x04u /* logger printed <key: N chars, blake2b=...>; n_chars = N */
#define LD_TEXT_HEAD_ONLY 0x08u   /* may be cut at the end without marker (vLLM --max-log-len):
                                     set when n_chars >= ld_pair_options.vllm_max_log_len */
#define LD_TEXT_NOT_KEPT 0x10u    /* present, counted, but bytes not kept (see LD_PAIR_KEEP_TEXT) */
#define LD_TEXT_PARTS 0x20u       /* message content was a list of parts; text parts joined */
#define LD_TEXT_SKIPPED 0x40u     /* field left out by the log level (levels 0/1) */
#define LD_TEXT_NONE 0x80u        /* the field is there and is None (e.g. text=None) */

/* A text field.  Owned by the request's arena. */
typedef struct ld_text {
    const char *bytes;  /* decoded UTF-8 (lone surrogates as WTF-8), NUL-terminated;
                           NULL when absent or not kept.  TRUNCATED: head bytes then
                           tail bytes, joined at `cut` with nothing in between */
    size_t len;         /* byte length of `bytes` (0 when NULL) */
    size_t cut;         /* TRUNCATED: byte offset in `bytes` where the middle is missing */
    uint64_t n_chars;   /* Python len(): code points shown (head + tail when TRUNCATED,
                           a lower bound); ABBREVIATED: the original count N */
    unsigned flags;     /* LD_TEXT_* */
} ld_text;

/* ld_tool_call.flags */
#define LD_TOOL_ARGS_OBJECT 0x01u /* `arguments` was an object (dict) in the log, not a JSON
                                     string: `arguments` holds its JSON serialisation as
                                     Python's json.dumps(v, ensure_ascii=False) prints it
                                     (", " and ": " separators, keys in log order) */

/* One tool call of an assistant message: `tool_calls[i]` as
 * {"id", "type", "function": {"name", "arguments"}} (a flat {"id", "name",
 * "arguments"} is accepted too).  Owned by the request's arena; kept only with
 * LD_PAIR_KEEP_TEXT (like the other texts). */
typedef struct ld_tool_call {
    const char *id;            /* NULL if absent */
    const char *name;          /* function name; NULL if absent */
    ld_text arguments;         /* a JSON string's decoded value as given, or the serialisation
                                  of an object (LD_TOOL_ARGS_OBJECT); LD_TEXT_TRUNCATED when the
                                  logger cut a string (for an object: `cut` is where the first
                                  cut string's middle is missing), LD_TEXT_NONE for null,
                                  flags 0 when absent */
    unsigned flags;            /* LD_TOOL_* */
} ld_tool_call;

/* One chat message (from Receive OpenAI `messages`, or a batch text=[[{...}]]). */
typedef struct ld_message {
    const char *role;          /* owned by the record; NULL if absent */
    ld_text content;           /* string content, or the text parts of a list joined by " " (LD_TEXT_PARTS) */
    ld_text reasoning_content;
    uint32_t n_tool_calls;     /* elements of `tool_calls` (always counted) */
    const char *tool_call_id;  /* NULL if absent */
    const char *name;          /* NULL if absent */
    ld_tool_call *tool_calls;  /* [n_tool_calls] with LD_PAIR_KEEP_TEXT; NULL otherwise
                                  (or when n_tool_calls is 0) */
} ld_message;

/* ld_request.flags */
#define LD_REQ_TRUNCATED 0x0001u   /* some field truncated/abbreviated/skipped by the logger */
#define LD_REQ_UNPAIRED 0x0002u    /* a part is missing: see `missing` */
#define LD_REQ_AMBIGUOUS 0x0004u   /* OpenAI join doubtful: content check failed or
                                      several OpenAI lines before one Receive */
#define LD_REQ_UNCONFIRMED 0x0008u /* OpenAI joined by order only; no prompt text to check */
#define LD_REQ_INTERNAL 0x0010u    /* rid starts with HEALTH_CHECK_ (counted, never emitted) */
#define LD_REQ_ERROR 0x0020u       /* not a request: a request line failed to parse (`error`) */
#define LD_REQ_BATCH 0x0040u       /* one sub-request of a batch / n>1 Receive line */
#define LD_REQ_SKIPPED_FIELDS 0x0080u /* level 0/1: text/input_ids/... left out */
#define LD_REQ_JSON 0x0100u        /* came from JSON-mode lines */
#define LD_REQ_DUPLICATE 0x0200u   /* a second line of the same part and rid was merged in */
#define LD_REQ_IDS_HEAD_ONLY 0x0400u /* vLLM prompt_token_ids of at least --max-log-len ids
                                        (ld_pair_options.vllm_max_log_len): maybe cut */
#define LD_REQ_CAPTURE_LOSS 0x0800u /* a line's capture lost bytes inside it (src[].lost_bytes) */
#define LD_REQ_CAPTURE_CUT 0x1000u  /* a line was cut for good, read up to the cut (src[].cut_at) */

/* ld_request.pd: one request served by two servers under SGLang's
 * prefill/decode disaggregation (docs/formats.md, "Prefill and decode
 * servers").  Set only on records whose lines carry a bootstrap room. */
#define LD_PD_JOINED 0x001u        /* `peer` holds the prefill server's record; this is the
                                      decode server's (its output is the answer) */
#define LD_PD_BY_RID 0x002u        /* both servers logged the same (client's) rid */
#define LD_PD_ROLES_GUESSED 0x004u /* neither record ends as a prefill server's does (one
                                      token, finish length 0): the shorter output was taken
                                      for the prefill's */
#define LD_PD_ALONE 0x008u         /* the other server's record is not in the logs read */
#define LD_PD_PREFILL 0x010u       /* this record ends as a prefill server's does */
#define LD_PD_DIFF_MESSAGES 0x100u /* the two servers logged different message arrays */
#define LD_PD_DIFF_PROMPT 0x200u   /* ... different templated prompts */
#define LD_PD_DIFF_IDS 0x400u      /* ... different input ids */
#define LD_PD_DIFF (LD_PD_DIFF_MESSAGES | LD_PD_DIFF_PROMPT | LD_PD_DIFF_IDS)

/* ld_request.digest[]: fingerprints of values as logged (request_digest.c) */
typedef enum ld_digest_kind {
    LD_DIGEST_MESSAGES = 0,  /* the OpenAI payload's `messages` */
    LD_DIGEST_PROMPT = 1,    /* the templated prompt (`text`) */
    LD_DIGEST_INPUT_IDS = 2, /* `input_ids` */
    LD_DIGEST_COUNT = 3
} ld_digest_kind;

typedef enum ld_finish_kind {
    LD_FINISH_UNKNOWN = 0, /* no finish reason seen */
    LD_FINISH_STOP,
    LD_FINISH_LENGTH,
    LD_FINISH_ABORT,
    LD_FINISH_OTHER        /* some other type string; see finish_type */
} ld_finish_kind;

typedef struct ld_request {
    ld_arena arena;          /* owns everything below */

    /* identity */
    const char *rid;         /* NULL only for LD_REQ_ERROR records and OpenAI-only records;
                                a line without any rid gets "<no rid>@LINE" */
    const char *parent_rid;  /* batch / n>1: the rid of the Receive line (list element's
                                parent or the unexpanded string); NULL otherwise */
    int32_t sub_index;       /* index within a batch / n>1 fan-out; -1 when single */
    const char *timestamp;   /* text of the earliest line's prefix or JSON timestamp; NULL if none */
    ld_engine engine;

    /* parts */
    unsigned seen;           /* LD_PART_BIT(...) of parts seen */
    unsigned missing;        /* LD_PART_BIT(...) of parts expected but not seen */
    ld_source src[LD_PART_COUNT];
    unsigned flags;          /* LD_REQ_* */
    ld_error error;          /* LD_REQ_ERROR: what failed, with path/line/offset */

    /* request fields */
    const char *model;       /* OpenAI `model`; NULL if unknown */
    ld_message *messages;    /* [n_messages] */
    int64_t n_messages;      /* -1 when no message array is known */
    int64_t n_tools;         /* OpenAI `tools` count; -1 unknown */
    const ld_py_value *chat_template_kwargs; /* OpenAI value (owned copy); NULL if absent */
    double temperature, top_p;               /* NAN if unknown */
    int64_t top_k, max_tokens, n;            /* LD_UNSET_INT if unknown;
                                                max_tokens = max_new_tokens / max_tokens */
    int stream;                              /* -1 unknown, 0, 1 */

    ld_text prompt;          /* templated prompt: Finish/Receive `text=`, vLLM `prompt:` */
    int64_t n_input_ids;     /* length of input_ids / prompt_token_ids; -1 unknown
                                (a truncated list: head + tail shown) */
    ld_text output;          /* out['text'] / vLLM `output:` */
    int64_t n_output_ids;    /* -1 unknown */

    /* outcome (out['meta_info']) */
    ld_finish_kind finish_kind;
    const char *finish_type;    /* as logged ("stop", "length", "abort", vLLM's word); NULL */
    const char *finish_matched; /* stop: matched token id (decimal) or string; NULL */
    int64_t finish_length;      /* length: N; LD_UNSET_INT otherwise */
    const char *finish_message; /* abort: message; NULL */
    int64_t prompt_tokens, completion_tokens, cached_tokens; /* LD_UNSET_INT if unknown */
    double e2e_latency;         /* seconds; NAN if unknown */

    /* parsed values (owned deep copies), only with LD_PAIR_KEEP_VALUES (and the
     * only_rid filter, when set, matching); NULL otherwise */
    const ld_py_value *openai_obj;  /* Receive OpenAI obj (dict) */
    const ld_py_value *receive_obj; /* Receive obj (call or JSON dict) */
    const ld_py_value *finish_obj;  /* Finish / in= obj */
    const ld_py_value *out;         /* Finish out dict */
    const ld_py_value *vllm_prompt_ids; /* vLLM prompt_token_ids list */
    const ld_py_value *vllm_output_ids; /* vLLM output_token_ids of the complete (not
                                           streaming delta) response line */

    /* prefill/decode disaggregation (LD_PD_*) */
    const char *bootstrap_host; /* the PD router's bootstrap_host; NULL if absent */
    int64_t bootstrap_room;     /* the room both servers share; LD_UNSET_INT if absent */
    uint64_t digest[LD_DIGEST_COUNT]; /* of a record with a bootstrap room only; 0 = not logged */
    unsigned digest_marked;     /* bit k: value k held a logger marker (cut or abbreviated) */
    unsigned pd;                /* LD_PD_* */
    struct ld_request *peer;    /* LD_PD_JOINED: the prefill server's record, owned (freed
                                   with this one); its own peer is NULL */
} ld_request;

/* 1 when the record came through SGLang's PD router: a bootstrap room and
 * a real bootstrap host (warm-up and health requests use the fake host
 * 2.2.2.2 on every server: never one request). */
int ld_request_pd_routed(const ld_request *r);

/* 1 when the record ends as a prefill server's does: finish `length` with
 * length 0 (its scheduler stops after the first token). */
int ld_request_pd_prefill_end(const ld_request *r);

/* The prompt's token ids as logged: `input_ids` of the Finish obj, else of
 * the Receive obj (the record's sub-request for a batch), else vLLM's
 * prompt_token_ids; needs the values (LD_PAIR_KEEP_VALUES).  *ids is
 * malloc'd (caller frees), *n ids.  Errors: LD_ERR_MISMATCH when the record
 * holds no id list, LD_ERR_TRUNCATED when the logger cut the list (SGLang's
 * marker, or vLLM ids as many as --max-log-len: LD_REQ_IDS_HEAD_ONLY),
 * LD_ERR_SYNTAX for an item that is not an id, LD_ERR_NOMEM. */
ld_status ld_request_input_ids(const ld_request *r, int32_t **ids, size_t *n, ld_error *err);

/* The output's token ids as logged: `output_ids` of the Finish out dict
 * (the record's sub-request for a batch), else vLLM's output_token_ids of
 * the complete response line (streaming deltas hold a piece); needs the values
 * (LD_PAIR_KEEP_VALUES).  Same contract as ld_request_input_ids: *ids is
 * malloc'd (caller frees), *n ids; LD_ERR_MISMATCH when the record holds no
 * id list (no Finish line, or a log level that leaves output_ids out),
 * LD_ERR_TRUNCATED when the logger cut the list, LD_ERR_SYNTAX for an item
 * that is not an id, LD_ERR_NOMEM. */
ld_status ld_request_output_ids(const ld_request *r, int32_t **ids, size_t *n, ld_error *err);

/* ld_request_output_ids, but of a list the logger cut (head ... tail) the
 * head, the ids from the first on: what a replay can still teacher-force. */
ld_status ld_request_output_ids_head(const ld_request *r, int32_t **ids, size_t *n, ld_error *err);

/* Frees the record and everything it owns.  NULL allowed. */
void ld_request_free(ld_request *r);

/* Deep copy of a value tree into `arena`, strings included (so it no longer
 * borrows the parsed buffer).  NULL on out of memory. */
ld_py_value *ld_py_value_clone(ld_arena *arena, const ld_py_value *v);

#endif /* LD_REQUEST_H */
