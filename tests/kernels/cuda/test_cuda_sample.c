/* test_cuda_sample.c - the GPU-only checks of the sampler on the device against replay's
 * (kernels/cuda/cuda_sample.cu): each op's reference and custom
 * kernels against the plain-C reference, with the tolerances
 * tests/support/cuda_ds_check.h lists; skips (77) without CUDA or a device. */
#include "tests/support/cuda_ds_check.h"

#if LD_CUDA_DS_CHECKS

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

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_sample_generator), LD_CASE(test_cuda_sample),
};

#else /* built without CUDA, its mock or its emulator */

static int test_cuda_sample(void)
{
    NEED_GPU(); /* "built without CUDA" */
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_cuda_sample)};

#endif

LD_TEST_MAIN(tests)
