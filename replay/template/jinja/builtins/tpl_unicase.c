/* tpl_unicase.c - Python's str.lower/upper/title/capitalize and jinja2's
 * `title` filter on UTF-8 text.
 *
 * Case pairs are known for ASCII, Latin-1, Latin Extended-A, the regular
 * pairs of Latin Extended-B (U+0200-U+0233), Latin Extended Additional
 * (U+1E00-U+1EFF), Greek (with the final-sigma rule of str.lower), Cyrillic
 * (U+0400-U+052F), Armenian and the fullwidth Latin letters, plus the
 * special cases ß (upper "SS", title "Ss"), İ (lower "i̇"), ŉ, µ, ſ, ı and ÿ.
 * The final-sigma rule looks at the neighbouring code points only (Python
 * skips case-ignorable marks between them).  Other scripts (Georgian, Cherokee, Deseret, the irregular pairs of
 * U+0180-U+01FF and U+0250-U+02AF, titlecase digraphs) are left unchanged,
 * where Python would map them; they are rare in prompts. */
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

/* pairs laid out upper, lower, upper, lower... from `lo` to `hi` (inclusive);
 * `odd` = the upper case letter is at the odd code points */
typedef struct pair_range {
    uint32_t lo, hi;
    bool odd;
} pair_range;

static const pair_range pairs[] = {
    {0x0100, 0x012F, false}, {0x0132, 0x0137, false}, {0x0139, 0x0148, true},  {0x014A, 0x0177, false},
    {0x0179, 0x017E, true},  {0x0200, 0x021F, false}, {0x0222, 0x0233, false}, {0x0460, 0x0481, false},
    {0x048A, 0x04BF, false}, {0x04C1, 0x04CE, true},  {0x04D0, 0x052F, false}, {0x1E00, 0x1E95, false},
    {0x1EA0, 0x1EFF, false},
};

/* offset ranges: upper case [lo, hi] + delta = lower case */
typedef struct shift_range {
    uint32_t lo, hi;
    int32_t delta;
} shift_range;

static const shift_range shifts[] = {
    {'A', 'Z', 32},         {0x00C0, 0x00D6, 32},   {0x00D8, 0x00DE, 32},   {0x0391, 0x03A1, 32},
    {0x03A3, 0x03AB, 32},   {0x0388, 0x038A, 37},   {0x038E, 0x038F, 63},   {0x0410, 0x042F, 32},
    {0x0400, 0x040F, 80},   {0x0531, 0x0556, 48},   {0xFF21, 0xFF3A, 32},
};

/* single pairs that fit no range: upper, lower */
static const uint32_t singles[][2] = {
    {0x0178, 0x00FF}, {0x0386, 0x03AC}, {0x038C, 0x03CC}, {0x04C0, 0x04CF},
};

static uint32_t to_lower(uint32_t c)
{
    for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++)
        if (c >= shifts[i].lo && c <= shifts[i].hi) return (uint32_t)((int32_t)c + shifts[i].delta);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (c >= pairs[i].lo && c <= pairs[i].hi && (c & 1) == (uint32_t)pairs[i].odd) return c + 1;
    for (size_t i = 0; i < sizeof singles / sizeof singles[0]; i++)
        if (c == singles[i][0]) return singles[i][1];
    return c;
}

static uint32_t to_upper(uint32_t c)
{
    switch (c) {
    case 0x00B5: return 0x039C; /* µ */
    case 0x0131: return 'I';    /* ı */
    case 0x017F: return 'S';    /* ſ */
    case 0x03C2: return 0x03A3; /* ς */
    default: break;
    }
    for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
        uint32_t lo = (uint32_t)((int32_t)shifts[i].lo + shifts[i].delta);
        uint32_t hi = (uint32_t)((int32_t)shifts[i].hi + shifts[i].delta);
        if (c >= lo && c <= hi) return (uint32_t)((int32_t)c - shifts[i].delta);
    }
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (c > pairs[i].lo && c <= pairs[i].hi && (c & 1) != (uint32_t)pairs[i].odd) return c - 1;
    for (size_t i = 0; i < sizeof singles / sizeof singles[0]; i++)
        if (c == singles[i][1]) return singles[i][0];
    return c;
}

/* has case, as Python's _PyUnicode_IsCased (within the known scripts) */
static bool cased(uint32_t c)
{
    return to_lower(c) != c || to_upper(c) != c || c == 0x00DF || c == 0x0138 || c == 0x0149 || c == 0x0130;
}

enum { LOWER, UPPER, TITLE };

/* c in case `how` into out (1 to 3 code points); returns the count */
static size_t map_cp(uint32_t c, int how, uint32_t *out)
{
    if (c == 0x00DF && how != LOWER) return out[0] = 'S', out[1] = how == UPPER ? 'S' : 's', 2;
    if (c == 0x0130 && how == LOWER) return out[0] = 'i', out[1] = 0x0307, 2;
    if (c == 0x0149 && how != LOWER) return out[0] = 0x02BC, out[1] = 'N', 2;
    out[0] = how == LOWER ? to_lower(c) : to_upper(c);
    return 1;
}

static void encode(tv_buf *b, uint32_t cp)
{
    char o[4];
    size_t n;
    if (cp < 0x80) o[0] = (char)cp, n = 1;
    else if (cp < 0x800) o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 63)), o[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 63)),
        o[2] = (char)(0x80 | ((cp >> 6) & 63)), o[3] = (char)(0x80 | (cp & 63)), n = 4;
    ld_tv_buf_put(b, o, n);
}

/* separators of jinja2's title filter: [-\s({\[<] */
static bool title_sep(uint32_t c)
{
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' || (c >= 0x09 && c <= 0x0D) ||
           (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Greek capital sigma lowers to final sigma after a cased letter when no
 * cased letter follows (str.lower) */
static bool final_sigma(const unsigned char *s, size_t n, size_t at, size_t len, uint32_t prev)
{
    if (!cased(prev)) return false;
    if (at + len >= n) return true;
    uint32_t next;
    ld_tv_utf8_decode((const char *)s + at + len, n - at - len, &next);
    return !cased(next);
}

ld_tpl_value *ld_tv_case_map(ld_arena *a, const char *str, size_t n, int mode)
{
    const unsigned char *s = (const unsigned char *)str;
    tv_buf b = {0};
    bool prev_cased = false, word_start = true;
    uint32_t prev = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c, out[3];
        size_t k = ld_tv_utf8_decode(str + i, n - i, &c), m;
        if (c == 0xFFFFFFFF) {
            ld_tv_buf_put(&b, str + i, 1), i++, prev_cased = false, prev = 0;
            continue;
        }
        int how;
        switch (mode) {
        case TV_CASE_LOWER: how = LOWER; break;
        case TV_CASE_UPPER: how = UPPER; break;
        case TV_CASE_TITLE: how = prev_cased ? LOWER : TITLE; break;
        case TV_CASE_CAPITALIZE: how = i == 0 ? TITLE : LOWER; break;
        default: /* TV_CASE_TITLE_WORDS */
            how = title_sep(c) ? LOWER : word_start ? UPPER : LOWER;
            word_start = title_sep(c);
        }
        if (how == LOWER && c == 0x03A3 && final_sigma(s, n, i, k, prev))
            out[0] = 0x03C2, m = 1;
        else
            m = map_cp(c, how, out);
        for (size_t j = 0; j < m; j++) encode(&b, out[j]);
        prev_cased = cased(c);
        prev = c;
        i += k;
    }
    ld_tpl_value *v = b.failed ? NULL : ld_tv_str(a, b.p ? b.p : "", b.len);
    free(b.p);
    return v;
}
