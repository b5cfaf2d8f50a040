/* replay_sample.h - seeded sampling for the replay's continuation: a
 * counter-based generator keyed by (seed, position), and temperature, top-k,
 * top-p and min-p applied as SGLang's sampler does with the request's logged
 * sampling parameters.
 *
 * The generator: ld_sample_uniform(seed, pos) is a pure function (no state),
 * a uniform double in [0, 1) from a hash of the pair: the same seed and
 * position give the same number on every machine and in any order, so a
 * continuation sampled from position P is reproducible alone.
 *
 * The filters, as SGLang (srt/layers/sampler.py, the torch path
 * top_k_top_p_min_p_sampling_from_probs_torch, after SamplingParams'
 * normalisation):
 *   - temperature below LD_SAMPLE_EPS (0 included), or unknown (NAN): greedy,
 *     the argmax (lowest id among equal logits); SGLang sets top_k = 1 there;
 *   - probs = softmax(logits / temperature), sorted descending (ties: lower
 *     id first);
 *   - top_k: the first top_k of the sorted list kept (<= 0 or unset: all,
 *     SGLang's -1);
 *   - top_p: a token is dropped when the sum of the probabilities sorted
 *     before it exceeds top_p (the cumulative sum of the full softmax, not
 *     renormalised after top-k), so the first is always kept (NAN or >= 1:
 *     all);
 *   - min_p: a token is dropped when its probability is below min_p times
 *     the largest (NAN or <= 0: none);
 *   - the token: inverse CDF over the kept probabilities in sorted order,
 *     u * (their sum) with u = ld_sample_uniform(seed, pos).
 * Library code: nothing printed, no global state.
 */
#ifndef LD_REPLAY_SAMPLE_H
#define LD_REPLAY_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"
#include "parse/request/request.h"

#define LD_SAMPLE_EPS 1e-6 /* SGLang's _SAMPLING_EPS */

typedef struct ld_sample_params {
    double temperature; /* NAN: unknown (greedy) */
    int64_t top_k;      /* <= 0 or LD_UNSET_INT: all */
    double top_p;       /* NAN: 1 */
    double min_p;       /* NAN: 0 */
} ld_sample_params;

/* The logged sampling parameters of r (temperature, top_p, top_k from the
 * parsed record; min_p from the logged sampling_params or OpenAI request,
 * which needs LD_PAIR_KEEP_VALUES; absent ones as SGLang's defaults). */
ld_sample_params ld_sample_params_of(const ld_request *r);

/* 1 when p samples nothing: the argmax. */
int ld_sample_is_greedy(const ld_sample_params *p);

/* The 64-bit hash of (seed, pos) and the uniform double in [0, 1) from its
 * top 53 bits. */
uint64_t ld_sample_hash(uint64_t seed, uint64_t pos);
double ld_sample_uniform(uint64_t seed, uint64_t pos);

/* A sampler for vocabularies of up to `vocab` ids (scratch space). */
typedef struct ld_sampler ld_sampler;
ld_status ld_sampler_new(int vocab, ld_sampler **out, ld_error *err);
void ld_sampler_free(ld_sampler *s);

/* The distribution after the filters: probs[V] (the kept probabilities
 * renormalised to sum 1, 0 for the dropped; for greedy, 1 at the argmax). */
void ld_sampler_probs(ld_sampler *s, const float *logits, int V, const ld_sample_params *p, double *probs);

/* The token at output position `pos` under `seed`. */
int32_t ld_sampler_token(ld_sampler *s, const float *logits, int V, const ld_sample_params *p, uint64_t seed,
                         uint64_t pos);

#endif
