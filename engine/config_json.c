/* config_json.c - see config_json.h. */
#include "config_json.h"

#include <math.h>

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
