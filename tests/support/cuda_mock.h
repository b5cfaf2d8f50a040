/* cuda_mock.h - what tests/support/cuda_mock.c (kernels/cuda/cuda_ops.h on the
 * CPU, for the CUDA backend's host code) adds for its tests. */
#ifndef LD_TEST_CUDA_MOCK_H
#define LD_TEST_CUDA_MOCK_H

#include <stddef.h>

/* launches of ld_cu_<name> so far ("ld_cu_ds4_attention"...) */
long ld_cu_mock_calls(const char *launcher);
/* live device allocations */
size_t ld_cu_mock_live(void);
/* the ld_cu_malloc after the next n succeed fails (cudaErrorMemoryAllocation);
 * -1: none */
void ld_cu_mock_fail_malloc(long n);

#endif
