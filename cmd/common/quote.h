/* quote.h - the one rule every quoted excerpt of a human report follows
 * (diff's text, regress's HTML and JUnit): a JSON string literal, so a
 * reader can tell `\n` in the text from a newline.  Between double quotes,
 * `"` and `\` are escaped with a backslash, newline, tab and carriage return
 * as \n \t \r, other control characters as \u00XX; a byte that is not part
 * of valid UTF-8 (a log cut inside a character) as \xXX, the only escape
 * JSON lacks.  Valid UTF-8 is written as it is. */
#ifndef LD_CMD_QUOTE_H
#define LD_CMD_QUOTE_H

#include <stdio.h>

/* s quoted to f. */
void ld_cli_put_quoted(FILE *f, const char *s);

/* s quoted, malloc'd (caller frees); NULL on out of memory. */
char *ld_cli_quoted(const char *s);

#endif
