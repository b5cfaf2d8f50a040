/* progress.c - see progress.h. */
#include "progress.h"

#include <string.h>
#include <time.h>

double ld_cli_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ld_cli_progress_init(ld_cli_progress *p, FILE *f, int tty, uint64_t total_bytes,
                      uint64_t min_bytes)
{
    memset(p, 0, sizeof *p);
    if (!tty || (total_bytes && total_bytes < min_bytes)) return;
    p->f = f;
    p->total = total_bytes;
    p->started = p->drawn = ld_cli_now_seconds();
}

void ld_cli_progress_update(ld_cli_progress *p, uint64_t done, const char *what)
{
    if (!p->f) return;
    double now = ld_cli_now_seconds();
    if (now - p->drawn < 0.1) return;
    p->drawn = now;
    double mb = done / 1e6, rate = mb / (now - p->started + 1e-9);
    char bar[31];
    int fill = p->total ? (int)(30.0 * done / p->total) : 0;
    if (fill > 30) fill = 30;
    memset(bar, '#', fill);
    memset(bar + fill, '.', 30 - fill);
    bar[30] = '\0';
    if (p->total)
        fprintf(p->f, "\r[%s] %5.1f%% %8.1f MB %7.0f MB/s %-.30s\033[K", bar,
                100.0 * done / p->total, mb, rate, what ? what : "");
    else
        fprintf(p->f, "\r%8.1f MB %7.0f MB/s %-.40s\033[K", mb, rate,
                what ? what : "");
    fflush(p->f);
    p->visible = 1;
}

void ld_cli_progress_done(ld_cli_progress *p)
{
    if (p->f && p->visible) {
        fprintf(p->f, "\r\033[K");
        fflush(p->f);
    }
    p->visible = 0;
}
