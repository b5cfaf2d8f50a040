/* tpl_num.c - jinja2's numeric and aggregate filters: round, sum, min,
 * max; int, float and abs, with Python's int(s, base) and float(s) syntax
 * for strings and no integer beyond 64 bits (refused, never wrapped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define A (ld_tpl_rt_arena(rt))
#define NEWV(expr) do { if (!(expr)) return ld_tpl_nomem(rt, at); } while (0)

static inline bool is(const char *a, const char *b) { return ld_tpl_name_is(a, b); }

/* ---------------------------------------------------------------- int, float */

/* the whitespace str.strip() removes, ASCII part */
static bool py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F); }

/* s[0..n) without the whitespace around it */
static void trim(const char **s, size_t *n)
{
    while (*n && py_space(**s)) (*s)++, (*n)--;
    while (*n && py_space((*s)[*n - 1])) (*n)--;
}

static int digit_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)(c | 32);
    return c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
}

enum { INT_BAD, INT_OK, INT_BIG };

/* the base prefix (0x 0o 0b) at s, for base 0 or its own base: its length,
 * with *base set when it was 0 */
static size_t int_prefix(const char *s, size_t n, int64_t *base)
{
    if (n < 2 || s[0] != '0') return 0;
    char c = (char)(s[1] | 32);
    int64_t b = c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;
    if (!b || (*base && *base != b)) return 0;
    *base = b;
    return 2;
}

/* Python's int(s, base) of an ASCII string: whitespace around it, a sign,
 * a base prefix (base 0 or its own base), digits with single underscores
 * between them (and after a prefix); base 0 takes no leading zero unless
 * the number is 0.  INT_BIG for a valid number beyond 64 bits. */
static int parse_int(const char *s, size_t n, int64_t base, int64_t *out)
{
    trim(&s, &n);
    bool neg = n && s[0] == '-';
    if (n && (s[0] == '-' || s[0] == '+')) s++, n--;
    if (base != 0 && (base < 2 || base > 36)) return INT_BAD;
    bool base0 = base == 0;
    size_t i = int_prefix(s, n, &base);
    if (!base) base = 10;
    if (i && i < n && s[i] == '_') i++;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    bool big = false, any = false, nonzero = false;
    for (; i < n; i++) {
        if (s[i] == '_' && any && i + 1 < n && s[i + 1] != '_') continue;
        int d = digit_value(s[i]);
        if (d >= base) return INT_BAD;
        if (base0 && base == 10 && any && !nonzero && d) return INT_BAD; /* 012 */
        big = big || v > (lim - (uint64_t)d) / (uint64_t)base;
        if (!big) v = v * (uint64_t)base + (uint64_t)d;
        any = true, nonzero = nonzero || d;
    }
    if (!any) return INT_BAD;
    if (big) return INT_BIG;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v; /* 0 - 2**63 wraps to INT64_MIN */
    return INT_OK;
}

/* digits with single underscores between them at s[*i..n) into o[*k..):
 * whether there was one */
static bool float_digits(const char *s, size_t n, size_t *i, char *o, size_t *k)
{
    size_t start = *i;
    for (; *i < n; (*i)++) {
        if (s[*i] == '_' && *i > start && *i + 1 < n && s[*i + 1] >= '0' && s[*i + 1] <= '9') continue;
        if (s[*i] < '0' || s[*i] > '9') break;
        o[(*k)++] = s[*i];
    }
    return *i > start;
}

/* s[0..n) equals the lower-case `lit`, ignoring ASCII case */
static bool ascii_ieq(const char *s, const char *lit, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 32) != lit[i]) return false;
    return true;
}

/* Python's float(s) of an ASCII string: [sign] (inf | infinity | nan |
 * digits [. [digits]] [exponent] | . digits [exponent]), underscores
 * between digits, whitespace around it; false when it is not one (strtod
 * alone would take hex and nan(...) too).  o has room for n + 1 bytes. */
static bool parse_float(const char *s, size_t n, char *o, double *out)
{
    trim(&s, &n);
    size_t i = 0, k = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) o[k++] = s[i++];
    const char *w = s + i;
    size_t wl = n - i;
    bool named = (wl == 3 && (ascii_ieq(w, "inf", 3) || ascii_ieq(w, "nan", 3))) || (wl == 8 && ascii_ieq(w, "infinity", 8));
    if (named) {
        memcpy(o + k, w, wl), k += wl;
    } else {
        bool lead = float_digits(s, n, &i, o, &k), frac = false;
        if (i < n && s[i] == '.') o[k++] = s[i++], frac = float_digits(s, n, &i, o, &k);
        if (!lead && !frac) return false;
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
            o[k++] = s[i++];
            if (i < n && (s[i] == '-' || s[i] == '+')) o[k++] = s[i++];
            if (!float_digits(s, n, &i, o, &k)) return false;
        }
        if (i != n) return false;
    }
    o[k] = 0;
    *out = strtod(o, NULL);
    return true;
}

/* int(s, base) of a string into *i (LD_OK with *done), else float(s) into
 * *d (NaN when s is not a float either); a valid int beyond 64 bits is
 * refused */
static ld_status str_number(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v, int64_t base, int64_t *i, bool *done,
                            double *d)
{
    int r = parse_int(v->u.str.s, v->u.str.len, base, i);
    *done = r == INT_OK;
    if (r == INT_BIG) {
        char lit[64];
        snprintf(lit, sizeof lit, "%.*s", (int)(v->u.str.len > 60 ? 60 : v->u.str.len), v->u.str.s);
        return ld_tpl_int_too_big(rt, at, lit);
    }
    if (r == INT_OK) return LD_OK;
    char *o = ld_arena_alloc(A, v->u.str.len + 1);
    NEWV(o);
    if (!parse_float(v->u.str.s, v->u.str.len, o, d)) *d = NAN;
    return LD_OK;
}

/* int(value, default=0, base=10) of jinja2: int(value, base) for a string,
 * int(value) otherwise; when that fails, int(float(value)); when that fails
 * too, the default.  A number beyond 64 bits (Python's int has no bound)
 * is refused with the value in the message, never wrapped. */
static ld_status filter_int(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *dv = ld_tpl_kwarg(a, "default", 0), *bv = ld_tpl_kwarg(a, "base", 1);
    int64_t i = 0, base = !bv ? 10 : bv->kind == TV_INT ? bv->u.i : bv->kind == TV_BOOL ? bv->u.b : -1;
    double d = NAN; /* what int(float(value)) converts; NaN when float(value) fails */
    bool done = false;
    if (v->kind == TV_INT) return *out = v, LD_OK;
    if (v->kind == TV_BOOL) i = v->u.b, done = true;
    else if (v->kind == TV_FLOAT && isinf(v->u.f))
        return ld_tpl_float_to_int(rt, at, v->u.f, &i); /* int(inf): an OverflowError jinja2 does not catch */
    else if (v->kind == TV_FLOAT) d = v->u.f;
    else if (v->kind == TV_STR) LD_TRY(str_number(rt, at, v, base, &i, &done, &d));
    if (!done && !isfinite(d)) { /* ValueError (NaN, not a number) or OverflowError (inf): the default */
        if (!dv) NEWV(dv = ld_tpl_value_int(A, 0));
        return *out = dv, LD_OK;
    }
    if (!done) LD_TRY(ld_tpl_float_to_int(rt, at, d, &i));
    NEWV(*out = ld_tpl_value_int(A, i));
    return LD_OK;
}

/* float(value, default=0.0): float(value), the default when it fails */
static ld_status filter_float(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *dv = ld_tpl_kwarg(a, "default", 0);
    double d = NAN;
    bool ok = true;
    if (v->kind == TV_FLOAT) return *out = v, LD_OK;
    if (v->kind == TV_INT || v->kind == TV_BOOL) d = v->kind == TV_INT ? (double)v->u.i : v->u.b;
    else if (v->kind == TV_STR) {
        char *o = ld_arena_alloc(A, v->u.str.len + 1);
        NEWV(o);
        ok = parse_float(v->u.str.s, v->u.str.len, o, &d);
    } else {
        ok = false;
    }
    if (!ok) {
        if (!dv) NEWV(dv = ld_tv_float(A, 0.0));
        return *out = dv, LD_OK;
    }
    NEWV(*out = ld_tv_float(A, d));
    return LD_OK;
}

/* abs(): abs(-2**63) is 2**63, beyond 64 bits */
static ld_status filter_abs(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, ld_tpl_value **out)
{
    if (v->kind == TV_INT && v->u.i == INT64_MIN) return ld_tpl_int_too_big(rt, at, "9223372036854775808");
    if (v->kind == TV_INT || v->kind == TV_BOOL) {
        int64_t i = v->kind == TV_INT ? v->u.i : v->u.b;
        NEWV(*out = ld_tpl_value_int(A, i < 0 ? -i : i));
    } else if (v->kind == TV_FLOAT) {
        NEWV(*out = ld_tv_float(A, fabs(v->u.f)));
    } else {
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: bad operand type for abs(): '%s'", ld_tv_type_name(v));
    }
    return LD_OK;
}

/* int / float / abs */
ld_status ld_tpl_filter_number(tpl_rt *rt, const tpl_node *at, const char *f, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    if (is(f, "int")) return filter_int(rt, at, v, a, out);
    if (is(f, "float")) return filter_float(rt, at, v, a, out);
    return filter_abs(rt, at, v, out);
}

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
        int64_t a1 = x->kind == TV_INT ? x->u.i : x->u.b, b1 = y->kind == TV_INT ? y->u.i : y->u.b, r;
        if (__builtin_add_overflow(a1, b1, &r)) /* Python's ints have no bound: no wrapped-around sum */
            return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "integer result beyond 64 bits is not supported");
        NEWV(*out = ld_tpl_value_int(A, r));
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
