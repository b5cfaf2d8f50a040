/* test_cuda_ds.c - the GPU-only checks of the CUDA DeepSeek ops and
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
static int gpu_unavailable(char *why, size_t cap)
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


static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)(next_u32() & 0xffffff) / 16777216.0f;
}

static void fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = frand(lo, hi);
}

/* device buffers of the current case, freed together */
#define MAXBUF 512
static void *dbuf[MAXBUF];
static int ndbuf;

static void dfree_all(void)
{
    for (int i = 0; i < ndbuf; i++) ld_cu_free(dbuf[i]);
    ndbuf = 0;
}

/* a device copy of `bytes` of host data (NULL: zeros); NULL on failure */
static void *dput(const void *h, size_t bytes)
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

static const char *kname(int v)
{
    return v == LD_CU_REF ? "ref" : "custom";
}

/* nmse of a against r (-1 when non-finite values differ in place) */
static double nmse(const float *a, const float *r, size_t n, double *maxd)
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
static int compare(const char *op, int v, const char *shape, const float *dev, const float *r, size_t n, double tol)
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

static int compare_i32(const char *op, int v, const char *shape, const int32_t *dev, const int32_t *r, size_t n)
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
static uint8_t rand_e4m3(void)
{
    uint8_t b;
    do b = (uint8_t)next_u32();
    while ((b & 0x7f) == 0x7f);
    return b;
}

/* ---------------------------------------------------------------- FP8 GEMM */

static int test_cuda_fp8_matmul(void)
{
    NEED_GPU();
    struct { int T, K, N, br, bc; } sh[] = {
        {1, 256, 96, 128, 128}, {5, 384, 130, 128, 128}, {3, 200, 33, 64, 64}, {9, 512, 70, 128, 128},
    };
    for (size_t c = 0; c < sizeof sh / sizeof sh[0]; c++) {
        int T = sh[c].T, K = sh[c].K, N = sh[c].N, br = sh[c].br, bc = sh[c].bc;
        int nbr = (N + br - 1) / br, nbc = (K + bc - 1) / bc;
        uint8_t *q = malloc((size_t)N * K);
        float *sc = malloc(sizeof(float) * nbr * nbc), *x = malloc(sizeof(float) * T * K);
        float *ref = malloc(sizeof(float) * T * N), *row = malloc(sizeof(float) * K);
        CHECK(q && sc && x && ref && row);
        for (size_t i = 0; i < (size_t)N * K; i++) q[i] = rand_e4m3();
        for (int i = 0; i < nbr * nbc; i++) sc[i] = ldexpf(frand(1, 2), -8 + (int)(next_u32() % 3));
        fill(x, (size_t)T * K, -1, 1);
        ld_f8b f = {q, sc, N, K, br, bc};
        ld_ref_matmul(ref, x, &f, LD_KDT_F8B, NULL, LD_KDT_F32, T, K, N, row, 0, (size_t)N);
        uint8_t *dq;
        float *dsc, *dx, *dout;
        DPUT(dq, q, (size_t)N * K);
        DPUT(dsc, sc, sizeof(float) * nbr * nbc);
        DPUT(dx, x, sizeof(float) * T * K);
        DPUT(dout, NULL, sizeof(float) * T * N);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d K %d N %d blk %dx%d", T, K, N, br, bc);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * T * N));
            CU(ld_cu_fp8_matmul(v, dout, dx, dq, dsc, T, K, N, br, bc));
            if (compare("fp8_matmul", v, shape, dout, ref, (size_t)T * N, v ? 1e-10 : -1)) return 1;
            /* the last row alone equals its row of the batch bitwise */
            float *batch = malloc(sizeof(float) * T * N), *alone = malloc(sizeof(float) * N);
            CHECK(batch && alone);
            CU(ld_cu_d2h(batch, dout, sizeof(float) * T * N));
            CU(ld_cu_fp8_matmul(v, dout, dx + (size_t)(T - 1) * K, dq, dsc, 1, K, N, br, bc));
            CU(ld_cu_d2h(alone, dout, sizeof(float) * N));
            int same = !memcmp(alone, batch + (size_t)(T - 1) * N, sizeof(float) * N);
            free(batch);
            free(alone);
            CHECK_MSG(same, "fp8_matmul %s %s: the last row alone differs from the batch", kname(v), shape);
        }
        free(q);
        free(sc);
        free(x);
        free(ref);
        free(row);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- MoE */

/* the plan (offsets, rows, row_of: exact) and the grouped FP8 GEMM of
 * random routes against ld_ref_moe_gather + ld_ref_matmul per expert */
static int test_cuda_moe_grouped(void)
{
    NEED_GPU();
    struct { int T, K, E, D, N; } sh[] = {{7, 4, 16, 256, 96}, {1, 8, 256, 512, 64}, {33, 6, 64, 200, 130}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, K = sh[ci].K, E = sh[ci].E, D = sh[ci].D, N = sh[ci].N, R = T * K, br = 128, bc = 128;
        int nbr = (N + br - 1) / br, nbc = (D + bc - 1) / bc;
        int32_t *idx = malloc(sizeof(int32_t) * R), *off = malloc(sizeof(int32_t) * (E + 1));
        int32_t *rows = malloc(sizeof(int32_t) * R), *row_of = malloc(sizeof(int32_t) * R);
        int *grows = malloc(sizeof(int) * T);
        float *x = malloc(sizeof(float) * T * D), *wts = malloc(sizeof(float) * R), *gw = malloc(sizeof(float) * T);
        float *xe = malloc(sizeof(float) * T * D), *ref = malloc(sizeof(float) * R * N);
        float *row = malloc(sizeof(float) * D);
        uint8_t *q = malloc((size_t)E * N * D);
        float *sc = malloc(sizeof(float) * E * nbr * nbc);
        CHECK(idx && off && rows && row_of && grows && x && wts && gw && xe && ref && row && q && sc);
        for (int t = 0; t < T; t++) /* K distinct experts, ascending */
            for (int k = 0; k < K; k++) {
                int e, dup;
                do {
                    e = (int)(next_u32() % (uint32_t)E);
                    dup = 0;
                    for (int j = 0; j < k; j++) dup |= idx[t * K + j] == e;
                } while (dup);
                int j = k;
                while (j > 0 && idx[t * K + j - 1] > e) {
                    idx[t * K + j] = idx[t * K + j - 1];
                    j--;
                }
                idx[t * K + j] = e;
            }
        fill(x, (size_t)T * D, -1, 1);
        fill(wts, (size_t)R, 0, 1);
        for (size_t i = 0; i < (size_t)E * N * D; i++) q[i] = rand_e4m3();
        for (int i = 0; i < E * nbr * nbc; i++) sc[i] = ldexpf(frand(1, 2), -8);
        off[0] = 0;
        for (int e = 0; e < E; e++) {
            int cnt = ld_ref_moe_gather(grows, gw, xe, x, idx, wts, (size_t)T, (size_t)K, (size_t)D, e);
            ld_f8b f = {q + (size_t)e * N * D, sc + (size_t)e * nbr * nbc, N, D, br, bc};
            if (cnt) ld_ref_matmul(ref + (size_t)off[e] * N, xe, &f, LD_KDT_F8B, NULL, LD_KDT_F32, cnt, D, N, row, 0,
                                   (size_t)N);
            for (int i = 0; i < cnt; i++) {
                rows[off[e] + i] = grows[i];
                for (int k = 0; k < K; k++)
                    if (idx[grows[i] * K + k] == e) row_of[grows[i] * K + k] = off[e] + i;
            }
            off[e + 1] = off[e] + cnt;
        }
        int32_t *didx, *doff, *drows, *drow_of;
        float *dx, *dsc, *dout;
        uint8_t *dq;
        DPUT(didx, idx, sizeof(int32_t) * R);
        DPUT(doff, NULL, sizeof(int32_t) * (E + 1));
        DPUT(drows, NULL, sizeof(int32_t) * R);
        DPUT(drow_of, NULL, sizeof(int32_t) * R);
        DPUT(dx, x, sizeof(float) * T * D);
        DPUT(dq, q, (size_t)E * N * D);
        DPUT(dsc, sc, sizeof(float) * E * nbr * nbc);
        DPUT(dout, NULL, sizeof(float) * R * N);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d K %d E %d D %d N %d", T, K, E, D, N);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(drows, sizeof(int32_t) * R));
            CU(ld_cu_moe_plan(v, doff, drows, drow_of, didx, T, K, E));
            if (compare_i32("moe_plan off", v, shape, doff, off, (size_t)E + 1)) return 1;
            if (compare_i32("moe_plan rows", v, shape, drows, rows, (size_t)R)) return 1;
            if (compare_i32("moe_plan row_of", v, shape, drow_of, row_of, (size_t)R)) return 1;
            CU(ld_cu_memset0(dout, sizeof(float) * R * N));
            CU(ld_cu_moe_fp8_matmul(v, dout, dx, drows, doff, dq, dsc, E, R, T, D, N, br, bc));
            if (compare("moe_fp8_gemm", v, shape, dout, ref, (size_t)R * N, v ? 1e-10 : -1)) return 1;
        }
        free(idx);
        free(off);
        free(rows);
        free(row_of);
        free(grows);
        free(x);
        free(wts);
        free(gw);
        free(xe);
        free(ref);
        free(row);
        free(q);
        free(sc);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- MLA */

static int test_cuda_mla_latent(void)
{
    NEED_GPU();
    struct { int T, H, dn, dr, c, pos0, k; } sh[] = {
        {1, 4, 16, 8, 64, 0, 0},   {1, 4, 16, 8, 64, 200, 0}, {3, 4, 16, 16, 96, 70, 0},
        {1, 8, 32, 16, 128, 300, 48}, {4, 4, 16, 8, 64, 40, 32}, {2, 2, 8, 8, 64, 130, 100},
        {1, 12, 16, 16, 64, 150, 0}, {2, 16, 128, 64, 512, 300, 0}, {1, 16, 128, 64, 512, 500, 128},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, dn = sh[ci].dn, dr = sh[ci].dr, c = sh[ci].c, pos0 = sh[ci].pos0,
            k = sh[ci].k, S = pos0 + T;
        size_t nq = (size_t)T * H * (dn + dr), na = (size_t)T * H * c;
        float *q = malloc(sizeof(float) * nq), *qa = malloc(sizeof(float) * na);
        float *ckv = malloc(sizeof(float) * S * c), *kpe = malloc(sizeof(float) * S * dr);
        float *ref = malloc(sizeof(float) * na), *scores = malloc(sizeof(float) * S);
        int32_t *sel = k ? malloc(sizeof(int32_t) * T * k) : NULL, *heap = malloc(sizeof(int32_t) * (k + 1));
        CHECK(q && qa && ckv && kpe && ref && scores && heap && (!k || sel));
        fill(q, nq, -1, 1);
        fill(qa, na, -0.5f, 0.5f);
        fill(ckv, (size_t)S * c, -1, 1);
        fill(kpe, (size_t)S * dr, -1, 1);
        float scale = 1.0f / sqrtf((float)(c + dr));
        if (k) { /* each query's selection: the top-k of random scores over its positions */
            for (int t = 0; t < T; t++) {
                fill(scores, (size_t)S, -1, 1);
                int m = ld_ref_ds_topk(sel + (size_t)t * k, scores, pos0 + t + 1, k, heap);
                for (int j = m; j < k; j++) sel[(size_t)t * k + j] = -1;
            }
            ld_ref_mla_latent_attention_sparse(ref, qa, q, ckv, kpe, H, dn, dr, c, pos0, scale, scores, sel, k, 0,
                                               (size_t)T * H);
        } else {
            ld_ref_mla_latent_attention(ref, qa, q, ckv, kpe, H, dn, dr, c, pos0, scale, scores, 0, (size_t)T * H);
        }
        float *dq, *dqa, *dckv, *dkpe, *dout, *dwork;
        int32_t *dsel = NULL;
        DPUT(dq, q, sizeof(float) * nq);
        DPUT(dqa, qa, sizeof(float) * na);
        DPUT(dckv, ckv, sizeof(float) * S * c);
        DPUT(dkpe, kpe, sizeof(float) * S * dr);
        DPUT(dout, NULL, sizeof(float) * na);
        if (k) DPUT(dsel, sel, sizeof(int32_t) * T * k);
        size_t wn = ld_cu_mla_latent_work(LD_CU_CUSTOM, T, H, c, pos0, dsel, k);
        DPUT(dwork, NULL, sizeof(float) * (wn ? wn : 1));
        char shape[64];
        snprintf(shape, sizeof shape, "T %d H %d c %d dr %d pos0 %d %s%d", T, H, c, dr, pos0, k ? "k " : "",
                 k ? k : S);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * na));
            CU(ld_cu_mla_latent(v, dout, dqa, dq, dckv, dkpe, T, H, dn, dr, c, pos0, scale, dsel, k, dwork, wn));
            if (compare(k ? "mla_sparse" : "mla_latent", v, shape, dout, ref, na, v ? 1e-10 : 1e-12)) return 1;
        }
        /* batch invariance: each token alone (position pos0 + t) gives its
         * row of the batch bitwise, with both kernels */
        float *batch = malloc(sizeof(float) * na), *alone = malloc(sizeof(float) * H * c);
        CHECK(batch && alone);
        for (int v = 0; v < 2 && T > 1; v++) {
            CU(ld_cu_mla_latent(v, dout, dqa, dq, dckv, dkpe, T, H, dn, dr, c, pos0, scale, dsel, k, dwork, wn));
            CU(ld_cu_d2h(batch, dout, sizeof(float) * na));
            for (int t = 0; t < T; t++) {
                CU(ld_cu_mla_latent(v, dout, dqa + (size_t)t * H * c, dq + (size_t)t * H * (dn + dr), dckv, dkpe, 1, H,
                                    dn, dr, c, pos0 + t, scale, dsel ? dsel + (size_t)t * k : NULL, k, dwork, wn));
                CU(ld_cu_d2h(alone, dout, sizeof(float) * H * c));
                CHECK_MSG(!memcmp(alone, batch + (size_t)t * H * c, sizeof(float) * H * c),
                          "mla %s %s: token %d alone differs from its row of the batch", kname(v), shape, t);
            }
            printf("  %-15s %-6s %-34s each token alone = its batch row\n", "mla", kname(v), shape);
        }
        free(batch);
        free(alone);
        free(q);
        free(qa);
        free(ckv);
        free(kpe);
        free(ref);
        free(scores);
        free(sel);
        free(heap);
        dfree_all();
    }
    return 0;
}

static int test_cuda_mla_absorb(void)
{
    NEED_GPU();
    struct { int T, H, dn, dr, dv, c; ld_kdt dt; } sh[] = {
        {1, 4, 16, 8, 16, 64, LD_KDT_F32}, {3, 4, 16, 8, 16, 96, LD_KDT_BF16}, {11, 2, 32, 16, 32, 128, LD_KDT_F16},
        {1, 16, 128, 64, 128, 512, LD_KDT_BF16},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, dn = sh[ci].dn, dr = sh[ci].dr, dv = sh[ci].dv, c = sh[ci].c;
        ld_kdt dt = sh[ci].dt;
        size_t nw = (size_t)H * (dn + dv) * c, nq = (size_t)T * H * (dn + dr), na = (size_t)T * H * c,
               no = (size_t)T * H * dv;
        size_t wbytes = nw * (dt == LD_KDT_F32 ? 4 : 2);
        unsigned char *w = malloc(wbytes);
        float *q = malloc(sizeof(float) * nq), *ol = malloc(sizeof(float) * na);
        float *rq = malloc(sizeof(float) * na), *ro = malloc(sizeof(float) * no);
        CHECK(w && q && ol && rq && ro);
        for (size_t i = 0; i < nw; i++) {
            if (dt == LD_KDT_F32) {
                ((float *)w)[i] = frand(-0.5f, 0.5f);
            } else if (dt == LD_KDT_BF16) {
                float f = frand(-0.5f, 0.5f);
                uint32_t u;
                memcpy(&u, &f, 4);
                ((uint16_t *)w)[i] = (uint16_t)(u >> 16);
            } else { /* f16: sign, exponent 8..16, random mantissa */
                uint32_t r = next_u32();
                ((uint16_t *)w)[i] = (uint16_t)(((r & 1) << 15) | ((8 + (r >> 1) % 9) << 10) | ((r >> 8) & 1023));
            }
        }
        fill(q, nq, -1, 1);
        fill(ol, na, -1, 1);
        ld_ref_mla_absorb_q(rq, q, w, dt, H, dn, dr, dv, c, 0, (size_t)T * H);
        ld_ref_mla_absorb_out(ro, ol, w, dt, H, dn, dv, c, 0, (size_t)T * H);
        void *dw;
        float *dq, *dol, *da, *dout;
        DPUT(dw, w, wbytes);
        DPUT(dq, q, sizeof(float) * nq);
        DPUT(dol, ol, sizeof(float) * na);
        DPUT(da, NULL, sizeof(float) * na);
        DPUT(dout, NULL, sizeof(float) * no);
        char shape[64];
        snprintf(shape, sizeof shape, "%s T %d H %d dn %d dv %d c %d",
                 dt == LD_KDT_F32 ? "f32" : dt == LD_KDT_BF16 ? "bf16" : "f16", T, H, dn, dv, c);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_mla_absorb_q(v, da, dq, dw, dt, T, H, dn, dr, dv, c));
            if (compare("absorb_q", v, shape, da, rq, na, v ? 1e-10 : -1)) return 1;
            CU(ld_cu_mla_absorb_out(v, dout, dol, dw, dt, T, H, dn, dv, c));
            if (compare("absorb_out", v, shape, dout, ro, no, v ? 1e-10 : -1)) return 1;
        }
        free(w);
        free(q);
        free(ol);
        free(rq);
        free(ro);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- indexer */

static int test_cuda_index_scores(void)
{
    NEED_GPU();
    struct { int form, T, H, dim, n; } sh[] = {
        {0, 1, 8, 64, 300}, {0, 3, 16, 128, 129}, {1, 2, 4, 128, 257}, {1, 1, 8, 64, 64},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int form = sh[ci].form, T = sh[ci].T, H = sh[ci].H, dim = sh[ci].dim, n = sh[ci].n;
        float *q = malloc(sizeof(float) * T * H * dim), *w = malloc(sizeof(float) * T * H);
        float *keys = malloc(sizeof(float) * n * dim), *ref = malloc(sizeof(float) * T * n);
        CHECK(q && w && keys && ref);
        fill(q, (size_t)T * H * dim, -1, 1);
        fill(w, (size_t)T * H, -1, 1);
        fill(keys, (size_t)n * dim, -1, 1);
        float qscale = 1.0f / sqrtf((float)dim), wscale = 1.0f / sqrtf((float)H);
        for (int t = 0; t < T; t++) {
            const float *qt = q + (size_t)t * H * dim, *wt = w + (size_t)t * H;
            if (form == 0) ld_ref_ds_index_scores(ref + (size_t)t * n, qt, wt, keys, H, dim, n);
            else ld_ref_ds4_index_scores(ref + (size_t)t * n, qt, wt, keys, n, H, dim, qscale, wscale);
        }
        float *dq, *dw, *dk, *dout;
        DPUT(dq, q, sizeof(float) * T * H * dim);
        DPUT(dw, w, sizeof(float) * T * H);
        DPUT(dk, keys, sizeof(float) * n * dim);
        DPUT(dout, NULL, sizeof(float) * T * n);
        char shape[64];
        snprintf(shape, sizeof shape, "%s T %d H %d dim %d n %d", form ? "v4" : "v3.2", T, H, dim, n);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * T * n));
            CU(ld_cu_index_scores(v, form, dout, dq, dw, dk, T, H, dim, n, qscale, wscale));
            if (compare("index_scores", v, shape, dout, ref, (size_t)T * n, v ? 1e-10 : -1)) return 1;
        }
        free(q);
        free(w);
        free(keys);
        free(ref);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- top-k */

static int test_cuda_topk(void)
{
    NEED_GPU();
    struct { int T, ld, n, pos0, k, ties; } sh[] = {
        {4, 1024, 1000, -1, 64, 0}, {4, 1024, 1000, -1, 64, 1}, {5, 64, 64, 30, 16, 1},
        {2, 5000, 5000, -1, 512, 1}, {3, 100, 40, -1, 64, 0},   {6, 2048, 2048, 1000, 2048, 1},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, ld = sh[ci].ld, n = sh[ci].n, pos0 = sh[ci].pos0, k = sh[ci].k;
        float *sc = malloc(sizeof(float) * T * ld);
        int32_t *ref = malloc(sizeof(int32_t) * T * k), *ref4 = malloc(sizeof(int32_t) * k),
                *heap = malloc(sizeof(int32_t) * k);
        CHECK(sc && ref && ref4 && heap);
        for (size_t i = 0; i < (size_t)T * ld; i++) {
            float x = frand(-4, 4);
            if (sh[ci].ties) x = roundf(x * 2) / 2; /* many equal scores */
            uint32_t r = next_u32() % 64;
            if (sh[ci].ties && r == 0) x = NAN;
            if (sh[ci].ties && r == 1) x = -0.0f;
            if (sh[ci].ties && r == 2) x = 0.0f;
            if (r == 3) x = -INFINITY;
            sc[i] = x;
        }
        for (int t = 0; t < T; t++) {
            int nt = pos0 < 0 || pos0 + t + 1 > n ? n : pos0 + t + 1;
            int m = ld_ref_ds_topk(ref + (size_t)t * k, sc + (size_t)t * ld, nt, k, heap);
            int m4 = ld_ref_ds4_topk(ref4, sc + (size_t)t * ld, nt, k);
            CHECK_EQ_INT(m, m4);
            CHECK_MSG(!memcmp(ref4, ref + (size_t)t * k, (size_t)m * sizeof *ref4),
                      "the two C top-k differ (row %d)", t);
            for (int j = m; j < k; j++) ref[(size_t)t * k + j] = -1;
        }
        float *dsc;
        int32_t *didx;
        DPUT(dsc, sc, sizeof(float) * T * ld);
        DPUT(didx, NULL, sizeof(int32_t) * T * k);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d n %d pos0 %d k %d%s", T, n, pos0, k, sh[ci].ties ? " ties/NaN" : "");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(didx, sizeof(int32_t) * T * k));
            CU(ld_cu_topk(v, didx, dsc, T, ld, n, pos0, k));
            if (compare_i32("topk", v, shape, didx, ref, (size_t)T * k)) return 1;
        }
        free(sc);
        free(ref);
        free(ref4);
        free(heap);
        dfree_all();
    }
    return 0;
}

/* `bytes` of device memory at d and at e bitwise equal */
static int dev_bytes_same(const void *d, const void *e, size_t bytes)
{
    unsigned char *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1);
    int same = a && b && !ld_cu_d2h(a, d, bytes) && !ld_cu_d2h(b, e, bytes) && !memcmp(a, b, bytes);
    free(a);
    free(b);
    return same;
}

/* ld_cu_ds4_index_pick (one launch) against the custom RoPE, scores and
 * top-k it stands for: the rotated q, the scores and the picks bitwise,
 * the counts left at zero (a second launch on fresh queries picks the
 * same) */
static int test_cuda_ds4_index_pick(void)
{
    NEED_GPU();
    struct { int T, H, dim, rd, n, k, bf16; } sh[] = {
        {1, 8, 64, 32, 300, 64, 0}, {3, 4, 128, 64, 129, 16, 1}, {2, 16, 128, 64, 5000, 512, 0},
        {1, 64, 128, 64, 70, 128, 0}, /* k beyond the keys: -1 after them */
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, dim = sh[ci].dim, rd = sh[ci].rd, n = sh[ci].n, k = sh[ci].k, pos0 = 37;
        size_t QW = (size_t)H * (size_t)dim, nq = (size_t)T * QW;
        float *q = malloc(sizeof(float) * nq), *w = malloc(sizeof(float) * T * H);
        float *keys = malloc(sizeof(float) * (size_t)n * dim), *invf = malloc(sizeof(float) * (size_t)(rd / 2));
        CHECK(q && w && keys && invf);
        fill(q, nq, -1, 1);
        fill(w, (size_t)T * H, -1, 1);
        fill(keys, (size_t)n * dim, -1, 1);
        for (int i = 0; i < rd / 2; i++) invf[i] = powf(10000.0f, -2.0f * (float)i / (float)rd);
        float *dq[3], *dsc[2], *dw, *dk, *dinv;
        int32_t *dsel[3];
        int *sync;
        for (int i = 0; i < 3; i++) DPUT(dq[i], q, sizeof(float) * nq);
        for (int i = 0; i < 2; i++) DPUT(dsc[i], NULL, sizeof(float) * T * n);
        for (int i = 0; i < 3; i++) DPUT(dsel[i], NULL, sizeof(int32_t) * T * k);
        DPUT(dw, w, sizeof(float) * T * H);
        DPUT(dk, keys, sizeof(float) * (size_t)n * dim);
        DPUT(dinv, invf, sizeof(float) * (size_t)(rd / 2));
        DPUT(sync, NULL, sizeof(int) * T);
        float qs = 1.0f / sqrtf((float)dim), ws = 1.0f / sqrtf((float)H), af = 1.25f;
        CU(ld_cu_ds_rope(LD_CU_CUSTOM, dq[0], T, QW, (size_t)(dim - rd), H, (size_t)dim, rd, dinv, af, 1, pos0, 0,
                         sh[ci].bf16));
        CU(ld_cu_index_scores(LD_CU_CUSTOM, 1, dsc[0], dq[0], dw, dk, T, H, dim, n, qs, ws));
        CU(ld_cu_topk(LD_CU_CUSTOM, dsel[0], dsc[0], T, n, n, -1, k));
        ld_cu_rot rot = {dinv, af, rd, sh[ci].bf16};
        CU(ld_cu_ds4_index_pick(dsel[1], dsc[1], dq[1], dw, dk, T, H, dim, n, k, qs, ws, &rot, pos0, sync));
        CU(ld_cu_ds4_index_pick(dsel[2], dsc[1], dq[2], dw, dk, T, H, dim, n, k, qs, ws, &rot, pos0, sync));
        size_t nsel = sizeof(int32_t) * (size_t)T * (size_t)k;
        int sq = dev_bytes_same(dq[0], dq[1], sizeof(float) * nq);
        int ss = dev_bytes_same(dsc[0], dsc[1], sizeof(float) * (size_t)T * (size_t)n);
        int sp = dev_bytes_same(dsel[0], dsel[1], nsel), s2 = dev_bytes_same(dsel[0], dsel[2], nsel);
        const char *v[2] = {"DIFFER", "same"};
        printf("  ds4_index_pick one launch T %d H %d dim %d rd %d n %d k %d%s vs the three: q %s, scores %s, "
               "picks %s, again %s\n", T, H, dim, rd, n, k, sh[ci].bf16 ? " bf16 table" : "", v[sq], v[ss], v[sp],
               v[s2]);
        CHECK_MSG(sq && ss && sp && s2, "ds4_index_pick: differs from the rope, scores and top-k launches");
        free(q);
        free(w);
        free(keys);
        free(invf);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- routers */

static int test_cuda_ds_route(void)
{
    NEED_GPU();
    struct { int T, E, ng, tg, k, norm, bias; float scale; } sh[] = {
        {16, 64, 8, 4, 6, 1, 1, 2.5f}, {7, 256, 8, 4, 8, 1, 1, 2.5f}, {5, 32, 4, 2, 3, 0, 0, 1.0f},
        {33, 256, 1, 1, 8, 1, 1, 1.0f},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, E = sh[ci].E, K = sh[ci].k;
        float *lg = malloc(sizeof(float) * T * E), *bias = malloc(sizeof(float) * E);
        float *rw = malloc(sizeof(float) * T * K);
        int32_t *ri = malloc(sizeof(int32_t) * T * K);
        CHECK(lg && bias && rw && ri);
        fill(lg, (size_t)T * E, -4, 4);
        fill(bias, (size_t)E, -0.1f, 0.1f);
        const float *b = sh[ci].bias ? bias : NULL;
        ld_ref_ds_route(ri, rw, lg, b, E, sh[ci].ng, sh[ci].tg, K, sh[ci].norm, sh[ci].scale, 0, (size_t)T);
        float *dl, *db = NULL, *dw;
        int32_t *di;
        DPUT(dl, lg, sizeof(float) * T * E);
        if (b) DPUT(db, bias, sizeof(float) * E);
        DPUT(dw, NULL, sizeof(float) * T * K);
        DPUT(di, NULL, sizeof(int32_t) * T * K);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d E %d groups %d/%d k %d%s", T, E, sh[ci].tg, sh[ci].ng, K,
                 b ? " bias" : "");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_ds_route(v, di, dw, dl, db, T, E, sh[ci].ng, sh[ci].tg, K, sh[ci].norm, sh[ci].scale));
            if (compare_i32("ds_route", v, shape, di, ri, (size_t)T * K)) return 1;
            if (compare("ds_route w", v, shape, dw, rw, (size_t)T * K, 1e-12)) return 1;
        }
        free(lg);
        free(bias);
        free(rw);
        free(ri);
        dfree_all();
    }
    return 0;
}

/* the tables' fields (their padding bytes are not theirs to compare); the
 * picked rows xrows as offsets into each one's rows array ra, rb */
static int same_tables(const ld_cu_mm_group *a, const ld_cu_mm_group *b, int n, const int32_t *ra,
                       const int32_t *rb)
{
    for (int i = 0; i < n; i++) {
        if (a[i].q != b[i].q || a[i].scale != b[i].scale || a[i].x != b[i].x || a[i].out != b[i].out ||
            a[i].rows != b[i].rows || a[i].n != b[i].n || a[i].ldx != b[i].ldx || a[i].ldo != b[i].ldo)
            return 0;
        if (!a[i].xrows != !b[i].xrows || (a[i].xrows && a[i].xrows - ra != b[i].xrows - rb)) return 0;
    }
    return 1;
}

/* a router for route_fused_same: logits = x [T][k] times w [E][k] of
 * type dt (F32 or BF16, as the host bytes), on the device */
typedef struct router_case {
    ld_kdt dt;
    int k;
    const float *x;
    const void *w;
    float *logits[2]; /* the matmul's, the fused launch's: [T][E] */
    int *sync;
} router_case;

/* ld_cu_ds4_route_plan_tables (one launch) against the custom route,
 * plan and tables it stands for: the route, the plan and the tables
 * equal (the weights bitwise); experts' weights at made-up addresses (the
 * tables copy them, nothing reads them).  With rc: the router's matmul
 * (ld_cu_matmul custom) then those three launches against
 * ld_cu_ds4_router_route_plan_tables, the logits bitwise too. */
static int route_fused_same(const char *shape, const float *dl, const float *db, const int32_t *dtab,
                            const int32_t *dtok, int T, int E, int K, float scale, int pick, const router_case *rc)
{
    int R = T * K, G = E < R ? E : R, D = 64, I = 32;
    ld_cu_moe_w *mw = malloc(sizeof *mw * E);
    CHECK(mw);
    for (int e = 0; e < E; e++) {
        uintptr_t a = (uintptr_t)0x10000 + (uintptr_t)e * 0x100;
        mw[e] = (ld_cu_moe_w){(const uint8_t *)a, (const uint8_t *)(a + 16), (const uint8_t *)(a + 32),
                              (const float *)(a + 48), (const float *)(a + 64), (const float *)(a + 80)};
    }
    ld_cu_moe_w *dmw;
    float *dw[2], *xe, *g, *u, *eo;
    int32_t *di[2], *doff[2], *drows[2], *drow_of[2];
    ld_cu_mm_group *dt[2];
    DPUT(dmw, mw, sizeof *mw * E);
    DPUT(xe, NULL, sizeof(float) * R * D);
    DPUT(g, NULL, sizeof(float) * R * I);
    DPUT(u, NULL, sizeof(float) * R * I);
    DPUT(eo, NULL, sizeof(float) * R * D);
    for (int i = 0; i < 2; i++) {
        DPUT(dw[i], NULL, sizeof(float) * R);
        DPUT(di[i], NULL, sizeof(int32_t) * R);
        DPUT(doff[i], NULL, sizeof(int32_t) * (E + 1));
        DPUT(drows[i], NULL, sizeof(int32_t) * R);
        DPUT(drow_of[i], NULL, sizeof(int32_t) * R);
        DPUT(dt[i], NULL, sizeof(ld_cu_mm_group) * 3 * G);
    }
    if (rc) {
        CU(ld_cu_matmul(LD_CU_CUSTOM, rc->logits[0], rc->x, rc->w, rc->dt, NULL, LD_KDT_F32, T, rc->k, E, 0));
        dl = rc->logits[0];
    }
    CU(ld_cu_ds4_route(LD_CU_CUSTOM, di[0], dw[0], dl, db, dtab, dtok, T, E, K, scale));
    CU(ld_cu_moe_plan(LD_CU_CUSTOM, doff[0], drows[0], drow_of[0], di[0], T, K, E));
    CU(ld_cu_moe_tables(dt[0], G, doff[0], dmw, E, xe, pick ? drows[0] : NULL, g, u, eo, D, I));
    if (rc) {
        ld_cu_router r = {rc->logits[1], rc->x, rc->w, rc->dt, rc->k, rc->sync};
        CU(ld_cu_ds4_router_route_plan_tables(&r, di[1], dw[1], db, dtab, dtok, T, E, K, scale, doff[1], drows[1],
                                              drow_of[1], dt[1], G, dmw, xe, pick, g, u, eo, D, I));
    } else {
        CU(ld_cu_ds4_route_plan_tables(di[1], dw[1], dl, db, dtab, dtok, T, E, K, scale, doff[1], drows[1],
                                       drow_of[1], dt[1], G, dmw, xe, pick, g, u, eo, D, I));
    }
    int32_t *hi[2][4];
    float *hw[2];
    ld_cu_mm_group *ht[2];
    for (int i = 0; i < 2; i++) {
        hi[i][0] = malloc(sizeof(int32_t) * R);
        hi[i][1] = malloc(sizeof(int32_t) * (E + 1));
        hi[i][2] = malloc(sizeof(int32_t) * R);
        hi[i][3] = malloc(sizeof(int32_t) * R);
        hw[i] = malloc(sizeof(float) * R);
        ht[i] = malloc(sizeof(ld_cu_mm_group) * 3 * G);
        CHECK(hi[i][0] && hi[i][1] && hi[i][2] && hi[i][3] && hw[i] && ht[i]);
        CU(ld_cu_d2h(hi[i][0], di[i], sizeof(int32_t) * R));
        CU(ld_cu_d2h(hi[i][1], doff[i], sizeof(int32_t) * (E + 1)));
        CU(ld_cu_d2h(hi[i][2], drows[i], sizeof(int32_t) * R));
        CU(ld_cu_d2h(hi[i][3], drow_of[i], sizeof(int32_t) * R));
        CU(ld_cu_d2h(hw[i], dw[i], sizeof(float) * R));
        CU(ld_cu_d2h(ht[i], dt[i], sizeof(ld_cu_mm_group) * 3 * G));
    }
    int same = !memcmp(hi[0][0], hi[1][0], sizeof(int32_t) * R) &&
               !memcmp(hi[0][1], hi[1][1], sizeof(int32_t) * (E + 1)) &&
               !memcmp(hi[0][2], hi[1][2], sizeof(int32_t) * R) && !memcmp(hi[0][3], hi[1][3], sizeof(int32_t) * R) &&
               !memcmp(hw[0], hw[1], sizeof(float) * R) && same_tables(ht[0], ht[1], 3 * G, drows[0], drows[1]);
    for (int k = 0; same && k < 3 * G; k++) /* picked: the gates and ups read x by the plan's rows, the downs not */
        same = ht[1][k].rows == 0 || !ht[1][k].xrows == (!pick || k >= 2 * G);
    if (rc) { /* the logits, and the count left at zero for the next launch */
        float *l[2] = {malloc(sizeof(float) * T * E), malloc(sizeof(float) * T * E)};
        int left = -1;
        CHECK(l[0] && l[1]);
        for (int i = 0; i < 2; i++) CU(ld_cu_d2h(l[i], rc->logits[i], sizeof(float) * T * E));
        CU(ld_cu_d2h(&left, rc->sync, sizeof left));
        same = same && !memcmp(l[0], l[1], sizeof(float) * T * E) && left == 0;
        free(l[0]);
        free(l[1]);
    }
    printf("  ds4_%s+plan+tables one launch %-26s%s%s vs the %s: %s\n", rc ? "router+route" : "route", shape,
           pick ? " picked" : "", rc ? (rc->dt == LD_KDT_BF16 ? " bf16" : " f32") : "",
           rc ? "matmul and three" : "three", same ? "the same" : "DIFFER");
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 4; j++) free(hi[i][j]);
        free(hw[i]);
        free(ht[i]);
    }
    free(mw);
    CHECK_MSG(same, "ds4_route_plan_tables %s: differs from the three launches", shape);
    return 0;
}

/* the router fused with the route (route_fused_same with a router): F32
 * and BF16 weights, a hidden width of whole 16-byte chunks (the matmul's
 * chunked path) and one that is not (its element path) */
static int router_cases(const char *shape, const float *db, const int32_t *dtab, const int32_t *dtok, int T, int E,
                        int K, float scale)
{
    static const int widths[] = {96, 70};
    for (int wi = 0; wi < 2; wi++)
        for (int bf = 0; bf < 2; bf++) {
            int k = widths[wi];
            size_t nw = (size_t)E * (size_t)k;
            float *x = malloc(sizeof(float) * (size_t)T * (size_t)k), *wf = malloc(sizeof(float) * nw);
            uint16_t *wb = malloc(sizeof(uint16_t) * nw);
            CHECK(x && wf && wb);
            fill(x, (size_t)T * (size_t)k, -1, 1);
            fill(wf, nw, -0.5f, 0.5f);
            for (size_t i = 0; i < nw; i++) { /* bf16: the top half of the float */
                uint32_t u;
                memcpy(&u, &wf[i], sizeof u);
                wb[i] = (uint16_t)(u >> 16);
            }
            router_case rc = {bf ? LD_KDT_BF16 : LD_KDT_F32, k, NULL, NULL, {NULL, NULL}, NULL};
            float *dx;
            void *dw;
            DPUT(dx, x, sizeof(float) * (size_t)T * (size_t)k);
            if (bf) DPUT(dw, wb, sizeof(uint16_t) * nw);
            else DPUT(dw, wf, sizeof(float) * nw);
            DPUT(rc.logits[0], NULL, sizeof(float) * (size_t)T * (size_t)E);
            DPUT(rc.logits[1], NULL, sizeof(float) * (size_t)T * (size_t)E);
            DPUT(rc.sync, NULL, sizeof(int)); /* zero */
            rc.x = dx;
            rc.w = dw;
            char sh[96];
            snprintf(sh, sizeof sh, "%s x%d", shape, k);
            for (int pick = 0; pick < 2; pick++)
                if (route_fused_same(sh, NULL, db, dtab, dtok, T, E, K, scale, pick, &rc)) return 1;
            free(x);
            free(wf);
            free(wb);
        }
    return 0;
}

static int test_cuda_ds4_route(void)
{
    NEED_GPU();
    struct { int T, E, K, hash, bias; float scale; } sh[] = {
        {16, 256, 6, 0, 1, 1.5f}, {9, 64, 8, 0, 0, 1.0f}, {12, 256, 6, 1, 0, 1.5f}, {40, 128, 4, 0, 1, 2.0f},
    };
    const int vocab = 50;
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, E = sh[ci].E, K = sh[ci].K;
        float *lg = malloc(sizeof(float) * T * E), *bias = malloc(sizeof(float) * E);
        float *rw = malloc(sizeof(float) * T * K);
        int32_t *ri = malloc(sizeof(int32_t) * T * K), *tab = malloc(sizeof(int32_t) * vocab * K),
                *tok = malloc(sizeof(int32_t) * T);
        CHECK(lg && bias && rw && ri && tab && tok);
        fill(lg, (size_t)T * E, -6, 6);
        fill(bias, (size_t)E, -0.2f, 0.2f);
        for (int r = 0; r < vocab; r++) /* K distinct experts per token id, in table order */
            for (int j = 0; j < K; j++) {
                int e, dup;
                do {
                    e = (int)(next_u32() % (uint32_t)E);
                    dup = 0;
                    for (int i = 0; i < j; i++) dup |= tab[r * K + i] == e;
                } while (dup);
                tab[r * K + j] = e;
            }
        for (int t = 0; t < T; t++) tok[t] = (int32_t)(next_u32() % (uint32_t)vocab);
        const float *b = sh[ci].bias ? bias : NULL;
        for (int t = 0; t < T; t++)
            ld_ref_ds4_route(ri + (size_t)t * K, rw + (size_t)t * K, lg + (size_t)t * E, b,
                             sh[ci].hash ? tab + (size_t)tok[t] * K : NULL, E, K, sh[ci].scale);
        float *dl, *db = NULL, *dw;
        int32_t *di, *dtab = NULL, *dtok = NULL;
        DPUT(dl, lg, sizeof(float) * T * E);
        if (b) DPUT(db, bias, sizeof(float) * E);
        if (sh[ci].hash) {
            DPUT(dtab, tab, sizeof(int32_t) * vocab * K);
            DPUT(dtok, tok, sizeof(int32_t) * T);
        }
        DPUT(dw, NULL, sizeof(float) * T * K);
        DPUT(di, NULL, sizeof(int32_t) * T * K);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d E %d K %d%s%s", T, E, K, sh[ci].hash ? " hash" : "", b ? " bias" : "");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_ds4_route(v, di, dw, dl, db, dtab, dtok, T, E, K, sh[ci].scale));
            if (compare_i32("ds4_route", v, shape, di, ri, (size_t)T * K)) return 1;
            if (compare("ds4_route w", v, shape, dw, rw, (size_t)T * K, 1e-12)) return 1;
        }
        for (int pick = 0; pick < 2 && T <= LD_CU_ROUTE_FUSED_T && E <= LD_CU_ROUTE_FUSED_E; pick++)
            if (route_fused_same(shape, dl, db, dtab, dtok, T, E, K, sh[ci].scale, pick, NULL)) return 1;
        if (T <= LD_CU_ROUTE_FUSED_T && E <= LD_CU_ROUTE_FUSED_E && router_cases(shape, db, dtab, dtok, T, E, K,
                                                                               sh[ci].scale))
            return 1;
        free(lg);
        free(bias);
        free(rw);
        free(ri);
        free(tab);
        free(tok);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- MoE combine */

static int test_cuda_moe_combine(void)
{
    NEED_GPU();
    struct { int T, K, D, perm; } sh[] = {{5, 6, 68, 1}, {3, 8, 70, 1}, {16, 8, 256, 0}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, K = sh[ci].K, D = sh[ci].D, R = T * K;
        float *y = malloc(sizeof(float) * T * D), *ref = malloc(sizeof(float) * T * D);
        float *eo = malloc(sizeof(float) * R * D), *w = malloc(sizeof(float) * R);
        int32_t *row_of = malloc(sizeof(int32_t) * R);
        CHECK(y && ref && eo && w && row_of);
        fill(y, (size_t)T * D, -1, 1);
        fill(eo, (size_t)R * D, -2, 2);
        fill(w, (size_t)R, 0, 1);
        for (int i = 0; i < R; i++) row_of[i] = i;
        for (int i = R - 1; sh[ci].perm && i > 0; i--) { /* the grouped GEMM's row order */
            int j = (int)(next_u32() % (uint32_t)(i + 1)), x = row_of[i];
            row_of[i] = row_of[j];
            row_of[j] = x;
        }
        memcpy(ref, y, sizeof(float) * T * D);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                ld_ref_ds_axpy(ref + (size_t)t * D, eo + (size_t)row_of[t * K + k] * D, w[t * K + k], 0, (size_t)D);
        float *dy, *deo, *dw;
        int32_t *drow = NULL;
        DPUT(dy, NULL, sizeof(float) * T * D);
        DPUT(deo, eo, sizeof(float) * R * D);
        DPUT(dw, w, sizeof(float) * R);
        if (sh[ci].perm) DPUT(drow, row_of, sizeof(int32_t) * R);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d K %d D %d%s", T, K, D, sh[ci].perm ? " permuted" : "");
        /* _ex: from zero (y's garbage unread), then + add: the memset, the
         * combine and the shared expert's add of the backend, one launch */
        float *add = malloc(sizeof(float) * T * D), *ref0 = calloc((size_t)T * D, sizeof(float)), *dadd;
        CHECK(add && ref0);
        fill(add, (size_t)T * D, -1, 1);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                ld_ref_ds_axpy(ref0 + (size_t)t * D, eo + (size_t)row_of[t * K + k] * D, w[t * K + k], 0, (size_t)D);
        for (size_t i = 0; i < (size_t)T * D; i++) ref0[i] = ref0[i] + add[i];
        DPUT(dadd, add, sizeof(float) * T * D);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_h2d(dy, y, sizeof(float) * T * D));
            CU(ld_cu_moe_combine(v, dy, deo, drow, dw, T, K, D));
            if (compare("moe_combine", v, shape, dy, ref, (size_t)T * D, -1)) return 1;
            CU(ld_cu_h2d(dy, y, sizeof(float) * T * D));
            CU(ld_cu_moe_combine_ex(v, dy, deo, drow, dw, T, K, D, 1, dadd));
            if (compare("moe_combine 0+add", v, shape, dy, ref0, (size_t)T * D, -1)) return 1;
        }
        free(add);
        free(ref0);
        free(y);
        free(ref);
        free(eo);
        free(w);
        free(row_of);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- mHC */

static float *dget(const float *dev, size_t n);

/* a norm weight of D values on the device as F32, F16 and BF16: dwt[dt]
 * by ld_kdt (freed by dfree_all) */
static int norm_weights(int D, const void *dwt[3])
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

/* ld_cu_hc_pre_norm (the custom hc_pre and the RMSNorm after it in two
 * launches, and in one with its sync counts) against the custom
 * ld_cu_hc_pre and ld_cu_rmsnorm it replaces, with an F32, an F16 and a
 * BF16 norm weight: post, comb, the collapse and the normed rows bitwise,
 * the counts left zero */
static int hc_pre_norm_same(const char *shape, const float *dX, int T, int N, int D, const float *dfn,
                            const float *dbase, const float *dscale, int iters, float neps, float heps, float *dwork,
                            size_t wn)
{
    float *dp[2], *dc[2], *du[2], *dn[2];
    const void *dwt[3]; /* by ld_kdt: F32, F16, BF16 */
    if (norm_weights(D, dwt)) return 1;
    int32_t *dsync;
    DPUT(dsync, NULL, sizeof(int32_t) * T);
    for (int k = 0; k < 6; k++) {
        int dt = LD_KDT_F32 + k % 3, one = k >= 3;
        for (int i = 0; i < 2; i++) {
            DPUT(dp[i], NULL, sizeof(float) * T * N);
            DPUT(dc[i], NULL, sizeof(float) * T * N * N);
            DPUT(du[i], NULL, sizeof(float) * T * D);
            DPUT(dn[i], NULL, sizeof(float) * T * D);
        }
        CU(ld_cu_hc_pre(LD_CU_CUSTOM, dp[0], dc[0], du[0], dX, T, N, D, dfn, dbase, dscale, iters, neps, heps, dwork,
                        wn));
        CU(ld_cu_rmsnorm(LD_CU_CUSTOM, dn[0], du[0], dwt[dt], (ld_kdt)dt, D, 1e-5f, T));
        CU(ld_cu_hc_pre_norm(LD_CU_MHC_F32, dp[1], dc[1], du[1], dX, T, N, D, dfn, dbase, dscale, iters, neps, heps,
                             dwork, wn, dwt[dt], dt, 1e-5f, dn[1], one ? dsync : NULL));
        float *want[4] = {dget(dp[0], (size_t)T * N), dget(dc[0], (size_t)T * N * N), dget(du[0], (size_t)T * D),
                          dget(dn[0], (size_t)T * D)};
        CHECK(want[0] && want[1] && want[2] && want[3]);
        char sh[96];
        snprintf(sh, sizeof sh, "%s, %s norm%s", shape, dt == LD_KDT_F32 ? "f32" : dt == LD_KDT_F16 ? "f16" : "bf16",
                 one ? ", one launch" : "");
        int bad = compare("hc_pre_norm post", LD_CU_CUSTOM, sh, dp[1], want[0], (size_t)T * N, -1) ||
                  compare("hc_pre_norm comb", LD_CU_CUSTOM, sh, dc[1], want[1], (size_t)T * N * N, -1) ||
                  compare("hc_pre_norm coll", LD_CU_CUSTOM, sh, du[1], want[2], (size_t)T * D, -1) ||
                  compare("hc_pre_norm norm", LD_CU_CUSTOM, sh, dn[1], want[3], (size_t)T * D, -1);
        for (int i = 0; i < 4; i++) free(want[i]);
        if (bad) return 1;
        int32_t *counts = malloc(sizeof(int32_t) * T);
        CHECK(counts);
        CU(ld_cu_d2h(counts, dsync, sizeof(int32_t) * T));
        for (int t = 0; t < T; t++) CHECK_MSG(counts[t] == 0, "hc_pre_norm %s: count %d left at %d", sh, t, counts[t]);
        free(counts);
    }
    return 0;
}

static int test_cuda_hc(void)
{
    NEED_GPU();
    struct { int T, N, D, iters; } sh[] = {{3, 4, 64, 20}, {2, 4, 256, 1}, {5, 8, 96, 3}, {4, 3, 100, 5}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, N = sh[ci].N, D = sh[ci].D, iters = sh[ci].iters, ND = N * D, R = (2 + N) * N;
        float *X = malloc(sizeof(float) * T * ND), *fn = malloc(sizeof(float) * R * ND);
        float *base = malloc(sizeof(float) * R), scale[3], *f = malloc(sizeof(float) * T * D);
        float *post = malloc(sizeof(float) * T * N), *comb = malloc(sizeof(float) * T * N * N);
        float *col = malloc(sizeof(float) * T * D), *out = malloc(sizeof(float) * T * ND);
        float *scratch = malloc(sizeof(float) * (ND + R));
        CHECK(X && fn && base && f && post && comb && col && out && scratch);
        fill(X, (size_t)T * ND, -2, 2);
        fill(fn, (size_t)R * ND, -0.05f, 0.05f);
        fill(base, (size_t)R, -1, 1);
        fill(scale, 3, 0.5f, 2);
        fill(f, (size_t)T * D, -1, 1);
        const float neps = 1e-6f, heps = 1e-6f;
        for (int t = 0; t < T; t++) {
            ld_ref_ds4_hc_pre(X + (size_t)t * ND, N, D, fn, base, scale, iters, neps, heps, post + (size_t)t * N,
                              comb + (size_t)t * N * N, col + (size_t)t * D, scratch);
            ld_ref_ds4_hc_post(out + (size_t)t * ND, X + (size_t)t * ND, f + (size_t)t * D, post + (size_t)t * N,
                               comb + (size_t)t * N * N, N, D);
        }
        float *dX, *dfn, *dbase, *dscale, *df, *dpost, *dcomb, *dcol, *dout, *dwork, *dpost_r, *dcomb_r;
        size_t wn = ld_cu_hc_work(T, N);
        DPUT(dX, X, sizeof(float) * T * ND);
        DPUT(dfn, fn, sizeof(float) * R * ND);
        DPUT(dbase, base, sizeof(float) * R);
        DPUT(dscale, scale, sizeof scale);
        DPUT(df, f, sizeof(float) * T * D);
        DPUT(dpost, NULL, sizeof(float) * T * N);
        DPUT(dcomb, NULL, sizeof(float) * T * N * N);
        DPUT(dcol, NULL, sizeof(float) * T * D);
        DPUT(dout, NULL, sizeof(float) * T * ND);
        DPUT(dwork, NULL, sizeof(float) * wn);
        /* hc_post from the C reference's post and comb: its own bits */
        DPUT(dpost_r, post, sizeof(float) * T * N);
        DPUT(dcomb_r, comb, sizeof(float) * T * N * N);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d N %d D %d iters %d", T, N, D, iters);
        for (int v = 0; v < 2; v++) {
            double tol = v ? 1e-10 : 1e-12;
            CU(ld_cu_hc_pre(v, dpost, dcomb, dcol, dX, T, N, D, dfn, dbase, dscale, iters, neps, heps, dwork, wn));
            if (compare("hc_pre post", v, shape, dpost, post, (size_t)T * N, tol)) return 1;
            if (compare("hc_pre comb", v, shape, dcomb, comb, (size_t)T * N * N, tol)) return 1;
            if (compare("hc_pre coll", v, shape, dcol, col, (size_t)T * D, tol)) return 1;
            CU(ld_cu_hc_post(v, dout, dX, df, dpost_r, dcomb_r, T, N, D));
            if (compare("hc_post", v, shape, dout, out, (size_t)T * ND, -1)) return 1;
        }
        if (hc_pre_norm_same(shape, dX, T, N, D, dfn, dbase, dscale, iters, neps, heps, dwork, wn)) return 1;
        free(X);
        free(fn);
        free(base);
        free(f);
        free(post);
        free(comb);
        free(col);
        free(out);
        free(scratch);
        dfree_all();
    }
    return 0;
}

/* 1 when every value is a bf16 value (its low 16 bits zero) */
static int all_bf16(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        if (u & 0xffffu) return 0;
    }
    return 1;
}

/* hc_pre's bf16 variants (mhc=bf16, mhc=sinkhorn-bf16) against the C
 * leaves the host path runs (ld_ref_ds4_hc_pre_ex, the bf16 cast of
 * ds4_forward.c's hc_pre_host); the rounded matrices hold bf16
 * values exactly */
static int test_cuda_hc_bf16(void)
{
    NEED_GPU();
    int T = 3, N = 4, D = 64, iters = 20, ND = N * D, R = (2 + N) * N;
    float *X = malloc(sizeof(float) * T * ND), *fn = malloc(sizeof(float) * R * ND);
    float *base = malloc(sizeof(float) * R), scale[3], *scratch = malloc(sizeof(float) * (ND + R));
    float *post = malloc(sizeof(float) * T * N), *comb = malloc(sizeof(float) * T * N * N);
    float *col = malloc(sizeof(float) * T * D);
    CHECK(X && fn && base && scratch && post && comb && col);
    fill(X, (size_t)T * ND, -2, 2);
    fill(fn, (size_t)R * ND, -0.05f, 0.05f);
    fill(base, (size_t)R, -1, 1);
    fill(scale, 3, 0.5f, 2);
    const float neps = 1e-6f, heps = 1e-6f;
    float *dX, *dfn, *dbase, *dscale, *dpost, *dcomb, *dcol, *dwork;
    size_t wn = ld_cu_hc_work(T, N);
    DPUT(dX, X, sizeof(float) * T * ND);
    DPUT(dfn, fn, sizeof(float) * R * ND);
    DPUT(dbase, base, sizeof(float) * R);
    DPUT(dscale, scale, sizeof scale);
    DPUT(dpost, NULL, sizeof(float) * T * N);
    DPUT(dcomb, NULL, sizeof(float) * T * N * N);
    DPUT(dcol, NULL, sizeof(float) * T * D);
    DPUT(dwork, NULL, sizeof(float) * wn);
    for (int variant = LD_CU_MHC_BF16; variant <= LD_CU_MHC_SINKHORN_BF16; variant++) {
        for (int t = 0; t < T; t++) {
            float *p = post + (size_t)t * N, *c = comb + (size_t)t * N * N;
            ld_ref_ds4_hc_pre_ex(X + (size_t)t * ND, N, D, fn, base, scale, iters, neps, heps,
                                 variant == LD_CU_MHC_SINKHORN_BF16, p, c, col + (size_t)t * D, scratch);
            if (variant != LD_CU_MHC_BF16) continue;
            for (int i = 0; i < N; i++) p[i] = ld_var_bf16_round(p[i]);
            for (int i = 0; i < N * N; i++) c[i] = ld_var_bf16_round(c[i]);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "variant %d T %d N %d D %d", variant, T, N, D);
        for (int v = 0; v < 2; v++) {
            /* an expf ulp may move a value across a bf16 rounding boundary:
             * one bf16 ulp (2^-8 relative) in an element of N*N */
            double tol = 1e-4;
            CU(ld_cu_hc_pre_ex(v, variant, dpost, dcomb, dcol, dX, T, N, D, dfn, dbase, dscale, iters, neps, heps,
                               dwork, wn));
            if (compare("hc_pre_ex post", v, shape, dpost, post, (size_t)T * N, tol)) return 1;
            if (compare("hc_pre_ex comb", v, shape, dcomb, comb, (size_t)T * N * N, tol)) return 1;
            if (compare("hc_pre_ex coll", v, shape, dcol, col, (size_t)T * D, v ? 1e-10 : 1e-12)) return 1;
            float *hp = dget(dpost, (size_t)T * N), *hc = dget(dcomb, (size_t)T * N * N);
            CHECK(hp && hc);
            CHECK(all_bf16(hc, (size_t)T * N * N));
            if (variant == LD_CU_MHC_BF16) CHECK(all_bf16(hp, (size_t)T * N));
            free(hp);
            free(hc);
        }
    }
    CHECK(ld_cu_hc_pre_ex(LD_CU_REF, 3, dpost, dcomb, dcol, dX, T, N, D, dfn, dbase, dscale, iters, neps, heps,
                          dwork, wn) != 0);
    free(X);
    free(fn);
    free(base);
    free(scratch);
    free(post);
    free(comb);
    free(col);
    dfree_all();
    return 0;
}

/* ---------------------------------------------------------------- sampling */

static int test_cuda_sample_generator(void)
{
    NEED_GPU();
    const uint64_t seeds[] = {0, 1, 42, 0xdeadbeefull, UINT64_MAX};
    const uint64_t pos0s[] = {0, 1000, (uint64_t)1 << 40, UINT64_MAX - 600};
    enum { NU = 512 };
    uint64_t *dh, h[NU];
    double *du, u[NU];
    DPUT(dh, NULL, sizeof h);
    DPUT(du, NULL, sizeof u);
    int bad = 0;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
        for (size_t p = 0; p < sizeof pos0s / sizeof pos0s[0]; p++) {
            CU(ld_cu_sample_uniforms(dh, du, seeds[s], pos0s[p], NU));
            CU(ld_cu_d2h(h, dh, sizeof h));
            CU(ld_cu_d2h(u, du, sizeof u));
            for (int i = 0; i < NU; i++) {
                uint64_t pos = pos0s[p] + (uint64_t)i;
                double cu = ld_sample_uniform(seeds[s], pos);
                bad += h[i] != ld_sample_hash(seeds[s], pos) || memcmp(&u[i], &cu, sizeof cu);
            }
        }
    printf("  generator: %d of %d (seed, position) pairs differ from replay's\n", bad,
           (int)(NU * (sizeof seeds / sizeof seeds[0]) * (sizeof pos0s / sizeof pos0s[0])));
    dfree_all();
    CHECK(!bad);
    return 0;
}

static int test_cuda_sample(void)
{
    NEED_GPU();
    struct { const char *name; double temp; int64_t top_k; double top_p, min_p; } ps[] = {
        {"greedy", 0.0, -1, NAN, NAN},        {"greedy-nan-temp", NAN, -1, NAN, NAN},
        {"top_k=1", 0.8, 1, NAN, NAN},        {"all", 0.7, -1, 1.0, 0.0},
        {"top_k 20", 1.0, 20, NAN, NAN},      {"top_p 0.9", 0.8, -1, 0.9, NAN},
        {"min_p 0.05", 1.3, -1, NAN, 0.05},   {"k 50 p 0.95 min_p 0.02", 0.9, 50, 0.95, 0.02},
        {"hot", 3.0, 0, 0.99, NAN},
    };
    struct { int T, V, ties; } sh[] = {{8, 1000, 0}, {6, 777, 1}, {3, 4096, 0}};
    ld_error err = {0};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, V = sh[ci].V;
        float *lg = malloc(sizeof(float) * T * V);
        int32_t *ref = malloc(sizeof(int32_t) * T);
        ld_sampler *smp = NULL;
        CHECK(lg && ref);
        CHECK(ld_sampler_new(V, &smp, &err) == LD_OK);
        for (size_t i = 0; i < (size_t)T * V; i++) {
            float x = frand(-1, 1) + frand(-1, 1) + frand(-1, 1);
            lg[i] = sh[ci].ties ? roundf(x * 4) / 2 : x * 3;
        }
        if (sh[ci].ties) { /* the greedy NaN cases: a NaN at id 0 (row 0), elsewhere (row 1) */
            lg[0] = NAN;
            lg[(size_t)V + 5] = NAN;
        }
        float *dl;
        int32_t *dt;
        size_t wb = ld_cu_sample_work(LD_CU_REF, T, V), wc = ld_cu_sample_work(LD_CU_CUSTOM, T, V);
        void *dwork;
        DPUT(dl, lg, sizeof(float) * T * V);
        DPUT(dt, NULL, sizeof(int32_t) * T);
        DPUT(dwork, NULL, wb > wc ? wb : wc);
        for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
            ld_sample_params p = {ps[pi].temp, ps[pi].top_k, ps[pi].top_p, ps[pi].min_p};
            int greedy = ld_sample_is_greedy(&p);
            if (sh[ci].ties && !greedy) continue; /* the NaN rows are for greedy only */
            uint64_t seed = 1234 + pi, pos0 = 100 + 7 * ci;
            for (int t = 0; t < T; t++) ref[t] = ld_sampler_token(smp, lg + (size_t)t * V, V, &p, seed, pos0 + t);
            char shape[64];
            snprintf(shape, sizeof shape, "V %d T %d %s", V, T, ps[pi].name);
            for (int v = 0; v < 2; v++) {
                CU(ld_cu_memset0(dt, sizeof(int32_t) * T));
                CU(ld_cu_sample(v, dt, dl, T, V, p.temperature, p.top_k, p.top_p, p.min_p, seed, pos0, dwork,
                                wb > wc ? wb : wc));
                if (compare_i32("sample", v, shape, dt, ref, (size_t)T)) return 1;
            }
        }
        /* the same logits with ties, seeded: the tie order (lower id first) */
        if (sh[ci].ties) {
            lg[0] = 0.5f;
            lg[(size_t)V + 5] = 0.5f;
            CU(ld_cu_h2d(dl, lg, sizeof(float) * T * V));
            ld_sample_params p = {1.0, -1, 0.8, NAN};
            for (int t = 0; t < T; t++) ref[t] = ld_sampler_token(smp, lg + (size_t)t * V, V, &p, 99, (uint64_t)t);
            for (int v = 0; v < 2; v++) {
                CU(ld_cu_sample(v, dt, dl, T, V, p.temperature, p.top_k, p.top_p, p.min_p, 99, 0, dwork,
                                wb > wc ? wb : wc));
                if (compare_i32("sample", v, "ties top_p 0.8", dt, ref, (size_t)T)) return 1;
            }
        }
        ld_sampler_free(smp);
        free(lg);
        free(ref);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- DeepSeek-V4 (cuda_ds4.cu) */

/* a device result of n floats to a new host array (NULL on failure) */
static float *dget(const float *dev, size_t n)
{
    float *h = malloc(n * sizeof *h);
    if (h && ld_cu_d2h(h, dev, n * sizeof *h)) {
        free(h);
        return NULL;
    }
    return h;
}

/* ld_cu_ds4_attention_rope against the custom attention's output (`out`,
 * copied) then the custom inverse RoPE of each head's last rd values:
 * bitwise (rd 64, or hd when smaller; the bf16 table every other case) */
static int attention_rope_same(const char *shape, const float *out, const float *dq, int T, int H, int hd,
                               const float *dkv, int kv_rows, int win, const float *dent, int ratio,
                               const int32_t *dpicks, int kpick, const float *dsinks, int pos0, float *dwork,
                               size_t wn, int ci)
{
    int rd = hd < 64 ? hd : 64;
    size_t n = (size_t)T * H * hd;
    float freq[32], *dfreq, *dfused, *dplain, *plain = dget(out, n);
    CHECK(plain);
    DPUT(dplain, plain, sizeof(float) * n);
    free(plain);
    for (int i = 0; i < rd / 2; i++) freq[i] = powf(10000.0f, -2.0f * (float)i / (float)rd);
    DPUT(dfreq, freq, sizeof(float) * (size_t)(rd / 2));
    DPUT(dfused, NULL, sizeof(float) * (n + 1));
    ld_cu_rot rot = {dfreq, 0.875f, rd, ci % 2};
    CU(ld_cu_ds_rope(LD_CU_CUSTOM, dplain, T, (size_t)H * hd, (size_t)(hd - rd), H, (size_t)hd, rd, dfreq, rot.af, 1,
                     pos0, 1, rot.bf16_table));
    size_t ns = ld_cu_ds4_attention_sync(T, H);
    int32_t *dsync, *counts = malloc(sizeof(int32_t) * ns);
    CHECK(counts);
    DPUT(dsync, NULL, sizeof(int32_t) * ns);
    float *want = dget(dplain, n);
    CHECK(want);
    for (int one = 0; one < 2; one++) { /* the merge its own launch; in the split's */
        CU(ld_cu_memset0(dfused, sizeof(float) * n));
        CU(ld_cu_ds4_attention_rope(dfused, dq, T, H, hd, dkv, kv_rows, win, dent, ratio, dpicks, kpick, dsinks,
                                    1.0f / sqrtf((float)hd), pos0, dwork, wn, rot, one ? dsync : NULL));
        float *got = dget(dfused, n);
        CHECK(got);
        CU(ld_cu_d2h(counts, dsync, sizeof(int32_t) * ns));
        int same = !memcmp(want, got, sizeof(float) * n), zero = 1;
        for (size_t i = 0; i < ns; i++) zero = zero && counts[i] == 0;
        printf("  %-15s %-6s %-34s vs attention, then rope%s: %s\n", "ds4_att_rope", "custom", shape,
               one ? " (one launch)" : "", same ? "bitwise" : "DIFFER");
        free(got);
        CHECK_MSG(same, "ds4_attention_rope %s%s: not bitwise the attention and the rope", shape,
                  one ? " (one launch)" : "");
        CHECK_MSG(zero, "ds4_attention_rope %s: counts left nonzero", shape);
    }
    free(want);
    free(counts);
    return 0;
}

static int test_cuda_ds4_attention(void)
{
    NEED_GPU();
    /* picks: 0 every valid entry, 1 an ascending random subset of at most
     * kpick (some rows shorter, -1 filled); ratio 0: no entries */
    struct { int T, H, hd, window, pos0, ratio, kpick, picks, sinks; } sh[] = {
        {1, 64, 512, 128, 700, 4, 64, 1, 1}, {5, 8, 128, 16, 40, 8, 0, 0, 1}, {3, 12, 96, 32, 0, 0, 0, 0, 0},
        {2, 9, 200, 8, 100, 4, 16, 1, 1},    {1, 16, 512, 128, 4095, 128, 0, 0, 1}, {4, 3, 64, 5, 2, 2, 0, 0, 1},
        {2, 8, 64, 128, 3000, 4, 0, 0, 1}, /* 878 keys: 14 splits */
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, hd = sh[ci].hd, win = sh[ci].window, pos0 = sh[ci].pos0;
        int ratio = sh[ci].ratio, kpick = sh[ci].picks ? sh[ci].kpick : 0;
        int kv_rows = win + T - 1, npos = pos0 + T, nent = ratio ? npos / ratio : 0;
        size_t QH = (size_t)H * hd;
        float *q = malloc(sizeof(float) * T * QH), *kv = malloc(sizeof(float) * kv_rows * hd);
        float *ent = malloc(sizeof(float) * (nent + 1) * hd), *sinks = malloc(sizeof(float) * H);
        float *ref = malloc(sizeof(float) * T * QH), *scores = malloc(sizeof(float) * (win + nent + kpick + 1));
        const float **keys = malloc(sizeof(float *) * (win + nent + kpick + 1));
        int32_t *picks = malloc(sizeof(int32_t) * (T * kpick + 1));
        CHECK(q && kv && ent && sinks && ref && scores && keys && picks);
        fill(q, (size_t)T * QH, -2, 2);
        fill(ent, (size_t)(nent + 1) * hd, -2, 2);
        fill(sinks, (size_t)H, -1, 3);
        for (int p = 0; p < npos; p++) fill(kv + (size_t)(p % kv_rows) * hd, (size_t)hd, -2, 2);
        for (int t = 0; t < T; t++) {
            int p = pos0 + t, nk = 0, lo = p - win + 1 > 0 ? p - win + 1 : 0;
            for (int j = lo; j <= p; j++) keys[nk++] = kv + (size_t)(j % kv_rows) * hd;
            int nvalid = ratio ? (p + 1) / ratio : 0;
            if (kpick) {
                int32_t *pr = picks + (size_t)t * kpick;
                int want = nvalid < kpick ? nvalid : kpick, m = 0;
                if (t % 2 && want > 2) want -= 2; /* a shorter row */
                /* an ascending random subset of [0, nvalid) of `want` */
                for (int w = 0; w < nvalid && m < want; w++)
                    if ((int)(next_u32() % (uint32_t)(nvalid - w)) < want - m) pr[m++] = w;
                for (int i = m; i < kpick; i++) pr[i] = -1;
                for (int i = 0; i < m; i++) keys[nk++] = ent + (size_t)pr[i] * hd;
            } else {
                for (int w = 0; w < nvalid; w++) keys[nk++] = ent + (size_t)w * hd;
            }
            ld_ref_ds4_attention(ref + (size_t)t * QH, q + (size_t)t * QH, H, hd, keys, nk,
                                 sh[ci].sinks ? sinks : NULL, 1.0f / sqrtf((float)hd), scores);
        }
        float *dq, *dkv, *dent, *dsinks, *dout;
        int32_t *dpicks;
        DPUT(dq, q, sizeof(float) * T * QH);
        DPUT(dkv, kv, sizeof(float) * kv_rows * hd);
        DPUT(dent, ent, sizeof(float) * (nent + 1) * hd);
        DPUT(dsinks, sinks, sizeof(float) * H);
        DPUT(dpicks, picks, sizeof(int32_t) * (T * kpick + 1));
        DPUT(dout, NULL, sizeof(float) * T * QH);
        char shape[80];
        snprintf(shape, sizeof shape, "T %d H %d hd %d win %d p0 %d r %d k %d%s", T, H, hd, win, pos0, ratio, kpick,
                 sh[ci].sinks ? " sink" : "");
        for (int v = 0; v < 2; v++) {
            size_t wn = ld_cu_ds4_attention_work(v, T, H, hd, pos0, win, ratio, kpick, ratio > 0);
            float *dwork;
            DPUT(dwork, NULL, sizeof(float) * (wn + 1));
            CU(ld_cu_memset0(dout, sizeof(float) * T * QH));
            CU(ld_cu_ds4_attention(v, dout, dq, T, H, hd, dkv, kv_rows, win, ratio ? dent : NULL, ratio,
                                   kpick ? dpicks : NULL, kpick, sh[ci].sinks ? dsinks : NULL,
                                   1.0f / sqrtf((float)hd), pos0, dwork, wn));
            if (compare("ds4_attention", v, shape, dout, ref, (size_t)T * QH, v ? 1e-10 : 1e-12)) return 1;
            if (v == LD_CU_CUSTOM && attention_rope_same(shape, dout, dq, T, H, hd, dkv, kv_rows, win,
                                                         ratio ? dent : NULL, ratio, kpick ? dpicks : NULL, kpick,
                                                         sh[ci].sinks ? dsinks : NULL, pos0, dwork, wn, (int)ci))
                return 1;
            /* the last row alone (T = 1 at its position): the batch's bits */
            float *rows = dget(dout, (size_t)T * QH), *alone;
            CHECK(rows);
            size_t w1 = ld_cu_ds4_attention_work(v, 1, H, hd, pos0 + T - 1, win, ratio, kpick, ratio > 0);
            CHECK(w1 <= wn);
            DPUT(alone, NULL, sizeof(float) * QH);
            CU(ld_cu_ds4_attention(v, alone, dq + (size_t)(T - 1) * QH, 1, H, hd, dkv, kv_rows, win,
                                   ratio ? dent : NULL, ratio, kpick ? dpicks + (size_t)(T - 1) * kpick : NULL, kpick,
                                   sh[ci].sinks ? dsinks : NULL, 1.0f / sqrtf((float)hd), pos0 + T - 1, dwork, w1));
            int bad = compare("ds4_att alone", v, shape, alone, rows + (size_t)(T - 1) * QH, QH, -1);
            free(rows);
            if (bad) return 1;
        }
        free(q);
        free(kv);
        free(ent);
        free(sinks);
        free(ref);
        free(scores);
        free(keys);
        free(picks);
        dfree_all();
    }
    return 0;
}

static int test_cuda_ds4_swiglu(void)
{
    NEED_GPU();
    /* fused: g and u the halves of one [T][2F] row (the float4 path);
     * else separate [T][F] arrays with F odd (the scalar path) */
    struct { int T, F, fused; } sh[] = {{3, 2048, 1}, {5, 1001, 0}, {1, 64, 1}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, F = sh[ci].F, fused = sh[ci].fused;
        size_t ld = fused ? 2 * (size_t)F : (size_t)F, n = (size_t)T * F;
        float *gu = malloc(sizeof(float) * T * ld * 2), *ref = malloc(sizeof(float) * n);
        CHECK(gu && ref);
        fill(gu, (size_t)T * ld * 2, -15, 15); /* beyond the limit 10 both ways */
        const float *g = gu, *u = fused ? gu + F : gu + (size_t)T * ld;
        for (int t = 0; t < T; t++)
            ld_ref_ds4_clamped_swiglu(ref + (size_t)t * F, g + (size_t)t * ld, u + (size_t)t * ld, 10.0f, (size_t)F);
        float *dgu, *dout, *rk = NULL;
        DPUT(dgu, gu, sizeof(float) * T * ld * 2);
        DPUT(dout, NULL, sizeof(float) * n);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d F %d %s", T, F, fused ? "fused" : "split");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * n));
            CU(ld_cu_ds4_clamped_swiglu(v, dout, dgu, fused ? dgu + F : dgu + (size_t)T * ld, T, F, ld, 10.0f));
            if (compare("clamped_swiglu", v, shape, dout, ref, n, 1e-12)) return 1;
            if (!v) CHECK(rk = dget(dout, n));
            else if (compare("swiglu cu=ref", v, shape, dout, rk, n, -1)) return 1;
        }
        free(rk);
        free(gu);
        free(ref);
        dfree_all();
    }
    return 0;
}

static int test_cuda_ds_rope(void)
{
    NEED_GPU();
    /* v4: heads of hd, the last dim rotated, interleaved (queries, the
     * output's inverse); v3.2: the indexer's key rows (one head at off 0),
     * both pair layouts */
    struct { int v4, T, H, hd, dim, interleave, pos0, inverse, bf16; } sh[] = {
        {1, 2, 64, 512, 64, 1, 1000, 0, 0}, {1, 3, 8, 128, 64, 1, 7, 1, 0},  {1, 2, 4, 512, 64, 1, 4095, 1, 1},
        {0, 5, 1, 128, 64, 0, 300, 0, 0},   {0, 4, 2, 192, 64, 1, 0, 0, 1},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, hd = sh[ci].hd, dim = sh[ci].dim, il = sh[ci].interleave;
        int pos0 = sh[ci].pos0, inv = sh[ci].inverse, bf = sh[ci].bf16;
        size_t rs = (size_t)H * hd + 3, n = (size_t)T * rs, off = sh[ci].v4 ? (size_t)(hd - dim) : 0;
        float *x = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n), freq[512];
        CHECK(x && ref);
        fill(x, n, -2, 2);
        for (int i = 0; i < dim / 2; i++) freq[i] = powf(10000.0f, -2.0f * (float)i / (float)dim);
        memcpy(ref, x, sizeof(float) * n);
        float af = 1.25f;
        for (int t = 0; t < T; t++) {
            if (sh[ci].v4) ld_ref_ds4_rope_ex(ref + (size_t)t * rs, H, hd, dim, freq, af, pos0 + t, inv, bf);
            else ld_ref_ds_rope_ex(ref, rs, off, H, (size_t)hd, dim, freq, af, il, pos0, bf, (size_t)t, (size_t)t + 1);
        }
        float *dx, *dfreq, *rk = NULL;
        DPUT(dx, NULL, sizeof(float) * n);
        DPUT(dfreq, freq, sizeof(float) * dim / 2);
        char shape[80];
        snprintf(shape, sizeof shape, "%s T %d H %d hd %d dim %d p0 %d%s%s", sh[ci].v4 ? "v4" : "v3.2", T, H, hd,
                 dim, pos0, inv ? " inv" : "", bf ? " bf16" : "");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_h2d(dx, x, sizeof(float) * n));
            CU(ld_cu_ds_rope(v, dx, T, rs, off, H, (size_t)hd, dim, dfreq, af, il, pos0, inv, bf));
            /* cosf / sinf ulps; with the bf16 table one may cross a bf16
             * rounding boundary (rare) */
            if (compare("rope", v, shape, dx, ref, n, bf ? 1e-5 : 1e-12)) return 1;
            if (!v) CHECK(rk = dget(dx, n));
            else if (compare("rope cu=ref", v, shape, dx, rk, n, -1)) return 1;
        }
        free(rk);
        free(x);
        free(ref);
        dfree_all();
    }
    return 0;
}

/* ld_cu_ds4_qkv (one launch) against the launches it replaces, custom:
 * the unit RMSNorm of q's heads (ld_cu_rmsnorm by ones), their RoPE
 * (ld_cu_ds_rope), kv's rows copied into the ring and rotated there:
 * q and the whole ring bitwise equal (the ring wrapping in the first
 * shape, the bf16 table in the third) */
static int test_cuda_ds4_qkv(void)
{
    NEED_GPU();
    struct { int T, H, hd, rd, rows, pos0, bf16; } sh[] = {
        {3, 4, 64, 16, 4, 2, 0}, {1, 2, 512, 64, 8, 7, 0}, {5, 3, 96, 32, 6, 40, 1}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, hd = sh[ci].hd, rd = sh[ci].rd, rows = sh[ci].rows, pos0 = sh[ci].pos0;
        int bf = sh[ci].bf16;
        size_t nq = (size_t)T * H * hd, nk = (size_t)T * hd, nr = (size_t)rows * hd;
        float *q = malloc(sizeof(float) * nq), *kv = malloc(sizeof(float) * nk), *ring = malloc(sizeof(float) * nr);
        float *ones = malloc(sizeof(float) * hd), freq[256];
        CHECK(q && kv && ring && ones);
        fill(q, nq, -2, 2);
        fill(kv, nk, -2, 2);
        fill(ring, nr, -1, 1);
        for (int i = 0; i < hd; i++) ones[i] = 1.0f;
        for (int i = 0; i < rd / 2; i++) freq[i] = powf(10000.0f, -2.0f * (float)i / (float)rd);
        float *dq, *dkv, *dring, *dq2, *dring2, *dones, *dfreq, *want_q, *want_ring;
        DPUT(dq, q, sizeof(float) * nq);
        DPUT(dq2, q, sizeof(float) * nq);
        DPUT(dkv, kv, sizeof(float) * nk);
        DPUT(dring, ring, sizeof(float) * nr);
        DPUT(dring2, ring, sizeof(float) * nr);
        DPUT(dones, ones, sizeof(float) * hd);
        DPUT(dfreq, freq, sizeof(float) * rd / 2);
        const float eps = 1e-6f, af = 1.0f;
        size_t off = (size_t)(hd - rd);
        CU(ld_cu_rmsnorm(LD_CU_CUSTOM, dq, dq, dones, LD_KDT_F32, hd, eps, T * H));
        CU(ld_cu_ds_rope(LD_CU_CUSTOM, dq, T, (size_t)H * hd, off, H, (size_t)hd, rd, dfreq, af, 1, pos0, 0, bf));
        for (int t = 0; t < T; t++) {
            float *row = dring + (size_t)((pos0 + t) % rows) * hd;
            CU(ld_cu_d2d(row, dkv + (size_t)t * hd, sizeof(float) * hd));
            CU(ld_cu_ds_rope(LD_CU_CUSTOM, row, 1, (size_t)hd, off, 1, (size_t)hd, rd, dfreq, af, 1, pos0 + t, 0, bf));
        }
        CHECK((want_q = dget(dq, nq)) && (want_ring = dget(dring, nr)));
        CU(ld_cu_ds4_qkv(dq2, dring2, dkv, T, H, hd, rows, pos0, eps, dfreq, af, rd, bf));
        char shape[80];
        snprintf(shape, sizeof shape, "T %d H %d hd %d rd %d ring %d p0 %d%s", T, H, hd, rd, rows, pos0,
                 bf ? " bf16" : "");
        if (compare("ds4_qkv q", LD_CU_CUSTOM, shape, dq2, want_q, nq, -1)) return 1;
        if (compare("ds4_qkv ring", LD_CU_CUSTOM, shape, dring2, want_ring, nr, -1)) return 1;
        free(want_q);
        free(want_ring);
        free(q);
        free(kv);
        free(ring);
        free(ones);
        dfree_all();
    }
    CHECK(ld_cu_ds4_qkv(NULL, NULL, NULL, 2, 1, 64, 1, 0, 1e-6f, NULL, 1.0f, 16, 0) != 0); /* ring < T */
    CHECK(ld_cu_ds4_qkv(NULL, NULL, NULL, 1, 1, 64, 1, 0, 1e-6f, NULL, 1.0f, 15, 0) != 0); /* odd rd */
    return 0;
}

/* ld_cu_ds4_hc_head_norm against the custom ld_cu_ds4_hc_head and
 * ld_cu_rmsnorm it replaces, with an F32, an F16 and a BF16 norm weight:
 * the collapse and the normed rows bitwise */
static int hc_head_norm_same(const char *shape, const float *dX, int T, int N, int D, const float *dfn,
                             const float *dbase, float scale, float neps, float heps)
{
    float *dout[2], *dn[2];
    const void *dwt[3]; /* by ld_kdt: F32, F16, BF16 */
    if (norm_weights(D, dwt)) return 1;
    for (int dt = LD_KDT_F32; dt <= LD_KDT_BF16; dt++) {
        for (int i = 0; i < 2; i++) {
            DPUT(dout[i], NULL, sizeof(float) * T * D);
            DPUT(dn[i], NULL, sizeof(float) * T * D);
        }
        CU(ld_cu_ds4_hc_head(LD_CU_CUSTOM, dout[0], dX, T, N, D, dfn, dbase, scale, neps, heps, NULL, 0));
        CU(ld_cu_rmsnorm(LD_CU_CUSTOM, dn[0], dout[0], dwt[dt], (ld_kdt)dt, D, 1e-5f, T));
        CU(ld_cu_ds4_hc_head_norm(dout[1], dX, T, N, D, dfn, dbase, scale, neps, heps, dwt[dt], dt, 1e-5f, dn[1]));
        float *want[2] = {dget(dout[0], (size_t)T * D), dget(dn[0], (size_t)T * D)};
        CHECK(want[0] && want[1]);
        char sh[96];
        snprintf(sh, sizeof sh, "%s, %s norm", shape, dt == LD_KDT_F32 ? "f32" : dt == LD_KDT_F16 ? "f16" : "bf16");
        int bad = compare("hc_head_norm head", LD_CU_CUSTOM, sh, dout[1], want[0], (size_t)T * D, -1) ||
                  compare("hc_head_norm norm", LD_CU_CUSTOM, sh, dn[1], want[1], (size_t)T * D, -1);
        free(want[0]);
        free(want[1]);
        if (bad) return 1;
    }
    return 0;
}

static int test_cuda_ds4_hc_head(void)
{
    NEED_GPU();
    struct { int T, N, D; } sh[] = {{3, 4, 64}, {2, 4, 4096}, {5, 8, 96}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, N = sh[ci].N, D = sh[ci].D, ND = N * D;
        float *X = malloc(sizeof(float) * T * ND), *fn = malloc(sizeof(float) * N * ND);
        float *base = malloc(sizeof(float) * N), *ref = malloc(sizeof(float) * T * D);
        float *scratch = malloc(sizeof(float) * (ND + N));
        CHECK(X && fn && base && ref && scratch);
        fill(X, (size_t)T * ND, -2, 2);
        fill(fn, (size_t)N * ND, -0.05f, 0.05f);
        fill(base, (size_t)N, -1, 1);
        const float scale = 1.5f, neps = 1e-6f, heps = 1e-6f;
        for (int t = 0; t < T; t++)
            ld_ref_ds4_hc_head(ref + (size_t)t * D, X + (size_t)t * ND, N, D, fn, base, scale, neps, heps, scratch);
        float *dX, *dfn, *dbase, *dout, *dwork;
        size_t wn = ld_cu_hc_head_work(T, N);
        DPUT(dX, X, sizeof(float) * T * ND);
        DPUT(dfn, fn, sizeof(float) * N * ND);
        DPUT(dbase, base, sizeof(float) * N);
        DPUT(dout, NULL, sizeof(float) * T * D);
        DPUT(dwork, NULL, sizeof(float) * wn);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d N %d D %d", T, N, D);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * T * D));
            CU(ld_cu_ds4_hc_head(v, dout, dX, T, N, D, dfn, dbase, scale, neps, heps, dwork, wn));
            if (compare("hc_head", v, shape, dout, ref, (size_t)T * D, v ? 1e-10 : 1e-12)) return 1;
        }
        if (hc_head_norm_same(shape, dX, T, N, D, dfn, dbase, scale, neps, heps)) return 1;
        free(X);
        free(fn);
        free(base);
        free(ref);
        free(scratch);
        dfree_all();
    }
    return 0;
}

static int test_cuda_ds4_fp4(void)
{
    NEED_GPU();
    /* scale blocks (N/sr) x (K/sc); e8m0: UE8M0 bytes, else fp32 */
    struct { int T, K, N, sr, sc, e8m0; } sh[] = {
        {1, 256, 64, 64, 8, 1}, {5, 512, 96, 3, 4, 0}, {9, 200, 33, 1, 5, 1}, {3, 4096, 70, 70, 128, 1},
        {12, 1024, 40, 5, 8, 0},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, K = sh[ci].K, N = sh[ci].N, sr = sh[ci].sr, sc = sh[ci].sc, e8 = sh[ci].e8m0;
        size_t nq = (size_t)N * K / 2, ns = (size_t)sr * sc;
        uint8_t *q = malloc(nq), *s8 = malloc(ns);
        float *sf = malloc(sizeof(float) * ns), *x = malloc(sizeof(float) * T * K);
        float *w = malloc(sizeof(float) * N * K), *ref = malloc(sizeof(float) * T * N);
        CHECK(q && s8 && sf && x && w && ref);
        for (size_t i = 0; i < nq; i++) q[i] = (uint8_t)next_u32();
        for (size_t i = 0; i < ns; i++) {
            s8[i] = (uint8_t)(120 + next_u32() % 12); /* 2^-7 .. 2^4 */
            sf[i] = e8 ? ld_ref_ds4_e8m0_to_f32(s8[i]) : frand(0.001f, 0.1f);
        }
        fill(x, (size_t)T * K, -1, 1);
        ld_ref_ds4_dequant(w, q, 1, sf, (size_t)N, (size_t)K, (size_t)sr, (size_t)sc, 0, (size_t)N);
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) {
                float acc = 0.0f;
                for (int k = 0; k < K; k++) acc += x[(size_t)t * K + k] * w[(size_t)n * K + k];
                ref[(size_t)t * N + n] = acc;
            }
        uint8_t *dq;
        void *dsc;
        float *dx, *dout;
        DPUT(dq, q, nq);
        if (e8) DPUT(dsc, s8, ns);
        else DPUT(dsc, sf, sizeof(float) * ns);
        DPUT(dx, x, sizeof(float) * T * K);
        DPUT(dout, NULL, sizeof(float) * T * N);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d %dx%d blk %dx%d %s", T, N, K, N / sr, K / sc, e8 ? "ue8m0" : "f32");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * T * N));
            CU(ld_cu_ds4_fp4_matmul(v, dout, dx, dq, dsc, e8, T, K, N, sr, sc));
            if (compare("fp4_matmul", v, shape, dout, ref, (size_t)T * N, v ? 1e-10 : -1)) return 1;
            /* the last row alone: the batch's bits */
            float *rows = dget(dout, (size_t)T * N), *alone;
            CHECK(rows);
            DPUT(alone, NULL, sizeof(float) * N);
            CU(ld_cu_ds4_fp4_matmul(v, alone, dx + (size_t)(T - 1) * K, dq, dsc, e8, 1, K, N, sr, sc));
            int bad = compare("fp4 alone", v, shape, alone, rows + (size_t)(T - 1) * N, (size_t)N, -1);
            free(rows);
            if (bad) return 1;
        }
        free(q);
        free(s8);
        free(sf);
        free(x);
        free(w);
        free(ref);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- grouped GEMMs */

/* the rows of G groups: their sum and the most of one */
static void row_counts(const int *rows, int G, int *R, int *most)
{
    *R = *most = 0;
    for (int g = 0; g < G; g++) {
        *R += rows[g];
        if (rows[g] > *most) *most = rows[g];
    }
}

/* a random weight [N][K] on the device: FP8 (scale blocks br x bc) or FP4
 * (fp32 scales, blocks dividing), codes *dq, scales *ds */
static int rand_weight(int fp4, int K, int N, int br, int bc, uint8_t **dq, float **ds)
{
    size_t nq = fp4 ? (size_t)N * K / 2 : (size_t)N * K;
    size_t ns = fp4 ? (size_t)(N / br) * (K / bc) : (size_t)((N + br - 1) / br) * ((K + bc - 1) / bc);
    uint8_t *q = malloc(nq);
    float *s = malloc(sizeof(float) * ns);
    CHECK(q && s);
    for (size_t i = 0; i < nq; i++) q[i] = fp4 ? (uint8_t)next_u32() : rand_e4m3();
    for (size_t i = 0; i < ns; i++) s[i] = frand(0.001f, 0.1f);
    DPUT(*dq, q, nq);
    DPUT(*ds, s, sizeof(float) * ns);
    free(q);
    free(s);
    return 0;
}

/* R random rows of K floats on the device (one float more: a kernel that
 * reads past them shows under the sanitizers, not as a crash) */
static int rand_rows(int R, int K, float **dx)
{
    float *x = malloc(sizeof(float) * ((size_t)R * K + 1));
    CHECK(x);
    fill(x, (size_t)R * K, -1, 1);
    DPUT(*dx, x, sizeof(float) * ((size_t)R * K + 1));
    free(x);
    return 0;
}

/* the R rows [K] of dx scattered over 2 R + 1 rows of *dtok (row i of dx at
 * row (*dperm)[i], a made-up order, the others NaN), as tokens' rows that
 * a group reads through xrows */
static int pick_rows(const float *dx, int R, int K, float **dtok, int32_t **dperm)
{
    size_t nt = 2 * (size_t)R + 1;
    float *x = dget(dx, (size_t)R * K), *tok = malloc(sizeof(float) * nt * K);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)(R + 1));
    CHECK(x && tok && perm);
    for (size_t i = 0; i < nt * K; i++) tok[i] = NAN;
    for (int i = 0; i < R; i++) {
        perm[i] = (int32_t)((2 * (size_t)(R - 1 - i) + (size_t)(i % 2)) % nt);
        memcpy(tok + (size_t)perm[i] * K, x + (size_t)i * K, sizeof(float) * K);
    }
    DPUT(*dtok, tok, sizeof(float) * nt * K);
    DPUT(*dperm, perm, sizeof(int32_t) * (size_t)(R + 1));
    free(x);
    free(tok);
    free(perm);
    return 0;
}

/* one grouped case: G groups of `rows[g]` rows, each its own random
 * weight [N][K] (FP8: blocks br x bc; FP4: fp32 scales, blocks br x bc
 * dividing), through the grouped launcher, each group's rows bitwise what
 * the per-weight custom launcher gives for them alone; a group of 0 rows
 * writes nothing (its neighbours' rows are checked, the buffer's tail
 * stays zero) */
static int grouped_case(int fp4, const int *rows, int G, int K, int N, int br, int bc, int pick)
{
    int R, most;
    row_counts(rows, G, &R, &most);
    ld_cu_mm_group tab[8];
    CHECK(G <= 8);
    float *dx, *dout, *dalone, *dtok = NULL;
    int32_t *dperm = NULL;
    if (rand_rows(R, K, &dx)) return 1;
    if (pick && pick_rows(dx, R, K, &dtok, &dperm)) return 1;
    DPUT(dout, NULL, sizeof(float) * ((size_t)R * N + 64)); /* a zero tail: nothing may land there */
    DPUT(dalone, NULL, sizeof(float) * ((size_t)R * N + 1));
    int r0 = 0;
    for (int g = 0; g < G; g++) { /* each group its own weight */
        uint8_t *dq;
        float *ds;
        if (rand_weight(fp4, K, N, br, bc, &dq, &ds)) return 1;
        tab[g] = (ld_cu_mm_group){dq, ds, dx + (size_t)r0 * K, dout + (size_t)r0 * N, rows[g], 0, 0, 0, NULL};
        float *a = dalone + (size_t)r0 * N;
        if (pick) tab[g].x = dtok, tab[g].xrows = dperm + r0; /* the same rows, read where they lie */
        if (rows[g])
            CU(fp4 ? ld_cu_ds4_fp4_matmul(LD_CU_CUSTOM, a, dx + (size_t)r0 * K, dq, ds, 0, rows[g], K, N, N / br,
                                          K / bc)
                   : ld_cu_fp8_matmul(LD_CU_CUSTOM, a, dx + (size_t)r0 * K, dq, ds, rows[g], K, N, br, bc));
        r0 += rows[g];
    }
    ld_cu_mm_group *dtab;
    DPUT(dtab, tab, sizeof tab[0] * (size_t)G);
    CU(fp4 ? ld_cu_grouped_fp4_matmul(dtab, G, most, K, N, br, bc)
           : ld_cu_grouped_fp8_matmul(dtab, G, most, K, N, br, bc));
    float *alone = dget(dalone, (size_t)R * N), *got = dget(dout, (size_t)R * N + 64);
    CHECK(alone && got);
    char shape[80];
    snprintf(shape, sizeof shape, "%d groups, %d rows%s, %dx%d blk %dx%d", G, R, pick ? " picked" : "", N, K, br, bc);
    double mx, e = nmse(got, alone, (size_t)R * N, &mx);
    int same = !memcmp(got, alone, sizeof(float) * (size_t)R * N), tail = 1;
    for (int i = 0; i < 64; i++) tail = tail && got[(size_t)R * N + i] == 0.0f;
    printf("  %-15s %-6s %-34s nmse %-9.3g vs one launch a group: %s%s\n", fp4 ? "grouped_fp4" : "grouped_fp8",
           "custom", shape, e, same ? "bitwise" : "DIFFER", tail ? "" : ", wrote past its rows");
    free(alone);
    free(got);
    dfree_all();
    CHECK_MSG(same, "grouped %s %s: not bitwise the per-group launches", fp4 ? "fp4" : "fp8", shape);
    CHECK_MSG(tail, "grouped %s %s: wrote past the last group's rows", fp4 ? "fp4" : "fp8", shape);
    return 0;
}

/* the gate/up pairs with the activation in one launch (ld_cu_grouped_*_glu)
 * against the grouped launch of the 2 G groups and the custom clamped
 * SwiGLU over their rows: the gates' rows bitwise; the ups' rows
 * untouched */
static int glu_case(int fp4, const int *rows, int G, int K, int N, int br, int bc, float limit)
{
    int R, most;
    row_counts(rows, G, &R, &most);
    ld_cu_mm_group tab[2][16];
    CHECK(G <= 8);
    float *dx, *dg[2], *du[2];
    if (rand_rows(R, K, &dx)) return 1;
    for (int i = 0; i < 2; i++) {
        DPUT(dg[i], NULL, sizeof(float) * ((size_t)R * N + 1));
        DPUT(du[i], NULL, sizeof(float) * ((size_t)R * N + 1));
    }
    for (int j = 0; j < 2 * G; j++) { /* gates, then ups: each its own weight */
        int g = j % G, r0 = 0;
        for (int i = 0; i < g; i++) r0 += rows[i];
        uint8_t *dq;
        float *ds;
        if (rand_weight(fp4, K, N, br, bc, &dq, &ds)) return 1;
        for (int i = 0; i < 2; i++) {
            float *out = (j < G ? dg[i] : du[i]) + (size_t)r0 * N;
            tab[i][j] = (ld_cu_mm_group){dq, ds, dx + (size_t)r0 * K, out, rows[g], 0, 0, 0, NULL};
        }
    }
    ld_cu_mm_group *dt[2];
    for (int i = 0; i < 2; i++) DPUT(dt[i], tab[i], sizeof tab[i][0] * (size_t)(2 * G));
    CU(fp4 ? ld_cu_grouped_fp4_matmul(dt[0], 2 * G, most, K, N, br, bc)
           : ld_cu_grouped_fp8_matmul(dt[0], 2 * G, most, K, N, br, bc));
    CU(ld_cu_ds4_clamped_swiglu(LD_CU_CUSTOM, dg[0], dg[0], du[0], R, N, (size_t)N, limit));
    CU(fp4 ? ld_cu_grouped_fp4_glu(dt[1], G, most, K, N, br, bc, limit)
           : ld_cu_grouped_fp8_glu(dt[1], G, most, K, N, br, bc, limit));
    float *want = dget(dg[0], (size_t)R * N), *got = dget(dg[1], (size_t)R * N), *ups = dget(du[1], (size_t)R * N);
    CHECK(want && got && ups);
    int same = !memcmp(got, want, sizeof(float) * (size_t)R * N), untouched = 1, clamped = 0;
    for (size_t i = 0; i < (size_t)R * N; i++) untouched = untouched && ups[i] == 0.0f;
    float *g0 = dget(du[0], (size_t)R * N); /* the ups' values: how many the limit clamps */
    CHECK(g0);
    for (size_t i = 0; i < (size_t)R * N; i++) clamped += fabsf(g0[i]) > limit;
    char shape[80];
    snprintf(shape, sizeof shape, "%d pairs, %d rows, %dx%d blk %dx%d", G, R, N, K, br, bc);
    printf("  %-15s %-6s %-34s limit %g (%d ups clamped): vs gate+up, then swiglu: %s\n",
           fp4 ? "grouped_fp4_glu" : "grouped_fp8_glu", "custom", shape, limit, clamped,
           same ? "bitwise" : "DIFFER");
    free(want);
    free(got);
    free(ups);
    free(g0);
    dfree_all();
    CHECK_MSG(same, "grouped glu %s %s: not bitwise the grouped launch and the activation", fp4 ? "fp4" : "fp8", shape);
    CHECK_MSG(untouched, "grouped glu %s %s: wrote the ups' rows", fp4 ? "fp4" : "fp8", shape);
    return 0;
}

/* G outputs [T][n[g]] on the device against the per-weight ones: *same
 * when all are bitwise equal, *tail when the 64 floats after each (zeroed)
 * are still zero */
static int fan_compare(float *const *dout, float *const *dalone, int T, const int *n, int G, int *same, int *tail)
{
    *same = *tail = 1;
    for (int g = 0; g < G; g++) {
        size_t m = (size_t)T * n[g];
        float *alone = dget(dalone[g], m), *got = dget(dout[g], m + 64);
        CHECK(alone && got);
        *same = *same && !memcmp(got, alone, sizeof(float) * m);
        for (int i = 0; i < 64; i++) *tail = *tail && got[m + i] == 0.0f;
        free(alone);
        free(got);
    }
    return 0;
}

/* projections that share an input in one grouped launch: G weights of
 * their own widths n[g] over the same T rows of x (V4's wq_a and wkv),
 * each group's own output [T][n[g]] bitwise the per-weight custom
 * launcher's; nothing written past a group's columns */
static int fanout_case(int fp4, int T, int K, const int *n, int G, int br, int bc)
{
    ld_cu_mm_group tab[4];
    CHECK(G <= 4);
    float *dx, *dout[4], *dalone[4];
    int N = 0;
    if (rand_rows(T, K, &dx)) return 1;
    for (int g = 0; g < G; g++) {
        uint8_t *dq;
        float *ds;
        N = n[g] > N ? n[g] : N;
        if (rand_weight(fp4, K, n[g], br, bc, &dq, &ds)) return 1;
        DPUT(dout[g], NULL, sizeof(float) * ((size_t)T * n[g] + 64)); /* a zero tail */
        DPUT(dalone[g], NULL, sizeof(float) * (size_t)T * n[g]);
        tab[g] = (ld_cu_mm_group){dq, ds, dx, dout[g], T, n[g], 0, 0, NULL};
        CU(fp4 ? ld_cu_ds4_fp4_matmul(LD_CU_CUSTOM, dalone[g], dx, dq, ds, 0, T, K, n[g], n[g] / br, K / bc)
               : ld_cu_fp8_matmul(LD_CU_CUSTOM, dalone[g], dx, dq, ds, T, K, n[g], br, bc));
    }
    ld_cu_mm_group *dtab;
    DPUT(dtab, tab, sizeof tab[0] * (size_t)G);
    CU(fp4 ? ld_cu_grouped_fp4_matmul(dtab, G, T, K, N, br, bc) : ld_cu_grouped_fp8_matmul(dtab, G, T, K, N, br, bc));
    int same, tail;
    if (fan_compare(dout, dalone, T, n, G, &same, &tail)) return 1;
    char shape[80];
    snprintf(shape, sizeof shape, "%d rows of %d, widths %d..%d (%d)", T, K, n[0], n[G - 1], G);
    printf("  %-15s %-6s %-34s vs one launch a weight: %s%s\n", fp4 ? "fanout_fp4" : "fanout_fp8", "custom", shape,
           same ? "bitwise" : "DIFFER", tail ? "" : ", wrote past its columns");
    dfree_all();
    CHECK_MSG(same, "fanout %s %s: not bitwise the per-weight launches", fp4 ? "fp4" : "fp8", shape);
    CHECK_MSG(tail, "fanout %s %s: wrote past a group's columns", fp4 ? "fp4" : "fp8", shape);
    return 0;
}

/* ld_cu_fp8_matmul_post against the two launches it stands for: the
 * custom FP8 matmul into f, the custom hc_post from it; the new streams
 * bitwise, nothing written past them */
static int matmul_post_case(int T, int K, int D, int br, int bc, int N)
{
    size_t nd = (size_t)T * D, nn = (size_t)T * N * D;
    uint8_t *dq;
    float *ds, *dx, *dX, *dpost, *dcomb, *df, *dwant, *dgot;
    if (rand_weight(0, K, D, br, bc, &dq, &ds) || rand_rows(T, K, &dx) || rand_rows(T * N, D, &dX) ||
        rand_rows(T, N, &dpost) || rand_rows(T * N, N, &dcomb))
        return 1;
    DPUT(df, NULL, sizeof(float) * nd);
    DPUT(dwant, NULL, sizeof(float) * nn);
    DPUT(dgot, NULL, sizeof(float) * (nn + 64)); /* a zero tail */
    CU(ld_cu_fp8_matmul(LD_CU_CUSTOM, df, dx, dq, ds, T, K, D, br, bc));
    CU(ld_cu_hc_post(LD_CU_CUSTOM, dwant, dX, df, dpost, dcomb, T, N, D));
    ld_cu_post p = {dgot, dX, dpost, dcomb, N};
    CU(ld_cu_fp8_matmul_post(dx, dq, ds, T, K, D, br, bc, p));
    float *want = dget(dwant, nn), *got = dget(dgot, nn + 64);
    CHECK(want && got);
    int same = !memcmp(want, got, sizeof(float) * nn), tail = 1;
    for (int i = 0; i < 64; i++) tail = tail && got[nn + (size_t)i] == 0.0f;
    char shape[80];
    snprintf(shape, sizeof shape, "T %d %dx%d blk %dx%d, %d streams", T, D, K, br, bc, N);
    printf("  %-15s %-6s %-40s vs matmul, hc_post: %s%s\n", "fp8_mm_post", "custom", shape,
           same ? "bitwise" : "DIFFER", tail ? "" : ", wrote past the streams");
    free(want);
    free(got);
    dfree_all();
    CHECK_MSG(same, "fp8_matmul_post %s: not bitwise the launches it replaces", shape);
    CHECK_MSG(tail, "fp8_matmul_post %s: wrote past the streams", shape);
    return 0;
}

/* a random plain-type weight [N][K] on the device: F32 in [-1, 1], BF16
 * the top halves of such floats, F16 of exponents 8..20 (no specials) */
static int rand_plain(ld_kdt dt, int N, int K, void **dw)
{
    size_t n = (size_t)N * K, es = dt == LD_KDT_F32 ? 4 : 2;
    float *f = malloc(sizeof(float) * n);
    uint16_t *h = malloc(2 * n);
    CHECK(f && h);
    fill(f, n, -1, 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        uint32_t r = next_u32();
        h[i] = dt == LD_KDT_BF16 ? (uint16_t)(u >> 16) : (uint16_t)((r & 0x83ffu) | ((8u + r % 13u) << 10));
    }
    DPUT(*dw, dt == LD_KDT_F32 ? (void *)f : (void *)h, es * n);
    free(f);
    free(h);
    return 0;
}

/* ld_cu_matmul_fanout against ld_cu_matmul (custom) a weight: G weights of
 * their own widths n[g] over the same T rows, each output bitwise, nothing
 * written past it */
static int plain_fan_case(ld_kdt dt, int T, int K, const int *n, int G)
{
    ld_cu_fan fan[4];
    float *dx, *dalone[4];
    CHECK(G <= 4);
    if (rand_rows(T, K, &dx)) return 1;
    for (int g = 0; g < G; g++) {
        void *dw;
        if (rand_plain(dt, n[g], K, &dw)) return 1;
        DPUT(fan[g].out, NULL, sizeof(float) * ((size_t)T * n[g] + 64)); /* a zero tail */
        DPUT(dalone[g], NULL, sizeof(float) * (size_t)T * n[g]);
        fan[g].w = dw;
        fan[g].n = n[g];
        CU(ld_cu_matmul(LD_CU_CUSTOM, dalone[g], dx, dw, dt, NULL, LD_KDT_F32, T, K, n[g], 0));
    }
    CU(ld_cu_matmul_fanout(fan, G, dx, dt, T, K));
    float *dout[4];
    for (int g = 0; g < G; g++) dout[g] = fan[g].out;
    int same, tail;
    if (fan_compare(dout, dalone, T, n, G, &same, &tail)) return 1;
    char shape[80];
    snprintf(shape, sizeof shape, "%s, %d rows of %d, widths %d..%d (%d)",
             dt == LD_KDT_F32 ? "f32" : dt == LD_KDT_BF16 ? "bf16" : "f16", T, K, n[0], n[G - 1], G);
    printf("  %-15s %-6s %-40s vs one launch a weight: %s%s\n", "matmul_fanout", "custom", shape,
           same ? "bitwise" : "DIFFER", tail ? "" : ", wrote past its columns");
    dfree_all();
    CHECK_MSG(same, "matmul_fanout %s: not bitwise the per-weight launches", shape);
    CHECK_MSG(tail, "matmul_fanout %s: wrote past a weight's columns", shape);
    return 0;
}

/* V4's compressors' kv and gate and the indexer's weights in small: the
 * 16-byte path (K = 64), the element path (K = 37), two token tiles */
static int test_cuda_matmul_fanout(void)
{
    NEED_GPU();
    const int comp[4] = {64, 64, 32, 32}, odd[3] = {8, 40, 3};
    const ld_kdt dts[3] = {LD_KDT_F32, LD_KDT_BF16, LD_KDT_F16};
    for (int i = 0; i < 3; i++)
        if (plain_fan_case(dts[i], 1, 64, comp, 4) || plain_fan_case(dts[i], 9, 37, odd, 3) ||
            plain_fan_case(dts[i], 3, 64, odd, 3))
            return 1;
    return 0;
}

/* two device arrays of n floats bitwise equal */
static int dev_same(const float *a, const float *b, size_t n)
{
    float *x = dget(a, n), *y = dget(b, n);
    CHECK(x && y);
    int same = !memcmp(x, y, sizeof(float) * n);
    free(x);
    free(y);
    return same;
}

/* the MoE's mixed launches against the launches they stand for, G routed
 * experts (FP4 or FP8, rows[g] each, a made-up plan over T tokens of K
 * choices) and the shared one (FP8, T rows): ld_cu_grouped_glu2 against
 * the grouped GLU of each part, ld_cu_moe_down_post against the grouped
 * downs, then the shared down, the combine and hc_post (the routed
 * outputs and the streams bitwise) */
static int moe_mixed_case(int fp4, int T, int K, const int *rows, int G, int D, int I, int Is)
{
    int R = 0, rbr = fp4 ? 1 : 16, rbc = fp4 ? 32 : 32;
    for (int g = 0; g < G; g++) R += rows[g];
    CHECK(R == T * K && G <= 8);
    float *dx, *dg[2], *du, *dsg[2], *dsu, *deo[2], *dw, *dX, *dpost, *dcomb, *dout[2];
    int32_t *row_of = malloc(sizeof(int32_t) * R), *tok = malloc(sizeof(int32_t) * R), *drow_of, *dtok;
    CHECK(row_of && tok);
    for (int i = 0; i < R; i++) {
        row_of[i] = (int32_t)((i * 5 + 1) % R); /* a permutation: 5 and R coprime */
        tok[i] = (int32_t)((i * 3) % T);        /* routed row i's token (the plan's rows) */
    }
    if (rand_rows(T, D, &dx) || rand_rows(R, 1, &dw) || rand_rows(T * 4, D, &dX) || rand_rows(T, 4, &dpost) ||
        rand_rows(T * 4, 4, &dcomb))
        return 1;
    DPUT(drow_of, row_of, sizeof(int32_t) * R);
    DPUT(dtok, tok, sizeof(int32_t) * R);
    for (int i = 0; i < 2; i++) {
        DPUT(dg[i], NULL, sizeof(float) * (size_t)R * I);
        DPUT(dsg[i], NULL, sizeof(float) * (size_t)T * Is);
        DPUT(deo[i], NULL, sizeof(float) * (size_t)R * D);
        DPUT(dout[i], NULL, sizeof(float) * (size_t)T * 4 * D);
    }
    DPUT(du, NULL, sizeof(float) * (size_t)R * I);
    DPUT(dsu, NULL, sizeof(float) * (size_t)T * Is);
    ld_cu_mm_group rt[2][24], st[2][2]; /* [copy][gates, ups, downs] */
    int r0 = 0;
    for (int g = 0; g < G; g++) {
        uint8_t *q[3];
        float *s[3];
        if (rand_weight(fp4, D, I, rbr, rbc, &q[0], &s[0]) || rand_weight(fp4, D, I, rbr, rbc, &q[1], &s[1]) ||
            rand_weight(fp4, I, D, rbr, rbc, &q[2], &s[2]))
            return 1;
        for (int c = 0; c < 2; c++) {
            rt[c][g] = (ld_cu_mm_group){q[0], s[0], dx, dg[c] + (size_t)r0 * I, rows[g], 0, 0, 0, dtok + r0};
            rt[c][G + g] = (ld_cu_mm_group){q[1], s[1], dx, du + (size_t)r0 * I, rows[g], 0, 0, 0, dtok + r0};
            rt[c][2 * G + g] = (ld_cu_mm_group){q[2], s[2], dg[c] + (size_t)r0 * I, deo[c] + (size_t)r0 * D,
                                                rows[g], 0, 0, 0, NULL};
        }
        r0 += rows[g];
    }
    uint8_t *sq[3];
    float *ss[3];
    if (rand_weight(0, D, Is, 16, 32, &sq[0], &ss[0]) || rand_weight(0, D, Is, 16, 32, &sq[1], &ss[1]) ||
        rand_weight(0, Is, D, 16, 32, &sq[2], &ss[2]))
        return 1;
    for (int c = 0; c < 2; c++) {
        st[c][0] = (ld_cu_mm_group){sq[0], ss[0], dx, dsg[c], T, 0, 0, 0, NULL};
        st[c][1] = (ld_cu_mm_group){sq[1], ss[1], dx, dsu, T, 0, 0, 0, NULL};
    }
    ld_cu_mm_group *drt[2], *dst[2];
    for (int c = 0; c < 2; c++) {
        DPUT(drt[c], rt[c], sizeof rt[c][0] * (size_t)(3 * G));
        DPUT(dst[c], st[c], sizeof st[c][0] * 2);
    }
    /* the launches replaced: each part's GLU, the downs, the shared down's post */
    CU(fp4 ? ld_cu_grouped_fp4_glu(drt[0], G, T, D, I, rbr, rbc, 0.75f)
           : ld_cu_grouped_fp8_glu(drt[0], G, T, D, I, rbr, rbc, 0.75f));
    CU(ld_cu_grouped_fp8_glu(dst[0], 1, T, D, Is, 16, 32, 0.75f));
    CU(fp4 ? ld_cu_grouped_fp4_matmul(drt[0] + 2 * G, G, T, I, D, rbr, rbc)
           : ld_cu_grouped_fp8_matmul(drt[0] + 2 * G, G, T, I, D, rbr, rbc));
    float *des, *dy; /* the shared output, the MoE's */
    DPUT(des, NULL, sizeof(float) * (size_t)T * D);
    DPUT(dy, NULL, sizeof(float) * (size_t)T * D);
    CU(ld_cu_fp8_matmul(LD_CU_CUSTOM, des, dsg[0], sq[2], ss[2], T, Is, D, 16, 32));
    CU(ld_cu_moe_combine_ex(LD_CU_CUSTOM, dy, deo[0], drow_of, dw, T, K, D, 1, des));
    CU(ld_cu_hc_post(LD_CU_CUSTOM, dout[0], dX, dy, dpost, dcomb, T, 4, D));
    ld_cu_combine cmb = {deo[1], drow_of, dw, K};
    ld_cu_post pp = {dout[1], dX, dpost, dcomb, 4};
    /* the mixed ones */
    ld_cu_moe_part a = {drt[1], G, fp4, I, rbr, rbc}, b = {dst[1], 1, 0, Is, 16, 32};
    CU(ld_cu_grouped_glu2(a, b, T, D, 0.75f));
    ld_cu_moe_part r = {drt[1] + 2 * G, G, fp4, D, rbr, rbc};
    CU(ld_cu_moe_down_post(r, I, dsg[1], sq[2], ss[2], T, Is, 16, 32, cmb, pp));
    int same = dev_same(dg[0], dg[1], (size_t)R * I) && dev_same(dsg[0], dsg[1], (size_t)T * Is) &&
               dev_same(deo[0], deo[1], (size_t)R * D) && dev_same(dout[0], dout[1], (size_t)T * 4 * D);
    char shape[80];
    snprintf(shape, sizeof shape, "%s T %d K %d, %d experts, D %d I %d Is %d", fp4 ? "fp4" : "fp8", T, K, G, D, I,
             Is);
    printf("  %-15s %-6s %-44s vs the grouped launches: %s\n", "moe_mixed", "custom", shape,
           same ? "bitwise" : "DIFFER");
    free(row_of);
    free(tok);
    dfree_all();
    CHECK_MSG(same, "moe mixed %s: not bitwise the launches it replaces", shape);
    return 0;
}

static int test_cuda_moe_mixed(void)
{
    NEED_GPU();
    const int one[6] = {1, 1, 1, 1, 1, 1}, three[5] = {3, 1, 2, 4, 2};
    for (int fp4 = 0; fp4 < 2; fp4++)
        if (moe_mixed_case(fp4, 1, 6, one, 6, 128, 64, 64) || moe_mixed_case(fp4, 4, 3, three, 5, 96, 64, 32))
            return 1;
    return 0;
}

/* ld_cu_grouped_fp8_matmul_norm against the grouped launch, then the
 * custom ld_cu_rmsnorm of each normed group's rows in place: widths n[g],
 * group 1 without a norm, the others by an F32, BF16 or F16 weight
 * (dt = g % 3); T rows (9: two row tiles); the counts left zero */
static int fanout_norm_case(int T, int K, const int *n, int G)
{
    ld_cu_mm_group tab[2][4];
    ld_cu_norm_w nw[4];
    float *dx, *dout[2][4];
    int N = 0;
    CHECK(G <= 4);
    if (rand_rows(T, K, &dx)) return 1;
    for (int g = 0; g < G; g++) {
        uint8_t *dq;
        float *ds;
        void *dw = NULL;
        ld_kdt dt = (ld_kdt)(LD_KDT_F32 + g % 3);
        N = n[g] > N ? n[g] : N;
        if (rand_weight(0, K, n[g], 16, 32, &dq, &ds) || (g != 1 && rand_plain(dt, 1, n[g], &dw))) return 1;
        nw[g] = (ld_cu_norm_w){dw, dt};
        for (int c = 0; c < 2; c++) {
            DPUT(dout[c][g], NULL, sizeof(float) * (size_t)T * n[g]);
            tab[c][g] = (ld_cu_mm_group){dq, ds, dx, dout[c][g], T, n[g], 0, 0, NULL};
        }
    }
    ld_cu_mm_group *dtab[2];
    int32_t *dsync, counts[2];
    DPUT(dtab[0], tab[0], sizeof tab[0][0] * (size_t)G);
    DPUT(dtab[1], tab[1], sizeof tab[1][0] * (size_t)G);
    DPUT(dsync, NULL, sizeof(int32_t) * 2);
    CU(ld_cu_grouped_fp8_matmul(dtab[0], G, T, K, N, 16, 32));
    for (int g = 0; g < G; g++)
        if (nw[g].w) CU(ld_cu_rmsnorm(LD_CU_CUSTOM, dout[0][g], dout[0][g], nw[g].w, nw[g].dt, n[g], 1e-6f, T));
    CU(ld_cu_grouped_fp8_matmul_norm(dtab[1], G, T, K, N, 16, 32, nw, 1e-6f, dsync));
    int same = 1;
    for (int g = 0; g < G; g++) same = same && dev_same(dout[0][g], dout[1][g], (size_t)T * n[g]);
    CU(ld_cu_d2h(counts, dsync, sizeof counts));
    char shape[80];
    snprintf(shape, sizeof shape, "%d rows of %d, widths %d..%d (%d)", T, K, n[0], n[G - 1], G);
    printf("  %-15s %-6s %-40s vs grouped, then rmsnorm: %s\n", "fanout_norm", "custom", shape,
           same ? "bitwise" : "DIFFER");
    dfree_all();
    CHECK_MSG(same, "fanout_norm %s: not bitwise the grouped launch and the norms", shape);
    CHECK_MSG(counts[0] == 0 && counts[1] == 0, "fanout_norm %s: counts left nonzero", shape);
    return 0;
}

static int test_cuda_fanout_norm(void)
{
    NEED_GPU();
    const int qkv[3] = {96, 40, 64}, two[2] = {48, 32};
    if (fanout_norm_case(1, 256, qkv, 3) || fanout_norm_case(9, 128, qkv, 3) || fanout_norm_case(3, 64, two, 2))
        return 1;
    return 0;
}

static int test_cuda_matmul_post(void)
{
    NEED_GPU();
    /* V4's wo_b in small (hc_mult 4), 9 rows over two row tiles, K off
     * the 16-byte path, one stream */
    if (matmul_post_case(1, 512, 256, 128, 128, 4) || matmul_post_case(9, 200, 96, 3, 48, 4) ||
        matmul_post_case(3, 256, 64, 16, 128, 1))
        return 1;
    return 0;
}

static int test_cuda_grouped(void)
{
    NEED_GPU();
    const int dec[6] = {1, 1, 1, 1, 1, 1}, mixed[5] = {1, 0, 3, 9, 17};
    /* V4-Flash decode (6 experts, a row each) in small; mixed rows; K not a multiple of the 16-byte path */
    for (int fp4 = 0; fp4 < 2; fp4++) {
        if (grouped_case(fp4, dec, 6, 512, 256, fp4 ? 1 : 128, fp4 ? 32 : 128, 0)) return 1;
        if (grouped_case(fp4, mixed, 5, 256, 96, fp4 ? 1 : 128, fp4 ? 32 : 128, 0)) return 1;
        if (grouped_case(fp4, mixed, 5, 200, 40, fp4 ? 8 : 3, fp4 ? 40 : 48, 0)) return 1;
        /* the MoE's gate and up reading their tokens' rows in place (xrows) */
        if (grouped_case(fp4, dec, 6, 512, 256, fp4 ? 1 : 128, fp4 ? 32 : 128, 1)) return 1;
        if (grouped_case(fp4, mixed, 5, 200, 40, fp4 ? 8 : 3, fp4 ? 40 : 48, 1)) return 1;
        if (glu_case(fp4, dec, 6, 512, 256, fp4 ? 1 : 128, fp4 ? 32 : 128, 0.5f)) return 1;
        if (glu_case(fp4, mixed, 5, 200, 40, fp4 ? 8 : 3, fp4 ? 40 : 48, 0.5f)) return 1;
    }
    /* wq_a and wkv (q_lora_rank 1024, head_dim 512) in small; the narrow one first; three widths, 9 rows */
    const int qkv[2] = {96, 48}, kvq[2] = {48, 96}, three[3] = {40, 16, 64};
    for (int fp4 = 0; fp4 < 2; fp4++) {
        if (fanout_case(fp4, 1, 256, qkv, 2, fp4 ? 1 : 16, fp4 ? 32 : 128)) return 1;
        if (fanout_case(fp4, 3, 256, kvq, 2, fp4 ? 16 : 16, fp4 ? 32 : 128)) return 1;
        if (fanout_case(fp4, 9, 200, three, 3, fp4 ? 8 : 3, fp4 ? 40 : 48)) return 1;
    }
    return 0;
}

/* entry w read in place from rings of 2 r rows (ld_cu_ring_put2 of its
 * window's rows, as the backend keeps them): bitwise `want`, the entry
 * the same kernel pooled from rows by position */
static int ring_entry(int v, const char *shape, const float *want, const float *kv, const float *gate,
                      const float *dape, int r, int d, size_t stride, int ov, int w)
{
    size_t p0 = (size_t)(ov && w > 0 ? w - 1 : w) * (size_t)r, n = (size_t)(w + 1) * (size_t)r - p0;
    float *rk, *rg, *dk, *dg, *dent;
    DPUT(rk, NULL, sizeof(float) * 2 * r * stride);
    DPUT(rg, NULL, sizeof(float) * 2 * r * stride);
    DPUT(dk, kv + p0 * stride, sizeof(float) * n * stride);
    DPUT(dg, gate + p0 * stride, sizeof(float) * n * stride);
    DPUT(dent, NULL, sizeof(float) * d);
    /* the window's rows in two puts, as a chunked prefill would */
    size_t half = n / 2;
    CU(ld_cu_ring_put2(rk, rg, dk, dg, stride, 2 * r, (int)p0, (int)half));
    CU(ld_cu_ring_put2(rk, rg, dk + half * stride, dg + half * stride, stride, 2 * r, (int)(p0 + half),
                       (int)(n - half)));
    CU(ld_cu_ds4_compress(v, dent, rk, rg, dape, r, d, stride, ov, w, 1, 2 * r));
    float *got = malloc(sizeof(float) * d), *exp = malloc(sizeof(float) * d);
    CHECK(got && exp);
    CU(ld_cu_d2h(got, dent, sizeof(float) * d));
    CU(ld_cu_d2h(exp, want, sizeof(float) * d));
    int same = !memcmp(got, exp, sizeof(float) * d);
    printf("  ds4_compress    %-6s %-30s entry %d from a ring of %d rows: %s\n", v ? "custom" : "ref", shape, w, 2 * r,
           same ? "bitwise" : "DIFFERS");
    free(got);
    free(exp);
    CHECK_MSG(same, "ds4_compress %s %s: the ring's entry differs", v ? "custom" : "ref", shape);
    return 0;
}

static int test_cuda_ds4_compress(void)
{
    NEED_GPU();
    struct { int r, d, overlap, w0, nw; } sh[] = {
        {4, 64, 1, 0, 5}, {128, 64, 0, 1, 3}, {4, 128, 1, 3, 4}, {8, 48, 0, 0, 2},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int r = sh[ci].r, d = sh[ci].d, ov = sh[ci].overlap, w0 = sh[ci].w0, nw = sh[ci].nw;
        size_t stride = (size_t)(ov ? 2 * d : d) + 1, rows = (size_t)(w0 + nw) * r;
        float *kv = malloc(sizeof(float) * rows * stride), *gate = malloc(sizeof(float) * rows * stride);
        float *ape = malloc(sizeof(float) * r * stride), *ref = malloc(sizeof(float) * nw * d);
        CHECK(kv && gate && ape && ref);
        fill(kv, rows * stride, -2, 2);
        fill(gate, rows * stride, -3, 3);
        fill(ape, (size_t)r * stride, -1, 1);
        for (int e = 0; e < nw; e++) ld_ref_ds4_compress(ref + (size_t)e * d, kv, gate, ape, r, d, stride, ov, w0 + e);
        float *dkv, *dgate, *dape, *dout;
        DPUT(dkv, kv, sizeof(float) * rows * stride);
        DPUT(dgate, gate, sizeof(float) * rows * stride);
        DPUT(dape, ape, sizeof(float) * r * stride);
        DPUT(dout, NULL, sizeof(float) * nw * d);
        char shape[64];
        snprintf(shape, sizeof shape, "%s r %d d %d w %d..%d", ov ? "csa" : "hca", r, d, w0, w0 + nw - 1);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * nw * d));
            CU(ld_cu_ds4_compress(v, dout, dkv, dgate, dape, r, d, stride, ov, w0, nw, 0));
            if (compare("ds4_compress", v, shape, dout, ref, (size_t)nw * d, v ? 1e-10 : 1e-12)) return 1;
            if (ring_entry(v, shape, dout + (size_t)(nw - 1) * d, kv, gate, dape, r, d, stride, ov, w0 + nw - 1))
                return 1;
        }
        free(kv);
        free(gate);
        free(ape);
        free(ref);
        dfree_all();
    }
    return 0;
}

static int test_cuda_ds_layernorm(void)
{
    NEED_GPU();
    struct { int rows, dim, stride; } sh[] = {{7, 128, 160}, {3, 1000, 1000}, {1, 64, 64}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int rows = sh[ci].rows, dim = sh[ci].dim;
        size_t rs = (size_t)sh[ci].stride, n = (size_t)rows * rs;
        float *x = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n);
        float *w = malloc(sizeof(float) * dim), *b = malloc(sizeof(float) * dim);
        CHECK(x && ref && w && b);
        fill(x, n, -3, 5);
        fill(w, (size_t)dim, 0.5f, 1.5f);
        fill(b, (size_t)dim, -0.5f, 0.5f);
        memcpy(ref, x, sizeof(float) * n);
        ld_ref_ds_layernorm(ref, rs, w, b, dim, 1e-6f, 0, (size_t)rows);
        float *dx, *dw, *db;
        DPUT(dx, NULL, sizeof(float) * n);
        DPUT(dw, w, sizeof(float) * dim);
        DPUT(db, b, sizeof(float) * dim);
        char shape[64];
        snprintf(shape, sizeof shape, "rows %d dim %d stride %zu", rows, dim, rs);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_h2d(dx, x, sizeof(float) * n));
            CU(ld_cu_ds_layernorm(v, dx, rows, rs, dw, db, dim, 1e-6f));
            if (compare("ds_layernorm", v, shape, dx, ref, n, v ? 1e-10 : -1)) return 1;
        }
        free(x);
        free(ref);
        free(w);
        free(b);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- errors */

static int test_cuda_deepseek_errors(void)
{
    NEED_GPU();
    /* shapes the launchers refuse, before any launch */
    CHECK(ld_cu_ds_route(LD_CU_CUSTOM, NULL, NULL, NULL, NULL, 1, 2048, 8, 4, 8, 1, 1.0f) != 0);
    CHECK(ld_cu_ds_route(LD_CU_REF, NULL, NULL, NULL, NULL, 1, 64, 7, 4, 8, 1, 1.0f) != 0);
    CHECK(ld_cu_ds4_route(LD_CU_REF, NULL, NULL, NULL, NULL, NULL, NULL, 1, 64, 65, 1.0f) != 0);
    CHECK(ld_cu_hc_pre(LD_CU_REF, NULL, NULL, NULL, NULL, 1, 65, 8, NULL, NULL, NULL, 1, 1e-6f, 1e-6f, NULL, 0) != 0);
    CHECK(ld_cu_index_scores(LD_CU_CUSTOM, 0, NULL, NULL, NULL, NULL, 1, 64, 512, 10, 1, 1) != 0);
    CHECK(ld_cu_mla_latent(LD_CU_CUSTOM, NULL, NULL, NULL, NULL, NULL, 1, 4, 16, 8, 64, 10, 1.0f, NULL, 0, NULL, 0) !=
          0);
    CHECK(ld_cu_sample(LD_CU_CUSTOM, NULL, NULL, 1, 100, 1.0, -1, NAN, NAN, 0, 0, NULL, 0) != 0);
    CHECK(ld_cu_ds4_attention(LD_CU_CUSTOM, NULL, NULL, 1, 4, 576, NULL, 0, 0, NULL, 0, NULL, 0, NULL, 1.0f, 0, NULL,
                              (size_t)1 << 20) != 0); /* hd > 512 */
    CHECK(ld_cu_ds4_attention(LD_CU_REF, NULL, NULL, 1, 4, 64, NULL, 0, 0, NULL, 4, NULL, 0, NULL, 1.0f, 10, NULL,
                              0) != 0); /* no workspace */
    CHECK(ld_cu_ds4_hc_head(LD_CU_CUSTOM, NULL, NULL, 1, 65, 8, NULL, NULL, 1.0f, 1e-6f, 1e-6f, NULL, 0) != 0);
    CHECK(ld_cu_ds4_hc_head_norm(NULL, NULL, 1, 4, 8, NULL, NULL, 1.0f, 1e-6f, 1e-6f, NULL, 3, 1e-6f, NULL) != 0);
    CHECK(ld_cu_ds4_fp4_matmul(LD_CU_REF, NULL, NULL, NULL, NULL, 0, 1, 63, 8, 1, 1) != 0); /* K odd */
    CHECK(ld_cu_ds4_fp4_matmul(LD_CU_CUSTOM, NULL, NULL, NULL, NULL, 1, 1, 64, 8, 3, 1) != 0); /* 3 !| 8 */
    CHECK(ld_cu_ds_rope(LD_CU_REF, NULL, 1, 64, 0, 1, 64, 63, NULL, 1.0f, 1, 0, 0, 0) != 0);    /* dim odd */
    CHECK(ld_cu_ds4_compress(LD_CU_REF, NULL, NULL, NULL, NULL, 4, 64, 64, 1, 0, 1, 0) != 0);    /* stride < 2d */
    CHECK(ld_cu_ds4_compress(LD_CU_REF, NULL, NULL, NULL, NULL, 4, 64, 128, 1, 0, 1, 7) != 0);   /* ring < 2r */
    CHECK(ld_cu_ds4_compress(LD_CU_REF, NULL, NULL, NULL, NULL, 4, 64, 128, 1, 0, 2, 8) != 0);   /* ring, 2 entries */
    CHECK(ld_cu_ds_layernorm(LD_CU_CUSTOM, NULL, 2, 10, NULL, NULL, 64, 1e-6f) != 0);            /* stride < dim */
    /* the device still works after them */
    CHECK(ld_cu_sync() == 0);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_fp8_matmul), LD_CASE(test_cuda_moe_grouped), LD_CASE(test_cuda_mla_latent),
    LD_CASE(test_cuda_mla_absorb),
    LD_CASE(test_cuda_index_scores),
    LD_CASE(test_cuda_topk),       LD_CASE(test_cuda_ds4_index_pick),
    LD_CASE(test_cuda_ds_route),   LD_CASE(test_cuda_ds4_route),
    LD_CASE(test_cuda_moe_combine), LD_CASE(test_cuda_hc),         LD_CASE(test_cuda_hc_bf16),
    LD_CASE(test_cuda_sample_generator),
    LD_CASE(test_cuda_sample),     LD_CASE(test_cuda_ds4_attention), LD_CASE(test_cuda_ds4_swiglu),
    LD_CASE(test_cuda_ds_rope),    LD_CASE(test_cuda_ds4_qkv),       LD_CASE(test_cuda_ds4_hc_head),   LD_CASE(test_cuda_ds4_fp4),
    LD_CASE(test_cuda_grouped),    LD_CASE(test_cuda_matmul_post),   LD_CASE(test_cuda_matmul_fanout),
    LD_CASE(test_cuda_moe_mixed),  LD_CASE(test_cuda_fanout_norm),
    LD_CASE(test_cuda_ds4_compress), LD_CASE(test_cuda_ds_layernorm), LD_CASE(test_cuda_deepseek_errors),
};

#else /* !LD_HAVE_CUDA && !LD_CUDA_MOCK && !LD_CUDA_EMU */

static int test_cuda_deepseek(void)
{
    NEED_GPU(); /* "built without CUDA" */
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_cuda_deepseek)};

#endif

LD_TEST_MAIN(tests)
