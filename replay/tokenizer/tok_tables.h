/* tok_tables.h - building a tokenizer from plain tables, for loaders
 * (tokenizer.json in tok_json.c; a GGUF vocabulary later).
 *
 * A loader describes the tokenizer with an ld_tok_spec whose strings it
 * owns; ld_tok_from_tables copies everything it keeps, so the spec may be
 * released as soon as it returns.  Token strings are in the model's own
 * form: for byte-level BPE the GPT-2 `bytes_to_unicode` characters ("Ġ" for
 * a space), as in tokenizer.json `model.vocab` and GGUF
 * `tokenizer.ggml.tokens`.  Added tokens are in plain text form (their
 * `content`).  A GGUF loader would map tokenizer.ggml.tokens -> tokens,
 * tokenizer.ggml.merges ("a b", split at the space) -> merges, token_type
 * CONTROL -> special added tokens and USER_DEFINED -> non-special added
 * tokens, tokenizer.ggml.pre -> pre-tokenizer steps (e.g. "gpt2": one
 * ByteLevel with use_regex), and add_bos_token/bos_token_id -> prefix.
 * Only byte-level BPE is built: `pre` must hold a ByteLevel step, and no
 * Split may follow it (LD_ERR_UNSUPPORTED otherwise).
 */
#ifndef LD_TOK_TABLES_H
#define LD_TOK_TABLES_H

#include "tok.h"

typedef struct ld_tok_str {
    const char *s; /* NULL = none */
    size_t n;
} ld_tok_str;

enum {
    LD_TOK_A_SPECIAL = 1u,
    LD_TOK_A_LSTRIP = 2u,
    LD_TOK_A_RSTRIP = 4u,
    LD_TOK_A_NORMALIZED = 8u, /* matched in the normalized text */
    LD_TOK_A_SINGLE_WORD = 16u
};

typedef struct ld_tok_added_spec {
    int32_t id;
    ld_tok_str content;
    unsigned flags; /* LD_TOK_A_* */
} ld_tok_added_spec;

typedef enum {
    LD_TOK_PRE_BYTELEVEL = 0, /* add_prefix_space, use_regex (GPT-2 regex) */
    LD_TOK_PRE_SPLIT,         /* pattern (regex or literal), behaviour, invert */
    LD_TOK_PRE_DIGITS         /* individual_digits */
} ld_tok_pre_kind;

typedef enum {
    LD_TOK_ISOLATED = 0,
    LD_TOK_REMOVED,
    LD_TOK_MERGED_WITH_PREVIOUS,
    LD_TOK_MERGED_WITH_NEXT,
    LD_TOK_CONTIGUOUS
} ld_tok_behaviour;

typedef struct ld_tok_pre_spec {
    ld_tok_pre_kind kind;
    ld_tok_str pattern;  /* Split: PCRE2 pattern, or the literal */
    int literal;         /* Split: pattern is a plain string */
    ld_tok_behaviour behaviour;
    int invert;
    int add_prefix_space; /* ByteLevel */
    int use_regex;        /* ByteLevel */
    int individual_digits;
} ld_tok_pre_spec;

typedef enum { LD_TOK_NFC = 0, LD_TOK_NFD, LD_TOK_NFKC, LD_TOK_NFKD } ld_tok_norm;

typedef enum {
    LD_TOK_DEC_BYTELEVEL = 0, /* GPT-2 byte mapping back to bytes */
    LD_TOK_DEC_NONE           /* HF without decoder: tokens joined by " " */
} ld_tok_decoder;

/* The GPT-2 pre-tokenizer regex of ByteLevel(use_regex=true). */
extern const char ld_tok_gpt2_regex[];

typedef struct ld_tok_spec {
    const ld_tok_str *tokens; /* model vocabulary by id; .s NULL = no token */
    size_t n_tokens;
    const ld_tok_str *merges; /* 2 * n_merges: left, right; rank order */
    size_t n_merges;
    const ld_tok_added_spec *added;
    size_t n_added;
    const ld_tok_norm *norm; /* applied in order */
    size_t n_norm;
    const ld_tok_pre_spec *pre; /* applied in order, each to every piece */
    size_t n_pre;
    const int32_t *prefix; /* ids added before the text with LD_TOK_ADD_SPECIAL */
    size_t n_prefix;
    const int32_t *suffix; /* ... and after it */
    size_t n_suffix;
    int32_t unk_id;    /* -1: unknown bytes are dropped, as HF without unk_token */
    int ignore_merges; /* a piece that is a whole token is that token */
    ld_tok_decoder decoder;
} ld_tok_spec;

/* Builds a tokenizer (see above).  LD_ERR_MISMATCH when a merge names a
 * token not in the vocabulary or whose concatenation is not in it;
 * LD_ERR_SYNTAX for a regex PCRE2 refuses; LD_ERR_USAGE for ids out of
 * range; LD_ERR_NOMEM. */
ld_status ld_tok_from_tables(const ld_tok_spec *spec, ld_tok **out, ld_error *err);

#endif /* LD_TOK_TABLES_H */
