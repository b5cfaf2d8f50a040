/* cuda_mock_internal.h - what the mock's files share (cuda_mock.c: the
 * registry of device allocations, the call counts, the runtime;
 * cuda_mock_dense.c, cuda_mock_ds.c, cuda_mock_ds4.c: the launchers). */
#ifndef LD_TEST_CUDA_MOCK_INTERNAL_H
#define LD_TEST_CUDA_MOCK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_mock.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ref/ref_ops.h"

/* the CUDA runtime's codes this mock returns */
#define E_INVAL 1      /* cudaErrorInvalidValue */
#define E_NOMEM 2      /* cudaErrorMemoryAllocation */
#define E_MISALIGN 716 /* cudaErrorMisalignedAddress */

/* sizes in the launchers' checks */
#define FB sizeof(float)  /* bytes of a float, an int32 */
#define IB sizeof(int32_t)
#define Z(a, b) ((size_t)(a) * (size_t)(b))

typedef struct alloc {
    unsigned char *p;
    size_t n;
} alloc;

/* the allocation holding [p, p + bytes), or NULL (under the registry's lock) */
const alloc *ld_mock_find(const void *p, size_t bytes);
/* a failure of launcher `fn` on argument `what`: the reason printed, abort */
void ld_mock_die(const char *fn, const char *what, const void *p, size_t bytes, const char *why);
/* `what` of launcher `fn`, [p, p + bytes), must lie in one device
 * allocation (dev), or outside every one (host) */
void ld_mock_dev(const char *fn, const char *what, const void *p, size_t bytes);
void ld_mock_host(const char *fn, const char *what, const void *p, size_t bytes);
/* one launch of `fn` counted */
void ld_mock_count(const char *fn);

/* helpers the launchers' files share (each defined where it is used first) */
void ld_mock_norm_rows(const char *fn, float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps, int rows);
int32_t ld_mock_max_of(const char *fn, const char *what, const int32_t *p, size_t n);
int ld_mock_scaled_mm(float *out, const float *x, const ld_f8b *w, ld_kdt dt, int T, int K, int N);
size_t ld_mock_f8b_grid(int N, int K, int br, int bc);
int ld_mock_matmul_post(const char *fn, const float *x, const uint8_t *q, const float *scale, int T, int K, int N, int br, int bc, ld_cu_post p, const ld_cu_combine *c);

#endif
