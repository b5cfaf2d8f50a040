/* moe_args.h - the argument checks of backend.h's moe entry, the same for
 * every backend (as ds_op_args.h for the other DeepSeek entries), so that
 * a bad call is refused with the same LD_ERR_USAGE and message whichever
 * backend it reaches.  The weights' shapes are read by each backend from
 * its own ld_weight and checked here; buffer sizes are each backend's
 * range(). */
#ifndef LD_MOE_ARGS_H
#define LD_MOE_ARGS_H

#include <stdint.h>

#include "backend.h"

/* the scalars of a moe call */
static inline ld_status ld_moe_args(int T, int K, int E, int act, int combine, ld_error *err)
{
    if (T < 0 || K < 1 || E < 1)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "moe of %d tokens, top %d of %d experts", T, K, E);
    if (act != LD_MOE_ACT_SILU && act != LD_MOE_ACT_CLAMPED)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: activation %d", act);
    if (combine != LD_MOE_COMBINE_REF && combine != LD_MOE_COMBINE_FUSED && combine != LD_MOE_COMBINE_BF16)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: combine %d", combine);
    return LD_OK;
}

/* idx [T][K]: rows strictly ascending (a token's rows gathered at most
 * once per expert), ids naming experts that are there */
static inline ld_status ld_moe_args_route(const int32_t *idx, int T, int K, const ld_moe_expert *experts, int E,
                                          ld_error *err)
{
    for (size_t t = 0; t < (size_t)T; t++)
        for (size_t k = 0; k < (size_t)K; k++) {
            int32_t e = idx[t * (size_t)K + k];
            if (e < 0 || e >= E || !experts[e].gate || !experts[e].up || !experts[e].down)
                return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: token %zu chose expert %d, not one of the %d there", t,
                               (int)e, E);
            if (k && e <= idx[t * (size_t)K + k - 1])
                return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: token %zu's experts are not in ascending order", t);
        }
    return LD_OK;
}

/* an expert's gate [I][D], up [I][D] and down [D][I] (rows, cols each) fit
 * D; its width into *I */
static inline ld_status ld_moe_args_expert(const int64_t gate[2], const int64_t up[2], const int64_t down[2],
                                           int64_t D, int64_t *I, ld_error *err)
{
    if (gate[1] != D || up[1] != D || down[0] != D || up[0] != gate[0] || down[1] != gate[0] || gate[0] < 1)
        return LD_FAIL(err, LD_ERR_USAGE, 0,
                       "moe: an expert of gate %lldx%lld, up %lldx%lld, down %lldx%lld for a hidden size of %lld",
                       (long long)gate[0], (long long)gate[1], (long long)up[0], (long long)up[1],
                       (long long)down[0], (long long)down[1], (long long)D);
    *I = gate[0];
    return LD_OK;
}

/* a backend's weight shape: rows, cols */
typedef void (*ld_moe_dims_fn)(const ld_weight *w, int64_t dims[2]);

/* expert x's shapes; *D from it when still < 0 */
static inline ld_status ld_moe_args_one(const ld_moe_expert *x, ld_moe_dims_fn dims, int64_t *D, int64_t *I,
                                        ld_error *err)
{
    int64_t g[2], u[2], d[2];
    dims(x->gate, g);
    dims(x->up, u);
    dims(x->down, d);
    if (*D < 0) *D = g[1];
    return ld_moe_args_expert(g, u, d, *D, I, err);
}

/* the shared expert (NULL: none): its three weights, its width into *Is */
static inline ld_status ld_moe_args_shared(const ld_moe_expert *shared, ld_moe_dims_fn dims, int64_t *D, int64_t *Is,
                                           ld_error *err)
{
    if (shared && (!shared->gate || !shared->up || !shared->down))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: a shared expert without its three weights");
    return shared ? ld_moe_args_one(shared, dims, D, Is, err) : LD_OK;
}

/* a routed expert's shapes, its width equal to *I's when that is set */
static inline ld_status ld_moe_args_width(const ld_moe_expert *x, ld_moe_dims_fn dims, int64_t *D, int64_t *I,
                                          ld_error *err)
{
    int64_t w = 0;
    LD_TRY(ld_moe_args_one(x, dims, D, &w, err));
    if (*I && w != *I)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: routed experts of widths %lld and %lld", (long long)*I,
                       (long long)w);
    *I = w;
    return LD_OK;
}

/* A whole moe call: the scalars, the route, the chosen experts' and the
 * shared expert's shapes.  Out: D (the hidden size; -1 when nothing is
 * computed: T = 0 without a shared expert), I the routed experts' width
 * (all chosen ones alike; 0 if none), Is the shared one's (0 if none). */
static inline ld_status ld_moe_args_check(const int32_t *idx, int T, int K, const ld_moe_expert *experts, int E,
                                          const ld_moe_expert *shared, int act, int combine, ld_moe_dims_fn dims,
                                          int64_t *D, int64_t *I, int64_t *Is, ld_error *err)
{
    *D = -1;
    *I = 0;
    *Is = 0;
    LD_TRY(ld_moe_args(T, K, E, act, combine, err));
    LD_TRY(ld_moe_args_route(idx, T, K, experts, E, err));
    LD_TRY(ld_moe_args_shared(shared, dims, D, Is, err));
    for (size_t i = 0; i < (size_t)T * (size_t)K; i++) LD_TRY(ld_moe_args_width(&experts[idx[i]], dims, D, I, err));
    return LD_OK;
}

/* The same for a route the caller never sees (backend.h's ds4_route_moe
 * keeping it on the device): any expert may be chosen, so every one must
 * be there, all of one width. */
static inline ld_status ld_moe_args_all(int T, int K, const ld_moe_expert *experts, int E,
                                        const ld_moe_expert *shared, int act, int combine, ld_moe_dims_fn dims,
                                        int64_t *D, int64_t *I, int64_t *Is, ld_error *err)
{
    *D = -1;
    *I = 0;
    *Is = 0;
    LD_TRY(ld_moe_args(T, K, E, act, combine, err));
    LD_TRY(ld_moe_args_shared(shared, dims, D, Is, err));
    for (int e = 0; e < E; e++) {
        if (!experts[e].gate || !experts[e].up || !experts[e].down)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: expert %d of %d is not there, and the route is not seen", e, E);
        LD_TRY(ld_moe_args_width(&experts[e], dims, D, I, err));
    }
    return LD_OK;
}

#endif /* LD_MOE_ARGS_H */
