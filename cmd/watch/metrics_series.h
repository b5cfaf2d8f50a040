/* metrics_series.h - the two kinds of metric family the watcher keeps:
 * counters by one or two labels, and histograms over fixed buckets.
 *
 * Label sets are bounded: a family holds at most LD_MSERIES_MAX series;
 * once it has LD_MSERIES_MAX - 1 named ones, a new label set is counted
 * under the series whose every label is "other" (as when a copy cannot be
 * allocated).  A label value is kept as valid UTF-8 of at most
 * LD_MSERIES_VALUE_MAX bytes (a byte that is not UTF-8 becomes U+FFFD, a
 * longer value is cut at a character), NULL or "" as "unknown".  Not
 * thread-safe: metrics.c holds its lock around every call.
 */
#ifndef LD_WATCH_METRICS_SERIES_H
#define LD_WATCH_METRICS_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "metrics_text.h"

#define LD_MSERIES_MAX 256
#define LD_MSERIES_LABELS 2
#define LD_MSERIES_VALUE_MAX 128

typedef struct ld_mseries {
    char *values[LD_MSERIES_LABELS];
    uint64_t count;
} ld_mseries;

typedef struct ld_mcounters {
    const char *name, *help; /* static strings */
    const char *label_names[LD_MSERIES_LABELS];
    size_t n_labels;
    ld_mseries *series;
    size_t n, cap;
    uint64_t other;  /* what went to the "other" series */
    int other_used;
} ld_mcounters;

/* label_names: n_labels (1 or 2) static strings. */
void ld_mcounters_init(ld_mcounters *c, const char *name, const char *help,
                       const char *const *label_names, size_t n_labels);
void ld_mcounters_free(ld_mcounters *c);
/* Adds n to the series of `values` (n_labels of them), creating it at 0. */
void ld_mcounters_add(ld_mcounters *c, const char *const *values, uint64_t n);
/* counter family: HELP, TYPE and one sample per series (creation order,
 * "other" last); a family with no series yet writes nothing. */
void ld_mcounters_render(const ld_mcounters *c, ld_mtext *t);

/* A label value as kept: valid UTF-8, at most LD_MSERIES_VALUE_MAX bytes;
 * malloc'd, NULL on out of memory. */
char *ld_mseries_clean_value(const char *v);

#define LD_MHIST_MAX_BOUNDS 15

typedef struct ld_mhistogram {
    const char *name, *help;       /* static strings */
    double bounds[LD_MHIST_MAX_BOUNDS]; /* upper bounds, increasing */
    size_t n_bounds;
    uint64_t per_bucket[LD_MHIST_MAX_BOUNDS + 1]; /* not cumulative; the last: above every bound */
    uint64_t sum;   /* saturates at UINT64_MAX */
    uint64_t count;
} ld_mhistogram;

/* bounds: n_bounds (<= LD_MHIST_MAX_BOUNDS) increasing upper bounds. */
void ld_mhistogram_init(ld_mhistogram *h, const char *name, const char *help,
                        const double *bounds, size_t n_bounds);
void ld_mhistogram_observe(ld_mhistogram *h, uint64_t v);
/* histogram family: cumulative _bucket{le} samples up to le="+Inf", _sum, _count */
void ld_mhistogram_render(const ld_mhistogram *h, ld_mtext *t);

#endif
