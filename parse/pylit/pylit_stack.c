/* pylit_stack.c - the parser's errors (a byte not wanted, the input cut,
 * memory), the depth limit and the scratch stack of finished children,
 * copied into one arena array when their container closes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pylit_internal.h"

/* Error for a byte that is not what the grammar wants: shows the byte
 * readably, since it may be a control byte or part of a UTF-8 sequence. */
ld_status ld_pyp_bad_byte(py_parser *p, size_t at, const char *expected)
{
    unsigned char c = (unsigned char)p->buf[at];
    if (c >= 0x20 && c < 0x7f)
        return LD_FAIL(p->err, LD_ERR_SYNTAX, at, "expected %s, found '%c'",
                       expected, c);
    return LD_FAIL(p->err, LD_ERR_SYNTAX, at, "expected %s, found byte 0x%02x",
                   expected, c);
}

/* The input ended where more was needed: the log line was cut. */
ld_status ld_pyp_eof_err(py_parser *p, const char *expected)
{
    return LD_FAIL(p->err, LD_ERR_TRUNCATED, p->len,
                   "input ends where %s was expected", expected);
}

ld_status ld_pyp_nomem(py_parser *p, size_t n)
{
    return LD_FAIL(p->err, LD_ERR_NOMEM, p->pos,
                   "cannot allocate %zu bytes for parsed values", n);
}

ld_status ld_pyp_grow_stack(py_parser *p)
{
    size_t cap = p->cap ? p->cap * 2 : PY_STACK_INIT;
    int local = p->stk && p->stk == p->local;
    ld_py_value *s = local ? malloc(cap * sizeof *s) : realloc(p->stk, cap * sizeof *s);
    if (!s) return ld_pyp_nomem(p, cap * sizeof *s);
    if (local) memcpy(s, p->local, p->sp * sizeof *s);
    p->stk = s;
    p->cap = cap;
    return LD_OK;
}


ld_status ld_pyp_enter(py_parser *p, size_t at)
{
    if (p->depth >= p->max_depth)
        return LD_FAIL(p->err, LD_ERR_LIMIT, at, "nesting deeper than %u",
                       (unsigned)p->max_depth);
    p->depth++;
    return LD_OK;
}

/* Moves the children pushed since `base` into one arena array. */
ld_status ld_pyp_pop_items(py_parser *p, size_t base, ld_py_value **out_items)
{
    size_t n = p->sp - base;
    *out_items = NULL;
    if (n) {
        ld_py_value *items = ld_arena_alloc(p->arena, n * sizeof *items);
        if (!items) return ld_pyp_nomem(p, n * sizeof *items);
        memcpy(items, p->stk + base, n * sizeof *items);
        *out_items = items;
    }
    p->sp = base;
    return LD_OK;
}

/* LD_PY_F_MARKED for a container whose children are stk[base, sp): a scan
 * only in the rare parses that met a logger marker at all. */
uint8_t ld_pyp_marks_of_children(const py_parser *p, size_t base)
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

ld_status ld_pyp_make_container(py_parser *p, ld_py_value *out, ld_py_kind kind,
                                size_t start, size_t base)
{
    size_t n = p->sp - base;
    if (kind == LD_PY_DICT) n /= 2;
    if (n > UINT32_MAX)
        return LD_FAIL(p->err, LD_ERR_LIMIT, start,
                       "container with more than 2^32 items");
    out->kind = (uint8_t)kind;
    out->flags = ld_pyp_marks_of_children(p, base);
    out->n = (uint32_t)n;
    out->off = start;
    p->depth--;
    return ld_pyp_pop_items(p, base, &out->u.items);
}
