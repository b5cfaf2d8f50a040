/* comm.c - what every communicator of comm.h shares: the ordered sum that
 * makes an all-reduce the same bits on every rank and every run, and the
 * destroy that dispatches to the transport.  A leaf: the transports call it. */
#include "comm.h"

void ld_comm_ordered_sum_strided(const float *parts, size_t stride, int n_parts, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        float acc = parts[i];
        for (int p = 1; p < n_parts; p++) acc += parts[(size_t)p * stride + i];
        out[i] = acc;
    }
}

void ld_comm_ordered_sum(const float *parts, int n_parts, size_t n, float *out)
{
    ld_comm_ordered_sum_strided(parts, n, n_parts, n, out);
}

void ld_comm_destroy(ld_comm *c)
{
    if (c) c->ops->destroy(c);
}

int ld_comm_size(const ld_comm *c)
{
    return c->size;
}

int ld_comm_rank(const ld_comm *c)
{
    return c->rank;
}

const char *ld_comm_transport(const ld_comm *c)
{
    return c->ops->name;
}
