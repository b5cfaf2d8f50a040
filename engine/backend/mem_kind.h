/* mem_kind.h - where a float array lives, as backend.h's buf_mem gives it
 * and comm.h's all_reduce_sum_mem takes it: apart from both so that the
 * communicator need not include the backend interface. */
#ifndef LD_MEM_KIND_H
#define LD_MEM_KIND_H

/* A buffer's memory as buf_mem gives it: its kind says who can touch it
 * (LD_MEM_HOST: this process, LD_MEM_CUDA: kernels and copies on CUDA
 * device `device`, on whose streams the backend's ops run (a thread's
 * default stream, kernels/cuda/cuda_ops.h);
 * `device` means nothing for LD_MEM_HOST). */
enum { LD_MEM_HOST = 1, LD_MEM_CUDA = 2 };
typedef struct ld_mem {
    float *p;
    int kind, device;
} ld_mem;

#endif /* LD_MEM_KIND_H */
