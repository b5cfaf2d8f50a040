/* pylit_internal.h - the Python-literal parser's state and what its files
 * share: pylit.c (the grammar: strings, containers, calls, words, the entry
 * points), pylit_intlist.c (the fast paths of token-id lists),
 * pylit_number.c (numbers), pylit_json_read.c (JSON text: its keywords and
 * SGLang's JSON-mode truncation) and pylit_stack.c (errors, the scratch stack of
 * finished children, containers made from it), each calling only those
 * after it; and pylit_str.c's byte-wise UTF-8 count, for the tests of its
 * SIMD path.  The hot helpers are inline here.  Not public. */
#ifndef LD_PYLIT_INTERNAL_H
#define LD_PYLIT_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "pylit.h"

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
    int json;         /* JSON text (ld_pylit_parse_json): pylit_json_read.c */
    uint32_t json_half; /* JSON-mode truncation: head and tail of this many */
} py_parser;

static inline int is_digit(unsigned char c) { return (unsigned)(c - '0') < 10u; }

static inline int is_ident_start(unsigned char c)
{
    return (unsigned)((c | 0x20) - 'a') < 26u || c == '_';
}

static inline int is_ident_char(unsigned char c)
{
    return is_ident_start(c) || is_digit(c);
}

static inline void skip_ws(py_parser *p)
{
    while (p->pos < p->len) {
        char c = p->buf[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* ---- pylit_stack.c */
uint8_t ld_pyp_marks_of_children(const py_parser *p, size_t base);
ld_status ld_pyp_bad_byte(py_parser *p, size_t at, const char *expected);
ld_status ld_pyp_eof_err(py_parser *p, const char *expected);
ld_status ld_pyp_nomem(py_parser *p, size_t n);
ld_status ld_pyp_grow_stack(py_parser *p);
ld_status ld_pyp_enter(py_parser *p, size_t at);
ld_status ld_pyp_pop_items(py_parser *p, size_t base, ld_py_value **out_items);
ld_status ld_pyp_make_container(py_parser *p, ld_py_value *out, ld_py_kind kind, size_t start, size_t base);

static inline ld_status push(py_parser *p, const ld_py_value *v)
{
    if (p->sp == p->cap) LD_TRY(ld_pyp_grow_stack(p));
    p->stk[p->sp++] = *v;
    return LD_OK;
}

/* ---- pylit_number.c */
ld_status ld_pyp_parse_number(py_parser *p, ld_py_value *out);

/* Token-id lists: up to 18 digits followed by ',', ']' or a space are an
 * int64 for sure, so skip the general number scanner.  Returns 0 (and
 * leaves p->pos alone) when the general path must decide. */
static inline int try_small_int(py_parser *p, ld_py_value *out)
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

/* ---- pylit_json_read.c: what JSON text adds to the grammar */
ld_status ld_pyp_json_word(py_parser *p, ld_py_value *out);
/* a JSON string just parsed: SGLang's cut one becomes LD_PY_TRUNC */
ld_status ld_pyp_json_cut(py_parser *p, ld_py_value *str);
void ld_pyp_json_list_marker(py_parser *p, size_t base);
/* whether s[0..n) holds "..." (SIMD; the same answer as memmem) */
int ld_pyp_has_dots(const char *s, size_t n);

/* ---- pylit_str.c: ld_utf8_count_chars's byte-wise path, which the SIMD
 * one must always agree with (tests) */
size_t ld_utf8_count_chars_scalar(const char *s, size_t len);
/* ... and its SSE2 path (ld_utf8_count_chars takes AVX2 where it can) */
size_t ld_utf8_count_chars_sse2(const char *s, size_t len);

/* ---- pylit_intlist.c */
int ld_pyp_int_list_direct(py_parser *p, ld_py_value *out);
ld_status ld_pyp_int_run(py_parser *p, char close);

#endif /* LD_PYLIT_INTERNAL_H */
