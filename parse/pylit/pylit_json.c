/* pylit_json.c - see pylit_json.h. */
#include "pylit_json.h"
#include "ld_json_escape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of a valid UTF-8 sequence at s (1-4), or 0 when invalid.  Lone
 * surrogates (ED A0..BF xx) are reported as 3 with *surrogate set. */
static int utf8_seq(const unsigned char *s, size_t left, int *surrogate)
{
    *surrogate = 0;
    unsigned c = s[0];
    int n = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (n == 0 || (size_t)n > left) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && c == 0xE0 && s[1] < 0xA0) return 0;      /* overlong */
    if (n == 4 && c == 0xF0 && s[1] < 0x90) return 0;      /* overlong */
    if (n == 4 && c == 0xF4 && s[1] > 0x8F) return 0;      /* > U+10FFFF */
    if (n == 3 && c == 0xED && s[1] >= 0xA0) *surrogate = 1;
    return n;
}

/* "\u" and cp's 4 hex digits, lower case as json.dumps writes them */
static char *put_u_escape(char *o, unsigned cp)
{
    static const char hex[] = "0123456789abcdef";
    o[0] = '\\';
    o[1] = 'u';
    for (int k = 0; k < 4; k++) o[2 + k] = hex[(cp >> (12 - 4 * k)) & 0xF];
    return o + 6;
}

/* An ASCII byte that ended a run (ld_json_escapes_ascii): its escape, or
 * DEL as it is (ensure_ascii=False keeps it; the scan stops there all the
 * same) */
static char *put_ascii(char *o, unsigned c)
{
    const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                    : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
    if (esc) {
        memcpy(o, esc, 2);
        return o + 2;
    }
    if (c == 0x7F) {
        *o = (char)c;
        return o + 1;
    }
    return put_u_escape(o, c);
}

/* The non-ASCII byte at *pp: its UTF-8 sequence as it is, a lone surrogate
 * as \udXXX, an invalid byte as \udcXX; *pp moved past what was written */
static char *put_non_ascii(char *o, const unsigned char **pp, const unsigned char *end)
{
    const unsigned char *p = *pp;
    int surrogate, n = utf8_seq(p, (size_t)(end - p), &surrogate);
    if (n == 0) {
        *pp = p + 1;
        return put_u_escape(o, 0xDC00u | p[0]);
    }
    *pp = p + n;
    if (surrogate) return put_u_escape(o, ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu));
    memcpy(o, p, (size_t)n);
    return o + n;
}

/* Whether the 8 bytes at p hold a byte the scan below stops at */
static int stop_in_word(const unsigned char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
    return ld_json_escape_ascii_word(x) != 0;
}

/* The bytes from *pp on, one at a time: those the scan below stops at as
 * put_ascii or put_non_ascii writes them, the plain ones as they are, up
 * to a plain byte that starts 8 plain ones or end; *pp moved there.  In
 * mostly non-ASCII text (a space between CJK words) a scan and a memcpy
 * for each short run would cost more than its bytes. */
static char *put_stops(char *o, const unsigned char **pp, const unsigned char *end)
{
    const unsigned char *p = *pp;
    while (p < end) {
        if (*p >= 0x80) {
            o = put_non_ascii(o, &p, end);
        } else if (ld_json_escapes_ascii(*p)) {
            o = put_ascii(o, *p++);
        } else {
            if (end - p >= 8 && !stop_in_word(p)) break;
            *o++ = (char)*p++;
        }
    }
    *pp = p;
    return o;
}

/* s[0..len) as a JSON string literal into out (room for len * 6 + 3
 * bytes: every byte as \udcXX, the quotes, the NUL); returns its length.
 * The runs of printable ASCII, which are copied as they are, end at the
 * bytes of ensure_ascii=True's class (include/ld_json_escape.h's scan, 32
 * bytes a step with AVX2): each run is one memcpy, and the bytes between
 * runs (and short runs) go through put_stops. */
static size_t escape_into(char *out, const char *s, size_t len)
{
    char *o = out;
    const unsigned char *u = (const unsigned char *)s, *p = u, *end = u + len;
    *o++ = '"';
    while (p < end) {
        size_t i = (size_t)(p - u), stop = ld_json_next_escape_ascii(s, i, len); /* from s: it may reread before i */
        memcpy(o, p, stop - i);
        o += stop - i;
        p = u + stop;
        o = put_stops(o, &p, end);
    }
    *o++ = '"';
    *o = '\0';
    return (size_t)(o - out);
}

static char *escape_text(const char *s, size_t len)
{
    char *out = malloc(len * 6 + 3);
    if (out) escape_into(out, s, len);
    return out;
}

int ld_json_write_text(FILE *f, const char *s, size_t len)
{
    if (!s) return fputs("null", f) < 0 ? -1 : 0;
    char stack[1024], *buf = len * 6 + 3 <= sizeof stack ? stack : malloc(len * 6 + 3);
    if (!buf) return -1;
    size_t n = escape_into(buf, s, len);
    int rc = fwrite(buf, 1, n, f) == n ? 0 : -1;
    if (buf != stack) free(buf);
    return rc;
}

int ld_json_write_cstr(FILE *f, const char *s)
{
    return ld_json_write_text(f, s, s ? strlen(s) : 0);
}

cJSON *ld_json_text(const char *s, size_t len)
{
    if (!s) return cJSON_CreateNull();
    char *esc = escape_text(s, len);
    if (!esc) return NULL;
    cJSON *item = cJSON_CreateRaw(esc);
    free(esc);
    return item;
}

cJSON *ld_json_cstr(const char *s)
{
    return s ? ld_json_text(s, strlen(s)) : cJSON_CreateNull();
}

cJSON *ld_json_int(int64_t v)
{
    if (v == INT64_MIN) return cJSON_CreateNull(); /* request.h's LD_UNSET_INT: a field not logged */
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return cJSON_CreateRaw(buf); /* exact: cJSON numbers are doubles */
}

/* The fewest significant digits p (1 to 17) whose "%.*g" reads back as v.
 * printf is asked once for v's 17 digits, and each shorter p's digits are
 * rounded from them here, which is printf's own rounding unless the digits
 * dropped are exactly 5 then zeros (v itself may lie on either side of that
 * tie): printf decides those.  Only strtod is asked per p. */
static int shortest_digits(double v)
{
    char e17[48], num[48];
    snprintf(e17, sizeof e17, "%.16e", v); /* [-]d.dddddddddddddddde[+-]x */
    const char *q = e17;
    int neg = *q == '-';
    if (neg) q++;
    char dig[17];
    int nd = 0;
    for (; *q && *q != 'e' && nd < 17; q++)
        if (*q >= '0' && *q <= '9') dig[nd++] = *q;
    if (nd != 17 || *q != 'e') return 17;
    int exp = atoi(q + 1);
    for (int p = 1; p < 17; p++) {
        int tie = dig[p] == '5';
        for (int k = p + 1; tie && k < 17; k++) tie = dig[k] == '0';
        if (tie) {
            snprintf(num, sizeof num, "%.*e", p - 1, v);
        } else {
            char r[18];
            int e = exp;
            memcpy(r, dig, (size_t)p);
            if (dig[p] >= '5') { /* round up, carrying */
                int k = p - 1;
                while (k >= 0 && r[k] == '9') r[k--] = '0';
                if (k >= 0) r[k]++;
                else r[0] = '1', e++; /* 9.99 -> 1.00e+1: the zeros after stay zeros */
            }
            int o = 0;
            if (neg) num[o++] = '-';
            num[o++] = r[0];
            if (p > 1) {
                num[o++] = '.';
                memcpy(num + o, r + 1, (size_t)(p - 1));
                o += p - 1;
            }
            snprintf(num + o, sizeof num - (size_t)o, "e%d", e);
        }
        if (strtod(num, NULL) == v) return p;
    }
    return 17;
}

cJSON *ld_json_double(double v)
{
    if (isnan(v) || isinf(v)) return cJSON_CreateNull();
    /* shortest form that reads back the same, like Python's repr */
    char buf[40];
    snprintf(buf, sizeof buf, "%.*g", shortest_digits(v), v);
    return cJSON_CreateRaw(buf);
}

/* How a value tree is written: output items (strings escaped by us, exact
 * numbers, see the header) or plain cJSON items for code that reads the tree
 * back (ld_json_value_plain). */
typedef struct jv {
    ld_arena *scratch;
    int plain;
} jv;

static cJSON *jv_text(const jv *c, const char *s, size_t len)
{
    if (!c->plain) return ld_json_text(s, len);
    char *z = ld_arena_memdup(c->scratch, s, len); /* cJSON wants NUL-terminated text */
    return z ? cJSON_CreateString(z) : NULL;
}

static cJSON *jv_int(const jv *c, int64_t v)
{
    return c->plain ? cJSON_CreateNumber((double)v) : ld_json_int(v);
}

/* A Python float; in plain trees an integral one keeps a float literal
 * ("2.0") on the node, as ld_tpl_json_keep_floats does for JSON text, so
 * that templates still see a float. */
static cJSON *jv_double(const jv *c, double v)
{
    if (!c->plain) return ld_json_double(v);
    cJSON *n = cJSON_CreateNumber(v);
    if (n && isfinite(v) && v == floor(v)) {
        char lit[40];
        snprintf(lit, sizeof lit, "%.17g", v);
        if (!strpbrk(lit, ".e")) strcat(lit, ".0");
        size_t len = strlen(lit) + 1;
        if (!(n->valuestring = cJSON_malloc(len))) {
            cJSON_Delete(n);
            return NULL;
        }
        memcpy(n->valuestring, lit, len); /* freed by cJSON_Delete */
    }
    return n;
}

static cJSON *jv_value(const jv *c, const ld_py_value *v);

static cJSON *json_str_value(const ld_py_value *v, const jv *c)
{
    const char *s;
    size_t len;
    if (ld_py_str_decode(v, c->scratch, &s, &len, NULL) != LD_OK)
        return jv_text(c, v->u.raw, v->n); /* malformed escape: raw text */
    return jv_text(c, s, len);
}

static cJSON *json_seq(const ld_py_value *items, size_t n, const jv *c)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++)
        cJSON_AddItemToArray(arr, jv_value(c, &items[i]));
    return arr;
}

/* Text of a dict key for a JSON object member name (NUL-terminated). */
static const char *key_text(const ld_py_value *k, ld_arena *scratch)
{
    const char *s;
    size_t len;
    char buf[64];
    switch (k->kind) {
    case LD_PY_STR:
        if (ld_py_str_decode(k, scratch, &s, &len, NULL) == LD_OK)
            return ld_arena_memdup(scratch, s, len);
        return ld_arena_memdup(scratch, k->u.raw, k->n);
    case LD_PY_INT:
        if (k->flags & LD_PY_F_BIGINT) return ld_arena_memdup(scratch, k->u.raw, k->n);
        snprintf(buf, sizeof buf, "%lld", (long long)k->u.i);
        return ld_arena_memdup(scratch, buf, strlen(buf));
    case LD_PY_NONE: return "None";
    case LD_PY_BOOL: return k->u.i ? "True" : "False";
    default: return ld_py_kind_name((ld_py_kind)k->kind);
    }
}

static cJSON *json_object(const ld_py_value *v, const jv *c)
{
    cJSON *obj = cJSON_CreateObject();
    for (uint32_t i = 0; obj && i < v->n; i++) {
        const char *k = key_text(&v->u.items[2 * i], c->scratch);
        cJSON_AddItemToObject(obj, k ? k : "?", jv_value(c, &v->u.items[2 * i + 1]));
    }
    return obj;
}

static cJSON *json_call(const ld_py_call *call, const jv *c)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj) return NULL;
    cJSON_AddItemToObject(obj, "__class__", jv_text(c, call->name, call->name_len));
    for (uint32_t i = 0; i < call->n_args; i++) {
        char pos[32];
        const char *name = call->arg_names[i]
            ? ld_arena_memdup(c->scratch, call->arg_names[i], call->arg_name_lens[i]) : NULL;
        if (!name) { snprintf(pos, sizeof pos, "__arg%u__", (unsigned)i); name = pos; }
        cJSON_AddItemToObject(obj, name, jv_value(c, &call->args[i]));
    }
    return obj;
}

static cJSON *json_marker(const ld_py_value *v, const jv *c)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj) return NULL;
    if (v->kind == LD_PY_TRUNC) {
        cJSON_AddItemToObject(obj, "__truncated__", cJSON_CreateTrue());
        cJSON_AddItemToObject(obj, "head", jv_value(c, &v->u.items[0]));
        cJSON_AddItemToObject(obj, "tail", jv_value(c, &v->u.items[1]));
    } else {
        const ld_py_abbrev *a = v->u.abbrev;
        cJSON_AddItemToObject(obj, "__abbreviated__", jv_text(c, a->key, a->key_len));
        cJSON_AddItemToObject(obj, "chars", jv_int(c, (int64_t)a->n_chars));
        cJSON_AddItemToObject(obj, "blake2b", jv_text(c, a->digest, a->digest_len));
    }
    return obj;
}

static cJSON *jv_value(const jv *c, const ld_py_value *v)
{
    if (!v) return cJSON_CreateNull();
    switch ((ld_py_kind)v->kind) {
    case LD_PY_NONE: return cJSON_CreateNull();
    case LD_PY_BOOL: return cJSON_CreateBool(v->u.i != 0);
    case LD_PY_INT:
        if (v->flags & LD_PY_F_BIGINT) {
            char *digits = ld_arena_memdup(c->scratch, v->u.raw, v->n);
            if (!digits) return NULL;
            return c->plain ? cJSON_CreateNumber(strtod(digits, NULL)) : cJSON_CreateRaw(digits);
        }
        return jv_int(c, v->u.i);
    case LD_PY_FLOAT:
        if (isnan(v->u.f)) return cJSON_CreateString("nan");
        if (isinf(v->u.f)) return cJSON_CreateString(v->u.f > 0 ? "inf" : "-inf");
        return jv_double(c, v->u.f);
    case LD_PY_STR: case LD_PY_BYTES: return json_str_value(v, c);
    case LD_PY_LIST: case LD_PY_TUPLE: case LD_PY_SET:
        if (v->kind == LD_PY_LIST && (v->flags & LD_PY_F_SKIMMED)) /* counted, not kept */
            return cJSON_CreateString("<list of ints, counted only>");
        return json_seq(v->u.items, v->n, c);
    case LD_PY_DICT: return json_object(v, c);
    case LD_PY_CALL: return json_call(v->u.call, c);
    case LD_PY_NAME: case LD_PY_OPAQUE: return jv_text(c, v->u.raw, v->n);
    case LD_PY_ELLIPSIS: return cJSON_CreateString("...");
    case LD_PY_TRUNC: case LD_PY_ABBREV: return json_marker(v, c);
    }
    return cJSON_CreateNull();
}

cJSON *ld_json_value(const ld_py_value *v, ld_arena *scratch)
{
    jv c = { scratch, 0 };
    return jv_value(&c, v);
}

cJSON *ld_json_value_plain(const ld_py_value *v, ld_arena *scratch)
{
    jv c = { scratch, 1 };
    return jv_value(&c, v);
}

int ld_json_print_line(FILE *f, cJSON *item)
{
    char *s = item ? cJSON_PrintUnformatted(item) : NULL;
    cJSON_Delete(item);
    if (!s) return -1;
    fputs(s, f);
    fputc('\n', f);
    cJSON_free(s);
    return 0;
}
