/* tpl_strmeth.c - the less common Python str methods: the is*() tests,
 * splitlines, join, rfind, removeprefix / removesuffix.  Letters and case
 * outside ASCII follow tpl_unicase.c (isalpha counts every non-ASCII code
 * point that has case or is not punctuation/space-like as a letter). */
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define A (ld_tpl_rt_arena(rt))
#define NEWV(expr) do { if (!(expr)) return ld_tpl_nomem(rt, at); } while (0)

static inline bool is(const char *a, const char *b) { return ld_tpl_name_is(a, b); }

static bool cp_space(uint32_t c)
{
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool cp_digit(uint32_t c) { return c >= '0' && c <= '9'; }

/* letters: ASCII ones; beyond ASCII whatever is not a space, a control, a
 * symbol/punctuation block or a digit */
static bool cp_alpha(uint32_t c)
{
    if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
    if (c < 0xC0) return c == 0xAA || c == 0xB5 || c == 0xBA;
    if (c == 0xD7 || c == 0xF7) return false;
    if (cp_space(c) || (c >= 0x2000 && c <= 0x2BFF) || (c >= 0x3000 && c <= 0x303F) || (c >= 0xFF00 && c <= 0xFF20) ||
        (c >= 0x1F000 && c <= 0x1FAFF) || (c >= 0xE000 && c <= 0xF8FF) || (c >= 0xFE00 && c <= 0xFE0F))
        return false;
    return true;
}

/* isdigit / isspace / isalpha / isalnum: non-empty and every code point */
static bool all_of(const ld_tpl_value *s, bool (*pred)(uint32_t), bool (*pred2)(uint32_t))
{
    if (!s->u.str.len) return false;
    for (size_t i = 0; i < s->u.str.len;) {
        uint32_t c;
        i += ld_tv_utf8_decode(s->u.str.s + i, s->u.str.len - i, &c);
        if (!pred(c) && !(pred2 && pred2(c))) return false;
    }
    return true;
}

/* isupper: s equals its upper case and differs from its lower case (has a
 * cased character, none lower case); islower the other way round */
static ld_status case_test(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, bool upper, bool *out)
{
    ld_tpl_value *u = ld_tv_case_map(A, s->u.str.s, s->u.str.len, TV_CASE_UPPER);
    ld_tpl_value *l = ld_tv_case_map(A, s->u.str.s, s->u.str.len, TV_CASE_LOWER);
    NEWV(u && l);
    *out = ld_tv_equal(upper ? u : l, s) && !ld_tv_equal(upper ? l : u, s);
    return LD_OK;
}

bool ld_tpl_str_is_case(tpl_rt *rt, const ld_tpl_value *s, bool upper)
{
    bool r = false;
    return case_test(rt, NULL, s, upper, &r) == LD_OK && r;
}

static ld_status splitlines(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, bool keep, ld_tpl_value **out)
{
    ld_tpl_value *l = ld_tv_new(A, TV_LIST);
    NEWV(l);
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, i = 0;
    while (i < n) {
        size_t e = i, br = 0;
        while (e < n && !(br = ld_tv_line_break(p + e, n - e))) e++;
        NEWV(ld_tv_push(A, l, ld_tv_str(A, p + i, e - i + (keep ? br : 0))));
        i = e + br;
    }
    return *out = l, LD_OK;
}

static ld_status join(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *sep, ld_tpl_value *seq, ld_tpl_value **out)
{
    ld_tpl_value *items;
    LD_TRY(ld_tpl_iter(rt, at, seq, &items));
    LD_TRY(ld_tpl_rt_charge(rt, at, "str.join", ld_tv_join_size(items, sep->u.str.len)));
    tv_buf b = ld_tpl_rt_buf(rt);
    for (size_t i = 0; i < items->u.list.n && !b.failed; i++) {
        const ld_tpl_value *x = items->u.list.items[i];
        if (x->kind != TV_STR) {
            free(b.p);
            return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: sequence item %zu: expected str instance, %s found", i,
                               ld_tv_type_name(x));
        }
        if (i) ld_tv_buf_put(&b, sep->u.str.s, sep->u.str.len);
        ld_tv_buf_put(&b, x->u.str.s, x->u.str.len);
    }
    return ld_tpl_rt_buf_value(rt, at, "str.join", &b, out);
}

/* s.rsplit(sep=None, maxsplit=-1): pieces found from the right, kept in
 * their order */
static ld_status rsplit(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *sep = ld_tpl_kwarg(a, "sep", 0), *mx = ld_tpl_kwarg(a, "maxsplit", 1), *rev = ld_tv_new(A, TV_LIST);
    int64_t max = mx && mx->kind == TV_INT ? mx->u.i : -1;
    const char *p = s->u.str.s;
    size_t e = s->u.str.len;
    NEWV(rev);
    if (sep && sep->kind != TV_NONE && sep->kind != TV_STR)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: must be str or None, not %s", ld_tv_type_name(sep));
    if (!sep || sep->kind == TV_NONE) {
        while (e > 0) {
            while (e > 0 && cp_space((unsigned char)p[e - 1])) e--;
            if (!e) break;
            size_t b = e;
            if (max >= 0 && (int64_t)rev->u.list.n >= max) b = 0;
            else while (b > 0 && !cp_space((unsigned char)p[b - 1])) b--;
            NEWV(ld_tv_push(A, rev, ld_tv_str(A, p + b, e - b)));
            e = b;
        }
    } else {
        size_t k = sep->u.str.len, end = e;
        if (!k) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: empty separator");
        while (e >= k) {
            if ((max < 0 || (int64_t)rev->u.list.n < max) && memcmp(p + e - k, sep->u.str.s, k) == 0) {
                NEWV(ld_tv_push(A, rev, ld_tv_str(A, p + e, end - e)));
                e -= k, end = e;
            } else {
                e--;
            }
        }
        NEWV(ld_tv_push(A, rev, ld_tv_str(A, p, end)));
    }
    ld_tpl_value *l = ld_tv_new(A, TV_LIST);
    NEWV(l);
    for (size_t i = rev->u.list.n; i > 0; i--) NEWV(ld_tv_push(A, l, rev->u.list.items[i - 1]));
    return *out = l, LD_OK;
}

/* LD_ERR_UNSUPPORTED (without an error set) when m is not one of these */
ld_status ld_tpl_str_method_more(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, const char *m, tpl_args *a,
                              ld_tpl_value **out)
{
    ld_tpl_value *x = a->n_pos ? a->pos[0] : NULL;
    bool r = false;
    if (is(m, "isdigit")) r = all_of(s, cp_digit, NULL);
    else if (is(m, "isspace")) r = all_of(s, cp_space, NULL);
    else if (is(m, "isalpha")) r = all_of(s, cp_alpha, NULL);
    else if (is(m, "isalnum")) r = all_of(s, cp_alpha, cp_digit);
    else if (is(m, "isupper") || is(m, "islower")) LD_TRY(case_test(rt, at, s, m[2] == 'u', &r));
    else if (is(m, "rsplit")) return rsplit(rt, at, s, a, out);
    else if (is(m, "splitlines")) return splitlines(rt, at, s, x && ld_tv_truthy(x), out);
    else if (is(m, "join") && x) return join(rt, at, s, x, out);
    else if (is(m, "rfind") && x && x->kind == TV_STR) {
        int64_t found = -1;
        for (size_t i = s->u.str.len + 1; i-- > 0;)
            if (i + x->u.str.len <= s->u.str.len && memcmp(s->u.str.s + i, x->u.str.s, x->u.str.len) == 0) {
                found = (int64_t)ld_tv_utf8_count(s->u.str.s, i);
                break;
            }
        NEWV(*out = ld_tpl_value_int(A, found));
        return LD_OK;
    } else if ((is(m, "removeprefix") || is(m, "removesuffix")) && x && x->kind == TV_STR) {
        bool suf = m[6] == 's', hit = x->u.str.len <= s->u.str.len &&
            memcmp(s->u.str.s + (suf ? s->u.str.len - x->u.str.len : 0), x->u.str.s, x->u.str.len) == 0;
        size_t cut = hit ? x->u.str.len : 0;
        NEWV(*out = ld_tv_str(A, s->u.str.s + (suf ? 0 : cut), s->u.str.len - cut));
        return LD_OK;
    } else return LD_ERR_UNSUPPORTED;
    NEWV(*out = ld_tpl_value_bool(A, r));
    return LD_OK;
}
