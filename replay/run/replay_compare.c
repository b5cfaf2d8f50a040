/* replay_compare.c - see replay_compare.h. */
#include "replay_compare.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "replay_internal.h"

void ld_kernel_cmp_report_free(ld_kernel_cmp_report *rep)
{
    ld_replay_result_free(&rep->base);
    free(rep->v);
    memset(rep, 0, sizeof *rep);
}

/* ||a - b|| / ||b|| over n floats (0 when both are 0) */
static double row_nerr(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double x = (double)a[i] - b[i];
        d += x * x;
        m += (double)b[i] * b[i];
    }
    return m > 0 ? sqrt(d / m) : sqrt(d);
}

/* The variant's rows and logged-token numbers against the reference's. */
static void compare(const ld_replay_dump *ref, const ld_replay_result *rres, const ld_replay_dump *var,
                    const ld_replay_result *vres, ld_kernel_cmp *c)
{
    size_t D = (size_t)ref->hidden, P = (size_t)ref->n_layers + 2, N = ref->n_pos;
    c->first_plane = -1;
    c->first_pos = -1;
    for (size_t p = 0; p < P; p++)
        for (size_t i = 0; i < N; i++) {
            const float *a = var->rows + (p * N + i) * D, *b = ref->rows + (p * N + i) * D;
            double e = row_nerr(a, b, D);
            if (p + 1 == P && e > c->max_nerr) c->max_nerr = e;
            if (c->first_plane < 0 && e > LD_KCMP_TOL) {
                c->first_plane = (int)p;
                c->first_pos = ref->pos[i];
                c->first_nerr = e;
            }
        }
    for (size_t i = 0; i < rres->n_output && i < vres->n_output; i++) {
        double d = fabs(vres->pos[i].logprob - rres->pos[i].logprob);
        if (d > c->max_dlogprob) c->max_dlogprob = d;
        if (vres->pos[i].rank != rres->pos[i].rank) c->rank_changes++;
    }
    c->verdict = vres->verdict;
    c->divergence = vres->divergence;
}

/* one replay of r on `backend` with `kernels` (NULL: its own) with every row */
static ld_status replay_all(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts, int n_threads,
                            const char *backend, const char *kernels, ld_replay_dump *dump, ld_replay_result *res,
                            ld_error *err)
{
    if (e->tp) /* split: the ranks run backend with kernels (and the engine's own backend is named so) */
        LD_TRY(ld_replay_engine_set_tp(e, e->tp, e->tpo.n_nodes, backend, kernels, n_threads, err));
    else
        LD_TRY(ld_replay_engine_set_backend(e, backend, kernels, n_threads, err));
    dump->want = NULL; /* every position; the planes and state as the caller asks */
    ld_replay_dump_reset(dump);
    return ld_replay_request_dump(e, r, opts, NULL, dump, res, err);
}

static size_t add_run(ld_kernel_run *runs, size_t n, size_t cap, const char *backend, const char *spec,
                      const char *label)
{
    if (n >= cap) return n;
    runs[n].backend = backend;
    snprintf(runs[n].spec, sizeof runs[n].spec, "%s", spec);
    snprintf(runs[n].label, sizeof runs[n].label, "%s", label);
    return n + 1;
}

size_t ld_replay_kernel_plan(const char *backend, unsigned features, ld_kernel_run *runs, size_t cap)
{
    size_t n = 0;
    if (backend && !strcmp(backend, "cuda")) {
        n = add_run(runs, n, cap, "cuda", "all=ref", "all=ref");
        for (int op = 0; op < LD_CUDA_N_OPS; op++) {
            char spec[96], label[48];
            snprintf(spec, sizeof spec, "all=ref,%s=custom", ld_cuda_op_name(op));
            snprintf(label, sizeof label, "%s=custom", ld_cuda_op_name(op));
            n = add_run(runs, n, cap, "cuda", spec, label);
        }
        return add_run(runs, n, cap, "cuda", "all=custom", "all=custom");
    }
    n = add_run(runs, n, cap, "ref", "", "ref");
    for (size_t i = 0; ld_cpu_kernel_variants[i]; i++)
        if (ld_cpu_kernel_variant_applies(ld_cpu_kernel_variants[i], features))
            n = add_run(runs, n, cap, "ref", ld_cpu_kernel_variants[i], ld_cpu_kernel_variants[i]);
    return n;
}

ld_status ld_replay_compare_kernels(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                    const char *backend, int n_threads, ld_kernel_cmp_report *out, ld_error *err)
{
    memset(out, 0, sizeof *out);
    const ld_lm_info *info = ld_lm_info_of(e->lm);
    ld_kernel_run runs[64];
    size_t nr = ld_replay_kernel_plan(backend, info->kernel_features, runs, sizeof runs / sizeof runs[0]);
    out->cuda = backend && !strcmp(backend, "cuda");
    out->tp = e->tp;
    out->v = calloc(nr, sizeof *out->v);
    if (!out->v) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_replay_dump ref = {0}; /* freed whether or not the replay got to fill it */
    ld_status st = replay_all(e, r, opts, n_threads, runs[0].backend, runs[0].spec[0] ? runs[0].spec : NULL, &ref,
                              &out->base, err);
    out->n_layers = ref.n_layers;
    for (size_t i = 1; st == LD_OK && i < nr; i++) {
        ld_replay_dump var = {0};
        ld_replay_result vres = {0};
        ld_error verr = {0};
        st = replay_all(e, r, opts, n_threads, runs[i].backend, runs[i].spec, &var, &vres, &verr);
        ld_kernel_cmp *c = &out->v[out->n];
        snprintf(c->variant, sizeof c->variant, "%s", runs[i].label);
        if (st == LD_OK) compare(&ref, &out->base, &var, &vres, c);
        if (st == LD_ERR_UNSUPPORTED) { /* reported, the others still run */
            snprintf(c->refused, sizeof c->refused, "%s", verr.msg[0] ? verr.msg : "unsupported");
            st = LD_OK;
        }
        if (st == LD_OK) out->n++;
        else if (err) *err = verr;
        ld_replay_dump_free(&var);
        ld_replay_result_free(&vres);
    }
    ld_replay_dump_free(&ref);
    ld_error serr;
    ld_status rst = out->tp ? ld_replay_engine_set_tp(e, out->tp, e->tpo.n_nodes, backend, NULL, n_threads, &serr)
                            : ld_replay_engine_set_backend(e, backend, NULL, n_threads, &serr);
    if (rst != LD_OK && st == LD_OK) {
        if (err) *err = serr;
        st = serr.code;
    }
    if (st != LD_OK) ld_kernel_cmp_report_free(out);
    return st;
}

void ld_backend_cmp_free(ld_backend_cmp *c)
{
    ld_replay_result_free(&c->a);
    ld_replay_result_free(&c->b);
    free(c->plane);
    memset(c, 0, sizeof *c);
}

/* per plane p in [out->plane_lo, out->plane_hi]: the largest row error
 * (and the position of its row) and element difference of b's rows (those planes only:
 * [plane][position][hidden]) against a's (which keeps planes
 * a->plane_lo .. a->plane_hi, those among them) */
static void compare_planes(const ld_replay_dump *a, const float *b, ld_backend_cmp *out)
{
    size_t D = (size_t)a->hidden, N = a->n_pos, lo = (size_t)out->plane_lo;
    ld_backend_cmp_plane *plane = out->plane;
    for (size_t p = lo; p <= (size_t)out->plane_hi; p++) {
        plane[p].worst_pos = -1;
        for (size_t i = 0; i < N; i++) {
            const float *x = b + ((p - lo) * N + i) * D, *y = a->rows + ((p - (size_t)a->plane_lo) * N + i) * D;
            double e = row_nerr(x, y, D);
            if (e > plane[p].max_nerr) {
                plane[p].max_nerr = e;
                plane[p].worst_pos = a->pos[i];
            }
            for (size_t j = 0; j < D; j++) {
                double d = fabs((double)x[j] - y[j]);
                if (d > plane[p].max_abs) plane[p].max_abs = d;
            }
        }
    }
}

/* rows a slice's session runs at once: its scratch is this many rows, not
 * the request's (the rows do not depend on the chunks: test_slice.c) */
#define SLICE_CHUNK 256

/* planes first + 1 .. last of a slice on the engine's backend, fed da's
 * state entering layer `first` at every position (and its tokens):
 * *out [last - first][n_pos][hidden] */
static ld_status run_slice(ld_replay_engine *e, const ld_replay_dump *da, int first, int last, float **out,
                           ld_error *err)
{
    size_t N = da->n_pos, D = (size_t)da->hidden;
    *out = NULL;
    for (size_t i = 0; i < N; i++)
        if (da->pos[i] != (int64_t)i)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "a layer slice needs every position's rows (not --positions)");
    if (N > INT32_MAX) return LD_FAIL(err, LD_ERR_LIMIT, 0, "%zu positions: too many for a session", N);
    int n = (int)N;
    *out = malloc((size_t)(last - first) * N * D * sizeof **out);
    int32_t *ids = malloc((N ? N : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < N; i++) ids[i] = (int32_t)da->tokens[i];
    ld_lm_session *s = NULL;
    ld_status st = *out && ids ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK)
        st = ld_lm_session_create_slice(e->lm, e->be, &e->k, first, last, n, n < SLICE_CHUNK ? n : SLICE_CHUNK, &s,
                                        err);
    if (st == LD_OK) st = ld_lm_eval_slice(s, ids, da->state, n, *out, err);
    ld_lm_session_destroy(s);
    free(ids);
    return st;
}

/* r replayed whole on `backend` with `kernels`, split over tp ranks when
 * tp > 0, into *d (its planes and state as *d asks) and out->a */
static ld_status replay_primary(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts, int n_threads,
                                const char *backend, const char *kernels, int tp, ld_replay_dump *d,
                                ld_backend_cmp *out, ld_error *err)
{
    e->tp = tp;
    LD_TRY(replay_all(e, r, opts, n_threads, backend, kernels, d, &out->a, err));
    snprintf(out->name_a, sizeof out->name_a, "%s", ld_replay_engine_backend(e));
    out->tp_a = tp;
    return LD_OK;
}

/* the check side: `other` alone (no split), its defaults */
static ld_status to_other(ld_replay_engine *e, const char *other, int n_threads, ld_backend_cmp *out, ld_error *err)
{
    e->tp = 0;
    LD_TRY(ld_replay_engine_set_backend(e, other, NULL, n_threads, err));
    snprintf(out->name_b, sizeof out->name_b, "%s", ld_replay_engine_backend(e));
    return LD_OK;
}

/* out's planes [lo, hi] of the n_layers + 2 */
static ld_status planes_alloc(ld_backend_cmp *out, const ld_replay_dump *d, int lo, int hi, ld_error *err)
{
    out->n_layers = d->n_layers;
    out->n_pos = d->n_pos;
    out->plane = calloc((size_t)d->n_layers + 2, sizeof *out->plane);
    if (!out->plane) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    out->plane_lo = lo;
    out->plane_hi = hi;
    return LD_OK;
}

/* Whether this process runs the check side.  A rank of a group of
 * processes other than 0 runs only the split replay, whose collectives the
 * group needs; rank 0 alone runs `other` and reports (the others' reports
 * go nowhere): eight processes of a node would otherwise each load the
 * check's layers on the CPU. */
static int runs_check_side(const ld_replay_engine *e)
{
    return ld_replay_engine_tp_rank(e) <= 0;
}

/* the check of layers [first, last) alone on `other` against the whole
 * replay on `backend` */
static ld_status check_slice(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                             const char *backend, const char *kernels, int tp, const char *other, int first, int last,
                             int n_threads, ld_backend_cmp *out, ld_error *err)
{
    /* the whole replay keeps what the slice compares and is fed: planes
       first + 1 .. last, and the state entering `first` */
    ld_replay_dump da = {.some_planes = 1, .plane_lo = first + 1, .plane_hi = last, .want_state = 1,
                         .state_layer = first};
    float *rows = NULL; /* the slice's planes */
    int L = ld_lm_info_of(e->lm)->n_layers;
    if (last > L)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "--check-layers %d-%d: the model has %d layers (0-%d)", first, last - 1,
                       L, L - 1);
    ld_status st = replay_primary(e, r, opts, n_threads, backend, kernels, tp, &da, out, err);
    int side = runs_check_side(e);
    if (st == LD_OK && side) st = to_other(e, other, n_threads, out, err);
    if (st == LD_OK && side) st = run_slice(e, &da, first, last, &rows, err);
    if (st == LD_OK) st = planes_alloc(out, &da, first + 1, last, err);
    if (st == LD_OK && side) compare_planes(&da, rows, out);
    ld_replay_dump_free(&da);
    free(rows);
    return st;
}

/* the check side of check_whole: r replayed on `other` alone (its
 * defaults) and compared with the split replay's planes da and results */
static ld_status whole_on_other(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                const char *other, int n_threads, const ld_replay_dump *da, ld_backend_cmp *out,
                                ld_error *err)
{
    ld_replay_dump db = {0};
    e->tp = 0;
    ld_status st = replay_all(e, r, opts, n_threads, other, NULL, &db, &out->b, err);
    if (st == LD_OK) {
        snprintf(out->name_b, sizeof out->name_b, "%s", ld_replay_engine_backend(e));
        compare_planes(da, db.rows, out);
        for (size_t i = 0; i < out->a.n_output && i < out->b.n_output; i++) {
            double d = fabs(out->b.pos[i].logprob - out->a.pos[i].logprob);
            if (d > out->max_dlogprob) out->max_dlogprob = d;
            if (out->b.pos[i].rank != out->a.pos[i].rank) out->rank_changes++;
        }
    }
    ld_replay_dump_free(&db);
    return st;
}

/* the check of the whole model on `other` against `backend`: the split
 * replay first, so that a group of processes has done its collectives
 * before rank 0 alone runs the check side (the others would otherwise wait
 * at their first collective while it does, against the group's timeout,
 * and a check side that fails would end them before their replay) */
static ld_status check_whole(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                             const char *backend, const char *kernels, int tp, const char *other, int n_threads,
                             ld_backend_cmp *out, ld_error *err)
{
    ld_replay_dump da = {0};
    ld_status st = replay_primary(e, r, opts, n_threads, backend, kernels, tp, &da, out, err);
    if (st == LD_OK) st = planes_alloc(out, &da, 0, da.n_layers + 1, err);
    if (st == LD_OK && runs_check_side(e)) st = whole_on_other(e, r, opts, other, n_threads, &da, out, err);
    ld_replay_dump_free(&da);
    return st;
}

ld_status ld_replay_check_backends(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                   const char *backend, const char *kernels, const char *other, int first, int last,
                                   int n_threads, ld_backend_cmp *out, ld_error *err)
{
    memset(out, 0, sizeof *out);
    out->first = first;
    out->last = last;
    snprintf(out->kernels_a, sizeof out->kernels_a, "%s", kernels ? kernels : "");
    int tp = e->tp; /* the replay's split; the check side runs unsplit */
    ld_status st = last > 0 ? check_slice(e, r, opts, backend, kernels, tp, other, first, last, n_threads, out, err)
                            : check_whole(e, r, opts, backend, kernels, tp, other, n_threads, out, err);
    /* e left as it came: on backend with kernels, split over tp ranks */
    e->tp = tp;
    ld_error serr;
    if (ld_replay_engine_set_backend(e, backend, kernels, n_threads, &serr) != LD_OK && st == LD_OK) {
        if (err) *err = serr;
        st = serr.code;
    }
    if (st != LD_OK) ld_backend_cmp_free(out);
    return st;
}
