/* pylit_json_read.c - JSON text read by the Python-literal parser
 * (ld_pylit_parse_json, pylit.h).  Python's json.dumps writes what repr
 * writes for numbers, lists and dicts, so the parser's fast paths (token-id
 * lists skimmed or parsed eight digits at a time, strings found with one
 * SIMD scan and decoded only on demand) serve SGLang's JSON-mode lines as
 * they serve its text lines.  What JSON adds is here: its keywords, and
 * SGLang's JSON-mode truncation, which marks a cut value inside it (a
 * string cut to head + "..." + tail, a list to head + ["..."] + tail, each
 * of an exact length) where text mode writes `head ... tail` around it. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <math.h>
#include <string.h>

#include "pylit_internal.h"

static void set_word(ld_py_value *out, ld_py_kind kind, size_t start, int64_t i, double f)
{
    out->kind = (uint8_t)kind;
    out->flags = 0;
    out->n = 0;
    out->off = start;
    if (kind == LD_PY_FLOAT) out->u.f = f;
    else out->u.i = i;
}

/* null, true, false, and the NaN / Infinity / -Infinity json.dumps writes
 * for non-finite floats. */
ld_status ld_pyp_json_word(py_parser *p, ld_py_value *out)
{
    size_t start = p->pos, i = start + (p->buf[start] == '-');
    while (i < p->len && is_ident_char((unsigned char)p->buf[i])) i++;
    const char *w = p->buf + start;
    size_t n = i - start;
    static const struct { const char *w; ld_py_kind kind; int64_t i; double f; } words[] = {
        {"null", LD_PY_NONE, 0, 0}, {"true", LD_PY_BOOL, 1, 0}, {"false", LD_PY_BOOL, 0, 0},
        {"NaN", LD_PY_FLOAT, 0, NAN}, {"Infinity", LD_PY_FLOAT, 0, INFINITY},
        {"-Infinity", LD_PY_FLOAT, 0, -INFINITY},
    };
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t wn = strlen(words[k].w);
        if (n == wn && memcmp(w, words[k].w, n) == 0) {
            set_word(out, words[k].kind, start, words[k].i, words[k].f);
            p->pos = i;
            return LD_OK;
        }
        if (i >= p->len && n < wn && memcmp(w, words[k].w, n) == 0)
            return ld_pyp_eof_err(p, "a JSON keyword");
    }
    return ld_pyp_bad_byte(p, start, "a JSON value");
}

/* Byte offset of code point k of s[0..n) (UTF-8). */
static size_t cp_offset(const char *s, size_t n, uint64_t k)
{
    size_t i = 0;
    while (i < n && k > 0) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        k--;
    }
    return i;
}

static void set_json_str(ld_py_value *v, const char *s, size_t n, uint64_t off)
{
    memset(v, 0, sizeof *v);
    v->kind = LD_PY_STR;
    v->flags = LD_PY_F_JSON | LD_PY_F_DQUOTE;
    v->n = (uint32_t)n;
    v->off = off;
    v->u.raw = s;
}

/* Whether s[0..n) holds "..." (memmem's answer, sixteen starting bytes a
 * step: prompts are long and glibc's memmem spends several instructions a
 * byte on a three-byte needle). */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* 62 starting bytes a step: the dots of 64 bytes as a mask, three in a row
 * where a bit and the two above it are set */
__attribute__((target("avx512f,avx512bw,bmi,bmi2")))
static size_t dots_avx512(const char *s, size_t n, int *found)
{
    const __m512i dot = _mm512_set1_epi8('.');
    size_t i = 0;
    for (; i + 64 <= n; i += 62) {
        uint64_t m = _mm512_cmpeq_epi8_mask(_mm512_loadu_si512((const void *)(s + i)), dot);
        if (m & (m >> 1) & (m >> 2) & ((1ull << 62) - 1)) {
            *found = 1;
            return i;
        }
    }
    *found = 0;
    return i;
}
#endif

int ld_pyp_has_dots(const char *s, size_t n)
{
    return ld_pyp_has_dots_at(3, s, n);
}

int ld_pyp_has_dots_at(int level, const char *s, size_t n)
{
    size_t i = 0;
#if defined(__GNUC__) && defined(__x86_64__)
    if (level >= 3 && n >= 64 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2")) {
        int found;
        i = dots_avx512(s, n, &found);
        if (found) return 1;
    }
#endif
#if defined(__SSE2__)
    if (level < 1) goto bytes;
    const __m128i dot = _mm_set1_epi8('.');
    for (; i + 18 <= n; i += 16) {
        __m128i a = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i)), dot);
        __m128i b = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i + 1)), dot);
        __m128i c = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i + 2)), dot);
        if (_mm_movemask_epi8(_mm_and_si128(_mm_and_si128(a, b), c))) return 1;
    }
bytes:
#endif
    for (; i + 3 <= n; i++)
        if (s[i] == '.' && s[i + 1] == '.' && s[i + 2] == '.') return 1;
    return 0;
}

/* A string SGLang cut: exactly 2*half+3 code points with "..." after the
 * first `half`.  Only strings whose byte length allows it are decoded and
 * counted (a code point is 1 to 4 bytes, an escape up to 12). */
static ld_status maybe_cut(py_parser *p, ld_py_value *v)
{
    uint64_t want = 2 * (uint64_t)p->json_half + 3;
    if (v->n < want || v->n > 12 * want) return LD_OK;
    /* JSON never escapes '.': without "..." in its text it was not cut */
    if (!ld_pyp_has_dots(v->u.raw, v->n)) return LD_OK;
    const char *s;
    size_t n;
    ld_error e;
    if (ld_py_str_decode(v, p->arena, &s, &n, &e) != LD_OK) return LD_OK; /* left as it is */
    if (n > 4 * want || ld_utf8_count_chars(s, n) != want) return LD_OK;
    size_t a = cp_offset(s, n, p->json_half);
    if (a + 3 > n || memcmp(s + a, "...", 3) != 0) return LD_OK;
    ld_py_value *it = ld_arena_alloc(p->arena, 2 * sizeof *it);
    if (!it) return ld_pyp_nomem(p, 2 * sizeof *it);
    /* the halves are decoded text: no escapes left in them */
    set_json_str(&it[0], s, a, v->off);
    set_json_str(&it[1], s + a + 3, n - a - 3, v->off);
    p->n_markers++;
    v->kind = LD_PY_TRUNC;
    v->flags = 0;
    v->n = 2;
    v->u.items = it;
    return LD_OK;
}

ld_status ld_pyp_json_cut(py_parser *p, ld_py_value *str)
{
    return maybe_cut(p, str);
}

/* A list SGLang cut: exactly 2*half+1 items, the middle one the string
 * "...": that item becomes the ellipsis marker.  Its items are the
 * parser's stack from `base`. */
void ld_pyp_json_list_marker(py_parser *p, size_t base)
{
    uint64_t half = p->json_half;
    if (p->sp - base != 2 * half + 1) return;
    ld_py_value *mid = &p->stk[base + half];
    if (mid->kind != LD_PY_STR || mid->n != 3 || memcmp(mid->u.raw, "...", 3) != 0) return;
    mid->kind = LD_PY_ELLIPSIS;
    mid->flags = 0;
    mid->n = 0;
    p->n_markers++;
}
