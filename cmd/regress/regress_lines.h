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

/* The next line parsed (*out NULL at the end of the text; the caller
 * deletes it).  LD_ERR_TRUNCATED for a last line without its newline (a
 * cut file), LD_ERR_SYNTAX for a line that is not JSON. */
ld_status ld_cli_lines_next(ld_cli_lines *lr, cJSON **out, ld_error *e);

/* The first line of the file at path (malloc'd, with its newline; *len
 * its bytes); NULL with e set: LD_ERR_IO (cannot open or read it),
 * LD_ERR_SYNTAX (an empty file). */
char *ld_cli_first_line(const char *path, size_t *len, ld_error *e);

#endif
