/* repetition_screen.c - see repetition_screen.h.
 *
 * Terms.  A word byte is an ASCII letter or digit or any byte >= 0x80.  An
 * anchor is a position i >= 1 where a word of at least 4 bytes starts
 * (s[i-1] is not a word byte, s[i..i+4) are), or where s[i] >= 0xC0 and
 * s[i-1] >= 0x80 (a character after a non-ASCII one: CJK text has no word
 * starts).  Whether i is an anchor depends on s[i-1..i+3] only.  An anchor's
 * key is s[i..i+KEY).
 *
 * What the full search reports (repetition.c): a stretch [a,b) of length
 * L = b - a with s[k] == s[k-p] for a+p <= k < b, L >= 64, L >= c(p) * p
 * (c = 20, 6, 3 below 16, below 64, from 64 bytes of period) and at least
 * 2 letters (ASCII letters, bytes >= 0xC0) in s[a..a+p).  So L >= 3p, and
 * L - 2p >= 58 >= KEY: below 16, L - 2p >= max(64 - 2p, 18p) >= 58; below
 * 64, L - 2p >= 4p >= 64; from 64, L - 2p >= p >= 64.
 *
 * Claim: for such a stretch the screen answers 1.
 *
 * Let I = [a+1, b-3), the positions whose anchorhood is read inside [a,b).
 *
 * Case A, some anchor lies in I.  For i and i+p in I, s[i-1..i+3] ==
 * s[i-1+p..i+3+p], so i is an anchor iff i+p is.  Let u be the first anchor
 * in I: u <= a+p (else u-p in I would be one too), so u+p <= a+2p < b-3 is
 * an anchor, and s[u+k] == s[u+p+k] for 0 <= k < b-u-p, where b-u-p >=
 * L-2p >= KEY: u and u+p both have keys (u+p+KEY <= b <= n) and they are
 * equal.  At the anchor x = u+p the screen walks every earlier anchor of x's
 * table bucket (a hash of the key), newest first; u is among them.  Each y is tested with d = x - y: is the longest
 * stretch with period d around y and x (the bytes before y agreeing with
 * those before x, and after) at least need(d) = max(64, c(d) * d) long?  For
 * y = u that stretch holds [a,b), of length L >= need(p): the test passes
 * and the screen answers 1.  Skipped are only anchors that cannot be u: one
 * whose first 8 bytes differ from x's (u's key equals x's), and one inside a
 * stretch of period d that failed the test already (its own test would see
 * the same stretch and fail).  A walk cut after WALK_MAX steps, and
 * comparisons past their budget, answer 1 too.
 *
 * Case B, no anchor in I: that is L-4 >= 60 positions in a row none of
 * which is an anchor, and the screen answers 1 when it meets RUN_MAX = 60
 * such positions.
 *
 * Cost: anchors are starts of longer words (a tenth of prose's bytes); most
 * keys are new and most walks stop at once.  A repeated block tests one distance again and
 * again: the last stretch found per distance is remembered (a memo), and the
 * comparisons have a budget of 4n + 4096 bytes, so the screen stays linear
 * whatever the text; past the budget it answers 1.
 */
#include "repetition_screen.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "repetition.h"

#define KEY 16      /* bytes of an anchor's key; the proof needs KEY <= 58 */
#define RUN_MAX 60  /* positions in a row, none an anchor, that may hide a loop */
#define WALK_MAX 64 /* earlier anchors looked at per anchor before answering 1 */
#define POS_BITS 23 /* table entries: position + 1 below, a tag of the key above */
#define POS_MASK ((1u << POS_BITS) - 1)
#define TAG_BITS (32 - POS_BITS)
#define MEMOS 64 /* distances remembered: a sentence said many times has many */

_Static_assert(LD_REP_MIN_BYTES == 64 && LD_REP_SHORT_UNIT == 16 && LD_REP_SHORT_COUNT == 20 &&
                   LD_REP_LONG_UNIT == 64 && LD_REP_MID_COUNT == 6 && LD_REP_LONG_COUNT == 3,
               "repetition_screen.c's proof (KEY, RUN_MAX) assumes these thresholds");
_Static_assert(LD_REP_MAX_SCAN < POS_MASK, "positions + 1 fit in POS_BITS");

typedef struct memo {
    size_t d, from, end; /* s[k] == s[k+d] for from <= k < end, and not at end */
} memo;

typedef struct screen {
    const char *s;
    size_t n;
    uint32_t *head;  /* per bucket: the newest anchor in it + 1, 0 = none */
    uint32_t *prev;  /* per anchor position: the anchor before it in its bucket + 1 */
    unsigned shift;  /* bucket = hash >> shift */
    int lent;        /* head and prev come from the scratch arena */
    size_t run;      /* positions, none an anchor, ending the last block */
    size_t budget;   /* bytes the comparisons may still read */
    memo memos[MEMOS];
} screen;

static uint64_t word_at(const char *p)
{
    uint64_t x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* ------------------------------------------------------------ blocks */

/* Bit j of each mask describes byte j of a 64-byte block. */
typedef struct masks {
    uint64_t word, high, lead; /* word byte; >= 0x80; >= 0xC0 */
} masks;

static int is_word(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c >= 0x80;
}

static masks classify_bytes(const unsigned char *p)
{
    masks m = {0, 0, 0};
    for (unsigned j = 0; j < 64; j++) {
        uint64_t bit = (uint64_t)1 << j;
        if (is_word(p[j])) m.word |= bit;
        if (p[j] >= 0x80) m.high |= bit;
        if (p[j] >= 0xC0) m.lead |= bit;
    }
    return m;
}

#if defined(__SSE2__)
/* Unsigned ranges by signed compares: c - lo + 0x80 < 0x80 + width. */
static masks classify_sse2(const unsigned char *p)
{
    const __m128i dig_off = _mm_set1_epi8((char)(0x80 - '0'));
    const __m128i dig_lim = _mm_set1_epi8((char)(0x80 + 10));
    const __m128i low_bit = _mm_set1_epi8(0x20);
    const __m128i let_off = _mm_set1_epi8((char)(0x80 - 'a'));
    const __m128i let_lim = _mm_set1_epi8((char)(0x80 + 26));
    const __m128i lead_min = _mm_set1_epi8((char)(0xC0 - 1));
    masks m = {0, 0, 0};
    for (unsigned k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
        __m128i dig = _mm_cmplt_epi8(_mm_add_epi8(v, dig_off), dig_lim);
        __m128i let = _mm_cmplt_epi8(_mm_add_epi8(_mm_or_si128(v, low_bit), let_off), let_lim);
        uint64_t high = (uint64_t)(unsigned)_mm_movemask_epi8(v);
        /* the top bit: a digit, a letter, or a byte >= 0x80 */
        uint64_t word = (uint64_t)(unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(dig, let), v));
        m.word |= word << (16 * k);
        if (!high) continue; /* ASCII: no lead bytes */
        /* signed v > 0xBF: 0xC0..0xFF and all ASCII; the ASCII dropped by high */
        uint64_t lead = (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpgt_epi8(v, lead_min)) & high;
        m.high |= high << (16 * k);
        m.lead |= lead << (16 * k);
    }
    return m;
}
#endif

/* 1 when RUN_MAX positions in a row are not anchors. */
static int long_bare_run(screen *sc, uint64_t bare)
{
    if (bare == ~(uint64_t)0) {
        sc->run += 64;
        return sc->run >= RUN_MAX;
    }
    if (sc->run + (size_t)__builtin_ctzll(~bare) >= RUN_MAX) return 1;
    uint64_t r = bare & bare >> 1; /* bit j: a run of 2 starts there; then 4, 8, 16, 32, 60 */
    r &= r >> 2;
    r &= r >> 4;
    r &= r >> 8;
    r &= r >> 16;
    if (r & r >> (RUN_MAX - 32)) return 1;
    sc->run = (size_t)__builtin_clzll(~bare);
    return 0;
}

/* ------------------------------------------------------------ anchors */

static size_t need_bytes(size_t d)
{
    size_t c = ld_rep_min_count(d);
    return c * d > LD_REP_MIN_BYTES ? c * d : LD_REP_MIN_BYTES;
}

/* How many bytes from x on agree with those from y on (y < x), from k
 * (known to agree before it) up to lim. */
static size_t agree_after(const char *s, size_t y, size_t x, size_t k, size_t lim)
{
    while (k + 8 <= lim && word_at(s + y + k) == word_at(s + x + k)) k += 8;
    while (k < lim && s[y + k] == s[x + k]) k++;
    return k;
}

/* How many bytes before y agree with those before x (y < x), up to lim <= y. */
static size_t agree_before(const char *s, size_t y, size_t x, size_t lim)
{
    size_t k = 0;
    while (k + 8 <= lim && word_at(s + y - k - 8) == word_at(s + x - k - 8)) k += 8;
    while (k < lim && s[y - k - 1] == s[x - k - 1]) k++;
    return k;
}

static memo *memo_of(screen *sc, size_t d)
{
    return &sc->memos[(d * 0x9E3779B97F4A7C15ull) >> 58 & (MEMOS - 1)];
}

/* The test of the proof for anchors y < x, d = x - y: is the longest
 * stretch of period d around them, [y - back, x + ahead), at least need(d)
 * long?  1 when it is, or when the comparisons' budget is spent; else 0, and
 * the stretch kept in *m (the next anchors of a repeated block lie in it).
 * Out of line: the walks that call it run at every anchor and stay small. */
__attribute__((noinline)) static int long_enough(screen *sc, size_t y, size_t x, memo *m)
{
    size_t d = x - y, need = need_bytes(d); /* need >= 3d > d */
    size_t back = agree_before(sc->s, y, x, y < need - d ? y : need - d);
    size_t room = sc->n - x, want = need - d - back;
    size_t ahead = want ? agree_after(sc->s, y, x, 0, want < room ? want : room) : 0;
    if (back + d + ahead >= need) return 1;
    if (back + ahead >= sc->budget) return 1;
    sc->budget -= back + ahead;
    /* both ends are real: a byte that differs, or the text's edge */
    *m = (memo){d, y - back, y + ahead};
    return 0;
}

/* ------------------------------------------------------------ the pass */

/* Enters the anchors of one block (bit j: position at + j) in the table and
 * walks each one's bucket: a table entry is the anchor's position + 1 with
 * TAG_BITS more bits of its key's hash above it.  1 when a pair passes the
 * test (or a walk is cut), else 0.  Skipped without a test, as they cannot be
 * the u of the proof: an earlier anchor y whose tag or first 8 bytes differ
 * from x's (its key does too), and y inside a stretch of period x - y that
 * failed the test already. */
static int enter_anchors(screen *sc, size_t at, uint64_t anchors)
{
    const char *s = sc->s;
    uint32_t *head = sc->head, *prev = sc->prev;
    unsigned shift = sc->shift;
    size_t last = sc->n - KEY; /* anchors past it have no key: neither u nor u+p */
    for (; anchors; anchors &= anchors - 1) {
        size_t x = at + (size_t)__builtin_ctzll(anchors);
        if (x > last) break;
        uint64_t w0 = word_at(s + x), w1 = word_at(s + x + 8);
        uint64_t h = (w0 ^ (w1 << 29 | w1 >> 35)) * 0x9E3779B97F4A7C15ull;
        uint32_t tag = (uint32_t)(h >> (shift - TAG_BITS)) & ((1u << TAG_BITS) - 1);
        uint32_t e = head[h >> shift];
        head[h >> shift] = tag << POS_BITS | (uint32_t)(x + 1);
        prev[x] = e;
        for (unsigned steps = 0; e; steps++) {
            if (steps == WALK_MAX) return 1;
            size_t y = (e & POS_MASK) - 1;
            if (e >> POS_BITS == tag && word_at(s + y) == w0) {
                size_t d = x - y;
                memo *m = memo_of(sc, d);
                if (!(m->d == d && m->from <= y && y < m->end) && long_enough(sc, y, x, m))
                    return 1;
            }
            e = prev[y];
        }
    }
    return 0;
}

/* The masks of the 64 bytes from at (zeros past n: not word bytes). */
static masks block_masks(const char *s, size_t n, size_t at, int simd)
{
    unsigned char tail[64];
    const unsigned char *p = (const unsigned char *)s + at;
    if (at >= n) return (masks){0, 0, 0};
    if (n - at < 64) {
        memset(tail, 0, sizeof tail);
        memcpy(tail, p, n - at);
        p = tail;
    }
#if defined(__SSE2__)
    return simd ? classify_sse2(p) : classify_bytes(p);
#else
    (void)simd;
    return classify_bytes(p);
#endif
}

static int run_blocks(screen *sc, int simd)
{
    const char *s = sc->s;
    size_t n = sc->n;
    uint64_t word_before = 1, high_before = 0; /* position 0 is never an anchor */
    masks m = block_masks(s, n, 0, simd);
    for (size_t at = 0; at < n; at += 64) {
        masks next = block_masks(s, n, at + 64, simd);
        uint64_t w = m.word, wn = next.word;
        uint64_t starts = w & ~(w << 1 | word_before);
        uint64_t long_words = w & (w >> 1 | wn << 63) & (w >> 2 | wn << 62) & (w >> 3 | wn << 61);
        uint64_t anchors = (starts & long_words) | (m.lead & (m.high << 1 | high_before));
        uint64_t valid = n - at < 64 ? ((uint64_t)1 << (n - at)) - 1 : ~(uint64_t)0;
        anchors &= valid;
        word_before = w >> 63;
        high_before = m.high >> 63;
        if (long_bare_run(sc, ~anchors & valid)) return 1;
        if (enter_anchors(sc, at, anchors)) return 1;
        m = next;
    }
    return 0;
}

/* head (zeroed) and prev (written before it is read) from scratch when
 * small, else malloc'd. */
static int screen_init(screen *sc, const char *s, size_t n, ld_arena *scratch)
{
    memset(sc, 0, sizeof *sc);
    sc->s = s;
    sc->n = n;
    sc->budget = 4 * n + 4096;
    unsigned bits = 6;
    while (((size_t)1 << bits) < n / 8) bits++; /* at most 2^19: room for the tag */
    sc->shift = 64 - bits;
    size_t head_bytes = ((size_t)1 << bits) * sizeof *sc->head, prev_bytes = n * sizeof *sc->prev;
    char *mem = NULL;
    if (scratch && head_bytes + prev_bytes <= LD_REP_ARENA_SLOTS * sizeof(uint32_t))
        mem = ld_arena_alloc(scratch, head_bytes + prev_bytes);
    sc->lent = mem != NULL;
    if (!mem) mem = malloc(head_bytes + prev_bytes);
    if (!mem) return 0;
    sc->head = memset(mem, 0, head_bytes);
    sc->prev = (uint32_t *)(void *)(mem + head_bytes);
    return 1;
}

static int screen_text(const char *s, size_t n, ld_arena *scratch, int simd)
{
    screen sc;
    if (n < LD_REP_MIN_BYTES) return 0;
    if (!screen_init(&sc, s, n, scratch)) return 1; /* the full search decides */
    int maybe = run_blocks(&sc, simd);
    if (!sc.lent) free(sc.head);
    return maybe;
}

int ld_rep_screen(const char *s, size_t n, ld_arena *scratch)
{
    return screen_text(s, n, scratch, 1);
}

int ld_rep_screen_bytes(const char *s, size_t n, ld_arena *scratch)
{
    return screen_text(s, n, scratch, 0);
}
