/* tpl_parse_expr.c - expressions with jinja2's precedence (or < and < not
 * < compare < + - < ~ < * / // % < ** < unary < filters/tests < postfix),
 * following jinja2's parser.py. */
#include <stdlib.h>
#include <string.h>

#include "tpl_parser.h"

static ld_status parse_unary(parser *p, bool with_filter, tpl_node **out);
static ld_status parse_primary(parser *p, tpl_node **out);
static ld_status parse_postfix(parser *p, tpl_node *n, tpl_node **out);

/* (a, b, k=v) -> n->list / n->list2 / n->kw; current token is '(' */
ld_status tpl_p_parse_call_args(parser *p, tpl_node *n)
{
    nvec pos = {0}, kwv = {0};
    const char *kw[64];
    size_t nkw = 0;
    ld_status s = tpl_p_expect_op(p, "(");
    while (s == LD_OK && !tpl_p_at_op(p, ")")) {
        if (pos.n + kwv.n && (s = tpl_p_expect_op(p, ",")) != LD_OK) break;
        if (tpl_p_at_op(p, ")")) break;
        tpl_node *e;
        if (tpl_p_cur(p)->type == TK_NAME && p->i + 1 < p->toks->n && tpl_p_tok_is(&p->toks->v[p->i + 1], TK_OP, "=")) {
            if (nkw == 64) { s = tpl_p_pfail(p, tpl_p_cur(p), LD_ERR_LIMIT, "too many keyword arguments"); break; }
            kw[nkw++] = tpl_p_tok_str(p, tpl_p_cur(p));
            p->i += 2;
            if ((s = tpl_p_parse_expr(p, &e)) != LD_OK) break;
            if (!tpl_p_vpush(&kwv, e)) s = TPL_P_NOMEM(p);
        } else {
            if ((s = tpl_p_parse_expr(p, &e)) != LD_OK) break;
            if (kwv.n) { s = tpl_p_pfail(p, tpl_p_cur(p), LD_ERR_SYNTAX, "positional argument after keyword"); break; }
            if (!tpl_p_vpush(&pos, e)) s = TPL_P_NOMEM(p);
        }
    }
    if (s == LD_OK) s = tpl_p_expect_op(p, ")");
    bool ok1 = tpl_p_vfinish(p, &pos, &n->list), ok2 = tpl_p_vfinish(p, &kwv, &n->list2);
    if (!ok1 || !ok2) return s ? s : TPL_P_NOMEM(p);
    if (s == LD_OK && nkw) {
        n->kw = ld_arena_alloc(&p->t->arena, nkw * sizeof *n->kw);
        if (!n->kw) return TPL_P_NOMEM(p);
        memcpy(n->kw, kw, nkw * sizeof *kw);
    }
    return s;
}

static ld_status parse_seq(parser *p, const char *close, tpl_node *n, bool dict)
{
    nvec a = {0}, b = {0};
    ld_status s = LD_OK;
    p->i++;
    while (!tpl_p_at_op(p, close)) {
        if (a.n && (s = tpl_p_expect_op(p, ",")) != LD_OK) break;
        if (tpl_p_at_op(p, close)) break;
        tpl_node *e;
        if ((s = tpl_p_parse_expr(p, &e)) != LD_OK) break;
        if (!tpl_p_vpush(&a, e)) { s = TPL_P_NOMEM(p); break; }
        if (dict) {
            if ((s = tpl_p_expect_op(p, ":")) != LD_OK || (s = tpl_p_parse_expr(p, &e)) != LD_OK) break;
            if (!tpl_p_vpush(&b, e)) { s = TPL_P_NOMEM(p); break; }
        }
    }
    if (s == LD_OK) s = tpl_p_expect_op(p, close);
    bool ok1 = tpl_p_vfinish(p, &a, &n->list), ok2 = tpl_p_vfinish(p, &b, &n->list2);
    if (!ok1 || !ok2) return s ? s : TPL_P_NOMEM(p);
    return s;
}

static ld_status parse_primary(parser *p, tpl_node **out)
{
    const tpl_token *k = tpl_p_cur(p);
    tpl_node *n = NULL;
    ld_arena *A = &p->t->arena;
    if (k->type == TK_NAME) {
        static const char *const cn[] = {"true", "True", "false", "False", "none", "None"};
        for (int j = 0; j < 6; j++)
            if (tpl_p_tok_is(k, TK_NAME, cn[j])) {
                if (!(n = tpl_p_node(p, N_CONST, k->off))) return TPL_P_NOMEM(p);
                n->lit = j < 4 ? ld_tpl_value_bool(A, j < 2) : ld_tpl_value_none(A);
                if (!n->lit) return TPL_P_NOMEM(p);
                p->i++;
                return *out = n, LD_OK;
            }
        if (!(n = tpl_p_node(p, N_NAME, k->off)) || !tpl_p_set_name(p, n, k)) return TPL_P_NOMEM(p);
        if (n->slot == TPL_SLOT_LOOP) p->loop_refs++;
        if (tpl_p_tok_is(k, TK_NAME, "varargs")) p->refs |= 1;
        if (tpl_p_tok_is(k, TK_NAME, "kwargs")) p->refs |= 2;
        p->i++;
    } else if (k->type == TK_STRING) {
        /* adjacent literals concatenate, as in Python */
        size_t total = 0, j = p->i;
        while (j < p->toks->n && p->toks->v[j].type == TK_STRING) total += p->toks->v[j++].len;
        char *buf = ld_arena_alloc(A, total + 1);
        if (!buf || !(n = tpl_p_node(p, N_CONST, k->off))) return TPL_P_NOMEM(p);
        total = 0;
        for (; p->i < j; p->i++) memcpy(buf + total, p->toks->v[p->i].s, p->toks->v[p->i].len), total += p->toks->v[p->i].len;
        buf[total] = 0;
        if (!(n->lit = ld_tpl_value_str(A, buf, total))) return TPL_P_NOMEM(p);
    } else if (k->type == TK_INT || k->type == TK_FLOAT) {
        if (!(n = tpl_p_node(p, N_CONST, k->off))) return TPL_P_NOMEM(p);
        n->lit = k->type == TK_INT ? ld_tpl_value_int(A, k->i) : ld_tv_float(A, k->f);
        if (!n->lit) return TPL_P_NOMEM(p);
        p->i++;
    } else if (tpl_p_tok_is(k, TK_OP, "(") && p->i + 1 < p->toks->n && tpl_p_tok_is(&p->toks->v[p->i + 1], TK_OP, ")")) {
        if (!(n = tpl_p_node(p, N_TUPLE, k->off))) return TPL_P_NOMEM(p); /* () */
        p->i += 2;
    } else if (tpl_p_tok_is(k, TK_OP, "(")) {
        p->i++;
        LD_TRY(tpl_p_parse_expr(p, &n));
        if (tpl_p_at_op(p, ",")) {
            tpl_node *t = tpl_p_node(p, N_TUPLE, k->off);
            nvec v = {0};
            if (!t || !tpl_p_vpush(&v, n)) return free(v.v), TPL_P_NOMEM(p);
            while (tpl_p_at_op(p, ",")) {
                p->i++;
                if (tpl_p_at_op(p, ")")) break;
                ld_status s = tpl_p_parse_expr(p, &n);
                if (s != LD_OK) return free(v.v), s;
                if (!tpl_p_vpush(&v, n)) return free(v.v), TPL_P_NOMEM(p);
            }
            if (!tpl_p_vfinish(p, &v, &t->list)) return TPL_P_NOMEM(p);
            n = t;
        }
        LD_TRY(tpl_p_expect_op(p, ")"));
    } else if (tpl_p_tok_is(k, TK_OP, "[")) {
        if (!(n = tpl_p_node(p, N_LIST, k->off))) return TPL_P_NOMEM(p);
        LD_TRY(parse_seq(p, "]", n, false));
    } else if (tpl_p_tok_is(k, TK_OP, "{")) {
        if (!(n = tpl_p_node(p, N_DICT, k->off))) return TPL_P_NOMEM(p);
        LD_TRY(parse_seq(p, "}", n, true));
    } else {
        return tpl_p_pfail(p, k, k->type == TK_EOF ? LD_ERR_TRUNCATED : LD_ERR_SYNTAX, "unexpected token");
    }
    *out = n;
    return LD_OK;
}

/* `callee(args)` with the '(' at token k: *n becomes the call node. */
static ld_status parse_call_on(parser *p, const tpl_token *k, tpl_node **n)
{
    tpl_node *c = tpl_p_node(p, N_CALL, k->off);
    if (!c) return TPL_P_NOMEM(p);
    c->a = *n;
    LD_TRY(tpl_p_parse_call_args(p, c));
    *n = c;
    return LD_OK;
}

static ld_status parse_subscript(parser *p, tpl_node *obj, tpl_node **out)
{
    uint32_t off = tpl_p_cur(p)->off;
    tpl_node *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    p->i++;
    if (tpl_p_at_op(p, "]")) /* x[] is a syntax error in jinja2 as in Python */
        return tpl_p_pfail(p, tpl_p_cur(p), LD_ERR_SYNTAX, "expected an expression in '[]'");
    for (;;) {
        if (!tpl_p_at_op(p, ":") && !tpl_p_at_op(p, "]")) LD_TRY(tpl_p_parse_expr(p, &parts[k]));
        if (tpl_p_at_op(p, ":") && k < 2) { p->i++, k++; continue; }
        break;
    }
    LD_TRY(tpl_p_expect_op(p, "]"));
    tpl_node *n = tpl_p_node(p, k ? N_SLICE : N_GETITEM, off);
    if (!n) return TPL_P_NOMEM(p);
    n->a = obj;
    if (k) {
        n->list.v = ld_arena_alloc(&p->t->arena, 3 * sizeof *n->list.v);
        if (!n->list.v) return TPL_P_NOMEM(p);
        n->list.n = 3;
        memcpy(n->list.v, parts, sizeof parts);
    } else {
        n->b = parts[0];
        if (n->b->kind == N_CONST && n->b->lit->kind == TV_STR) { /* x['key'] */
            n->s = n->b->lit->u.str.s, n->s_len = n->b->lit->u.str.len;
            n->neg = TPL_FAST_KEY | (ld_tpl_attr_plain(n->s, n->s_len) ? TPL_KEY_PLAIN : 0);
        } else if (n->b->kind == N_CONST && n->b->lit->kind == TV_INT) { /* x[0] */
            n->neg = TPL_FAST_INDEX;
        }
    }
    *out = n;
    return LD_OK;
}

static ld_status parse_postfix(parser *p, tpl_node *n, tpl_node **out)
{
    for (;;) {
        const tpl_token *k = tpl_p_cur(p);
        if (tpl_p_tok_is(k, TK_OP, ".")) {
            p->i++;
            const tpl_token *a = tpl_p_cur(p);
            tpl_node *g;
            if (a->type == TK_NAME) {
                if (!(g = tpl_p_node(p, N_GETATTR, a->off)) || !(g->s = tpl_p_tok_str(p, a))) return TPL_P_NOMEM(p);
                g->s_len = a->len;
                if (ld_tpl_attr_plain(g->s, g->s_len)) g->neg = TPL_FAST_KEY | TPL_KEY_PLAIN;
            } else if (a->type == TK_INT) {
                if (!(g = tpl_p_node(p, N_GETITEM, a->off)) || !(g->b = tpl_p_node(p, N_CONST, a->off))) return TPL_P_NOMEM(p);
                if (!(g->b->lit = ld_tpl_value_int(&p->t->arena, a->i))) return TPL_P_NOMEM(p);
                g->neg = TPL_FAST_INDEX; /* x.0, as x[0] */
            } else {
                return tpl_p_pfail(p, a, LD_ERR_SYNTAX, "expected attribute name");
            }
            g->a = n;
            n = g;
            p->i++;
        } else if (tpl_p_tok_is(k, TK_OP, "[")) {
            LD_TRY(parse_subscript(p, n, &n));
        } else if (tpl_p_tok_is(k, TK_OP, "(")) {
            LD_TRY(parse_call_on(p, k, &n));
        } else {
            break;
        }
    }
    *out = n;
    return LD_OK;
}

ld_status tpl_p_parse_filters(parser *p, tpl_node *n, tpl_node **out)
{
    for (;;) {
        const tpl_token *k = tpl_p_cur(p);
        if (tpl_p_tok_is(k, TK_OP, "|") || tpl_p_tok_is(k, TK_NAME, "is")) {
            bool is_test = k->type == TK_NAME;
            p->i++;
            tpl_node *f = tpl_p_node(p, is_test ? N_TEST : N_FILTER, k->off);
            if (!f) return TPL_P_NOMEM(p);
            if (is_test && tpl_p_at_name(p, "not")) f->neg = 1, p->i++;
            const tpl_token *nm = tpl_p_cur(p);
            if (nm->type != TK_NAME) return tpl_p_pfail(p, nm, LD_ERR_SYNTAX, is_test ? "expected test name" : "expected filter name");
            if (!(f->s = tpl_p_tok_str(p, nm))) return TPL_P_NOMEM(p);
            f->slot = is_test ? ld_tpl_test_id(f->s) : ld_tpl_filter_id(f->s);
            p->i++;
            /* dotted filter names (jinja allows foo.bar) */
            f->a = n;
            if (tpl_p_at_op(p, "(")) {
                LD_TRY(tpl_p_parse_call_args(p, f));
            } else if (is_test) {
                const tpl_token *x = tpl_p_cur(p);
                bool arg = (x->type == TK_NAME || x->type == TK_STRING || x->type == TK_INT ||
                            x->type == TK_FLOAT || tpl_p_tok_is(x, TK_OP, "[") || tpl_p_tok_is(x, TK_OP, "{")) &&
                           !tpl_p_tok_is(x, TK_NAME, "else") && !tpl_p_tok_is(x, TK_NAME, "or") &&
                           !tpl_p_tok_is(x, TK_NAME, "and") && !tpl_p_tok_is(x, TK_NAME, "is");
                if (arg) {
                    tpl_node *e;
                    LD_TRY(parse_primary(p, &e));
                    LD_TRY(parse_postfix(p, e, &e));
                    f->list.v = ld_arena_alloc(&p->t->arena, sizeof *f->list.v);
                    if (!f->list.v) return TPL_P_NOMEM(p);
                    f->list.v[0] = e, f->list.n = 1;
                }
            }
            n = f;
        } else if (tpl_p_tok_is(k, TK_OP, "(")) {
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
    const tpl_token *k = tpl_p_cur(p);
    LD_TRY(tpl_p_enter(p));
    if (tpl_p_tok_is(k, TK_OP, "-") || tpl_p_tok_is(k, TK_OP, "+")) {
        p->i++;
        if (!(n = tpl_p_node(p, N_UNARY, k->off))) return TPL_P_NOMEM(p);
        n->neg = (uint8_t)k->s[0];
        LD_TRY(parse_unary(p, false, &n->a));
    } else {
        LD_TRY(parse_primary(p, &n));
    }
    LD_TRY(parse_postfix(p, n, &n));
    if (with_filter) LD_TRY(tpl_p_parse_filters(p, n, &n));
    p->depth--;
    *out = n;
    return LD_OK;
}

typedef ld_status (*level_fn)(parser *p, tpl_node **out);

static ld_status binop(parser *p, tpl_node **out, tpl_node *l, level_fn next, char op, uint32_t off)
{
    tpl_node *n = tpl_p_node(p, N_BINOP, off);
    if (!n) return TPL_P_NOMEM(p);
    n->neg = (uint8_t)op;
    n->a = l;
    LD_TRY(next(p, &n->b));
    *out = n;
    return LD_OK;
}

static ld_status parse_pow(parser *p, tpl_node **out)
{
    LD_TRY(parse_unary(p, true, out));
    while (tpl_p_at_op(p, "**")) {
        uint32_t off = tpl_p_cur(p)->off;
        p->i++;
        tpl_node *n = tpl_p_node(p, N_BINOP, off);
        if (!n) return TPL_P_NOMEM(p);
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
        char op = tpl_p_at_op(p, "*") ? '*' : tpl_p_at_op(p, "/") ? '/' : tpl_p_at_op(p, "//") ? 'f' : tpl_p_at_op(p, "%") ? '%' : 0;
        if (!op) return LD_OK;
        uint32_t off = tpl_p_cur(p)->off;
        p->i++;
        LD_TRY(binop(p, out, *out, parse_pow, op, off));
    }
}

static ld_status parse_concat(parser *p, tpl_node **out)
{
    LD_TRY(parse_math2(p, out));
    while (tpl_p_at_op(p, "~")) {
        uint32_t off = tpl_p_cur(p)->off;
        p->i++;
        LD_TRY(binop(p, out, *out, parse_math2, '~', off));
    }
    return LD_OK;
}

static ld_status parse_math1(parser *p, tpl_node **out)
{
    LD_TRY(parse_concat(p, out));
    for (;;) {
        char op = tpl_p_at_op(p, "+") ? '+' : tpl_p_at_op(p, "-") ? '-' : 0;
        if (!op) return LD_OK;
        uint32_t off = tpl_p_cur(p)->off;
        p->i++;
        LD_TRY(binop(p, out, *out, parse_concat, op, off));
    }
}

/* The shape of the unchained comparison n (TPL_CMP_*) */
static uint32_t compare_shape(const tpl_node *n)
{
    const tpl_node *a = n->a, *b = n->b;
    bool str_b = b->kind == N_CONST && b->lit->kind == TV_STR;
    if ((n->neg == 1 || n->neg == 2) && str_b && (a->kind == N_GETATTR || a->kind == N_GETITEM) &&
        (a->neg & TPL_FAST_KEY) && a->a->kind == N_NAME)
        return TPL_CMP_KEY_EQ_STR;
    if ((n->neg == 7 || n->neg == 8) && a->kind == N_CONST && a->lit->kind == TV_STR && b->kind == N_NAME)
        return TPL_CMP_STR_IN_NAME;
    return TPL_CMP_ANY;
}

static ld_status parse_compare(parser *p, tpl_node **out)
{
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    LD_TRY(parse_math1(p, out));
    for (tpl_node *prev = NULL;;) {
        int op = 0;
        for (int j = 0; j < 6; j++) if (tpl_p_at_op(p, ops[j])) op = j + 1;
        uint32_t off = tpl_p_cur(p)->off;
        if (!op && tpl_p_at_name(p, "in")) op = 7;
        else if (!op && tpl_p_at_name(p, "not") && p->i + 1 < p->toks->n && tpl_p_tok_is(&p->toks->v[p->i + 1], TK_NAME, "in")) op = 8, p->i++;
        if (!op) return LD_OK;
        p->i++;
        tpl_node *n = tpl_p_node(p, N_COMPARE, off);
        if (!n) return TPL_P_NOMEM(p);
        n->neg = (uint8_t)op, n->a = prev ? prev->b : *out, n->c = prev;
        LD_TRY(parse_math1(p, &n->b));
        if (!prev) n->slot = compare_shape(n);
        *out = prev = n;
    }
}

static ld_status parse_not(parser *p, tpl_node **out)
{
    if (tpl_p_at_name(p, "not")) {
        tpl_node *n = tpl_p_node(p, N_NOT, tpl_p_cur(p)->off);
        if (!n) return TPL_P_NOMEM(p);
        p->i++;
        LD_TRY(tpl_p_enter(p));
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
    while (tpl_p_at_name(p, word)) {
        tpl_node *n = tpl_p_node(p, kind, tpl_p_cur(p)->off);
        if (!n) return TPL_P_NOMEM(p);
        p->i++;
        n->a = *out;
        LD_TRY(next(p, &n->b));
        *out = n;
    }
    return LD_OK;
}
static ld_status parse_and(parser *p, tpl_node **out) { return parse_logic(p, out, "and", N_AND, parse_not); }
ld_status tpl_p_parse_or(parser *p, tpl_node **out) { return parse_logic(p, out, "or", N_OR, parse_and); }

ld_status tpl_p_parse_expr(parser *p, tpl_node **out)
{
    LD_TRY(tpl_p_enter(p));
    LD_TRY(tpl_p_parse_or(p, out));
    while (tpl_p_at_name(p, "if")) {
        tpl_node *n = tpl_p_node(p, N_COND, tpl_p_cur(p)->off);
        if (!n) return TPL_P_NOMEM(p);
        p->i++;
        n->a = *out;
        LD_TRY(tpl_p_parse_or(p, &n->b));
        if (tpl_p_at_name(p, "else")) {
            p->i++;
            LD_TRY(tpl_p_parse_expr(p, &n->c));
        }
        *out = n;
    }
    p->depth--;
    return LD_OK;
}
