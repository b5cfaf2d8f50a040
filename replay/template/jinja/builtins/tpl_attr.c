/* tpl_attr.c - what a value offers by name: keyword arguments of a call
 * (ld_tpl_kwarg), attributes and methods (ld_tpl_getattr, ld_tpl_has_method; the
 * mutating list and dict methods refused as the sandbox refuses them) and
 * attribute paths ("a.b", jinja's make_attrgetter).  The leaf the filters,
 * the methods and the evaluator share. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define A (ld_tpl_rt_arena(rt))

ld_tpl_value *ld_tpl_kwarg(tpl_args *a, const char *name, size_t pos)
{
    for (size_t i = 0; i < a->n_kw; i++) if (strcmp(a->kw[i], name) == 0) return a->kwv[i];
    return pos < a->n_pos ? a->pos[pos] : NULL;
}

static const char *const str_methods[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
                                          "upper", "lower", "replace", "title", "capitalize", "find", "count",
                                          "isdigit", "isspace", "splitlines", "format", "isalpha", "isalnum",
                                          "isupper", "islower", "join", "rfind", "removeprefix", "removesuffix", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", NULL};
static const char *const list_methods[] = {"index", "count", NULL};
static const char *const unsafe_methods[] = {"append", "pop", "insert", "extend", "remove", "clear", "sort",
                                             "reverse", "update", "setdefault", "popitem", NULL};

/* name[0..len) is one of set's words (first byte checked before the rest:
 * this runs on every attribute access) */
static bool in_set(const char *const *set, const char *name, size_t len)
{
    if (!len) return false;
    for (int i = 0; set[i]; i++)
        if (set[i][0] == name[0] && strncmp(set[i], name, len) == 0 && set[i][len] == 0) return true;
    return false;
}

bool ld_tpl_has_method(const ld_tpl_value *v, const char *name)
{
    size_t n = strlen(name);
    return (v->kind == TV_STR && in_set(str_methods, name, n)) || (v->kind == TV_DICT && in_set(dict_methods, name, n)) ||
           (v->kind == TV_LIST && in_set(list_methods, name, n));
}

ld_tpl_value *ld_tpl_getattr(tpl_rt *rt, const ld_tpl_value *v, const char *name, size_t len)
{
    char hint[200];
    bool unsafe = (v->kind == TV_LIST || v->kind == TV_DICT) && in_set(unsafe_methods, name, len);
    if ((v->flags & TV_F_GROUP) && v->u.list.n == 2 && (len == 7 || len == 4) && memcmp(name, len == 7 ? "grouper" : "list", len) == 0)
        return v->u.list.items[len == 7 ? 0 : 1];
    if ((v->flags & TV_F_LOOP) && len == 5 && memcmp(name, "cycle", 5) == 0) {
        ld_tpl_value *m = ld_tv_new(A, TV_METHOD);
        if (m) m->u.method.self = v, m->u.method.name = "cycle";
        return m;
    }
    if (v->kind == TV_NS) {
        ld_tpl_value *x = ld_tv_dict_get(v, name, len);
        if (x) return x;
    } else if ((v->kind == TV_STR && in_set(str_methods, name, len)) || (v->kind == TV_DICT && in_set(dict_methods, name, len)) ||
               (v->kind == TV_LIST && !(v->flags & TV_F_GEN) && in_set(list_methods, name, len))) {
        ld_tpl_value *m = ld_tv_new(A, TV_METHOD);
        if (!m) return NULL;
        m->u.method.self = v;
        m->u.method.name = ld_arena_memdup(A, name, len);
        return m->u.method.name ? m : NULL;
    } else if (v->kind == TV_DICT && !unsafe) {
        ld_tpl_value *x = ld_tv_dict_get(v, name, len);
        if (x) return x;
    }
    if (!unsafe) return ld_tv_undef_lazy(A, ld_tv_type_name(v), name, len);
    snprintf(hint, sizeof hint, "access to attribute '%.*s' of '%s' object is unsafe.", (int)(len > 60 ? 60 : len), name, ld_tv_type_name(v));
    ld_tpl_value *u = ld_tv_undef(A, hint);
    if (u) u->flags |= TV_F_UNSAFE;
    return u;
}

/* attribute path "a.b" of v (jinja's make_attrgetter); undefined if absent */
ld_tpl_value *ld_tpl_attr_path(tpl_rt *rt, ld_tpl_value *v, const ld_tpl_value *path)
{
    const char *p = path->u.str.s, *e = p + path->u.str.len;
    while (v && p <= e) {
        const char *dot = memchr(p, '.', (size_t)(e - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(e - p);
        if (v->kind == TV_UNDEF) return v;
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++) digits = digits && isdigit((unsigned char)p[i]);
        if (digits && v->kind == TV_LIST) {
            size_t idx = (size_t)strtoull(p, NULL, 10);
            v = idx < v->u.list.n ? v->u.list.items[idx] : ld_tv_undef(A, "index out of range");
        } else {
            ld_tpl_value *x = v->kind == TV_DICT ? ld_tv_dict_get(v, p, n) : NULL;
            v = x ? x : ld_tpl_getattr(rt, v, p, n);
        }
        if (!dot) break;
        p = dot + 1;
    }
    return v;
}
