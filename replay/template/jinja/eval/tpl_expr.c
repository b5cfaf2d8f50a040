/* tpl_expr.c - expressions: names, literals, attribute and item access,
 * slices, calls (filters, tests, methods, globals, macros), comparisons and
 * boolean operators, with Python's semantics (arithmetic: tpl_arith.c). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ld_memfind.h"
#include "tpl_rt.h"

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

/* The callee of n: x.name as N_GETATTR makes it, except that a string's
 * method (s.startswith(...), s.split(...)) is not made: *self = the string,
 * *f NULL, and the caller calls it by the template's name. */
static ld_status callee(tpl_rt *rt, const tpl_node *n, ld_tpl_value **f, ld_tpl_value **self)
{
    const tpl_node *g = n->a;
    *self = NULL;
    if (g->kind != N_GETATTR) return ld_tpl_eval_expr(rt, g, f);
    ld_tpl_value *obj;
    LD_TRY(ld_tpl_eval_expr(rt, g->a, &obj));
    if (obj->kind == TV_STR && ld_tpl_has_method(obj, g->s)) return *self = obj, *f = NULL, LD_OK;
    if (obj->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, g, obj);
    NEW(rt, g, *f = ld_tpl_getattr(rt, obj, g->s, g->s_len));
    return LD_OK;
}

static ld_status eval_call(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *f, *self;
    tpl_args a;
    LD_TRY(callee(rt, n, &f, &self));
    if (self) {
        LD_TRY(ld_tpl_eval_args(rt, n, &a));
        return ld_tpl_method(rt, n, self, n->a->s, &a, out);
    }
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
    /* b, b + st, ... short of e: counted first (k * |st| stays within the
     * span, so nothing overflows), then copied into one array */
    uint64_t mag = st > 0 ? (uint64_t)st : 0 - (uint64_t)st;
    int64_t span = st > 0 ? e - b : b - e;
    size_t count = span > 0 ? (size_t)(((uint64_t)span - 1) / mag + 1) : 0;
    if (count) {
        NEW(rt, n, r->u.list.items = ld_arena_alloc(rt->arena, count * sizeof *r->u.list.items));
        for (size_t k = 0; k < count; k++)
            r->u.list.items[k] = items->u.list.items[st > 0 ? b + (int64_t)(k * mag) : b - (int64_t)(k * mag)];
        r->u.list.n = r->u.list.cap = count;
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

/* x in dict d: a string key, the usual (`'tool_calls' in message`),
 * found in one call, not inlined into the conditions */
static TPL_NOINLINE bool dict_has(const ld_tpl_value *d, const ld_tpl_value *x)
{
    if (x->kind == TV_STR) return ld_tv_key_index(d, x->u.str.s, x->u.str.len) < d->u.dict.n;
    return ld_tv_dict_getv(d, x) != NULL;
}

static ld_status contains(tpl_rt *rt, const tpl_node *n, ld_tpl_value *x, ld_tpl_value *c, bool *out)
{
    *out = false;
    if (c->kind == TV_STR) {
        if (x->kind != TV_STR)
            return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: 'in <string>' requires string as left operand, not %s", ld_tv_type_name(x));
        *out = ld_memfind(c->u.str.s, c->u.str.len, x->u.str.s, x->u.str.len) != NULL;
        return LD_OK;
    }
    if (c->kind == TV_DICT) return *out = dict_has(c, x), LD_OK; /* a namespace is not iterable: refused below */
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

/* a `op` b for comparison n (its own link of a chain) */
static ld_status compare_values(tpl_rt *rt, const tpl_node *n, ld_tpl_value *a, ld_tpl_value *b, bool *out)
{
    bool r, ok = true;
    switch (n->neg) {
    case 1: case 2: /* == and !=; two strings (a message's role against a literal) without a call */
        if (a->kind == TV_STR && b->kind == TV_STR)
            r = a->u.str.len == b->u.str.len && ld_tv_same_bytes(a->u.str.s, b->u.str.s, a->u.str.len);
        else if (a->kind == TV_INT && b->kind == TV_INT) /* `x | length == 1` */
            r = a->u.i == b->u.i;
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
    *out = r;
    return LD_OK;
}

static ld_status eval_compare(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *a, *b;
    bool r;
    if (n->c) { /* a chain: false as soon as one link is */
        LD_TRY(ld_tpl_eval_expr(rt, n->c, &a));
        if (!ld_tv_truthy(a)) return *out = a, LD_OK;
    }
    LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
    LD_TRY(ld_tpl_eval_expr(rt, n->b, &b));
    LD_TRY(compare_values(rt, n, a, b, &r));
    *out = ld_tv_bool(r);
    return LD_OK;
}

/* `x is test(args)` / `x is not test(args)`; a test of x's kind alone,
 * without arguments, without looking it up by name */
static ld_status eval_test(tpl_rt *rt, const tpl_node *n, bool *out)
{
    ld_tpl_value *a;
    tpl_args args;
    LD_TRY(ld_tpl_eval_expr(rt, n->a, &a));
    if (n->slot != TPL_TEST_BY_NAME && !n->list.n && !n->list2.n) {
        *out = ld_tpl_kind_test(n->slot, a) != (n->neg != 0);
        return LD_OK;
    }
    LD_TRY(ld_tpl_eval_args(rt, n, &args));
    LD_TRY(ld_tpl_test(rt, n, n->s, a, &args, out));
    if (n->neg) *out = !*out;
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
    case N_NAME: NEW(rt, n, *out = tpl_lookup(rt, n)); return LD_OK;
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
        return ld_tpl_filter_node(rt, n, a, &args, out);
    case N_TEST: {
        bool r;
        LD_TRY(eval_test(rt, n, &r));
        *out = ld_tv_bool(r);
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
    case N_NOT: {
        bool r;
        LD_TRY(ld_tpl_eval_cond(rt, n->a, &r));
        *out = ld_tv_bool(!r);
        return LD_OK;
    }
    case N_COMPARE: return eval_compare(rt, n, out);
    case N_COND: {
        bool r;
        LD_TRY(ld_tpl_eval_cond(rt, n->b, &r));
        if (r) return ld_tpl_eval_expr(rt, n->a, out);
        if (n->c) return ld_tpl_eval_expr(rt, n->c, out);
        NEW(rt, n, *out = ld_tv_undef(rt->arena, "the inline if-expression evaluated to false and no else section was defined"));
        return LD_OK;
    }
    case N_LIST: case N_DICT: case N_TUPLE: return eval_seq(rt, n, out);
    case N_BLOCK_VALUE: NEW(rt, n, *out = rt->block_value); return LD_OK;
    default: return ld_tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "unknown expression");
    }
}

/* A name not bound in any scope (nor looked up yet); NOMEM at n when an
 * undefined could not be made. */
static TPL_NOINLINE ld_status eval_name(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    NEW(rt, n, *out = ld_tpl_scope_resolve(rt, n->slot, n->s, n->s_len));
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

enum { FAST_PATH_MAX = 8 };

/* v[key of node n] for a dict or namespace v, a step of fast_keys: the
 * last step's key, when v lacks it and it names no method, is undefined as
 * getattr makes it; NULL when v is neither, or lacks the key otherwise. */
static inline ld_tpl_value *key_step(tpl_rt *rt, ld_tpl_value *v, const tpl_node *n, bool last)
{
    if (!v || (v->kind != TV_DICT && v->kind != TV_NS)) return NULL;
    size_t i = ld_tv_key_index(v, n->s, n->s_len);
    if (i < v->u.dict.n) return v->u.dict.vals[i];
    if (last && (n->neg & TPL_KEY_PLAIN)) return ld_tv_undef_lazy(rt->arena, ld_tv_type_name(v), n->s, n->s_len);
    return NULL;
}

/* v[i] for a list v and node n's constant int i (TPL_FAST_INDEX), a step
 * of fast_keys; NULL when v is no list or has no item i (the general path
 * then says what jinja2 says) */
static inline ld_tpl_value *index_step(ld_tpl_value *v, const tpl_node *n)
{
    if (!v || v->kind != TV_LIST) return NULL;
    int64_t i = n->b->lit->u.i, len = (int64_t)v->u.list.n;
    if (i < 0) i += len;
    return i >= 0 && i < len ? v->u.list.items[i] : NULL;
}

/* fast_keys for a chain of two steps or more: constant keys and, on
 * lists, constant indexes (x[0]) */
static TPL_NOINLINE bool fast_key_chain(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    const tpl_node *path[FAST_PATH_MAX];
    size_t k = 0;
    for (; n->kind != N_NAME; n = n->a) {
        if (k == FAST_PATH_MAX || !(n->neg & (TPL_FAST_KEY | TPL_FAST_INDEX)) ||
            (n->kind != N_GETATTR && n->kind != N_GETITEM))
            return false;
        path[k++] = n;
    }
    ld_tpl_value *v = rt->slots[n->slot].v;
    while (v && k--) v = path[k]->neg & TPL_FAST_INDEX ? index_step(v, path[k]) : key_step(rt, v, path[k], k == 0);
    return v ? (*out = v, true) : false;
}

/* name.key.key['key']...: a chain of up to FAST_PATH_MAX constant keys
 * (TPL_FAST_KEY, n's included) on a bound name, each found in a dict or
 * namespace (the last maybe missing, see key_step): *out, true; else false
 * (nothing evaluated that the general path would not evaluate again: names
 * and keys have no effects).  name.key, the usual, without the chain. */
static TPL_NOINLINE bool fast_keys(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    if (n->a->kind != N_NAME || !(n->neg & TPL_FAST_KEY)) return fast_key_chain(rt, n, out);
    ld_tpl_value *v = key_step(rt, rt->slots[n->a->slot].v, n, true);
    return v ? (*out = v, true) : false;
}

ld_status ld_tpl_eval_expr(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    /* the leaves, which nest nothing, without eval_node's frame */
    switch (n->kind) {
    case N_CONST: return *out = (ld_tpl_value *)n->lit, LD_OK;
    case N_NAME: {
        ld_tpl_value *v = rt->slots[n->slot].v;
        return v ? (*out = v, LD_OK) : eval_name(rt, n, out);
    }
    case N_GETATTR: case N_GETITEM:
        if ((n->neg & (TPL_FAST_KEY | TPL_FAST_INDEX)) && fast_keys(rt, n, out)) return LD_OK;
        break;
    default: break;
    }
    return eval_nested(rt, n, out);
}

/* The comparison n of a shape the parser marked (TPL_CMP_*) on the values
 * at hand, without evaluating its operands as expressions: true and *out
 * set, or false when they are not the usual kinds (nothing evaluated: the
 * general path then does it all). */
static inline bool cond_shape(tpl_rt *rt, const tpl_node *n, bool *out)
{
    if (n->slot == TPL_CMP_KEY_EQ_STR) { /* message.role == 'user' */
        const ld_tpl_value *d = rt->slots[n->a->a->slot].v, *b = n->b->lit;
        if (!d || (d->kind != TV_DICT && d->kind != TV_NS)) return false;
        size_t i = ld_tv_key_index(d, n->a->s, n->a->s_len);
        if (i == d->u.dict.n) return false;
        const ld_tpl_value *a = d->u.dict.vals[i];
        if (a->kind != TV_STR) return false;
        bool eq = a->u.str.len == b->u.str.len && ld_tv_same_bytes(a->u.str.s, b->u.str.s, a->u.str.len);
        return *out = eq != (n->neg == 2), true;
    }
    if (n->slot == TPL_CMP_STR_IN_NAME) { /* 'tool_calls' in message */
        const ld_tpl_value *x = n->a->lit, *c = rt->slots[n->b->slot].v;
        bool in;
        if (!c) return false;
        if (c->kind == TV_DICT) in = ld_tv_key_index(c, x->u.str.s, x->u.str.len) < c->u.dict.n;
        else if (c->kind == TV_STR) in = ld_memfind(c->u.str.s, c->u.str.len, x->u.str.s, x->u.str.len) != NULL;
        else return false;
        return *out = in != (n->neg == 8), true;
    }
    return false;
}

/* A condition's node: `not`, `and`, `or` and an unchained comparison,
 * whose operands are conditions or values, without the bool values in
 * between. */
static ld_status cond_node(tpl_rt *rt, const tpl_node *n, bool *out)
{
    ld_tpl_value *a, *b;
    switch (n->kind) {
    case N_NOT:
        LD_TRY(ld_tpl_eval_cond(rt, n->a, out));
        *out = !*out;
        return LD_OK;
    case N_AND: case N_OR:
        LD_TRY(ld_tpl_eval_cond(rt, n->a, out));
        if (*out == (n->kind == N_OR)) return LD_OK;
        return ld_tpl_eval_cond(rt, n->b, out);
    case N_TEST: return eval_test(rt, n, out);
    default: /* N_COMPARE, not chained */
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &a)); /* a marked shape's values were not the usual: in full */
        LD_TRY(ld_tpl_eval_expr(rt, n->b, &b));
        if ((n->neg == 1 || n->neg == 2) && a->kind == TV_STR && b->kind == TV_STR) { /* a role against a literal */
            bool eq = a->u.str.len == b->u.str.len && ld_tv_same_bytes(a->u.str.s, b->u.str.s, a->u.str.len);
            return *out = eq != (n->neg == 2), LD_OK;
        }
        return compare_values(rt, n, a, b, out);
    }
}

/* the kinds of node ld_tpl_eval_cond takes apart itself (a comparison when
 * it is not chained), as bits */
#define COND_KINDS ((1u << N_NOT) | (1u << N_AND) | (1u << N_OR) | (1u << N_TEST) | (1u << N_COMPARE))
_Static_assert(N_BLOCK_VALUE < 32, "node kinds fit in COND_KINDS");

ld_status ld_tpl_eval_cond(tpl_rt *rt, const tpl_node *n, bool *out)
{
    /* a comparison of a marked shape nests nothing: no frame, no count */
    if (n->kind == N_COMPARE && n->slot != TPL_CMP_ANY && cond_shape(rt, n, out)) return LD_OK;
    if (((1u << n->kind) & COND_KINDS) && !(n->kind == N_COMPARE && n->c)) {
        if (++rt->nest > MAX_NEST) return ld_tpl_rt_fail(rt, n, LD_ERR_LIMIT, "nesting limit exceeded");
        ld_status s = cond_node(rt, n, out);
        rt->nest--;
        return s;
    }
    ld_tpl_value *v;
    LD_TRY(ld_tpl_eval_expr(rt, n, &v));
    *out = ld_tv_truthy(v);
    return LD_OK;
}
