/* fuzz_template.c - libFuzzer target for the template interpreter
 * (replay/template/jinja/): compiles the input as a template and renders it with a
 * small context under tight sandbox limits; must never crash, hang or leak.
 * The corpus in tests/fuzz/corpus/template/ replays as the test
 * fuzz.template. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_tpl *t = NULL;
    ld_error err;
    if (ld_tpl_compile((const char *)data, size, &t, &err) != LD_OK) return 0;
    ld_arena a;
    ld_arena_init(&a, 1 << 20);
    ld_tpl_value *ctx = ld_tpl_value_dict(&a), *msgs = ld_tpl_value_list(&a), *m = ld_tpl_value_dict(&a);
    if (ctx && msgs && m) {
        ld_tpl_dict_set(&a, m, "role", ld_tpl_value_str(&a, "user", 4));
        ld_tpl_dict_set(&a, m, "content", ld_tpl_value_str(&a, "hi {{x}}", 8));
        ld_tpl_list_push(&a, msgs, m);
        ld_tpl_dict_set(&a, ctx, "messages", msgs);
        ld_tpl_dict_set(&a, ctx, "add_generation_prompt", ld_tpl_value_bool(&a, 1));
        ld_tpl_dict_set(&a, ctx, "bos_token", ld_tpl_value_str(&a, "<s>", 3));
        ld_tpl_limits lim = {16, 20000, 1 << 20, 64 << 20, NULL, NULL};
        char *out = NULL;
        size_t n = 0;
        if (ld_tpl_render(t, ctx, &lim, &out, &n, &err) == LD_OK && strlen(out) > n) abort();
        free(out);
    }
    ld_arena_release(&a);
    ld_tpl_free(t);
    return 0;
}
