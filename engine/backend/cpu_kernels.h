/* cpu_kernels.h - which kernel each op of the CPU backends runs: the
 * reference (kernels/ref/ref_ops.h), the fast one (kernels/cpu/cpu_ops.h) or a
 * production-style variant (kernels/ref/ref_variants.h), chosen per op with a
 * spec "OP=VARIANT[,OP=VARIANT...]" (`logdiff replay --kernels`).
 *
 *   matmul     ref | fast | bf16 | splitk | fp8act | fp8ue8m0
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
 * backend: engine/lm.c hands them to the session (set_kernels).
 *
 * The "ref" backend starts from ref everywhere, "cpu" from fast matmul and
 * attention; a spec changes the ops it names.
 */
#ifndef LD_CPU_KERNELS_H
#define LD_CPU_KERNELS_H

#include "ld_error.h"

typedef enum ld_kvar {
    LD_KV_REF = 0, LD_KV_FAST, LD_KV_BF16, LD_KV_SPLITK, LD_KV_ABSORBED, LD_KV_FP8ACT, LD_KV_FUSED, LD_KV_FP8,
    LD_KV_SINKHORN_BF16, LD_KV_FP8UE8M0, LD_KV_COUNT
} ld_kvar;

typedef enum ld_kop {
    LD_KOP_MATMUL = 0, LD_KOP_ATTENTION, LD_KOP_RMSNORM, LD_KOP_SWIGLU, LD_KOP_MLA, LD_KOP_ROUTER,
    LD_KOP_COMBINE, LD_KOP_MHC, LD_KOP_INDEXER, LD_KOP_ROPE, LD_KOP_COUNT
} ld_kop;

typedef struct ld_cpu_kernels {
    ld_kvar v[LD_KOP_COUNT];
} ld_cpu_kernels;

/* The defaults of backend "ref" (fast = 0) or "cpu" (fast = 1). */
ld_cpu_kernels ld_cpu_kernels_default(int fast);

/* Applies `spec` (NULL or "": nothing) to *k.  LD_ERR_USAGE naming the
 * unknown op or variant, err->offset its byte offset in the spec; *k is
 * unchanged on error. */
ld_status ld_cpu_kernels_parse(const char *spec, ld_cpu_kernels *k, ld_error *err);

/* "ref", "cpu", or the base name followed by the ops that differ from its
 * defaults, e.g. "ref+matmul=bf16"; into buf (cap bytes). */
const char *ld_cpu_kernels_label(const ld_cpu_kernels *k, int fast, char *buf, size_t cap);

/* Every "op=variant" that differs from the ref defaults, NULL-terminated
 * (what `--compare-kernels` runs one at a time). */
extern const char *const ld_cpu_kernel_variants[];

/* What a model has that session-level variants act on (ld_lm_info). */
enum {
    LD_KF_MLA = 1,     /* DeepSeek V3/V3.2: mla, router, combine=bf16 */
    LD_KF_MHC = 2,     /* DeepSeek-V4: mhc */
    LD_KF_INDEXER = 4, /* V3.2, and V4 with CSA layers: indexer */
    LD_KF_DEEPSEEK = 8 /* any DeepSeek: combine=fused, rope */
};

/* Whether variant v ("op=variant") changes anything on a model with
 * `features` (LD_KF_*); the ops of the backend (matmul, attention,
 * rmsnorm, swiglu) act on every model. */
int ld_cpu_kernel_variant_applies(const char *v, unsigned features);

#endif /* LD_CPU_KERNELS_H */
