/* test_weight_arena.c - the "cpu" backend's copy of its weights in 2 MiB
 * pages (engine/backend/cpu/backend_ref_arena.c): the arena's copies equal
 * their sources, one cache line aligned, over several chunks (a tensor
 * larger than a chunk included), the source mapping still reading its
 * bytes after its pages left the resident set, the chunks freed with the
 * last weight; and the matmul of a copied weight (a file mapping's) the
 * same bits as of the same weight read in place (the path before the copy
 * existed), Q4_0 / Q4_1 / Q8_0, rows not a multiple of sixteen, decode and
 * prefill, the fast matmul, q8's, i24's and the backend's default (i24's
 * on these types), on 1, 2 and 3 threads; q8's
 * weights of eight rows or more packed for its kernel (and not copied),
 * fewer copied as the fast one's; i24's of sixteen rows or more packed for
 * its kernels, fewer copied; the fast one's of sixteen rows or more packed
 * for its kernels where they read a packed copy (AVX-512); and every
 * result the bits of the kernel called alone on the rows as they lie. */
#define _DEFAULT_SOURCE /* mkstemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/backend/cpu/backend_ref_internal.h"
#include "kernels/cpu/cpu_i24.h"
#include "kernels/cpu/cpu_q8.h"
#include "tests/support/ld_test.h"

static uint32_t rng = 1;
static unsigned next_byte(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 24;
}

/* n bytes written to a temporary file and mapped as ld_gguf_open maps a
 * GGUF (private, read-only); the file is unlinked at once.  NULL on
 * failure. */
static unsigned char *map_bytes(const unsigned char *src, size_t n)
{
    char path[] = "/tmp/ld_test_warena_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    unlink(path);
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, src + done, n - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    void *p = done == n ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

static int test_weight_arena_copies(void)
{
    /* pieces of one mapping: odd sizes and offsets, one past a 32 MiB chunk */
    const size_t off[] = {0, 3, 70000, 123457, 200000}, len[] = {1, 63, 4101, (size_t)33 << 20, 1000};
    size_t n = ((size_t)34 << 20) + 300000;
    unsigned char *src = malloc(n);
    CHECK(src);
    for (size_t i = 0; i < n; i++) src[i] = (unsigned char)next_byte();
    unsigned char *map = map_bytes(src, n);
    CHECK(map);
    ld_warena a = {0};
    const unsigned char *cp[5];
    for (int i = 0; i < 5; i++) {
        cp[i] = ld_warena_copy(&a, map + off[i], len[i]);
        CHECK_MSG(cp[i], "copy %d", i);
        CHECK_MSG((uintptr_t)cp[i] % 64 == 0, "copy %d not on a cache line", i);
        CHECK(a.live == (size_t)i + 1);
    }
    CHECK(a.bytes >= ((size_t)33 << 20) + ((size_t)32 << 20));
    for (int i = 0; i < 5; i++) {
        CHECK_MSG(memcmp(cp[i], src + off[i], len[i]) == 0, "copy %d differs from its source", i);
        CHECK_MSG(memcmp(map + off[i], src + off[i], len[i]) == 0, "the mapping of %d lost its bytes", i);
    }
    for (int i = 0; i < 5; i++) ld_warena_release(&a);
    CHECK(a.live == 0 && !a.chunks && a.bytes == 0);
    ld_warena_release(&a); /* one too many: nothing */
    CHECK(a.live == 0);
    munmap(map, n);
    free(src);
    return 0;
}

/* a random N x K matrix of type q (scales and offsets finite) */
static unsigned char *rand_blocks(ld_wquant q, int N, int K, size_t *bytes)
{
    size_t bb = q == LD_WQ_Q4_0 ? 18 : q == LD_WQ_Q4_1 ? 20 : 34, nb = (size_t)N * (size_t)(K / 32);
    unsigned char *w = malloc(nb * bb);
    if (!w) return NULL;
    for (size_t i = 0; i < nb * bb; i++) w[i] = (unsigned char)next_byte();
    for (size_t b = 0; b < nb; b++) {
        unsigned char *blk = w + b * bb;
        blk[1] = (unsigned char)(0x20 + next_byte() % 0x1b); /* d: f16 in [2^-7, 2^7) */
        if (q == LD_WQ_Q4_1) blk[3] = (unsigned char)((0x20 + next_byte() % 0x1b) | (next_byte() & 0x80));
    }
    *bytes = nb * bb;
    return w;
}

/* what the backend made of a weight besides its data */
enum { NOT_PACKED, PACKED_Q8, PACKED_FAST, PACKED_I24 };

/* the kernel a backend of kernel spec `spec` (NULL: its default) runs on
 * weights of type dt */
enum { KIND_FAST, KIND_Q8, KIND_I24 };
static int kind_of(const char *spec, ld_kdt dt)
{
    if (spec && !strcmp(spec, "matmul=q8")) return KIND_Q8;
    if (spec && !strcmp(spec, "matmul=fast")) return KIND_FAST;
    return ld_cpu_i24_supports(dt) ? KIND_I24 : KIND_FAST;
}

/* out[T][N] of w (host tensor t) against x[T][K] on backend be */
static int matmul(ld_backend *be, const ld_host_tensor *t, const float *x, int T, float *out, int copied, int packed)
{
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    ld_weight *w = NULL;
    ld_buf *bx = NULL, *bo = NULL;
    CHECK_MSG(o->weight_load(be, t, &w, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG((w->data != t->data) == copied, "%s: copied %d", be->ops->name, copied);
    CHECK_MSG((w->q8 != NULL) == (packed == PACKED_Q8), "%s: packed %d", be->ops->name, packed);
    CHECK_MSG((w->fast16 != NULL) == (packed == PACKED_FAST), "%s: packed %d", be->ops->name, packed);
    CHECK_MSG((w->i24 != NULL) == (packed == PACKED_I24), "%s: packed %d", be->ops->name, packed);
    size_t nx = (size_t)T * (size_t)t->cols, no = (size_t)T * (size_t)t->rows;
    CHECK(o->buf_alloc(be, nx, &bx, &err) == LD_OK && o->buf_alloc(be, no, &bo, &err) == LD_OK);
    CHECK(o->buf_write(be, bx, 0, x, nx, &err) == LD_OK);
    CHECK_MSG(o->matmul(be, bo, bx, w, NULL, T, &err) == LD_OK, "%s", err.msg);
    CHECK(o->buf_read(be, bo, 0, out, no, &err) == LD_OK);
    o->buf_free(be, bx);
    o->buf_free(be, bo);
    o->weight_free(be, w);
    return 0;
}

/* the matmul on 1 and 3 threads gives out's bits (2 threads' result): a
 * decode step's q8 matmul goes to the threads in one range each, read as
 * streams (cpu_q8.c), a prompt's in pieces */
static int same_bits_any_threads(const char *spec, const ld_host_tensor *t, const float *x, int T, const float *out,
                                 int packed)
{
    size_t no = (size_t)T * (size_t)t->rows;
    float *o = malloc(sizeof(float) * no);
    CHECK(o);
    for (int threads = 1; threads <= 3; threads += 2) {
        ld_backend *be = NULL;
        ld_error err = {0};
        CHECK_MSG(ld_backend_cpu_create_ex(threads, 1, spec, &be, &err) == LD_OK, "%s", err.msg);
        CHECK(!matmul(be, t, x, T, o, 0, packed));
        CHECK_MSG(memcmp(o, out, sizeof(float) * no) == 0, "%s q%d N %d K %d T %d: %d threads' bits differ",
                  spec ? spec : "cpu", (int)t->quant, (int)t->rows, (int)t->cols, T, threads);
        ld_backend_destroy(be);
    }
    free(o);
    return 0;
}

/* out[T][N] by the matmul's kernel called on the rows as they lie, without
 * a backend or a packed copy (q8's packs a group at a time as it runs):
 * what the backend's result, from its arena, must equal */
static int kernel_alone(const char *spec, ld_kdt dt, const void *w, const float *x, int T, int K, int N, float *out)
{
    int kind = kind_of(spec, dt);
    size_t np = kind == KIND_Q8    ? ld_cpu_q8_prep_size(T, K)
                : kind == KIND_I24 ? ld_cpu_i24_prep_size(T, K)
                                   : ld_cpu_matmul_prep_size(dt, T, K);
    float *prep = malloc(sizeof(float) * (np ? np : 1));
    float *scratch = malloc(sizeof(float) * ld_cpu_matmul_scratch(dt, T, K));
    CHECK(prep && scratch);
    if (kind == KIND_Q8) {
        ld_cpu_q8_prep(prep, x, T, K);
        ld_cpu_matmul_q8(out, prep, w, NULL, dt, NULL, LD_KDT_F32, T, K, N, 0, 0, (size_t)N);
    } else if (kind == KIND_I24) {
        ld_cpu_i24_prep(prep, x, T, K);
        ld_cpu_matmul_i24(out, prep, w, NULL, dt, NULL, LD_KDT_F32, T, K, N, 0, 0, (size_t)N);
    } else {
        ld_cpu_matmul_prep(prep, x, dt, T, K);
        ld_cpu_matmul(out, x, prep, w, NULL, dt, NULL, LD_KDT_F32, T, K, N, 0, scratch, 0, (size_t)N);
    }
    free(prep);
    free(scratch);
    return 0;
}

static int same_bits(const char *spec, ld_wquant q, int N, int K, int T)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    CHECK_MSG(ld_backend_cpu_create_ex(2, 1, spec, &be, &err) == LD_OK, "%s", err.msg);
    size_t n = 0;
    unsigned char *w = rand_blocks(q, N, K, &n), *map = w ? map_bytes(w, n) : NULL;
    float *x = malloc(sizeof(float) * (size_t)T * (size_t)K), *o1 = malloc(sizeof(float) * (size_t)T * (size_t)N),
          *o2 = malloc(sizeof(float) * (size_t)T * (size_t)N);
    CHECK(w && map && x && o1 && o2);
    for (size_t i = 0; i < (size_t)T * (size_t)K; i++) x[i] = (float)next_byte() / 64.0f - 2.0f;
    ld_host_tensor in_place = {.data = w, .rows = N, .cols = K, .quant = q};
    ld_host_tensor mapped = in_place;
    mapped.data = map;
    mapped.map = map;
    mapped.map_size = n;
    /* q8 packs every weight of eight rows or more (its own layout, in the
     * arena) and copies none, i24 every one of sixteen rows or more; the
     * fast matmul packs one of sixteen rows or more where its kernels read
     * the packed copy (AVX-512); a weight not packed is copied where it is
     * a mapping's */
    ld_kdt dt = q == LD_WQ_Q4_0 ? LD_KDT_Q4_0 : q == LD_WQ_Q4_1 ? LD_KDT_Q4_1 : LD_KDT_Q8_0;
    int kind = kind_of(spec, dt);
    int packed = kind == KIND_Q8    ? (N >= 8 ? PACKED_Q8 : NOT_PACKED)
                 : kind == KIND_I24 ? (N >= 16 ? PACKED_I24 : NOT_PACKED)
                                    : (N >= 16 && ld_cpu_fast_reads_packed(dt) ? PACKED_FAST : NOT_PACKED);
    CHECK(!matmul(be, &in_place, x, T, o1, 0, packed));
    CHECK(!kernel_alone(spec, dt, w, x, T, K, N, o2));
    CHECK_MSG(memcmp(o1, o2, sizeof(float) * (size_t)T * (size_t)N) == 0,
              "%s q%d N %d K %d T %d: the backend's bits differ from its kernel's on the rows as they lie",
              spec ? spec : "cpu", (int)q, N, K, T);
    CHECK(!same_bits_any_threads(spec, &in_place, x, T, o1, packed));
    CHECK(!matmul(be, &mapped, x, T, o2, !packed, packed));
    /* a mapping's tensor whose data was moved out of it (tp_slice.c's
     * columns): read in place, the data untouched */
    ld_host_tensor moved = mapped;
    moved.data = w;
    CHECK(!matmul(be, &moved, x, T, o2, 0, packed));
    CHECK_MSG(memcmp(o1, o2, sizeof(float) * (size_t)T * (size_t)N) == 0, "%s q%d N %d K %d T %d: bits differ",
              spec ? spec : "cpu", (int)q, N, K, T);
    CHECK(memcmp(map, w, n) == 0);
    munmap(map, n);
    free(w);
    free(x);
    free(o1);
    free(o2);
    ld_backend_destroy(be);
    return 0;
}

static int test_weight_arena_matmul_bits(void)
{
    const ld_wquant qs[] = {LD_WQ_Q4_0, LD_WQ_Q4_1, LD_WQ_Q8_0};
    const char *specs[] = {NULL, "matmul=fast", "matmul=q8", "matmul=i24"};
    /* N K T; five rows: fewer than q8 packs */
    const int shapes[][3] = {{37, 96, 1}, {37, 96, 5}, {16, 32, 1}, {131, 576, 1}, {131, 576, 3}, {5, 64, 2},
                             {397, 64, 1}}; /* 49 groups: streams on each of 3 threads */
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (int i = 0; i < 3; i++)
            for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
                CHECK(!same_bits(specs[s], qs[i], shapes[k][0], shapes[k][1], shapes[k][2]));
    return 0;
}

/* the reference backend keeps reading the host data */
static int test_weight_arena_ref_in_place(void)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    size_t n = 0;
    unsigned char *w = rand_blocks(LD_WQ_Q4_1, 8, 64, &n), *map = w ? map_bytes(w, n) : NULL;
    CHECK(w && map);
    ld_host_tensor t = {.data = map, .rows = 8, .cols = 64, .quant = LD_WQ_Q4_1, .map = map, .map_size = n};
    ld_weight *lw = NULL;
    CHECK(be->ops->weight_load(be, &t, &lw, &err) == LD_OK);
    CHECK(lw->data == t.data);
    be->ops->weight_free(be, lw);
    munmap(map, n);
    free(w);
    ld_backend_destroy(be);
    return 0;
}

static const ld_test_case cases[] = {
    {"weight_arena_copies", test_weight_arena_copies},
    {"weight_arena_matmul_bits", test_weight_arena_matmul_bits},
    {"weight_arena_ref_in_place", test_weight_arena_ref_in_place},
};

LD_TEST_MAIN(cases)
