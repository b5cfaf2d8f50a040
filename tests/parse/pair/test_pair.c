/* test_pair.c - the pairer over the generated fixtures (testdata/logs, made by
 * tools/gen_log_fixtures.py from Python objects) and the real samples of
 * ../shared/corpus/logs. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "parse/pair/pair.h"

#define MAX_RECS 256
#define MAX_ERRS 64

typedef struct run {
    ld_request *recs[MAX_RECS];
    int n_recs;
    uint64_t err_lines[MAX_ERRS];
    uint64_t err_offsets[MAX_ERRS];
    char err_msgs[MAX_ERRS][256];
    int n_errs;
    ld_pair_stats stats;
} run;

static int take(void *ctx, ld_request *r)
{
    run *rn = ctx;
    if (rn->n_recs >= MAX_RECS) return 0;
    rn->recs[rn->n_recs++] = r;
    return LD_PAIR_TAKE;
}

static void run_free(run *rn)
{
    for (int i = 0; i < rn->n_recs; i++) ld_request_free(rn->recs[i]);
    free(rn);
}

/* Reads `path` through the real reader and pairer with options `o`. NULL
 * on an i/o error. */
static run *run_file_opts(const char *path, ld_pair_options o)
{
    run *rn = calloc(1, sizeof *rn);
    ld_pairer *p = NULL;
    ld_input *in = NULL;
    ld_linereader *lr = NULL;
    ld_error e;
    if (!rn || ld_pairer_new(&o, take, rn, &p, &e) || ld_input_open(path, &in, &e) ||
        ld_linereader_new(in, 0, &lr, &e)) {
        fprintf(stderr, "  cannot read '%s': %s\n", path, e.msg);
        ld_pairer_free(p);
        ld_input_close(in);
        free(rn);
        return NULL;
    }
    ld_line l;
    int has;
    while (ld_linereader_next(lr, &l, &has, &e) == LD_OK && has) {
        ld_line_result res;
        if (ld_pairer_feed_line(p, ld_input_member_name(in), &l, &res, &e) != LD_OK &&
            rn->n_errs < MAX_ERRS) {
            rn->err_lines[rn->n_errs] = e.line;
            rn->err_offsets[rn->n_errs] = e.offset;
            snprintf(rn->err_msgs[rn->n_errs], 256, "%s", e.msg);
            rn->n_errs++;
        }
    }
    ld_pairer_finish(p, &e);
    rn->stats = *ld_pairer_stats(p);
    ld_pairer_free(p);
    ld_linereader_free(lr);
    ld_input_close(in);
    return rn;
}

static run *run_file(const char *path, unsigned flags)
{
    ld_pair_options o = {0};
    o.flags = flags;
    return run_file_opts(path, o);
}


/* ------------------------------------------------------------ expectations */

static const ld_request *find_rec(const run *rn, const cJSON *rid, int sub)
{
    for (int i = 0; i < rn->n_recs; i++) {
        const ld_request *r = rn->recs[i];
        if (r->flags & LD_REQ_ERROR) continue;
        int same = cJSON_IsString(rid) ? (r->rid && !strcmp(r->rid, rid->valuestring))
                                       : !r->rid;
        if (same && r->sub_index == sub) return r;
    }
    return NULL;
}

static int json_null(const cJSON *j)
{
    return !j || cJSON_IsNull(j);
}

static int check_int(const char *what, const char *rid, const cJSON *j, int64_t got,
                     int64_t unknown)
{
    if (!j) return 0;
    int64_t want = json_null(j) ? unknown : (int64_t)j->valuedouble;
    if (want == got) return 0;
    fprintf(stderr, "  %s: %s: want %lld got %lld\n", rid, what, (long long)want, (long long)got);
    return 1;
}

static int check_text(const char *what, const char *rid, const cJSON *j, const ld_text *t)
{
    if (!j) return 0;
    int64_t got = (t->flags & LD_TEXT_PRESENT) ? (int64_t)t->n_chars : -1;
    return check_int(what, rid, j, got, -1);
}

static unsigned missing_bits(const cJSON *arr)
{
    unsigned m = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
        for (int p = 0; p < LD_PART_COUNT; p++)
            if (cJSON_IsString(e) && !strcmp(e->valuestring, ld_part_name((ld_part)p)))
                m |= LD_PART_BIT(p);
    return m;
}

static int check_flag(const char *what, const char *rid, const cJSON *j, int got)
{
    if (!j || cJSON_IsTrue(j) == !!got) return 0;
    fprintf(stderr, "  %s: %s: want %d got %d\n", rid, what, cJSON_IsTrue(j), !!got);
    return 1;
}

static int check_request(const run *rn, const cJSON *x)
{
    const cJSON *rid = cJSON_GetObjectItem(x, "rid");
    int sub = (int)cJSON_GetObjectItem(x, "sub_index")->valuedouble;
    const char *name = cJSON_IsString(rid) ? rid->valuestring : "(no rid)";
    const ld_request *r = find_rec(rn, rid, sub);
    if (!r) {
        fprintf(stderr, "  %s sub %d: no record\n", name, sub);
        return 1;
    }
    int bad = 0;
    const cJSON *j;
    if ((j = cJSON_GetObjectItem(x, "engine")) && strcmp(j->valuestring, ld_engine_name(r->engine)))
        bad |= fprintf(stderr, "  %s: engine %s\n", name, ld_engine_name(r->engine)) > 0;
    bad |= check_int("n_messages", name, cJSON_GetObjectItem(x, "n_messages"), r->n_messages, -1);
    bad |= check_text("prompt_chars", name, cJSON_GetObjectItem(x, "prompt_chars"), &r->prompt);
    bad |= check_text("output_chars", name, cJSON_GetObjectItem(x, "output_chars"), &r->output);
    bad |= check_int("max_tokens", name, cJSON_GetObjectItem(x, "max_tokens"), r->max_tokens, LD_UNSET_INT);
    bad |= check_int("n_input_ids", name, cJSON_GetObjectItem(x, "n_input_ids"), r->n_input_ids, -1);
    bad |= check_int("n_output_ids", name, cJSON_GetObjectItem(x, "n_output_ids"), r->n_output_ids, -1);
    bad |= check_int("prompt_tokens", name, cJSON_GetObjectItem(x, "prompt_tokens"), r->prompt_tokens, LD_UNSET_INT);
    bad |= check_int("completion_tokens", name, cJSON_GetObjectItem(x, "completion_tokens"), r->completion_tokens, LD_UNSET_INT);
    if ((j = cJSON_GetObjectItem(x, "temperature"))) {
        int ok = json_null(j) ? isnan(r->temperature) : fabs(r->temperature - j->valuedouble) < 1e-12;
        if (!ok) bad |= fprintf(stderr, "  %s: temperature %g\n", name, r->temperature) > 0;
    }
    if ((j = cJSON_GetObjectItem(x, "finish"))) {
        int ok = json_null(j) ? !r->finish_type : r->finish_type && !strcmp(r->finish_type, j->valuestring);
        if (!ok) bad |= fprintf(stderr, "  %s: finish %s\n", name, r->finish_type ? r->finish_type : "-") > 0;
    }
    if ((j = cJSON_GetObjectItem(x, "timestamp"))) {
        int ok = json_null(j) ? !r->timestamp : r->timestamp && !strcmp(r->timestamp, j->valuestring);
        if (!ok) bad |= fprintf(stderr, "  %s: timestamp %s\n", name, r->timestamp ? r->timestamp : "-") > 0;
    }
    if ((j = cJSON_GetObjectItem(x, "missing")) && missing_bits(j) != r->missing)
        bad |= fprintf(stderr, "  %s: missing %#x want %#x\n", name, r->missing, missing_bits(j)) > 0;
    bad |= check_flag("truncated", name, cJSON_GetObjectItem(x, "truncated"), r->flags & LD_REQ_TRUNCATED);
    bad |= check_flag("openai", name, cJSON_GetObjectItem(x, "openai"), r->seen & LD_PART_BIT(LD_PART_OPENAI));
    bad |= check_flag("unconfirmed", name, cJSON_GetObjectItem(x, "unconfirmed"), r->flags & LD_REQ_UNCONFIRMED);
    bad |= check_flag("ambiguous", name, cJSON_GetObjectItem(x, "ambiguous"), r->flags & LD_REQ_AMBIGUOUS);
    bad |= check_flag("cut", name, cJSON_GetObjectItem(x, "cut"), r->flags & LD_REQ_CAPTURE_CUT);
    return bad;
}

static int check_counts(const run *rn, const cJSON *doc)
{
    int bad = 0;
    const char *names[] = {"lines", "request_lines", "skipped", "errors", "health_checks"};
    uint64_t got[] = {rn->stats.lines, rn->stats.request_lines, rn->stats.skipped,
                      rn->stats.errors, rn->stats.health_checks};
    for (int i = 0; i < 5; i++)
        bad |= check_int(names[i], "file", cJSON_GetObjectItem(doc, names[i]), (int64_t)got[i], -1);
    const cJSON *el = cJSON_GetObjectItem(doc, "error_lines"), *e;
    int k = 0;
    cJSON_ArrayForEach(e, el) {
        if (k >= rn->n_errs || rn->err_lines[k] != (uint64_t)e->valuedouble)
            bad |= fprintf(stderr, "  error line %d not reported\n", (int)e->valuedouble) > 0;
        k++;
    }
    const cJSON *cl = cJSON_GetObjectItem(doc, "cut_lines");
    if (cl && cJSON_GetArraySize(cl) != (int)rn->stats.cut_lines)
        bad |= fprintf(stderr, "  %llu lines cut, want %d\n", (unsigned long long)rn->stats.cut_lines,
                       cJSON_GetArraySize(cl)) > 0;
    int n_req = cJSON_GetArraySize(cJSON_GetObjectItem(doc, "requests"));
    if (rn->n_recs != n_req)
        bad |= fprintf(stderr, "  %d records, want %d\n", rn->n_recs, n_req) > 0;
    return bad;
}

static int check_fixture(const char *dir, const char *expect_name, unsigned flags)
{
    char path[2048], logp[2048];
    snprintf(path, sizeof path, "%s/%s", dir, expect_name);
    char *txt = ld_test_slurp(path);
    cJSON *doc = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!doc) {
        fprintf(stderr, "  cannot read %s\n", path);
        return 1;
    }
    snprintf(logp, sizeof logp, "%s/%s", dir, cJSON_GetObjectItem(doc, "file")->valuestring);
    run *rn = run_file(logp, flags);
    int bad = rn ? check_counts(rn, doc) : 1;
    const cJSON *x;
    if (rn) cJSON_ArrayForEach(x, cJSON_GetObjectItem(doc, "requests")) bad |= check_request(rn, x);
    if (bad) fprintf(stderr, "  ^ in %s\n", logp);
    if (rn) run_free(rn);
    cJSON_Delete(doc);
    return bad;
}

static int all_fixtures(unsigned flags)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/logs", LD_TESTDATA_DIR);
    DIR *d = opendir(dir);
    if (!d) SKIP("no fixtures in %s (run tools/gen_log_fixtures.py)", dir);
    int bad = 0, n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 12 || strcmp(de->d_name + len - 12, ".expect.json")) continue;
        bad |= check_fixture(dir, de->d_name, flags);
        n++;
    }
    closedir(d);
    CHECK(n >= 20);
    return bad;
}

static int test_pair_fixtures_counts_only(void)
{
    return all_fixtures(0);
}

static int test_pair_fixtures_keep_text(void)
{
    return all_fixtures(LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES);
}

/* An OpenAI payload is filled into its own record once and its request
 * copies the fields (ld_request_copy_openai); with only_rid the request is
 * filled again from the payload (the old way).  Both must give each record
 * the same model, messages, sampling and flags, for every fixture. */
static int same_text(const char *what, const ld_text *a, const ld_text *b)
{
    if (a->flags != b->flags || a->n_chars != b->n_chars || a->len != b->len || a->cut != b->cut ||
        !a->bytes != !b->bytes || (a->bytes && memcmp(a->bytes, b->bytes, a->len))) {
        fprintf(stderr, "  %s differs\n", what);
        return 1;
    }
    return 0;
}

static int same_str(const char *what, const char *a, const char *b)
{
    if (!a != !b || (a && strcmp(a, b))) {
        fprintf(stderr, "  %s differs: %s / %s\n", what, a ? a : "(null)", b ? b : "(null)");
        return 1;
    }
    return 0;
}

static int same_openai_fields(const ld_request *a, const ld_request *b)
{
    int bad = same_str("model", a->model, b->model);
    bad |= a->n_messages != b->n_messages || a->n_tools != b->n_tools || a->stream != b->stream;
    bad |= a->flags != b->flags || a->max_tokens != b->max_tokens || a->top_k != b->top_k || a->n != b->n;
    bad |= memcmp(&a->temperature, &b->temperature, sizeof a->temperature) != 0;
    bad |= memcmp(&a->top_p, &b->top_p, sizeof a->top_p) != 0;
    bad |= !a->chat_template_kwargs != !b->chat_template_kwargs;
    for (int64_t i = 0; !bad && i < a->n_messages; i++) {
        const ld_message *x = &a->messages[i], *y = &b->messages[i];
        bad |= same_str("role", x->role, y->role) | same_str("name", x->name, y->name);
        bad |= same_str("tool_call_id", x->tool_call_id, y->tool_call_id);
        bad |= same_text("content", &x->content, &y->content);
        bad |= same_text("reasoning_content", &x->reasoning_content, &y->reasoning_content);
        bad |= x->n_tool_calls != y->n_tool_calls || !x->tool_calls != !y->tool_calls;
        for (uint32_t k = 0; !bad && x->tool_calls && k < x->n_tool_calls; k++) {
            bad |= same_str("tool id", x->tool_calls[k].id, y->tool_calls[k].id);
            bad |= same_str("tool name", x->tool_calls[k].name, y->tool_calls[k].name);
            bad |= x->tool_calls[k].flags != y->tool_calls[k].flags;
            bad |= same_text("arguments", &x->tool_calls[k].arguments, &y->tool_calls[k].arguments);
        }
    }
    return bad;
}

static int copy_same_in_dir(const char *dir, int *joined)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int bad = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && !bad) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".log")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        run *all = run_file(path, LD_PAIR_KEEP_TEXT);
        if (!all) continue;
        for (int i = 0; i < all->n_recs && !bad; i++) {
            const ld_request *a = all->recs[i];
            if (!a->rid || !(a->seen & LD_PART_BIT(LD_PART_OPENAI)) || (a->flags & LD_REQ_BATCH)) continue;
            ld_pair_options o = {0};
            o.flags = LD_PAIR_KEEP_TEXT;
            o.only_rid = a->rid;
            run *one = run_file_opts(path, o);
            const ld_request *b = NULL;
            for (int k = 0; one && k < one->n_recs; k++)
                if (one->recs[k]->rid && !strcmp(one->recs[k]->rid, a->rid) &&
                    one->recs[k]->sub_index == a->sub_index)
                    b = one->recs[k];
            if (!b || same_openai_fields(a, b)) {
                fprintf(stderr, "  rid %s of %s\n", a->rid, path);
                bad = 1;
            }
            (*joined)++;
            if (one) run_free(one);
        }
        run_free(all);
    }
    closedir(d);
    return bad;
}

static int test_pair_openai_copy_same_as_refill(void)
{
    static const char *const dirs[] = { "logs", "replay/harness", "pd" };
    int bad = 0, joined = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", LD_TESTDATA_DIR, dirs[i]);
        bad |= copy_same_in_dir(dir, &joined);
    }
    if (!joined) SKIP("no fixtures with Receive OpenAI lines in %s", LD_TESTDATA_DIR);
    CHECK(joined >= 20);
    return bad;
}

/* ------------------------------------------------------------ real samples */

static run *corpus(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus/logs/%s", LD_SHARED_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fclose(f);
    return run_file(path, LD_PAIR_KEEP_TEXT);
}

#define CORPUS(rn, name)                                                         \
    run *rn = corpus(name);                                                      \
    if (!rn) SKIP("%s/corpus/logs/%s not found (shared dir absent)", LD_SHARED_DIR, name)

static int test_pair_corpus_01_sglang_receive(void)
{
    CORPUS(rn, "01-sglang043-receive-chat-input_ids.log");
    CHECK_EQ_INT(rn->stats.lines, 2);
    CHECK_EQ_INT(rn->stats.skipped, 1);
    CHECK_EQ_INT(rn->n_recs, 1);
    ld_request *r = rn->recs[0];
    CHECK_EQ_STR(r->rid, "ced00776101841e180bf04c8dbdc4ec2");
    CHECK_EQ_STR(r->timestamp, "2025-03-03 17:53:04");
    CHECK_EQ_INT(r->n_input_ids, 64);
    CHECK(fabs(r->temperature - 0.1) < 1e-12 && fabs(r->top_p - 0.9) < 1e-12);
    CHECK_EQ_INT(r->top_k, -1);
    CHECK(r->prompt.flags & LD_TEXT_NONE);
    CHECK_EQ_INT(r->stream, 1);
    CHECK(r->missing == LD_PART_BIT(LD_PART_FINISH) && (r->flags & LD_REQ_UNPAIRED));
    CHECK_EQ_INT(r->src[LD_PART_RECEIVE].line, 2);
    CHECK_EQ_INT(r->src[LD_PART_RECEIVE].offset, 94);
    run_free(rn);
    return 0;
}

static int test_pair_corpus_vllm(void)
{
    static const struct { const char *file, *rid; int lines; double temp; int64_t max; int64_t chars; int64_t ids; } cs[] = {
        {"02-vllm-v0.8-received-request-chat-prompt.log", "chatcmpl-b654b653c8714431a1096a3be88f1662", 2, 0.7, 32742, 145, -1},
        {"03-vllm-v0.15-received-request-no-prompt.log", "chatcmpl-a269fdcb7c6ce890", 6, 0.7, 100, -1, -1},
        {"04-vllm-kserve-received-request-multimodal.log", "chatcmpl-017ee87d69ed40e9b67198e5c5e0ee7d", 3, 0.6, 4082, 71, -1},
        {"05-vllm-v0.3-received-request-old-format.log", "cmpl-e3ab58bfc7834026a608eee91a74dc15-0", 2, 1.0, 5, -1, 5},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        CORPUS(rn, cs[i].file);
        CHECK_EQ_INT(rn->stats.lines, cs[i].lines);
        CHECK_EQ_INT(rn->stats.request_lines, 1);
        CHECK_EQ_INT(rn->stats.skipped, cs[i].lines - 1);
        CHECK_EQ_INT(rn->n_recs, 1);
        ld_request *r = rn->recs[0];
        CHECK_EQ_STR(r->rid, cs[i].rid);
        CHECK(r->engine == LD_ENGINE_VLLM);
        CHECK(fabs(r->temperature - cs[i].temp) < 1e-12);
        CHECK_EQ_INT(r->max_tokens, cs[i].max);
        CHECK_EQ_INT((r->prompt.flags & LD_TEXT_PRESENT) ? (int64_t)r->prompt.n_chars : -1, cs[i].chars);
        CHECK_EQ_INT(r->n_input_ids, cs[i].ids);
        CHECK_EQ_INT(r->missing, 0);
        run_free(rn);
    }
    return 0;
}

static int test_pair_corpus_06_health_checks(void)
{
    CORPUS(rn, "06-sglang-sparse-receive-no-prefix.log");
    CHECK_EQ_INT(rn->stats.lines, 11);
    CHECK_EQ_INT(rn->stats.request_lines, 4);
    CHECK_EQ_INT(rn->stats.health_checks, 2);
    CHECK_EQ_INT(rn->stats.skipped, 7);
    CHECK_EQ_INT(rn->n_recs, 2);
    CHECK_EQ_STR(rn->recs[0]->rid, "equjaezUEaqGxtUPuOvMuQI");
    CHECK_EQ_STR(rn->recs[1]->rid, "equjaYbfHIfcxs0PnNWj6Qs");
    CHECK_EQ_INT(rn->recs[1]->max_tokens, 166);
    CHECK_EQ_INT(rn->recs[0]->stream, 1);
    CHECK(!rn->recs[0]->timestamp);
    run_free(rn);
    return 0;
}

/* lines that start inside a record, or were cut before their rid: parse
 * errors at the byte where they stop making sense */
static int test_pair_corpus_fragments(void)
{
    static const struct { const char *file; int lines; int skipped; uint64_t offset; } cs[] = {
        {"07-sglang-level1-finish-out-meta_info-fragment.log", 1, 0, 0},
        {"09-sglang-level1-receive-tail-then-prefill.log", 3, 2, 0},
        {"10-sglang-pr3699-batch-messages-text-fragment.log", 1, 0, 1357},
        {"11-sglang-v049-receive-input_ids-fragment.log", 1, 0, 1325},
        {"12-sglang-pr3699-patched-receive-text-fragment.log", 1, 0, 534},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        CORPUS(rn, cs[i].file);
        CHECK_MSG(rn->stats.errors == 1, "%s", cs[i].file);
        CHECK_EQ_INT(rn->stats.lines, cs[i].lines);
        CHECK_EQ_INT(rn->stats.skipped, cs[i].skipped);
        CHECK_EQ_INT(rn->n_errs, 1);
        CHECK_EQ_INT(rn->err_lines[0], 1);
        CHECK_MSG(rn->err_offsets[0] == cs[i].offset, "%s: offset %llu", cs[i].file,
                  (unsigned long long)rn->err_offsets[0]);
        CHECK(rn->err_msgs[0][0] != 0);
        CHECK_EQ_INT(rn->n_recs, 0);
        run_free(rn);
    }
    return 0;
}

/* lines cut for good after their rid (the posters cut them): read up to
 * the cut, the request flagged, its rid and time the server's */
static int test_pair_corpus_cut_lines(void)
{
    static const struct { const char *file, *rid, *ts, *field; uint64_t kept; } cs[] = {
        {"08-sglang-v05-level1-receive-rid-first-fragment.log", "8eb9f6fd8c2d4d749657d26d20e8fe10",
         "2026-05-30 18:57:08", "custom", 1306},
        {"13-sglang-v03-in-out-legacy-fragment.log", "640143780ce94c81a56689020f8a5b09", NULL, "", 501},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        CORPUS(rn, cs[i].file);
        CHECK_EQ_INT(rn->stats.errors, 0);
        CHECK_EQ_INT(rn->stats.cut_lines, 1);
        CHECK_EQ_INT(rn->n_recs, 1);
        const ld_request *r = rn->recs[0];
        CHECK_EQ_STR(r->rid, cs[i].rid);
        CHECK(r->flags & LD_REQ_CAPTURE_CUT);
        if (cs[i].ts) CHECK_EQ_STR(r->timestamp, cs[i].ts);
        ld_part part = r->seen & LD_PART_BIT(LD_PART_RECEIVE) ? LD_PART_RECEIVE : LD_PART_INOUT;
        CHECK_EQ_INT(r->src[part].cut_at, cs[i].kept);
        CHECK_EQ_STR(r->src[part].cut_field, cs[i].field);
        run_free(rn);
    }
    return 0;
}


/* ------------------------------------------------------------ options */

static int feed_all(ld_pairer *p, const char *member, const char *const *lines, size_t n)
{
    int errs = 0;
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        ld_line l = {lines[i], strlen(lines[i]), i + 1, off, 0, 0, 0, NULL, 0};
        ld_line_result res;
        ld_error e;
        if (ld_pairer_feed_line(p, member, &l, &res, &e) != LD_OK) errs++;
        off += l.len + 1;
    }
    return errs;
}

static const char *const ROT_A[] = {
    "[2026-01-01 00:00:00] Receive: obj=G(rid='r1', text='hello there', sampling_params={'temperature': 0.5})",
    "[2026-01-01 00:00:01] Receive: obj=G(rid='r2', text='second', sampling_params={})",
};
static const char *const ROT_B[] = {
    "[2026-01-01 01:00:00] Finish: obj=G(rid='r1', text='hello there'), out={'text': 'hi', 'meta_info': {'finish_reason': {'type': 'stop', 'matched': 2}, 'prompt_tokens': 3}}",
    "[2026-01-01 01:00:01] Finish: obj=G(rid='r2', text='second'), out={'text': 'x', 'meta_info': {'finish_reason': {'type': 'abort', 'message': 'gone'}}}",
    "[2026-01-01 01:00:02] Receive: obj=G(rid='r3', text='third'",
};

static int test_pair_rotated_files_merge(void)
{
    run *rn = calloc(1, sizeof *rn);
    ld_pair_options o = {0};
    o.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_ERROR_RECORDS;
    o.only_rid = "r2";
    ld_pairer *p;
    ld_error e;
    CHECK(rn && ld_pairer_new(&o, take, rn, &p, &e) == LD_OK);
    CHECK_EQ_INT(feed_all(p, "s.log.2026-01-01_00", ROT_A, 2), 0);
    CHECK_EQ_INT(rn->n_recs, 0); /* nothing complete yet */
    CHECK_EQ_INT(feed_all(p, "s.log", ROT_B, 3), 0); /* the last line, cut while written: read to its cut */
    ld_pairer_finish(p, &e);
    const ld_pair_stats *st = ld_pairer_stats(p);
    CHECK_EQ_INT(st->lines, 5);
    CHECK_EQ_INT(st->request_lines, 5);
    CHECK_EQ_INT(st->errors, 0);
    CHECK_EQ_INT(st->cut_lines, 1);
    CHECK_EQ_INT(st->open, 0);
    ld_pairer_free(p);
    CHECK_EQ_INT(rn->n_recs, 3);
    ld_request *r1 = rn->recs[0], *r2 = rn->recs[1], *er = rn->recs[2];
    CHECK_EQ_STR(r1->rid, "r1");
    CHECK_EQ_STR(r1->src[LD_PART_RECEIVE].member, "s.log.2026-01-01_00");
    CHECK_EQ_STR(r1->src[LD_PART_FINISH].member, "s.log");
    CHECK_EQ_INT(r1->missing, 0);
    CHECK_EQ_STR(r1->timestamp, "2026-01-01 00:00:00");
    CHECK(r1->finish_kind == LD_FINISH_STOP && !strcmp(r1->finish_matched, "2"));
    CHECK(r1->prompt.n_chars == 11 && (r1->prompt.flags & LD_TEXT_NOT_KEPT) && !r1->prompt.bytes);
    CHECK_EQ_STR(r2->rid, "r2"); /* only_rid: texts kept for r2 only */
    CHECK(r2->prompt.bytes && !strcmp(r2->prompt.bytes, "second"));
    CHECK(r2->finish_kind == LD_FINISH_ABORT && !strcmp(r2->finish_message, "gone"));
    CHECK(!(er->flags & LD_REQ_ERROR)); /* r3: its Receive up to `text`, its Finish never came */
    CHECK_EQ_STR(er->rid, "r3");
    CHECK(er->flags & LD_REQ_CAPTURE_CUT);
    CHECK_EQ_STR(er->src[LD_PART_RECEIVE].member, "s.log");
    CHECK_EQ_INT(er->src[LD_PART_RECEIVE].line, 3);
    CHECK_EQ_INT(er->src[LD_PART_RECEIVE].cut_at, strlen(ROT_B[2]));
    CHECK_EQ_STR(er->src[LD_PART_RECEIVE].cut_field, "text");
    CHECK(er->missing & LD_PART_BIT(LD_PART_FINISH));
    run_free(rn);
    return 0;
}

static int test_pair_max_open_evicts_oldest(void)
{
    static const char *const L[] = {
        "Receive: obj=G(rid='a')", "Receive: obj=G(rid='b')", "Receive: obj=G(rid='c')",
        "Finish: obj=G(rid='c'), out={}",
    };
    run *rn = calloc(1, sizeof *rn);
    ld_pair_options o = {0};
    o.max_open = 2;
    ld_pairer *p;
    ld_error e;
    CHECK(rn && ld_pairer_new(&o, take, rn, &p, &e) == LD_OK);
    feed_all(p, "m", L, 4);
    CHECK_EQ_INT(rn->n_recs, 2); /* 'a' evicted when 'c' opened, then 'c' finished */
    CHECK_EQ_STR(rn->recs[0]->rid, "a");
    CHECK(rn->recs[0]->missing == LD_PART_BIT(LD_PART_FINISH));
    CHECK_EQ_STR(rn->recs[1]->rid, "c");
    CHECK_EQ_INT(ld_pairer_stats(p)->max_open_seen, 3);
    ld_pairer_free(p); /* 'b' freed without being emitted */
    run_free(rn);
    return 0;
}

static int test_pair_openai_join_confirmed(void)
{
    static const char *const L[] = {
        ("Receive OpenAI: obj={'model': 'qwen', 'messages': [{'role': 'system', 'content': 'S'}, "
         "{'role': 'user', 'content': [{'type': 'text', 'text': 'What is 2+2?'}]}], 'tools': [{}, {}], "
         "'chat_template_kwargs': {'enable_thinking': False}, 'temperature': 0.3}"),
        "Receive: obj=G(rid='q', text=None, input_ids=[1, 2, 3])",
        ("Finish: obj=G(rid='q', text='<s>S</s><u>What is 2+2?</u>', input_ids=[1, 2, 3]), "
         "out={'text': '4', 'output_ids': [7], 'meta_info': {'completion_tokens': 1, 'e2e_latency': 0.5}}"),
    };
    run *rn = calloc(1, sizeof *rn);
    ld_pair_options o = {0};
    o.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES;
    ld_pairer *p;
    ld_error e;
    CHECK(rn && ld_pairer_new(&o, take, rn, &p, &e) == LD_OK);
    CHECK_EQ_INT(feed_all(p, "m", L, 3), 0);
    CHECK_EQ_INT(rn->n_recs, 1);
    ld_request *r = rn->recs[0];
    CHECK_EQ_STR(r->model, "qwen");
    CHECK_EQ_INT(r->n_messages, 2);
    CHECK(r->messages[1].content.flags & LD_TEXT_PARTS);
    CHECK_EQ_STR(r->messages[1].content.bytes, "What is 2+2?");
    CHECK_EQ_INT(r->n_tools, 2);
    CHECK(r->chat_template_kwargs && r->chat_template_kwargs->kind == LD_PY_DICT);
    CHECK(fabs(r->temperature - 0.3) < 1e-12);
    CHECK(!(r->flags & (LD_REQ_UNCONFIRMED | LD_REQ_AMBIGUOUS | LD_REQ_UNPAIRED)));
    CHECK(r->openai_obj && r->receive_obj && r->finish_obj && r->out);
    CHECK(fabs(r->e2e_latency - 0.5) < 1e-12);
    CHECK_EQ_INT(r->src[LD_PART_OPENAI].line, 1);
    ld_pairer_free(p);
    run_free(rn);
    return 0;
}

/* vLLM's prompt_token_ids and output_token_ids (the complete response
 * line's, not a streaming delta's) as CPython reads them
 * (tools/gen_vllm_ids.py); ids as many as --max-log-len are refused
 * as maybe cut. */
static int check_ids(const char *what, const char *rid, ld_status st, const int32_t *ids, size_t n,
                     const cJSON *want)
{
    if (!want) {
        CHECK_MSG(st == LD_ERR_MISMATCH, "%s %s: want no ids, got status %d", rid, what, (int)st);
        return 0;
    }
    CHECK_MSG(st == LD_OK, "%s %s: status %d", rid, what, (int)st);
    CHECK_MSG((int)n == cJSON_GetArraySize(want), "%s %s: %zu ids, want %d", rid, what, n, cJSON_GetArraySize(want));
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint, "%s %s[%zu]", rid, what, i);
    return 0;
}

static int test_pair_vllm_ids(void)
{
    char *js = ld_test_slurp(LD_TESTDATA_DIR "/logs/vllm-ids.oracle.json");
    cJSON *ex = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(ex);
    int n_reqs = 0;
    for (const cJSON *f = cJSON_GetObjectItem(ex, "logs")->child; f; f = f->next) {
        char path[512];
        snprintf(path, sizeof path, LD_TESTDATA_DIR "/logs/%s", f->string);
        run *rn = run_file(path, LD_PAIR_KEEP_VALUES);
        CHECK(rn);
        for (const cJSON *w = f->child; w; w = w->next, n_reqs++) {
            cJSON rid = {.type = cJSON_String, .valuestring = w->string};
            const ld_request *r = find_rec(rn, &rid, -1);
            CHECK_MSG(r, "%s: no request %s", f->string, w->string);
            int32_t *ids = NULL;
            size_t n = 0;
            ld_error e;
            ld_status st = ld_request_input_ids(r, &ids, &n, &e);
            int bad = check_ids("input_ids", w->string, st, ids, n, cJSON_GetObjectItem(w, "input_ids"));
            free(ids);
            ids = NULL;
            st = ld_request_output_ids(r, &ids, &n, &e);
            bad |= check_ids("output_ids", w->string, st, ids, n, cJSON_GetObjectItem(w, "output_ids"));
            free(ids);
            CHECK(!bad);
        }
        run_free(rn);
    }
    CHECK(n_reqs == 12);
    /* --max-log-len 19: chatcmpl-v0150's 19 ids may be cut, v0152's 58 too */
    ld_pair_options o = {0};
    o.flags = LD_PAIR_KEEP_VALUES;
    o.vllm_max_log_len = 19;
    run *rn = run_file_opts(LD_TESTDATA_DIR "/logs/vllm-v0.15.log", o);
    CHECK(rn);
    cJSON rid = {.type = cJSON_String, .valuestring = "chatcmpl-v0150"};
    const ld_request *r = find_rec(rn, &rid, -1);
    CHECK(r && (r->flags & LD_REQ_IDS_HEAD_ONLY));
    int32_t *ids = NULL;
    size_t n = 0;
    ld_error e;
    CHECK_EQ_INT(ld_request_input_ids(r, &ids, &n, &e), LD_ERR_TRUNCATED);
    CHECK(ids == NULL && strstr(e.msg, "max-log-len"));
    run_free(rn);
    cJSON_Delete(ex);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_pair_openai_copy_same_as_refill),
    LD_CASE(test_pair_rotated_files_merge),
    LD_CASE(test_pair_max_open_evicts_oldest),
    LD_CASE(test_pair_openai_join_confirmed),
    LD_CASE(test_pair_fixtures_counts_only),
    LD_CASE(test_pair_fixtures_keep_text),
    LD_CASE(test_pair_corpus_01_sglang_receive),
    LD_CASE(test_pair_corpus_vllm),
    LD_CASE(test_pair_vllm_ids),
    LD_CASE(test_pair_corpus_06_health_checks),
    LD_CASE(test_pair_corpus_fragments),
    LD_CASE(test_pair_corpus_cut_lines),
};

LD_TEST_MAIN(cases)
