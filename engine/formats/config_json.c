/* config_json.c - see config_json.h. */
#include "config_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *ld_cfg_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof "/config.json";
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/config.json", dir);
    return p;
}

ld_status ld_cfg_read_file(const char *path, char **out, size_t *len, ld_error *err)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        ld_status s = LD_FAIL(err, LD_ERR_IO, 0, "cannot open '%.200s'", path);
        if (err) err->path = path;
        return s;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    ld_status st = LD_OK;
    for (;;) {
        if (n == cap) {
            if (cap >= (1u << 24)) {
                st = LD_FAIL(err, LD_ERR_LIMIT, 0, "config larger than 16 MiB");
                break;
            }
            char *nb = realloc(buf, cap = cap ? cap * 2 : 4096);
            if (!nb) {
                st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (!got) break;
        n += got;
    }
    if (st == LD_OK && ferror(f)) st = LD_FAIL(err, LD_ERR_IO, 0, "cannot read '%.200s'", path);
    fclose(f);
    if (st != LD_OK) {
        free(buf);
        if (err) err->path = path;
        return st;
    }
    *out = buf;
    *len = n;
    return LD_OK;
}

const cJSON *ld_cfg_get(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNull(v) ? NULL : v;
}

ld_status ld_cfg_int(const cJSON *o, const char *where, const char *k, long lo, long hi, long def, int *out,
                     ld_error *err)
{
    const cJSON *v = ld_cfg_get(o, k);
    if (!v) {
        if (def < lo) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s%s' is missing", where, k);
        *out = (int)def;
        return LD_OK;
    }
    if (!cJSON_IsNumber(v) || floor(v->valuedouble) != v->valuedouble || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s%s' is not an integer in [%ld, %ld]", where, k, lo,
                       hi);
    *out = (int)v->valuedouble;
    return LD_OK;
}

ld_status ld_cfg_num(const cJSON *o, const char *where, const char *k, double def, int required, int zero_ok,
                     double *out, ld_error *err)
{
    const cJSON *v = ld_cfg_get(o, k);
    if (!v) {
        if (required) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s%s' is missing", where, k);
        *out = def;
        return LD_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
        (!zero_ok && v->valuedouble == 0))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s%s' is not a %s number", where, k,
                       zero_ok ? "non-negative" : "positive");
    *out = v->valuedouble;
    return LD_OK;
}

ld_status ld_cfg_bool(const cJSON *o, const char *where, const char *k, int def, int *out, ld_error *err)
{
    const cJSON *v = ld_cfg_get(o, k);
    if (!v) {
        *out = def;
        return LD_OK;
    }
    if (!cJSON_IsBool(v)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s%s' is not a boolean", where, k);
    *out = cJSON_IsTrue(v);
    return LD_OK;
}
