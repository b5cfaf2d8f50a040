/* pylit_str.c - lazy string decoding, UTF-8 counting, lookups and kind
 * names for the Python-literal parser (pylit.h).  The parser only finds
 * where a literal ends; escapes are validated and decoded here, on demand. */
#include "pylit_internal.h"
#include "pylit_scan.h"

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
    return ld_pyp_one_byte_escapes[(unsigned char)c];
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

/* Copies s[0..n) to d up to its first backslash and returns how many bytes
 * that is (n when none).  Sixteen bytes a step, each stored whole before it
 * is looked at: prompts carry an escape every line, and a libc call per
 * run costs more than the run.  d must have room for n bytes. */
static size_t copy_run(const char *s, size_t n, char *d)
{
    size_t k = 0;
#if defined(__SSE2__)
    const __m128i vb = _mm_set1_epi8('\\');
    for (; k + 16 <= n; k += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + k));
        _mm_storeu_si128((__m128i *)(void *)(d + k), x);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, vb));
        if (m) return k + (size_t)__builtin_ctz(m);
    }
#endif
    for (; k < n && s[k] != '\\'; k++) d[k] = s[k];
    return k;
}

/* Decodes raw[0..n) into dst (room for n bytes: no escape grows, so the
 * output never passes the input and the whole stores fit): 64 bytes a step
 * where the machine can (ld_pyp_decode_simple), else and from an escape of
 * another kind on, byte by byte up to the next such escape. */
static int decode_into(const char *raw, size_t n, int bytes, int json, char *dst,
                       size_t *out_len, py_decode_err *e)
{
    size_t i = 0, o = 0;
    for (;;) {
        if (!bytes) {
            size_t stop;
            o += ld_pyp_decode_simple(raw + i, n - i, dst + o, &stop);
            i += stop;
        }
        for (;;) {
            size_t run = copy_run(raw + i, n - i, dst + o);
            o += run;
            i += run;
            if (i >= n) {
                *out_len = o;
                return 0;
            }
            char sc = i + 1 < n ? simple_escape(raw[i + 1]) : 0;
            if (sc) { /* \n \' \\ ...: the common ones, decoded here */
                dst[o++] = sc;
                i += 2;
                continue;
            }
            int w = decode_escape(raw, n, &i, bytes, json, dst + o, e);
            if (w < 0) return -1;
            o += (size_t)w;
            break; /* back to whole blocks */
        }
    }
}

/* A text cut inside a character: its last bytes start a sequence they do
 * not finish (count_valid's test, for any length). */
static int ends_in_sequence(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    return (n >= 1 && u[n - 1] >= 0xC0) || (n >= 2 && u[n - 2] >= 0xE0) || (n >= 3 && u[n - 3] >= 0xF0);
}

/* decode_into for a str that also gives ld_utf8_count_chars of the decoded
 * text, counted in the same pass: 64-byte blocks at level 4 (AVX-512 VBMI2,
 * ld_pyp_decode_count), 32-byte ones at levels 2 and 3 (AVX2,
 * ld_pyp_decode_count_avx2), the same answers.
 *
 * Why the raw text's bytes may decide: the raw text is V0 E1 V1 E2 ... Vk,
 * the Vi copied as they are and each escape's text Ei ASCII (a backslash
 * and ASCII after it; an unknown escape is its backslash alone, the byte
 * after it ordinary text); the decoded text is V0 O1 V1 ... Vk, each Oi
 * what put_utf8 or a one-byte escape writes: whole valid sequences (WTF-8
 * surrogates included), or nothing for a backslash-newline.  In UTF-8 no
 * character spans a byte that is not a continuation byte.  When the raw
 * text is valid, each Vi is: it starts with no continuation byte (ASCII
 * before it) and ends on a whole character (ASCII after it).  The decoded
 * text is then valid too: valid pieces, each starting with no continuation
 * byte, and a valid text has as many characters as bytes that are not
 * continuation bytes: the Vi's (counted in the blocks that copy them) and
 * each Oi's (all its bytes but the first).  When the raw text is not
 * valid, the decoded text is counted as before (it may be valid: a
 * backslash-newline can join a character's halves). */
static int decode_counted(int level, const char *raw, size_t n, int json, char *dst, size_t *out_len,
                          uint64_t *chars, py_decode_err *e)
{
    size_t i = 0, o = 0, cont = 0;
    uint64_t bad = 0;
    for (;;) {
        size_t stop;
        o += level >= 4 ? ld_pyp_decode_count(raw, n, i, dst + o, &stop, &cont, &bad)
                        : ld_pyp_decode_count_avx2(raw, n, i, dst + o, &stop, &cont, &bad);
        i = stop;
        if (i >= n) break;
        int w = decode_escape(raw, n, &i, 0, json, dst + o, e); /* one of another kind */
        if (w < 0) return -1;
        cont += w ? (size_t)w - 1 : 0; /* put_utf8's bytes after the first */
        o += (size_t)w;
    }
    *out_len = o;
    *chars = bad || ends_in_sequence(raw, n) ? ld_utf8_count_chars(dst, o) : o - cont;
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

ld_status ld_py_str_decode_into(const ld_py_value *v, char *dst, size_t *out_len, ld_error *err)
{
    if (!v || (v->kind != LD_PY_STR && v->kind != LD_PY_BYTES))
        return LD_FAIL(err, LD_ERR_USAGE, v ? v->off : 0,
                       "ld_py_str_decode: value is not a string");
    if (zero_copy(v)) {
        if (v->n) memcpy(dst, v->u.raw, v->n);
        *out_len = v->n;
        return LD_OK;
    }
    py_decode_err e;
    if (decode_into(v->u.raw, v->n, v->kind == LD_PY_BYTES, (v->flags & LD_PY_F_JSON) != 0, dst, out_len,
                    &e) < 0)
        return LD_FAIL(err, e.code, v->off + raw_skip(v) + e.at, "%s", e.what);
    return LD_OK;
}

ld_status ld_py_str_decode_count_at(int level, const ld_py_value *v, char *dst, size_t *out_len,
                                    uint64_t *out_chars, ld_error *err)
{
    if (level > ld_pyp_scan_level()) level = ld_pyp_scan_level();
    if (level < 2 || !v || v->kind != LD_PY_STR || zero_copy(v)) {
        /* copied then counted (a copy costs less than decoding) */
        LD_TRY(ld_py_str_decode_into(v, dst, out_len, err));
        *out_chars = ld_utf8_count_chars(dst, *out_len);
        return LD_OK;
    }
    py_decode_err e;
    if (decode_counted(level, v->u.raw, v->n, (v->flags & LD_PY_F_JSON) != 0, dst, out_len, out_chars, &e) < 0)
        return LD_FAIL(err, e.code, v->off + raw_skip(v) + e.at, "%s", e.what);
    return LD_OK;
}

ld_status ld_py_str_decode_count(const ld_py_value *v, char *dst, size_t *out_len, uint64_t *out_chars,
                                 ld_error *err)
{
    return ld_py_str_decode_count_at(4, v, dst, out_len, out_chars, err);
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

/* The first backslash in s[i..n), or n. */
static size_t next_backslash(const char *s, size_t i, size_t n)
{
#if defined(__SSE2__)
    const __m128i vb = _mm_set1_epi8('\\');
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, vb));
        if (m) return i + (size_t)__builtin_ctz(m);
    }
#endif
    const char *b = memchr(s + i, '\\', n - i);
    return b ? (size_t)(b - s) : n;
}

/* What the escapes of raw[0..n) take away when decoded: *less_bytes bytes
 * and *less_chars characters.  Each escape's raw bytes are ASCII and count
 * one character each in the raw text, and it decodes to one whole code
 * point, which starts with no continuation byte: the characters around it
 * stay as they were.  -1 on the first malformed escape, as decode_into
 * finds it; 1 for a backslash-newline, which decodes to nothing, so that
 * the bytes on its two sides meet (and may make one character): the caller
 * decodes and counts then. */
static int escape_walk(const char *raw, size_t n, int json, size_t i, size_t lb, size_t lc,
                       size_t *less_bytes, size_t *less_chars, py_decode_err *e);

static int escape_shrink(const char *raw, size_t n, int json, size_t *less_bytes,
                         size_t *less_chars, py_decode_err *e)
{
    size_t i, k = ld_pyp_simple_escapes(raw, n, &i); /* whole blocks of one-byte escapes */
    return escape_walk(raw, n, json, i, k, k, less_bytes, less_chars, e);
}

/* escape_shrink's byte-wise part, from raw[i] (no escape inside it), lb and
 * lc taken away already */
static int escape_walk(const char *raw, size_t n, int json, size_t i, size_t lb, size_t lc,
                       size_t *less_bytes, size_t *less_chars, py_decode_err *e)
{
    char tmp[8];
    for (;;) {
        i = next_backslash(raw, i, n);
        if (i >= n) break;
        if (i + 1 < n && simple_escape(raw[i + 1])) { /* \n \' \\ ...: two bytes, one character */
            lb++;
            lc++;
            i += 2;
            continue;
        }
        size_t at = i;
        int w = decode_escape(raw, n, &i, 0, json, tmp, e);
        if (w < 0) return -1;
        if (w == 0) return 1; /* a backslash-newline: the bytes around it meet */
        lb += (i - at) - (size_t)w;
        lc += (i - at) - 1;
    }
    *less_bytes = lb;
    *less_chars = lc;
    return 0;
}

/* ld_py_str_measure the long way, for a text whose escapes do not stand
 * alone (escape_walk's 1): decoded, then counted. */
static ld_status measure_decoded(const ld_py_value *v, size_t *out_len, uint64_t *out_chars, ld_error *err)
{
    char *buf = malloc(v->n ? v->n : 1);
    if (!buf)
        return LD_FAIL(err, LD_ERR_NOMEM, v->off, "cannot allocate %u bytes for a decoded string", v->n);
    ld_status st = ld_py_str_decode_count(v, buf, out_len, out_chars, err);
    free(buf);
    return st;
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,bmi,bmi2,popcnt")))
static void measure_avx512(const unsigned char *u, size_t n, size_t *cont_out, int *valid,
                           size_t *simple_out, size_t *stop);
#endif

ld_status ld_py_str_measure(const ld_py_value *v, size_t *out_len, uint64_t *out_chars,
                            ld_error *err)
{
    if (!v || v->kind != LD_PY_STR)
        return LD_FAIL(err, LD_ERR_USAGE, v ? v->off : 0,
                       "ld_py_str_measure: value is not a str");
    py_decode_err e;
    size_t lb, lc, chars;
    int json = (v->flags & LD_PY_F_JSON) != 0;
    if (zero_copy(v)) {
        *out_len = v->n;
        *out_chars = ld_utf8_count_chars(v->u.raw, v->n);
        return LD_OK;
    }
#if defined(__GNUC__) && defined(__x86_64__)
    if (v->n >= 64 && ld_pyp_scan_level() >= 3) { /* one pass: characters and escapes */
        size_t cont, simple, stop;
        int valid;
        measure_avx512((const unsigned char *)v->u.raw, v->n, &cont, &valid, &simple, &stop);
        chars = valid ? v->n - cont : ld_utf8_count_chars_scalar(v->u.raw, v->n);
        int rc = escape_walk(v->u.raw, v->n, json, stop, simple, simple, &lb, &lc, &e);
        if (rc < 0) return LD_FAIL(err, e.code, v->off + raw_skip(v) + e.at, "%s", e.what);
        if (rc > 0) return measure_decoded(v, out_len, out_chars, err);
        *out_len = v->n - lb;
        *out_chars = chars - lc;
        return LD_OK;
    }
#endif
    chars = ld_utf8_count_chars(v->u.raw, v->n);
    int rc = escape_shrink(v->u.raw, v->n, json, &lb, &lc, &e);
    if (rc < 0) return LD_FAIL(err, e.code, v->off + raw_skip(v) + e.at, "%s", e.what);
    if (rc > 0) return measure_decoded(v, out_len, out_chars, err);
    *out_len = v->n - lb;
    *out_chars = chars - lc;
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

size_t ld_utf8_count_chars_scalar(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, count = 0;
    while (i < len) {
        /* ASCII runs dominate prompts: eight bytes at a time. */
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

#if defined(__SSE2__)
/* Popcount of a 16-bit mask without a popcount instruction. */
static unsigned mask_bits16(unsigned m)
{
    m = m - ((m >> 1) & 0x5555u);
    m = (m & 0x3333u) + ((m >> 2) & 0x3333u);
    m = (m + (m >> 4)) & 0x0F0Fu;
    return (m + (m >> 8)) & 0x1Fu;
}

static __m128i lt8(__m128i x, int v) { return _mm_cmplt_epi8(x, _mm_set1_epi8((char)v)); }
static __m128i gt8(__m128i x, int v) { return _mm_cmpgt_epi8(x, _mm_set1_epi8((char)v)); }
static __m128i eq8(__m128i x, int v) { return _mm_cmpeq_epi8(x, _mm_set1_epi8((char)v)); }
/* x >= v, bytes unsigned */
static __m128i geu8(__m128i x, int v) { return _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8((char)v)), x); }

/* The bytes of x (p1, p2, p3: the bytes one, two, three before each) that
 * break seq_len's rules, as a mask: a continuation byte where none is due
 * or none where one is (after a lead, the third byte after E0-EF, the
 * fourth after F0-F4), leads C0 C1 F5-FF, and the second-byte limits of
 * E0 (A0-BF), F0 (90-BF) and F4 (80-8F).  Signed compares where only
 * continuation bytes matter (0x80-0xBF are -128..-65). */
static __m128i utf8_errors(__m128i x, __m128i p1, __m128i p2, __m128i p3)
{
    __m128i cont = lt8(x, -64);
    __m128i due = _mm_or_si128(geu8(p1, 0xC0), _mm_or_si128(geu8(p2, 0xE0), geu8(p3, 0xF0)));
    __m128i bad = _mm_or_si128(_mm_xor_si128(cont, due), geu8(x, 0xF5));
    bad = _mm_or_si128(bad, _mm_or_si128(eq8(x, -64), eq8(x, -63)));     /* C0 C1 */
    bad = _mm_or_si128(bad, _mm_and_si128(eq8(p1, -32), lt8(x, -96)));  /* E0 then 80-9F */
    bad = _mm_or_si128(bad, _mm_and_si128(eq8(p1, -16), lt8(x, -112))); /* F0 then 80-8F */
    /* F4 then 90-BF (or a byte that is no continuation: an error already) */
    return _mm_or_si128(bad, _mm_and_si128(eq8(p1, -12), gt8(x, -113)));
}

/* The first sixteen bytes of a text (nothing before them): 1 when they
 * break a rule, else their continuation bytes added to *cont. */
static int first_block_bad(const unsigned char *u, size_t *cont)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)u);
    __m128i errs = utf8_errors(x, _mm_slli_si128(x, 1), _mm_slli_si128(x, 2), _mm_slli_si128(x, 3));
    *cont += mask_bits16((unsigned)_mm_movemask_epi8(lt8(x, -64)));
    return _mm_movemask_epi8(errs) != 0;
}

/* a sequence the text ends inside */
static int ends_inside(const unsigned char *u, size_t len)
{
    return u[len - 1] >= 0xC0 || u[len - 2] >= 0xE0 || u[len - 3] >= 0xF0;
}

/* ld_utf8_count_chars for text that is valid UTF-8 (WTF-8 surrogates
 * allowed), sixteen bytes a step: there every character is one byte that is
 * not a continuation byte.  Returns 0 when the text breaks a rule anywhere
 * (the byte-wise count decides then).  len >= 32, so that the last block
 * and the three bytes before it lie in the text. */
static int count_valid_sse2(const unsigned char *u, size_t len, size_t *out)
{
    __m128i errs = _mm_setzero_si128();
    size_t cont = 0;
    if (first_block_bad(u, &cont)) return 0;
    for (size_t i = 16; i < len; i += 16) {
        size_t at = i + 16 <= len ? i : len - 16; /* the last block overlaps */
        unsigned fresh = 0xFFFFu << (i - at);     /* bytes not counted yet */
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(u + at));
        __m128i p3 = _mm_loadu_si128((const __m128i *)(const void *)(u + at - 3));
        if (!_mm_movemask_epi8(_mm_or_si128(x, p3))) continue; /* ASCII, and so the 3 before */
        __m128i p1 = _mm_loadu_si128((const __m128i *)(const void *)(u + at - 1));
        __m128i p2 = _mm_loadu_si128((const __m128i *)(const void *)(u + at - 2));
        errs = _mm_or_si128(errs, utf8_errors(x, p1, p2, p3));
        cont += mask_bits16((unsigned)_mm_movemask_epi8(lt8(x, -64)) & fresh & 0xFFFFu);
    }
    if (_mm_movemask_epi8(errs) || ends_inside(u, len)) return 0;
    *out = len - cont;
    return 1;
}
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

#define LT8_256(x, v) _mm256_cmpgt_epi8(_mm256_set1_epi8((char)(v)), (x))
#define GT8_256(x, v) _mm256_cmpgt_epi8((x), _mm256_set1_epi8((char)(v)))
#define EQ8_256(x, v) _mm256_cmpeq_epi8((x), _mm256_set1_epi8((char)(v)))
#define GEU8_256(x, v) _mm256_cmpeq_epi8(_mm256_max_epu8((x), _mm256_set1_epi8((char)(v))), (x))

/* utf8_errors, 32 bytes */
__attribute__((target("avx2")))
static __m256i utf8_errors_avx2(__m256i x, __m256i p1, __m256i p2, __m256i p3)
{
    __m256i cont = LT8_256(x, -64);
    __m256i due = _mm256_or_si256(GEU8_256(p1, 0xC0), _mm256_or_si256(GEU8_256(p2, 0xE0), GEU8_256(p3, 0xF0)));
    __m256i bad = _mm256_or_si256(_mm256_xor_si256(cont, due), GEU8_256(x, 0xF5));
    bad = _mm256_or_si256(bad, _mm256_or_si256(EQ8_256(x, -64), EQ8_256(x, -63)));
    bad = _mm256_or_si256(bad, _mm256_and_si256(EQ8_256(p1, -32), LT8_256(x, -96)));
    bad = _mm256_or_si256(bad, _mm256_and_si256(EQ8_256(p1, -16), LT8_256(x, -112)));
    return _mm256_or_si256(bad, _mm256_and_si256(EQ8_256(p1, -12), GT8_256(x, -113)));
}

/* count_valid_sse2 32 bytes a step after the first sixteen; len >= 48 */
__attribute__((target("avx2,popcnt")))
static int count_valid_avx2(const unsigned char *u, size_t len, size_t *out)
{
    __m256i errs = _mm256_setzero_si256();
    size_t cont = 0;
    if (first_block_bad(u, &cont)) return 0;
    for (size_t i = 16; i < len; i += 32) {
        size_t at = i + 32 <= len ? i : len - 32;  /* the last block overlaps */
        uint32_t fresh = 0xFFFFFFFFu << (i - at); /* bytes not counted yet */
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(u + at));
        __m256i p3 = _mm256_loadu_si256((const __m256i *)(const void *)(u + at - 3));
        if (!_mm256_movemask_epi8(_mm256_or_si256(x, p3))) continue;
        __m256i p1 = _mm256_loadu_si256((const __m256i *)(const void *)(u + at - 1));
        __m256i p2 = _mm256_loadu_si256((const __m256i *)(const void *)(u + at - 2));
        errs = _mm256_or_si256(errs, utf8_errors_avx2(x, p1, p2, p3));
        cont += (size_t)__builtin_popcount((uint32_t)_mm256_movemask_epi8(LT8_256(x, -64)) & fresh);
    }
    if (_mm256_movemask_epi8(errs) || ends_inside(u, len)) return 0;
    *out = len - cont;
    return 1;
}
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#define LT8_512(x, v) _mm512_cmplt_epi8_mask((x), _mm512_set1_epi8((char)(v)))
#define GT8_512(x, v) _mm512_cmpgt_epi8_mask((x), _mm512_set1_epi8((char)(v)))
#define EQ8_512(x, v) _mm512_cmpeq_epi8_mask((x), _mm512_set1_epi8((char)(v)))
#define GEU8_512(x, v) _mm512_cmpge_epu8_mask((x), _mm512_set1_epi8((char)(v)))

/* utf8_errors, 64 bytes into a mask */
__attribute__((target("avx512f,avx512bw,bmi,bmi2,popcnt")))
static uint64_t utf8_errors_avx512(__m512i x, __m512i p1, __m512i p2, __m512i p3)
{
    uint64_t cont = LT8_512(x, -64);
    uint64_t due = GEU8_512(p1, 0xC0) | GEU8_512(p2, 0xE0) | GEU8_512(p3, 0xF0);
    uint64_t bad = (cont ^ due) | GEU8_512(x, 0xF5) | EQ8_512(x, -64) | EQ8_512(x, -63);
    bad |= EQ8_512(p1, -32) & LT8_512(x, -96);
    bad |= EQ8_512(p1, -16) & LT8_512(x, -112);
    return bad | (EQ8_512(p1, -12) & GT8_512(x, -113));
}

/* count_valid_avx2 64 bytes a step (AVX-512BW); len >= 80 */
__attribute__((target("avx512f,avx512bw,bmi,bmi2,popcnt")))
static int count_valid_avx512(const unsigned char *u, size_t len, size_t *out)
{
    uint64_t errs = 0;
    size_t cont = 0;
    if (first_block_bad(u, &cont)) return 0;
    for (size_t i = 16; i < len; i += 64) {
        size_t at = i + 64 <= len ? i : len - 64; /* the last block overlaps */
        uint64_t fresh = ~0ull << (i - at);       /* bytes not counted yet */
        __m512i x = _mm512_loadu_si512((const void *)(u + at));
        __m512i p3 = _mm512_loadu_si512((const void *)(u + at - 3));
        if (!_mm512_movepi8_mask(_mm512_or_si512(x, p3))) continue; /* ASCII, and so the 3 before */
        __m512i p1 = _mm512_loadu_si512((const void *)(u + at - 1));
        __m512i p2 = _mm512_loadu_si512((const void *)(u + at - 2));
        errs |= utf8_errors_avx512(x, p1, p2, p3);
        cont += (size_t)__builtin_popcountll(LT8_512(x, -64) & fresh);
    }
    if (errs || ends_inside(u, len)) return 0;
    *out = len - cont;
    return 1;
}
#endif

#if defined(__GNUC__) && defined(__x86_64__)
/* ld_py_str_measure's one pass over an escaped string of n >= 64 bytes
 * (AVX-512BW): its continuation bytes and whether it is valid UTF-8
 * (count_valid_avx512's rules: *valid 0 sends the count to the byte-wise
 * one), and its one-byte escapes up to the first of another kind (*stop,
 * as ld_pyp_simple_escapes gives it; n when there is none).  The first
 * block reads the three bytes before it as zeros from a copy, the last one
 * through a mask. */
__attribute__((target("avx512f,avx512bw,bmi,bmi2,popcnt")))
static void measure_avx512(const unsigned char *u, size_t n, size_t *cont_out, int *valid,
                           size_t *simple_out, size_t *stop)
{
    const block_classes c = block_classes_avx512();
    unsigned char first[3 + 64] = { 0 };
    memcpy(first + 3, u, 64);
    uint64_t carry = 0, errs = 0;
    size_t cont = 0, simple = 0;
    int counting = 1;
    *stop = n;
    for (size_t i = 0; i < n; i += 64) {
        uint64_t m = n - i >= 64 ? ~0ull : (1ull << (n - i)) - 1;
        const unsigned char *at = i ? u + i : first + 3; /* the first block: zeros before it */
        __m512i x = _mm512_maskz_loadu_epi8(m, at);
        if (counting) {
            uint64_t bs, sm;
            classify_block_avx512(x, &c, &bs, &sm);
            uint64_t esc = escaped_bytes(bs, &carry) & m, other = esc & ~sm;
            if (other) {
                unsigned k = (unsigned)__builtin_ctzll(other);
                simple += (size_t)__builtin_popcountll(esc & ((1ull << k) - 1));
                *stop = i + k - 1;
                counting = 0;
            } else {
                simple += (size_t)__builtin_popcountll(esc);
            }
        }
        __m512i p3 = _mm512_maskz_loadu_epi8(m, at - 3);
        if (!_mm512_movepi8_mask(_mm512_or_si512(x, p3))) continue; /* ASCII, and so the 3 before */
        __m512i p1 = _mm512_maskz_loadu_epi8(m, at - 1);
        __m512i p2 = _mm512_maskz_loadu_epi8(m, at - 2);
        errs |= utf8_errors_avx512(x, p1, p2, p3) & m;
        cont += (size_t)__builtin_popcountll(LT8_512(x, -64) & m);
    }
    *cont_out = cont;
    *valid = !errs && !ends_inside(u, n);
    *simple_out = simple;
}
#endif

size_t ld_utf8_count_chars_at(int level, const char *s, size_t len)
{
#if defined(__GNUC__) && defined(__x86_64__)
    size_t n;
    const unsigned char *u = (const unsigned char *)s;
    if (level >= 3 && len >= 80 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2"))
        return count_valid_avx512(u, len, &n) ? n : ld_utf8_count_chars_scalar(s, len);
    if (level >= 2 && len >= 48 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt"))
        return count_valid_avx2(u, len, &n) ? n : ld_utf8_count_chars_scalar(s, len);
#endif
    if (level >= 1) return ld_utf8_count_chars_sse2(s, len);
    return ld_utf8_count_chars_scalar(s, len);
}

size_t ld_utf8_count_chars_sse2(const char *s, size_t len)
{
#if defined(__SSE2__)
    size_t n;
    if (len >= 32 && count_valid_sse2((const unsigned char *)s, len, &n)) return n;
#endif
    return ld_utf8_count_chars_scalar(s, len);
}

size_t ld_utf8_count_chars(const char *s, size_t len)
{
    return ld_utf8_count_chars_at(3, s, len);
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
