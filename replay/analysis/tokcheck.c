/* tokcheck.c - logged ids against the logged prompt text (tokcheck.h). */
#include "tokcheck.h"

#include <stdlib.h>
#include <string.h>

enum { CONTEXT_IDS = 6, EXCERPT_CHARS = 60 };

static ld_status add_info(ld_findings *out, ld_arena *arena, const char *kind, const char *why,
                          ld_error *err)
{
    return ld_findings_add(out, arena, kind, LD_SEV_INFO, -1, "%s", why)
               ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
}

/* Why the text cannot be compared with ids, or NULL. */
static const char *text_unusable(const ld_text *t)
{
    if (!t->bytes || !(t->flags & LD_TEXT_PRESENT)) return "the log holds no prompt text";
    if (t->flags & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED | LD_TEXT_HEAD_ONLY))
        return "the logger cut the prompt text";
    return NULL;
}

static size_t common_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* ids[from, to) decoded, as an excerpt in the arena ("" when nothing). */
static const char *decoded(const ld_tok *tok, const int32_t *ids, size_t n, size_t from, size_t to,
                           ld_arena *arena)
{
    if (to > n) to = n;
    if (from >= to) return "";
    char *s = NULL;
    size_t len = 0;
    if (ld_tok_decode(tok, ids + from, to - from, &s, &len, NULL) != LD_OK) return "(undecodable)";
    const char *e = ld_excerpt(arena, s, len, 0, EXCERPT_CHARS);
    free(s);
    return e;
}

/* What a difference at id k looks like, for the detail. */
static const char *diagnosis(const ld_tok *tok, const ld_text *text, const int32_t *logged, size_t nl,
                             size_t k)
{
    if (k == 1 && nl >= 2 && logged[0] == logged[1])
        return "the ids begin with the same token twice: a double BOS (the template's BOS text "
               "and the tokenizer's own)";
    char *s = NULL;
    size_t len = 0;
    if (ld_tok_decode(tok, logged, nl, &s, &len, NULL) != LD_OK) return "";
    int same_text = len == text->len && !memcmp(s, text->bytes, len);
    free(s);
    return same_text ? "the ids decode to the logged text, but it was tokenized otherwise: a special "
                       "token spelled out in the text taken as text on one side and as a control "
                       "token on the other, or another tokenizer version"
                     : "decoding the logged ids does not give the logged text: the model was fed "
                       "something else than the prompt the log shows";
}

static ld_status compare(const ld_tok *tok, const ld_request *r, const int32_t *logged, size_t nl,
                         ld_arena *arena, ld_findings *out, ld_error *err)
{
    int32_t *plain = NULL, *special = NULL;
    size_t np = 0, ns = 0;
    ld_error e;
    ld_error_clear(&e);
    ld_status st = ld_tok_encode(tok, r->prompt.bytes, r->prompt.len, LD_TOK_PARSE_SPECIAL, &plain, &np, &e);
    if (st == LD_OK)
        st = ld_tok_encode(tok, r->prompt.bytes, r->prompt.len, LD_TOK_PARSE_SPECIAL | LD_TOK_ADD_SPECIAL,
                           &special, &ns, &e);
    if (st != LD_OK) {
        free(plain);
        if (st == LD_ERR_NOMEM) return LD_FAIL(err, st, 0, "%s", e.msg);
        return add_info(out, arena, LD_K_TEMPLATE_TOKENS_NOT_CHECKED, e.msg, err);
    }
    size_t kp = common_ids(logged, nl, plain, np), ks = common_ids(logged, nl, special, ns);
    int use_special = ks > kp || (ks == kp && ns == nl && np != nl);
    const int32_t *enc = use_special ? special : plain;
    size_t ne = use_special ? ns : np, k = use_special ? ks : kp;
    ld_finding *f;
    if (k == nl && k == ne) {
        f = ld_findings_add(out, arena, LD_K_TEMPLATE_TOKENS_FAITHFUL, LD_SEV_INFO, -1,
                            "the %zu logged input ids are the logged prompt, tokenized%s", nl,
                            use_special && ns != np ? " with the tokenizer's own BOS/EOS" : "");
    } else {
        f = ld_findings_add(out, arena, LD_K_TEMPLATE_TOKEN_MISMATCH, LD_SEV_ERROR, -1,
                            "input id %zu differs: logged %d, the logged prompt tokenizes to %d (%zu "
                            "logged ids, %zu re-encoded): %s", k, k < nl ? logged[k] : -1,
                            k < ne ? enc[k] : -1, nl, ne, diagnosis(tok, &r->prompt, logged, nl, k));
        if (f) {
            size_t from = k > CONTEXT_IDS ? k - CONTEXT_IDS : 0;
            f->first_diff = (int64_t)k;
            f->expected_len = (int64_t)ne;
            f->actual_len = (int64_t)nl;
            f->prompt_excerpt = decoded(tok, logged, nl, from, k + CONTEXT_IDS, arena);
            f->array_excerpt = decoded(tok, enc, ne, from, k + CONTEXT_IDS, arena);
        }
    }
    free(plain);
    free(special);
    return f ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
}

ld_status ld_tokcheck(const ld_tok *tok, const ld_request *r, ld_arena *arena, ld_findings *out,
                      ld_error *err)
{
    const char *why = text_unusable(&r->prompt);
    if (why) return add_info(out, arena, LD_K_TEMPLATE_TOKENS_NOT_CHECKED, why, err);
    int32_t *ids = NULL;
    size_t n = 0;
    ld_error e;
    ld_error_clear(&e);
    ld_status st = ld_request_input_ids(r, &ids, &n, &e);
    if (st == LD_ERR_NOMEM) return LD_FAIL(err, st, 0, "%s", e.msg);
    if (st != LD_OK) return add_info(out, arena, LD_K_TEMPLATE_TOKENS_NOT_CHECKED, e.msg, err);
    for (size_t i = 0; i < n; i++)
        if ((size_t)ids[i] >= ld_tok_n_ids(tok)) {
            int32_t bad = ids[i];
            free(ids);
            return ld_findings_add(out, arena, LD_K_TEMPLATE_TOKENS_NOT_CHECKED, LD_SEV_INFO, -1,
                                   "input id %zu (%d) is outside this tokenizer's vocabulary: "
                                   "another model's tokenizer?", i, bad)
                       ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
        }
    st = compare(tok, r, ids, n, arena, out, err);
    free(ids);
    return st;
}
