/* tpl_parse.c - recursive-descent parser from tokens to the AST, following
 * jinja2's grammar (parser.py): statements if/elif/else, for (with tuple
 * targets, `if` filter, else and `recursive`), set (name, tuple, ns.attr,
 * block), macro, call blocks, filter blocks, break/continue ({% raw %} is
 * the lexer's); expressions with jinja2's precedence (or < and < not <
 * compare < + - < ~ < * / // % < ** < unary < filters/tests < postfix). */
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

#define MAX_PARSE_DEPTH 200

typedef struct parser {
    ld_tpl *t;
    const tpl_tokens *toks;
    size_t i;
    int depth;
    ld_error *err;
    uint8_t refs; /* names `varargs` (1) / `kwargs` (2) seen in the macro being parsed */
    size_t loop_refs; /* names `loop` seen so far (a for loop's body that adds none needs no `loop`) */
    const char **names; /* every distinct name so far, once (intern); malloc'd; index = slot */
    size_t n_names, cap_names;
} parser;

typedef struct nvec {
    tpl_node **v;
    size_t n, cap;
} nvec;

static const tpl_token *cur(parser *p) { return &p->toks->v[p->i < p->toks->n ? p->i : p->toks->n - 1]; }

static ld_status pfail(parser *p, const tpl_token *at, ld_status code, const char *what)
{
    uint64_t line, col;
    size_t off = at ? at->off : p->t->src_len;
    ld_tpl_line_col(p->t->src, off, &line, &col);
    LD_FAIL(p->err, code, off, "%s at column %llu", what, (unsigned long long)col);
    if (p->err) p->err->line = line;
    return code;
}

static bool tok_is(const tpl_token *k, int type, const char *s)
{
    if (k->type != type) return false;
    if (!s) return true;
    return strlen(s) == k->len && memcmp(k->s, s, k->len) == 0;
}
static bool at_op(parser *p, const char *s) { return tok_is(cur(p), TK_OP, s); }
static bool at_name(parser *p, const char *s) { return tok_is(cur(p), TK_NAME, s); }

static ld_status expect_op(parser *p, const char *s)
{
    if (!at_op(p, s)) {
        char m[64];
        snprintf(m, sizeof m, "expected '%s'", s);
        return pfail(p, cur(p), cur(p)->type == TK_EOF ? LD_ERR_TRUNCATED : LD_ERR_SYNTAX, m);
    }
    p->i++;
    return LD_OK;
}

static tpl_node *node(parser *p, int kind, uint32_t off)
{
    tpl_node *n = ld_arena_alloc(&p->t->arena, sizeof *n);
    if (n) memset(n, 0, sizeof *n), n->kind = (uint8_t)kind, n->off = off;
    return n;
}

static bool vpush(nvec *v, tpl_node *n)
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

static bool vfinish(parser *p, nvec *v, tpl_nodes *out)
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
static long intern(parser *p, const char *s, size_t len)
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
static const char *tok_str(parser *p, const tpl_token *k)
{
    long i = intern(p, k->s, k->len);
    return i < 0 ? NULL : p->names[i];
}

/* n names the token k: its text, interned, and its slot; false without
 * memory. */
static bool set_name(parser *p, tpl_node *n, const tpl_token *k)
{
    long i = intern(p, k->s, k->len);
    if (i < 0) return false;
    n->s = p->names[i], n->s_len = k->len, n->slot = (uint32_t)i;
    return true;
}

/* The slot of a name tok_str returned. */
static uint32_t slot_of(const parser *p, const char *name)
{
    size_t i = 0;
    while (i + 1 < p->n_names && p->names[i] != name) i++;
    return (uint32_t)i;
}

static ld_status parse_expr(parser *p, tpl_node **out);
static ld_status parse_or(parser *p, tpl_node **out);
static ld_status parse_unary(parser *p, bool with_filter, tpl_node **out);
static ld_status parse_primary(parser *p, tpl_node **out);
static ld_status parse_postfix(parser *p, tpl_node *n, tpl_node **out);

#define NOMEM(p) pfail((p), NULL, LD_ERR_NOMEM, "out of memory")

static ld_status enter(parser *p)
{
    if (++p->depth > MAX_PARSE_DEPTH) return pfail(p, cur(p), LD_ERR_LIMIT, "expression nested too deeply");
    return LD_OK;
}

/* (a, b, k=v) -> n->list / n->list2 / n->kw; current token is '(' */
static ld_status parse_call_args(parser *p, tpl_node *n)
{
    nvec pos = {0}, kwv = {0};
    const char *kw[64];
    size_t nkw = 0;
    ld_status s = expect_op(p, "(");
    while (s == LD_OK && !at_op(p, ")")) {
        if (pos.n + kwv.n && (s = expect_op(p, ",")) != LD_OK) break;
        if (at_op(p, ")")) break;
        tpl_node *e;
        if (cur(p)->type == TK_NAME && p->i + 1 < p->toks->n && tok_is(&p->toks->v[p->i + 1], TK_OP, "=")) {
            if (nkw == 64) { s = pfail(p, cur(p), LD_ERR_LIMIT, "too many keyword arguments"); break; }
            kw[nkw++] = tok_str(p, cur(p));
            p->i += 2;
            if ((s = parse_expr(p, &e)) != LD_OK) break;
            if (!vpush(&kwv, e)) s = NOMEM(p);
        } else {
            if ((s = parse_expr(p, &e)) != LD_OK) break;
            if (kwv.n) { s = pfail(p, cur(p), LD_ERR_SYNTAX, "positional argument after keyword"); break; }
            if (!vpush(&pos, e)) s = NOMEM(p);
        }
    }
    if (s == LD_OK) s = expect_op(p, ")");
    bool ok1 = vfinish(p, &pos, &n->list), ok2 = vfinish(p, &kwv, &n->list2);
    if (!ok1 || !ok2) return s ? s : NOMEM(p);
    if (s == LD_OK && nkw) {
        n->kw = ld_arena_alloc(&p->t->arena, nkw * sizeof *n->kw);
        if (!n->kw) return NOMEM(p);
        memcpy(n->kw, kw, nkw * sizeof *kw);
    }
    return s;
}

static ld_status parse_seq(parser *p, const char *close, tpl_node *n, bool dict)
{
    nvec a = {0}, b = {0};
    ld_status s = LD_OK;
    p->i++;
    while (!at_op(p, close)) {
        if (a.n && (s = expect_op(p, ",")) != LD_OK) break;
        if (at_op(p, close)) break;
        tpl_node *e;
        if ((s = parse_expr(p, &e)) != LD_OK) break;
        if (!vpush(&a, e)) { s = NOMEM(p); break; }
        if (dict) {
            if ((s = expect_op(p, ":")) != LD_OK || (s = parse_expr(p, &e)) != LD_OK) break;
            if (!vpush(&b, e)) { s = NOMEM(p); break; }
        }
    }
    if (s == LD_OK) s = expect_op(p, close);
    bool ok1 = vfinish(p, &a, &n->list), ok2 = vfinish(p, &b, &n->list2);
    if (!ok1 || !ok2) return s ? s : NOMEM(p);
    return s;
}

static ld_status parse_primary(parser *p, tpl_node **out)
{
    const tpl_token *k = cur(p);
    tpl_node *n = NULL;
    ld_arena *A = &p->t->arena;
    if (k->type == TK_NAME) {
        static const char *const cn[] = {"true", "True", "false", "False", "none", "None"};
        for (int j = 0; j < 6; j++)
            if (tok_is(k, TK_NAME, cn[j])) {
                if (!(n = node(p, N_CONST, k->off))) return NOMEM(p);
                n->lit = j < 4 ? ld_tpl_value_bool(A, j < 2) : ld_tpl_value_none(A);
                if (!n->lit) return NOMEM(p);
                p->i++;
                return *out = n, LD_OK;
            }
        if (!(n = node(p, N_NAME, k->off)) || !set_name(p, n, k)) return NOMEM(p);
        if (n->slot == TPL_SLOT_LOOP) p->loop_refs++;
        if (tok_is(k, TK_NAME, "varargs")) p->refs |= 1;
        if (tok_is(k, TK_NAME, "kwargs")) p->refs |= 2;
        p->i++;
    } else if (k->type == TK_STRING) {
        /* adjacent literals concatenate, as in Python */
        size_t total = 0, j = p->i;
        while (j < p->toks->n && p->toks->v[j].type == TK_STRING) total += p->toks->v[j++].len;
        char *buf = ld_arena_alloc(A, total + 1);
        if (!buf || !(n = node(p, N_CONST, k->off))) return NOMEM(p);
        total = 0;
        for (; p->i < j; p->i++) memcpy(buf + total, p->toks->v[p->i].s, p->toks->v[p->i].len), total += p->toks->v[p->i].len;
        buf[total] = 0;
        if (!(n->lit = ld_tpl_value_str(A, buf, total))) return NOMEM(p);
    } else if (k->type == TK_INT || k->type == TK_FLOAT) {
        if (!(n = node(p, N_CONST, k->off))) return NOMEM(p);
        n->lit = k->type == TK_INT ? ld_tpl_value_int(A, k->i) : ld_tv_float(A, k->f);
        if (!n->lit) return NOMEM(p);
        p->i++;
    } else if (tok_is(k, TK_OP, "(") && p->i + 1 < p->toks->n && tok_is(&p->toks->v[p->i + 1], TK_OP, ")")) {
        if (!(n = node(p, N_TUPLE, k->off))) return NOMEM(p); /* () */
        p->i += 2;
    } else if (tok_is(k, TK_OP, "(")) {
        p->i++;
        LD_TRY(parse_expr(p, &n));
        if (at_op(p, ",")) {
            tpl_node *t = node(p, N_TUPLE, k->off);
            nvec v = {0};
            if (!t || !vpush(&v, n)) return free(v.v), NOMEM(p);
            while (at_op(p, ",")) {
                p->i++;
                if (at_op(p, ")")) break;
                ld_status s = parse_expr(p, &n);
                if (s != LD_OK) return free(v.v), s;
                if (!vpush(&v, n)) return free(v.v), NOMEM(p);
            }
            if (!vfinish(p, &v, &t->list)) return NOMEM(p);
            n = t;
        }
        LD_TRY(expect_op(p, ")"));
    } else if (tok_is(k, TK_OP, "[")) {
        if (!(n = node(p, N_LIST, k->off))) return NOMEM(p);
        LD_TRY(parse_seq(p, "]", n, false));
    } else if (tok_is(k, TK_OP, "{")) {
        if (!(n = node(p, N_DICT, k->off))) return NOMEM(p);
        LD_TRY(parse_seq(p, "}", n, true));
    } else {
        return pfail(p, k, k->type == TK_EOF ? LD_ERR_TRUNCATED : LD_ERR_SYNTAX, "unexpected token");
    }
    *out = n;
    return LD_OK;
}

/* `callee(args)` with the '(' at token k: *n becomes the call node. */
static ld_status parse_call_on(parser *p, const tpl_token *k, tpl_node **n)
{
    tpl_node *c = node(p, N_CALL, k->off);
    if (!c) return NOMEM(p);
    c->a = *n;
    LD_TRY(parse_call_args(p, c));
    *n = c;
    return LD_OK;
}

static ld_status parse_subscript(parser *p, tpl_node *obj, tpl_node **out)
{
    uint32_t off = cur(p)->off;
    tpl_node *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    p->i++;
    if (at_op(p, "]")) /* x[] is a syntax error in jinja2 as in Python */
        return pfail(p, cur(p), LD_ERR_SYNTAX, "expected an expression in '[]'");
    for (;;) {
        if (!at_op(p, ":") && !at_op(p, "]")) LD_TRY(parse_expr(p, &parts[k]));
        if (at_op(p, ":") && k < 2) { p->i++, k++; continue; }
        break;
    }
    LD_TRY(expect_op(p, "]"));
    tpl_node *n = node(p, k ? N_SLICE : N_GETITEM, off);
    if (!n) return NOMEM(p);
    n->a = obj;
    if (k) {
        n->list.v = ld_arena_alloc(&p->t->arena, 3 * sizeof *n->list.v);
        if (!n->list.v) return NOMEM(p);
        n->list.n = 3;
        memcpy(n->list.v, parts, sizeof parts);
    } else {
        n->b = parts[0];
        if (n->b->kind == N_CONST && n->b->lit->kind == TV_STR) { /* x['key'] */
            n->s = n->b->lit->u.str.s, n->s_len = n->b->lit->u.str.len;
            n->neg = TPL_FAST_KEY | (ld_tpl_attr_plain(n->s, n->s_len) ? TPL_KEY_PLAIN : 0);
        }
    }
    *out = n;
    return LD_OK;
}

static ld_status parse_postfix(parser *p, tpl_node *n, tpl_node **out)
{
    for (;;) {
        const tpl_token *k = cur(p);
        if (tok_is(k, TK_OP, ".")) {
            p->i++;
            const tpl_token *a = cur(p);
            tpl_node *g;
            if (a->type == TK_NAME) {
                if (!(g = node(p, N_GETATTR, a->off)) || !(g->s = tok_str(p, a))) return NOMEM(p);
                g->s_len = a->len;
                if (ld_tpl_attr_plain(g->s, g->s_len)) g->neg = TPL_FAST_KEY | TPL_KEY_PLAIN;
            } else if (a->type == TK_INT) {
                if (!(g = node(p, N_GETITEM, a->off)) || !(g->b = node(p, N_CONST, a->off))) return NOMEM(p);
                if (!(g->b->lit = ld_tpl_value_int(&p->t->arena, a->i))) return NOMEM(p);
            } else {
                return pfail(p, a, LD_ERR_SYNTAX, "expected attribute name");
            }
            g->a = n;
            n = g;
            p->i++;
        } else if (tok_is(k, TK_OP, "[")) {
            LD_TRY(parse_subscript(p, n, &n));
        } else if (tok_is(k, TK_OP, "(")) {
            LD_TRY(parse_call_on(p, k, &n));
        } else {
            break;
        }
    }
    *out = n;
    return LD_OK;
}

static ld_status parse_filters(parser *p, tpl_node *n, tpl_node **out)
{
    for (;;) {
        const tpl_token *k = cur(p);
        if (tok_is(k, TK_OP, "|") || tok_is(k, TK_NAME, "is")) {
            bool is_test = k->type == TK_NAME;
            p->i++;
            tpl_node *f = node(p, is_test ? N_TEST : N_FILTER, k->off);
            if (!f) return NOMEM(p);
            if (is_test && at_name(p, "not")) f->neg = 1, p->i++;
            const tpl_token *nm = cur(p);
            if (nm->type != TK_NAME) return pfail(p, nm, LD_ERR_SYNTAX, is_test ? "expected test name" : "expected filter name");
            if (!(f->s = tok_str(p, nm))) return NOMEM(p);
            f->slot = is_test ? ld_tpl_test_id(f->s) : ld_tpl_filter_id(f->s);
            p->i++;
            /* dotted filter names (jinja allows foo.bar) */
            f->a = n;
            if (at_op(p, "(")) {
                LD_TRY(parse_call_args(p, f));
            } else if (is_test) {
                const tpl_token *x = cur(p);
                bool arg = (x->type == TK_NAME || x->type == TK_STRING || x->type == TK_INT ||
                            x->type == TK_FLOAT || tok_is(x, TK_OP, "[") || tok_is(x, TK_OP, "{")) &&
                           !tok_is(x, TK_NAME, "else") && !tok_is(x, TK_NAME, "or") &&
                           !tok_is(x, TK_NAME, "and") && !tok_is(x, TK_NAME, "is");
                if (arg) {
                    tpl_node *e;
                    LD_TRY(parse_primary(p, &e));
                    LD_TRY(parse_postfix(p, e, &e));
                    f->list.v = ld_arena_alloc(&p->t->arena, sizeof *f->list.v);
                    if (!f->list.v) return NOMEM(p);
                    f->list.v[0] = e, f->list.n = 1;
                }
            }
            n = f;
        } else if (tok_is(k, TK_OP, "(")) {
            LD_TRY(parse_call_on(p, k, &n));
        } else {
            break;
        }
    }
    *out = n;
    return LD_OK;
}

static ld_status parse_unary(parser *p, bool with_filter, tpl_node **out)
{
    tpl_node *n;
    const tpl_token *k = cur(p);
    LD_TRY(enter(p));
    if (tok_is(k, TK_OP, "-") || tok_is(k, TK_OP, "+")) {
        p->i++;
        if (!(n = node(p, N_UNARY, k->off))) return NOMEM(p);
        n->neg = (uint8_t)k->s[0];
        LD_TRY(parse_unary(p, false, &n->a));
    } else {
        LD_TRY(parse_primary(p, &n));
    }
    LD_TRY(parse_postfix(p, n, &n));
    if (with_filter) LD_TRY(parse_filters(p, n, &n));
    p->depth--;
    *out = n;
    return LD_OK;
}

typedef ld_status (*level_fn)(parser *p, tpl_node **out);

static ld_status binop(parser *p, tpl_node **out, tpl_node *l, level_fn next, char op, uint32_t off)
{
    tpl_node *n = node(p, N_BINOP, off);
    if (!n) return NOMEM(p);
    n->neg = (uint8_t)op;
    n->a = l;
    LD_TRY(next(p, &n->b));
    *out = n;
    return LD_OK;
}

static ld_status parse_pow(parser *p, tpl_node **out)
{
    LD_TRY(parse_unary(p, true, out));
    while (at_op(p, "**")) {
        uint32_t off = cur(p)->off;
        p->i++;
        tpl_node *n = node(p, N_BINOP, off);
        if (!n) return NOMEM(p);
        n->neg = 'p', n->a = *out;
        LD_TRY(parse_unary(p, true, &n->b));
        *out = n;
    }
    return LD_OK;
}

static ld_status parse_math2(parser *p, tpl_node **out)
{
    LD_TRY(parse_pow(p, out));
    for (;;) {
        char op = at_op(p, "*") ? '*' : at_op(p, "/") ? '/' : at_op(p, "//") ? 'f' : at_op(p, "%") ? '%' : 0;
        if (!op) return LD_OK;
        uint32_t off = cur(p)->off;
        p->i++;
        LD_TRY(binop(p, out, *out, parse_pow, op, off));
    }
}

static ld_status parse_concat(parser *p, tpl_node **out)
{
    LD_TRY(parse_math2(p, out));
    while (at_op(p, "~")) {
        uint32_t off = cur(p)->off;
        p->i++;
        LD_TRY(binop(p, out, *out, parse_math2, '~', off));
    }
    return LD_OK;
}

static ld_status parse_math1(parser *p, tpl_node **out)
{
    LD_TRY(parse_concat(p, out));
    for (;;) {
        char op = at_op(p, "+") ? '+' : at_op(p, "-") ? '-' : 0;
        if (!op) return LD_OK;
        uint32_t off = cur(p)->off;
        p->i++;
        LD_TRY(binop(p, out, *out, parse_concat, op, off));
    }
}

static ld_status parse_compare(parser *p, tpl_node **out)
{
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    LD_TRY(parse_math1(p, out));
    for (tpl_node *prev = NULL;;) {
        int op = 0;
        for (int j = 0; j < 6; j++) if (at_op(p, ops[j])) op = j + 1;
        uint32_t off = cur(p)->off;
        if (!op && at_name(p, "in")) op = 7;
        else if (!op && at_name(p, "not") && p->i + 1 < p->toks->n && tok_is(&p->toks->v[p->i + 1], TK_NAME, "in")) op = 8, p->i++;
        if (!op) return LD_OK;
        p->i++;
        tpl_node *n = node(p, N_COMPARE, off);
        if (!n) return NOMEM(p);
        n->neg = (uint8_t)op, n->a = prev ? prev->b : *out, n->c = prev;
        LD_TRY(parse_math1(p, &n->b));
        *out = prev = n;
    }
}

static ld_status parse_not(parser *p, tpl_node **out)
{
    if (at_name(p, "not")) {
        tpl_node *n = node(p, N_NOT, cur(p)->off);
        if (!n) return NOMEM(p);
        p->i++;
        LD_TRY(enter(p));
        LD_TRY(parse_not(p, &n->a));
        p->depth--;
        *out = n;
        return LD_OK;
    }
    return parse_compare(p, out);
}

static ld_status parse_logic(parser *p, tpl_node **out, const char *word, int kind, level_fn next)
{
    LD_TRY(next(p, out));
    while (at_name(p, word)) {
        tpl_node *n = node(p, kind, cur(p)->off);
        if (!n) return NOMEM(p);
        p->i++;
        n->a = *out;
        LD_TRY(next(p, &n->b));
        *out = n;
    }
    return LD_OK;
}
static ld_status parse_and(parser *p, tpl_node **out) { return parse_logic(p, out, "and", N_AND, parse_not); }
static ld_status parse_or(parser *p, tpl_node **out) { return parse_logic(p, out, "or", N_OR, parse_and); }

static ld_status parse_expr(parser *p, tpl_node **out)
{
    LD_TRY(enter(p));
    LD_TRY(parse_or(p, out));
    while (at_name(p, "if")) {
        tpl_node *n = node(p, N_COND, cur(p)->off);
        if (!n) return NOMEM(p);
        p->i++;
        n->a = *out;
        LD_TRY(parse_or(p, &n->b));
        if (at_name(p, "else")) {
            p->i++;
            LD_TRY(parse_expr(p, &n->c));
        }
        *out = n;
    }
    p->depth--;
    return LD_OK;
}

/* ---------------------------------------------------------------- statements */

static ld_status parse_body(parser *p, const char *const *stops, tpl_nodes *out);

static ld_status block_end(parser *p)
{
    if (cur(p)->type != TK_BLOCK_END)
        return pfail(p, cur(p), cur(p)->type == TK_EOF ? LD_ERR_TRUNCATED : LD_ERR_SYNTAX, "expected end of block tag");
    p->i++;
    return LD_OK;
}

/* after `{%`: is the current name one of stops? */
static bool at_stop(parser *p, const char *const *stops)
{
    if (!stops || cur(p)->type != TK_BLOCK_BEGIN || p->i + 1 >= p->toks->n) return false;
    for (int j = 0; stops[j]; j++)
        if (tok_is(&p->toks->v[p->i + 1], TK_NAME, stops[j])) return true;
    return false;
}

static ld_status expect_end_tag(parser *p, const char *name)
{
    /* current: BLOCK_BEGIN name */
    p->i++;
    if (!at_name(p, name)) return pfail(p, cur(p), LD_ERR_SYNTAX, "unexpected end tag");
    p->i++;
    return block_end(p);
}

static ld_status parse_if(parser *p, tpl_node *n)
{
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    LD_TRY(parse_expr(p, &n->a));
    LD_TRY(block_end(p));
    LD_TRY(parse_body(p, stops, &n->list));
    if (cur(p)->type == TK_EOF) return pfail(p, NULL, LD_ERR_TRUNCATED, "missing endif");
    p->i++; /* BLOCK_BEGIN */
    if (at_name(p, "elif")) {
        tpl_node *e = node(p, N_IF, cur(p)->off);
        n->list2.v = ld_arena_alloc(&p->t->arena, sizeof *n->list2.v);
        if (!e || !n->list2.v) return NOMEM(p);
        n->list2.v[0] = e, n->list2.n = 1;
        p->i++;
        return parse_if(p, e);
    }
    if (at_name(p, "else")) {
        static const char *const st2[] = {"endif", NULL};
        p->i++;
        LD_TRY(block_end(p));
        LD_TRY(parse_body(p, st2, &n->list2));
        if (cur(p)->type == TK_EOF) return pfail(p, NULL, LD_ERR_TRUNCATED, "missing endif");
        return expect_end_tag(p, "endif");
    }
    p->i++; /* endif */
    return block_end(p);
}

static ld_status parse_targets(parser *p, tpl_node *n)
{
    nvec v = {0};
    for (;;) {
        const tpl_token *k = cur(p);
        if (k->type != TK_NAME) return free(v.v), pfail(p, k, LD_ERR_SYNTAX, "expected a name");
        tpl_node *t = node(p, N_NAME, k->off);
        if (!t || !set_name(p, t, k) || !vpush(&v, t)) return free(v.v), NOMEM(p);
        p->i++;
        if (!at_op(p, ",")) break;
        p->i++;
    }
    if (v.n == 1) {
        n->s = v.v[0]->s, n->s_len = v.v[0]->s_len, n->slot = v.v[0]->slot;
        free(v.v);
        return LD_OK;
    }
    if (!(n->b = node(p, N_TUPLE, n->off))) return free(v.v), NOMEM(p);
    return vfinish(p, &v, &n->b->list) ? LD_OK : NOMEM(p);
}

static ld_status parse_for(parser *p, tpl_node *n)
{
    static const char *const stops[] = {"else", "endfor", NULL};
    const tpl_token *first = cur(p);
    LD_TRY(parse_targets(p, n));
    /* jinja2 refuses it when compiling: the loop binds `loop` itself */
    bool loop_target = n->b ? false : n->slot == TPL_SLOT_LOOP;
    for (size_t i = 0; n->b && i < n->b->list.n; i++) loop_target = loop_target || n->b->list.v[i]->slot == TPL_SLOT_LOOP;
    if (loop_target) return pfail(p, first, LD_ERR_SYNTAX, "can't assign to special loop variable in for-loop target");
    if (!at_name(p, "in")) return pfail(p, cur(p), LD_ERR_SYNTAX, "expected 'in'");
    p->i++;
    LD_TRY(parse_or(p, &n->a)); /* no ternary here: `if` starts the filter */
    if (at_name(p, "if")) {
        p->i++;
        LD_TRY(parse_expr(p, &n->c));
    }
    if (at_name(p, "recursive")) n->neg = TPL_FOR_RECURSIVE, p->i++;
    LD_TRY(block_end(p));
    /* `loop` in the body is this loop's: the loops around it see only the
     * names in its iterable, its filter and its else block */
    size_t loop_refs = p->loop_refs;
    LD_TRY(parse_body(p, stops, &n->list));
    if (p->loop_refs != loop_refs) n->neg |= TPL_FOR_USES_LOOP;
    p->loop_refs = loop_refs;
    if (cur(p)->type == TK_EOF) return pfail(p, NULL, LD_ERR_TRUNCATED, "missing endfor");
    if (tok_is(&p->toks->v[p->i + 1], TK_NAME, "else")) {
        static const char *const st2[] = {"endfor", NULL};
        p->i += 2;
        LD_TRY(block_end(p));
        LD_TRY(parse_body(p, st2, &n->list2));
        if (cur(p)->type == TK_EOF) return pfail(p, NULL, LD_ERR_TRUNCATED, "missing endfor");
    }
    return expect_end_tag(p, "endfor");
}

static ld_status parse_set(parser *p, tpl_node *n)
{
    const tpl_token *k = cur(p);
    if (k->type == TK_NAME && p->i + 2 < p->toks->n && tok_is(&p->toks->v[p->i + 1], TK_OP, ".")) {
        n->kind = N_SET_ATTR;
        if (!set_name(p, n, k) || !(n->b = node(p, N_NAME, p->toks->v[p->i + 2].off))) return NOMEM(p);
        if (p->toks->v[p->i + 2].type != TK_NAME) return pfail(p, &p->toks->v[p->i + 2], LD_ERR_SYNTAX, "expected attribute name");
        if (!(n->b->s = tok_str(p, &p->toks->v[p->i + 2]))) return NOMEM(p);
        n->b->s_len = p->toks->v[p->i + 2].len;
        p->i += 3;
    } else {
        LD_TRY(parse_targets(p, n));
    }
    if (cur(p)->type == TK_BLOCK_END && n->kind == N_SET && !n->b) {
        static const char *const stops[] = {"endset", NULL};
        n->kind = N_SET_BLOCK;
        p->i++;
        LD_TRY(parse_body(p, stops, &n->list));
        if (cur(p)->type == TK_EOF) return pfail(p, NULL, LD_ERR_TRUNCATED, "missing endset");
        return expect_end_tag(p, "endset");
    }
    LD_TRY(expect_op(p, "="));
    LD_TRY(parse_expr(p, &n->a));
    if (at_op(p, ",")) { /* set a = 1, 2 builds a tuple */
        tpl_node *t = node(p, N_TUPLE, n->a->off);
        nvec v = {0};
        if (!t || !vpush(&v, n->a)) return NOMEM(p);
        while (at_op(p, ",")) {
            tpl_node *e;
            p->i++;
            ld_status s = parse_expr(p, &e);
            if (s != LD_OK) return free(v.v), s;
            if (!vpush(&v, e)) return free(v.v), NOMEM(p);
        }
        if (!vfinish(p, &v, &t->list)) return NOMEM(p);
        n->a = t;
    }
    return block_end(p);
}

static ld_status parse_params(parser *p, const tpl_token *k, tpl_node *n);

static ld_status parse_macro(parser *p, tpl_node *n)
{
    static const char *const stops[] = {"endmacro", NULL};
    const tpl_token *k = cur(p);
    if (k->type != TK_NAME) return pfail(p, k, LD_ERR_SYNTAX, "expected macro name");
    if (!set_name(p, n, k)) return NOMEM(p);
    p->i++;
    LD_TRY(parse_params(p, k, n));
    LD_TRY(block_end(p));
    uint8_t outer = p->refs;
    p->refs = 0;
    LD_TRY(parse_body(p, stops, &n->list));
    n->neg = p->refs; /* the macro takes extra arguments into varargs / kwargs */
    p->refs = outer;
    if (cur(p)->type == TK_EOF) return pfail(p, NULL, LD_ERR_TRUNCATED, "missing endmacro");
    return expect_end_tag(p, "endmacro");
}

/* (a, b=1): names in n->kw (their slots in n->kw_slot), defaults in
 * n->list2 (NULL = none) */
static ld_status parse_params(parser *p, const tpl_token *k, tpl_node *n)
{
    /* reuse the call-argument parser, then check the shapes */
    tpl_node tmp;
    memset(&tmp, 0, sizeof tmp);
    LD_TRY(parse_call_args(p, &tmp));
    size_t np = tmp.list.n + tmp.list2.n;
    uint32_t *slots = ld_arena_alloc(&p->t->arena, (np ? np : 1) * sizeof *slots);
    n->kw = ld_arena_alloc(&p->t->arena, (np ? np : 1) * sizeof *n->kw);
    n->list2.v = ld_arena_alloc(&p->t->arena, (np ? np : 1) * sizeof *n->list2.v);
    if (!slots || !n->kw || !n->list2.v) return NOMEM(p);
    n->list2.n = np;
    n->kw_slot = slots;
    for (size_t j = 0; j < tmp.list.n; j++) {
        if (tmp.list.v[j]->kind != N_NAME) return pfail(p, k, LD_ERR_SYNTAX, "bad macro parameter");
        n->kw[j] = tmp.list.v[j]->s, slots[j] = tmp.list.v[j]->slot, n->list2.v[j] = NULL;
    }
    for (size_t j = 0; j < tmp.list2.n; j++) {
        n->kw[tmp.list.n + j] = tmp.kw[j], n->list2.v[tmp.list.n + j] = tmp.list2.v[j];
        slots[tmp.list.n + j] = slot_of(p, tmp.kw[j]);
    }
    return LD_OK;
}

/* {% call(params) callee(args) %}body{% endcall %}: the body is the macro
 * `caller` that callee sees */
static ld_status parse_call_block(parser *p, const tpl_token *k, tpl_node *n)
{
    static const char *const stops[] = {"endcall", NULL};
    n->kind = N_CALL_BLOCK;
    n->s = "caller", n->s_len = 6;
    if (at_op(p, "(")) LD_TRY(parse_params(p, k, n));
    LD_TRY(parse_expr(p, &n->a));
    if (n->a->kind != N_CALL) return pfail(p, k, LD_ERR_SYNTAX, "expected a call after 'call'");
    LD_TRY(block_end(p));
    uint8_t outer = p->refs;
    p->refs = 0;
    LD_TRY(parse_body(p, stops, &n->list));
    n->neg = p->refs;
    p->refs = outer;
    if (cur(p)->type == TK_EOF) return pfail(p, NULL, LD_ERR_TRUNCATED, "missing endcall");
    return expect_end_tag(p, "endcall");
}

/* {% filter f(args) | g %}body{% endfilter %} */
static ld_status parse_filter_block(parser *p, tpl_node *n)
{
    static const char *const stops[] = {"endfilter", NULL};
    const tpl_token *k = cur(p);
    n->kind = N_FILTER_BLOCK;
    if (k->type != TK_NAME) return pfail(p, k, LD_ERR_SYNTAX, "expected filter name");
    tpl_node *f = node(p, N_FILTER, k->off);
    if (!f || !(f->s = tok_str(p, k)) || !(n->b = f->a = node(p, N_BLOCK_VALUE, k->off))) return NOMEM(p);
    p->i++;
    if (at_op(p, "(")) LD_TRY(parse_call_args(p, f));
    LD_TRY(parse_filters(p, f, &n->a));
    LD_TRY(block_end(p));
    LD_TRY(parse_body(p, stops, &n->list));
    if (cur(p)->type == TK_EOF) return pfail(p, NULL, LD_ERR_TRUNCATED, "missing endfilter");
    return expect_end_tag(p, "endfilter");
}

static ld_status parse_block(parser *p, tpl_node **out)
{
    const tpl_token *k = cur(p);
    tpl_node *n;
    if (k->type != TK_NAME) return pfail(p, k, LD_ERR_SYNTAX, "expected a statement");
    p->i++;
    if (tok_is(k, TK_NAME, "generation") || tok_is(k, TK_NAME, "endgeneration")) {
        *out = NULL; /* transformers' AssistantTracker: renders its body as is */
        return block_end(p);
    }
    if (!(n = node(p, N_IF, k->off))) return NOMEM(p);
    *out = n;
    if (tok_is(k, TK_NAME, "if")) return parse_if(p, n);
    if (tok_is(k, TK_NAME, "for")) return n->kind = N_FOR, parse_for(p, n);
    if (tok_is(k, TK_NAME, "set")) return n->kind = N_SET, parse_set(p, n);
    if (tok_is(k, TK_NAME, "macro")) return n->kind = N_MACRO, parse_macro(p, n);
    if (tok_is(k, TK_NAME, "call")) return parse_call_block(p, k, n);
    if (tok_is(k, TK_NAME, "filter")) return parse_filter_block(p, n);
    if (tok_is(k, TK_NAME, "break") || tok_is(k, TK_NAME, "continue")) {
        n->kind = k->s[0] == 'b' ? N_BREAK : N_CONTINUE;
        return block_end(p);
    }
    static const char *const unsup[] = {"include", "import", "from",
                                        "extends", "block", "with", "autoescape", "do", NULL};
    for (int j = 0; unsup[j]; j++)
        if (tok_is(k, TK_NAME, unsup[j])) return pfail(p, k, LD_ERR_UNSUPPORTED, "unsupported statement");
    return pfail(p, k, LD_ERR_SYNTAX, "unknown or misplaced statement");
}

static ld_status parse_body(parser *p, const char *const *stops, tpl_nodes *out)
{
    nvec v = {0};
    ld_status s = LD_OK;
    if ((s = enter(p)) != LD_OK) return s;
    while (s == LD_OK && cur(p)->type != TK_EOF && !at_stop(p, stops)) {
        const tpl_token *k = cur(p);
        tpl_node *n = NULL;
        if (k->type == TK_DATA) {
            if (!(n = node(p, N_DATA, k->off))) { s = NOMEM(p); break; }
            n->s = k->s, n->s_len = k->len;
            p->i++;
        } else if (k->type == TK_VAR_BEGIN) {
            p->i++;
            if (!(n = node(p, N_OUTPUT, k->off))) { s = NOMEM(p); break; }
            if ((s = parse_expr(p, &n->a)) != LD_OK) break;
            if (cur(p)->type != TK_VAR_END) { s = pfail(p, cur(p), cur(p)->type == TK_EOF ? LD_ERR_TRUNCATED : LD_ERR_SYNTAX, "expected '}}'"); break; }
            p->i++;
            if (n->a->kind == N_CONST && n->a->lit->kind == TV_STR) /* {{ 'text' }} prints the text: data */
                n->kind = N_DATA, n->s = n->a->lit->u.str.s, n->s_len = n->a->lit->u.str.len;
        } else if (k->type == TK_BLOCK_BEGIN) {
            p->i++;
            s = parse_block(p, &n);
        } else {
            s = pfail(p, k, LD_ERR_SYNTAX, "unexpected token");
        }
        if (s == LD_OK && n && !vpush(&v, n)) s = NOMEM(p);
    }
    if (s == LD_OK && stops && cur(p)->type == TK_EOF) s = pfail(p, NULL, LD_ERR_TRUNCATED, "unclosed block");
    if (!vfinish(p, &v, out) && s == LD_OK) s = NOMEM(p);
    p->depth--;
    return s;
}

ld_status ld_tpl_parse(ld_tpl *t, const tpl_tokens *toks, ld_error *err)
{
    /* the names the evaluator binds itself, in the order of TPL_SLOT_* */
    static const char *const reserved[TPL_SLOTS_RESERVED] = {"loop", "caller", "varargs", "kwargs"};
    parser p = {t, toks, 0, 0, err, 0, 0, NULL, 0, 0};
    ld_status s = LD_OK;
    for (size_t i = 0; i < TPL_SLOTS_RESERVED && s == LD_OK; i++)
        if (intern(&p, reserved[i], strlen(reserved[i])) != (long)i) s = NOMEM(&p);
    if (s == LD_OK) s = parse_body(&p, NULL, &t->body);
    if (s == LD_OK && cur(&p)->type != TK_EOF) s = pfail(&p, cur(&p), LD_ERR_SYNTAX, "unexpected end tag");
    t->n_slots = p.n_names;
    free(p.names);
    return s;
}

/* Newlines \r\n and \r become \n and one trailing newline is dropped, as
 * jinja2's lexer does with keep_trailing_newline=False. */
static char *normalise(ld_arena *a, const char *src, size_t len, size_t *out_len)
{
    char *o = ld_arena_alloc(a, len + 1);
    size_t k = 0;
    if (!o) return NULL;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            o[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            o[k++] = src[i];
        }
    }
    if (k && o[k - 1] == '\n') k--;
    o[k] = 0;
    *out_len = k;
    return o;
}

ld_status ld_tpl_compile(const char *src, size_t len, ld_tpl **out, ld_error *err)
{
    *out = NULL;
    ld_tpl *t = calloc(1, sizeof *t);
    tpl_tokens toks = {0};
    ld_status s;
    if (!t) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_arena_init(&t->arena, 0);
    t->src = normalise(&t->arena, src ? src : "", src ? len : 0, &t->src_len);
    if (!t->src) {
        s = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    } else if ((s = ld_tpl_lex(t->src, t->src_len, &t->arena, &toks, err)) == LD_OK) {
        tpl_token eof = {TK_EOF, (uint32_t)t->src_len, t->src + t->src_len, 0, 0, 0};
        if (toks.n == toks.cap) {
            tpl_token *v = realloc(toks.v, (toks.cap + 1) * sizeof *v);
            if (v) toks.v = v, toks.cap++;
        }
        if (toks.n < toks.cap) {
            toks.v[toks.n++] = eof;
            s = ld_tpl_parse(t, &toks, err);
        } else {
            s = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        }
    } else if (s == LD_ERR_NOMEM) {
        LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    free(toks.v);
    if (s != LD_OK) {
        ld_tpl_free(t);
        return s;
    }
    *out = t;
    return LD_OK;
}

void ld_tpl_free(ld_tpl *t)
{
    if (!t) return;
    ld_arena_release(&t->arena);
    free(t);
}
