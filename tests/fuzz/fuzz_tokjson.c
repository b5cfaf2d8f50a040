/* fuzz_tokjson.c - libFuzzer target for the tokenizer loader and encoder
 * (replay/tokenizer/tok_*.c).  Loads the input as a tokenizer.json; when it loads,
 * encodes a fixed text (code, CJK, emoji, digits, whitespace runs, special
 * token strings, invalid UTF-8) with every flag combination, decodes the ids
 * and requires that every id is in the vocabulary; must never crash, hang or
 * read outside the input.  The corpus in tests/fuzz/corpus/tokjson/ replays
 * as the plain test fuzz.tokjson. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok_exercise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1); /* exact size: overreads are caught */
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    ld_tok *tok = NULL;
    if (ld_tok_load_json(buf, size, &tok, NULL) == LD_OK) ld_fuzz_tok_exercise(tok);
    else if (tok) abort(); /* no tokenizer on failure */
    free(buf);
    return 0;
}
