/* config_json.h - typed reads of config.json fields (cJSON), shared by the
 * model families' config parsers: every error names the field, `where`
 * being its parent's prefix ("rope_parameters.", or ""). */
#ifndef LD_CONFIG_JSON_H
#define LD_CONFIG_JSON_H

#include <cjson/cJSON.h>

#include "ld_error.h"

/* The whole file at `path` (at most 16 MiB) into a malloc'd *buf of *len
 * bytes (caller frees); LD_ERR_IO / LD_ERR_LIMIT / LD_ERR_NOMEM with
 * err->path = path. */
ld_status ld_cfg_read_file(const char *path, char **buf, size_t *len, ld_error *err);

/* "dir/config.json", malloc'd (caller frees); NULL when out of memory */
char *ld_cfg_path(const char *dir);

/* o[k], NULL when absent or null */
const cJSON *ld_cfg_get(const cJSON *o, const char *k);

/* An integer in [lo, hi]; absent: `def`, or an error when def < lo (required). */
ld_status ld_cfg_int(const cJSON *o, const char *where, const char *k, long lo, long hi, long def, int *out,
                     ld_error *err);

/* A finite number > 0 (>= 0 when zero_ok); absent: an error when
 * `required`, else `def`. */
ld_status ld_cfg_num(const cJSON *o, const char *where, const char *k, double def, int required, int zero_ok,
                     double *out, ld_error *err);

/* A boolean; absent: `def`. */
ld_status ld_cfg_bool(const cJSON *o, const char *where, const char *k, int def, int *out, ld_error *err);

#endif /* LD_CONFIG_JSON_H */
