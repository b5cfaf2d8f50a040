/* regress_lines.h - reading JSON Lines files of other machines (partials,
 * conversation journals) a line at a time, each line's number and first
 * byte kept for error messages. */
#ifndef LD_CMD_REGRESS_LINES_H
#define LD_CMD_REGRESS_LINES_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

typedef struct ld_cli_lines {
    const char *text;
    size_t len, pos;
    uint64_t line;        /* of the line last read */
    uint64_t line_offset; /* its first byte */
    const char *raw;      /* its bytes (without the newline) */
    size_t raw_len;
} ld_cli_lines;

/* The next line's bytes into lr->raw / lr->raw_len (*more 0 at the end of
 * the text), not parsed.  LD_ERR_TRUNCATED for a last line without its
 * newline (a cut file). */
ld_status ld_cli_lines_next_raw(ld_cli_lines *lr, int *more, ld_error *e);

/* The next line parsed (*out NULL at the end of the text; the caller
 * deletes it).  LD_ERR_TRUNCATED for a last line without its newline (a
 * cut file), LD_ERR_SYNTAX for a line that is not JSON. */
ld_status ld_cli_lines_next(ld_cli_lines *lr, cJSON **out, ld_error *e);

/* The text of the regular file at path mapped read-only and read ahead
 * (no copy, no fresh memory: a merge reads a million lines): 0, or -1
 * when it is not one or cannot be mapped (the caller reads it its own
 * way, with its errors).  ld_cli_unmap_file releases it. */
int ld_cli_map_file(const char *path, char **text, size_t *len);
void ld_cli_unmap_file(char *text, size_t len);

/* The first line of the file at path (malloc'd, with its newline; *len
 * its bytes); NULL with e set: LD_ERR_IO (cannot open or read it),
 * LD_ERR_SYNTAX (an empty file). */
char *ld_cli_first_line(const char *path, size_t *len, ld_error *e);

#endif
