/* pylit_json.h - parsed Python values and log text as JSON (cJSON items), for
 * output and for code that reads a logged request as JSON.
 *
 * Strings go through ld_json_text(): cJSON passes bytes through unchecked,
 * so a log's invalid UTF-8 or lone surrogates (kept losslessly as WTF-8)
 * would make invalid JSON.  We escape them as Python's
 * json.dumps(..., ensure_ascii=False) of a surrogateescape'd string would,
 * but for two choices of ours: surrogates are escaped, a lone one as
 * "\udXXX" and an invalid byte 0xXY as "\udcXY" (json.dumps writes them
 * raw, and raw surrogates are not UTF-8), and backspace and form feed as
 * "\u0008" and "\u000c" (json.dumps: "\b", "\f"; json.loads reads both
 * alike).  So json.loads(line) then .encode('utf-8', 'surrogateescape')
 * gives back the exact bytes.  Everything else is raw UTF-8.  The oracle:
 * tools/gen_pylit_json_oracle.py.
 */
#ifndef LD_PYLIT_JSON_H
#define LD_PYLIT_JSON_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "pylit.h"

/* A JSON string item for s[0..len) (NULL s gives null).  Caller owns it
 * (usually by adding it to an object).  NULL on out of memory. */
cJSON *ld_json_text(const char *s, size_t len);
cJSON *ld_json_cstr(const char *s); /* NUL-terminated; NULL gives null */

/* The same string literal written straight to f (no item: for writers of
 * many lines that print their objects themselves); "null" for NULL s.
 * 0, or -1 when writing failed. */
int ld_json_write_text(FILE *f, const char *s, size_t len);
int ld_json_write_cstr(FILE *f, const char *s);

/* Number or null (NAN and INT64_MIN, request.h's LD_UNSET_INT, give null). */
cJSON *ld_json_int(int64_t v);
cJSON *ld_json_double(double v);

/* A parsed Python value as JSON: dict -> object (keys as their text), list,
 * tuple, set -> array, call -> object with "__class__", truncation ->
 * {"__truncated__": true, "head": ..., "tail": ...}, abbreviation ->
 * {"__abbreviated__": key, "chars": N, "blake2b": hex}, nan/inf -> strings.
 * `scratch` holds decoded strings until the item is printed. */
cJSON *ld_json_value(const ld_py_value *v, ld_arena *scratch);

/* The same tree as plain cJSON items (cJSON strings and numbers, which
 * cJSON's readers understand) for code that reads it back rather than
 * printing it; a string holding a NUL byte is cut there. */
cJSON *ld_json_value_plain(const ld_py_value *v, ld_arena *scratch);

/* Writes `item` on one line followed by "\n" and deletes it.  Returns 0, or
 * -1 when printing failed. */
int ld_json_print_line(FILE *f, cJSON *item);

#endif
