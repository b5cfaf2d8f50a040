/* tpl.h - a Jinja2 interpreter for chat templates, byte-compatible with
 * Python jinja2 3.1 as HF transformers configures it:
 * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
 * loopcontrols, a json.dumps-style `tojson`, and the globals
 * raise_exception(msg) and strftime_now(fmt).
 *
 * Language: if/elif/else, for (tuple targets, `if` filter, else,
 * `recursive` with loop(...), loop.cycle; every iteration has its own
 * scope), set (also ns.attr and set blocks), macro, call blocks with
 * caller(...), filter blocks, raw, break/continue, chained comparisons, and
 * the jinja2 filters, tests and Python str/dict methods chat templates use
 * (tpl_filters.c and the files it names).  Not supported (compile or
 * render error, never a wrong text): include/import/extends/block, with,
 * autoescape, do; integers beyond 64 bits; str.format grouping (',' '_'),
 * nested fields in specs; filters such as pprint, urlize, xmlattr.  Known
 * differences from Python: case mapping beyond the scripts listed in
 * tpl_unicase.c, repr() of unassigned code points, the \N{name} escape,
 * and strings with NUL bytes (cJSON).
 *
 * Ownership:
 * - an ld_tpl (compiled template) is owned by the caller of ld_tpl_compile
 *   and released with ld_tpl_free; it keeps its own copy of the source and is
 *   read-only after compilation, so one ld_tpl may be rendered by several
 *   threads at once (each render has its own state);
 * - ld_tpl_value objects passed as context are built by the caller in an
 *   ld_arena the caller owns (ld_tpl_value_*); rendering never modifies them;
 * - the rendered text is malloc'd and owned by the caller (free()).
 */
#ifndef LD_TPL_H
#define LD_TPL_H

#include <stddef.h>
#include <stdint.h>

#include "ld_arena.h"
#include "ld_error.h"

typedef struct ld_tpl ld_tpl;             /* compiled template (opaque) */
typedef struct ld_tpl_value ld_tpl_value; /* a template value (opaque) */
struct cJSON;

/* Sandbox limits; a zero field means "use the default" (in brackets).
 * Past any of them the render fails with LD_ERR_LIMIT, never a cut text.
 * A filter or operator whose result can be far larger than its input
 * (format, str.format, center, indent, tojson, replace, join, '*', ...)
 * charges the result's size against the memory limit before building it,
 * so an oversized one fails at once with a message naming it and the
 * limit. */
typedef struct ld_tpl_limits {
    uint32_t max_depth;        /* macro/call recursion depth [64] */
    uint64_t max_loop_iters;   /* loop iterations in one render [1000000] */
    size_t max_output_bytes;   /* size of the rendered text [64 MiB] */
    size_t max_memory_bytes;   /* scratch memory of one render [512 MiB] */
    const char *today;         /* "YYYY-MM-DD" for strftime_now; NULL =
                                  the goldens' pinned 2024-07-26 */
    int *date_used;            /* set to 1 when the render called strftime_now
                                  (the text depends on `today`); may be NULL */
} ld_tpl_limits;

/* Compiles `len` bytes of template source.  Returns LD_OK and a new template
 * in *out (caller frees with ld_tpl_free), or LD_ERR_SYNTAX /
 * LD_ERR_TRUNCATED / LD_ERR_LIMIT / LD_ERR_NOMEM with err->line (1-based
 * template line), err->offset (byte offset in src) and the column in
 * err->msg.  `src` is copied; it need not outlive the call. */
ld_status ld_tpl_compile(const char *src, size_t len, ld_tpl **out,
                         ld_error *err);

/* Frees a compiled template (NULL allowed). */
void ld_tpl_free(ld_tpl *t);

/* Renders `t` with the variables of `ctx` (a dict value; NULL = none).
 * `lim` may be NULL (defaults).  On success *out is a malloc'd,
 * NUL-terminated buffer of *out_len bytes the caller frees.  Errors:
 * LD_ERR_MISMATCH for a refusal by the template (raise_exception: the message
 * is quoted in err->msg as 'MESSAGE') and for runtime errors of the kind
 * Python raises (undefined call, type error, sandbox refusal: err->msg begins
 * with "security error"), LD_ERR_UNSUPPORTED for a filter/test/method this
 * interpreter lacks, LD_ERR_LIMIT for a sandbox limit; err->line and
 * err->offset locate the failing expression in the template.  Thread-safe
 * for distinct `out`/`err`. */
ld_status ld_tpl_render(const ld_tpl *t, const ld_tpl_value *ctx,
                        const ld_tpl_limits *lim, char **out, size_t *out_len,
                        ld_error *err);

/* As ld_tpl_render, with the render's scratch memory taken from `scratch`,
 * which the caller owns and resets (ld_arena_reset) once it no longer needs
 * the context values it may also hold: repeated renders then reuse the same
 * memory instead of asking the system for it each time.  The memory limit
 * counts what the render adds to the arena. */
ld_status ld_tpl_render_in(const ld_tpl *t, const ld_tpl_value *ctx,
                           const ld_tpl_limits *lim, ld_arena *scratch,
                           char **out, size_t *out_len, ld_error *err);

/* ---- context values, allocated in the caller's arena `a` (NULL when the
 * arena is exhausted).  Strings are copied into the arena. */
ld_tpl_value *ld_tpl_value_none(ld_arena *a);
ld_tpl_value *ld_tpl_value_bool(ld_arena *a, int b);
ld_tpl_value *ld_tpl_value_int(ld_arena *a, int64_t i);
ld_tpl_value *ld_tpl_value_str(ld_arena *a, const char *s, size_t len);
ld_tpl_value *ld_tpl_value_dict(ld_arena *a);
ld_tpl_value *ld_tpl_value_list(ld_arena *a);
/* An empty list with room for `cap` items: pushing up to that many makes
 * no new array.  NULL on NOMEM. */
ld_tpl_value *ld_tpl_value_list_sized(ld_arena *a, size_t cap);
/* Appends to a list / sets key (replacing an existing key) in a dict.
 * Returns LD_ERR_NOMEM when the arena is exhausted, LD_ERR_USAGE on a wrong
 * kind. */
ld_status ld_tpl_list_push(ld_arena *a, ld_tpl_value *list, ld_tpl_value *v);
ld_status ld_tpl_dict_set(ld_arena *a, ld_tpl_value *dict, const char *key,
                          ld_tpl_value *v);
/* The same with the key not copied: `key` must outlive the dict (a literal,
 * or a string of a request the caller keeps). */
ld_status ld_tpl_dict_set_borrowed(ld_arena *a, ld_tpl_value *dict, const char *key,
                                   ld_tpl_value *v);
/* Converts a cJSON tree (objects keep their key order; numbers that are
 * integral in the JSON text become int, others float).  NULL on NOMEM. */
ld_tpl_value *ld_tpl_value_from_json(ld_arena *a, const struct cJSON *j);
/* The same, with strings and keys pointing into `j` instead of copied: `j`
 * must outlive the value and stay unchanged (a render's context built from
 * a request the caller keeps). */
ld_tpl_value *ld_tpl_value_from_json_borrowed(ld_arena *a, const struct cJSON *j);
/* A dict of n members made at once: keys[i] (NUL-terminated, borrowed as
 * above) = the value of vals[i] (borrowed as above; NULL = None).  A key
 * given twice keeps its first place and its last value, as setting the
 * members one by one would.  NULL on NOMEM. */
ld_tpl_value *ld_tpl_value_dict_of_json(ld_arena *a, size_t n, const char *const *keys,
                                        const struct cJSON *const *vals);

/* Re-scans `text`, the JSON that `root` was parsed from (cJSON_Parse), and
 * stores the literal of every number on its node (valuestring, allocated
 * with cJSON_malloc and freed by cJSON_Delete), so that
 * ld_tpl_value_from_json and ld_tpl_json_dumps keep `2.0` a float and large
 * integers exact, as Python's json module does (cJSON alone keeps only the
 * double: without this, an integral number is an int whatever its text).
 * Call it after parsing and before editing numbers.  Returns LD_OK, or
 * LD_ERR_MISMATCH when `text` is not the text of `root` (the nodes seen up
 * to there keep their literal, which is harmless) or memory ran out. */
ld_status ld_tpl_json_keep_floats(struct cJSON *root, const char *text,
                                  size_t len);

/* Python json.dumps(v, ensure_ascii=False) of a cJSON tree: separators
 * ", " and ": ", insertion order, floats as Python repr, integral numbers of
 * the JSON text as ints.  `indent` < 0 = None.  On success *out is a
 * malloc'd NUL-terminated string of *out_len bytes (caller frees).  Errors:
 * LD_ERR_NOMEM, LD_ERR_LIMIT (nesting deeper than 200). */
ld_status ld_tpl_json_dumps(const struct cJSON *j, int indent, char **out,
                            size_t *out_len, ld_error *err);

#endif
