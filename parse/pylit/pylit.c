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
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pylit_internal.h"
#include "pylit_scan.h"

static ld_status parse_value(py_parser *p, ld_py_value *out);

/* ------------------------------------------------------------ strings */

/* Scans a quoted literal whose opening quote is at p->pos: only its end is
 * found here (escapes are validated and decoded by ld_py_str_decode).  A
 * short string without escapes (a key, a role) ends in the first sixteen
 * bytes; the rest go 64 bytes a step, each block's escaped bytes found at
 * once (pylit_scan.c), so a prompt's many "\n" cost no branch each. */
static ld_status parse_quoted(py_parser *p, ld_py_value *out, size_t start,
                              ld_py_kind kind, unsigned flags)
{
    char q = p->buf[p->pos];
    const char *s = p->buf + p->pos + 1;
    size_t avail = p->len - p->pos - 1, k = avail;
#if defined(__SSE2__)
    if (avail >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
            _mm_cmpeq_epi8(x, _mm_set1_epi8(q)), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
        if (m && s[__builtin_ctz(m)] == q) k = (size_t)__builtin_ctz(m);
    }
#endif
    if (k == avail) {
        int esc = 0, backslash = 0;
        k = ld_pyp_string_end(s, avail, q, &esc, &backslash);
        if (k >= avail)
            return LD_FAIL(p->err, LD_ERR_TRUNCATED, p->len,
                           "unterminated string literal starting at byte %zu",
                           start);
        if (backslash) flags |= LD_PY_F_ESCAPED;
    }
    if ((uint64_t)k > UINT32_MAX)
        return LD_FAIL(p->err, LD_ERR_LIMIT, start,
                       "string literal longer than 4 GiB");
    if (q == '"') flags |= LD_PY_F_DQUOTE;
    out->kind = (uint8_t)kind;
    out->flags = (uint8_t)flags;
    out->n = (uint32_t)k;
    out->off = start;
    out->u.raw = s;
    p->pos = (size_t)(s + k + 1 - p->buf);
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
    if (rest < 2 || at[0] != ' ' || at[1] != '.') return LD_OK; /* the common answer, at once */
    if (rest >= 6 && memcmp(at, " ... ", 5) == 0 && at[5] && strchr(opens, at[5])) {
        *found = 1;
        return LD_OK;
    }
    if (rest >= 2 && rest <= 5 && memcmp(at, " ... ", rest) == 0)
        return ld_pyp_eof_err(p, "the tail after the ' ... ' truncation marker");
    return LD_OK;
}

static ld_status make_trunc(py_parser *p, ld_py_value *out,
                            const ld_py_value *head, const ld_py_value *tail)
{
    ld_py_value *items = ld_arena_alloc(p->arena, 2 * sizeof *items);
    if (!items) return ld_pyp_nomem(p, 2 * sizeof *items);
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

/* After the first item of a list/tuple/set is pushed: `, item`* then the
 * closing byte, a trailing comma allowed as Python does. */
static ld_status parse_rest(py_parser *p, char close, const char *what)
{
    for (;;) {
        LD_TRY(ld_pyp_int_run(p, close));
        skip_ws(p);
        if (p->pos >= p->len) return ld_pyp_eof_err(p, what);
        char c = p->buf[p->pos++];
        if (c == close) return LD_OK;
        if (c != ',') return ld_pyp_bad_byte(p, p->pos - 1, what);
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

static ld_status parse_list_plain(py_parser *p, ld_py_value *out)
{
    if (ld_pyp_int_list_direct(p, out)) return LD_OK;
    size_t start = p->pos, base = p->sp;
    LD_TRY(ld_pyp_enter(p, start));
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
    if (p->json) ld_pyp_json_list_marker(p, base);
    return ld_pyp_make_container(p, out, LD_PY_LIST, start, base);
}

static ld_status parse_list(py_parser *p, ld_py_value *out)
{
    LD_TRY(parse_list_plain(p, out));
    if (p->json) return LD_OK; /* JSON marks a cut list inside it */
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
    LD_TRY(ld_pyp_enter(p, start));
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->buf[p->pos] == ')') {
        p->pos++;
        return ld_pyp_make_container(p, out, LD_PY_TUPLE, start, base);
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
    return ld_pyp_make_container(p, out, LD_PY_TUPLE, start, base);
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
    switch (n) { /* asked for every key: by length first */
    case 9: return memcmp(k, "input_ids", 9) == 0 || memcmp(k, "token_ids", 9) == 0;
    case 10: return memcmp(k, "output_ids", 10) == 0;
    case 16: return memcmp(k, "prompt_token_ids", 16) == 0 || memcmp(k, "output_token_ids", 16) == 0;
    default: return 0;
    }
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
        if (p->pos >= p->len) return ld_pyp_eof_err(p, "',' or '}' after dict value");
        char c = p->buf[p->pos++];
        if (c == '}') return LD_OK;
        if (c != ',') return ld_pyp_bad_byte(p, p->pos - 1, "',' or '}' after dict value");
        skip_ws(p);
        if (p->pos < p->len && p->buf[p->pos] == '}') {
            p->pos++;
            return LD_OK;
        }
        LD_TRY(parse_value(p, &v));
        LD_TRY(push(p, &v));
        skip_ws(p);
        if (p->pos >= p->len) return ld_pyp_eof_err(p, "':' after dict key");
        if (p->buf[p->pos] != ':') return ld_pyp_bad_byte(p, p->pos, "':' after dict key");
    }
}

/* `{}` is an empty dict, `{k: v, ...}` a dict, `{a, b}` a set. */
static ld_status parse_brace(py_parser *p, ld_py_value *out)
{
    size_t start = p->pos, base = p->sp;
    LD_TRY(ld_pyp_enter(p, start));
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->buf[p->pos] == '}') {
        p->pos++;
        return ld_pyp_make_container(p, out, LD_PY_DICT, start, base);
    }
    ld_py_value v;
    LD_TRY(parse_value(p, &v));
    LD_TRY(push(p, &v));
    skip_ws(p);
    if (p->pos >= p->len) return ld_pyp_eof_err(p, "':', ',' or '}' after the first item");
    if (p->buf[p->pos] == ':') {
        LD_TRY(parse_dict_rest(p));
        return ld_pyp_make_container(p, out, LD_PY_DICT, start, base);
    }
    if (p->json) return ld_pyp_bad_byte(p, p->pos, "':' after a JSON object's key");
    LD_TRY(parse_rest(p, '}', "',' or '}' after set item"));
    return ld_pyp_make_container(p, out, LD_PY_SET, start, base);
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
        if (!a) return ld_pyp_nomem(p, sizeof *a);
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
        return ld_pyp_eof_err(p, "'...'");
    return ld_pyp_bad_byte(p, p->pos, "a value");
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
        if (need_name && i >= p->len) return ld_pyp_eof_err(p, "'=' after argument name");
    }
    if (need_name) {
        if (p->pos >= p->len) return ld_pyp_eof_err(p, "a keyword argument");
        return ld_pyp_bad_byte(p, p->pos, "a keyword argument 'name=value'");
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
    if (!c) return ld_pyp_nomem(p, bytes);
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
    out->flags = ld_pyp_marks_of_children(p, base);
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
    LD_TRY(ld_pyp_enter(p, p->pos));
    p->pos++;
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len) return ld_pyp_eof_err(p, "an argument or ')'");
        if (p->buf[p->pos] == ')') break;
        LD_TRY(parse_arg(p, 0));
        skip_ws(p);
        if (p->pos >= p->len) return ld_pyp_eof_err(p, "',' or ')' after argument");
        if (p->buf[p->pos] == ')') break;
        if (p->buf[p->pos] != ',')
            return ld_pyp_bad_byte(p, p->pos, "',' or ')' after argument");
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
        if (i + 1 >= p->len) return ld_pyp_eof_err(p, "a name after '.'");
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
        return ld_pyp_eof_err(p, "a keyword");
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

/* A number that starts with a digit: the token-id fast path first. */
static ld_status parse_digits(py_parser *p, ld_py_value *out)
{
    if (try_small_int(p, out)) return LD_OK;
    return ld_pyp_parse_number(p, out);
}

/* JSON text: strings in double quotes, null/true/false, and no Python-only
 * syntax (tuples, sets, calls, reprs) */
static ld_status parse_json_value(py_parser *p, ld_py_value *out)
{
    unsigned char c = (unsigned char)p->buf[p->pos];
    switch (c) {
    case '"':
        LD_TRY(parse_quoted(p, out, p->pos, LD_PY_STR, LD_PY_F_JSON));
        return ld_pyp_json_cut(p, out);
    case '[': return parse_list(p, out);
    case '{': return parse_brace(p, out);
    case '-':
        if (p->pos + 1 < p->len && p->buf[p->pos + 1] == 'I') return ld_pyp_json_word(p, out);
        return ld_pyp_parse_number(p, out);
    default: break;
    }
    if (is_digit(c)) return parse_digits(p, out);
    if (is_ident_start(c)) return ld_pyp_json_word(p, out);
    return ld_pyp_bad_byte(p, p->pos, "a JSON value");
}

static ld_status parse_value(py_parser *p, ld_py_value *out)
{
    skip_ws(p);
    if (p->pos >= p->len) return ld_pyp_eof_err(p, "a value");
    if (p->json) return parse_json_value(p, out);
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
    case '+': return ld_pyp_parse_number(p, out);
    default: break;
    }
    if (is_digit(c)) return parse_digits(p, out);
    if (is_ident_start(c)) return parse_word(p, out);
    return ld_pyp_bad_byte(p, p->pos, "a value");
}

static void parser_init(py_parser *p, const char *buf, size_t len,
                        const ld_pylit_limits *limits, ld_arena *arena,
                        ld_error *err, ld_py_value *local)
{
    memset(p, 0, sizeof *p);
    p->stk = p->local = local;
    p->cap = PY_STACK_LOCAL;
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
    if (p->stk != p->local) free(p->stk);
    p->stk = NULL;
    if (st != LD_OK) return st;
    ld_py_value *r = ld_arena_alloc(p->arena, sizeof *r);
    if (!r) return ld_pyp_nomem(p, sizeof *r);
    *r = *v;
    *out = r;
    return LD_OK;
}

/* One value from buf: Python-literal syntax, or JSON (json_half > 0). */
static ld_status parse_one(const char *buf, size_t len, unsigned flags, uint32_t json_half,
                           const ld_pylit_limits *limits, ld_arena *arena, ld_py_value **out,
                           size_t *out_end, ld_error *err)
{
    py_parser p;
    ld_py_value v, local[PY_STACK_LOCAL];
    if (out) *out = NULL;
    if (!out || !arena || (!buf && len))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ld_pylit_parse: NULL argument");
    parser_init(&p, buf, len, limits, arena, err, local);
    p.json = json_half > 0;
    p.json_half = json_half;
    ld_status st = parse_value(&p, &v);
    if (st == LD_OK && (flags & LD_PYLIT_WHOLE)) {
        size_t end = p.pos;
        skip_ws(&p);
        if (p.pos < p.len) st = ld_pyp_bad_byte(&p, p.pos, "the end of the input after the value");
        p.pos = end;
    }
    if (st == LD_OK && out_end) *out_end = p.pos;
    return finish(&p, st, &v, out);
}

ld_status ld_pylit_parse(const char *buf, size_t len, unsigned flags,
                         const ld_pylit_limits *limits, ld_arena *arena,
                         ld_py_value **out, size_t *out_end, ld_error *err)
{
    return parse_one(buf, len, flags, 0, limits, arena, out, out_end, err);
}

ld_status ld_pylit_parse_json(const char *buf, size_t len, uint32_t half,
                              const ld_pylit_limits *limits, ld_arena *arena,
                              ld_py_value **out, size_t *out_end, ld_error *err)
{
    return parse_one(buf, len, 0, half ? half : 1024, limits, arena, out, out_end, err);
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
            return ld_pyp_bad_byte(p, p->pos, "',' or the end of the input after keyword argument");
        p->pos++;
        skip_ws(p);
        if (p->pos >= p->len) return ld_pyp_eof_err(p, "a keyword argument after ','");
    }
    return make_call(p, out, 0, base, p->buf, 0);
}

ld_status ld_pylit_parse_kwargs(const char *buf, size_t len,
                                const ld_pylit_limits *limits, ld_arena *arena,
                                ld_py_value **out, ld_error *err)
{
    py_parser p;
    ld_py_value v, local[PY_STACK_LOCAL];
    if (out) *out = NULL;
    if (!out || !arena || (!buf && len))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "ld_pylit_parse_kwargs: NULL argument");
    parser_init(&p, buf, len, limits, arena, err, local);
    ld_status st = parse_kwargs_body(&p, &v);
    return finish(&p, st, &v, out);
}
