/* tpl_value.c - the value model of the template interpreter: constructors,
 * Python truthiness/equality/ordering, Python str()/repr() printing and
 * json.dumps(ensure_ascii=False) serialisation.  Values live in an arena;
 * lists and dicts grow by copying into a larger arena block. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

ld_tpl_value *ld_tv_new(ld_arena *a, int kind)
{
    ld_tpl_value *v = ld_arena_alloc(a, sizeof *v);
    if (v) memset(v, 0, sizeof *v), v->kind = (uint8_t)kind;
    return v;
}

ld_tpl_value *ld_tv_str(ld_arena *a, const char *s, size_t len)
{
    ld_tpl_value *v = ld_tv_new(a, TV_STR);
    if (!v) return NULL;
    char *c = ld_arena_memdup(a, s ? s : "", len);
    if (!c) return NULL;
    v->u.str.s = c, v->u.str.len = len;
    return v;
}

/* Shared False and True: comparisons and tests return these instead of
 * allocating (values are never modified once made). */
ld_tpl_value ld_tv_bools[2] = { { .kind = TV_BOOL, .u.b = 0 }, { .kind = TV_BOOL, .u.b = 1 } };

ld_tpl_value *ld_tv_str_ref(ld_arena *a, const char *s, size_t len)
{
    ld_tpl_value *v = ld_tv_new(a, TV_STR);
    if (v) v->u.str.s = s, v->u.str.len = len;
    return v;
}

ld_tpl_value *ld_tv_undef(ld_arena *a, const char *hint)
{
    ld_tpl_value *v = ld_tv_new(a, TV_UNDEF);
    if (v && hint) {
        v->u.str.s = ld_arena_memdup(a, hint, strlen(hint));
        v->u.str.len = v->u.str.s ? strlen(hint) : 0;
    }
    return v;
}

ld_tpl_value *ld_tv_undef_lazy(ld_arena *a, const char *type, const char *name, size_t len)
{
    ld_tpl_value *v = ld_tv_new(a, TV_UNDEF);
    if (v) {
        v->flags = TV_F_LAZY_HINT;
        v->u.undef.name = name, v->u.undef.len = len, v->u.undef.type = type;
    }
    return v;
}

const char *ld_tv_undef_hint(const ld_tpl_value *v, char *buf, size_t size)
{
    if (!(v->flags & TV_F_LAZY_HINT)) return v->u.str.s ? v->u.str.s : "value is undefined";
    int n = (int)(v->u.undef.len > 100 ? 100 : v->u.undef.len);
    if (v->u.undef.type)
        snprintf(buf, size, "'%s object' has no attribute '%.*s'", v->u.undef.type, n > 60 ? 60 : n,
                 v->u.undef.name);
    else
        snprintf(buf, size, "'%.*s' is undefined", n, v->u.undef.name);
    return buf;
}

ld_tpl_value *ld_tv_float(ld_arena *a, double f)
{
    ld_tpl_value *v = ld_tv_new(a, TV_FLOAT);
    if (v) v->u.f = f;
    return v;
}

size_t ld_tv_join_size(const ld_tpl_value *items, size_t sep_len)
{
    size_t n = items->u.list.n, size;
    if (__builtin_mul_overflow(n ? n - 1 : 0, sep_len, &size)) return SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        const ld_tpl_value *x = items->u.list.items[i];
        if (x->kind == TV_STR && __builtin_add_overflow(size, x->u.str.len, &size)) return SIZE_MAX;
    }
    return size;
}

ld_tpl_value *ld_tpl_value_none(ld_arena *a) { return ld_tv_new(a, TV_NONE); }
ld_tpl_value *ld_tpl_value_bool(ld_arena *a, int b)
{
    ld_tpl_value *v = ld_tv_new(a, TV_BOOL);
    if (v) v->u.b = !!b;
    return v;
}
ld_tpl_value *ld_tpl_value_int(ld_arena *a, int64_t i)
{
    ld_tpl_value *v = ld_tv_new(a, TV_INT);
    if (v) v->u.i = i;
    return v;
}
ld_tpl_value *ld_tpl_value_str(ld_arena *a, const char *s, size_t len) { return ld_tv_str(a, s, len); }
ld_tpl_value *ld_tpl_value_dict(ld_arena *a) { return ld_tv_new(a, TV_DICT); }
ld_tpl_value *ld_tpl_value_list(ld_arena *a) { return ld_tv_new(a, TV_LIST); }
ld_tpl_value *ld_tpl_value_list_sized(ld_arena *a, size_t cap)
{
    ld_tpl_value *l = ld_tv_new(a, TV_LIST);
    if (!l || !cap) return l;
    if (cap > SIZE_MAX / sizeof *l->u.list.items || !(l->u.list.items = ld_arena_alloc(a, cap * sizeof *l->u.list.items)))
        return NULL;
    l->u.list.cap = cap;
    return l;
}

static bool grow(ld_arena *a, ld_tpl_value ***v, size_t n, size_t *cap)
{
    if (n < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 4;
    ld_tpl_value **nv = ld_arena_alloc(a, nc * sizeof *nv);
    if (!nv) return false;
    if (n) memcpy(nv, *v, n * sizeof *nv);
    *v = nv, *cap = nc;
    return true;
}

bool ld_tv_push(ld_arena *a, ld_tpl_value *l, ld_tpl_value *v)
{
    if (!v || !grow(a, &l->u.list.items, l->u.list.n, &l->u.list.cap)) return false;
    l->u.list.items[l->u.list.n++] = v;
    return true;
}

static size_t str_key_index(const ld_tpl_value *d, const char *k, size_t len)
{
    return ld_tv_key_index(d, k, len);
}

bool ld_tv_dict_put(ld_arena *a, ld_tpl_value *d, ld_tpl_value *k, ld_tpl_value *v)
{
    if (!k || !v) return false;
    if (k->kind == TV_STR) { /* the common case, without ld_tv_equal's dispatch */
        size_t i = str_key_index(d, k->u.str.s, k->u.str.len);
        if (i < d->u.dict.n) return d->u.dict.vals[i] = v, true;
    } else {
        for (size_t i = 0; i < d->u.dict.n; i++)
            if (ld_tv_equal(d->u.dict.keys[i], k)) return d->u.dict.vals[i] = v, true;
    }
    size_t cap = d->u.dict.cap;
    if (!grow(a, &d->u.dict.keys, d->u.dict.n, &cap)) return false;
    cap = d->u.dict.cap;
    if (!grow(a, &d->u.dict.vals, d->u.dict.n, &cap)) return false;
    d->u.dict.cap = cap;
    d->u.dict.keys[d->u.dict.n] = k, d->u.dict.vals[d->u.dict.n++] = v;
    return true;
}

bool ld_tv_dict_put_ref(ld_arena *a, ld_tpl_value *d, const char *k, size_t len, ld_tpl_value *v)
{
    if (!v) return false;
    size_t i = str_key_index(d, k, len);
    if (i < d->u.dict.n) return d->u.dict.vals[i] = v, true;
    return ld_tv_dict_put(a, d, ld_tv_str_ref(a, k, len), v);
}

ld_tpl_value *ld_tv_dict_get(const ld_tpl_value *d, const char *k, size_t len)
{
    size_t i = str_key_index(d, k, len);
    return i < d->u.dict.n ? d->u.dict.vals[i] : NULL;
}

ld_tpl_value *ld_tv_dict_getv(const ld_tpl_value *d, const ld_tpl_value *k)
{
    if (k->kind == TV_STR) return ld_tv_dict_get(d, k->u.str.s, k->u.str.len);
    for (size_t i = 0; i < d->u.dict.n; i++)
        if (ld_tv_equal(d->u.dict.keys[i], k)) return d->u.dict.vals[i];
    return NULL;
}

ld_status ld_tpl_list_push(ld_arena *a, ld_tpl_value *list, ld_tpl_value *v)
{
    if (!list || list->kind != TV_LIST) return LD_ERR_USAGE;
    return ld_tv_push(a, list, v) ? LD_OK : LD_ERR_NOMEM;
}

ld_status ld_tpl_dict_set(ld_arena *a, ld_tpl_value *dict, const char *key, ld_tpl_value *v)
{
    if (!dict || dict->kind != TV_DICT) return LD_ERR_USAGE;
    return ld_tv_dict_put(a, dict, ld_tv_str(a, key, strlen(key)), v) ? LD_OK : LD_ERR_NOMEM;
}

ld_status ld_tpl_dict_set_borrowed(ld_arena *a, ld_tpl_value *dict, const char *key, ld_tpl_value *v)
{
    if (!dict || dict->kind != TV_DICT) return LD_ERR_USAGE;
    return ld_tv_dict_put_ref(a, dict, key, strlen(key), v) ? LD_OK : LD_ERR_NOMEM;
}

/* A JSON string as the text of a value: copied, or pointing into the cJSON
 * tree. */
static bool json_text(ld_arena *a, ld_tpl_value *v, const char *s, bool borrow)
{
    s = s ? s : "";
    size_t len = strlen(s);
    v->kind = TV_STR;
    v->u.str.s = borrow ? s : ld_arena_memdup(a, s, len);
    v->u.str.len = len;
    return v->u.str.s != NULL;
}

/* A JSON number as Python's json module reads it: a float when its literal
 * (ld_tpl_json_keep_floats) has a point or an exponent, else an int. */
static void json_number(ld_tpl_value *v, const cJSON *j)
{
    double d = j->valuedouble;
    const char *t = j->valuestring;
    v->kind = TV_FLOAT, v->u.f = d;
    if (t && strpbrk(t, ".eE")) return;
    if (t) {
        errno = 0;
        long long i = strtoll(t, NULL, 10);
        if (errno == 0) {
            v->kind = TV_INT, v->u.i = (int64_t)i;
            return;
        }
    }
    if (d == floor(d) && fabs(d) < 9007199254740992.0) v->kind = TV_INT, v->u.i = (int64_t)d;
}

static bool json_into(ld_arena *a, const cJSON *j, bool borrow, ld_tpl_value *v);

/* json_into for a member, a string (most are) without the call */
static inline bool json_member(ld_arena *a, const cJSON *j, bool borrow, ld_tpl_value *v)
{
    if (j && (j->type & 0xFF) == cJSON_String) return json_text(a, v, j->valuestring, borrow);
    return json_into(a, j, borrow, v);
}

/* key = val in dict d, whose arrays have room: a key given twice keeps its
 * first place and its last value, as json.loads does.  *seen has bit
 * (length % 64) of each key d has: d is searched for the key only when one
 * of its length may be there (keys mostly differ in length). */
static void add_member(ld_tpl_value *d, ld_tpl_value *key, ld_tpl_value *val, uint64_t *seen)
{
    uint64_t bit = (uint64_t)1 << (key->u.str.len & 63);
    size_t i = (*seen & bit) ? str_key_index(d, key->u.str.s, key->u.str.len) : d->u.dict.n;
    *seen |= bit;
    if (i < d->u.dict.n) {
        d->u.dict.vals[i] = val;
        return;
    }
    d->u.dict.keys[d->u.dict.n] = key, d->u.dict.vals[d->u.dict.n++] = val;
}

/* An array or object's n members, made in three allocations (the values,
 * the item or key/value pointer arrays, an object's keys) instead of a few
 * per member. */
static bool json_container(ld_arena *a, const cJSON *j, bool borrow, ld_tpl_value *v)
{
    bool list = cJSON_IsArray(j);
    size_t n = 0;
    v->kind = list ? TV_LIST : TV_DICT;
    for (const cJSON *c = j->child; c; c = c->next) n++;
    if (!n) return true;
    size_t m = n * (list ? 1 : 2); /* the values (and keys), then their pointers, in one block */
    ld_tpl_value *kids = ld_arena_alloc(a, m * (sizeof *kids + sizeof(ld_tpl_value *)));
    if (!kids) return false;
    ld_tpl_value **ptrs = (ld_tpl_value **)(kids + m);
    memset(kids, 0, m * sizeof *kids);
    if (list) {
        v->u.list.items = ptrs, v->u.list.cap = n;
        for (const cJSON *c = j->child; c; c = c->next, kids++) {
            if (!json_member(a, c, borrow, kids)) return false;
            v->u.list.items[v->u.list.n++] = kids;
        }
        return true;
    }
    ld_tpl_value *keys = kids + n;
    uint64_t seen = 0;
    v->u.dict.keys = ptrs, v->u.dict.vals = ptrs + n, v->u.dict.cap = n;
    for (const cJSON *c = j->child; c; c = c->next, kids++, keys++) {
        if (!json_text(a, keys, c->string, borrow) || !json_member(a, c, borrow, kids)) return false;
        add_member(v, keys, kids, &seen);
    }
    return true;
}

/* *v (zeroed) made the value of j */
static bool json_into(ld_arena *a, const cJSON *j, bool borrow, ld_tpl_value *v)
{
    switch (j ? j->type & 0xFF : cJSON_NULL) { /* cJSON_Is*, without a call each */
    case cJSON_NULL: return v->kind = TV_NONE, true;
    case cJSON_False: case cJSON_True: return v->kind = TV_BOOL, v->u.b = (j->type & 0xFF) == cJSON_True, true;
    case cJSON_Number: return json_number(v, j), true;
    case cJSON_String: return json_text(a, v, j->valuestring, borrow);
    default: return json_container(a, j, borrow, v);
    }
}

static ld_tpl_value *from_json(ld_arena *a, const cJSON *j, bool borrow)
{
    ld_tpl_value *v = ld_tv_new(a, TV_NONE);
    return v && json_into(a, j, borrow, v) ? v : NULL;
}

ld_tpl_value *ld_tpl_value_from_json(ld_arena *a, const cJSON *j)
{
    return from_json(a, j, false);
}

ld_tpl_value *ld_tpl_value_from_json_borrowed(ld_arena *a, const cJSON *j)
{
    return from_json(a, j, true);
}

ld_tpl_value *ld_tpl_value_dict_of_json(ld_arena *a, size_t n, const char *const *keys, const cJSON *const *vals)
{
    if (!n) return ld_tv_new(a, TV_DICT);
    /* the dict, its values and keys, their pointers: one block */
    ld_tpl_value *d = ld_arena_alloc(a, (2 * n + 1) * sizeof *d + 2 * n * sizeof(ld_tpl_value *));
    if (!d) return NULL;
    ld_tpl_value *kids = d + 1, **ptrs = (ld_tpl_value **)(kids + 2 * n);
    memset(d, 0, (2 * n + 1) * sizeof *d);
    d->kind = TV_DICT;
    d->u.dict.keys = ptrs, d->u.dict.vals = ptrs + n, d->u.dict.cap = n;
    uint64_t seen = 0;
    for (size_t i = 0; i < n; i++) {
        ld_tpl_value *key = kids + n + i, *val = kids + i;
        if (!json_text(a, key, keys[i], true) || !json_member(a, vals[i], true, val)) return NULL;
        add_member(d, key, val, &seen);
    }
    return d;
}

static bool is_num(const ld_tpl_value *v) { return v->kind == TV_BOOL || v->kind == TV_INT || v->kind == TV_FLOAT; }
static double num(const ld_tpl_value *v) { return v->kind == TV_FLOAT ? v->u.f : v->kind == TV_INT ? (double)v->u.i : v->u.b; }

bool ld_tv_equal(const ld_tpl_value *a, const ld_tpl_value *b)
{
    if (is_num(a) && is_num(b)) {
        if (a->kind != TV_FLOAT && b->kind != TV_FLOAT)
            return (a->kind == TV_INT ? a->u.i : a->u.b) == (b->kind == TV_INT ? b->u.i : b->u.b);
        return num(a) == num(b);
    }
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case TV_UNDEF: case TV_NONE: return true;
    case TV_STR: return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case TV_LIST:
        if (a->u.list.n != b->u.list.n || (a->flags & TV_F_TUPLE) != (b->flags & TV_F_TUPLE)) return false;
        for (size_t i = 0; i < a->u.list.n; i++)
            if (!ld_tv_equal(a->u.list.items[i], b->u.list.items[i])) return false;
        return true;
    case TV_DICT:
        if (a->u.dict.n != b->u.dict.n) return false;
        for (size_t i = 0; i < a->u.dict.n; i++) {
            const ld_tpl_value *o = ld_tv_dict_getv(b, a->u.dict.keys[i]);
            if (!o || !ld_tv_equal(a->u.dict.vals[i], o)) return false;
        }
        return true;
    default: return a == b;
    }
}

int ld_tv_compare(const ld_tpl_value *a, const ld_tpl_value *b, bool *ok)
{
    *ok = true;
    if (is_num(a) && is_num(b)) {
        if (a->kind != TV_FLOAT && b->kind != TV_FLOAT) {
            int64_t x = a->kind == TV_INT ? a->u.i : a->u.b, y = b->kind == TV_INT ? b->u.i : b->u.b;
            return (x > y) - (x < y);
        }
        double x = num(a), y = num(b);
        return (x > y) - (x < y);
    }
    if (a->kind == TV_STR && b->kind == TV_STR) {
        size_t n = a->u.str.len < b->u.str.len ? a->u.str.len : b->u.str.len;
        int c = memcmp(a->u.str.s, b->u.str.s, n);
        if (c) return c < 0 ? -1 : 1;
        return (a->u.str.len > b->u.str.len) - (a->u.str.len < b->u.str.len);
    }
    if (a->kind == TV_LIST && b->kind == TV_LIST) {
        for (size_t i = 0; i < a->u.list.n && i < b->u.list.n; i++) {
            if (ld_tv_equal(a->u.list.items[i], b->u.list.items[i])) continue;
            return ld_tv_compare(a->u.list.items[i], b->u.list.items[i], ok);
        }
        return (a->u.list.n > b->u.list.n) - (a->u.list.n < b->u.list.n);
    }
    *ok = false;
    return 0;
}

const char *ld_tv_type_name(const ld_tpl_value *v)
{
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str",
                                        "list", "dict", "Namespace", "Macro", "method", "function"};
    if (v->kind == TV_LIST && (v->flags & TV_F_GEN)) return "generator";
    if (v->kind == TV_LIST && (v->flags & TV_F_TUPLE)) return "tuple";
    return names[v->kind];
}

size_t ld_tv_utf8_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

static void puts_(tv_buf *b, const char *s) { ld_tv_buf_put(b, s, strlen(s)); }

/* Python repr(float): the shortest digits that round-trip, fixed notation
 * for exponents -4..15, else d.ddde+XX. */
void ld_tv_float_repr(tv_buf *b, double f)
{
    char tmp[64], out[80];
    if (isnan(f)) { puts_(b, "nan"); return; }
    if (isinf(f)) { puts_(b, f < 0 ? "-inf" : "inf"); return; }
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp: [-]d[.ddd]e[+-]XX */
    char digits[32];
    size_t nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++) if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int exp = atoi(p + 1);
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) out[k++] = (size_t)i < nd ? digits[i] : '0';
            out[k++] = '.';
            if ((size_t)exp + 1 < nd) for (size_t i = (size_t)exp + 1; i < nd; i++) out[k++] = digits[i];
            else out[k++] = '0';
        } else {
            out[k++] = '0', out[k++] = '.';
            for (int i = 0; i < -exp - 1; i++) out[k++] = '0';
            for (size_t i = 0; i < nd; i++) out[k++] = digits[i];
        }
        out[k] = 0;
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (size_t i = 1; i < nd; i++) out[k++] = digits[i];
        }
        snprintf(out + k, sizeof out - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    puts_(b, out);
}

/* Python str(int) of i: its decimal digits, without printf's call */
static void int_print(tv_buf *b, int64_t i)
{
    char t[24], *p = t + sizeof t;
    uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i; /* INT64_MIN too */
    do *--p = (char)('0' + u % 10); while (u /= 10);
    if (i < 0) *--p = '-';
    ld_tv_buf_put(b, p, (size_t)(t + sizeof t - p));
}

bool ld_tv_print(tv_buf *b, const ld_tpl_value *v, bool repr)
{
    switch (v->kind) {
    case TV_UNDEF: return !repr;
    case TV_NONE: puts_(b, "None"); return true;
    case TV_BOOL: puts_(b, v->u.b ? "True" : "False"); return true;
    case TV_INT: int_print(b, v->u.i); return true;
    case TV_FLOAT: ld_tv_float_repr(b, v->u.f); return true;
    case TV_STR:
        if (repr) ld_tv_str_repr(b, v->u.str.s, v->u.str.len);
        else ld_tv_buf_put(b, v->u.str.s, v->u.str.len);
        return true;
    case TV_LIST: {
        if (v->flags & TV_F_GEN) return false;
        bool tup = v->flags & TV_F_TUPLE;
        ld_tv_buf_putc(b, tup ? '(' : '[');
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i) puts_(b, ", ");
            if (!ld_tv_print(b, v->u.list.items[i], true)) return false;
        }
        if (tup && v->u.list.n == 1) ld_tv_buf_putc(b, ',');
        ld_tv_buf_putc(b, tup ? ')' : ']');
        return true;
    }
    case TV_DICT:
        ld_tv_buf_putc(b, '{');
        for (size_t i = 0; i < v->u.dict.n; i++) {
            if (i) puts_(b, ", ");
            if (!ld_tv_print(b, v->u.dict.keys[i], true)) return false;
            puts_(b, ": ");
            if (!ld_tv_print(b, v->u.dict.vals[i], true)) return false;
        }
        ld_tv_buf_putc(b, '}');
        return true;
    default: return false;
    }
}

/* "\n" and indent * depth spaces, checked against b's cap as a whole: a
 * huge indent fails at once */
static void newline_indent(tv_buf *b, int64_t indent, int depth)
{
    static const char nl_spaces[] = "\n                                                                "; /* 64 */
    size_t n;
    if (__builtin_mul_overflow((uint64_t)indent, (uint64_t)depth, &n)) n = SIZE_MAX;
    if (n < sizeof nl_spaces - 1) { /* the usual: one piece */
        ld_tv_buf_put(b, nl_spaces, n + 1);
        return;
    }
    ld_tv_buf_putc(b, '\n');
    ld_tv_buf_repeat(b, " ", 1, n);
}

/* The order json.dumps(sort_keys=True) writes d's items in: a malloc'd
 * index array (caller frees), NULL with *why set when keys do not compare. */
static size_t *sorted_keys(const ld_tpl_value *d, const char **why)
{
    size_t n = d->u.dict.n, *ix = malloc((n ? n : 1) * sizeof *ix);
    if (!ix) return *why = "out of memory", NULL;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        for (; j > 0; j--) {
            bool ok;
            int c = ld_tv_compare(d->u.dict.keys[ix[j - 1]], d->u.dict.keys[i], &ok);
            if (!ok) return free(ix), *why = "'<' not supported between the key types", NULL;
            if (c <= 0) break;
            ix[j] = ix[j - 1];
        }
        ix[j] = i;
    }
    return ix;
}

/* One json.dumps call's settings, its separators measured once rather
 * than at every item */
typedef struct json_fmt {
    int64_t indent;
    const char *item_sep, *key_sep;
    size_t item_len, key_len;
    int flags;
    const char **why;
} json_fmt;

static bool tojson_value(tv_buf *b, const ld_tpl_value *v, const json_fmt *f, int depth);

/* A dict key as json.dumps writes it (str, or a number, bool or None
 * quoted), then the key separator; false (*why set) for another kind */
static bool tojson_key(tv_buf *b, const ld_tpl_value *k, const json_fmt *f, int depth)
{
    if (k->kind == TV_STR) ld_tv_json_str(b, k->u.str.s, k->u.str.len, f->flags & TV_JSON_ASCII);
    else if (k->kind == TV_INT || k->kind == TV_FLOAT) {
        ld_tv_buf_putc(b, '"');
        tojson_value(b, k, f, depth); /* a number uses none of f's settings */
        ld_tv_buf_putc(b, '"');
    } else if (k->kind == TV_BOOL) {
        if (k->u.b) ld_tv_buf_put(b, "\"true\"", 6);
        else ld_tv_buf_put(b, "\"false\"", 7);
    } else if (k->kind == TV_NONE) ld_tv_buf_put(b, "\"null\"", 6);
    else return *f->why = "keys must be str, int, float, bool or None", false;
    ld_tv_buf_put(b, f->key_sep, f->key_len);
    return true;
}

/* The items of the non-empty list or dict v between its brackets */
static bool tojson_items(tv_buf *b, const ld_tpl_value *v, const json_fmt *f, int depth)
{
    bool list = v->kind == TV_LIST;
    size_t n = list ? v->u.list.n : v->u.dict.n;
    bool sort_keys = !list && (f->flags & TV_JSON_SORT_KEYS);
    size_t *order = sort_keys ? sorted_keys(v, f->why) : NULL;
    if (sort_keys && !order) return false;
    bool ok = true;
    for (size_t o = 0; ok && o < n && !b->failed; o++) { /* a failed b stays failed: stop */
        size_t i = order ? order[o] : o;
        if (o) ld_tv_buf_put(b, f->item_sep, f->item_len);
        if (f->indent >= 0) newline_indent(b, f->indent, depth + 1);
        if (!list && !tojson_key(b, v->u.dict.keys[i], f, depth)) {
            ok = false;
            break;
        }
        ok = tojson_value(b, list ? v->u.list.items[i] : v->u.dict.vals[i], f, depth + 1);
    }
    free(order);
    if (ok && f->indent >= 0) newline_indent(b, f->indent, depth);
    return ok;
}

static bool tojson_value(tv_buf *b, const ld_tpl_value *v, const json_fmt *f, int depth)
{
    if (depth > 200) return *f->why = "nesting too deep", false;
    switch (v->kind) {
    case TV_NONE: ld_tv_buf_put(b, "null", 4); return true;
    case TV_BOOL:
        if (v->u.b) ld_tv_buf_put(b, "true", 4);
        else ld_tv_buf_put(b, "false", 5);
        return true;
    case TV_INT: int_print(b, v->u.i); return true;
    case TV_FLOAT:
        if (isnan(v->u.f)) puts_(b, "NaN");
        else if (isinf(v->u.f)) puts_(b, v->u.f < 0 ? "-Infinity" : "Infinity");
        else ld_tv_float_repr(b, v->u.f);
        return true;
    case TV_STR: ld_tv_json_str(b, v->u.str.s, v->u.str.len, f->flags & TV_JSON_ASCII); return true;
    case TV_LIST:
    case TV_DICT: {
        bool list = v->kind == TV_LIST;
        if (list && (v->flags & TV_F_GEN)) return *f->why = "Object of type generator is not JSON serializable", false;
        ld_tv_buf_putc(b, list ? '[' : '{');
        if ((list ? v->u.list.n : v->u.dict.n) && !tojson_items(b, v, f, depth)) return false;
        ld_tv_buf_putc(b, list ? ']' : '}');
        return true;
    }
    default:
        *f->why = v->kind == TV_UNDEF ? "Object of type Undefined is not JSON serializable"
                                      : "object is not JSON serializable";
        return false;
    }
}

bool ld_tv_tojson(tv_buf *b, const ld_tpl_value *v, int64_t indent, const char *item_sep,
               const char *key_sep, int flags, int depth, const char **why)
{
    if (v->kind == TV_STR && depth <= 200) { /* the usual (a tool call's arguments): no settings to measure */
        ld_tv_json_str(b, v->u.str.s, v->u.str.len, flags & TV_JSON_ASCII);
        return true;
    }
    json_fmt f = {indent, item_sep, key_sep, strlen(item_sep), strlen(key_sep), flags, why};
    return tojson_value(b, v, &f, depth);
}

ld_status ld_tpl_json_dumps(const struct cJSON *j, int indent, char **out,
                            size_t *out_len, ld_error *err)
{
    *out = NULL;
    *out_len = 0;
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_tpl_value *v = ld_tpl_value_from_json(&a, j);
    tv_buf b = { 0 };
    const char *why = NULL;
    bool ok = v && ld_tv_tojson(&b, v, indent, ", ", ": ", 0, 0, &why);
    ld_arena_release(&a);
    if (!ok || b.failed) {
        free(b.p);
        if (!v || b.failed) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory in json.dumps");
        return LD_FAIL(err, LD_ERR_LIMIT, 0, "json.dumps: %s", why ? why : "cannot serialise");
    }
    if (!b.p && !(b.p = calloc(1, 1)))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory in json.dumps");
    *out = b.p;
    *out_len = b.len;
    return LD_OK;
}
