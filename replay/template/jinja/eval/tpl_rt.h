/* tpl_rt.h - the evaluator's state during one render and what its files
 * share: tpl_runtime.c (errors, limits, iteration), tpl_expr.c
 * (expressions), tpl_arith.c (operators on numbers, strings and lists) and
 * tpl_exec.c (statements, loops, macros, the render).  Internal to eval/. */
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

#define NEW(rt, at, expr) do { if (!(expr)) return ld_tpl_nomem((rt), (at)); } while (0)

/* tpl_runtime.c: the error of using an undefined value (a security error
 * for the sandbox's refused attributes) */
ld_status ld_tpl_undefined_use(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v);

/* tpl_exec.c: a loop iteration counted against the sandbox's limit; a
 * statement list; `loop(items)` of a recursive loop */
ld_status ld_tpl_count_iter(tpl_rt *rt, const tpl_node *at);
ld_status ld_tpl_exec_body(tpl_rt *rt, const tpl_nodes *body);
ld_status ld_tpl_call_loop(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *lo, tpl_args *a, ld_tpl_value **out);

/* tpl_expr.c: an expression's value; a call's arguments; a name in scope
 * (the innermost first, then the render's context, then the globals) */
ld_status ld_tpl_eval_expr(tpl_rt *rt, const tpl_node *n, ld_tpl_value **out);
ld_status ld_tpl_eval_args(tpl_rt *rt, const tpl_node *n, tpl_args *a);
ld_tpl_value *ld_tpl_lookup(tpl_rt *rt, const char *name, size_t len);

/* an int, a float or a bool: what arithmetic takes */
static inline bool tpl_is_number(const ld_tpl_value *v)
{
    return v->kind == TV_INT || v->kind == TV_FLOAT || v->kind == TV_BOOL;
}

/* tpl_arith.c: a op b for + - * / // (op 'f') % ** with Python's semantics */
ld_status ld_tpl_arith(tpl_rt *rt, const tpl_node *n, char op, ld_tpl_value *a, ld_tpl_value *b, ld_tpl_value **out);

#endif /* LD_TPL_RT_H */
