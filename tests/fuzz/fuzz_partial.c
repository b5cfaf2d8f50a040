/* fuzz_partial.c - libFuzzer target for the partial results of `logdiff
 * regress --shard ... --partial` as `--merge` reads them
 * (cmd/regress/regress_partial_read.c, with parse/request/request_json.c,
 * replay/analysis/finding_json.c and replay/analysis/jsonline.c under it).
 * Never a crash, a leak or a read outside the input; what reads without
 * error writes back (regress_partial.c) to a file that reads again and
 * writes the same bytes; and the item lines read in place (jsonline.h)
 * read as cJSON reads them: the same input with every item line made one
 * the in-place reader does not take (a space before it, which cJSON skips)
 * reads to the same run, or fails with the same error on the same line.  The corpus in tests/fuzz/corpus/partial/ replays as the plain
 * test fuzz.partial. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/regress/regress_partial.h"

/* Reads a partial into a fresh run; 0 when it read, else -1 with *e. */
static int read_partial(const char *text, size_t len, ld_cli_regress_run *run, ld_cli_partial_head *h,
                        ld_error *e)
{
    memset(run, 0, sizeof *run);
    ld_arena_init(&run->strings, 0);
    ld_baseline_init(&run->base);
    ld_baseline_init(&run->cur);
    ld_error_clear(e);
    if (ld_cli_partial_read_head(text, len, h, e) != LD_OK) return -1;
    if (ld_cli_partial_read_body(text, len, h, run, e) == LD_OK) return 0;
    ld_cli_partial_head_free(h);
    return -1;
}

/* The partial written back into a malloc'd buffer.  h's first input goes
 * to 0: the run read numbers its inputs in the whole list already. */
static char *write_partial(const ld_cli_regress_run *run, ld_cli_partial_head *h, size_t *len)
{
    char *buf = NULL;
    h->first = 0;
    FILE *f = open_memstream(&buf, len);
    if (!f) abort();
    int rc = ld_cli_regress_write_partial(run, h, f);
    if (fclose(f) != 0 || rc != 0) abort(); /* what was read can be written */
    return buf;
}

/* The run read (with its head h) written back: aborts unless it is t[0..tlen). */
static void writes_back(const ld_cli_regress_run *run, ld_cli_partial_head *h, const char *t, size_t tlen)
{
    size_t len = 0;
    char *again = write_partial(run, h, &len);
    if (tlen != len || memcmp(t, again, tlen)) abort();
    free(again);
}

/* data with a space before every line that starts {"item": (malloc'd). */
static char *items_spaced(const uint8_t *data, size_t size, size_t *len)
{
    static const char prefix[] = "{\"item\":";
    size_t k = sizeof prefix - 1;
    char *out = malloc(size + size / k + 1);
    if (!out) abort();
    size_t o = 0;
    for (size_t i = 0; i < size;) {
        int at_line = i == 0 || data[i - 1] == '\n';
        if (at_line && size - i >= k && !memcmp(data + i, prefix, k)) {
            out[o++] = ' ';
            memcpy(out + o, prefix, k);
            o += k;
            i += k;
        } else {
            out[o++] = (char)data[i++];
        }
    }
    *len = o;
    return out;
}

/* The run read from the spaced copy: the same as run (its text t, or
 * the error e when it did not read). */
static void same_as_cjson(const uint8_t *data, size_t size, int rc, const char *t, size_t tlen, const ld_error *e)
{
    size_t slen = 0;
    char *spaced = items_spaced(data, size, &slen);
    ld_cli_regress_run run;
    ld_cli_partial_head h;
    ld_error e2;
    int rc2 = read_partial(spaced, slen, &run, &h, &e2);
    if (rc != rc2) abort();
    if (rc != 0) {
        /* offsets move with the spaces: the line and what was said */
        if (e->code != e2.code || e->line != e2.line || strcmp(e->msg, e2.msg)) abort();
    } else {
        writes_back(&run, &h, t, tlen);
        ld_cli_partial_head_free(&h);
    }
    ld_cli_regress_run_free(&run);
    free(spaced);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_cli_regress_run run, again;
    ld_cli_partial_head h, h2;
    ld_error e, e2;
    char *text = NULL;
    size_t len = 0;
    int rc = read_partial((const char *)data, size, &run, &h, &e);
    if (rc == 0) {
        text = write_partial(&run, &h, &len);
        if (read_partial(text, len, &again, &h2, &e2) != 0) abort();
        writes_back(&again, &h2, text, len);
        ld_cli_regress_run_free(&again);
        ld_cli_partial_head_free(&h2);
        ld_cli_partial_head_free(&h);
    }
    ld_cli_regress_run_free(&run);
    same_as_cjson(data, size, rc, text, len, &e);
    free(text);
    return 0;
}
