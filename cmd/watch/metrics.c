/* metrics.c - see metrics.h: the set, its lock and its render. */
#include "metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "logdiff_config.h"
#include "metrics_series.h"

struct ld_metrics {
    pthread_mutex_t lock;
    double start_time;
    ld_mcounters judged, findings, lines, events;
    uint64_t read_bytes, rejoined_lines, cut_lines;
    uint64_t open_requests, conversations;
    int have_last;
    double last_request;
    ld_mhistogram prompt_bytes, messages;
};

/* the labels every watcher has from its start, at 0 */
static const char *const known_verdicts[] = {"ok", "harness", "template", "sampling", "log", "kernels"};
static const char *const known_statuses[] = {"parsed", "skipped", "error"};
static const char *const known_events[] = {"rotated", "truncated", "gone", "problem"};

static const double prompt_bounds[] = {1024, 4096, 16384, 65536, 262144, 1048576, 4194304};
static const double message_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

double ld_metrics_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* one label's family with its known values at 0 */
static void init_labelled(ld_mcounters *c, const char *name, const char *help, const char *label,
                          const char *const *known, size_t n_known)
{
    ld_mcounters_init(c, name, help, &label, 1);
    for (size_t i = 0; i < n_known; i++) ld_mcounters_add(c, &known[i], 0);
}

static void init_families(ld_metrics *m)
{
    static const char *const finding_labels[] = {"kind", "severity"};
    init_labelled(&m->judged, "logdiff_requests_judged_total", "Requests judged, by verdict.",
                  "verdict", known_verdicts, COUNT(known_verdicts));
    ld_mcounters_init(&m->findings, "logdiff_findings_total",
                      "Findings reported on judged requests, by kind and severity.", finding_labels, 2);
    init_labelled(&m->lines, "logdiff_lines_read_total",
                  "Log lines read, by status (parsed, skipped, error).", "status", known_statuses,
                  COUNT(known_statuses));
    init_labelled(&m->events, "logdiff_source_events_total",
                  "Events of the followed log files (rotated, truncated, gone, problem).", "event",
                  known_events, COUNT(known_events));
    ld_mhistogram_init(&m->prompt_bytes, "logdiff_prompt_bytes",
                       "Size of each judged request's prompt, in bytes.", prompt_bounds,
                       COUNT(prompt_bounds));
    ld_mhistogram_init(&m->messages, "logdiff_request_messages",
                       "Number of messages in each judged request.", message_bounds,
                       COUNT(message_bounds));
}

ld_metrics *ld_metrics_new(void)
{
    ld_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return NULL;
    }
    m->start_time = ld_metrics_now();
    init_families(m);
    return m;
}

void ld_metrics_free(ld_metrics *m)
{
    if (!m) return;
    ld_mcounters_free(&m->judged);
    ld_mcounters_free(&m->findings);
    ld_mcounters_free(&m->lines);
    ld_mcounters_free(&m->events);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void ld_metrics_judged(ld_metrics *m, const char *verdict, uint64_t prompt_bytes,
                       uint64_t n_messages, double now)
{
    pthread_mutex_lock(&m->lock);
    ld_mcounters_add(&m->judged, &verdict, 1);
    ld_mhistogram_observe(&m->prompt_bytes, prompt_bytes);
    ld_mhistogram_observe(&m->messages, n_messages);
    m->have_last = 1;
    m->last_request = now;
    pthread_mutex_unlock(&m->lock);
}

void ld_metrics_finding(ld_metrics *m, const char *kind, const char *severity)
{
    const char *values[2] = {kind, severity};
    pthread_mutex_lock(&m->lock);
    ld_mcounters_add(&m->findings, values, 1);
    pthread_mutex_unlock(&m->lock);
}

void ld_metrics_lines(ld_metrics *m, const char *status, uint64_t n)
{
    pthread_mutex_lock(&m->lock);
    ld_mcounters_add(&m->lines, &status, n);
    pthread_mutex_unlock(&m->lock);
}

void ld_metrics_bytes(ld_metrics *m, uint64_t n)
{
    pthread_mutex_lock(&m->lock);
    m->read_bytes += n;
    pthread_mutex_unlock(&m->lock);
}

void ld_metrics_capture(ld_metrics *m, uint64_t rejoined_lines, uint64_t cut_lines)
{
    pthread_mutex_lock(&m->lock);
    m->rejoined_lines += rejoined_lines;
    m->cut_lines += cut_lines;
    pthread_mutex_unlock(&m->lock);
}

void ld_metrics_gauges(ld_metrics *m, uint64_t open_requests, uint64_t conversations)
{
    pthread_mutex_lock(&m->lock);
    m->open_requests = open_requests;
    m->conversations = conversations;
    pthread_mutex_unlock(&m->lock);
}

void ld_metrics_event(ld_metrics *m, const char *kind)
{
    pthread_mutex_lock(&m->lock);
    ld_mcounters_add(&m->events, &kind, 1);
    pthread_mutex_unlock(&m->lock);
}

/* a family of one unlabelled sample */
static void render_scalar_u64(ld_mtext *t, const char *name, const char *type, const char *help,
                              uint64_t v)
{
    ld_mtext_family(t, name, type, help);
    ld_mtext_sample_u64(t, name, NULL, 0, v);
}

static void render_scalar_f64(ld_mtext *t, const char *name, const char *help, double v)
{
    ld_mtext_family(t, name, "gauge", help);
    ld_mtext_sample_f64(t, name, NULL, 0, v);
}

static void render_process(const ld_metrics *m, ld_mtext *t)
{
    ld_mlabel version = {"version", LD_VERSION};
    ld_mtext_family(t, "logdiff_build_info", "gauge", "logdiff's version; always 1.");
    ld_mtext_sample_u64(t, "logdiff_build_info", &version, 1, 1);
    render_scalar_f64(t, "logdiff_start_time_seconds",
                      "Unix time at which logdiff watch started, in seconds.", m->start_time);
}

static void render_reading(const ld_metrics *m, ld_mtext *t)
{
    ld_mcounters_render(&m->lines, t);
    render_scalar_u64(t, "logdiff_read_bytes_total", "counter", "Bytes read from the followed logs.",
                      m->read_bytes);
    render_scalar_u64(t, "logdiff_rejoined_lines_total", "counter",
                      "Pieces of long lines that the capture split and logdiff rejoined.",
                      m->rejoined_lines);
    render_scalar_u64(t, "logdiff_cut_lines_total", "counter",
                      "Lines the capture cut for good (their end lost).", m->cut_lines);
    ld_mcounters_render(&m->events, t);
}

static void render_state(const ld_metrics *m, ld_mtext *t, double now)
{
    render_scalar_u64(t, "logdiff_open_requests", "gauge",
                      "Requests waiting for their other log line.", m->open_requests);
    render_scalar_u64(t, "logdiff_conversations", "gauge", "Conversations followed.",
                      m->conversations);
    if (!m->have_last) return;
    double since = now - m->last_request;
    render_scalar_f64(t, "logdiff_last_request_timestamp_seconds",
                      "Unix time at which the last request was judged, in seconds.",
                      m->last_request);
    render_scalar_f64(t, "logdiff_seconds_since_last_request",
                      "Seconds since the last request was judged, at the time of this render.",
                      since > 0 ? since : 0);
}

char *ld_metrics_render(ld_metrics *m, double now, size_t *len)
{
    ld_mtext t;
    ld_mtext_init(&t);
    pthread_mutex_lock(&m->lock);
    render_process(m, &t);
    ld_mcounters_render(&m->judged, &t);
    ld_mcounters_render(&m->findings, &t);
    render_reading(m, &t);
    render_state(m, &t, now);
    ld_mhistogram_render(&m->prompt_bytes, &t);
    ld_mhistogram_render(&m->messages, &t);
    pthread_mutex_unlock(&m->lock);
    return ld_mtext_take(&t, len);
}
