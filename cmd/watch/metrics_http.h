/* metrics_http.h - `--metrics-listen ADDR:PORT`: the metrics over HTTP for
 * Prometheus to scrape, served by libmicrohttpd on a thread of its own.
 *
 * GET (or HEAD) /metrics answers the render (metrics.h) with Content-Type
 * "text/plain; version=0.0.4; charset=utf-8"; any other path is 404, any
 * other method 405.  At most 32 connections at once, each dropped after 10
 * seconds idle.  Without libmicrohttpd at build time (LD_HAVE_MICROHTTPD
 * undefined) start fails, saying so.
 */
#ifndef LD_WATCH_METRICS_HTTP_H
#define LD_WATCH_METRICS_HTTP_H

#include "ld_error.h"
#include "metrics.h"

typedef struct ld_metrics_http ld_metrics_http;

/* Serves m on addr ("127.0.0.1:9464", "[::1]:9464", ":9464" for every
 * interface; metrics_listen.h), on its own thread, until stopped.  m must
 * outlive the server.  NULL with a message in err: an address that does
 * not parse, the port in use (the address named), no libmicrohttpd. */
ld_metrics_http *ld_metrics_http_start(ld_metrics *m, const char *addr, ld_error *err);
/* The port it listens on (the one the system chose for port 0). */
int ld_metrics_http_port(const ld_metrics_http *h);
/* Stops serving (in-flight requests answered first) and frees h; NULL is
 * allowed. */
void ld_metrics_http_stop(ld_metrics_http *h);

#endif
