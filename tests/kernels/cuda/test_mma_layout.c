/* test_mma_layout.c - the tensor-core fragment mapping of
 * kernels/cuda/cuda_mma_layout.h, checked on the CPU (the GEMM that uses it,
 * kernels/cuda/cuda_gemm_tc.cu, needs a GPU to run):
 *  - the header's (lane, element) -> (row, col) functions against a second,
 *    independent transcription of the PTX ISA's m16n8k16 fragment figures
 *    (written per register and half, not per element index);
 *  - every matrix position is held by exactly one (lane, element);
 *  - the packed pairs are K-adjacent and start at an even k (one aligned
 *    32-bit load each), and with the kernel's row stride of 40 bf16 a
 *    fragment load hits 32 distinct banks;
 *  - one warp's tile of the kernel (64 rows x 16 columns over a k slice of
 *    32: 4 x 2 mma's, two k steps) simulated: x rounded to bf16 and packed
 *    into a staged tile as the kernel stores it, fragments loaded through
 *    ld_mma_a_off / ld_mma_b_off, each mma done by a model of the hardware
 *    that places the registers by the independent transcription, the
 *    results scattered through ld_mma_c_row / ld_mma_c_col; compared with a
 *    plain triple loop, exactly (the inputs are chosen so that every sum
 *    is exact).
 * Label cpu. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/cuda_mma_layout.h"
#include "tests/support/ld_test.h"
#include "kernels/ref/ref_variants.h"

/* ------------------------------------------------------------ the PTX figures
 * mma.m16n8k16, .bf16 inputs, f32 accumulators; g = lane / 4, q = lane % 4.
 * A: register r, half h (low 16 bits = h 0): row g + 8 (r odd), col 2q + h
 *    + 8 (r >= 2).  B: register r, half h: row (k) 2q + h + 8r, col (n) g.
 * C: value i: row g + 8 (i >= 2), col 2q + (i % 2). */

static void ptx_a(int lane, int r, int h, int *row, int *col)
{
    *row = lane / 4 + 8 * (r % 2);
    *col = 2 * (lane % 4) + h + 8 * (r / 2);
}

static void ptx_b(int lane, int r, int h, int *k, int *n)
{
    *k = 2 * (lane % 4) + h + 8 * r;
    *n = lane / 4;
}

static void ptx_c(int lane, int i, int *row, int *col)
{
    *row = lane / 4 + 8 * (i / 2);
    *col = 2 * (lane % 4) + i % 2;
}

static int test_functions_match_the_figures(void)
{
    for (int lane = 0; lane < 32; lane++) {
        for (int i = 0; i < 8; i++) {
            int row, col;
            ptx_a(lane, i / 2, i % 2, &row, &col);
            CHECK_MSG(ld_mma_a_row(lane, i) == row && ld_mma_a_col(lane, i) == col, "A lane %d a%d", lane, i);
        }
        for (int i = 0; i < 4; i++) {
            int k, n, row, col;
            ptx_b(lane, i / 2, i % 2, &k, &n);
            CHECK_MSG(ld_mma_b_row(lane, i) == k && ld_mma_b_col(lane, i) == n, "B lane %d b%d", lane, i);
            ptx_c(lane, i, &row, &col);
            CHECK_MSG(ld_mma_c_row(lane, i) == row && ld_mma_c_col(lane, i) == col, "C lane %d c%d", lane, i);
        }
    }
    return 0;
}

static int test_each_position_once(void)
{
    int a[16][16] = {{0}}, b[16][8] = {{0}}, c[16][8] = {{0}};
    for (int lane = 0; lane < 32; lane++) {
        for (int i = 0; i < 8; i++) {
            int row = ld_mma_a_row(lane, i), col = ld_mma_a_col(lane, i);
            CHECK(row >= 0 && row < LD_MMA_M && col >= 0 && col < LD_MMA_K);
            a[row][col]++;
        }
        for (int i = 0; i < 4; i++) {
            int k = ld_mma_b_row(lane, i), n = ld_mma_b_col(lane, i);
            CHECK(k >= 0 && k < LD_MMA_K && n >= 0 && n < LD_MMA_N);
            b[k][n]++;
            int row = ld_mma_c_row(lane, i), col = ld_mma_c_col(lane, i);
            CHECK(row >= 0 && row < LD_MMA_M && col >= 0 && col < LD_MMA_N);
            c[row][col]++;
        }
    }
    for (int r = 0; r < 16; r++) {
        for (int k = 0; k < 16; k++) CHECK_MSG(a[r][k] == 1, "A[%d][%d] held %d times", r, k, a[r][k]);
        for (int n = 0; n < 8; n++) {
            CHECK_MSG(b[r][n] == 1, "B[%d][%d] held %d times", r, n, b[r][n]);
            CHECK_MSG(c[r][n] == 1, "C[%d][%d] held %d times", r, n, c[r][n]);
        }
    }
    return 0;
}

#define LD 40 /* the kernel's staged row stride (TC_LD) in bf16 */

static int test_pairs_and_banks(void)
{
    for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < 4; r++) {
            CHECK(ld_mma_a_row(lane, 2 * r + 1) == ld_mma_a_row(lane, 2 * r));
            CHECK(ld_mma_a_col(lane, 2 * r + 1) == ld_mma_a_col(lane, 2 * r) + 1);
            CHECK(ld_mma_a_col(lane, 2 * r) % 2 == 0);
        }
        for (int r = 0; r < 2; r++) {
            CHECK(ld_mma_b_col(lane, 2 * r + 1) == ld_mma_b_col(lane, 2 * r));
            CHECK(ld_mma_b_row(lane, 2 * r + 1) == ld_mma_b_row(lane, 2 * r) + 1);
            CHECK(ld_mma_b_row(lane, 2 * r) % 2 == 0);
        }
    }
    /* one register of all 32 lanes: 32 distinct 4-byte banks */
    for (int r = 0; r < 4; r++) {
        unsigned a_banks = 0, b_banks = 0;
        for (int lane = 0; lane < 32; lane++) {
            a_banks |= 1u << ((ld_mma_a_off(lane, r, LD) / 2) % 32);
            if (r < 2) b_banks |= 1u << ((ld_mma_b_off(lane, r, LD) / 2) % 32);
        }
        CHECK_MSG(a_banks == 0xffffffffu, "A register %d: banks %08x", r, a_banks);
        if (r < 2) CHECK_MSG(b_banks == 0xffffffffu, "B register %d: banks %08x", r, b_banks);
    }
    return 0;
}

/* ------------------------------------------------------------ one warp's tile */

#define WM 64 /* the kernel's rows per warp */
#define WN 16 /* 2 n8 tiles (gemm_tc<2>) */
#define BK 32

static float bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t bf16_bits(float f) /* f a bf16 value already */
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

/* the 32-bit word at element offset `off` of a staged tile (as the GPU
 * loads it: little-endian, the lower address in the low half) */
static uint32_t word_at(const uint16_t *tile, int off)
{
    return (uint32_t)tile[off] | ((uint32_t)tile[off + 1] << 16);
}

static float half_of(uint32_t reg, int h)
{
    return bf16_value((uint16_t)(h ? reg >> 16 : reg & 0xffff));
}

/* the hardware: d = A B + c for a warp's registers, A and B placed by the
 * PTX figures (ptx_a, ptx_b), d by ptx_c; products and sums in double
 * (exact for this test's inputs) */
static void model_mma(float d[32][4], const uint32_t a[32][4], const uint32_t b[32][2])
{
    double A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++)
        for (int h = 0; h < 2; h++) {
            int row, col;
            for (int r = 0; r < 4; r++) {
                ptx_a(lane, r, h, &row, &col);
                A[row][col] = half_of(a[lane][r], h);
            }
            for (int r = 0; r < 2; r++) {
                ptx_b(lane, r, h, &row, &col);
                B[row][col] = half_of(b[lane][r], h);
            }
        }
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            int row, col;
            ptx_c(lane, i, &row, &col);
            double s = d[lane][i];
            for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
            d[lane][i] = (float)s;
        }
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static int rand_in(int lo, int hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (int)((rng >> 20) % (uint64_t)(hi - lo + 1));
}

static int test_warp_tile(void)
{
    /* x: multiples of 1/64 up to 16 (11 significant bits: the bf16
     * rounding is exercised); w: bf16 values k/16, |k| < 128.  Products are
     * multiples of 2^-10 below 2^11, so every sum here is exact. */
    static float x[WM][BK], xb[WM][BK], w[WN][BK], ref[WM][WN], got[WM][WN];
    static uint16_t as[WM * LD], bs[WN * LD];
    for (int m = 0; m < WM; m++)
        for (int k = 0; k < BK; k++) {
            x[m][k] = (float)rand_in(-1024, 1024) / 64.0f;
            xb[m][k] = ld_var_bf16_round(x[m][k]);
        }
    for (int n = 0; n < WN; n++)
        for (int k = 0; k < BK; k++) w[n][k] = (float)rand_in(-127, 127) / 16.0f;
    int rounded = 0;
    for (int m = 0; m < WM; m++)
        for (int k = 0; k < BK; k++) rounded += xb[m][k] != x[m][k];
    CHECK(rounded > 100); /* the staging's rounding matters here */
    /* staged as the kernel does: x's pairs packed (lower k low), w's rows */
    for (int m = 0; m < WM; m++)
        for (int k = 0; k < BK; k += 2) {
            uint32_t pk = (uint32_t)bf16_bits(xb[m][k]) | ((uint32_t)bf16_bits(xb[m][k + 1]) << 16);
            as[m * LD + k] = (uint16_t)(pk & 0xffff);
            as[m * LD + k + 1] = (uint16_t)(pk >> 16);
        }
    for (int n = 0; n < WN; n++)
        for (int k = 0; k < BK; k++) bs[n * LD + k] = bf16_bits(w[n][k]);
    /* the kernel's mma_slice for one warp (wm = wn = 0) */
    static float acc[WM / 16][WN / 8][32][4];
    memset(acc, 0, sizeof acc);
    for (int ks = 0; ks < BK; ks += LD_MMA_K)
        for (int mi = 0; mi < WM / 16; mi++)
            for (int ni = 0; ni < WN / 8; ni++) {
                uint32_t a[32][4], b[32][2];
                const uint16_t *ta = as + mi * LD_MMA_M * LD + ks, *tb = bs + ni * LD_MMA_N * LD + ks;
                for (int lane = 0; lane < 32; lane++) {
                    for (int r = 0; r < 4; r++) a[lane][r] = word_at(ta, ld_mma_a_off(lane, r, LD));
                    for (int r = 0; r < 2; r++) b[lane][r] = word_at(tb, ld_mma_b_off(lane, r, LD));
                }
                model_mma(acc[mi][ni], a, b);
            }
    /* store_out */
    for (int mi = 0; mi < WM / 16; mi++)
        for (int ni = 0; ni < WN / 8; ni++)
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < 4; i++)
                    got[mi * 16 + ld_mma_c_row(lane, i)][ni * 8 + ld_mma_c_col(lane, i)] = acc[mi][ni][lane][i];
    /* the plain triple loop */
    for (int m = 0; m < WM; m++)
        for (int n = 0; n < WN; n++) {
            double s = 0;
            for (int k = 0; k < BK; k++) s += (double)xb[m][k] * (double)w[n][k];
            ref[m][n] = (float)s;
        }
    int bad = 0;
    for (int m = 0; m < WM; m++)
        for (int n = 0; n < WN; n++)
            if (got[m][n] != ref[m][n] && bad++ < 5)
                printf("  out[%d][%d] %g, expected %g\n", m, n, got[m][n], ref[m][n]);
    CHECK_MSG(!bad, "%d of %d outputs differ", bad, WM * WN);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_functions_match_the_figures),
    LD_CASE(test_each_position_once),
    LD_CASE(test_pairs_and_banks),
    LD_CASE(test_warp_tile),
};

LD_TEST_MAIN(tests)
