/* test_kernel_plan.c - the replays `logdiff replay --compare-kernels` makes
 * (replay_compare.h: ld_replay_kernel_plan).  Each run's spec is handed to
 * the backends' own spec parsers here and the kernels they select are
 * checked: on the CPU exactly one op off the reference per run, and only
 * ops the model has; on CUDA the reference kernels first, then exactly one
 * custom kernel per run, every op once, then all custom.  The replays
 * themselves are tested in tests/cli/replay_kernels.sh (CPU); on CUDA they
 * need a GPU, and without one the command fails with the backend's error
 * (tests/cli/replay_kernels.sh). */
#include <string.h>

#include "backend_cuda.h"
#include "cpu_kernels.h"
#include "ld_test.h"
#include "replay_compare.h"

/* ops of k that differ from the all-reference selection */
static int cpu_ops_changed(const ld_cpu_kernels *k, int *which)
{
    int n = 0;
    for (int op = 0; op < LD_KOP_COUNT; op++)
        if (k->v[op] != LD_KV_REF) {
            n++;
            *which = op;
        }
    return n;
}

static int is_deepseek_op(const char *spec, const char *const *ops)
{
    for (int i = 0; ops[i]; i++)
        if (!strncmp(spec, ops[i], strlen(ops[i]))) return 1;
    return 0;
}

static int test_plan_cpu_one_variant_per_run(void)
{
    static const char *const mla_ops[] = {"mla=", "router=", "combine=bf16", NULL}, *const mhc_ops[] = {"mhc=", NULL};
    /* DeepSeek ops of both families (V3/V3.2 and V4) */
    static const char *const ds_ops[] = {"combine=fused", "indexer=", "rope=", NULL};
    for (int has_mla = 0; has_mla <= 1; has_mla++)
        for (int has_mhc = 0; has_mhc <= 1; has_mhc++) {
            ld_kernel_run runs[64];
            size_t n = ld_replay_kernel_plan("cpu", has_mla, has_mhc, runs, 64);
            CHECK(n >= 2 && n < 64);
            CHECK(!strcmp(runs[0].backend, "ref") && runs[0].spec[0] == 0);
            size_t listed = 0, kept = 0;
            for (size_t i = 0; ld_cpu_kernel_variants[i]; i++, listed++) {
                const char *v = ld_cpu_kernel_variants[i];
                int applies = (!is_deepseek_op(v, mla_ops) || has_mla) && (!is_deepseek_op(v, mhc_ops) || has_mhc) &&
                              (!is_deepseek_op(v, ds_ops) || has_mla || has_mhc);
                kept += (size_t)applies;
            }
            CHECK_MSG(n == kept + 1, "mla %d mhc %d: %zu runs for %zu of %zu variants", has_mla, has_mhc, n, kept,
                      listed);
            for (size_t i = 1; i < n; i++) {
                CHECK(!strcmp(runs[i].backend, "ref") && !strcmp(runs[i].label, runs[i].spec));
                CHECK_MSG(has_mla || !is_deepseek_op(runs[i].spec, mla_ops), "%s without MLA", runs[i].spec);
                CHECK_MSG(has_mhc || !is_deepseek_op(runs[i].spec, mhc_ops), "%s without mHC", runs[i].spec);
                CHECK_MSG(has_mla || has_mhc || !is_deepseek_op(runs[i].spec, ds_ops), "%s without DeepSeek",
                          runs[i].spec);
                ld_cpu_kernels k = ld_cpu_kernels_default(0);
                ld_error err;
                CHECK_MSG(ld_cpu_kernels_parse(runs[i].spec, &k, &err) == LD_OK, "%s: %s", runs[i].spec, err.msg);
                int op = -1;
                CHECK_MSG(cpu_ops_changed(&k, &op) == 1, "%s changes more or less than one op", runs[i].spec);
            }
        }
    return 0;
}

static int test_plan_cuda_each_custom_kernel_alone(void)
{
    ld_kernel_run runs[64];
    size_t n = ld_replay_kernel_plan("cuda", 0, 0, runs, 64);
    CHECK_MSG(n == LD_CUDA_N_OPS + 2, "%zu runs for %d ops", n, LD_CUDA_N_OPS);
    int seen[LD_CUDA_N_OPS] = {0};
    for (size_t i = 0; i < n; i++) {
        CHECK(!strcmp(runs[i].backend, "cuda"));
        ld_cuda_kernels k;
        ld_error err;
        CHECK_MSG(ld_cuda_kernels_parse(runs[i].spec, &k, &err) == LD_OK, "%s: %s", runs[i].spec, err.msg);
        int n_custom = 0, which = -1;
        for (int op = 0; op < LD_CUDA_N_OPS; op++)
            if (k.custom[op]) {
                n_custom++;
                which = op;
            }
        if (i == 0) CHECK_MSG(n_custom == 0, "the baseline %s has custom kernels", runs[i].spec);
        else if (i + 1 == n) CHECK_MSG(n_custom == LD_CUDA_N_OPS, "the last run %s is not all custom", runs[i].spec);
        else {
            CHECK_MSG(n_custom == 1, "%s: %d custom kernels", runs[i].spec, n_custom);
            seen[which]++;
            char label[48];
            snprintf(label, sizeof label, "%s=custom", ld_cuda_op_name(which));
            CHECK_MSG(!strcmp(runs[i].label, label), "run %s labelled %s", runs[i].spec, runs[i].label);
        }
    }
    for (int op = 0; op < LD_CUDA_N_OPS; op++) CHECK_MSG(seen[op] == 1, "op %s in %d runs", ld_cuda_op_name(op), seen[op]);
    return 0;
}

static int test_plan_stops_at_capacity(void)
{
    ld_kernel_run runs[3];
    CHECK(ld_replay_kernel_plan("cuda", 0, 0, runs, 3) == 3);
    CHECK(ld_replay_kernel_plan("ref", 1, 1, runs, 2) == 2);
    CHECK(ld_replay_kernel_plan("ref", 1, 1, runs, 0) == 0);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_plan_cpu_one_variant_per_run),
    LD_CASE(test_plan_cuda_each_custom_kernel_alone),
    LD_CASE(test_plan_stops_at_capacity),
};

LD_TEST_MAIN(cases)
