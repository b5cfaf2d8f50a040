/* test_pair_pd.c - one request, two servers (parse/pair/pair_pd.c): records
 * of SGLang's PD router joined by bootstrap room, told apart by how the
 * prefill server ends, compared by digest; and the digests themselves
 * (parse/request/request_digest.c).  The whole path over logs written from
 * SGLang's own request model is tests/cli/pd.sh; these are the corners. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "parse/pair/pair.h"

#define MAX_RECS 16

typedef struct run {
    ld_request *recs[MAX_RECS];
    int n;
} run;

static int take(void *ctx, ld_request *r)
{
    run *rn = ctx;
    if (rn->n >= MAX_RECS) return 0;
    rn->recs[rn->n++] = r;
    return LD_PAIR_TAKE;
}

static void run_clear(run *rn)
{
    for (int i = 0; i < rn->n; i++) ld_request_free(rn->recs[i]);
    rn->n = 0;
}

static void feed(ld_pairer *p, const char *member, const char *line)
{
    ld_line l = {line, strlen(line), 1, 0, 0, 0, 0, NULL, 0};
    ld_line_result res;
    ld_error e;
    ld_pairer_feed_line(p, member, &l, &res, &e);
}

/* One server's Receive and Finish of a routed request: `out_ids` output ids,
 * finish `length` 0 when prefill_end (the prefill server's), else `stop`. */
static void serve(ld_pairer *p, const char *member, const char *rid, const char *host, long room,
                  const char *prompt, const char *ids, int out_ids, int prefill_end)
{
    char obj[2048], line[4096], outs[256] = "";
    snprintf(obj, sizeof obj, "G(rid='%s', text='%s', input_ids=%s, bootstrap_host='%s', bootstrap_port=8998, bootstrap_room=%ld)",
             rid, prompt, ids, host, room);
    for (int i = 0, o = 0; i < out_ids; i++) o += snprintf(outs + o, sizeof outs - (size_t)o, "%s%d", i ? ", " : "", 100 + i);
    snprintf(line, sizeof line, "Receive: obj=%s", obj);
    feed(p, member, line);
    snprintf(line, sizeof line, "Finish: obj=%s, out={'text': 'x', 'output_ids': [%s], 'meta_info': {'finish_reason': %s}}",
             obj, outs, prefill_end ? "{'type': 'length', 'length': 0}" : "{'type': 'stop', 'matched': 2}");
    feed(p, member, line);
}

/* a long id list (skimmed by a counts-only pairer: 64 bytes and more) */
#define IDS "[1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 1015]"
#define IDS2 "[1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 1099]"

static ld_pairer *pairer(run *rn, unsigned flags, size_t max_open)
{
    ld_pair_options o = {0};
    o.flags = flags;
    o.max_open = max_open;
    ld_pairer *p = NULL;
    ld_error e;
    return ld_pairer_new(&o, take, rn, &p, &e) == LD_OK ? p : NULL;
}

static int test_pair_pd_joined_by_room(void)
{
    run rn = {0};
    ld_pairer *p = pairer(&rn, 0, 0);
    CHECK(p);
    serve(p, "prefill.log", "p1", "10.0.0.1", 77, "hello", IDS, 1, 1);
    CHECK_EQ_INT(rn.n, 0); /* held for the decode server's */
    serve(p, "decode.log", "d1", "10.0.0.1", 77, "hello", IDS, 5, 0);
    CHECK_EQ_INT(rn.n, 1);
    ld_request *d = rn.recs[0];
    CHECK_EQ_STR(d->rid, "d1");
    CHECK(d->pd == LD_PD_JOINED && d->peer && !strcmp(d->peer->rid, "p1"));
    CHECK(d->peer->pd & LD_PD_PREFILL);
    CHECK_EQ_INT(d->bootstrap_room, 77);
    CHECK_EQ_INT(d->n_output_ids, 5);
    CHECK(d->digest[LD_DIGEST_PROMPT] && d->digest[LD_DIGEST_INPUT_IDS]);
    CHECK(d->digest[LD_DIGEST_INPUT_IDS] == d->peer->digest[LD_DIGEST_INPUT_IDS]);
    const ld_pair_stats *st = ld_pairer_stats(p);
    CHECK(st->pd_joined == 1 && st->pd_by_rid == 0 && st->pd_differ == 0 && st->pd_alone == 0);
    CHECK_EQ_INT(st->emitted, 1);
    ld_pairer_free(p);
    run_clear(&rn);
    return 0;
}

static int test_pair_pd_differences_flagged(void)
{
    run rn = {0};
    ld_pairer *p = pairer(&rn, 0, 0);
    CHECK(p);
    serve(p, "decode.log", "d1", "h", 5, "hello", IDS2, 5, 0); /* the decode server first */
    serve(p, "prefill.log", "p1", "h", 5, "hello!", IDS, 1, 1);
    ld_pairer_finish(p, NULL);
    CHECK_EQ_INT(rn.n, 1);
    ld_request *d = rn.recs[0];
    CHECK_EQ_STR(d->rid, "d1");
    CHECK_EQ_INT(d->pd, LD_PD_JOINED | LD_PD_DIFF_PROMPT | LD_PD_DIFF_IDS);
    CHECK_EQ_INT(ld_pairer_stats(p)->pd_differ, 1);
    ld_pairer_free(p);
    run_clear(&rn);
    return 0;
}

/* Neither record ends as a prefill server's (say both aborted): the shorter
 * output is taken for the prefill's, and the guess is said. */
static int test_pair_pd_roles_guessed(void)
{
    run rn = {0};
    ld_pairer *p = pairer(&rn, 0, 0);
    CHECK(p);
    serve(p, "a.log", "a1", "h", 9, "q", IDS, 7, 0);
    serve(p, "b.log", "b1", "h", 9, "q", IDS, 2, 0);
    CHECK_EQ_INT(rn.n, 1);
    CHECK_EQ_STR(rn.recs[0]->rid, "a1");
    CHECK_EQ_INT(rn.recs[0]->pd, LD_PD_JOINED | LD_PD_ROLES_GUESSED);
    ld_pairer_free(p);
    run_clear(&rn);
    return 0;
}

/* One writer, one room, two decode-like records: not one request's two
 * servers (a client that reuses a room); warm-up's fake host: never held. */
static int test_pair_pd_not_partners(void)
{
    run rn = {0};
    ld_pairer *p = pairer(&rn, 0, 0);
    CHECK(p);
    serve(p, "d.log", "x1", "h", 3, "q", IDS, 4, 0);
    serve(p, "d.log", "x2", "h", 3, "q", IDS, 4, 0);
    serve(p, "p.log", "w1", "2.2.2.2", 0, "warm", IDS, 1, 1);
    serve(p, "d.log", "w2", "2.2.2.2", 0, "warm", IDS, 2, 0);
    CHECK_EQ_INT(rn.n, 2); /* the warm-ups, at once */
    CHECK(!rn.recs[0]->pd && !rn.recs[1]->pd && !rn.recs[0]->digest[LD_DIGEST_PROMPT]);
    ld_pairer_finish(p, NULL);
    CHECK_EQ_INT(rn.n, 4);
    CHECK(rn.recs[2]->pd == LD_PD_ALONE && rn.recs[3]->pd == LD_PD_ALONE);
    CHECK_EQ_INT(ld_pairer_stats(p)->pd_alone, 2);
    ld_pairer_free(p);
    run_clear(&rn);
    return 0;
}

/* At most max_open records wait; the oldest goes alone. */
static int test_pair_pd_hold_bounded(void)
{
    run rn = {0};
    ld_pairer *p = pairer(&rn, 0, 2);
    CHECK(p);
    serve(p, "p.log", "p1", "h", 1, "q", IDS, 1, 1);
    serve(p, "p.log", "p2", "h", 2, "q", IDS, 1, 1);
    CHECK_EQ_INT(rn.n, 0);
    serve(p, "p.log", "p3", "h", 3, "q", IDS, 1, 1);
    CHECK_EQ_INT(rn.n, 1);
    CHECK_EQ_STR(rn.recs[0]->rid, "p1");
    CHECK_EQ_INT(rn.recs[0]->pd, LD_PD_ALONE | LD_PD_PREFILL);
    serve(p, "d.log", "d3", "h", 3, "q", IDS, 4, 0);
    CHECK_EQ_INT(rn.n, 2);
    CHECK(rn.recs[1]->peer && !strcmp(rn.recs[1]->peer->rid, "p3"));
    ld_pairer_free(p); /* p2 freed unemitted */
    run_clear(&rn);
    return 0;
}

/* A digest is of the values: the same when an id list is skimmed (counted,
 * not kept) and when it is kept item by item, or written JSON's way. */
static int test_pair_pd_digest_of_values(void)
{
    uint64_t got[3] = {0};
    const unsigned modes[2] = {0, LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES};
    for (int m = 0; m < 2; m++) {
        run rn = {0};
        ld_pairer *p = pairer(&rn, modes[m], 0);
        CHECK(p);
        serve(p, "p.log", "p1", "h", 1, "caf\\xe9 \\u263a", IDS, 1, 1);
        ld_pairer_finish(p, NULL);
        CHECK_EQ_INT(rn.n, 1);
        got[m] = rn.recs[0]->digest[LD_DIGEST_INPUT_IDS];
        if (m == 1) got[2] = rn.recs[0]->digest[LD_DIGEST_PROMPT];
        ld_pairer_free(p);
        run_clear(&rn);
    }
    CHECK(got[0] && got[0] == got[1]);
    run rn = {0};
    ld_pairer *p = pairer(&rn, 0, 0);
    CHECK(p);
    serve(p, "p.log", "p1", "h", 1, "caf\xc3\xa9 \xe2\x98\xba", IDS, 1, 1); /* the same text, unescaped */
    ld_pairer_finish(p, NULL);
    CHECK(rn.n == 1 && rn.recs[0]->digest[LD_DIGEST_PROMPT] == got[2]);
    ld_pairer_free(p);
    run_clear(&rn);
    return 0;
}

/* Both servers interleaved in one capture that names its writers, one
 * client rid: two records until joined, never one merged record. */
static int test_pair_pd_same_rid_interleaved(void)
{
    run rn = {0};
    ld_pairer *p = pairer(&rn, 0, 0);
    CHECK(p);
    const char *obj = "G(rid='c7', text='q', bootstrap_host='h', bootstrap_room=11)";
    char line[1024];
    const char *src[4] = {"prefill-0", "decode-0", "prefill-0", "decode-0"};
    for (int i = 0; i < 4; i++) {
        if (i < 2) snprintf(line, sizeof line, "Receive: obj=%s", obj);
        else snprintf(line, sizeof line, "Finish: obj=%s, out={'text': 'x', 'output_ids': [%s], 'meta_info': {'finish_reason': %s}}",
                      obj, i == 2 ? "1" : "1, 2, 3", i == 2 ? "{'type': 'length', 'length': 0}" : "{'type': 'stop'}");
        ld_line l = {line, strlen(line), (uint64_t)i + 1, 0, 0, 0, 0, src[i], strlen(src[i])};
        ld_line_result res;
        ld_error e;
        CHECK_EQ_INT(ld_pairer_feed_line(p, "pods.log", &l, &res, &e), LD_OK);
    }
    CHECK_EQ_INT(rn.n, 1);
    ld_request *d = rn.recs[0];
    CHECK_EQ_STR(d->rid, "c7");
    CHECK_EQ_INT(d->pd, LD_PD_JOINED | LD_PD_BY_RID);
    CHECK(!(d->flags & (LD_REQ_DUPLICATE | LD_REQ_UNPAIRED)) && d->n_output_ids == 3);
    CHECK(d->peer && !strcmp(d->peer->rid, "c7") && d->peer->src[LD_PART_FINISH].line == 3);
    ld_pairer_free(p);
    run_clear(&rn);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_pair_pd_joined_by_room),
    LD_CASE(test_pair_pd_differences_flagged),
    LD_CASE(test_pair_pd_roles_guessed),
    LD_CASE(test_pair_pd_not_partners),
    LD_CASE(test_pair_pd_hold_bounded),
    LD_CASE(test_pair_pd_digest_of_values),
    LD_CASE(test_pair_pd_same_rid_interleaved),
};

LD_TEST_MAIN(cases)
