/* cpu_kernels.h - which kernel each op of the CPU backends runs: the
 * reference (kernels/ref/ref_ops.h), the fast one (kernels/cpu/cpu_ops.h) or a
 * production-style variant (kernels/ref/ref_variants.h), chosen per op with a
 * spec "OP=VARIANT[,OP=VARIANT...]" (`logdiff replay --kernels`).
 *
 *   matmul     ref | fast | bf16 | splitk | fp8act | fp8ue8m0 | q8 | i24
 *              (q8: the activations quantized to int8 per block of 32 and
 *              dotted with Q4_0 / Q4_1 / Q8_0 weights in integers, as
 *              llama.cpp's CPU backend, kernels/cpu/cpu_q8.h; i24: each
 *              block of 32 activations as 24-bit integers under a
 *              power-of-two scale, dotted with Q4_0 / Q4_1 / Q8_0 weights exactly
 *              in integers, kernels/cpu/cpu_i24.h: at most 2^-23 of a
 *              block's largest |x| off, an error no larger than fp32's;
 *              other weight types as fast; the "cpu" backend's default.
 *              Neither is in ld_cpu_kernel_variants: not a production
 *              stack's numbers to compare)
 *   attention  ref | fast
 *   rmsnorm    ref | bf16
 *   swiglu     ref | bf16
 *   mla        ref | absorbed | splitk   (DeepSeek's MLA: the naive form,
 *              per-head k/v expanded from the latent; kv_b_proj absorbed
 *              into q and the output as decode kernels do; or absorbed
 *              with flash-decoding's split-KV over fixed splits of
 *              LD_DSV_MLA_SPLIT positions, kernels/ref/ref_ds_variants.h)
 *   router     ref | bf16       (DeepSeek's gate logits from bf16 operands,
 *              rounded to bf16, as the official V3 code computes them)
 *   combine    ref | bf16 | fused  (bf16: DeepSeek's expert outputs summed
 *              in bf16, each output and each product rounded, the sum too,
 *              as the official V3 code's bf16 `y += expert(x) * w`; fused:
 *              routed_scaling_factor applied once to the sum of the routed
 *              experts instead of to each weight, as SGLang does)
 *   mhc        ref | bf16 | sinkhorn-bf16   (DeepSeek-V4's mHC mixing:
 *              bf16, the post and comb matrices rounded to bf16 before they
 *              mix the streams, a mixing matrix cast to bf16;
 *              sinkhorn-bf16, every Sinkhorn iterate rounded to bf16)
 *   indexer    ref | bf16 | fp8   (the V3.2 / V4 lightning indexer: q, k
 *              and the head weights rounded to bf16 before the scores; or
 *              q and k Hadamard-rotated and quantized to FP8 e4m3 per
 *              token in 1x128 blocks, as DeepSeek's V3.2 code feeds it)
 *   rope       ref | bf16       (DeepSeek's RoPE with its cos/sin table
 *              rounded to bf16: SGLang's cos_sin_cache in the model dtype)
 * mla, router, combine, indexer and rope are read by the DeepSeek V3/V3.2
 * sessions, combine, mhc, indexer and rope by the V4 one; not by the
 * backend: engine/models/lm.c hands them to the session (set_kernels).
 *
 * The "ref" backend starts from ref everywhere, "cpu" from i24's matmul
 * (the fast one on the weight types i24 has no kernel for) and the fast
 * attention; a spec changes the ops it names (`matmul=fast`: the fast
 * kernels' fp32 order on every type).
 */
#ifndef LD_CPU_KERNELS_H
#define LD_CPU_KERNELS_H

#include "engine/engine.h"



#endif /* LD_CPU_KERNELS_H */
