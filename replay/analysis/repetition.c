/* repetition.c - see repetition.h. */
#include "repetition.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "repetition_screen.h"

#define W 8 /* window bytes */

/* The window's 8 bytes as one word (what the table compares), and its slot:
 * Fibonacci hashing, the product's top bits, which every input bit reaches
 * (one multiply: this runs at every byte of every output). */
static uint64_t win_word(const char *p)
{
    uint64_t x;
    memcpy(&x, p, sizeof x);
    return x;
}

static size_t win_slot(uint64_t x, unsigned shift)
{
    return (size_t)((x * 0x9E3779B97F4A7C15ull) >> shift);
}

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* ASCII letters and the first byte of every non-ASCII character. */
static size_t letters(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') k++;
        else if (c >= 0xC0) k++;
    }
    return k;
}

/* The counts first: letters() reads the unit, which is only cheap once the
 * stretch is known to hold several copies of it (linear time overall). */
static int passes(const char *s, size_t start, size_t end, size_t p)
{
    size_t len = end - start, count = len / p;
    if (len < LD_REP_MIN_BYTES) return 0;
    if (count < ld_rep_min_count(p)) return 0;
    return letters(s + start, p) >= LD_REP_MIN_LETTERS;
}

/* Keeps the periodic stretch [start, end) of period p if it beats *best. */
static void consider(const char *s, size_t start, size_t end, size_t p, ld_repetition *best,
                     int *found)
{
    if (!passes(s, start, end, p) || (*found && end - start <= best->len)) return;
    size_t u = start;
    /* show the unit from a word start when it holds one (a rotation of it) */
    int at_word = start == 0 || is_space((unsigned char)s[start - 1]);
    for (size_t k = start + 1; !at_word && k < start + p; k++)
        if (is_space((unsigned char)s[k - 1]) && !is_space((unsigned char)s[k])) { u = k; break; }
    *best = (ld_repetition){start, end - start, u, p, (end - start) / p};
    *found = 1;
}

/* Position of the previous window equal to s[i..i+W) (or SIZE_MAX); the
 * table (2^bits slots) then remembers i for it.  tbl holds positions + 1,
 * 0 = empty.  Which slot a window lands in does not change the answer: the
 * probe compares the windows themselves. */
static size_t last_seen(const char *s, uint32_t *tbl, unsigned bits, size_t i)
{
    size_t mask = ((size_t)1 << bits) - 1;
    uint64_t w = win_word(s + i);
    size_t slot = win_slot(w, 64 - bits);
    while (tbl[slot]) {
        size_t j = tbl[slot] - 1;
        if (win_word(s + j) == w) {
            tbl[slot] = (uint32_t)(i + 1);
            return j;
        }
        slot = (slot + 1) & mask;
    }
    tbl[slot] = (uint32_t)(i + 1);
    return SIZE_MAX;
}

/* The zeroed table: from the scratch arena when it is small (the arena
 * keeps its memory across requests: no allocation, no fresh pages, one
 * memset; *lent = 1), else calloc'd (*lent = 0: the caller frees it). */
static uint32_t *table_new(ld_arena *scratch, size_t size, int *lent)
{
    uint32_t *tbl = scratch && size <= LD_REP_ARENA_SLOTS ? ld_arena_alloc(scratch, size * sizeof *tbl)
                                                          : NULL;
    *lent = tbl != NULL;
    if (tbl) return memset(tbl, 0, size * sizeof *tbl);
    return calloc(size, sizeof *tbl);
}

ld_status ld_repetition_find(const char *s, size_t n, ld_arena *scratch, ld_repetition *out,
                             int *out_found, ld_error *err)
{
    *out_found = 0;
    size_t base = n > LD_REP_MAX_SCAN ? n - LD_REP_MAX_SCAN : 0;
    s += base;
    n -= base;
    if (n < LD_REP_MIN_BYTES) return LD_OK;
    /* most outputs do not loop: the screen proves it for them at a fraction
     * of the cost of the search below (an exact answer either way) */
    if (!ld_rep_screen(s, n, scratch)) return LD_OK;
    size_t size = 64;
    unsigned bits = 6;
    while (size < 2 * n) size *= 2, bits++;
    int lent;
    uint32_t *tbl = table_new(scratch, size, &lent);
    if (!tbl) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory scanning %zu bytes for repetition", n);
    size_t p = 0, start = 0, end = 0;
    for (size_t i = 0; i + W <= n; i++) {
        if (p && s[i + W - 1] == s[i + W - 1 - p]) { /* the run goes on */
            end = i + W;
            last_seen(s, tbl, bits, i);
            continue;
        }
        if (p) consider(s, start, end, p, out, out_found);
        p = 0;
        size_t j = last_seen(s, tbl, bits, i);
        if (j != SIZE_MAX) {
            p = i - j;
            start = j;
            end = i + W;
        }
    }
    if (p) consider(s, start, end, p, out, out_found);
    if (!lent) free(tbl);
    if (*out_found) {
        out->start += base;
        out->unit_off += base;
    }
    return LD_OK;
}
