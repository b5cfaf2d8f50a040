/* fuzz_specs.c - libFuzzer target for the small languages of logdiff
 * replay's options: --positions LIST (replay/run/replay_dump.c) and --kernels
 * SPEC (engine/backend/cpu_kernels.c for the CPU backends, engine/backend/cuda/backend_cuda.c's
 * parser for the CUDA one, which is built without CUDA too).  The input's
 * first byte picks the parser and a sequence length; a list that parses
 * must resolve to positions that are ascending, distinct and inside the
 * sequence, or fail with LD_ERR_USAGE; a spec that parses must name only
 * known variants (tc for matmul only).  Never
 * a crash or a read outside the input.  The corpus in
 * tests/fuzz/corpus/specs/ replays as the plain test fuzz.specs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/cuda/backend_cuda.h"
#include "engine/backend/cpu_kernels.h"
#include "replay/run/replay.h"

static void positions(const char *s, size_t seq_len)
{
    ld_replay_positions p = {NULL, 0};
    if (ld_replay_positions_parse(s, &p, NULL) != LD_OK) return;
    int64_t *pos = NULL;
    size_t n = 0;
    ld_error err;
    ld_status st = ld_replay_positions_resolve(&p, seq_len, &pos, &n, &err);
    if (st == LD_OK) {
        for (size_t i = 0; i < n; i++)
            if (pos[i] < 0 || (size_t)pos[i] >= seq_len || (i && pos[i] <= pos[i - 1])) abort();
    } else if (st != LD_ERR_USAGE && st != LD_ERR_NOMEM) {
        abort();
    }
    free(pos);
    ld_replay_positions_free(&p);
}

static void kernels(const char *s)
{
    ld_cpu_kernels k = ld_cpu_kernels_default(1);
    if (ld_cpu_kernels_parse(s, &k, NULL) != LD_OK) return;
    for (int op = 0; op < LD_KOP_COUNT; op++)
        if ((int)k.v[op] < 0 || k.v[op] >= LD_KV_COUNT) abort();
    char label[96];
    ld_cpu_kernels_label(&k, 1, label, sizeof label);
}

static void cuda_kernels(const char *s)
{
    ld_cuda_kernels k;
    if (ld_cuda_kernels_parse(s, &k, NULL) != LD_OK) return;
    for (int op = 0; op < LD_CUDA_N_OPS; op++) {
        if (k.custom[op] > LD_CUDA_KERNEL_TC) abort();
        if (k.custom[op] == LD_CUDA_KERNEL_TC && op != LD_CUDA_OP_MATMUL) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char *s = malloc(size); /* the rest, NUL-terminated: exact size */
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    if (data[0] & 1) {
        kernels(s);
        cuda_kernels(s);
    } else {
        positions(s, (size_t)(data[0] >> 1));
    }
    free(s);
    return 0;
}
