/* pd.h - one request served by a prefill and a decode server (SGLang's PD
 * disaggregation, parse/pair/pair_pd.c), said the same way by every
 * command: flag words, a line for people, an object for scripts, the
 * summary's counts. */
#ifndef LD_CMD_PD_H
#define LD_CMD_PD_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "parse/pair/pair.h"
#include "parse/request/request.h"

/* "pd", "pd-differs", "pd-alone" (comma-separated, appended to buf at *used). */
void ld_cli_pd_words(const ld_request *r, char *buf, size_t cap, size_t *used);

/* null for a request that did not come through the PD router; else
 * {"bootstrap_room": N, "role": "decode"|"prefill"|"unknown", "joined_by":
 * "rid"|"room"|null, "roles_guessed": bool, "differs": ["messages", "prompt",
 * "input_ids"], "peer": {"rid", "file", "line"} | null}. */
cJSON *ld_cli_pd_json(const ld_request *r);

/* One line for people ("" when r did not come through the PD router). */
const char *ld_cli_pd_line(const ld_request *r, char *buf, size_t cap);

/* The summary's line ("" when no record came through the PD router). */
const char *ld_cli_pd_summary(const ld_pair_stats *ps, char *buf, size_t cap);

/* {"joined": N, "joined_by_rid": N, "differ": N, "alone": N} */
cJSON *ld_cli_pd_summary_json(const ld_pair_stats *ps);

#endif
