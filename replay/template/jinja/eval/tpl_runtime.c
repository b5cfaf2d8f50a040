/* tpl_runtime.c - the render's runtime services that the evaluator and the
 * builtins share: its arena, "today", errors with the template's line and
 * column, str() of a value and iteration over one.  The leaf of the
 * interpreter's eval/ and builtins/. */
#include <math.h>
#include <stdarg.h>
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

ld_tpl_value *ld_tpl_str_of(tpl_rt *rt, const ld_tpl_value *v)
{
    if (v->kind == TV_STR) return (ld_tpl_value *)v;
    tv_buf b = {0};
    if (!ld_tv_print(&b, v, false) || b.failed) { free(b.p); return NULL; }
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
