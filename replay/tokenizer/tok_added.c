/* tok_added.c - splitting added tokens out of the text, as HF's
 * AddedVocabulary does: leftmost-longest matches, scanned left to right
 * without overlap; a match is then dropped when it is a special token and
 * special tokens are not parsed, or single_word and touching a word
 * character; lstrip/rstrip take the whitespace on that side into the token.
 * "Whitespace" and "word character" are Rust regex's \s and \w. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"

static int cmp_added(const void *pa, const void *pb)
{
    const tok_added *a = pa, *b = pb;
    unsigned ca = (unsigned char)a->s[0], cb = (unsigned char)b->s[0];
    if (ca != cb) return ca < cb ? -1 : 1;
    if (a->n != b->n) return a->n > b->n ? -1 : 1;
    return a->s < b->s ? -1 : a->s > b->s; /* same length: the first given first */
}

ld_status ld_tok_trie_build(tok_trie *tr, const tok_added *tok, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += tok[i].n;
    memset(tr, 0, sizeof *tr);
    tr->tok = malloc((n + 1) * sizeof *tr->tok);
    char *pool = malloc(len + 1);
    if (!tr->tok || !pool) {
        free(tr->tok);
        free(pool);
        tr->tok = NULL;
        return LD_ERR_NOMEM;
    }
    tr->n = n;
    tr->pool = pool;
    for (size_t i = 0, at = 0; i < n; at += tok[i].n, i++) { /* pool order = given order */
        tr->tok[i] = tok[i];
        tr->tok[i].s = memcpy(pool + at, tok[i].s, tok[i].n);
    }
    qsort(tr->tok, n, sizeof *tr->tok, cmp_added);
    size_t k = 0;
    for (unsigned b = 0; b <= 256; b++) {
        while (k < n && (unsigned char)tr->tok[k].s[0] < b) k++;
        tr->first[b] = (uint32_t)k;
    }
    return LD_OK;
}

void ld_tok_trie_free(tok_trie *tr)
{
    free(tr->pool);
    free(tr->tok);
    tr->pool = NULL;
    tr->tok = NULL;
}

static int is_space(int32_t c)
{
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static int is_word(int32_t c)
{
    if (c < 0) return 0;
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D) return 1;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

/* The character that ends s[0..n) (n > 0), and where it starts. */
static int32_t last_char(const char *s, size_t n, size_t *start)
{
    size_t i = n - 1;
    while (i > 0 && n - i < 4 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    size_t k;
    int32_t c = ld_tok_utf8_next((const unsigned char *)s + i, n - i, &k);
    if (i + k != n) { /* not one whole character: the last byte alone */
        c = -1;
        i = n - 1;
    }
    *start = i;
    return c;
}

static size_t space_before(const char *s, size_t n)
{
    size_t end = n, at;
    while (end > 0 && is_space(last_char(s, end, &at))) end = at;
    return n - end;
}

static size_t space_after(const char *s, size_t n)
{
    size_t i = 0, k;
    while (i < n && is_space(ld_tok_utf8_next((const unsigned char *)s + i, n - i, &k))) i += k;
    return i;
}

/* The longest token of `tr` at s[i..n), or NULL. */
static const tok_added *match_at(const tok_trie *tr, const char *s, size_t i, size_t n)
{
    unsigned b = (unsigned char)s[i];
    for (uint32_t k = tr->first[b]; k < tr->first[b + 1]; k++) {
        const tok_added *a = &tr->tok[k];
        if (a->n <= n - i && memcmp(a->s, s + i, a->n) == 0) return a;
    }
    return NULL;
}

/* Is the match s[start..stop) kept, and how far does it reach? */
static int accept(const tok_run *r, const tok_added *a, const char *s, size_t n, size_t lo,
                  size_t *start, size_t *stop)
{
    if ((a->flags & LD_TOK_A_SPECIAL) && !(r->flags & LD_TOK_PARSE_SPECIAL)) return 0;
    if (a->flags & LD_TOK_A_SINGLE_WORD) {
        size_t at, k;
        if (*start > 0 && is_word(last_char(s, *start, &at))) return 0;
        if (*stop < n && is_word(ld_tok_utf8_next((const unsigned char *)s + *stop, n - *stop, &k))) return 0;
    }
    if (a->flags & LD_TOK_A_LSTRIP) {
        size_t ns = *start - space_before(s, *start);
        *start = ns > lo ? ns : lo;
    }
    if (a->flags & LD_TOK_A_RSTRIP) *stop += space_after(s + *stop, n - *stop);
    return 1;
}

ld_status ld_tok_added_split(tok_run *r, const tok_trie *tr, const char *s, size_t n, tok_gap_fn gap)
{
    size_t done = 0; /* end of the last kept match */
    for (size_t i = 0; tr->n && i < n;) {
        if (tr->first[(unsigned char)s[i]] == tr->first[(unsigned char)s[i] + 1]) {
            i++;
            continue;
        }
        const tok_added *a = match_at(tr, s, i, n);
        if (!a) {
            i++;
            continue;
        }
        size_t start = i, stop = i + a->n;
        i = stop; /* the scan goes on after the match, kept or not */
        if (!accept(r, a, s, n, done, &start, &stop)) continue;
        if (start > done) LD_TRY(gap(r, s + done, start - done));
        LD_TRY(ld_tok_ids_push(&r->out, a->id));
        done = stop;
    }
    if (done < n) LD_TRY(gap(r, s + done, n - done));
    return LD_OK;
}
