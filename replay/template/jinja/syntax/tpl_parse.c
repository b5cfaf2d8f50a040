/* tpl_parse.c - recursive-descent parser from tokens to the AST, following
 * jinja2's grammar (parser.py): statements if/elif/else, for (with tuple
 * targets, `if` filter, else and `recursive`), set (name, tuple, ns.attr,
 * block), macro, call blocks, filter blocks, break/continue ({% raw %} is
 * the lexer's); the entry points.  Expressions: tpl_parse_expr.c. */
#include <stdlib.h>
#include <string.h>

#include "tpl_parser.h"

/* ---------------------------------------------------------------- statements */

static ld_status parse_body(parser *p, const char *const *stops, tpl_nodes *out);

static ld_status block_end(parser *p)
{
    if (tpl_p_cur(p)->type != TK_BLOCK_END)
        return tpl_p_pfail(p, tpl_p_cur(p), tpl_p_cur(p)->type == TK_EOF ? LD_ERR_TRUNCATED : LD_ERR_SYNTAX, "expected end of block tag");
    p->i++;
    return LD_OK;
}

/* after `{%`: is the current name one of stops? */
static bool at_stop(parser *p, const char *const *stops)
{
    if (!stops || tpl_p_cur(p)->type != TK_BLOCK_BEGIN || p->i + 1 >= p->toks->n) return false;
    for (int j = 0; stops[j]; j++)
        if (tpl_p_tok_is(&p->toks->v[p->i + 1], TK_NAME, stops[j])) return true;
    return false;
}

static ld_status expect_end_tag(parser *p, const char *name)
{
    /* current: BLOCK_BEGIN name */
    p->i++;
    if (!tpl_p_at_name(p, name)) return tpl_p_pfail(p, tpl_p_cur(p), LD_ERR_SYNTAX, "unexpected end tag");
    p->i++;
    return block_end(p);
}

static ld_status parse_if(parser *p, tpl_node *n)
{
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    LD_TRY(tpl_p_parse_expr(p, &n->a));
    LD_TRY(block_end(p));
    LD_TRY(parse_body(p, stops, &n->list));
    if (tpl_p_cur(p)->type == TK_EOF) return tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "missing endif");
    p->i++; /* BLOCK_BEGIN */
    if (tpl_p_at_name(p, "elif")) {
        tpl_node *e = tpl_p_node(p, N_IF, tpl_p_cur(p)->off);
        n->list2.v = ld_arena_alloc(&p->t->arena, sizeof *n->list2.v);
        if (!e || !n->list2.v) return TPL_P_NOMEM(p);
        n->list2.v[0] = e, n->list2.n = 1;
        p->i++;
        return parse_if(p, e);
    }
    if (tpl_p_at_name(p, "else")) {
        static const char *const st2[] = {"endif", NULL};
        p->i++;
        LD_TRY(block_end(p));
        LD_TRY(parse_body(p, st2, &n->list2));
        if (tpl_p_cur(p)->type == TK_EOF) return tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "missing endif");
        return expect_end_tag(p, "endif");
    }
    p->i++; /* endif */
    return block_end(p);
}

static ld_status parse_targets(parser *p, tpl_node *n)
{
    nvec v = {0};
    for (;;) {
        const tpl_token *k = tpl_p_cur(p);
        if (k->type != TK_NAME) return free(v.v), tpl_p_pfail(p, k, LD_ERR_SYNTAX, "expected a name");
        tpl_node *t = tpl_p_node(p, N_NAME, k->off);
        if (!t || !tpl_p_set_name(p, t, k) || !tpl_p_vpush(&v, t)) return free(v.v), TPL_P_NOMEM(p);
        p->i++;
        if (!tpl_p_at_op(p, ",")) break;
        p->i++;
    }
    if (v.n == 1) {
        n->s = v.v[0]->s, n->s_len = v.v[0]->s_len, n->slot = v.v[0]->slot;
        free(v.v);
        return LD_OK;
    }
    if (!(n->b = tpl_p_node(p, N_TUPLE, n->off))) return free(v.v), TPL_P_NOMEM(p);
    return tpl_p_vfinish(p, &v, &n->b->list) ? LD_OK : TPL_P_NOMEM(p);
}

static ld_status parse_for(parser *p, tpl_node *n)
{
    static const char *const stops[] = {"else", "endfor", NULL};
    const tpl_token *first = tpl_p_cur(p);
    LD_TRY(parse_targets(p, n));
    /* jinja2 refuses it when compiling: the loop binds `loop` itself */
    bool loop_target = n->b ? false : n->slot == TPL_SLOT_LOOP;
    for (size_t i = 0; n->b && i < n->b->list.n; i++) loop_target = loop_target || n->b->list.v[i]->slot == TPL_SLOT_LOOP;
    if (loop_target) return tpl_p_pfail(p, first, LD_ERR_SYNTAX, "can't assign to special loop variable in for-loop target");
    if (!tpl_p_at_name(p, "in")) return tpl_p_pfail(p, tpl_p_cur(p), LD_ERR_SYNTAX, "expected 'in'");
    p->i++;
    LD_TRY(tpl_p_parse_or(p, &n->a)); /* no ternary here: `if` starts the filter */
    if (tpl_p_at_name(p, "if")) {
        p->i++;
        LD_TRY(tpl_p_parse_expr(p, &n->c));
    }
    if (tpl_p_at_name(p, "recursive")) n->neg = TPL_FOR_RECURSIVE, p->i++;
    LD_TRY(block_end(p));
    /* `loop` in the body is this loop's: the loops around it see only the
     * names in its iterable, its filter and its else block */
    size_t loop_refs = p->loop_refs;
    LD_TRY(parse_body(p, stops, &n->list));
    if (p->loop_refs != loop_refs) n->neg |= TPL_FOR_USES_LOOP;
    p->loop_refs = loop_refs;
    if (tpl_p_cur(p)->type == TK_EOF) return tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "missing endfor");
    if (tpl_p_tok_is(&p->toks->v[p->i + 1], TK_NAME, "else")) {
        static const char *const st2[] = {"endfor", NULL};
        p->i += 2;
        LD_TRY(block_end(p));
        LD_TRY(parse_body(p, st2, &n->list2));
        if (tpl_p_cur(p)->type == TK_EOF) return tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "missing endfor");
    }
    return expect_end_tag(p, "endfor");
}

static ld_status parse_set(parser *p, tpl_node *n)
{
    const tpl_token *k = tpl_p_cur(p);
    if (k->type == TK_NAME && p->i + 2 < p->toks->n && tpl_p_tok_is(&p->toks->v[p->i + 1], TK_OP, ".")) {
        n->kind = N_SET_ATTR;
        if (!tpl_p_set_name(p, n, k) || !(n->b = tpl_p_node(p, N_NAME, p->toks->v[p->i + 2].off))) return TPL_P_NOMEM(p);
        if (p->toks->v[p->i + 2].type != TK_NAME) return tpl_p_pfail(p, &p->toks->v[p->i + 2], LD_ERR_SYNTAX, "expected attribute name");
        if (!(n->b->s = tpl_p_tok_str(p, &p->toks->v[p->i + 2]))) return TPL_P_NOMEM(p);
        n->b->s_len = p->toks->v[p->i + 2].len;
        p->i += 3;
    } else {
        LD_TRY(parse_targets(p, n));
    }
    if (tpl_p_cur(p)->type == TK_BLOCK_END && n->kind == N_SET && !n->b) {
        static const char *const stops[] = {"endset", NULL};
        n->kind = N_SET_BLOCK;
        p->i++;
        LD_TRY(parse_body(p, stops, &n->list));
        if (tpl_p_cur(p)->type == TK_EOF) return tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "missing endset");
        return expect_end_tag(p, "endset");
    }
    LD_TRY(tpl_p_expect_op(p, "="));
    LD_TRY(tpl_p_parse_expr(p, &n->a));
    if (tpl_p_at_op(p, ",")) { /* set a = 1, 2 builds a tuple */
        tpl_node *t = tpl_p_node(p, N_TUPLE, n->a->off);
        nvec v = {0};
        if (!t || !tpl_p_vpush(&v, n->a)) return TPL_P_NOMEM(p);
        while (tpl_p_at_op(p, ",")) {
            tpl_node *e;
            p->i++;
            ld_status s = tpl_p_parse_expr(p, &e);
            if (s != LD_OK) return free(v.v), s;
            if (!tpl_p_vpush(&v, e)) return free(v.v), TPL_P_NOMEM(p);
        }
        if (!tpl_p_vfinish(p, &v, &t->list)) return TPL_P_NOMEM(p);
        n->a = t;
    }
    return block_end(p);
}

static ld_status parse_params(parser *p, const tpl_token *k, tpl_node *n);

static ld_status parse_macro(parser *p, tpl_node *n)
{
    static const char *const stops[] = {"endmacro", NULL};
    const tpl_token *k = tpl_p_cur(p);
    if (k->type != TK_NAME) return tpl_p_pfail(p, k, LD_ERR_SYNTAX, "expected macro name");
    if (!tpl_p_set_name(p, n, k)) return TPL_P_NOMEM(p);
    p->i++;
    LD_TRY(parse_params(p, k, n));
    LD_TRY(block_end(p));
    uint8_t outer = p->refs;
    p->refs = 0;
    LD_TRY(parse_body(p, stops, &n->list));
    n->neg = p->refs; /* the macro takes extra arguments into varargs / kwargs */
    p->refs = outer;
    if (tpl_p_cur(p)->type == TK_EOF) return tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "missing endmacro");
    return expect_end_tag(p, "endmacro");
}

/* (a, b=1): names in n->kw (their slots in n->kw_slot), defaults in
 * n->list2 (NULL = none) */
static ld_status parse_params(parser *p, const tpl_token *k, tpl_node *n)
{
    /* reuse the call-argument parser, then check the shapes */
    tpl_node tmp;
    memset(&tmp, 0, sizeof tmp);
    LD_TRY(tpl_p_parse_call_args(p, &tmp));
    size_t np = tmp.list.n + tmp.list2.n;
    uint32_t *slots = ld_arena_alloc(&p->t->arena, (np ? np : 1) * sizeof *slots);
    n->kw = ld_arena_alloc(&p->t->arena, (np ? np : 1) * sizeof *n->kw);
    n->list2.v = ld_arena_alloc(&p->t->arena, (np ? np : 1) * sizeof *n->list2.v);
    if (!slots || !n->kw || !n->list2.v) return TPL_P_NOMEM(p);
    n->list2.n = np;
    n->kw_slot = slots;
    for (size_t j = 0; j < tmp.list.n; j++) {
        if (tmp.list.v[j]->kind != N_NAME) return tpl_p_pfail(p, k, LD_ERR_SYNTAX, "bad macro parameter");
        n->kw[j] = tmp.list.v[j]->s, slots[j] = tmp.list.v[j]->slot, n->list2.v[j] = NULL;
    }
    for (size_t j = 0; j < tmp.list2.n; j++) {
        n->kw[tmp.list.n + j] = tmp.kw[j], n->list2.v[tmp.list.n + j] = tmp.list2.v[j];
        slots[tmp.list.n + j] = tpl_p_slot_of(p, tmp.kw[j]);
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
    if (tpl_p_at_op(p, "(")) LD_TRY(parse_params(p, k, n));
    LD_TRY(tpl_p_parse_expr(p, &n->a));
    if (n->a->kind != N_CALL) return tpl_p_pfail(p, k, LD_ERR_SYNTAX, "expected a call after 'call'");
    LD_TRY(block_end(p));
    uint8_t outer = p->refs;
    p->refs = 0;
    LD_TRY(parse_body(p, stops, &n->list));
    n->neg = p->refs;
    p->refs = outer;
    if (tpl_p_cur(p)->type == TK_EOF) return tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "missing endcall");
    return expect_end_tag(p, "endcall");
}

/* {% filter f(args) | g %}body{% endfilter %} */
static ld_status parse_filter_block(parser *p, tpl_node *n)
{
    static const char *const stops[] = {"endfilter", NULL};
    const tpl_token *k = tpl_p_cur(p);
    n->kind = N_FILTER_BLOCK;
    if (k->type != TK_NAME) return tpl_p_pfail(p, k, LD_ERR_SYNTAX, "expected filter name");
    tpl_node *f = tpl_p_node(p, N_FILTER, k->off);
    if (!f || !(f->s = tpl_p_tok_str(p, k)) || !(n->b = f->a = tpl_p_node(p, N_BLOCK_VALUE, k->off))) return TPL_P_NOMEM(p);
    p->i++;
    if (tpl_p_at_op(p, "(")) LD_TRY(tpl_p_parse_call_args(p, f));
    LD_TRY(tpl_p_parse_filters(p, f, &n->a));
    LD_TRY(block_end(p));
    LD_TRY(parse_body(p, stops, &n->list));
    if (tpl_p_cur(p)->type == TK_EOF) return tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "missing endfilter");
    return expect_end_tag(p, "endfilter");
}

static ld_status parse_block(parser *p, tpl_node **out)
{
    const tpl_token *k = tpl_p_cur(p);
    tpl_node *n;
    if (k->type != TK_NAME) return tpl_p_pfail(p, k, LD_ERR_SYNTAX, "expected a statement");
    p->i++;
    if (tpl_p_tok_is(k, TK_NAME, "generation") || tpl_p_tok_is(k, TK_NAME, "endgeneration")) {
        *out = NULL; /* transformers' AssistantTracker: renders its body as is */
        return block_end(p);
    }
    if (!(n = tpl_p_node(p, N_IF, k->off))) return TPL_P_NOMEM(p);
    *out = n;
    if (tpl_p_tok_is(k, TK_NAME, "if")) return parse_if(p, n);
    if (tpl_p_tok_is(k, TK_NAME, "for")) return n->kind = N_FOR, parse_for(p, n);
    if (tpl_p_tok_is(k, TK_NAME, "set")) return n->kind = N_SET, parse_set(p, n);
    if (tpl_p_tok_is(k, TK_NAME, "macro")) return n->kind = N_MACRO, parse_macro(p, n);
    if (tpl_p_tok_is(k, TK_NAME, "call")) return parse_call_block(p, k, n);
    if (tpl_p_tok_is(k, TK_NAME, "filter")) return parse_filter_block(p, n);
    if (tpl_p_tok_is(k, TK_NAME, "break") || tpl_p_tok_is(k, TK_NAME, "continue")) {
        n->kind = k->s[0] == 'b' ? N_BREAK : N_CONTINUE;
        return block_end(p);
    }
    static const char *const unsup[] = {"include", "import", "from",
                                        "extends", "block", "with", "autoescape", "do", NULL};
    for (int j = 0; unsup[j]; j++)
        if (tpl_p_tok_is(k, TK_NAME, unsup[j])) return tpl_p_pfail(p, k, LD_ERR_UNSUPPORTED, "unsupported statement");
    return tpl_p_pfail(p, k, LD_ERR_SYNTAX, "unknown or misplaced statement");
}

static ld_status parse_body(parser *p, const char *const *stops, tpl_nodes *out)
{
    nvec v = {0};
    ld_status s = LD_OK;
    if ((s = tpl_p_enter(p)) != LD_OK) return s;
    while (s == LD_OK && tpl_p_cur(p)->type != TK_EOF && !at_stop(p, stops)) {
        const tpl_token *k = tpl_p_cur(p);
        tpl_node *n = NULL;
        if (k->type == TK_DATA) {
            if (!(n = tpl_p_node(p, N_DATA, k->off))) { s = TPL_P_NOMEM(p); break; }
            n->s = k->s, n->s_len = k->len;
            p->i++;
        } else if (k->type == TK_VAR_BEGIN) {
            p->i++;
            if (!(n = tpl_p_node(p, N_OUTPUT, k->off))) { s = TPL_P_NOMEM(p); break; }
            if ((s = tpl_p_parse_expr(p, &n->a)) != LD_OK) break;
            if (tpl_p_cur(p)->type != TK_VAR_END) { s = tpl_p_pfail(p, tpl_p_cur(p), tpl_p_cur(p)->type == TK_EOF ? LD_ERR_TRUNCATED : LD_ERR_SYNTAX, "expected '}}'"); break; }
            p->i++;
            if (n->a->kind == N_CONST && n->a->lit->kind == TV_STR) /* {{ 'text' }} prints the text: data */
                n->kind = N_DATA, n->s = n->a->lit->u.str.s, n->s_len = n->a->lit->u.str.len;
        } else if (k->type == TK_BLOCK_BEGIN) {
            p->i++;
            s = parse_block(p, &n);
        } else {
            s = tpl_p_pfail(p, k, LD_ERR_SYNTAX, "unexpected token");
        }
        if (s == LD_OK && n && !tpl_p_vpush(&v, n)) s = TPL_P_NOMEM(p);
    }
    if (s == LD_OK && stops && tpl_p_cur(p)->type == TK_EOF) s = tpl_p_pfail(p, NULL, LD_ERR_TRUNCATED, "unclosed block");
    if (!tpl_p_vfinish(p, &v, out) && s == LD_OK) s = TPL_P_NOMEM(p);
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
        if (tpl_p_intern(&p, reserved[i], strlen(reserved[i])) != (long)i) s = TPL_P_NOMEM(&p);
    if (s == LD_OK) s = parse_body(&p, NULL, &t->body);
    if (s == LD_OK && tpl_p_cur(&p)->type != TK_EOF) s = tpl_p_pfail(&p, tpl_p_cur(&p), LD_ERR_SYNTAX, "unexpected end tag");
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
