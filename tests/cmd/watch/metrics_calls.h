/* metrics_calls.h - a known set of calls on a metrics set (cmd/watch/
 * metrics.h), shared by test_metrics.c and metrics_sample.c.  The same
 * calls are written out again in check_exposition.py, which works out the
 * expected values itself (counts, cumulative buckets, sums) and reads the
 * render back with the Python prometheus_client parser: keep both lists in
 * step. */
#ifndef LD_TEST_WATCH_METRICS_CALLS_H
#define LD_TEST_WATCH_METRICS_CALLS_H

#include "cmd/watch/metrics.h"

#define LD_TEST_JUDGED_AT 1700000000.5
#define LD_TEST_RENDER_AT 1700000042.25
/* a finding kind that needs every escape of a label value */
#define LD_TEST_ODD_KIND "odd\"kind\\with\nnewline"

static inline void ld_test_metrics_known_calls(ld_metrics *m)
{
    const double t = LD_TEST_JUDGED_AT;
    ld_metrics_judged(m, "ok", 500, 1, t);
    ld_metrics_judged(m, "ok", 1024, 2, t);          /* on the bounds: le is inclusive */
    ld_metrics_judged(m, "harness", 5000, 3, t);
    ld_metrics_judged(m, "template", 4194304, 512, t);
    ld_metrics_judged(m, "ok", 10000000, 1000, t + 0.5); /* past every bound; the last */
    ld_metrics_finding(m, "harness.empty_assistant", "warning");
    ld_metrics_finding(m, "harness.empty_assistant", "warning");
    ld_metrics_finding(m, "template.render_mismatch", "error");
    ld_metrics_finding(m, LD_TEST_ODD_KIND, "info");
    ld_metrics_lines(m, "parsed", 120);
    ld_metrics_lines(m, "skipped", 3);
    ld_metrics_lines(m, "error", 1);
    ld_metrics_lines(m, "parsed", 5);
    ld_metrics_bytes(m, 123456789);
    ld_metrics_bytes(m, 11);
    ld_metrics_capture(m, 4, 1);
    ld_metrics_capture(m, 1, 0);
    ld_metrics_gauges(m, 7, 42);
    ld_metrics_gauges(m, 5, 40); /* gauges: the last call holds */
    ld_metrics_event(m, "rotated");
    ld_metrics_event(m, "rotated");
    ld_metrics_event(m, "truncated");
}

#endif
