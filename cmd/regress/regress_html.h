/* regress_html.h - what the HTML report's files share (regress_html.c: the
 * page; regress_html_req.c: one request's section). */
#ifndef LD_CMD_REGRESS_HTML_H
#define LD_CMD_REGRESS_HTML_H

#include <stdio.h>

#include "regress.h"

/* Items by conversation, for "earlier requests of this conversation". */
typedef struct rg_html_convs rg_html_convs;
rg_html_convs *rg_html_convs_new(const rg_run *run);
void rg_html_convs_free(rg_html_convs *c);

/* Text of a log (any bytes) as HTML. */
void rg_html_text(FILE *f, const char *s);

/* The id of an item's section ("r12"). */
void rg_html_anchor(FILE *f, size_t item);

/* The status word shown for an item. */
const char *rg_html_status(const rg_run *run, const rg_item *it);

/* "role-user", ... for a message role ("role-other" for the rest). */
const char *rg_html_role_class(const char *role);

/* The message array and the templated prompt side by side
 * (regress_html_prompt.c). */
void rg_html_side_by_side(FILE *f, size_t item, const rg_item *it);

/* The section of a request that is not ok. */
void rg_html_request(const rg_run *run, FILE *f, size_t item, const rg_html_convs *convs);

#endif
