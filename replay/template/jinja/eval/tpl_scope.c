/* tpl_scope.c - scopes and the names in them, by slot (tpl_rt.h).
 *
 * jinja2 looks a name up in the innermost scope that sets it, then in its
 * parents, then in the render's context and the globals.  Here every name
 * has a slot holding its binding in the current chain of scopes (shallow
 * binding): a scope that sets a name saves what the slot held and puts it
 * back when it ends, so that a lookup is one load.  A scope whose parent is
 * not the current scope (a macro sees the root, a caller body its call
 * site, a recursive loop's `loop(...)` the scope its loop ran in) takes the
 * slots from the scopes it does not see and gives them back after.  The
 * context never changes during a render: a name found there (or among the
 * globals, or undefined) is remembered in its slot, hidden like any other
 * binding by the scopes that set it. */
#include <string.h>

#include "tpl_rt.h"

/* f's names put in the slots, each hiding what its slot held */
static void bind_all(tpl_rt *rt, frame *f)
{
    for (uint32_t i = 0; i < f->n; i++) {
        tpl_bind *b = &f->binds[i];
        tpl_slot *s = &rt->slots[b->id];
        b->hidden = *s;
        s->v = b->own, s->owner = f;
    }
}

/* f's names taken out of the slots, the last set first, each keeping the
 * value it had */
static void unbind_all(tpl_rt *rt, frame *f)
{
    for (uint32_t i = f->n; i-- > 0;) {
        tpl_bind *b = &f->binds[i];
        tpl_slot *s = &rt->slots[b->id];
        b->own = s->v;
        *s = b->hidden;
    }
}

/* the scopes from below `stop` down to f bound, outermost first */
static void bind_down(tpl_rt *rt, const frame *stop, frame *f)
{
    if (f == stop) return;
    bind_down(rt, stop, f->parent);
    bind_all(rt, f);
}

/* The slots moved from the chain of `from` (bound) to the chain of `to`:
 * the scopes of `from` below their common ancestor unbound, innermost
 * first, those of `to` bound. */
static void switch_chain(tpl_rt *rt, frame *from, frame *to)
{
    frame *a = from, *b = to;
    while (a->depth > b->depth) unbind_all(rt, a), a = a->parent;
    while (b->depth > a->depth) b = b->parent;
    while (a != b) unbind_all(rt, a), a = a->parent, b = b->parent;
    bind_down(rt, a, to);
}

void ld_tpl_scope_push(tpl_rt *rt, frame *f, frame *parent)
{
    if (parent != rt->cur) switch_chain(rt, rt->cur, parent);
    f->parent = parent, f->depth = parent->depth + 1, f->n = 0;
    rt->cur = f;
}

void ld_tpl_scope_pop(tpl_rt *rt, frame *f, frame *back)
{
    unbind_all(rt, f);
    f->n = 0;
    if (back != f->parent) switch_chain(rt, f->parent, back);
    rt->cur = back;
}

void ld_tpl_scope_clear(tpl_rt *rt)
{
    unbind_all(rt, rt->cur);
    rt->cur->n = 0;
}

bool ld_tpl_scope_set(tpl_rt *rt, uint32_t id, ld_tpl_value *v)
{
    frame *f = rt->cur;
    tpl_slot *s = &rt->slots[id];
    if (!v) return false;
    if (s->owner == f) return s->v = v, true; /* set again in the same scope */
    if (f->n == f->cap) {
        uint32_t cap = f->cap ? 2 * f->cap : 4;
        tpl_bind *nb = ld_arena_alloc(rt->arena, cap * sizeof *nb);
        if (!nb) return false;
        if (f->n) memcpy(nb, f->binds, f->n * sizeof *nb);
        f->binds = nb, f->cap = cap;
    }
    tpl_bind *b = &f->binds[f->n++];
    b->id = id, b->hidden = *s, b->own = NULL;
    s->v = v, s->owner = f;
    return true;
}

/* jinja2's globals under transformers: never modified, so shared */
static ld_tpl_value globals[] = {
    {.kind = TV_FUNC, .u.func.id = TF_RAISE},     {.kind = TV_FUNC, .u.func.id = TF_STRFTIME},
    {.kind = TV_FUNC, .u.func.id = TF_NAMESPACE}, {.kind = TV_FUNC, .u.func.id = TF_RANGE},
    {.kind = TV_FUNC, .u.func.id = TF_DICT},
};
static const char *const global_names[] = {"raise_exception", "strftime_now", "namespace", "range", "dict"};

ld_tpl_value *ld_tpl_scope_resolve(tpl_rt *rt, uint32_t id, const char *name, size_t len)
{
    ld_tpl_value *v = NULL;
    if (rt->ctx) {
        size_t i = ld_tv_key_index(rt->ctx, name, len);
        if (i < rt->ctx->u.dict.n) v = rt->ctx->u.dict.vals[i];
    }
    for (size_t i = 0; !v && i < sizeof globals / sizeof globals[0]; i++)
        if (strlen(global_names[i]) == len && memcmp(global_names[i], name, len) == 0) v = &globals[i];
    if (!v) v = ld_tv_undef_lazy(rt->arena, NULL, name, len); /* name: the template's */
    if (v) rt->slots[id].v = v, rt->slots[id].owner = NULL;
    return v;
}
