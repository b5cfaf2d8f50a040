/* ref_dtype.h - the number formats the weights come in, one value at a
 * time, exactly: bf16, f16, FP8 E4M3 (DeepSeek's FP8 weights), FP4 E2M1 and
 * UE8M0 (DeepSeek-V4's FP4 weights and their scales) to fp32, and fp32
 * rounded to bf16 (what the production-style variants round through).  The
 * leaf of kernels/ref/: every kernel file converts through it. */
#ifndef LD_REF_DTYPE_H
#define LD_REF_DTYPE_H

#include <stdint.h>

float ld_ref_bf16_to_f32(uint16_t h);
float ld_ref_f16_to_f32(uint16_t h);

/* FP8 E4M3 ("fn": no infinities, S.1111.111 is NaN) to fp32, exact:
 * exponent bias 7, subnormals m/8 * 2^-6, largest 448. */
float ld_ref_fp8_e4m3_to_f32(uint8_t v);

/* FP4 E2M1 (1 sign, 2 exponent, 1 mantissa bits) to fp32, exact: the
 * values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (code & 8). */
float ld_ref_ds4_e2m1_to_f32(unsigned code);

/* UE8M0 (an unsigned biased exponent) to fp32: 2^(v - 127); 255 is NaN. */
float ld_ref_ds4_e8m0_to_f32(uint8_t v);

/* x rounded to the nearest bf16 (ties to even; NaN stays NaN), as fp32 */
float ld_var_bf16_round(float x);

#endif /* LD_REF_DTYPE_H */
