/* request_json.c - see request_json.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/pylit/pylit_json.h"
#include "request_json.h"

/* ------------------------------------------------------------ bytes */

/* 1 when s[0..len) is valid UTF-8 (no overlong forms, surrogates or code
 * points past U+10FFFF) without NUL bytes: what a cJSON string keeps. */
static int plain_utf8(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        if (c == 0) return 0;
        if (c < 0x80) { i++; continue; }
        size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (!n || c > 0xF4 || n > len - i) return 0;
        for (size_t k = 1; k < n; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        unsigned c1 = s[i + 1];
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
            (c == 0xF4 && c1 >= 0x90))
            return 0;
        i += n;
    }
    return 1;
}

cJSON *ld_json_bytes(const char *s, size_t len)
{
    if (!s) return cJSON_CreateNull();
    if (plain_utf8((const unsigned char *)s, len)) {
        if (s[len] == 0) return cJSON_CreateString(s);
        char *copy = malloc(len + 1);
        if (!copy) return NULL;
        memcpy(copy, s, len);
        copy[len] = 0;
        cJSON *j = cJSON_CreateString(copy);
        free(copy);
        return j;
    }
    static const char digits[] = "0123456789abcdef";
    char *hex = malloc(2 * len + 1);
    if (!hex) return NULL;
    for (size_t i = 0; i < len; i++) {
        hex[2 * i] = digits[(unsigned char)s[i] >> 4];
        hex[2 * i + 1] = digits[(unsigned char)s[i] & 15];
    }
    hex[2 * len] = 0;
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "hex", hex)) { cJSON_Delete(o); o = NULL; }
    free(hex);
    return o;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int hex_get(const char *hex, ld_arena *arena, const char **s, size_t *len)
{
    size_t n = strlen(hex);
    if (n % 2) return -1;
    char *out = ld_arena_alloc(arena, n / 2 + 1);
    if (!out) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (char)(hi << 4 | lo);
    }
    out[n / 2] = 0;
    *s = out;
    *len = n / 2;
    return 0;
}

int ld_json_bytes_get(const cJSON *j, ld_arena *arena, const char **s, size_t *len)
{
    *s = NULL;
    *len = 0;
    if (!j || cJSON_IsNull(j)) return 0;
    if (cJSON_IsString(j)) {
        size_t n = strlen(j->valuestring);
        char *copy = ld_arena_memdup(arena, j->valuestring, n);
        if (!copy) return -1;
        *s = copy;
        *len = n;
        return 0;
    }
    const cJSON *hex = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "hex") : NULL;
    return cJSON_IsString(hex) && j->child == hex && !hex->next ? hex_get(hex->valuestring, arena, s, len) : -1;
}

/* ------------------------------------------------------------ writing */

static void add(cJSON *o, const char *name, cJSON *v, int *ok)
{
    if (!v || !cJSON_AddItemToObject(o, name, v)) {
        cJSON_Delete(v);
        *ok = 0;
    }
}

/* Exact (cJSON's own printer rounds past 15 digits). */
static cJSON *number(uint64_t v)
{
    return ld_json_int(v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* An ld_text: null when absent and unflagged, else {t, f, c, n}. */
static cJSON *text_json(const ld_text *t)
{
    if (!t->bytes && !t->flags && !t->n_chars) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    if (ok) add(o, "t", ld_json_bytes(t->bytes, t->len), &ok);
    if (ok) add(o, "f", number(t->flags), &ok);
    if (ok && t->cut) add(o, "c", number(t->cut), &ok);
    if (ok && t->n_chars) add(o, "n", number(t->n_chars), &ok);
    if (!ok) { cJSON_Delete(o); return NULL; }
    return o;
}

static cJSON *cstr(const char *s)
{
    return ld_json_bytes(s, s ? strlen(s) : 0);
}

static cJSON *tool_call_json(const ld_tool_call *c)
{
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    if (ok) add(o, "id", cstr(c->id), &ok);
    if (ok) add(o, "name", cstr(c->name), &ok);
    if (ok) add(o, "arguments", text_json(&c->arguments), &ok);
    if (ok) add(o, "f", number(c->flags), &ok);
    if (!ok) { cJSON_Delete(o); return NULL; }
    return o;
}

static cJSON *message_json(const ld_message *m)
{
    cJSON *o = cJSON_CreateObject(), *calls = NULL;
    int ok = o != NULL;
    if (ok) add(o, "role", cstr(m->role), &ok);
    if (ok) add(o, "content", text_json(&m->content), &ok);
    if (ok) add(o, "reasoning", text_json(&m->reasoning_content), &ok);
    if (ok) add(o, "tool_call_id", cstr(m->tool_call_id), &ok);
    if (ok) add(o, "name", cstr(m->name), &ok);
    if (ok) add(o, "n_tool_calls", number(m->n_tool_calls), &ok);
    if (ok && m->tool_calls) {
        add(o, "tool_calls", calls = cJSON_CreateArray(), &ok);
        for (uint32_t k = 0; ok && k < m->n_tool_calls; k++)
            if (!cJSON_AddItemToArray(calls, tool_call_json(&m->tool_calls[k]))) ok = 0;
    }
    if (!ok) { cJSON_Delete(o); return NULL; }
    return o;
}

cJSON *ld_request_json(const ld_request *r)
{
    cJSON *o = cJSON_CreateObject(), *msgs = NULL;
    int ok = o != NULL;
    if (ok) add(o, "rid", cstr(r->rid), &ok);
    if (ok) add(o, "flags", number(r->flags), &ok);
    if (ok) add(o, "prompt", text_json(&r->prompt), &ok);
    if (ok) add(o, "n_messages", ld_json_int(r->n_messages), &ok);
    if (ok && r->n_messages > 0 && r->messages) {
        add(o, "messages", msgs = cJSON_CreateArray(), &ok);
        for (int64_t i = 0; ok && i < r->n_messages; i++)
            if (!cJSON_AddItemToArray(msgs, message_json(&r->messages[i]))) ok = 0;
    }
    if (!ok) { cJSON_Delete(o); return NULL; }
    return o;
}

/* ------------------------------------------------------------ reading */

typedef struct reader {
    ld_request *r;
    ld_error *err;
    const char *where; /* the field being read, for the message */
} reader;

static ld_status bad(reader *rd, const char *what)
{
    return LD_FAIL(rd->err, LD_ERR_SYNTAX, 0, "request: %s: %s", rd->where, what);
}

static const cJSON *field(const cJSON *o, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* A whole number in [0, max] (an absent field: dflt). */
static ld_status get_count(reader *rd, const cJSON *o, const char *name, uint64_t max, uint64_t dflt,
                           uint64_t *out)
{
    const cJSON *j = field(o, name);
    rd->where = name;
    if (!j) { *out = dflt; return LD_OK; }
    double d = cJSON_IsNumber(j) ? j->valuedouble : -1;
    if (!(d >= 0 && d <= (double)max) || d != (double)(uint64_t)d) return bad(rd, "not a count");
    *out = (uint64_t)d;
    return LD_OK;
}

static ld_status get_cstr(reader *rd, const cJSON *o, const char *name, const char **out)
{
    size_t len;
    rd->where = name;
    if (ld_json_bytes_get(field(o, name), &rd->r->arena, out, &len) != 0) return bad(rd, "not a text");
    if (*out && strlen(*out) != len) return bad(rd, "holds a NUL byte");
    return LD_OK;
}

static ld_status get_text(reader *rd, const cJSON *o, const char *name, ld_text *t)
{
    const cJSON *j = field(o, name);
    memset(t, 0, sizeof *t);
    rd->where = name;
    if (!j || cJSON_IsNull(j)) return LD_OK;
    if (!cJSON_IsObject(j)) return bad(rd, "not a text object");
    if (ld_json_bytes_get(field(j, "t"), &rd->r->arena, &t->bytes, &t->len) != 0)
        return bad(rd, "its bytes are not a text");
    uint64_t flags = 0, cut = 0, n = 0;
    LD_TRY(get_count(rd, j, "f", 0xFFFF, 0, &flags));
    LD_TRY(get_count(rd, j, "c", t->len, 0, &cut));
    LD_TRY(get_count(rd, j, "n", UINT64_MAX / 2, 0, &n));
    t->flags = (unsigned)flags;
    t->cut = (size_t)cut;
    t->n_chars = n;
    return LD_OK;
}

static ld_status get_tool_call(reader *rd, const cJSON *j, ld_tool_call *c)
{
    rd->where = "tool_calls";
    if (!cJSON_IsObject(j)) return bad(rd, "an element is not an object");
    uint64_t flags = 0;
    LD_TRY(get_cstr(rd, j, "id", &c->id));
    LD_TRY(get_cstr(rd, j, "name", &c->name));
    LD_TRY(get_text(rd, j, "arguments", &c->arguments));
    LD_TRY(get_count(rd, j, "f", 0xFFFF, 0, &flags));
    c->flags = (unsigned)flags;
    return LD_OK;
}

static ld_status get_tool_calls(reader *rd, const cJSON *m, ld_message *msg)
{
    uint64_t n = 0;
    LD_TRY(get_count(rd, m, "n_tool_calls", UINT32_MAX, 0, &n));
    msg->n_tool_calls = (uint32_t)n;
    const cJSON *calls = field(m, "tool_calls");
    rd->where = "tool_calls";
    if (!calls) return LD_OK;
    if (!cJSON_IsArray(calls) || (uint64_t)cJSON_GetArraySize(calls) != n || !n)
        return bad(rd, "not an array of n_tool_calls calls");
    msg->tool_calls = ld_arena_alloc(&rd->r->arena, n * sizeof *msg->tool_calls);
    if (!msg->tool_calls) return LD_FAIL(rd->err, LD_ERR_NOMEM, 0, "out of memory for tool calls");
    memset(msg->tool_calls, 0, n * sizeof *msg->tool_calls);
    size_t k = 0;
    for (const cJSON *c = calls->child; c; c = c->next) LD_TRY(get_tool_call(rd, c, &msg->tool_calls[k++]));
    return LD_OK;
}

static ld_status get_message(reader *rd, const cJSON *m, ld_message *msg)
{
    rd->where = "messages";
    if (!cJSON_IsObject(m)) return bad(rd, "an element is not an object");
    LD_TRY(get_cstr(rd, m, "role", &msg->role));
    LD_TRY(get_text(rd, m, "content", &msg->content));
    LD_TRY(get_text(rd, m, "reasoning", &msg->reasoning_content));
    LD_TRY(get_cstr(rd, m, "tool_call_id", &msg->tool_call_id));
    LD_TRY(get_cstr(rd, m, "name", &msg->name));
    return get_tool_calls(rd, m, msg);
}

static ld_status get_messages(reader *rd, const cJSON *j)
{
    const cJSON *n_j = field(j, "n_messages"), *msgs = field(j, "messages");
    rd->where = "n_messages";
    if (!cJSON_IsNumber(n_j) || n_j->valuedouble < -1 || n_j->valuedouble > 1e9 ||
        n_j->valuedouble != (double)(int64_t)n_j->valuedouble)
        return bad(rd, "not a count or -1");
    ld_request *r = rd->r;
    r->n_messages = (int64_t)n_j->valuedouble;
    rd->where = "messages";
    if (!msgs) return LD_OK;
    if (!cJSON_IsArray(msgs) || r->n_messages <= 0 || cJSON_GetArraySize(msgs) != r->n_messages)
        return bad(rd, "not an array of n_messages messages");
    r->messages = ld_arena_alloc(&r->arena, (size_t)r->n_messages * sizeof *r->messages);
    if (!r->messages) return LD_FAIL(rd->err, LD_ERR_NOMEM, 0, "out of memory for messages");
    memset(r->messages, 0, (size_t)r->n_messages * sizeof *r->messages);
    size_t i = 0;
    for (const cJSON *m = msgs->child; m; m = m->next) LD_TRY(get_message(rd, m, &r->messages[i++]));
    return LD_OK;
}

static ld_status fill(reader *rd, const cJSON *j)
{
    rd->where = "(the record)";
    if (!cJSON_IsObject(j)) return bad(rd, "not an object");
    uint64_t flags = 0;
    LD_TRY(get_cstr(rd, j, "rid", &rd->r->rid));
    LD_TRY(get_count(rd, j, "flags", 0xFFFFFFFFu, 0, &flags));
    rd->r->flags = (unsigned)flags;
    LD_TRY(get_text(rd, j, "prompt", &rd->r->prompt));
    return get_messages(rd, j);
}

ld_status ld_request_from_json(const cJSON *j, ld_request **out, ld_error *err)
{
    *out = NULL;
    ld_request *r = calloc(1, sizeof *r);
    if (!r) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a request");
    ld_arena_init(&r->arena, 0);
    r->sub_index = -1;
    r->n_tools = -1;
    r->n_input_ids = -1;
    r->n_output_ids = -1;
    reader rd = { r, err, "" };
    ld_status st = fill(&rd, j);
    if (st != LD_OK) {
        ld_request_free(r);
        return st;
    }
    *out = r;
    return LD_OK;
}
