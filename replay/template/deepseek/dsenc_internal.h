/* dsenc_internal.h - shared pieces of the DeepSeek-V3.2 / V4 prompt encoders
 * (dsenc.h): the conversation after SGLang's request preprocessing
 * (dsenc_prep.c), an append-only text buffer and the writers both formats
 * share (dsenc_text.c), and the two format encoders (dsenc_v32.c,
 * dsenc_v4.c).
 *
 * Ownership: a ds_conv owns an arena holding its message array, flattened
 * contents and block lists, plus `owned` (a cJSON array holding the tool-call
 * arguments it parsed from JSON strings); every other pointer in a ds_msg
 * borrows from the request, which must outlive the ds_conv.
 */
#ifndef LD_DSENC_INTERNAL_H
#define LD_DSENC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "ld_arena.h"
#include "dsenc.h"
#include "ld_error.h"

struct cJSON;

/* Special strings (U+FF5C FULLWIDTH VERTICAL LINE, U+2581 LOWER ONE EIGHTH
 * BLOCK), the same in both formats. */
#define DS_BOS "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_LATEST_REMINDER "<\xef\xbd\x9clatest_reminder\xef\xbd\x9c>"
#define DS_DSML "\xef\xbd\x9c" "DSML\xef\xbd\x9c"
#define DS_THINK "<think>"
#define DS_THINK_END "</think>"

typedef enum ds_role {
    DS_ROLE_SYSTEM,
    DS_ROLE_USER,
    DS_ROLE_ASSISTANT,
    DS_ROLE_TOOL,
    DS_ROLE_DEVELOPER,
    DS_ROLE_LATEST_REMINDER,
    DS_ROLE_FUNCTION /* accepted by SGLang's protocol, refused by both encoders */
} ds_role;

/* One assistant tool call. */
typedef struct ds_call {
    const char *name;          /* NULL = Python None (written "None") */
    const struct cJSON *args;  /* the arguments after SGLang parsed a JSON
                                  string; NULL = None; may be a non-object,
                                  which the encoders refuse */
    const char *id;            /* NULL or "" = no id */
} ds_call;

/* One block of a V4 user turn: text, or a tool result. */
typedef struct ds_block {
    bool is_tool_result;
    const char *text;          /* text, or the tool result content */
    const char *tool_call_id;  /* tool results only; NULL = None */
} ds_block;

typedef struct ds_msg {
    ds_role role;
    int req_index;             /* index in request.messages; -1 for the empty
                                  system message SGLang inserts */
    const char *content;       /* never NULL (None became "") */
    const char *reasoning;     /* reasoning_content; NULL = None */
    const struct cJSON *tools; /* non-empty list of OpenAI tools; NULL = none */
    ds_call *calls;
    size_t n_calls;
    const char *tool_call_id;  /* tool messages; NULL = None */
    const char *task;          /* V4 quick-instruction task; NULL = none */
    ds_block *blocks;          /* V4 merged user turns only */
    size_t n_blocks;
} ds_msg;

/* The request as SGLang hands it to the encoder. */
typedef struct ds_conv {
    ds_msg *msgs;
    size_t n;
    bool thinking;             /* thinking_mode "thinking" (else "chat") */
    bool effort_max;           /* V4: reasoning_effort "max" reaches the encoder */
    const char *prefix;        /* continue_final_message text; NULL = none */
    ld_arena arena;
    struct cJSON *owned;       /* parsed tool-call arguments */
} ds_conv;

/* dsenc_prep.c: SGLang's serving_chat.py steps up to the encoder call.
 * On success the caller releases `c` with ld_dsenc_conv_free (also after errors). */
ld_status ld_dsenc_prepare(const struct cJSON *request, ld_dsenc_variant variant,
                     ds_conv *c, ld_error *err);
void ld_dsenc_conv_free(ds_conv *c);

/* dsenc_text.c: an append-only, NUL-terminated text buffer; an allocation
 * failure sets `failed` and later appends are ignored. */
typedef struct ds_buf {
    char *p;
    size_t len, cap;
    bool failed;
} ds_buf;

void ld_dsenc_put(ds_buf *b, const char *s, size_t n);
void ld_dsenc_puts(ds_buf *b, const char *s);
/* Python json.dumps(v, ensure_ascii=False) of `j`. */
ld_status ld_dsenc_put_json(ds_buf *b, const struct cJSON *j, ld_error *err);
/* json.dumps of tool["function"] as SGLang's Tool.model_dump() gives it. */
ld_status ld_dsenc_put_tool_schema(ds_buf *b, const struct cJSON *tool, ld_error *err);
/* One json.dumps line per tool, joined by "\n". */
ld_status ld_dsenc_put_tool_schemas(ds_buf *b, const struct cJSON *tools, ld_error *err);
/* The tools section of message m, when it has tools: "\n\n", `head`, one
 * schema line per tool, `tail`. */
ld_status ld_dsenc_put_tools_section(ds_buf *b, const ds_msg *m, const char *head, const char *tail,
                               ld_error *err);
/* "\n\n<｜DSML｜BLOCK>\n<invoke>...\n</｜DSML｜BLOCK>" for the calls of `m`;
 * refuses arguments that are not an object. */
ld_status ld_dsenc_put_tool_calls(ds_buf *b, const ds_msg *m, const char *block,
                            ld_error *err);
/* Python truthiness of a JSON value (NULL = absent = False). */
bool ld_dsenc_truthy(const struct cJSON *j);

/* dsenc_v32.c / dsenc_v4.c: the encoders (encode_messages). */
ld_status ld_dsenc_encode_v32(const ds_conv *c, int add_generation_prompt, ds_buf *out,
                        ld_error *err);
ld_status ld_dsenc_encode_v4(const ds_conv *c, int add_generation_prompt, ds_buf *out,
                       ld_error *err);

#endif
