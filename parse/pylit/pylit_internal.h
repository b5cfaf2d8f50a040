/* pylit_internal.h - the Python-literal parser's state and what its files
 * share: pylit.c (the grammar: strings, containers, calls, words, the entry
 * points), pylit_intlist.c (the fast paths of token-id lists),
 * pylit_number.c (numbers), pylit_json_read.c (JSON text: its keywords and
 * SGLang's JSON-mode truncation) and pylit_stack.c (errors, the scratch stack of
 * finished children, containers made from it), each calling only those
 * after it; and pylit_str.c's byte-wise UTF-8 count, for the tests of its
 * SIMD path.  The hot helpers are inline here.  Not public. */
#ifndef LD_PYLIT_INTERNAL_H
#define LD_PYLIT_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "pylit.h"

enum {
    PY_DEFAULT_DEPTH = 512,
    /* Each level costs three recursive frames (up to ~1 KiB of C stack
     * under sanitizers); a larger caller limit is clamped so that no input
     * can exhaust an ordinary thread stack. */
    PY_HARD_DEPTH = 2048,
    PY_DEFAULT_DIGITS = 4300,
    PY_MAX_FLOAT_LEN = 512, /* longest float literal handed to strtod */
    PY_STACK_INIT = 256,
    PY_STACK_LOCAL = 128    /* children the entry point holds on the C stack before the first malloc */
};

typedef struct py_parser {
    const char *buf;
    size_t len;
    size_t pos;
    ld_arena *arena;
    ld_error *err;
    uint32_t depth;
    uint32_t max_depth;
    uint32_t max_digits;
    ld_py_value *stk; /* scratch stack of finished children: `local` at first, malloc'd
                         once it outgrows it (a request line's values mostly fit) */
    ld_py_value *local; /* the entry point's array of PY_STACK_LOCAL on the C stack */
    size_t sp;
    size_t cap;
    size_t n_markers; /* logger markers met so far in this parse */
    int skim_ints;    /* LD_PYLIT_SKIM_INT_LISTS */
    int skim_here;    /* the value being parsed may be skimmed (see value_under) */
    int json;         /* JSON text (ld_pylit_parse_json): pylit_json_read.c */
    uint32_t json_half; /* JSON-mode truncation: head and tail of this many */
} py_parser;

static inline int is_digit(unsigned char c) { return (unsigned)(c - '0') < 10u; }

static inline int is_ident_start(unsigned char c)
{
    return (unsigned)((c | 0x20) - 'a') < 26u || c == '_';
}

static inline int is_ident_char(unsigned char c)
{
    return is_ident_start(c) || is_digit(c);
}

static inline void skip_ws(py_parser *p)
{
    while (p->pos < p->len) {
        char c = p->buf[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* ---- string blocks (pylit_scan.c, pylit_str.c): what 64-byte block scans share */

/* Keeps a mask in a general register: the carry from block to block runs
 * through integer adds, and a compiler that keeps the masks in AVX-512
 * mask registers moves them to and fro on that chain (3 cycles a move). */
#if defined(__GNUC__)
#define IN_GPR(m) __asm__("" : "+r"(m))
#else
#define IN_GPR(m) ((void)0)
#endif

/* The escaped bytes of a 64-byte block whose backslashes are `bs` (bit k
 * for byte k): the byte after each backslash that is not itself escaped.
 * *carry: on entry, whether the block's first byte is escaped; on return,
 * whether the next block's is.  A run of backslashes that starts on an even
 * bit escapes the odd bits after it and one that starts on an odd bit the
 * even ones: adding each odd-started run's first bit to the runs carries
 * past them, which tells the two apart without a branch (simdjson's
 * find_escaped_branchless). */
static inline uint64_t escaped_bytes(uint64_t bs, uint64_t *carry)
{
    const uint64_t even = 0x5555555555555555ull;
    bs &= ~*carry; /* an escaped backslash escapes nothing */
    uint64_t follows = bs << 1 | *carry;
    uint64_t odd_starts = bs & ~even & ~follows;
    uint64_t even_runs;
    IN_GPR(odd_starts);
    *carry = __builtin_add_overflow(odd_starts, bs, &even_runs);
    uint64_t esc = (even ^ (even_runs << 1)) & follows;
    IN_GPR(esc);
    return esc;
}

/* The one-byte escapes' second bytes (\\ ' " a b f n r t v), by nibbles:
 * the high nibble picks a bit (2: 1, 5: 2, 6: 4, 7: 8), the low nibble's
 * entry holds the bits of the set's bytes that end in it. */
#define SIMPLE_HI 0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0
#define SIMPLE_LO 0, 4, 1 | 4 | 8, 0, 8, 0, 4 | 8, 1, 0, 0, 0, 0, 2, 0, 4, 0

/* What a one-byte escape decodes to, by the byte after its backslash; 0:
 * not a one-byte escape (defined in pylit_scan.c, read by the decoders) */
extern const char ld_pyp_one_byte_escapes[256];

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* UTF-8 judged by three nibble tables for vpshufb, a pair of bytes at a
 * time: the tables, and what their bits mean, in pylit_scan.c
 * (utf8_table_errors); read by the counted decodes of pylit_scan.c and
 * pylit_decode_avx2.c */
extern const unsigned char ld_pyp_utf8_tables[3][16];

/* What a 64-byte block is compared with to classify its bytes (AVX-512BW):
 * set once before a block loop (block_classes_avx512). */
typedef struct {
    __m512i backslash, nib, hi_tbl, lo_tbl; /* nibble tables: SIMPLE_HI, SIMPLE_LO */
} block_classes;

__attribute__((target("avx512f,avx512bw,bmi,bmi2,popcnt")))
static inline block_classes block_classes_avx512(void)
{
    return (block_classes){ _mm512_set1_epi8('\\'), _mm512_set1_epi8(0x0F),
                            _mm512_broadcast_i32x4(_mm_setr_epi8(SIMPLE_HI)),
                            _mm512_broadcast_i32x4(_mm_setr_epi8(SIMPLE_LO)) };
}

/* Block x's classes, bit k for byte k: *bs its backslashes, *simple the
 * bytes that end a one-byte escape (looked up by nibble).  Inline in each
 * block loop, whose target must include this one's. */
__attribute__((target("avx512f,avx512bw,bmi,bmi2,popcnt")))
static inline void classify_block_avx512(__m512i x, const block_classes *c, uint64_t *bs, uint64_t *simple)
{
    *bs = _mm512_cmpeq_epi8_mask(x, c->backslash);
    __m512i hi = _mm512_shuffle_epi8(c->hi_tbl, _mm512_and_si512(_mm512_srli_epi16(x, 4), c->nib));
    __m512i lo = _mm512_shuffle_epi8(c->lo_tbl, _mm512_and_si512(x, c->nib));
    *simple = _mm512_test_epi8_mask(hi, lo);
    IN_GPR(*bs);
    IN_GPR(*simple);
}
#endif

/* ---- pylit_stack.c */
uint8_t ld_pyp_marks_of_children(const py_parser *p, size_t base);
ld_status ld_pyp_bad_byte(py_parser *p, size_t at, const char *expected);
ld_status ld_pyp_eof_err(py_parser *p, const char *expected);
ld_status ld_pyp_nomem(py_parser *p, size_t n);
ld_status ld_pyp_grow_stack(py_parser *p);
ld_status ld_pyp_enter(py_parser *p, size_t at);
ld_status ld_pyp_pop_items(py_parser *p, size_t base, ld_py_value **out_items);
ld_status ld_pyp_make_container(py_parser *p, ld_py_value *out, ld_py_kind kind, size_t start, size_t base);

static inline ld_status push(py_parser *p, const ld_py_value *v)
{
    if (p->sp == p->cap) LD_TRY(ld_pyp_grow_stack(p));
    p->stk[p->sp++] = *v;
    return LD_OK;
}

/* ---- pylit_number.c */
ld_status ld_pyp_parse_number(py_parser *p, ld_py_value *out);

/* Token-id lists: up to 18 digits followed by ',', ']' or a space are an
 * int64 for sure, so skip the general number scanner.  Returns 0 (and
 * leaves p->pos alone) when the general path must decide. */
static inline int try_small_int(py_parser *p, ld_py_value *out)
{
    const char *b = p->buf;
    size_t i = p->pos, lim = p->len - i > 18 ? i + 18 : p->len;
    if (b[i] == '0') return 0; /* "0", "00", "0.5", "0e1": rare, let the slow path judge */
    uint64_t v = 0;
    while (i < lim && is_digit((unsigned char)b[i]))
        v = v * 10 + (unsigned)(b[i++] - '0');
    if (i == p->pos || i >= p->len) return 0;
    char c = b[i];
    if (c != ',' && c != ']' && c != ' ' && c != ')' && c != '}' && c != ':')
        return 0;
    out->kind = LD_PY_INT;
    out->flags = 0;
    out->n = 0;
    out->off = p->pos;
    out->u.i = (int64_t)v;
    p->pos = i;
    return 1;
}

/* ---- pylit_json_read.c: what JSON text adds to the grammar */
ld_status ld_pyp_json_word(py_parser *p, ld_py_value *out);
/* a JSON string just parsed: SGLang's cut one becomes LD_PY_TRUNC */
ld_status ld_pyp_json_cut(py_parser *p, ld_py_value *str);
void ld_pyp_json_list_marker(py_parser *p, size_t base);
/* whether s[0..n) holds "..." (SIMD; the same answer as memmem) */
int ld_pyp_has_dots(const char *s, size_t n);
/* ... with its block reader capped at `level` (pylit_scan.h's), for the tests */
int ld_pyp_has_dots_at(int level, const char *s, size_t n);

/* ---- pylit_str.c: ld_utf8_count_chars's byte-wise path, which the SIMD
 * one must always agree with (tests) */
size_t ld_utf8_count_chars_scalar(const char *s, size_t len);
/* ... and its SSE2 path (ld_utf8_count_chars takes AVX2 where it can) */
size_t ld_utf8_count_chars_sse2(const char *s, size_t len);
/* ... and every path: level as pylit_scan.h's (0 byte by byte, 1 SSE2, 2
 * AVX2, 3 AVX-512BW), each where the machine has it */
size_t ld_utf8_count_chars_at(int level, const char *s, size_t len);

/* ... and ld_py_str_decode_count with the decoder capped at `level`
 * (pylit_scan.h's): 4 AVX-512 VBMI2's counted decode, 2 and 3 AVX2's, below
 * 2 decoded then counted */
ld_status ld_py_str_decode_count_at(int level, const ld_py_value *v, char *dst, size_t *out_len,
                                    uint64_t *out_chars, ld_error *err);

/* ---- pylit_intlist.c */
int ld_pyp_int_list_direct(py_parser *p, ld_py_value *out);
/* A skimmed token-id list from s (just after its '['): the item count with
 * *out_close at its ']', 0 for any other shape; with the block reader capped
 * at `level` (pylit_scan.h's levels), for the tests of every path. */
size_t ld_pyp_skim_list_at(int level, const unsigned char *s, const unsigned char *end,
                           const unsigned char **out_close);
ld_status ld_pyp_int_run(py_parser *p, char close);

#endif /* LD_PYLIT_INTERNAL_H */
