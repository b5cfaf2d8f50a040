/* tpl_rt.h - the evaluator's state during one render and what its files
 * share: tpl_runtime.c (errors, limits, iteration), tpl_scope.c (variables),
 * tpl_expr.c (expressions), tpl_arith.c (operators on numbers, strings and
 * lists) and tpl_exec.c (statements, loops, macros, the render).  Internal
 * to eval/. */
#ifndef LD_TPL_RT_H
#define LD_TPL_RT_H

#include "replay/template/jinja/tpl_internal.h"

#define MAX_NEST 1500 /* statement + expression nesting in one render */

/* A function kept out of its callers: their fast paths then need no frame
 * for its registers. */
#if defined(__GNUC__)
#define TPL_NOINLINE __attribute__((noinline))
#else
#define TPL_NOINLINE
#endif

struct frame;

/* What a name is bound to now: its value in the innermost scope that sets
 * it (owner), or, with owner NULL, its value in the render's context or
 * the globals, filled in when first looked up; v NULL: not looked up yet. */
typedef struct tpl_slot {
    ld_tpl_value *v;
    struct frame *owner;
} tpl_slot;

/* A name a scope binds: the binding it hides (restored when the scope
 * ends or is left for another, see tpl_scope.c) and, while the scope is
 * left, its own value. */
typedef struct tpl_bind {
    uint32_t id;
    tpl_slot hidden;
    ld_tpl_value *own;
} tpl_bind;

/* A scope: the template's top level (the root), a loop's iteration, a
 * macro's call.  Lookups see the current scope's chain of parents. */
typedef struct frame {
    struct frame *parent;
    uint32_t depth;  /* the root's is 0 */
    uint32_t n, cap; /* binds[0..n): the names set in this scope, in order */
    tpl_bind *binds;
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
    tpl_slot *slots; /* per name of the template: what it is bound to in cur's chain */
    const ld_tpl_value *ctx;
    loop_ctx *loops;
    call_ctx *calls;
    ld_tpl_value *block_value; /* body of the innermost filter block */
};

#define NEW(rt, at, expr) do { if (!(expr)) return ld_tpl_nomem((rt), (at)); } while (0)

/* tpl_runtime.c: the error of using an undefined value (a security error
 * for the sandbox's refused attributes) */
ld_status ld_tpl_undefined_use(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v);

/* tpl_exec.c: a loop iteration counted against the sandbox's limit; a
 * statement list; `loop(items)` of a recursive loop */
ld_status ld_tpl_count_iter(tpl_rt *rt, const tpl_node *at);
ld_status ld_tpl_exec_body(tpl_rt *rt, const tpl_nodes *body);
ld_status ld_tpl_call_loop(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *lo, tpl_args *a, ld_tpl_value **out);

/* tpl_scope.c: scopes and the names in them.  The slots hold, for every
 * name, its binding in the chain of scopes from rt->cur to the root, so
 * that a lookup is one load; entering a scope whose parent is not rt->cur
 * (a macro's, which sees the root; a caller body's, which sees its call
 * site) moves the slots from one chain to the other. */
/* f (zeroed by the caller, or a frame popped before) becomes rt->cur, a
 * child of parent */
void ld_tpl_scope_push(tpl_rt *rt, frame *f, frame *parent);
/* f (rt->cur) ends; `back` becomes rt->cur again */
void ld_tpl_scope_pop(tpl_rt *rt, frame *f, frame *back);
/* forgets what rt->cur set (a loop's next iteration) */
void ld_tpl_scope_clear(tpl_rt *rt);
/* name `id` = v in rt->cur; false without memory */
bool ld_tpl_scope_set(tpl_rt *rt, uint32_t id, ld_tpl_value *v);
/* the value of a name not bound in any scope: the render's context's, a
 * global's, or an undefined (NULL without memory); remembered in its slot */
ld_tpl_value *ld_tpl_scope_resolve(tpl_rt *rt, uint32_t id, const char *name, size_t len);

/* The value of name node n (N_NAME, or a statement's name with its slot);
 * NULL without memory. */
static inline ld_tpl_value *tpl_lookup(tpl_rt *rt, const tpl_node *n)
{
    ld_tpl_value *v = rt->slots[n->slot].v;
    return v ? v : ld_tpl_scope_resolve(rt, n->slot, n->s, n->s_len);
}

/* tpl_expr.c: an expression's value; its truth, as `if` asks it (jinja2's
 * `and` and `or` return an operand: only its truth counts there); a
 * call's arguments */
ld_status ld_tpl_eval_expr(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out);
ld_status ld_tpl_eval_cond(tpl_rt *rt, const tpl_node *n, bool *out);
ld_status ld_tpl_eval_args(tpl_rt *rt, const tpl_node *n, tpl_args *a);

/* an int, a float or a bool: what arithmetic takes */
static inline bool tpl_is_number(const ld_tpl_value *v)
{
    return v->kind == TV_INT || v->kind == TV_FLOAT || v->kind == TV_BOOL;
}

/* tpl_arith.c: a op b for + - * / // (op 'f') % ** with Python's semantics */
ld_status ld_tpl_arith(tpl_rt *rt, const tpl_node *n, char op, ld_tpl_value *a, ld_tpl_value *b, ld_tpl_value **out);

#endif /* LD_TPL_RT_H */
