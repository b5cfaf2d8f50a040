/* fuzz_tokgguf.c - libFuzzer target for the GGUF vocabulary loader and encoder
 * (replay/tok_*.c).  Loads the input as a GGUF file with a vocabulary; when it loads,
 * encodes a fixed text (code, CJK, emoji, digits, whitespace runs, special
 * token strings, invalid UTF-8) with every flag combination, decodes the ids
 * and requires that every id is in the vocabulary; must never crash, hang or
 * read outside the input.  The corpus in tests/fuzz/corpus/tokgguf/ (tools/gen_tok_gguf_seeds.py) replays
 * as the plain test fuzz.tokgguf. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"

static const char text[] =
    "Hello world! It's 3333333 o'clock;\tdon't   panic\n\n<|endoftext|> <|im_start|>user\n"
    "def f(x):\n    return x ** 2  # \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80 "
    "caf\xc3\xa9 cafe\xcc\x81 \xe1\xa0\x8e\xc2\x85 \xff\xfe\xe4\xb8 1,234.5 ab ab ab";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1); /* exact size: overreads are caught */
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    ld_tok *tok = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tok_load_gguf_memory(buf, size, &tok, &err) == LD_OK) {
        for (unsigned flags = 0; flags < 4; flags++) {
            int32_t *ids = NULL;
            size_t n = 0, len = 0;
            if (ld_tok_encode(tok, text, sizeof text - 1, flags, &ids, &n, &err) != LD_OK) continue;
            if (!ids) abort(); /* never NULL on success */
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || (size_t)ids[i] >= ld_tok_n_ids(tok)) abort();
            char *out = NULL;
            if (ld_tok_decode(tok, ids, n, &out, &len, &err) == LD_OK) {
                if (out[len] != '\0') abort();
            } else if (err.code != LD_ERR_USAGE) {
                abort(); /* only an id without a token may fail */
            }
            free(out);
            free(ids);
        }
        ld_tok_free(tok);
    } else if (tok) {
        abort(); /* no tokenizer on failure */
    }
    free(buf);
    return 0;
}
