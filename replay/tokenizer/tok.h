/* tok.h - byte-level BPE tokenizer (GPT-2, Llama-3, Qwen2, DeepSeek style),
 * as HF `tokenizers` encodes and decodes.
 *
 * A tokenizer is loaded from a HF tokenizer.json (tok_json.c) or built from
 * plain tables by another loader (ld_tok_from_tables in tok_tables.h, e.g.
 * from a GGUF vocabulary).  Encoding follows HF's pipeline: added tokens
 * are split out of the text first (those with normalized=false on the raw
 * text, then the others on the normalized text), the rest is normalized,
 * pre-tokenized (ByteLevel, Split, Digits, Sequence) and each piece merged
 * by BPE rank; LD_TOK_ADD_SPECIAL adds what the post-processor adds (HF
 * `add_special_tokens=True`).  Without LD_TOK_PARSE_SPECIAL, special added
 * tokens in the text are plain text (HF `encode_special_tokens=True`);
 * non-special added tokens are always split out, as in HF.
 *
 * Text that is not valid UTF-8 (which HF cannot receive) is encoded too:
 * invalid bytes never match a pre-tokenizer regex or an added token, so each
 * run of them becomes its own piece, and decoding gives the bytes back.
 * Decoding gives each token's exact bytes (special tokens included), with no
 * replacement of invalid UTF-8.
 *
 * Ownership: an ld_tok is read-only after loading and may be used by several
 * threads at once (its word cache is shared under a lock; a thread that finds
 * it busy does without).  Free with ld_tok_free.
 */
#ifndef LD_TOK_H
#define LD_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

typedef struct ld_tok ld_tok;

enum {
    LD_TOK_ADD_SPECIAL = 1u,  /* add BOS/EOS etc. as the post-processor says */
    LD_TOK_PARSE_SPECIAL = 2u /* special tokens written in the text are tokens */
};

/* Loads `path`: a tokenizer.json, a GGUF file (by its magic), or a
 * directory holding a tokenizer.json or else a single *.gguf.  LD_ERR_IO
 * (cannot read; err->path = path), LD_ERR_SYNTAX (bad JSON or regex),
 * LD_ERR_UNSUPPORTED (a model, normalizer, pre-tokenizer, post-processor or
 * decoder type not handled: the message names it), LD_ERR_MISMATCH (a merge
 * or token refers to a token not in the vocabulary). */
ld_status ld_tok_load(const char *path, ld_tok **out, ld_error *err);

/* From a GGUF file's vocabulary (tokenizer.ggml.*: byte-level BPE with a
 * pre-tokenizer llama.cpp names, see tok_gguf.c); errors as ld_tok_load,
 * plus the GGUF reader's. */
ld_status ld_tok_load_gguf(const char *path, ld_tok **out, ld_error *err);
/* The same from a GGUF file in memory (`buf` need not outlive the call). */
ld_status ld_tok_load_gguf_memory(const void *buf, size_t len, ld_tok **out, ld_error *err);

/* The same from the JSON text itself (`len` bytes, no NUL needed). */
ld_status ld_tok_load_json(const char *json, size_t len, ld_tok **out, ld_error *err);

/* Encodes `len` bytes of `text`.  *ids (malloc'd, caller frees; never NULL
 * on success) receives *n token ids.  LD_ERR_LIMIT when a pre-tokenizer
 * regex exceeds PCRE2's match limit; LD_ERR_NOMEM. */
ld_status ld_tok_encode(const ld_tok *tok, const char *text, size_t len, unsigned flags,
                        int32_t **ids, size_t *n, ld_error *err);

/* Decodes `n` ids into *out (malloc'd, NUL-terminated for convenience,
 * *len bytes without the NUL).  LD_ERR_USAGE for an id that is not in the
 * vocabulary (err->offset = its index). */
ld_status ld_tok_decode(const ld_tok *tok, const int32_t *ids, size_t n, char **out,
                        size_t *len, ld_error *err);

/* Number of ids (largest id + 1, added tokens included). */
size_t ld_tok_n_ids(const ld_tok *tok);

/* The id of the token (model or added) whose decoded bytes are exactly
 * `s[0..n)`, or -1.  An added token wins over a model token. */
int32_t ld_tok_find(const ld_tok *tok, const char *s, size_t n);

void ld_tok_free(ld_tok *tok);

#endif /* LD_TOK_H */
