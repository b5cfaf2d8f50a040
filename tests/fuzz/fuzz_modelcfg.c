/* fuzz_modelcfg.c - libFuzzer target for engine/models/dense/model_config.c.  Parses the
 * input as a model's config.json; when it parses, the configuration must be
 * one the engine can size buffers from (positive dimensions, heads that
 * divide, a head_dim the RoPE table can be computed for), and the RoPE
 * inverse frequencies are computed; must never crash or read outside the
 * input.  The corpus in tests/fuzz/corpus/modelcfg/ (the tiny models'
 * config.json files of testdata/models/ and edited copies) replays as the
 * plain test fuzz.modelcfg. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/dense/model_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1); /* exact size: overreads are caught */
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    ld_model_config c;
    if (ld_model_config_parse(buf, size, &c, NULL) == LD_OK) {
        if (c.vocab <= 0 || c.hidden <= 0 || c.n_layers <= 0 || c.n_heads <= 0 ||
            c.n_kv_heads <= 0 || c.head_dim <= 0 || c.n_heads % c.n_kv_heads)
            abort(); /* an accepted config sizes every buffer */
        if (c.head_dim <= 4096) {
            float *inv = malloc((size_t)c.head_dim / 2 * sizeof *inv + sizeof *inv);
            if (inv) ld_model_rope_inv_freq(&c, inv);
            free(inv);
        }
    }
    free(buf);
    return 0;
}
