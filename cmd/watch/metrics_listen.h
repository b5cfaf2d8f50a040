/* metrics_listen.h - the listening socket of --metrics-listen ADDR:PORT.
 *
 * ADDR:PORT is "127.0.0.1:9464", "[::1]:9464", "localhost:9464" or
 * ":9464" (every interface: IPv6 and IPv4 on one socket where the host
 * has IPv6, else IPv4's 0.0.0.0); port 0 takes a free port
 * (ld_metrics_listen_port says which).  The socket is opened here, not by
 * the HTTP library, so that a port in use is said with the address and
 * the reason.
 */
#ifndef LD_WATCH_METRICS_LISTEN_H
#define LD_WATCH_METRICS_LISTEN_H

#include "ld_error.h"

/* A socket bound to addr and listening (close-on-exec, SO_REUSEADDR);
 * -1 with a message in err: an address that does not parse, a host that
 * does not resolve, a port in use (the address named). */
int ld_metrics_listen(const char *addr, ld_error *err);

/* The local port of a bound socket; -1 when it cannot be read. */
int ld_metrics_listen_port(int fd);

#endif
