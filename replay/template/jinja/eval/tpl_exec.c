/* tpl_exec.c - statements and the render: scopes (a for loop and a macro
 * call open a scope, `if` does not; `set` writes to the innermost scope,
 * namespace attributes are shared), loop variables and recursive loops,
 * call and filter blocks, macros, and ld_tpl_render's entry points. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_rt.h"

/* `name` is the template's (or a literal): the key points at it, and is
 * made only when the scope does not have the name yet. */
static ld_status set_var_n(tpl_rt *rt, const tpl_node *at, const char *name, size_t len, ld_tpl_value *v)
{
    NEW(rt, at, ld_tv_dict_put_ref(rt->arena, rt->cur->vars, name, len, v));
    return LD_OK;
}

static ld_status set_var(tpl_rt *rt, const tpl_node *at, const char *name, ld_tpl_value *v)
{
    return set_var_n(rt, at, name, strlen(name), v);
}

ld_status ld_tpl_count_iter(tpl_rt *rt, const tpl_node *at)
{
    if (++rt->iters > rt->lim.max_loop_iters)
        return ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "loop iteration limit of %llu exceeded",
                           (unsigned long long)rt->lim.max_loop_iters);
    return LD_OK;
}

static ld_status assign_targets(tpl_rt *rt, const tpl_node *n, ld_tpl_value *item)
{
    if (!n->b) return set_var_n(rt, n, n->s, n->s_len, item);
    const tpl_nodes *t = &n->b->list;
    if (item->kind != TV_LIST || item->u.list.n != t->n)
        return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "value error: cannot unpack %s into %zu names",
                           ld_tv_type_name(item), t->n);
    for (size_t i = 0; i < t->n; i++) LD_TRY(set_var_n(rt, n, t->v[i]->s, t->v[i]->s_len, item->u.list.items[i]));
    return LD_OK;
}

/* The keys of `loop` objects, built once per loop and shared by its
 * iterations (a dict grows into a new key array, so sharing is safe):
 * all[] = the fixed ones, previtem, nextitem; no_prev[] = the fixed ones,
 * nextitem (the first iteration has no previtem). */
enum { LOOP_FIXED = 9, LOOP_KEYS = 11 };
static const char *const loop_key_names[LOOP_KEYS] = {
    "index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0",
    "previtem", "nextitem"
};

typedef struct loop_keys {
    ld_tpl_value *all[LOOP_KEYS], *no_prev[LOOP_FIXED + 1];
} loop_keys;

static bool make_loop_keys(ld_arena *a, loop_keys *k)
{
    for (size_t i = 0; i < LOOP_KEYS; i++) {
        const char *s = loop_key_names[i];
        if (!(k->all[i] = ld_tv_str_ref(a, s, strlen(s)))) return false;
        if (i < LOOP_FIXED) k->no_prev[i] = k->all[i];
    }
    k->no_prev[LOOP_FIXED] = k->all[LOOP_KEYS - 1];
    return true;
}

/* One iteration's `loop`: a dict over the shared keys, its values in one
 * allocation. */
static ld_tpl_value *loop_obj(tpl_rt *rt, loop_keys *keys, const ld_tpl_value *items, size_t i,
                              int64_t depth)
{
    struct block {
        ld_tpl_value d, num[LOOP_FIXED];
        ld_tpl_value *vals[LOOP_KEYS];
    } *b = ld_arena_alloc(rt->arena, sizeof *b);
    if (!b) return NULL;
    size_t n = items->u.list.n;
    int64_t fixed[LOOP_FIXED] = { (int64_t)i + 1, (int64_t)i, (int64_t)(n - i), (int64_t)(n - i - 1),
                                  i == 0, i + 1 == n, (int64_t)n, depth, depth - 1 };
    memset(b, 0, sizeof *b);
    for (size_t k = 0; k < LOOP_FIXED; k++) {
        bool is_bool = k == 4 || k == 5;
        b->num[k].kind = is_bool ? TV_BOOL : TV_INT;
        if (is_bool) b->num[k].u.b = (int)fixed[k];
        else b->num[k].u.i = fixed[k];
        b->vals[k] = &b->num[k];
    }
    size_t nk = LOOP_FIXED;
    if (i > 0) b->vals[nk++] = items->u.list.items[i - 1];
    if (i + 1 < n) b->vals[nk++] = items->u.list.items[i + 1];
    b->d.kind = TV_DICT;
    b->d.flags = TV_F_LOOP;
    b->d.u.dict.keys = i > 0 || i + 1 >= n ? keys->all : keys->no_prev;
    b->d.u.dict.vals = b->vals;
    b->d.u.dict.n = b->d.u.dict.cap = nk;
    return &b->d;
}

/* The keys of an iteration's scope, made once per loop: `loop`, and the
 * loop variable when it is a single name other than `loop` (else NULL). */
typedef struct scope_keys {
    ld_tpl_value *loop, *target;
} scope_keys;

static bool make_scope_keys(ld_arena *a, const tpl_node *n, scope_keys *k)
{
    bool single = !n->b && !(n->s_len == 4 && memcmp(n->s, "loop", 4) == 0);
    k->loop = ld_tv_str_ref(a, "loop", 4);
    k->target = single ? ld_tv_str_ref(a, n->s, n->s_len) : NULL;
    return k->loop && (!single || k->target);
}

/* An iteration's fresh scope in `vars`, emptied (nothing outlives an
 * iteration's scope: a macro sees the globals, a call block's body its site
 * only during the call, so its arrays are kept), with `loop` = lo and the
 * loop variable(s) = item. */
static ld_status enter_iteration(tpl_rt *rt, const tpl_node *n, ld_tpl_value *vars, const scope_keys *k,
                                 ld_tpl_value *lo, ld_tpl_value *item)
{
    vars->u.dict.n = 0;
    if (k->target && vars->u.dict.cap >= 2) {
        vars->u.dict.keys[0] = k->loop, vars->u.dict.vals[0] = lo;
        vars->u.dict.keys[1] = k->target, vars->u.dict.vals[1] = item;
        vars->u.dict.n = 2;
        return LD_OK;
    }
    LD_TRY(set_var_n(rt, n, "loop", 4, lo));
    return assign_targets(rt, n, item);
}

/* Runs loop `n` over the list `seq` at recursion `depth` in scope `parent`.
 * Every iteration gets a fresh scope: a `set` in the body lasts until the
 * end of its iteration, as in jinja2. */
static ld_status run_loop(tpl_rt *rt, const tpl_node *n, ld_tpl_value *seq, int64_t depth, frame *parent)
{
    frame *saved = rt->cur, f = {parent, ld_tv_new(rt->arena, TV_DICT)};
    loop_ctx lc = {n, parent, NULL, rt->loops};
    NEW(rt, n, f.vars);
    rt->cur = &f;
    ld_status s = LD_OK;
    ld_tpl_value *items = seq;
    if (n->c) { /* `for x in xs if cond`: filter first, loop.* counts the kept items */
        NEW(rt, n, items = ld_tv_new(rt->arena, TV_LIST));
        for (size_t i = 0; s == LD_OK && i < seq->u.list.n; i++) {
            ld_tpl_value *c;
            if ((s = ld_tpl_count_iter(rt, n)) != LD_OK || (s = assign_targets(rt, n, seq->u.list.items[i])) != LD_OK ||
                (s = ld_tpl_eval_expr(rt, n->c, &c)) != LD_OK) break;
            if (ld_tv_truthy(c) && !ld_tv_push(rt->arena, items, seq->u.list.items[i])) s = ld_tpl_nomem(rt, n);
        }
    }
    rt->loops = &lc;
    loop_keys keys;
    scope_keys sk = {NULL, NULL};
    if (s == LD_OK && items->u.list.n && (!make_loop_keys(rt->arena, &keys) || !make_scope_keys(rt->arena, n, &sk)))
        s = ld_tpl_nomem(rt, n);
    for (size_t i = 0; s == LD_OK && i < items->u.list.n; i++) {
        ld_tpl_value *lo = loop_obj(rt, &keys, items, i, depth);
        if (!lo) { s = ld_tpl_nomem(rt, n); break; }
        lc.lo = lo;
        if ((s = ld_tpl_count_iter(rt, n)) != LD_OK || (s = enter_iteration(rt, n, f.vars, &sk, lo, items->u.list.items[i])) != LD_OK ||
            (s = ld_tpl_exec_body(rt, &n->list)) != LD_OK)
            break;
        if (rt->ctrl == 1) { rt->ctrl = 0; break; }
        rt->ctrl = 0;
    }
    rt->loops = lc.prev;
    rt->cur = saved;
    if (s == LD_OK && items->u.list.n == 0) s = ld_tpl_exec_body(rt, &n->list2);
    return s;
}

static ld_status exec_for(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *seq;
    LD_TRY(ld_tpl_eval_expr(rt, n->a, &seq));
    LD_TRY(ld_tpl_iter(rt, n->a, seq, &seq));
    return run_loop(rt, n, seq, 1, rt->cur);
}

/* Runs `body` with its output captured into a new string *out. */
static ld_status capture(tpl_rt *rt, const tpl_node *at, const tpl_nodes *body, ld_tpl_value **out)
{
    tv_buf b = {0}, *saved = rt->out;
    b.max = rt->lim.max_output_bytes;
    rt->out = &b;
    ld_status s = ld_tpl_exec_body(rt, body);
    rt->out = saved;
    if (s == LD_OK && b.failed) s = ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "output size limit exceeded");
    if (s == LD_OK && !(*out = ld_tv_str(rt->arena, b.p, b.len))) s = ld_tpl_nomem(rt, at);
    free(b.p);
    return s;
}

/* `loop(items)` in a recursive loop: the loop body over items, one level
 * deeper, rendered to a string. */
ld_status ld_tpl_call_loop(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *lo, tpl_args *a, ld_tpl_value **out)
{
    loop_ctx *lc = rt->loops;
    while (lc && lc->lo != lo) lc = lc->prev;
    if (!lc || !lc->n->neg)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: the loop must be marked as recursive to be called");
    if (a->n_pos != 1 || a->n_kw)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: loop() takes exactly one argument");
    if (rt->macro_depth >= rt->lim.max_depth)
        return ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "recursion limit of %u calls exceeded", rt->lim.max_depth);
    ld_tpl_value *seq, *d = ld_tv_dict_get(lo, "depth", 5);
    LD_TRY(ld_tpl_iter(rt, at, a->pos[0], &seq));
    tv_buf b = {0}, *saved = rt->out;
    b.max = rt->lim.max_output_bytes;
    rt->out = &b;
    rt->macro_depth++;
    ld_status s = run_loop(rt, lc->n, seq, (d && d->kind == TV_INT ? d->u.i : 1) + 1, lc->parent);
    rt->macro_depth--;
    rt->out = saved;
    if (s == LD_OK && b.failed) s = ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "output size limit exceeded");
    if (s == LD_OK && !(*out = ld_tv_str(rt->arena, b.p, b.len))) s = ld_tpl_nomem(rt, at);
    free(b.p);
    return s;
}


/* {% call(params) m(args) %}body{% endcall %}: m(args) with `caller` =
 * the body as a macro that sees the scope of the call site. */
static ld_status exec_call_block(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *callee, *caller, *v;
    tpl_args a;
    LD_TRY(ld_tpl_eval_expr(rt, n->a->a, &callee));
    if (callee->kind == TV_UNDEF) return ld_tpl_undefined_use(rt, n->a, callee);
    if (callee->kind != TV_MACRO)
        return ld_tpl_rt_fail(rt, n->a, LD_ERR_MISMATCH, "type error: a call block needs a macro, not '%s'", ld_tv_type_name(callee));
    LD_TRY(ld_tpl_eval_args(rt, n->a, &a));
    NEW(rt, n, caller = ld_tv_new(rt->arena, TV_MACRO));
    caller->u.macro.node = n;
    call_ctx cc = {n, rt->cur, rt->calls};
    rt->calls = &cc;
    ld_status s = ld_tpl_call_macro_with(rt, n->a, callee, &a, caller, &v);
    rt->calls = cc.prev;
    LD_TRY(s);
    ld_tv_buf_put(rt->out, v->u.str.s, v->u.str.len);
    return LD_OK;
}

/* {% filter chain %}body{% endfilter %} */
static ld_status exec_filter_block(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *body, *v, *saved = rt->block_value;
    LD_TRY(capture(rt, n, &n->list, &body));
    rt->block_value = body;
    ld_status s = ld_tpl_eval_expr(rt, n->a, &v);
    rt->block_value = saved;
    LD_TRY(s);
    if (!ld_tv_print(rt->out, v, false) && !rt->out->failed)
        return ld_tpl_rt_fail(rt, n->a, LD_ERR_UNSUPPORTED, "cannot print a '%s' value", ld_tv_type_name(v));
    return LD_OK;
}

/* str(v) to the output; `at` names the expression when v cannot be printed */
static ld_status print_value(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v)
{
    if (!ld_tv_print(rt->out, v, false) && !rt->out->failed)
        return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot print a '%s' value", ld_tv_type_name(v));
    return LD_OK;
}

enum { CONCAT_MAX = 16 };

/* {{ a + b + ... }} (n: the outermost `+`): the operands written to the
 * output one by one while they are strings, without the sums between (a
 * message's text is copied once, not once per `+`).  From the first operand
 * that is not a string on, the rest is summed as the evaluator sums it: the
 * same order of evaluation, the same errors.  *done false (nothing
 * evaluated) for a chain longer than CONCAT_MAX. */
static ld_status output_concat(tpl_rt *rt, const tpl_node *n, bool *done)
{
    const tpl_node *plus[CONCAT_MAX], *x = n; /* plus[0]: the outermost `+` */
    size_t m = 0, j;
    for (; x->kind == N_BINOP && x->neg == '+'; x = x->a) {
        if (m == CONCAT_MAX) return *done = false, LD_OK;
        plus[m++] = x;
    }
    *done = true;
    /* operand 0 is x; operand j (1..m) is plus[m - j]->b, added at plus[m - j] */
    ld_tpl_value *vals[CONCAT_MAX + 1], *v = NULL;
    for (j = 0; j <= m; j++) {
        LD_TRY(ld_tpl_eval_expr(rt, j ? plus[m - j]->b : x, &v));
        if (v->kind != TV_STR) break;
        vals[j] = v;
    }
    if (j > m) {
        for (j = 0; j <= m; j++) ld_tv_buf_put(rt->out, vals[j]->u.str.s, vals[j]->u.str.len);
        return LD_OK;
    }
    ld_tpl_value *acc = j ? vals[0] : v;
    for (size_t i = 1; i <= j; i++) LD_TRY(ld_tpl_arith(rt, plus[m - i], '+', acc, i < j ? vals[i] : v, &acc));
    for (j++; j <= m; j++) {
        LD_TRY(ld_tpl_eval_expr(rt, plus[m - j]->b, &v));
        LD_TRY(ld_tpl_arith(rt, plus[m - j], '+', acc, v, &acc));
    }
    return print_value(rt, n, acc);
}

static ld_status exec_output(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *v;
    if (n->a->kind == N_BINOP && n->a->neg == '+') {
        bool done;
        LD_TRY(output_concat(rt, n->a, &done));
        if (done) return LD_OK;
    }
    LD_TRY(ld_tpl_eval_expr(rt, n->a, &v));
    return print_value(rt, n->a, v);
}

static ld_status exec_stmt(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *v;
    switch (n->kind) {
    case N_DATA:
        ld_tv_buf_put(rt->out, n->s, n->s_len);
        break;
    case N_OUTPUT: LD_TRY(exec_output(rt, n)); break;
    case N_IF:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &v));
        return ld_tpl_exec_body(rt, ld_tv_truthy(v) ? &n->list : &n->list2);
    case N_FOR: return exec_for(rt, n);
    case N_CALL_BLOCK: LD_TRY(exec_call_block(rt, n)); break;
    case N_FILTER_BLOCK: LD_TRY(exec_filter_block(rt, n)); break;
    case N_SET:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &v));
        return assign_targets(rt, n, v);
    case N_SET_BLOCK:
        LD_TRY(capture(rt, n, &n->list, &v));
        return set_var_n(rt, n, n->s, n->s_len, v);
    case N_SET_ATTR: {
        ld_tpl_value *ns = ld_tpl_lookup(rt, n->s, n->s_len);
        NEW(rt, n, ns);
        if (ns->kind != TV_NS)
            return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "template runtime error: cannot assign attribute on non-namespace object");
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &v));
        NEW(rt, n, ld_tv_dict_put_ref(rt->arena, ns, n->b->s, n->b->s_len, v));
        break;
    }
    case N_MACRO:
        NEW(rt, n, v = ld_tv_new(rt->arena, TV_MACRO));
        v->u.macro.node = n;
        return set_var(rt, n, n->s, v);
    case N_BREAK: rt->ctrl = 1; break;
    case N_CONTINUE: rt->ctrl = 2; break;
    default: return ld_tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "unknown statement");
    }
    if (rt->out->failed)
        return ld_tpl_rt_fail(rt, n, LD_ERR_LIMIT, "output size limit of %zu bytes exceeded", rt->lim.max_output_bytes);
    return LD_OK;
}

ld_status ld_tpl_exec_body(tpl_rt *rt, const tpl_nodes *body)
{
    if (++rt->nest > MAX_NEST) return ld_tpl_rt_fail(rt, body->n ? body->v[0] : NULL, LD_ERR_LIMIT, "nesting limit exceeded");
    for (size_t i = 0; i < body->n && !rt->ctrl; i++) {
        ld_status s = exec_stmt(rt, body->v[i]);
        if (s != LD_OK) return s;
    }
    rt->nest--;
    return LD_OK;
}

/* Arguments beyond the parameters: into `varargs` (a tuple) and `kwargs`
 * (a dict) when the body uses them, else a TypeError as in jinja2. */
static ld_status extra_args(tpl_rt *rt, const tpl_node *at, const tpl_node *def, tpl_args *args)
{
    size_t np = def->list2.n;
    ld_tpl_value *va = ld_tv_new(rt->arena, TV_LIST), *kw = ld_tv_new(rt->arena, TV_DICT);
    NEW(rt, at, va && kw);
    va->flags |= TV_F_TUPLE;
    for (size_t i = np; i < args->n_pos; i++) NEW(rt, at, ld_tv_push(rt->arena, va, args->pos[i]));
    for (size_t k = 0; k < args->n_kw; k++) {
        bool known = false;
        for (size_t i = 0; i < np; i++) known = known || strcmp(args->kw[k], def->kw[i]) == 0;
        if (known) continue;
        if (!(def->neg & 2))
            return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: macro '%s' takes no keyword argument '%s'", def->s, args->kw[k]);
        NEW(rt, at, ld_tv_dict_put(rt->arena, kw, ld_tv_str(rt->arena, args->kw[k], strlen(args->kw[k])), args->kwv[k]));
    }
    if (def->neg & 1) LD_TRY(set_var(rt, at, "varargs", va));
    if (def->neg & 2) LD_TRY(set_var(rt, at, "kwargs", kw));
    return LD_OK;
}

ld_status ld_tpl_call_macro(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *m, tpl_args *args, ld_tpl_value **out)
{
    return ld_tpl_call_macro_with(rt, at, m, args, NULL, out);
}

ld_status ld_tpl_call_macro_with(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *m, tpl_args *args,
                              ld_tpl_value *caller, ld_tpl_value **out)
{
    const tpl_node *def = m->u.macro.node;
    frame *parent = rt->root; /* a macro sees the template's globals; a caller body its call site */
    if (def->kind == N_CALL_BLOCK) {
        call_ctx *cc = rt->calls;
        while (cc && cc->n != def) cc = cc->prev;
        if (cc) parent = cc->site;
    }
    size_t np = def->list2.n;
    if (rt->macro_depth >= rt->lim.max_depth)
        return ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "recursion limit of %u macro calls exceeded", rt->lim.max_depth);
    if (args->n_pos > np && !(def->neg & 1))
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: macro '%s' takes not more than %zu argument(s)", def->s, np);
    frame f = {parent, ld_tv_new(rt->arena, TV_DICT)}, *saved_cur = rt->cur;
    NEW(rt, at, f.vars);
    rt->cur = &f;
    ld_status s = caller ? set_var(rt, at, "caller", caller) : LD_OK;
    for (size_t i = 0; s == LD_OK && i < np; i++) {
        ld_tpl_value *v = i < args->n_pos ? args->pos[i] : NULL;
        for (size_t k = 0; !v && k < args->n_kw; k++)
            if (strcmp(args->kw[k], def->kw[i]) == 0) v = args->kwv[k];
        if (!v && def->list2.v[i]) s = ld_tpl_eval_expr(rt, def->list2.v[i], &v);
        else if (!v) {
            char hint[160];
            snprintf(hint, sizeof hint, "parameter '%s' was not provided", def->kw[i]);
            v = ld_tv_undef(rt->arena, hint);
        }
        if (s == LD_OK) s = set_var(rt, at, def->kw[i], v);
    }
    s = s == LD_OK ? extra_args(rt, at, def, args) : s;
    tv_buf b = {0}, *saved_out = rt->out;
    b.max = rt->lim.max_output_bytes;
    rt->out = &b;
    rt->macro_depth++;
    if (s == LD_OK) s = ld_tpl_exec_body(rt, &def->list);
    rt->macro_depth--;
    rt->ctrl = 0;
    rt->out = saved_out;
    rt->cur = saved_cur;
    if (s == LD_OK && b.failed) s = ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "output size limit exceeded");
    if (s == LD_OK && !(*out = ld_tv_str(rt->arena, b.p, b.len))) s = ld_tpl_nomem(rt, at);
    free(b.p);
    return s;
}

ld_status ld_tpl_render_in(const ld_tpl *t, const ld_tpl_value *ctx, const ld_tpl_limits *lim,
                           ld_arena *scratch, char **out, size_t *out_len, ld_error *err)
{
    tpl_rt rt;
    tv_buf b = {0};
    memset(&rt, 0, sizeof rt);
    *out = NULL, *out_len = 0;
    if (lim) rt.lim = *lim;
    if (!rt.lim.max_depth) rt.lim.max_depth = 64;
    if (!rt.lim.max_loop_iters) rt.lim.max_loop_iters = 1000000;
    if (!rt.lim.max_output_bytes) rt.lim.max_output_bytes = (size_t)64 << 20;
    if (!rt.lim.max_memory_bytes) rt.lim.max_memory_bytes = (size_t)512 << 20;
    if (!rt.lim.today) rt.lim.today = "2024-07-26";
    if (ctx && ctx->kind != TV_DICT) return LD_FAIL(err, LD_ERR_USAGE, 0, "context must be a dict");
    if (err) ld_error_clear(err);
    rt.t = t, rt.err = err, rt.ctx = ctx;
    b.max = rt.lim.max_output_bytes;
    rt.out = &b;
    size_t saved_max = scratch ? scratch->max_bytes : 0;
    if (scratch) {
        rt.arena = scratch;
        /* the limit counts what this render adds to what the arena holds */
        scratch->max_bytes = scratch->held_bytes + rt.lim.max_memory_bytes;
    } else {
        ld_arena_init(&rt.own, rt.lim.max_memory_bytes);
        rt.arena = &rt.own;
    }
    frame root = {NULL, ld_tv_new(rt.arena, TV_DICT)};
    rt.root = rt.cur = &root;
    ld_status s = root.vars ? ld_tpl_exec_body(&rt, &t->body) : ld_tpl_nomem(&rt, NULL);
    if (s == LD_OK && b.failed) s = ld_tpl_rt_fail(&rt, NULL, LD_ERR_LIMIT, "output size limit exceeded");
    if (scratch) scratch->max_bytes = saved_max;
    else ld_arena_release(&rt.own);
    if (s != LD_OK) { free(b.p); return s; }
    if (!b.p && !(b.p = calloc(1, 1))) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    *out = b.p, *out_len = b.len;
    return LD_OK;
}

ld_status ld_tpl_render(const ld_tpl *t, const ld_tpl_value *ctx, const ld_tpl_limits *lim, char **out,
                        size_t *out_len, ld_error *err)
{
    return ld_tpl_render_in(t, ctx, lim, NULL, out, out_len, err);
}
