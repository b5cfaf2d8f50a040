/* finding_json.h - a finding as JSON and back, byte for byte, for results
 * written on one machine and read on another (`logdiff regress --partial`
 * / `--merge`).  Texts go through request_json.h's lossless encoding; an
 * evidence number that does not apply is null.  The reader checks every
 * field (a kind it does not know is an error: a file from another logdiff).
 * (`logdiff diff --json` prints findings for people's scripts instead:
 * cmd/format/difffmt.c.) */
#ifndef LD_FINDING_JSON_H
#define LD_FINDING_JSON_H

#include <cjson/cJSON.h>

#include "finding.h"

/* NULL on out of memory. */
cJSON *ld_finding_json(const ld_finding *f);

/* Appends the finding read from j to *list (strings in `arena`).
 * LD_ERR_SYNTAX naming the bad field, or LD_ERR_NOMEM. */
ld_status ld_finding_from_json(const cJSON *j, ld_arena *arena, ld_findings *list, ld_error *err);

#endif
