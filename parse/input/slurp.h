/* slurp.h - reading a whole small file or stream into memory (templates,
 * configs, tokenizer.json, a request body).  Logs are never read this way:
 * they go through input.h, in windows.
 *
 * Ownership: *out is malloc'd, NUL-terminated (the NUL not counted in
 * *len), owned by the caller (free()).
 */
#ifndef LD_SLURP_H
#define LD_SLURP_H

#include <stddef.h>
#include <stdio.h>

#include "ld_error.h"

/* Reads `f` to its end.  Errors: LD_ERR_IO (read error), LD_ERR_NOMEM. */
ld_status ld_slurp_stream(FILE *f, char **out, size_t *len, ld_error *err);

/* Reads the file at `path`.  Errors: LD_ERR_IO naming the file and the
 * system's reason, LD_ERR_NOMEM. */
ld_status ld_slurp_file(const char *path, char **out, size_t *len, ld_error *err);

#endif
