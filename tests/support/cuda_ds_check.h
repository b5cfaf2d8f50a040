/* cuda_ds_check.h - what the checks of the CUDA DeepSeek kernels share
 * (tests/kernels/cuda/test_cuda_{moe,mla,route,hc,sample,ds4}.c): the skip
 * without a GPU, device buffers, comparisons with the C reference.
 *
 * The checks: the GPU-only checks of the CUDA DeepSeek ops and
 * sampler (kernels/cuda/cuda_{fp8,moe,mla,indexer,route,hc}.cu, cuda_ds4_*.cu, cuda_sample.cu;
 * ctest label gpu): every op, its reference kernel (LD_CU_REF) and its
 * custom kernel (LD_CU_CUSTOM), against the plain-C reference (ref_ds.h,
 * ref_ds4.h, ref_ops.h, replay_sample.h) on random inputs of small
 * realistic shapes.  Every case skips (77) with the reason when CUDA is not
 * built or no device is present (the message of ld_backend_cuda_create,
 * as test_cuda_ops.c).
 *
 * Tolerances (nmse = sum (a - r)^2 / sum r^2, non-finite values in the same
 * places; max |d| printed, not asserted):
 *   fp8_matmul     ref: bitwise; custom: nmse <= 1e-10 (fmaf, lane
 *                  partition and shuffle tree instead of one accumulator)
 *   absorb_q/out   ref: bitwise (F32, BF16, F16 weights); custom: nmse <=
 *                  1e-10
 *   mla_latent     ref: nmse <= 1e-12 (CUDA's expf within 2 ulp of the C
 *                  library's); custom: nmse <= 1e-10 (split-K merge)
 *   index_scores   ref: bitwise (no transcendental); custom: nmse <= 1e-10
 *   topk           both: the index rows equal exactly (and -1 filled)
 *   ds_route,      both: the chosen experts equal exactly; weights nmse <=
 *   ds4_route      1e-12 (expf / log1pf ulps)
 *   moe_plan       both: offsets, rows and row_of equal exactly
 *   moe_fp8_gemm   ref: bitwise; custom: nmse <= 1e-10 (as fp8_matmul)
 *   moe_combine    both: bitwise (the same two roundings per step)
 *   hc_pre         ref: nmse <= 1e-12 (expf); custom: nmse <= 1e-10 (the
 *                  block-reduced norm, the warp dot products)
 *   hc_pre_ex      mhc=bf16 and mhc=sinkhorn-bf16 against ld_ref_ds4_hc_pre_ex
 *                  (and the bf16 cast): nmse <= 1e-4 (an expf ulp may move
 *                  a value across a bf16 rounding boundary); the rounded
 *                  matrices hold bf16 values exactly
 *   hc_post        both: bitwise
 *   sample         the generator's hash and uniform: bitwise equal to
 *                  replay's ld_sample_hash / ld_sample_uniform; the tokens
 *                  of both kernels equal ld_sampler_token's exactly, greedy
 *                  and seeded, with each filter alone and together, ties
 *                  and NaN included
 * kernels/cuda/cuda_ds4_*.cu:
 *   ds4_attention  ref: nmse <= 1e-12 (expf); custom: nmse <= 1e-10 (split-K
 *                  over 64 keys, fmaf, unnormalised sums merged in order);
 *                  window, compressed entries all / picked (-1 filled),
 *                  sinks on and off, hd 64..512; the last row run alone
 *                  equals the batch's row bitwise (both kernels)
 *   clamped_swiglu both: nmse <= 1e-12 (expf); custom bitwise = ref kernel
 *   rope           both: nmse <= 1e-12 (cosf / sinf ulps; 1e-5 with the
 *                  bf16 table: an ulp may cross a bf16 rounding boundary);
 *                  custom bitwise = ref kernel; V4 (inverse too) and V3.2
 *   hc_head        ref: nmse <= 1e-12 (expf); custom: nmse <= 1e-10
 *   fp4_matmul     ref: bitwise (fp32 and UE8M0 scales); custom: nmse <=
 *                  1e-10; the last row alone: the batch's bits
 *   ds4_compress   ref: nmse <= 1e-12 (expf); custom: nmse <= 1e-10 (slot
 *                  parts, one division)
 *   ds_layernorm   ref: bitwise; custom: nmse <= 1e-10
 */
#ifndef LD_TEST_CUDA_DS_CHECK_H
#define LD_TEST_CUDA_DS_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"
#include "logdiff_config.h"

/* a skip with the reason the CUDA backend gives (built without CUDA, no
 * device) */
static inline int gpu_unavailable(char *why, size_t cap)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    ld_status st = ld_backend_cuda_create(0, NULL, &be, &err);
    if (st == LD_OK) {
        ld_backend_destroy(be);
        return 0;
    }
    snprintf(why, cap, "%s", err.msg);
    return 1;
}

#define NEED_GPU()                                                         \
    do {                                                                   \
        char why_[300];                                                    \
        if (gpu_unavailable(why_, sizeof why_)) SKIP("%s", why_);          \
    } while (0)

#if LD_HAVE_CUDA || defined(LD_CUDA_MOCK) || defined(LD_CUDA_EMU)

#include "kernels/cuda/cuda_ops.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "replay/run/replay_sample.h"

/* ---------------------------------------------------------------- helpers */


static inline float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)(next_u32() & 0xffffff) / 16777216.0f;
}

static inline void fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = frand(lo, hi);
}

/* device buffers of the current case, freed together */
#define MAXBUF 512
static void *dbuf[MAXBUF];
static int ndbuf;

static inline void dfree_all(void)
{
    for (int i = 0; i < ndbuf; i++) ld_cu_free(dbuf[i]);
    ndbuf = 0;
}

/* a device copy of `bytes` of host data (NULL: zeros); NULL on failure */
static inline void *dput(const void *h, size_t bytes)
{
    void *d = NULL;
    if (ndbuf == MAXBUF || ld_cu_malloc(&d, bytes)) return NULL;
    dbuf[ndbuf++] = d;
    if (h ? ld_cu_h2d(d, h, bytes) : ld_cu_memset0(d, bytes ? bytes : 1)) return NULL;
    return d;
}

#define CU(expr)                                                                             \
    do {                                                                                     \
        int e_ = (expr);                                                                     \
        CHECK_MSG(!e_, "%s: %s", #expr, ld_cu_error_string(e_));                            \
    } while (0)

#define DPUT(var, h, bytes)                                                                  \
    do {                                                                                     \
        var = dput((h), (bytes));                                                            \
        CHECK_MSG(var, "device buffer of %zu bytes", (size_t)(bytes));                      \
    } while (0)

static inline const char *kname(int v)
{
    return v == LD_CU_REF ? "ref" : "custom";
}

/* nmse of a against r (-1 when non-finite values differ in place) */
static inline double nmse(const float *a, const float *r, size_t n, double *maxd)
{
    double num = 0, den = 0;
    *maxd = 0;
    for (size_t i = 0; i < n; i++) {
        int fa = isfinite(a[i]), fr = isfinite(r[i]);
        if (fa != fr) return -1;
        if (!fr) {
            if (!(isnan(a[i]) && isnan(r[i])) && a[i] != r[i]) return -1;
            continue;
        }
        double d = (double)a[i] - (double)r[i];
        num += d * d;
        den += (double)r[i] * (double)r[i];
        if (fabs(d) > *maxd) *maxd = fabs(d);
    }
    return den > 0 ? num / den : num;
}

/* compares a (device, n floats) with r: bitwise (tol < 0) or nmse <= tol */
static inline int compare(const char *op, int v, const char *shape, const float *dev, const float *r, size_t n, double tol)
{
    float *a = malloc(n * sizeof *a);
    CHECK(a);
    int e = ld_cu_d2h(a, dev, n * sizeof *a);
    if (e) {
        free(a);
        CHECK_MSG(0, "%s %s: %s", op, kname(v), ld_cu_error_string(e));
    }
    double mx, err = nmse(a, r, n, &mx);
    int same = !memcmp(a, r, n * sizeof *a);
    printf("  %-15s %-6s %-34s nmse %-9.3g max|d| %-9.3g %s\n", op, kname(v), shape, err, mx,
           same ? "bitwise" : "");
    free(a);
    if (tol < 0) CHECK_MSG(same, "%s %s %s: not bitwise equal to the C reference", op, kname(v), shape);
    else CHECK_MSG(err >= 0 && err <= tol, "%s %s %s: nmse %g > %g", op, kname(v), shape, err, tol);
    return 0;
}

static inline int compare_i32(const char *op, int v, const char *shape, const int32_t *dev, const int32_t *r, size_t n)
{
    int32_t *a = malloc(n * sizeof *a);
    CHECK(a);
    int e = ld_cu_d2h(a, dev, n * sizeof *a);
    size_t bad = 0, first = n;
    for (size_t i = 0; !e && i < n; i++)
        if (a[i] != r[i]) {
            if (first == n) first = i;
            bad++;
        }
    printf("  %-15s %-6s %-34s %zu of %zu indices differ\n", op, kname(v), shape, e ? n : bad, n);
    if (!e && bad) printf("    first at %zu: %d, reference %d\n", first, (int)a[first], (int)r[first]);
    free(a);
    CHECK_MSG(!e, "%s: %s", op, ld_cu_error_string(e));
    CHECK_MSG(!bad, "%s %s %s: indices differ from the C reference", op, kname(v), shape);
    return 0;
}

/* FP8 E4M3 bytes, NaN codes (S.1111.111) left out */
static inline uint8_t rand_e4m3(void)
{
    uint8_t b;
    do b = (uint8_t)next_u32();
    while ((b & 0x7f) == 0x7f);
    return b;
}

/* a device result of n floats to a new host array (NULL on failure) */
static inline float *dget(const float *dev, size_t n)
{
    float *h = malloc(n * sizeof *h);
    if (h && ld_cu_d2h(h, dev, n * sizeof *h)) {
        free(h);
        return NULL;
    }
    return h;
}

/* a norm weight of D values on the device as F32, F16 and BF16: dwt[dt]
 * by ld_kdt (freed by dfree_all) */
static inline int norm_weights(int D, const void *dwt[3])
{
    float *w = malloc(sizeof(float) * D);
    uint16_t *wh = malloc(sizeof(uint16_t) * D), *wb = malloc(sizeof(uint16_t) * D);
    CHECK(w && wh && wb);
    fill(w, (size_t)D, 0.5f, 1.5f);
    for (int i = 0; i < D; i++) {
        uint32_t u;
        memcpy(&u, &w[i], sizeof u);
        wb[i] = (uint16_t)(u >> 16);                        /* bf16: w truncated */
        wh[i] = (uint16_t)(0x3800u + next_u32() % 0x0c00u); /* f16 in [0.5, 2) */
    }
    DPUT(dwt[LD_KDT_F32], w, sizeof(float) * D);
    DPUT(dwt[LD_KDT_F16], wh, sizeof(uint16_t) * D);
    DPUT(dwt[LD_KDT_BF16], wb, sizeof(uint16_t) * D);
    free(w);
    free(wh);
    free(wb);
    return 0;
}

#define LD_CUDA_DS_CHECKS 1
#endif /* LD_HAVE_CUDA || LD_CUDA_MOCK || LD_CUDA_EMU */

#endif /* LD_TEST_CUDA_DS_CHECK_H */
