/* pylit_number.c - Python int and float literals, as repr() prints them:
 * ints of any length up to a digit limit (Python's int_max_str_digits),
 * floats read by strtod, signed inf and nan. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pylit_internal.h"

/* ------------------------------------------------------------ numbers */

/* Validates the shape of a decimal literal starting at p->pos (after an
 * optional sign) and leaves p->pos after it. */
static ld_status scan_decimal(py_parser *p, size_t start, int *is_float)
{
    const char *b = p->buf;
    size_t i = p->pos, ds = i;
    while (i < p->len && is_digit((unsigned char)b[i])) i++;
    if (i == ds) {
        p->pos = i;
        return ld_pyp_bad_byte(p, i, "a digit");
    }
    *is_float = 0;
    if (i < p->len && b[i] == '.') {
        *is_float = 1;
        for (i++; i < p->len && is_digit((unsigned char)b[i]); i++) {}
    }
    if (i < p->len && (b[i] == 'e' || b[i] == 'E')) {
        *is_float = 1;
        if (++i < p->len && (b[i] == '+' || b[i] == '-')) i++;
        if (i >= p->len) return ld_pyp_eof_err(p, "the exponent of a float");
        if (!is_digit((unsigned char)b[i])) return ld_pyp_bad_byte(p, i, "an exponent digit");
        while (i < p->len && is_digit((unsigned char)b[i])) i++;
    }
    p->pos = i;
    if (i < p->len && (is_ident_char((unsigned char)b[i]) || b[i] == '.'))
        return ld_pyp_bad_byte(p, i, "the end of the number");
    if (!*is_float && b[ds] == '0' && i - ds > 1) {
        for (size_t k = ds; k < i; k++)
            if (b[k] != '0')
                return LD_FAIL(p->err, LD_ERR_SYNTAX, start,
                               "leading zeros in an integer literal");
    }
    return LD_OK;
}

static ld_status make_float(py_parser *p, ld_py_value *out, size_t start)
{
    char tmp[PY_MAX_FLOAT_LEN + 1];
    size_t n = p->pos - start;
    if (n > PY_MAX_FLOAT_LEN)
        return LD_FAIL(p->err, LD_ERR_LIMIT, start,
                       "float literal longer than %d bytes", PY_MAX_FLOAT_LEN);
    /* strtod needs a terminated copy: the buffer is not NUL-terminated. */
    memcpy(tmp, p->buf + start, n);
    tmp[n] = '\0';
    out->kind = LD_PY_FLOAT;
    out->flags = 0;
    out->n = 0;
    out->off = start;
    out->u.f = strtod(tmp, NULL);
    return LD_OK;
}

/* Integer text [start, p->pos): int64 when it fits, else a big integer
 * kept as its digits (CPython's str-digits limit bounds the length). */
static ld_status make_int(py_parser *p, ld_py_value *out, size_t start)
{
    const char *b = p->buf;
    size_t i = start;
    int neg = b[i] == '-';
    if (b[i] == '-' || b[i] == '+') i++;
    size_t nd = p->pos - i;
    if (nd > p->max_digits)
        return LD_FAIL(p->err, LD_ERR_LIMIT, start,
                       "integer literal of %zu digits exceeds the limit of %u",
                       nd, (unsigned)p->max_digits);
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    int big = 0;
    for (; i < p->pos; i++) {
        unsigned d = (unsigned)(b[i] - '0');
        if (v > (lim - d) / 10) { big = 1; break; }
        v = v * 10 + d;
    }
    out->kind = LD_PY_INT;
    out->off = start;
    if (big) {
        out->flags = LD_PY_F_BIGINT;
        out->n = (uint32_t)(p->pos - start);
        out->u.raw = b + start;
        return LD_OK;
    }
    out->flags = 0;
    out->n = 0;
    out->u.i = neg ? (int64_t)(0u - v) : (int64_t)v;
    return LD_OK;
}

/* `inf`/`nan` after a sign. */
static ld_status parse_signed_word(py_parser *p, ld_py_value *out, size_t start,
                                   int neg)
{
    size_t i = p->pos;
    while (i < p->len && is_ident_char((unsigned char)p->buf[i])) i++;
    size_t n = i - p->pos;
    const char *w = p->buf + p->pos;
    int is_inf = n == 3 && memcmp(w, "inf", 3) == 0;
    if (is_inf || (n == 3 && memcmp(w, "nan", 3) == 0)) {
        p->pos = i;
        out->kind = LD_PY_FLOAT;
        out->flags = 0;
        out->n = 0;
        out->off = start;
        out->u.f = is_inf ? (neg ? -INFINITY : INFINITY)
                          : NAN;
        return LD_OK;
    }
    if (i == p->len && n < 3 &&
        (memcmp(w, "inf", n) == 0 || memcmp(w, "nan", n) == 0))
        return ld_pyp_eof_err(p, "'inf' or 'nan'");
    return LD_FAIL(p->err, LD_ERR_SYNTAX, p->pos,
                   "expected a number after the sign");
}

ld_status ld_pyp_parse_number(py_parser *p, ld_py_value *out)
{
    size_t start = p->pos;
    char c = p->buf[p->pos];
    if (c == '-' || c == '+') {
        p->pos++;
        if (p->pos >= p->len) return ld_pyp_eof_err(p, "a number after the sign");
        if (is_ident_start((unsigned char)p->buf[p->pos]))
            return parse_signed_word(p, out, start, c == '-');
    }
    int is_float = 0;
    LD_TRY(scan_decimal(p, start, &is_float));
    return is_float ? make_float(p, out, start) : make_int(p, out, start);
}
