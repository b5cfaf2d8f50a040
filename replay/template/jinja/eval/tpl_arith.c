/* tpl_arith.c - the arithmetic operators with Python's semantics: + on
 * strings and lists, * repeating them, int and float division, floor
 * division and modulo rounding toward negative infinity, ** by squaring;
 * an int result beyond 64 bits is refused rather than wrapped. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_rt.h"

static double fnum(const ld_tpl_value *v) { return v->kind == TV_FLOAT ? v->u.f : v->kind == TV_INT ? (double)v->u.i : v->u.b; }
static int64_t inum(const ld_tpl_value *v) { return v->kind == TV_INT ? v->u.i : v->u.b; }

/* str + str, list + list */
static ld_status concat(tpl_rt *rt, const tpl_node *n, ld_tpl_value *a, ld_tpl_value *b, ld_tpl_value **out)
{
    ld_arena *A = rt->arena;
    if (a->kind == TV_STR) {
        LD_TRY(ld_tpl_rt_charge(rt, n, "concatenation", a->u.str.len + b->u.str.len + 1));
        char *s = ld_arena_alloc(A, a->u.str.len + b->u.str.len + 1);
        ld_tpl_value *r = ld_tv_new(A, TV_STR);
        if (!s || !r) return ld_tpl_rt_over(rt, n, "concatenation");
        memcpy(s, a->u.str.s, a->u.str.len);
        memcpy(s + a->u.str.len, b->u.str.s, b->u.str.len);
        s[a->u.str.len + b->u.str.len] = 0;
        r->u.str.s = s, r->u.str.len = a->u.str.len + b->u.str.len;
        return *out = r, LD_OK;
    }
    ld_tpl_value *r = ld_tv_new(A, TV_LIST);
    NEW(rt, n, r);
    for (size_t i = 0; i < a->u.list.n; i++) NEW(rt, n, ld_tv_push(A, r, a->u.list.items[i]));
    for (size_t i = 0; i < b->u.list.n; i++) NEW(rt, n, ld_tv_push(A, r, b->u.list.items[i]));
    return *out = r, LD_OK;
}

/* [x] * n, "s" * n: the result's size is charged first (a string against
 * the output limit too: it is text to print), then the result is made in
 * the render's arena */
static ld_status repeat(tpl_rt *rt, const tpl_node *n, ld_tpl_value *a, int64_t times, ld_tpl_value **out)
{
    ld_arena *A = rt->arena;
    bool list = a->kind == TV_LIST;
    size_t t = times < 0 ? 0 : (size_t)times, unit = list ? a->u.list.n : a->u.str.len, count, bytes;
    if (__builtin_mul_overflow(unit, t, &count)) count = SIZE_MAX;
    if (!list && count > rt->lim.max_output_bytes)
        return ld_tpl_rt_fail(rt, n, LD_ERR_LIMIT, "'*': a string of at least %zu bytes is past the render's output limit of %zu bytes",
                              count, rt->lim.max_output_bytes);
    if (__builtin_mul_overflow(count, list ? sizeof(ld_tpl_value *) : 1, &bytes)) bytes = SIZE_MAX;
    LD_TRY(ld_tpl_rt_charge(rt, n, "'*'", bytes));
    ld_tpl_value *r = ld_tv_new(A, a->kind);
    char *p = ld_arena_alloc(A, bytes + !list); /* a string's NUL */
    if (!r || !p) return ld_tpl_rt_over(rt, n, "'*'");
    const char *src = list ? (const char *)a->u.list.items : a->u.str.s;
    size_t ub = bytes / (t ? t : 1), done = bytes ? ub : 0;
    if (done) memcpy(p, src, ub);
    for (; done < bytes; done *= 2) /* double what is there */
        memcpy(p + done, p, done < bytes - done ? done : bytes - done);
    if (list) {
        r->flags = a->flags & TV_F_TUPLE;
        r->u.list.items = (ld_tpl_value **)(void *)p, r->u.list.n = r->u.list.cap = count;
    } else {
        p[bytes] = 0;
        r->u.str.s = p, r->u.str.len = bytes;
    }
    return *out = r, LD_OK;
}

static ld_status float_op(tpl_rt *rt, const tpl_node *n, char op, double x, double y, ld_tpl_value **out)
{
    double r;
    switch (op) {
    case '+': r = x + y; break;
    case '-': r = x - y; break;
    case '*': r = x * y; break;
    case '/': r = x / y; break;
    case 'f': r = floor(x / y); break;
    case '%': r = fmod(x, y); if (r != 0 && ((r < 0) != (y < 0))) r += y; break;
    default: r = pow(x, y);
    }
    NEW(rt, n, *out = ld_tv_float(rt->arena, r));
    return LD_OK;
}

/* x ** y for y >= 0 by squaring; *over when it leaves 64 bits */
static int64_t int_pow(int64_t x, int64_t y, bool *over)
{
    int64_t r = 1, bs = x;
    for (uint64_t e = (uint64_t)y; e && !*over;) {
        if (e & 1) *over = __builtin_mul_overflow(r, bs, &r);
        e >>= 1;
        if (e && !*over) *over = __builtin_mul_overflow(bs, bs, &bs);
    }
    return r;
}

static ld_status int_op(tpl_rt *rt, const tpl_node *n, char op, int64_t x, int64_t y, ld_tpl_value **out)
{
    int64_t r = 0;
    bool over = false;
    switch (op) {
    case '+': over = __builtin_add_overflow(x, y, &r); break;
    case '-': over = __builtin_sub_overflow(x, y, &r); break;
    case '*': over = __builtin_mul_overflow(x, y, &r); break;
    case 'f':
        if (x == INT64_MIN && y == -1) { over = true; break; }
        r = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
        break;
    case '%': r = (y == -1) ? 0 : x % y; if (r != 0 && ((r < 0) != (y < 0))) r += y; break;
    default:
        if (y < 0) return float_op(rt, n, op, (double)x, (double)y, out);
        r = int_pow(x, y, &over);
    }
    if (over) /* Python's ints have no bound: no wrapped-around result */
        return ld_tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "integer result beyond 64 bits is not supported");
    NEW(rt, n, *out = ld_tpl_value_int(rt->arena, r));
    return LD_OK;
}

ld_status ld_tpl_arith(tpl_rt *rt, const tpl_node *n, char op, ld_tpl_value *a, ld_tpl_value *b, ld_tpl_value **out)
{
    if (a->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n, a);
    if (b->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n, b);
    if (op == '+' && ((a->kind == TV_STR && b->kind == TV_STR) || (a->kind == TV_LIST && b->kind == TV_LIST)))
        return concat(rt, n, a, b, out);
    if (op == '*' && a->kind == TV_INT && (b->kind == TV_STR || b->kind == TV_LIST)) return repeat(rt, n, b, a->u.i, out);
    if (op == '*' && (a->kind == TV_LIST || a->kind == TV_STR) && b->kind == TV_INT) return repeat(rt, n, a, b->u.i, out);
    if (!tpl_is_number(a) || !tpl_is_number(b)) {
        if (op == '+' && a->kind == TV_STR)
            return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: can only concatenate str (not \"%s\") to str", ld_tv_type_name(b));
        return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: unsupported operand type(s) for %c: '%s' and '%s'", op,
                           ld_tv_type_name(a), ld_tv_type_name(b));
    }
    if ((op == '/' || op == 'f' || op == '%') && fnum(b) == 0)
        return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "zero division error: division by zero");
    if (a->kind == TV_FLOAT || b->kind == TV_FLOAT || op == '/') return float_op(rt, n, op, fnum(a), fnum(b), out);
    return int_op(rt, n, op, inum(a), inum(b), out);
}
