/* fp8_config.h - the block-scaled FP8 `quantization_config` of HF
 * checkpoints (DeepSeek-V3/R1, Qwen3-FP8, ...):
 *   {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
 *    "weight_block_size": [b0, b1], "scale_fmt": "ue8m0",
 *    "modules_to_not_convert": [...]}
 * The linear weights may then be F8_E4M3 with an F32 `<name>_scale_inv`
 * per b0 x b1 block (kernels/ref/ref_ops.h: ld_f8b), read exactly.  Activations
 * are not quantized: the engine computes them in fp32 ("dynamic" is
 * accepted; scale_fmt only rounds activation scales).  Any other method,
 * format or key is LD_ERR_UNSUPPORTED naming it. */
#ifndef LD_FP8_CONFIG_H
#define LD_FP8_CONFIG_H

#include <cjson/cJSON.h>

#include "ld_error.h"

typedef struct ld_fp8_config {
    int on;       /* a quantization_config was there (and is FP8) */
    int block[2]; /* rows, cols of a scale block */
} ld_fp8_config;

/* Reads root's "quantization_config" (absent: out->on = 0). */
ld_status ld_fp8_config_parse(const cJSON *root, ld_fp8_config *out, ld_error *err);

#endif /* LD_FP8_CONFIG_H */
