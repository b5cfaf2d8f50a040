/* regress_html.h - what the HTML report's files share (regress_html.c: the
 * page; regress_html_req.c: one request's section). */
#ifndef LD_CMD_REGRESS_HTML_H
#define LD_CMD_REGRESS_HTML_H

#include <stdio.h>

#include "regress.h"

/* Items by conversation, for "earlier requests of this conversation". */
typedef struct ld_cli_regress_html_convs ld_cli_regress_html_convs;
ld_cli_regress_html_convs *ld_cli_regress_html_convs_new(const ld_cli_regress_run *run);
void ld_cli_regress_html_convs_free(ld_cli_regress_html_convs *c);

/* Text of a log (any bytes) as HTML. */
void ld_cli_regress_html_text(FILE *f, const char *s);

/* The id of an item's section ("r12"). */
void ld_cli_regress_html_anchor(FILE *f, size_t item);

/* The status word shown for an item. */
const char *ld_cli_regress_html_status(const ld_cli_regress_run *run, const ld_cli_regress_item *it);

/* "role-user", ... for a message role ("role-other" for the rest). */
const char *ld_cli_regress_html_role_class(const char *role);

/* The message array and the templated prompt side by side
 * (regress_html_prompt.c). */
void ld_cli_regress_html_side_by_side(FILE *f, size_t item, const ld_cli_regress_item *it);

/* The section of a request that is not ok. */
void ld_cli_regress_html_request(const ld_cli_regress_run *run, FILE *f, size_t item, const ld_cli_regress_html_convs *convs);

#endif
