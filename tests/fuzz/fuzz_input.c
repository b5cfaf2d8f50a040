/* fuzz_input.c - libFuzzer target for parse/input/input.c and parse/input/linereader.c:
 * any bytes, opened from memory, every member and every line read; errors are
 * fine, crashes, leaks and sanitizer reports are not.  A small line limit
 * exercises the skip path too. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "parse/input/input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_member(ld_linereader *lr)
{
    ld_line l;
    int has;
    uint64_t sum = 0;
    for (;;) {
        ld_status st = ld_linereader_next(lr, &l, &has, NULL);
        if (st == LD_ERR_LIMIT) continue;
        if (st != LD_OK || !has) break;
        /* touch every byte so ASan sees out-of-range slices */
        for (size_t i = 0; i < l.len; i++) sum += (unsigned char)l.data[i];
    }
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_input *in;
    ld_error err;
    if (ld_input_open_memory(data, size, "fuzz", &in, &err) != LD_OK) return 0;
    ld_linereader *lr;
    if (ld_linereader_new(in, 4096, &lr, NULL) != LD_OK) {
        ld_input_close(in);
        return 0;
    }
    int has = 1;
    for (int n = 0; has && n < 1000; n++) {
        (void)ld_input_member_name(in);
        ld_linereader_reset(lr);
        read_member(lr);
        if (ld_input_next_member(in, &has, &err) != LD_OK) has = 1;
    }
    (void)ld_input_bytes_consumed(in);
    ld_linereader_free(lr);
    ld_input_close(in);
    return 0;
}
