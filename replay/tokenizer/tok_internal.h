/* tok_internal.h - the tokenizer's tables and the pieces of its pipeline
 * (tok_tables.c builds, tok_norm.c, tok_added.c, tok_pretok.c, tok_bpe.c,
 * tok_encode.c run, tok_decode.c decodes). */
#ifndef LD_TOK_INTERNAL_H
#define LD_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>

#include "tok_tables.h"

/* A growable array of ids. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;

/* A growable byte buffer. */
typedef struct tok_buf {
    char *v;
    size_t n, cap;
} tok_buf;

typedef struct tok_added {
    int32_t id;
    unsigned flags;
    const char *s; /* match form (normalized content for NORMALIZED ones) */
    size_t n;
} tok_added;

/* One set of added tokens matched leftmost-longest: by first byte, longest
 * first. */
typedef struct tok_trie {
    tok_added *tok; /* sorted by (first byte, length descending) */
    size_t n;
    char *pool;          /* the strings (owned) */
    uint32_t first[257]; /* tok[first[b] .. first[b+1]) start with byte b */
} tok_trie;

typedef struct tok_pre {
    ld_tok_pre_kind kind;
    ld_tok_behaviour behaviour;
    int invert, add_prefix_space, individual_digits;
    pcre2_code *re; /* Split, ByteLevel with use_regex; NULL otherwise */
} tok_pre;

/* The word cache: piece bytes -> ids, open addressing; cleared when full. */
typedef struct tok_cache {
    pthread_mutex_t lock;
    uint32_t *slot; /* 0 empty, else 1 + entry index */
    size_t mask;
    struct tok_cache_entry { uint64_t hash; uint32_t key_off, key_len, ids_off, n_ids; } *ent;
    size_t n_ent, cap_ent;
    tok_buf keys;
    tok_ids ids;
} tok_cache;

struct ld_tok {
    size_t n_ids;
    ld_tok_str *model;  /* per id: the model token's bytes (byte-level decoded) */
    ld_tok_str *dec;    /* per id: bytes decoding gives (added tokens win) */
    unsigned char *is_added;
    char *pool;
    /* vocabulary map: model token bytes -> id (open addressing, -1 empty) */
    int32_t *vmap;
    size_t vmask;
    int32_t byte_id[256]; /* the token of each single byte, -1 none */
    /* merges: (left << 32 | right) -> rank, new id; key UINT64_MAX = empty */
    struct tok_merge_slot { uint64_t key; int32_t rank, new_id; } *merge;
    size_t mmask;
    tok_trie raw_added, norm_added;
    ld_tok_norm *norm;
    size_t n_norm;
    tok_pre *pre;
    size_t n_pre;
    int32_t *prefix, *suffix;
    size_t n_prefix, n_suffix;
    int32_t unk_id;
    int ignore_merges;
    ld_tok_decoder decoder;
    tok_cache *cache;
};

/* Per-call state of an encode. */
typedef struct tok_run {
    const ld_tok *tok;
    unsigned flags;
    tok_ids out;
    tok_buf norm;        /* normalized text of the current segment */
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    struct tok_sym { int32_t id; int32_t prev, next; } *sym;
    size_t sym_cap;
    struct tok_merge { int32_t rank; int32_t pos; int32_t new_id; } *heap;
    size_t heap_cap;
    ld_error *err;
} tok_run;

ld_status ld_tok_ids_push(tok_ids *a, int32_t id);
ld_status ld_tok_ids_append(tok_ids *a, const int32_t *v, size_t n);
ld_status ld_tok_buf_append(tok_buf *b, const char *s, size_t n);
ld_status ld_tok_buf_reserve(tok_buf *b, size_t extra); /* room for b->n + extra */

/* tok_bytemap.c: GPT-2 bytes_to_unicode.  Converts a token string to its
 * bytes into `out` (room for n bytes); returns the length, or (size_t)-1
 * when a character is not one of the 256. */
size_t ld_tok_bytelevel_decode(const char *s, size_t n, char *out);
/* Decodes one UTF-8 character at s[0..n): its code point and length, or
 * -1 and length 1 for an invalid byte. */
int32_t ld_tok_utf8_next(const unsigned char *s, size_t n, size_t *len);

/* tok_tables.c */
uint64_t ld_tok_hash_bytes(const char *s, size_t n);
int32_t ld_tok_vocab_get(const ld_tok *t, const char *s, size_t n);
static inline int tok_merge_get(const ld_tok *t, int32_t a, int32_t b, int32_t *rank, int32_t *new_id)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & t->mmask;
    for (;; i = (i + 1) & t->mmask) {
        const struct tok_merge_slot *m = &t->merge[i];
        if (m->key == key) {
            *rank = m->rank;
            *new_id = m->new_id;
            return 1;
        }
        if (m->key == UINT64_MAX) return 0;
    }
}

/* tok_added.c */
ld_status ld_tok_trie_build(tok_trie *tr, const tok_added *tok, size_t n);
void ld_tok_trie_free(tok_trie *tr);
typedef ld_status (*tok_gap_fn)(tok_run *r, const char *s, size_t n);
/* Splits s[0..n) by the tokens of `tr`: each match's id goes to r->out,
 * each gap between matches to `gap`. */
ld_status ld_tok_added_split(tok_run *r, const tok_trie *tr, const char *s, size_t n, tok_gap_fn gap);

/* tok_norm.c: appends the normalized s[0..n) to `out` (invalid UTF-8 is
 * copied as it is). */
ld_status ld_tok_normalize(const ld_tok_norm *norm, size_t n_norm, const char *s, size_t n, tok_buf *out);

/* tok_regex.c: the PCRE2 form of an Oniguruma pattern (appended to out). */
ld_status ld_tok_regex_for_pcre2(const char *p, size_t n, tok_buf *out);

/* tok_pretok.c */
ld_status ld_tok_pre_compile(tok_pre *p, const ld_tok_pre_spec *spec, ld_error *err);
/* Runs pre-tokenizer steps [step, n_pre) over s[0..n) and BPE on each
 * final piece. */
ld_status ld_tok_pretokenize(tok_run *r, size_t step, const char *s, size_t n);

/* tok_bpe.c: appends the ids of one piece to r->out. */
ld_status ld_tok_bpe_piece(tok_run *r, const char *s, size_t n);
tok_cache *ld_tok_cache_new(void);
void ld_tok_cache_free(tok_cache *c);

#endif /* LD_TOK_INTERNAL_H */
