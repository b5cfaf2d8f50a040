/* tok_regex.c - pre-tokenizer regexes as HF's Oniguruma reads them, for
 * PCRE2.  The only difference that matters in the two engines' Unicode
 * classes is \s: Oniguruma's is White_Space (25 characters), PCRE2's also
 * holds U+180E MONGOLIAN VOWEL SEPARATOR.  So \s becomes that explicit set,
 * as a class outside classes and as its members inside one, and \S outside
 * classes becomes its complement; everything else is copied as written
 * (\Q...\E included).  \S inside a class is left as it is.  Differences of
 * Unicode version (\p{L} and \p{N} of characters added after Unicode 14,
 * which PCRE2 10.42 does not know) remain. */
#include <string.h>

#include "tok_internal.h"

static const char onig_space[] =
    "\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}";

/* GPT-2's pre-tokenizer pattern, the default of a ByteLevel step without
 * its own (tok_tables.h). */
const char ld_tok_gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static ld_status put(tok_buf *out, const char *s) { return ld_tok_buf_append(out, s, strlen(s)); }

/* Copies a \Q...\E quote starting at p[i] == '\\', p[i+1] == 'Q'; returns
 * the index after it. */
static ld_status copy_quote(const char *p, size_t n, size_t *i, tok_buf *out)
{
    size_t j = *i + 2;
    while (j < n && !(p[j] == '\\' && j + 1 < n && p[j + 1] == 'E')) j++;
    j = j < n ? j + 2 : n;
    LD_TRY(ld_tok_buf_append(out, p + *i, j - *i));
    *i = j;
    return LD_OK;
}

/* Copies the class starting at p[*i] == '[' with \s expanded. */
static ld_status copy_class(const char *p, size_t n, size_t *i, tok_buf *out)
{
    size_t j = *i + 1;
    LD_TRY(put(out, "["));
    if (j < n && p[j] == '^') LD_TRY(ld_tok_buf_append(out, p + j++, 1));
    if (j < n && p[j] == ']') LD_TRY(ld_tok_buf_append(out, p + j++, 1)); /* a literal ']' first */
    while (j < n && p[j] != ']') {
        if (p[j] == '\\' && j + 1 < n) {
            if (p[j + 1] == 'Q') {
                LD_TRY(copy_quote(p, n, &j, out));
                continue;
            }
            if (p[j + 1] == 's') LD_TRY(put(out, onig_space));
            else LD_TRY(ld_tok_buf_append(out, p + j, 2));
            j += 2;
            continue;
        }
        if (p[j] == '[' && j + 1 < n && p[j + 1] == ':') { /* [:posix:] */
            const char *end = memchr(p + j + 2, ']', n - j - 2);
            size_t k = end ? (size_t)(end - p) + 1 : n;
            LD_TRY(ld_tok_buf_append(out, p + j, k - j));
            j = k;
            continue;
        }
        LD_TRY(ld_tok_buf_append(out, p + j++, 1));
    }
    if (j < n) LD_TRY(ld_tok_buf_append(out, p + j++, 1));
    *i = j;
    return LD_OK;
}

ld_status ld_tok_regex_for_pcre2(const char *p, size_t n, tok_buf *out)
{
    for (size_t i = 0; i < n;) {
        if (p[i] == '[') {
            LD_TRY(copy_class(p, n, &i, out));
        } else if (p[i] == '\\' && i + 1 < n) {
            char c = p[i + 1];
            if (c == 'Q') {
                LD_TRY(copy_quote(p, n, &i, out));
                continue;
            }
            if (c == 's' || c == 'S') {
                LD_TRY(put(out, c == 's' ? "[" : "[^"));
                LD_TRY(put(out, onig_space));
                LD_TRY(put(out, "]"));
            } else {
                LD_TRY(ld_tok_buf_append(out, p + i, 2));
            }
            i += 2;
        } else {
            LD_TRY(ld_tok_buf_append(out, p + i++, 1));
        }
    }
    return LD_OK;
}
