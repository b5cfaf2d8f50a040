/* tpl_filters.c - the filters, tests, Python methods and globals that chat
 * templates use, with the semantics of jinja2 3.1 under transformers'
 * ImmutableSandboxedEnvironment (mutating list/dict methods are refused with
 * a security error; tojson is json.dumps(ensure_ascii=False)). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ld_memfind.h"
#include "replay/template/jinja/tpl_internal.h"

#define A (ld_tpl_rt_arena(rt))
#define NEWV(expr) do { if (!(expr)) return ld_tpl_nomem(rt, at); } while (0)
#define TYPE_ERR(...) ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, __VA_ARGS__)

static inline bool is(const char *a, const char *b) { return ld_tpl_name_is(a, b); }

/* ---------------------------------------------------------------- strings */

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static ld_tpl_value *strip(tpl_rt *rt, const ld_tpl_value *s, const ld_tpl_value *chars, bool l, bool r)
{
    const char *p = s->u.str.s;
    size_t b = 0, e = s->u.str.len;
    bool ws = !chars || chars->kind != TV_STR;
#define STRIPPABLE(c) (ws ? is_space(c) : memchr(chars->u.str.s, (c), chars->u.str.len) != NULL)
    if (l) while (b < e && STRIPPABLE(p[b])) b++;
    if (r) while (e > b && STRIPPABLE(p[e - 1])) e--;
#undef STRIPPABLE
    if (b == 0 && e == s->u.str.len) return (ld_tpl_value *)s; /* nothing stripped: values never change, share it */
    return ld_tv_str(A, p + b, e - b);
}

static ld_status str_split(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *sep = ld_tpl_kwarg(a, "sep", 0), *mx = ld_tpl_kwarg(a, "maxsplit", 1);
    int64_t max = mx && mx->kind == TV_INT ? mx->u.i : -1;
    ld_tpl_value *l = ld_tv_new(A, TV_LIST);
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, i = 0;
    NEWV(l);
    if (!sep || sep->kind == TV_NONE) {
        while (i < n) {
            while (i < n && is_space(p[i])) i++;
            if (i == n) break;
            size_t j = i;
            if (max >= 0 && (int64_t)l->u.list.n >= max) {
                size_t e = n;
                while (e > i && is_space(p[e - 1])) e--;
                NEWV(ld_tv_push(A, l, ld_tv_str(A, p + i, e - i)));
                break;
            }
            while (j < n && !is_space(p[j])) j++;
            NEWV(ld_tv_push(A, l, ld_tv_str(A, p + i, j - i)));
            i = j;
        }
        return *out = l, LD_OK;
    }
    if (sep->kind != TV_STR) return TYPE_ERR("type error: must be str or None, not %s", ld_tv_type_name(sep));
    size_t k = sep->u.str.len;
    if (!k) return TYPE_ERR("value error: empty separator");
    size_t start = 0;
    const char *hit;
    while ((max < 0 || (int64_t)l->u.list.n < max) &&
           (hit = ld_memfind(p + start, n - start, sep->u.str.s, k))) {
        NEWV(ld_tv_push(A, l, ld_tv_str(A, p + start, (size_t)(hit - p) - start)));
        start = (size_t)(hit - p) + k;
    }
    NEWV(ld_tv_push(A, l, ld_tv_str(A, p + start, n - start)));
    return *out = l, LD_OK;
}

/* how many times s.replace(o, r, count) replaces: the matches of a
 * non-empty o left to right, or, for an empty o, the places before every
 * code point and at the end; at most count of them unless count < 0 */
static size_t replace_hits(const ld_tpl_value *s, const ld_tpl_value *o, int64_t count)
{
    size_t n = s->u.str.len, k = o->u.str.len, hits = 0, max = count < 0 ? SIZE_MAX : (size_t)count;
    const char *p = s->u.str.s, *hit;
    if (!k) {
        hits = ld_tv_utf8_count(p, n) + 1;
        return hits < max ? hits : max;
    }
    if (k == 1) { /* one byte: a plain count the compiler vectorises */
        for (size_t i = 0; i < n; i++) hits += p[i] == o->u.str.s[0];
        return hits < max ? hits : max;
    }
    for (size_t i = 0; hits < max && (hit = ld_memfind(p + i, n - i, o->u.str.s, k)); hits++) i = (size_t)(hit - p) + k;
    return hits;
}

/* s with its first `hits` matches of o (as replace_hits counts them)
 * replaced by r, into d */
static void replace_into(char *d, const ld_tpl_value *s, const ld_tpl_value *o, const ld_tpl_value *r, size_t hits)
{
    const char *p = s->u.str.s, *rs = r->u.str.s;
    size_t n = s->u.str.len, k = o->u.str.len, rl = r->u.str.len, i = 0, h = 0;
    for (char x = k ? o->u.str.s[0] : 0; k == 1 && h < hits; i++) { /* one byte: no search call per match */
        if (p[i] != x) { *d++ = p[i]; continue; }
        memcpy(d, rs, rl), d += rl, h++;
    }
    for (; h < hits; h++) {
        size_t at = i;
        if (k) at = (size_t)(ld_memfind(p + i, n - i, o->u.str.s, k) - p);
        else if (h > 0) /* empty o: after the next code point */
            for (at = i + 1; at < n && ((unsigned char)p[at] & 0xC0) == 0x80;) at++;
        memcpy(d, p + i, at - i), d += at - i;
        memcpy(d, rs, rl), d += rl;
        i = at + k;
    }
    memcpy(d, p + i, n - i);
    d[n - i] = 0;
}

/* s.replace(o, r, count): the result's size is counted and charged
 * against the render's memory first (a string doubled again and again
 * fails as soon as the next one would not fit), then made in its arena */
static ld_status str_replace(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, const ld_tpl_value *o,
                             const ld_tpl_value *r, int64_t count, ld_tpl_value **out)
{
    size_t hits = replace_hits(s, o, count), kept = s->u.str.len - hits * o->u.str.len, size, all;
    if (__builtin_mul_overflow(hits, r->u.str.len, &size) || __builtin_add_overflow(size, kept, &size) ||
        __builtin_add_overflow(size, 1, &all))
        all = SIZE_MAX;
    LD_TRY(ld_tpl_rt_charge(rt, at, "replace", all));
    char *d = ld_arena_alloc(A, size + 1);
    if (!d) return ld_tpl_rt_over(rt, at, "replace");
    replace_into(d, s, o, r, hits);
    NEWV(*out = ld_tv_str_ref(A, d, size));
    return LD_OK;
}

static bool affix(const ld_tpl_value *s, const ld_tpl_value *x, bool end)
{
    if (x->kind != TV_STR || x->u.str.len > s->u.str.len) return false;
    return memcmp(s->u.str.s + (end ? s->u.str.len - x->u.str.len : 0), x->u.str.s, x->u.str.len) == 0;
}

static ld_status str_method(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, const char *m, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *x = a->n_pos ? a->pos[0] : NULL;
    if (is(m, "startswith") || is(m, "endswith")) {
        bool r = false;
        if (!x) return TYPE_ERR("type error: %s takes at least 1 argument", m);
        if (x->kind == TV_LIST) for (size_t i = 0; i < x->u.list.n; i++) r = r || affix(s, x->u.list.items[i], m[0] == 'e');
        else if (x->kind == TV_STR) r = affix(s, x, m[0] == 'e');
        else return TYPE_ERR("type error: %s first arg must be str or a tuple of str, not %s", m, ld_tv_type_name(x));
        NEWV(*out = ld_tpl_value_bool(A, r));
        return LD_OK;
    }
    if (is(m, "split")) return str_split(rt, at, s, a, out);
    if (is(m, "format")) return ld_tpl_str_format(rt, at, s, a, out);
    if (is(m, "strip") || is(m, "lstrip") || is(m, "rstrip")) {
        NEWV(*out = strip(rt, s, x, m[0] != 'r', m[0] != 'l'));
        return LD_OK;
    }
    if (is(m, "lower") || is(m, "upper") || is(m, "title") || is(m, "capitalize")) {
        int mode = m[0] == 'l' ? TV_CASE_LOWER : m[0] == 'u' ? TV_CASE_UPPER : m[0] == 't' ? TV_CASE_TITLE : TV_CASE_CAPITALIZE;
        NEWV(*out = ld_tv_case_map(A, s->u.str.s, s->u.str.len, mode));
        return LD_OK;
    }
    if (is(m, "replace")) {
        if (a->n_pos < 2 || a->pos[0]->kind != TV_STR || a->pos[1]->kind != TV_STR) return TYPE_ERR("type error: replace expects two strings");
        int64_t c = a->n_pos > 2 && a->pos[2]->kind == TV_INT ? a->pos[2]->u.i : -1;
        return str_replace(rt, at, s, a->pos[0], a->pos[1], c, out);
    }
    if ((is(m, "find") || is(m, "count")) && x && x->kind == TV_STR) {
        int64_t found = -1, cnt = 0;
        size_t i = 0;
        const char *hit;
        while (i <= s->u.str.len &&
               (hit = ld_memfind(s->u.str.s + i, s->u.str.len - i, x->u.str.s, x->u.str.len))) {
            size_t pos = (size_t)(hit - s->u.str.s);
            if (found < 0) found = (int64_t)ld_tv_utf8_count(s->u.str.s, pos);
            cnt++;
            i = pos + (x->u.str.len ? x->u.str.len : 1);
        }
        NEWV(*out = ld_tpl_value_int(A, is(m, "find") ? found : cnt));
        return LD_OK;
    }
    ld_status st = ld_tpl_str_method_more(rt, at, s, m, a, out);
    if (st != LD_ERR_UNSUPPORTED) return st;
    return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "string method '%s' with these arguments is not supported", m);
}

static ld_tpl_value *pairs(tpl_rt *rt, const ld_tpl_value *d)
{
    ld_tpl_value *l = ld_tv_new(A, TV_LIST);
    if (!l) return NULL;
    for (size_t i = 0; i < d->u.dict.n; i++) {
        ld_tpl_value *t = ld_tv_new(A, TV_LIST);
        if (!t || !ld_tv_push(A, t, d->u.dict.keys[i]) || !ld_tv_push(A, t, d->u.dict.vals[i]) || !ld_tv_push(A, l, t)) return NULL;
        t->flags |= TV_F_TUPLE;
    }
    return l;
}

ld_status ld_tpl_method(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *self, const char *m, tpl_args *a, ld_tpl_value **out)
{
    if (self->kind == TV_STR) return str_method(rt, at, self, m, a, out);
    if ((self->flags & TV_F_LOOP) && is(m, "cycle")) {
        ld_tpl_value *i0 = ld_tv_dict_get(self, "index0", 6);
        if (!a->n_pos) return TYPE_ERR("type error: no items for cycling given");
        *out = a->pos[(size_t)(i0 && i0->kind == TV_INT ? i0->u.i : 0) % a->n_pos];
        return LD_OK;
    }
    if (self->kind == TV_LIST) { /* index / count */
        int64_t found = -1, cnt = 0;
        if (a->n_pos != 1) return TYPE_ERR("type error: %s() takes exactly one argument", m);
        for (size_t i = 0; i < self->u.list.n; i++)
            if (ld_tv_equal(self->u.list.items[i], a->pos[0])) cnt++, found = found < 0 ? (int64_t)i : found;
        if (is(m, "index") && found < 0) return TYPE_ERR("value error: value is not in list");
        NEWV(*out = ld_tpl_value_int(A, is(m, "index") ? found : cnt));
        return LD_OK;
    }
    if (is(m, "get")) {
        if (!a->n_pos) return TYPE_ERR("type error: get expected at least 1 argument, got 0");
        ld_tpl_value *v = ld_tv_dict_getv(self, a->pos[0]);
        if (!v) v = a->n_pos > 1 ? a->pos[1] : ld_tpl_value_none(A);
        NEWV(*out = v);
        return LD_OK;
    }
    if (is(m, "items")) { NEWV(*out = pairs(rt, self)); return LD_OK; }
    ld_tpl_value *l = ld_tv_new(A, TV_LIST);
    NEWV(l);
    for (size_t i = 0; i < self->u.dict.n; i++)
        NEWV(ld_tv_push(A, l, is(m, "keys") ? self->u.dict.keys[i] : self->u.dict.vals[i]));
    *out = l;
    return LD_OK;
}

/* ---------------------------------------------------------------- tests */

/* the names of the tests of a value's kind, in the order of TPL_TEST_* */
static const char *const kind_tests[] = {
    NULL, "defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number", "integer",
    "float", "boolean", "true", "false", "callable"
};

uint32_t ld_tpl_test_id(const char *name)
{
    for (uint32_t i = 1; i < sizeof kind_tests / sizeof kind_tests[0]; i++)
        if (is(name, kind_tests[i])) return i;
    return TPL_TEST_BY_NAME;
}

bool ld_tpl_kind_test(uint32_t id, const ld_tpl_value *v)
{
    int k = v->kind;
    switch (id) {
    case TPL_TEST_DEFINED: return k != TV_UNDEF;
    case TPL_TEST_UNDEFINED: return k == TV_UNDEF;
    case TPL_TEST_NONE: return k == TV_NONE;
    case TPL_TEST_STRING: return k == TV_STR;
    case TPL_TEST_MAPPING: return k == TV_DICT;
    case TPL_TEST_ITERABLE: return k == TV_STR || k == TV_LIST || k == TV_DICT || k == TV_UNDEF;
    case TPL_TEST_SEQUENCE: return k == TV_STR || k == TV_LIST || k == TV_DICT;
    case TPL_TEST_NUMBER: return k == TV_INT || k == TV_FLOAT || k == TV_BOOL;
    case TPL_TEST_INTEGER: return k == TV_INT;
    case TPL_TEST_FLOAT: return k == TV_FLOAT;
    case TPL_TEST_BOOLEAN: return k == TV_BOOL;
    case TPL_TEST_TRUE: return k == TV_BOOL && v->u.b;
    case TPL_TEST_FALSE: return k == TV_BOOL && !v->u.b;
    default: return k == TV_MACRO || k == TV_METHOD || k == TV_FUNC; /* callable */
    }
}

static ld_status run_test(tpl_rt *rt, const tpl_node *at, const char *name, ld_tpl_value *v, tpl_args *a, bool *out)
{
    int k = v->kind;
    ld_tpl_value *x = a->n_pos ? a->pos[0] : NULL;
    uint32_t id = ld_tpl_test_id(name);
    if (id != TPL_TEST_BY_NAME) *out = ld_tpl_kind_test(id, v);
    else if (is(name, "lower") || is(name, "upper")) {
        ld_tpl_value *s = k == TV_UNDEF ? ld_tv_str(A, "", 0) : ld_tpl_str_of(rt, at, v);
        NEWV(s);
        *out = ld_tpl_str_is_case(rt, s, name[0] == 'u');
    } else if (is(name, "odd") || is(name, "even")) {
        if (k != TV_INT) return TYPE_ERR("type error: %s test needs an integer", name);
        *out = ((v->u.i % 2) != 0) == is(name, "odd");
    } else if (x && (is(name, "eq") || is(name, "equalto") || is(name, "==") || is(name, "sameas"))) *out = ld_tv_equal(v, x);
    else if (x && (is(name, "ne") || is(name, "!="))) *out = !ld_tv_equal(v, x);
    else if (x && (is(name, "in"))) {
        *out = false;
        if (x->kind == TV_LIST) for (size_t i = 0; i < x->u.list.n; i++) *out = *out || ld_tv_equal(x->u.list.items[i], v);
        else if (x->kind == TV_DICT) *out = ld_tv_dict_getv(x, v) != NULL;
        else if (x->kind == TV_STR && k == TV_STR) *out = v->u.str.len == 0 || (v->u.str.len <= x->u.str.len && strstr(x->u.str.s, v->u.str.s));
    } else if (x && (is(name, "gt") || is(name, "lt") || is(name, "ge") || is(name, "le") || is(name, "greaterthan") || is(name, "lessthan"))) {
        bool ok;
        int c = ld_tv_compare(v, x, &ok);
        if (!ok) return TYPE_ERR("type error: cannot compare '%s' and '%s'", ld_tv_type_name(v), ld_tv_type_name(x));
        *out = name[0] == 'g' ? (name[1] == 'e' ? c >= 0 : c > 0) : (name[1] == 'e' ? c <= 0 : c < 0);
    } else if (x && is(name, "divisibleby") && k == TV_INT && x->kind == TV_INT && x->u.i) *out = v->u.i % x->u.i == 0;
    else return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "template runtime error: no test named '%s'", name);
    return LD_OK;
}

ld_status ld_tpl_test(tpl_rt *rt, const tpl_node *at, const char *name, ld_tpl_value *v, tpl_args *args, bool *out)
{
    return run_test(rt, at, name, v, args, out);
}

/* ---------------------------------------------------------------- filters */

/* json.dumps(v) with tojson's arguments a, appended to b: LD_OK (b may
 * have failed: past its cap or without memory), or the TypeError of a
 * value JSON cannot hold. */
static ld_status tojson_into(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, tv_buf *b)
{
    bool no_args = !a->n_kw && !a->n_pos; /* the usual `x | tojson`: no argument to look for */
    ld_tpl_value *ind = no_args ? NULL : ld_tpl_kwarg(a, "indent", 0);
    ld_tpl_value *seps = no_args ? NULL : ld_tpl_kwarg(a, "separators", 99);
    ld_tpl_value *sk = no_args ? NULL : ld_tpl_kwarg(a, "sort_keys", 99);
    ld_tpl_value *asc = no_args ? NULL : ld_tpl_kwarg(a, "ensure_ascii", 99);
    /* json.dumps: an int indent (a bool is one), below 0 the same as 0 */
    int64_t indent = !ind ? -1 : ind->kind == TV_INT ? (ind->u.i < 0 ? 0 : ind->u.i) : ind->kind == TV_BOOL ? ind->u.b : -1;
    const char *item = indent >= 0 ? "," : ", ", *key = ": ";
    char ib[64], kb[64];
    if (seps && seps->kind == TV_LIST && seps->u.list.n == 2 && seps->u.list.items[0]->kind == TV_STR &&
        seps->u.list.items[1]->kind == TV_STR) {
        snprintf(ib, sizeof ib, "%.*s", (int)seps->u.list.items[0]->u.str.len, seps->u.list.items[0]->u.str.s);
        snprintf(kb, sizeof kb, "%.*s", (int)seps->u.list.items[1]->u.str.len, seps->u.list.items[1]->u.str.s);
        item = ib, key = kb;
    }
    const char *why = NULL;
    int flags = (sk && ld_tv_truthy(sk) ? TV_JSON_SORT_KEYS : 0) | (asc && ld_tv_truthy(asc) ? TV_JSON_ASCII : 0);
    bool ok = ld_tv_tojson(b, v, indent, item, key, flags, 0, &why);
    if (!ok && !b->failed) return TYPE_ERR("type error: %s", why ? why : "not JSON serializable");
    return LD_OK;
}

static ld_status do_tojson(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    tv_buf b = ld_tpl_rt_buf(rt); /* an indent's spaces are charged before they are written */
    ld_status s = tojson_into(rt, at, v, a, &b);
    if (s != LD_OK) {
        free(b.p);
        return s;
    }
    return ld_tpl_rt_buf_value(rt, at, "tojson", &b, out);
}

/* The text is written where it goes, capped at what the render's memory
 * has left as the filter's own buffer is: no buffer, no copy into the
 * arena, no copy out.  Past a cap, the output is put back and the filter
 * and the print run as they would have, for the same error. */
ld_status ld_tpl_tojson_print(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, tv_buf *out)
{
    size_t len0 = out->len, max0 = out->max, left = ld_tpl_rt_mem_left(rt);
    if (!out->failed && left < (max0 ? max0 - len0 : SIZE_MAX)) out->max = len0 + left;
    ld_status s = tojson_into(rt, at, v, a, out);
    out->max = max0;
    if (s != LD_OK || !out->failed) return s;
    out->len = len0, out->failed = false;
    if (out->p) out->p[len0] = 0;
    ld_tpl_value *r;
    LD_TRY(do_tojson(rt, at, v, a, &r));
    ld_tv_buf_put(out, r->u.str.s, r->u.str.len);
    return LD_OK;
}

static ld_status do_map_select(tpl_rt *rt, const tpl_node *at, const char *f, ld_tpl_value *seq, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *items, *r = ld_tv_new(A, TV_LIST);
    NEWV(r);
    r->flags |= TV_F_GEN;
    LD_TRY(ld_tpl_iter(rt, at, seq, &items));
    bool attr = is(f, "selectattr") || is(f, "rejectattr"), rej = f[0] == 'r';
    size_t first_arg = attr ? 1 : 0;
    ld_tpl_value *attr_name = is(f, "map") ? ld_tpl_kwarg(a, "attribute", 99) : attr ? ld_tpl_kwarg(a, "attribute", 0) : NULL;
    if (attr && (!attr_name || attr_name->kind != TV_STR)) return TYPE_ERR("type error: %s needs an attribute name", f);
    for (size_t i = 0; i < items->u.list.n; i++) {
        ld_tpl_value *it = items->u.list.items[i], *x = it;
        if (attr_name && attr_name->kind == TV_STR) NEWV(x = ld_tpl_attr_path(rt, it, attr_name));
        if (is(f, "map")) {
            if (!attr_name) {
                if (!a->n_pos || a->pos[0]->kind != TV_STR) return TYPE_ERR("type error: map needs a filter name or attribute");
                tpl_args sub = {a->pos + 1, a->n_pos - 1, a->kwv, a->kw, a->n_kw};
                LD_TRY(ld_tpl_filter(rt, at, a->pos[0]->u.str.s, it, &sub, &x));
            } else if (x->kind == TV_UNDEF) {
                ld_tpl_value *d = ld_tpl_kwarg(a, "default", 99);
                if (d) x = d;
            }
            NEWV(ld_tv_push(A, r, x));
            continue;
        }
        bool keep;
        if (a->n_pos > first_arg) {
            if (a->pos[first_arg]->kind != TV_STR) return TYPE_ERR("type error: test name must be a string");
            tpl_args sub = {a->pos + first_arg + 1, a->n_pos - first_arg - 1, NULL, NULL, 0};
            LD_TRY(run_test(rt, at, a->pos[first_arg]->u.str.s, x, &sub, &keep));
        } else {
            keep = ld_tv_truthy(x);
        }
        if (keep != rej) NEWV(ld_tv_push(A, r, it));
    }
    *out = r;
    return LD_OK;
}

static ld_status do_join(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *sep = ld_tpl_kwarg(a, "d", 0), *attr = ld_tpl_kwarg(a, "attribute", 1), *items;
    LD_TRY(ld_tpl_iter(rt, at, v, &items));
    LD_TRY(ld_tpl_rt_charge(rt, at, "join", ld_tv_join_size(items, sep && sep->kind == TV_STR ? sep->u.str.len : 0)));
    tv_buf b = ld_tpl_rt_buf(rt);
    for (size_t i = 0; i < items->u.list.n && !b.failed; i++) {
        ld_tpl_value *x = items->u.list.items[i];
        if (i && sep && sep->kind == TV_STR) ld_tv_buf_put(&b, sep->u.str.s, sep->u.str.len);
        if (attr && attr->kind == TV_STR && !(x = ld_tpl_attr_path(rt, x, attr))) { free(b.p); return ld_tpl_nomem(rt, at); }
        if (!ld_tv_print(&b, x, false)) { free(b.p); return TYPE_ERR("type error: cannot join a '%s'", ld_tv_type_name(x)); }
    }
    return ld_tpl_rt_buf_value(rt, at, "join", &b, out);
}

static int cmp_ci(const ld_tpl_value *x, const ld_tpl_value *y, bool cs)
{
    bool ok;
    if (!cs && x->kind == TV_STR && y->kind == TV_STR) {
        size_t n = x->u.str.len < y->u.str.len ? x->u.str.len : y->u.str.len;
        for (size_t i = 0; i < n; i++) {
            int c = tolower((unsigned char)x->u.str.s[i]) - tolower((unsigned char)y->u.str.s[i]);
            if (c) return c;
        }
        return (x->u.str.len > y->u.str.len) - (x->u.str.len < y->u.str.len);
    }
    return ld_tv_compare(x, y, &ok);
}

/* stable insertion sort by key (items are few) */
static ld_status do_sort(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, bool dict, ld_tpl_value **out)
{
    ld_tpl_value *items, *r = ld_tv_new(A, TV_LIST);
    NEWV(r);
    if (dict) {
        if (v->kind != TV_DICT) return TYPE_ERR("type error: dictsort needs a mapping");
        NEWV(items = pairs(rt, v));
    } else {
        LD_TRY(ld_tpl_iter(rt, at, v, &items));
    }
    ld_tpl_value *rev = ld_tpl_kwarg(a, dict ? "reverse" : "reverse", dict ? 2 : 0), *cs = ld_tpl_kwarg(a, "case_sensitive", dict ? 0 : 1);
    ld_tpl_value *by = dict ? ld_tpl_kwarg(a, "by", 1) : NULL;
    int ki = by && by->kind == TV_STR && by->u.str.len == 5 && memcmp(by->u.str.s, "value", 5) == 0; /* sort by item ki */
    ld_tpl_value *attr = dict ? NULL : ld_tpl_kwarg(a, "attribute", 2);
    bool desc = rev && ld_tv_truthy(rev), sens = cs && ld_tv_truthy(cs);
    for (size_t i = 0; i < items->u.list.n; i++) NEWV(ld_tv_push(A, r, items->u.list.items[i]));
    ld_tpl_value **p = r->u.list.items;
    for (size_t i = 1; i < r->u.list.n; i++) {
        ld_tpl_value *x = p[i];
        size_t j = i;
        for (; j > 0; j--) {
            ld_tpl_value *kx = dict ? x->u.list.items[ki] : x, *ky = dict ? p[j - 1]->u.list.items[ki] : p[j - 1];
            if (attr && attr->kind == TV_STR) kx = ld_tpl_attr_path(rt, kx, attr), ky = ld_tpl_attr_path(rt, ky, attr);
            if (!kx || !ky) return ld_tpl_nomem(rt, at);
            int c = cmp_ci(ky, kx, sens);
            if (desc ? c >= 0 : c <= 0) break;
            p[j] = p[j - 1];
        }
        p[j] = x;
    }
    *out = r;
    return LD_OK;
}

/* The format datetime.strftime hands to time.strftime for a naive
 * datetime: %z and %Z gone, %f as the microseconds "000000"; a NUL-ended
 * copy in the render's arena. */
static char *naive_format(tpl_rt *rt, const ld_tpl_value *f)
{
    const char *p = f->u.str.s;
    size_t n = f->u.str.len, k = 0;
    char *o = ld_arena_alloc(A, n * 3 + 1); /* %f: 2 bytes become 6 */
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%' || i + 1 == n) { o[k++] = p[i]; continue; }
        char c = p[++i];
        if (c == 'f') memcpy(o + k, "000000", 6), k += 6;
        else if (c != 'z' && c != 'Z') o[k++] = '%', o[k++] = c;
    }
    o[k] = 0;
    return o;
}

/* strftime_now(fmt) on the render's pinned day at midnight, as Python's
 * time.strftime makes it: buffers of 1024, 2048, ... bytes until the text
 * fits, or until the buffer is 256 times the format's length, when the
 * text is taken to be empty (so "%5000Y" gives "", as in Python).  Each
 * buffer is charged before it is made. */
static ld_status do_strftime(tpl_rt *rt, const tpl_node *at, tpl_args *a, ld_tpl_value **out)
{
    if (!a->n_pos || a->pos[0]->kind != TV_STR) return TYPE_ERR("type error: strftime_now needs a format string");
    ld_tpl_rt_date_used(rt);
    struct tm tm;
    int y = 2024, mo = 7, d = 26;
    memset(&tm, 0, sizeof tm);
    (void)sscanf(ld_tpl_rt_today(rt), "%d-%d-%d", &y, &mo, &d);
    tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = 0, tm.tm_isdst = -1;
    /* derive the weekday and day of the year: timegm-free Zeller */
    static const int cum[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    tm.tm_yday = cum[(mo - 1) % 12] + d - 1 + (leap && mo > 2);
    int yy = mo < 3 ? y - 1 : y;
    static const int t[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
    tm.tm_wday = (yy + yy / 4 - yy / 100 + yy / 400 + t[(mo - 1) % 12] + d) % 7;
    char *fmt = naive_format(rt, a->pos[0]);
    NEWV(fmt);
    size_t fl = strlen(fmt), n = 0;
    tv_buf b = {0};
    for (size_t size = 1024;; size *= 2) {
        ld_status st = ld_tpl_rt_charge(rt, at, "strftime_now", size);
        if (st != LD_OK || !ld_tv_buf_reserve(&b, size)) return free(b.p), st != LD_OK ? st : ld_tpl_nomem(rt, at);
        n = fl ? strftime(b.p, size, fmt, &tm) : 0;
        if (n > 0 || size / 256 >= fl) break;
    }
    ld_tpl_value *r = ld_tv_str(A, b.p, n);
    free(b.p);
    NEWV(*out = r);
    return LD_OK;
}

/* range(): its length (as Python's len(range)) first, then the items, so
 * that no bound or step overflows */
static ld_status do_range(tpl_rt *rt, const tpl_node *at, tpl_args *a, ld_tpl_value **out)
{
    int64_t p[3] = {0, 0, 1};
    for (size_t i = 0; i < a->n_pos && i < 3; i++) {
        if (a->pos[i]->kind != TV_INT) return TYPE_ERR("type error: range() needs integers");
        p[i] = a->pos[i]->u.i;
    }
    if (a->n_pos == 1) p[1] = p[0], p[0] = 0;
    if (!a->n_pos || p[2] == 0) return TYPE_ERR("value error: bad range() arguments");
    uint64_t span = 0, step = p[2] > 0 ? (uint64_t)p[2] : 0 - (uint64_t)p[2], cnt = 0;
    if (p[2] > 0 && p[0] < p[1]) span = (uint64_t)p[1] - (uint64_t)p[0];
    if (p[2] < 0 && p[0] > p[1]) span = (uint64_t)p[0] - (uint64_t)p[1];
    if (span) cnt = (span - 1) / step + 1;
    if (cnt > 100000) return ld_tpl_rt_fail(rt, at, LD_ERR_LIMIT, "range() longer than 100000 items");
    ld_tpl_value *r = ld_tv_new(A, TV_LIST);
    NEWV(r);
    for (uint64_t j = 0; j < cnt; j++) /* start + j * step stays between the bounds: no wrap */
        NEWV(ld_tv_push(A, r, ld_tpl_value_int(A, (int64_t)((uint64_t)p[0] + j * (uint64_t)p[2]))));
    *out = r;
    return LD_OK;
}

/* `length` / `count`: len(v) */
static ld_status do_length(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, ld_tpl_value **out)
{
    int64_t n;
    if (v->kind == TV_STR) n = (int64_t)ld_tv_utf8_count(v->u.str.s, v->u.str.len);
    else if (v->kind == TV_LIST && !(v->flags & TV_F_GEN)) n = (int64_t)v->u.list.n;
    else if (v->kind == TV_DICT || v->kind == TV_NS) n = (int64_t)v->u.dict.n;
    else if (v->kind == TV_UNDEF) n = 0;
    else return TYPE_ERR("type error: object of type '%s' has no len()", ld_tv_type_name(v));
    NEWV(*out = ld_tpl_value_int(A, n));
    return LD_OK;
}

static ld_status simple_filter(tpl_rt *rt, const tpl_node *at, const char *f, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *items;
    (void)a;
    if (is(f, "length") || is(f, "count")) return do_length(rt, at, v, out);
    if (is(f, "first") || is(f, "last")) {
        if (v->kind == TV_UNDEF) return *out = v, LD_OK;
        LD_TRY(ld_tpl_iter(rt, at, v, &items));
        size_t n = items->u.list.n;
        NEWV(*out = n ? items->u.list.items[f[0] == 'f' ? 0 : n - 1] : ld_tv_undef(A, "no first item, sequence was empty"));
        return LD_OK;
    }
    if (is(f, "list")) {
        LD_TRY(ld_tpl_iter(rt, at, v, &items));
        ld_tpl_value *r = ld_tv_new(A, TV_LIST);
        NEWV(r);
        for (size_t i = 0; i < items->u.list.n; i++) NEWV(ld_tv_push(A, r, items->u.list.items[i]));
        return *out = r, LD_OK;
    }
    if (is(f, "reverse")) {
        ld_tpl_value *r = ld_tv_new(A, TV_LIST);
        NEWV(r);
        LD_TRY(ld_tpl_iter(rt, at, v, &items));
        for (size_t i = items->u.list.n; i > 0; i--) NEWV(ld_tv_push(A, r, items->u.list.items[i - 1]));
        if (v->kind == TV_STR) {
            tpl_args none = {0};
            return do_join(rt, at, r, &none, out);
        }
        return *out = r, LD_OK;
    }
    if (is(f, "items")) {
        if (v->kind == TV_UNDEF) NEWV(*out = ld_tv_new(A, TV_LIST));
        else if (v->kind != TV_DICT) return TYPE_ERR("type error: Can only get item pairs from a mapping.");
        else NEWV(*out = pairs(rt, v));
        return LD_OK;
    }
    if (is(f, "int") || is(f, "float") || is(f, "abs")) return ld_tpl_filter_number(rt, at, f, v, a, out);
    return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "template runtime error: No filter named '%s' found.", f);
}

/* `trim`: str(v) stripped (of the characters of its argument when given) */
static ld_status do_trim(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *s = v->kind == TV_UNDEF ? ld_tv_str(A, "", 0) : ld_tpl_str_of(rt, at, v);
    if (!s) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot convert a '%s' to string", ld_tv_type_name(v));
    NEWV(*out = strip(rt, s, a->n_pos ? a->pos[0] : NULL, true, true));
    return LD_OK;
}

uint32_t ld_tpl_filter_id(const char *name)
{
    if (is(name, "trim")) return TPL_FILTER_TRIM;
    if (is(name, "tojson")) return TPL_FILTER_TOJSON;
    if (is(name, "length") || is(name, "count")) return TPL_FILTER_LENGTH;
    return TPL_FILTER_BY_NAME;
}

ld_status ld_tpl_filter_node(tpl_rt *rt, const tpl_node *n, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    switch (n->slot) {
    case TPL_FILTER_TRIM: return do_trim(rt, n, v, a, out);
    case TPL_FILTER_TOJSON: return do_tojson(rt, n, v, a, out);
    case TPL_FILTER_LENGTH: return do_length(rt, n, v, out);
    default: return ld_tpl_filter(rt, n, n->s, v, a, out);
    }
}

ld_status ld_tpl_filter(tpl_rt *rt, const tpl_node *at, const char *f, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    if (is(f, "__range")) return do_range(rt, at, a, out);
    if (is(f, "__strftime_now")) return do_strftime(rt, at, a, out);
    if (is(f, "default") || is(f, "d")) {
        ld_tpl_value *d = ld_tpl_kwarg(a, "default_value", 0), *b = ld_tpl_kwarg(a, "boolean", 1);
        bool use = v->kind == TV_UNDEF || (b && ld_tv_truthy(b) && !ld_tv_truthy(v));
        if (use) NEWV(*out = d ? d : ld_tv_str(A, "", 0));
        else *out = v;
        return LD_OK;
    }
    if (is(f, "safe")) return *out = v, LD_OK;
    if (is(f, "tojson")) return do_tojson(rt, at, v, a, out);
    if (is(f, "map") || is(f, "select") || is(f, "reject") || is(f, "selectattr") || is(f, "rejectattr"))
        return do_map_select(rt, at, f, v, a, out);
    if (is(f, "join")) return do_join(rt, at, v, a, out);
    if (is(f, "unique")) return ld_tpl_filter_unique(rt, at, v, a, out);
    if (is(f, "groupby")) return ld_tpl_filter_groupby(rt, at, v, a, out);
    if (is(f, "indent")) return ld_tpl_filter_indent(rt, at, v, a, out);
    if (is(f, "batch")) return ld_tpl_filter_batch(rt, at, v, a, out);
    if (is(f, "slice")) return ld_tpl_filter_slice(rt, at, v, a, out);
    if (is(f, "attr")) return ld_tpl_filter_attr(rt, at, v, a, out);
    if (is(f, "format")) return ld_tpl_filter_format(rt, at, v, a, out);
    if (is(f, "center")) return ld_tpl_filter_center(rt, at, v, a, out);
    if (is(f, "truncate")) return ld_tpl_filter_truncate(rt, at, v, a, out);
    if (is(f, "wordcount")) return ld_tpl_filter_wordcount(rt, at, v, out);
    if (is(f, "escape") || is(f, "e")) return ld_tpl_filter_escape(rt, at, v, out);
    if (is(f, "round")) return ld_tpl_filter_round(rt, at, v, a, out);
    if (is(f, "sum")) return ld_tpl_filter_sum(rt, at, v, a, out);
    if (is(f, "min") || is(f, "max")) return ld_tpl_filter_minmax(rt, at, f[1] == 'a', v, a, out);
    if (is(f, "sort")) return do_sort(rt, at, v, a, false, out);
    if (is(f, "dictsort")) return do_sort(rt, at, v, a, true, out);
    if (is(f, "string")) {
        if (v->kind == TV_UNDEF) NEWV(*out = ld_tv_str(A, "", 0));
        else if (!(*out = ld_tpl_str_of(rt, at, v))) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot convert a '%s' to string", ld_tv_type_name(v));
        return LD_OK;
    }
    if (is(f, "trim") || is(f, "lower") || is(f, "upper") || is(f, "title") || is(f, "capitalize") || is(f, "replace")) {
        ld_tpl_value *s = v->kind == TV_UNDEF ? ld_tv_str(A, "", 0) : ld_tpl_str_of(rt, at, v);
        if (!s) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot convert a '%s' to string", ld_tv_type_name(v));
        if (is(f, "title")) { /* jinja2's own: words split at [-\s({[<], not str.title */
            NEWV(*out = ld_tv_case_map(A, s->u.str.s, s->u.str.len, TV_CASE_TITLE_WORDS));
            return LD_OK;
        }
        if (is(f, "trim")) return do_trim(rt, at, s, a, out);
        return str_method(rt, at, s, f, a, out);
    }
    return simple_filter(rt, at, f, v, a, out);
}
