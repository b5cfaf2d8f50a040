/* fuzz_logline.c - libFuzzer target: the bytes are cut into lines and fed to
 * a pairer (every option on, or, when the first byte is odd, counts only so
 * that token-id lists are skimmed; small max_open so eviction runs too, for
 * open records and for prefill/decode records waiting for their partner);
 * must not crash or leak.  Records are freed by the pairer after the
 * callback. */
#include <stdint.h>
#include <string.h>

#include "parse/pair/pair.h"

static int sink(void *ctx, ld_request *r)
{
    (void)ctx;
    /* touch what a consumer reads */
    volatile size_t n = r->prompt.len + r->output.len + (r->rid ? strlen(r->rid) : 0);
    if (r->peer) n += r->peer->prompt.len + (r->peer->rid ? strlen(r->peer->rid) : 0);
    (void)n;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_pair_options o = {0};
    o.flags = size && (data[0] & 1) ? LD_PAIR_ERROR_RECORDS
                                    : LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES | LD_PAIR_ERROR_RECORDS;
    o.max_open = 4;
    o.json_trunc_half = 4;
    ld_pairer *p;
    ld_error e;
    if (ld_pairer_new(&o, sink, NULL, &p, &e) != LD_OK) return 0;
    const char *s = (const char *)data, *end = s + size;
    uint64_t lineno = 1;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        /* every third line names a writer, as a capture's do (the OpenAI queue's key) */
        const char *src = lineno % 3 ? NULL : lineno % 2 ? "h python3[1]" : "h python3[2]";
        ld_line l = {s, n, lineno, (uint64_t)(s - (const char *)data), 0, nl == NULL, 0, src, src ? 12 : 0};
        lineno++;
        ld_line_result res;
        ld_pairer_feed_line(p, lineno % 2 ? "a.log" : "b.log", &l, &res, &e);
        s += n + (nl != NULL);
    }
    ld_pairer_finish(p, &e);
    ld_pairer_free(p);
    return 0;
}
