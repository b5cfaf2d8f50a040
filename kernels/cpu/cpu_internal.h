/* cpu_internal.h - what the fast CPU kernels share (cpu_ops.c, the
 * portable twin and the dispatch; cpu_avx2.c; cpu_avx512.c,
 * cpu_attention_avx512.c): the block layout, the lane order of
 * cpu_ops.h, and the per-instruction-set entry points.  Not for use
 * outside kernels/. */
#ifndef LD_CPU_INTERNAL_H
#define LD_CPU_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_i24.h"
#include "cpu_q8.h"
#include "kernels/ref/ref_ops.h"

#define LD_CPU_QB 32  /* elements per block of Q4_0 / Q4_1 / Q8_0 */
#define LD_CPU_TILE 4 /* tokens per pass over a weight row */
#define LD_CPU_ROWS 4 /* plain rows per pass over x of one token (decode) */
#define LD_CPU_PIECE 512 /* columns of those rows converted at a time (in L1; whole Q4_K / Q6_K blocks) */
#define LD_CPU_PANEL (256 * 1024) /* prefill: bytes of weight rows a tile of tokens sweeps at a time (in L2) */

/* One matmul as the kernels see it. */
typedef struct ld_cpu_mm {
    float *out;        /* [T][N] */
    const float *x;    /* [T][K], in element order */
    const float *xq;   /* [T][K] in lane order (cpu_ops.h) for the blocks */
    const float *xs;   /* Q4_1: [T][K/32] block sums of x; else NULL */
    const float *xs16; /* Q4_1: the same per tile of four tokens, [T/4 up][K/32][16], lane 4t + r
                        * token t's (r = 0..3; 0 past T); else NULL */
    const float *xe;   /* Q4_0 / Q4_1: xq with lane j of each group of sixteen scaled by 2^-4((j % 8) / 2),
                        * each x 2^-e exact (else NULL): what AVX2 multiplies the nibbles q 2^e by where they lie
                        * in the byte, unshifted, for the same products q x */
    const void *w;
    const unsigned char *packed; /* w's packed copy (ld_cpu_fast_pack), or NULL: read by the AVX-512
                                  * kernels for the rows of its whole groups */
    ld_kdt dt;
    const void *bias;  /* NULL: none */
    ld_kdt bias_dt;
    int T, K, N, rope_hd;
    size_t row_bytes;  /* bytes of a weight row of blocks */
} ld_cpu_mm;

static inline int ld_cpu_is_q32(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 || dt == LD_KDT_Q4_1 || dt == LD_KDT_Q8_0;
}

static inline size_t ld_cpu_q32_bytes(ld_kdt dt)
{
    return dt == LD_KDT_Q4_0 ? 18 : dt == LD_KDT_Q4_1 ? 20 : 34;
}

/* bytes of a block's f16 header before its integers: d, and Q4_1's m */
static inline size_t ld_cpu_q32_head(ld_kdt dt)
{
    return dt == LD_KDT_Q4_1 ? 4 : 2;
}

static inline uint16_t ld_cpu_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

/* The packed copy (cpu_pack16.c): outputs in groups of LD_CPU_PACK_ROWS,
 * group g holding outputs [16g, 16g + 16) (their weight rows by
 * ld_cpu_src_row); a group's blocks in order, each as the sixteen rows'
 * f16 d, then (Q4_1) their sixteen f16 m, then each row's integers (16
 * bytes of nibbles, or Q8_0's 32 bytes) in the row's own order. */
#define LD_CPU_PACK_ROWS 16

/* bytes of one block of a packed group: the same as its rows' blocks */
static inline size_t ld_cpu_pack16_step(ld_kdt dt)
{
    return LD_CPU_PACK_ROWS * ld_cpu_q32_bytes(dt);
}

static inline size_t ld_cpu_pack16_group_bytes(ld_kdt dt, int K)
{
    return (size_t)(K / LD_CPU_QB) * ld_cpu_pack16_step(dt);
}

/* the weight row holding output n (see ld_ref_matmul_ex) */
static inline size_t ld_cpu_src_row(size_t n, int rope_hd)
{
    if (rope_hd <= 0) return n;
    size_t hd = (size_t)rope_hd, h = n / hd, r = n % hd;
    return h * hd + 2 * (r % (hd / 2)) + r / (hd / 2);
}

/* Prefill (T > 1) at AVX-512 sweeps panels of this many rows (a multiple
 * of four), a tile of tokens at a time, with the rows' scales (and
 * offsets) as fp32 in the scratch: ld_cpu_q32_panel_rows(K) * (K/32) * 2
 * floats. */
static inline size_t ld_cpu_q32_panel_rows(ld_kdt dt, int K)
{
    size_t row = (size_t)(K / LD_CPU_QB) * ld_cpu_q32_bytes(dt), p = row ? LD_CPU_PANEL / row : 4;
    return p < 4 ? 4 : p / 4 * 4;
}

/* bias[n] as fp32, 0 when none */
static inline float ld_cpu_bias(const ld_cpu_mm *m, size_t n)
{
    float b = 0.0f;
    if (m->bias) ld_ref_to_f32(&b, m->bias, m->bias_dt, n, 1);
    return b;
}

/* Outputs [i0, i1) of a Q4_0 / Q4_1 / Q8_0 matmul (all T tokens). */
void ld_cpu_q32_rows_avx2(const ld_cpu_mm *m, size_t i0, size_t i1);
/* ld_cpu_matmul_prep's Q4 activations with AVX-512 (cpu_avx512.c), the
 * same floats as cpu_ops.c's loops: xq [nblk][32] the blocks of x in lane
 * order (lane l holds element elem[l]), xe their scaled_lanes, xs (NULL
 * but for Q4_1) the blocks' sums in block_sums' order; returns
 * scaled_lanes' inexact. */
int ld_cpu_prep_avx512(float *xq, float *xe, float *xs, const float *x, size_t nblk, const int elem[32]);
void ld_cpu_q32_rows_avx512(const ld_cpu_mm *m, size_t i0, size_t i1);
/* The same for T > 1 (prefill), rows four at a time against tiles of four
 * tokens; scratch: the floats above ld_cpu_q32_panel_rows. */
void ld_cpu_q32_tiles_avx512(const ld_cpu_mm *m, float *scratch, size_t i0, size_t i1);

/* Tokens [t0, t0+tn) (tn <= LD_CPU_TILE) of output n from the fp32 row wr. */
void ld_cpu_plain_tile_avx2(const ld_cpu_mm *m, const float *wr, int t0, int tn, size_t n, float bias);

/* A run of n codes of one row of a block-scaled matrix (cpu_ops.c walks
 * them) as fp32, bit for bit scaled_to_f32's (kernels/ref/ref_ops.c): the
 * first `first` codes are a scale block's with scale sc[0], then blocks of
 * bc codes with sc[1], sc[2], ...; dst[i] = value(code i) * its scale, one
 * fp32 product.  F8B: q[i] is code i; F4B: q points at the byte of code 0
 * (an even element; first and bc even), two codes a byte, the low nibble
 * first.  Only the bytes of the n codes are read. */
typedef void (*ld_cpu_scaled_run_fn)(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first,
                                     size_t bc);
void ld_cpu_f8_run_avx2(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc);
void ld_cpu_f4_run_avx2(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc);
void ld_cpu_f8_run_avx512(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc);
void ld_cpu_f4_run_avx512(float *dst, const uint8_t *q, size_t n, const float *sc, size_t first, size_t bc);

/* n BF16 (bf16 = 1) or F16 values at h as fp32, bit for bit
 * ld_ref_bf16_to_f32 / ld_ref_f16_to_f32: BF16 shifted into the high half,
 * F16 by F16C with its NaNs' payloads kept as the reference keeps them
 * (vcvtph2ps would quiet a signalling one). */
void ld_cpu_half_run_avx2(float *dst, const uint16_t *h, size_t n, int bf16);

/* Columns [k, k+n) of LD_CPU_ROWS plain rows' sums for one token (T = 1):
 * acc[r][l] = fma(wr[r][i], x[i], acc[r][l]) for i = 8j + l, the n % 8
 * last columns (only in a row's last piece) in tail[r] (fmaf, in order):
 * each row's arithmetic is plain_tile's, the rows' chains of dependent
 * fmas side by side.  wr[r] and x point at column k. */
void ld_cpu_plain_rows_avx2(float acc[LD_CPU_ROWS][8], float tail[LD_CPU_ROWS], const float *const wr[LD_CPU_ROWS],
                            const float *x, int n);

/* The same sums over the whole rows src[r] of a block-scaled matrix (dt
 * LD_KDT_F8B / F4B) whose cols and bc are multiples of 16, the codes
 * converted in registers (no tail): bit for bit the rows converted by the
 * runs above and summed by ld_cpu_plain_rows_avx2. */
void ld_cpu_scaled_rows_avx2(float acc[LD_CPU_ROWS][8], const ld_f8b *f, ld_kdt dt,
                             const size_t src[LD_CPU_ROWS], const float *x);
void ld_cpu_scaled_rows_avx512(float acc[LD_CPU_ROWS][8], const ld_f8b *f, ld_kdt dt,
                               const size_t src[LD_CPU_ROWS], const float *x);

/* The plain dot product and o += p v of cpu_ops.h. */
float ld_cpu_dot_avx2(const float *a, const float *b, int n);
void ld_cpu_axpy_avx2(float *o, float p, const float *v, int n);

/* Attention of one head, hd a multiple of 8 (cpu_avx2.c), the bits of the
 * two above: sc[j] = ld_cpu_dot_avx2(q, k + j kvrow, hd) * scale for j in
 * [0, n); and o = ld_cpu_axpy_avx2(o, p[j], v + j kvrow, hd) for j = 0 ..
 * n-1 in order (o's vectors in registers over the positions). */
void ld_cpu_scores_avx2(float *sc, const float *q, const float *k, size_t kvrow, int n, int hd, float scale);
void ld_cpu_attn_out_avx2(float *o, const float *p, const float *v, size_t kvrow, int n, int hd);
/* How many positions ahead the attention kernels ask for the k and v rows
 * they read next (a prefetch a cache line of a row): a kv head's rows lie
 * a whole cache row apart (768 bytes in SmolLM2), a stride the hardware's
 * prefetchers follow poorly.  The AVX-512 grouped kernels ask for them
 * always (cpu_attention_avx512.c); the AVX2 ones below for the first head
 * of a run, whose pass reads the rows from memory (the run's other heads
 * find them in L1). */
#define LD_CPU_ATT_AHEAD 32
/* The same bits as the two above, asking for the rows LD_CPU_ATT_AHEAD
 * positions ahead as they go */
void ld_cpu_scores_ahead_avx2(float *sc, const float *q, const float *k, size_t kvrow, int n, int hd, float scale);
void ld_cpu_attn_out_ahead_avx2(float *o, const float *p, const float *v, size_t kvrow, int n, int hd);
/* ld_attn_softmax(rows[r], n[r]) for r in [0, count), each with its bits
 * (cpu_avx2.c), the exponentials by ld_cpu_exp_shifted(exp_level, ...) */
void ld_cpu_softmax_rows_avx2(float *const *rows, const int *n, int count, int exp_level);

/* ld_cpu_exp_shifted_at (cpu_ops.h) at a level the machine has, not
 * capped (cpu_expf.c): the vector code of LD_CPU_AVX2 or LD_CPU_AVX512,
 * else libm's calls; and whether the vector code of a level gives the bits
 * of the libm at hand on the probe's floats (ld_cpu_expf_level asks once) */
void ld_cpu_exp_shifted(int level, float *v, int n, float mx);
int ld_cpu_expf_agrees(int level);

/* The outputs of G heads (2 <= G <= LD_CPU_ATT_GROUP) that share a kv
 * head, hd a multiple of 16 (cpu_attention_avx512.c), each element's
 * chain that of ld_cpu_attn_out_avx2 (so the same bits), from one read of each v row
 * for the G heads.  Like ld_cpu_attn_out_avx2 it loads o and stores it
 * back, so a run of positions may be cut into blocks taken in order. */
#define LD_CPU_ATT_GROUP 4
void ld_cpu_attn_out_group_avx512(float *const o[LD_CPU_ATT_GROUP], const float *const p[LD_CPU_ATT_GROUP],
                                  const float *v, size_t kvrow, int n, int hd, int G);
/* The scores of G heads (2 <= G <= LD_CPU_ATT_GROUP) that share a kv
 * head (cpu_attention_avx512.c): sc[g][j] of ld_cpu_scores_avx2(sc[g],
 * q[g], k, kvrow, n, hd, scale), the same bits, each k vector read once for the G
 * heads, two heads' q to a register. */
void ld_cpu_scores_group_avx512(float *const sc[LD_CPU_ATT_GROUP], const float *const q[LD_CPU_ATT_GROUP],
                                const float *k, size_t kvrow, int n, int hd, float scale, int G);

/* One matmul of the q8 variant (cpu_q8.h) as its kernels see it. */
typedef struct ld_cpu_q8mm {
    float *out;          /* [T][N] */
    const int8_t *xq;    /* [T][K] the quantized activations */
    const float *xd;     /* [T][K/32] their scales dx */
    const float *xs;     /* [T][K/32] the blocks' sums of x */
    const int32_t *qsum; /* [T][K/32] the blocks' sums of xq */
    const void *w;       /* the rows */
    const unsigned char *packed; /* their packed layout (cpu_q8.h), or NULL */
    ld_kdt dt;
    const void *bias;    /* NULL: none */
    ld_kdt bias_dt;
    int T, K, N, rope_hd;
    size_t row_bytes;
} ld_cpu_q8mm;

/* Output n of token t of a q8 matmul from the rows (cpu_q8_portable.c, the
 * portable arithmetic). */
void ld_cpu_q8_out_portable(const ld_cpu_q8mm *m, size_t n, int t);

/* Outputs [8g, 8g+8) of all T tokens from group g of the packed layout,
 * at gp, with AVX2, FMA and F16C (cpu_q8_avx2.c); _streams: those of the
 * LD_CPU_Q8_STREAMS groups g[s] at gp[s] together, a block of each in turn
 * (each group's arithmetic is the single group's). */
#define LD_CPU_Q8_STREAMS 4
void ld_cpu_q8_group_avx2(const ld_cpu_q8mm *m, const unsigned char *gp, size_t g);
void ld_cpu_q8_streams_avx2(const ld_cpu_q8mm *m, const unsigned char *const gp[LD_CPU_Q8_STREAMS],
                            const size_t g[LD_CPU_Q8_STREAMS]);

/* The starts of the `rows` weight rows of outputs [n0, n0 + rows) of the
 * Q4_0 / Q4_1 / Q8_0 rows at w (rope order: ld_cpu_src_row): a packed
 * group's sources, q8's (cpu_q8_pack.c) and the fast kernels'
 * (cpu_pack16.c). */
void ld_cpu_group_rows(const unsigned char **src, int rows, const void *w, ld_kdt dt, int K, size_t n0, int rope_hd);
/* One block (at byte off of each row) of the `rows` rows that start at
 * src[], packed as q8's and i24's layouts hold it: the rows' d side by side
 * (then Q4_1's m), then the integers in chunks of four bytes a row, row r
 * at bytes 4r .. 4r+3 of each; returns the end (cpu_q8_pack.c). */
unsigned char *ld_cpu_pack_lanes_block(unsigned char *o, const unsigned char *const *src, int rows, size_t off,
                                       ld_kdt dt);
/* The nb blocks of the group whose eight rows start at src[], packed to
 * dst (ld_cpu_q8_packed_size(dt, K, 8) bytes for a whole group): in
 * portable C (cpu_q8_pack.c) or with AVX2 (cpu_q8_avx2.c), the same bytes. */
void ld_cpu_q8_pack_blocks_portable(unsigned char *dst, const unsigned char *const src[LD_CPU_Q8_GROUP_ROWS], ld_kdt dt,
                                    size_t nb);
void ld_cpu_q8_pack_blocks_avx2(unsigned char *dst, const unsigned char *const src[LD_CPU_Q8_GROUP_ROWS], ld_kdt dt,
                                size_t nb);

/* The prep of cpu_q8.h for nblk blocks of 32 at x with AVX-512 (the same
 * bits as cpu_q8.c's): q [nblk][32], dx and xs [nblk]. */
void ld_cpu_q8_quantize_avx512(int8_t *q, float *dx, float *xs, const float *x, size_t nblk);
/* The same with AVX2 (cpu_q8_avx2.c). */
void ld_cpu_q8_quantize_avx2(int8_t *q, float *dx, float *xs, const float *x, size_t nblk);

/* One matmul of the i24 variant (cpu_i24.h) as its kernels see it. */
typedef struct ld_cpu_i24mm {
    float *out;          /* [T][N] */
    const int8_t *dig;   /* [T][K/32][3][32] each block's digits c0, c1, c2 */
    const float *scale;  /* [T][K/32] the blocks' 2^E */
    const float *xs;     /* [T][K/32] their sums, (float)sum X * 2^E */
    const int32_t *dsum; /* [T][K/32][3] the sums of their digits c0, c1, c2 */
    const void *w;       /* the rows */
    const unsigned char *packed; /* their packed layout (cpu_i24.h), or NULL */
    ld_kdt dt;
    const void *bias;    /* NULL: none */
    ld_kdt bias_dt;
    int T, K, N, rope_hd;
    size_t row_bytes;
} ld_cpu_i24mm;

/* Output n of token t of an i24 matmul from the rows (cpu_i24_portable.c,
 * the portable arithmetic). */
void ld_cpu_i24_out_portable(const ld_cpu_i24mm *m, size_t n, int t);

/* Outputs [16g, 16g+16) of all T tokens from group g of the packed layout
 * at gp, with AVX-512 and VNNI (cpu_i24_avx512.c); _streams: those of the
 * LD_CPU_I24_STREAMS groups g[s] at gp[s] together, a block of each in turn
 * (each group's arithmetic is the single group's). */
#define LD_CPU_I24_STREAMS 4
void ld_cpu_i24_group_avx512(const ld_cpu_i24mm *m, const unsigned char *gp, size_t g);
void ld_cpu_i24_streams_avx512(const ld_cpu_i24mm *m, const unsigned char *const gp[LD_CPU_I24_STREAMS],
                               const size_t g[LD_CPU_I24_STREAMS]);
/* A block's E of cpu_i24.h for its amax (finite, > 0): frexpf's e - 23,
 * and one more where amax 2^-E would need a fourth digit (8355711 = 65536 *
 * 127 + 256 * 127 + 127).  A normal amax by its bits: no libm call a block
 * on the decode's path.  Every level's prep. */
static inline int ld_cpu_i24_block_exp(float amax)
{
    uint32_t bits;
    memcpy(&bits, &amax, sizeof bits);
    uint32_t field = (bits >> 23) & 255u;
    if (field) { /* normal: amax 2^-E is its 24-bit significand / 2 */
        int E = (int)field - 149;
        return ((bits & 0x7FFFFFu) | 0x800000u) > 2u * 8355711u ? E + 1 : E;
    }
    int e;
    (void)frexpf(amax, &e); /* subnormal */
    int E = e - 23;
    return ldexpf(amax, -E) > 8355711.0f ? E + 1 : E;
}

/* 2^e as a float, ldexpf's value (0 below 2^-149) */
static inline float ld_cpu_i24_pow2(int e)
{
    if (e < -126 || e > 127) return ldexpf(1.0f, e);
    uint32_t bits = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
/* The prep of cpu_i24.h for nblk blocks of 32 at x with AVX-512 (the same
 * bits as cpu_i24.c's): dig [nblk][3][32], scale, xs [nblk], dsum
 * [nblk][3]. */
void ld_cpu_i24_prep_avx512(int8_t *dig, float *scale, float *xs, int32_t *dsum, const float *x, size_t nblk);
/* The same with AVX2 (cpu_i24_avx2.c), and its kernels: as the AVX-512
 * ones, each group as two halves of eight rows. */
void ld_cpu_i24_prep_avx2(int8_t *dig, float *scale, float *xs, int32_t *dsum, const float *x, size_t nblk);
void ld_cpu_i24_group_avx2(const ld_cpu_i24mm *m, const unsigned char *gp, size_t g);
void ld_cpu_i24_streams_avx2(const ld_cpu_i24mm *m, const unsigned char *const gp[LD_CPU_I24_STREAMS],
                             const size_t g[LD_CPU_I24_STREAMS]);

#endif /* LD_CPU_INTERNAL_H */
