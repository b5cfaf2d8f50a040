/* fuzz_pylit.c - libFuzzer target for parse/pylit/pylit.c.  Parses the input as
 * one value and as a kwargs tail, decodes every string found and counts its
 * characters; must never crash, hang or read outside the input.  The corpus
 * in tests/fuzz/corpus/pylit/ replays as the plain test fuzz.pylit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/pylit/pylit.h"
#include "parse/pylit/pylit_internal.h"
#include "parse/pylit/pylit_scan.h"

static void walk(const ld_py_value *v, ld_arena *a, int depth)
{
    const char *s;
    size_t n;
    if (depth > 4096) abort(); /* the parser's depth limit must hold */
    switch (v->kind) {
    case LD_PY_STR:
    case LD_PY_BYTES: {
        ld_status st = ld_py_str_decode(v, a, &s, &n, NULL);
        size_t chars = 0;
        if (st == LD_OK) {
            chars = ld_utf8_count_chars(s, n);
            if (v->flags & LD_PY_F_ESCAPED && !(v->flags & LD_PY_F_RAWSTR) && s[n] != '\0')
                abort(); /* decoded copies are NUL-terminated */
        }
        for (int level = 0; level <= 4; level++) { /* counted while decoded (AVX2's blocks at 2 and 3,
                                                      VBMI2's at 4): the same bytes and count */
            char *d = malloc(v->n ? v->n : 1);
            size_t dn;
            uint64_t dc;
            if (!d) abort();
            ld_status dst = ld_py_str_decode_count_at(level, v, d, &dn, &dc, NULL);
            if ((dst == LD_OK) != (st == LD_OK) ||
                (st == LD_OK && (dn != n || (n && memcmp(d, s, n) != 0) || dc != chars)))
                abort();
            free(d);
        }
        if (v->kind == LD_PY_STR) { /* measuring gives what decoding then counting gives */
            size_t mn;
            uint64_t mc;
            ld_status mst = ld_py_str_measure(v, &mn, &mc, NULL);
            if ((mst == LD_OK) != (st == LD_OK) || (st == LD_OK && (mn != n || mc != chars))) abort();
        }
        break;
    }
    case LD_PY_LIST:
    case LD_PY_TUPLE:
    case LD_PY_SET:
    case LD_PY_TRUNC:
    case LD_PY_DICT: {
        if (v->kind == LD_PY_LIST && (v->flags & LD_PY_F_SKIMMED)) {
            if (v->u.items || v->n == 0) abort(); /* skimmed: counted, no items */
            break;
        }
        size_t k = v->kind == LD_PY_DICT ? 2 * (size_t)v->n : v->n;
        for (size_t i = 0; i < k; i++) walk(&v->u.items[i], a, depth + 1);
        if (v->kind == LD_PY_DICT) (void)ld_py_dict_get(v, "text");
        break;
    }
    case LD_PY_CALL:
        for (uint32_t i = 0; i < v->u.call->n_args; i++)
            walk(&v->u.call->args[i], a, depth + 1);
        (void)ld_py_call_get(v, "rid");
        break;
    case LD_PY_NAME:
    case LD_PY_OPAQUE:
        (void)ld_utf8_count_chars(v->u.raw, v->n);
        break;
    default: break;
    }
}

/* Every block reader of the string scans (pylit_scan.h), the UTF-8 count,
 * the "..." search and the list skim answer as their byte-by-byte forms do,
 * over the input taken as a string's text or a list's items. */
static void same_at_every_level(const char *buf, size_t size)
{
    for (int q = 0; q < 2; q++)
        for (int in = 0; in < 2; in++) {
            int e0 = in, b0 = 0;
            size_t want = ld_pyp_string_end_at(0, buf, size, q ? '"' : '\'', &e0, &b0);
            for (int level = 1; level <= 3; level++) {
                int e = in, b = 0;
                size_t got = ld_pyp_string_end_at(level, buf, size, q ? '"' : '\'', &e, &b);
                if (got != want || b != b0 || (got == size && e != e0)) abort();
            }
        }
    size_t stop1 = 0, count1 = ld_pyp_simple_escapes_at(1, buf, size, &stop1);
    for (int level = 2; level <= 3; level++) {
        size_t stop, count = ld_pyp_simple_escapes_at(level, buf, size, &stop);
        if (ld_pyp_scan_level() >= level && (stop != stop1 || count != count1)) abort();
    }
    size_t chars = ld_utf8_count_chars_scalar(buf, size);
    for (int level = 1; level <= 3; level++)
        if (ld_utf8_count_chars_at(level, buf, size) != chars) abort();
    int dots = ld_pyp_has_dots_at(0, buf, size);
    for (int level = 1; level <= 3; level++)
        if (ld_pyp_has_dots_at(level, buf, size) != dots) abort();
    const unsigned char *u = (const unsigned char *)buf, *c0 = NULL;
    size_t items = ld_pyp_skim_list_at(0, u, u + size, &c0);
    for (int level = 1; level <= 3; level++) {
        const unsigned char *c = NULL;
        if (ld_pyp_skim_list_at(level, u, u + size, &c) != items || (items && c != c0)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so reading one byte past the end is caught even
     * when the fuzzer's own buffer is larger */
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    ld_arena arena;
    ld_arena_init(&arena, 64u << 20);
    ld_py_value *v;
    ld_error err;
    size_t end;
    for (unsigned flags = 0; flags <= LD_PYLIT_WHOLE; flags++) {
        if (ld_pylit_parse(buf, size, flags, NULL, &arena, &v, &end, &err) == LD_OK) {
            if (end > size) abort();
            walk(v, &arena, 0);
        } else if (err.offset > size) {
            abort(); /* an error offset must point into the input (or its end) */
        }
        ld_arena_reset(&arena);
    }
    /* skimming int lists must accept exactly what the full parse accepts,
     * with the same item counts at the top level */
    ld_pylit_limits skim = {0, 0, LD_PYLIT_SKIM_INT_LISTS};
    ld_py_value *full = NULL;
    ld_status full_st = ld_pylit_parse(buf, size, LD_PYLIT_WHOLE, NULL, &arena, &full, &end, &err);
    ld_arena skim_arena;
    ld_arena_init(&skim_arena, 64u << 20);
    ld_status skim_st = ld_pylit_parse(buf, size, LD_PYLIT_WHOLE, &skim, &skim_arena, &v, &end, &err);
    if ((full_st == LD_OK) != (skim_st == LD_OK)) abort();
    if (full_st == LD_OK) {
        walk(v, &skim_arena, 0);
        if (full->kind != v->kind) abort();
        if (full->kind == LD_PY_LIST && full->n != v->n) abort();
    }
    ld_arena_release(&skim_arena);
    ld_arena_reset(&arena);
    ld_pylit_limits lim = {8, 30, 0};
    if (ld_pylit_parse_kwargs(buf, size, &lim, &arena, &v, &err) == LD_OK) walk(v, &arena, 0);
    ld_arena_reset(&arena);
    if (ld_pylit_parse_kwargs(buf, size, NULL, &arena, &v, &err) == LD_OK) walk(v, &arena, 0);
    ld_arena_reset(&arena);
    /* the same bytes as JSON text (SGLang's JSON mode), half 2 so that the
     * cut shapes are met often; skimmed and not */
    for (int k = 0; k < 2; k++) {
        ld_status st = ld_pylit_parse_json(buf, size, 2, k ? &skim : NULL, &arena, &v, &end, &err);
        if (st == LD_OK) {
            if (end > size) abort();
            walk(v, &arena, 0);
        } else if (err.offset > size) {
            abort();
        }
        ld_arena_reset(&arena);
    }
    ld_arena_release(&arena);
    same_at_every_level(buf, size);
    free(buf);
    return 0;
}
