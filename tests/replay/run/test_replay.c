/* test_replay.c - the replay pipeline (replay/run/replay.h) on the tiny Qwen3 of
 * testdata/models/qwen3 and the log of testdata/replay/replaylog/ (written
 * with transformers by tools/gen_replay_fixtures.py): a request whose output
 * is transformers' greedy decoding replays consistent, with every logged
 * token's log-probability within 1e-4 of transformers' log_softmax; one
 * altered from P on diverges exactly at P, with transformers' greedy
 * continuation; a request without output gives the greedy continuation of
 * its prompt; ids outside the vocabulary and past the context are errors
 * naming the index; a copy of the model with a NaN planted in a weight
 * replays as an error naming the layer and op where it first appeared,
 * never as consistent. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "tests/support/damaged_model.h"
#include "tests/support/ld_test.h"
#include "engine/formats/safetensors.h"
#include "parse/pair/pair.h"
#include "replay/run/replay.h"
#include "replay/run/replay_batch.h"

#define MODEL LD_TESTDATA_DIR "/models/qwen3"
#define FIXDIR LD_TESTDATA_DIR "/replay/replaylog"
#define TOL 1e-4

/* ------------------------------------------------------------ fixtures */

typedef struct recs {
    ld_request *v[16];
    int n;
} recs;

static int keep(void *ctx, ld_request *r)
{
    recs *o = ctx;
    if (o->n >= 16) return 0;
    o->v[o->n++] = r;
    return LD_PAIR_TAKE;
}

/* Every request of server.log (values and texts kept); 0 on failure. */
/* Pairs the log `text` (freed here) into o. */
static int read_log_text(recs *o, char *text)
{
    memset(o, 0, sizeof *o);
    if (!text) return 0;
    ld_pair_options opt = { 0 };
    opt.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES;
    ld_pairer *p;
    ld_error e;
    if (ld_pairer_new(&opt, keep, o, &p, &e)) {
        free(text);
        return 0;
    }
    uint64_t off = 0, lineno = 0;
    int ok = 1;
    for (char *s = text; *s;) {
        char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        ld_line l = { s, len, ++lineno, off, 0, nl == NULL, 0, NULL, 0};
        ld_line_result res;
        if (ld_pairer_feed_line(p, "server.log", &l, &res, &e) != LD_OK) ok = 0;
        off += len + 1;
        s += len + (nl != NULL);
    }
    ld_pairer_finish(p, &e);
    ld_pairer_free(p);
    free(text);
    return ok;
}

static int read_log(recs *o)
{
    return read_log_text(o, ld_test_slurp(FIXDIR "/server.log"));
}

static void recs_free(recs *o)
{
    for (int i = 0; i < o->n; i++) ld_request_free(o->v[i]);
}

static const ld_request *by_rid(const recs *o, const char *rid)
{
    for (int i = 0; i < o->n; i++)
        if (o->v[i]->rid && !strcmp(o->v[i]->rid, rid)) return o->v[i];
    return NULL;
}

static cJSON *load_expect(void)
{
    char *text = ld_test_slurp(FIXDIR "/expect.json");
    if (!text) return NULL;
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

static cJSON *expect_req(cJSON *ex, const char *rid)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(ex, "requests"), rid);
}

static int setup(ld_replay_engine **e, recs *o, cJSON **ex)
{
    ld_error err;
    ld_error_clear(&err);
    *e = NULL;
    *ex = NULL;
    memset(o, 0, sizeof *o);
    if (ld_replay_engine_open(MODEL, NULL, 2, e, &err) != LD_OK) {
        fprintf(stderr, "  engine: %s\n", err.msg);
        return 0;
    }
    *ex = load_expect();
    return *ex && read_log(o);
}

static void teardown(ld_replay_engine *e, recs *o, cJSON *ex)
{
    ld_replay_engine_close(e);
    recs_free(o);
    cJSON_Delete(ex);
}

/* Checks every position against transformers' numbers; the largest logprob
 * difference goes to *maxd. */
static int check_positions(const ld_replay_result *res, cJSON *want, double *maxd)
{
    CHECK_EQ_INT(res->n_output, cJSON_GetArraySize(want));
    for (size_t i = 0; i < res->n_output; i++) {
        cJSON *w = cJSON_GetArrayItem(want, (int)i);
        const ld_replay_pos *p = &res->pos[i];
        CHECK_EQ_INT(p->id, cJSON_GetObjectItem(w, "id")->valueint);
        double d = fabs(p->logprob - cJSON_GetObjectItem(w, "logprob")->valuedouble);
        if (d > *maxd) *maxd = d;
        CHECK_MSG(d < TOL, "position %zu: logprob %.8f, transformers %.8f", i, p->logprob,
                  cJSON_GetObjectItem(w, "logprob")->valuedouble);
        CHECK_EQ_INT(p->rank, cJSON_GetObjectItem(w, "rank")->valueint);
        CHECK_EQ_INT(p->top1, cJSON_GetObjectItem(w, "top1")->valueint);
        CHECK(fabs(p->top1_logprob - cJSON_GetObjectItem(w, "top1_logprob")->valuedouble) < TOL);
        CHECK(fabs(p->margin - cJSON_GetObjectItem(w, "margin")->valuedouble) < TOL);
    }
    return 0;
}

static int check_ids(const int32_t *ids, size_t n, cJSON *want)
{
    CHECK_EQ_INT(n, cJSON_GetArraySize(want));
    for (size_t i = 0; i < n; i++) CHECK_EQ_INT(ids[i], cJSON_GetArrayItem(want, (int)i)->valueint);
    return 0;
}

/* ------------------------------------------------------------ cases */

/* One request of the fixture log, replayed: the engine, the records, the
 * expectations, the result. */
typedef struct run {
    ld_replay_engine *e;
    recs o;
    cJSON *ex;
    const ld_request *r;
    cJSON *want; /* expect.json's entry for the rid */
    ld_replay_result res;
    ld_error err;
} run;

/* Opens the fixture and replays `rid` with `opts` into x->res; 1 on
 * success (a message printed otherwise).  stop() frees whatever it got. */
static int start(run *x, const char *rid, const ld_replay_opts *opts)
{
    memset(x, 0, sizeof *x);
    if (!setup(&x->e, &x->o, &x->ex)) return 0;
    x->r = by_rid(&x->o, rid);
    x->want = expect_req(x->ex, rid);
    if (!x->r || !x->want) return fprintf(stderr, "  %s not in the fixture\n", rid), 0;
    if (ld_replay_request(x->e, x->r, opts, &x->res, &x->err) != LD_OK)
        return fprintf(stderr, "  replay: %s\n", x->err.msg), 0;
    return 1;
}

static void stop(run *x)
{
    ld_replay_result_free(&x->res);
    teardown(x->e, &x->o, x->ex);
}

static int check_greedy(const run *x)
{
    const ld_replay_result *res = &x->res;
    double maxd = 0;
    CHECK(res->verdict == LD_REPLAY_CONSISTENT && res->divergence == -1 && res->first_outside == -1);
    CHECK(res->first_not_top1 == -1 && res->prompt_source == LD_REPLAY_PROMPT_IDS);
    CHECK(res->n_greedy == 0 && res->n_prompt == 14);
    CHECK(check_positions(res, cJSON_GetObjectItem(x->want, "positions"), &maxd) == 0);
    fprintf(stderr, "  largest |logprob - transformers| on rp-greedy: %.3g\n", maxd);
    return 0;
}

static int test_replay_greedy_output_is_consistent(void)
{
    run x;
    int rc = start(&x, "rp-greedy", NULL) ? check_greedy(&x) : 1;
    stop(&x);
    return rc;
}

/* rp-greedy with its 12 output_ids cut by the logger to the first 5 ...
 * the last 3: the head is teacher-forced (transformers' numbers for those
 * positions), the cut is reported with completion_tokens. */
static int test_replay_output_ids_cut_by_the_logger(void)
{
    char *text = ld_test_slurp(FIXDIR "/server.log");
    CHECK(text);
    const char *whole = "'output_ids': [211, 266, 43, 122, 269, 160, 89, 155, 4, 43, 9, 159]";
    const char *cut = "'output_ids': [211, 266, 43, 122, 269] ... [43, 9, 159]";
    char *line = strstr(text, "Finish: obj=GenerateReqInput(rid='rp-greedy'");
    char *at = line ? strstr(line, whole) : NULL;
    CHECK(at && (!strchr(line, '\n') || at < strchr(line, '\n')));
    memcpy(at, cut, strlen(cut));
    memmove(at + strlen(cut), at + strlen(whole), strlen(at + strlen(whole)) + 1);
    ld_replay_engine *e = NULL;
    recs o;
    ld_replay_result res = { 0 };
    ld_error err;
    ld_error_clear(&err);
    cJSON *ex = load_expect();
    CHECK(ex && read_log_text(&o, text));
    CHECK(ld_replay_engine_open(MODEL, NULL, 1, &e, &err) == LD_OK);
    const ld_request *r = by_rid(&o, "rp-greedy");
    CHECK(r && ld_replay_request(e, r, NULL, &res, &err) == LD_OK);
    CHECK(res.output_cut == 1 && res.n_output == 5 && res.n_output_logged == 12);
    CHECK(res.verdict == LD_REPLAY_CONSISTENT);
    cJSON *want = cJSON_GetObjectItem(expect_req(ex, "rp-greedy"), "positions");
    cJSON *head = cJSON_CreateArray();
    for (int i = 0; i < 5; i++) cJSON_AddItemToArray(head, cJSON_Duplicate(cJSON_GetArrayItem(want, i), 1));
    double maxd = 0;
    CHECK(check_positions(&res, head, &maxd) == 0);
    cJSON_Delete(head);
    ld_replay_result_free(&res);
    ld_replay_engine_close(e);
    recs_free(&o);
    cJSON_Delete(ex);
    return 0;
}

/* A DeepSeek checkpoint through the replay pipeline (engine/models/lm.h): sequence
 * b of the tiny model `name`, its last 6 tokens teacher-forced; every
 * log-probability is transformers' log-softmax of its logits
 * (ref-b.logits.f32). */
static int replay_matches_transformers(const char *name, const char *arch, int V)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, LD_TESTDATA_DIR "/models/%s", name);
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *js = ld_test_slurp(path);
    cJSON *ref = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(ref);
    cJSON *seq = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "sequences"), 1);
    cJSON *toks = cJSON_GetObjectItem(seq, "tokens");
    int T = cJSON_GetArraySize(toks), no = 6;
    int32_t ids[64];
    CHECK(T <= 64 && T > no);
    for (int i = 0; i < T; i++) ids[i] = cJSON_GetArrayItem(toks, i)->valueint;
    size_t nl = (size_t)T * (size_t)V;
    float *logits = malloc(nl * sizeof *logits);
    snprintf(path, sizeof path, "%s/ref-b.logits.f32", dir);
    FILE *f = fopen(path, "rb");
    CHECK(logits && f && fread(logits, sizeof *logits, nl, f) == nl);
    fclose(f);
    ld_replay_engine *e = NULL;
    ld_replay_result res = { 0 };
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_replay_engine_open(dir, NULL, 2, &e, &err) == LD_OK, "%s", err.msg);
    CHECK_EQ_STR(ld_replay_engine_arch(e), arch);
    CHECK_EQ_INT(ld_replay_engine_vocab(e), V);
    CHECK(ld_replay_ids(e, ids, (size_t)(T - no), ids + T - no, (size_t)no, NULL, NULL, &res, &err) == LD_OK);
    CHECK(res.n_output == (size_t)no);
    double worst = 0;
    for (int i = 0; i < no; i++) {
        const float *row = logits + (size_t)(T - no - 1 + i) * (size_t)V;
        double mx = row[0], sum = 0;
        for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < V; v++) sum += exp(row[v] - mx);
        double want = row[ids[T - no + i]] - mx - log(sum), d = fabs(res.pos[i].logprob - want);
        worst = d > worst ? d : worst;
        CHECK_MSG(d < TOL, "%s position %d: logprob %.7f, transformers %.7f", name, i, res.pos[i].logprob, want);
    }
    fprintf(stderr, "  %s: largest |logprob - transformers| %.3g\n", name, worst);
    if (strcmp(arch, "DeepseekV4ForCausalLM") != 0) {
        /* MLA absorbed (--kernels mla=absorbed): as close to transformers,
         * and really another computation (not the same bits) */
        ld_replay_result ab = { 0 };
        CHECK(ld_replay_engine_set_backend(e, "cpu", "mla=absorbed", 2, &err) == LD_OK);
        CHECK(ld_replay_ids(e, ids, (size_t)(T - no), ids + T - no, (size_t)no, NULL, NULL, &ab, &err) == LD_OK);
        int same = 1;
        for (int i = 0; i < no; i++) {
            CHECK_MSG(fabs(ab.pos[i].logprob - res.pos[i].logprob) < TOL, "%s absorbed position %d", name, i);
            same &= ab.pos[i].logprob == res.pos[i].logprob;
        }
        CHECK_MSG(!same, "%s: mla=absorbed gave the naive form's bits", name);
        ld_replay_result_free(&ab);
        /* the official code's bf16 gate and bf16 expert sum: they move the
         * log-probabilities visibly, and not absurdly */
        static const char *const bf16[] = {"router=bf16", "combine=bf16"};
        for (int v = 0; v < 2; v++) {
            ld_replay_result r2 = { 0 };
            CHECK(ld_replay_engine_set_backend(e, "cpu", bf16[v], 2, &err) == LD_OK);
            CHECK(ld_replay_ids(e, ids, (size_t)(T - no), ids + T - no, (size_t)no, NULL, NULL, &r2, &err) == LD_OK);
            double moved = 0;
            for (int i = 0; i < no; i++) moved = fmax(moved, fabs(r2.pos[i].logprob - res.pos[i].logprob));
            fprintf(stderr, "  %s with %s: largest |d logprob| %.3g\n", name, bf16[v], moved);
            CHECK_MSG(moved > 1e-6 && moved < 1.0, "%s %s moved the log-probs by %.3g", name, bf16[v], moved);
            ld_replay_result_free(&r2);
        }
    }
    if (strcmp(arch, "DeepseekV4ForCausalLM") == 0) {
        /* the mHC mixing matrices cast to bf16: a visible, sane move */
        ld_replay_result r2 = { 0 };
        CHECK(ld_replay_engine_set_backend(e, "cpu", "mhc=bf16", 2, &err) == LD_OK);
        CHECK(ld_replay_ids(e, ids, (size_t)(T - no), ids + T - no, (size_t)no, NULL, NULL, &r2, &err) == LD_OK);
        double moved = 0;
        for (int i = 0; i < no; i++) moved = fmax(moved, fabs(r2.pos[i].logprob - res.pos[i].logprob));
        fprintf(stderr, "  %s with mhc=bf16: largest |d logprob| %.3g\n", name, moved);
        CHECK_MSG(moved > 1e-6 && moved < 1.0, "%s mhc=bf16 moved the log-probs by %.3g", name, moved);
        ld_replay_result_free(&r2);
    }
    ld_replay_result_free(&res);
    ld_replay_engine_close(e);
    free(logits);
    cJSON_Delete(ref);
    return 0;
}

static int test_replay_deepseek_v3(void)
{
    return replay_matches_transformers("deepseek-v3", "DeepseekV3ForCausalLM", 300);
}

static int test_replay_deepseek_v32(void)
{
    return replay_matches_transformers("deepseek-v32", "DeepseekV32ForCausalLM", 300);
}

static int test_replay_deepseek_v4(void)
{
    return replay_matches_transformers("deepseek-v4", "DeepseekV4ForCausalLM", 300);
}

static int check_altered(const run *x)
{
    const ld_replay_result *res = &x->res;
    int P = cJSON_GetObjectItem(x->want, "divergence")->valueint;
    double maxd = 0;
    CHECK(res->verdict == LD_REPLAY_DIVERGENT && res->divergence == P && res->first_outside == P);
    CHECK(res->first_not_top1 == P && res->n_near_ties == 0 && res->greedy_from == P && res->top_k == 5);
    CHECK(check_positions(res, cJSON_GetObjectItem(x->want, "positions"), &maxd) == 0);
    fprintf(stderr, "  largest |logprob - transformers| on rp-altered: %.3g\n", maxd);
    /* the top-k at P: best first, the first being the replay's top-1 */
    CHECK(res->n_top == 5 && res->top[0].id == res->pos[P].top1);
    for (size_t i = 1; i < res->n_top; i++) CHECK(res->top[i].logprob <= res->top[i - 1].logprob);
    CHECK(res->pos[P].gap > res->near_tie);
    CHECK(check_ids(res->greedy, res->n_greedy, cJSON_GetObjectItem(x->want, "greedy_from_divergence")) == 0);
    return 0;
}

static int test_replay_altered_output_diverges_at_p(void)
{
    run x;
    int rc = start(&x, "rp-altered", NULL) ? check_altered(&x) : 1;
    stop(&x);
    return rc;
}

/* A near-tie threshold wider than every gap turns each outside position into
 * a near-tie: consistent, the near-ties counted; top-64 still leaves the
 * altered tokens (ranked last of 300) out; top-65 is refused. */
static int check_near_ties(run *x)
{
    ld_replay_result *res = &x->res;
    int P = cJSON_GetObjectItem(x->want, "divergence")->valueint;
    CHECK(res->verdict == LD_REPLAY_CONSISTENT && res->divergence == -1 && res->first_outside == P);
    CHECK(res->n_near_ties == res->n_output - (size_t)P && res->pos[P].near_tie && res->n_greedy == 0);
    ld_replay_result_free(res);
    ld_replay_opts opts = { 64, -1, 0 };
    CHECK(ld_replay_request(x->e, x->r, &opts, res, &x->err) == LD_OK);
    CHECK(res->verdict == LD_REPLAY_DIVERGENT && res->divergence == P && res->n_top == 64 && res->n_greedy == 0);
    ld_replay_result_free(res);
    opts = (ld_replay_opts){ 65, 0, 0 };
    CHECK_EQ_INT(ld_replay_request(x->e, x->r, &opts, res, &x->err), LD_ERR_USAGE);
    return 0;
}

static int test_replay_near_tie_rule_and_top_k(void)
{
    run x;
    ld_replay_opts wide = { 0, 0, 100.0 };
    int rc = start(&x, "rp-altered", &wide) ? check_near_ties(&x) : 1;
    stop(&x);
    return rc;
}

static int check_no_output(const run *x)
{
    const ld_replay_result *res = &x->res;
    CHECK(res->verdict == LD_REPLAY_NO_OUTPUT && res->n_output == 0 && res->greedy_from == 0);
    CHECK(strstr(res->no_output_reason, "no Finish line") != NULL);
    CHECK(check_ids(res->greedy, res->n_greedy, cJSON_GetObjectItem(x->want, "greedy_from_prompt")) == 0);
    return 0;
}

static int test_replay_no_output_gives_greedy_continuation(void)
{
    run x;
    int rc = start(&x, "rp-no-output", NULL) ? check_no_output(&x) : 1;
    stop(&x);
    return rc;
}

static int test_replay_errors_name_the_index(void)
{
    ld_replay_engine *e;
    recs o;
    cJSON *ex;
    int rc = 1;
    ld_replay_result res = { 0 };
    ld_error err;
    ld_error_clear(&err);
    if (!setup(&e, &o, &ex)) goto out;
    /* from the log: input_ids[5] = 300 */
    const ld_request *r = by_rid(&o, "rp-bad-id");
    if (!r || ld_replay_request(e, r, NULL, &res, &err) != LD_ERR_MISMATCH) goto out;
    CHECK_MSG(strstr(err.msg, "input_ids[5] = 300") && strstr(err.msg, "vocabulary of 300"), "%s", err.msg);
    /* the prompt text only, and no tokenizer.json in the model directory */
    r = by_rid(&o, "rp-text-only");
    if (!r || ld_replay_request(e, r, NULL, &res, &err) != LD_ERR_MISMATCH) goto out;
    CHECK_MSG(strstr(err.msg, "no input_ids") && strstr(err.msg, "no tokenizer"), "%s", err.msg);
    r = by_rid(&o, "rp-ids-cut");
    if (!r || ld_replay_request(e, r, NULL, &res, &err) != LD_ERR_TRUNCATED) goto out;
    CHECK_MSG(strstr(err.msg, "cut the input_ids"), "%s", err.msg);
    /* ids given directly */
    int32_t prompt[3] = { 1, 2, 3 }, outp[4] = { 5, 6, -1, 7 };
    CHECK_EQ_INT(ld_replay_ids(e, prompt, 3, outp, 4, NULL, NULL, &res, &err), LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "output_ids[2] = -1"), "%s", err.msg);
    outp[2] = 299;
    prompt[1] = 1000;
    CHECK_EQ_INT(ld_replay_ids(e, prompt, 3, outp, 4, NULL, NULL, &res, &err), LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "input_ids[1] = 1000"), "%s", err.msg);
    CHECK_EQ_INT(ld_replay_ids(e, prompt, 0, outp, 4, NULL, NULL, &res, &err), LD_ERR_MISMATCH);
    /* the context is 256 positions: a 250-id prompt leaves room for 6 */
    int ctx = ld_replay_engine_context(e);
    CHECK_EQ_INT(ctx, 256);
    int32_t *many = calloc(300, sizeof *many);
    CHECK(many);
    ld_status st = ld_replay_ids(e, many, 250, many, 10, NULL, NULL, &res, &err);
    int ok = st == LD_ERR_LIMIT && strstr(err.msg, "output_ids[6]") != NULL;
    if (ok) {
        st = ld_replay_ids(e, many, 257, NULL, 0, NULL, NULL, &res, &err);
        ok = st == LD_ERR_LIMIT && strstr(err.msg, "input_ids[256]") != NULL;
    }
    if (ok) {
        /* exactly full: replayed, the continuation shortened to nothing */
        st = ld_replay_ids(e, many, 250, many, 6, NULL, NULL, &res, &err);
        ok = st == LD_OK && res.n_output == 6 && res.n_greedy == 0;
        ld_replay_result_free(&res);
    }
    free(many);
    CHECK_MSG(ok, "%s", err.msg);
    rc = 0;
out:
    ld_replay_result_free(&res);
    teardown(e, &o, ex);
    return rc;
}

/* The same numbers with 1 and 3 threads of `backend`, over the ids entry point. */
static int deterministic_over_threads(const char *backend)
{
    ld_replay_engine *e1 = NULL, *e3 = NULL;
    ld_replay_result a = { 0 }, b = { 0 };
    ld_error err;
    ld_error_clear(&err);
    cJSON *ex = load_expect();
    CHECK(ex);
    cJSON *w = expect_req(ex, "rp-altered");
    cJSON *pj = cJSON_GetObjectItem(ex, "prompt"), *oj = cJSON_GetObjectItem(w, "output_ids");
    int32_t prompt[64], outp[64];
    int np = cJSON_GetArraySize(pj), no = cJSON_GetArraySize(oj);
    for (int i = 0; i < np; i++) prompt[i] = cJSON_GetArrayItem(pj, i)->valueint;
    for (int i = 0; i < no; i++) outp[i] = cJSON_GetArrayItem(oj, i)->valueint;
    cJSON_Delete(ex);
    int rc = 1;
    if (ld_replay_engine_open(MODEL, backend, 1, &e1, &err) || ld_replay_engine_open(MODEL, backend, 3, &e3, &err))
        goto out;
    if (ld_replay_ids(e1, prompt, (size_t)np, outp, (size_t)no, NULL, NULL, &a, &err) ||
        ld_replay_ids(e3, prompt, (size_t)np, outp, (size_t)no, NULL, NULL, &b, &err))
        goto out;
    if (a.n_output != b.n_output || a.n_greedy != b.n_greedy || a.divergence != b.divergence) goto out;
    for (size_t i = 0; i < a.n_output; i++)
        if (a.pos[i].logprob != b.pos[i].logprob || a.pos[i].margin != b.pos[i].margin) goto out;
    for (size_t i = 0; i < a.n_greedy; i++)
        if (a.greedy[i] != b.greedy[i]) goto out;
    rc = 0;
out:
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    ld_replay_result_free(&a);
    ld_replay_result_free(&b);
    ld_replay_engine_close(e1);
    ld_replay_engine_close(e3);
    return rc;
}

static int test_replay_deterministic_over_threads(void)
{
    CHECK(deterministic_over_threads("ref") == 0);
    CHECK(deterministic_over_threads("cpu") == 0);
    return 0;
}

/* The log has only the prompt text: tokenized with model/tokenizer.json (HF
 * tokenizers' ids in expect.json), then replayed consistent. */
static int test_replay_prompt_text_tokenized(void)
{
    ld_replay_engine *e = NULL;
    recs o;
    int rc = 1;
    ld_replay_result res = { 0 };
    ld_error err;
    ld_error_clear(&err);
    memset(&o, 0, sizeof o);
    cJSON *ex = load_expect();
    if (!ex || !read_log(&o)) goto out;
    if (ld_replay_engine_open(FIXDIR "/model", "ref", 1, &e, &err) != LD_OK || !ld_replay_engine_tok(e)) goto out;
    const ld_request *r = by_rid(&o, "rp-text-only");
    cJSON *w = expect_req(ex, "rp-text-only");
    if (!r || !w || ld_replay_request(e, r, NULL, &res, &err) != LD_OK) goto out;
    double maxd = 0;
    if (res.prompt_source != LD_REPLAY_PROMPT_TOKENIZED || res.verdict != LD_REPLAY_CONSISTENT) goto out;
    if (check_ids(res.prompt, res.n_prompt, cJSON_GetObjectItem(w, "prompt_ids"))) goto out;
    if (check_positions(&res, cJSON_GetObjectItem(w, "positions"), &maxd)) goto out;
    /* input_ids cut by the logger, the text whole: the text, tokenized */
    ld_replay_result_free(&res);
    r = by_rid(&o, "rp-ids-cut");
    if (!r || ld_replay_request(e, r, NULL, &res, &err) != LD_OK) goto out;
    if (res.prompt_source != LD_REPLAY_PROMPT_TOKENIZED || res.verdict != LD_REPLAY_CONSISTENT) goto out;
    if (check_ids(res.prompt, res.n_prompt, cJSON_GetObjectItem(w, "prompt_ids"))) goto out;
    rc = 0;
out:
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    ld_replay_result_free(&res);
    teardown(e, &o, ex);
    return rc;
}

/* ------------------------------------------------------------ non-finite weights */

/* A copy of MODEL in a new directory `dir` [64] with a NaN planted in
 * element 5 of layer 1's o_proj (row 0: every position's attention output
 * takes it); 0 on success. */
static int nan_model(char *dir)
{
    return ld_test_damaged_model(MODEL, "model.layers.1.self_attn.o_proj.weight", 5, NAN, dir);
}

#define NAN_AT "non-finite values: first at layer 1, op attn_out (NaN at position 0)"

/* the kernels check of diff --replay on rid: its one finding's kind,
 * severity, first_diff and whether its detail holds `want` */
static int check_finding(ld_replay_engine *e, const ld_request *r, const char *kind, ld_severity sev,
                         int64_t first_diff, const char *want)
{
    ld_arena arena;
    ld_arena_init(&arena, 1 << 20);
    ld_findings f = {0};
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_replay_check(e, r, &arena, &f, &err);
    int ok = st == LD_OK && f.n == 1 && !strcmp(f.v[0].kind, kind) && f.v[0].severity == sev &&
             f.v[0].first_diff == first_diff && strstr(f.v[0].detail, want);
    if (!ok) fprintf(stderr, "  check: status %d, %zu findings: %s\n", (int)st, f.n, f.n ? f.v[0].detail : err.msg);
    ld_arena_release(&arena);
    return ok ? 0 : 1;
}

/* 0 when a replay on the NaN model failed naming layer 1's o_proj, the
 * row being output position 0 */
static int named_nan(ld_status st, const ld_error *err, const char *backend, const char *what)
{
    if (st == LD_ERR_NUMERIC && strstr(err->msg, NAN_AT) && err->offset == 0) return 0;
    fprintf(stderr, "  %s, %s: status %d, offset %llu: %s\n", backend, what, (int)st,
            (unsigned long long)err->offset, err->msg);
    return 1;
}

/* the NaN model at dir on `backend`: the teacher-forced replay, the
 * continuation of a request without output, the batch check and the
 * kernels check (an error finding, as a divergence) */
static int nan_replays(const char *dir, const char *backend, const recs *o)
{
    const ld_request *greedy = by_rid(o, "rp-greedy"), *none = by_rid(o, "rp-no-output");
    const ld_request *other = by_rid(o, "rp-altered");
    CHECK(greedy && none && other);
    ld_replay_engine *e = NULL;
    ld_replay_result res;
    ld_replay_batch_report rep;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_replay_engine_open(dir, backend, 2, &e, &err) == LD_OK, "%s", err.msg);
    int rc = named_nan(ld_replay_request(e, greedy, NULL, &res, &err), &err, backend, "rp-greedy");
    rc |= named_nan(ld_replay_request(e, none, NULL, &res, &err), &err, backend, "rp-no-output");
    rc |= named_nan(ld_replay_batch_check(e, greedy, &other, 1, &rep, &err), &err, backend, "--batch-with");
    rc |= check_finding(e, greedy, LD_K_KERNELS_DIVERGENCE, LD_SEV_ERROR, 0, NAN_AT);
    ld_replay_engine_close(e);
    return rc;
}

/* NaN weights on either CPU backend fail every replay, naming where; the
 * intact model's kernels check of the same request stays consistent. */
static int test_replay_nan_weights_named_not_consistent(void)
{
    char dir[64];
    recs o;
    CHECK(read_log(&o));
    CHECK(nan_model(dir) == 0);
    int rc = nan_replays(dir, "cpu", &o) | nan_replays(dir, "ref", &o);
    ld_test_remove_model_copy(dir);
    ld_replay_engine *e = NULL;
    ld_error err;
    if (ld_replay_engine_open(MODEL, "ref", 2, &e, &err) != LD_OK) rc = 1;
    else rc |= check_finding(e, by_rid(&o, "rp-greedy"), LD_K_KERNELS_CONSISTENT, LD_SEV_INFO, LD_NO_VALUE,
                             "all 12 logged tokens");
    ld_replay_engine_close(e);
    recs_free(&o);
    return rc;
}

static int test_replay_engine_errors(void)
{
    ld_replay_engine *e = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_replay_engine_open(FIXDIR, NULL, 1, &e, &err) != LD_OK); /* no config.json */
    CHECK(e == NULL);
    CHECK_EQ_INT(ld_replay_engine_open(MODEL, NULL, 0, &e, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_replay_engine_open(MODEL, "gpu", 1, &e, &err), LD_ERR_USAGE);
    CHECK(e == NULL);
    CHECK(ld_replay_engine_open(MODEL, NULL, 1, &e, &err) == LD_OK);
    CHECK_EQ_STR(ld_replay_engine_backend(e), "cpu");
    CHECK(ld_replay_engine_tok(e) == NULL);
    CHECK_EQ_STR(ld_replay_engine_tok_error(e), "");
    CHECK_EQ_INT(ld_replay_engine_vocab(e), 300);
    CHECK_EQ_STR(ld_replay_engine_arch(e), "Qwen3ForCausalLM");
    ld_replay_engine_close(e);
    CHECK_EQ_STR(ld_replay_verdict_kind(LD_REPLAY_DIVERGENT), "replay.divergent");
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_replay_deepseek_v3),
    LD_CASE(test_replay_deepseek_v32),
    LD_CASE(test_replay_deepseek_v4),
    LD_CASE(test_replay_output_ids_cut_by_the_logger),
    LD_CASE(test_replay_greedy_output_is_consistent),
    LD_CASE(test_replay_altered_output_diverges_at_p),
    LD_CASE(test_replay_near_tie_rule_and_top_k),
    LD_CASE(test_replay_no_output_gives_greedy_continuation),
    LD_CASE(test_replay_errors_name_the_index),
    LD_CASE(test_replay_deterministic_over_threads),
    LD_CASE(test_replay_prompt_text_tokenized),
    LD_CASE(test_replay_engine_errors),
    LD_CASE(test_replay_nan_weights_named_not_consistent),
};

LD_TEST_MAIN(cases)
