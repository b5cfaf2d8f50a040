/* test_shard.c - `--shard` (cmd/common/shard.c): I/N, auto from a Slurm job
 * array's variables (as sbatch --array sets them, per Slurm's sbatch(1)
 * "OUTPUT ENVIRONMENT VARIABLES") and from a Kubernetes Indexed Job's
 * JOB_COMPLETION_INDEX, and the blocks of inputs each share takes. */
#include <string.h>

#include "cmd/common/shard.h"
#include "tests/support/ld_test.h"

/* A fake environment: "NAME=value" strings, NULL-terminated. */
static const char *const *fake_env;

static char *fake_getenv(const char *name)
{
    size_t n = strlen(name);
    for (const char *const *e = fake_env; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return (char *)*e + n + 1;
    return NULL;
}

/* Parses spec under env; returns 0/-1 and fills *s, msg. */
static int parse(const char *spec, const char *const *env, ld_cli_shard *s, char *msg)
{
    fake_env = env;
    return ld_cli_shard_parse(spec, fake_getenv, s, msg, 400);
}

static int test_shard_explicit(void)
{
    ld_cli_shard s;
    char msg[400];
    CHECK(parse("0/1", NULL, &s, msg) == 0 && s.index == 0 && s.count == 1);
    CHECK(parse("3/4", NULL, &s, msg) == 0 && s.index == 3 && s.count == 4);
    const char *bad[] = { "4/4", "-1/4", "1/-4", "1/0", "x", "1/", "/4", "1/4x", "1 /4", "", "1/2/3",
                          "99999999999999999999/3", "0/1000001" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_MSG(parse(bad[i], NULL, &s, msg) != 0, "%s", bad[i]);
    return 0;
}

static int test_shard_slurm(void)
{
    ld_cli_shard s;
    char msg[400];
    /* sbatch --array=0-3, task 2 */
    const char *a[] = { "SLURM_ARRAY_TASK_ID=2", "SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_MAX=3",
                        "SLURM_ARRAY_TASK_COUNT=4", "SLURM_ARRAY_TASK_STEP=1", NULL };
    CHECK(parse("auto", a, &s, msg) == 0 && s.index == 2 && s.count == 4 && !strcmp(s.from, "Slurm"));
    CHECK(parse("auto/4", a, &s, msg) == 0 && s.index == 2);
    CHECK(parse("auto/5", a, &s, msg) != 0 && strstr(msg, "4 tasks"));
    /* --array=10-13, task 10: share 0 */
    const char *b[] = { "SLURM_ARRAY_TASK_ID=10", "SLURM_ARRAY_TASK_MIN=10", "SLURM_ARRAY_TASK_MAX=13", NULL };
    CHECK(parse("auto", b, &s, msg) == 0 && s.index == 0 && s.count == 4);
    /* --array=1-7:3 (1, 4, 7), task 7: share 2 of 3 */
    const char *c[] = { "SLURM_ARRAY_TASK_ID=7", "SLURM_ARRAY_TASK_MIN=1", "SLURM_ARRAY_TASK_MAX=7",
                        "SLURM_ARRAY_TASK_STEP=3", "SLURM_ARRAY_TASK_COUNT=3", NULL };
    CHECK(parse("auto", c, &s, msg) == 0 && s.index == 2 && s.count == 3);
    /* --array=1,3,5: Slurm counts 3 tasks in 1..5: not a range */
    const char *d[] = { "SLURM_ARRAY_TASK_ID=3", "SLURM_ARRAY_TASK_MIN=1", "SLURM_ARRAY_TASK_MAX=5",
                        "SLURM_ARRAY_TASK_COUNT=3", NULL };
    CHECK(parse("auto", d, &s, msg) != 0 && strstr(msg, "unbroken range"));
    /* only the id: no count */
    const char *e[] = { "SLURM_ARRAY_TASK_ID=3", NULL };
    CHECK(parse("auto", e, &s, msg) != 0 && strstr(msg, "SLURM_ARRAY_TASK_COUNT"));
    const char *f[] = { "SLURM_ARRAY_TASK_ID=three", "SLURM_ARRAY_TASK_COUNT=4", NULL };
    CHECK(parse("auto", f, &s, msg) != 0);
    /* Slurm wins over a stray JOB_COMPLETION_INDEX */
    const char *g[] = { "JOB_COMPLETION_INDEX=0", "SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_TASK_COUNT=2", NULL };
    CHECK(parse("auto", g, &s, msg) == 0 && s.index == 1 && s.count == 2);
    return 0;
}

static int test_shard_kubernetes(void)
{
    ld_cli_shard s;
    char msg[400];
    const char *a[] = { "JOB_COMPLETION_INDEX=2", NULL };
    CHECK(parse("auto/3", a, &s, msg) == 0 && s.index == 2 && s.count == 3 && !strcmp(s.from, "Kubernetes"));
    CHECK(parse("auto/2", a, &s, msg) != 0 && strstr(msg, "completions"));
    CHECK(parse("auto", a, &s, msg) != 0 && strstr(msg, "auto/N"));
    const char *b[] = { "JOB_COMPLETION_INDEX=", NULL };
    CHECK(parse("auto/3", b, &s, msg) != 0 && strstr(msg, "neither"));
    CHECK(parse("auto/3", NULL, &s, msg) != 0 && strstr(msg, "SLURM_ARRAY_TASK_ID"));
    CHECK(parse("automatic", a, &s, msg) != 0);
    return 0;
}

/* Every input in exactly one share, in order; sizes differ by at most one. */
static int test_shard_range(void)
{
    for (size_t n = 0; n <= 12; n++)
        for (long count = 1; count <= 14; count++) {
            size_t next = 0, lo = (size_t)-1, hi = 0;
            for (long i = 0; i < count; i++) {
                ld_cli_shard s = { i, count, "--shard" };
                size_t first, end;
                ld_cli_shard_range(&s, n, &first, &end);
                CHECK(first == next && end >= first);
                next = end;
                if (end - first < lo) lo = end - first;
                if (end - first > hi) hi = end - first;
            }
            CHECK(next == n && hi - lo <= 1);
        }
    ld_cli_shard s = { 999999, 1000000, "--shard" };
    size_t first, end;
    ld_cli_shard_range(&s, (size_t)1 << 40, &first, &end);
    CHECK(end == (size_t)1 << 40 && first < end);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_shard_explicit),
    LD_CASE(test_shard_slurm),
    LD_CASE(test_shard_kubernetes),
    LD_CASE(test_shard_range),
};

LD_TEST_MAIN(cases)
