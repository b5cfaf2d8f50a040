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
 * equal.  At the anchor x = u+p the screen walks every earlier anchor of
 * x's table bucket (a hash of the key), newest first; u is among them.
 * Each y is tested with d = x - y: is the longest stretch with period d
 * around y and x (the bytes before y agreeing with those before x, and
 * after) at least need(d) = max(64, c(d) * d) long?  In other words: do the
 * positions k with s[k] == s[k+d] (k+d < n) around y form an interval of at
 * least w(d) = need(d) - d that holds y?  For y = u that interval holds
 * [a, b-p) and u, of length L - p >= need(p) - p: the test passes and the
 * screen answers 1.  Skipped are only anchors that cannot be u: one whose
 * first 8 bytes differ from x's (u's key equals x's), and one in a range of
 * anchors known to fail the test with period d (the memo of d):
 *   - the longest such interval of a pair that failed the test: every y'
 *     in it has the same one around it, too short;
 *   - the range (y - h, y + h), h = w(d)/2, of a pair y, x = y + d whose
 *     positions y - h and y + h both fail s[k] == s[k+d] (or lie outside
 *     [0, n-d)): an interval that holds some y' of the range holds neither
 *     of them, so it lies between them, shorter than 2h <= w(d).  The test
 *     of y reads those two bytes first (could_pass), as an interval of w(d)
 *     or more that holds y holds y - h, or else y + h.
 * A walk cut after WALK_MAX steps, and comparisons past their budget,
 * answer 1 too.
 *
 * Case B, no anchor in I: that is L-4 >= 60 positions in a row none of
 * which is an anchor, and the screen answers 1 when it meets RUN_MAX = 60
 * such positions.  (61 would do: L = 64 only for p <= 3, and then b-3 is
 * no anchor either, as b-3-p in I would be one, both reading the same
 * bytes but s[b] against s[b-p], a word byte of the loop when p <= 3; so
 * the run is 61 long.  60 keeps a position of slack; the tests catch 62.)
 *
 * Cost: anchors are starts of longer words (a tenth of prose's bytes); most
 * keys are new and most walks stop at once.  A repeated block tests one
 * distance again and again: most pairs fail the two-byte probe, and the
 * last range known to fail per distance is remembered (a memo), so that
 * the next anchors of the block skip at once; the comparisons have a budget
 * of 4n + 4096 bytes, so the screen stays linear whatever the text; past
 * the budget it answers 1.  The blocks' bytes are classified with
 * AVX-512BW, AVX2 or SSE2, whichever the machine has (byte by byte
 * elsewhere), CHUNK blocks a call; the anchors of a chunk are all entered
 * first, then the walks of those whose bucket was not empty run, in order
 * (the same walks, with the same answers: see walk_seen).
 */
#include "repetition_screen.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define SCREEN_X86 1 /* the AVX2 and AVX-512BW classifications, chosen at run time */
#endif

#include "repetition.h"

#define KEY 16      /* bytes of an anchor's key; the proof needs KEY <= 58 */
#define RUN_MAX 60  /* positions in a row, none an anchor, that may hide a loop */
#define WALK_MAX 64 /* earlier anchors looked at per anchor before answering 1 */
#define POS_BITS 23 /* table entries: position + 1 below, a tag of the key above */
#define POS_MASK ((1u << POS_BITS) - 1)
#define TAG_BITS (32 - POS_BITS)
#define TAG_AT 32 /* the tag's bits of the key's hash: below the bucket's, a fixed shift */
#define MEMOS 64 /* distances remembered: a sentence said many times has many */

_Static_assert(LD_REP_MIN_BYTES == 64 && LD_REP_SHORT_UNIT == 16 && LD_REP_SHORT_COUNT == 20 &&
                   LD_REP_LONG_UNIT == 64 && LD_REP_MID_COUNT == 6 && LD_REP_LONG_COUNT == 3,
               "repetition_screen.c's proof (KEY, RUN_MAX) assumes these thresholds");
_Static_assert(LD_REP_MAX_SCAN < POS_MASK, "positions + 1 fit in POS_BITS");
_Static_assert(LD_REP_MAX_SCAN / 8 <= (size_t)1 << (64 - TAG_AT - TAG_BITS),
               "the bucket's bits (the hash's top ones) stay above the tag's");

typedef struct memo {
    size_t d, from, end; /* the test of y and y + d fails for every y in [from, end) */
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

#if defined(SCREEN_X86)
/* classify_sse2 on 32 bytes at a time. */
__attribute__((target("avx2"))) static masks classify_avx2(const unsigned char *p)
{
    const __m256i dig_off = _mm256_set1_epi8((char)(0x80 - '0'));
    const __m256i dig_lim = _mm256_set1_epi8((char)(0x80 + 10));
    const __m256i low_bit = _mm256_set1_epi8(0x20);
    const __m256i let_off = _mm256_set1_epi8((char)(0x80 - 'a'));
    const __m256i let_lim = _mm256_set1_epi8((char)(0x80 + 26));
    const __m256i lead_min = _mm256_set1_epi8((char)(0xC0 - 1));
    masks m = {0, 0, 0};
    for (unsigned k = 0; k < 2; k++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * k));
        __m256i dig = _mm256_cmpgt_epi8(dig_lim, _mm256_add_epi8(v, dig_off));
        __m256i let = _mm256_cmpgt_epi8(let_lim, _mm256_add_epi8(_mm256_or_si256(v, low_bit), let_off));
        __m256i word = _mm256_or_si256(_mm256_or_si256(dig, let), v);
        uint64_t high = (uint32_t)_mm256_movemask_epi8(v);
        uint64_t lead = (uint32_t)_mm256_movemask_epi8(_mm256_cmpgt_epi8(v, lead_min)) & high;
        m.word |= (uint64_t)(uint32_t)_mm256_movemask_epi8(word) << (32 * k);
        m.high |= high << (32 * k);
        m.lead |= lead << (32 * k);
    }
    return m;
}

/* The same on 64 bytes at once (AVX-512BW: unsigned compares to masks);
 * the bytes outside valid read as zeros, unread. */
__attribute__((target("avx512f,avx512bw"))) static masks classify_avx512(const unsigned char *p,
                                                                          uint64_t valid)
{
    __m512i v = _mm512_maskz_loadu_epi8(valid, p);
    __m512i low = _mm512_or_si512(v, _mm512_set1_epi8(0x20));
    uint64_t dig = _mm512_cmplt_epu8_mask(_mm512_sub_epi8(v, _mm512_set1_epi8('0')), _mm512_set1_epi8(10));
    uint64_t let = _mm512_cmplt_epu8_mask(_mm512_sub_epi8(low, _mm512_set1_epi8('a')), _mm512_set1_epi8(26));
    uint64_t high = _mm512_movepi8_mask(v);
    uint64_t lead = _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8((char)0xC0));
    return (masks){dig | let | high, high, lead};
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

/* Of two 8-byte words that differ (diff: their xor), the bytes equal before
 * the first byte that differs, and after the last one, in memory order. */
static size_t first_differing(uint64_t diff)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (size_t)__builtin_ctzll(diff) / 8;
#else
    return (size_t)__builtin_clzll(diff) / 8;
#endif
}

static size_t last_differing(uint64_t diff)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (size_t)__builtin_clzll(diff) / 8;
#else
    return (size_t)__builtin_ctzll(diff) / 8;
#endif
}

/* How many bytes from x on agree with those from y on (y < x), from k
 * (known to agree before it) up to lim. */
static size_t agree_after(const char *s, size_t y, size_t x, size_t k, size_t lim)
{
    for (; k + 8 <= lim; k += 8) {
        uint64_t diff = word_at(s + y + k) ^ word_at(s + x + k);
        if (diff) return k + first_differing(diff);
    }
    while (k < lim && s[y + k] == s[x + k]) k++;
    return k;
}

/* How many bytes before y agree with those before x (y < x), up to lim <= y. */
static size_t agree_before(const char *s, size_t y, size_t x, size_t lim)
{
    size_t k = 0;
    for (; k + 8 <= lim; k += 8) {
        uint64_t diff = word_at(s + y - k - 8) ^ word_at(s + x - k - 8);
        if (diff) return k + last_differing(diff);
    }
    while (k < lim && s[y - k - 1] == s[x - k - 1]) k++;
    return k;
}

static memo *memo_of(screen *sc, size_t d)
{
    return &sc->memos[d & (MEMOS - 1)]; /* the distances of one text spread over the slots */
}

/* A necessary condition for long_enough(y, x), read in two bytes: the
 * positions k with s[k] == s[k + d] around y must form an interval of
 * w = need(d) - d or more holding y; such an interval holds y - w/2 (if it
 * starts there or before) or else y + w/2 (it ends past y - w/2 + w).  When
 * neither agrees (or lies outside the text), no such interval holds y, nor
 * any y' between them: its interval would hold neither, and fit between
 * them, shorter than w.  That range is kept in *m as a failed test.  Most
 * pairs of a sentence said twice fail here, at no scan's cost. */
static int could_pass(const char *s, size_t n, size_t y, size_t x, memo *m)
{
    size_t d = x - y, half = (ld_rep_need_bytes(d) - d) / 2;
    if ((y >= half && s[y - half] == s[x - half]) || (x + half < n && s[y + half] == s[x + half]))
        return 1;
    *m = (memo){d, y >= half ? y - half + 1 : 0, y + half};
    return 0;
}

/* The test of the proof for anchors y < x, d = x - y: is the longest
 * stretch of period d around them, [y - back, x + ahead), at least need(d)
 * long?  1 when it is, or when the comparisons' budget is spent; else 0, and
 * the stretch kept in *m (the next anchors of a repeated block lie in it).
 * Out of line: the walks that call it run at every anchor and stay small. */
__attribute__((noinline)) static int long_enough(screen *sc, size_t y, size_t x, memo *m)
{
    size_t d = x - y, need = ld_rep_need_bytes(d); /* need >= 3d > d */
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

/* The walk of x's bucket from its entry e (the anchors before x in it,
 * newest first): a table entry is the anchor's position + 1 with TAG_BITS
 * more bits of its key's hash above it.  1 when a pair passes the test (or
 * the walk is cut), else 0.  Skipped without a test, as they cannot be the u
 * of the proof: an earlier anchor y whose tag or first 8 bytes differ from
 * x's (its key does too), and y in a range known to fail the test with
 * period x - y (the memo, asked first: in a repeated block most anchors
 * are; could_pass and long_enough fill it). */
static int walk_bucket(screen *sc, size_t x, uint64_t w0, uint32_t tag, uint32_t e)
{
    const char *s = sc->s;
    const uint32_t *prev = sc->prev;
    for (unsigned steps = 0; e; steps++) {
        if (steps == WALK_MAX) return 1;
        size_t y = (e & POS_MASK) - 1;
        if (e >> POS_BITS == tag) {
            size_t d = x - y;
            memo *m = memo_of(sc, d);
            if (!(m->d == d && m->from <= y && y < m->end) && could_pass(s, sc->n, y, x, m) &&
                word_at(s + y) == w0 && long_enough(sc, y, x, m))
                return 1;
        }
        e = prev[y];
    }
    return 0;
}

/* Enters the anchors of one block (bit j: position at + j; all with a key)
 * in the table, and keeps in seen those whose bucket held an earlier anchor
 * (position below POS_BITS, the key's tag above): how many.  Their walks
 * come later (walk_seen), so that no branch here asks whether the bucket was
 * empty: about half are, in an order no predictor learns, and that branch
 * cost more than the rest of the entry. */
static unsigned enter_anchors(screen *sc, size_t at, uint64_t anchors, uint32_t *seen)
{
    const char *s = sc->s;
    uint32_t *head = sc->head, *prev = sc->prev;
    unsigned shift = sc->shift;
    unsigned k = 0;
    for (; anchors; anchors &= anchors - 1) {
        size_t x = at + (size_t)__builtin_ctzll(anchors);
        uint64_t w0 = word_at(s + x), w1 = word_at(s + x + 8);
        uint64_t h = (w0 ^ (w1 << 29 | w1 >> 35)) * 0x9E3779B97F4A7C15ull;
        uint32_t tag = (uint32_t)(h >> TAG_AT) & ((1u << TAG_BITS) - 1);
        uint32_t e = head[h >> shift];
        head[h >> shift] = tag << POS_BITS | (uint32_t)(x + 1);
        prev[x] = e;
        seen[k] = tag << POS_BITS | (uint32_t)x;
        k += e != 0;
    }
    return k;
}

/* The walks of the k anchors kept in seen, in order: 1 when one says so.
 * The same answer as walking each anchor as it is entered: a walk starts
 * from the entry its bucket held before x (kept in prev[x]), so the anchors
 * entered after x are not in it, and the walks, which alone change the memo
 * and the budget, go in the same order. */
static int walk_seen(screen *sc, const uint32_t *seen, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        size_t x = seen[i] & POS_MASK;
        if (walk_bucket(sc, x, word_at(sc->s + x), seen[i] >> POS_BITS, sc->prev[x])) return 1;
    }
    return 0;
}

/* The masks of the 64 bytes from at (zeros past n: not word bytes), byte by
 * byte or with SSE2. */
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

#define CHUNK 16 /* blocks classified per call: the dispatch once per kilobyte */

#if defined(SCREEN_X86)
__attribute__((target("avx2"))) static void chunk_avx2(const char *s, size_t n, size_t at,
                                                       size_t count, masks *out)
{
    for (size_t k = 0; k < count; k++, at += 64) {
        if (at + 64 <= n) {
            out[k] = classify_avx2((const unsigned char *)s + at);
            continue;
        }
        out[k] = block_masks(s, n, at, 1); /* the text's last block, or past it */
    }
}

__attribute__((target("avx512f,avx512bw"))) static void chunk_avx512(const char *s, size_t n,
                                                                     size_t at, size_t count,
                                                                     masks *out)
{
    for (size_t k = 0; k < count; k++, at += 64) {
        uint64_t valid = at >= n ? 0 : n - at < 64 ? ((uint64_t)1 << (n - at)) - 1 : ~(uint64_t)0;
        out[k] = classify_avx512((const unsigned char *)s + (valid ? at : 0), valid);
    }
}
#endif

/* How the blocks are classified: the level asked for, or the best below it
 * that this machine and build have (all give the same masks). */
enum { BY_BYTES, BY_SSE2, BY_AVX2, BY_AVX512 };

static int classify_kind(int level)
{
    (void)level; /* a build without SSE2 has only the one */
#if defined(SCREEN_X86)
    if (level >= BY_AVX512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        return BY_AVX512;
    if (level >= BY_AVX2 && __builtin_cpu_supports("avx2")) return BY_AVX2;
#endif
#if defined(__SSE2__)
    if (level >= BY_SSE2) return BY_SSE2;
#endif
    return BY_BYTES;
}

/* The masks of count blocks from at into out. */
static void classify_chunk(int kind, const char *s, size_t n, size_t at, size_t count, masks *out)
{
#if defined(SCREEN_X86)
    if (kind == BY_AVX512) {
        chunk_avx512(s, n, at, count, out);
        return;
    }
    if (kind == BY_AVX2) {
        chunk_avx2(s, n, at, count, out);
        return;
    }
#endif
    for (size_t k = 0; k < count; k++) out[k] = block_masks(s, n, at + 64 * k, kind == BY_SSE2);
}

/* The anchors of the block m (next: the block after it; *word_before and
 * *high_before: the last byte's bits of the one before, then of m). */
static uint64_t block_anchors(masks m, masks next, uint64_t *word_before, uint64_t *high_before)
{
    uint64_t w = m.word, wn = next.word;
    uint64_t starts = w & ~(w << 1 | *word_before);
    uint64_t long_words = w & (w >> 1 | wn << 63) & (w >> 2 | wn << 62) & (w >> 3 | wn << 61);
    *word_before = w >> 63;
    uint64_t anchors = (starts & long_words) | (m.lead & (m.high << 1 | *high_before));
    *high_before = m.high >> 63;
    return anchors;
}

static int run_blocks(screen *sc, int kind)
{
    const char *s = sc->s;
    size_t n = sc->n, blocks = (n + 63) / 64;
    size_t last = n - KEY; /* anchors past it have no key: neither u nor u+p */
    uint64_t word_before = 1, high_before = 0; /* position 0 is never an anchor */
    masks m[CHUNK + 1];
    uint32_t seen[64 * CHUNK]; /* the chunk's anchors to walk (enter_anchors) */
    classify_chunk(kind, s, n, 0, 1, m);
    for (size_t b0 = 0; b0 < blocks; b0 += CHUNK) {
        size_t count = blocks - b0 < CHUNK ? blocks - b0 : CHUNK;
        classify_chunk(kind, s, n, 64 * (b0 + 1), count, m + 1);
        size_t k = 0;
        for (size_t j = 0; j < count; j++) {
            size_t at = 64 * (b0 + j);
            uint64_t anchors = block_anchors(m[j], m[j + 1], &word_before, &high_before);
            uint64_t valid = n - at < 64 ? ((uint64_t)1 << (n - at)) - 1 : ~(uint64_t)0;
            anchors &= valid;
            if (long_bare_run(sc, ~anchors & valid)) return 1;
            if (at + 63 > last) anchors &= last >= at ? ~(uint64_t)0 >> (63 - (last - at)) : 0;
            k += enter_anchors(sc, at, anchors, seen + k);
        }
        if (walk_seen(sc, seen, k)) return 1;
        m[0] = m[count];
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

static int screen_text(const char *s, size_t n, ld_arena *scratch, int level)
{
    screen sc;
    if (n < LD_REP_MIN_BYTES) return 0;
    if (!screen_init(&sc, s, n, scratch)) return 1; /* the full search decides */
    int maybe = run_blocks(&sc, classify_kind(level));
    if (!sc.lent) free(sc.head);
    return maybe;
}

int ld_rep_screen(const char *s, size_t n, ld_arena *scratch)
{
    return screen_text(s, n, scratch, LD_REP_SCREEN_BEST);
}

int ld_rep_screen_at(int level, const char *s, size_t n, ld_arena *scratch)
{
    return screen_text(s, n, scratch, level);
}

int ld_rep_screen_bytes(const char *s, size_t n, ld_arena *scratch)
{
    return screen_text(s, n, scratch, 0);
}

void ld_rep_screen_masks(int level, const char *s, size_t n, size_t at, uint64_t out[3])
{
    masks m;
    classify_chunk(classify_kind(level), s, n, at, 1, &m);
    out[0] = m.word;
    out[1] = m.high;
    out[2] = m.lead;
}
