/* capture_internal.h - what the capture's files share and nothing outside
 * parse/capture/ uses. */
#ifndef LD_CAPTURE_INTERNAL_H
#define LD_CAPTURE_INTERNAL_H

#include "capture.h"

/* *buf grown (realloc) to hold n bytes; LD_ERR_NOMEM. */
ld_status ld_capture_reserve(size_t n, char **buf, size_t *cap, ld_error *err);

/* A Docker record in moby's own layout, its line decoded into out (room
 * for len bytes) (capture_docker.c): 0, or -1 when the record is anything
 * else (cJSON then reads it). */
int ld_capture_docker_fast(const char *line, size_t len, char *out, ld_capture_record *rec);

/* A JSON wrapper's record read with cJSON (any layout): its line decoded
 * into *buf, its source ("stream") after it.  LD_ERR_SYNTAX, LD_ERR_NOMEM.
 * The fuzz target checks the fast path above against it. */
ld_status ld_capture_parse_json(ld_capture_kind kind, const char *line, size_t len, char **buf, size_t *cap,
                                ld_capture_record *rec, ld_error *err);

#endif
