/* cuda_tp.h - the CUDA kernel of tensor parallelism's deterministic
 * all-reduce (engine/tp/comm_nccl.c): after an all-gather of the ranks'
 * partial buffers, every rank sums them in rank order.
 *
 * A leaf like cuda_ops.h: device arrays in and out, a C launcher returning
 * the CUDA error code (0 = success), run on the legacy default stream. */
#ifndef LD_CUDA_TP_H
#define LD_CUDA_TP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ..., i < n, one
 * thread per element, fp32 additions left to right (the same expression as
 * engine/tp/comm_sim.c's ld_comm_ordered_sum, so the same bits); parts is
 * [n_parts][n] (n_parts >= 1), all device pointers; out may be parts. */
int ld_cu_tp_ordered_sum(const float *parts, int n_parts, size_t n, float *out);

#ifdef __cplusplus
}
#endif

#endif /* LD_CUDA_TP_H */
