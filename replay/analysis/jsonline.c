/* jsonline.c - see jsonline.h. */
#include "jsonline.h"

#include <string.h>

#include "ld_json_escape.h"

static const char *skip(const char *p, const char *end)
{
    while (p < end && *p == ' ') p++;
    return p;
}

/* The end of a string's bytes from p (after its opening quote): the first
 * byte that is a quote, a backslash or a control byte, or end.  That is the
 * class json.dumps escapes (its bytes >= 0x80 pass, as cJSON's do), so the
 * shared scan finds it, 32 bytes a step where the machine has AVX2. */
static const char *plain_run(const char *p, const char *end)
{
    return p + ld_json_next_escape(p, 0, (size_t)(end - p));
}

/* The string at p (a quote there): its bytes; the byte after its closing
 * quote, or NULL when it holds an escape or a control byte, or is cut. */
static const char *string(const char *p, const char *end, const char **s, size_t *len)
{
    const char *q = plain_run(++p, end);
    if (q == end || *q != '"') return NULL;
    *s = p;
    *len = (size_t)(q - p);
    return q + 1;
}

static const char *word(const char *p, const char *end, const char *w, size_t n, ld_jl_type type, ld_jl_value *v)
{
    if ((size_t)(end - p) < n || memcmp(p, w, n)) return NULL;
    v->type = type;
    return p + n;
}

static const char *strings(const char *p, const char *end, ld_jl_value *v)
{
    v->type = LD_JL_STRINGS;
    v->num = 0;
    v->s = ++p;
    p = skip(p, end);
    if (p < end && *p == ']') {
        v->len = (size_t)(p - v->s);
        return p + 1;
    }
    for (;;) {
        const char *s;
        size_t n;
        if (p == end || *p != '"' || !(p = string(p, end, &s, &n))) return NULL;
        v->num++;
        p = skip(p, end);
        if (p == end) return NULL;
        if (*p == ']') {
            v->len = (size_t)(p - v->s);
            return p + 1;
        }
        if (*p != ',') return NULL;
        p = skip(p + 1, end);
    }
}

static const char *number(const char *p, const char *end, ld_jl_value *v)
{
    const char *start = p;
    uint64_t n = 0;
    while (p < end && *p >= '0' && *p <= '9') n = n * 10 + (uint64_t)(*p++ - '0');
    size_t digits = (size_t)(p - start);
    if (digits > 15 || (digits > 1 && *start == '0')) return NULL;
    v->type = LD_JL_NUMBER;
    v->num = n;
    return p; /* what follows must end the value: the object's loop checks it */
}

static const char *value(const char *p, const char *end, ld_jl_value *v)
{
    if (p == end) return NULL;
    switch (*p) {
    case '"':
        v->type = LD_JL_STRING;
        return string(p, end, &v->s, &v->len);
    case '[': return strings(p, end, v);
    case 'n': return word(p, end, "null", 4, LD_JL_NULL, v);
    case 't': return word(p, end, "true", 4, LD_JL_TRUE, v);
    case 'f': return word(p, end, "false", 5, LD_JL_FALSE, v);
    default: return *p >= '0' && *p <= '9' ? number(p, end, v) : NULL;
    }
}

/* Whether the string at p (a quote there) is name, as far as it can be
 * seen without scanning for its end: name's bytes and a quote. */
static int at_name(const char *p, const char *end, const ld_jl_name *name)
{
    size_t n = name->len, i = 0;
    if ((size_t)(end - p) <= n + 1) return 0;
    while (i < n && p[1 + i] == name->s[i]) i++;
    return i == n && p[n + 1] == '"';
}

const char *ld_jl_object(const char *p, const char *end, const ld_jl_name *names, size_t n_names,
                         ld_jl_value *vals)
{
    for (size_t i = 0; i < n_names; i++) vals[i].type = LD_JL_ABSENT;
    p = skip(p, end);
    if (p == end || *p != '{') return NULL;
    p = skip(p + 1, end);
    if (p < end && *p == '}') return p + 1;
    size_t next = 0; /* the writers' order: each name found at the first look */
    for (;;) {
        size_t i = next;
        if (p == end || *p != '"') return NULL;
        /* a name is the one string that is its bytes and a quote; a name
         * written with escapes is not taken */
        while (i < n_names && !at_name(p, end, &names[i])) i++;
        if (i == n_names) { /* then those before */
            for (i = 0; i < next && !at_name(p, end, &names[i]); i++) {}
            if (i == next) return NULL;
        }
        if (vals[i].type != LD_JL_ABSENT) return NULL;
        p += names[i].len + 2;
        next = i + 1;
        p = skip(p, end);
        if (p == end || *p != ':') return NULL;
        if (!(p = value(skip(p + 1, end), end, &vals[i]))) return NULL;
        p = skip(p, end);
        if (p == end) return NULL;
        if (*p == '}') return p + 1;
        if (*p != ',') return NULL;
        p = skip(p + 1, end);
    }
}

int ld_jl_next_string(const ld_jl_value *v, size_t *pos, const char **s, size_t *len)
{
    const char *p = v->s + *pos, *end = v->s + v->len;
    while (p < end && *p != '"') p++;
    if (p == end) return 0;
    const char *q = memchr(p + 1, '"', (size_t)(end - p - 1)); /* taken: no escapes */
    if (!q) return 0;
    *s = p + 1;
    *len = (size_t)(q - p - 1);
    *pos = (size_t)(q + 1 - v->s);
    return 1;
}

/* A hex digit's value + 1 (+ 32 for A-F); 0 for any other byte. */
static const unsigned char hexval[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9,
    ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 43, ['B'] = 44, ['C'] = 45, ['D'] = 46, ['E'] = 47, ['F'] = 48,
};

int ld_jl_hex16(const char *s, size_t len, int lower_only, uint64_t *out)
{
    if (len != 16) return 0;
    uint64_t h = 0;
    unsigned bad = 0, upper = 0;
    for (size_t i = 0; i < 16; i++) {
        unsigned v = hexval[(unsigned char)s[i]];
        bad |= v == 0;
        upper |= v & 32;
        h = h << 4 | ((v - 1) & 15);
    }
    if (bad || (lower_only && upper)) return 0;
    *out = h;
    return 1;
}
