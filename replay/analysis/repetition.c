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

/* The search's state: the text, the window table and chain, the best
 * stretch so far, and the last run a walk extended (see walk()). */
typedef struct search {
    const char *s;
    size_t n;
    uint32_t *tbl;   /* per slot: the newest position of a window + 1, 0 = empty */
    uint32_t *prev;  /* per position: the previous one with the same window + 1, 0 = none */
    unsigned bits;   /* the table has 2^bits slots */
    size_t side_p, side_a, side_b; /* the run [side_a, side_b) of period side_p, 0 = none */
    ld_repetition *best;
    int *found;
} search;

/* The stretch's shortest period: the least q dividing p with the unit
 * s[start..start+p) q-periodic (then the whole stretch is).  A main run's
 * p is one already; a walk's pair may be several units apart.  Costs
 * O(p) and a comparison of p bytes per divisor: the caller asks only of
 * stretches of 3 copies or more. */
static size_t shortest_period(const char *s, size_t start, size_t p)
{
    for (size_t q = 1; q < p; q++)
        if (p % q == 0 && !memcmp(s + start + q, s + start, p - q)) return q;
    return p;
}

/* The shortest unit, a multiple k * q of the stretch's shortest period q,
 * that passes the thresholds over the whole stretch of len bytes (0 if
 * none): the stretch has period k * q as well, and 18 copies of 6 bytes
 * are 6 of 18, which pass where 20 copies of 6 would be needed.  The
 * letters are those of the shortest unit: 64 "a" are no loop of "aa" (a
 * unit of one letter and its multiples never pass).  A unit of 64 bytes
 * or more passes from 3 copies, so k stays below 64 / q + 2. */
static size_t passing_unit(const char *s, size_t start, size_t len, size_t q)
{
    if (len < LD_REP_MIN_BYTES || letters(s + start, q) < LD_REP_MIN_LETTERS) return 0;
    for (size_t u = q; 3 * u <= len; u += q)
        if (len >= ld_rep_need_bytes(u)) return u;
    return 0;
}

/* Keeps the periodic stretch [start, end) of period p if it passes and
 * beats the best: a longer stretch, or the same stretch with a shorter
 * unit (the first one found wins among stretches of equal length).  The
 * stretch is first widened to its start: s[k] == s[k-p] from start + p on. */
static void consider(search *se, size_t start, size_t end, size_t p)
{
    const char *s = se->s;
    while (start > 0 && s[start - 1] == s[start - 1 + p]) start--;
    size_t len = end - start;
    ld_repetition *best = se->best;
    if (*se->found && len < best->len) return;
    /* fewer than 3 copies of p: no unit passes, unless the stretch has a
     * shorter period; a main run's p is its shortest, and a walk meets the
     * shorter period first (a nearer sighting at the same position) */
    if (len < LD_REP_MIN_BYTES || len < 3 * p) return;
    size_t unit = passing_unit(s, start, len, shortest_period(s, start, p));
    if (!unit) return;
    if (*se->found && len == best->len && !(start == best->start && unit < best->unit_len)) return;
    size_t u = start;
    /* show the unit from a word start when it holds one (a rotation of it) */
    int at_word = start == 0 || is_space((unsigned char)s[start - 1]);
    for (size_t k = start + 1; !at_word && k < start + unit; k++)
        if (is_space((unsigned char)s[k - 1]) && !is_space((unsigned char)s[k])) { u = k; break; }
    *best = (ld_repetition){start, len, u, unit, len / unit};
    *se->found = 1;
}

/* Position of the previous window equal to s[i..i+W) (or SIZE_MAX); the
 * table then remembers i for it and the chain links i to that position.
 * Which slot a window lands in does not change the answer: the probe
 * compares the windows themselves. */
static size_t last_seen(search *se, size_t i)
{
    const char *s = se->s;
    uint32_t *tbl = se->tbl;
    size_t mask = ((size_t)1 << se->bits) - 1;
    uint64_t w = win_word(s + i);
    size_t slot = win_slot(w, 64 - se->bits);
    while (tbl[slot]) {
        size_t j = tbl[slot] - 1;
        if (win_word(s + j) == w) {
            tbl[slot] = (uint32_t)(i + 1);
            se->prev[i] = (uint32_t)(j + 1);
            return j;
        }
        slot = (slot + 1) & mask;
    }
    tbl[slot] = (uint32_t)(i + 1);
    se->prev[i] = 0;
    return SIZE_MAX;
}

/* Whether the positions k with s[k] == s[k-d] around i (i among them) may
 * span the w = max(64, 3d) - d that any unit k * d needs (need(u) >= 3u and
 * >= 64): such an interval holds i - w/2 or i + w/2 (the screen's probe). */
static int could_pass(const char *s, size_t n, size_t i, size_t d)
{
    size_t w = (3 * d < LD_REP_MIN_BYTES ? LD_REP_MIN_BYTES : 3 * d) - d, h = w / 2;
    if (i >= h + d && s[i - h] == s[i - h - d]) return 1;
    return i + h < n && s[i + h] == s[i + h - d];
}

/* The pair of equal windows at j and i = j + d: its run of period d,
 * widened both ways, is considered and remembered (side_*). */
static void try_pair(search *se, size_t j, size_t i)
{
    size_t d = i - j, b = i + W;
    if (!could_pass(se->s, se->n, i, d)) return;
    while (b < se->n && se->s[b] == se->s[b - d]) b++;
    consider(se, j, b, d); /* widens the start itself */
    size_t a = j;
    while (a > 0 && se->s[a - 1] == se->s[a - 1 + d]) a--;
    se->side_p = d, se->side_a = a, se->side_b = b;
}

/* Whether the windows at j and i = j + d lie in the run [a, b) of period
 * p with p dividing d: their run of period d is that one (the run is at
 * least d + W long), considered already or when it ends. */
static int inside(size_t j, size_t i, size_t p, size_t a, size_t b)
{
    return p && (i - j) % p == 0 && j >= a && i + W <= b;
}

/* The walk at i > 0: every earlier sighting j of i's window at a distance
 * below 2^(z+1), z the trailing zero bits of i, is tried as a period.
 * Why no reportable stretch is lost: take one, [a,b) with period P, and q
 * its shortest period (q divides P, the stretch being >= 3P long; its run
 * of period q is [a,b) too).  The windows at i and i - q are equal for i in
 * [a+q, b-W], 2q - 7 >= q positions (>= 64 - 13 for q < 7): one of them is a
 * multiple of 2^z for the z with 2^z <= q < 2^(z+1), and its walk reaches
 * distance q (the chain holds every sighting).  Skipped pairs lie in a run
 * already known (inside()), or every one in the main run when its period
 * p <= W (the nearest sighting's distance, the run's shortest period: a
 * window of W >= p bytes in it shows its phase, so every pair in it is at a
 * multiple of p), or fails could_pass().  Cost: a walk at a multiple of 2^z
 * reads at most 2^(z+1) links, about 2 per position and scale; most end at
 * the first link. */
static void walk(search *se, size_t i, size_t j, size_t p, size_t start)
{
    size_t reach = (size_t)2 << __builtin_ctzll((unsigned long long)i);
    if (p && p <= W && i - start >= reach) return;
    for (; j != SIZE_MAX && i - j < reach; j = (size_t)se->prev[j] - 1) {
        if (inside(j, i, p, start, i + W) || inside(j, i, se->side_p, se->side_a, se->side_b)) continue;
        try_pair(se, j, i);
    }
}

/* The zeroed table and the chain (not zeroed: every position's link is
 * written before it is read) in one block: from the scratch arena when it
 * is small (the arena keeps its memory across requests: no allocation, no
 * fresh pages, one memset; *lent = 1), else calloc'd (*lent = 0: the caller
 * frees it). */
static uint32_t *table_new(ld_arena *scratch, size_t size, size_t n, int *lent)
{
    size_t all = size + n;
    uint32_t *tbl = scratch && all <= LD_REP_ARENA_SLOTS ? ld_arena_alloc(scratch, all * sizeof *tbl) : NULL;
    *lent = tbl != NULL;
    if (tbl) return memset(tbl, 0, size * sizeof *tbl);
    return calloc(all, sizeof *tbl);
}

/* One pass over the windows.  The main run follows the nearest sighting
 * (as long as s[k] == s[k-p] holds it goes on; where it stops, the window
 * there starts the next); the walks find the periods it does not follow. */
static void scan(search *se)
{
    const char *s = se->s;
    size_t p = 0, start = 0, end = 0;
    for (size_t i = 0; i + W <= se->n; i++) {
        size_t j = last_seen(se, i);
        if (p && s[i + W - 1] == s[i + W - 1 - p]) { /* the run goes on */
            end = i + W;
        } else {
            if (p) consider(se, start, end, p);
            p = 0;
            if (j != SIZE_MAX) {
                p = i - j;
                start = j;
                end = i + W;
            }
        }
        if (i && j != SIZE_MAX) walk(se, i, j, p, start);
    }
    if (p) consider(se, start, end, p);
}

static ld_status find(const char *s, size_t n, int screened, ld_arena *scratch, ld_repetition *out,
                      int *out_found, ld_error *err)
{
    *out_found = 0;
    size_t base = n > LD_REP_MAX_SCAN ? n - LD_REP_MAX_SCAN : 0;
    s += base;
    n -= base;
    if (n < LD_REP_MIN_BYTES) return LD_OK;
    /* most outputs do not loop: the screen proves it for them at a fraction
     * of the cost of the search below (an exact answer either way) */
    if (screened && !ld_rep_screen(s, n, scratch)) return LD_OK;
    size_t size = 64;
    unsigned bits = 6;
    while (size < 2 * n) size *= 2, bits++;
    int lent;
    uint32_t *tbl = table_new(scratch, size, n, &lent);
    if (!tbl) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory scanning %zu bytes for repetition", n);
    search se = {s, n, tbl, tbl + size, bits, 0, 0, 0, out, out_found};
    scan(&se);
    if (!lent) free(tbl);
    if (*out_found) {
        out->start += base;
        out->unit_off += base;
    }
    return LD_OK;
}

ld_status ld_repetition_find(const char *s, size_t n, ld_arena *scratch, ld_repetition *out,
                             int *out_found, ld_error *err)
{
    return find(s, n, 1, scratch, out, out_found, err);
}

ld_status ld_repetition_find_unscreened(const char *s, size_t n, ld_arena *scratch, ld_repetition *out,
                                        int *out_found, ld_error *err)
{
    return find(s, n, 0, scratch, out, out_found, err);
}
