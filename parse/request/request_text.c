/* request_text.c - text fields and chat messages of a request record. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request_fill.h"
#include "request_text.h"

/* Decoded head (and tail) of a STR or TRUNC-of-STR value, in ctx->scratch
 * (or borrowed from the value). */
ld_status ld_req_decode_parts(const ld_fill_ctx *ctx, const ld_py_value *v,
                              const char **h, size_t *hn, const char **t,
                              size_t *tn, ld_error *err)
{
    *t = NULL;
    *tn = 0;
    if (v->kind == LD_PY_STR) return ld_request_decode(ctx, v, h, hn, err);
    LD_TRY(ld_request_decode(ctx, &v->u.items[0], h, hn, err));
    return ld_request_decode(ctx, &v->u.items[1], t, tn, err);
}

int ld_req_is_text(const ld_py_value *v)
{
    return v && (v->kind == LD_PY_STR ||
                 (v->kind == LD_PY_TRUNC && v->u.items[0].kind == LD_PY_STR &&
                  v->u.items[1].kind == LD_PY_STR));
}

/* Copies head+tail into `dst` (keep) or only records the sizes. */
static ld_status keep_bytes(ld_arena *dst, int keep, ld_text *t, const char *h,
                            size_t hn, const char *tl, size_t tn, ld_error *err)
{
    t->len = hn + tn;
    t->cut = hn;
    if (!keep) {
        t->flags |= LD_TEXT_NOT_KEPT;
        return LD_OK;
    }
    char *b = ld_arena_alloc(dst, hn + tn + 1);
    if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory keeping a text");
    if (hn) memcpy(b, h, hn);
    if (tn) memcpy(b + hn, tl, tn);
    b[hn + tn] = 0;
    t->bytes = b;
    return LD_OK;
}

/* The text of v into *t, bytes copied to dst when keep. */
static ld_status text_fill(ld_arena *dst, int keep, const ld_fill_ctx *ctx,
                           const ld_py_value *v, ld_text *t, ld_error *err)
{
    memset(t, 0, sizeof *t);
    if (!v) return LD_OK;
    if (v->kind == LD_PY_NONE) {
        t->flags = LD_TEXT_NONE;
        return LD_OK;
    }
    if (v->kind == LD_PY_ABBREV) {
        t->flags = LD_TEXT_PRESENT | LD_TEXT_ABBREVIATED;
        t->n_chars = v->u.abbrev->n_chars;
        return LD_OK;
    }
    if (!ld_req_is_text(v)) return LD_OK;
    if (!keep) { /* counted, not kept: measured where it lies, nothing decoded */
        const ld_py_value *hv = v->kind == LD_PY_TRUNC ? &v->u.items[0] : v;
        size_t hn, tn = 0;
        uint64_t hc, tc = 0;
        LD_TRY(ld_py_str_measure(hv, &hn, &hc, err));
        if (v->kind == LD_PY_TRUNC) LD_TRY(ld_py_str_measure(&v->u.items[1], &tn, &tc, err));
        t->flags = LD_TEXT_PRESENT | (v->kind == LD_PY_TRUNC ? LD_TEXT_TRUNCATED : 0);
        t->n_chars = hc + tc;
        return keep_bytes(dst, 0, t, NULL, hn, NULL, tn, err);
    }
    if (!dst->max_bytes) { /* kept: decoded straight into the record (room for the raw text,
                              which decoding never outgrows; with a cap, the exact size below) */
        const ld_py_value *hv = v->kind == LD_PY_TRUNC ? &v->u.items[0] : v;
        const ld_py_value *tv = v->kind == LD_PY_TRUNC ? &v->u.items[1] : NULL;
        char *b = ld_arena_alloc(dst, (size_t)hv->n + (tv ? tv->n : 0) + 1);
        if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory keeping a text");
        size_t hn, tn = 0;
        uint64_t hc, tc = 0; /* characters counted as they are decoded */
        LD_TRY(ld_py_str_decode_count(hv, b, &hn, &hc, err));
        if (tv) LD_TRY(ld_py_str_decode_count(tv, b + hn, &tn, &tc, err));
        b[hn + tn] = 0;
        t->flags = LD_TEXT_PRESENT | (tv ? LD_TEXT_TRUNCATED : 0);
        t->n_chars = hc + tc;
        t->bytes = b;
        t->len = hn + tn;
        t->cut = hn;
        return LD_OK;
    }
    const char *h, *tl;
    size_t hn, tn;
    LD_TRY(ld_req_decode_parts(ctx, v, &h, &hn, &tl, &tn, err));
    t->flags = LD_TEXT_PRESENT | (v->kind == LD_PY_TRUNC ? LD_TEXT_TRUNCATED : 0);
    t->n_chars = ld_utf8_count_chars(h, hn) + (tl ? ld_utf8_count_chars(tl, tn) : 0);
    return keep_bytes(dst, keep, t, h, hn, tl, tn, err);
}

ld_status ld_req_text(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *v,
                      ld_text *t, ld_error *err)
{
    LD_TRY(text_fill(&r->arena, ctx->keep_text, ctx, v, t, err));
    if (t->flags & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED)) r->flags |= LD_REQ_TRUNCATED;
    return LD_OK;
}

/* content given as a list of parts: the text parts joined by " ", as SGLang
 * flattens them for templates that take string content (and for tool
 * results); templates that loop over the parts themselves may join them
 * differently, which the alignment then reports */
static ld_status parts_text(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *list,
                            ld_text *t, ld_error *err)
{
    size_t total = 0;
    uint64_t chars = 0;
    unsigned fl = LD_TEXT_PRESENT | LD_TEXT_PARTS;
    ld_text *pts = ld_arena_alloc(ctx->scratch, (list->n + 1) * sizeof *pts);
    if (!pts) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory joining parts");
    for (uint32_t i = 0; i < list->n; i++) {
        LD_TRY(text_fill(ctx->scratch, 1, ctx, ld_req_get(&list->u.items[i], "text"),
                         &pts[i], err));
        fl |= pts[i].flags & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED);
        total += pts[i].len + (i > 0);
        chars += pts[i].n_chars + (i > 0);
    }
    char *b = ld_arena_alloc(ctx->scratch, total + 1);
    if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory joining parts");
    size_t at = 0;
    for (uint32_t i = 0; i < list->n; i++) {
        if (i > 0) b[at++] = ' ';
        if (pts[i].bytes && pts[i].len) memcpy(b + at, pts[i].bytes, pts[i].len);
        at += pts[i].bytes ? pts[i].len : 0;
    }
    memset(t, 0, sizeof *t);
    t->flags = fl;
    t->n_chars = chars;
    if (fl & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED)) r->flags |= LD_REQ_TRUNCATED;
    return keep_bytes(&r->arena, ctx->keep_text, t, b, at, NULL, 0, err);
}

static const char *dup_str(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *v)
{
    const char *s;
    size_t n;
    if (!v || v->kind != LD_PY_STR) return NULL;
    if (ld_request_decode(ctx, v, &s, &n, NULL) != LD_OK) return NULL;
    return ld_request_strdup(r, s, n);
}

/* ---------------------------------------------------------------- tool calls */

/* A growing byte buffer for the JSON serialisation of tool arguments
 * (malloc'd, freed by the caller). */
typedef struct jbuf {
    char *b;
    size_t n, cap;
    int fail;       /* out of memory */
    unsigned flags; /* LD_TEXT_TRUNCATED / LD_TEXT_ABBREVIATED seen inside */
    size_t cut;     /* where the first cut string's middle is missing */
} jbuf;

static void jput(jbuf *j, const char *s, size_t n)
{
    if (j->fail) return;
    if (j->n + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 64;
        while (cap < j->n + n + 1) cap *= 2;
        char *nb = realloc(j->b, cap);
        if (!nb) { j->fail = 1; return; }
        j->b = nb;
        j->cap = cap;
    }
    memcpy(j->b + j->n, s, n);
    j->n += n;
    j->b[j->n] = 0;
}

static void jputs(jbuf *j, const char *s) { jput(j, s, strlen(s)); }

/* String body with json.dumps(ensure_ascii=False) escapes (no quotes). */
static void jesc(jbuf *j, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        jput(j, s + from, i - from);
        char e[8];
        switch (c) {
        case '"': jputs(j, "\\\""); break;
        case '\\': jputs(j, "\\\\"); break;
        case '\n': jputs(j, "\\n"); break;
        case '\r': jputs(j, "\\r"); break;
        case '\t': jputs(j, "\\t"); break;
        case '\b': jputs(j, "\\b"); break;
        case '\f': jputs(j, "\\f"); break;
        default: snprintf(e, sizeof e, "\\u%04x", c); jputs(j, e); break;
        }
        from = i + 1;
    }
    jput(j, s + from, n - from);
}

/* Python float repr (shortest round trip; exponent form below 1e-4 and from
 * 1e16), with json.dumps's NaN / Infinity. */
static void jfloat(jbuf *j, double d)
{
    if (isnan(d)) { jputs(j, "NaN"); return; }
    if (isinf(d)) { jputs(j, d < 0 ? "-Infinity" : "Infinity"); return; }
    char s[40], dig[24], out[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*e", prec - 1, d);
        if (strtod(s, NULL) == d) break;
    }
    const char *p = s;
    size_t nd = 0, o = 0;
    if (*p == '-') { out[o++] = '-'; p++; }
    for (; *p && *p != 'e'; p++)
        if (*p != '.') dig[nd++] = *p;
    int exp = atoi(p + 1);
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "0.%.*s%.*s", -exp - 1,
                                  "0000", (int)nd, dig);
        } else {
            for (int k = 0; k <= exp; k++) out[o++] = (size_t)k < nd ? dig[k] : '0';
            out[o++] = '.';
            if (nd > (size_t)exp + 1) for (size_t k = (size_t)exp + 1; k < nd; k++) out[o++] = dig[k];
            else out[o++] = '0';
        }
    } else {
        out[o++] = dig[0];
        if (nd > 1) { out[o++] = '.'; memcpy(out + o, dig + 1, nd - 1); o += nd - 1; }
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+',
                              exp < 0 ? -exp : exp);
    }
    jput(j, out, o);
}

static void jvalue(jbuf *j, const ld_fill_ctx *ctx, const ld_py_value *v, int as_key);

static void jstr(jbuf *j, const ld_fill_ctx *ctx, const ld_py_value *v)
{
    const char *h = NULL, *t = NULL;
    size_t hn = 0, tn = 0;
    if (ld_req_decode_parts(ctx, v, &h, &hn, &t, &tn, NULL) != LD_OK) { j->fail = 1; return; }
    jput(j, "\"", 1);
    jesc(j, h, hn);
    if (t) {
        if (!(j->flags & LD_TEXT_TRUNCATED)) j->cut = j->n;
        j->flags |= LD_TEXT_TRUNCATED;
        jesc(j, t, tn);
    }
    jput(j, "\"", 1);
}

static void jitems(jbuf *j, const ld_fill_ctx *ctx, const ld_py_value *it, size_t n,
                   int dict)
{
    int first = 1;
    jputs(j, dict ? "{" : "[");
    for (size_t i = 0; i < n; i += dict ? 2 : 1) {
        if (!dict && it[i].kind == LD_PY_ELLIPSIS) { /* logger dropped list elements */
            if (!(j->flags & LD_TEXT_TRUNCATED)) j->cut = j->n;
            j->flags |= LD_TEXT_TRUNCATED;
            continue;
        }
        if (!first) jputs(j, ", ");
        first = 0;
        if (dict) {
            jvalue(j, ctx, &it[i], 1);
            jputs(j, ": ");
            jvalue(j, ctx, &it[i + 1], 0);
        } else {
            jvalue(j, ctx, &it[i], 0);
        }
    }
    jputs(j, dict ? "}" : "]");
}

/* One value as json.dumps prints it; as_key: a dict key (always a string). */
static void jvalue(jbuf *j, const ld_fill_ctx *ctx, const ld_py_value *v, int as_key)
{
    char num[32];
    int q = as_key && v->kind != LD_PY_STR && v->kind != LD_PY_TRUNC;
    if (q) jputs(j, "\"");
    switch (v->kind) {
    case LD_PY_NONE: jputs(j, "null"); break;
    case LD_PY_BOOL: jputs(j, v->u.i ? "true" : "false"); break;
    case LD_PY_INT:
        if (v->flags & LD_PY_F_BIGINT) jput(j, v->u.raw, v->n);
        else { snprintf(num, sizeof num, "%lld", (long long)v->u.i); jputs(j, num); }
        break;
    case LD_PY_FLOAT: jfloat(j, v->u.f); break;
    case LD_PY_STR: jstr(j, ctx, v); break;
    case LD_PY_TRUNC:
        if (v->u.items[0].kind == LD_PY_STR) { jstr(j, ctx, v); break; }
        if (!(j->flags & LD_TEXT_TRUNCATED)) j->cut = j->n;
        j->flags |= LD_TEXT_TRUNCATED;
        jitems(j, ctx, v->u.items[0].u.items, v->u.items[0].n, 0);
        break;
    case LD_PY_LIST: case LD_PY_TUPLE: case LD_PY_SET:
        if (!v->u.items && v->n) { jputs(j, "[...]"); break; } /* skimmed: counted only */
        jitems(j, ctx, v->u.items, v->n, 0);
        break;
    case LD_PY_DICT: jitems(j, ctx, v->u.items, 2 * (size_t)v->n, 1); break;
    case LD_PY_ABBREV:
        j->flags |= LD_TEXT_ABBREVIATED;
        jputs(j, "\"\"");
        break;
    case LD_PY_BYTES: case LD_PY_NAME: case LD_PY_OPAQUE:
        if (!q) jputs(j, "\"");
        jesc(j, v->u.raw, v->n);
        if (!q) jputs(j, "\"");
        break;
    default: jputs(j, "null"); break;
    }
    if (q) jputs(j, "\"");
}

/* `arguments` into t: a string as given, an object serialised. */
static ld_status tool_args(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *v,
                           ld_tool_call *tc, ld_error *err)
{
    if (!v || v->kind == LD_PY_NONE || v->kind == LD_PY_ABBREV || ld_req_is_text(v))
        return ld_req_text(r, ctx, v, &tc->arguments, err);
    jbuf j = {0};
    jvalue(&j, ctx, v, 0);
    if (j.fail) {
        free(j.b);
        return LD_FAIL(err, LD_ERR_NOMEM, v->off, "out of memory serialising tool arguments");
    }
    memset(&tc->arguments, 0, sizeof tc->arguments);
    tc->flags |= LD_TOOL_ARGS_OBJECT;
    tc->arguments.flags = LD_TEXT_PRESENT | j.flags;
    tc->arguments.n_chars = ld_utf8_count_chars(j.b ? j.b : "", j.n);
    if (j.flags) r->flags |= LD_REQ_TRUNCATED;
    ld_text *t = &tc->arguments;
    ld_status st = keep_bytes(&r->arena, 1, t, j.b ? j.b : "", j.n, NULL, 0, err);
    t->cut = (j.flags & LD_TEXT_TRUNCATED) ? j.cut : t->len;
    free(j.b);
    return st;
}

/* tool_calls list into m->tool_calls (only when texts are kept). */
static ld_status tool_calls(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *list,
                            ld_message *m, ld_error *err)
{
    m->n_tool_calls = list->n;
    if (!ctx->keep_text || list->n == 0) return LD_OK;
    m->tool_calls = ld_arena_alloc(&r->arena, list->n * sizeof *m->tool_calls);
    if (!m->tool_calls) return LD_FAIL(err, LD_ERR_NOMEM, list->off, "out of memory for tool calls");
    for (uint32_t i = 0; i < list->n; i++) {
        const ld_py_value *c = &list->u.items[i];
        ld_tool_call *tc = &m->tool_calls[i];
        memset(tc, 0, sizeof *tc);
        if (c->kind == LD_PY_ELLIPSIS) r->flags |= LD_REQ_TRUNCATED;
        const ld_py_value *fn = ld_req_get(c, "function");
        if (!fn || (fn->kind != LD_PY_DICT && fn->kind != LD_PY_CALL)) fn = c;
        tc->id = dup_str(r, ctx, ld_req_get(c, "id"));
        tc->name = dup_str(r, ctx, ld_req_get(fn, "name"));
        LD_TRY(tool_args(r, ctx, ld_req_get(fn, "arguments"), tc, err));
    }
    return LD_OK;
}

static ld_status one_message(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *d,
                             ld_message *m, ld_error *err)
{
    memset(m, 0, sizeof *m);
    m->role = dup_str(r, ctx, ld_req_get(d, "role"));
    const ld_py_value *c = ld_req_get(d, "content");
    if (c && c->kind == LD_PY_LIST) LD_TRY(parts_text(r, ctx, c, &m->content, err));
    else LD_TRY(ld_req_text(r, ctx, c, &m->content, err));
    LD_TRY(ld_req_text(r, ctx, ld_req_get(d, "reasoning_content"), &m->reasoning_content, err));
    const ld_py_value *tc = ld_req_get(d, "tool_calls");
    if (tc && tc->kind == LD_PY_LIST) LD_TRY(tool_calls(r, ctx, tc, m, err));
    m->tool_call_id = dup_str(r, ctx, ld_req_get(d, "tool_call_id"));
    m->name = dup_str(r, ctx, ld_req_get(d, "name"));
    return LD_OK;
}

/* ---------------------------------------------------------------- copies */

/* A C string of the record's (as dup_str made it) copied into r. */
static int copy_cstr(ld_request *r, const char **dst, const char *s)
{
    *dst = s ? ld_request_strdup(r, s, strlen(s)) : NULL;
    return !s || *dst;
}

/* A text of another record's copied into r: its bytes, when kept, with
 * their length (NULs inside included). */
static int copy_text(ld_request *r, ld_text *dst, const ld_text *src)
{
    *dst = *src;
    if (!src->bytes) return 1;
    dst->bytes = ld_request_strdup(r, src->bytes, src->len);
    return dst->bytes != NULL;
}

ld_status ld_request_copy_messages(ld_request *r, const ld_message *ms, int64_t n, ld_error *err)
{
    ld_message *out = ld_arena_alloc(&r->arena, ((size_t)n + 1) * sizeof *out);
    if (!out) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for messages");
    for (int64_t i = 0; i < n; i++) {
        const ld_message *m = &ms[i];
        ld_message *d = &out[i];
        *d = *m;
        int ok = copy_cstr(r, &d->role, m->role) && copy_text(r, &d->content, &m->content) &&
                 copy_text(r, &d->reasoning_content, &m->reasoning_content) &&
                 copy_cstr(r, &d->tool_call_id, m->tool_call_id) && copy_cstr(r, &d->name, m->name);
        if (ok && m->tool_calls) {
            d->tool_calls = ld_arena_alloc(&r->arena, m->n_tool_calls * sizeof *d->tool_calls);
            ok = d->tool_calls != NULL;
            for (uint32_t k = 0; ok && k < m->n_tool_calls; k++) {
                const ld_tool_call *tc = &m->tool_calls[k];
                d->tool_calls[k] = *tc;
                ok = copy_cstr(r, &d->tool_calls[k].id, tc->id) &&
                     copy_cstr(r, &d->tool_calls[k].name, tc->name) &&
                     copy_text(r, &d->tool_calls[k].arguments, &tc->arguments);
            }
        }
        if (!ok) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for messages");
    }
    r->messages = out;
    r->n_messages = n;
    return LD_OK;
}

ld_status ld_request_fill_messages(ld_request *r, const ld_fill_ctx *ctx,
                                   const ld_py_value *list, ld_error *err)
{
    if (!list || list->kind != LD_PY_LIST) return LD_OK;
    uint32_t n = 0;
    for (uint32_t i = 0; i < list->n; i++)
        if (list->u.items[i].kind == LD_PY_DICT) n++;
        else if (list->u.items[i].kind == LD_PY_ELLIPSIS) r->flags |= LD_REQ_TRUNCATED;
    ld_message *ms = ld_arena_alloc(&r->arena, (n + 1) * sizeof *ms);
    if (!ms) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for messages");
    uint32_t k = 0;
    for (uint32_t i = 0; i < list->n; i++) {
        if (list->u.items[i].kind != LD_PY_DICT) continue;
        LD_TRY(one_message(r, ctx, &list->u.items[i], &ms[k++], err));
    }
    r->messages = ms;
    r->n_messages = n;
    return LD_OK;
}
