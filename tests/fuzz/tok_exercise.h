/* tok_exercise.h - what the tokenizer fuzz targets do with a tokenizer that
 * loaded: encode a fixed text (code, CJK, emoji, digits, whitespace runs,
 * special token strings, invalid UTF-8) with every flag combination, require
 * every id to be in the vocabulary, decode the ids back; abort() on any
 * broken promise of tok.h, so that libFuzzer reports it. */
#ifndef LD_FUZZ_TOK_EXERCISE_H
#define LD_FUZZ_TOK_EXERCISE_H

#include <stdlib.h>

#include "replay/tokenizer/tok.h"

static const char ld_fuzz_tok_text[] =
    "Hello world! It's 3333333 o'clock;\tdon't   panic\n\n<|endoftext|> <|im_start|>user\n"
    "def f(x):\n    return x ** 2  # \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80 "
    "caf\xc3\xa9 cafe\xcc\x81 \xe1\xa0\x8e\xc2\x85 \xff\xfe\xe4\xb8 1,234.5 ab ab ab";

/* Exercises and frees `tok`. */
static void ld_fuzz_tok_exercise(ld_tok *tok)
{
    ld_error err;
    ld_error_clear(&err);
    for (unsigned flags = 0; flags < 4; flags++) {
        int32_t *ids = NULL;
        size_t n = 0, len = 0;
        if (ld_tok_encode(tok, ld_fuzz_tok_text, sizeof ld_fuzz_tok_text - 1, flags, &ids, &n, &err) != LD_OK)
            continue;
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
}

#endif
