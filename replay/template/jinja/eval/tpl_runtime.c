/* tpl_runtime.c - the render's runtime services that the evaluator and the
 * builtins share: its arena, "today", errors with the template's line and
 * column, str() of a value and iteration over one.  The leaf of the
 * interpreter's eval/ and builtins/. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_rt.h"

ld_arena *ld_tpl_rt_arena(tpl_rt *rt) { return rt->arena; }
const char *ld_tpl_rt_today(tpl_rt *rt) { return rt->lim.today; }

void ld_tpl_rt_date_used(tpl_rt *rt)
{
    if (rt->lim.date_used) *rt->lim.date_used = 1;
}

ld_status ld_tpl_rt_fail(tpl_rt *rt, const tpl_node *at, ld_status code, const char *fmt, ...)
{
    if (rt->err && rt->err->code != LD_OK) return rt->err->code; /* keep the first */
    if (rt->err) {
        char m[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof m, fmt, ap);
        va_end(ap);
        uint64_t line = 0, col = 0;
        size_t off = at ? at->off : 0;
        ld_tpl_line_col(rt->t->src, off, &line, &col);
        LD_FAIL(rt->err, code, off, "%s at column %llu", m, (unsigned long long)col);
        rt->err->line = line;
    }
    return code;
}

ld_status ld_tpl_nomem(tpl_rt *rt, const tpl_node *at)
{
    return ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "memory limit of the render exceeded");
}

size_t ld_tpl_rt_mem_limit(const tpl_rt *rt) { return rt->lim.max_memory_bytes; }

/* The arena's cap is the limit plus what it held when the render began
 * (ld_tpl_render_in); what it has handed out counts against it.  This is
 * the most a new allocation could get: a result larger than it cannot fit. */
size_t ld_tpl_rt_mem_left(const tpl_rt *rt)
{
    const ld_arena *a = rt->arena;
    if (!a->max_bytes) return SIZE_MAX;
    return a->max_bytes > a->used_bytes ? a->max_bytes - a->used_bytes : 0;
}

ld_status ld_tpl_rt_charge(tpl_rt *rt, const tpl_node *at, const char *what, size_t bytes)
{
    size_t left = ld_tpl_rt_mem_left(rt);
    if (bytes <= left) return LD_OK;
    return ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT,
                          "%s: a result of at least %zu bytes is past the render's memory limit of %zu bytes (%zu left)", what,
                          bytes, ld_tpl_rt_mem_limit(rt), left);
}

ld_status ld_tpl_rt_over(tpl_rt *rt, const tpl_node *at, const char *what)
{
    return ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "%s: the result is past the render's memory limit of %zu bytes", what,
                          ld_tpl_rt_mem_limit(rt));
}

tv_buf ld_tpl_rt_buf(const tpl_rt *rt)
{
    size_t left = ld_tpl_rt_mem_left(rt);
    tv_buf b = {0};
    b.max = left ? left : 1; /* max 0 would mean unlimited */
    return b;
}

ld_status ld_tpl_rt_buf_value(tpl_rt *rt, const tpl_node *at, const char *what, tv_buf *b, ld_tpl_value **out)
{
    ld_tpl_value *r = b->failed ? NULL : ld_tv_str(rt->arena, b->p ? b->p : "", b->len);
    bool over = b->failed;
    free(b->p);
    b->p = NULL;
    if (over || !r) return ld_tpl_rt_over(rt, at, what);
    return *out = r, LD_OK;
}

ld_status ld_tpl_int_too_big(tpl_rt *rt, const tpl_node *at, const char *digits)
{
    return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "integer beyond 64 bits (not supported): %s", digits);
}

ld_status ld_tpl_float_to_int(tpl_rt *rt, const tpl_node *at, double d, int64_t *out)
{
    if (isnan(d)) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: cannot convert float NaN to integer");
    if (isinf(d)) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "overflow error: cannot convert float infinity to integer");
    double t = trunc(d);
    /* -2**63 <= t < 2**63, both bounds exact doubles: only then is the
     * conversion to int64_t defined */
    if (t >= -9223372036854775808.0 && t < 9223372036854775808.0) return *out = (int64_t)t, LD_OK;
    char digits[64];
    snprintf(digits, sizeof digits, fabs(t) < 1e50 ? "%.0f" : "%.17g", t); /* %.0f: the exact value */
    return ld_tpl_int_too_big(rt, at, digits);
}

/* the limit's error: a list that holds one long string many times prints
 * far more than it holds */
ld_tpl_value *ld_tpl_str_of(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v)
{
    if (v->kind == TV_STR) return (ld_tpl_value *)v;
    tv_buf b = ld_tpl_rt_buf(rt);
    bool printed = ld_tv_print(&b, v, false);
    if (printed && b.failed) ld_tpl_rt_over(rt, at, "str()");
    if (!printed || b.failed) { free(b.p); return NULL; }
    ld_tpl_value *s = ld_tv_str(rt->arena, b.p, b.len);
    free(b.p);
    return s;
}

ld_status ld_tpl_iter(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v, ld_tpl_value **out)
{
    ld_tpl_value *l = ld_tv_new(rt->arena, TV_LIST);
    NEW(rt, at, l);
    switch (v->kind) {
    case TV_LIST: *out = (ld_tpl_value *)v; return LD_OK;
    case TV_UNDEF: *out = l; return LD_OK;
    case TV_DICT: case TV_NS:
        for (size_t i = 0; i < v->u.dict.n; i++) NEW(rt, at, ld_tv_push(rt->arena, l, v->u.dict.keys[i]));
        *out = l;
        return LD_OK;
    case TV_STR:
        for (size_t i = 0; i < v->u.str.len;) {
            size_t j = i + 1;
            while (j < v->u.str.len && ((unsigned char)v->u.str.s[j] & 0xC0) == 0x80) j++;
            NEW(rt, at, ld_tv_push(rt->arena, l, ld_tv_str(rt->arena, v->u.str.s + i, j - i)));
            i = j;
        }
        *out = l;
        return LD_OK;
    default:
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: '%s' object is not iterable", ld_tv_type_name(v));
    }
}

/* ---------------------------------------------------------------- expressions */

ld_status ld_tpl_undefined_use(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v)
{
    char buf[200];
    const char *hint = ld_tv_undef_hint(v, buf, sizeof buf);
    if (v->flags & TV_F_UNSAFE) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "security error: %s", hint);
    return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "undefined error: %s", hint);
}
