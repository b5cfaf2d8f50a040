/* cpu_kernels.c - see cpu_kernels.h. */
#include "cpu_kernels.h"

#include <stdio.h>
#include <string.h>

static const char *const op_names[LD_KOP_COUNT] = {"matmul", "attention", "rmsnorm", "swiglu", "mla",
                                                   "router", "combine",   "mhc",     "indexer", "rope"};
static const char *const var_names[LD_KV_COUNT] = {"ref",    "fast",  "bf16", "splitk",       "absorbed",
                                                   "fp8act", "fused", "fp8",  "sinkhorn-bf16", "fp8ue8m0",
                                                   "q8",     "i24"};

/* which variants each op has (bit per ld_kvar) */
static const unsigned op_allows[LD_KOP_COUNT] = {
    1u << LD_KV_REF | 1u << LD_KV_FAST | 1u << LD_KV_BF16 | 1u << LD_KV_SPLITK | 1u << LD_KV_FP8ACT |
        1u << LD_KV_FP8UE8M0 | 1u << LD_KV_Q8 | 1u << LD_KV_I24,
    1u << LD_KV_REF | 1u << LD_KV_FAST,
    1u << LD_KV_REF | 1u << LD_KV_BF16,
    1u << LD_KV_REF | 1u << LD_KV_BF16,
    1u << LD_KV_REF | 1u << LD_KV_ABSORBED | 1u << LD_KV_SPLITK,
    1u << LD_KV_REF | 1u << LD_KV_BF16,
    1u << LD_KV_REF | 1u << LD_KV_BF16 | 1u << LD_KV_FUSED,
    1u << LD_KV_REF | 1u << LD_KV_BF16 | 1u << LD_KV_SINKHORN_BF16,
    1u << LD_KV_REF | 1u << LD_KV_BF16 | 1u << LD_KV_FP8,
    1u << LD_KV_REF | 1u << LD_KV_BF16,
};

const char *const ld_cpu_kernel_variants[] = {"matmul=fast", "matmul=bf16", "matmul=splitk", "matmul=fp8act", "matmul=fp8ue8m0",
                                              "attention=fast",
                                              "rmsnorm=bf16", "swiglu=bf16", "mla=absorbed", "mla=splitk",
                                              "router=bf16", "combine=bf16", "combine=fused", "mhc=bf16",
                                              "mhc=sinkhorn-bf16", "indexer=bf16", "indexer=fp8", "rope=bf16",
                                              NULL};

ld_cpu_kernels ld_cpu_kernels_default(int fast)
{
    ld_cpu_kernels k = {{LD_KV_REF}};
    if (fast) { /* i24 on Q4_0 / Q4_1 / Q8_0 weights, the fast kernels on the others */
        k.v[LD_KOP_MATMUL] = LD_KV_I24;
        k.v[LD_KOP_ATTENTION] = LD_KV_FAST;
    }
    return k;
}

static int lookup(const char *const *names, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], s, len)) return i;
    return -1;
}

ld_status ld_cpu_kernels_parse(const char *spec, ld_cpu_kernels *k, ld_error *err)
{
    if (!spec) return LD_OK;
    ld_cpu_kernels out = *k;
    size_t i = 0, n = strlen(spec);
    while (i < n) {
        size_t end = i;
        while (end < n && spec[end] != ',') end++;
        const char *eq = memchr(spec + i, '=', end - i);
        if (!eq)
            return LD_FAIL(err, LD_ERR_USAGE, i, "kernels: '%.*s' is not OP=VARIANT", (int)(end - i), spec + i);
        size_t ol = (size_t)(eq - (spec + i)), vo = (size_t)(eq - spec) + 1;
        int op = lookup(op_names, LD_KOP_COUNT, spec + i, ol);
        if (op < 0)
            return LD_FAIL(err, LD_ERR_USAGE, i,
                           "kernels: unknown op '%.*s' (matmul, attention, rmsnorm, swiglu, mla, router, combine, mhc, "
                           "indexer, rope)",
                           (int)ol, spec + i);
        int v = lookup(var_names, LD_KV_COUNT, spec + vo, end - vo);
        if (v < 0 || !(op_allows[op] >> v & 1u))
            return LD_FAIL(err, LD_ERR_USAGE, vo, "kernels: %s has no variant '%.*s'", op_names[op],
                           (int)(end - vo), spec + vo);
        out.v[op] = (ld_kvar)v;
        i = end + 1;
        if (end + 1 == n) return LD_FAIL(err, LD_ERR_USAGE, end, "kernels: the spec ends with ','");
    }
    *k = out;
    return LD_OK;
}

const char *ld_cpu_kernels_label(const ld_cpu_kernels *k, int fast, char *buf, size_t cap)
{
    ld_cpu_kernels d = ld_cpu_kernels_default(fast);
    size_t len = (size_t)snprintf(buf, cap, "%s", fast ? "cpu" : "ref");
    char sep = '+';
    for (int op = 0; op < LD_KOP_COUNT && len < cap; op++) {
        if (k->v[op] == d.v[op]) continue;
        len += (size_t)snprintf(buf + len, cap - len, "%c%s=%s", sep, op_names[op], var_names[k->v[op]]);
        sep = ',';
    }
    return buf;
}

int ld_cpu_kernel_variant_applies(const char *v, unsigned features)
{
    static const struct {
        const char *prefix;
        unsigned needs; /* LD_KF_* */
    } only[] = {{"mla=", LD_KF_MLA},         {"router=", LD_KF_MLA},      {"combine=bf16", LD_KF_MLA},
                {"combine=", LD_KF_DEEPSEEK}, {"mhc=", LD_KF_MHC},         {"indexer=", LD_KF_INDEXER},
                {"rope=", LD_KF_DEEPSEEK}};
    for (size_t i = 0; i < sizeof only / sizeof only[0]; i++)
        if (!strncmp(v, only[i].prefix, strlen(only[i].prefix))) return (features & only[i].needs) != 0;
    return 1;
}
