/* fuzz_dsenc.c - libFuzzer target for the DeepSeek-V3.2 / V4 prompt encoders
 * (replay/template/deepseek/dsenc*.c): parses the input as a JSON chat-completions request and
 * renders it with both variants, with and without the generation prompt;
 * must never crash, hang or leak, and a rendered prompt must be as long as
 * reported.  The corpus in tests/fuzz/corpus/dsenc/ replays as the test
 * fuzz.dsenc. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/deepseek/dsenc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *req = cJSON_ParseWithLength((const char *)data, size);
    if (!req) return 0;
    for (int v = LD_DSENC_V32; v <= LD_DSENC_V4; v++) {
        for (int gen = 0; gen <= 1; gen++) {
            char *out = NULL;
            size_t n = 0;
            ld_error err;
            ld_status s = ld_dsenc_render((ld_dsenc_variant)v, req, gen, &out, &n, &err);
            if (s == LD_OK && (!out || strlen(out) != n)) abort();
            if (s != LD_OK && out) abort();
            free(out);
        }
    }
    cJSON_Delete(req);
    return 0;
}
