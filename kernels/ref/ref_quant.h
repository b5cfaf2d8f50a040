/* ref_quant.h - dequantization of GGML block types to fp32, one row (or any
 * whole number of blocks) at a time.
 *
 * Leaves: bytes in, floats out, no engine headers.  Types are numbered as
 * in GGML (and GGUF's tensor table).  Each block holds `block` elements in
 * `bytes` bytes; a row of n elements (n a multiple of `block`) takes
 * n / block * bytes bytes.  Multi-byte fields are little-endian and read
 * byte by byte, so blocks need no alignment.
 *
 * The results are exact in the sense of the file format's definition: each
 * element is the fp32 value computed with the same fp32 operations in the
 * same order as the format's reference dequantization (gguf-py's
 * gguf.quants.dequantize gives the same bits; tests/kernels/ref/test_quant.c
 * checks it).  This file must be compiled without FMA contraction (kernels/
 * is built with -ffp-contract=off): `d * q + m` is two roundings.
 *
 *   F32   1 x 4 B     the value
 *   F16   1 x 2 B     IEEE half, exactly widened
 *   BF16  1 x 2 B     the top 16 bits of an fp32
 *   Q4_0  32 in 18 B  f16 d, 16 B nibbles: x = d * (q - 8); element j < 16
 *                     is the low nibble of byte j, j + 16 its high nibble
 *   Q4_1  32 in 20 B  f16 d, f16 m, 16 B nibbles as Q4_0: x = d * q + m
 *   Q8_0  32 in 34 B  f16 d, 32 x int8: x = q * d
 *   Q4_K  256 in 144 B  f16 d, f16 dmin, 12 B of 6-bit (scale, min) pairs
 *                     for 8 sub-blocks of 32, 128 B nibbles (sub-blocks
 *                     2i, 2i+1 are the low and high nibbles of bytes
 *                     32i..32i+31): x = (d * sc) * q - (dmin * mn)
 *   Q6_K  256 in 210 B  128 B low nibbles, 64 B high 2-bit pairs, 16 x int8
 *                     scales (one per 16 elements), f16 d:
 *                     x = (d * scale) * (q - 32)
 */
#ifndef LD_REF_QUANT_H
#define LD_REF_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* GGML type numbers of the types handled here. */
enum {
    LD_GGML_F32 = 0,
    LD_GGML_F16 = 1,
    LD_GGML_Q4_0 = 2,
    LD_GGML_Q4_1 = 3,
    LD_GGML_Q8_0 = 8,
    LD_GGML_Q4_K = 12,
    LD_GGML_Q6_K = 14,
    LD_GGML_BF16 = 30
};

/* 1 and the block layout when `type` is handled here, else 0 (outputs
 * untouched). */
int ld_ref_quant_layout(uint32_t type, size_t *block, size_t *bytes);

/* dst[0..n) = the n elements whose blocks start at `src`; n must be a
 * multiple of the type's block (the caller's to check).  Returns 0 (and
 * writes nothing) for a type not handled here, else 1. */
int ld_ref_dequant(float *dst, const void *src, uint32_t type, size_t n);

#endif /* LD_REF_QUANT_H */
