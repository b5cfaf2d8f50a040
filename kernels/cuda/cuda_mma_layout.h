/* cuda_mma_layout.h - where one warp's registers of the tensor-core
 * instruction mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 sit in
 * its matrices, as the PTX ISA's "Matrix Fragments for mma.m16n8k16 with
 * floating point type" section lays them out:
 *
 *   A 16x16 (row-major; M x K)   8 bf16 a0..a7, packed two per 32-bit
 *                                register (a0,a1 | a2,a3 | a4,a5 | a6,a7)
 *   B 16x8  (.col; K x N)        4 bf16 b0..b3, two per register
 *   C, D 16x8 (M x N)            4 fp32 c0..c3
 *
 * with groupID = lane >> 2 and tig (threadID_in_group) = lane % 4.  In a
 * packed register the lower-indexed element is in the low 16 bits, so two
 * elements adjacent along K are one aligned 32-bit word of a K-contiguous
 * row: the kernel (kernels/cuda/cuda_gemm_tc.cu) loads its fragments that way
 * from shared-memory tiles stored [row][k] (A: x's rows; B: w's rows, which
 * is the .col layout of B = w^T).
 *
 * Plain functions of (lane, element index) so that C (the CPU check
 * tests/kernels/cuda/test_mma_layout.c, which simulates a warp's mma with them)
 * and CUDA (the kernel) use the same code. */
#ifndef LD_CUDA_MMA_LAYOUT_H
#define LD_CUDA_MMA_LAYOUT_H

#ifdef __CUDACC__
#define LD_MMA_FN static inline __host__ __device__
#else
#define LD_MMA_FN static inline
#endif

/* the instruction's shape */
#define LD_MMA_M 16
#define LD_MMA_N 8
#define LD_MMA_K 16

LD_MMA_FN int ld_mma_group(int lane)
{
    return lane >> 2;
}

LD_MMA_FN int ld_mma_tig(int lane)
{
    return lane & 3;
}

/* A element a_i (i < 8) of `lane`: its row (m) and column (k) */
LD_MMA_FN int ld_mma_a_row(int lane, int i)
{
    return ld_mma_group(lane) + ((i & 2) ? 8 : 0); /* a2,a3 and a6,a7 the lower half */
}

LD_MMA_FN int ld_mma_a_col(int lane, int i)
{
    return ld_mma_tig(lane) * 2 + (i & 1) + (i >= 4 ? 8 : 0);
}

/* B element b_i (i < 4) of `lane`: its row (k) and column (n) */
LD_MMA_FN int ld_mma_b_row(int lane, int i)
{
    return ld_mma_tig(lane) * 2 + (i & 1) + (i >= 2 ? 8 : 0);
}

LD_MMA_FN int ld_mma_b_col(int lane, int i)
{
    (void)i; /* every b_i of a lane is in the same column */
    return ld_mma_group(lane);
}

/* C/D element c_i (i < 4) of `lane`: its row (m) and column (n) */
LD_MMA_FN int ld_mma_c_row(int lane, int i)
{
    return ld_mma_group(lane) + (i >= 2 ? 8 : 0);
}

LD_MMA_FN int ld_mma_c_col(int lane, int i)
{
    return ld_mma_tig(lane) * 2 + (i & 1);
}

/* Where a lane's packed registers are in shared-memory tiles stored
 * K-contiguous with a row stride of `ld` elements: the element offset of A
 * register r (a_2r, a_2r+1) in a 16 x 16 tile [m][k], and of B register r
 * (b_2r, b_2r+1) in an 8 x 16 tile [n][k].  Each pair is adjacent along K
 * and starts at an even k (test_mma_layout.c checks it), so with ld even a
 * register is one aligned 32-bit load. */
LD_MMA_FN int ld_mma_a_off(int lane, int r, int ld)
{
    return ld_mma_a_row(lane, 2 * r) * ld + ld_mma_a_col(lane, 2 * r);
}

LD_MMA_FN int ld_mma_b_off(int lane, int r, int ld)
{
    return ld_mma_b_col(lane, 2 * r) * ld + ld_mma_b_row(lane, 2 * r);
}

#endif /* LD_CUDA_MMA_LAYOUT_H */
