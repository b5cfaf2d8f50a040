/* tok_gguf.c - a tokenizer from a GGUF vocabulary (the tokenizer.ggml.*
 * keys llama.cpp writes), built with ld_tok_from_tables.
 *
 * tokenizer.ggml.model must be "gpt2" (byte-level BPE).  tokenizer.ggml.pre
 * names the pre-tokenizer; its steps are those of the model's own
 * tokenizer.json (regexes quoted in ../shared/tokenizers/README.md §3, the
 * data of llama.cpp's src/llama-vocab.cpp), so that ids come out as HF
 * tokenizers gives them.  Token types: CONTROL (3) tokens are special added
 * tokens, USER_DEFINED (4) ones plain added tokens matched in the
 * normalized text, as HF's defaults for the two kinds are.  With
 * LD_TOK_ADD_SPECIAL, the BOS is put first when tokenizer.ggml.add_bos_token
 * says so (and EOS last for add_eos_token).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/formats/gguf.h"
#include "tok_tables.h"

enum { GGUF_TOKEN_CONTROL = 3, GGUF_TOKEN_USER_DEFINED = 4 };

#define DIGITS NULL /* Digits(individual_digits=true) */
#define CJK_RANGES "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+"

/* A pre-tokenizer: Split(Isolated) / Digits steps then ByteLevel, whose
 * GPT-2 regex is used when `steps` is empty or `gpt2_regex` is set. */
typedef struct pre_def {
    const char *names[4];      /* tokenizer.ggml.pre values */
    const char *steps[6];      /* regexes; DIGITS for a Digits step; NULL-ended */
    int n_steps;
    int nfc, ignore_merges, gpt2_regex;
} pre_def;

static const pre_def pre_defs[] = {
    { { "gpt-2", "gpt2", "default", NULL }, { NULL }, 0, 0, 0, 0 },
    /* SmolLM / SmolLM2: Digits(individual_digits) then ByteLevel(use_regex) */
    { { "smollm", NULL }, { DIGITS }, 1, 0, 0, 1 },
    { { "llama-bpe", "llama3", "llama-v3", NULL },
      { "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
        "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" }, 1, 0, 1, 0 },
    { { "qwen2", NULL },
      { "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
        "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" }, 1, 1, 0, 0 },
    { { "deepseek-v3", NULL },
      { "\\p{N}{1,3}", "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\x{d}\\x{a}\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
        "| ?[\\p{P}\\p{S}]+[\\x{d}\\x{a}]*|\\s*[\\x{d}\\x{a}]+|\\s+(?!\\S)|\\s+" }, 3, 0, 0, 0 },
    { { "deepseek-llm", NULL },
      { "[\\x{d}\\x{a}]",
        "\\s?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}\\x{1c4}-\\x{293}"
        "\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}\\x{37f}\\x{386}\\x{388}-\\x{38a}"
        "\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}"
        "\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}"
        "\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}"
        "\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}"
        "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}"
        "\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}"
        "\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}"
        "\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}"
        "\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}"
        "\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}"
        "\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}"
        "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}"
        "\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+",
        "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+",
        "\\s+$", CJK_RANGES, DIGITS }, 6, 0, 0, 0 },
    { { "deepseek-coder", NULL },
      { "[\\x{d}\\x{a}]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_RANGES, DIGITS }, 5, 0, 0, 0 },
};

static const pre_def *pre_def_of(ld_gguf_str name)
{
    for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++)
        for (size_t k = 0; k < 4 && pre_defs[i].names[k]; k++)
            if (ld_gguf_str_eq(name, pre_defs[i].names[k])) return &pre_defs[i];
    return NULL;
}

/* The pre-tokenizer steps of `d` into pre[] (room for 7); returns the count. */
static size_t pre_steps(const pre_def *d, ld_tok_pre_spec *pre)
{
    size_t n = 0;
    for (int i = 0; i < d->n_steps; i++) {
        memset(&pre[n], 0, sizeof pre[n]);
        if (!d->steps[i]) {
            pre[n].kind = LD_TOK_PRE_DIGITS;
            pre[n].individual_digits = 1;
        } else {
            pre[n].kind = LD_TOK_PRE_SPLIT;
            pre[n].pattern = (ld_tok_str){ d->steps[i], strlen(d->steps[i]) };
            pre[n].behaviour = LD_TOK_ISOLATED;
        }
        n++;
    }
    memset(&pre[n], 0, sizeof pre[n]);
    pre[n].kind = LD_TOK_PRE_BYTELEVEL;
    pre[n].use_regex = d->n_steps == 0 || d->gpt2_regex;
    return n + 1;
}

/* The tables of a GGUF vocabulary, borrowed from the mapping (strings) or
 * owned here (arrays freed by vocab_free). */
typedef struct vocab {
    ld_tok_str *tokens;
    ld_tok_str *merges;       /* 2 per merge */
    ld_tok_added_spec *added;
    size_t n_tokens, n_merges, n_added;
} vocab;

static void vocab_free(vocab *v)
{
    free(v->tokens);
    free(v->merges);
    free(v->added);
}

static ld_status read_tokens(const ld_gguf *g, vocab *v, ld_error *err)
{
    const ld_gguf_str *toks;
    uint64_t n;
    LD_TRY(ld_gguf_get_str_array(g, "tokenizer.ggml.tokens", &toks, &n, err));
    const ld_gguf_kv *types = ld_gguf_find(g, "tokenizer.ggml.token_type");
    const ld_gguf_array *ta = types && types->value.type == LD_GGUF_ARRAY ? &types->value.v.a : NULL;
    if (ta && ta->n != n)
        return LD_FAIL(err, LD_ERR_MISMATCH, types->offset,
                       "tokenizer.ggml.token_type has %llu items for %llu tokens",
                       (unsigned long long)ta->n, (unsigned long long)n);
    v->tokens = calloc(n ? n : 1, sizeof *v->tokens);
    v->added = calloc(n ? n : 1, sizeof *v->added);
    if (!v->tokens || !v->added) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the vocabulary");
    for (uint64_t i = 0; i < n; i++) {
        v->tokens[i] = (ld_tok_str){ toks[i].ptr, toks[i].len };
        int64_t type = 1;
        if (ta && !ld_gguf_array_int(g, ta, i, &type))
            return LD_FAIL(err, LD_ERR_MISMATCH, types->offset, "tokenizer.ggml.token_type is not integers");
        if (type == GGUF_TOKEN_CONTROL || type == GGUF_TOKEN_USER_DEFINED)
            v->added[v->n_added++] = (ld_tok_added_spec){
                (int32_t)i, { toks[i].ptr, toks[i].len },
                type == GGUF_TOKEN_CONTROL ? LD_TOK_A_SPECIAL : LD_TOK_A_NORMALIZED };
    }
    v->n_tokens = n;
    return LD_OK;
}

static ld_status read_merges(const ld_gguf *g, vocab *v, ld_error *err)
{
    const ld_gguf_str *m;
    uint64_t n;
    LD_TRY(ld_gguf_get_str_array(g, "tokenizer.ggml.merges", &m, &n, err));
    v->merges = calloc(n ? 2 * n : 1, sizeof *v->merges);
    if (!v->merges) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the merges");
    for (uint64_t i = 0; i < n; i++) {
        const char *sp = memchr(m[i].ptr, ' ', m[i].len);
        if (!sp || sp == m[i].ptr)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "tokenizer.ggml.merges[%llu] is not \"a b\"",
                           (unsigned long long)i);
        size_t left = (size_t)(sp - m[i].ptr);
        v->merges[2 * i] = (ld_tok_str){ m[i].ptr, left };
        v->merges[2 * i + 1] = (ld_tok_str){ sp + 1, m[i].len - left - 1 };
    }
    v->n_merges = n;
    return LD_OK;
}

/* 1 when the bool key is present and true. */
static int flag(const ld_gguf *g, const char *key)
{
    const ld_gguf_kv *kv = ld_gguf_find(g, key);
    return kv && kv->value.type == LD_GGUF_BOOL && kv->value.v.u;
}

/* The id at `key` when `flag_key` is true, into ids[*n]. */
static void special_id(const ld_gguf *g, const char *flag_key, const char *key, size_t n_tokens,
                       int32_t *ids, size_t *n)
{
    int64_t id;
    if (flag(g, flag_key) && ld_gguf_get_int(g, key, &id, NULL) == LD_OK && id >= 0 &&
        (uint64_t)id < n_tokens)
        ids[(*n)++] = (int32_t)id;
}

static ld_status build(const ld_gguf *g, ld_tok **out, ld_error *err)
{
    ld_gguf_str model, pre_name = { "default", 7 };
    LD_TRY(ld_gguf_get_str(g, "tokenizer.ggml.model", &model, err));
    if (!ld_gguf_str_eq(model, "gpt2"))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "tokenizer.ggml.model '%.*s': only byte-level BPE ('gpt2') is supported",
                       (int)(model.len > 40 ? 40 : model.len), model.ptr);
    if (ld_gguf_find(g, "tokenizer.ggml.pre")) LD_TRY(ld_gguf_get_str(g, "tokenizer.ggml.pre", &pre_name, err));
    const pre_def *d = pre_def_of(pre_name);
    if (!d)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tokenizer.ggml.pre '%.*s' is not supported",
                       (int)(pre_name.len > 40 ? 40 : pre_name.len), pre_name.ptr);
    vocab v = { 0 };
    ld_status st = read_tokens(g, &v, err);
    if (st == LD_OK) st = read_merges(g, &v, err);
    if (st == LD_OK) {
        ld_tok_pre_spec pre[8];
        ld_tok_norm nfc = LD_TOK_NFC;
        int32_t prefix[1], suffix[1];
        size_t n_prefix = 0, n_suffix = 0;
        special_id(g, "tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", v.n_tokens, prefix, &n_prefix);
        special_id(g, "tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id", v.n_tokens, suffix, &n_suffix);
        ld_tok_spec spec = { v.tokens, v.n_tokens, v.merges, v.n_merges, v.added, v.n_added,
                             d->nfc ? &nfc : NULL, d->nfc ? 1 : 0, pre, pre_steps(d, pre),
                             prefix, n_prefix, suffix, n_suffix, -1, d->ignore_merges,
                             LD_TOK_DEC_BYTELEVEL };
        st = ld_tok_from_tables(&spec, out, err);
    }
    vocab_free(&v);
    return st;
}

ld_status ld_tok_load_gguf_memory(const void *buf, size_t len, ld_tok **out, ld_error *err)
{
    *out = NULL;
    ld_gguf *g = NULL;
    LD_TRY(ld_gguf_parse(buf, len, &g, err));
    ld_status st = build(g, out, err);
    ld_gguf_close(g);
    return st;
}

ld_status ld_tok_load_gguf(const char *path, ld_tok **out, ld_error *err)
{
    *out = NULL;
    ld_gguf *g = NULL;
    LD_TRY(ld_gguf_open(path, &g, err));
    ld_status st = build(g, out, err);
    ld_gguf_close(g);
    if (st != LD_OK && err) err->path = path;
    return st;
}
