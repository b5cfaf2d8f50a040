/* ref_variants.h - numerically distinct versions of reference ops, the way
 * production kernels commonly compute them, for op-by-op A/B in replay
 * (`logdiff replay --kernels OP=VARIANT`, `--compare-kernels`): each shows
 * on a CPU how much one precision choice moves a real request's numbers.
 * Same arguments and work split as the ref_ops.h kernel they replace;
 * fixed orders, so each is deterministic like the reference.
 *
 *   matmul bf16    operands rounded to bf16 (round to nearest even), their
 *                  products summed in fp32 in index order: a bf16 GEMM with
 *                  fp32 accumulation
 *   matmul splitk  K cut in splits of LD_VAR_SPLIT_K, each summed in index
 *                  order, the partial sums added in split order: split-K
 *                  with a fixed split size
 *   rmsnorm bf16   the reference's, its output rounded to bf16 (a bf16
 *                  activation stream)
 *   swiglu bf16    the reference's, its output rounded to bf16
 *   matmul fp8act  the activations quantized to FP8 E4M3 per token in
 *                  blocks of LD_VAR_ACT_BLOCK (scale = amax / 448, fp32;
 *                  values rounded to nearest even on the e4m3 grid), then
 *                  the reference matmul: what FP8 serving kernels (DeepSeek's
 *                  1x128 activation quantization) feed their GEMMs
 *   matmul fp8ue8m0  the same with the block scale rounded up to a power
 *                  of two (ld_var_fp8_act_ue8m0), as DeepSeek V3.1/V3.2/V4's
 *                  FP8 GEMMs are fed (scale_fmt "ue8m0")
 */
#ifndef LD_REF_VARIANTS_H
#define LD_REF_VARIANTS_H

#include <stddef.h>

#include "ref_ops.h"

#define LD_VAR_SPLIT_K 256
#define LD_VAR_ACT_BLOCK 128

void ld_var_matmul_bf16(float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                        int T, int K, int N, int rope_hd, float *row, size_t i0, size_t i1);
void ld_var_matmul_splitk(float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                          int T, int K, int N, int rope_hd, float *row, size_t i0, size_t i1);
void ld_var_rmsnorm_bf16(float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps, size_t i0,
                         size_t i1);
/* v rounded to the nearest FP8 E4M3 ("fn") value, ties to even, |v| above
 * 448 saturated to 448; NaN stays NaN */
float ld_var_e4m3_round(float v);

/* out [T][K] = x quantized as above (the scale and dequantization in fp32) */
void ld_var_fp8_act(float *out, const float *x, int T, int K);

/* ld_var_fp8_act with DeepSeek's ue8m0 scales (act_quant with scale_fmt
 * "ue8m0", as V3.1/V3.2/V4's FP8 GEMMs are fed, DeepGEMM's UE8M0 scaling
 * factors): per block amax = max(|x|, 1e-4), s = 2^ceil(log2(amax / 448))
 * (a power of two, so x / s and q * s are exact), q = e4m3(x / s), out =
 * q * s. */
void ld_var_fp8_act_ue8m0(float *out, const float *x, int T, int K);

void ld_var_swiglu_bf16(float *out, const float *gate, const float *up, size_t i0, size_t i1);

#endif /* LD_REF_VARIANTS_H */
