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

/* a word and its length, so that most words are told apart by length */
typedef struct word {
    const char *s;
    size_t len;
} word;
#define W(s) { s, sizeof s - 1 }
static const word str_methods[] = {W("startswith"), W("endswith"), W("split"), W("rsplit"), W("strip"), W("lstrip"),
                                   W("rstrip"), W("upper"), W("lower"), W("replace"), W("title"), W("capitalize"),
                                   W("find"), W("count"), W("isdigit"), W("isspace"), W("splitlines"), W("format"),
                                   W("isalpha"), W("isalnum"), W("isupper"), W("islower"), W("join"), W("rfind"),
                                   W("removeprefix"), W("removesuffix"), {NULL, 0}};
static const word dict_methods[] = {W("get"), W("items"), W("keys"), W("values"), {NULL, 0}};
static const word list_methods[] = {W("index"), W("count"), {NULL, 0}};
/* the mutating methods the sandbox refuses, per type (jinja2's
 * modifies_known_mutable): a list's on a dict is only a key, as in Python */
static const word list_unsafe[] = {W("append"), W("pop"), W("insert"), W("extend"), W("remove"), W("clear"),
                                   W("sort"), W("reverse"), {NULL, 0}};
static const word dict_unsafe[] = {W("pop"), W("clear"), W("update"), W("setdefault"), W("popitem"), {NULL, 0}};
#undef W

/* name[0..len) is one of set's words (length and first byte checked
 * before the rest: this runs on every attribute access) */
static bool in_set(const word *set, const char *name, size_t len)
{
    for (int i = 0; set[i].s; i++)
        if (set[i].len == len && set[i].s[0] == name[0] && memcmp(set[i].s, name, len) == 0) return true;
    return false;
}

/* false when name[0..len) is none of dict_methods, list_methods,
 * list_unsafe and dict_unsafe, told by its first byte and length alone (true: look in
 * the sets).  Most attribute accesses are a message's key on a dict, and
 * this keeps them from scanning three sets.  Kept in step with the sets:
 * each first byte below lists the lengths of the sets' words that start
 * with it. */
static bool maybe_container_word(const char *name, size_t len)
{
    switch (name[0]) {
    case 'a': case 'e': case 'u': case 'v': return len == 6; /* append extend update values */
    case 'c': return len == 5;                               /* clear count */
    case 'g': return len == 3;                               /* get */
    case 'i': return len == 5 || len == 6;                   /* items index insert */
    case 'k': return len == 4;                               /* keys */
    case 'p': return len == 3 || len == 7;                   /* pop popitem */
    case 'r': return len == 6 || len == 7;                   /* remove reverse */
    case 's': return len == 4 || len == 10;                  /* sort setdefault */
    default: return false;
    }
}

bool ld_tpl_attr_plain(const char *name, size_t len)
{
    return !(len && maybe_container_word(name, len)) && !(len == 5 && memcmp(name, "cycle", 5) == 0);
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
    bool maybe = len && maybe_container_word(name, len);
    bool unsafe = maybe && ((v->kind == TV_LIST && in_set(list_unsafe, name, len)) ||
                            (v->kind == TV_DICT && in_set(dict_unsafe, name, len)));
    if ((v->flags & TV_F_GROUP) && v->u.list.n == 2 && (len == 7 || len == 4) && memcmp(name, len == 7 ? "grouper" : "list", len) == 0)
        return v->u.list.items[len == 7 ? 0 : 1];
    if ((v->flags & TV_F_LOOP) && len == 5 && memcmp(name, "cycle", 5) == 0) {
        ld_tpl_value *m = ld_tv_new(A, TV_METHOD);
        if (m) m->u.method.self = v, m->u.method.name = "cycle";
        return m;
    }
    if (v->kind == TV_NS) {
        size_t i = ld_tv_key_index(v, name, len);
        if (i < v->u.dict.n) return v->u.dict.vals[i];
    } else if ((v->kind == TV_STR && in_set(str_methods, name, len)) || (maybe && v->kind == TV_DICT && in_set(dict_methods, name, len)) ||
               (maybe && v->kind == TV_LIST && !(v->flags & TV_F_GEN) && in_set(list_methods, name, len))) {
        ld_tpl_value *m = ld_tv_new(A, TV_METHOD);
        if (!m) return NULL;
        m->u.method.self = v;
        m->u.method.name = ld_arena_memdup(A, name, len);
        return m->u.method.name ? m : NULL;
    } else if (v->kind == TV_DICT && !unsafe) {
        size_t i = ld_tv_key_index(v, name, len);
        if (i < v->u.dict.n) return v->u.dict.vals[i];
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
