/* fp8_config.c - see fp8_config.h. */
#include "fp8_config.h"

#include <math.h>
#include <string.h>

/* the string keys and the one value each may take */
static const struct {
    const char *key, *value;
} fixed[] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"scale_fmt", "ue8m0"}};

static ld_status check_key(const cJSON *e, ld_error *err)
{
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (strcmp(e->string, fixed[i].key) != 0) continue;
        if (!cJSON_IsString(e) || strcmp(e->valuestring, fixed[i].value) != 0)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                           "config field 'quantization_config.%s' = '%.40s' is not supported (%s)", e->string,
                           cJSON_IsString(e) ? e->valuestring : "?", fixed[i].value);
        return LD_OK;
    }
    if (strcmp(e->string, "weight_block_size") == 0) return LD_OK;
    if (strcmp(e->string, "modules_to_not_convert") == 0) {
        if (cJSON_IsNull(e) || cJSON_IsArray(e)) return LD_OK; /* those weights simply are not FP8 */
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'quantization_config.modules_to_not_convert' is not a list");
    }
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'quantization_config.%.60s' is not supported", e->string);
}

ld_status ld_fp8_config_parse(const cJSON *root, ld_fp8_config *out, ld_error *err)
{
    memset(out, 0, sizeof *out);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if (!q || cJSON_IsNull(q)) return LD_OK;
    if (!cJSON_IsObject(q)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'quantization_config' is not an object");
    if (!cJSON_GetObjectItemCaseSensitive(q, "quant_method"))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'quantization_config.quant_method' is missing");
    for (const cJSON *e = q->child; e; e = e->next) LD_TRY(check_key(e, err));
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(q, "weight_block_size");
    if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'quantization_config.weight_block_size' is not a list of 2 integers");
    int k = 0;
    for (const cJSON *e = b->child; e; e = e->next, k++) {
        if (!cJSON_IsNumber(e) || floor(e->valuedouble) != e->valuedouble || e->valuedouble < 1 ||
            e->valuedouble > 1 << 16)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                           "config field 'quantization_config.weight_block_size' is not a list of 2 integers in [1, 65536]");
        out->block[k] = (int)e->valuedouble;
    }
    out->on = 1;
    return LD_OK;
}
