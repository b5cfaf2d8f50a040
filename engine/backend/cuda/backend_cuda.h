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

/* The ops whose kernel a spec selects, in the table's order. */
enum {
    LD_CUDA_OP_EMBED,
    LD_CUDA_OP_RMSNORM,
    LD_CUDA_OP_MATMUL,
    LD_CUDA_OP_ROPE,
    LD_CUDA_OP_KV_STORE,
    LD_CUDA_OP_ATTENTION,
    LD_CUDA_OP_SWIGLU,
    LD_CUDA_OP_ADD,
    LD_CUDA_OP_SOFTMAX,
    LD_CUDA_OP_MLA,    /* mla_latent */
    LD_CUDA_OP_ABSORB, /* mla_absorb_q, mla_absorb_out */
    LD_CUDA_OP_ROUTE,  /* ds_route, ds4_route */
    LD_CUDA_OP_INDEX,  /* index_topk (its scores and its top-k) */
    LD_CUDA_OP_HC,     /* hc_pre, hc_post (V4's mHC mixing) */
    LD_CUDA_N_OPS
};

/* the kernel choices (ld_cuda_kernels.custom[op]); TC for matmul only */
#define LD_CUDA_KERNEL_REF 0
#define LD_CUDA_KERNEL_CUSTOM 1
#define LD_CUDA_KERNEL_TC 2

/* kernel choice per op: LD_CUDA_KERNEL_REF, _CUSTOM or (matmul) _TC; a
 * non-zero value is a non-reference kernel */
typedef struct ld_cuda_kernels {
    unsigned char custom[LD_CUDA_N_OPS];
    int graphs; /* 0: launches go to the GPU one by one; N: captured in CUDA graphs of N operations */
} ld_cuda_kernels;

/* graphs=on: operations a graph (kernels/cuda/cuda_graph.cu's chunk) */
#define LD_CUDA_GRAPH_CHUNK 64

/* "embed", "rmsnorm"..., "mla", "absorb", "route", "index", "hc"; NULL outside [0, LD_CUDA_N_OPS) */
const char *ld_cuda_op_name(int op);

/* Parse a kernel spec: comma-separated `op=variant` with op one of the
 * names above or `all`, variant `ref` or `custom`, or `tc` for matmul
 * alone; later items win ("all=ref,matmul=tc").  NULL or "" = every op
 * custom.  One more item is not an op: `graphs=on|off|N` captures the
 * backend's work in CUDA graphs of LD_CUDA_GRAPH_CHUNK (on) or N
 * operations (kernels/cuda/cuda_ops.h's ld_cu_graphs_begin), off by default.  Errors (LD_ERR_USAGE) name the unknown op or variant, or `tc`
 * for another op, and the item's offset.
 * Needs no GPU, and is there in builds without CUDA. */
ld_status ld_cuda_kernels_parse(const char *spec, ld_cuda_kernels *out, ld_error *err);

/* The CUDA backend on `device` with the kernels of `kernels_spec` (above).
 * Errors: a bad spec (LD_ERR_USAGE, checked first), a build without CUDA or
 * no CUDA device (LD_ERR_UNSUPPORTED, the message says which), a device
 * number out of range (LD_ERR_USAGE), any other CUDA failure (LD_ERR_CUDA). */
ld_status ld_backend_cuda_create(int device, const char *kernels_spec, ld_backend **out, ld_error *err);

/* The CUDA devices this process sees: 0 in a build without CUDA, without
 * a device or where the runtime fails. */
int ld_backend_cuda_device_count(void);

/* As ld_backend_cuda_create, but graphs=N does not put the calling thread
 * in graph mode (graph mode is a thread's, kernels/cuda/cuda_ops.h): each
 * thread that runs the backend's ops enters it itself,
 * ld_backend_cuda_graphs_thread(be, 1) before its first and (be, 0)
 * after its last, as a tensor-parallel rank's thread does with the
 * backend made for it on the caller's thread (tp_forward.c).  Destroying
 * it ends no thread's mode. */
ld_status ld_backend_cuda_create_unbound(int device, const char *kernels_spec, ld_backend **out, ld_error *err);

/* The calling thread enters (on = 1: be's device made current, then its
 * graph mode with be's graphs=N) or leaves (on = 0: what is captured run
 * and waited for) graph mode for be; nothing for a backend without
 * graphs=N or made by ld_backend_cuda_create (bound to its creator's
 * thread), or not a CUDA backend.  Errors: LD_ERR_CUDA. */
ld_status ld_backend_cuda_graphs_thread(ld_backend *be, int on, ld_error *err);

#endif /* LD_BACKEND_CUDA_H */
