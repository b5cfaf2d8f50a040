/* fuzz_partial.c - libFuzzer target for the partial results of `logdiff
 * regress --shard ... --partial` as `--merge` reads them
 * (cmd/regress/regress_partial_read.c, with parse/request/request_json.c
 * and replay/analysis/finding_json.c under it).  Never a crash, a leak or
 * a read outside the input; and what reads without error writes back
 * (regress_partial.c) to a file that reads again and writes the same
 * bytes.  The corpus in tests/fuzz/corpus/partial/ replays as the plain
 * test fuzz.partial. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/regress/regress_partial.h"

/* Reads a partial into a fresh run; 0 when it read. */
static int read_partial(const char *text, size_t len, ld_cli_regress_run *run, ld_cli_partial_head *h)
{
    memset(run, 0, sizeof *run);
    ld_arena_init(&run->strings, 0);
    ld_baseline_init(&run->base);
    ld_baseline_init(&run->cur);
    ld_error e;
    ld_error_clear(&e);
    if (ld_cli_partial_read_head(text, len, h, &e) != LD_OK) return -1;
    if (ld_cli_partial_read_body(text, len, h, run, &e) == LD_OK) return 0;
    ld_cli_partial_head_free(h);
    return -1;
}

/* The partial written back into a malloc'd buffer. */
static char *write_partial(const ld_cli_regress_run *run, const ld_cli_partial_head *h, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) abort();
    int rc = ld_cli_regress_write_partial(run, h, f);
    if (fclose(f) != 0 || rc != 0) abort(); /* what was read can be written */
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_cli_regress_run run, again;
    ld_cli_partial_head h, h2;
    if (read_partial((const char *)data, size, &run, &h) == 0) {
        size_t len = 0, len2 = 0;
        h.first = 0; /* the run read numbers its inputs in the whole list already */
        char *text = write_partial(&run, &h, &len);
        if (read_partial(text, len, &again, &h2) != 0) abort();
        h2.first = 0;
        char *text2 = write_partial(&again, &h2, &len2);
        if (len != len2 || memcmp(text, text2, len)) abort();
        free(text);
        free(text2);
        ld_cli_regress_run_free(&again);
        ld_cli_partial_head_free(&h2);
        ld_cli_partial_head_free(&h);
    }
    ld_cli_regress_run_free(&run);
    return 0;
}
