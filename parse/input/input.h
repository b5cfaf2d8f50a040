/* input.h - bytes in: files or stdin, plain or compressed, archives member by
 * member, cut into lines.
 *
 * Formats are recognised by content, never by name: plain text, gzip, zstd,
 * xz, bzip2 (through libarchive's filters), and archives (tar under any of
 * those filters, zip) whose every regular member is read as a log and named
 * "archive:member".  A single compressed stream is one member named like the
 * file.  Everything streams: memory is bounded by the longest line (plus
 * libarchive's fixed buffers), not by the size of the input.
 *
 * Ownership: ld_input and ld_linereader own their buffers; a returned
 * ld_line borrows the reader's buffer and is valid until the next call on the
 * reader.  Not thread-safe; one reader per thread.
 */
#ifndef LD_INPUT_H
#define LD_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

typedef struct ld_input ld_input;

/* Opens `path` ("-" = standard input) and sniffs its format.  The first
 * member is made current.  Errors: LD_ERR_IO with the system's reason. */
ld_status ld_input_open(const char *path, ld_input **out, ld_error *err);

/* Like ld_input_open() over `len` bytes of memory (for tests and fuzzing).
 * The memory is borrowed and must outlive the input; `name` (copied; NULL =
 * "<memory>") stands in for the path in member names.  Fails like
 * ld_input_open() when not even the first member header can be read. */
ld_status ld_input_open_memory(const void *data, size_t len, const char *name,
                               ld_input **out, ld_error *err);

/* Name of the current member: the path for a plain or compressed file,
 * "path:member" for an archive member.  Borrowed, valid until the next
 * ld_input_next_member() or ld_input_close(). */
const char *ld_input_member_name(const ld_input *in);

/* Reads up to `cap` bytes of the current member; *out_n == 0 means the member
 * ended.  A corrupt or truncated stream gives LD_ERR_IO naming the member
 * with err->offset = decompressed bytes delivered so far in that member. */
ld_status ld_input_read(ld_input *in, void *buf, size_t cap, size_t *out_n,
                        ld_error *err);

/* Advances to the next member.  *out_has = 0 when there is none.  For a
 * non-archive input there is exactly one member.  A corrupt member header
 * returns LD_ERR_IO; the caller may call again to try the next member
 * (libarchive permitting) or give up on the input. */
ld_status ld_input_next_member(ld_input *in, int *out_has, ld_error *err);

/* 1 if the input is an archive (members are named "path:member"). */
int ld_input_is_archive(const ld_input *in);

/* Total compressed bytes consumed so far from the file (for progress), and
 * the file size when known (0 for pipes). */
uint64_t ld_input_bytes_consumed(const ld_input *in);
uint64_t ld_input_file_size(const ld_input *in);

/* For a plain (uncompressed, not archived) regular file opened by path,
 * before any read: maps the whole file read-only so that lines can be taken
 * from the page cache without read()'s copy.  Returns 1 with the mapping
 * (borrowed; bytes below what ld_input_map_release() gave back stay
 * readable until ld_input_close()), 0 when the input cannot be mapped (then
 * use ld_input_read()).  The line reader uses it on its own. */
int ld_input_map(ld_input *in, const char **out_data, size_t *out_len);

/* Bytes below `off` of the mapping will not be read again: unmapped (whole
 * pages), so memory stays bounded by what is still ahead; also the progress
 * counter. */
void ld_input_map_release(ld_input *in, uint64_t off);

void ld_input_close(ld_input *in);

/* One line of the current member, without its "\n" or "\r\n". */
typedef struct ld_line {
    const char *data;  /* borrowed: valid until the next ld_linereader_next */
    size_t len;
    uint64_t lineno;   /* 1-based within the member */
    uint64_t offset;   /* byte offset of data[0] within the (decompressed) member */
    int crlf;          /* 1 if it ended with \r\n */
    int unterminated;  /* 1 if the member ended without a final \n */
    uint64_t lost_bytes; /* bytes its capture lost inside it (parse/capture: Docker's
                            U+FFFD at a 16 KiB cut); 0 for a line as written */
    const char *source;  /* the writer its capture names (a journald stream, a container's
                            stream, host and identifier[pid]), borrowed like data; NULL
                            for a line as written */
    size_t source_len;
} ld_line;

typedef struct ld_linereader ld_linereader;

/* A line reader over the current member of `in` (borrowed; must outlive the
 * reader).  max_line_bytes: a longer line is an LD_ERR_LIMIT error for that
 * line, which is then skipped to its end (0 = default, 1 GiB). */
ld_status ld_linereader_new(ld_input *in, size_t max_line_bytes,
                            ld_linereader **out, ld_error *err);

/* Next line; *out_has = 0 at the end of the member.  After an error the
 * reader is still usable when the error was LD_ERR_LIMIT (line skipped).
 * An LD_ERR_IO from the input ends the member: the lines before it were
 * delivered, the partial line at the error is dropped (err->line is its
 * number, err->offset the bytes read), and later calls give *out_has = 0.
 * err->path is the member name: valid until ld_input_next_member(). */
ld_status ld_linereader_next(ld_linereader *r, ld_line *out, int *out_has,
                             ld_error *err);

/* What follows the last line handed out, when the reader holds the rest of
 * the member (a mapped file) and no line in it can be too long: 1 with
 * *s pointing at the next line's first bytes (borrowed like a line), *n of
 * them (at most `want`); 0 otherwise (the next line is unknown, or there is
 * none). */
int ld_linereader_peek(const ld_linereader *r, size_t want, const char **s, size_t *n);

/* Restart line numbering for the new current member after
 * ld_input_next_member(). */
void ld_linereader_reset(ld_linereader *r);

/* Largest buffer the reader has held (bytes), for memory accounting. */
size_t ld_linereader_peak_bytes(const ld_linereader *r);

void ld_linereader_free(ld_linereader *r);

#endif /* LD_INPUT_H */
