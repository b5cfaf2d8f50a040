/* tpl_eval.c - the tree-walking evaluator: scopes (a for loop and a macro
 * call open a scope, `if` does not; `set` writes to the innermost scope,
 * namespace attributes are shared), loop variables, macros, operators with
 * Python semantics, and the sandbox limits. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define MAX_NEST 1500 /* statement + expression nesting in one render */

typedef struct frame {
    struct frame *parent;
    ld_tpl_value *vars; /* dict */
} frame;

/* a for loop being run: what `loop(...)` of a recursive loop calls */
typedef struct loop_ctx {
    const tpl_node *n;
    frame *parent;         /* the scope the loop runs in */
    const ld_tpl_value *lo; /* the current `loop` object */
    struct loop_ctx *prev;
} loop_ctx;

/* a call block being run: the scope its `caller` body sees */
typedef struct call_ctx {
    const tpl_node *n;
    frame *site;
    struct call_ctx *prev;
} call_ctx;

struct tpl_rt {
    const ld_tpl *t;
    ld_arena *arena;    /* the render's scratch memory: `own`, or the caller's */
    ld_arena own;
    tv_buf *out;
    ld_error *err;
    ld_tpl_limits lim;
    uint64_t iters;
    uint32_t macro_depth, nest;
    int ctrl; /* 1 = break, 2 = continue */
    frame *root;
    frame *cur;
    const ld_tpl_value *ctx;
    loop_ctx *loops;
    call_ctx *calls;
    ld_tpl_value *block_value; /* body of the innermost filter block */
};

ld_arena *tpl_rt_arena(tpl_rt *rt) { return rt->arena; }
const char *tpl_rt_today(tpl_rt *rt) { return rt->lim.today; }

ld_status tpl_rt_fail(tpl_rt *rt, const tpl_node *at, ld_status code, const char *fmt, ...)
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
        tpl_line_col(rt->t->src, off, &line, &col);
        LD_FAIL(rt->err, code, off, "%s at column %llu", m, (unsigned long long)col);
        rt->err->line = line;
    }
    return code;
}

ld_status tpl_nomem(tpl_rt *rt, const tpl_node *at)
{
    return tpl_rt_fail(rt, at, LD_ERR_LIMIT, "memory limit of the render exceeded");
}

#define NEW(rt, at, expr) do { if (!(expr)) return tpl_nomem((rt), (at)); } while (0)

static ld_status eval(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out);
static ld_status exec_body(tpl_rt *rt, const tpl_nodes *body);

static ld_tpl_value *lookup(tpl_rt *rt, const char *name, size_t len)
{
    static const struct { const char *n; int id; } globals[] = {
        {"raise_exception", TF_RAISE}, {"strftime_now", TF_STRFTIME},
        {"namespace", TF_NAMESPACE}, {"range", TF_RANGE}, {"dict", TF_DICT}};
    for (frame *f = rt->cur; f; f = f->parent) {
        ld_tpl_value *v = tv_dict_get(f->vars, name, len);
        if (v) return v;
    }
    if (rt->ctx) {
        ld_tpl_value *v = tv_dict_get(rt->ctx, name, len);
        if (v) return v;
    }
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (strlen(globals[i].n) == len && memcmp(globals[i].n, name, len) == 0) {
            ld_tpl_value *v = tv_new(rt->arena, TV_FUNC);
            if (v) v->u.func.id = globals[i].id;
            return v;
        }
    return tv_undef_lazy(rt->arena, NULL, name, len); /* name: the template's */
}

/* `name` is the template's (or a literal): the key points at it. */
static ld_status set_var(tpl_rt *rt, const tpl_node *at, const char *name, ld_tpl_value *v)
{
    NEW(rt, at, tv_dict_put(rt->arena, rt->cur->vars, tv_str_ref(rt->arena, name, strlen(name)), v));
    return LD_OK;
}

ld_tpl_value *tpl_str_of(tpl_rt *rt, const ld_tpl_value *v)
{
    if (v->kind == TV_STR) return (ld_tpl_value *)v;
    tv_buf b = {0};
    if (!tv_print(&b, v, false) || b.failed) { free(b.p); return NULL; }
    ld_tpl_value *s = tv_str(rt->arena, b.p, b.len);
    free(b.p);
    return s;
}

ld_status tpl_iter(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v, ld_tpl_value **out)
{
    ld_tpl_value *l = tv_new(rt->arena, TV_LIST);
    NEW(rt, at, l);
    switch (v->kind) {
    case TV_LIST: *out = (ld_tpl_value *)v; return LD_OK;
    case TV_UNDEF: *out = l; return LD_OK;
    case TV_DICT: case TV_NS:
        for (size_t i = 0; i < v->u.dict.n; i++) NEW(rt, at, tv_push(rt->arena, l, v->u.dict.keys[i]));
        *out = l;
        return LD_OK;
    case TV_STR:
        for (size_t i = 0; i < v->u.str.len;) {
            size_t j = i + 1;
            while (j < v->u.str.len && ((unsigned char)v->u.str.s[j] & 0xC0) == 0x80) j++;
            NEW(rt, at, tv_push(rt->arena, l, tv_str(rt->arena, v->u.str.s + i, j - i)));
            i = j;
        }
        *out = l;
        return LD_OK;
    default:
        return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: '%s' object is not iterable", tv_type_name(v));
    }
}

static ld_status count_iter(tpl_rt *rt, const tpl_node *at)
{
    if (++rt->iters > rt->lim.max_loop_iters)
        return tpl_rt_fail(rt, at, LD_ERR_LIMIT, "loop iteration limit of %llu exceeded",
                           (unsigned long long)rt->lim.max_loop_iters);
    return LD_OK;
}

static ld_status assign_targets(tpl_rt *rt, const tpl_node *n, ld_tpl_value *item)
{
    if (!n->b) return set_var(rt, n, n->s, item);
    const tpl_nodes *t = &n->b->list;
    if (item->kind != TV_LIST || item->u.list.n != t->n)
        return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "value error: cannot unpack %s into %zu names",
                           tv_type_name(item), t->n);
    for (size_t i = 0; i < t->n; i++) LD_TRY(set_var(rt, n, t->v[i]->s, item->u.list.items[i]));
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
        if (!(k->all[i] = tv_str_ref(a, s, strlen(s)))) return false;
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

/* Runs loop `n` over the list `seq` at recursion `depth` in scope `parent`.
 * Every iteration gets a fresh scope: a `set` in the body lasts until the
 * end of its iteration, as in jinja2. */
static ld_status run_loop(tpl_rt *rt, const tpl_node *n, ld_tpl_value *seq, int64_t depth, frame *parent)
{
    frame *saved = rt->cur, f = {parent, tv_new(rt->arena, TV_DICT)};
    loop_ctx lc = {n, parent, NULL, rt->loops};
    NEW(rt, n, f.vars);
    rt->cur = &f;
    ld_status s = LD_OK;
    ld_tpl_value *items = seq;
    if (n->c) { /* `for x in xs if cond`: filter first, loop.* counts the kept items */
        NEW(rt, n, items = tv_new(rt->arena, TV_LIST));
        for (size_t i = 0; s == LD_OK && i < seq->u.list.n; i++) {
            ld_tpl_value *c;
            if ((s = count_iter(rt, n)) != LD_OK || (s = assign_targets(rt, n, seq->u.list.items[i])) != LD_OK ||
                (s = eval(rt, n->c, &c)) != LD_OK) break;
            if (tv_truthy(c) && !tv_push(rt->arena, items, seq->u.list.items[i])) s = tpl_nomem(rt, n);
        }
    }
    rt->loops = &lc;
    loop_keys keys;
    if (s == LD_OK && items->u.list.n && !make_loop_keys(rt->arena, &keys)) s = tpl_nomem(rt, n);
    for (size_t i = 0; s == LD_OK && i < items->u.list.n; i++) {
        ld_tpl_value *lo = loop_obj(rt, &keys, items, i, depth);
        if (!lo || !(f.vars = tv_new(rt->arena, TV_DICT))) { s = tpl_nomem(rt, n); break; }
        lc.lo = lo;
        if ((s = count_iter(rt, n)) != LD_OK || (s = set_var(rt, n, "loop", lo)) != LD_OK ||
            (s = assign_targets(rt, n, items->u.list.items[i])) != LD_OK || (s = exec_body(rt, &n->list)) != LD_OK)
            break;
        if (rt->ctrl == 1) { rt->ctrl = 0; break; }
        rt->ctrl = 0;
    }
    rt->loops = lc.prev;
    rt->cur = saved;
    if (s == LD_OK && items->u.list.n == 0) s = exec_body(rt, &n->list2);
    return s;
}

static ld_status exec_for(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *seq;
    LD_TRY(eval(rt, n->a, &seq));
    LD_TRY(tpl_iter(rt, n->a, seq, &seq));
    return run_loop(rt, n, seq, 1, rt->cur);
}

/* Runs `body` with its output captured into a new string *out. */
static ld_status capture(tpl_rt *rt, const tpl_node *at, const tpl_nodes *body, ld_tpl_value **out)
{
    tv_buf b = {0}, *saved = rt->out;
    b.max = rt->lim.max_output_bytes;
    rt->out = &b;
    ld_status s = exec_body(rt, body);
    rt->out = saved;
    if (s == LD_OK && b.failed) s = tpl_rt_fail(rt, at, LD_ERR_LIMIT, "output size limit exceeded");
    if (s == LD_OK && !(*out = tv_str(rt->arena, b.p, b.len))) s = tpl_nomem(rt, at);
    free(b.p);
    return s;
}

/* `loop(items)` in a recursive loop: the loop body over items, one level
 * deeper, rendered to a string. */
static ld_status call_loop(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *lo, tpl_args *a, ld_tpl_value **out)
{
    loop_ctx *lc = rt->loops;
    while (lc && lc->lo != lo) lc = lc->prev;
    if (!lc || !lc->n->neg)
        return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: the loop must be marked as recursive to be called");
    if (a->n_pos != 1 || a->n_kw)
        return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: loop() takes exactly one argument");
    if (rt->macro_depth >= rt->lim.max_depth)
        return tpl_rt_fail(rt, at, LD_ERR_LIMIT, "recursion limit of %u calls exceeded", rt->lim.max_depth);
    ld_tpl_value *seq, *d = tv_dict_get(lo, "depth", 5);
    LD_TRY(tpl_iter(rt, at, a->pos[0], &seq));
    tv_buf b = {0}, *saved = rt->out;
    b.max = rt->lim.max_output_bytes;
    rt->out = &b;
    rt->macro_depth++;
    ld_status s = run_loop(rt, lc->n, seq, (d && d->kind == TV_INT ? d->u.i : 1) + 1, lc->parent);
    rt->macro_depth--;
    rt->out = saved;
    if (s == LD_OK && b.failed) s = tpl_rt_fail(rt, at, LD_ERR_LIMIT, "output size limit exceeded");
    if (s == LD_OK && !(*out = tv_str(rt->arena, b.p, b.len))) s = tpl_nomem(rt, at);
    free(b.p);
    return s;
}

static ld_status eval_args(tpl_rt *rt, const tpl_node *n, tpl_args *a);
static ld_status undefined_use(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v);

/* {% call(params) m(args) %}body{% endcall %}: m(args) with `caller` =
 * the body as a macro that sees the scope of the call site. */
static ld_status exec_call_block(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *callee, *caller, *v;
    tpl_args a;
    LD_TRY(eval(rt, n->a->a, &callee));
    if (callee->kind == TV_UNDEF) return undefined_use(rt, n->a, callee);
    if (callee->kind != TV_MACRO)
        return tpl_rt_fail(rt, n->a, LD_ERR_MISMATCH, "type error: a call block needs a macro, not '%s'", tv_type_name(callee));
    LD_TRY(eval_args(rt, n->a, &a));
    NEW(rt, n, caller = tv_new(rt->arena, TV_MACRO));
    caller->u.macro.node = n;
    call_ctx cc = {n, rt->cur, rt->calls};
    rt->calls = &cc;
    ld_status s = tpl_call_macro_with(rt, n->a, callee, &a, caller, &v);
    rt->calls = cc.prev;
    LD_TRY(s);
    tv_buf_put(rt->out, v->u.str.s, v->u.str.len);
    return LD_OK;
}

/* {% filter chain %}body{% endfilter %} */
static ld_status exec_filter_block(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *body, *v, *saved = rt->block_value;
    LD_TRY(capture(rt, n, &n->list, &body));
    rt->block_value = body;
    ld_status s = eval(rt, n->a, &v);
    rt->block_value = saved;
    LD_TRY(s);
    if (!tv_print(rt->out, v, false) && !rt->out->failed)
        return tpl_rt_fail(rt, n->a, LD_ERR_UNSUPPORTED, "cannot print a '%s' value", tv_type_name(v));
    return LD_OK;
}

static ld_status exec_stmt(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *v;
    switch (n->kind) {
    case N_DATA:
        tv_buf_put(rt->out, n->s, n->s_len);
        break;
    case N_OUTPUT:
        LD_TRY(eval(rt, n->a, &v));
        if (!tv_print(rt->out, v, false) && !rt->out->failed)
            return tpl_rt_fail(rt, n->a, LD_ERR_UNSUPPORTED, "cannot print a '%s' value", tv_type_name(v));
        break;
    case N_IF:
        LD_TRY(eval(rt, n->a, &v));
        return exec_body(rt, tv_truthy(v) ? &n->list : &n->list2);
    case N_FOR: return exec_for(rt, n);
    case N_CALL_BLOCK: LD_TRY(exec_call_block(rt, n)); break;
    case N_FILTER_BLOCK: LD_TRY(exec_filter_block(rt, n)); break;
    case N_SET:
        LD_TRY(eval(rt, n->a, &v));
        return assign_targets(rt, n, v);
    case N_SET_BLOCK:
        LD_TRY(capture(rt, n, &n->list, &v));
        return set_var(rt, n, n->s, v);
    case N_SET_ATTR: {
        ld_tpl_value *ns = lookup(rt, n->s, n->s_len);
        NEW(rt, n, ns);
        if (ns->kind != TV_NS)
            return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "template runtime error: cannot assign attribute on non-namespace object");
        LD_TRY(eval(rt, n->a, &v));
        NEW(rt, n, tv_dict_put(rt->arena, ns, tv_str_ref(rt->arena, n->b->s, n->b->s_len), v));
        break;
    }
    case N_MACRO:
        NEW(rt, n, v = tv_new(rt->arena, TV_MACRO));
        v->u.macro.node = n;
        return set_var(rt, n, n->s, v);
    case N_BREAK: rt->ctrl = 1; break;
    case N_CONTINUE: rt->ctrl = 2; break;
    default: return tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "unknown statement");
    }
    if (rt->out->failed)
        return tpl_rt_fail(rt, n, LD_ERR_LIMIT, "output size limit of %zu bytes exceeded", rt->lim.max_output_bytes);
    return LD_OK;
}

static ld_status exec_body(tpl_rt *rt, const tpl_nodes *body)
{
    if (++rt->nest > MAX_NEST) return tpl_rt_fail(rt, body->n ? body->v[0] : NULL, LD_ERR_LIMIT, "nesting limit exceeded");
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
    ld_tpl_value *va = tv_new(rt->arena, TV_LIST), *kw = tv_new(rt->arena, TV_DICT);
    NEW(rt, at, va && kw);
    va->flags |= TV_F_TUPLE;
    for (size_t i = np; i < args->n_pos; i++) NEW(rt, at, tv_push(rt->arena, va, args->pos[i]));
    for (size_t k = 0; k < args->n_kw; k++) {
        bool known = false;
        for (size_t i = 0; i < np; i++) known = known || strcmp(args->kw[k], def->kw[i]) == 0;
        if (known) continue;
        if (!(def->neg & 2))
            return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: macro '%s' takes no keyword argument '%s'", def->s, args->kw[k]);
        NEW(rt, at, tv_dict_put(rt->arena, kw, tv_str(rt->arena, args->kw[k], strlen(args->kw[k])), args->kwv[k]));
    }
    if (def->neg & 1) LD_TRY(set_var(rt, at, "varargs", va));
    if (def->neg & 2) LD_TRY(set_var(rt, at, "kwargs", kw));
    return LD_OK;
}

ld_status tpl_call_macro(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *m, tpl_args *args, ld_tpl_value **out)
{
    return tpl_call_macro_with(rt, at, m, args, NULL, out);
}

ld_status tpl_call_macro_with(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *m, tpl_args *args,
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
        return tpl_rt_fail(rt, at, LD_ERR_LIMIT, "recursion limit of %u macro calls exceeded", rt->lim.max_depth);
    if (args->n_pos > np && !(def->neg & 1))
        return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: macro '%s' takes not more than %zu argument(s)", def->s, np);
    frame f = {parent, tv_new(rt->arena, TV_DICT)}, *saved_cur = rt->cur;
    NEW(rt, at, f.vars);
    rt->cur = &f;
    ld_status s = caller ? set_var(rt, at, "caller", caller) : LD_OK;
    for (size_t i = 0; s == LD_OK && i < np; i++) {
        ld_tpl_value *v = i < args->n_pos ? args->pos[i] : NULL;
        for (size_t k = 0; !v && k < args->n_kw; k++)
            if (strcmp(args->kw[k], def->kw[i]) == 0) v = args->kwv[k];
        if (!v && def->list2.v[i]) s = eval(rt, def->list2.v[i], &v);
        else if (!v) {
            char hint[160];
            snprintf(hint, sizeof hint, "parameter '%s' was not provided", def->kw[i]);
            v = tv_undef(rt->arena, hint);
        }
        if (s == LD_OK) s = set_var(rt, at, def->kw[i], v);
    }
    s = s == LD_OK ? extra_args(rt, at, def, args) : s;
    tv_buf b = {0}, *saved_out = rt->out;
    b.max = rt->lim.max_output_bytes;
    rt->out = &b;
    rt->macro_depth++;
    if (s == LD_OK) s = exec_body(rt, &def->list);
    rt->macro_depth--;
    rt->ctrl = 0;
    rt->out = saved_out;
    rt->cur = saved_cur;
    if (s == LD_OK && b.failed) s = tpl_rt_fail(rt, at, LD_ERR_LIMIT, "output size limit exceeded");
    if (s == LD_OK && !(*out = tv_str(rt->arena, b.p, b.len))) s = tpl_nomem(rt, at);
    free(b.p);
    return s;
}

/* ---------------------------------------------------------------- expressions */

static ld_status undefined_use(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v)
{
    char buf[200];
    const char *hint = tv_undef_hint(v, buf, sizeof buf);
    if (v->flags & TV_F_UNSAFE) return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "security error: %s", hint);
    return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "undefined error: %s", hint);
}

static ld_status eval_args(tpl_rt *rt, const tpl_node *n, tpl_args *a)
{
    memset(a, 0, sizeof *a);
    a->n_pos = n->list.n, a->n_kw = n->list2.n, a->kw = n->kw;
    if (a->n_pos) NEW(rt, n, a->pos = ld_arena_alloc(rt->arena, a->n_pos * sizeof *a->pos));
    if (a->n_kw) NEW(rt, n, a->kwv = ld_arena_alloc(rt->arena, a->n_kw * sizeof *a->kwv));
    for (size_t i = 0; i < a->n_pos; i++) LD_TRY(eval(rt, n->list.v[i], &a->pos[i]));
    for (size_t i = 0; i < a->n_kw; i++) LD_TRY(eval(rt, n->list2.v[i], &a->kwv[i]));
    return LD_OK;
}

static ld_status call_func(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *f, tpl_args *a, ld_tpl_value **out)
{
    ld_arena *A = rt->arena;
    switch (f->u.func.id) {
    case TF_RAISE: {
        ld_tpl_value *m = a->n_pos ? tpl_str_of(rt, a->pos[0]) : tv_str(A, "", 0);
        NEW(rt, at, m);
        return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "template error '%.*s'", (int)(m->u.str.len > 150 ? 150 : m->u.str.len), m->u.str.s);
    }
    case TF_NAMESPACE: {
        ld_tpl_value *ns = tv_new(A, TV_NS);
        NEW(rt, at, ns);
        for (size_t i = 0; i < a->n_pos; i++) {
            if (a->pos[i]->kind != TV_DICT) return tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: namespace() takes a dict");
            for (size_t k = 0; k < a->pos[i]->u.dict.n; k++)
                NEW(rt, at, tv_dict_put(A, ns, a->pos[i]->u.dict.keys[k], a->pos[i]->u.dict.vals[k]));
        }
        for (size_t i = 0; i < a->n_kw; i++) NEW(rt, at, tv_dict_put(A, ns, tv_str(A, a->kw[i], strlen(a->kw[i])), a->kwv[i]));
        *out = ns;
        return LD_OK;
    }
    case TF_DICT: {
        ld_tpl_value *d = tv_new(A, TV_DICT);
        NEW(rt, at, d);
        for (size_t i = 0; i < a->n_kw; i++) NEW(rt, at, tv_dict_put(A, d, tv_str(A, a->kw[i], strlen(a->kw[i])), a->kwv[i]));
        *out = d;
        return LD_OK;
    }
    default:
        return tpl_filter(rt, at, f->u.func.id == TF_RANGE ? "__range" : "__strftime_now", NULL, a, out);
    }
}

static ld_status eval_call(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *f;
    tpl_args a;
    LD_TRY(eval(rt, n->a, &f));
    if (f->kind == TV_UNDEF) return undefined_use(rt, n, f);
    LD_TRY(eval_args(rt, n, &a));
    switch (f->kind) {
    case TV_METHOD: return tpl_method(rt, n, f->u.method.self, f->u.method.name, &a, out);
    case TV_MACRO: return tpl_call_macro(rt, n, f, &a, out);
    case TV_DICT:
        if (f->flags & TV_F_LOOP) return call_loop(rt, n, f, &a, out);
        break;
    case TV_FUNC: return call_func(rt, n, f, &a, out);
    default: break;
    }
    return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: '%s' object is not callable", tv_type_name(f));
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static ld_status eval_slice(tpl_rt *rt, const tpl_node *n, ld_tpl_value *obj, ld_tpl_value **out)
{
    int64_t p[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; k++) {
        ld_tpl_value *v;
        if (!n->list.v[k]) continue;
        LD_TRY(eval(rt, n->list.v[k], &v));
        if (v->kind == TV_NONE) continue;
        if (v->kind != TV_INT && v->kind != TV_BOOL)
            return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: slice indices must be integers or None");
        p[k] = v->kind == TV_INT ? v->u.i : v->u.b, given[k] = true;
    }
    if (p[2] == 0) return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "value error: slice step cannot be zero");
    ld_tpl_value *items = obj;
    if (obj->kind == TV_STR) LD_TRY(tpl_iter(rt, n, obj, &items));
    else if (obj->kind != TV_LIST) {
        if (obj->kind == TV_UNDEF) return undefined_use(rt, n, obj);
        return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: '%s' object is not subscriptable", tv_type_name(obj));
    }
    int64_t len = (int64_t)items->u.list.n, st = p[2];
    int64_t lo = st > 0 ? 0 : -1, hi = st > 0 ? len : len - 1;
    int64_t b = given[0] ? (p[0] < 0 ? p[0] + len : p[0]) : (st > 0 ? 0 : len - 1);
    int64_t e = given[1] ? (p[1] < 0 ? p[1] + len : p[1]) : (st > 0 ? len : -1);
    b = clampi(b, lo, hi), e = given[1] ? clampi(e, lo, hi) : e;
    ld_tpl_value *r = tv_new(rt->arena, TV_LIST);
    NEW(rt, n, r);
    r->flags = obj->flags & TV_F_TUPLE;
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) NEW(rt, n, tv_push(rt->arena, r, items->u.list.items[i]));
    if (obj->kind == TV_STR) {
        tv_buf s = {0};
        for (size_t i = 0; i < r->u.list.n; i++) tv_buf_put(&s, r->u.list.items[i]->u.str.s, r->u.list.items[i]->u.str.len);
        r = s.failed ? NULL : tv_str(rt->arena, s.p, s.len);
        free(s.p);
        NEW(rt, n, r);
    }
    *out = r;
    return LD_OK;
}

static ld_status getitem(tpl_rt *rt, const tpl_node *n, ld_tpl_value *obj, ld_tpl_value *key, ld_tpl_value **out)
{
    if (obj->kind == TV_UNDEF) return undefined_use(rt, n, obj);
    if ((obj->kind == TV_LIST || obj->kind == TV_STR) && (key->kind == TV_INT || key->kind == TV_BOOL)) {
        ld_tpl_value *items = obj;
        if (obj->kind == TV_STR) LD_TRY(tpl_iter(rt, n, obj, &items));
        int64_t i = key->kind == TV_INT ? key->u.i : key->u.b, len = (int64_t)items->u.list.n;
        if (i < 0) i += len;
        if (i >= 0 && i < len) return *out = items->u.list.items[i], LD_OK;
        NEW(rt, n, *out = tv_undef(rt->arena, "index out of range"));
        return LD_OK;
    }
    if (obj->kind == TV_DICT || obj->kind == TV_NS) {
        ld_tpl_value *v = tv_dict_getv(obj, key);
        if (v) return *out = v, LD_OK;
    }
    if (key->kind == TV_STR) {
        NEW(rt, n, *out = tpl_getattr(rt, obj, key->u.str.s, key->u.str.len));
        return LD_OK;
    }
    char hint[160];
    snprintf(hint, sizeof hint, "'%s object' has no item", tv_type_name(obj));
    NEW(rt, n, *out = tv_undef(rt->arena, hint));
    return LD_OK;
}

static ld_status contains(tpl_rt *rt, const tpl_node *n, ld_tpl_value *x, ld_tpl_value *c, bool *out)
{
    *out = false;
    if (c->kind == TV_STR) {
        if (x->kind != TV_STR)
            return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: 'in <string>' requires string as left operand, not %s", tv_type_name(x));
        *out = tv_memfind(c->u.str.s, c->u.str.len, x->u.str.s, x->u.str.len) != NULL;
        return LD_OK;
    }
    if (c->kind == TV_DICT || c->kind == TV_NS) return *out = tv_dict_getv(c, x) != NULL, LD_OK;
    if (c->kind == TV_LIST) {
        for (size_t i = 0; i < c->u.list.n; i++) if (tv_equal(c->u.list.items[i], x)) return *out = true, LD_OK;
        return LD_OK;
    }
    if (c->kind == TV_UNDEF) return LD_OK;
    return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: argument of type '%s' is not iterable", tv_type_name(c));
}

static bool numeric(const ld_tpl_value *v) { return v->kind == TV_INT || v->kind == TV_FLOAT || v->kind == TV_BOOL; }
static double fnum(const ld_tpl_value *v) { return v->kind == TV_FLOAT ? v->u.f : v->kind == TV_INT ? (double)v->u.i : v->u.b; }
static int64_t inum(const ld_tpl_value *v) { return v->kind == TV_INT ? v->u.i : v->u.b; }

static ld_status arith(tpl_rt *rt, const tpl_node *n, char op, ld_tpl_value *a, ld_tpl_value *b, ld_tpl_value **out)
{
    ld_arena *A = rt->arena;
    if (a->kind == TV_UNDEF) return undefined_use(rt, n, a);
    if (b->kind == TV_UNDEF) return undefined_use(rt, n, b);
    if (op == '+' && a->kind == TV_STR && b->kind == TV_STR) {
        char *s = ld_arena_alloc(A, a->u.str.len + b->u.str.len + 1);
        ld_tpl_value *r = tv_new(A, TV_STR);
        NEW(rt, n, s && r);
        memcpy(s, a->u.str.s, a->u.str.len);
        memcpy(s + a->u.str.len, b->u.str.s, b->u.str.len);
        s[a->u.str.len + b->u.str.len] = 0;
        r->u.str.s = s, r->u.str.len = a->u.str.len + b->u.str.len;
        return *out = r, LD_OK;
    }
    if (op == '+' && a->kind == TV_LIST && b->kind == TV_LIST) {
        ld_tpl_value *r = tv_new(A, TV_LIST);
        NEW(rt, n, r);
        for (size_t i = 0; i < a->u.list.n; i++) NEW(rt, n, tv_push(A, r, a->u.list.items[i]));
        for (size_t i = 0; i < b->u.list.n; i++) NEW(rt, n, tv_push(A, r, b->u.list.items[i]));
        return *out = r, LD_OK;
    }
    if (op == '*' && a->kind == TV_INT && (b->kind == TV_STR || b->kind == TV_LIST)) return arith(rt, n, op, b, a, out);
    if (op == '*' && a->kind == TV_LIST && b->kind == TV_INT) { /* [x] * n */
        ld_tpl_value *r = tv_new(A, TV_LIST);
        NEW(rt, n, r);
        r->flags = a->flags & TV_F_TUPLE;
        for (int64_t i = 0; i < b->u.i; i++) {
            if (r->u.list.n + a->u.list.n > rt->lim.max_output_bytes) return tpl_nomem(rt, n);
            for (size_t j = 0; j < a->u.list.n; j++) NEW(rt, n, tv_push(A, r, a->u.list.items[j]));
        }
        return *out = r, LD_OK;
    }
    if (op == '*' && a->kind == TV_STR && (b->kind == TV_INT)) {
        tv_buf s = {0};
        s.max = rt->lim.max_output_bytes;
        for (int64_t i = 0; i < b->u.i && !s.failed; i++) tv_buf_put(&s, a->u.str.s, a->u.str.len);
        ld_tpl_value *r = s.failed ? NULL : tv_str(A, s.p, s.len);
        free(s.p);
        NEW(rt, n, r);
        return *out = r, LD_OK;
    }
    if (!numeric(a) || !numeric(b)) {
        if (op == '+' && a->kind == TV_STR)
            return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: can only concatenate str (not \"%s\") to str", tv_type_name(b));
        return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: unsupported operand type(s) for %c: '%s' and '%s'", op,
                           tv_type_name(a), tv_type_name(b));
    }
    bool fl = a->kind == TV_FLOAT || b->kind == TV_FLOAT || op == '/';
    if ((op == '/' || op == 'f' || op == '%') && fnum(b) == 0)
        return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "zero division error: division by zero");
    if (fl) {
        double x = fnum(a), y = fnum(b), r;
        switch (op) {
        case '+': r = x + y; break;
        case '-': r = x - y; break;
        case '*': r = x * y; break;
        case '/': r = x / y; break;
        case 'f': r = floor(x / y); break;
        case '%': r = fmod(x, y); if (r != 0 && ((r < 0) != (y < 0))) r += y; break;
        default: r = pow(x, y);
        }
        NEW(rt, n, *out = tv_float(A, r));
        return LD_OK;
    }
    int64_t x = inum(a), y = inum(b), r;
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
        if (y < 0) { NEW(rt, n, *out = tv_float(A, pow((double)x, (double)y))); return LD_OK; }
        r = 1; /* by squaring */
        int64_t bs = x;
        for (uint64_t e = (uint64_t)y; e && !over;) {
            if (e & 1) over = __builtin_mul_overflow(r, bs, &r);
            e >>= 1;
            if (e && !over) over = __builtin_mul_overflow(bs, bs, &bs);
        }
    }
    if (over) /* Python's ints have no bound: no wrapped-around result */
        return tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "integer result beyond 64 bits is not supported");
    NEW(rt, n, *out = ld_tpl_value_int(A, r));
    return LD_OK;
}

static ld_status eval_binop(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *a, *b;
    LD_TRY(eval(rt, n->a, &a));
    LD_TRY(eval(rt, n->b, &b));
    if (n->neg == '~') {
        ld_tpl_value *x = a->kind == TV_UNDEF ? tv_str(rt->arena, "", 0) : tpl_str_of(rt, a);
        ld_tpl_value *y = b->kind == TV_UNDEF ? tv_str(rt->arena, "", 0) : tpl_str_of(rt, b);
        if (!x || !y) return tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "cannot convert value to string");
        return arith(rt, n, '+', x, y, out);
    }
    return arith(rt, n, (char)n->neg, a, b, out);
}

static ld_status eval_compare(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *a, *b;
    bool r, ok = true;
    if (n->c) { /* a chain: false as soon as one link is */
        LD_TRY(eval(rt, n->c, &a));
        if (!tv_truthy(a)) return *out = a, LD_OK;
    }
    LD_TRY(eval(rt, n->a, &a));
    LD_TRY(eval(rt, n->b, &b));
    switch (n->neg) {
    case 1: r = tv_equal(a, b); break;
    case 2: r = !tv_equal(a, b); break;
    case 7: case 8: LD_TRY(contains(rt, n, a, b, &r)); if (n->neg == 8) r = !r; break;
    default: {
        if (a->kind == TV_UNDEF) return undefined_use(rt, n, a);
        if (b->kind == TV_UNDEF) return undefined_use(rt, n, b);
        int c = tv_compare(a, b, &ok);
        r = n->neg == 3 ? c < 0 : n->neg == 4 ? c <= 0 : n->neg == 5 ? c > 0 : c >= 0;
    }
    }
    if (!ok) return tpl_rt_fail(rt, n, LD_ERR_MISMATCH, "type error: '<' not supported between instances of '%s' and '%s'",
                                tv_type_name(a), tv_type_name(b));
    *out = tv_bool(r);
    return LD_OK;
}

static ld_status eval_seq(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    ld_tpl_value *r = tv_new(rt->arena, n->kind == N_DICT ? TV_DICT : TV_LIST), *k, *v;
    NEW(rt, n, r);
    if (n->kind == N_TUPLE) r->flags |= TV_F_TUPLE;
    for (size_t i = 0; i < n->list.n; i++) {
        LD_TRY(eval(rt, n->list.v[i], &k));
        if (n->kind == N_DICT) {
            LD_TRY(eval(rt, n->list2.v[i], &v));
            NEW(rt, n, tv_dict_put(rt->arena, r, k, v));
        } else {
            NEW(rt, n, tv_push(rt->arena, r, k));
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
    case N_NAME: NEW(rt, n, *out = lookup(rt, n->s, n->s_len)); return LD_OK;
    case N_GETATTR:
        LD_TRY(eval(rt, n->a, &a));
        if (a->kind == TV_UNDEF) return undefined_use(rt, n, a);
        NEW(rt, n, *out = tpl_getattr(rt, a, n->s, strlen(n->s)));
        return LD_OK;
    case N_GETITEM:
        LD_TRY(eval(rt, n->a, &a));
        LD_TRY(eval(rt, n->b, &b));
        return getitem(rt, n, a, b, out);
    case N_SLICE:
        LD_TRY(eval(rt, n->a, &a));
        return eval_slice(rt, n, a, out);
    case N_CALL: return eval_call(rt, n, out);
    case N_FILTER:
        LD_TRY(eval(rt, n->a, &a));
        LD_TRY(eval_args(rt, n, &args));
        return tpl_filter(rt, n, n->s, a, &args, out);
    case N_TEST: {
        bool r;
        LD_TRY(eval(rt, n->a, &a));
        LD_TRY(eval_args(rt, n, &args));
        LD_TRY(tpl_test(rt, n, n->s, a, &args, &r));
        *out = tv_bool(n->neg ? !r : r);
        return LD_OK;
    }
    case N_BINOP: return eval_binop(rt, n, out);
    case N_UNARY:
        LD_TRY(eval(rt, n->a, &a));
        if (n->neg == '+' && numeric(a)) return *out = a, LD_OK;
        if (a->kind == TV_FLOAT) { /* -x, not 0 - x: -0.0 keeps its sign */
            NEW(rt, n, *out = tv_float(rt->arena, -a->u.f));
            return LD_OK;
        }
        NEW(rt, n, b = ld_tpl_value_int(rt->arena, 0));
        return arith(rt, n, '-', b, a, out);
    case N_AND: case N_OR:
        LD_TRY(eval(rt, n->a, &a));
        if (tv_truthy(a) == (n->kind == N_OR)) return *out = a, LD_OK;
        return eval(rt, n->b, out);
    case N_NOT:
        LD_TRY(eval(rt, n->a, &a));
        *out = tv_bool(!tv_truthy(a));
        return LD_OK;
    case N_COMPARE: return eval_compare(rt, n, out);
    case N_COND:
        LD_TRY(eval(rt, n->b, &a));
        if (tv_truthy(a)) return eval(rt, n->a, out);
        if (n->c) return eval(rt, n->c, out);
        NEW(rt, n, *out = tv_undef(rt->arena, "the inline if-expression evaluated to false and no else section was defined"));
        return LD_OK;
    case N_LIST: case N_DICT: case N_TUPLE: return eval_seq(rt, n, out);
    case N_BLOCK_VALUE: NEW(rt, n, *out = rt->block_value); return LD_OK;
    default: return tpl_rt_fail(rt, n, LD_ERR_UNSUPPORTED, "unknown expression");
    }
}

static ld_status eval(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out)
{
    if (++rt->nest > MAX_NEST) return tpl_rt_fail(rt, n, LD_ERR_LIMIT, "nesting limit exceeded");
    ld_status s = eval_node(rt, n, out);
    rt->nest--;
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
    frame root = {NULL, tv_new(rt.arena, TV_DICT)};
    rt.root = rt.cur = &root;
    ld_status s = root.vars ? exec_body(&rt, &t->body) : tpl_nomem(&rt, NULL);
    if (s == LD_OK && b.failed) s = tpl_rt_fail(&rt, NULL, LD_ERR_LIMIT, "output size limit exceeded");
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
