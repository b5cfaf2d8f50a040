/* showfmt.h - how `logdiff show` prints one request, for people (text) and
 * for scripts (one JSON object). */
#ifndef LD_CMD_SHOWFMT_H
#define LD_CMD_SHOWFMT_H

#include <stdio.h>

#include "cmd/cmd.h"
#include "parse/request/request.h"

/* Text for a person: sources, parameters, message table, prompt, output.
 * Long texts are cut in the middle unless `full`. */
void ld_cli_show_text(struct ld_cli *cli, const ld_request *r, int full);

/* One JSON object on one line, full texts and the parsed log values. */
void ld_cli_show_json(FILE *f, const ld_request *r);

#endif
