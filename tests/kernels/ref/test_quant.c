/* test_quant.c - the GGML block dequantization (kernels/ref/ref_quant.h) against
 * gguf-py's gguf.quants.dequantize on random blocks (testdata/engine/quant/,
 * written by tools/gen_quant_vectors.py): every value bitwise equal, row by
 * row, all rows at once and from a misaligned copy; the storage types of
 * ref_ops.h over the same blocks (ld_ref_to_f32, the matmul, the embedding),
 * and the row order ld_ref_matmul_ex reads for GGUF's Llama q/k. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_quant.h"

#define QDIR LD_TESTDATA_DIR "/engine/quant/"

typedef struct vec {
    char name[16];
    uint32_t type;
    int rows, cols;
    unsigned char *raw;
    size_t nraw;
    float *want;
    size_t nwant;
} vec;

static int load_vec(vec *v, const char *name, uint32_t type, int rows, int cols)
{
    char p[512];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->type = type;
    v->rows = rows;
    v->cols = cols;
    snprintf(p, sizeof p, QDIR "%s.bin", name);
    v->raw = ld_test_read_bytes(p, &v->nraw);
    snprintf(p, sizeof p, QDIR "%s.f32", name);
    v->want = (float *)ld_test_read_bytes(p, &v->nwant);
    return v->raw && v->want && v->nwant == (size_t)rows * (size_t)cols * 4;
}

static void free_vec(vec *v)
{
    free(v->raw);
    free(v->want);
}

/* index.txt lines; returns the count (<= max), -1 when it cannot be read */
static int load_all(vec *vs, int max)
{
    char *idx = ld_test_slurp(QDIR "index.txt");
    if (!idx) return -1;
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(idx, "\n", &save); line && n < max; line = strtok_r(NULL, "\n", &save)) {
        char name[16];
        unsigned type;
        int rows, cols;
        if (sscanf(line, "%15s %u %d %d", name, &type, &rows, &cols) != 4) continue;
        if (!load_vec(&vs[n], name, type, rows, cols)) {
            free_vec(&vs[n]);
            free(idx);
            for (int i = 0; i < n; i++) free_vec(&vs[i]);
            return -1;
        }
        n++;
    }
    free(idx);
    return n;
}

static int same_bits(const float *a, const float *b, size_t n, size_t *where)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a)) {
            *where = i;
            return 0;
        }
    return 1;
}

static int test_quant_layouts(void)
{
    size_t b = 0, s = 0;
    CHECK(ld_ref_quant_layout(LD_GGML_Q4_0, &b, &s) && b == 32 && s == 18);
    CHECK(ld_ref_quant_layout(LD_GGML_Q4_1, &b, &s) && b == 32 && s == 20);
    CHECK(ld_ref_quant_layout(LD_GGML_Q8_0, &b, &s) && b == 32 && s == 34);
    CHECK(ld_ref_quant_layout(LD_GGML_Q4_K, &b, &s) && b == 256 && s == 144);
    CHECK(ld_ref_quant_layout(LD_GGML_Q6_K, &b, &s) && b == 256 && s == 210);
    CHECK(ld_ref_quant_layout(LD_GGML_BF16, &b, &s) && b == 1 && s == 2);
    b = s = 7;
    CHECK(!ld_ref_quant_layout(6, &b, &s) && b == 7 && s == 7); /* Q5_0: not handled */
    CHECK(!ld_ref_quant_layout(10, NULL, NULL));                 /* Q2_K */
    float y = 42.0f;
    CHECK(!ld_ref_dequant(&y, "", 13, 0) && y == 42.0f);
    return 0;
}

static int test_quant_matches_gguf_py(void)
{
    vec vs[16];
    int n = load_all(vs, 16);
    CHECK_MSG(n >= 8, "cannot read the vectors in " QDIR " (tools/gen_quant_vectors.py)");
    int fails = 0;
    for (int k = 0; k < n; k++) {
        vec *v = &vs[k];
        size_t block, bytes;
        CHECK(ld_ref_quant_layout(v->type, &block, &bytes));
        size_t rowb = (size_t)v->cols / block * bytes, nel = (size_t)v->rows * (size_t)v->cols;
        CHECK(v->nraw == rowb * (size_t)v->rows);
        float *got = malloc(nel * sizeof *got);
        unsigned char *mis = malloc(v->nraw + 1);
        CHECK(got && mis);
        /* row by row */
        memset(got, 0xff, nel * sizeof *got);
        for (int r = 0; r < v->rows; r++)
            CHECK(ld_ref_dequant(got + (size_t)r * (size_t)v->cols, v->raw + (size_t)r * rowb, v->type,
                                 (size_t)v->cols));
        size_t at = 0;
        if (!same_bits(got, v->want, nel, &at)) {
            fprintf(stderr, "  %s: element %zu: got %a, gguf-py %a\n", v->name, at, (double)got[at],
                    (double)v->want[at]);
            fails++;
        }
        /* all at once, from an odd address */
        memcpy(mis + 1, v->raw, v->nraw);
        memset(got, 0xff, nel * sizeof *got);
        CHECK(ld_ref_dequant(got, mis + 1, v->type, nel));
        if (!same_bits(got, v->want, nel, &at)) {
            fprintf(stderr, "  %s (misaligned): element %zu differs\n", v->name, at);
            fails++;
        }
        free(mis);
        free(got);
        printf("  %-5s %d x %d: %zu values bitwise equal to gguf-py\n", v->name, v->rows, v->cols, nel);
    }
    for (int k = 0; k < n; k++) free_vec(&vs[k]);
    CHECK(fails == 0);
    return 0;
}

static const struct {
    const char *name;
    ld_kdt dt;
} kdts[] = {
    {"Q4_0", LD_KDT_Q4_0}, {"Q4_1", LD_KDT_Q4_1}, {"Q8_0", LD_KDT_Q8_0},
    {"Q4_K", LD_KDT_Q4_K}, {"Q6_K", LD_KDT_Q6_K},
};

static uint32_t rng = 777;

static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* the block storage types of ref_ops.h: the matmul over blocks equals the
 * matmul over the dequantized fp32 rows bitwise; to_f32 at a row offset and
 * the embedding read the right blocks */
static int test_quant_kernels_over_blocks(void)
{
    vec vs[16];
    int n = load_all(vs, 16);
    CHECK(n >= 8);
    for (size_t q = 0; q < sizeof kdts / sizeof kdts[0]; q++) {
        vec *v = NULL;
        for (int k = 0; k < n; k++)
            if (strcmp(vs[k].name, kdts[q].name) == 0) v = &vs[k];
        CHECK(v);
        CHECK(ld_ref_kdt_is_block(kdts[q].dt));
        int K = v->cols, N = v->rows, T = 3;
        float *x = malloc((size_t)T * (size_t)K * sizeof *x);
        float *o1 = calloc((size_t)T * (size_t)N, sizeof *o1), *o2 = calloc((size_t)T * (size_t)N, sizeof *o2);
        float *row = malloc((size_t)K * sizeof *row), *emb = malloc(2 * (size_t)K * sizeof *emb);
        float bias[8];
        CHECK(x && o1 && o2 && row && emb && N <= 8);
        for (size_t i = 0; i < (size_t)T * (size_t)K; i++) x[i] = frand();
        for (int i = 0; i < N; i++) bias[i] = frand();
        ld_ref_matmul(o1, x, v->raw, kdts[q].dt, bias, LD_KDT_F32, T, K, N, row, 0, (size_t)N);
        ld_ref_matmul(o2, x, v->want, LD_KDT_F32, bias, LD_KDT_F32, T, K, N, row, 0, (size_t)N);
        CHECK_MSG(memcmp(o1, o2, (size_t)T * (size_t)N * sizeof *o1) == 0, "%s matmul", v->name);
        /* split over "threads" */
        memset(o1, 0, (size_t)T * (size_t)N * sizeof *o1);
        ld_ref_matmul(o1, x, v->raw, kdts[q].dt, bias, LD_KDT_F32, T, K, N, row, 0, 1);
        ld_ref_matmul(o1, x, v->raw, kdts[q].dt, bias, LD_KDT_F32, T, K, N, row, 1, (size_t)N);
        CHECK(memcmp(o1, o2, (size_t)T * (size_t)N * sizeof *o1) == 0);
        ld_ref_to_f32(row, v->raw, kdts[q].dt, (size_t)K * (size_t)(N - 1), (size_t)K);
        CHECK(memcmp(row, v->want + (size_t)K * (size_t)(N - 1), (size_t)K * sizeof *row) == 0);
        int32_t toks[2] = {N - 1, 0};
        ld_ref_embed(emb, v->raw, kdts[q].dt, K, toks, 0, 2);
        CHECK(memcmp(emb, v->want + (size_t)K * (size_t)(N - 1), (size_t)K * sizeof *emb) == 0);
        CHECK(memcmp(emb + K, v->want, (size_t)K * sizeof *emb) == 0);
        free(x);
        free(o1);
        free(o2);
        free(row);
        free(emb);
    }
    for (int k = 0; k < n; k++) free_vec(&vs[k]);
    return 0;
}

/* ld_ref_matmul_ex with rope_hd: output column h*hd + j*hd/2 + i is the
 * dot product with weight row h*hd + 2i + j */
static int test_quant_rope_row_order(void)
{
    enum { K = 8, HD = 4, NH = 3, N = HD * NH };
    float w[N * K], x[K], o1[N], o2[N], row[K];
    for (int i = 0; i < N * K; i++) w[i] = frand();
    for (int i = 0; i < K; i++) x[i] = frand();
    ld_ref_matmul_ex(o1, x, w, LD_KDT_F32, NULL, LD_KDT_F32, 1, K, N, HD, row, 0, N);
    ld_ref_matmul(o2, x, w, LD_KDT_F32, NULL, LD_KDT_F32, 1, K, N, row, 0, N);
    for (int h = 0; h < NH; h++)
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < HD / 2; i++)
                CHECK(o1[h * HD + j * HD / 2 + i] == o2[h * HD + 2 * i + j]);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_quant_layouts),
    LD_CASE(test_quant_matches_gguf_py),
    LD_CASE(test_quant_kernels_over_blocks),
    LD_CASE(test_quant_rope_row_order),
};

LD_TEST_MAIN(cases)
