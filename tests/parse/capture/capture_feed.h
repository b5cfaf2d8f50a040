/* capture_feed.h - what the capture tests share: a capture fed a member's
 * records (ld_capture_push, then ld_capture_pop, then ld_capture_drain at
 * its end) and what came out of it kept for the checks. */
#ifndef LD_TEST_CAPTURE_FEED_H
#define LD_TEST_CAPTURE_FEED_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/capture/capture.h"
#include "tests/support/ld_test.h"

/* ---------------------------------------------------------------- helpers */

enum { MAX_OUT = 32 };

/* What came out of a capture fed a member's records. */
typedef struct result {
    char *line[MAX_OUT];          /* copies of the lines handed out */
    char *source[MAX_OUT];        /* and of the writer each names ("" for none) */
    uint64_t lineno[MAX_OUT], offset[MAX_OUT], lost[MAX_OUT];
    int n;
    ld_status problem[MAX_OUT];   /* non-OK statuses, in order */
    uint64_t problem_line[MAX_OUT], problem_offset[MAX_OUT];
    int n_problems;
} result;

static inline void result_free(result *r)
{
    for (int i = 0; i < r->n; i++) free(r->line[i]), free(r->source[i]);
}

static inline void keep_line(result *r, const ld_line *l)
{
    if (r->n == MAX_OUT) return;
    r->line[r->n] = strndup(l->data, l->len);
    r->source[r->n] = l->source ? strndup(l->source, l->source_len) : strdup("");
    r->lineno[r->n] = l->lineno;
    r->offset[r->n] = l->offset;
    r->lost[r->n] = l->lost_bytes;
    r->n++;
}

static inline void keep_problem(result *r, ld_status st, const ld_error *e)
{
    if (st == LD_OK || r->n_problems == MAX_OUT) return;
    r->problem[r->n_problems] = st;
    r->problem_line[r->n_problems] = e->line;
    r->problem_offset[r->n_problems] = e->offset;
    r->n_problems++;
}

/* Feeds recs[0..n) as one member's physical lines (offsets as in a file of
 * those lines, each ending in \n), then drains. */
static inline void feed_n(ld_capture *c, const char *const *recs, const size_t *lens, int n, result *r)
{
    uint64_t off = 0;
    ld_capture_reset(c);
    for (int i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : strlen(recs[i]);
        ld_line in = { recs[i], len, (uint64_t)i + 1, off, 0, 0, 0, NULL, 0}, out;
        off += len + 1;
        int has = 0;
        ld_error e;
        ld_error_clear(&e);
        ld_status st = ld_capture_push(c, &in, &out, &has, &e);
        keep_problem(r, st, &e);
        if (has) keep_line(r, &out);
        for (ld_capture_pop(c, &out, &has, NULL); has; ld_capture_pop(c, &out, &has, NULL)) keep_line(r, &out);
    }
    for (;;) {
        ld_line out;
        int has = 0;
        ld_error e;
        ld_error_clear(&e);
        ld_status st = ld_capture_drain(c, &out, &has, &e);
        if (!has) break;
        keep_problem(r, st, &e);
        keep_line(r, &out);
    }
}

static inline void feed(ld_capture *c, const char *const *recs, int n, result *r)
{
    feed_n(c, recs, NULL, n, r);
}

/* A capture of `kind`, fed recs, into r: 0, or 1 when it cannot be made. */
static inline int run(ld_capture_kind kind, size_t max_line, const char *const *recs, int n, result *r)
{
    memset(r, 0, sizeof *r);
    ld_capture *c = NULL;
    if (ld_capture_new(kind, max_line, &c, NULL) != LD_OK) return 1;
    feed(c, recs, n, r);
    ld_capture_free(c);
    return 0;
}

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

#endif
