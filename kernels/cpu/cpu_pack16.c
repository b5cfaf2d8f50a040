/* cpu_pack16.c - the fast matmul's packed copy (cpu_ops.h,
 * ld_cpu_fast_pack): the rows of a Q4_0 / Q4_1 / Q8_0 matrix sixteen to a
 * group, a group's blocks one after another and each block's sixteen rows
 * together, so that the AVX-512 kernels read a group in one stream and a
 * block's scales with one load.  It moves bytes only: the kernels compute
 * the same products in the same order from it (the same bits). */
#include <string.h>

#include "cpu_internal.h"
#include "cpu_ops.h"

size_t ld_cpu_fast_packed_size(ld_kdt dt, int K, int N)
{
    if (!ld_cpu_is_q32(dt) || K <= 0 || N < LD_CPU_PACK_ROWS) return 0;
    return (size_t)(N / LD_CPU_PACK_ROWS) * ld_cpu_pack16_group_bytes(dt, K);
}

/* block b of the group whose rows start at src[0..15]: the sixteen d, Q4_1's
 * sixteen m, then each row's integers (dt a constant once inlined: copies
 * of fixed sizes, not calls to memcpy: packing 35 MB at load takes 5-7 ms,
 * about twice a memcpy of it, where the calls took 7-8) */
static inline unsigned char *pack_block(unsigned char *o, const unsigned char *const src[LD_CPU_PACK_ROWS],
                                        size_t off, const ld_kdt dt)
{
    const size_t head = ld_cpu_q32_head(dt), ints = ld_cpu_q32_bytes(dt) - head;
    for (size_t h = 0; h < head; h += 2) /* d, then m */
        for (int r = 0; r < LD_CPU_PACK_ROWS; r++, o += 2) memcpy(o, src[r] + off + h, 2);
    for (int r = 0; r < LD_CPU_PACK_ROWS; r++, o += ints) memcpy(o, src[r] + off + head, ints);
    return o;
}

static void pack_groups(unsigned char *o, const void *w, const ld_kdt dt, int K, int N, int rope_hd)
{
    size_t nb = (size_t)(K / LD_CPU_QB), bytes = ld_cpu_q32_bytes(dt);
    for (size_t g = 0; g < (size_t)(N / LD_CPU_PACK_ROWS); g++) {
        const unsigned char *src[LD_CPU_PACK_ROWS];
        ld_cpu_group_rows(src, LD_CPU_PACK_ROWS, w, dt, K, g * LD_CPU_PACK_ROWS, rope_hd);
        for (size_t b = 0; b < nb; b++) o = pack_block(o, src, b * bytes, dt);
    }
}

void ld_cpu_fast_pack(void *dst, const void *w, ld_kdt dt, int K, int N, int rope_hd)
{
    if (!ld_cpu_fast_packed_size(dt, K, N)) return;
    if (dt == LD_KDT_Q4_0) pack_groups(dst, w, LD_KDT_Q4_0, K, N, rope_hd);
    else if (dt == LD_KDT_Q4_1) pack_groups(dst, w, LD_KDT_Q4_1, K, N, rope_hd);
    else pack_groups(dst, w, LD_KDT_Q8_0, K, N, rope_hd);
}
