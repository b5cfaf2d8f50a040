/* tpl_fmt.c - text layout: jinja2's filters indent, format (printf-style
 * `%`: conversions s r d i f F e E g G x X o c and %%, flags, width and
 * precision, %(name)s with keyword arguments), center, truncate, wordcount
 * and escape; Python's str.format (fields {} {0} {name} with !r / !s and
 * a format spec [[fill]align][sign][#][0][width][.precision][type]; {{ and
 * }} escape braces; the ',' '_' grouping, 'n' and 'z' are not supported).
 * wordcount counts runs of \w, taking every non-ASCII code point outside
 * the punctuation and space blocks as a word character. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define A (ld_tpl_rt_arena(rt))
#define NEWV(expr) do { if (!(expr)) return ld_tpl_nomem(rt, at); } while (0)

/* indent(s, width=4, first=False, blank=False) of jinja2 3.1: the text
 * gets a "\n" appended, is split into lines and joined back with "\n" plus
 * the indentation (lines left empty unless blank) */
ld_status ld_tpl_filter_indent(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *w = ld_tpl_kwarg(a, "width", 0), *first = ld_tpl_kwarg(a, "first", 1), *blank = ld_tpl_kwarg(a, "blank", 2);
    ld_tpl_value *s = v->kind == TV_UNDEF ? ld_tv_str(A, "", 0) : ld_tpl_str_of(rt, v);
    if (!s) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot convert a '%s' to string", ld_tv_type_name(v));
    char spaces[256];
    const char *ind = spaces;
    size_t il;
    if (w && w->kind == TV_STR) ind = w->u.str.s, il = w->u.str.len;
    else if (!w || w->kind == TV_INT || w->kind == TV_BOOL) {
        int64_t k = !w ? 4 : w->kind == TV_INT ? w->u.i : w->u.b;
        il = k < 0 ? 0 : k > 255 ? 255 : (size_t)k;
        memset(spaces, ' ', il);
    } else {
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: can't multiply sequence by non-int of type '%s'", ld_tv_type_name(w));
    }
    bool all = blank && ld_tv_truthy(blank);
    tv_buf b = {0};
    if (first && ld_tv_truthy(first)) ld_tv_buf_put(&b, ind, il);
    const char *p = s->u.str.s;
    size_t n = s->u.str.len;
    /* s + "\n" split into lines: every piece between breaks, the (maybe
     * empty) one after the last break included */
    for (size_t i = 0, line = 0;; line++) {
        size_t e = i, br = 0;
        while (e < n && !(br = ld_tv_line_break(p + e, n - e))) e++;
        if (line > 0) {
            ld_tv_buf_putc(&b, '\n');
            if (all || e > i) ld_tv_buf_put(&b, ind, il);
        }
        ld_tv_buf_put(&b, p + i, e - i);
        if (e >= n) break;
        i = e + br;
    }
    ld_tpl_value *r = b.failed ? NULL : ld_tv_str(A, b.p ? b.p : "", b.len);
    free(b.p);
    NEWV(r);
    return *out = r, LD_OK;
}

/* a parsed format spec [[fill]align][sign][#][0][width][.precision][type] */
typedef struct fspec {
    char fill[5], align, sign, type; /* fill: one UTF-8 character */
    bool alt;
    int width, prec; /* -1 = none */
} fspec;

static bool parse_spec(const char *s, size_t n, fspec *f)
{
    size_t i = 0, cl = 1;
    memset(f, 0, sizeof *f);
    f->width = f->prec = -1;
    if (n && ((unsigned char)s[0] & 0xC0) == 0xC0) /* a multibyte fill */
        while (cl < n && cl < 4 && ((unsigned char)s[cl] & 0xC0) == 0x80) cl++;
    if (n > cl && strchr("<>=^", s[cl])) memcpy(f->fill, s, cl), f->align = s[cl], i = cl + 1;
    else if (n && strchr("<>=^", s[0])) f->align = s[0], i = 1;
    if (i < n && strchr("+- ", s[i])) f->sign = s[i++];
    if (i < n && s[i] == '#') f->alt = true, i++;
    if (i < n && s[i] == '0') {
        if (!f->align) f->align = '=';
        if (!f->fill[0]) f->fill[0] = '0';
        i++;
    }
    for (; i < n && s[i] >= '0' && s[i] <= '9' && f->width < 100000; i++) f->width = (f->width < 0 ? 0 : f->width * 10) + (s[i] - '0');
    if (i < n && s[i] == '.') {
        f->prec = 0;
        for (i++; i < n && s[i] >= '0' && s[i] <= '9' && f->prec < 1000; i++) f->prec = f->prec * 10 + (s[i] - '0');
    }
    if (i < n && strchr("sdxXobcfFeEgG%", s[i])) f->type = s[i++];
    if (!f->fill[0]) f->fill[0] = ' ';
    return i == n;
}

/* body (sign already split off into `sign`) padded to the spec's width */
static void pad(tv_buf *b, const fspec *f, const char *sign, const char *body, size_t blen, char dflt)
{
    size_t len = strlen(sign) + ld_tv_utf8_count(body, blen), w = f->width > 0 ? (size_t)f->width : 0, fl = strlen(f->fill);
    size_t gap = w > len ? w - len : 0, left = 0;
    char al = f->align ? f->align : dflt;
    left = al == '>' ? gap : al == '^' ? gap / 2 : 0;
    if (al == '=') ld_tv_buf_put(b, sign, strlen(sign));
    for (size_t i = 0; i < (al == '=' ? gap : left); i++) ld_tv_buf_put(b, f->fill, fl);
    if (al != '=') ld_tv_buf_put(b, sign, strlen(sign));
    ld_tv_buf_put(b, body, blen);
    for (size_t i = (al == '=' ? gap : left); i < gap && al != '='; i++) ld_tv_buf_put(b, f->fill, fl);
}

/* format(v, spec) of Python for str, int, float and bool values */
static ld_status format_spec(tpl_rt *rt, const tpl_node *at, tv_buf *b, ld_tpl_value *v, const char *spec, size_t n)
{
    fspec f;
    char body[512], pf[32];
    if (!parse_spec(spec, n, &f)) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "str.format spec '%.*s' is not supported", (int)n, spec);
    if (v->kind == TV_STR) {
        if (f.type && f.type != 's') return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: Unknown format code '%c' for object of type 'str'", f.type);
        if (f.align == '=' || f.sign) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: sign or '=' alignment not allowed in string format specifier");
        size_t len = v->u.str.len;
        if (f.prec >= 0) /* the first prec code points */
            for (size_t i = 0, c = 0; i < v->u.str.len; i++)
                if (((unsigned char)v->u.str.s[i] & 0xC0) != 0x80 && c++ == (size_t)f.prec) { len = i; break; }
        pad(b, &f, "", v->u.str.s, len, '<');
        return LD_OK;
    }
    if (v->kind != TV_INT && v->kind != TV_BOOL && v->kind != TV_FLOAT)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: unsupported format string passed to %s.__format__", ld_tv_type_name(v));
    bool is_int = v->kind != TV_FLOAT && (!f.type || strchr("dxXobc", f.type));
    if (v->kind == TV_FLOAT && f.type && strchr("dxXobc", f.type))
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: Unknown format code '%c' for object of type 'float'", f.type);
    if (is_int) {
        long long i = v->kind == TV_INT ? (long long)v->u.i : v->u.b;
        unsigned long long m = i < 0 ? 0ULL - (unsigned long long)i : (unsigned long long)i;
        char t = f.type ? f.type : 'd';
        if (t == 'c') { body[0] = (char)i, body[1] = 0; }
        else if (t == 'b') {
            size_t k = 0;
            char tmp[80];
            do tmp[k++] = (char)('0' + (m & 1)), m >>= 1; while (m);
            for (size_t j = 0; j < k; j++) body[j] = tmp[k - 1 - j];
            body[k] = 0;
        } else {
            snprintf(pf, sizeof pf, "%%ll%c", t == 'd' ? 'u' : t);
            snprintf(body, sizeof body, pf, m);
        }
        char sign[4] = "";
        snprintf(sign, sizeof sign, "%s%s", i < 0 ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "",
                 !f.alt ? "" : t == 'x' ? "0x" : t == 'X' ? "0X" : t == 'o' ? "0o" : t == 'b' ? "0b" : "");
        pad(b, &f, sign, body, strlen(body), '>');
        return LD_OK;
    }
    double d = v->kind == TV_FLOAT ? v->u.f : v->kind == TV_INT ? (double)v->u.i : v->u.b, m = fabs(d);
    char sign[2] = {signbit(d) ? '-' : f.sign == '+' ? '+' : f.sign == ' ' ? ' ' : 0, 0};
    if (!f.type && f.prec < 0) { /* repr */
        tv_buf r = {0};
        ld_tv_float_repr(&r, m);
        snprintf(body, sizeof body, "%s", r.p ? r.p : "");
        free(r.p);
    } else if (!isfinite(m)) {
        snprintf(body, sizeof body, "%s", isnan(m) ? "nan" : "inf");
    } else {
        char t = f.type ? f.type : 'g';
        int prec = f.prec >= 0 ? f.prec : 6;
        snprintf(pf, sizeof pf, "%%%s.%d%c", f.alt ? "#" : "", prec, t == '%' ? 'f' : t);
        snprintf(body, sizeof body, pf, t == '%' ? m * 100 : m);
        if (t == '%') strncat(body, "%", sizeof body - strlen(body) - 1);
        if (!f.type && !strpbrk(body, ".e")) strncat(body, ".0", sizeof body - strlen(body) - 1);
    }
    pad(b, &f, sign, body, strlen(body), '>');
    return LD_OK;
}

/* the value of field `name` (empty = the next positional one) */
static ld_status field(tpl_rt *rt, const tpl_node *at, tpl_args *a, const char *name, size_t len, size_t *auto_ix,
                       ld_tpl_value **out)
{
    if (len == 0) {
        if (*auto_ix >= a->n_pos) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "index error: Replacement index %zu out of range for positional args tuple", *auto_ix);
        return *out = a->pos[(*auto_ix)++], LD_OK;
    }
    if (name[0] >= '0' && name[0] <= '9') {
        size_t ix = 0;
        for (size_t i = 0; i < len; i++) {
            if (name[i] < '0' || name[i] > '9' || ix > 100000) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "str.format field '%.*s' is not supported", (int)len, name);
            ix = ix * 10 + (size_t)(name[i] - '0');
        }
        if (ix >= a->n_pos) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "index error: Replacement index %zu out of range for positional args tuple", ix);
        return *out = a->pos[ix], LD_OK;
    }
    for (size_t i = 0; i < a->n_kw; i++)
        if (strlen(a->kw[i]) == len && memcmp(a->kw[i], name, len) == 0) return *out = a->kwv[i], LD_OK;
    for (size_t i = 0; i < len; i++)
        if (name[i] == '.' || name[i] == '[') return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "str.format field '%.*s' is not supported", (int)len, name);
    return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "key error: '%.*s'", (int)len, name);
}

ld_status ld_tpl_str_format(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, tpl_args *a, ld_tpl_value **out)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, auto_ix = 0;
    tv_buf b = {0};
    ld_status st = LD_OK;
    for (size_t i = 0; i < n && st == LD_OK; i++) {
        if (p[i] == '}') {
            if (i + 1 < n && p[i + 1] == '}') { ld_tv_buf_putc(&b, '}'), i++; continue; }
            st = ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: Single '}' encountered in format string");
            break;
        }
        if (p[i] != '{') { ld_tv_buf_putc(&b, p[i]); continue; }
        if (i + 1 < n && p[i + 1] == '{') { ld_tv_buf_putc(&b, '{'), i++; continue; }
        const char *close = memchr(p + i, '}', n - i);
        if (!close) { st = ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: Single '{' encountered in format string"); break; }
        const char *f = p + i + 1, *conv = memchr(f, '!', (size_t)(close - f)), *spec = memchr(f, ':', (size_t)(close - f));
        size_t flen = (size_t)((conv && (!spec || conv < spec) ? conv : spec ? spec : close) - f);
        ld_tpl_value *v = NULL;
        bool repr = conv && (!spec || conv < spec) && conv + 1 < close && conv[1] == 'r';
        bool str = conv && (!spec || conv < spec) && conv + 1 < close && conv[1] == 's';
        if ((st = field(rt, at, a, f, flen, &auto_ix, &v)) != LD_OK) break;
        if (spec && spec + 1 < close) {
            if (repr || str) { /* the converted text, then the spec */
                tv_buf c = {0};
                bool printed = ld_tv_print(&c, v, repr);
                ld_tpl_value *x = printed && !c.failed ? ld_tv_str(A, c.p ? c.p : "", c.len) : NULL;
                free(c.p);
                if (!x) { st = ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot format a '%s' value", ld_tv_type_name(v)); break; }
                v = x;
            }
            st = format_spec(rt, at, &b, v, spec + 1, (size_t)(close - spec - 1));
        } else if (!ld_tv_print(&b, v, repr)) {
            st = ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot format a '%s' value", ld_tv_type_name(v));
        }
        i = (size_t)(close - p);
    }
    ld_tpl_value *r = st == LD_OK && !b.failed ? ld_tv_str(A, b.p ? b.p : "", b.len) : NULL;
    free(b.p);
    LD_TRY(st);
    NEWV(r);
    return *out = r, LD_OK;
}

static ld_tpl_value *as_str(tpl_rt *rt, ld_tpl_value *v)
{
    return v->kind == TV_UNDEF ? ld_tv_str(A, "", 0) : ld_tpl_str_of(rt, v);
}

static ld_status put_result(tpl_rt *rt, const tpl_node *at, tv_buf *b, ld_tpl_value **out)
{
    ld_tpl_value *r = b->failed ? NULL : ld_tv_str(A, b->p ? b->p : "", b->len);
    free(b->p);
    NEWV(r);
    return *out = r, LD_OK;
}

/* one %-conversion of `v` into b; spec is "%[flags][width][.prec]" */
static ld_status printf_one(tpl_rt *rt, const tpl_node *at, tv_buf *b, const char *spec, char conv, ld_tpl_value *v)
{
    char fmt[64], tmp[512];
    if (conv == 's' || conv == 'r') {
        tv_buf s = {0};
        if (!ld_tv_print(&s, v, conv == 'r')) {
            free(s.p);
            return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot format a '%s' value", ld_tv_type_name(v));
        }
        int width = 0, prec = -1;
        bool left = strchr(spec, '-') != NULL;
        const char *p = spec + 1;
        while (*p && strchr("-+ #0", *p)) p++;
        width = atoi(p);
        const char *dot = strchr(spec, '.');
        if (dot) prec = atoi(dot + 1);
        size_t len = s.p ? s.len : 0, chars = ld_tv_utf8_count(s.p ? s.p : "", len), keep = len;
        if (prec >= 0 && chars > (size_t)prec) { /* cut to prec code points */
            size_t c = 0;
            for (keep = 0; keep < len && c <= (size_t)prec; keep++)
                if (((unsigned char)s.p[keep] & 0xC0) != 0x80 && ++c > (size_t)prec) break;
            chars = (size_t)prec;
        }
        for (size_t i = chars; !left && (int)i < width; i++) ld_tv_buf_putc(b, ' ');
        ld_tv_buf_put(b, s.p ? s.p : "", keep);
        for (size_t i = chars; left && (int)i < width; i++) ld_tv_buf_putc(b, ' ');
        free(s.p);
        return LD_OK;
    }
    bool num = v->kind == TV_INT || v->kind == TV_FLOAT || v->kind == TV_BOOL;
    if (!num) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: %%%c format: a real number is required, not %s", conv, ld_tv_type_name(v));
    double d = v->kind == TV_FLOAT ? v->u.f : v->kind == TV_INT ? (double)v->u.i : v->u.b;
    if (strchr("dixXoc", conv)) {
        long long i = v->kind == TV_INT ? (long long)v->u.i : v->kind == TV_BOOL ? v->u.b : (long long)d;
        if (conv == 'c') return ld_tv_buf_putc(b, (char)i), LD_OK;
        snprintf(fmt, sizeof fmt, "%sll%c", spec, conv == 'i' ? 'd' : conv);
        snprintf(tmp, sizeof tmp, fmt, i);
    } else {
        snprintf(fmt, sizeof fmt, "%s%c", spec, conv);
        snprintf(tmp, sizeof tmp, fmt, d);
    }
    ld_tv_buf_put(b, tmp, strlen(tmp));
    return LD_OK;
}

/* the `format` filter: value % args (or % kwargs) */
ld_status ld_tpl_filter_format(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *s = as_str(rt, v);
    NEWV(s);
    if (a->n_pos && a->n_kw)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "filter argument error: can't handle positional and keyword arguments at the same time");
    const char *p = s->u.str.s, *e = p + s->u.str.len;
    size_t next = 0;
    tv_buf b = {0};
    ld_status st = LD_OK;
    while (p < e && st == LD_OK) {
        if (*p != '%') { ld_tv_buf_putc(&b, *p++); continue; }
        const char *q = p + 1;
        if (q < e && *q == '%') { ld_tv_buf_putc(&b, '%'), p = q + 1; continue; }
        ld_tpl_value *arg = NULL;
        if (q < e && *q == '(') {
            const char *c = memchr(q, ')', (size_t)(e - q));
            if (!c) { st = ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: incomplete format key"); break; }
            for (size_t i = 0; i < a->n_kw && !arg; i++)
                if (strlen(a->kw[i]) == (size_t)(c - q - 1) && memcmp(a->kw[i], q + 1, (size_t)(c - q - 1)) == 0) arg = a->kwv[i];
            if (!arg) { st = ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "key error: '%.*s'", (int)(c - q - 1), q + 1); break; }
            q = c + 1;
        }
        char spec[48];
        size_t k = 0;
        spec[k++] = '%';
        while (q < e && k < 40 && strchr("-+ #0123456789.", *q)) spec[k++] = *q++;
        spec[k] = 0;
        if (q >= e || !strchr("srdiouxXeEfFgGc", *q)) {
            st = ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "format: conversion '%%%.1s' is not supported", q < e ? q : "");
            break;
        }
        if (!arg) {
            if (next >= a->n_pos) { st = ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: not enough arguments for format string"); break; }
            arg = a->pos[next++];
        }
        st = printf_one(rt, at, &b, spec, *q == 'u' ? 'd' : *q, arg);
        p = q + 1;
    }
    if (st == LD_OK && a->n_pos && next < a->n_pos)
        st = ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: not all arguments converted during string formatting");
    if (st != LD_OK) return free(b.p), st;
    return put_result(rt, at, &b, out);
}

/* center(width=80): str.center, the odd space on the right unless both
 * the margin and the width are odd */
ld_status ld_tpl_filter_center(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *s = as_str(rt, v), *w = ld_tpl_kwarg(a, "width", 0);
    NEWV(s);
    int64_t width = w && w->kind == TV_INT ? w->u.i : 80, len = (int64_t)ld_tv_utf8_count(s->u.str.s, s->u.str.len);
    if (width > 100000) width = 100000;
    if (width <= len) return *out = s, LD_OK;
    int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
    tv_buf b = {0};
    for (int64_t i = 0; i < left; i++) ld_tv_buf_putc(&b, ' ');
    ld_tv_buf_put(&b, s->u.str.s, s->u.str.len);
    for (int64_t i = left + len; i < width; i++) ld_tv_buf_putc(&b, ' ');
    return put_result(rt, at, &b, out);
}

/* byte offset of code point `n` of s */
static size_t cp_offset(const ld_tpl_value *s, size_t n)
{
    size_t i = 0, c = 0;
    for (; i < s->u.str.len; i++)
        if (((unsigned char)s->u.str.s[i] & 0xC0) != 0x80 && c++ == n) break;
    return i;
}

/* truncate(length=255, killwords=False, end='...', leeway=5) */
ld_status ld_tpl_filter_truncate(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *s = as_str(rt, v), *lv = ld_tpl_kwarg(a, "length", 0), *kw = ld_tpl_kwarg(a, "killwords", 1);
    ld_tpl_value *ev = ld_tpl_kwarg(a, "end", 2), *lw = ld_tpl_kwarg(a, "leeway", 3);
    NEWV(s);
    int64_t length = lv && lv->kind == TV_INT ? lv->u.i : 255, leeway = lw && lw->kind == TV_INT ? lw->u.i : 5;
    const char *end = ev && ev->kind == TV_STR ? ev->u.str.s : "...";
    size_t end_len = ev && ev->kind == TV_STR ? ev->u.str.len : 3;
    int64_t n = (int64_t)ld_tv_utf8_count(s->u.str.s, s->u.str.len), el = (int64_t)ld_tv_utf8_count(end, end_len);
    if (length < el || leeway < 0) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "assertion error: expected length >= len(end) and leeway >= 0");
    if (n <= length + leeway) return *out = s, LD_OK;
    size_t cut = cp_offset(s, (size_t)(length - el));
    if (!(kw && ld_tv_truthy(kw))) { /* rsplit(" ", 1)[0] */
        size_t sp = cut;
        while (sp > 0 && s->u.str.s[sp - 1] != ' ') sp--;
        if (sp > 0) cut = sp - 1;
    }
    tv_buf b = {0};
    ld_tv_buf_put(&b, s->u.str.s, cut);
    ld_tv_buf_put(&b, end, end_len);
    return put_result(rt, at, &b, out);
}

static bool word_cp(uint32_t c)
{
    if (c < 0x80) return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
    return !(c < 0xC0 && c != 0xAA && c != 0xB5 && c != 0xBA) && c != 0xD7 && c != 0xF7 &&
           !(c >= 0x2000 && c <= 0x2BFF) && !(c >= 0x3000 && c <= 0x3003) && !(c >= 0xFF01 && c <= 0xFF0F) &&
           !(c >= 0x1F000 && c <= 0x1FAFF);
}

/* wordcount: the number of \w+ runs */
ld_status ld_tpl_filter_wordcount(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, ld_tpl_value **out)
{
    ld_tpl_value *s = as_str(rt, v);
    NEWV(s);
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < s->u.str.len;) {
        uint32_t c;
        i += ld_tv_utf8_decode(s->u.str.s + i, s->u.str.len - i, &c);
        bool w = c != 0xFFFFFFFF && word_cp(c);
        n += w && !in;
        in = w;
    }
    NEWV(*out = ld_tpl_value_int(A, n));
    return LD_OK;
}

/* escape / e: & < > " ' as HTML entities (markupsafe) */
ld_status ld_tpl_filter_escape(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, ld_tpl_value **out)
{
    ld_tpl_value *s = v->kind == TV_NONE ? ld_tv_str(A, "None", 4) : as_str(rt, v);
    NEWV(s);
    tv_buf b = {0};
    for (size_t i = 0; i < s->u.str.len; i++) {
        char c = s->u.str.s[i];
        const char *r = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
        if (r) ld_tv_buf_put(&b, r, strlen(r));
        else ld_tv_buf_putc(&b, c);
    }
    return put_result(rt, at, &b, out);
}
