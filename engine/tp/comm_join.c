/* comm_join.c - one process joining a group of processes (comm.h's
 * ld_comm_join): the rendezvous by file for the shared-memory transport
 * (comm_shm.c does it) and for NCCL's bootstrap (here: the unique id
 * passed through a file, then ncclCommInitRank).
 *
 * Both publish their file as comm_file.h says (comm_file.c): written under
 * a temporary name, then link(2)ed to the name the ranks know, which fails
 * when the name exists, so a run that did not finish cannot hand a stale id
 * to the next (the others would wait on a group nobody makes). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "comm_file.h"

static ld_status write_id(const char *path, const unsigned char *id, ld_error *err)
{
    char tmp[4200];
    ld_comm_tmp_name(tmp, sizeof tmp, path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return LD_FAIL(err, LD_ERR_IO, 0, "%s: %s", tmp, strerror(errno));
    ssize_t w = write(fd, id, LD_COMM_NCCL_ID_BYTES);
    int ok = w == LD_COMM_NCCL_ID_BYTES && fsync(fd) == 0;
    close(fd);
    if (ok) return ld_comm_publish(tmp, path, err);
    ld_status st = LD_FAIL(err, LD_ERR_IO, 0, "%s: %s", tmp, strerror(errno));
    unlink(tmp);
    return st;
}

/* the id, once published (whole: link(2) publishes what was written) */
static ld_status read_id(const char *path, double deadline, unsigned char *id, ld_error *err)
{
    int fd;
    LD_TRY(ld_comm_open_published(path, O_RDONLY, deadline, "write the id", &fd, err));
    ssize_t r = read(fd, id, LD_COMM_NCCL_ID_BYTES);
    close(fd);
    if (r == LD_COMM_NCCL_ID_BYTES) return LD_OK;
    return LD_FAIL(err, LD_ERR_IO, 0, "rendezvous %s: %zd bytes, not an NCCL id of %d", path, r, LD_COMM_NCCL_ID_BYTES);
}

static ld_status join_nccl(const ld_comm_join_opts *o, ld_comm **out, ld_error *err)
{
    if (o->size < 1 || o->rank < 0 || o->rank >= o->size)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rank %d of %d: give a rank below the group's size", o->rank, o->size);
    if (!ld_comm_nccl_available())
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "this build has no NCCL (configure with CUDA and NCCL found)");
    unsigned char id[LD_COMM_NCCL_ID_BYTES];
    double deadline = ld_comm_deadline_s(o->timeout_s);
    if (o->rank == 0) {
        LD_TRY(ld_comm_nccl_unique_id(id, err));
        LD_TRY(write_id(o->path, id, err));
    } else {
        LD_TRY(read_id(o->path, deadline, id, err));
    }
    ld_status st = ld_comm_nccl_create_rank(id, o->size, o->rank, o->device, o->timeout_s, out, err);
    if (o->rank == 0) unlink(o->path); /* the group is made (or failed): every rank has read it */
    return st;
}

ld_status ld_comm_join(const ld_comm_join_opts *o, ld_comm **out, ld_error *err)
{
    *out = NULL;
    if (!o->path || !*o->path || strlen(o->path) > 4096)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a rendezvous path, please");
    const char *t = o->transport ? o->transport : "shm";
    if (strcmp(t, "shm") == 0)
        return ld_comm_shm_join(o->path, o->size, o->rank, o->timeout_s, o->timeout_s, out, err);
    if (strcmp(t, "nccl") == 0) return join_nccl(o, out, err);
    return LD_FAIL(err, LD_ERR_USAGE, 0, "unknown transport '%.40s' (shm, nccl)", t);
}
