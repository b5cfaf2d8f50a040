/* metrics.h - what `logdiff watch` counts, for Prometheus.
 *
 * One set of metrics, updated by the watch loop as it reads and judges, and
 * rendered in Prometheus' text exposition format (version 0.0.4), either by
 * the HTTP server's thread (metrics_http.h: --metrics-listen) or into a
 * file for node_exporter's textfile collector (--metrics-textfile).  Every
 * function takes the set's lock: any thread may call any of them.
 *
 * Times (`now`) are Unix time in seconds (CLOCK_REALTIME: ld_metrics_now).
 *
 * The families (docs/ops/README.md lists them with their PromQL uses):
 *   logdiff_build_info{version}                  gauge, 1
 *   logdiff_start_time_seconds                   gauge, when the set was made
 *   logdiff_requests_judged_total{verdict}       counter
 *   logdiff_findings_total{kind,severity}        counter
 *   logdiff_lines_read_total{status}             counter (parsed, skipped, error)
 *   logdiff_read_bytes_total                     counter
 *   logdiff_rejoined_lines_total                 counter (capture pieces joined into lines)
 *   logdiff_cut_lines_total                      counter (lines the capture cut for good)
 *   logdiff_source_events_total{event}           counter (rotated, truncated, gone, problem)
 *   logdiff_open_requests, logdiff_conversations gauges
 *   logdiff_last_request_timestamp_seconds       gauge
 *   logdiff_seconds_since_last_request           gauge, computed at render
 *   logdiff_prompt_bytes                         histogram (1 KiB .. 4 MiB, powers of 4)
 *   logdiff_request_messages                     histogram (1 .. 512, powers of 2)
 * The verdicts (ok, harness, template, sampling, log, kernels), line
 * statuses and source events are there at 0 from the start, so that rate()
 * and increase() see their first increment.  Before the first request is
 * judged, logdiff_last_request_timestamp_seconds and
 * logdiff_seconds_since_last_request are absent (not NaN, not 0): a NaN
 * compares false in every alert and a 0 would read as 1970; an alert on
 * silence uses logdiff_start_time_seconds for that case.  Label sets are
 * bounded (metrics_series.h: 256 series a family, the rest under "other").
 */
#ifndef LD_WATCH_METRICS_H
#define LD_WATCH_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

typedef struct ld_metrics ld_metrics;

/* A new set, every counter at 0; NULL on out of memory. */
ld_metrics *ld_metrics_new(void);
void ld_metrics_free(ld_metrics *m);

/* Unix time now, in seconds (CLOCK_REALTIME), as the other calls take it. */
double ld_metrics_now(void);

/* A request judged: its verdict counted, its prompt size (bytes) and
 * message count observed, `now` kept as the time of the last request. */
void ld_metrics_judged(ld_metrics *m, const char *verdict, uint64_t prompt_bytes,
                       uint64_t n_messages, double now);
/* A finding ("harness.empty_assistant", severity info/warning/error). */
void ld_metrics_finding(ld_metrics *m, const char *kind, const char *severity);
/* n lines read with that status: parsed, skipped or error. */
void ld_metrics_lines(ld_metrics *m, const char *status, uint64_t n);
/* n more bytes read. */
void ld_metrics_bytes(ld_metrics *m, uint64_t n);
/* Increments: pieces of lines the capture split and the reader rejoined,
 * lines the capture cut for good. */
void ld_metrics_capture(ld_metrics *m, uint64_t rejoined_lines, uint64_t cut_lines);
/* The current number of requests waiting for their other line, and of
 * conversations followed. */
void ld_metrics_gauges(ld_metrics *m, uint64_t open_requests, uint64_t conversations);
/* A source event: rotated, truncated, gone, problem. */
void ld_metrics_event(ld_metrics *m, const char *kind);

/* The Prometheus text exposition (version 0.0.4), NUL-terminated,
 * malloc'd (the caller frees), *len its length (len may be NULL); `now`
 * for logdiff_seconds_since_last_request.  NULL on out of memory. */
char *ld_metrics_render(ld_metrics *m, double now, size_t *len);

/* Writes the render to `path` atomically, for node_exporter's textfile
 * collector (a `.prom` file in its --collector.textfile.directory): a
 * temporary file beside it (PATH.XXXXXX, which the collector does not
 * read), mode 0644, written, fsync'd and renamed over path, the directory
 * then fsync'd.  A reader sees the old file or the new one, never part.
 * 0, or -1 with a message in err (the path and the reason) and no
 * temporary file left. */
int ld_metrics_write_textfile(ld_metrics *m, const char *path, double now, ld_error *err);

#endif
