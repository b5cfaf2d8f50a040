/* tpl_fmt.c - text layout: jinja2's filters indent, format (printf-style
 * `%`: conversions s r d i f F e E g G x X o c and %%, flags, width and
 * precision, %(name)s with keyword arguments), center, truncate, wordcount
 * and escape; Python's str.format (fields {} {0} {name} with !r / !s and
 * a format spec [[fill]align][sign][#][0][width][.precision][type]; {{ and
 * }} escape braces; the ',' '_' grouping, 'n' and 'z' are not supported).
 * wordcount counts runs of \w, taking every non-ASCII code point outside
 * the punctuation and space blocks as a word character. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define A (ld_tpl_rt_arena(rt))
#define NEWV(expr) do { if (!(expr)) return ld_tpl_nomem(rt, at); } while (0)

/* a + b and a * b, SIZE_MAX when they overflow: sizes charged against the
 * memory limit, where SIZE_MAX is simply refused */
static size_t sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
static size_t sat_mul(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

/* the indentation: `s` (len bytes) `reps` times over */
typedef struct indent_unit {
    const char *s;
    size_t len, reps;
} indent_unit;

/* Walks s[0..n) + "\n" split into lines (every piece between breaks, the
 * maybe empty one after the last break included), joined back with "\n" and
 * each line after the first indented (unless empty and not `all`).  Counts
 * the text bytes, the breaks and the indented lines into c[0..3); writes
 * the lines into b when b is not NULL. */
static void indent_walk(const char *p, size_t n, bool all, const indent_unit *u, tv_buf *b, size_t c[3])
{
    c[0] = c[1] = c[2] = 0;
    for (size_t i = 0, line = 0;; line++) {
        size_t e = i, br = 0;
        while (e < n && !(br = ld_tv_line_break(p + e, n - e))) e++;
        if (line > 0) {
            bool ind = all || e > i;
            c[1]++, c[2] += ind;
            if (b) ld_tv_buf_putc(b, '\n');
            if (b && ind) ld_tv_buf_repeat(b, u->s, u->len, u->reps);
        }
        c[0] += e - i;
        if (b) ld_tv_buf_put(b, p + i, e - i);
        if (e >= n) break;
        i = e + br;
    }
}

/* indent(s, width=4, first=False, blank=False) of jinja2 3.1: the text
 * gets a "\n" appended, is split into lines and joined back with "\n" plus
 * the indentation (lines left empty unless blank).  The result's size is
 * counted and charged first: a huge width costs nothing unless a line gets
 * it. */
ld_status ld_tpl_filter_indent(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *w = ld_tpl_kwarg(a, "width", 0), *first = ld_tpl_kwarg(a, "first", 1), *blank = ld_tpl_kwarg(a, "blank", 2);
    ld_tpl_value *s = v->kind == TV_UNDEF ? ld_tv_str(A, "", 0) : ld_tpl_str_of(rt, at, v);
    if (!s) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot convert a '%s' to string", ld_tv_type_name(v));
    indent_unit u = {" ", 1, 4};
    if (w && w->kind == TV_STR) u.s = w->u.str.s, u.len = w->u.str.len, u.reps = 1;
    else if (w && (w->kind == TV_INT || w->kind == TV_BOOL)) {
        int64_t k = w->kind == TV_INT ? w->u.i : w->u.b;
        u.reps = k < 0 ? 0 : (size_t)k; /* " " * -1 is "" */
    } else if (w) {
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: can't multiply sequence by non-int of type '%s'", ld_tv_type_name(w));
    }
    bool all = blank && ld_tv_truthy(blank), lead = first && ld_tv_truthy(first);
    size_t c[3];
    indent_walk(s->u.str.s, s->u.str.len, all, &u, NULL, c);
    size_t size = sat_add(sat_add(c[0], c[1]), sat_mul(sat_mul(u.len, u.reps), sat_add(c[2], lead)));
    LD_TRY(ld_tpl_rt_charge(rt, at, "indent", sat_add(size, 1)));
    tv_buf b = ld_tpl_rt_buf(rt);
    if (ld_tv_buf_reserve(&b, size)) {
        if (lead) ld_tv_buf_repeat(&b, u.s, u.len, u.reps);
        indent_walk(s->u.str.s, s->u.str.len, all, &u, &b, c);
    }
    return ld_tpl_rt_buf_value(rt, at, "indent", &b, out);
}

/* decimal digits at s[*i..n), saturating at SIZE_MAX (a huge width or
 * precision is refused when its result is charged) */
static size_t parse_count(const char *s, size_t n, size_t *i)
{
    size_t v = 0;
    for (; *i < n && s[*i] >= '0' && s[*i] <= '9'; (*i)++) v = sat_add(sat_mul(v, 10), (size_t)(s[*i] - '0'));
    return v;
}

/* a parsed format spec [[fill]align][sign][#][0][width][.precision][type] */
typedef struct fspec {
    char fill[5], align, sign, type; /* fill: one UTF-8 character */
    bool alt, has_prec;
    size_t width, prec; /* width 0 = none */
} fspec;

static bool parse_spec(const char *s, size_t n, fspec *f)
{
    size_t i = 0, cl = 1;
    memset(f, 0, sizeof *f);
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
    f->width = parse_count(s, n, &i);
    if (i < n && s[i] == '.') {
        i++;
        f->has_prec = true, f->prec = parse_count(s, n, &i);
    }
    if (i < n && strchr("sdxXobcfFeEgG%", s[i])) f->type = s[i++];
    if (!f->fill[0]) f->fill[0] = ' ';
    return i == n;
}

/* Python's bound on a width or precision it parses (Py_ssize_t) */
#define PY_SSIZE_MAX ((size_t)INT64_MAX)

/* body (sign already split off into `sign`) padded to the spec's width */
static void pad(tv_buf *b, const fspec *f, const char *sign, const char *body, size_t blen, char dflt)
{
    size_t sl = strlen(sign), len = sl + ld_tv_utf8_count(body, blen), fl = strlen(f->fill);
    size_t gap = f->width > len ? f->width - len : 0;
    char al = f->align ? f->align : dflt;
    size_t left = al == '>' || al == '=' ? gap : al == '^' ? gap / 2 : 0;
    if (al == '=') ld_tv_buf_put(b, sign, sl);
    ld_tv_buf_repeat(b, f->fill, fl, left);
    if (al != '=') ld_tv_buf_put(b, sign, sl);
    ld_tv_buf_put(b, body, blen);
    ld_tv_buf_repeat(b, f->fill, fl, gap - left);
}

/* The digits a float conversion `t` (e f g % ...) with precision prec
 * makes: g and G without '#' drop trailing zeros, so beyond the 767
 * significant digits a double can have a larger precision changes nothing:
 * it is cut to 1000, where the text is the same, instead of asking snprintf
 * for a billion zeros it would then drop.  Others keep prec digits. */
static size_t float_prec(char t, bool alt, size_t prec) { return (t == 'g' || t == 'G') && !alt && prec > 1000 ? 1000 : prec; }

/* the digits of float m with `fmt` (one conversion taking an int
 * precision, then the double) into b: at most 310 digits before the point,
 * prec after, an exponent; b->failed past b's cap */
static void put_float(tv_buf *b, const char *fmt, size_t prec, double m)
{
    if (prec > INT_MAX - 400) { b->failed = true; return; } /* only with a limit beyond 2 GiB */
    if (!ld_tv_buf_reserve(b, prec + 330)) return;
    int k = snprintf(b->p + b->len, b->cap - b->len, fmt, (int)prec, m);
    if (k < 0 || (size_t)k >= b->cap - b->len) { b->failed = true; return; }
    b->len += (size_t)k;
}

/* the text of float d for spec f (without its sign) into body */
static ld_status spec_float(tpl_rt *rt, const tpl_node *at, const fspec *f, double d, tv_buf *body)
{
    double m = fabs(d);
    if (!f->type && !f->has_prec) { ld_tv_float_repr(body, m); return LD_OK; } /* repr */
    if (!isfinite(m)) { ld_tv_buf_put(body, isnan(m) ? "nan" : "inf", 3); return LD_OK; }
    char t = f->type ? f->type : 'g', fmt[16];
    size_t prec = float_prec(t, f->alt, f->has_prec ? f->prec : 6);
    LD_TRY(ld_tpl_rt_charge(rt, at, "str.format", prec));
    snprintf(fmt, sizeof fmt, "%%%s.*%c", f->alt ? "#" : "", t == '%' ? 'f' : t);
    put_float(body, fmt, prec, t == '%' ? m * 100 : m);
    if (t == '%') ld_tv_buf_putc(body, '%');
    if (!f->type && body->p && !strpbrk(body->p, ".e")) ld_tv_buf_put(body, ".0", 2);
    return LD_OK;
}

/* the text of int i for spec f (type one of dxXobc, 0 = d) into body, the
 * sign and base prefix into sign[] */
static ld_status spec_int(tpl_rt *rt, const tpl_node *at, const fspec *f, int64_t i, tv_buf *body, char sign[4])
{
    uint64_t m = i < 0 ? 0ULL - (uint64_t)i : (uint64_t)i;
    char t = f->type ? f->type : 'd', tmp[80];
    if (t == 'c') {
        if (i < 0 || i > 0x10FFFF) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "overflow error: %%c arg not in range(0x110000)");
        ld_tv_buf_put_cp(body, (uint32_t)i);
    } else if (t == 'b') {
        size_t k = sizeof tmp;
        do tmp[--k] = (char)('0' + (m & 1)), m >>= 1; while (m);
        ld_tv_buf_put(body, tmp + k, sizeof tmp - k);
    } else {
        char pf[8];
        snprintf(pf, sizeof pf, "%%ll%c", t == 'd' ? 'u' : t);
        snprintf(tmp, sizeof tmp, pf, (unsigned long long)m);
        ld_tv_buf_put(body, tmp, strlen(tmp));
    }
    snprintf(sign, 4, "%s%s", i < 0 ? "-" : f->sign == '+' ? "+" : f->sign == ' ' ? " " : "",
             !f->alt ? "" : t == 'x' ? "0x" : t == 'X' ? "0X" : t == 'o' ? "0o" : t == 'b' ? "0b" : "");
    return LD_OK;
}

/* format(v, spec) of Python for str, int, float and bool values; the width
 * is charged before anything is written */
static ld_status format_spec(tpl_rt *rt, const tpl_node *at, tv_buf *b, ld_tpl_value *v, const char *spec, size_t n)
{
    fspec f;
    if (!parse_spec(spec, n, &f)) return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "str.format spec '%.*s' is not supported", (int)n, spec);
    if (f.width > PY_SSIZE_MAX || f.prec > PY_SSIZE_MAX)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: Too many decimal digits in format string");
    LD_TRY(ld_tpl_rt_charge(rt, at, "str.format", sat_mul(f.width, strlen(f.fill))));
    if (v->kind == TV_STR) {
        if (f.type && f.type != 's') return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: Unknown format code '%c' for object of type 'str'", f.type);
        if (f.align == '=' || f.sign) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: sign or '=' alignment not allowed in string format specifier");
        size_t len = v->u.str.len;
        if (f.has_prec) /* the first prec code points */
            for (size_t i = 0, c = 0; i < v->u.str.len; i++)
                if (((unsigned char)v->u.str.s[i] & 0xC0) != 0x80 && c++ == f.prec) { len = i; break; }
        pad(b, &f, "", v->u.str.s, len, '<');
        return LD_OK;
    }
    if (v->kind != TV_INT && v->kind != TV_BOOL && v->kind != TV_FLOAT)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: unsupported format string passed to %s.__format__", ld_tv_type_name(v));
    bool is_int = v->kind != TV_FLOAT && (!f.type || strchr("dxXobc", f.type));
    if (f.type == 's' || (v->kind == TV_FLOAT && f.type && strchr("dxXobc", f.type)))
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: Unknown format code '%c' for object of type '%s'", f.type,
                              ld_tv_type_name(v));
    if (is_int && f.has_prec)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: Precision not allowed in integer format specifier");
    if (is_int && f.type == 'c' && (f.sign || f.alt))
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: %s not allowed with integer format specifier 'c'",
                              f.sign ? "Sign" : "Alternate form (#)");
    tv_buf body = ld_tpl_rt_buf(rt);
    char sign[4] = "";
    ld_status st;
    if (is_int) {
        st = spec_int(rt, at, &f, v->kind == TV_INT ? v->u.i : v->u.b, &body, sign);
    } else {
        double d = v->kind == TV_FLOAT ? v->u.f : v->kind == TV_INT ? (double)v->u.i : v->u.b;
        sign[0] = signbit(d) ? '-' : f.sign == '+' ? '+' : f.sign == ' ' ? ' ' : 0;
        st = spec_float(rt, at, &f, d, &body);
    }
    if (st == LD_OK && body.failed) st = ld_tpl_rt_over(rt, at, "str.format");
    if (st == LD_OK) pad(b, &f, sign, body.p ? body.p : "", body.len, '>');
    free(body.p);
    return st;
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
    tv_buf b = ld_tpl_rt_buf(rt);
    ld_status st = LD_OK;
    for (size_t i = 0; i < n && st == LD_OK && !b.failed; i++) {
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
                tv_buf c = ld_tpl_rt_buf(rt);
                bool printed = ld_tv_print(&c, v, repr);
                if (printed && c.failed) { free(c.p); st = ld_tpl_rt_over(rt, at, "str.format"); break; }
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
    if (st != LD_OK) return free(b.p), st;
    return ld_tpl_rt_buf_value(rt, at, "str.format", &b, out);
}

static ld_tpl_value *as_str(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v)
{
    return v->kind == TV_UNDEF ? ld_tv_str(A, "", 0) : ld_tpl_str_of(rt, at, v);
}

/* the bytes of the first n code points of s[0..len) */
static size_t cp_prefix(const char *s, size_t len, size_t n)
{
    size_t i = 0, c = 0;
    for (; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80 && c++ == n) break;
    return i;
}

/* a %-conversion's flags, width and precision (saturating: a huge one is
 * refused when charged) */
typedef struct pspec {
    bool left, zero, plus, space, alt, has_prec;
    size_t width, prec;
} pspec;

/* "[flags][width][.precision][length modifier]" at q: the modifier (h l L)
 * is ignored, as Python does */
static const char *parse_pspec(const char *q, const char *e, pspec *ps)
{
    memset(ps, 0, sizeof *ps);
    for (; q < e && strchr("-+ #0", *q); q++) {
        if (*q == '-') ps->left = true;
        else if (*q == '+') ps->plus = true;
        else if (*q == ' ') ps->space = true;
        else if (*q == '#') ps->alt = true;
        else ps->zero = true;
    }
    size_t i = 0, n = (size_t)(e - q);
    ps->width = parse_count(q, n, &i);
    if (i < n && q[i] == '.') {
        i++;
        ps->has_prec = true, ps->prec = parse_count(q, n, &i);
    }
    while (i < n && strchr("hlL", q[i])) i++;
    return q + i;
}

/* body[0..len) padded to ps->width code points: spaces after it ('-'),
 * zeros between its first `lead` bytes (sign, base prefix) and the rest
 * ('0' on a finite number), else spaces before it */
static void put_padded(tv_buf *b, const pspec *ps, const char *body, size_t len, size_t lead, bool numeric)
{
    size_t chars = ld_tv_utf8_count(body, len), gap = ps->width > chars ? ps->width - chars : 0;
    if (ps->left) {
        ld_tv_buf_put(b, body, len);
        ld_tv_buf_repeat(b, " ", 1, gap);
    } else if (ps->zero && numeric) {
        ld_tv_buf_put(b, body, lead);
        ld_tv_buf_repeat(b, "0", 1, gap);
        ld_tv_buf_put(b, body + lead, len - lead);
    } else {
        ld_tv_buf_repeat(b, " ", 1, gap);
        ld_tv_buf_put(b, body, len);
    }
}

/* %s / %r: str() / repr(), cut to the precision in code points */
static ld_status printf_str(tpl_rt *rt, const tpl_node *at, tv_buf *b, const pspec *ps, char conv, ld_tpl_value *v)
{
    tv_buf s = ld_tpl_rt_buf(rt);
    if (!ld_tv_print(&s, v, conv == 'r')) {
        free(s.p);
        return ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "cannot format a '%s' value", ld_tv_type_name(v));
    }
    if (s.failed) return free(s.p), ld_tpl_rt_over(rt, at, "format");
    const char *t = s.p ? s.p : "";
    put_padded(b, ps, t, ps->has_prec ? cp_prefix(t, s.len, ps->prec) : s.len, 0, false);
    free(s.p);
    return LD_OK;
}

/* %c: an int as its code point, or a one-character string */
static ld_status printf_char(tpl_rt *rt, const tpl_node *at, tv_buf *b, const pspec *ps, ld_tpl_value *v)
{
    tv_buf c = {0};
    if (v->kind == TV_STR && ld_tv_utf8_count(v->u.str.s, v->u.str.len) == 1) {
        ld_tv_buf_put(&c, v->u.str.s, v->u.str.len);
    } else if (v->kind == TV_INT || v->kind == TV_BOOL) {
        int64_t i = v->kind == TV_INT ? v->u.i : v->u.b;
        if (i < 0 || i > 0x10FFFF) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "overflow error: %%c arg not in range(0x110000)");
        ld_tv_buf_put_cp(&c, (uint32_t)i);
    } else {
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: %%c requires int or char");
    }
    if (!c.failed) put_padded(b, ps, c.p, c.len, 0, false);
    free(c.p);
    return c.failed ? ld_tpl_nomem(rt, at) : LD_OK;
}

/* %d %i %x %X %o with Python's layout: the digits zero-filled to the
 * precision after the sign and base prefix, then padded to the width */
static ld_status printf_int(tpl_rt *rt, const tpl_node *at, tv_buf *b, const pspec *ps, char conv, ld_tpl_value *v)
{
    int64_t i = v->kind == TV_INT ? v->u.i : v->u.b;
    if (v->kind == TV_FLOAT) {
        if (conv != 'd' && conv != 'i')
            return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: %%%c format: an integer is required, not float", conv);
        LD_TRY(ld_tpl_float_to_int(rt, at, v->u.f, &i));
    }
    uint64_t m = i < 0 ? 0ULL - (uint64_t)i : (uint64_t)i;
    char digits[32], head[4];
    snprintf(digits, sizeof digits, conv == 'x' ? "%llx" : conv == 'X' ? "%llX" : conv == 'o' ? "%llo" : "%llu",
             (unsigned long long)m);
    snprintf(head, sizeof head, "%s%s", i < 0 ? "-" : ps->plus ? "+" : ps->space ? " " : "",
             !ps->alt ? "" : conv == 'x' ? "0x" : conv == 'X' ? "0X" : conv == 'o' ? "0o" : "");
    size_t nd = strlen(digits), hl = strlen(head), zeros = ps->has_prec && ps->prec > nd ? ps->prec - nd : 0;
    size_t natural = sat_add(zeros, hl + nd), gap = ps->width > natural ? ps->width - natural : 0;
    LD_TRY(ld_tpl_rt_charge(rt, at, "format", sat_add(natural, gap)));
    if (!ps->left && !ps->zero) ld_tv_buf_repeat(b, " ", 1, gap);
    ld_tv_buf_put(b, head, hl);
    ld_tv_buf_repeat(b, "0", 1, ps->zero && !ps->left ? sat_add(zeros, gap) : zeros);
    ld_tv_buf_put(b, digits, nd);
    if (ps->left) ld_tv_buf_repeat(b, " ", 1, gap);
    return LD_OK;
}

/* %e %E %f %F %g %G: C's conversion (Python's for these), padded to the
 * width by put_padded; the precision is charged before the digits are made */
static ld_status printf_float(tpl_rt *rt, const tpl_node *at, tv_buf *b, const pspec *ps, char conv, double d)
{
    size_t prec = float_prec(conv, ps->alt, ps->has_prec ? ps->prec : 6);
    LD_TRY(ld_tpl_rt_charge(rt, at, "format", prec));
    char fmt[16];
    snprintf(fmt, sizeof fmt, "%%%s%s%s.*%c", ps->plus ? "+" : "", ps->space ? " " : "", ps->alt ? "#" : "", conv);
    tv_buf body = ld_tpl_rt_buf(rt);
    put_float(&body, fmt, prec, d);
    if (body.failed) return free(body.p), ld_tpl_rt_over(rt, at, "format");
    size_t lead = body.len && strchr("+- ", body.p[0]) ? 1 : 0;
    put_padded(b, ps, body.p, body.len, lead, isfinite(d));
    free(body.p);
    return LD_OK;
}

/* one %-conversion `conv` of `v` into b; the width is charged first */
static ld_status printf_one(tpl_rt *rt, const tpl_node *at, tv_buf *b, const pspec *ps, char conv, ld_tpl_value *v)
{
    /* Python's own bounds come first (a width up to 2**63 is fine to it) */
    if (ps->width > PY_SSIZE_MAX) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: width too big");
    if (ps->has_prec && ps->prec > INT_MAX) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "value error: precision too big");
    LD_TRY(ld_tpl_rt_charge(rt, at, "format", ps->width));
    if (conv == 's' || conv == 'r') return printf_str(rt, at, b, ps, conv, v);
    if (conv == 'c') return printf_char(rt, at, b, ps, v);
    bool num = v->kind == TV_INT || v->kind == TV_FLOAT || v->kind == TV_BOOL;
    if (!num) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: %%%c format: a real number is required, not %s", conv, ld_tv_type_name(v));
    if (strchr("dixXo", conv)) return printf_int(rt, at, b, ps, conv, v);
    return printf_float(rt, at, b, ps, conv, v->kind == TV_FLOAT ? v->u.f : v->kind == TV_INT ? (double)v->u.i : v->u.b);
}

/* the `format` filter: value % args (or % kwargs) */
ld_status ld_tpl_filter_format(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *s = as_str(rt, at, v);
    NEWV(s);
    if (a->n_pos && a->n_kw)
        return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "filter argument error: can't handle positional and keyword arguments at the same time");
    const char *p = s->u.str.s, *e = p + s->u.str.len;
    size_t next = 0;
    tv_buf b = ld_tpl_rt_buf(rt);
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
        pspec ps;
        q = parse_pspec(q, e, &ps);
        if (q >= e || !strchr("srdiouxXeEfFgGc", *q)) {
            st = ld_tpl_rt_fail(rt, at, LD_ERR_UNSUPPORTED, "format: conversion '%%%.1s' is not supported", q < e ? q : "");
            break;
        }
        if (!arg) {
            if (next >= a->n_pos) { st = ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: not enough arguments for format string"); break; }
            arg = a->pos[next++];
        }
        st = printf_one(rt, at, &b, &ps, *q == 'u' ? 'd' : *q, arg);
        if (st == LD_OK && b.failed) st = ld_tpl_rt_over(rt, at, "format");
        p = q + 1;
    }
    if (st == LD_OK && a->n_pos && next < a->n_pos)
        st = ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "type error: not all arguments converted during string formatting");
    if (st != LD_OK) return free(b.p), st;
    return ld_tpl_rt_buf_value(rt, at, "format", &b, out);
}

/* center(width=80): str.center, the odd space on the right unless both
 * the margin and the width are odd; made in the render's arena once its
 * size is charged */
ld_status ld_tpl_filter_center(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *s = as_str(rt, at, v), *w = ld_tpl_kwarg(a, "width", 0);
    NEWV(s);
    int64_t width = w && w->kind == TV_INT ? w->u.i : 80, len = (int64_t)ld_tv_utf8_count(s->u.str.s, s->u.str.len);
    if (width <= len) return *out = s, LD_OK;
    uint64_t marg = (uint64_t)width - (uint64_t)len, left = marg / 2 + (marg & (uint64_t)width & 1);
    size_t size = sat_add(s->u.str.len, (size_t)marg);
    LD_TRY(ld_tpl_rt_charge(rt, at, "center", sat_add(size, 1)));
    char *t = ld_arena_alloc(A, size + 1);
    if (!t) return ld_tpl_rt_over(rt, at, "center");
    memset(t, ' ', (size_t)left);
    memcpy(t + left, s->u.str.s, s->u.str.len);
    memset(t + left + s->u.str.len, ' ', (size_t)(marg - left));
    t[size] = 0;
    NEWV(*out = ld_tv_str_ref(A, t, size));
    return LD_OK;
}

/* truncate(length=255, killwords=False, end='...', leeway=5) */
ld_status ld_tpl_filter_truncate(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out)
{
    ld_tpl_value *s = as_str(rt, at, v), *lv = ld_tpl_kwarg(a, "length", 0), *kw = ld_tpl_kwarg(a, "killwords", 1);
    ld_tpl_value *ev = ld_tpl_kwarg(a, "end", 2), *lw = ld_tpl_kwarg(a, "leeway", 3);
    NEWV(s);
    int64_t length = lv && lv->kind == TV_INT ? lv->u.i : 255, leeway = lw && lw->kind == TV_INT ? lw->u.i : 5;
    const char *end = ev && ev->kind == TV_STR ? ev->u.str.s : "...";
    size_t end_len = ev && ev->kind == TV_STR ? ev->u.str.len : 3;
    int64_t n = (int64_t)ld_tv_utf8_count(s->u.str.s, s->u.str.len), el = (int64_t)ld_tv_utf8_count(end, end_len);
    if (length < el || leeway < 0) return ld_tpl_rt_fail(rt, at, LD_ERR_MISMATCH, "assertion error: expected length >= len(end) and leeway >= 0");
    if (n <= length || n - length <= leeway) return *out = s, LD_OK; /* n <= length + leeway, without overflow */
    size_t cut = cp_prefix(s->u.str.s, s->u.str.len, (size_t)(length - el));
    if (!(kw && ld_tv_truthy(kw))) { /* rsplit(" ", 1)[0] */
        size_t sp = cut;
        while (sp > 0 && s->u.str.s[sp - 1] != ' ') sp--;
        if (sp > 0) cut = sp - 1;
    }
    tv_buf b = ld_tpl_rt_buf(rt);
    ld_tv_buf_put(&b, s->u.str.s, cut);
    ld_tv_buf_put(&b, end, end_len);
    return ld_tpl_rt_buf_value(rt, at, "truncate", &b, out);
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
    ld_tpl_value *s = as_str(rt, at, v);
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
    ld_tpl_value *s = v->kind == TV_NONE ? ld_tv_str(A, "None", 4) : as_str(rt, at, v);
    NEWV(s);
    tv_buf b = ld_tpl_rt_buf(rt);
    for (size_t i = 0; i < s->u.str.len; i++) {
        char c = s->u.str.s[i];
        const char *r = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
        if (r) ld_tv_buf_put(&b, r, strlen(r));
        else ld_tv_buf_putc(&b, c);
    }
    return ld_tpl_rt_buf_value(rt, at, "escape", &b, out);
}
