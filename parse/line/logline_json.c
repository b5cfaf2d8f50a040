/* logline_json.c - SGLang JSON-mode request lines (`--log-requests-format
 * json`), parsed with cJSON and converted to ld_py_value trees.
 *
 * JSON-mode truncation (log-formats.md 3.2): a string longer than max_length
 * becomes head + "..." + tail (exactly 2*half+3 code points) and a long list
 * becomes head + ["..."] + tail (exactly 2*half+1 elements).  Both are
 * recognised by that exact length and turned into LD_PY_TRUNC (strings) /
 * an LD_PY_ELLIPSIS element (lists). */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "logline.h"

typedef struct conv {
    ld_arena *arena;
    uint32_t half;
} conv;

static ld_py_value *new_val(conv *c, uint8_t kind)
{
    ld_py_value *v = ld_arena_alloc(c->arena, sizeof *v);
    if (v) {
        memset(v, 0, sizeof *v);
        v->kind = kind;
    }
    return v;
}

static int set_str(conv *c, ld_py_value *v, const char *s, size_t n)
{
    char *cp = ld_arena_memdup(c->arena, s, n);
    if (!cp) return -1;
    v->kind = LD_PY_STR;
    v->flags = LD_PY_F_JSON;
    v->u.raw = cp;
    v->n = (uint32_t)n;
    return 0;
}

/* Byte offset of code point `k` in s[0..n) (UTF-8). */
static size_t cp_offset(const char *s, size_t n, uint64_t k)
{
    size_t i = 0;
    while (i < n && k > 0) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        k--;
    }
    return i;
}

static int conv_string(conv *c, ld_py_value *v, const char *s)
{
    size_t n = strlen(s);
    uint64_t h = c->half;
    if (ld_utf8_count_chars(s, n) == 2 * h + 3) {
        size_t a = cp_offset(s, n, h);
        if (a + 3 <= n && memcmp(s + a, "...", 3) == 0) {
            ld_py_value *it = ld_arena_alloc(c->arena, 2 * sizeof *it);
            if (!it) return -1;
            memset(it, 0, 2 * sizeof *it);
            if (set_str(c, &it[0], s, a) || set_str(c, &it[1], s + a + 3, n - a - 3))
                return -1;
            v->kind = LD_PY_TRUNC;
            v->n = 2;
            v->u.items = it;
            return 0;
        }
    }
    return set_str(c, v, s, n);
}

static int conv_value(conv *c, const cJSON *j, ld_py_value *v, int depth);

static int conv_array(conv *c, const cJSON *j, ld_py_value *v, int depth)
{
    int n = cJSON_GetArraySize(j);
    ld_py_value *it = n ? ld_arena_alloc(c->arena, (size_t)n * sizeof *it) : NULL;
    if (n && !it) return -1;
    int marker = -1;
    if ((uint64_t)n == 2 * (uint64_t)c->half + 1) marker = (int)c->half;
    int i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++) {
        memset(&it[i], 0, sizeof it[i]);
        if (i == marker && cJSON_IsString(e) && strcmp(e->valuestring, "...") == 0) {
            it[i].kind = LD_PY_ELLIPSIS;
            continue;
        }
        if (conv_value(c, e, &it[i], depth + 1)) return -1;
    }
    v->kind = LD_PY_LIST;
    v->n = (uint32_t)n;
    v->u.items = it;
    return 0;
}

static int conv_object(conv *c, const cJSON *j, ld_py_value *v, int depth)
{
    int n = cJSON_GetArraySize(j);
    ld_py_value *it = n ? ld_arena_alloc(c->arena, 2 * (size_t)n * sizeof *it) : NULL;
    if (n && !it) return -1;
    int i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++) {
        memset(&it[2 * i], 0, 2 * sizeof *it);
        const char *k = e->string ? e->string : "";
        if (set_str(c, &it[2 * i], k, strlen(k))) return -1;
        if (conv_value(c, e, &it[2 * i + 1], depth + 1)) return -1;
    }
    v->kind = LD_PY_DICT;
    v->n = (uint32_t)n;
    v->u.items = it;
    return 0;
}

static int conv_value(conv *c, const cJSON *j, ld_py_value *v, int depth)
{
    if (depth > 512) return -1;
    if (cJSON_IsNull(j)) v->kind = LD_PY_NONE;
    else if (cJSON_IsBool(j)) {
        v->kind = LD_PY_BOOL;
        v->u.i = cJSON_IsTrue(j) ? 1 : 0;
    } else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0) {
            v->kind = LD_PY_INT;
            v->u.i = (int64_t)d;
        } else {
            v->kind = LD_PY_FLOAT;
            v->u.f = d;
        }
    } else if (cJSON_IsString(j)) return conv_string(c, v, j->valuestring);
    else if (cJSON_IsArray(j)) return conv_array(c, j, v, depth);
    else if (cJSON_IsObject(j)) return conv_object(c, j, v, depth);
    else v->kind = LD_PY_NONE;
    return 0;
}

static ld_status json_syntax_error(const char *data, size_t len, size_t start,
                                   ld_error *err)
{
    /* cJSON only tells where it stopped; give the caller that byte, and say
     * whether the line ended first (a cut line) */
    const char *ep = cJSON_GetErrorPtr();
    size_t off = start;
    if (ep && ep >= data && ep <= data + len) off = (size_t)(ep - data);
    if (off >= len)
        return LD_FAIL(err, LD_ERR_TRUNCATED, len,
                       "line ends inside a JSON value started at byte %zu", start);
    return LD_FAIL(err, LD_ERR_SYNTAX, off, "invalid JSON at byte %zu", off);
}

ld_status ld_logline_parse_json(const char *data, size_t len, size_t start,
                                uint32_t json_half, ld_arena *arena,
                                ld_logline *out, ld_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(data + start, len - start, &end, 0);
    if (!root) return json_syntax_error(data, len, start, err);
    ld_status st = LD_OK;
    conv c = {arena, json_half ? json_half : 1024};
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(root, "timestamp");
    if (cJSON_IsString(ts)) {
        out->ts = ld_arena_memdup(arena, ts->valuestring, strlen(ts->valuestring));
        out->ts_len = out->ts ? strlen(ts->valuestring) : 0;
    }
    static const char *keys[] = {"rid", "obj", "headers", "out"};
    const ld_py_value **dst[] = {&out->rid, &out->obj, &out->headers, &out->out};
    for (size_t i = 0; i < 4 && st == LD_OK; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        if (!j) continue;
        ld_py_value *v = new_val(&c, LD_PY_NONE);
        if (!v || conv_value(&c, j, v, 0))
            st = LD_FAIL(err, LD_ERR_NOMEM, start, "out of memory converting JSON '%s'", keys[i]);
        *dst[i] = v;
    }
    cJSON_Delete(root);
    if (st == LD_OK && !out->obj)
        st = LD_FAIL(err, LD_ERR_SYNTAX, start, "JSON request line without 'obj'");
    return st;
}
