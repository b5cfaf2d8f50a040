/* fuzz_ds4cfg.c - libFuzzer target for engine/models/deepseek_v4/ds4_config.c.  Parses
 * the input as a DeepSeek-V4 config.json; when it parses, the configuration
 * must size every buffer (positive dimensions, a RoPE slice inside the
 * head, at least one expert chosen among those there are, mHC streams) and
 * both RoPE tables are computed; must never crash or read outside the
 * input.  The corpus in tests/fuzz/corpus/ds4cfg/ (the tiny checkpoints'
 * config.json files of testdata/models/deepseek-v4*) replays as the plain
 * test fuzz.ds4cfg. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/deepseek_v4/ds4_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1); /* exact size: overreads are caught */
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    (void)ld_ds4_config_detect(buf, size);
    ld_ds4_config c;
    if (ld_ds4_config_parse(buf, size, &c, NULL) == LD_OK) {
        if (c.vocab <= 0 || c.hidden <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.head_dim <= 0 ||
            c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim || c.hc_mult <= 0 || c.max_pos <= 0)
            abort(); /* an accepted config sizes every buffer */
        if (c.n_routed > 0 && (c.top_k <= 0 || c.top_k > c.n_routed)) abort();
        if (c.rope_dim <= 4096) {
            float *inv = malloc((size_t)c.rope_dim / 2 * sizeof *inv + sizeof *inv), f = 0;
            if (inv) {
                ld_ds4_rope_inv_freq(&c, &c.rope_main, inv, &f);
                ld_ds4_rope_inv_freq(&c, &c.rope_compress, inv, &f);
            }
            free(inv);
        }
    }
    free(buf);
    return 0;
}
