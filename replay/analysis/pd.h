/* pd.h - one request, two servers: what the prefill and the decode server
 * of a prefill/decode deployment logged differently about one request
 * (parse/pair/pair_pd.c joined their records; docs/analysis.md,
 * "template.servers_differ").  The router posts one body to both servers,
 * so their message arrays, prompts and input ids must be the same; when
 * they are not, two builds or two templates serve one request. */
#ifndef LD_PD_H
#define LD_PD_H

#include "ld_arena.h"
#include "finding.h"
#include "ld_error.h"
#include "parse/request/request.h"

/* Appends one template.servers_differ error to *out when r (the decode
 * server's record, LD_PD_JOINED) and its peer logged different messages,
 * prompts or input ids: what differs, the prefill record's rid (related_rid)
 * and, when both texts were kept, the first differing byte of the prompts
 * or the first differing message with excerpts of both sides.
 * Errors: LD_ERR_NOMEM. */
ld_status ld_pd_check(const ld_request *r, ld_arena *arena, ld_findings *out, ld_error *err);

#endif
