/* cpu_ops.c - see cpu_ops.h: the portable C twin, the prep step and the
 * dispatch to the vector code (cpu_avx2.c, cpu_avx512.c,
 * cpu_attention_avx512.c).  Each kernel works on a tile of up to
 * LD_CPU_TILE tokens per pass over a weight row, so a prefill reads and
 * decodes each weight block once per tile; a token's result does not
 * depend on the tile it is in. */
#include "cpu_ops.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define QB LD_CPU_QB
#define TILE LD_CPU_TILE

static int clamp_level(int level);

static int is_q4(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 || dt == LD_KDT_Q4_1;
}

size_t ld_cpu_matmul_scratch(ld_kdt dt, int T, int K)
{
    if (ld_cpu_is_q32(dt)) return T > 1 ? ld_cpu_q32_panel_rows(dt, K) * (size_t)(K / QB) * 2 : 1;
    size_t rows = (size_t)LD_CPU_ROWS * LD_CPU_PIECE; /* decode: plain_rows' pieces */
    return T == 1 && rows > (size_t)K ? rows : (size_t)K;
}

/* Q4_1's xs16 (cpu_internal.h): floats of it */
static size_t xs16_size(int T, int K)
{
    return (size_t)(T + TILE - 1) / TILE * (size_t)(K / QB) * 16;
}

/* where Q4's xe (cpu_internal.h) starts in the prep; its flag follows it */
static size_t xe_offset(ld_kdt dt, int T, int K)
{
    size_t tk = (size_t)T * (size_t)K;
    return dt == LD_KDT_Q4_1 ? tk + tk / QB + xs16_size(T, K) : tk;
}

size_t ld_cpu_matmul_prep_size(ld_kdt dt, int T, int K)
{
    return is_q4(dt) ? xe_offset(dt, T, K) + (size_t)T * (size_t)K + 1 : 0;
}

/* The element of a block of 32 in lane j of group g (cpu_ops.h). */
static int lane_elem(ld_kdt dt, int g, int j)
{
    if (!is_q4(dt)) return 16 * g + j;
    return 16 * ((j / 2) % 2) + 8 * g + 4 * (j % 2) + j / 4;
}

static float hsum8(const float *a)
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static float hsum16(const float *a)
{
    float v[8];
    for (int l = 0; l < 8; l++) v[l] = a[l] + a[8 + l];
    return hsum8(v);
}

/* xs[t][b] = the sum of block b of row t (cpu_ops.h), for Q4_1's offsets:
 * over x in element order */
static void block_sums(float *xs, const float *x, int T, int K)
{
    size_t nblk = (size_t)T * (size_t)(K / QB);
    for (size_t b = 0; b < nblk; b++) {
        const float *v = x + b * QB;
        float lane[8];
        for (int l = 0; l < 8; l++) lane[l] = ((v[l] + v[8 + l]) + v[16 + l]) + v[24 + l];
        xs[b] = hsum8(lane);
    }
}

/* xs16[i][b][4t + r] = xs[4i + t][b] (0 past T) */
static void block_sums16(float *xs16, const float *xs, int T, int K)
{
    size_t nb = (size_t)(K / QB);
    for (int t0 = 0; t0 < T; t0 += TILE)
        for (size_t b = 0; b < nb; b++, xs16 += 16)
            for (int l = 0; l < 16; l++) xs16[l] = t0 + l / 4 < T ? xs[(size_t)(t0 + l / 4) * nb + b] : 0.0f;
}

/* xe = xq with lane j of each group scaled by 2^-4((j % 8) / 2), and the
 * flag after it: 1 when every such product is exact, so that q 2^e times
 * x 2^-e is q times x to the bit (x 0, not finite, or at least 2^-114: no
 * bits lost below the normal range); else 0, and the kernels do without */
static int scaled_lanes(float *xe, const float *xq, size_t tk)
{
    static const float scale[8] = {1.0f, 1.0f, 0x1p-4f, 0x1p-4f, 0x1p-8f, 0x1p-8f, 0x1p-12f, 0x1p-12f};
    uint32_t inexact = 0;
    for (size_t i = 0; i < tk; i += 8) /* tk a multiple of 32 */
        for (int l = 0; l < 8; l++) {
            float v = xq[i + (size_t)l];
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            /* 0 < |v| < 2^-114 (whose bits are 0x06800000), in integers so that it vectorizes */
            inexact |= (bits & 0x7fffffffu) - 1u < 0x067fffffu;
            xe[i + (size_t)l] = v * scale[l];
        }
    return inexact != 0;
}

void ld_cpu_matmul_prep_at(int level, float *prep, const float *x, ld_kdt dt, int T, int K)
{
    if (!is_q4(dt)) return;
    size_t nblk = (size_t)T * (size_t)(K / QB), tk = (size_t)T * (size_t)K;
    int elem[QB]; /* lane l's element */
    for (int l = 0; l < QB; l++) elem[l] = lane_elem(dt, l / 16, l % 16);
    float *xe = prep + xe_offset(dt, T, K), *xs = dt == LD_KDT_Q4_1 ? prep + tk : NULL;
    int inexact;
    if (clamp_level(level) == LD_CPU_AVX512) {
        inexact = ld_cpu_prep_avx512(prep, xe, xs, x, nblk, elem);
    } else {
        for (size_t b = 0; b < nblk; b++)
            for (int l = 0; l < QB; l++) prep[b * QB + (size_t)l] = x[b * QB + (size_t)elem[l]];
        inexact = scaled_lanes(xe, prep, tk);
        if (xs) block_sums(xs, x, T, K);
    }
    xe[tk] = inexact ? 0.0f : 1.0f;
    if (xs) block_sums16(xs + nblk, xs, T, K);
}

void ld_cpu_matmul_prep(float *prep, const float *x, ld_kdt dt, int T, int K)
{
    ld_cpu_matmul_prep_at(ld_cpu_simd(), prep, x, dt, T, K);
}

/* ---------------------------------------------------------------- portable */

/* a Q4_0 / Q4_1 / Q8_0 block: its integers as floats (element order), d, m */
static void q32_decode(const unsigned char *b, ld_kdt dt, float q[QB], float *d, float *m)
{
    *d = ld_ref_f16_to_f32(ld_cpu_le16(b));
    *m = 0.0f;
    if (dt == LD_KDT_Q8_0) {
        for (int j = 0; j < QB; j++) q[j] = (float)(int8_t)b[2 + j];
        return;
    }
    const unsigned char *qs = b + 2;
    int off = 8;
    if (dt == LD_KDT_Q4_1) {
        *m = ld_ref_f16_to_f32(ld_cpu_le16(b + 2));
        qs = b + 4;
        off = 0;
    }
    for (int j = 0; j < 16; j++) {
        q[j] = (float)((qs[j] & 15) - off);
        q[j + 16] = (float)((qs[j] >> 4) - off);
    }
}

static void q32_tile_portable(const ld_cpu_mm *m, const unsigned char *wrow, int t0, int tn, size_t n, float bias)
{
    float acc[TILE][16] = {{0}}, macc[TILE] = {0};
    int nb = m->K / QB;
    size_t bytes = ld_cpu_q32_bytes(m->dt);
    for (int b = 0; b < nb; b++) {
        float q[QB], d, mn;
        q32_decode(wrow + (size_t)b * bytes, m->dt, q, &d, &mn);
        for (int tt = 0; tt < tn; tt++) {
            const float *xv = m->xq + (size_t)(t0 + tt) * (size_t)m->K + (size_t)b * QB; /* lane order */
            float s[16] = {0};
            for (int g = 0; g < 2; g++)
                for (int j = 0; j < 16; j++) s[j] = fmaf(q[lane_elem(m->dt, g, j)], xv[16 * g + j], s[j]);
            for (int j = 0; j < 16; j++) acc[tt][j] = fmaf(d, s[j], acc[tt][j]);
            if (m->dt == LD_KDT_Q4_1) macc[tt] = fmaf(mn, m->xs[(size_t)(t0 + tt) * (size_t)nb + (size_t)b], macc[tt]);
        }
    }
    for (int tt = 0; tt < tn; tt++)
        m->out[(size_t)(t0 + tt) * (size_t)m->N + n] = (hsum16(acc[tt]) + macc[tt]) + bias;
}

static void plain_tile_portable(const ld_cpu_mm *m, const float *wr, int t0, int tn, size_t n, float bias)
{
    int K = m->K, k8 = K - K % 8;
    for (int tt = 0; tt < tn; tt++) {
        const float *xr = m->x + (size_t)(t0 + tt) * (size_t)K;
        float acc[8] = {0}, tail = 0.0f;
        for (int k = 0; k < k8; k += 8)
            for (int l = 0; l < 8; l++) acc[l] = fmaf(wr[k + l], xr[k + l], acc[l]);
        for (int k = k8; k < K; k++) tail = fmaf(wr[k], xr[k], tail);
        m->out[(size_t)(t0 + tt) * (size_t)m->N + n] = (hsum8(acc) + tail) + bias;
    }
}

/* the plain-row dot product of cpu_ops.h: eight lanes, a tail, hsum8 */
static float dot_portable(const float *a, const float *b, int n)
{
    int n8 = n - n % 8;
    float acc[8] = {0}, tail = 0.0f;
    for (int k = 0; k < n8; k += 8)
        for (int l = 0; l < 8; l++) acc[l] = fmaf(a[k + l], b[k + l], acc[l]);
    for (int k = n8; k < n; k++) tail = fmaf(a[k], b[k], tail);
    return hsum8(acc) + tail;
}

/* o[i] = fma(p, v[i], o[i]) */
static void axpy_portable(float *o, float p, const float *v, int n)
{
    for (int i = 0; i < n; i++) o[i] = fmaf(p, v[i], o[i]);
}

/* ---------------------------------------------------------------- dispatch */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

/* The level this CPU and OS support, from CPUID and XGETBV (the compilers'
 * __builtin_cpu_supports do not all know "f16c"): AVX2 needs AVX2, FMA,
 * F16C and the OS saving the YMM state; AVX-512 also AVX-512F and the ZMM
 * state. */
static int cpu_level(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return LD_CPU_PORTABLE;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c)) return LD_CPU_PORTABLE;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 0x6) != 0x6) return LD_CPU_PORTABLE; /* XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 5) & 1)) return LD_CPU_PORTABLE;
    int avx512 = (b >> 16) & 1 && (b >> 31) & 1; /* F and VL (the decode rows' gathers) */
    return avx512 && (xlo & 0xe6) == 0xe6 ? LD_CPU_AVX512 : LD_CPU_AVX2; /* + opmask, ZMM state */
}
#endif

static int detect_level(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    int level = cpu_level();
    const char *cap = getenv("LD_CPU_SIMD");
    if (cap && strcmp(cap, "portable") == 0) level = LD_CPU_PORTABLE;
    else if (cap && strcmp(cap, "avx2") == 0 && level > LD_CPU_AVX2) level = LD_CPU_AVX2;
    return level;
#else
    return LD_CPU_PORTABLE;
#endif
}

int ld_cpu_simd(void)
{
    static atomic_int state = -1; /* -1 unknown; racing first calls agree */
    int s = atomic_load_explicit(&state, memory_order_relaxed);
    if (s < 0) {
        s = detect_level();
        atomic_store_explicit(&state, s, memory_order_relaxed);
    }
    return s;
}

static int clamp_level(int level)
{
    int best = ld_cpu_simd();
    return level < 0 ? 0 : level > best ? best : level;
}

/* ---------------------------------------------------------------- conversion */

/* Elements [off, off+n) of the block-scaled matrix f as fp32, in
 * scaled_to_f32's (kernels/ref/ref_ops.c) order: a row at a time (the
 * divisions once a row), its scale blocks converted by the vector code's
 * run.  F4B runs start on whole bytes: where a block starts mid-byte (an
 * odd bc or off) the blocks go one at a time, such a block's first element
 * from the reference. */
static void scaled_to_f32(float *dst, const ld_f8b *f, ld_kdt dt, ld_cpu_scaled_run_fn run, size_t off, size_t n)
{
    int fp4 = dt == LD_KDT_F4B;
    size_t cols = (size_t)f->cols, bc = (size_t)f->bc, nbc = (cols + bc - 1) / bc;
    size_t e = off, end = off + n, r = off / cols, c = off % cols;
    for (; e < end; r++, c = 0) {
        const float *srow = f->scale + r / (size_t)f->br * nbc;
        size_t b = c / bc, stop = (b + 1) * bc; /* block b's end in the row */
        size_t row_end = e - c + cols < end ? e - c + cols : end;
        if (!fp4 || (bc % 2 == 0 && e % 2 == 0)) {
            run(dst, fp4 ? f->q + e / 2 : f->q + e, row_end - e, srow + b, stop - c, bc);
            dst += row_end - e;
            e = row_end;
            continue;
        }
        for (; e < row_end; b++, c = stop, stop += bc) {
            size_t seg = (stop < cols ? stop : cols) - c; /* the block's codes from e on */
            if (seg > row_end - e) seg = row_end - e;
            size_t seg_end = e + seg;
            if (e % 2) ld_ref_to_f32(dst++, f, dt, e++, 1);
            if (e < seg_end) run(dst, f->q + e / 2, seg_end - e, srow + b, seg_end - e, bc);
            dst += seg_end - e;
            e = seg_end;
        }
    }
}

/* ld_ref_to_f32 at `level` (already clamped): the block-scaled types
 * through the vector code, the others (and the portable level) the
 * reference's own */
static void to_f32(int level, float *dst, const void *w, ld_kdt dt, size_t off, size_t n)
{
    if (level >= LD_CPU_AVX2 && (dt == LD_KDT_BF16 || dt == LD_KDT_F16)) {
        ld_cpu_half_run_avx2(dst, (const uint16_t *)w + off, n, dt == LD_KDT_BF16);
        return;
    }
    if (level == LD_CPU_PORTABLE || !ld_ref_kdt_is_scaled(dt)) {
        ld_ref_to_f32(dst, w, dt, off, n);
        return;
    }
    ld_cpu_scaled_run_fn run = dt == LD_KDT_F4B ? (level == LD_CPU_AVX512 ? ld_cpu_f4_run_avx512 : ld_cpu_f4_run_avx2)
                                                : (level == LD_CPU_AVX512 ? ld_cpu_f8_run_avx512 : ld_cpu_f8_run_avx2);
    scaled_to_f32(dst, w, dt, run, off, n);
}

void ld_cpu_to_f32_at(int level, float *dst, const void *w, ld_kdt dt, size_t off, size_t n)
{
    to_f32(clamp_level(level), dst, w, dt, off, n);
}

/* ---------------------------------------------------------------- matmul */

/* plain_rows' sums of the rows src[r] a piece of LD_CPU_PIECE columns at
 * a time: the piece converted into scratch (F32 rows are read in place),
 * where the sums read it back from L1 */
static void rows_by_pieces(int level, const ld_cpu_mm *m, float *scratch, const size_t src[LD_CPU_ROWS],
                           float acc[LD_CPU_ROWS][8], float tail[LD_CPU_ROWS])
{
    const float *wr[LD_CPU_ROWS];
    size_t K = (size_t)m->K;
    for (size_t k = 0; k < K; k += LD_CPU_PIECE) {
        size_t len = K - k < LD_CPU_PIECE ? K - k : LD_CPU_PIECE;
        for (int r = 0; r < LD_CPU_ROWS; r++) {
            if (m->dt == LD_KDT_F32) {
                wr[r] = (const float *)m->w + src[r] * K + k;
            } else {
                to_f32(level, scratch + (size_t)r * LD_CPU_PIECE, m->w, m->dt, src[r] * K + k, len);
                wr[r] = scratch + (size_t)r * LD_CPU_PIECE;
            }
        }
        ld_cpu_plain_rows_avx2(acc, tail, wr, m->x + k, (int)len);
    }
}

/* Outputs [n0, n0+LD_CPU_ROWS) of one token (decode), the vector code's:
 * one row's sum is a chain of dependent fmas that leaves the vector unit
 * mostly idle, so the rows are summed side by side, each as plain_tile
 * sums it.  Block-scaled rows of whole vectors have their codes converted
 * in registers, the others go by pieces. */
static void plain_rows(int level, const ld_cpu_mm *m, float *scratch, size_t n0)
{
    float acc[LD_CPU_ROWS][8] = {{0}}, tail[LD_CPU_ROWS] = {0};
    size_t src[LD_CPU_ROWS];
    for (int r = 0; r < LD_CPU_ROWS; r++) src[r] = ld_cpu_src_row(n0 + (size_t)r, m->rope_hd);
    const ld_f8b *f = m->w;
    if (ld_ref_kdt_is_scaled(m->dt) && m->K % 16 == 0 && f->bc % 16 == 0)
        (level == LD_CPU_AVX512 ? ld_cpu_scaled_rows_avx512 : ld_cpu_scaled_rows_avx2)(acc, f, m->dt, src, m->x);
    else
        rows_by_pieces(level, m, scratch, src, acc, tail);
    for (int r = 0; r < LD_CPU_ROWS; r++)
        m->out[n0 + (size_t)r] = (hsum8(acc[r]) + tail[r]) + ld_cpu_bias(m, n0 + (size_t)r);
}

void ld_cpu_matmul_at(int level, float *out, const float *x, const float *prep, const void *w, const void *packed,
                      ld_kdt dt, const void *bias, ld_kdt bias_dt, int T, int K, int N, int rope_hd, float *scratch,
                      size_t i0, size_t i1)
{
    level = clamp_level(level);
    int q32 = ld_cpu_is_q32(dt);
    ld_cpu_mm m = {
        .out = out, .x = x, .xq = is_q4(dt) ? prep : x,
        .xs = dt == LD_KDT_Q4_1 ? prep + (size_t)T * (size_t)K : NULL,
        .xs16 = dt == LD_KDT_Q4_1 ? prep + (size_t)T * (size_t)K + (size_t)T * (size_t)(K / QB) : NULL,
        .xe = is_q4(dt) && prep[xe_offset(dt, T, K) + (size_t)T * (size_t)K] != 0.0f ? prep + xe_offset(dt, T, K)
                                                                                    : NULL,
        .w = w, .packed = packed, .dt = dt, .bias = bias, .bias_dt = bias_dt, .T = T, .K = K, .N = N,
        .rope_hd = rope_hd,
        .row_bytes = q32 ? (size_t)(K / QB) * ld_cpu_q32_bytes(dt) : 0,
    };
    if (q32 && level == LD_CPU_AVX512) {
        if (T > 1) ld_cpu_q32_tiles_avx512(&m, scratch, i0, i1);
        else ld_cpu_q32_rows_avx512(&m, i0, i1);
        return;
    }
    if (q32 && level == LD_CPU_AVX2) {
        ld_cpu_q32_rows_avx2(&m, i0, i1);
        return;
    }
    size_t n = i0;
    if (T == 1 && level >= LD_CPU_AVX2)
        for (; n + LD_CPU_ROWS <= i1; n += LD_CPU_ROWS) plain_rows(level, &m, scratch, n);
    for (; n < i1; n++) {
        size_t src = ld_cpu_src_row(n, rope_hd);
        float b = ld_cpu_bias(&m, n);
        const float *wr = NULL;
        if (!q32) {
            if (dt == LD_KDT_F32) {
                wr = (const float *)w + src * (size_t)K;
            } else {
                to_f32(level, scratch, w, dt, src * (size_t)K, (size_t)K);
                wr = scratch;
            }
        }
        const unsigned char *wq = (const unsigned char *)w + src * m.row_bytes;
        for (int t0 = 0; t0 < T; t0 += TILE) {
            int tn = T - t0 < TILE ? T - t0 : TILE;
            if (q32) q32_tile_portable(&m, wq, t0, tn, n, b);
            else if (level >= LD_CPU_AVX2) ld_cpu_plain_tile_avx2(&m, wr, t0, tn, n, b);
            else plain_tile_portable(&m, wr, t0, tn, n, b);
        }
    }
}

void ld_cpu_matmul(float *out, const float *x, const float *prep, const void *w, const void *packed, ld_kdt dt,
                   const void *bias, ld_kdt bias_dt, int T, int K, int N, int rope_hd, float *scratch, size_t i0,
                   size_t i1)
{
    ld_cpu_matmul_at(ld_cpu_simd(), out, x, prep, w, packed, dt, bias, bias_dt, T, K, N, rope_hd, scratch, i0, i1);
}

int ld_cpu_fast_reads_packed(ld_kdt dt)
{
    return ld_cpu_is_q32(dt) && ld_cpu_simd() == LD_CPU_AVX512;
}

/* ---------------------------------------------------------------- attention */

/* The grouped kernel below takes a token's heads a chunk at a time: whole
 * runs of one kv head's heads, at most ATT_CHUNK heads (a row of scores
 * each), and the positions ATT_BLOCK at a time: a block's k rows (every kv
 * head of the chunk, side by side in the cache) go through the scores of
 * all the chunk's runs before the next block's, so the cache is read as
 * one forward stream, not once a kv head at a stride of a whole row. */
#define ATT_CHUNK (3 * LD_CPU_ATT_GROUP)
#define ATT_BLOCK 32
/* A prompt's tokens whose heads fit one chunk go ATT_TILE at a time: a
 * block's k (then v) rows, in L1, serve the tile's tokens in turn, where a
 * token alone reads the whole cache again from L2 or beyond. */
#define ATT_TILE 4

size_t ld_cpu_attention_scratch(int n_heads, int positions)
{
    return (size_t)positions * (size_t)(n_heads <= ATT_CHUNK ? ATT_TILE * n_heads : ATT_CHUNK);
}

/* whether the kernel at `level` takes a token's heads together
 * (attention_groups): ld_cpu_attention_at's choice and the pieces
 * ld_cpu_attention_heads tells the caller to hand out */
static int groups_heads(int level, int n_heads, int n_kv, int hd)
{
    return level >= LD_CPU_AVX2 && hd % 8 == 0 && n_kv > 0 && n_heads % n_kv == 0;
}

int ld_cpu_attention_heads(int n_heads, int n_kv, int hd)
{
    return groups_heads(ld_cpu_simd(), n_heads, n_kv, hd) ? n_heads : 1;
}

int ld_cpu_attention_tokens(int n_heads, int n_kv, int hd)
{
    return groups_heads(ld_cpu_simd(), n_heads, n_kv, hd) && n_heads <= ATT_CHUNK ? ATT_TILE : 1;
}

/* One call's attention as the grouped kernel sees it. */
typedef struct att_job {
    int level;
    float *out, *scores;
    const float *q, *kcache, *vcache;
    int n_heads, n_kv, hd, pos0, window;
    float scale;
    size_t stride; /* floats of a head's row of scores */
} att_job;

/* a run: G heads [h, h + G) of one kv head, their scores rows, queries
 * and outputs; lo and n: the positions [lo, lo + n) of its token */
typedef struct att_run {
    int G, lo, n;
    size_t kv0; /* the run's kv head's first row, lo's */
    float *sc[LD_CPU_ATT_GROUP], *o[LD_CPU_ATT_GROUP];
    const float *q[LD_CPU_ATT_GROUP];
} att_run;

static void run_init(const att_job *j, att_run *r, float *rows, int t, int h, int G)
{
    size_t qrow = (size_t)j->n_heads * (size_t)j->hd, kvrow = (size_t)j->n_kv * (size_t)j->hd;
    int pos = j->pos0 + t, lo = j->window > 0 && pos - j->window + 1 > 0 ? pos - j->window + 1 : 0;
    r->G = G;
    r->lo = lo;
    r->n = pos - lo + 1;
    r->kv0 = (size_t)lo * kvrow + (size_t)(h / (j->n_heads / j->n_kv)) * (size_t)j->hd;
    for (int g = 0; g < G; g++) {
        r->sc[g] = rows + (size_t)g * j->stride + (size_t)lo;
        r->q[g] = j->q + (size_t)t * qrow + (size_t)(h + g) * (size_t)j->hd;
        r->o[g] = j->out + (size_t)t * qrow + (size_t)(h + g) * (size_t)j->hd;
    }
}

/* positions [b, b + n) of the run (b relative to lo): scores, each as
 * ld_cpu_dot_avx2 sums it (the kernels' contract, cpu_internal.h), so a
 * block's are those of the whole */
static void run_scores(const att_job *j, const att_run *r, int b, int n)
{
    size_t kvrow = (size_t)j->n_kv * (size_t)j->hd;
    const float *k = j->kcache + r->kv0 + (size_t)b * kvrow;
    if (r->G > 1 && j->level == LD_CPU_AVX512) {
        float *sc[LD_CPU_ATT_GROUP];
        for (int g = 0; g < r->G; g++) sc[g] = r->sc[g] + b;
        ld_cpu_scores_group_avx512(sc, r->q, k, kvrow, n, j->hd, j->scale, r->G);
        return;
    }
    ld_cpu_scores_ahead_avx2(r->sc[0] + b, r->q[0], k, kvrow, n, j->hd, j->scale);
    for (int g = 1; g < r->G; g++) ld_cpu_scores_avx2(r->sc[g] + b, r->q[g], k, kvrow, n, j->hd, j->scale);
}

/* positions [b, b + n): o += p_j v_j in order, the outputs loaded and
 * stored around the block, so that the blocks in order are the sums of
 * the whole */
static void run_out(const att_job *j, const att_run *r, int b, int n)
{
    size_t kvrow = (size_t)j->n_kv * (size_t)j->hd;
    const float *v = j->vcache + r->kv0 + (size_t)b * kvrow;
    const float *p[LD_CPU_ATT_GROUP];
    for (int g = 0; g < r->G; g++) p[g] = r->sc[g] + b;
    if (r->G > 1 && j->level == LD_CPU_AVX512 && j->hd % 16 == 0) {
        ld_cpu_attn_out_group_avx512(r->o, p, v, kvrow, n, j->hd, r->G);
        return;
    }
    /* with AVX2 a head at a time, 64 columns in registers: the run's
     * heads together, 32 columns a pass, measured slower (bench_attention
     * on the AMD EPYC, 2026-12-04); the block's v rows are in L1 for the
     * run's other heads */
    ld_cpu_attn_out_ahead_avx2(r->o[0], p[0], v, kvrow, n, j->hd);
    for (int g = 1; g < r->G; g++) ld_cpu_attn_out_avx2(r->o[g], p[g], v, kvrow, n, j->hd);
}

void ld_cpu_exp_shifted_at(int level, float *v, int n, float mx)
{
    ld_cpu_exp_shifted(clamp_level(level), v, n, mx);
}

void ld_cpu_swiglu_at(int level, float *out, const float *gate, const float *up, size_t i0, size_t i1)
{
    enum { PIECE = 256 };
    float e[PIECE];
    level = ld_cpu_expf_level(level); /* the machine's at most */
    for (size_t i = i0; i < i1; i += PIECE) {
        int n = i1 - i < PIECE ? (int)(i1 - i) : PIECE;
        for (int k = 0; k < n; k++) e[k] = -gate[i + k];
        ld_cpu_exp_shifted(level, e, n, 0.0f); /* -g - 0 is -g, but for a zero's sign: expf 1 either way */
        for (int k = 0; k < n; k++) {
            float g = gate[i + k];
            out[i + k] = g / (1.0f + e[k]) * up[i + k];
        }
    }
}

void ld_cpu_swiglu(float *out, const float *gate, const float *up, size_t i0, size_t i1)
{
    ld_cpu_swiglu_at(ld_cpu_simd(), out, gate, up, i0, i1);
}

static int expf_best; /* ld_cpu_expf_level's answer for the machine */

static void expf_probe(void)
{
    int best = ld_cpu_simd();
    while (best > LD_CPU_PORTABLE && !ld_cpu_expf_agrees(best)) best--;
    expf_best = best;
}

int ld_cpu_expf_level(int level)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, expf_probe);
    return level < 0 ? 0 : level < expf_best ? level : expf_best;
}

void ld_cpu_attn_softmax_rows_at(int level, float *const *rows, const int *n, int count)
{
    level = clamp_level(level);
    if (level >= LD_CPU_AVX2) ld_cpu_softmax_rows_avx2(rows, n, count, ld_cpu_expf_level(level));
    else
        for (int r = 0; r < count; r++) ld_attn_softmax(rows[r], n[r]);
}

void ld_cpu_attn_softmax_at(int level, float *sc, int n)
{
    ld_cpu_attn_softmax_rows_at(level, &sc, &n, 1);
}

/* the positions [b, b + ATT_BLOCK) of run r, those of its token: through
 * fn (run_scores or run_out) */
static void run_block(const att_job *j, const att_run *r, int b,
                      void (*fn)(const att_job *, const att_run *, int, int))
{
    if (b < r->n) fn(j, r, b, r->n - b < ATT_BLOCK ? r->n - b : ATT_BLOCK);
}

/* the runs of nt tokens (nr each, runs[k nr ..] token k's): scores block
 * by block over every run of every token, each head's softmax, then the
 * outputs block by block.  Each (token, head) gets its blocks in order, so
 * its sums are those of the token alone. */
static void attention_chunk(const att_job *j, att_run *runs, int nr, int nt)
{
    int n = 0;
    for (int i = 0; i < nr * nt; i++) n = runs[i].n > n ? runs[i].n : n;
    for (int b = 0; b < n; b += ATT_BLOCK)
        for (int i = 0; i < nr * nt; i++) run_block(j, &runs[i], b, run_scores);
    float *rows[ATT_TILE * ATT_CHUNK];
    int lens[ATT_TILE * ATT_CHUNK], k = 0;
    for (int i = 0; i < nr * nt; i++)
        for (int g = 0; g < runs[i].G; g++) {
            rows[k] = runs[i].sc[g], lens[k++] = runs[i].n;
            memset(runs[i].o[g], 0, (size_t)j->hd * sizeof *runs[i].o[g]);
        }
    ld_cpu_attn_softmax_rows_at(j->level, rows, lens, k);
    for (int b = 0; b < n; b += ATT_BLOCK)
        for (int i = 0; i < nr * nt; i++) run_block(j, &runs[i], b, run_out);
}

/* token t's items from *it on, up to i1, in whole runs (a run: the heads
 * of one kv head from h on, at most LD_CPU_ATT_GROUP) while they fit a
 * chunk; their rows of scores from `rows` on.  Returns the runs. */
static int token_runs(const att_job *j, att_run *runs, size_t *it, size_t i1, int t, int rows)
{
    int group = j->n_heads / j->n_kv, nr = 0, used = 0;
    size_t end = ((size_t)t + 1) * (size_t)j->n_heads; /* the token's last item + 1 */
    if (end > i1) end = i1;
    while (*it < end) {
        int h = (int)(*it % (size_t)j->n_heads), G = group - h % group;
        if (G > LD_CPU_ATT_GROUP) G = LD_CPU_ATT_GROUP;
        if ((size_t)G > end - *it) G = (int)(end - *it);
        if (used + G > ATT_CHUNK) break;
        run_init(j, &runs[nr++], j->scores + (size_t)(rows + used) * j->stride, t, h, G);
        used += G;
        *it += (size_t)G;
    }
    return nr;
}

/* items [i0, i1) (token t's head h is item t n_heads + h): each token's
 * heads in the range in chunks of whole runs; where a chunk holds a whole
 * token, up to ATT_TILE whole tokens together */
static void attention_groups(const att_job *j, size_t i0, size_t i1)
{
    size_t H = (size_t)j->n_heads;
    att_run runs[ATT_TILE * ATT_CHUNK];
    for (size_t it = i0; it < i1;) {
        int t = (int)(it / H), whole = it % H == 0 && it + H <= i1 && j->n_heads <= ATT_CHUNK;
        int nr = token_runs(j, runs, &it, i1, t, 0), nt = 1;
        while (whole && nt < ATT_TILE && it + H <= i1) {
            token_runs(j, runs + nt * nr, &it, i1, t + nt, nt * j->n_heads);
            nt++;
        }
        attention_chunk(j, runs, nr, nt);
    }
}

void ld_cpu_attention_at(int level, float *out, const float *q, const float *kcache, const float *vcache,
                         int n_heads, int n_kv, int hd, int pos0, int window, float scale, float *scores, size_t i0,
                         size_t i1)
{
    level = clamp_level(level);
    int simd = level >= LD_CPU_AVX2;
    if (groups_heads(level, n_heads, n_kv, hd) && i0 < i1) {
        /* a row of scores: up to the range's last position */
        size_t stride = (size_t)pos0 + (i1 - 1) / (size_t)n_heads + 1;
        const att_job j = {level, out, scores, q, kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, stride};
        attention_groups(&j, i0, i1);
        return;
    }
    ld_attention_with(simd ? ld_cpu_dot_avx2 : dot_portable, simd ? ld_cpu_axpy_avx2 : axpy_portable, out, q,
                      kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, scores, i0, i1);
}

void ld_cpu_attention(float *out, const float *q, const float *kcache, const float *vcache, int n_heads, int n_kv,
                      int hd, int pos0, int window, float scale, float *scores, size_t i0, size_t i1)
{
    ld_cpu_attention_at(ld_cpu_simd(), out, q, kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, scores, i0,
                        i1);
}
