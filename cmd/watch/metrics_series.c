/* metrics_series.c - see metrics_series.h. */
#include "metrics_series.h"

#include <stdlib.h>
#include <string.h>

static const char *const other_values[LD_MSERIES_LABELS] = {"other", "other"};

/* Length of the UTF-8 character at s (n bytes left), 0 when s does not
 * start a valid one (overlong forms, surrogates and values past U+10FFFF
 * refused). */
static size_t utf8_char_len(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80) return 1;
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (len == 0 || len > n || s[0] > 0xF4) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (len == 3 && s[0] == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
    if (len == 3 && s[0] == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
    if (len == 4 && s[0] == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
    if (len == 4 && s[0] == 0xF4 && s[1] >= 0x90) return 0; /* > U+10FFFF */
    return len;
}

char *ld_mseries_clean_value(const char *v)
{
    if (!v || !*v) v = "unknown";
    char *out = malloc(LD_MSERIES_VALUE_MAX + 1);
    if (!out) return NULL;
    const unsigned char *s = (const unsigned char *)v;
    size_t n = strlen(v), i = 0, o = 0;
    while (i < n) {
        size_t len = utf8_char_len(s + i, n - i);
        const char *piece = len ? (const char *)s + i : "\xEF\xBF\xBD";
        size_t plen = len ? len : 3;
        if (o + plen > LD_MSERIES_VALUE_MAX) break;
        memcpy(out + o, piece, plen);
        o += plen;
        i += len ? len : 1;
    }
    out[o] = 0;
    return out;
}

void ld_mcounters_init(ld_mcounters *c, const char *name, const char *help,
                       const char *const *label_names, size_t n_labels)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    c->help = help;
    c->n_labels = n_labels > LD_MSERIES_LABELS ? LD_MSERIES_LABELS : n_labels;
    for (size_t i = 0; i < c->n_labels; i++) c->label_names[i] = label_names[i];
}

static void free_series(ld_mseries *s, size_t n_labels)
{
    for (size_t i = 0; i < n_labels; i++) free(s->values[i]);
}

void ld_mcounters_free(ld_mcounters *c)
{
    for (size_t i = 0; i < c->n; i++) free_series(&c->series[i], c->n_labels);
    free(c->series);
    c->series = NULL;
    c->n = c->cap = 0;
}

/* The series whose values equal the cleaned `clean`, or NULL. */
static ld_mseries *find(ld_mcounters *c, char *const *clean)
{
    for (size_t i = 0; i < c->n; i++) {
        size_t k = 0;
        while (k < c->n_labels && strcmp(c->series[i].values[k], clean[k]) == 0) k++;
        if (k == c->n_labels) return &c->series[i];
    }
    return NULL;
}

/* A new series for `clean` (ownership taken on success), or NULL when the
 * family is full or memory ran out. */
static ld_mseries *append(ld_mcounters *c, char *const *clean)
{
    if (c->n >= LD_MSERIES_MAX - 1) return NULL;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        ld_mseries *s = realloc(c->series, cap * sizeof *s);
        if (!s) return NULL;
        c->series = s;
        c->cap = cap;
    }
    ld_mseries *s = &c->series[c->n++];
    memset(s, 0, sizeof *s);
    for (size_t k = 0; k < c->n_labels; k++) s->values[k] = clean[k];
    return s;
}

void ld_mcounters_add(ld_mcounters *c, const char *const *values, uint64_t n)
{
    char *clean[LD_MSERIES_LABELS] = {NULL, NULL};
    int ok = 1;
    for (size_t k = 0; k < c->n_labels; k++)
        if (!(clean[k] = ld_mseries_clean_value(values[k]))) ok = 0;
    ld_mseries *s = ok ? find(c, clean) : NULL;
    if (s) {
        for (size_t k = 0; k < c->n_labels; k++) free(clean[k]);
    } else if (ok && (s = append(c, clean)) != NULL) {
        /* clean now owned by s */
    } else {
        for (size_t k = 0; k < c->n_labels; k++) free(clean[k]);
        c->other += n;
        c->other_used = 1;
        return;
    }
    s->count += n;
}

static void render_one(const ld_mcounters *c, ld_mtext *t, const char *const *values, uint64_t v)
{
    ld_mlabel labels[LD_MSERIES_LABELS];
    for (size_t k = 0; k < c->n_labels; k++) {
        labels[k].name = c->label_names[k];
        labels[k].value = values[k];
    }
    ld_mtext_sample_u64(t, c->name, labels, c->n_labels, v);
}

void ld_mcounters_render(const ld_mcounters *c, ld_mtext *t)
{
    if (c->n == 0 && !c->other_used) return;
    ld_mtext_family(t, c->name, "counter", c->help);
    for (size_t i = 0; i < c->n; i++)
        render_one(c, t, (const char *const *)c->series[i].values, c->series[i].count);
    if (c->other_used) render_one(c, t, other_values, c->other);
}

void ld_mhistogram_init(ld_mhistogram *h, const char *name, const char *help,
                        const double *bounds, size_t n_bounds)
{
    memset(h, 0, sizeof *h);
    h->name = name;
    h->help = help;
    h->n_bounds = n_bounds > LD_MHIST_MAX_BOUNDS ? LD_MHIST_MAX_BOUNDS : n_bounds;
    for (size_t i = 0; i < h->n_bounds; i++) h->bounds[i] = bounds[i];
}

void ld_mhistogram_observe(ld_mhistogram *h, uint64_t v)
{
    size_t b = 0;
    while (b < h->n_bounds && (double)v > h->bounds[b]) b++;
    h->per_bucket[b]++;
    h->sum = h->sum > UINT64_MAX - v ? UINT64_MAX : h->sum + v;
    h->count++;
}

/* name + suffix into out (names are short static strings) */
static void suffixed(char *out, size_t size, const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    if (n + s + 1 > size) n = size - s - 1;
    memcpy(out, name, n);
    memcpy(out + n, suffix, s + 1);
}

void ld_mhistogram_render(const ld_mhistogram *h, ld_mtext *t)
{
    char name[128], le[40];
    ld_mtext_family(t, h->name, "histogram", h->help);
    suffixed(name, sizeof name, h->name, "_bucket");
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= h->n_bounds; b++) {
        cumulative += h->per_bucket[b];
        if (b < h->n_bounds) ld_mtext_format_f64(h->bounds[b], le, sizeof le);
        else strcpy(le, "+Inf");
        ld_mlabel label = {"le", le};
        ld_mtext_sample_u64(t, name, &label, 1, cumulative);
    }
    suffixed(name, sizeof name, h->name, "_sum");
    ld_mtext_sample_u64(t, name, NULL, 0, h->sum);
    suffixed(name, sizeof name, h->name, "_count");
    ld_mtext_sample_u64(t, name, NULL, 0, h->count);
}
