/* fuzz_journal.c - libFuzzer target for the conversation journals of
 * `logdiff regress --shard ... --conv-journal` as `--conv-from` reads them
 * (cmd/regress/regress_journal.c).  Never a crash, a leak or a read outside
 * the input; and what reads without error writes back to a journal that
 * reads again, op for op, and writes the same bytes.  The corpus in
 * tests/fuzz/corpus/journal/ replays as the plain test fuzz.journal. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/regress/regress_journal.h"

static ld_status copy_op(void *ctx, const ld_conv_op *op, ld_error *e)
{
    return ld_cli_journal_on_op(ctx, op) == 0 ? LD_OK : LD_FAIL(e, LD_ERR_IO, 0, "cannot write the op");
}

/* Reads text as a journal and writes it back into a malloc'd buffer
 * (*out); 0 when it read. */
static int round_trip(const char *text, size_t len, char **out, size_t *out_len)
{
    ld_error e;
    ld_error_clear(&e);
    ld_cli_partial_head h;
    if (ld_cli_partial_read_head(text, len, &h, &e) != LD_OK) return -1;
    ld_cli_journal j = { tmpfile(), LD_JOURNAL_DIGEST_INIT, 0 };
    if (!j.ops) abort();
    uint64_t digest = 0;
    int rc = -1;
    if (h.journal && ld_cli_journal_read_ops(text, len, copy_op, &j, &digest, &e) == LD_OK) {
        FILE *f = open_memstream(out, out_len);
        if (!f || ld_cli_journal_write(&j, &h, f) != 0 || fclose(f) != 0) abort();
        rc = 0;
    }
    fclose(j.ops);
    ld_cli_partial_head_free(&h);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = NULL, *text2 = NULL, *text3 = NULL;
    size_t len = 0, len2 = 0;
    if (round_trip((const char *)data, size, &text, &len) == 0) {
        if (round_trip(text, len, &text2, &len2) != 0) abort();
        size_t len3 = 0;
        if (round_trip(text2, len2, &text3, &len3) != 0 || len3 != len2 || memcmp(text2, text3, len2)) abort();
    }
    free(text);
    free(text2);
    free(text3);
    return 0;
}
