/* tpl_parser.h - what the parser's files share (tpl_parse.c: statements
 * and the entry points; tpl_parse_expr.c: expressions; tpl_parse_util.c:
 * tokens, nodes, names and errors).  Internal to syntax/. */
#ifndef LD_TPL_PARSER_H
#define LD_TPL_PARSER_H

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

/* a growing list of nodes, copied into the template's arena once complete */
typedef struct nvec {
    tpl_node **v;
    size_t n, cap;
} nvec;

#define TPL_P_NOMEM(p) tpl_p_pfail((p), NULL, LD_ERR_NOMEM, "out of memory")

/* tokens (tpl_parse_util.c) */
const tpl_token *tpl_p_cur(parser *p);
ld_status tpl_p_pfail(parser *p, const tpl_token *at, ld_status code, const char *what);
bool tpl_p_tok_is(const tpl_token *k, int type, const char *s);
bool tpl_p_at_op(parser *p, const char *s);
bool tpl_p_at_name(parser *p, const char *s);
ld_status tpl_p_expect_op(parser *p, const char *s);
/* one more level of nesting, refused past MAX_PARSE_DEPTH (the caller
 * decrements p->depth when it leaves) */
ld_status tpl_p_enter(parser *p);

/* nodes */
tpl_node *tpl_p_node(parser *p, int kind, uint32_t off);
bool tpl_p_vpush(nvec *v, tpl_node *n);
bool tpl_p_vfinish(parser *p, nvec *v, tpl_nodes *out);

/* names and their slots */
long tpl_p_intern(parser *p, const char *s, size_t len);
const char *tpl_p_tok_str(parser *p, const tpl_token *k);
bool tpl_p_set_name(parser *p, tpl_node *n, const tpl_token *k);
uint32_t tpl_p_slot_of(const parser *p, const char *name);

/* expressions (tpl_parse_expr.c) */
ld_status tpl_p_parse_expr(parser *p, tpl_node **out);
ld_status tpl_p_parse_or(parser *p, tpl_node **out);
ld_status tpl_p_parse_call_args(parser *p, tpl_node *n);
ld_status tpl_p_parse_filters(parser *p, tpl_node *n, tpl_node **out);

#endif
