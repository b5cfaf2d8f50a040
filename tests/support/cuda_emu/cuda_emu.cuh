/* cuda_emu.cuh - what nvcc gives the kernels' .cu files beyond C++, for a host C++
 * compiler: force-included (-include) into each kernels/cuda_*.cu after
 * tests/support/cuda_emu/launches.pl has turned its launches (k<<<g, b, s>>>(...))
 * into ld_emu_launch(k, "k", ld_emu_cfg(g, b, s))(...).  The same kernel
 * source then runs on the CPU (emu_sched.c: a block's threads as fibers)
 * over emu_runtime.c's host memory, so CI executes every kernel against
 * the plain-C reference without a GPU.
 *
 * C++ because the .cu files are: the launch wrapper keeps each kernel's
 * parameter types (a template), and the shuffles are generic like CUDA's.
 * Semantics kept: a thread's own copy of the arguments, shared memory per
 * block (static thread_local: blocks run one at a time on a host thread),
 * barriers and warp collectives as CUDA defines them (emu_sched.h).  Not
 * kept: timing, the memory model (no two threads run at once), the device's
 * own maths (the host's libm answers, or, with LD_CUDA_EMU_MATHS=ulp, an
 * answer as far off as the device's may be: see "maths" below). */
#ifndef LD_CUDA_EMU_CUH
#define LD_CUDA_EMU_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tuple>
#include <utility>

#include "kernels/cuda/cuda_mma_layout.h"
#include "emu_sched.h"

#define LD_CU_EMU 1

/* device code compiled for an sm_90 (after the toolkit's headers, which
 * would otherwise take their device paths) */
#define __CUDA_ARCH__ 900

/* nvcc's memory spaces: a host compiler's headers leave them empty; a
 * block's __shared__ arrays must be one per block, not one per thread
 * (launches.pl has each declaration poison them for each block) */
#undef __shared__
#define __shared__ static thread_local

#undef __launch_bounds__
#define __launch_bounds__(...)

#define threadIdx (*ld_emu_thread_idx())
#define blockIdx (*ld_emu_block_idx())
#define blockDim (*ld_emu_block_dim())
#define gridDim (*ld_emu_grid_dim())

/* ---------------------------------------------------------------- maths
 * LD_CUDA_EMU_MATHS=ulp: the functions whose CUDA versions are not
 * correctly rounded (expf and sinf/cosf within 2 ulp, log1pf and exp within
 * 1, per the CUDA C Programming Guide's tables) answer that many ulp off
 * the host's, up or down by a hash of the argument.  A test that holds such a
 * kernel to the plain-C reference bitwise then fails here as it would on a
 * GPU; the tolerances the suites give them must absorb it.  (sqrtf and
 * division are IEEE on the device, as nvcc compiles by default.) */
static inline int ld_emu_ulp_maths(void)
{
    static thread_local int on = -1;
    if (on < 0) {
        const char *s = getenv("LD_CUDA_EMU_MATHS");
        on = s && strcmp(s, "ulp") == 0;
    }
    return on;
}

static inline float ld_emu_off_f(float r, float x, int ulps)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if (!ld_emu_ulp_maths() || !isfinite(r) || r == 0.0f) return r;
    float to = (u * 2654435761u) >> 31 ? INFINITY : -INFINITY;
    for (int i = 0; i < ulps; i++) r = nextafterf(r, to);
    return r;
}

static inline double ld_emu_off_d(double r, double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    if (!ld_emu_ulp_maths() || !isfinite(r) || r == 0.0) return r;
    return nextafter(r, (u * 0x9E3779B97F4A7C15ull) >> 63 ? INFINITY : -INFINITY);
}

static inline float ld_emu_expf(float x)
{
    return ld_emu_off_f(::expf(x), x, 2);
}

static inline float ld_emu_sinf(float x)
{
    return ld_emu_off_f(::sinf(x), x, 2);
}

static inline float ld_emu_cosf(float x)
{
    return ld_emu_off_f(::cosf(x), x, 2);
}

static inline float ld_emu_log1pf(float x)
{
    return ld_emu_off_f(::log1pf(x), x, 1);
}

static inline double ld_emu_exp(double x)
{
    return ld_emu_off_d(::exp(x), x);
}

#define expf ld_emu_expf
#define sinf ld_emu_sinf
#define cosf ld_emu_cosf
#define log1pf ld_emu_log1pf
#define exp ld_emu_exp

/* ---------------------------------------------------------------- launches */

struct ld_emu_config {
    ld_emu_dim grid, block;
    size_t smem;
};

static inline ld_emu_config ld_emu_cfg(dim3 g, dim3 b, size_t smem = 0, cudaStream_t stream = 0)
{
    (void)stream; /* one stream: a launch runs to its end before the next call */
    return {{g.x, g.y, g.z}, {b.x, b.y, b.z}, smem};
}

/* an argument's bytes, FNV-1a (the journal's: emu_sched.h) */
template <class T> static inline unsigned long long ld_emu_arg_hash(const T &v)
{
    unsigned long long h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)&v;
    for (size_t i = 0; i < sizeof v; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

template <class... P> struct ld_emu_launcher {
    void (*kernel)(P...);
    const char *name;
    ld_emu_config cfg;

    /* the launch as a graph node would hold it, in the journal */
    void journal(const std::tuple<P...> &args, ld_emu_op *out) const
    {
        ld_emu_op &op = *out;
        memset(&op, 0, sizeof op);
        op.name = name;
        op.grid[0] = cfg.grid.x, op.grid[1] = cfg.grid.y, op.grid[2] = cfg.grid.z;
        op.block[0] = cfg.block.x, op.block[1] = cfg.block.y, op.block[2] = cfg.block.z;
        op.smem = cfg.smem;
        std::apply(
            [&op](const auto &...a) {
                ((op.arg[op.n_args < LD_EMU_OP_ARGS ? op.n_args : LD_EMU_OP_ARGS - 1] ^= ld_emu_arg_hash(a),
                  op.n_args += op.n_args < LD_EMU_OP_ARGS),
                 ...);
            },
            args);
    }

    /* the arguments converted to the kernel's parameter types, as a launch
     * does; every thread calls the kernel with its own copies */
    template <class... A> void operator()(A &&...args) const
    {
        struct call {
            void (*kernel)(P...);
            std::tuple<P...> args;
        } c{kernel, std::tuple<P...>(std::forward<A>(args)...)};
        auto body = [](void *p) {
            call *cl = (call *)p;
            std::tuple<P...> own = cl->args;
            std::apply(cl->kernel, own);
        };
        if (ld_emu_capturing()) { /* a node of the graph: the call kept until the graph goes */
            ld_emu_op op, *jp = NULL;
            if (ld_emu_journal_on()) journal(c.args, jp = &op);
            call *kept = new call(c);
            ld_emu_capture_kernel(reinterpret_cast<const void *>(kernel), name, cfg.grid, cfg.block, cfg.smem, body,
                                  kept, [](void *p) { delete (call *)p; }, jp);
            return;
        }
        ld_emu_graphs_drain(); /* launched graphs first (an error of theirs: the next wait's) */
        if (ld_emu_journal_on()) {
            ld_emu_op op;
            journal(c.args, &op);
            ld_emu_journal_add(&op);
        }
        ld_emu_run(cfg.grid, cfg.block, cfg.smem, body, &c, name);
    }
};

template <class... P> static inline ld_emu_launcher<P...> ld_emu_launch(void (*kernel)(P...), const char *name,
                                                                         ld_emu_config cfg)
{
    return {kernel, name, cfg};
}

/* extern __shared__ T name[] (the .cu files write it LD_CU_DYN_SMEM) */
#define LD_CU_DYN_SMEM(type, name) type *name = (type *)ld_emu_dyn_smem()

/* ---------------------------------------------------------------- intrinsics */

static inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

template <class T> static inline T __ldg(const T *p)
{
    return *p;
}

template <class T> static inline T __ldcg(const T *p)
{
    return *p;
}

/* fibers never run at once: every write is seen by the next reader */
static inline void __threadfence(void)
{
}

static inline int __popc(unsigned x)
{
    return __builtin_popcount(x);
}

/* fibers never run at once: a read-modify-write is atomic */
static inline int atomicAdd(int *p, int v)
{
    int old = *p;
    *p = old + v;
    return old;
}

static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    unsigned old = *p;
    *p = old + v;
    return old;
}

static inline void __syncthreads(void)
{
    ld_emu_block_sync();
}

static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    ld_emu_warp_sync(mask);
}

/* every lane of `mask` publishes v, then reads lane src's (its own when src
 * is not a lane of the warp, as the hardware does past a partial warp) */
template <class T> static inline T ld_emu_exchange(unsigned mask, T v, int src)
{
    static_assert(sizeof(T) <= LD_EMU_SLOT, "a shuffled value fits its slot");
    unsigned char *slots = ld_emu_warp_slots();
    int lane = ld_emu_lane();
    memcpy(slots + lane * LD_EMU_SLOT, &v, sizeof v);
    ld_emu_warp_sync(mask);
    T r = v;
    if (src >= 0 && src < 32 && (ld_emu_warp_lanes() >> src & 1u)) memcpy(&r, slots + src * LD_EMU_SLOT, sizeof r);
    return r;
}

template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    int base = ld_emu_lane() & ~(width - 1);
    return ld_emu_exchange(mask, v, base + (src & (width - 1)));
}

template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    int lane = ld_emu_lane(), src = lane ^ lane_mask;
    return ld_emu_exchange(mask, v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}

template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int lane = ld_emu_lane(), src = lane + (int)delta;
    return ld_emu_exchange(mask, v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}

static inline unsigned __ballot_sync(unsigned mask, int pred)
{
    unsigned char *slots = ld_emu_warp_slots();
    int lane = ld_emu_lane();
    slots[lane * LD_EMU_SLOT] = pred != 0;
    ld_emu_warp_sync(mask);
    unsigned bits = 0;
    for (int i = 0; i < 32; i++)
        if ((mask & ld_emu_warp_lanes()) >> i & 1u) bits |= (unsigned)slots[i * LD_EMU_SLOT] << i;
    return bits;
}

/* ---------------------------------------------------------------- tensor cores */

/* cuda_gemm_tc.cu's PTX helpers (its #ifdef LD_CU_EMU): cp.async as a plain
 * copy (complete at once, so the waits have nothing to wait for) and
 * mma.sync m16n8k16 bf16 as the warp's fragments gathered and multiplied in
 * fp32 by cuda_mma_layout.h's map (the product of two bf16 is exact in
 * fp32; the sum runs in k order). */
static inline void cp_async16(void *smem, const void *gmem, int bytes)
{
    memset(smem, 0, 16);
    if (bytes) memcpy(smem, gmem, (size_t)bytes);
}

static inline void cp_async_commit(void)
{
}

static inline void cp_async_wait_all(void)
{
}

static inline float ld_emu_bf16_lo(uint32_t r)
{
    return __uint_as_float(r << 16);
}

static inline float ld_emu_bf16_hi(uint32_t r)
{
    return __uint_as_float(r & 0xffff0000u);
}

/* where A[m][k] and B[k][n] of an m16n8k16 sit among the warp's
 * registers: lane * 8 + element (A), lane * 4 + element (B), inverted once
 * from cuda_mma_layout.h's map */
struct ld_emu_mma_map {
    unsigned char a[LD_MMA_M][LD_MMA_K], b[LD_MMA_K][LD_MMA_N];
};

static inline const ld_emu_mma_map *ld_emu_mma(void)
{
    static thread_local ld_emu_mma_map map;
    static thread_local int made;
    if (!made) {
        for (int l = 0; l < 32; l++) {
            for (int i = 0; i < 8; i++) map.a[ld_mma_a_row(l, i)][ld_mma_a_col(l, i)] = (unsigned char)(l * 8 + i);
            for (int i = 0; i < 4; i++) map.b[ld_mma_b_row(l, i)][ld_mma_b_col(l, i)] = (unsigned char)(l * 4 + i);
        }
        made = 1;
    }
    return &map;
}

/* element e (< 8 of A, < 4 of B) of a lane's packed registers */
static inline float ld_emu_bf16_at(const uint32_t *regs, int e)
{
    uint32_t r = regs[e / 2];
    return e & 1 ? ld_emu_bf16_hi(r) : ld_emu_bf16_lo(r);
}

static inline void mma_bf16(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    struct frag {
        uint32_t a[4], b[2];
    };
    static_assert(sizeof(frag) <= LD_EMU_SLOT, "a lane's fragments fit its slot");
    unsigned char *slots = ld_emu_warp_slots();
    int lane = ld_emu_lane();
    frag *mine = (frag *)(slots + lane * LD_EMU_SLOT);
    memcpy(mine->a, a, sizeof mine->a);
    memcpy(mine->b, b, sizeof mine->b);
    ld_emu_warp_sync(0xffffffffu);
    const ld_emu_mma_map *map = ld_emu_mma();
    for (int i = 0; i < 4; i++) {
        int m = ld_mma_c_row(lane, i), n = ld_mma_c_col(lane, i);
        float sum = c[i];
        for (int k = 0; k < LD_MMA_K; k++) {
            int ea = map->a[m][k], eb = map->b[k][n];
            const frag *fa = (const frag *)(slots + (ea / 8) * LD_EMU_SLOT);
            const frag *fb = (const frag *)(slots + (eb / 4) * LD_EMU_SLOT);
            sum += ld_emu_bf16_at(fa->a, ea % 8) * ld_emu_bf16_at(fb->b, eb % 4);
        }
        c[i] = sum;
    }
}

#endif /* LD_CUDA_EMU_CUH */
