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

#include "engine/backend/cuda/backend_cuda.h"
#include "engine/backend/cpu_kernels.h"
#include "tests/support/ld_test.h"
#include "replay/run/replay_compare.h"

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

/* the model features (LD_KF_*) a CPU variant needs to act, 0: none (every
 * model's), as engine/backend/cpu_kernels.h states them */
static unsigned needs(const char *v)
{
    static const struct {
        const char *prefix;
        unsigned f;
    } rule[] = {{"mla=", LD_KF_MLA},         {"router=", LD_KF_MLA}, {"combine=bf16", LD_KF_MLA},
                {"combine=", LD_KF_DEEPSEEK}, {"rope=", LD_KF_DEEPSEEK}, {"mhc=", LD_KF_MHC},
                {"indexer=", LD_KF_INDEXER}};
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++)
        if (!strncmp(v, rule[i].prefix, strlen(rule[i].prefix))) return rule[i].f;
    return 0;
}

static int test_plan_cpu_one_variant_per_run(void)
{
    for (unsigned f = 0; f < 16; f++) {
        ld_kernel_run runs[64];
        size_t n = ld_replay_kernel_plan("cpu", f, runs, 64);
        CHECK(n >= 2 && n < 64);
        CHECK(!strcmp(runs[0].backend, "ref") && runs[0].spec[0] == 0);
        size_t kept = 0;
        for (size_t i = 0; ld_cpu_kernel_variants[i]; i++)
            kept += !needs(ld_cpu_kernel_variants[i]) || (needs(ld_cpu_kernel_variants[i]) & f);
        CHECK_MSG(n == kept + 1, "features %u: %zu runs for %zu variants", f, n, kept);
        for (size_t i = 1; i < n; i++) {
            CHECK(!strcmp(runs[i].backend, "ref") && !strcmp(runs[i].label, runs[i].spec));
            CHECK_MSG(!needs(runs[i].spec) || (needs(runs[i].spec) & f), "%s on features %u", runs[i].spec, f);
            ld_cpu_kernels k = ld_cpu_kernels_default(0);
            ld_error err;
            CHECK_MSG(ld_cpu_kernels_parse(runs[i].spec, &k, &err) == LD_OK, "%s: %s", runs[i].spec, err.msg);
            int op = -1;
            CHECK_MSG(cpu_ops_changed(&k, &op) == 1, "%s changes more or less than one op", runs[i].spec);
        }
    }
    /* a dense model: the backend's ops only; DeepSeek-V3 (no indexer) gets no indexer run */
    ld_kernel_run runs[64];
    size_t n = ld_replay_kernel_plan("cpu", 0, runs, 64);
    for (size_t i = 1; i < n; i++)
        CHECK_MSG(!strncmp(runs[i].spec, "matmul=", 7) || !strncmp(runs[i].spec, "attention=", 10) ||
                      !strncmp(runs[i].spec, "rmsnorm=", 8) || !strncmp(runs[i].spec, "swiglu=", 7),
                  "%s on a dense model", runs[i].spec);
    n = ld_replay_kernel_plan("cpu", LD_KF_MLA | LD_KF_DEEPSEEK, runs, 64);
    for (size_t i = 1; i < n; i++) CHECK_MSG(strncmp(runs[i].spec, "indexer=", 8), "%s on V3", runs[i].spec);
    return 0;
}

static int test_plan_cuda_each_custom_kernel_alone(void)
{
    ld_kernel_run runs[64];
    size_t n = ld_replay_kernel_plan("cuda", 0, runs, 64);
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
    CHECK(ld_replay_kernel_plan("cuda", 0, runs, 3) == 3);
    CHECK(ld_replay_kernel_plan("ref", 15, runs, 2) == 2);
    CHECK(ld_replay_kernel_plan("ref", 15, runs, 0) == 0);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_plan_cpu_one_variant_per_run),
    LD_CASE(test_plan_cuda_each_custom_kernel_alone),
    LD_CASE(test_plan_stops_at_capacity),
};

LD_TEST_MAIN(cases)
