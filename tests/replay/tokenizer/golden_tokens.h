/* golden_tokens.h - bos_token / eos_token of each shared template, as the
 * table of ../shared/templates/goldens/README.md gives them (matched by
 * name, case-insensitively; an "orig__" prefix is ignored).  NULL = the
 * model has none.  Used by the tests that render the shared templates. */
#ifndef LD_TEST_GOLDEN_TOKENS_H
#define LD_TEST_GOLDEN_TOKENS_H

#include <string.h>

static inline void ld_golden_tokens(const char *name, const char **bos, const char **eos)
{
    const char *n = strncmp(name, "orig__", 6) == 0 ? name + 6 : name;
    char low[256];
    size_t i;
    for (i = 0; n[i] && i < sizeof low - 1; i++)
        low[i] = (char)((n[i] >= 'A' && n[i] <= 'Z') ? n[i] + 32 : n[i]);
    low[i] = 0;
    *bos = *eos = NULL;
    if (strstr(low, "deepseek")) *bos = "<｜begin▁of▁sentence｜>", *eos = "<｜end▁of▁sentence｜>";
    else if (strstr(low, "qwen")) *eos = "<|im_end|>";
    else if (strstr(low, "llama")) *bos = "<|begin_of_text|>", *eos = "<|eot_id|>";
    else if (strstr(low, "mistral") || strstr(low, "ministral")) *bos = "<s>", *eos = "</s>";
    else if (strstr(low, "gpt-oss")) *bos = "<|startoftext|>", *eos = "<|return|>";
    else if (strstr(low, "kimi")) *bos = "[BOS]", *eos = "[EOS]";
    else if (strstr(low, "glm")) *eos = "<|endoftext|>";
    else if (strstr(low, "gemma")) *bos = "<bos>", *eos = "<eos>";
    else if (strstr(low, "phi")) *bos = "<s>", *eos = "<|endoftext|>";
}

#endif
