/* fuzz_capture.c - libFuzzer target for parse/capture/: the first byte picks
 * the capture (auto or one forced, as --capture does), the rest is a
 * member's lines pushed one at a time (and the lines a push made whole
 * besides popped), then drained, with a small line limit so that the drop
 * path runs too; each line is also parsed alone as every wrapper's record,
 * and a Docker or journal-json record the fast path takes must read the
 * same through cJSON.  Errors are fine; crashes, leaks and sanitizer reports
 * are not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse/capture/capture.h"
#include "parse/capture/capture_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* touch every byte so ASan sees out-of-range slices */
static uint64_t touch(const ld_line *l)
{
    uint64_t sum = l->lineno + l->offset + l->lost_bytes;
    for (size_t i = 0; i < l->len; i++) sum += (unsigned char)l->data[i];
    for (size_t i = 0; i < l->source_len; i++) sum += (unsigned char)l->source[i];
    return sum;
}

/* the fast Docker path and cJSON agree on every record the fast path takes */
static void docker_agrees(const char *s, size_t n)
{
    char *a = malloc(n ? n : 1), *b = NULL;
    size_t cb = 0;
    ld_capture_record fast, slow;
    memset(&fast, 0, sizeof fast);
    if (a && !ld_capture_docker_fast(s, n, a, &fast)) {
        if (ld_capture_parse_json(LD_CAPTURE_DOCKER, s, n, &b, &cb, &slow, NULL) != LD_OK ||
            fast.len != slow.len || memcmp(fast.text, slow.text, fast.len) || fast.last != slow.last ||
            fast.source_len != slow.source_len || memcmp(fast.source, slow.source, fast.source_len))
            abort();
    }
    free(a);
    free(b);
}

static int same_record(const ld_capture_record *a, const ld_capture_record *b)
{
    return a->len == b->len && !memcmp(a->text, b->text, a->len) && a->last == b->last &&
           a->source_len == b->source_len && !memcmp(a->source, b->source, a->source_len) && !a->lost == !b->lost;
}

/* the same for journalctl's JSON */
static void journal_agrees(const char *s, size_t n)
{
    char *a = malloc(n + 16), *b = NULL;
    size_t cb = 0;
    ld_journal_spans js;
    ld_capture_record fast, slow;
    if (a && !ld_capture_journal_spans(s, n, &js) && !ld_capture_journal_decode(&js, a, &fast) &&
        (ld_capture_parse_journal_json(s, n, &b, &cb, &slow, NULL) != LD_OK || !same_record(&fast, &slow)))
        abort();
    free(a);
    free(b);
}

static void parse_alone(const char *s, size_t n, char **buf, size_t *cap)
{
    docker_agrees(s, n);
    journal_agrees(s, n);
    for (int k = LD_CAPTURE_PLAIN + 1; k < LD_CAPTURE_COUNT; k++) {
        ld_capture_record r;
        if (ld_capture_parse((ld_capture_kind)k, s, n, buf, cap, &r, NULL) == LD_OK)
            for (size_t i = 0; i < r.len; i++) (void)*(volatile const char *)(r.text + i);
    }
    (void)ld_capture_recognise(s, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    int kind = (int)(data[0] % (LD_CAPTURE_COUNT + 1)) - 1; /* -1: auto */
    ld_capture *c = NULL;
    if (ld_capture_new((ld_capture_kind)kind, 512, &c, NULL) != LD_OK) return 0;
    const char *s = (const char *)data + 1, *end = (const char *)data + size;
    char *buf = NULL;
    size_t cap = 0;
    uint64_t sum = 0, lineno = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        ld_line in = { s, n, ++lineno, (uint64_t)(s - (const char *)data), 0, nl == NULL, 0, NULL, 0}, out;
        int has = 0;
        (void)ld_capture_push(c, &in, &out, &has, NULL);
        if (has) sum += touch(&out);
        for (ld_capture_pop(c, &out, &has, NULL); has; ld_capture_pop(c, &out, &has, NULL)) sum += touch(&out);
        parse_alone(s, n, &buf, &cap);
        s = nl ? nl + 1 : end;
    }
    for (int has = 1; has;) {
        ld_line out;
        has = 0;
        (void)ld_capture_drain(c, &out, &has, NULL);
        if (has) sum += touch(&out);
    }
    (void)sum;
    free(buf);
    ld_capture_free(c);
    return 0;
}
