/* backend_cuda.h - the CUDA backend: backend.h's op table on one device,
 * over kernels/cuda/cuda_ops.h.
 *
 * Buffers are plain device allocations (cudaMalloc, zeroed); weight_load
 * copies the host bytes to the device as they are (quantized blocks stay
 * quantized and are dequantized inside the kernels, exactly as ref_quant.c
 * does; FP8 block weights bring their fp32 scale grid along).  Every CUDA call is checked; a failure is LD_ERR_CUDA with the op
 * and CUDA's message.  Kernels run asynchronously, so a fault inside one is
 * reported by a later call (buf_read copies back synchronously).
 *
 * Each op has two kernels (cuda_ops.h): "ref", one thread per output and
 * the reference's arithmetic, and "custom", the fast one; both keep
 * backend.h's contract (fixed reduction orders, nothing depends on how many
 * tokens run together).  matmul has a third, "tc": BF16 weights on tensor
 * cores (ld_cu_matmul_tc, sm_80+), the activations rounded to bf16 and the
 * products summed in fp32 in the mma's order, so near but not bitwise the
 * reference (the bf16 variant's numbers); T-independent like the others.
 * Weights of any other type, and BF16 rows whose length is not a multiple
 * of 8, run the custom kernel under "tc" (FP8 block weights included:
 * their tile could be dequantized to bf16 in shared memory and take the
 * same path, not done yet).
 */
#ifndef LD_BACKEND_CUDA_H
#define LD_BACKEND_CUDA_H

#include "engine/backend/backend.h"
#include "engine/engine.h"





#endif /* LD_BACKEND_CUDA_H */
