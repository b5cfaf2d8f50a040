/* tpl_internal.h - shared types of the template interpreter (tpl_*.c only).
 * Every AST node and the template source live in the ld_tpl's arena (owner:
 * the ld_tpl); every value made while rendering lives in the render's arena
 * (owner: one ld_tpl_render call). */
#ifndef LD_TPL_INTERNAL_H
#define LD_TPL_INTERNAL_H

#include <stdbool.h>
#include <string.h>

#include "tpl.h"

/* ---------------------------------------------------------------- values */
enum {
    TV_UNDEF, TV_NONE, TV_BOOL, TV_INT, TV_FLOAT, TV_STR, TV_LIST, TV_DICT,
    TV_NS, TV_MACRO, TV_METHOD, TV_FUNC
};
#define TV_F_GEN 1    /* list produced lazily by Python (map/select...) */
#define TV_F_UNSAFE 2 /* undefined from a sandbox refusal */
#define TV_F_TUPLE 4  /* list that Python would hold as a tuple */
#define TV_F_LOOP 8   /* dict that is a for loop's `loop` object */
#define TV_F_GROUP 16 /* tuple (grouper, list) made by groupby */
#define TV_F_LAZY_HINT 32 /* undefined whose message is made when needed (u.undef) */

struct ld_tpl_value {
    uint8_t kind, flags;
    union {
        int b;
        int64_t i;
        double f;
        struct { const char *s; size_t len; } str; /* also undef hint */
        struct { ld_tpl_value **items; size_t n, cap; } list;
        struct { ld_tpl_value **keys, **vals; size_t n, cap; } dict;
        struct { const struct tpl_node *node; } macro;
        struct { const ld_tpl_value *self; const char *name; } method;
        struct { int id; } func;
        /* TV_UNDEF with TV_F_LAZY_HINT: "'NAME' is undefined" (type NULL) or
         * "'TYPE object' has no attribute 'NAME'"; NAME is not copied */
        struct { const char *name; size_t len; const char *type; } undef;
    } u;
};

ld_tpl_value *ld_tv_new(ld_arena *a, int kind);
ld_tpl_value *ld_tv_str(ld_arena *a, const char *s, size_t len);
/* A string value that points at s (not copied): s must outlive the value,
 * as the template's own strings outlive a render. */
ld_tpl_value *ld_tv_str_ref(ld_arena *a, const char *s, size_t len);
/* The shared False / True values (never NULL), inline: every comparison
 * and test returns one. */
extern ld_tpl_value ld_tv_bools[2];
static inline ld_tpl_value *ld_tv_bool(bool b) { return &ld_tv_bools[b]; }
ld_tpl_value *ld_tv_undef(ld_arena *a, const char *hint);
/* An undefined whose hint is formatted only if an error needs it (see
 * u.undef): most undefined values are only tested, never reported. */
ld_tpl_value *ld_tv_undef_lazy(ld_arena *a, const char *type, const char *name, size_t len);
/* The hint of an undefined value, formatted into buf when lazy. */
const char *ld_tv_undef_hint(const ld_tpl_value *v, char *buf, size_t size);
ld_tpl_value *ld_tv_float(ld_arena *a, double f);
bool ld_tv_push(ld_arena *a, ld_tpl_value *l, ld_tpl_value *v);
/* The least size of the list `items` joined with a separator of sep_len
 * bytes: the separators and the string items (others count 0); SIZE_MAX
 * past size_t.  What a join charges before it starts. */
size_t ld_tv_join_size(const ld_tpl_value *items, size_t sep_len);
bool ld_tv_dict_put(ld_arena *a, ld_tpl_value *d, ld_tpl_value *k, ld_tpl_value *v);
/* d[k] = v for the string key k[0..len), which the key value points at
 * (not copied: k must outlive d, as the template's names and the context's
 * strings outlive a render); the key value is made only when k is new. */
bool ld_tv_dict_put_ref(ld_arena *a, ld_tpl_value *d, const char *k, size_t len, ld_tpl_value *v);
ld_tpl_value *ld_tv_dict_get(const ld_tpl_value *d, const char *k, size_t len);

/* Inline in every caller (a key lookup is a handful of instructions that
 * a call would double), whatever the compiler's count of them */
#if defined(__GNUC__)
#define TPL_INLINE inline __attribute__((always_inline))
#else
#define TPL_INLINE inline
#endif

/* a[0..n) == b[0..n): keys are short, and a key of 4 to 16 bytes is two
 * overlapping words (its first and its last) compared without a call or a
 * loop; 1 to 3 bytes are their first, middle and last byte. */
static TPL_INLINE bool ld_tv_same_bytes(const char *a, const char *b, size_t n)
{
    if (n > 16) return memcmp(a, b, n) == 0;
    if (n >= 8) {
        uint64_t x, y, u, w;
        memcpy(&x, a, 8), memcpy(&y, b, 8), memcpy(&u, a + n - 8, 8), memcpy(&w, b + n - 8, 8);
        return ((x ^ y) | (u ^ w)) == 0;
    }
    if (n >= 4) {
        uint32_t x, y, u, w;
        memcpy(&x, a, 4), memcpy(&y, b, 4), memcpy(&u, a + n - 4, 4), memcpy(&w, b + n - 4, 4);
        return ((x ^ y) | (u ^ w)) == 0;
    }
    return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

/* The index of the string key k[0..len) in dict d, or d->u.dict.n: inline,
 * as every name and attribute goes through it.  The same pointer (a name
 * the parser interned) is the same key; keys mostly differ in length. */
static TPL_INLINE size_t ld_tv_key_index(const ld_tpl_value *d, const char *k, size_t len)
{
    for (size_t i = 0; i < d->u.dict.n; i++) {
        const ld_tpl_value *key = d->u.dict.keys[i];
        if (key->kind == TV_STR && key->u.str.len == len &&
            (key->u.str.s == k || ld_tv_same_bytes(key->u.str.s, k, len)))
            return i;
    }
    return d->u.dict.n;
}
ld_tpl_value *ld_tv_dict_getv(const ld_tpl_value *d, const ld_tpl_value *k);
/* Python's bool(v), inline: every `if`, `and`, `or` and `not` asks it */
static inline bool ld_tv_truthy(const ld_tpl_value *v)
{
    switch (v->kind) {
    case TV_BOOL: return v->u.b;
    case TV_INT: return v->u.i != 0;
    case TV_FLOAT: return v->u.f != 0;
    case TV_STR: return v->u.str.len != 0;
    case TV_LIST: return v->u.list.n != 0;
    case TV_DICT: return v->u.dict.n != 0;
    case TV_UNDEF: case TV_NONE: return false;
    default: return true;
    }
}
bool ld_tv_equal(const ld_tpl_value *a, const ld_tpl_value *b);
/* <0, 0, >0; *ok false when Python would raise TypeError */
int ld_tv_compare(const ld_tpl_value *a, const ld_tpl_value *b, bool *ok);
const char *ld_tv_type_name(const ld_tpl_value *v);
size_t ld_tv_utf8_count(const char *s, size_t len);
/* Python str.lower/upper/title/capitalize and jinja2's `title` filter
 * (words split at [-\s({[<]) on UTF-8 text (tpl_unicase.c); NULL on NOMEM */
enum { TV_CASE_LOWER, TV_CASE_UPPER, TV_CASE_TITLE, TV_CASE_CAPITALIZE, TV_CASE_TITLE_WORDS };
ld_tpl_value *ld_tv_case_map(ld_arena *a, const char *s, size_t len, int mode);

/* s[0..n) copied to d: up to 32 bytes inline, as two overlapping words or
 * pairs of words (most pieces of output are short: a template's
 * `<|start_header_id|>`), more with memcpy */
static inline void ld_tv_copy(char *d, const char *s, size_t n)
{
    if (n > 32) {
        memcpy(d, s, n);
    } else if (n > 16) {
        uint64_t w[4];
        memcpy(w, s, 16), memcpy(w + 2, s + n - 16, 16);
        memcpy(d, w, 16), memcpy(d + n - 16, w + 2, 16);
    } else if (n >= 8) {
        uint64_t x, y;
        memcpy(&x, s, 8), memcpy(&y, s + n - 8, 8);
        memcpy(d, &x, 8), memcpy(d + n - 8, &y, 8);
    } else if (n >= 4) {
        uint32_t x, y;
        memcpy(&x, s, 4), memcpy(&y, s + n - 4, 4);
        memcpy(d, &x, 4), memcpy(d + n - 4, &y, 4);
    } else if (n) {
        d[0] = s[0], d[n / 2] = s[n / 2], d[n - 1] = s[n - 1];
    }
}

/* growable byte buffer in an arena-free malloc'd block */
typedef struct tv_buf {
    char *p;
    size_t len, cap, max; /* max 0 = unlimited */
    bool failed;          /* allocation failed or max reached */
} tv_buf;
/* s[0..n) appended to b (through ld_tv_buf_reserve when it has no room) */
void ld_tv_buf_put_grow(tv_buf *b, const char *s, size_t n);
/* The same, inline when b has room: every piece of output goes through it.
 * Room within the capacity is room within b->max too (the capacity never
 * passes max + 1). */
static inline void ld_tv_buf_put(tv_buf *b, const char *s, size_t n)
{
    if (!b->failed && n < b->cap - b->len) {
        ld_tv_copy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
        return;
    }
    ld_tv_buf_put_grow(b, s, n);
}
static inline void ld_tv_buf_putc(tv_buf *b, char c) { ld_tv_buf_put(b, &c, 1); }
/* s[0..n) `times` over; checked against max as a whole before writing, so
 * a huge count fails at once */
void ld_tv_buf_repeat(tv_buf *b, const char *s, size_t n, size_t times);
/* code point cp (at most 0x10FFFF) as UTF-8 */
void ld_tv_buf_put_cp(tv_buf *b, uint32_t cp);
/* room for n more bytes (false, and b->failed, past max or without memory) */
bool ld_tv_buf_reserve(tv_buf *b, size_t n);
/* Python str(v) / repr(v) appended to b; false when v cannot be printed */
bool ld_tv_print(tv_buf *b, const ld_tpl_value *v, bool repr);
/* json.dumps(v, indent, separators, ensure_ascii, sort_keys); indent<0 =
 * None; flags: TV_JSON_* (none = ensure_ascii=False, sort_keys=False) */
#define TV_JSON_SORT_KEYS 1
#define TV_JSON_ASCII 2
bool ld_tv_tojson(tv_buf *b, const ld_tpl_value *v, int64_t indent, const char *item_sep,
               const char *key_sep, int flags, int depth, const char **why);
/* a string as Python repr() / json.dumps writes it (tpl_escape.c) */
void ld_tv_str_repr(tv_buf *b, const char *s, size_t n);
void ld_tv_json_str(tv_buf *b, const char *s, size_t n, bool ascii);
/* the code point at s (*cp = 0xFFFFFFFF for a byte that is not UTF-8);
 * returns its length in bytes, at least 1 */
size_t ld_tv_utf8_decode(const char *s, size_t n, uint32_t *cp);
void ld_tv_float_repr(tv_buf *b, double f);

/* ---------------------------------------------------------------- tokens */
enum {
    TK_EOF, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP
};
typedef struct tpl_token {
    uint8_t type;
    uint32_t off;     /* byte offset in the normalised source */
    const char *s;    /* DATA/NAME/OP: borrowed from source; STRING: decoded */
    size_t len;
    int64_t i;
    double f;
} tpl_token;

typedef struct tpl_tokens {
    tpl_token *v;
    size_t n, cap;
} tpl_tokens;

/* Tokenises the normalised source into toks (malloc'd array, caller frees
 * toks->v); decoded strings are allocated in `a`. */
ld_status ld_tpl_lex(const char *src, size_t len, ld_arena *a, tpl_tokens *toks,
                  ld_error *err);
/* line (1-based) and column (1-based) of `off` in src */
void ld_tpl_line_col(const char *src, size_t off, uint64_t *line, uint64_t *col);

/* ---------------------------------------------------------------- AST */
enum {
    /* statements */
    N_DATA, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_ATTR, N_MACRO, N_BREAK,
    N_CONTINUE, N_SET_BLOCK,
    /* expressions */
    N_CONST, N_NAME, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER, N_TEST,
    N_BINOP, N_UNARY, N_AND, N_OR, N_NOT, N_COMPARE, N_COND, N_LIST, N_DICT,
    N_TUPLE, N_CONCAT,
    /* statements added later */
    N_CALL_BLOCK,   /* {% call(params) callee(args) %}: a = call, list = body,
                       list2/kw = caller's parameters (a macro's shape) */
    N_FILTER_BLOCK, /* {% filter f | g %}: a = filter chain over b, list = body */
    N_BLOCK_VALUE   /* the rendered body inside a filter block's chain */
};
/* N_MACRO, N_CALL_BLOCK: neg bit 1 / 2 = the body uses varargs / kwargs.
 * N_FOR: neg bit 1 for `recursive`, bit 2 when the body names `loop` (else
 * no `loop` object is made).  N_COMPARE: c = the comparison before it in a
 * chain (`a < b < c` is `a < b and b < c`) */
#define TPL_FOR_RECURSIVE 1
#define TPL_FOR_USES_LOOP 2
/* N_GETATTR, N_GETITEM: neg has TPL_FAST_KEY when the key is a constant
 * string (s, s_len), which a dict or a namespace holding it answers at once
 * (tpl_expr.c; an attribute only when its name can name no method), and
 * TPL_KEY_PLAIN when the key names no method (ld_tpl_attr_plain): one they
 * lack is then undefined at once too */
#define TPL_FAST_KEY 1
#define TPL_KEY_PLAIN 2
/* N_GETITEM: neg has TPL_FAST_INDEX when the key is a constant int (b's
 * lit), which a list answers at once when it has the item (tpl_expr.c's
 * key chains: `message.tool_calls[0].function`) */
#define TPL_FAST_INDEX 4

/* N_COMPARE without a chain: its slot names the shape the parser saw,
 * which a condition (tpl_expr.c's ld_tpl_eval_cond) evaluates without the
 * evaluator's calls, falling back to them when the values are not the
 * usual kinds: `name.key == 'text'` / `name['key'] != 'text'` (a key
 * TPL_FAST_KEY can take), and `'text' in name` / `not in`. */
enum { TPL_CMP_ANY, TPL_CMP_KEY_EQ_STR, TPL_CMP_STR_IN_NAME };

/* Every distinct name of a template has a slot, its index among the names
 * the parser interned: the render finds a variable by its slot, never by
 * its text (eval/tpl_scope.c).  These names come first, as the evaluator
 * binds them itself. */
enum { TPL_SLOT_LOOP, TPL_SLOT_CALLER, TPL_SLOT_VARARGS, TPL_SLOT_KWARGS, TPL_SLOTS_RESERVED };

typedef struct tpl_node tpl_node;
typedef struct tpl_nodes {
    tpl_node **v;
    size_t n;
} tpl_nodes;

struct tpl_node {
    uint8_t kind;
    uint8_t neg;        /* N_TEST: `is not`; N_COMPARE: op code */
    uint32_t off;       /* where it starts in the source (errors) */
    uint32_t slot;      /* the slot of the name: N_NAME; the target of N_SET,
                           N_SET_BLOCK, N_FOR (one name); N_SET_ATTR's
                           namespace; N_MACRO's name.  N_FILTER: the
                           filter's TPL_FILTER_* (0: found by name); N_TEST:
                           its TPL_TEST_* (0: found by name); N_COMPARE:
                           its TPL_CMP_* */
    const char *s;      /* name / attr / op / filter / test; data text */
    size_t s_len;
    tpl_node *a, *b, *c;   /* operands, condition, iterable, ... */
    tpl_nodes list;        /* args / items / body / targets */
    tpl_nodes list2;       /* kwarg values / dict values / else body */
    const char **kw;       /* kwarg names (list2.n of them) */
    const uint32_t *kw_slot; /* N_MACRO, N_CALL_BLOCK: the slots of the kw names (parameters) */
    const ld_tpl_value *lit; /* N_CONST */
};

struct ld_tpl {
    ld_arena arena;     /* owns the source copy, the tokens' strings, the AST */
    const char *src;    /* normalised source */
    size_t src_len;
    tpl_nodes body;
    size_t n_slots;     /* distinct names: a render's variables are slots 0..n_slots-1 */
};

ld_status ld_tpl_parse(ld_tpl *t, const tpl_tokens *toks, ld_error *err);

/* ---------------------------------------------------------------- eval */
typedef struct tpl_rt tpl_rt; /* render state, tpl_eval.c */

/* Raise a runtime error at node `at` (code LD_ERR_MISMATCH etc.) */
ld_status ld_tpl_rt_fail(tpl_rt *rt, const tpl_node *at, ld_status code,
                      const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
ld_arena *ld_tpl_rt_arena(tpl_rt *rt);
const char *ld_tpl_rt_today(tpl_rt *rt);
/* strftime_now ran: the render depends on the date (ld_tpl_limits.date_used) */
void ld_tpl_rt_date_used(tpl_rt *rt);
/* The render's memory limit (ld_tpl_limits.max_memory_bytes) and what is
 * left of it: the limit less what the render's arena has handed out. */
size_t ld_tpl_rt_mem_limit(const tpl_rt *rt);
size_t ld_tpl_rt_mem_left(const tpl_rt *rt);
/* A result of (at least) `bytes` that `what` (a filter's name) is about to
 * build, charged before the work: LD_OK when it fits in what is left, else
 * LD_ERR_LIMIT naming `what` and the limit.  Filters whose result can be
 * much larger than their input call it first, so that an oversized result
 * fails at once instead of after seconds of work. */
ld_status ld_tpl_rt_charge(tpl_rt *rt, const tpl_node *at, const char *what, size_t bytes);
/* LD_ERR_LIMIT: `what` reached the memory limit while building its result */
ld_status ld_tpl_rt_over(tpl_rt *rt, const tpl_node *at, const char *what);
/* An empty scratch buffer for a result, capped at what is left of the
 * render's memory: it fails as it grows past the limit (the limit is
 * charged as memory grows, not once the text is made). */
tv_buf ld_tpl_rt_buf(const tpl_rt *rt);
/* b's text as a new string in the render's arena; frees b's memory.
 * LD_ERR_LIMIT naming `what` when b failed. */
ld_status ld_tpl_rt_buf_value(tpl_rt *rt, const tpl_node *at, const char *what, tv_buf *b, ld_tpl_value **out);

/* Python's ints have no bound, this interpreter's have 64 bits: an integer
 * beyond them (its decimal digits) is refused with LD_ERR_UNSUPPORTED,
 * never wrapped or cut. */
ld_status ld_tpl_int_too_big(tpl_rt *rt, const tpl_node *at, const char *digits);
/* int(d) of Python: the integer part, or the error Python raises for NaN
 * and infinities, or the one above past 64 bits */
ld_status ld_tpl_float_to_int(tpl_rt *rt, const tpl_node *at, double d, int64_t *out);

/* Filters, tests, methods and globals (tpl_filters.c).  args/kwargs already
 * evaluated; kw names parallel kwargs. */
typedef struct tpl_args {
    ld_tpl_value **pos;
    size_t n_pos;
    ld_tpl_value **kwv;
    const char **kw;
    size_t n_kw;
} tpl_args;
/* a == b for the names filters, tests and methods are dispatched by, in
 * long chains of these: the first byte compared at once (most differ
 * there), the rest inline, a byte at a time, without strcmp's call */
static inline bool ld_tpl_name_is(const char *a, const char *b)
{
    if (a[0] != b[0]) return false;
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}
ld_status ld_tpl_filter(tpl_rt *rt, const tpl_node *at, const char *name,
                     ld_tpl_value *v, tpl_args *args, ld_tpl_value **out);
/* Filters the parser tells by name once (N_FILTER's slot), called without
 * the search by name: ld_tpl_filter_id(name), 0 for the others; filter
 * node n applied to v. */
enum { TPL_FILTER_BY_NAME, TPL_FILTER_TRIM, TPL_FILTER_TOJSON, TPL_FILTER_LENGTH };
uint32_t ld_tpl_filter_id(const char *name);
ld_status ld_tpl_filter_node(tpl_rt *rt, const tpl_node *n, ld_tpl_value *v, tpl_args *args, ld_tpl_value **out);
/* The tests of a value's kind alone, told by name once (N_TEST's slot):
 * ld_tpl_test_id(name), 0 for the others; the test of id on v. */
enum {
    TPL_TEST_BY_NAME, TPL_TEST_DEFINED, TPL_TEST_UNDEFINED, TPL_TEST_NONE, TPL_TEST_STRING,
    TPL_TEST_MAPPING, TPL_TEST_ITERABLE, TPL_TEST_SEQUENCE, TPL_TEST_NUMBER, TPL_TEST_INTEGER,
    TPL_TEST_FLOAT, TPL_TEST_BOOLEAN, TPL_TEST_TRUE, TPL_TEST_FALSE, TPL_TEST_CALLABLE
};
uint32_t ld_tpl_test_id(const char *name);
bool ld_tpl_kind_test(uint32_t id, const ld_tpl_value *v);
/* {{ v | tojson(args) }}: the filter's text appended to out, as
 * ld_tpl_filter's "tojson" then a print would append it, with the same
 * errors */
ld_status ld_tpl_tojson_print(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *args, tv_buf *out);
ld_status ld_tpl_test(tpl_rt *rt, const tpl_node *at, const char *name,
                   ld_tpl_value *v, tpl_args *args, bool *out);
ld_status ld_tpl_method(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *self,
                     const char *name, tpl_args *args, ld_tpl_value **out);
/* attribute `name` of v: dict key, method, or undefined */
ld_tpl_value *ld_tpl_getattr(tpl_rt *rt, const ld_tpl_value *v, const char *name,
                          size_t len);
bool ld_tpl_has_method(const ld_tpl_value *v, const char *name);
/* x.name of a dict or namespace is its key `name` (when it has it): name is
 * none of the dict methods, the sandbox's refused ones or `loop.cycle` */
bool ld_tpl_attr_plain(const char *name, size_t len);
enum { TF_RAISE = 1, TF_STRFTIME, TF_NAMESPACE, TF_RANGE, TF_DICT };

/* helpers shared by eval and filters */
/* str(v); NULL when v has no text, or with the limit's error (at `at`)
 * recorded when the text would pass the render's memory limit */
ld_tpl_value *ld_tpl_str_of(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v);
/* items of an iterable as a list (dict -> keys, str -> chars); NULL + error */
ld_status ld_tpl_iter(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *v,
                   ld_tpl_value **out);
ld_status ld_tpl_call_macro(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *m,
                         tpl_args *args, ld_tpl_value **out);
/* the same with `caller` (a call block's body) visible in the macro */
ld_status ld_tpl_call_macro_with(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *m,
                              tpl_args *args, ld_tpl_value *caller, ld_tpl_value **out);
ld_status ld_tpl_nomem(tpl_rt *rt, const tpl_node *at);
/* keyword argument `name`, else positional `pos`, else NULL */
ld_tpl_value *ld_tpl_kwarg(tpl_args *a, const char *name, size_t pos);
/* attribute path "a.b.0" of v (jinja's make_attrgetter); undefined if absent */
ld_tpl_value *ld_tpl_attr_path(tpl_rt *rt, ld_tpl_value *v, const ld_tpl_value *path);
/* filters and methods of their own files: tpl_seq.c, tpl_fmt.c */
ld_status ld_tpl_filter_unique(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_groupby(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_indent(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_str_format(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_batch(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_slice(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_attr(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_format(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_center(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_truncate(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_wordcount(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, ld_tpl_value **out);
ld_status ld_tpl_filter_escape(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, ld_tpl_value **out);
/* tpl_num.c; ld_tpl_filter_number: int, float or abs (f) */
ld_status ld_tpl_filter_round(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_sum(tpl_rt *rt, const tpl_node *at, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_number(tpl_rt *rt, const tpl_node *at, const char *f, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
ld_status ld_tpl_filter_minmax(tpl_rt *rt, const tpl_node *at, bool max, ld_tpl_value *v, tpl_args *a, ld_tpl_value **out);
/* tpl_strmeth.c: the other str methods; LD_ERR_UNSUPPORTED (no error set)
 * for a name it does not know */
ld_status ld_tpl_str_method_more(tpl_rt *rt, const tpl_node *at, const ld_tpl_value *s, const char *m, tpl_args *a,
                              ld_tpl_value **out);
/* str.isupper() (upper) / str.islower() of s */
bool ld_tpl_str_is_case(tpl_rt *rt, const ld_tpl_value *s, bool upper);
/* length of the line break at s as str.splitlines sees them, 0 if none */
size_t ld_tv_line_break(const char *s, size_t n);

#endif
