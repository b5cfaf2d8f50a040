/* tpl_parse_util.c - the parser's tokens, nodes, names and errors (see
 * tpl_parser.h). */
#include <stdlib.h>
#include <string.h>

#include "tpl_parser.h"

const tpl_token *tpl_p_cur(parser *p) { return &p->toks->v[p->i < p->toks->n ? p->i : p->toks->n - 1]; }

ld_status tpl_p_pfail(parser *p, const tpl_token *at, ld_status code, const char *what)
{
    uint64_t line, col;
    size_t off = at ? at->off : p->t->src_len;
    ld_tpl_line_col(p->t->src, off, &line, &col);
    LD_FAIL(p->err, code, off, "%s at column %llu", what, (unsigned long long)col);
    if (p->err) p->err->line = line;
    return code;
}

bool tpl_p_tok_is(const tpl_token *k, int type, const char *s)
{
    if (k->type != type) return false;
    if (!s) return true;
    return strlen(s) == k->len && memcmp(k->s, s, k->len) == 0;
}
bool tpl_p_at_op(parser *p, const char *s) { return tpl_p_tok_is(tpl_p_cur(p), TK_OP, s); }
bool tpl_p_at_name(parser *p, const char *s) { return tpl_p_tok_is(tpl_p_cur(p), TK_NAME, s); }

ld_status tpl_p_expect_op(parser *p, const char *s)
{
    if (!tpl_p_at_op(p, s)) {
        char m[64];
        snprintf(m, sizeof m, "expected '%s'", s);
        return tpl_p_pfail(p, tpl_p_cur(p), tpl_p_cur(p)->type == TK_EOF ? LD_ERR_TRUNCATED : LD_ERR_SYNTAX, m);
    }
    p->i++;
    return LD_OK;
}

tpl_node *tpl_p_node(parser *p, int kind, uint32_t off)
{
    tpl_node *n = ld_arena_alloc(&p->t->arena, sizeof *n);
    if (n) memset(n, 0, sizeof *n), n->kind = (uint8_t)kind, n->off = off;
    return n;
}

bool tpl_p_vpush(nvec *v, tpl_node *n)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        tpl_node **nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return false;
        v->v = nv, v->cap = cap;
    }
    v->v[v->n++] = n;
    return true;
}

bool tpl_p_vfinish(parser *p, nvec *v, tpl_nodes *out)
{
    out->n = v->n;
    out->v = NULL;
    if (v->n) {
        out->v = ld_arena_alloc(&p->t->arena, v->n * sizeof *out->v);
        if (out->v) memcpy(out->v, v->v, v->n * sizeof *out->v);
    }
    free(v->v);
    v->v = NULL, v->n = v->cap = 0;
    return !out->n || out->v;
}

/* The index of the name s[0..len) among the template's names, added when
 * new (-1 without memory): every use of a name points at one copy, so that
 * keys made from names compare by pointer first, and the index is the
 * name's slot, by which the render finds a variable (eval/tpl_scope.c). */
long tpl_p_intern(parser *p, const char *s, size_t len)
{
    for (size_t i = 0; i < p->n_names; i++)
        if (strncmp(p->names[i], s, len) == 0 && p->names[i][len] == 0) return (long)i;
    if (p->n_names == p->cap_names) {
        size_t cap = p->cap_names ? 2 * p->cap_names : 64;
        const char **v = realloc(p->names, cap * sizeof *v);
        if (!v) return -1;
        p->names = v, p->cap_names = cap;
    }
    const char *c = ld_arena_memdup(&p->t->arena, s, len);
    if (!c) return -1;
    p->names[p->n_names] = c;
    return (long)p->n_names++;
}

/* The token's text, interned. */
const char *tpl_p_tok_str(parser *p, const tpl_token *k)
{
    long i = tpl_p_intern(p, k->s, k->len);
    return i < 0 ? NULL : p->names[i];
}

/* n names the token k: its text, interned, and its slot; false without
 * memory. */
bool tpl_p_set_name(parser *p, tpl_node *n, const tpl_token *k)
{
    long i = tpl_p_intern(p, k->s, k->len);
    if (i < 0) return false;
    n->s = p->names[i], n->s_len = k->len, n->slot = (uint32_t)i;
    return true;
}

/* The slot of a name tok_str returned. */
uint32_t tpl_p_slot_of(const parser *p, const char *name)
{
    size_t i = 0;
    while (i + 1 < p->n_names && p->names[i] != name) i++;
    return (uint32_t)i;
}

ld_status tpl_p_enter(parser *p)
{
    if (++p->depth > MAX_PARSE_DEPTH) return tpl_p_pfail(p, tpl_p_cur(p), LD_ERR_LIMIT, "expression nested too deeply");
    return LD_OK;
}
