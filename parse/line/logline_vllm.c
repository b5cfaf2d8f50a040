/* logline_vllm.c - vLLM request-log lines of every era (log-formats.md 7):
 *   Received request ID: prompt: %r, params: %s, prompt_token_ids: %s, ...
 *   Received request ID: prompt: %r, prefix_pos: %s,sampling params: %s, prompt token ids: %s, ...
 *   Received request ID: params: %s, lora_request: %s.
 *   Request ID details: prompt: %r, prompt_token_ids: %s, prompt_embeds shape: %s.
 *   Generated response ID[ (streaming ...)]: output: %r, output_token_ids: %s, finish_reason: %s
 * The payload is a sequence of `label: value` items; values are Python
 * literals read with ld_pylit_parse, the labels after the ones we need are
 * not parsed (their values are free text such as `None.`). */
#include <string.h>

#include "logline.h"

static int is_label_char(char c)
{
    return c == '_' || c == ' ' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Reads the request id (up to ':' or " (streaming"), leaves *pos after ": ". */
static ld_status read_rid(const char *d, size_t len, size_t *pos, ld_logline *out,
                          ld_error *err)
{
    size_t i = *pos, b = i;
    while (i < len && d[i] != ':' && d[i] != ' ') i++;
    if (i == b) return LD_FAIL(err, LD_ERR_SYNTAX, b, "vLLM request line without a request id");
    out->vllm_rid = d + b;
    out->vllm_rid_len = i - b;
    if (i < len && d[i] == ' ') {
        const char *c = memchr(d + i, ':', len - i);
        if (!c || (size_t)(c - (d + i)) > 64)
            return LD_FAIL(err, LD_ERR_SYNTAX, i, "no ':' after the vLLM request id");
        size_t k = (size_t)(c - d);
        for (size_t j = i; j + 5 <= k; j++) {
            if (!memcmp(d + j, "delta", 5)) out->vllm_streaming = 1;
            if (j + 8 <= k && !memcmp(d + j, "complete", 8)) out->vllm_streaming = 2;
        }
        i = k;
    }
    if (i >= len) return LD_FAIL(err, LD_ERR_TRUNCATED, len, "line ends after the vLLM request id");
    i++;
    while (i < len && d[i] == ' ') i++;
    *pos = i;
    return LD_OK;
}

typedef enum { SLOT_NONE, SLOT_PROMPT, SLOT_PARAMS, SLOT_IDS, SLOT_OUTPUT, SLOT_OUT_IDS,
               SLOT_FINISH, SLOT_SKIP, SLOT_STOP } slot;

static slot label_slot(const char *l, size_t n)
{
    static const struct { const char *name; slot s; } tab[] = {
        {"prompt", SLOT_PROMPT}, {"params", SLOT_PARAMS}, {"sampling params", SLOT_PARAMS},
        {"prompt_token_ids", SLOT_IDS}, {"prompt token ids", SLOT_IDS},
        {"output", SLOT_OUTPUT}, {"output_token_ids", SLOT_OUT_IDS},
        {"finish_reason", SLOT_FINISH}, {"prefix_pos", SLOT_SKIP},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strlen(tab[i].name) == n && memcmp(tab[i].name, l, n) == 0) return tab[i].s;
    return SLOT_STOP;
}

static void store(ld_logline *out, slot s, const ld_py_value *v)
{
    switch (s) {
    case SLOT_PROMPT: out->vllm_prompt = v; break;
    case SLOT_PARAMS: out->vllm_params = v; break;
    case SLOT_IDS: out->vllm_prompt_ids = v; break;
    case SLOT_OUTPUT: out->vllm_output = v; break;
    case SLOT_OUT_IDS: out->vllm_output_ids = v; break;
    default: break;
    }
}

/* One `label: value` item at *pos.  Returns 1 to continue, 0 to stop. */
static int item(const char *d, size_t len, size_t *pos, ld_arena *arena,
                ld_logline *out, ld_status *st, ld_error *err)
{
    size_t i = *pos, b = i;
    while (i < len && is_label_char(d[i])) i++;
    if (i + 1 >= len || d[i] != ':' || d[i + 1] != ' ') return 0;
    slot s = label_slot(d + b, i - b);
    if (s == SLOT_STOP) return 0;
    i += 2;
    if (s == SLOT_FINISH) { /* free text up to the end of the line */
        out->vllm_finish = d + i;
        out->vllm_finish_len = len - i;
        return 0;
    }
    ld_py_value *v = NULL;
    size_t end = 0;
    *st = ld_pylit_parse(d + i, len - i, 0, NULL, arena, &v, &end, err);
    if (*st != LD_OK) {
        if (err) {
            err->offset += i;
            ld_logline_rebase_msg(err, i);
        }
        return 0;
    }
    store(out, s, v);
    i += end;
    if (i < len && d[i] == ',') i++;
    else return 0;
    while (i < len && d[i] == ' ') i++;
    *pos = i;
    return 1;
}

ld_status ld_logline_parse_vllm(const char *data, size_t len, ld_arena *arena,
                                ld_logline *out, ld_error *err)
{
    size_t pos = out->body_off;
    LD_TRY(read_rid(data, len, &pos, out, err));
    ld_status st = LD_OK;
    while (item(data, len, &pos, arena, out, &st, err)) {
    }
    if (st != LD_OK) return st;
    if (out->kind == LD_LOGLINE_VLLM_GENERATED && !out->vllm_output && !out->vllm_output_ids)
        return LD_FAIL(err, LD_ERR_SYNTAX, pos, "vLLM response line without 'output:'");
    if (out->kind != LD_LOGLINE_VLLM_GENERATED && !out->vllm_params && !out->vllm_prompt &&
        !out->vllm_prompt_ids)
        return LD_FAIL(err, LD_ERR_SYNTAX, pos, "vLLM request line without 'prompt:' or 'params:'");
    return LD_OK;
}
