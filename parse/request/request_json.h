/* request_json.h - a request record as JSON and back, byte for byte: what a
 * report shows of a request (its message array and templated prompt), for
 * a result that is written on one machine and read on another (`logdiff
 * regress --partial` / `--merge`).
 *
 * Texts are kept exactly: a text that is valid UTF-8 without NUL bytes is a
 * JSON string (cJSON's reader gives the same bytes back); any other (a
 * log's invalid bytes, lone surrogates kept as WTF-8, a NUL) is
 * {"hex": "..."}.  Only what the reports and the alignment read is kept:
 * rid, flags, the messages (role, content, reasoning, tool calls,
 * tool_call_id, name) and the prompt, each ld_text with its flags, cut and
 * character count.  The reader is for files from elsewhere: every field is
 * checked, a bad one is an error naming it, never a crash.
 */
#ifndef LD_REQUEST_JSON_H
#define LD_REQUEST_JSON_H

#include <cjson/cJSON.h>

#include "ld_arena.h"
#include "ld_error.h"
#include "request.h"

/* s[0..len) as a lossless JSON value (string or {"hex"}); NULL s gives
 * null.  NULL on out of memory. */
cJSON *ld_json_bytes(const char *s, size_t len);

/* Reads a value of ld_json_bytes into a NUL-terminated copy in `arena`
 * (*s NULL for null).  Returns 0, or -1 when j is neither. */
int ld_json_bytes_get(const cJSON *j, ld_arena *arena, const char **s, size_t *len);

/* The record's reported fields as an object; NULL on out of memory. */
cJSON *ld_request_json(const ld_request *r);

/* A new record (owned by the caller: ld_request_free) from an object of
 * ld_request_json.  LD_ERR_SYNTAX naming the bad field, or LD_ERR_NOMEM. */
ld_status ld_request_from_json(const cJSON *j, ld_request **out, ld_error *err);

#endif
