/* fixtures.h - what the engine tests share to read the tiny models'
 * reference tensors (testdata/models/<name>/ref-*.f32, written by the
 * tools/gen_tiny_*.py generators) and compare with them, their random
 * numbers, and the DeepSeek sessions' host path. */
#ifndef LD_TEST_ENGINE_FIXTURES_H
#define LD_TEST_ENGINE_FIXTURES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/backend/backend.h"
#include "engine/tp/tp_forward.h"
#include "ld_test.h"

/* n little-endian floats of dir/file, malloc'd; NULL when unreadable or short */
/* the tests' reproducible random numbers (xorshift64, one stream per test
 * program) */
static inline uint32_t next_u32(void)
{
    static uint64_t rng = 0x9E3779B97F4A7C15ull;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static inline float *load_f32(const char *dir, const char *file, size_t n)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *p = malloc(n * sizeof *p);
    if (p && fread(p, sizeof *p, n, f) != n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    return p;
}

/* sqrt(sum (a-b)^2 / sum b^2), and the largest |a-b| */
static inline double nerr(const float *a, const float *b, size_t n, double *maxabs)
{
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
        if (fabs(d) > mx) mx = fabs(d);
    }
    if (maxabs) *maxabs = mx;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The op table's optional entries that stand for several of its calls in
 * one (each "the bits of" the calls it replaces: ds4_route_moe,
 * ds4_index_attention, matmul_blockdiag, hc_pre_norm, matmul_fanout,
 * rmsnorm2, matmul_hc_post, ds4_route_moe_post) set NULL in *ops,
 * so that a session makes those calls: the tests that compare a backend
 * with and without them. */
static inline void ld_test_unfuse(ld_backend_ops *ops)
{
    ops->ds4_route_moe = NULL;
    ops->ds4_index_attention = NULL;
    ops->matmul_blockdiag = NULL;
    ops->hc_pre_norm = NULL;
    ops->matmul_fanout = NULL;
    ops->rmsnorm2 = NULL;
    ops->matmul_hc_post = NULL;
    ops->ds4_route_moe_post = NULL;
    ops->ds4_hc_head_norm = NULL;
}

/* The DeepSeek sessions' host path: `be` (just made, with status st) gets
 * a table whose DeepSeek entries (V3/V3.2's mla_latent, mla_absorb_q,
 * mla_absorb_out, ds_route, index_topk; V4's hc_pre, hc_post, ds4_route)
 * are NULL, so that the sessions compute those ops themselves with the
 * plain-C kernels on host copies, as before the op table had them.  One
 * table serves every such backend of a test program. */
static inline ld_status ld_test_host_leaves(ld_status st, ld_backend *be)
{
    static ld_backend_ops ops;
    if (st != LD_OK) return st;
    ops = *be->ops;
    ops.name = "host-leaves";
    ops.mla_latent = NULL;
    ops.mla_absorb_q = NULL;
    ops.mla_absorb_out = NULL;
    ops.ds_route = NULL;
    ops.index_topk = NULL;
    ops.hc_pre = NULL;
    ops.hc_post = NULL;
    ops.ds4_route = NULL;
    ops.ds4_qkv = NULL;
    ops.ds4_compress = NULL;
    ops.ds4_index = NULL;
    ops.ds4_attention = NULL;
    ops.copy_cols = NULL;
    ops.ds4_hc_head = NULL;
    ops.moe = NULL;
    ld_test_unfuse(&ops);
    be->ops = &ops;
    return LD_OK;
}

static inline ld_status ld_test_ref_host_create(int n_threads, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_ref_create(n_threads, out, err);
    return ld_test_host_leaves(st, *out);
}

static inline ld_status ld_test_cpu_host_create(int n_threads, ld_backend **out, ld_error *err)
{
    ld_status st = ld_backend_cpu_create(n_threads, out, err);
    return ld_test_host_leaves(st, *out);
}

/* a sequence of a fixture's ref.json (tools/gen_tiny_*.py): its token ids
 * (at most LD_TEST_MAX_T) and the files of transformers' logits and hidden
 * states ("" when absent) */
#define LD_TEST_MAX_T 64
typedef struct ld_test_seq {
    int32_t tokens[LD_TEST_MAX_T];
    int T;
    char logits_file[64], hidden_file[64];
} ld_test_seq;

/* sequence i of dir/ref.json into *s: 1 when it is there with tokens and
 * a logits file, else 0 */
static inline int ld_test_load_seq(const char *dir, int i, ld_test_seq *s)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *text = ld_test_slurp(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "sequences"), i), *t;
    s->T = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "tokens")) if (s->T < LD_TEST_MAX_T) s->tokens[s->T++] = t->valueint;
    const cJSON *lf = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "logits"), "file");
    const cJSON *hf = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "hidden"), "file");
    int ok = e && s->T > 0 && cJSON_IsString(lf);
    snprintf(s->logits_file, sizeof s->logits_file, "%s", cJSON_IsString(lf) ? lf->valuestring : "");
    snprintf(s->hidden_file, sizeof s->hidden_file, "%s", cJSON_IsString(hf) ? hf->valuestring : "");
    cJSON_Delete(j);
    return ok;
}

/* up to `max` sequences of dir/ref.json, from the first, while they have
 * tokens and a logits file; how many */
static inline int ld_test_load_seqs(const char *dir, ld_test_seq *seqs, int max)
{
    int n = 0;
    while (n < max && ld_test_load_seq(dir, n, &seqs[n])) n++;
    return n;
}

/* 0 when an engine call failed with status `want` and a message naming
 * `needle`; else the check's failure (1) */
/* The TP reduce's staging path (tp_forward.c) for ranks 0..n-1 of s: each
 * rank's backend pointed at a copy of its op table without buf_mem, the
 * copies in store [n] (outliving the evals); before the first eval.  The
 * rank accessor's bounds checked on the way. */
static inline int ld_test_tp_staged(ld_tp_session *s, int n, ld_backend_ops *store)
{
    for (int k = 0; k < n; k++) {
        ld_backend *be = ld_tp_session_rank_backend(s, k);
        CHECK(be && be->ops->buf_mem);
        store[k] = *be->ops;
        store[k].buf_mem = NULL;
        be->ops = &store[k];
    }
    CHECK(ld_tp_session_rank_backend(s, n) == NULL && ld_tp_session_rank_backend(s, -1) == NULL);
    return 0;
}

static inline int ld_test_expect_fail(ld_status st, ld_status want, const ld_error *err, const char *needle)
{
    CHECK_MSG(st == want, "status %d, want %d (%s)", (int)st, (int)want, err->msg);
    CHECK_MSG(strstr(err->msg, needle), "'%s' does not say '%s'", err->msg, needle);
    return 0;
}

#endif
