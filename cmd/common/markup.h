/* markup.h - arbitrary log bytes as XML / HTML text.
 *
 * Logs hold any bytes: invalid UTF-8, lone surrogates (kept as WTF-8),
 * control characters, which XML 1.0 cannot carry even as character
 * references.  ld_cli_markup_text() writes s[0..n) so that the document stays
 * well-formed and a person still sees every byte: & < > " ' as entities,
 * tab, newline and carriage return as they are (as &#9; &#10; &#13; in
 * attributes), valid UTF-8 as it is (except U+FFFE and U+FFFF), and every
 * other byte as the visible text "\xNN" (in HTML wrapped in
 * <span class="bad">, with LD_MARKUP_HTML). */
#ifndef LD_CMD_MARKUP_H
#define LD_CMD_MARKUP_H

#include <stddef.h>
#include <stdio.h>

enum { LD_MARKUP_ATTR = 1, LD_MARKUP_HTML = 2 };

void ld_cli_markup_text(FILE *f, const char *s, size_t n, unsigned flags);

/* The same for a NUL-terminated string (NULL writes nothing). */
void ld_cli_markup_cstr(FILE *f, const char *s, unsigned flags);

#endif
