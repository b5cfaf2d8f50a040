/* comm_file.h - the rendezvous file that the processes of a group meet at
 * (comm_join.c, comm_shm.c): rank 0 writes it under a temporary name and
 * publishes it whole with link(2), which fails where the name exists, so a
 * run that did not finish cannot hand its leftover to the next; the others
 * wait for the name.  Internal to engine/. */
#ifndef LD_COMM_FILE_H
#define LD_COMM_FILE_H

#include <stddef.h>
#include <time.h>

#include "ld_error.h"

/* seconds on the monotonic clock */
double ld_comm_now_s(void);

/* the time on that clock timeout_s from now (<= 0: none, a time never
 * reached) */
double ld_comm_deadline_s(double timeout_s);

/* the monotonic clock's time `ns` nanoseconds from now (< 1 s): the
 * deadline of a timed wait on a condition variable set to that clock */
struct timespec ld_comm_in_ns(long ns);

/* tmp = a temporary name next to `path`, this process's */
void ld_comm_tmp_name(char *tmp, size_t cap, const char *path);

/* Publishes the file written at `tmp` as `path` and removes `tmp`, either
 * way.  LD_ERR_USAGE when `path` exists (left as it is), LD_ERR_IO for
 * the rest. */
ld_status ld_comm_publish(const char *tmp, const char *path, ld_error *err);

/* *fd = `path` opened with `flags` once it is published; LD_ERR_IO at
 * `deadline` (ld_comm_now_s's clock), saying that rank 0 did not `what`
 * in time, or for another failure to open it. */
ld_status ld_comm_open_published(const char *path, int flags, double deadline, const char *what, int *fd,
                                 ld_error *err);

#endif /* LD_COMM_FILE_H */
