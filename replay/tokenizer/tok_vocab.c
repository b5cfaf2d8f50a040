/* tok_vocab.c - looking a token's bytes up in the vocabulary's hash map
 * (built by tok_tables.c, read by the BPE merges).  A leaf. */
#include <string.h>

#include "tok_internal.h"

uint64_t ld_tok_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

int32_t ld_tok_vocab_get(const ld_tok *t, const char *s, size_t n)
{
    for (size_t i = ld_tok_hash_bytes(s, n) & t->vmask;; i = (i + 1) & t->vmask) {
        int32_t id = t->vmap[i];
        if (id < 0) return -1;
        if (t->model[id].n == n && memcmp(t->model[id].s, s, n) == 0) return id;
    }
}
