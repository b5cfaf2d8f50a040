/* pylit.c - parser for Python repr()/str() literals, see pylit.h.
 *
 * Design (yyjson-like, see ../shared/docs/style.md section 2):
 * - one pass, recursive descent with an explicit depth limit;
 * - strings are zero-copy slices found with memchr (quote and backslash);
 *   escapes are only validated and decoded by ld_py_str_decode();
 * - children of a container are collected on one growable scratch stack
 *   owned by the parse call and copied into the arena once, when the
 *   container closes, so every container costs one arena allocation;
 * - integer list items take a short fast path (the token-id lists that
 *   dominate request logs).
 * Decoding, lookups and UTF-8 helpers live in pylit_str.c.
 */
#include "pylit.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    PY_DEFAULT_DEPTH = 512,
    /* Each level costs three recursive frames (up to ~1 KiB of C stack
     * under sanitizers); a larger caller limit is clamped so that no input
     * can exhaust an ordinary thread stack. */
    PY_HARD_DEPTH = 2048,
    PY_DEFAULT_DIGITS = 4300,
    PY_MAX_FLOAT_LEN = 512, /* longest float literal handed to strtod */
    PY_STACK_INIT = 256
};

typedef struct py_parser {
    const char *buf;
    size_t len;
    size_t pos;
    ld_arena *arena;
    ld_error *err;
    uint32_t depth;
    uint32_t max_depth;
    uint32_t max_digits;
    ld_py_value *stk; /* scratch stack of finished children, malloc'd */
    size_t sp;
    size_t cap;
    size_t n_markers; /* logger markers met so far in this parse */
    int skim_ints;    /* LD_PYLIT_SKIM_INT_LISTS */
    int skim_here;    /* the value being parsed may be skimmed (see value_under) */
} py_parser;

static ld_status parse_value(py_parser *p, ld_py_value *out);

/* ------------------------------------------------------------ helpers */

static int is_digit(unsigned char c) { return (unsigned)(c - '0') < 10u; }

static int is_ident_start(unsigned char c)
{
    return (unsigned)((c | 0x20) - 'a') < 26u || c == '_';
}

static int is_ident_char(unsigned char c)
{
    return is_ident_start(c) || is_digit(c);
}

static void skip_ws(py_parser *p)
{
    while (p->pos < p->len) {
        char c = p->buf[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* Error for a byte that is not what the grammar wants: shows the byte
 * readably, since it may be a control byte or part of a UTF-8 sequence. */
static ld_status bad_byte(py_parser *p, size_t at, const char *expected)
{
    unsigned char c = (unsigned char)p->buf[at];
    if (c >= 0x20 && c < 0x7f)
        return LD_FAIL(p->err, LD_ERR_SYNTAX, at, "expected %s, found '%c'",
                       expected, c);
    return LD_FAIL(p->err, LD_ERR_SYNTAX, at, "expected %s, found byte 0x%02x",
                   expected, c);
}

/* The input ended where more was needed: the log line was cut. */
static ld_status eof_err(py_parser *p, const char *expected)
{
    return LD_FAIL(p->err, LD_ERR_TRUNCATED, p->len,
                   "input ends where %s was expected", expected);
}

static ld_status nomem(py_parser *p, size_t n)
{
    return LD_FAIL(p->err, LD_ERR_NOMEM, p->pos,
                   "cannot allocate %zu bytes for parsed values", n);
}

static ld_status grow_stack(py_parser *p)
{
    size_t cap = p->cap ? p->cap * 2 : PY_STACK_INIT;
    ld_py_value *s = realloc(p->stk, cap * sizeof *s);
    if (!s) return nomem(p, cap * sizeof *s);
    p->stk = s;
    p->cap = cap;
    return LD_OK;
}

static inline ld_status push(py_parser *p, const ld_py_value *v)
{
    if (p->sp == p->cap) LD_TRY(grow_stack(p));
    p->stk[p->sp++] = *v;
    return LD_OK;
}

static ld_status enter(py_parser *p, size_t at)
{
    if (p->depth >= p->max_depth)
        return LD_FAIL(p->err, LD_ERR_LIMIT, at, "nesting deeper than %u",
                       (unsigned)p->max_depth);
    p->depth++;
    return LD_OK;
}

/* Moves the children pushed since `base` into one arena array. */
static ld_status pop_items(py_parser *p, size_t base, ld_py_value **out_items)
{
    size_t n = p->sp - base;
    *out_items = NULL;
    if (n) {
        ld_py_value *items = ld_arena_alloc(p->arena, n * sizeof *items);
        if (!items) return nomem(p, n * sizeof *items);
        memcpy(items, p->stk + base, n * sizeof *items);
        *out_items = items;
    }
    p->sp = base;
    return LD_OK;
}

/* LD_PY_F_MARKED for a container whose children are stk[base, sp): a scan
 * only in the rare parses that met a logger marker at all. */
static uint8_t marks_of_children(const py_parser *p, size_t base)
{
    if (!p->n_markers) return LD_PY_F_MARKS_KNOWN;
    for (size_t i = base; i < p->sp; i++) {
        const ld_py_value *c = &p->stk[i];
        if ((c->flags & LD_PY_F_MARKED) || c->kind == LD_PY_TRUNC ||
            c->kind == LD_PY_ABBREV || c->kind == LD_PY_ELLIPSIS)
            return LD_PY_F_MARKS_KNOWN | LD_PY_F_MARKED;
    }
    return LD_PY_F_MARKS_KNOWN;
}

static ld_status make_container(py_parser *p, ld_py_value *out, ld_py_kind kind,
                                size_t start, size_t base)
{
    size_t n = p->sp - base;
    if (kind == LD_PY_DICT) n /= 2;
    if (n > UINT32_MAX)
        return LD_FAIL(p->err, LD_ERR_LIMIT, start,
                       "container with more than 2^32 items");
    out->kind = (uint8_t)kind;
    out->flags = marks_of_children(p, base);
    out->n = (uint32_t)n;
    out->off = start;
    p->depth--;
    return pop_items(p, base, &out->u.items);
}

/* ------------------------------------------------------------ strings */

/* Scans a quoted literal whose opening quote is at p->pos.  Only the end
 * is found here (memchr for the quote, then for backslashes before it);
 * the quote position is searched again only when a backslash escapes it,
 * which keeps long strings with many escapes linear. */
/* First byte in [s, end) equal to q or '\\', or NULL: one pass for both
 * (SSE2 is part of x86-64; elsewhere a plain loop), where two memchr
 * passes plus a call per escape cost more on prompts full of "\n". */
static const char *find_quote_or_backslash(const char *s, const char *end, char q)
{
#if defined(__SSE2__)
    const __m128i vq = _mm_set1_epi8(q), vb = _mm_set1_epi8('\\');
    while (end - s >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
        unsigned m = (unsigned)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmpeq_epi8(x, vq), _mm_cmpeq_epi8(x, vb)));
        if (m) return s + __builtin_ctz(m);
        s += 16;
    }
#endif
    for (; s < end; s++)
        if (*s == q || *s == '\\') return s;
    return NULL;
}

static ld_status parse_quoted(py_parser *p, ld_py_value *out, size_t start,
                              ld_py_kind kind, unsigned flags)
{
    const char *end = p->buf + p->len;
    char q = p->buf[p->pos];
    const char *s = p->buf + p->pos + 1, *cur = s, *qp;
    for (;;) {
        qp = find_quote_or_backslash(cur, end, q);
        if (!qp || (qp + 1 >= end && *qp == '\\'))
            return LD_FAIL(p->err, LD_ERR_TRUNCATED, p->len,
                           "unterminated string literal starting at byte %zu",
                           start);
        if (*qp == q) break;
        flags |= LD_PY_F_ESCAPED;
        cur = qp + 2; /* the escaped byte, whatever it is, is skipped */
    }
    if ((uint64_t)(qp - s) > UINT32_MAX)
        return LD_FAIL(p->err, LD_ERR_LIMIT, start,
                       "string literal longer than 4 GiB");
    if (q == '"') flags |= LD_PY_F_DQUOTE;
    out->kind = (uint8_t)kind;
    out->flags = (uint8_t)flags;
    out->n = (uint32_t)(qp - s);
    out->off = start;
    out->u.raw = s;
    p->pos = (size_t)(qp + 1 - p->buf);
    return LD_OK;
}

/* SGLang writes a shortened value as `<head> ... <tail>` (log-formats.md
 * 3.1).  Sets *found when the marker and the first byte of a tail (one of
 * `opens`) follow; fails with LD_ERR_TRUNCATED when the input ends inside
 * the marker or right after it (a log line cut there). */
static ld_status marker_follows(py_parser *p, const char *opens, int *found)
{
    size_t rest = p->len - p->pos;
    const char *at = p->buf + p->pos;
    *found = 0;
    if (rest >= 6 && memcmp(at, " ... ", 5) == 0 && at[5] && strchr(opens, at[5])) {
        *found = 1;
        return LD_OK;
    }
    if (rest >= 2 && rest <= 5 && memcmp(at, " ... ", rest) == 0)
        return eof_err(p, "the tail after the ' ... ' truncation marker");
    return LD_OK;
}

static ld_status make_trunc(py_parser *p, ld_py_value *out,
                            const ld_py_value *head, const ld_py_value *tail)
{
    ld_py_value *items = ld_arena_alloc(p->arena, 2 * sizeof *items);
    if (!items) return nomem(p, 2 * sizeof *items);
    items[0] = *head;
    items[1] = *tail;
    p->n_markers++;
    out->kind = LD_PY_TRUNC;
    out->flags = 0;
    out->n = 2;
    out->off = head->off;
    out->u.items = items;
    return LD_OK;
}

static ld_status parse_string(py_parser *p, ld_py_value *out, size_t start,
                              ld_py_kind kind, unsigned flags)
{
    LD_TRY(parse_quoted(p, out, start, kind, flags));
    if (kind != LD_PY_STR || flags) return LD_OK; /* SGLang only cuts plain str */
    int found;
    LD_TRY(marker_follows(p, "'\"", &found));
    if (!found) return LD_OK;
    ld_py_value head = *out, tail;
    p->pos += 5;
    LD_TRY(parse_quoted(p, &tail, p->pos, LD_PY_STR, 0));
    return make_trunc(p, out, &head, &tail);
}

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
        return bad_byte(p, i, "a digit");
    }
    *is_float = 0;
    if (i < p->len && b[i] == '.') {
        *is_float = 1;
        for (i++; i < p->len && is_digit((unsigned char)b[i]); i++) {}
    }
    if (i < p->len && (b[i] == 'e' || b[i] == 'E')) {
        *is_float = 1;
        if (++i < p->len && (b[i] == '+' || b[i] == '-')) i++;
        if (i >= p->len) return eof_err(p, "the exponent of a float");
        if (!is_digit((unsigned char)b[i])) return bad_byte(p, i, "an exponent digit");
        while (i < p->len && is_digit((unsigned char)b[i])) i++;
    }
    p->pos = i;
    if (i < p->len && (is_ident_char((unsigned char)b[i]) || b[i] == '.'))
        return bad_byte(p, i, "the end of the number");
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
        return eof_err(p, "'inf' or 'nan'");
    return LD_FAIL(p->err, LD_ERR_SYNTAX, p->pos,
                   "expected a number after the sign");
}

static ld_status parse_number(py_parser *p, ld_py_value *out)
{
    size_t start = p->pos;
    char c = p->buf[p->pos];
    if (c == '-' || c == '+') {
        p->pos++;
        if (p->pos >= p->len) return eof_err(p, "a number after the sign");
        if (is_ident_start((unsigned char)p->buf[p->pos]))
            return parse_signed_word(p, out, start, c == '-');
    }
    int is_float = 0;
    LD_TRY(scan_decimal(p, start, &is_float));
    return is_float ? make_float(p, out, start) : make_int(p, out, start);
}

/* Token-id lists: up to 18 digits followed by ',', ']' or a space are an
 * int64 for sure, so skip the general number scanner.  Returns 0 (and
 * leaves p->pos alone) when the general path must decide. */
static int try_small_int(py_parser *p, ld_py_value *out)
{
    const char *b = p->buf;
    size_t i = p->pos, lim = p->len - i > 18 ? i + 18 : p->len;
    if (b[i] == '0') return 0; /* "0", "00", "0.5", "0e1": rare, let the slow path judge */
    uint64_t v = 0;
    while (i < lim && is_digit((unsigned char)b[i]))
        v = v * 10 + (unsigned)(b[i++] - '0');
    if (i == p->pos || i >= p->len) return 0;
    char c = b[i];
    if (c != ',' && c != ']' && c != ' ' && c != ')' && c != '}' && c != ':')
        return 0;
    out->kind = LD_PY_INT;
    out->flags = 0;
    out->n = 0;
    out->off = p->pos;
    out->u.i = (int64_t)v;
    p->pos = i;
    return 1;
}

/* ------------------------------------------------------------ containers */

/* Up to 8 leading ASCII digits of s[0..8) at once (SWAR, as simdjson):
 * returns how many there are (8 = maybe more) and their value in *out.
 * Bytes after the first non-digit may borrow or carry into each other but
 * never into the digits before it, and they are shifted out. */
static unsigned swar_digits(const unsigned char *s, uint64_t *out)
{
    uint64_t x;
    memcpy(&x, s, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    x -= 0x3030303030303030ull;
    uint64_t m = (x | (x + 0x7676767676767676ull)) & 0x8080808080808080ull;
    unsigned n = m ? (unsigned)__builtin_ctzll(m) >> 3 : 8u;
    if (n == 0) return 0;
    x <<= 8 * (8 - n); /* left-pad with zero digits */
    x = ((x & 0x0F0F0F0F0F0F0F0Full) * 2561) >> 8;
    x = ((x & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
    *out = ((x & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
    return n;
}

/* The hot loop of request logs: `, 151644, 8948, 198` inside a token-id
 * list.  Consumes `, <1-7 digits>` items followed by ',' or `close`,
 * writing straight onto the scratch stack with the parser state in locals;
 * anything unusual (sign, leading zero, long number, float, other spacing,
 * the last bytes of the input) stops the run and the general path decides. */
static ld_status int_run(py_parser *p, char close)
{
    const unsigned char *b = (const unsigned char *)p->buf;
    size_t len = p->len, i = p->pos, sp = p->sp;
    while (i + 10 <= len && b[i] == ',' && b[i + 1] == ' ') {
        const unsigned char *s = b + i + 2;
        uint64_t v = 0;
        unsigned n = swar_digits(s, &v);
        if (n == 0 || n == 8 || (s[0] == '0' && n > 1)) break;
        if (s[n] != ',' && s[n] != (unsigned char)close) break;
        if (sp == p->cap) {
            p->sp = sp;
            LD_TRY(grow_stack(p));
        }
        ld_py_value *o = &p->stk[sp++];
        o->kind = LD_PY_INT;
        o->flags = 0;
        o->n = 0;
        o->off = i + 2;
        o->u.i = (int64_t)v;
        i += 2 + n;
    }
    p->sp = sp;
    p->pos = i;
    return LD_OK;
}

/* After the first item of a list/tuple/set is pushed: `, item`* then the
 * closing byte, a trailing comma allowed as Python does. */
static ld_status parse_rest(py_parser *p, char close, const char *what)
{
    for (;;) {
        LD_TRY(int_run(p, close));
        skip_ws(p);
        if (p->pos >= p->len) return eof_err(p, what);
        char c = p->buf[p->pos++];
        if (c == close) return LD_OK;
        if (c != ',') return bad_byte(p, p->pos - 1, what);
        skip_ws(p);
        if (p->pos < p->len && p->buf[p->pos] == close) {
            p->pos++;
            return LD_OK;
        }
        ld_py_value v;
        if (p->pos >= p->len || !is_digit((unsigned char)p->buf[p->pos]) ||
            !try_small_int(p, &v))
            LD_TRY(parse_value(p, &v));
        LD_TRY(push(p, &v));
    }
}

/* Number of ',' bytes in s[0..n): eight bytes at a time, exactly (a byte
 * is zero after the XOR iff its high bit stays clear in t; the multiply
 * adds the eight flags into the top byte, with no popcount instruction
 * needed on baseline x86-64). */
static size_t count_commas(const unsigned char *s, size_t n)
{
    size_t count = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        x ^= 0x2C2C2C2C2C2C2C2Cull;
        uint64_t t = ((x & 0x7F7F7F7F7F7F7F7Full) + 0x7F7F7F7F7F7F7F7Full) | x;
        uint64_t hits = (~t & 0x8080808080808080ull) >> 7;
        count += (size_t)((hits * 0x0101010101010101ull) >> 56);
    }
    for (; i < n; i++) count += s[i] == ',';
    return count;
}

/* Decimal digits at s (before `end`, at most 18): their count, 0 if none. */
static unsigned plain_digits(const unsigned char *s, const unsigned char *end,
                             uint64_t *out)
{
    unsigned n = 0;
    uint64_t v = 0;
    while (s + n < end && n < 19 && s[n] >= '0' && s[n] <= '9')
        v = v * 10 + (uint64_t)(s[n++] - '0');
    *out = v;
    return n <= 18 ? n : 0;
}

/* Popcount of a 16-bit mask without a popcount instruction. */
static unsigned bits16(unsigned m)
{
    m = m - ((m >> 1) & 0x5555u);
    m = (m & 0x3333u) + ((m >> 2) & 0x3333u);
    m = (m + (m >> 4)) & 0x0F0Fu;
    return (m + (m >> 8)) & 0x1Fu;
}

/* Checks that s starts `D, D, ..., D]` (D: decimal digits, exactly one
 * ", " between items, as repr writes) and returns the number of items with
 * *out_close at the ']', or 0 when it is anything else (or has no ']').  One
 * pass, 16 bytes at a time with SSE2 byte classes: a space must follow each
 * comma, a digit each space, a digit come before the ']', and no item may
 * start with 0 and go on (Python has no leading zeros).  Long digit runs
 * are not bounded here (counts only). */
static size_t skim_tail(const unsigned char *s, size_t n, size_t i, size_t commas,
                        unsigned carry_c, unsigned carry_s, unsigned carry_z,
                        const unsigned char **out_close);

static size_t skim_list_sse2(const unsigned char *s, const unsigned char *end,
                             const unsigned char **out_close)
{
    size_t n = (size_t)(end - s), commas = 0, i = 0;
    unsigned carry_c = 0, carry_s = 1; /* last byte of the previous block; the
                                          list's first byte starts an item */
    unsigned carry_z = 0;              /* ... was a 0 starting an item */
    if (n == 0 || s[0] < '0' || s[0] > '9') return 0;
#if defined(__SSE2__)
    const __m128i vc = _mm_set1_epi8(','), vs = _mm_set1_epi8(' '), v0 = _mm_set1_epi8('0');
    const __m128i lo = _mm_set1_epi8((char)('0' - 128)), hi = _mm_set1_epi8((char)('9' - 128));
    const __m128i flip = _mm_set1_epi8((char)0x80);
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        unsigned c = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, vc));
        unsigned sp = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, vs));
        __m128i xs = _mm_xor_si128(x, flip); /* signed compare of unsigned bytes */
        unsigned nd = (unsigned)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmplt_epi8(xs, lo), _mm_cmpgt_epi8(xs, hi)));
        unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, v0));
        unsigned other = ~(c | sp | (0xFFFFu & ~nd)) & 0xFFFFu, valid = 0xFFFFu;
        unsigned k = other ? (unsigned)__builtin_ctz(other) : 16;
        if (other) { /* the first byte outside the classes must be the ']' */
            if (s[i + k] != ']') return 0;
            valid = (1u << k) - 1;
            c &= valid;
            sp &= valid;
        }
        if ((((c << 1) | carry_c) & valid) != sp) return 0;     /* ", " pairs */
        unsigned starts = ((sp << 1) | carry_s) & valid;        /* item starts */
        if (starts & nd) return 0;                              /* digit after ", " */
        unsigned lead0 = z & starts;                            /* an item starting 0 */
        if ((((lead0 << 1) | carry_z) & valid) & ~nd) return 0; /* ... and going on */
        commas += bits16(c);
        if (other) {
            if (k == 0 ? (carry_c | carry_s) : ((c | sp) >> (k - 1)) & 1) return 0;
            *out_close = s + i + k;
            return commas + 1;
        }
        carry_c = c >> 15;
        carry_s = sp >> 15;
        carry_z = lead0 >> 15;
    }
#endif
    return skim_tail(s, n, i, commas, carry_c, carry_s, carry_z, out_close);
}

/* The bytes after the last whole vector block, one at a time. */
static size_t skim_tail(const unsigned char *s, size_t n, size_t i, size_t commas,
                        unsigned carry_c, unsigned carry_s, unsigned carry_z,
                        const unsigned char **out_close)
{
    for (; i < n; i++) {
        unsigned char b = s[i];
        if (b == ']') {
            if (carry_c || carry_s) return 0; /* ends in ", " */
            *out_close = s + i;
            return commas + 1;
        }
        int is_c = b == ',', is_s = b == ' ', is_d = b >= '0' && b <= '9';
        if (!is_c && !is_s && !is_d) return 0;
        if (is_s != (int)carry_c || (carry_s && !is_d) || (carry_z && is_d)) return 0;
        carry_z = carry_s && b == '0';
        carry_c = (unsigned)is_c;
        carry_s = (unsigned)is_s;
        commas += (size_t)is_c;
    }
    return 0;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* Popcount of a 32-bit mask without a popcount instruction. */
static unsigned bits32(uint32_t m)
{
    return bits16(m & 0xFFFFu) + bits16(m >> 16);
}

/* skim_list_sse2 with 32-byte AVX2 blocks: token ids are half of a request
 * log's bytes, and this pass is the largest single cost of `scan`. */
__attribute__((target("avx2")))
static size_t skim_list_avx2(const unsigned char *s, const unsigned char *end,
                             const unsigned char **out_close)
{
    size_t n = (size_t)(end - s), commas = 0, i = 0;
    uint32_t carry_c = 0, carry_s = 1, carry_z = 0;
    if (n == 0 || s[0] < '0' || s[0] > '9') return 0;
    const __m256i vc = _mm256_set1_epi8(','), vs = _mm256_set1_epi8(' ');
    const __m256i v0 = _mm256_set1_epi8('0');
    const __m256i lo = _mm256_set1_epi8((char)('0' - 128)), hi = _mm256_set1_epi8((char)('9' - 128));
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (; i + 32 <= n; i += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        uint32_t c = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, vc));
        uint32_t sp = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, vs));
        uint32_t z = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, v0));
        __m256i xs = _mm256_xor_si256(x, flip);
        uint32_t nd = (uint32_t)_mm256_movemask_epi8(
            _mm256_or_si256(_mm256_cmpgt_epi8(lo, xs), _mm256_cmpgt_epi8(xs, hi)));
        uint32_t other = ~(c | sp | ~nd), valid = 0xFFFFFFFFu;
        unsigned k = other ? (unsigned)__builtin_ctz(other) : 32;
        if (other) {
            if (s[i + k] != ']') return 0;
            valid = k ? (0xFFFFFFFFu >> (32 - k)) : 0;
            c &= valid;
            sp &= valid;
        }
        if ((((c << 1) | carry_c) & valid) != sp) return 0;
        uint32_t starts = ((sp << 1) | carry_s) & valid;
        if (starts & nd) return 0;
        uint32_t lead0 = z & starts;
        if ((((lead0 << 1) | carry_z) & valid) & ~nd) return 0;
        commas += bits32(c);
        if (other) {
            if (k == 0 ? (carry_c | carry_s) : ((c | sp) >> (k - 1)) & 1) return 0;
            *out_close = s + i + k;
            return commas + 1;
        }
        carry_c = c >> 31;
        carry_s = sp >> 31;
        carry_z = lead0 >> 31;
    }
    return skim_tail(s, n, i, commas, carry_c, carry_s, carry_z, out_close);
}
#endif

static size_t skim_list(const unsigned char *s, const unsigned char *end,
                        const unsigned char **out_close)
{
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) return skim_list_avx2(s, end, out_close);
#endif
    return skim_list_sse2(s, end, out_close);
}

/* Token-id lists are most of a request log's bytes.  For a list of plain
 * non-negative ints written as repr() writes them, count the items first
 * (the first ']' and the commas before it), allocate the array once in the
 * arena and parse straight into it: no scratch stack, no copy.  Returns 1
 * when done; 0 leaves p untouched for the general path (any other shape). */
static int int_list_direct(py_parser *p, ld_py_value *out)
{
    const unsigned char *buf = (const unsigned char *)p->buf, *end = buf + p->len;
    const unsigned char *s = buf + p->pos + 1;
    if (s >= end || *s < '0' || *s > '9') return 0;
    const unsigned char *close = NULL;
    if (p->skim_here) {
        size_t count = skim_list(s, end, &close);
        if (count == 0 || close - s < 64 || count > UINT32_MAX || p->depth >= p->max_depth)
            return 0; /* short lists: the general path is fine */
        out->kind = LD_PY_LIST;
        out->flags = LD_PY_F_MARKS_KNOWN | LD_PY_F_SKIMMED;
        out->n = (uint32_t)count;
        out->off = p->pos;
        out->u.items = NULL;
        p->pos = (size_t)(close - buf) + 1;
        return 1;
    }
    close = memchr(s, ']', (size_t)(end - s));
    if (!close || close - s < 64) return 0; /* short lists: the general path is fine */
    size_t n = count_commas(s, (size_t)(close - s)) + 1;
    if (n > UINT32_MAX || p->depth >= p->max_depth) return 0;
    ld_py_value *items = ld_arena_alloc(p->arena, n * sizeof *items);
    if (!items) return 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t v = 0;
        unsigned d = s + 8 <= end ? swar_digits(s, &v) : 0;
        if (d == 0 || d == 8) d = plain_digits(s, close, &v);
        if (d == 0 || (s[0] == '0' && d > 1)) return 0;
        items[k] = (ld_py_value){ LD_PY_INT, 0, 0, (uint64_t)(s - buf), { .i = (int64_t)v } };
        s += d;
        if (k + 1 == n) break;
        if (s + 2 > close || s[0] != ',' || s[1] != ' ') return 0;
        s += 2;
    }
    if (s != close) return 0;
    out->kind = LD_PY_LIST;
    out->flags = LD_PY_F_MARKS_KNOWN;
    out->n = (uint32_t)n;
    out->off = p->pos;
    out->u.items = items;
    p->pos = (size_t)(close - buf) + 1;
    return 1;
}

static ld_status parse_list_plain(py_parser *p, ld_py_value *out)
{
    if (int_list_direct(p, out)) return LD_OK;
    size_t start = p->pos, base = p->sp;
    LD_TRY(enter(p, start));
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->buf[p->pos] == ']') {
        p->pos++;
    } else {
        ld_py_value v;
        LD_TRY(parse_value(p, &v));
        LD_TRY(push(p, &v));
        LD_TRY(parse_rest(p, ']', "',' or ']' after list item"));
    }
    return make_container(p, out, LD_PY_LIST, start, base);
}

static ld_status parse_list(py_parser *p, ld_py_value *out)
{
    LD_TRY(parse_list_plain(p, out));
    int found;
    LD_TRY(marker_follows(p, "[", &found));
    if (!found) return LD_OK;
    ld_py_value head = *out, tail;
    p->pos += 5;
    LD_TRY(parse_list_plain(p, &tail));
    return make_trunc(p, out, &head, &tail);
}

/* `()` empty tuple, `(x)` grouping (Python's meaning), `(x,)`, `(x, y)`. */
static ld_status parse_paren(py_parser *p, ld_py_value *out)
{
    size_t start = p->pos, base = p->sp;
    LD_TRY(enter(p, start));
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->buf[p->pos] == ')') {
        p->pos++;
        return make_container(p, out, LD_PY_TUPLE, start, base);
    }
    ld_py_value v;
    LD_TRY(parse_value(p, &v));
    skip_ws(p);
    if (p->pos < p->len && p->buf[p->pos] == ')') {
        p->pos++;
        p->depth--;
        *out = v;
        return LD_OK;
    }
    LD_TRY(push(p, &v));
    LD_TRY(parse_rest(p, ')', "',' or ')' after tuple item"));
    return make_container(p, out, LD_PY_TUPLE, start, base);
}

/* A tuple field longer than the limit is cut like a list: `(..) ... (..)`. */
static ld_status parse_paren_or_trunc(py_parser *p, ld_py_value *out)
{
    LD_TRY(parse_paren(p, out));
    if (out->kind != LD_PY_TUPLE) return LD_OK;
    int found;
    LD_TRY(marker_follows(p, "(", &found));
    if (!found) return LD_OK;
    ld_py_value head = *out, tail;
    p->pos += 5;
    LD_TRY(parse_paren(p, &tail));
    if (tail.kind != LD_PY_TUPLE)
        return LD_FAIL(p->err, LD_ERR_SYNTAX, tail.off,
                       "expected a tuple after the ' ... ' truncation marker");
    return make_trunc(p, out, &head, &tail);
}

/* Dict entries after the first key is pushed: `: value (, key: value)*`. */
/* Token-id fields are the only ones skimmed under LD_PYLIT_SKIM_INT_LISTS:
 * an int list anywhere else (tool-call arguments, logit_bias, ...) stays
 * whole, since callers may print it back. */
static int is_token_id_key(const char *k, size_t n)
{
    static const char *const names[] = { "input_ids", "output_ids", "prompt_token_ids",
                                         "output_token_ids", "token_ids" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && memcmp(names[i], k, n) == 0) return 1;
    return 0;
}

/* Parses the value of key / argument k[0..n): skimming allowed only below
 * a token-id key (nested batch lists included). */
static ld_status value_under(py_parser *p, const char *k, size_t n, ld_py_value *v)
{
    int saved = p->skim_here;
    p->skim_here = p->skim_ints && is_token_id_key(k, n);
    ld_status st = parse_value(p, v);
    p->skim_here = saved;
    return st;
}

/* The value of the dict entry whose key is on top of the stack. */
static ld_status dict_value(py_parser *p, ld_py_value *v)
{
    const ld_py_value *k = &p->stk[p->sp - 1];
    if (k->kind == LD_PY_STR) return value_under(p, k->u.raw, k->n, v);
    return value_under(p, "", 0, v);
}

static ld_status parse_dict_rest(py_parser *p)
{
    for (;;) {
        ld_py_value v;
        p->pos++; /* the ':' checked by the caller */
        LD_TRY(dict_value(p, &v));
        LD_TRY(push(p, &v));
        skip_ws(p);
        if (p->pos >= p->len) return eof_err(p, "',' or '}' after dict value");
        char c = p->buf[p->pos++];
        if (c == '}') return LD_OK;
        if (c != ',') return bad_byte(p, p->pos - 1, "',' or '}' after dict value");
        skip_ws(p);
        if (p->pos < p->len && p->buf[p->pos] == '}') {
            p->pos++;
            return LD_OK;
        }
        LD_TRY(parse_value(p, &v));
        LD_TRY(push(p, &v));
        skip_ws(p);
        if (p->pos >= p->len) return eof_err(p, "':' after dict key");
        if (p->buf[p->pos] != ':') return bad_byte(p, p->pos, "':' after dict key");
    }
}

/* `{}` is an empty dict, `{k: v, ...}` a dict, `{a, b}` a set. */
static ld_status parse_brace(py_parser *p, ld_py_value *out)
{
    size_t start = p->pos, base = p->sp;
    LD_TRY(enter(p, start));
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->buf[p->pos] == '}') {
        p->pos++;
        return make_container(p, out, LD_PY_DICT, start, base);
    }
    ld_py_value v;
    LD_TRY(parse_value(p, &v));
    LD_TRY(push(p, &v));
    skip_ws(p);
    if (p->pos >= p->len) return eof_err(p, "':', ',' or '}' after the first item");
    if (p->buf[p->pos] == ':') {
        LD_TRY(parse_dict_rest(p));
        return make_container(p, out, LD_PY_DICT, start, base);
    }
    LD_TRY(parse_rest(p, '}', "',' or '}' after set item"));
    return make_container(p, out, LD_PY_SET, start, base);
}

/* ------------------------------------------------------------ <...> */

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 19) return 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit((unsigned char)s[i])) return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    *out = v;
    return 1;
}

/* Matches `KEY: N chars, blake2b=HEX` from the end, so a key containing
 * ':' still works.  Returns 0 when `s` is some other opaque repr. */
static int match_abbrev(const char *s, size_t n, ld_py_abbrev *ab)
{
    static const char mid[] = " chars, blake2b=";
    size_t h = n;
    while (h > 0 && s[h - 1] && strchr("0123456789abcdef", s[h - 1])) h--;
    size_t ml = sizeof mid - 1;
    if (h == n || h < ml || memcmp(s + h - ml, mid, ml) != 0) return 0;
    size_t de = h - ml, ds = de;
    while (ds > 0 && is_digit((unsigned char)s[ds - 1])) ds--;
    if (ds < 3 || s[ds - 1] != ' ' || s[ds - 2] != ':') return 0;
    if (!parse_u64(s + ds, de - ds, &ab->n_chars)) return 0;
    ab->key = s;
    ab->key_len = (uint32_t)(ds - 2);
    ab->digest = s + h;
    ab->digest_len = (uint32_t)(n - h);
    return 1;
}

/* `<...>` with balanced angle brackets: an object repr or the abbreviation
 * marker. */
static ld_status parse_angle(py_parser *p, ld_py_value *out)
{
    size_t start = p->pos, i = start + 1, level = 1;
    for (; i < p->len; i++) {
        char c = p->buf[i];
        if (c == '<') level++;
        else if (c == '>' && --level == 0) break;
    }
    if (i >= p->len)
        return LD_FAIL(p->err, LD_ERR_TRUNCATED, p->len,
                       "unterminated '<...>' starting at byte %zu", start);
    const char *s = p->buf + start + 1;
    size_t n = i - start - 1;
    if (n > UINT32_MAX)
        return LD_FAIL(p->err, LD_ERR_LIMIT, start, "'<...>' longer than 4 GiB");
    p->pos = i + 1;
    out->off = start;
    out->flags = 0;
    ld_py_abbrev ab;
    if (match_abbrev(s, n, &ab)) {
        ld_py_abbrev *a = ld_arena_alloc(p->arena, sizeof *a);
        if (!a) return nomem(p, sizeof *a);
        *a = ab;
        p->n_markers++;
        out->kind = LD_PY_ABBREV;
        out->n = 0;
        out->u.abbrev = a;
        return LD_OK;
    }
    out->kind = LD_PY_OPAQUE;
    out->n = (uint32_t)n;
    out->u.raw = s;
    return LD_OK;
}

static ld_status parse_ellipsis(py_parser *p, ld_py_value *out)
{
    size_t rest = p->len - p->pos;
    if (rest >= 3 && memcmp(p->buf + p->pos, "...", 3) == 0) {
        p->n_markers++;
        out->kind = LD_PY_ELLIPSIS;
        out->flags = 0;
        out->n = 0;
        out->off = p->pos;
        out->u.raw = NULL;
        p->pos += 3;
        return LD_OK;
    }
    if (rest < 3 && memcmp(p->buf + p->pos, "...", rest) == 0)
        return eof_err(p, "'...'");
    return bad_byte(p, p->pos, "a value");
}

/* ------------------------------------------------------------ calls */

/* Scratch-stack marker for an argument name (NULL raw = positional). */
static ld_status push_arg_name(py_parser *p, const char *name, size_t n)
{
    ld_py_value m;
    m.kind = LD_PY_NAME;
    m.flags = 0;
    m.n = (uint32_t)n;
    m.off = 0;
    m.u.raw = name;
    return push(p, &m);
}

/* One argument: `name=value` or a positional value.  A name that runs to
 * the end of the input is reported as truncated (the `=` was cut off). */
static ld_status parse_arg(py_parser *p, int need_name)
{
    size_t i = p->pos;
    if (i < p->len && is_ident_start((unsigned char)p->buf[i])) {
        while (i < p->len && is_ident_char((unsigned char)p->buf[i])) i++;
        size_t e = i;
        while (i < p->len && p->buf[i] == ' ') i++;
        if (i < p->len && p->buf[i] == '=' &&
            (i + 1 >= p->len || p->buf[i + 1] != '=')) {
            const char *name = p->buf + p->pos;
            LD_TRY(push_arg_name(p, name, e - p->pos));
            p->pos = i + 1;
            ld_py_value v;
            LD_TRY(value_under(p, name, e - (size_t)(name - p->buf), &v));
            return push(p, &v);
        }
        if (need_name && i >= p->len) return eof_err(p, "'=' after argument name");
    }
    if (need_name) {
        if (p->pos >= p->len) return eof_err(p, "a keyword argument");
        return bad_byte(p, p->pos, "a keyword argument 'name=value'");
    }
    LD_TRY(push_arg_name(p, NULL, 0));
    ld_py_value v;
    LD_TRY(parse_value(p, &v));
    return push(p, &v);
}

/* Builds the ld_py_call from (name, value) pairs on the scratch stack with
 * one arena allocation: call header, args, name pointers, name lengths. */
static ld_status make_call(py_parser *p, ld_py_value *out, size_t start,
                           size_t base, const char *name, size_t name_len)
{
    size_t n = (p->sp - base) / 2;
    size_t bytes = sizeof(ld_py_call) + n * (sizeof(ld_py_value) +
                   sizeof(const char *) + sizeof(uint32_t));
    ld_py_call *c = ld_arena_alloc(p->arena, bytes);
    if (!c) return nomem(p, bytes);
    c->name = name;
    c->name_len = (uint32_t)name_len;
    c->n_args = (uint32_t)n;
    c->args = (ld_py_value *)(c + 1);
    c->arg_names = (const char **)(c->args + n);
    c->arg_name_lens = (uint32_t *)(c->arg_names + n);
    for (size_t k = 0; k < n; k++) {
        const ld_py_value *m = &p->stk[base + 2 * k];
        c->arg_names[k] = m->u.raw;
        c->arg_name_lens[k] = m->n;
        c->args[k] = p->stk[base + 2 * k + 1];
    }
    out->flags = marks_of_children(p, base);
    p->sp = base;
    out->kind = LD_PY_CALL;
    out->n = (uint32_t)n;
    out->off = start;
    out->u.call = c;
    return LD_OK;
}

/* `Name(args)` with p->pos on the '('. */
static ld_status parse_call(py_parser *p, ld_py_value *out, size_t start,
                            size_t name_len)
{
    size_t base = p->sp;
    LD_TRY(enter(p, p->pos));
    p->pos++;
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len) return eof_err(p, "an argument or ')'");
        if (p->buf[p->pos] == ')') break;
        LD_TRY(parse_arg(p, 0));
        skip_ws(p);
        if (p->pos >= p->len) return eof_err(p, "',' or ')' after argument");
        if (p->buf[p->pos] == ')') break;
        if (p->buf[p->pos] != ',')
            return bad_byte(p, p->pos, "',' or ')' after argument");
        p->pos++;
    }
    p->pos++;
    p->depth--;
    return make_call(p, out, start, base, p->buf + start, name_len);
}

/* ------------------------------------------------------------ words */

static int is_str_prefix(const char *w, size_t n, ld_py_kind *kind,
                         unsigned *flags)
{
    *kind = LD_PY_STR;
    *flags = 0;
    if (n == 0 || n > 2) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = (char)(w[i] | 0x20);
        if (c == 'b' && *kind != LD_PY_BYTES) *kind = LD_PY_BYTES;
        else if (c == 'r' && !(*flags & LD_PY_F_RAWSTR)) *flags |= LD_PY_F_RAWSTR;
        else if (c == 'u' && n == 1) *flags |= LD_PY_F_UPREFIX;
        else return 0;
    }
    return 1;
}

static void set_simple(ld_py_value *out, ld_py_kind kind, size_t start, int64_t i)
{
    out->kind = (uint8_t)kind;
    out->flags = 0;
    out->n = 0;
    out->off = start;
    out->u.i = i;
}

/* Undotted keywords.  Returns 0 when `w` is not one. */
static int keyword_value(const char *w, size_t n, size_t start, ld_py_value *out)
{
    if (n == 4 && memcmp(w, "True", 4) == 0) set_simple(out, LD_PY_BOOL, start, 1);
    else if (n == 5 && memcmp(w, "False", 5) == 0) set_simple(out, LD_PY_BOOL, start, 0);
    else if (n == 4 && memcmp(w, "None", 4) == 0) set_simple(out, LD_PY_NONE, start, 0);
    else if (n == 8 && memcmp(w, "Ellipsis", 8) == 0) set_simple(out, LD_PY_ELLIPSIS, start, 0);
    else if (n == 3 && (memcmp(w, "inf", 3) == 0 || memcmp(w, "nan", 3) == 0)) {
        set_simple(out, LD_PY_FLOAT, start, 0);
        out->u.f = w[0] == 'i' ? INFINITY : NAN;
    } else return 0;
    return 1;
}

/* A word cut by the end of the input that could have been a keyword. */
static int is_cut_keyword(const char *w, size_t n)
{
    static const char *const kw[] = {"True", "False", "None", "Ellipsis",
                                     "inf", "nan"};
    for (size_t k = 0; k < sizeof kw / sizeof kw[0]; k++)
        if (n < strlen(kw[k]) && memcmp(w, kw[k], n) == 0) return 1;
    return 0;
}

/* Identifier, dotted name, keyword, string prefix or call. */
static ld_status parse_word(py_parser *p, ld_py_value *out)
{
    size_t start = p->pos, i = start;
    const char *b = p->buf;
    int dotted = 0;
    for (;;) {
        while (i < p->len && is_ident_char((unsigned char)b[i])) i++;
        if (i >= p->len || b[i] != '.') break;
        if (i + 1 >= p->len) return eof_err(p, "a name after '.'");
        if (!is_ident_start((unsigned char)b[i + 1])) break;
        dotted = 1;
        i++;
    }
    size_t n = i - start;
    p->pos = i;
    ld_py_kind kind;
    unsigned flags;
    if (i < p->len && (b[i] == '\'' || b[i] == '"') && !dotted &&
        is_str_prefix(b + start, n, &kind, &flags))
        return parse_string(p, out, start, kind, flags);
    if (i < p->len && b[i] == '(') return parse_call(p, out, start, n);
    if (!dotted && keyword_value(b + start, n, start, out)) return LD_OK;
    if (i >= p->len && !dotted && is_cut_keyword(b + start, n))
        return eof_err(p, "a keyword");
    if (n > UINT32_MAX)
        return LD_FAIL(p->err, LD_ERR_LIMIT, start, "name longer than 4 GiB");
    out->kind = LD_PY_NAME;
    out->flags = 0;
    out->n = (uint32_t)n;
    out->off = start;
    out->u.raw = b + start;
    return LD_OK;
}

/* ------------------------------------------------------------ dispatch */

static ld_status parse_value(py_parser *p, ld_py_value *out)
{
    skip_ws(p);
    if (p->pos >= p->len) return eof_err(p, "a value");
    unsigned char c = (unsigned char)p->buf[p->pos];
    switch (c) {
    case '\'':
    case '"': return parse_string(p, out, p->pos, LD_PY_STR, 0);
    case '[': return parse_list(p, out);
    case '(': return parse_paren_or_trunc(p, out);
    case '{': return parse_brace(p, out);
    case '<': return parse_angle(p, out);
    case '.': return parse_ellipsis(p, out);
    case '-':
    case '+': return parse_number(p, out);
    default: break;
    }
    if (is_digit(c)) {
        if (try_small_int(p, out)) return LD_OK;
        return parse_number(p, out);
    }
    if (is_ident_start(c)) return parse_word(p, out);
    return bad_byte(p, p->pos, "a value");
}

static void parser_init(py_parser *p, const char *buf, size_t len,
                        const ld_pylit_limits *limits, ld_arena *arena,
                        ld_error *err)
{
    memset(p, 0, sizeof *p);
    p->buf = buf;
    p->len = buf ? len : 0;
    p->arena = arena;
    p->err = err;
    p->max_depth = limits && limits->max_depth ? limits->max_depth : PY_DEFAULT_DEPTH;
    if (p->max_depth > PY_HARD_DEPTH) p->max_depth = PY_HARD_DEPTH;
    p->max_digits = limits && limits->max_digits ? limits->max_digits : PY_DEFAULT_DIGITS;
    p->skim_ints = limits && (limits->flags & LD_PYLIT_SKIM_INT_LISTS);
    p->skim_here = p->skim_ints; /* the top-level value itself */
}

static ld_status finish(py_parser *p, ld_status st, const ld_py_value *v,
                        ld_py_value **out)
{
    free(p->stk);
    p->stk = NULL;
    if (st != LD_OK) return st;
    ld_py_value *r = ld_arena_alloc(p->arena, sizeof *r);
    if (!r) return nomem(p, sizeof *r);
    *r = *v;
    *out = r;
    return LD_OK;
}

ld_status ld_pylit_parse(const char *buf, size_t len, unsigned flags,
                         const ld_pylit_limits *limits, ld_arena *arena,
                         ld_py_value **out, size_t *out_end, ld_error *err)
{
    py_parser p;
    ld_py_value v;
    if (out) *out = NULL;
    if (!out || !arena || (!buf && len))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ld_pylit_parse: NULL argument");
    parser_init(&p, buf, len, limits, arena, err);
    ld_status st = parse_value(&p, &v);
    if (st == LD_OK && (flags & LD_PYLIT_WHOLE)) {
        size_t end = p.pos;
        skip_ws(&p);
        if (p.pos < p.len) st = bad_byte(&p, p.pos, "the end of the input after the value");
        p.pos = end;
    }
    if (st == LD_OK && out_end) *out_end = p.pos;
    return finish(&p, st, &v, out);
}

/* kwargs body: `name=value (, name=value)*` to the end of the input.  A
 * comma followed by nothing means the line was cut. */
static ld_status parse_kwargs_body(py_parser *p, ld_py_value *out)
{
    size_t base = p->sp;
    skip_ws(p);
    while (p->pos < p->len) {
        LD_TRY(parse_arg(p, 1));
        skip_ws(p);
        if (p->pos >= p->len) break;
        if (p->buf[p->pos] != ',')
            return bad_byte(p, p->pos, "',' or the end of the input after keyword argument");
        p->pos++;
        skip_ws(p);
        if (p->pos >= p->len) return eof_err(p, "a keyword argument after ','");
    }
    return make_call(p, out, 0, base, p->buf, 0);
}

ld_status ld_pylit_parse_kwargs(const char *buf, size_t len,
                                const ld_pylit_limits *limits, ld_arena *arena,
                                ld_py_value **out, ld_error *err)
{
    py_parser p;
    ld_py_value v;
    if (out) *out = NULL;
    if (!out || !arena || (!buf && len))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ld_pylit_parse_kwargs: NULL argument");
    parser_init(&p, buf, len, limits, arena, err);
    ld_status st = parse_kwargs_body(&p, &v);
    return finish(&p, st, &v, out);
}
