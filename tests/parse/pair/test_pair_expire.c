/* test_pair_expire.c - records that never get their Finish line, handed out
 * by age (ld_pairer_set_clock / ld_pairer_expire, what `logdiff watch` does
 * with --unpaired-after) rather than at the end of the input.
 *
 * The oracle is the input itself: the clock is the line number, so a record
 * is "older than B" exactly when its first line is before line B, and the
 * records expire() hands out must be the unfinished ones whose first line
 * (read back from the fixture: the Receive / Receive OpenAI line numbers)
 * is before B, and no other. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "parse/pair/pair.h"

#define MAX_RECS 64

typedef struct seen {
    char rids[MAX_RECS][64];
    uint64_t first_line[MAX_RECS];
    unsigned flags[MAX_RECS];
    int n;
} seen;

static uint64_t first_line_of(const ld_request *r)
{
    uint64_t first = UINT64_MAX;
    for (int k = 0; k < LD_PART_COUNT; k++)
        if (r->src[k].line && r->src[k].line < first) first = r->src[k].line;
    return first;
}

static void note(seen *s, const ld_request *r)
{
    if (s->n >= MAX_RECS) return;
    snprintf(s->rids[s->n], sizeof s->rids[0], "%s", r->rid ? r->rid : "(openai)");
    s->first_line[s->n] = first_line_of(r);
    s->flags[s->n] = r->flags;
    s->n++;
}

static int keep(void *ctx, ld_request *r)
{
    note(ctx, r);
    return 0;
}

/* Feeds every line of `path`, the pairer's clock at the line's number. */
static int feed_file(const char *path, ld_pairer *p)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    uint64_t lineno = 0, offset = 0;
    while ((n = getline(&buf, &cap, f)) > 0) {
        lineno++;
        size_t len = (size_t)n - (buf[n - 1] == '\n');
        ld_line l = { .data = buf, .len = len, .lineno = lineno, .offset = offset };
        ld_line_result res;
        ld_error e;
        ld_pairer_set_clock(p, lineno);
        ld_pairer_feed_line(p, path, &l, &res, &e);
        offset += (uint64_t)n;
    }
    free(buf);
    fclose(f);
    return 0;
}

static int index_of(const seen *s, const char *rid)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->rids[i], rid)) return i;
    return -1;
}

/* Interleaved requests: expire at the last line with B = the middle of the
 * file; then finish() hands out the rest. */
static int expire_hands_out_the_old_unfinished(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/logs/sglang-interleaved.log", LD_TESTDATA_DIR);
    /* the whole run without a clock: which records stay unfinished */
    seen all = { 0 }, aged = { 0 };
    ld_pairer *p = NULL;
    ld_error e;
    CHECK(ld_pairer_new(NULL, keep, &all, &p, &e) == LD_OK);
    CHECK(feed_file(path, p) == 0);
    ld_pairer_finish(p, &e);
    ld_pairer_free(p);
    uint64_t last = 0;
    for (int i = 0; i < all.n; i++)
        if (all.first_line[i] > last) last = all.first_line[i];
    CHECK(last > 4);
    uint64_t before = last / 2;
    int old_unfinished = 0;
    for (int i = 0; i < all.n; i++)
        old_unfinished += (all.flags[i] & LD_REQ_UNPAIRED) && all.first_line[i] < before;
    CHECK_MSG(old_unfinished > 0, "the fixture has no unfinished request before line %llu",
              (unsigned long long)before);

    CHECK(ld_pairer_new(NULL, keep, &aged, &p, &e) == LD_OK);
    CHECK(feed_file(path, p) == 0);
    int n_before = aged.n;
    size_t expired = ld_pairer_expire(p, before);
    CHECK_EQ_INT(expired, aged.n - n_before);
    CHECK_EQ_INT(expired, old_unfinished);
    for (int i = n_before; i < aged.n; i++) {
        CHECK_MSG(aged.flags[i] & LD_REQ_UNPAIRED, "%s expired but paired", aged.rids[i]);
        CHECK_MSG(aged.first_line[i] < before, "%s (line %llu) is not older than line %llu", aged.rids[i],
                  (unsigned long long)aged.first_line[i], (unsigned long long)before);
    }
    CHECK_EQ_INT(ld_pairer_expire(p, before), 0); /* nothing older is left */
    ld_pairer_finish(p, &e);
    ld_pairer_free(p);
    /* the same records in all, whichever way they went out */
    CHECK_EQ_INT(aged.n, all.n);
    for (int i = 0; i < all.n; i++) {
        int j = index_of(&aged, all.rids[i]);
        CHECK_MSG(j >= 0, "%s lost", all.rids[i]);
        CHECK_EQ_INT(aged.flags[j] & LD_REQ_UNPAIRED, all.flags[i] & LD_REQ_UNPAIRED);
    }
    return 0;
}

/* A Receive OpenAI line that no Receive follows goes out once it is old
 * (an OpenAI-only record), not only at the end. */
static int expire_hands_out_a_lone_openai_line(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/logs/sglang-current-2-openai.log", LD_TESTDATA_DIR);
    FILE *f = fopen(path, "rb");
    if (!f) SKIP("%s is missing", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f); /* the file's first line: a Receive OpenAI */
    fclose(f);
    CHECK(n > 0 && !strncmp(line, "Receive OpenAI:", 15));
    seen s = { 0 };
    ld_pairer *p = NULL;
    ld_error e;
    CHECK(ld_pairer_new(NULL, keep, &s, &p, &e) == LD_OK);
    ld_pairer_set_clock(p, 10);
    ld_line l = { .data = line, .len = (size_t)n - 1, .lineno = 1, .offset = 0 };
    ld_line_result res;
    CHECK(ld_pairer_feed_line(p, "m", &l, &res, &e) == LD_OK);
    CHECK_EQ_INT(ld_pairer_expire(p, 10), 0); /* stamped 10: not before 10 */
    CHECK_EQ_INT(s.n, 0);
    CHECK_EQ_INT(ld_pairer_expire(p, 11), 1);
    CHECK_EQ_INT(s.n, 1);
    ld_pairer_finish(p, &e);
    CHECK_EQ_INT(s.n, 1); /* not twice */
    ld_pairer_free(p);
    free(line);
    return 0;
}

static void count_waiting(void *ctx, const ld_request *r)
{
    note(ctx, r); /* copies what it needs; the record stays the pairer's */
}

/* What a stopping watcher saves: every record still waiting, with where its
 * first line is; none once they are expired. */
static int each_waiting_lists_what_is_open(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/logs/sglang-interleaved.log", LD_TESTDATA_DIR);
    seen out = { 0 }, waiting = { 0 };
    ld_pairer *p = NULL;
    ld_error e;
    CHECK(ld_pairer_new(NULL, keep, &out, &p, &e) == LD_OK);
    CHECK(feed_file(path, p) == 0);
    ld_pairer_each_waiting(p, count_waiting, &waiting);
    CHECK_EQ_INT(waiting.n, ld_pairer_stats(p)->open);
    CHECK(waiting.n > 0);
    for (int i = 0; i < waiting.n; i++) CHECK(waiting.first_line[i] != UINT64_MAX);
    int before_finish = out.n;
    ld_pairer_finish(p, &e);
    CHECK_EQ_INT(out.n - before_finish, waiting.n); /* exactly those went out at the end */
    for (int i = 0; i < waiting.n; i++) CHECK(index_of(&out, waiting.rids[i]) >= before_finish);
    seen none = { 0 };
    ld_pairer_each_waiting(p, count_waiting, &none);
    CHECK_EQ_INT(none.n, 0);
    ld_pairer_free(p);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(each_waiting_lists_what_is_open),
    LD_CASE(expire_hands_out_the_old_unfinished),
    LD_CASE(expire_hands_out_a_lone_openai_line),
};
LD_TEST_MAIN(cases)
