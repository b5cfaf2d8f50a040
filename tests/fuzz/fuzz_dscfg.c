/* fuzz_dscfg.c - libFuzzer target for engine/models/deepseek_v3/ds_config.c.  Parses the
 * input as a DeepSeek model's config.json; when it parses, the
 * configuration must size every buffer (positive dimensions, a router whose
 * groups divide the experts and whose top-k fits in the groups kept) and
 * the RoPE inverse frequencies, the cos/sin factor and the softmax scale are
 * computed; must never crash or read outside the input.  The corpus in
 * tests/fuzz/corpus/dscfg/ (the tiny checkpoints' config.json files of
 * testdata/models/deepseek-*) replays as the plain test fuzz.dscfg. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/deepseek_v3/ds_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1); /* exact size: overreads are caught */
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    (void)ld_ds_config_detect(buf, size);
    ld_ds_config c;
    if (ld_ds_config_parse(buf, size, &c, NULL) == LD_OK) {
        if (c.vocab <= 0 || c.hidden <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.qk_rope <= 0 ||
            c.qk_rope % 2 || c.qk_nope < 0 || c.v_head <= 0)
            abort(); /* an accepted config sizes every buffer */
        if (c.n_routed > 0 && (c.n_group <= 0 || c.n_routed % c.n_group || c.topk_group > c.n_group ||
                               c.top_k > c.n_routed / c.n_group * c.topk_group))
            abort(); /* the router can always pick top_k experts */
        if (c.qk_rope <= 4096) {
            float *inv = malloc((size_t)c.qk_rope / 2 * sizeof *inv + sizeof *inv);
            if (inv) ld_ds_rope_inv_freq(&c, inv);
            free(inv);
        }
        if (!isfinite(ld_ds_rope_attn_factor(&c)) || !isfinite(ld_ds_softmax_scale(&c))) abort();
    }
    free(buf);
    return 0;
}
