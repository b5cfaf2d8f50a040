/* tpl_seq.c - jinja2's sequence filters unique, groupby (items keyed by an
 * attribute path, strings compared without case unless case_sensitive is
 * true), batch, slice, and attr. */
#include <stdio.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define A (ld_tpl_rt_arena(rt))
#define NEWV(expr) do { if (!(expr)) return ld_tpl_nomem(rt, at); } while (0)

/* the key of `item`: its attribute path `attr` (NULL = the item), the
 * default for an undefined one, lowered when `fold` */
static ld_status key_of(tpl_rt *rt, const tpl_node *at, ld_tpl_value *item, const ld_tpl_value *attr,
                        ld_tpl_value *dflt, bool fold, ld_tpl_value **out)
{
    ld_tpl_value *k = item;
    if (attr) NEWV(k = ld_tpl_attr_path(rt, item, attr));
    if (k->kind == TV_UNDEF && dflt) k = dflt;
    if (fold && k->kind == TV_STR) NEWV(k = ld_tv_case_map(A, k->u.str.s, k->u.str.len, TV_CASE_LOWER));
    return *out = k, LD_OK;
}

/* attribute= as a path string (an int indexes) */
static ld_status attr_arg(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, ld_tpl_value **out)
{
    *out = NULL;
    if (!v || v->kind == TV_NONE) return LD_OK;
    if (v->kind == TV_STR) return *out = v, LD_OK;
    if (v->kind == TV_INT) {
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)v->u.i);
        NEWV(*out = ld_tv_str(A, b, strlen(b)));
        return LD_OK;
    }
    return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: attribute must be a string or an integer");
}

ld_status ld_tpl_filter_unique(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *items, *attr, *cs = ld_tpl_kwarg(a, "case_sensitive", 0);
    ld_tpl_value *r = ld_tv_new(A, TV_LIST), *seen = ld_tv_new(A, TV_LIST);
    NEWV(r && seen);
    r->flags |= TV_F_GEN;
    LD_TRY(attr_arg(rt, at, ld_tpl_kwarg(a, "attribute", 1), &attr));
    LD_TRY(ld_tpl_iter(rt, at, v, &items));
    for (size_t i = 0; i < items->u.list.n; i++) {
        ld_tpl_value *k;
        LD_TRY(key_of(rt, at, items->u.list.items[i], attr, NULL, !(cs && ld_tv_truthy(cs)), &k));
        bool dup = false;
        for (size_t j = 0; j < seen->u.list.n && !dup; j++) dup = ld_tv_equal(seen->u.list.items[j], k);
        if (dup) continue;
        NEWV(ld_tv_push(A, seen, k) && ld_tv_push(A, r, items->u.list.items[i]));
    }
    return *out = r, LD_OK;
}

/* groupby(attribute, default=None, case_sensitive=False): a list of
 * (grouper, list) tuples sorted by key; without case_sensitive the grouper
 * is the first item's own value */
ld_status ld_tpl_filter_groupby(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *items, *attr, *dflt = ld_tpl_kwarg(a, "default", 1), *cs = ld_tpl_kwarg(a, "case_sensitive", 2);
    bool fold = !(cs && ld_tv_truthy(cs));
    LD_TRY(attr_arg(rt, at, ld_tpl_kwarg(a, "attribute", 0), &attr));
    if (!attr) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: groupby needs an attribute");
    LD_TRY(ld_tpl_iter(rt, at, v, &items));
    size_t n = items->u.list.n;
    ld_tpl_value **it = ld_arena_alloc(A, (n ? n : 1) * sizeof *it), **key = ld_arena_alloc(A, (n ? n : 1) * sizeof *key);
    NEWV(it && key);
    for (size_t i = 0; i < n; i++) { /* stable insertion sort by key */
        ld_tpl_value *k, *x = items->u.list.items[i];
        LD_TRY(key_of(rt, at, x, attr, dflt, fold, &k));
        size_t j = i;
        for (; j > 0; j--) {
            bool ok;
            int c = ld_tv_compare(key[j - 1], k, &ok);
            if (!ok)
                return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: '<' not supported between instances of '%s' and '%s'",
                                   ld_tv_type_name(k), ld_tv_type_name(key[j - 1]));
            if (c <= 0) break;
            it[j] = it[j - 1], key[j] = key[j - 1];
        }
        it[j] = x, key[j] = k;
    }
    ld_tpl_value *r = ld_tv_new(A, TV_LIST), *group = NULL;
    NEWV(r);
    for (size_t i = 0; i < n; i++) {
        if (!group || !ld_tv_equal(key[i - 1], key[i])) {
            ld_tpl_value *t = ld_tv_new(A, TV_LIST), *g = key[i];
            NEWV(t && (group = ld_tv_new(A, TV_LIST)));
            if (fold) LD_TRY(key_of(rt, at, it[i], attr, dflt, false, &g));
            t->flags |= TV_F_TUPLE | TV_F_GROUP;
            NEWV(ld_tv_push(A, t, g) && ld_tv_push(A, t, group) && ld_tv_push(A, r, t));
        }
        NEWV(ld_tv_push(A, group, it[i]));
    }
    return *out = r, LD_OK;
}

/* batch(linecount, fill_with=None): lists of linecount items, the last one
 * filled up when fill_with is given (a generator) */
ld_status ld_tpl_filter_batch(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *cv = ld_tpl_kwarg(a, "linecount", 0), *fill = ld_tpl_kwarg(a, "fill_with", 1), *items, *cur = NULL;
    if (!cv || cv->kind != TV_INT || cv->u.i < 1)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: batch needs a positive line count");
    size_t per = (size_t)cv->u.i;
    ld_tpl_value *r = ld_tv_new(A, TV_LIST);
    NEWV(r);
    r->flags |= TV_F_GEN;
    LD_TRY(ld_tpl_iter(rt, at, v, &items));
    size_t n = items->u.list.n, fills = fill && fill->kind != TV_NONE && n % per ? per - n % per : 0;
    /* batch(10**9, 'x') fills a billion items: charged before the work */
    LD_TRY(ld_tpl_rt_charge(rt, at, "batch", fills > SIZE_MAX / sizeof(ld_tpl_value *) ? SIZE_MAX : fills * sizeof(ld_tpl_value *)));
    for (size_t i = 0; i < n; i++) {
        if (!cur || cur->u.list.n == per) NEWV((cur = ld_tv_new(A, TV_LIST)) && ld_tv_push(A, r, cur));
        NEWV(ld_tv_push(A, cur, items->u.list.items[i]));
    }
    while (cur && fill && fill->kind != TV_NONE && cur->u.list.n < per) NEWV(ld_tv_push(A, cur, fill));
    return *out = r, LD_OK;
}

/* attr(name): Python getattr only, no item lookup: a dict's keys are not
 * attributes (undefined), its methods are */
ld_status ld_tpl_filter_attr(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *name = a->n_pos ? a->pos[0] : NULL;
    if (!name || name->kind != TV_STR) NEWV(*out = ld_tv_undef(A, "attr needs a name"));
    else if (v->kind == TV_NS || ld_tpl_has_method(v, name->u.str.s)) NEWV(*out = ld_tpl_getattr(rt, v, name->u.str.s, name->u.str.len));
    else {
        char hint[160];
        snprintf(hint, sizeof hint, "'%s object' has no attribute '%.60s'", ld_tv_type_name(v), name->u.str.s);
        NEWV(*out = ld_tv_undef(A, hint));
    }
    return LD_OK;
}

/* slice(slices, fill_with=None): the items dealt into `slices` columns,
 * the first len % slices columns one item longer (a generator) */
ld_status ld_tpl_filter_slice(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *sv = ld_tpl_kwarg(a, "slices", 0), *fill = ld_tpl_kwarg(a, "fill_with", 1), *items;
    if (!sv || sv->kind != TV_INT || sv->u.i < 1)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: slice needs a positive number of slices");
    LD_TRY(ld_tpl_iter(rt, at, v, &items));
    size_t n = items->u.list.n, k = (size_t)sv->u.i, per = n / k, extra = n % k, off = 0;
    /* slice(10**9) makes a billion lists: charged before the work */
    LD_TRY(ld_tpl_rt_charge(rt, at, "slice", k > SIZE_MAX / sizeof(ld_tpl_value) ? SIZE_MAX : k * sizeof(ld_tpl_value)));
    ld_tpl_value *r = ld_tv_new(A, TV_LIST);
    NEWV(r);
    r->flags |= TV_F_GEN;
    for (size_t i = 0; i < k; i++) {
        size_t len = per + (i < extra);
        ld_tpl_value *col = ld_tv_new(A, TV_LIST);
        NEWV(col && ld_tv_push(A, r, col));
        for (size_t j = 0; j < len; j++) NEWV(ld_tv_push(A, col, items->u.list.items[off + j]));
        off += len;
        if (fill && fill->kind != TV_NONE && i >= extra) NEWV(ld_tv_push(A, col, fill));
    }
    return *out = r, LD_OK;
}
