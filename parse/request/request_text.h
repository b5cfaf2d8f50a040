/* request_text.h - internal helpers for text fields (request_text.c). */
#ifndef LD_REQUEST_TEXT_H
#define LD_REQUEST_TEXT_H

#include "request_fill.h"

/* 1 if v is a STR or a TRUNC of two STRs. */
int ld_req_is_text(const ld_py_value *v);

/* Decoded head (and tail, NULL unless TRUNC) of a text value; the bytes live
 * in ctx->scratch or in the value's buffer. */
ld_status ld_req_decode_parts(const ld_fill_ctx *ctx, const ld_py_value *v,
                              const char **h, size_t *hn, const char **t,
                              size_t *tn, ld_error *err);

/* Text of v into *t (bytes copied into r's arena when ctx->keep_text);
 * sets LD_REQ_TRUNCATED on r for a marker. */
ld_status ld_req_text(ld_request *r, const ld_fill_ctx *ctx, const ld_py_value *v,
                      ld_text *t, ld_error *err);

#endif
