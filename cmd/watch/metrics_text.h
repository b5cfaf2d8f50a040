/* metrics_text.h - writing Prometheus' text exposition format (0.0.4).
 *
 * A growable text buffer and the pieces of the format: a family's HELP and
 * TYPE lines, a sample line with its labels, label values escaped (`\\`,
 * `\"`, `\n`) and HELP text escaped (`\\`, `\n`), numbers as Prometheus
 * parses them (integers exact, floats the shortest text that reads back
 * the same, NaN, +Inf, -Inf).  A failed allocation sticks: every later call
 * does nothing and ld_mtext_take returns NULL.
 */
#ifndef LD_WATCH_METRICS_TEXT_H
#define LD_WATCH_METRICS_TEXT_H

#include <stddef.h>
#include <stdint.h>

typedef struct ld_mtext {
    char *buf;
    size_t len, cap;
    int failed; /* an allocation failed: the text is incomplete */
} ld_mtext;

/* One label of a sample: name=value; value is escaped when written. */
typedef struct ld_mlabel {
    const char *name;
    const char *value;
} ld_mlabel;

void ld_mtext_init(ld_mtext *t);
/* The text, NUL-terminated, malloc'd (the caller frees), *len its length;
 * NULL (buffer freed) when an allocation failed. */
char *ld_mtext_take(ld_mtext *t, size_t *len);
void ld_mtext_free(ld_mtext *t);

void ld_mtext_put(ld_mtext *t, const char *s, size_t n);
void ld_mtext_puts(ld_mtext *t, const char *s);

/* "# HELP name help\n# TYPE name type\n" */
void ld_mtext_family(ld_mtext *t, const char *name, const char *type, const char *help);

/* name{l1="v1",...} value\n, the value an unsigned integer or a double */
void ld_mtext_sample_u64(ld_mtext *t, const char *name, const ld_mlabel *labels, size_t n_labels,
                         uint64_t value);
void ld_mtext_sample_f64(ld_mtext *t, const char *name, const ld_mlabel *labels, size_t n_labels,
                         double value);

/* A double as the format writes it, into out (at least 32 bytes). */
void ld_mtext_format_f64(double v, char *out, size_t size);

#endif
