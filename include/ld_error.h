/* ld_error.h - the one error enum and error record shared by every layer.
 *
 * Convention (adopted from ../shared/docs/style.md, "logdiff conventions"):
 * fallible functions return ld_status, write results to out_* parameters and
 * take `ld_error *err` last (NULL allowed).  The function that detects an
 * error fills the record with an offset relative to its own buffer; each layer
 * above adds what it knows (path, line, base offset).  Library code never
 * prints: only cmd/ turns a record into a message.
 *
 * Numbers are part of the JSON output (`error_code`) and are never reused.
 */
#ifndef LD_ERROR_H
#define LD_ERROR_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef enum {
    LD_OK = 0,
    LD_ERR_IO = 1,          /* read/open/decompress failure */
    LD_ERR_NOMEM = 2,       /* allocation failed or a limit was hit */
    LD_ERR_SYNTAX = 3,      /* input does not follow the grammar */
    LD_ERR_TRUNCATED = 4,   /* input ends in the middle of a value/record */
    LD_ERR_UNSUPPORTED = 5, /* valid but not handled (yet) */
    LD_ERR_MISMATCH = 6,    /* two things that must agree do not */
    LD_ERR_NUMERIC = 7,     /* number out of range / not finite */
    LD_ERR_CUDA = 8,        /* CUDA runtime error */
    LD_ERR_LIMIT = 9,       /* depth, size or count limit exceeded */
    LD_ERR_USAGE = 10       /* bad argument from the caller */
} ld_status;

typedef struct ld_error {
    ld_status code;
    const char *path;  /* input file, borrowed; NULL if none */
    uint64_t line;     /* 1-based input line; 0 if not line-oriented */
    uint64_t offset;   /* byte offset in the file (or buffer) */
    char msg[256];     /* lower-case, no full stop, subject in '...' */
    /* Where the error arose: LD_FAIL's source file (relative to the
     * repository root) and line, in builds without NDEBUG (the default and
     * the tests' builds); NULL and 0 otherwise, or for a record filled by
     * hand.  For developers: cmd/ shows it with LOGDIFF_DEBUG=1. */
    const char *origin_file;
    int origin_line;
} ld_error;

/* Constant, static description of a status code. */
static inline const char *ld_strerror(ld_status code)
{
    switch (code) {
    case LD_OK: return "ok";
    case LD_ERR_IO: return "i/o error";
    case LD_ERR_NOMEM: return "out of memory";
    case LD_ERR_SYNTAX: return "syntax error";
    case LD_ERR_TRUNCATED: return "unexpected end of input";
    case LD_ERR_UNSUPPORTED: return "unsupported";
    case LD_ERR_MISMATCH: return "mismatch";
    case LD_ERR_NUMERIC: return "numeric error";
    case LD_ERR_CUDA: return "cuda error";
    case LD_ERR_LIMIT: return "limit exceeded";
    case LD_ERR_USAGE: return "usage error";
    }
    return "unknown error";
}

static inline void ld_error_clear(ld_error *err)
{
    if (err) memset(err, 0, sizeof *err);
}

/* Fill `err` (if not NULL) and return `code`; the message is printf-style.
 * `file` and `line` (NULL and 0: unknown) say where the error arose. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static inline ld_status ld_fail_at(ld_error *err, const char *file, int line, ld_status code, uint64_t offset,
                                   const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        err->offset = offset;
        err->origin_file = file;
        err->origin_line = line;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* LD_FAIL(err, code, offset, fmt, ...): the one way library code reports an
 * error (as zstd's RETURN_ERROR_IF); records its file and line unless
 * NDEBUG. */
#ifndef NDEBUG
#define LD_FAIL(err, code, off, ...) ld_fail_at((err), __FILE__, __LINE__, (code), (off), __VA_ARGS__)
#else
#define LD_FAIL(err, code, off, ...) ld_fail_at((err), NULL, 0, (code), (off), __VA_ARGS__)
#endif

/* Forward a non-OK status from a call to the caller. */
#define LD_TRY(expr)                         \
    do {                                     \
        ld_status ld_try_s_ = (expr);        \
        if (ld_try_s_ != LD_OK) return ld_try_s_; \
    } while (0)

#endif /* LD_ERROR_H */
