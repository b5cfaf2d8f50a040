/* logline_rebase.c - a payload parser's error made relative to the line
 * (logline.h's ld_logline_rebase_msg), shared by the line formats: a leaf,
 * so that they need not call each other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logline.h"

/* A payload parser's message says "... at byte N" relative to its buffer;
 * make N relative to the line, like err->offset. */
void ld_logline_rebase_msg(ld_error *err, size_t off)
{
    char buf[sizeof err->msg];
    const char *m = err->msg, *q;
    size_t o = 0;
    while ((q = strstr(m, "byte ")) != NULL && o < sizeof buf - 32) {
        q += 5;
        size_t k = (size_t)(q - m);
        if (k > sizeof buf - 32 - o) break;
        memcpy(buf + o, m, k);
        o += k;
        char *end;
        unsigned long long v = strtoull(q, &end, 10);
        if (end == q) {
            m = q;
            continue;
        }
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%llu", v + off);
        m = end;
    }
    snprintf(buf + o, sizeof buf - o, "%s", m);
    memcpy(err->msg, buf, sizeof buf);
}
