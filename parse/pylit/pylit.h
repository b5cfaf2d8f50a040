/* pylit.h - parser for the Python literals that repr()/str() print, as they
 * appear in SGLang and vLLM request logs.
 *
 * Grammar accepted (see ../shared/docs/log-formats.md section 3):
 *   strings in either quote with every escape (\\ \' \" \n \r \t \a \b \f \v
 *   \0, octal \ooo, \xhh, \uhhhh, \Uhhhhhhhh, backslash-newline), r/b/u/br
 *   prefixes, bytes b'...', integers of any size (with sign, _ separators not
 *   emitted by repr so rejected), floats (1e-05, 1.0, inf, nan, -inf), True
 *   False None, lists, tuples (incl. `(x,)` and `()`), dicts with any key
 *   type, sets `{1, 2}`, call-form reprs `Name(field=value, ...)` (positional
 *   arguments too), dotted names (`Color.RED`), `<...>` opaque reprs, and
 *   Ellipsis `...` as a list element.
 * Logger markers become explicit values, never ordinary text:
 *   'head' ... 'tail'     -> LD_PY_TRUNC (items[0]=head STR, items[1]=tail STR)
 *   [..] ... [..]         -> LD_PY_TRUNC (items[0]=head LIST, items[1]=tail LIST)
 *   (..) ... (..)         -> LD_PY_TRUNC (two TUPLEs: a long tuple field)
 *   <key: N chars, blake2b=HEX> -> LD_PY_ABBREV
 *
 * Memory: every value lives in the caller's arena; STR/BYTES/NAME/INT-big
 * payloads are borrowed slices of the input buffer, so a value is valid only
 * while both the arena (not reset) and the input buffer are.
 * Thread safety: none needed; no global state.
 */
#ifndef LD_PYLIT_H
#define LD_PYLIT_H

#include <stddef.h>
#include <stdint.h>

#include "ld_arena.h"
#include "ld_error.h"

typedef enum ld_py_kind {
    LD_PY_NONE = 0,
    LD_PY_BOOL,   /* u.i is 0 or 1 */
    LD_PY_INT,    /* u.i when it fits in int64; else LD_PY_F_BIGINT: u.raw/n = digits text incl. sign */
    LD_PY_FLOAT,  /* u.f (inf/nan included) */
    LD_PY_STR,    /* u.raw/n = raw bytes between the quotes (escapes not decoded) */
    LD_PY_BYTES,  /* like STR, for b'...' */
    LD_PY_LIST,   /* u.items[0..n) */
    LD_PY_TUPLE,  /* u.items[0..n) */
    LD_PY_SET,    /* u.items[0..n) */
    LD_PY_DICT,   /* u.items[0..2n): key0, value0, key1, value1, ... */
    LD_PY_CALL,   /* u.call: Name(args) */
    LD_PY_NAME,   /* bare or dotted identifier not otherwise known: u.raw/n */
    LD_PY_OPAQUE, /* <...> repr of an object: u.raw/n = text between < and > */
    LD_PY_ELLIPSIS, /* a bare ... (JSON-mode list marker after conversion, or Python Ellipsis) */
    LD_PY_TRUNC,  /* logger truncation: u.items[0] head, u.items[1] tail (both STR, both LIST or both TUPLE) */
    LD_PY_ABBREV  /* <key: N chars, blake2b=HEX>: u.abbrev */
} ld_py_kind;

/* flags */
#define LD_PY_F_ESCAPED 0x01u /* STR/BYTES: raw text contains a backslash */
#define LD_PY_F_BIGINT 0x02u  /* INT: does not fit int64; digits in u.raw/n */
#define LD_PY_F_DQUOTE 0x04u  /* STR/BYTES: written with double quotes */
#define LD_PY_F_RAWSTR 0x08u  /* STR/BYTES: r-prefixed (escapes are literal) */
#define LD_PY_F_JSON 0x10u    /* STR: from JSON text: u.raw/n is the text between the quotes,
                                 its escapes (LD_PY_F_ESCAPED) decoded by JSON's rules */
#define LD_PY_F_MARKED 0x40u  /* container: holds a logger marker (TRUNC, ABBREV, ELLIPSIS)
                                 somewhere below; valid when LD_PY_F_MARKS_KNOWN is set */
#define LD_PY_F_MARKS_KNOWN 0x80u /* container: LD_PY_F_MARKED is authoritative (set by the
                                     parser, so callers need not walk the tree) */
#define LD_PY_F_UPREFIX 0x20u /* STR: u-prefixed (u'...'); locates the raw text for error offsets */
#define LD_PY_F_SKIMMED 0x20u /* LIST (the bit means this for lists only): ints counted,
                                 not kept (u.items NULL); only with LD_PYLIT_SKIM_INT_LISTS */

typedef struct ld_py_value ld_py_value;
typedef struct ld_py_call ld_py_call;
typedef struct ld_py_abbrev ld_py_abbrev;

struct ld_py_value {
    uint8_t kind;  /* ld_py_kind */
    uint8_t flags; /* LD_PY_F_* */
    uint32_t n;    /* item count, pair count, or byte length of u.raw */
    uint64_t off;  /* byte offset of the value's first byte in the parsed buffer */
    union {
        int64_t i;
        double f;
        const char *raw;
        ld_py_value *items;
        ld_py_call *call;
        ld_py_abbrev *abbrev;
    } u;
};

struct ld_py_call {
    const char *name;      /* borrowed; may be dotted (e.g. "Finish.Reason") */
    uint32_t name_len;
    uint32_t n_args;
    const char **arg_names; /* [n_args]; NULL entry for a positional argument */
    uint32_t *arg_name_lens;
    ld_py_value *args;      /* [n_args] */
};

struct ld_py_abbrev {
    const char *key;        /* borrowed */
    uint32_t key_len;
    uint64_t n_chars;       /* length of the original string in code points */
    const char *digest;     /* borrowed hex digest */
    uint32_t digest_len;
};

/* parse flags */
#define LD_PYLIT_WHOLE 0x1u /* the value must extend to the end of the buffer (trailing spaces allowed) */

/* ld_pylit_limits.flags */
#define LD_PYLIT_SKIM_INT_LISTS 0x1u /* a long list of plain non-negative ints that is the
                                        top-level value or sits under a token-id key
                                        (input_ids, output_ids, prompt_token_ids,
                                        output_token_ids, token_ids) is checked and counted
                                        but not materialised: a LD_PY_LIST with n items,
                                        u.items NULL and LD_PY_F_SKIMMED */

typedef struct ld_pylit_limits {
    uint32_t max_depth;   /* nesting depth; 0 = default (512); values above 2048 are clamped (C stack) */
    uint32_t max_digits;  /* digits of one integer literal; 0 = default (4300, CPython's limit) */
    uint32_t flags;       /* LD_PYLIT_SKIM_INT_LISTS */
} ld_pylit_limits;

/* Parses one value at buf[0..len) (leading spaces skipped).  On success
 * *out is the value and *out_end the offset just after it (after a trailing
 * ` ... 'tail'` when present).  On failure returns LD_ERR_SYNTAX,
 * LD_ERR_TRUNCATED (input ended inside a value), LD_ERR_LIMIT or
 * LD_ERR_NOMEM with err->offset the exact byte offset in buf and err->msg
 * saying what was expected.  `limits` may be NULL. */
ld_status ld_pylit_parse(const char *buf, size_t len, unsigned flags,
                         const ld_pylit_limits *limits, ld_arena *arena,
                         ld_py_value **out, size_t *out_end, ld_error *err);

/* Parses one JSON value at buf[0..len) into the same values (Python's
 * json.loads gives the same objects as eval of their repr): objects as
 * DICT with STR keys, arrays as LIST, null/true/false as NONE/BOOL, numbers
 * as INT (BIGINT past int64) or FLOAT (NaN, Infinity, -Infinity included),
 * strings as STR with LD_PY_F_JSON (escapes decoded by JSON's rules on
 * demand).  SGLang's JSON-mode truncation (a string cut to head + "..." +
 * tail of exactly 2*half+3 code points, a list to head + ["..."] + tail of
 * exactly 2*half+1 items; half 0 = 1024) becomes LD_PY_TRUNC / an
 * LD_PY_ELLIPSIS item, as in text mode.  limits as ld_pylit_parse (skimmed
 * token-id lists included); the value need not end the buffer. */
ld_status ld_pylit_parse_json(const char *buf, size_t len, uint32_t half,
                              const ld_pylit_limits *limits, ld_arena *arena,
                              ld_py_value **out, size_t *out_end, ld_error *err);

/* Parses `name=value, name=value, ...` (the body of a call, without the
 * parentheses) up to the end of buf, into a LD_PY_CALL value with an empty
 * name.  Used for the `obj=..., headers=..., out=...` tail of a log line. */
ld_status ld_pylit_parse_kwargs(const char *buf, size_t len,
                                const ld_pylit_limits *limits, ld_arena *arena,
                                ld_py_value **out, ld_error *err);

/* Decoded bytes of a STR or BYTES value: UTF-8, with lone surrogates as
 * 3-byte WTF-8 sequences so nothing is lost; BYTES give raw bytes.
 * Zero-copy (*out points into the input) when the value has no escapes;
 * otherwise the decoded copy lives in `arena` (NUL-terminated).  Fails with
 * LD_ERR_SYNTAX for a malformed escape. */
ld_status ld_py_str_decode(const ld_py_value *v, ld_arena *arena,
                           const char **out, size_t *out_len, ld_error *err);

/* ld_py_str_decode() into the caller's dst, which has room for v->n bytes
 * (decoding never grows); no NUL is added.  The same text and errors. */
ld_status ld_py_str_decode_into(const ld_py_value *v, char *dst, size_t *out_len, ld_error *err);

/* ld_py_str_decode_into() that also gives what ld_utf8_count_chars() of the
 * decoded bytes gives (*out_chars), counted while decoding where the
 * machine decodes 64 bytes a step (AVX-512 VBMI2), else decoded then
 * counted.  The same bytes and errors as ld_py_str_decode_into(). */
ld_status ld_py_str_decode_count(const ld_py_value *v, char *dst, size_t *out_len, uint64_t *out_chars,
                                 ld_error *err);

/* What ld_py_str_decode() then ld_utf8_count_chars() would give for a STR
 * value (its decoded byte length and characters, or the same error for a
 * malformed escape), without writing the decoded text: for a caller that
 * only counts. */
ld_status ld_py_str_measure(const ld_py_value *v, size_t *out_len, uint64_t *out_chars,
                            ld_error *err);

/* Number of Python characters (code points) of a decoded string: UTF-8
 * sequences and WTF-8 surrogates count one each, every invalid byte one. */
size_t ld_utf8_count_chars(const char *s, size_t len);

/* Lookups (NULL when absent or the value is not of the right kind).  Keys and
 * argument names are compared as decoded strings. */
const ld_py_value *ld_py_dict_get(const ld_py_value *dict, const char *key);
const ld_py_value *ld_py_call_get(const ld_py_value *call, const char *arg_name);

/* Python-visible string for a kind ("str", "list", ...). */
const char *ld_py_kind_name(ld_py_kind kind);

#endif /* LD_PYLIT_H */
