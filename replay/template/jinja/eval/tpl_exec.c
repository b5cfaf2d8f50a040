/* tpl_exec.c - statements and the render: scopes (a for loop and a macro
 * call open a scope, `if` does not; `set` writes to the innermost scope,
 * namespace attributes are shared), loop variables and recursive loops,
 * call and filter blocks, macros, and ld_tpl_render's entry points. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_rt.h"

/* the name of slot `id` = v in the current scope */
static ld_status set_var(tpl_rt *rt, const tpl_node *at, uint32_t id, ld_tpl_value *v)
{
    NEW(rt, at, ld_tpl_scope_set(rt, id, v));
    return LD_OK;
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
    if (!n->b) return set_var(rt, n, n->slot, item);
    const tpl_nodes *t = &n->b->list;
    if (item->kind != TV_LIST || item->u.list.n != t->n)
        return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "value error: cannot unpack %s into %zu names",
                           ld_tv_type_name(item), t->n);
    for (size_t i = 0; i < t->n; i++) LD_TRY(set_var(rt, n, t->v[i]->slot, item->u.list.items[i]));
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
    /* each field an int or a bool reads is set: no need to clear the block */
    for (size_t k = 0; k < LOOP_FIXED; k++) {
        bool is_bool = k == 4 || k == 5;
        b->num[k].kind = is_bool ? TV_BOOL : TV_INT;
        b->num[k].flags = 0;
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

/* An iteration's fresh scope (the loop's scope, emptied: nothing outlives
 * an iteration's scope), with `loop` = lo (when the body names it) and the
 * loop variable(s) = item. */
static ld_status enter_iteration(tpl_rt *rt, const tpl_node *n, ld_tpl_value *lo, ld_tpl_value *item)
{
    /* The usual: one loop variable, and the last iteration set nothing
     * else, so that the scope holds just what the last one bound (the
     * loop variable, `loop`): their slots take the new values. */
    if (!n->b && rt->cur->n == (lo ? 2u : 1u)) { /* (no target is named `loop`: the parser says so) */
        if (lo) rt->slots[TPL_SLOT_LOOP].v = lo;
        rt->slots[n->slot].v = item;
        return LD_OK;
    }
    ld_tpl_scope_clear(rt);
    if (lo) LD_TRY(set_var(rt, n, TPL_SLOT_LOOP, lo));
    return assign_targets(rt, n, item);
}

/* Runs loop `n` over the list `seq` at recursion `depth` in scope `parent`.
 * Every iteration gets a fresh scope: a `set` in the body lasts until the
 * end of its iteration, as in jinja2.  A body that never names `loop` gets
 * no `loop` object: nothing could see it. */
static ld_status run_loop(tpl_rt *rt, const tpl_node *n, ld_tpl_value *seq, int64_t depth, frame *parent)
{
    frame *saved = rt->cur, f = {0};
    loop_ctx lc = {n, parent, NULL, rt->loops};
    bool uses_loop = n->neg & TPL_FOR_USES_LOOP;
    ld_tpl_scope_push(rt, &f, parent);
    ld_status s = LD_OK;
    ld_tpl_value *items = seq;
    if (n->c) { /* `for x in xs if cond`: filter first, loop.* counts the kept items */
        NEW(rt, n, items = ld_tv_new(rt->arena, TV_LIST));
        for (size_t i = 0; s == LD_OK && i < seq->u.list.n; i++) {
            bool c;
            if ((s = ld_tpl_count_iter(rt, n)) != LD_OK || (s = assign_targets(rt, n, seq->u.list.items[i])) != LD_OK ||
                (s = ld_tpl_eval_cond(rt, n->c, &c)) != LD_OK) break;
            if (c && !ld_tv_push(rt->arena, items, seq->u.list.items[i])) s = ld_tpl_nomem(rt, n);
        }
    }
    rt->loops = &lc;
    loop_keys keys;
    if (s == LD_OK && uses_loop && items->u.list.n && !make_loop_keys(rt->arena, &keys)) s = ld_tpl_nomem(rt, n);
    for (size_t i = 0; s == LD_OK && i < items->u.list.n; i++) {
        ld_tpl_value *lo = uses_loop ? loop_obj(rt, &keys, items, i, depth) : NULL;
        if (uses_loop && !lo) { s = ld_tpl_nomem(rt, n); break; }
        lc.lo = lo;
        if ((s = ld_tpl_count_iter(rt, n)) != LD_OK || (s = enter_iteration(rt, n, lo, items->u.list.items[i])) != LD_OK ||
            (s = ld_tpl_exec_body(rt, &n->list)) != LD_OK)
            break;
        if (rt->ctrl == 1) { rt->ctrl = 0; break; }
        rt->ctrl = 0;
    }
    rt->loops = lc.prev;
    ld_tpl_scope_pop(rt, &f, saved);
    if (s == LD_OK && items->u.list.n == 0) s = ld_tpl_exec_body(rt, &n->list2);
    return s;
}

static TPL_NOINLINE ld_status exec_for(tpl_rt *rt, const tpl_node *n)
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
    if (!lc || !(lc->n->neg & TPL_FOR_RECURSIVE))
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
static TPL_NOINLINE ld_status exec_call_block(tpl_rt *rt, const tpl_node *n)
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
static TPL_NOINLINE ld_status exec_filter_block(tpl_rt *rt, const tpl_node *n)
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

static TPL_NOINLINE ld_status exec_output(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *v;
    if (n->a->kind == N_BINOP && n->a->neg == '+') {
        bool done;
        LD_TRY(output_concat(rt, n->a, &done));
        if (done) return LD_OK;
    }
    if (n->a->kind == N_FILTER && n->a->slot == TPL_FILTER_TOJSON) { /* written where it goes */
        tpl_args args;
        LD_TRY(ld_tpl_eval_expr(rt, n->a->a, &v));
        LD_TRY(ld_tpl_eval_args(rt, n->a, &args));
        return ld_tpl_tojson_print(rt, n->a, v, &args, rt->out);
    }
    LD_TRY(ld_tpl_eval_expr(rt, n->a, &v));
    return print_value(rt, n->a, v);
}

/* the output's limit, checked after a statement that writes */
static ld_status output_check(tpl_rt *rt, const tpl_node *n)
{
    if (rt->out->failed)
        return ld_tpl_rt_fail(rt, n, LD_ERR_LIMIT, "output size limit of %zu bytes exceeded", rt->lim.max_output_bytes);
    return LD_OK;
}

/* set, set blocks, set ns.attr, macro: a name (or an attribute) bound */
static TPL_NOINLINE ld_status exec_set(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *v;
    switch (n->kind) {
    case N_SET:
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &v));
        return assign_targets(rt, n, v);
    case N_SET_BLOCK:
        LD_TRY(capture(rt, n, &n->list, &v));
        return set_var(rt, n, n->slot, v);
    case N_SET_ATTR: {
        ld_tpl_value *ns = tpl_lookup(rt, n);
        NEW(rt, n, ns);
        if (ns->kind != TV_NS)
            return ld_tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "template runtime error: cannot assign attribute on non-namespace object");
        LD_TRY(ld_tpl_eval_expr(rt, n->a, &v));
        size_t i = ld_tv_key_index(ns, n->b->s, n->b->s_len);
        if (i < ns->u.dict.n) ns->u.dict.vals[i] = v; /* the usual: the attribute is there */
        else NEW(rt, n, ld_tv_dict_put_ref(rt->arena, ns, n->b->s, n->b->s_len, v));
        return output_check(rt, n);
    }
    default: /* N_MACRO */
        NEW(rt, n, v = ld_tv_new(rt->arena, TV_MACRO));
        v->u.macro.node = n;
        return set_var(rt, n, n->slot, v);
    }
}

static ld_status exec_stmt(tpl_rt *rt, const tpl_node *n)
{
    switch (n->kind) {
    case N_DATA:
        ld_tv_buf_put(rt->out, n->s, n->s_len);
        break;
    case N_OUTPUT: LD_TRY(exec_output(rt, n)); break;
    case N_IF:
        for (;;) {
            bool r;
            LD_TRY(ld_tpl_eval_cond(rt, n->a, &r));
            const tpl_nodes *body = r ? &n->list : &n->list2;
            /* an `elif` (an else body that is one `if`, as the parser makes
             * it): its condition next, without a body around it */
            if (!r && body->n == 1 && body->v[0]->kind == N_IF) {
                n = body->v[0];
                continue;
            }
            return body->n ? ld_tpl_exec_body(rt, body) : LD_OK; /* most ifs have no else */
        }
    case N_FOR: return exec_for(rt, n);
    case N_CALL_BLOCK: LD_TRY(exec_call_block(rt, n)); break;
    case N_FILTER_BLOCK: LD_TRY(exec_filter_block(rt, n)); break;
    case N_SET: case N_SET_BLOCK: case N_SET_ATTR: case N_MACRO: return exec_set(rt, n);
    case N_BREAK: rt->ctrl = 1; break;
    case N_CONTINUE: rt->ctrl = 2; break;
    default: return ld_tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "unknown statement");
    }
    return output_check(rt, n);
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
    if (def->neg & 1) LD_TRY(set_var(rt, at, TPL_SLOT_VARARGS, va));
    if (def->neg & 2) LD_TRY(set_var(rt, at, TPL_SLOT_KWARGS, kw));
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
    frame f = {0}, *saved_cur = rt->cur;
    ld_tpl_scope_push(rt, &f, parent);
    ld_status s = caller ? set_var(rt, at, TPL_SLOT_CALLER, caller) : LD_OK;
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
        if (s == LD_OK) s = set_var(rt, at, def->kw_slot[i], v);
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
    ld_tpl_scope_pop(rt, &f, saved_cur);
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
    frame root = {0};
    rt.root = rt.cur = &root;
    rt.slots = ld_arena_alloc(rt.arena, (t->n_slots ? t->n_slots : 1) * sizeof *rt.slots);
    if (rt.slots) memset(rt.slots, 0, t->n_slots * sizeof *rt.slots);
    ld_status s = rt.slots ? ld_tpl_exec_body(&rt, &t->body) : ld_tpl_nomem(&rt, NULL);
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
