/* tpl_num.c - jinja2's numeric and aggregate filters: round, sum, min,
 * max. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define A (ld_tpl_rt_arena(rt))
#define NEWV(expr) do { if (!(expr)) return ld_tpl_nomem(rt, at); } while (0)

static bool is(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* round(value, precision=0, method='common'): 'common' is Python's round()
 * (ties to even on the exact binary value, an int stays an int); 'floor'
 * and 'ceil' scale by 10**precision */
ld_status ld_tpl_filter_round(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *pv = ld_tpl_kwarg(a, "precision", 0), *mv = ld_tpl_kwarg(a, "method", 1);
    int64_t prec = pv && pv->kind == TV_INT ? pv->u.i : 0;
    const char *method = mv && mv->kind == TV_STR ? mv->u.str.s : "common";
    if (!is(method, "common") && !is(method, "floor") && !is(method, "ceil"))
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "filter argument error: method must be common, ceil or floor");
    if (v->kind != TV_INT && v->kind != TV_FLOAT && v->kind != TV_BOOL)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: type %s doesn't define __round__ method", ld_tv_type_name(v));
    double x = v->kind == TV_FLOAT ? v->u.f : v->kind == TV_INT ? (double)v->u.i : v->u.b, r;
    if (prec < -300 || prec > 300) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "round() precision %lld is not supported", (long long)prec);
    if (is(method, "common")) {
        if (v->kind != TV_FLOAT) return *out = v, LD_OK;
        if (prec >= 0 && isfinite(x)) {
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x); /* correctly rounded, ties to even */
            r = strtod(buf, NULL);
        } else {
            double p = pow(10.0, (double)-prec);
            r = nearbyint(x / p) * p;
        }
    } else {
        double p = pow(10.0, (double)prec);
        r = (method[0] == 'f' ? floor(x * p) : ceil(x * p)) / p;
    }
    NEWV(*out = ld_tv_float(A, r));
    return LD_OK;
}

static ld_status add(tpl_rt *rt, const tpl_node *at, ld_tpl_value *x, ld_tpl_value *y, ld_tpl_value **out)
{
    bool xn = x->kind == TV_INT || x->kind == TV_BOOL || x->kind == TV_FLOAT;
    bool yn = y->kind == TV_INT || y->kind == TV_BOOL || y->kind == TV_FLOAT;
    if (!xn || !yn)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: unsupported operand type(s) for +: '%s' and '%s'",
                           ld_tv_type_name(x), ld_tv_type_name(y));
    if (x->kind == TV_FLOAT || y->kind == TV_FLOAT) {
        double a1 = x->kind == TV_FLOAT ? x->u.f : x->kind == TV_INT ? (double)x->u.i : x->u.b;
        double b1 = y->kind == TV_FLOAT ? y->u.f : y->kind == TV_INT ? (double)y->u.i : y->u.b;
        NEWV(*out = ld_tv_float(A, a1 + b1));
    } else {
        int64_t a1 = x->kind == TV_INT ? x->u.i : x->u.b, b1 = y->kind == TV_INT ? y->u.i : y->u.b;
        NEWV(*out = ld_tpl_value_int(A, (int64_t)((uint64_t)a1 + (uint64_t)b1)));
    }
    return LD_OK;
}

/* sum(iterable, attribute=None, start=0) */
ld_status ld_tpl_filter_sum(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *attr = ld_tpl_kwarg(a, "attribute", 0), *acc = ld_tpl_kwarg(a, "start", 1), *items;
    if (!acc) NEWV(acc = ld_tpl_value_int(A, 0));
    LD_TRY(ld_tpl_iter(rt, at, v, &items));
    for (size_t i = 0; i < items->u.list.n; i++) {
        ld_tpl_value *x = items->u.list.items[i];
        if (attr && attr->kind == TV_STR) NEWV(x = ld_tpl_attr_path(rt, x, attr));
        LD_TRY(add(rt, at, acc, x, &acc));
    }
    return *out = acc, LD_OK;
}

/* min / max(value, case_sensitive=False, attribute=None): the first
 * smallest / largest item; undefined for an empty sequence */
ld_status ld_tpl_filter_minmax(tpl_rt *rt, const tpl_node *at, bool max, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *cs = ld_tpl_kwarg(a, "case_sensitive", 0), *attr = ld_tpl_kwarg(a, "attribute", 1), *items;
    bool fold = !(cs && ld_tv_truthy(cs));
    LD_TRY(ld_tpl_iter(rt, at, v, &items));
    ld_tpl_value *best = NULL, *best_key = NULL;
    for (size_t i = 0; i < items->u.list.n; i++) {
        ld_tpl_value *x = items->u.list.items[i], *k = x;
        if (attr && attr->kind == TV_STR) NEWV(k = ld_tpl_attr_path(rt, x, attr));
        if (fold && k->kind == TV_STR) NEWV(k = ld_tv_case_map(A, k->u.str.s, k->u.str.len, TV_CASE_LOWER));
        if (best) {
            bool ok;
            int c = ld_tv_compare(k, best_key, &ok);
            if (!ok)
                return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: '%s' not supported between instances of '%s' and '%s'",
                                   max ? ">" : "<", ld_tv_type_name(k), ld_tv_type_name(best_key));
            if (max ? c <= 0 : c >= 0) continue;
        }
        best = x, best_key = k;
    }
    NEWV(*out = best ? best : ld_tv_undef(A, "No aggregated item, sequence was empty."));
    return LD_OK;
}
