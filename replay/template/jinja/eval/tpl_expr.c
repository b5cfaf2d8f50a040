/* tpl_expr.c - expressions: names, literals, attribute and item access,
 * slices, calls (filters, tests, methods, globals, macros), comparisons and
 * boolean operators, with Python's semantics (arithmetic: tpl_arith.c). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_rt.h"

ld_tpl_value *ld_tpl_lookup(tpl_rt *rt, const char *name, size_t len)
{
    static const struct { const char *n; int id; } globals[] = {
        {"raise_exception", TF_RAISE}, {"strftime_now", TF_STRFTIME},
        {"namespace", TF_NAMESPACE}, {"range", TF_RANGE}, {"dict", TF_DICT}};
    for (frame *f = rt->cur; f; f = f->parent) {
        size_t i = ld_tv_key_index(f->vars, name, len);
        if (i < f->vars->u.dict.n) return f->vars->u.dict.vals[i];
    }
    if (rt->ctx) {
        size_t i = ld_tv_key_index(rt->ctx, name, len);
        if (i < rt->ctx->u.dict.n) return rt->ctx->u.dict.vals[i];
    }
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (strlen(globals[i].n) == len && memcmp(globals[i].n, name, len) == 0) {
            ld_tpl_value *v = ld_tv_new(rt->arena, TV_FUNC);
            if (v) v->u.func.id = globals[i].id;
            return v;
        }
    return ld_tv_undef_lazy(rt->arena, NULL, name, len); /* name: the template's */
}

ld_status ld_tpl_eval_args(tpl_rt *rt, const tpl_node *n, tpl_args *a)
{
    memset(a, 0, sizeof *a);
    a->n_pos = n->list.n, a->n_kw = n->list2.n, a->kw = n->kw;
    if (a->n_pos) NEW(rt, n, a->pos = ld_arena_alloc(rt->arena, a->n_pos * sizeof *a->pos));
    if (a->n_kw) NEW(rt, n, a->kwv = ld_arena_alloc(rt->arena, a->n_kw * sizeof *a->kwv));
    for (size_t i = 0; i < a->n_pos; i++) LD_TRY(ld_tpl_eval_expr(rt, n->list.v[i], &a->pos[i]));
    for (size_t i = 0; i < a->n_kw; i++) LD_TRY(ld_tpl_eval_expr(rt, n->list2.v[i], &a->kwv[i]));
    return LD_OK;
}

static ld_status call_func(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *f, tpl_args *a, ld_tpl_value **out)
{
    ld_arena *A = rt->arena;
    switch (f->u.func.id) {
    case TF_RAISE: {
        ld_tpl_value *m = a->n_pos ? ld_tpl_str_of(rt, at, a->pos[0]) : ld_tv_str(A, "", 0);
        NEW(rt, at, m);
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "template error '%.*s'", (int)(m->u.str.len > 150 ? 150 : m->u.str.len), m->u.str.s);
    }
    case TF_NAMESPACE: {
        ld_tpl_value *ns = ld_tv_new(A, TV_NS);
        NEW(rt, at, ns);
        for (size_t i = 0; i < a->n_pos; i++) {
            if (a->pos[i]->kind != TV_DICT) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: namespace() takes a dict");
            for (size_t k = 0; k < a->pos[i]->u.dict.n; k++)
                NEW(rt, at, ld_tv_dict_put(A, ns, a->pos[i]->u.dict.keys[k], a->pos[i]->u.dict.vals[k]));
        }
        for (size_t i = 0; i < a->n_kw; i++) NEW(rt, at, ld_tv_dict_put(A, ns, ld_tv_str_ref(A, a->kw[i], strlen(a->kw[i])), a->kwv[i])); /* the template's name */
        *out = ns;
        return LD_OK;
    }
    case TF_DICT: {
        ld_tpl_value *d = ld_tv_new(A, TV_DICT);
        NEW(rt, at, d);
        for (size_t i = 0; i < a->n_kw; i++) NEW(rt, at, ld_tv_dict_put(A, d, ld_tv_str_ref(A, a->kw[i], strlen(a->kw[i])), a->kwv[i]));
        *out = d;
        return LD_OK;
    }
    default:
        return ld_tpl_filter(rt, at, f->u.func.id == TF_RANGE ? "__range" : "__strftime_now", NULL, a, out);
    }
}

static ld_status eval_call(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *f;
    tpl_args a;
    LD_TRY(ld_tpl_eval_expr(rt, n->a, &f));
    if (f->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n, f);
    LD_TRY(ld_tpl_eval_args(rt, n, &a));
    switch (f->kind) {
    case TV_METHOD: return ld_tpl_method(rt, n, f->u.method.self, f->u.method.name, &a, out);
    case TV_MACRO: return ld_tpl_call_macro(rt, n, f, &a, out);
    case TV_DICT:
        if (f->flags & TV_F_LOOP) return ld_tpl_call_loop(rt, n, f, &a, out);
        break;
    case TV_FUNC: return call_func(rt, n, f, &a, out);
    default: break;
    }
    return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: '%s' object is not callable", ld_tv_type_name(f));
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static ld_status eval_slice(tpl_rt *rt, const tpl_node *n, ld_tpl_value *obj, ld_tpl_value **out)
{
    int64_t p[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; k++) {
        ld_tpl_value *v;
        if (!n->list.v[k]) continue;
        LD_TRY(ld_tpl_eval_expr(rt, n->list.v[k], &v));
        if (v->kind == TV_NONE) continue;
        if (v->kind != TV_INT && v->kind != TV_BOOL)
            return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: slice indices must be integers or None");
        p[k] = v->kind == TV_INT ? v->u.i : v->u.b, given[k] = true;
    }
    if (p[2] == 0) return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "value error: slice step cannot be zero");
    ld_tpl_value *items = obj;
    if (obj->kind == TV_STR) LD_TRY(ld_tpl_iter(rt, n, obj, &items));
    else if (obj->kind != TV_LIST) {
        if (obj->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n, obj);
        return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: '%s' object is not subscriptable", ld_tv_type_name(obj));
    }
    int64_t len = (int64_t)items->u.list.n, st = p[2];
    int64_t lo = st > 0 ? 0 : -1, hi = st > 0 ? len : len - 1;
    int64_t b = given[0] ? (p[0] < 0 ? p[0] + len : p[0]) : (st > 0 ? 0 : len - 1);
    int64_t e = given[1] ? (p[1] < 0 ? p[1] + len : p[1]) : (st > 0 ? len : -1);
    b = clampi(b, lo, hi), e = given[1] ? clampi(e, lo, hi) : e;
    ld_tpl_value *r = ld_tv_new(rt->arena, TV_LIST);
    NEW(rt, n, r);
    r->flags = obj->flags & TV_F_TUPLE;
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
        NEW(rt, n, ld_tv_push(rt->arena, r, items->u.list.items[i]));
        if (st > 0 ? st >= e - i : st <= e - i) break; /* the next one is past the end: stop before i + st overflows */
    }
    if (obj->kind == TV_STR) {
        tv_buf s = {0};
        for (size_t i = 0; i < r->u.list.n; i++) ld_tv_buf_put(&s, r->u.list.items[i]->u.str.s, r->u.list.items[i]->u.str.len);
        r = s.failed ? NULL : ld_tv_str(rt->arena, s.p, s.len);
        free(s.p);
        NEW(rt, n, r);
    }
    *out = r;
    return LD_OK;
}

static ld_status getitem(tpl_rt *rt, const tpl_node *n, ld_tpl_value *obj, ld_tpl_value *key, ld_tpl_value **out)
{
    if (obj->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n, obj);
    if ((obj->kind == TV_LIST || obj->kind == TV_STR) && (key->kind == TV_INT || key->kind == TV_BOOL)) {
        ld_tpl_value *items = obj;
        if (obj->kind == TV_STR) LD_TRY(ld_tpl_iter(rt, n, obj, &items));
        int64_t i = key->kind == TV_INT ? key->u.i : key->u.b, len = (int64_t)items->u.list.n;
        if (i < 0) i += len;
        if (i >= 0 && i < len) return *out = items->u.list.items[i], LD_OK;
        NEW(rt, n, *out = ld_tv_undef(rt->arena, "index out of range"));
        return LD_OK;
    }
    if ((obj->kind == TV_DICT || obj->kind == TV_NS) && key->kind == TV_STR) { /* x['key'], the common case */
        size_t i = ld_tv_key_index(obj, key->u.str.s, key->u.str.len);
        if (i < obj->u.dict.n) return *out = obj->u.dict.vals[i], LD_OK;
    } else if (obj->kind == TV_DICT || obj->kind == TV_NS) {
        ld_tpl_value *v = ld_tv_dict_getv(obj, key);
        if (v) return *out = v, LD_OK;
    }
    if (key->kind == TV_STR) {
        NEW(rt, n, *out = ld_tpl_getattr(rt, obj, key->u.str.s, key->u.str.len));
        return LD_OK;
    }
    char hint[160];
    snprintf(hint, sizeof hint, "'%s object' has no item", ld_tv_type_name(obj));
    NEW(rt, n, *out = ld_tv_undef(rt->arena, hint));
    return LD_OK;
}

static ld_status contains(tpl_rt *rt, const tpl_node *n, ld_tpl_value *x, ld_tpl_value *c, bool *out)
{
    *out = false;
    if (c->kind == TV_STR) {
        if (x->kind != TV_STR)
            return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: 'in <string>' requires string as left operand, not %s", ld_tv_type_name(x));
        *out = ld_tv_memfind(c->u.str.s, c->u.str.len, x->u.str.s, x->u.str.len) != NULL;
        return LD_OK;
    }
    if (c->kind == TV_DICT || c->kind == TV_NS) return *out = ld_tv_dict_getv(c, x) != NULL, LD_OK;
    if (c->kind == TV_LIST) {
        for (size_t i = 0; i < c->u.list.n; i++) if (ld_tv_equal(c->u.list.items[i], x)) return *out = true, LD_OK;
        return LD_OK;
    }
    if (c->kind == TV_UNDEF) return LD_OK;
    return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: argument of type '%s' is not iterable", ld_tv_type_name(c));
}

static ld_status eval_binop(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *a, *b;
    LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
    LD_TRY(ld_tpl_eval_expr(rt, n->b, &b));
    if (n->neg == '~') {
        ld_tpl_value *x = a->kind == TV_UNDEF ? ld_tv_str(rt->arena, "", 0) : ld_tpl_str_of(rt, n, a);
        ld_tpl_value *y = b->kind == TV_UNDEF ? ld_tv_str(rt->arena, "", 0) : ld_tpl_str_of(rt, n, b);
        if (!x || !y) return ld_tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "cannot convert value to string");
        return ld_tpl_arith(rt, n, '+', x, y, out);
    }
    return ld_tpl_arith(rt, n, (char)n->neg, a, b, out);
}

static ld_status eval_compare(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *a, *b;
    bool r, ok = true;
    if (n->c) { /* a chain: false as soon as one link is */
        LD_TRY(ld_tpl_eval_expr(rt, n->c, &a));
        if (!ld_tv_truthy(a)) return *out = a, LD_OK;
    }
    LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
    LD_TRY(ld_tpl_eval_expr(rt, n->b, &b));
    switch (n->neg) {
    case 1: case 2: /* == and !=; two strings (a message's role against a literal) without a call */
        if (a->kind == TV_STR && b->kind == TV_STR)
            r = a->u.str.len == b->u.str.len && ld_tv_same_bytes(a->u.str.s, b->u.str.s, a->u.str.len);
        else
            r = ld_tv_equal(a, b);
        if (n->neg == 2) r = !r;
        break;
    case 7: case 8: LD_TRY(contains(rt, n, a, b, &r)); if (n->neg == 8) r = !r; break;
    default: {
        if (a->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n, a);
        if (b->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n, b);
        int c = ld_tv_compare(a, b, &ok);
        r = n->neg == 3 ? c < 0 : n->neg == 4 ? c <= 0 : n->neg == 5 ? c > 0 : c >= 0;
    }
    }
    if (!ok) return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: '<' not supported between instances of '%s' and '%s'",
                                ld_tv_type_name(a), ld_tv_type_name(b));
    *out = ld_tv_bool(r);
    return LD_OK;
}

static ld_status eval_seq(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *r = ld_tv_new(rt->arena, n->kind == N_DICT ? TV_DICT : TV_LIST), *k, *v;
    NEW(rt, n, r);
    if (n->kind == N_TUPLE) r->flags |= TV_F_TUPLE;
    for (size_t i = 0; i < n->list.n; i++) {
        LD_TRY(ld_tpl_eval_expr(rt, n->list.v[i], &k));
        if (n->kind == N_DICT) {
            LD_TRY(ld_tpl_eval_expr(rt, n->list2.v[i], &v));
            NEW(rt, n, ld_tv_dict_put(rt->arena, r, k, v));
        } else {
            NEW(rt, n, ld_tv_push(rt->arena, r, k));
        }
    }
    *out = r;
    return LD_OK;
}

static ld_status eval_node(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *a, *b;
    tpl_args args;
    switch (n->kind) {
    case N_CONST: *out = (ld_tpl_value *)n->lit; return LD_OK;
    case N_NAME: NEW(rt, n, *out = ld_tpl_lookup(rt, n->s, n->s_len)); return LD_OK;
    case N_GETATTR:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
        if (a->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n, a);
        NEW(rt, n, *out = ld_tpl_getattr(rt, a, n->s, n->s_len));
        return LD_OK;
    case N_GETITEM:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
        LD_TRY(ld_tpl_eval_expr(rt, n->b, &b));
        return getitem(rt, n, a, b, out);
    case N_SLICE:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
        return eval_slice(rt, n, a, out);
    case N_CALL: return eval_call(rt, n, out);
    case N_FILTER:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
        LD_TRY(ld_tpl_eval_args(rt, n, &args));
        return ld_tpl_filter(rt, n, n->s, a, &args, out);
    case N_TEST: {
        bool r;
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
        LD_TRY(ld_tpl_eval_args(rt, n, &args));
        LD_TRY(ld_tpl_test(rt, n, n->s, a, &args, &r));
        *out = ld_tv_bool(n->neg ? !r : r);
        return LD_OK;
    }
    case N_BINOP: return eval_binop(rt, n, out);
    case N_UNARY:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
        if (n->neg == '+' && tpl_is_number(a)) return *out = a, LD_OK;
        if (a->kind == TV_FLOAT) { /* -x, not 0 - x: -0.0 keeps its sign */
            NEW(rt, n, *out = ld_tv_float(rt->arena, -a->u.f));
            return LD_OK;
        }
        NEW(rt, n, b = ld_tpl_value_int(rt->arena, 0));
        return ld_tpl_arith(rt, n, '-', b, a, out);
    case N_AND: case N_OR:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
        if (ld_tv_truthy(a) == (n->kind == N_OR)) return *out = a, LD_OK;
        return ld_tpl_eval_expr(rt, n->b, out);
    case N_NOT:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
        *out = ld_tv_bool(!ld_tv_truthy(a));
        return LD_OK;
    case N_COMPARE: return eval_compare(rt, n, out);
    case N_COND:
        LD_TRY(ld_tpl_eval_expr(rt, n->b, &a));
        if (ld_tv_truthy(a)) return ld_tpl_eval_expr(rt, n->a, out);
        if (n->c) return ld_tpl_eval_expr(rt, n->c, out);
        NEW(rt, n, *out = ld_tv_undef(rt->arena, "the inline if-expression evaluated to false and no else section was defined"));
        return LD_OK;
    case N_LIST: case N_DICT: case N_TUPLE: return eval_seq(rt, n, out);
    case N_BLOCK_VALUE: NEW(rt, n, *out = rt->block_value); return LD_OK;
    default: return ld_tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "unknown expression");
    }
}

/* A name's value; NOMEM at n when an undefined could not be made. */
static TPL_NOINLINE ld_status eval_name(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    NEW(rt, n, *out = ld_tpl_lookup(rt, n->s, n->s_len));
    return LD_OK;
}

/* Any other expression, one level deeper. */
static TPL_NOINLINE ld_status eval_nested(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    if (++rt->nest > MAX_NEST) return ld_tpl_rt_fail(rt, n, LD_ERR_LIMIT, "nesting limit exceeded");
    ld_status s = eval_node(rt, n, out);
    rt->nest--;
    return s;
}

ld_status ld_tpl_eval_expr(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    /* the leaves, which nest nothing, without eval_node's frame */
    if (n->kind == N_CONST) return *out = (ld_tpl_value *)n->lit, LD_OK;
    if (n->kind == N_NAME) return eval_name(rt, n, out);
    return eval_nested(rt, n, out);
}
