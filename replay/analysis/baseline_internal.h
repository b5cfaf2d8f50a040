/* baseline_internal.h - what baseline.c and baseline_io.c share. */
#ifndef LD_BASELINE_INTERNAL_H
#define LD_BASELINE_INTERNAL_H

#include "baseline.h"

/* The static string equal to s among the verdicts / finding kinds, or NULL. */
const char *ld_baseline_static_verdict(const char *s);
const char *ld_baseline_static_kind(const char *s);

/* Appends a zeroed entry; NULL (err filled) on out of memory. */
ld_baseline_entry *ld_baseline_push(ld_baseline *b, ld_error *err);

/* Sorts a kind list and drops repeats. */
void ld_baseline_sort_kinds(const char **list, size_t *n);

#endif
