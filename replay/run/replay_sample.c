/* replay_sample.c - seeded sampling (replay_sample.h). */
#include "replay_sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parse/pylit/pylit.h"

typedef struct cand {
    double p;
    int32_t id;
} cand;

struct ld_sampler {
    int vocab;
    cand *c; /* [vocab] */
};

/* ---------------------------------------------------------- parameters */

static int num(const ld_py_value *v, double *out)
{
    if (!v) return 0;
    if (v->kind == LD_PY_FLOAT) *out = v->u.f;
    else if (v->kind == LD_PY_INT && !(v->flags & LD_PY_F_BIGINT)) *out = (double)v->u.i;
    else return 0;
    return 1;
}

static const ld_py_value *field(const ld_py_value *obj, const char *name)
{
    if (!obj) return NULL;
    if (obj->kind == LD_PY_CALL) return ld_py_call_get(obj, name);
    if (obj->kind == LD_PY_DICT) return ld_py_dict_get(obj, name);
    return NULL;
}

/* min_p: the Finish obj's sampling_params, the Receive obj's, the OpenAI
 * request's own field. */
static double logged_min_p(const ld_request *r)
{
    double d;
    const ld_py_value *objs[] = { r->finish_obj, r->receive_obj };
    for (size_t i = 0; i < 2; i++) {
        const ld_py_value *sp = field(objs[i], "sampling_params");
        if (sp && sp->kind == LD_PY_DICT && num(ld_py_dict_get(sp, "min_p"), &d)) return d;
    }
    if (num(field(r->openai_obj, "min_p"), &d)) return d;
    return NAN;
}

ld_sample_params ld_sample_params_of(const ld_request *r)
{
    ld_sample_params p = { r->temperature, r->top_k, r->top_p, logged_min_p(r) };
    return p;
}

int ld_sample_is_greedy(const ld_sample_params *p)
{
    return !(p->temperature >= LD_SAMPLE_EPS) || p->top_k == 1; /* NAN included */
}

/* ----------------------------------------------------------- generator */

/* A 64-bit finaliser: xor-shifts and odd multipliers, each step a bijection,
 * so distinct inputs stay distinct. */
static uint64_t fmix(uint64_t z)
{
    z ^= z >> 31;
    z *= 0x7fb5d329728ea185ULL;
    z ^= z >> 27;
    z *= 0x81dadef4bc2dd44dULL;
    z ^= z >> 33;
    return z;
}

uint64_t ld_sample_hash(uint64_t seed, uint64_t pos)
{
    /* the seed keys a stream; the position (spread by an odd constant) is
     * the counter within it; two rounds so neighbouring pairs decorrelate */
    uint64_t k = fmix(seed ^ 0x6a09e667f3bcc909ULL);
    return fmix(k + fmix(pos * 0x9e3779b97f4a7c15ULL + 0xbb67ae8584caa73bULL));
}

double ld_sample_uniform(uint64_t seed, uint64_t pos)
{
    return (double)(ld_sample_hash(seed, pos) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------- sampler */

ld_status ld_sampler_new(int vocab, ld_sampler **out, ld_error *err)
{
    *out = NULL;
    if (vocab < 1) return LD_FAIL(err, LD_ERR_USAGE, 0, "a vocabulary of %d ids", vocab);
    ld_sampler *s = calloc(1, sizeof *s);
    if (s) s->c = malloc((size_t)vocab * sizeof *s->c);
    if (!s || !s->c) {
        ld_sampler_free(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    s->vocab = vocab;
    *out = s;
    return LD_OK;
}

void ld_sampler_free(ld_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s);
}

static int argmax(const float *x, int V)
{
    int best = 0;
    for (int j = 1; j < V; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

static int by_prob(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The sorted candidates with the dropped ones set to 0; returns how many
 * are left at the front (every kept one is before every dropped one). */
static int filter(ld_sampler *s, const float *x, int V, const ld_sample_params *p)
{
    if (V > s->vocab) V = s->vocab;
    double t = p->temperature, m = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++)
        if (x[j] / t > m) m = x[j] / t;
    for (int j = 0; j < V; j++) {
        s->c[j].id = j;
        s->c[j].p = exp((double)x[j] / t - m);
        sum += s->c[j].p;
    }
    for (int j = 0; j < V; j++) s->c[j].p /= sum;
    qsort(s->c, (size_t)V, sizeof *s->c, by_prob);
    int keep = p->top_k > 0 && p->top_k < V ? (int)p->top_k : V;
    if (!isnan(p->top_p) && p->top_p < 1) {
        double before = 0; /* sum of the (unfiltered) probabilities sorted before j */
        for (int j = 0; j < keep; j++) {
            if (before > p->top_p) {
                keep = j;
                break;
            }
            before += s->c[j].p;
        }
    }
    if (!isnan(p->min_p) && p->min_p > 0) {
        double floor = s->c[0].p * p->min_p;
        for (int j = 1; j < keep; j++)
            if (s->c[j].p < floor) {
                keep = j;
                break;
            }
    }
    for (int j = keep; j < V; j++) s->c[j].p = 0;
    return keep;
}

void ld_sampler_probs(ld_sampler *s, const float *logits, int V, const ld_sample_params *p, double *probs)
{
    memset(probs, 0, (size_t)V * sizeof *probs);
    if (ld_sample_is_greedy(p)) {
        probs[argmax(logits, V)] = 1;
        return;
    }
    int keep = filter(s, logits, V, p);
    double sum = 0;
    for (int j = 0; j < keep; j++) sum += s->c[j].p;
    for (int j = 0; j < keep; j++) probs[s->c[j].id] = s->c[j].p / sum;
}

int32_t ld_sampler_token(ld_sampler *s, const float *logits, int V, const ld_sample_params *p, uint64_t seed,
                         uint64_t pos)
{
    if (ld_sample_is_greedy(p)) return argmax(logits, V);
    int keep = filter(s, logits, V, p);
    double sum = 0;
    for (int j = 0; j < keep; j++) sum += s->c[j].p;
    double u = ld_sample_uniform(seed, pos) * sum, acc = 0;
    for (int j = 0; j < keep; j++) {
        acc += s->c[j].p;
        if (u < acc) return s->c[j].id;
    }
    return s->c[keep - 1].id; /* u * sum rounded up to the last */
}
