/* test_pylit.c - tests for parse/pylit/pylit.c: differential tests against the
 * CPython-generated cases in testdata/parse/pylit/ (tools/gen_pylit_cases.py)
 * and unit tests for every construct, escape, marker and error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "parse/pylit/pylit.h"
#include "parse/pylit/pylit_internal.h"
#include "parse/pylit/pylit_scan.h"
#include "parse/pylit/pylit_json.h"

/* ------------------------------------------------------------ canonical form
 * Same grammar as tools/gen_pylit_cases.py (see its docstring). */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) abort();
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_hex(sbuf *b, const char *s, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        char h[2] = {digits[(unsigned char)s[i] >> 4], digits[(unsigned char)s[i] & 15]};
        sb_put(b, h, 2);
    }
}

static int canon(sbuf *b, const ld_py_value *v, ld_arena *a);

static int canon_items(sbuf *b, const char *open, const ld_py_value *items,
                       size_t n, ld_arena *a)
{
    sb_str(b, open);
    for (size_t i = 0; i < n; i++) {
        if (i) sb_str(b, ",");
        if (canon(b, &items[i], a)) return 1;
    }
    sb_str(b, "]");
    return 0;
}

static int canon_call(sbuf *b, const ld_py_call *c, ld_arena *a)
{
    sb_str(b, "C");
    sb_put(b, c->name ? c->name : "", c->name_len);
    sb_str(b, "(");
    for (uint32_t i = 0; i < c->n_args; i++) {
        if (i) sb_str(b, ",");
        if (c->arg_names[i]) sb_put(b, c->arg_names[i], c->arg_name_lens[i]);
        sb_str(b, "=");
        if (canon(b, &c->args[i], a)) return 1;
    }
    sb_str(b, ")");
    return 0;
}

static int canon_scalar(sbuf *b, const ld_py_value *v, ld_arena *a)
{
    char tmp[64];
    const char *s;
    size_t n;
    switch (v->kind) {
    case LD_PY_NONE: sb_str(b, "N"); return 0;
    case LD_PY_BOOL: sb_str(b, v->u.i ? "T" : "F"); return 0;
    case LD_PY_INT:
        if (v->flags & LD_PY_F_BIGINT) {
            sb_str(b, "i");
            sb_put(b, v->u.raw, v->n);
        } else {
            snprintf(tmp, sizeof tmp, "i%lld", (long long)v->u.i);
            sb_str(b, tmp);
        }
        return 0;
    case LD_PY_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &v->u.f, 8);
        if (isnan(v->u.f)) snprintf(tmp, sizeof tmp, "fnan");
        else snprintf(tmp, sizeof tmp, "f%016llx", (unsigned long long)bits);
        sb_str(b, tmp);
        return 0;
    }
    case LD_PY_STR:
    case LD_PY_BYTES:
        if (ld_py_str_decode(v, a, &s, &n, NULL) != LD_OK) return 1;
        sb_str(b, v->kind == LD_PY_STR ? "s" : "b");
        sb_hex(b, s, n);
        return 0;
    default: return 1;
    }
}

static int canon(sbuf *b, const ld_py_value *v, ld_arena *a)
{
    char tmp[64];
    switch (v->kind) {
    case LD_PY_LIST: return canon_items(b, "L[", v->u.items, v->n, a);
    case LD_PY_TUPLE: return canon_items(b, "U[", v->u.items, v->n, a);
    case LD_PY_SET: return canon_items(b, "S[", v->u.items, v->n, a);
    case LD_PY_TRUNC: return canon_items(b, "X[", v->u.items, 2, a);
    case LD_PY_DICT:
        sb_str(b, "D[");
        for (uint32_t i = 0; i < v->n; i++) {
            if (i) sb_str(b, ",");
            if (canon(b, &v->u.items[2 * i], a)) return 1;
            sb_str(b, ":");
            if (canon(b, &v->u.items[2 * i + 1], a)) return 1;
        }
        sb_str(b, "]");
        return 0;
    case LD_PY_CALL: return canon_call(b, v->u.call, a);
    case LD_PY_NAME:
        sb_str(b, "M");
        sb_put(b, v->u.raw, v->n);
        return 0;
    case LD_PY_OPAQUE:
        sb_str(b, "O");
        sb_hex(b, v->u.raw, v->n);
        return 0;
    case LD_PY_ELLIPSIS: sb_str(b, "E"); return 0;
    case LD_PY_ABBREV:
        sb_str(b, "A");
        sb_put(b, v->u.abbrev->key, v->u.abbrev->key_len);
        snprintf(tmp, sizeof tmp, ":%llu:", (unsigned long long)v->u.abbrev->n_chars);
        sb_str(b, tmp);
        sb_put(b, v->u.abbrev->digest, v->u.abbrev->digest_len);
        return 0;
    default: return canon_scalar(b, v, a);
    }
}

/* Decodes every string below v; nonzero when one has a bad escape. */
static int decode_all(const ld_py_value *v, ld_arena *a)
{
    const char *s;
    size_t n;
    switch (v->kind) {
    case LD_PY_STR:
    case LD_PY_BYTES: return ld_py_str_decode(v, a, &s, &n, NULL) != LD_OK;
    case LD_PY_LIST:
    case LD_PY_TUPLE:
    case LD_PY_SET:
    case LD_PY_TRUNC:
    case LD_PY_DICT: {
        size_t n_items = v->kind == LD_PY_DICT ? 2 * (size_t)v->n : v->n;
        for (size_t i = 0; i < n_items; i++)
            if (decode_all(&v->u.items[i], a)) return 1;
        return 0;
    }
    case LD_PY_CALL:
        for (uint32_t i = 0; i < v->u.call->n_args; i++)
            if (decode_all(&v->u.call->args[i], a)) return 1;
        return 0;
    default: return 0;
    }
}

/* ------------------------------------------------------------ helpers */

static ld_arena g_arena;

static ld_status parse_whole(const char *s, size_t n, ld_py_value **out, ld_error *err)
{
    ld_arena_reset(&g_arena);
    ld_error_clear(err);
    size_t end = 0;
    return ld_pylit_parse(s, n, LD_PYLIT_WHOLE, NULL, &g_arena, out, &end, err);
}

/* Parses `text` whole and returns its canonical form in a static buffer,
 * or "ERR<code>@<offset>". */
static const char *canon_of(const char *text)
{
    static sbuf b;
    ld_py_value *v;
    ld_error err;
    b.n = 0;
    sb_str(&b, "");
    ld_status st = parse_whole(text, strlen(text), &v, &err);
    if (st != LD_OK) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "ERR%d@%llu", (int)st, (unsigned long long)err.offset);
        sb_str(&b, tmp);
        return b.p;
    }
    if (canon(&b, v, &g_arena)) sb_str(&b, "<decode error>");
    return b.p;
}

/* The decoded text of a STR/BYTES value, in the test arena. */
static int decoded_is(const ld_py_value *v, const char *want, size_t want_len)
{
    const char *s;
    size_t n;
    if (ld_py_str_decode(v, &g_arena, &s, &n, NULL) != LD_OK) return 0;
    return n == want_len && memcmp(s, want, n) == 0;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) p[n] = '\0';
    *len = (size_t)n;
    return p;
}

/* Runs fn(left, right_text, right_len) on every `left<TAB>right` line. */
typedef int (*line_fn)(const char *left, size_t left_len, const char *text,
                       size_t text_len, int lineno);

static int for_each_case(const char *name, line_fn fn, int *n_cases)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/parse/pylit/%s", LD_TESTDATA_DIR, name);
    char *data = read_file(path, &len);
    if (!data) {
        fprintf(stderr, "  cannot read %s\n", path);
        return 1;
    }
    int fails = 0, lineno = 0;
    *n_cases = 0;
    for (char *p = data, *e; p < data + len; p = e + 1) {
        e = memchr(p, '\n', (size_t)(data + len - p));
        if (!e) e = data + len;
        lineno++;
        if (*p == '#' || e == p) continue;
        char *tab = memchr(p, '\t', (size_t)(e - p));
        if (!tab) { fails++; continue; }
        (*n_cases)++;
        /* copy the text to its own exact-size block so ASan catches any
         * read past the end (the parser must not rely on a terminator) */
        size_t tn = (size_t)(e - tab - 1);
        char *t = malloc(tn ? tn : 1);
        memcpy(t, tab + 1, tn);
        if (fn(p, (size_t)(tab - p), t, tn, lineno)) fails++;
        free(t);
        if (fails > 10) break;
    }
    free(data);
    return fails;
}

/* v's canonical form against want; 1 (said) when they differ */
static int canon_differs(const ld_py_value *v, const char *want, size_t want_len, int lineno)
{
    static sbuf b;
    b.n = 0;
    sb_str(&b, "");
    if (canon(&b, v, &g_arena) || b.n != want_len || memcmp(b.p, want, want_len)) {
        fprintf(stderr, "  line %d: canonical form differs\n   want %.*s\n   got  %s\n",
                lineno, (int)want_len, want, b.p);
        return 1;
    }
    return 0;
}

static int check_positive(const char *want, size_t want_len, const char *text,
                          size_t n, int lineno)
{
    ld_py_value *v;
    ld_error err;
    ld_status st = parse_whole(text, n, &v, &err);
    if (st != LD_OK) {
        fprintf(stderr, "  line %d: error %d at %llu: %s\n", lineno, (int)st,
                (unsigned long long)err.offset, err.msg);
        return 1;
    }
    return canon_differs(v, want, want_len, lineno);
}

static int check_negative(const char *kind, size_t kind_len, const char *text,
                          size_t n, int lineno)
{
    ld_py_value *v;
    ld_error err;
    ld_status st = parse_whole(text, n, &v, &err);
    if (st == LD_OK && decode_all(v, &g_arena)) return 0; /* bad escape */
    int ok = kind_len == 1 && (kind[0] == 'T' ? st == LD_ERR_TRUNCATED
                                              : st == LD_ERR_SYNTAX || st == LD_ERR_TRUNCATED);
    if (!ok)
        fprintf(stderr, "  line %d: want %.*s, got status %d (%s) for: %.*s\n", lineno,
                (int)kind_len, kind, (int)st, st ? err.msg : "ok", (int)n, text);
    if (ok && err.offset > n) {
        fprintf(stderr, "  line %d: offset %llu past the end\n", lineno,
                (unsigned long long)err.offset);
        return 1;
    }
    return !ok;
}

/* ------------------------------------------------------------ differential */

static int test_pylit_random_reprs(void)
{
    int n;
    int fails = for_each_case("y_random.txt", check_positive, &n);
    CHECK_MSG(fails == 0, "%d failing lines", fails);
    CHECK(n >= 3000);
    return 0;
}

static int test_pylit_sglang_truncation(void)
{
    int n;
    int fails = for_each_case("y_trunc.txt", check_positive, &n);
    CHECK_MSG(fails == 0, "%d failing lines", fails);
    CHECK(n >= 500);
    return 0;
}

/* JSON text (ld_pylit_parse_json, half 4): json.dumps of random values,
 * some shortened by SGLang's own JSON-mode logger first; the canonical form
 * is json.loads's (surrogate pairs joined) with SGLang's cut shapes marked */
static int check_json(const char *want, size_t want_len, const char *text, size_t n, int lineno)
{
    ld_py_value *v;
    ld_error err;
    size_t end = 0;
    ld_arena_reset(&g_arena);
    ld_error_clear(&err);
    ld_status st = ld_pylit_parse_json(text, n, 4, NULL, &g_arena, &v, &end, &err);
    if (st != LD_OK || end != n) {
        fprintf(stderr, "  line %d: status %d, end %zu of %zu: %s\n", lineno, (int)st, end, n, err.msg);
        return 1;
    }
    return canon_differs(v, want, want_len, lineno);
}

static int test_pylit_json_dumps(void)
{
    int n;
    int fails = for_each_case("y_json.txt", check_json, &n);
    CHECK_MSG(fails == 0, "%d failing lines", fails);
    CHECK(n >= 3000);
    return 0;
}

/* What JSON is not: Python's own syntax, single quotes, bare words */
static int test_pylit_json_rejects_python(void)
{
    static const char *const bad[] = {"{'a': 1}", "(1, 2)", "None", "True", "{1, 2}",
                                      "Call(x=1)", "<object>", "[1] ... [2]", "nul"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_py_value *v;
        ld_error err;
        size_t end = 0;
        ld_arena_reset(&g_arena);
        ld_status st = ld_pylit_parse_json(bad[i], strlen(bad[i]), 4, NULL, &g_arena, &v, &end, &err);
        CHECK_MSG(st != LD_OK || end < strlen(bad[i]), "accepted %s", bad[i]);
    }
    return 0;
}

static int test_pylit_rejected(void)
{
    int n;
    int fails = for_each_case("n_random.txt", check_negative, &n);
    CHECK_MSG(fails == 0, "%d failing lines", fails);
    CHECK(n >= 1000);
    return 0;
}

/* ------------------------------------------------------------ constructs */

static int test_pylit_scalars(void)
{
    CHECK_EQ_STR(canon_of("None"), "N");
    CHECK_EQ_STR(canon_of(" True "), "T");
    CHECK_EQ_STR(canon_of("False"), "F");
    CHECK_EQ_STR(canon_of("0"), "i0");
    CHECK_EQ_STR(canon_of("-42"), "i-42");
    CHECK_EQ_STR(canon_of("9223372036854775807"), "i9223372036854775807");
    CHECK_EQ_STR(canon_of("-9223372036854775808"), "i-9223372036854775808");
    CHECK_EQ_STR(canon_of("9223372036854775808"), "i9223372036854775808");
    CHECK_EQ_STR(canon_of("1e-05"), "f3ee4f8b588e368f1");
    CHECK_EQ_STR(canon_of("1.5e+300"), "f7e41eb2d66005835"); /* struct.pack('>d', 1.5e300) */
    CHECK_EQ_STR(canon_of("inf"), "f7ff0000000000000");
    CHECK_EQ_STR(canon_of("-inf"), "ffff0000000000000");
    CHECK_EQ_STR(canon_of("nan"), "fnan");
    CHECK_EQ_STR(canon_of("-0.0"), "f8000000000000000");
    CHECK_EQ_STR(canon_of("1."), "f3ff0000000000000");
    CHECK_EQ_STR(canon_of("..."), "E");
    CHECK_EQ_STR(canon_of("Ellipsis"), "E");
    CHECK_EQ_STR(canon_of("Color.RED"), "MColor.RED");
    CHECK_EQ_STR(canon_of("<function f at 0x7f>"), "O66756e6374696f6e20662061742030783766");
    return 0;
}

static int test_pylit_containers(void)
{
    CHECK_EQ_STR(canon_of("[]"), "L[]");
    CHECK_EQ_STR(canon_of("[1, [2, []], 3]"), "L[i1,L[i2,L[]],i3]");
    CHECK_EQ_STR(canon_of("[1, 2,]"), "L[i1,i2]");
    CHECK_EQ_STR(canon_of("()"), "U[]");
    CHECK_EQ_STR(canon_of("(1,)"), "U[i1]");
    CHECK_EQ_STR(canon_of("(1)"), "i1");
    CHECK_EQ_STR(canon_of("(1, 'a')"), "U[i1,s61]");
    CHECK_EQ_STR(canon_of("{}"), "D[]");
    CHECK_EQ_STR(canon_of("{1: 2, (1, 2): None, 'k': [3]}"), "D[i1:i2,U[i1,i2]:N,s6b:L[i3]]");
    CHECK_EQ_STR(canon_of("{1, 2, 'x'}"), "S[i1,i2,s78]");
    CHECK_EQ_STR(canon_of("[1, ...]"), "L[i1,E]");
    CHECK_EQ_STR(canon_of("[151644, 8948, 198, 0, 00, -5, 12345678901234567890]"),
                 "L[i151644,i8948,i198,i0,i0,i-5,i12345678901234567890]");
    return 0;
}

static int test_pylit_calls(void)
{
    CHECK_EQ_STR(canon_of("A()"), "CA()");
    CHECK_EQ_STR(canon_of("Point(1, y=2)"), "CPoint(=i1,y=i2)");
    CHECK_EQ_STR(canon_of("m.Finish(reason=Reason.STOP, x=[1], y=B(z=None))"),
                 "Cm.Finish(reason=MReason.STOP,x=L[i1],y=CB(z=N))");
    CHECK_EQ_STR(canon_of("set()"), "Cset()");
    ld_py_value *v;
    ld_error err;
    const char *t = "GenerateReqInput(rid='9f1c', text='hi', stream=False)";
    CHECK_EQ_INT(parse_whole(t, strlen(t), &v, &err), LD_OK);
    const ld_py_value *rid = ld_py_call_get(v, "rid");
    CHECK(rid && rid->kind == LD_PY_STR && decoded_is(rid, "9f1c", 4));
    CHECK(ld_py_call_get(v, "stream")->kind == LD_PY_BOOL);
    CHECK(ld_py_call_get(v, "missing") == NULL);
    CHECK(ld_py_call_get(v, "ri") == NULL);
    CHECK(ld_py_dict_get(v, "rid") == NULL);
    CHECK_EQ_INT(v->u.call->name_len, 16);
    return 0;
}

static int test_pylit_string_escapes(void)
{
    /* each escape Python's repr/str literal grammar has */
    CHECK_EQ_STR(canon_of("'\\\\ \\' \\\" \\n \\r \\t \\a \\b \\f \\v \\0'"),
                 "s5c20272022200a200d200920072008200c200b2000");
    CHECK_EQ_STR(canon_of("'\\101\\7\\377'"), "s4107c3bf");      /* octal; \377 = U+00FF */
    CHECK_EQ_STR(canon_of("'\\x41\\xe9'"), "s41c3a9");           /* \xe9 is U+00E9 in str */
    CHECK_EQ_STR(canon_of("b'\\x41\\xe9\\377'"), "b41e9ff");     /* ... and a byte in bytes */
    CHECK_EQ_STR(canon_of("'\\u20ac\\U0001f600'"), "se282acf09f9880");
    CHECK_EQ_STR(canon_of("'x\\ud800y'"), "s78eda08079");        /* lone surrogate, WTF-8 */
    CHECK_EQ_STR(canon_of("'\\ud83d\\ude00'"), "seda0bdedb880");  /* two code points, as Python */
    CHECK_EQ_STR(canon_of("'a\\\nb'"), "s6162");                 /* backslash-newline */
    CHECK_EQ_STR(canon_of("'\\q'"), "s5c71");                    /* unknown escape kept */
    CHECK_EQ_STR(canon_of("b'\\u20ac'"), "b5c7532306163");       /* no \\u in bytes */
    CHECK_EQ_STR(canon_of("\"it's\""), "s69742773");
    CHECK_EQ_STR(canon_of("r'a\\nb'"), "s615c6e62");
    CHECK_EQ_STR(canon_of("u'x'"), "s78");
    CHECK_EQ_STR(canon_of("'\xe4\xbd\xa0\xff\xfe'"), "se4bda0fffe"); /* raw UTF-8 and invalid bytes kept */
    CHECK_EQ_STR(canon_of("''"), "s");
    return 0;
}

static int test_pylit_bad_escapes(void)
{
    static const char *const bad[] = {"'\\x4'", "'\\u12'", "'\\U0011ffff'", "b'\\777'", "'ab\\x'"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_py_value *v;
        ld_error err;
        const char *s;
        size_t n;
        CHECK_EQ_INT(parse_whole(bad[i], strlen(bad[i]), &v, &err), LD_OK);
        CHECK_EQ_INT(ld_py_str_decode(v, &g_arena, &s, &n, &err), LD_ERR_SYNTAX);
    }
    /* offset of the backslash: 'ab\x' -> byte 3 in the buffer */
    ld_py_value *v;
    ld_error err;
    const char *s;
    size_t n;
    CHECK_EQ_INT(parse_whole("['ab\\x']", 8, &v, &err), LD_OK);
    CHECK_EQ_INT(ld_py_str_decode(&v->u.items[0], &g_arena, &s, &n, &err), LD_ERR_SYNTAX);
    CHECK_EQ_INT(err.offset, 4);
    CHECK_EQ_INT(parse_whole("[rb'\\x']", 8, &v, &err), LD_OK); /* raw: no escapes */
    CHECK_EQ_INT(ld_py_str_decode(&v->u.items[0], &g_arena, &s, &n, &err), LD_OK);
    /* u'...': the raw text starts two bytes after the value */
    CHECK_EQ_INT(parse_whole("[u'\\x']", 7, &v, &err), LD_OK);
    CHECK_EQ_INT(ld_py_str_decode(&v->u.items[0], &g_arena, &s, &n, &err), LD_ERR_SYNTAX);
    CHECK_EQ_INT(err.offset, 3);
    CHECK_EQ_INT(parse_whole("'\\N{DASH}'", 10, &v, &err), LD_OK);
    CHECK_EQ_INT(ld_py_str_decode(v, &g_arena, &s, &n, &err), LD_ERR_UNSUPPORTED);
    return 0;
}

static int test_pylit_zero_copy(void)
{
    ld_py_value *v;
    ld_error err;
    const char *t = "['plain', 'esc\\n']";
    const char *s;
    size_t n;
    CHECK_EQ_INT(parse_whole(t, strlen(t), &v, &err), LD_OK);
    CHECK_EQ_INT(ld_py_str_decode(&v->u.items[0], &g_arena, &s, &n, &err), LD_OK);
    CHECK(s == t + 2 && n == 5);
    CHECK(!(v->u.items[0].flags & LD_PY_F_ESCAPED));
    CHECK(v->u.items[1].flags & LD_PY_F_ESCAPED);
    CHECK_EQ_INT(ld_py_str_decode(&v->u.items[1], &g_arena, &s, &n, &err), LD_OK);
    CHECK(n == 4 && memcmp(s, "esc\n", 5) == 0); /* NUL-terminated copy */
    CHECK_EQ_INT(v->u.items[1].off, 10); /* the quote after "['plain', " */
    return 0;
}

/* ------------------------------------------------------------ markers */

static int test_pylit_truncation_markers(void)
{
    ld_py_value *v;
    ld_error err;
    const char *t = "'ABCD' ... \"MN'P\"";
    CHECK_EQ_INT(parse_whole(t, strlen(t), &v, &err), LD_OK);
    CHECK_EQ_INT(v->kind, LD_PY_TRUNC);
    CHECK(v->u.items[0].kind == LD_PY_STR && decoded_is(&v->u.items[0], "ABCD", 4));
    CHECK(v->u.items[1].kind == LD_PY_STR && decoded_is(&v->u.items[1], "MN'P", 4));
    CHECK_EQ_STR(canon_of("[0, 1] ... [8, 9]"), "X[L[i0,i1],L[i8,i9]]");
    CHECK_EQ_STR(canon_of("(0, 1) ... (8, 9)"), "X[U[i0,i1],U[i8,i9]]");
    CHECK_EQ_STR(canon_of("{'text': 'AB' ... 'YZ', 'ids': [1] ... [2]}"),
                 "D[s74657874:X[s4142,s595a],s696473:X[L[i1],L[i2]]]");
    /* not a marker: an Ellipsis list item, and the marker's dots inside a string */
    CHECK_EQ_STR(canon_of("['a', ...]"), "L[s61,E]");
    CHECK_EQ_STR(canon_of("'a ... b'"), "s61202e2e2e2062");
    /* the input ends inside or right after the marker: cut line */
    CHECK_EQ_STR(canon_of("'ABCD' .."), "ERR4@9");
    CHECK_EQ_STR(canon_of("'ABCD' ... "), "ERR4@11");
    CHECK_EQ_STR(canon_of("'ABCD' ... 'MN"), "ERR4@14");
    CHECK_EQ_STR(canon_of("[1] ... "), "ERR4@8");
    /* a marker followed by something else is a syntax error after the value */
    CHECK_EQ_STR(canon_of("'ABCD' ... x"), "ERR3@7");
    ld_py_value *w;
    CHECK_EQ_INT(parse_whole("'AB' ... \0'", 11, &w, &err), LD_ERR_SYNTAX); /* NUL is no quote */
    CHECK_EQ_INT(err.offset, 5);
    CHECK_EQ_INT(parse_whole("[1] ... \0", 9, &w, &err), LD_ERR_SYNTAX);
    return 0;
}

static int test_pylit_abbreviation_marker(void)
{
    ld_py_value *v;
    ld_error err;
    const char *t = "{'text': <text: 5120 chars, blake2b=0123456789abcdef>}";
    CHECK_EQ_INT(parse_whole(t, strlen(t), &v, &err), LD_OK);
    const ld_py_value *a = ld_py_dict_get(v, "text");
    CHECK(a && a->kind == LD_PY_ABBREV);
    CHECK_EQ_INT(a->u.abbrev->n_chars, 5120);
    CHECK(a->u.abbrev->key_len == 4 && memcmp(a->u.abbrev->key, "text", 4) == 0);
    CHECK(a->u.abbrev->digest_len == 16 && memcmp(a->u.abbrev->digest, "0123456789abcdef", 16) == 0);
    CHECK_EQ_INT(a->off, 9);
    /* near misses stay opaque reprs */
    CHECK_EQ_STR(canon_of("<text: 5 chars, blake2b=>"), "O746578743a2035206368617273"
                 "2c20626c616b6532623d");
    CHECK_EQ_STR(canon_of("<a<b>c>"), "O613c623e63");
    CHECK_EQ_STR(canon_of("<text: 5120 chars"), "ERR4@17");
    return 0;
}

/* ------------------------------------------------------------ errors */

static int check_error(const char *text, ld_status want, uint64_t off, const char *msg_part)
{
    ld_py_value *v;
    ld_error err;
    ld_status st = parse_whole(text, strlen(text), &v, &err);
    if (st != want || err.offset != off || (msg_part && !strstr(err.msg, msg_part))) {
        fprintf(stderr, "  %s: got %d at %llu (%s), want %d at %llu (%s)\n", text, (int)st,
                (unsigned long long)err.offset, err.msg, (int)want,
                (unsigned long long)off, msg_part ? msg_part : "");
        return 1;
    }
    return 0;
}

static int test_pylit_error_offsets(void)
{
    /* byte 3 is the '3' that should have been ',' or ']' */
    CHECK(!check_error("[1 3]", LD_ERR_SYNTAX, 3, "expected ',' or ']' after list item"));
    CHECK(!check_error("{1: 2 3}", LD_ERR_SYNTAX, 6, "',' or '}' after dict value"));
    CHECK(!check_error("{1: 2, 3 4}", LD_ERR_SYNTAX, 9, "':' after dict key"));
    CHECK(!check_error("(1 2)", LD_ERR_SYNTAX, 3, "',' or ')' after tuple item"));
    CHECK(!check_error("[1, @]", LD_ERR_SYNTAX, 4, "a value"));
    CHECK(!check_error("[1] x", LD_ERR_SYNTAX, 4, "end of the input"));
    CHECK(!check_error("[01]", LD_ERR_SYNTAX, 1, "leading zeros"));
    CHECK(!check_error("[1x]", LD_ERR_SYNTAX, 2, "end of the number"));
    CHECK(!check_error("[1e+]", LD_ERR_SYNTAX, 4, "exponent digit"));
    CHECK(!check_error("A(x=1 y=2)", LD_ERR_SYNTAX, 6, "',' or ')' after argument"));
    /* truncated inputs: offset is where the input ended, the message says
     * where the literal began */
    CHECK(!check_error("[1, 'abc", LD_ERR_TRUNCATED, 8, "unterminated string literal starting at byte 4"));
    CHECK(!check_error("'ab\\'", LD_ERR_TRUNCATED, 5, "starting at byte 0"));
    CHECK(!check_error("[1, 2", LD_ERR_TRUNCATED, 5, "',' or ']'"));
    CHECK(!check_error("[1, 2,", LD_ERR_TRUNCATED, 6, "a value"));
    CHECK(!check_error("{'a': ", LD_ERR_TRUNCATED, 6, NULL));
    CHECK(!check_error("{'a'", LD_ERR_TRUNCATED, 4, NULL));
    CHECK(!check_error("A(x=", LD_ERR_TRUNCATED, 4, NULL));
    CHECK(!check_error("A(x", LD_ERR_TRUNCATED, 3, NULL));
    CHECK(!check_error("[Tr", LD_ERR_TRUNCATED, 3, NULL));
    CHECK(!check_error("Tr", LD_ERR_TRUNCATED, 2, "keyword"));
    CHECK(!check_error("-", LD_ERR_TRUNCATED, 1, NULL));
    CHECK(!check_error("-in", LD_ERR_TRUNCATED, 3, NULL));
    CHECK(!check_error("1.5e", LD_ERR_TRUNCATED, 4, NULL));
    CHECK(!check_error("Color.", LD_ERR_TRUNCATED, 6, NULL));
    CHECK(!check_error("..", LD_ERR_TRUNCATED, 2, NULL));
    CHECK(!check_error("<object at", LD_ERR_TRUNCATED, 10, NULL));
    CHECK(!check_error("", LD_ERR_TRUNCATED, 0, "a value"));
    CHECK(!check_error("   ", LD_ERR_TRUNCATED, 3, "a value"));
    CHECK(!check_error("[1_000]", LD_ERR_SYNTAX, 2, "end of the number")); /* repr has no '_' */
    CHECK(!check_error("[\x01]", LD_ERR_SYNTAX, 1, "found byte 0x01"));
    CHECK(!check_error("b'a' ... b'b'", LD_ERR_SYNTAX, 5, NULL)); /* only str is cut */
    CHECK(!check_error("f'x'", LD_ERR_SYNTAX, 1, NULL));           /* no f-strings */
    CHECK(!check_error("[1, 2]]", LD_ERR_SYNTAX, 6, NULL));
    /* SGLang prints a dict key with a quote unescaped: a clean syntax error */
    CHECK(!check_error("{'it's': 1}", LD_ERR_SYNTAX, 5, "after set item"));
    return 0;
}

static int test_pylit_depth_limit(void)
{
    size_t n = 100000;
    char *s = malloc(2 * n);
    memset(s, '[', n);
    memset(s + n, ']', n);
    ld_py_value *v;
    ld_error err;
    ld_arena_reset(&g_arena);
    ld_status st = ld_pylit_parse(s, 2 * n, LD_PYLIT_WHOLE, NULL, &g_arena, &v, NULL, &err);
    CHECK_EQ_INT(st, LD_ERR_LIMIT);
    CHECK_EQ_INT(err.offset, 512); /* the 513th '[' */
    CHECK(strstr(err.msg, "nesting deeper than 512"));
    /* the same input mixing every container kind */
    for (size_t i = 0; i < n; i++) s[i] = "[({"[i % 3];
    st = ld_pylit_parse(s, n, 0, NULL, &g_arena, &v, NULL, &err);
    CHECK_EQ_INT(st, LD_ERR_LIMIT);
    /* 512 levels are fine, and a huge caller limit is clamped, not obeyed */
    memset(s, '[', 512);
    memset(s + 512, ']', 512);
    CHECK_EQ_INT(ld_pylit_parse(s, 1024, LD_PYLIT_WHOLE, NULL, &g_arena, &v, NULL, &err), LD_OK);
    memset(s, '[', n);
    memset(s + n, ']', n);
    ld_pylit_limits lim = {UINT32_MAX, 0, 0};
    CHECK_EQ_INT(ld_pylit_parse(s, 2 * n, 0, &lim, &g_arena, &v, NULL, &err), LD_ERR_LIMIT);
    lim.max_depth = 3;
    CHECK_EQ_INT(ld_pylit_parse("[[[[1]]]]", 9, 0, &lim, &g_arena, &v, NULL, &err), LD_ERR_LIMIT);
    CHECK_EQ_INT(err.offset, 3);
    free(s);
    return 0;
}

static int test_pylit_digit_limit(void)
{
    size_t n = 10000;
    char *s = malloc(n + 2);
    s[0] = '[';
    memset(s + 1, '7', n);
    s[n + 1] = ']';
    ld_py_value *v;
    ld_error err;
    ld_arena_reset(&g_arena);
    CHECK_EQ_INT(ld_pylit_parse(s, n + 2, 0, NULL, &g_arena, &v, NULL, &err), LD_ERR_LIMIT);
    CHECK_EQ_INT(err.offset, 1);
    CHECK(strstr(err.msg, "10000 digits"));
    /* 4300 digits is CPython's limit, and still fine */
    s[4301] = ']';
    CHECK_EQ_INT(ld_pylit_parse(s, 4302, 0, NULL, &g_arena, &v, NULL, &err), LD_OK);
    CHECK(v->u.items[0].flags & LD_PY_F_BIGINT);
    CHECK_EQ_INT(v->u.items[0].n, 4300);
    ld_pylit_limits lim = {0, 20, 0};
    CHECK_EQ_INT(ld_pylit_parse("-123456789012345678901", 22, 0, &lim, &g_arena, &v, NULL, &err),
                 LD_ERR_LIMIT);
    free(s);
    return 0;
}

static int test_pylit_out_end(void)
{
    ld_py_value *v;
    ld_error err;
    size_t end = 0;
    const char *t = "  [1, 2] tail";
    ld_arena_reset(&g_arena);
    CHECK_EQ_INT(ld_pylit_parse(t, strlen(t), 0, NULL, &g_arena, &v, &end, &err), LD_OK);
    CHECK_EQ_INT(end, 8);
    CHECK_EQ_INT(v->off, 2);
    t = "'a' ... 'b', x";
    CHECK_EQ_INT(ld_pylit_parse(t, strlen(t), 0, NULL, &g_arena, &v, &end, &err), LD_OK);
    CHECK_EQ_INT(end, 11);
    CHECK_EQ_INT(ld_pylit_parse(t, strlen(t), LD_PYLIT_WHOLE, NULL, &g_arena, &v, &end, &err),
                 LD_ERR_SYNTAX);
    CHECK_EQ_INT(err.offset, 11);
    return 0;
}

static int test_pylit_kwargs(void)
{
    const char *t = "obj=GenerateReqInput(rid='9f1c', text='AB' ... 'YZ', input_ids=[1, 2, 3], "
                    "sampling_params={'temperature': 0.7, 'max_new_tokens': 64}, stream=False), "
                    "headers={'x-smg-routing-key': 'abc'}, out={'text': 'Hello Bob!', "
                    "'output_ids': [9906, 14261, 0], 'meta_info': {'id': '9f1c', "
                    "'finish_reason': {'type': 'stop', 'matched': 151645}, 'e2e_latency': 0.21}}";
    ld_py_value *v;
    ld_error err;
    ld_arena_reset(&g_arena);
    CHECK_EQ_INT(ld_pylit_parse_kwargs(t, strlen(t), NULL, &g_arena, &v, &err), LD_OK);
    CHECK_EQ_INT(v->kind, LD_PY_CALL);
    CHECK_EQ_INT(v->u.call->n_args, 3);
    CHECK_EQ_INT(v->u.call->name_len, 0);
    const ld_py_value *obj = ld_py_call_get(v, "obj");
    CHECK(obj && obj->kind == LD_PY_CALL);
    CHECK(ld_py_call_get(obj, "text")->kind == LD_PY_TRUNC);
    CHECK_EQ_INT(ld_py_call_get(obj, "input_ids")->n, 3);
    const ld_py_value *sp = ld_py_call_get(obj, "sampling_params");
    CHECK(ld_py_dict_get(sp, "temperature")->u.f == 0.7);
    const ld_py_value *out = ld_py_call_get(v, "out");
    const ld_py_value *fr = ld_py_dict_get(ld_py_dict_get(out, "meta_info"), "finish_reason");
    CHECK_EQ_INT(ld_py_dict_get(fr, "matched")->u.i, 151645);
    CHECK(decoded_is(ld_py_dict_get(ld_py_call_get(v, "headers"), "x-smg-routing-key"), "abc", 3));
    /* cut lines and junk */
    static const struct { const char *s; ld_status st; uint64_t off; } bad[] = {
        {"obj=A(x=1), ou", LD_ERR_TRUNCATED, 14},
        {"obj=A(x=1),", LD_ERR_TRUNCATED, 11},
        {"obj=A(x=1", LD_ERR_TRUNCATED, 9},
        {"obj=A(x=1) out={}", LD_ERR_SYNTAX, 11},
        {"obj=1, 2", LD_ERR_SYNTAX, 7},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_status st = ld_pylit_parse_kwargs(bad[i].s, strlen(bad[i].s), NULL, &g_arena, &v, &err);
        CHECK_MSG(st == bad[i].st && err.offset == bad[i].off, "%s: %d at %llu", bad[i].s,
                  (int)st, (unsigned long long)err.offset);
    }
    CHECK_EQ_INT(ld_pylit_parse_kwargs("", 0, NULL, &g_arena, &v, &err), LD_OK);
    CHECK_EQ_INT(v->u.call->n_args, 0);
    return 0;
}

static int test_pylit_dict_get(void)
{
    ld_py_value *v;
    ld_error err;
    const char *t = "{1: 'int', 'a\\'b': 'esc', \"c\": 'dq', 'k': 'last', 'k2': None}";
    CHECK_EQ_INT(parse_whole(t, strlen(t), &v, &err), LD_OK);
    CHECK(decoded_is(ld_py_dict_get(v, "a'b"), "esc", 3));
    CHECK(decoded_is(ld_py_dict_get(v, "c"), "dq", 2));
    CHECK(decoded_is(ld_py_dict_get(v, "k"), "last", 4));
    CHECK(ld_py_dict_get(v, "k2")->kind == LD_PY_NONE);
    CHECK(ld_py_dict_get(v, "1") == NULL); /* int key is not the string '1' */
    CHECK(ld_py_dict_get(v, "") == NULL);
    CHECK(ld_py_dict_get(NULL, "k") == NULL);
    CHECK_EQ_STR(ld_py_kind_name(LD_PY_DICT), "dict");
    CHECK_EQ_STR(ld_py_kind_name(LD_PY_NONE), "NoneType");
    for (int k = LD_PY_NONE; k <= LD_PY_ABBREV; k++)
        CHECK(strcmp(ld_py_kind_name((ld_py_kind)k), "unknown") != 0);
    /* NULL arguments are a usage error, not a crash */
    ld_arena_reset(&g_arena);
    CHECK_EQ_INT(ld_pylit_parse(NULL, 3, 0, NULL, &g_arena, &v, NULL, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_pylit_parse("1", 1, 0, NULL, NULL, &v, NULL, &err), LD_ERR_USAGE);
    return 0;
}

static int test_pylit_count_chars(void)
{
    CHECK_EQ_INT(ld_utf8_count_chars("", 0), 0);
    CHECK_EQ_INT(ld_utf8_count_chars("hello, world 12345", 18), 18);
    CHECK_EQ_INT(ld_utf8_count_chars("\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80", 11), 4);
    CHECK_EQ_INT(ld_utf8_count_chars("\xed\xa0\x80", 3), 1);      /* WTF-8 surrogate */
    CHECK_EQ_INT(ld_utf8_count_chars("\xff\xfe", 2), 2);          /* invalid bytes */
    CHECK_EQ_INT(ld_utf8_count_chars("\xe4\xbd", 2), 2);          /* cut sequence */
    CHECK_EQ_INT(ld_utf8_count_chars("\xc0\x80", 2), 2);          /* overlong */
    CHECK_EQ_INT(ld_utf8_count_chars("\xf4\x90\x80\x80", 4), 4);  /* > U+10FFFF */
    CHECK_EQ_INT(ld_utf8_count_chars("abcdefgh\xc3\xa9ijklmnopq", 18), 17);
    /* a truncated half is max_length//2 code points before escaping */
    ld_py_value *v;
    ld_error err;
    const char *t = "'\\ud800\xe4\xbd\xa0\\n\\x00\xf0\x9f\x98\x80'";
    const char *s;
    size_t n;
    CHECK_EQ_INT(parse_whole(t, strlen(t), &v, &err), LD_OK);
    CHECK_EQ_INT(ld_py_str_decode(v, &g_arena, &s, &n, &err), LD_OK);
    CHECK_EQ_INT(ld_utf8_count_chars(s, n), 5);
    return 0;
}

static int test_pylit_not_nul_terminated(void)
{
    /* every prefix of a line in an exact-size block: no read past the end */
    const char *t = "obj=A(t='x\\u00e9' ... 'y', ids=[1, 22, 333] ... [4], f=1e-05, "
                    "n=None, s={1, 2}, o=<a <b>>, e=..., d=Color.RED, z=-inf)";
    size_t len = strlen(t);
    for (size_t k = 0; k <= len; k++) {
        char *b = malloc(k ? k : 1);
        memcpy(b, t, k);
        ld_py_value *v;
        ld_error err;
        ld_arena_reset(&g_arena);
        ld_status st = ld_pylit_parse_kwargs(b, k, NULL, &g_arena, &v, &err);
        if (k < len && k > 0) CHECK_MSG(st == LD_ERR_TRUNCATED || st == LD_OK, "prefix %zu: %d", k, (int)st);
        if (k == len) CHECK_EQ_INT(st, LD_OK);
        if (st == LD_OK) CHECK(!decode_all(v, &g_arena));
        free(b);
    }
    return 0;
}


/* Skimmed int lists (LD_PYLIT_SKIM_INT_LISTS): the same acceptance and the
 * same counts as the full parse; the expected count is the generator's. */
static int skim_case(const char *s, size_t n, long want_n)
{
    ld_pylit_limits skim = { 0, 0, LD_PYLIT_SKIM_INT_LISTS };
    ld_py_value *a = NULL, *b = NULL;
    ld_error ea, eb;
    size_t end;
    ld_status sa = ld_pylit_parse(s, n, LD_PYLIT_WHOLE, NULL, &g_arena, &a, &end, &ea);
    ld_status sb = ld_pylit_parse(s, n, LD_PYLIT_WHOLE, &skim, &g_arena, &b, &end, &eb);
    CHECK_EQ_INT(sa, sb);
    if (want_n < 0) {
        CHECK(sa != LD_OK);
        CHECK_EQ_INT(ea.offset, eb.offset);
        return 0;
    }
    CHECK_EQ_INT(sa, LD_OK);
    CHECK_EQ_INT(a->kind, LD_PY_LIST);
    CHECK_EQ_INT(b->kind, LD_PY_LIST);
    CHECK_EQ_INT(a->n, want_n);
    CHECK_EQ_INT(b->n, want_n);
    return 0;
}

static int test_pylit_skim_int_lists(void)
{
    static char buf[1 << 16];
    uint32_t x = 12345;
    for (int len = 1; len < 4000; len = len * 3 / 2 + 1) {
        size_t o = 0;
        buf[o++] = '[';
        for (int i = 0; i < len; i++) {
            x = x * 1103515245u + 12345u;
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%u", i ? ", " : "",
                                  (x >> 8) % (i % 7 == 0 ? 10u : 200000u));
        }
        buf[o++] = ']';
        if (skim_case(buf, o, len)) return 1;
        size_t long_list = o > 66;
        ld_pylit_limits skim = { 0, 0, LD_PYLIT_SKIM_INT_LISTS };
        ld_py_value *v;
        CHECK_EQ_INT(ld_pylit_parse(buf, o, 0, &skim, &g_arena, &v, NULL, NULL), LD_OK);
        CHECK_EQ_INT((v->flags & LD_PY_F_SKIMMED) != 0, long_list);
    }
    static const struct { const char *s; long n; } odd[] = {
        { "[1,2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]", 23 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, -22]", 22 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22 ]", 22 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,]", 22 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,  21, 22]", 22 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 1.5, 22]", 22 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, , 22]", -1 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22", -1 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21 22]", -1 },
        { "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 'a]', 2]", 22 },
        /* found by fuzz_pylit: Python has no leading zeros; 0 alone is fine */
        { "[57780, 79635, 115913, 45330, 148068, 44117, 64903, 46074, 08964935, 1628833]", -1 },
        { "[0, 79635, 115913, 45330, 148068, 44117, 64903, 46074, 0, 1628833, 0, 1, 0]", 13 },
        { "[01, 79635, 115913, 45330, 148068, 44117, 64903, 46074, 0, 1628833, 0, 1, 0]", -1 },
        { "[1, 79635, 115913, 45330, 148068, 44117, 64903, 46074, 0, 1628833, 0, 1, 00]", 13 }, /* 00 is valid */
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        if (skim_case(odd[i].s, strlen(odd[i].s), odd[i].n)) {
            fprintf(stderr, "  case %zu: %s\n", i, odd[i].s);
            return 1;
        }
    return 0;
}

/* ------------------------------------------------------------ SIMD paths
 * Each must give its portable path's answer; the inputs put every kind of
 * byte at every offset across the 16/32/64-byte blocks. */

static uint32_t g_rand = 2463534242u;
static uint32_t next_rand(void)
{
    g_rand ^= g_rand << 13;
    g_rand ^= g_rand >> 17;
    g_rand ^= g_rand << 5;
    return g_rand;
}

/* code point cp as UTF-8 (surrogates as 3-byte WTF-8) */
static size_t put_cp(char *d, uint32_t cp)
{
    if (cp < 0x80) { d[0] = (char)cp; return 1; }
    if (cp < 0x800) { d[0] = (char)(0xC0 | cp >> 6); d[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | cp >> 12);
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | cp >> 18);
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* a code point of every UTF-8 length and edge, surrogates included */
static uint32_t some_cp(void)
{
    static const uint32_t edges[] = { 0x0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xD800,
                                      0xDBFF, 0xDC00, 0xDFFF, 0xE000, 0xFFFF, 0x10000, 0x3FFFF,
                                      0x40000, 0xFFFFF, 0x100000, 0x10FFFF, 0xE9, 0x4F60, 0x1F600 };
    uint32_t r = next_rand();
    if (r % 3) return 0x20 + r % 95; /* mostly ASCII, as prompts are */
    return edges[(r >> 8) % (sizeof edges / sizeof edges[0])];
}

static int count_both(const char *s, size_t n)
{
    size_t a = ld_utf8_count_chars(s, n), b = ld_utf8_count_chars_scalar(s, n);
    if (a != b || ld_utf8_count_chars_sse2(s, n) != b || ld_utf8_count_chars_at(2, s, n) != b ||
        ld_utf8_count_chars_at(3, s, n) != b) {
        fprintf(stderr, "  count %zu vs scalar %zu for %zu bytes:", a, b, n);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %02x", (unsigned char)s[i]);
        fprintf(stderr, "\n");
        return 1;
    }
    return 0;
}

static int test_pylit_count_chars_simd(void)
{
    static char buf[512];
    /* valid text: one character a code point, whatever the offsets */
    for (int round = 0; round < 3000; round++) {
        size_t n = 0, cps = 0, want = next_rand() % 300;
        while (n < want) n += put_cp(buf + n, some_cp()), cps++;
        CHECK_EQ_INT(ld_utf8_count_chars(buf, n), cps);
        CHECK_EQ_INT(ld_utf8_count_chars_sse2(buf, n), cps);
        CHECK_EQ_INT(ld_utf8_count_chars_at(2, buf, n), cps);
        if (count_both(buf, n)) return 1;
    }
    /* one multi-byte character at every offset of ASCII text */
    static const uint32_t one[] = { 0xE9, 0x4F60, 0xD800, 0x1F600, 0x10FFFF };
    for (size_t c = 0; c < sizeof one / sizeof one[0]; c++)
        for (size_t len = 16; len < 270; len += 13)
            for (size_t at = 0; at + 4 <= len; at++) {
                memset(buf, 'a', len);
                size_t w = put_cp(buf + at, one[c]);
                CHECK_EQ_INT(ld_utf8_count_chars(buf, len), len - w + 1);
                CHECK_EQ_INT(ld_utf8_count_chars_sse2(buf, len), len - w + 1);
                CHECK_EQ_INT(ld_utf8_count_chars_at(2, buf, len), len - w + 1);
            }
    /* each byte that breaks a rule, and every cut sequence, at every offset */
    static const unsigned char odd[] = { 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
                                         0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xF8, 0xFF };
    for (size_t len = 16; len < 200; len += 7)
        for (size_t at = 0; at < len; at++)
            for (size_t k = 0; k < sizeof odd; k++) {
                size_t n = 0;
                while (n < len) n += put_cp(buf + n, some_cp());
                buf[at] = (char)odd[k];
                if (count_both(buf, n)) return 1;
                if (at + 1 < n) buf[at + 1] = (char)odd[(k * 7 + 3) % sizeof odd];
                if (count_both(buf, n)) return 1;
            }
    /* byte soup from the bytes that matter */
    for (int round = 0; round < 20000; round++) {
        size_t n = 16 + next_rand() % 280;
        for (size_t i = 0; i < n; i++) {
            uint32_t r = next_rand();
            buf[i] = (char)(r % 4 ? odd[(r >> 4) % sizeof odd] : 'a' + (r >> 4) % 26);
        }
        if (count_both(buf, n)) return 1;
    }
    return 0;
}

/* Decoding copies the text between escapes sixteen bytes a step: an
 * escape at every offset of a string, decoded to what it stands for. */
static int test_pylit_decode_every_offset(void)
{
    static const struct { const char *raw, *dec; } esc[] = {
        { "\\n", "\n" }, { "\\\\", "\\" }, { "\\'", "'" }, { "\\x41", "A" },
        { "\\u00e9", "\xc3\xa9" }, { "\\U0001F600", "\xf0\x9f\x98\x80" }, { "\\101", "A" },
    };
    char raw[200], want[200];
    for (size_t e = 0; e < sizeof esc / sizeof esc[0]; e++)
        for (size_t len = 0; len < 90; len++)
            for (size_t at = 0; at <= len; at++) {
                size_t er = strlen(esc[e].raw), ed = strlen(esc[e].dec), r = 0, w = 0;
                raw[r++] = '\'';
                for (size_t i = 0; i < len; i++) {
                    if (i == at) {
                        memcpy(raw + r, esc[e].raw, er), r += er;
                        memcpy(want + w, esc[e].dec, ed), w += ed;
                    }
                    raw[r++] = want[w++] = (char)('a' + i % 26);
                }
                if (at == len) {
                    memcpy(raw + r, esc[e].raw, er), r += er;
                    memcpy(want + w, esc[e].dec, ed), w += ed;
                }
                raw[r++] = '\'';
                ld_py_value *v;
                ld_error err;
                const char *s;
                size_t n;
                CHECK_EQ_INT(parse_whole(raw, r, &v, &err), LD_OK);
                CHECK_EQ_INT(ld_py_str_decode(v, &g_arena, &s, &n, &err), LD_OK);
                CHECK_EQ_INT(n, w);
                CHECK(memcmp(s, want, w) == 0);
            }
    return 0;
}

/* "..." found as memmem finds it */
static int test_pylit_has_dots(void)
{
    char buf[200];
    for (size_t n = 0; n < sizeof buf; n++)
        for (size_t at = 0; at <= n; at++)
            for (int w = 1; w <= 3; w++) {
                for (size_t i = 0; i < n; i++) buf[i] = (char)(i % 2 ? '.' : 'a');
                for (int k = 0; k < w && at + (size_t)k < n; k++) buf[at + (size_t)k] = '.';
                int want = 0;
                for (size_t i = 0; i + 3 <= n; i++)
                    if (buf[i] == '.' && buf[i + 1] == '.' && buf[i + 2] == '.') want = 1;
                CHECK_EQ_INT(ld_pyp_has_dots(buf, n), want);
                for (int level = 0; level <= 3; level++) CHECK_EQ_INT(ld_pyp_has_dots_at(level, buf, n), want);
            }
    return 0;
}

/* A skimmed list and the full parse accept the same lists with the same
 * counts, and reject the same ones at the same byte, whatever byte breaks
 * the shape and wherever it stands in the blocks. */
static int skim_same(const char *s, size_t n)
{
    ld_pylit_limits skim = { 0, 0, LD_PYLIT_SKIM_INT_LISTS };
    ld_py_value *a = NULL, *b = NULL;
    ld_error ea, eb;
    size_t end;
    ld_status sa = ld_pylit_parse(s, n, LD_PYLIT_WHOLE, NULL, &g_arena, &a, &end, &ea);
    ld_status sb = ld_pylit_parse(s, n, LD_PYLIT_WHOLE, &skim, &g_arena, &b, &end, &eb);
    CHECK_EQ_INT(sa, sb);
    if (sa != LD_OK) {
        CHECK_EQ_INT(ea.offset, eb.offset);
        return 0;
    }
    CHECK_EQ_INT(a->kind, b->kind);
    CHECK_EQ_INT(a->n, b->n);
    return 0;
}

/* every block reader skims as the byte-by-byte one does */
static int skim_levels(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s + 1, *end = (const unsigned char *)s + n;
    const unsigned char *c0 = NULL;
    size_t want = ld_pyp_skim_list_at(0, u, end, &c0);
    for (int level = 1; level <= 3; level++) {
        const unsigned char *c = NULL;
        CHECK_EQ_INT(ld_pyp_skim_list_at(level, u, end, &c), want);
        if (want) CHECK(c == c0);
    }
    return 0;
}

static int test_pylit_skim_every_offset(void)
{
    static const char subst[] = { 'x', ' ', ',', ']', '0', '5', '-', '.', '[' };
    char list[300], buf[300];
    size_t n = 0;
    list[n++] = '[';
    for (int i = 0; n < 260; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", i ? ", " : "", (i * 7919) % 100003);
    list[n++] = ']';
    for (size_t at = 1; at < n; at++)
        for (size_t k = 0; k < sizeof subst; k++) {
            memcpy(buf, list, n);
            buf[at] = subst[k];
            if (skim_same(buf, n)) {
                fprintf(stderr, "  byte %zu set to '%c'\n", at, subst[k]);
                return 1;
            }
            if (skim_same(buf, at + 1)) return 1; /* and the list cut right after it */
            if (skim_levels(buf, n) || skim_levels(buf, at + 1)) {
                fprintf(stderr, "  byte %zu set to '%c'\n", at, subst[k]);
                return 1;
            }
        }
    return 0;
}

/* ------------------------------------------------------------ block scans
 * The 64-byte block kernels of pylit_scan.c at every level the machine
 * has, against byte-by-byte references written here. */

/* A string's text made of tokens: plain bytes (quotes, letters, UTF-8) and
 * escapes of every kind; tok[i] = 1 where a token starts, kind[i] its kind
 * (0 plain, 1 one-byte escape, 2 another escape), dec/dn what it decodes
 * to.  Backslashes are frequent, so that runs of them cross blocks. */
typedef struct esc_text {
    char raw[700], dec[700];
    unsigned char tok[701], kind[701];
    size_t dpos[701]; /* at a token's start: the bytes decoded before it */
    size_t n, dn;
} esc_text;

static void esc_text_make(esc_text *t, size_t want)
{
    static const struct { const char *raw, *dec; size_t dl; int kind; } toks[] = {
        { "a", "a", 1, 0 }, { "'", "'", 1, 0 }, { "\"", "\"", 1, 0 }, { " ", " ", 1, 0 },
        { "\xc3\xa9", "\xc3\xa9", 2, 0 }, { "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", 4, 0 }, { "z", "z", 1, 0 },
        { "\\n", "\n", 1, 1 }, { "\\\\", "\\", 1, 1 }, { "\\'", "'", 1, 1 }, { "\\\"", "\"", 1, 1 },
        { "\\t", "\t", 1, 1 }, { "\\a", "\a", 1, 1 }, { "\\b", "\b", 1, 1 }, { "\\f", "\f", 1, 1 },
        { "\\r", "\r", 1, 1 }, { "\\v", "\v", 1, 1 },
        { "\\x41", "A", 1, 2 }, { "\\u00e9", "\xc3\xa9", 2, 2 }, { "\\101", "A", 1, 2 }, { "\\\n", "", 0, 2 },
        { "\\q", "\\q", 2, 2 }, { "\\0", "\0", 1, 2 }, { "\\U0001F600", "\xf0\x9f\x98\x80", 4, 2 },
        /* halves of a character, which a backslash-newline between them joins */
        { "\xc3", "\xc3", 1, 0 }, { "\xa9", "\xa9", 1, 0 }, { "\\\n", "", 0, 2 },
    };
    size_t nt = sizeof toks / sizeof toks[0];
    uint32_t mix = next_rand();
    t->n = t->dn = 0;
    memset(t->tok, 0, sizeof t->tok);
    while (t->n < want) {
        uint32_t r = next_rand();
        size_t k = (mix & 1) && r % 8 ? (r >> 3) % 17 : (r >> 3) % nt; /* some texts one-byte escapes only */
        size_t rl = strlen(toks[k].raw);
        if (t->n + rl > sizeof t->raw - 1) break;
        t->tok[t->n] = 1;
        t->kind[t->n] = (unsigned char)toks[k].kind;
        t->dpos[t->n] = t->dn;
        memcpy(t->raw + t->n, toks[k].raw, rl);
        memcpy(t->dec + t->dn, toks[k].dec, toks[k].dl);
        for (size_t b = 1; toks[k].kind == 0 && b < rl; b++) { /* no escape: every byte a boundary */
            t->tok[t->n + b] = 1;
            t->kind[t->n + b] = 0;
            t->dpos[t->n + b] = t->dn + b;
        }
        t->n += rl;
        t->dn += toks[k].dl;
    }
    t->tok[t->n] = 1;
    t->kind[t->n] = 0;
    t->dpos[t->n] = t->dn;
}

static int test_pylit_string_end_levels(void)
{
    char buf[400];
    static const char bytes[] = { '\\', '\\', '\\', '\'', '"', 'a', 'b', '\n' };
    for (int round = 0; round < 20000; round++) {
        size_t n = next_rand() % 300;
        for (size_t i = 0; i < n; i++) buf[i] = bytes[next_rand() % sizeof bytes];
        char q = next_rand() % 2 ? '\'' : '"';
        int in = (int)(next_rand() % 2), e0 = in, b0 = 0;
        size_t want = ld_pyp_string_end_at(0, buf, n, q, &e0, &b0);
        for (int level = 1; level <= ld_pyp_scan_level(); level++) {
            int e = in, b = 0;
            size_t got = ld_pyp_string_end_at(level, buf, n, q, &e, &b);
            CHECK_EQ_INT(got, want);
            CHECK_EQ_INT(b, b0);
            if (got == n) CHECK_EQ_INT(e, e0);
        }
        /* the reference: escapes pair up from the first byte */
        size_t i = in ? 1 : 0;
        while (i < n && buf[i] != q) i += buf[i] == '\\' ? 2 : 1;
        CHECK_EQ_INT(want, i < n ? i : n);
    }
    return 0;
}

static int test_pylit_escape_blocks_levels(void)
{
    static esc_text t;
    static char out[800];
    for (int round = 0; round < 20000; round++) {
        esc_text_make(&t, next_rand() % 600);
        size_t stop1 = 0, count1 = 0;
        for (int level = 1; level <= ld_pyp_scan_level(); level++) {
            size_t stop, count = ld_pyp_simple_escapes_at(level, t.raw, t.n, &stop);
            if (level > 1) {
                CHECK_EQ_INT(stop, stop1);
                CHECK_EQ_INT(count, count1);
            }
            stop1 = stop;
            count1 = count;
        }
        if (ld_pyp_scan_level() < 1) continue;
        /* a token starts at stop; the tokens before it are plain or one-byte
         * escapes, as many as counted; stop is past every whole block before
         * the first escape of another kind */
        CHECK(stop1 <= t.n && t.tok[stop1]);
        size_t simple = 0, first_other = t.n;
        for (size_t i = 0; i < t.n; i++)
            if (t.tok[i] && t.kind[i] == 2 && first_other == t.n) first_other = i;
        for (size_t i = 0; i < stop1; i++) {
            CHECK(!(t.tok[i] && t.kind[i] == 2));
            simple += t.tok[i] && t.kind[i] == 1;
        }
        CHECK_EQ_INT(count1, simple);
        size_t limit = first_other < t.n ? (first_other + 1) / 64 * 64 : t.n / 64 * 64;
        CHECK(stop1 + 1 >= limit);
        /* the decoder (AVX-512 VBMI2): what raw[0..stop) decodes to, up to
         * the same escape */
        if (ld_pyp_scan_level() < 4) continue;
        size_t stopd, o = ld_pyp_decode_simple_at(4, t.raw, t.n, out, &stopd);
        CHECK_EQ_INT(stopd, stop1);
        CHECK_EQ_INT(o, t.dpos[stopd]);
        CHECK(memcmp(out, t.dec, o) == 0);
    }
    return 0;
}

/* ld_py_str_measure gives what decoding then counting gives, the same
 * error included */
static int test_pylit_measure(void)
{
    static esc_text t;
    static char lit[800];
    for (int round = 0; round < 20000; round++) {
        esc_text_make(&t, next_rand() % 600);
        size_t n = 0;
        lit[n++] = '\'';
        memcpy(lit + n, t.raw, t.n);
        n += t.n;
        int broken = next_rand() % 8 == 0 && t.n > 4;
        if (broken) { /* a malformed escape somewhere (or a harmless one) */
            size_t at = 1 + next_rand() % (t.n - 3);
            memcpy(lit + at, next_rand() % 2 ? "\\xZ" : "\\N{", 3);
        }
        if (next_rand() % 6 == 0 && t.n > 2) { /* bytes that are not UTF-8 */
            static const unsigned char odd[] = { 0x80, 0xBF, 0xC0, 0xC3, 0xE0, 0xED, 0xF0, 0xF4, 0xF8, 0xFF };
            for (int k = 0; k < 3; k++) lit[1 + next_rand() % t.n] = (char)odd[next_rand() % sizeof odd];
            broken = 1;
        }
        lit[n++] = '\'';
        ld_py_value *v;
        ld_error e1, e2;
        if (parse_whole(lit, n, &v, &e1) != LD_OK) continue; /* a broken quote */
        const char *s;
        size_t dn, mn;
        uint64_t chars;
        ld_status a = ld_py_str_decode(v, &g_arena, &s, &dn, &e1);
        ld_status b = ld_py_str_measure(v, &mn, &chars, &e2);
        CHECK_EQ_INT(a, b);
        if (a != LD_OK) {
            CHECK_EQ_INT(e1.offset, e2.offset);
            CHECK(strcmp(e1.msg, e2.msg) == 0);
            continue;
        }
        CHECK_EQ_INT(mn, dn);
        CHECK_EQ_INT(chars, ld_utf8_count_chars(s, dn));
        if (broken) continue;
        CHECK_EQ_INT(dn, t.dn);
        CHECK(memcmp(s, t.dec, dn) == 0);
    }
    return 0;
}

/* ld_py_str_decode_count at every level: the bytes, length and error of
 * ld_py_str_decode_into, and as many characters as ld_utf8_count_chars
 * counts in those bytes (the decode-then-count path is the oracle). */
static int count_same(const ld_py_value *v, const char *lit, size_t lit_n)
{
    static char want[1600], got[1600];
    size_t wn = 0, gn = 0;
    ld_error e1, e2;
    ld_status a = ld_py_str_decode_into(v, want, &wn, &e1);
    for (int level = 0; level <= 4; level++) {
        uint64_t chars = 0;
        ld_status b = ld_py_str_decode_count_at(level, v, got, &gn, &chars, &e2);
        int same = a == b && (a != LD_OK ? e1.offset == e2.offset && strcmp(e1.msg, e2.msg) == 0
                                         : gn == wn && memcmp(got, want, wn) == 0 &&
                                               chars == ld_utf8_count_chars(want, wn));
        if (!same) {
            fprintf(stderr, "  level %d: status %d/%d, %zu/%zu bytes, %llu chars (want %zu) for:", level, (int)b,
                    (int)a, gn, wn, (unsigned long long)chars, a == LD_OK ? ld_utf8_count_chars(want, wn) : 0);
            for (size_t i = 0; i < lit_n; i++) fprintf(stderr, " %02x", (unsigned char)lit[i]);
            fprintf(stderr, "\n");
            return 1;
        }
    }
    return 0;
}

/* a Python literal: random escape texts (every escape kind, backslash-
 * newlines between the halves of a character), bytes that are not UTF-8,
 * lone surrogates */
static int decode_count_python(void)
{
    static esc_text t;
    static char lit[800];
    static const unsigned char odd[] = { 0x80, 0xBF, 0xC0, 0xC3, 0xE0, 0xED, 0xF0, 0xF4, 0xF8, 0xFF };
    static const char *const extra[] = { "\\ud800", "\\udfff", "\\U0010ffff", "\\777", "\\x80", "\\N{", "\\xZ" };
    for (int round = 0; round < 30000; round++) {
        esc_text_make(&t, next_rand() % 600);
        size_t n = 0;
        lit[n++] = '\'';
        memcpy(lit + n, t.raw, t.n);
        n += t.n;
        if (next_rand() % 4 == 0 && t.n > 12) { /* a lone surrogate, a big escape or a bad one */
            const char *x = extra[next_rand() % (sizeof extra / sizeof extra[0])];
            memcpy(lit + 1 + next_rand() % (t.n - 11), x, strlen(x));
        }
        if (next_rand() % 5 == 0 && t.n > 2) /* bytes that are not UTF-8 */
            for (int k = 0; k < 2; k++) lit[1 + next_rand() % t.n] = (char)odd[next_rand() % sizeof odd];
        lit[n++] = '\'';
        ld_py_value *v;
        ld_error err;
        if (parse_whole(lit, n, &v, &err) != LD_OK || v->kind != LD_PY_STR) continue; /* a broken quote */
        if (count_same(v, lit, n)) return 1;
    }
    return 0;
}

/* JSON strings: surrogate pairs (one character), lone halves, \/ */
static int decode_count_json(void)
{
    static const char *const toks[] = { "a", " ", "'", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\\n",
                                        "\\\"", "\\\\", "\\/", "\\t", "\\u00e9", "\\u4e2d", "\\ud83d\\ude00",
                                        "\\ud800", "\\udc00", "\\ud83dx", "\\u0000", "\xed\xa0\x80", "\x80" };
    static char lit[900];
    for (int round = 0; round < 20000; round++) {
        size_t n = 0, want = next_rand() % 600;
        lit[n++] = '"';
        while (n < want) {
            const char *x = toks[next_rand() % (sizeof toks / sizeof toks[0])];
            memcpy(lit + n, x, strlen(x));
            n += strlen(x);
        }
        lit[n++] = '"';
        ld_py_value *v;
        ld_error err;
        size_t end;
        ld_arena_reset(&g_arena);
        if (ld_pylit_parse_json(lit, n, 0, NULL, &g_arena, &v, &end, &err) != LD_OK || v->kind != LD_PY_STR)
            continue;
        CHECK(v->flags & LD_PY_F_JSON);
        if (count_same(v, lit, n)) return 1;
    }
    return 0;
}

/* an escape and a character of every length at every offset of ASCII text,
 * across the 64-byte blocks: the character cut by a block edge, the escape
 * on one */
static int decode_count_offsets(void)
{
    static const char *const escs[] = { "\\n", "\\x41", "\\u00e9", "\\U0001F600", "\\q", "\\\n", "\\ud800" };
    static const uint32_t cps[] = { 0xE9, 0x4F60, 0x1F600, 0xD800 };
    char lit[300];
    for (size_t e = 0; e < sizeof escs / sizeof escs[0]; e++)
        for (size_t c = 0; c < sizeof cps / sizeof cps[0]; c++)
            for (size_t len = 1; len < 200; len += 11)
                for (size_t at = 0; at < len; at++) {
                    size_t n = 0, el = strlen(escs[e]);
                    lit[n++] = '\'';
                    for (size_t i = 0; i < len; i++) lit[n++] = (char)('a' + i % 26);
                    size_t cat = 1 + (at * 7 + c) % len, w = put_cp(lit + cat, cps[c]);
                    (void)w;
                    memmove(lit + 1 + at + el, lit + 1 + at, n - 1 - at);
                    memcpy(lit + 1 + at, escs[e], el);
                    n += el;
                    lit[n++] = '\'';
                    ld_py_value *v;
                    ld_error err;
                    if (parse_whole(lit, n, &v, &err) != LD_OK) continue;
                    if (count_same(v, lit, n)) return 1;
                }
    return 0;
}

/* a character cut short (its lead and fewer continuation bytes than it
 * needs) at every offset of ASCII text with escapes: at a block's end, before
 * an ASCII block, at the text's end */
static int decode_count_cut(void)
{
    static const char *const cuts[] = { "\xc3", "\xe4", "\xe4\xb8", "\xf0", "\xf0\x9f", "\xf0\x9f\x98", "\xb8" };
    char lit[300];
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
        for (size_t len = 1; len < 200; len += 3)
            for (size_t at = 0; at <= len; at++) {
                size_t n = 0, cl = strlen(cuts[c]);
                lit[n++] = '\'';
                for (size_t i = 0; i < len; i++) {
                    if (i == at) memcpy(lit + n, cuts[c], cl), n += cl;
                    const char *esc = i % 37 != 36 ? NULL : i % 2 ? "\\n" : "\\x41";
                    if (esc) memcpy(lit + n, esc, strlen(esc)), n += strlen(esc);
                    else lit[n++] = (char)('a' + i % 26);
                }
                if (at == len) memcpy(lit + n, cuts[c], cl), n += cl;
                lit[n++] = '\'';
                ld_py_value *v;
                ld_error err;
                if (parse_whole(lit, n, &v, &err) != LD_OK) continue;
                if (count_same(v, lit, n)) return 1;
            }
    return 0;
}

/* byte soup: the bytes that matter to UTF-8 (every lead, continuation
 * bytes at each limit of a second byte, bytes no text holds) among ASCII
 * and escapes of each kind */
static int decode_count_soup(void)
{
    static const char *const bits[] = { "\x80", "\x8f", "\x90", "\x9f", "\xa0", "\xbf", "\xc0", "\xc1", "\xc2",
                                         "\xdf", "\xe0", "\xe1", "\xed", "\xef", "\xf0", "\xf1", "\xf4", "\xf5",
                                         "\xf8", "\xff", "a", "b ", "\\n", "\\x41", "\\u00e9", "\\q", "\\\n" };
    char lit[900];
    for (int round = 0; round < 30000; round++) {
        size_t n = 0, want = next_rand() % 400, nb = sizeof bits / sizeof bits[0];
        lit[n++] = '\'';
        while (n < want) {
            uint32_t r = next_rand();
            const char *b = bits[r % 3 ? (r >> 4) % 20 : 20 + (r >> 4) % (nb - 20)];
            memcpy(lit + n, b, strlen(b));
            n += strlen(b);
        }
        lit[n++] = '\'';
        ld_py_value *v;
        ld_error err;
        if (parse_whole(lit, n, &v, &err) != LD_OK) continue;
        if (count_same(v, lit, n)) return 1;
    }
    return 0;
}

/* one sequence that breaks a rule (every lead, second bytes at each limit,
 * zero to three continuation bytes after) in valid text with escapes, at
 * offsets across a block's edge: nothing else there to give it away */
static int decode_count_one_bad(void)
{
    static const unsigned char seconds[] = { 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF };
    static const char valid[] = "ab\\n\xc3\xa9" "cd\\x41\xe4\xb8\xad" "ef\xf0\x9f\x98\x80gh";
    char lit[300];
    for (unsigned lead = 0xC0; lead <= 0xFF; lead++)
        for (size_t s2 = 0; s2 < sizeof seconds; s2++)
            for (size_t conts = 0; conts <= 3; conts++)
                for (size_t at = 20; at < 80; at += 1 + (lead + at) % 3) { /* 32- and 64-byte edges */
                    size_t n = 0;
                    lit[n++] = '\'';
                    for (; n + sizeof valid - 1 <= at; n += sizeof valid - 1) /* valid text, then ASCII */
                        memcpy(lit + n, valid, sizeof valid - 1);
                    while (n < at) lit[n++] = 'z';
                    lit[n++] = (char)lead;
                    lit[n++] = (char)seconds[s2];
                    for (size_t k = 0; k < conts; k++) lit[n++] = (char)0x80;
                    memcpy(lit + n, valid, sizeof valid - 1);
                    n += sizeof valid - 1;
                    lit[n++] = '\'';
                    ld_py_value *v;
                    ld_error err;
                    if (parse_whole(lit, n, &v, &err) != LD_OK) continue;
                    if (count_same(v, lit, n)) return 1;
                }
    return 0;
}

/* 0: s[0..n) is UTF-8 (WTF-8 surrogates allowed), 2: it is up to a
 * character its end cuts, 1: a byte breaks a rule */
static int utf8_state(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], lo = 0x80, hi = 0xBF;
        size_t len;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return 1;
        for (size_t k = 1; k < len; k++) {
            if (i + k >= n) return 2;
            unsigned b = s[i + k];
            if (k == 1 ? b < lo || b > hi : (b & 0xC0) != 0x80) return 1;
        }
        i += len;
    }
    return 0;
}

/* One call of a counted decode's blocks (AVX2's or AVX-512 VBMI2's) from
 * raw[from] against esc_text's reference: the text decoded up to the first
 * escape of another kind, its continuation bytes counted, and its UTF-8
 * judged: a byte before the stop that breaks a rule (the stop's backslash
 * after a cut character included) sets *bad, a valid text leaves it
 * clear.  The text's end is the caller's (ends_in_sequence): a character
 * it cuts, or a lead as its last byte, may leave *bad clear.  dst has the
 * exact room the contract gives, for the sanitizers. */
static int decode_count_call(int level, const esc_text *t, size_t from)
{
    size_t to = from;
    while (to < t->n && !(t->tok[to] && t->kind[to] == 2)) to++;
    const char *want = t->dec + t->dpos[from];
    size_t wn = t->dpos[to] - t->dpos[from], want_cont = 0;
    for (size_t k = 0; k < wn; k++) want_cont += ((unsigned char)want[k] & 0xC0) == 0x80;
    size_t judged = to == t->n && to > from && (unsigned char)t->raw[to - 1] >= 0xC0 ? to - 1 : to;
    int seg = utf8_state((const unsigned char *)t->raw + from, judged - from);
    int whole = utf8_state((const unsigned char *)t->raw, t->n);
    char *d = malloc(t->n - from ? t->n - from : 1);
    size_t stop = 0, cont = 0;
    uint64_t bad = 0;
    if (!d) return 1;
    size_t o = level >= 4 ? ld_pyp_decode_count(t->raw, t->n, from, d, &stop, &cont, &bad)
                          : ld_pyp_decode_count_avx2(t->raw, t->n, from, d, &stop, &cont, &bad);
    int same = stop == to && o == wn && memcmp(d, want, wn) == 0 && cont == want_cont &&
               (bad || !(seg == 1 || (seg == 2 && to < t->n))) && (!bad || whole != 0);
    free(d);
    if (!same) {
        fprintf(stderr, "  level %d from %zu: stop %zu/%zu, %zu/%zu bytes, cont %zu/%zu, bad %d (%d %d) for:", level,
                from, stop, to, o, wn, cont, want_cont, bad != 0, seg, whole);
        for (size_t i = 0; i < t->n; i++) fprintf(stderr, " %02x", (unsigned char)t->raw[i]);
        fprintf(stderr, "\n");
        return 1;
    }
    return 0;
}

/* ld_pyp_decode_count_avx2 and ld_pyp_decode_count where the machine has
 * them, from a token's start after ASCII (where the caller starts: after
 * an escape), often one of the first three bytes, in escape texts with
 * bytes that break UTF-8 now and then */
static int decode_count_blocks(void)
{
    static esc_text t;
    static const unsigned char odd[] = { 0x80, 0xBF, 0xC0, 0xC1, 0xC3, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF };
    for (int round = 0; round < 30000; round++) {
        esc_text_make(&t, next_rand() % 600);
        for (int k = 0; k < 2 && t.n && next_rand() % 3 == 0; k++) { /* a plain byte made odd */
            size_t i = next_rand() % t.n;
            if (t.tok[i] && t.kind[i] == 0) t.raw[i] = t.dec[t.dpos[i]] = (char)odd[next_rand() % sizeof odd];
        }
        size_t from = next_rand() % 2 ? next_rand() % 4 : next_rand() % (t.n + 1);
        while (from < t.n && (!t.tok[from] || (from && (unsigned char)t.raw[from - 1] >= 0x80))) from++;
        if (from > t.n) from = t.n;
        for (int level = 2; level <= 4; level += 2)
            if (ld_pyp_scan_level() >= level && decode_count_call(level, &t, from)) return 1;
    }
    return 0;
}

static int test_pylit_decode_count(void)
{
    CHECK(!decode_count_blocks());
    CHECK(!decode_count_one_bad());
    CHECK(!decode_count_soup());
    CHECK(!decode_count_cut());
    CHECK(!decode_count_offsets());
    CHECK(!decode_count_python());
    CHECK(!decode_count_json());
    return 0;
}

/* ld_json_double writes the fewest digits that read back (as printf's
 * "%.*g"): the same text as trying every precision from 1 up, for floats
 * of every magnitude, ties of the rounding and the edges of the format */
static int test_pylit_json_double_shortest(void)
{
    static const double edges[] = { 0.0, -0.0, 5e-324, -5e-324, 1.7976931348623157e308, 2.2250738585072014e-308,
                                     0.1, 0.7, 1.0, 9.5, 0.95, 0.05, 1e16, 1e15, 123456789012345678.0,
                                     9.999999999999999e22, 1e23, 0.3, 2.675, 5e-5, 1e-4, 0.00012345, 6.964129,
                                     1772366407.053804, 0.125, 2.5, 1e21, 999999.5 };
    for (int round = 0; round < 20000 + (int)(sizeof edges / sizeof edges[0]); round++) {
        double v;
        if (round < (int)(sizeof edges / sizeof edges[0])) {
            v = edges[round];
        } else {
            uint64_t r = (uint64_t)next_rand() << 32 | next_rand();
            switch (round % 4) {
            case 0: memcpy(&v, &r, sizeof v); break;
            case 1: v = (double)(r % 10000000) / 1e6; break;
            case 2: v = ldexp((double)(r >> 11), (int)(next_rand() % 200) - 150); break;
            default: v = (double)(r % 1000) * 0.5 + (double)(r % 7) * 1e16; break;
            }
        }
        if (isnan(v) || isinf(v)) continue;
        char want[40];
        snprintf(want, sizeof want, "%.17g", v);
        for (int prec = 1; prec <= 17; prec++) {
            char tmp[40];
            snprintf(tmp, sizeof tmp, "%.*g", prec, v);
            if (strtod(tmp, NULL) == v) {
                memcpy(want, tmp, sizeof tmp);
                break;
            }
        }
        cJSON *j = ld_json_double(v);
        CHECK(j && j->valuestring);
        CHECK_EQ_STR(j->valuestring, want);
        cJSON_Delete(j);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_pylit_random_reprs),
    LD_CASE(test_pylit_sglang_truncation),
    LD_CASE(test_pylit_rejected),
    LD_CASE(test_pylit_json_dumps),
    LD_CASE(test_pylit_json_rejects_python),
    LD_CASE(test_pylit_scalars),
    LD_CASE(test_pylit_containers),
    LD_CASE(test_pylit_calls),
    LD_CASE(test_pylit_string_escapes),
    LD_CASE(test_pylit_bad_escapes),
    LD_CASE(test_pylit_zero_copy),
    LD_CASE(test_pylit_truncation_markers),
    LD_CASE(test_pylit_abbreviation_marker),
    LD_CASE(test_pylit_error_offsets),
    LD_CASE(test_pylit_depth_limit),
    LD_CASE(test_pylit_digit_limit),
    LD_CASE(test_pylit_out_end),
    LD_CASE(test_pylit_kwargs),
    LD_CASE(test_pylit_dict_get),
    LD_CASE(test_pylit_count_chars),
    LD_CASE(test_pylit_not_nul_terminated),
    LD_CASE(test_pylit_skim_int_lists),
    LD_CASE(test_pylit_count_chars_simd),
    LD_CASE(test_pylit_has_dots),
    LD_CASE(test_pylit_decode_every_offset),
    LD_CASE(test_pylit_skim_every_offset),
    LD_CASE(test_pylit_string_end_levels),
    LD_CASE(test_pylit_escape_blocks_levels),
    LD_CASE(test_pylit_measure),
    LD_CASE(test_pylit_decode_count),
    LD_CASE(test_pylit_json_double_shortest),
};

LD_TEST_MAIN(cases)
