/* cpu_q8_pack.c - the q8 matmul's packed layout (cpu_q8.h): the rows of a
 * Q4_0 / Q4_1 / Q8_0 matrix regrouped eight at a time so that the AVX2
 * kernel reads a 32-bit lane per row, the eight rows' scales side by side,
 * and a pass's bytes in one stream.  Its size, where a packed group's rows
 * start (ld_cpu_group_rows: cpu_pack16.c's groups too), and the portable
 * packing (cpu_q8_avx2.c has the AVX2 one; cpu_q8.c chooses), a block of it
 * for any group size (i24's sixteen rows too: cpu_i24.c). */
#include <string.h>

#include "cpu_internal.h"
#include "cpu_q8.h"

#define QB LD_CPU_QB
#define ROWS LD_CPU_Q8_GROUP_ROWS

size_t ld_cpu_q8_packed_size(ld_kdt dt, int K, int N)
{
    return (size_t)(N / ROWS) * ROWS * (size_t)(K / QB) * ld_cpu_q32_bytes(dt);
}

unsigned char *ld_cpu_pack_lanes_block(unsigned char *o, const unsigned char *const *src, int rows, size_t off,
                                       ld_kdt dt)
{
    size_t head = ld_cpu_q32_head(dt), ints = ld_cpu_q32_bytes(dt) - head;
    for (size_t h = 0; h < head; h += 2) /* d, then m */
        for (int r = 0; r < rows; r++, o += 2) memcpy(o, src[r] + off + h, 2);
    for (size_t c = 0; c < ints; c += 4)
        for (int r = 0; r < rows; r++, o += 4) memcpy(o, src[r] + off + head + c, 4);
    return o;
}

void ld_cpu_group_rows(const unsigned char **src, int rows, const void *w, ld_kdt dt, int K, size_t n0, int rope_hd)
{
    size_t row_bytes = (size_t)(K / QB) * ld_cpu_q32_bytes(dt);
    for (int r = 0; r < rows; r++)
        src[r] = (const unsigned char *)w + ld_cpu_src_row(n0 + (size_t)r, rope_hd) * row_bytes;
}

void ld_cpu_q8_pack_blocks_portable(unsigned char *dst, const unsigned char *const src[ROWS], ld_kdt dt, size_t nb)
{
    size_t bytes = ld_cpu_q32_bytes(dt);
    for (size_t b = 0; b < nb; b++) dst = ld_cpu_pack_lanes_block(dst, src, ROWS, b * bytes, dt);
}
