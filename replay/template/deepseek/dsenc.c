/* dsenc.c - ld_dsenc_render: SGLang's request preprocessing
 * (dsenc_prep.c), then the format encoder of the variant (dsenc_v32.c,
 * dsenc_v4.c), then the continue_final_message prefix, which SGLang appends
 * after the encoded prompt. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "dsenc.h"
#include "dsenc_internal.h"

ld_status ld_dsenc_render(ld_dsenc_variant variant, const cJSON *request, int add_generation_prompt, char **out,
                          size_t *out_len, ld_error *err)
{
    if (!out || !out_len) return LD_FAIL(err, LD_ERR_USAGE, 0, "dsenc: no output pointers");
    *out = NULL;
    *out_len = 0;
    if (variant != LD_DSENC_V32 && variant != LD_DSENC_V4)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "dsenc: unknown variant %d", (int)variant);
    ds_conv c;
    ds_buf b = { 0 };
    ld_status s = ld_dsenc_prepare(request, variant, &c, err);
    if (s == LD_OK)
        s = variant == LD_DSENC_V32 ? ld_dsenc_encode_v32(&c, add_generation_prompt, &b, err)
                                    : ld_dsenc_encode_v4(&c, add_generation_prompt, &b, err);
    if (s == LD_OK && c.prefix) ld_dsenc_puts(&b, c.prefix);
    if (s == LD_OK && b.failed) s = LD_FAIL(err, LD_ERR_NOMEM, 0, "dsenc: out of memory");
    ld_dsenc_conv_free(&c);
    if (s != LD_OK) {
        free(b.p);
        return s;
    }
    *out = b.p;
    *out_len = b.len;
    return LD_OK;
}
