/* comm_file.c - the rendezvous file's helpers (comm_file.h), shared by
 * comm_join.c (NCCL's id) and comm_shm.c (the mapping): a leaf, so that the
 * transports and the join call down to it instead of into each other. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_file.h"

double ld_comm_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double ld_comm_deadline_s(double timeout_s)
{
    return timeout_s > 0 ? ld_comm_now_s() + timeout_s : 1e300;
}

struct timespec ld_comm_in_ns(long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += ns;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

void ld_comm_tmp_name(char *tmp, size_t cap, const char *path)
{
    snprintf(tmp, cap, "%s.%d.tmp", path, (int)getpid());
}

ld_status ld_comm_publish(const char *tmp, const char *path, ld_error *err)
{
    ld_status st = LD_OK;
    if (link(tmp, path) != 0)
        st = errno == EEXIST ? LD_FAIL(err, LD_ERR_USAGE, 0, "rendezvous %s exists: a run that did not finish left "
                                       "it, or another group uses the name (remove it, or give another)", path)
                             : LD_FAIL(err, LD_ERR_IO, 0, "%s: %s", path, strerror(errno));
    unlink(tmp);
    return st;
}

ld_status ld_comm_open_published(const char *path, int flags, double deadline, const char *what, int *fd,
                                 ld_error *err)
{
    for (;;) {
        if ((*fd = open(path, flags)) >= 0) return LD_OK;
        if (errno != ENOENT) return LD_FAIL(err, LD_ERR_IO, 0, "%s: %s", path, strerror(errno));
        if (ld_comm_now_s() > deadline)
            return LD_FAIL(err, LD_ERR_IO, 0, "rendezvous %s: rank 0 did not %s in time", path, what);
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
}
