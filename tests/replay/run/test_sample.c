/* test_sample.c - seeded sampling (replay/run/replay_sample.h): the generator is
 * a pure function of (seed, position); temperature, top-k, top-p and min-p
 * give SGLang's distributions on small hand-computed examples; temperature 0
 * (or unknown) is the argmax whatever the seed; the token drawn is the
 * inverse CDF of the filtered distribution at ld_sample_uniform(seed, pos).
 *
 * The expected distributions are derived by hand in the comments from
 * SGLang's torch sampler (srt/layers/sampler.py,
 * top_k_top_p_min_p_sampling_from_probs_torch):
 *     probs = softmax(logits / T); sort descending; keep the first top_k;
 *     drop j when sum(sorted probs before j) > top_p (sums of the full
 *     softmax, not renormalised after top-k); drop p < min_p * max p;
 *     multinomial over what is left (i.e. renormalised). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "replay/run/replay_sample.h"

#define TOL 1e-9

/* logits whose softmax at T = 1 is exactly `p` (log p; the softmax of
 * log p is p / sum p = p). */
static void logits_of(const double *p, int n, float *x)
{
    for (int i = 0; i < n; i++) x[i] = (float)log(p[i]);
}

/* probs under params against want[n]; float logits carry ~1e-7 relative
 * error, so the tolerance is 1e-6. */
static int same_probs(const double *p, int n, ld_sample_params sp, const double *want)
{
    float x[8];
    double got[8];
    logits_of(p, n, x);
    ld_sampler *s = NULL;
    CHECK(ld_sampler_new(n, &s, NULL) == LD_OK);
    ld_sampler_probs(s, x, n, &sp, got);
    ld_sampler_free(s);
    for (int i = 0; i < n; i++)
        CHECK_MSG(fabs(got[i] - want[i]) < 1e-6, "id %d: got %.9f, want %.9f", i, got[i], want[i]);
    return 0;
}

static const double P4[4] = { 0.4, 0.3, 0.2, 0.1 };
#define SP(t, k, p, m) ((ld_sample_params){ (t), (k), (p), (m) })

static int test_sample_uniform_is_deterministic(void)
{
    for (uint64_t seed = 0; seed < 4; seed++)
        for (uint64_t pos = 0; pos < 1000; pos++) {
            double u = ld_sample_uniform(seed, pos);
            CHECK(u >= 0 && u < 1);
            CHECK(u == ld_sample_uniform(seed, pos));
            CHECK(ld_sample_hash(seed, pos) == ld_sample_hash(seed, pos));
        }
    /* a different seed or position gives another number */
    CHECK(ld_sample_hash(1, 5) != ld_sample_hash(2, 5));
    CHECK(ld_sample_hash(1, 5) != ld_sample_hash(1, 6));
    CHECK(ld_sample_hash(0, 1) != ld_sample_hash(1, 0));
    /* roughly uniform: mean 1/2, variance 1/12, deciles ~ 1/10 each */
    int dec[10] = { 0 };
    double sum = 0, sq = 0;
    const int N = 200000;
    for (int i = 0; i < N; i++) {
        double u = ld_sample_uniform(42, (uint64_t)i);
        sum += u;
        sq += u * u;
        dec[(int)(u * 10)]++;
    }
    double mean = sum / N, var = sq / N - mean * mean;
    CHECK_MSG(fabs(mean - 0.5) < 0.005, "mean %f", mean);
    CHECK_MSG(fabs(var - 1.0 / 12) < 0.002, "variance %f", var);
    for (int d = 0; d < 10; d++) CHECK_MSG(abs(dec[d] - N / 10) < N / 100, "decile %d: %d", d, dec[d]);
    return 0;
}

static int test_sample_token_is_deterministic(void)
{
    float x[4];
    logits_of(P4, 4, x);
    ld_sampler *a = NULL, *b = NULL;
    CHECK(ld_sampler_new(4, &a, NULL) == LD_OK);
    CHECK(ld_sampler_new(4, &b, NULL) == LD_OK);
    ld_sample_params sp = SP(0.8, 0, 0.95, NAN);
    int differ = 0;
    for (uint64_t pos = 0; pos < 500; pos++) {
        int32_t t = ld_sampler_token(a, x, 4, &sp, 7, pos);
        /* another sampler, after other draws: the same token */
        (void)ld_sampler_token(b, x, 4, &sp, 7, 499 - pos);
        CHECK(t == ld_sampler_token(b, x, 4, &sp, 7, pos));
        differ += t != ld_sampler_token(b, x, 4, &sp, 8, pos);
    }
    CHECK(differ > 100); /* another seed, another sequence */
    ld_sampler_free(a);
    ld_sampler_free(b);
    return 0;
}

/* T = 1, nothing filtered: the softmax itself. */
static int test_sample_no_filter(void)
{
    return same_probs(P4, 4, SP(1, LD_UNSET_INT, NAN, NAN), P4) ||
           same_probs(P4, 4, SP(1, -1, 1.0, 0.0), P4);
}

/* Temperature: softmax(log p / T) is p^(1/T) normalised.
 *   T = 2:   sqrt(.4, .3, .2, .1) = .632456, .547723, .447214, .316228,
 *            sum 1.943621 -> .325401, .281805, .230093, .162700
 *   T = 0.5: (.16, .09, .04, .01) / .30 -> .533333, .3, .133333, .033333 */
static int test_sample_temperature(void)
{
    const double t2[4] = { 0.3254009069, 0.2818054518, 0.2300931879, 0.1627004534 };
    const double th[4] = { 0.16 / 0.3, 0.09 / 0.3, 0.04 / 0.3, 0.01 / 0.3 };
    return same_probs(P4, 4, SP(2, 0, NAN, NAN), t2) || same_probs(P4, 4, SP(0.5, 0, NAN, NAN), th);
}

/* top_k = 2: .4 and .3 kept -> 4/7, 3/7.  top_k = 3 with ties
 * (.2, .3, .3, .2): sorted ids 1, 2, 0, 3 (equal probabilities: lower id
 * first), the first three kept -> .2/.8, .3/.8, .3/.8, 0. */
static int test_sample_top_k(void)
{
    const double want[4] = { 4.0 / 7, 3.0 / 7, 0, 0 };
    const double ties[4] = { 0.2, 0.3, 0.3, 0.2 };
    const double want_ties[4] = { 0.25, 0.375, 0.375, 0 };
    return same_probs(P4, 4, SP(1, 2, NAN, NAN), want) || same_probs(ties, 4, SP(1, 3, NAN, NAN), want_ties);
}

/* top_p: the sums before each sorted token are 0, .4, .7, .9;
 *   top_p .8: .9 > .8 drops id 3 -> .4/.9, .3/.9, .2/.9, 0
 *   top_p .6: .7 and .9 > .6 drop ids 2, 3 -> 4/7, 3/7, 0, 0
 *   top_p .3: .4 > .3 drops all but the first -> 1, 0, 0, 0
 * and the sums are of the full softmax, not renormalised after top-k:
 *   (.5, .3, .15, .05), top_k 2, top_p .6: the sum before id 1 is .5 <= .6,
 *   kept -> .5/.8, .3/.8 = .625, .375 (renormalised first it would be
 *   .625 > .6 and only id 0 would be left). */
static int test_sample_top_p(void)
{
    const double w8[4] = { 0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0 };
    const double w6[4] = { 4.0 / 7, 3.0 / 7, 0, 0 };
    const double w3[4] = { 1, 0, 0, 0 };
    const double p2[4] = { 0.5, 0.3, 0.15, 0.05 };
    const double wk[4] = { 0.625, 0.375, 0, 0 };
    return same_probs(P4, 4, SP(1, 0, 0.8, NAN), w8) || same_probs(P4, 4, SP(1, 0, 0.6, NAN), w6) ||
           same_probs(P4, 4, SP(1, 0, 0.3, NAN), w3) || same_probs(p2, 4, SP(1, 2, 0.6, NAN), wk);
}

/* min_p: dropped below min_p * .4;
 *   min_p .6: floor .24 drops .2, .1 -> 4/7, 3/7, 0, 0
 *   min_p .3: floor .12 drops .1 -> 4/9, 3/9, 2/9, 0
 * all three: top_k 3 (drops id 3), top_p .8 (drops id 3), min_p .6 (drops
 * id 2) -> 4/7, 3/7, 0, 0. */
static int test_sample_min_p(void)
{
    const double w6[4] = { 4.0 / 7, 3.0 / 7, 0, 0 };
    const double w3[4] = { 4.0 / 9, 3.0 / 9, 2.0 / 9, 0 };
    return same_probs(P4, 4, SP(1, 0, NAN, 0.6), w6) || same_probs(P4, 4, SP(1, 0, NAN, 0.3), w3) ||
           same_probs(P4, 4, SP(1, 3, 0.8, 0.6), w6);
}

/* Temperature 0 (and below SGLang's 1e-6, and unknown) is the argmax,
 * whatever the seed: (1, 3, 3, 0) gives id 1, the lower of the tied two. */
static int test_sample_temperature_zero_is_greedy(void)
{
    const float x[4] = { 1, 3, 3, 0 };
    const double ts[3] = { 0.0, 1e-7, NAN };
    ld_sampler *s = NULL;
    CHECK(ld_sampler_new(4, &s, NULL) == LD_OK);
    for (int k = 0; k < 3; k++) {
        ld_sample_params sp = SP(ts[k], 0, NAN, NAN);
        CHECK(ld_sample_is_greedy(&sp));
        for (uint64_t seed = 0; seed < 50; seed++)
            for (uint64_t pos = 0; pos < 20; pos++) CHECK_EQ_INT(ld_sampler_token(s, x, 4, &sp, seed, pos), 1);
    }
    ld_sample_params sp = SP(1.0, 0, NAN, NAN);
    CHECK(!ld_sample_is_greedy(&sp));
    ld_sampler_free(s);
    return 0;
}

/* The token is the inverse CDF at u = ld_sample_uniform(seed, pos) over the
 * kept tokens in sorted order: with top_p .8 (4/9, 3/9, 2/9) it is id 0 for
 * u < 4/9, id 1 for u < 7/9, else id 2; over 30000 positions the counts are
 * near 4/9, 3/9, 2/9. */
static int test_sample_inverse_cdf(void)
{
    float x[4];
    logits_of(P4, 4, x);
    ld_sampler *s = NULL;
    CHECK(ld_sampler_new(4, &s, NULL) == LD_OK);
    ld_sample_params sp = SP(1, 0, 0.8, NAN);
    int count[4] = { 0 };
    const int N = 30000;
    for (int i = 0; i < N; i++) {
        double u = ld_sample_uniform(3, (uint64_t)i);
        /* away from the edges, where float logits may round either way */
        int want = u < 4.0 / 9 ? 0 : u < 7.0 / 9 ? 1 : 2;
        int32_t t = ld_sampler_token(s, x, 4, &sp, 3, (uint64_t)i);
        if (fabs(u - 4.0 / 9) > 1e-6 && fabs(u - 7.0 / 9) > 1e-6) CHECK_EQ_INT(t, want);
        count[t]++;
    }
    CHECK_EQ_INT(count[3], 0);
    CHECK(fabs(count[0] / (double)N - 4.0 / 9) < 0.01);
    CHECK(fabs(count[1] / (double)N - 3.0 / 9) < 0.01);
    CHECK(fabs(count[2] / (double)N - 2.0 / 9) < 0.01);
    ld_sampler_free(s);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_sample_uniform_is_deterministic),
    LD_CASE(test_sample_token_is_deterministic),
    LD_CASE(test_sample_no_filter),
    LD_CASE(test_sample_temperature),
    LD_CASE(test_sample_top_k),
    LD_CASE(test_sample_top_p),
    LD_CASE(test_sample_min_p),
    LD_CASE(test_sample_temperature_zero_is_greedy),
    LD_CASE(test_sample_inverse_cdf),
};

LD_TEST_MAIN(cases)
