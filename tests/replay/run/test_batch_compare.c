/* test_batch_compare.c - what `logdiff replay --batch-with` reports from
 * two runs' outputs (replay_batch.c's ld_replay_batch_compare): the first
 * position whose logits or hidden planes differ, the first plane that
 * differs there (the layer a fault starts in), the counts and the largest
 * differences.  The runs are made up here, each difference placed by hand,
 * so the expected report is known without logdiff's engine. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "replay/run/replay_batch.h"

#define LAYERS 3
#define PLANES (LAYERS + 2)
#define K 4 /* positions in a step */
#define V 5 /* vocabulary */
#define W 6 /* hidden width */

/* one step of both runs, alone (a, ah) and batched (c, ch), equal until a
 * test changes one value */
typedef struct runs {
    float a[K * V], c[K * V];
    float ah[PLANES * K * W], ch[PLANES * K * W];
} runs;

static runs *runs_equal(void)
{
    runs *r = malloc(sizeof *r);
    if (!r) return NULL;
    for (int i = 0; i < K * V; i++) r->a[i] = r->c[i] = 0.25f * (float)i - 1.0f;
    for (int i = 0; i < PLANES * K * W; i++) r->ah[i] = r->ch[i] = 0.5f * (float)(i % 7) - 0.75f;
    return r;
}

/* value d of plane q at position t of the batched run's hidden planes */
static float *batched_h(runs *r, int q, int t, int d)
{
    return &r->ch[((size_t)q * K + (size_t)t) * W + (size_t)d];
}

static ld_replay_batch_report fresh(void)
{
    return (ld_replay_batch_report){.first_diff = -1, .first_plane = LD_REPLAY_BATCH_HEAD, .n_layers = LAYERS};
}

static void compare(const runs *r, size_t p, ld_replay_batch_report *out)
{
    ld_replay_batch_compare(r->a, r->c, r->ah, r->ch, p, K, V, W, out);
}

static int test_batch_compare_identical(void)
{
    runs *r = runs_equal();
    CHECK(r);
    ld_replay_batch_report rep = fresh();
    compare(r, 0, &rep);
    compare(r, K, &rep);
    CHECK(rep.first_diff == -1 && rep.first_plane == LD_REPLAY_BATCH_HEAD);
    CHECK(rep.n_diff == 0 && rep.n_diff_logits == 0 && rep.max_abs == 0 && rep.max_abs_hidden == 0);
    free(r);
    return 0;
}

/* layer 1 (plane 2) and the final norm (plane 4) differ at position 2,
 * and so do its logits and those of position 3: the report names layer 1 */
static int test_batch_compare_names_the_first_layer(void)
{
    runs *r = runs_equal();
    CHECK(r);
    *batched_h(r, 4, 2, 0) += 3.0f;
    *batched_h(r, 2, 2, 5) += 0.5f;
    r->c[2 * V + 1] += 0.125f;
    r->c[3 * V + 4] -= 2.0f;
    ld_replay_batch_report rep = fresh();
    compare(r, 8, &rep);
    CHECK_EQ_INT((int)rep.first_diff, 10);
    CHECK_EQ_INT(rep.first_plane, 2);
    CHECK(rep.n_diff == 2 && rep.n_diff_logits == 2);
    CHECK(rep.max_abs == 2.0 && rep.max_abs_hidden == 3.0);
    free(r);
    return 0;
}

/* the first position wins over a lower plane at a later one; a later
 * step leaves the first difference as it was */
static int test_batch_compare_first_position_first(void)
{
    runs *r = runs_equal();
    CHECK(r);
    *batched_h(r, 3, 1, 2) = NAN;
    *batched_h(r, 0, 3, 2) += 1.0f;
    ld_replay_batch_report rep = fresh();
    compare(r, 0, &rep);
    CHECK_EQ_INT((int)rep.first_diff, 1);
    CHECK_EQ_INT(rep.first_plane, 3);
    CHECK(rep.n_diff == 2 && rep.n_diff_logits == 0 && rep.max_abs == 0);
    CHECK_MSG(isnan(rep.max_abs_hidden), "a NaN shows as NaN, not as 0: %g", rep.max_abs_hidden);
    compare(r, K, &rep);
    CHECK(rep.first_diff == 1 && rep.first_plane == 3 && rep.n_diff == 4);
    free(r);
    return 0;
}

/* every plane the same, the logits not: the head */
static int test_batch_compare_logits_alone(void)
{
    runs *r = runs_equal();
    CHECK(r);
    r->c[0] = -r->c[0];
    ld_replay_batch_report rep = fresh();
    compare(r, 4, &rep);
    CHECK_EQ_INT((int)rep.first_diff, 4);
    CHECK_EQ_INT(rep.first_plane, LD_REPLAY_BATCH_HEAD);
    CHECK(rep.n_diff == 1 && rep.n_diff_logits == 1 && rep.max_abs == 2.0 && rep.max_abs_hidden == 0);
    free(r);
    return 0;
}

/* a +0 / -0 swap differs in bits, as the check's contract says */
static int test_batch_compare_bits_not_values(void)
{
    runs *r = runs_equal();
    CHECK(r);
    *batched_h(r, 0, 0, 0) = 0.0f;
    r->ah[0] = -0.0f;
    ld_replay_batch_report rep = fresh();
    compare(r, 0, &rep);
    CHECK(rep.first_diff == 0 && rep.first_plane == 0 && rep.max_abs_hidden == 0);
    free(r);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_batch_compare_identical),
    LD_CASE(test_batch_compare_names_the_first_layer),
    LD_CASE(test_batch_compare_first_position_first),
    LD_CASE(test_batch_compare_logits_alone),
    LD_CASE(test_batch_compare_bits_not_values),
};

LD_TEST_MAIN(cases)
