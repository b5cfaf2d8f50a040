/* test_npy.c - the .npy writer (replay/run/npy.h) and the layer dumps of
 * `logdiff replay --dump-layers` (replay/run/replay.h): headers byte for byte as
 * numpy 2.4.6 writes them (the literals below are np.lib.format's
 * write_array_header_1_0 output, which np.save writes, pasted), data
 * little-endian after a 64-aligned header; the writer's errors; the position
 * lists (parse, resolve: ranges, negative from the end, order, repeats, the
 * errors); the dumped rows bitwise equal to one whole-sequence evaluation of
 * the engine at any chunk boundary, the replay's numbers unchanged by
 * dumping; the files of a dump directory.  The hidden states themselves are
 * checked against transformers in tests/cli/replay_dump.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/backend/backend.h"
#include "engine/models/dense/forward.h"
#include "tests/support/ld_test.h"
#include "engine/models/dense/model.h"
#include "replay/run/npy.h"
#include "replay/run/replay.h"

#define MODEL LD_TESTDATA_DIR "/models/qwen3"

/* ------------------------------------------------------------ headers */

typedef struct hcase {
    const char *descr;
    int ndim;
    size_t shape[8];
    const char *want; /* numpy's bytes */
    size_t want_len;
} hcase;

#define H(s) s, sizeof(s) - 1
static const hcase hcases[] = {
    { "<f4", 2, { 6, 64 }, H("\x93""NUMPY\x01""\x00""v\x00""{'descr': '<f4', 'fortran_order': False, 'shape': (6, 64), }                                                         \n") },
    { "<i8", 1, { 6 }, H("\x93""NUMPY\x01""\x00""v\x00""{'descr': '<i8', 'fortran_order': False, 'shape': (6,), }                                                            \n") },
    { "<f4", 0, { 0 }, H("\x93""NUMPY\x01""\x00""v\x00""{'descr': '<f4', 'fortran_order': False, 'shape': (), }                                                              \n") },
    { "<f4", 2, { 0, 64 }, H("\x93""NUMPY\x01""\x00""v\x00""{'descr': '<f4', 'fortran_order': False, 'shape': (0, 64), }                                                         \n") },
    { "<f4", 3, { 2, 3, 4 }, H("\x93""NUMPY\x01""\x00""v\x00""{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }                                                       \n") },
    { "<i8", 8, { 100000000000ULL, 2, 3, 4, 5, 6, 7, 8 }, H("\x93""NUMPY\x01""\x00""v\x00""{'descr': '<i8', 'fortran_order': False, 'shape': (100000000000, 2, 3, 4, 5, 6, 7, 8), }                             \n") },
    { "|u1", 1, { 3 }, H("\x93""NUMPY\x01""\x00""v\x00""{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }                                                            \n") },
    { "<f4", 8, { 12345678901234567ULL, 12345678901234567ULL, 12345678901234567ULL, 12345678901234567ULL,
                  12345678901234567ULL, 12345678901234567ULL, 12345678901234567ULL, 12345678901234567ULL },
      H("\x93""NUMPY\x01""\x00""\xf6""\x00""{'descr': '<f4', 'fortran_order': False, 'shape': (12345678901234567, 12345678901234567, 12345678901234567, 12345678901234567, 12345678901234567, 12345678901234567, 12345678901234567, 12345678901234567), }                                        \n") },
};

static int test_npy_header_as_numpy_writes_it(void)
{
    for (size_t i = 0; i < sizeof hcases / sizeof hcases[0]; i++) {
        const hcase *c = &hcases[i];
        char buf[LD_NPY_HEADER_MAX];
        size_t len = 0;
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_npy_header(c->descr, c->shape, c->ndim, buf, sizeof buf, &len, &err) == LD_OK, "%zu: %s", i,
                  err.msg);
        CHECK_MSG(len == c->want_len && memcmp(buf, c->want, len) == 0, "case %zu: %zu bytes, %.*s", i, len,
                  (int)len, buf);
        CHECK(len % 64 == 0);
    }
    return 0;
}

static int test_npy_header_errors(void)
{
    char buf[LD_NPY_HEADER_MAX];
    size_t len = 1, shape[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    ld_error err;
    ld_error_clear(&err);
    CHECK_EQ_INT(ld_npy_header("<f4", shape, 9, buf, sizeof buf, &len, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(len, 0);
    CHECK_EQ_INT(ld_npy_header("<f4", shape, -1, buf, sizeof buf, &len, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_npy_header("f'4", shape, 1, buf, sizeof buf, &len, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_npy_header("", shape, 1, buf, sizeof buf, &len, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_npy_header("<f4", shape, 2, buf, 127, &len, &err), LD_ERR_LIMIT);
    CHECK_EQ_INT(ld_npy_header("<f4", shape, 2, buf, 128, &len, &err), LD_OK);
    CHECK_EQ_INT(len, 128);
    return 0;
}

/* ------------------------------------------------------------ files */

static char tmpdir[64];

static const char *tmp_path(const char *name, char *buf, size_t cap)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/ld_test_npy.XXXXXX");
        if (!mkdtemp(tmpdir)) return NULL;
    }
    snprintf(buf, cap, "%s/%s", tmpdir, name);
    return buf;
}

static void rm_tree(void)
{
    if (!tmpdir[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", tmpdir);
    tmpdir[0] = 0;
}

static uint64_t le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static int test_npy_write_f32_and_i64(void)
{
    char path[256];
    CHECK(tmp_path("m.npy", path, sizeof path));
    float m[3][5];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 5; c++) m[r][c] = (float)(r * 10 + c) - 0.25f * (float)c;
    m[2][4] = -INFINITY;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_npy_write_f32(path, &m[0][0], 3, 5, &err) == LD_OK, "%s", err.msg);
    size_t n = 0;
    unsigned char *b = ld_test_read_bytes(path, &n);
    CHECK(b && n == 128 + 15 * 4);
    const char *head = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }";
    CHECK(memcmp(b, head, strlen(head)) == 0 && b[127] == '\n' && b[126] == ' ');
    for (int i = 0; i < 15; i++) {
        uint32_t bits = (uint32_t)le(b + 128 + 4 * i, 4), want;
        memcpy(&want, &m[i / 5][i % 5], 4);
        CHECK_MSG(bits == want, "element %d", i);
    }
    free(b);

    int64_t v[4] = { 0, -1, 25, INT64_MIN };
    CHECK(tmp_path("v.npy", path, sizeof path));
    CHECK_MSG(ld_npy_write_i64(path, v, 4, &err) == LD_OK, "%s", err.msg);
    b = ld_test_read_bytes(path, &n);
    CHECK(b && n == 128 + 32);
    CHECK(memcmp(b + 10, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", 57) == 0);
    for (int i = 0; i < 4; i++) CHECK((int64_t)le(b + 128 + 8 * i, 8) == v[i]);
    free(b);

    CHECK(tmp_path("empty.npy", path, sizeof path));
    CHECK(ld_npy_write_f32(path, NULL, 0, 64, &err) == LD_OK);
    b = ld_test_read_bytes(path, &n);
    CHECK(n == 128 && b && memcmp(b + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 64), }", 60) == 0);
    free(b);
    rm_tree();
    return 0;
}

static int test_npy_write_errors(void)
{
    float x = 1;
    size_t shape[1] = { 1 };
    ld_error err;
    ld_error_clear(&err);
    CHECK_EQ_INT(ld_npy_write_f32("/nonexistent-dir/x.npy", &x, 1, 1, &err), LD_ERR_IO);
    CHECK_MSG(strstr(err.msg, "cannot write '/nonexistent-dir/x.npy'") && strstr(err.msg, "No such file"), "%s",
              err.msg);
    CHECK_EQ_INT(ld_npy_write("/tmp/unused.npy", ">f4", shape, 1, &x, 4, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_npy_write("/tmp/unused.npy", "<f4", shape, 1, &x, 3, &err), LD_ERR_USAGE);
    CHECK_EQ_INT(ld_npy_write("/tmp/unused.npy", "<f4", shape, 1, NULL, 4, &err), LD_ERR_USAGE);
    size_t huge[2] = { SIZE_MAX / 2, 4 };
    CHECK_EQ_INT(ld_npy_write("/tmp/unused.npy", "<f4", huge, 2, &x, 4, &err), LD_ERR_LIMIT);
    CHECK(access("/tmp/unused.npy", F_OK) != 0);
    return 0;
}

/* ------------------------------------------------------------ position lists */

static int parse_ok(const char *list, const int64_t *want, size_t n_want)
{
    ld_replay_positions p;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_replay_positions_parse(list, &p, &err) == LD_OK, "'%s': %s", list, err.msg);
    CHECK_MSG(p.n * 2 == n_want, "'%s': %zu ranges", list, p.n);
    for (size_t i = 0; i < p.n; i++)
        CHECK_MSG(p.v[i].first == want[2 * i] && p.v[i].last == want[2 * i + 1], "'%s' range %zu: %lld-%lld", list,
                  i, (long long)p.v[i].first, (long long)p.v[i].last);
    ld_replay_positions_free(&p);
    return 0;
}

static int parse_bad(const char *list, const char *msg_part, uint64_t offset)
{
    ld_replay_positions p = { (ld_replay_range *)1, 7 };
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_replay_positions_parse(list, &p, &err) == LD_ERR_SYNTAX, "'%s' accepted", list);
    CHECK(p.v == NULL && p.n == 0);
    CHECK_MSG(strstr(err.msg, msg_part) && err.offset == offset, "'%s': %s (offset %llu)", list, err.msg,
              (unsigned long long)err.offset);
    return 0;
}

static int test_npy_positions_parse(void)
{
    if (parse_ok("0,5,10-20", (const int64_t[]){ 0, 0, 5, 5, 10, 20 }, 6)) return 1;
    if (parse_ok("-1", (const int64_t[]){ -1, -1 }, 2)) return 1;
    if (parse_ok("-3--1", (const int64_t[]){ -3, -1 }, 2)) return 1;
    if (parse_ok("5--1", (const int64_t[]){ 5, -1 }, 2)) return 1;
    if (parse_ok(" 1 , 2 - 3\t,4", (const int64_t[]){ 1, 1, 2, 3, 4, 4 }, 6)) return 1;
    if (parse_ok("123456789012345678", (const int64_t[]){ 123456789012345678LL, 123456789012345678LL }, 2)) return 1;
    if (parse_bad("", "expected a number at byte 0 (the end)", 0)) return 1;
    if (parse_bad(",", "expected a number at byte 0", 0)) return 1;
    if (parse_bad("1,", "expected a number at byte 2 (the end)", 2)) return 1;
    if (parse_bad("1,,2", "expected a number at byte 2", 2)) return 1;
    if (parse_bad("x", "expected a number at byte 0", 0)) return 1;
    if (parse_bad("1-", "expected a number at byte 2", 2)) return 1;
    if (parse_bad("--1", "expected a number at byte 1", 1)) return 1;
    if (parse_bad("1-2-3", "unexpected '-' at byte 3", 3)) return 1;
    if (parse_bad("1x", "unexpected 'x' at byte 1", 1)) return 1;
    if (parse_bad("1 2", "unexpected '2' at byte 2", 2)) return 1;
    if (parse_bad("1234567890123456789", "too long", 0)) return 1;
    if (parse_bad("3,-0001234567890123456789", "number at byte 2 too long", 2)) return 1;
    return 0;
}

static int resolve(const char *list, size_t L, int64_t **pos, size_t *n, ld_error *err)
{
    ld_replay_positions p = { NULL, 0 };
    if (list && ld_replay_positions_parse(list, &p, err) != LD_OK) return -1;
    ld_status st = ld_replay_positions_resolve(list ? &p : NULL, L, pos, n, err);
    ld_replay_positions_free(&p);
    return (int)st;
}

static int resolve_ok(const char *list, size_t L, const int64_t *want, size_t n_want)
{
    int64_t *pos = NULL;
    size_t n = 0;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(resolve(list, L, &pos, &n, &err) == LD_OK, "'%s': %s", list ? list : "(all)", err.msg);
    CHECK_MSG(n == n_want, "'%s': %zu positions", list ? list : "(all)", n);
    for (size_t i = 0; i < n; i++) CHECK_MSG(pos[i] == want[i], "'%s' [%zu] = %lld", list, i, (long long)pos[i]);
    free(pos);
    return 0;
}

static int resolve_bad(const char *list, size_t L, const char *msg_part)
{
    int64_t *pos = (int64_t *)1;
    size_t n = 9;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(resolve(list, L, &pos, &n, &err) == LD_ERR_USAGE, "'%s' accepted", list);
    CHECK(pos == NULL && n == 0);
    CHECK_MSG(strstr(err.msg, msg_part), "'%s': %s", list, err.msg);
    return 0;
}

static int test_npy_positions_resolve(void)
{
    if (resolve_ok("0,5,10-12", 26, (const int64_t[]){ 0, 5, 10, 11, 12 }, 5)) return 1;
    if (resolve_ok("-1", 26, (const int64_t[]){ 25 }, 1)) return 1;
    if (resolve_ok("-26,25", 26, (const int64_t[]){ 0, 25 }, 2)) return 1;
    if (resolve_ok("-3--1,0", 26, (const int64_t[]){ 0, 23, 24, 25 }, 4)) return 1;
    if (resolve_ok("3-5,4-6,5,-21", 26, (const int64_t[]){ 3, 4, 5, 6 }, 4)) return 1;
    if (resolve_ok("2-2", 3, (const int64_t[]){ 2 }, 1)) return 1;
    if (resolve_ok(NULL, 4, (const int64_t[]){ 0, 1, 2, 3 }, 4)) return 1;
    if (resolve_ok(NULL, 0, NULL, 0)) return 1;
    if (resolve_bad("0,26", 26, "position 26 is outside the replayed sequence of 26 positions (0 to 25, or -26 to -1")) return 1;
    if (resolve_bad("-27", 26, "position -27 is outside the replayed sequence of 26 positions")) return 1;
    if (resolve_bad("10-5", 26, "range 10-5 runs backwards (positions 10 to 5)")) return 1;
    if (resolve_bad("5--22", 26, "range 5--22 runs backwards (positions 5 to 4)")) return 1;
    if (resolve_bad("0", 0, "position 0 is outside the replayed sequence of 0 positions")) return 1;
    if (resolve_bad("123456789012345678", 26, "position 123456789012345678 is outside")) return 1;
    if (resolve_bad("-123456789012345678", 26, "position -123456789012345678 is outside")) return 1;
    return 0;
}

/* ------------------------------------------------------------ dumps on the tiny Qwen3 */

/* A 70-token sequence of the tiny model (vocabulary 300): a prompt of np
 * ids, then an output. */
static void make_seq(int32_t *seq, size_t n)
{
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        seq[i] = (int32_t)((x >> 8) % 300);
    }
}

/* The engine's hidden states of the whole sequence in one call:
 * [n_layers + 2][T][hidden]. */
static float *whole(const int32_t *seq, int T, int *out_planes, int *out_D)
{
    ld_model *m = NULL;
    ld_backend *be = NULL;
    ld_session *s = NULL;
    ld_error err;
    float *h = NULL;
    if (ld_model_open(MODEL, &m, &err) != LD_OK) return NULL;
    *out_planes = m->cfg.n_layers + 2;
    *out_D = m->cfg.hidden;
    if (ld_backend_cpu_create(2, &be, &err) == LD_OK && ld_session_create(m, be, T, 64, &s, &err) == LD_OK) {
        h = malloc((size_t)*out_planes * (size_t)T * (size_t)*out_D * sizeof *h);
        if (h && ld_session_eval(s, seq, T, NULL, h, &err) != LD_OK) {
            free(h);
            h = NULL;
        }
    }
    ld_session_destroy(s);
    ld_backend_destroy(be);
    ld_model_close(m);
    return h;
}

/* seq [T] made, the engine's hidden states of it (whole(); NULL when the
 * model cannot run) and *e the replay engine on cpu (NULL on failure) */
static float *whole_and_engine(int32_t *seq, int T, int *planes, int *D, ld_replay_engine **e)
{
    make_seq(seq, (size_t)T);
    float *ref = whole(seq, T, planes, D);
    ld_error err;
    if (ref && ld_replay_engine_open(MODEL, "cpu", 2, e, &err) != LD_OK) *e = NULL;
    return ref;
}

/* Each dumped row equals the whole-sequence evaluation's, bit for bit. */
static int rows_match(const ld_replay_dump *d, const float *ref, int planes, int D, size_t T)
{
    CHECK(d->n_layers + 2 == planes && d->hidden == D);
    for (int k = 0; k < planes; k++)
        for (size_t i = 0; i < d->n_pos; i++) {
            const float *got = d->rows + ((size_t)k * d->n_pos + i) * (size_t)D;
            const float *want = ref + ((size_t)k * T + (size_t)d->pos[i]) * (size_t)D;
            CHECK_MSG(memcmp(got, want, (size_t)D * sizeof *got) == 0, "plane %d position %lld", k,
                      (long long)d->pos[i]);
        }
    return 0;
}

static int test_npy_dump_rows_as_whole_sequence(void)
{
    enum { NP = 40, NO = 30, T = NP + NO };
    int32_t seq[T];
    int planes = 0, D = 0;
    ld_replay_engine *e = NULL;
    float *ref = whole_and_engine(seq, T, &planes, &D, &e);
    if (!ref) SKIP("cannot run %s", MODEL);
    CHECK_MSG(e, "cannot open %s on cpu", MODEL);
    ld_error err;
    ld_error_clear(&err);
    ld_replay_result plain, res;
    CHECK(ld_replay_ids(e, seq, NP, seq + NP, NO, NULL, NULL, &plain, &err) == LD_OK);
    /* every position (chunks of 32: the prompt's 39, the output's 30, the last one), then
     * positions at the chunk edges */
    const char *lists[] = { NULL, "0,31-33,38-40,63-64,-2,-1", "-1", "39" };
    for (size_t li = 0; li < sizeof lists / sizeof lists[0]; li++) {
        ld_replay_positions want = { NULL, 0 };
        CHECK(!lists[li] || ld_replay_positions_parse(lists[li], &want, &err) == LD_OK);
        ld_replay_dump d = { .want = &want };
        CHECK_MSG(ld_replay_ids_dump(e, seq, NP, seq + NP, NO, NULL, &d, &res, &err) == LD_OK, "%s", err.msg);
        CHECK(d.seq_len == T && d.n_prompt == NP);
        CHECK(lists[li] || d.n_pos == T);
        for (size_t i = 0; i < d.n_pos; i++) CHECK(d.tokens[i] == seq[d.pos[i]]);
        if (rows_match(&d, ref, planes, D, T)) return 1;
        /* dumping changes no number of the replay */
        CHECK(res.verdict == plain.verdict && res.n_output == NO);
        for (size_t i = 0; i < NO; i++)
            CHECK(memcmp(&res.pos[i].logprob, &plain.pos[i].logprob, sizeof(double)) == 0 &&
                  res.pos[i].rank == plain.pos[i].rank && res.pos[i].top1 == plain.pos[i].top1);
        CHECK(res.n_greedy == plain.n_greedy &&
              (res.n_greedy == 0 || memcmp(res.greedy, plain.greedy, res.n_greedy * sizeof *res.greedy) == 0));
        ld_replay_dump_free(&d);
        CHECK(d.rows == NULL && d.want == &want);
        ld_replay_positions_free(&want);
        ld_replay_result_free(&res);
    }
    /* no output: the prompt alone */
    ld_replay_positions want = { NULL, 0 };
    ld_replay_dump d = { .want = &want };
    CHECK(ld_replay_ids_dump(e, seq, NP, NULL, 0, NULL, &d, &res, &err) == LD_OK);
    CHECK(res.verdict == LD_REPLAY_NO_OUTPUT && d.seq_len == NP && d.n_pos == NP);
    if (rows_match(&d, ref, planes, D, T)) return 1;
    ld_replay_dump_free(&d);
    ld_replay_result_free(&res);
    /* a position outside: an error before anything runs, the dump left empty */
    CHECK(ld_replay_positions_parse("70", &want, &err) == LD_OK);
    CHECK_EQ_INT(ld_replay_ids_dump(e, seq, NP, seq + NP, NO, NULL, &d, &res, &err), LD_ERR_USAGE);
    CHECK_MSG(strstr(err.msg, "position 70 is outside the replayed sequence of 70 positions"), "%s", err.msg);
    CHECK(d.rows == NULL && d.pos == NULL && res.pos == NULL);
    ld_replay_positions_free(&want);
    ld_replay_result_free(&plain);
    ld_replay_engine_close(e);
    free(ref);
    return 0;
}

/* A dump that keeps planes [lo, hi] and the state entering a layer (what
 * --check-layers keeps): those rows of the whole sequence's planes, bit
 * for bit, the state (one stream here) plane `layer`; bad ranges refused
 * before anything runs; the .npy writer refuses a partial dump. */
static int test_npy_dump_some_planes(void)
{
    enum { NP = 20, NO = 20, T = NP + NO };
    int32_t seq[T];
    int planes = 0, D = 0;
    ld_replay_engine *e = NULL;
    float *ref = whole_and_engine(seq, T, &planes, &D, &e);
    if (!ref) SKIP("cannot run %s", MODEL);
    CHECK_MSG(e, "cannot open %s on cpu", MODEL);
    ld_error err;
    ld_error_clear(&err);
    ld_replay_result res;
    for (int lo = 0; lo < planes; lo++)
        for (int hi = lo; hi < planes; hi++) {
            int layer = lo < planes - 1 ? lo : 0; /* a state is entering 0 .. n_layers */
            ld_replay_dump d = { .some_planes = 1, .plane_lo = lo, .plane_hi = hi, .want_state = 1,
                                 .state_layer = layer };
            CHECK_MSG(ld_replay_ids_dump(e, seq, NP, seq + NP, NO, NULL, &d, &res, &err) == LD_OK, "%s", err.msg);
            CHECK(d.n_pos == T && d.state_width == D && d.plane_lo == lo && d.plane_hi == hi);
            for (int k = lo; k <= hi; k++)
                CHECK_MSG(!memcmp(d.rows + (size_t)(k - lo) * T * (size_t)D, ref + (size_t)k * T * (size_t)D,
                                  (size_t)T * (size_t)D * sizeof *ref),
                          "planes %d-%d: plane %d", lo, hi, k);
            CHECK_MSG(!memcmp(d.state, ref + (size_t)layer * T * (size_t)D, (size_t)T * (size_t)D * sizeof *ref),
                      "the state entering layer %d", layer);
            if (lo > 0 || hi < planes - 1) {
                CHECK_EQ_INT(ld_replay_dump_write("/nonexistent", &d, e, NULL, &err), LD_ERR_USAGE);
                CHECK_MSG(strstr(err.msg, "the files hold every plane"), "%s", err.msg);
            }
            ld_replay_dump_free(&d);
            CHECK(d.rows == NULL && d.state == NULL && d.some_planes && d.plane_lo == lo && d.want_state == 1);
            ld_replay_result_free(&res);
        }
    ld_replay_dump bad[] = { { .some_planes = 1, .plane_lo = 2, .plane_hi = 1 },
                             { .some_planes = 1, .plane_hi = planes },
                             { .want_state = 1, .state_layer = planes - 1 } };
    const char *msgs[] = { "planes 2-1", "the model has planes 0-3", "the state entering layer 3" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(ld_replay_ids_dump(e, seq, NP, seq + NP, NO, NULL, &bad[i], &res, &err), LD_ERR_USAGE);
        CHECK_MSG(strstr(err.msg, msgs[i]), "%s", err.msg);
        CHECK(bad[i].rows == NULL && bad[i].state == NULL);
    }
    ld_replay_engine_close(e);
    free(ref);
    return 0;
}

static int test_npy_dump_files(void)
{
    char name[48];
    CHECK_EQ_STR(ld_replay_dump_file(0, 2, name, sizeof name), "embed.npy");
    CHECK_EQ_STR(ld_replay_dump_file(1, 2, name, sizeof name), "layer_00.npy");
    CHECK_EQ_STR(ld_replay_dump_file(2, 2, name, sizeof name), "layer_01.npy");
    CHECK_EQ_STR(ld_replay_dump_file(3, 2, name, sizeof name), "final_norm.npy");
    CHECK_EQ_STR(ld_replay_dump_file(100, 100, name, sizeof name), "layer_99.npy");
    CHECK_EQ_STR(ld_replay_dump_file(1, 101, name, sizeof name), "layer_000.npy");
    CHECK_EQ_STR(ld_replay_dump_file(101, 101, name, sizeof name), "layer_100.npy");

    ld_replay_engine *e = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_replay_engine_open(MODEL, "cpu", 1, &e, &err) != LD_OK) SKIP("cannot open %s: %s", MODEL, err.msg);
    int32_t seq[20];
    make_seq(seq, 20);
    ld_replay_positions want = { NULL, 0 };
    CHECK(ld_replay_positions_parse("2,-1", &want, &err) == LD_OK);
    ld_replay_dump d = { .want = &want };
    ld_replay_result res;
    CHECK(ld_replay_ids_dump(e, seq, 12, seq + 12, 8, NULL, &d, &res, &err) == LD_OK);
    char dir[256], path[300];
    CHECK(tmp_path("dump", dir, sizeof dir));
    CHECK_MSG(ld_replay_dump_mkdir(dir, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_replay_dump_mkdir(dir, &err) == LD_OK, "exists: %s", err.msg);
    CHECK_MSG(ld_replay_dump_write(dir, &d, e, "r-1", &err) == LD_OK, "%s", err.msg);
    const char *files[] = { "embed.npy", "layer_00.npy", "layer_01.npy", "final_norm.npy", "positions.npy",
                            "tokens.npy", "manifest.json" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        size_t n = 0;
        unsigned char *b = i < 6 ? ld_test_read_bytes(path, &n) : (unsigned char *)ld_test_slurp(path);
        CHECK_MSG(b, "%s missing", files[i]);
        if (i < 4) {
            CHECK(n == 128 + 2 * 64 * 4 && memcmp(b + 10 + 50, "(2, 64), }", 10) == 0);
            CHECK(memcmp(b + 128, d.rows + i * 2 * 64, 2 * 64 * 4) == 0);
        } else if (i < 6) {
            CHECK(n == 128 + 16 && (int64_t)le(b + 128, 8) == (i == 4 ? 2 : seq[2]));
            CHECK((int64_t)le(b + 136, 8) == (i == 4 ? 19 : seq[19]));
        } else {
            CHECK(strstr((char *)b, "\"logdiff-layer-dump\"") && strstr((char *)b, "\"r-1\""));
        }
        free(b);
    }
    /* errors: not a directory, no parent, unwritable file */
    snprintf(path, sizeof path, "%s/embed.npy", dir);
    CHECK_EQ_INT(ld_replay_dump_mkdir(path, &err), LD_ERR_IO);
    CHECK_MSG(strstr(err.msg, "exists and is not a directory"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/no/such", dir);
    CHECK_EQ_INT(ld_replay_dump_mkdir(path, &err), LD_ERR_IO);
    CHECK_MSG(strstr(err.msg, "cannot create directory"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/tokens.npy", dir);
    CHECK(remove(path) == 0 && mkdir(path, 0777) == 0);
    CHECK_EQ_INT(ld_replay_dump_write(dir, &d, e, NULL, &err), LD_ERR_IO);
    CHECK_MSG(strstr(err.msg, "tokens.npy"), "%s", err.msg);
    ld_replay_dump_free(&d);
    ld_replay_positions_free(&want);
    ld_replay_result_free(&res);
    ld_replay_engine_close(e);
    rm_tree();
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_npy_header_as_numpy_writes_it),
    LD_CASE(test_npy_header_errors),
    LD_CASE(test_npy_write_f32_and_i64),
    LD_CASE(test_npy_write_errors),
    LD_CASE(test_npy_positions_parse),
    LD_CASE(test_npy_positions_resolve),
    LD_CASE(test_npy_dump_rows_as_whole_sequence),
    LD_CASE(test_npy_dump_some_planes),
    LD_CASE(test_npy_dump_files),
};

LD_TEST_MAIN(cases)
