/* pylit_str.c - lazy string decoding, UTF-8 counting, lookups and kind
 * names for the Python-literal parser (pylit.h).  The parser only finds
 * where a literal ends; escapes are validated and decoded here, on demand. */
#include "pylit.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <stdlib.h>
#include <string.h>

/* Writes code point `cp` as UTF-8; surrogates D800-DFFF get the same 3-byte
 * form (WTF-8, as Python's "surrogatepass"), so lone surrogates survive. */
static size_t put_utf8(char *d, uint32_t cp)
{
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)(c | 0x20);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Reads exactly `n` hex digits at s[0..avail). */
static int read_hex(const char *s, size_t avail, int n, uint32_t *out)
{
    uint32_t v = 0;
    if (avail < (size_t)n) return 0;
    for (int i = 0; i < n; i++) {
        int h = hex_val(s[i]);
        if (h < 0) return 0;
        v = v * 16 + (uint32_t)h;
    }
    *out = v;
    return 1;
}

typedef struct py_decode_err {
    size_t at;        /* index in the raw text of the bad escape */
    ld_status code;
    const char *what;
} py_decode_err;

static int set_derr(py_decode_err *e, size_t at, ld_status code, const char *what)
{
    e->at = at;
    e->code = code;
    e->what = what;
    return -1;
}

static char simple_escape(char c)
{
    switch (c) {
    case '\\': return '\\';
    case '\'': return '\'';
    case '"': return '"';
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'v': return '\v';
    default: return 0;
    }
}

/* JSON's escapes where they differ from Python's: \/ is a slash, and a
 * \uD800-\uDBFF escape followed by a \uDC00-\uDFFF one is one code point
 * (json.loads pairs them; a lone surrogate stays one, as WTF-8).  Returns
 * the bytes written, 0 when s[at] is not such an escape. */
static int json_escape(const char *s, size_t n, size_t *i, char *d)
{
    size_t at = *i;
    if (s[at + 1] == '/') {
        d[0] = '/';
        *i = at + 2;
        return 1;
    }
    uint32_t hi, lo;
    if (s[at + 1] != 'u' || !read_hex(s + at + 2, n - at - 2, 4, &hi) || hi < 0xD800 ||
        hi > 0xDBFF || at + 12 > n || s[at + 6] != '\\' || s[at + 7] != 'u' ||
        !read_hex(s + at + 8, n - at - 8, 4, &lo) || lo < 0xDC00 || lo > 0xDFFF)
        return 0;
    *i = at + 12;
    return (int)put_utf8(d, 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
}

/* One escape at s[i] == '\\'.  Writes its bytes to d and returns how many,
 * advancing *i past it; -1 on a malformed escape.  Unknown escapes keep the
 * backslash, as Python does.  json: JSON's rules (json_escape) first. */
static int decode_escape(const char *s, size_t n, size_t *i, int bytes, int json,
                         char *d, py_decode_err *e)
{
    if (json && *i + 1 < n) {
        int w = json_escape(s, n, i, d);
        if (w) return w;
    }
    size_t at = *i;
    if (at + 1 >= n) { /* cannot happen for parsed literals; be safe */
        *i = n;
        d[0] = '\\';
        return 1;
    }
    char c = s[at + 1];
    char sc = simple_escape(c);
    *i = at + 2;
    if (sc) {
        d[0] = sc;
        return 1;
    }
    if (c == '\n') return 0; /* backslash-newline: line continuation */
    if (c >= '0' && c <= '7') {
        uint32_t v = (uint32_t)(c - '0');
        for (int k = 0; k < 2 && *i < n && s[*i] >= '0' && s[*i] <= '7'; k++)
            v = v * 8 + (uint32_t)(s[(*i)++] - '0');
        if (!bytes) return (int)put_utf8(d, v);
        if (v > 0xFF) return set_derr(e, at, LD_ERR_SYNTAX, "octal escape above \\377 in bytes");
        d[0] = (char)v;
        return 1;
    }
    int width = c == 'x' ? 2 : (!bytes && c == 'u') ? 4 : (!bytes && c == 'U') ? 8 : 0;
    if (width) {
        uint32_t v;
        if (!read_hex(s + at + 2, n - at - 2, width, &v))
            return set_derr(e, at, LD_ERR_SYNTAX, "truncated \\x, \\u or \\U escape");
        if (v > 0x10FFFF)
            return set_derr(e, at, LD_ERR_SYNTAX, "\\U escape above U+10FFFF");
        *i = at + 2 + (size_t)width;
        if (bytes) {
            d[0] = (char)v;
            return 1;
        }
        return (int)put_utf8(d, v);
    }
    if (c == 'N' && !bytes)
        return set_derr(e, at, LD_ERR_UNSUPPORTED, "\\N{...} escapes are not supported");
    d[0] = '\\';
    *i = at + 1; /* the next byte is ordinary text */
    return 1;
}

/* First backslash in [s, end), or NULL.  Inline 16-byte steps: prompts
 * carry an escape every line, and a libc call per escape costs more than
 * the scan itself. */
static const char *find_backslash(const char *s, const char *end)
{
#if defined(__SSE2__)
    const __m128i vb = _mm_set1_epi8('\\');
    for (; end - s >= 16; s += 16) {
        unsigned m = (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)s), vb));
        if (m) return s + __builtin_ctz(m);
    }
#endif
    for (; s < end; s++)
        if (*s == '\\') return s;
    return NULL;
}

/* Decodes raw[0..n) into dst (room for n bytes: no escape grows). */
static int decode_into(const char *raw, size_t n, int bytes, int json, char *dst,
                       size_t *out_len, py_decode_err *e)
{
    size_t i = 0, o = 0;
    while (i < n) {
        const char *bs = find_backslash(raw + i, raw + n);
        size_t run = bs ? (size_t)(bs - raw) - i : n - i;
        memcpy(dst + o, raw + i, run);
        o += run;
        i += run;
        if (!bs) break;
        int w = decode_escape(raw, n, &i, bytes, json, dst + o, e);
        if (w < 0) return -1;
        o += (size_t)w;
    }
    *out_len = o;
    return 0;
}

/* Bytes between the value's first byte and its raw text: prefix + quote. */
static uint64_t raw_skip(const ld_py_value *v)
{
    uint64_t k = 1;
    if (v->kind == LD_PY_BYTES) k++;
    if (v->flags & LD_PY_F_RAWSTR) k++;
    if (v->flags & LD_PY_F_UPREFIX) k++;
    return k;
}

static int zero_copy(const ld_py_value *v)
{
    return !(v->flags & LD_PY_F_ESCAPED) || (v->flags & LD_PY_F_RAWSTR);
}

ld_status ld_py_str_decode(const ld_py_value *v, ld_arena *arena,
                           const char **out, size_t *out_len, ld_error *err)
{
    if (!v || (v->kind != LD_PY_STR && v->kind != LD_PY_BYTES))
        return LD_FAIL(err, LD_ERR_USAGE, v ? v->off : 0,
                       "ld_py_str_decode: value is not a string");
    if (zero_copy(v)) {
        *out = v->u.raw;
        *out_len = v->n;
        return LD_OK;
    }
    char *dst = ld_arena_alloc(arena, (size_t)v->n + 1);
    if (!dst)
        return LD_FAIL(err, LD_ERR_NOMEM, v->off,
                       "cannot allocate %u bytes for a decoded string", v->n + 1);
    py_decode_err e;
    size_t n;
    if (decode_into(v->u.raw, v->n, v->kind == LD_PY_BYTES, (v->flags & LD_PY_F_JSON) != 0, dst, &n,
                    &e) < 0)
        return LD_FAIL(err, e.code, v->off + raw_skip(v) + e.at, "%s", e.what);
    dst[n] = '\0';
    *out = dst;
    *out_len = n;
    return LD_OK;
}

/* Length of a valid UTF-8 (or WTF-8 surrogate) sequence at s, 0 if the
 * byte at s does not start one. */
static size_t seq_len(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80;
    else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (avail < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return n;
}

size_t ld_utf8_count_chars(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, count = 0;
    while (i < len) {
        /* ASCII runs dominate prompts: sixteen, then eight bytes at a time. */
#if defined(__SSE2__)
        while (i + 16 <= len &&
               !_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)(u + i)))) {
            i += 16;
            count += 16;
        }
#endif
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, u + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
            count += 8;
        }
        if (i >= len) break;
        if (u[i] < 0x80) {
            i++;
        } else {
            size_t n = seq_len(u + i, len - i);
            i += n ? n : 1;
        }
        count++;
    }
    return count;
}

/* Does string value k decode to key[0..key_len)? */
static int str_equals(const ld_py_value *k, const char *key, size_t key_len)
{
    if (k->kind != LD_PY_STR) return 0;
    if (zero_copy(k))
        return k->n == key_len && memcmp(k->u.raw, key, key_len) == 0;
    if (k->n < key_len) return 0; /* decoding never grows */
    char small[256];
    char *buf = k->n <= sizeof small ? small : malloc(k->n);
    if (!buf) return 0;
    size_t n;
    py_decode_err e;
    int eq = decode_into(k->u.raw, k->n, 0, (k->flags & LD_PY_F_JSON) != 0, buf, &n, &e) == 0 &&
             n == key_len && memcmp(buf, key, key_len) == 0;
    if (buf != small) free(buf);
    return eq;
}

const ld_py_value *ld_py_dict_get(const ld_py_value *dict, const char *key)
{
    if (!dict || !key || dict->kind != LD_PY_DICT) return NULL;
    size_t key_len = strlen(key);
    for (uint32_t i = 0; i < dict->n; i++)
        if (str_equals(&dict->u.items[2 * i], key, key_len))
            return &dict->u.items[2 * i + 1];
    return NULL;
}

const ld_py_value *ld_py_call_get(const ld_py_value *call, const char *arg_name)
{
    if (!call || !arg_name || call->kind != LD_PY_CALL) return NULL;
    const ld_py_call *c = call->u.call;
    size_t n = strlen(arg_name);
    for (uint32_t i = 0; i < c->n_args; i++)
        if (c->arg_names[i] && c->arg_name_lens[i] == n &&
            memcmp(c->arg_names[i], arg_name, n) == 0)
            return &c->args[i];
    return NULL;
}

const char *ld_py_kind_name(ld_py_kind kind)
{
    switch (kind) {
    case LD_PY_NONE: return "NoneType";
    case LD_PY_BOOL: return "bool";
    case LD_PY_INT: return "int";
    case LD_PY_FLOAT: return "float";
    case LD_PY_STR: return "str";
    case LD_PY_BYTES: return "bytes";
    case LD_PY_LIST: return "list";
    case LD_PY_TUPLE: return "tuple";
    case LD_PY_SET: return "set";
    case LD_PY_DICT: return "dict";
    case LD_PY_CALL: return "call";
    case LD_PY_NAME: return "name";
    case LD_PY_OPAQUE: return "opaque";
    case LD_PY_ELLIPSIS: return "ellipsis";
    case LD_PY_TRUNC: return "truncated";
    case LD_PY_ABBREV: return "abbreviated";
    }
    return "unknown";
}
