/* fuzz_baseline.c - libFuzzer target for the baseline file of `logdiff
 * regress` (replay/analysis/baseline_io.c, with replay/analysis/jsonline.c
 * under it).  Never a crash, a leak or a read outside the input; what
 * reads without error writes back to a file that reads again and writes
 * the same bytes; and the entry lines read in place (jsonline.h) read as
 * cJSON reads them: the same input with a tab before every entry line (one
 * the in-place reader does not take, and cJSON skips) reads to the same
 * entries, or fails with the same error on the same line.  The corpus in
 * tests/fuzz/corpus/baseline/ replays as the plain test fuzz.baseline. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/analysis/baseline.h"

static ld_status parse(const char *text, size_t len, ld_baseline *b, ld_error *e)
{
    ld_baseline_init(b);
    ld_error_clear(e);
    return ld_baseline_parse(text, len, b, e);
}

/* b written (malloc'd; *file its bytes), then each entry's tag (the
 * entry's place in the file read): what a run compares and reports. */
static char *written(const ld_baseline *b, size_t *len, size_t *file)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) abort();
    if (ld_baseline_write(b, f, NULL) != LD_OK) abort();
    fflush(f);
    *file = *len;
    for (size_t i = 0; i < b->n; i++) fprintf(f, "%zu\n", b->v[i].tag);
    if (fclose(f) != 0) abort();
    return buf;
}

/* data with a tab before every line after the first that starts with {
 * outside a string (a JSON string of cJSON may hold a newline). */
static char *entries_tabbed(const uint8_t *data, size_t size, size_t *len)
{
    char *out = malloc(2 * size + 1);
    if (!out) abort();
    size_t o = 0;
    int in_string = 0;
    for (size_t i = 0; i < size; i++) {
        unsigned char c = data[i];
        if (!in_string && c == '{' && i > 0 && data[i - 1] == '\n') out[o++] = '\t';
        out[o++] = (char)c;
        if (in_string && c == '\\' && i + 1 < size) out[o++] = (char)data[++i];
        else if (c == '"') in_string = !in_string;
    }
    *len = o;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_baseline b, back, tabbed;
    ld_error e, e2;
    size_t len = 0, file = 0, len2 = 0, file2 = 0, tlen = 0;
    char *text = NULL;
    ld_status st = parse((const char *)data, size, &b, &e);
    if (st == LD_OK) {
        text = written(&b, &len, &file);
        if (parse(text, file, &back, &e2) != LD_OK) abort();
        char *again = written(&back, &len2, &file2);
        if (file != file2 || memcmp(text, again, file)) abort();
        free(again);
        ld_baseline_free(&back);
    }
    char *t = entries_tabbed(data, size, &tlen);
    ld_status st2 = parse(t, tlen, &tabbed, &e2);
    if (st != st2) abort();
    if (st == LD_OK) {
        char *t2 = written(&tabbed, &len2, &file2);
        if (len != len2 || memcmp(text, t2, len)) abort();
        free(t2);
    } else if (e.line != e2.line || strcmp(e.msg, e2.msg)) {
        abort(); /* offsets move with the tabs: the line and what was said */
    }
    free(t);
    ld_baseline_free(&tabbed);
    ld_baseline_free(&b);
    free(text);
    return 0;
}
