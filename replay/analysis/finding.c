/* finding.c - see finding.h. */
#include "finding.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

ld_finding *ld_findings_add(ld_findings *list, ld_arena *arena, const char *kind,
                            ld_severity sev, int64_t message, const char *fmt, ...)
{
    if (list->n == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 8;
        ld_finding *nv = ld_arena_alloc(arena, cap * sizeof *nv);
        if (!nv) return NULL;
        if (list->n) memcpy(nv, list->v, list->n * sizeof *nv);
        list->v = nv; /* the old array stays in the arena until its reset */
        list->cap = cap;
    }
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *detail = ld_arena_memdup(arena, buf, strlen(buf));
    if (!detail) return NULL;
    ld_finding *f = &list->v[list->n++];
    *f = (ld_finding){ kind, sev, message, detail, LD_NO_VALUE, LD_NO_VALUE,
                       LD_NO_VALUE, LD_NO_VALUE, LD_NO_VALUE, NULL, NULL, NULL, NULL };
    return f;
}

const char *ld_excerpt(ld_arena *arena, const char *s, size_t s_len, size_t off,
                       size_t max_chars)
{
    if (off > s_len) off = s_len;
    /* start a little before off, on a character boundary */
    size_t start = off > max_chars / 4 ? off - max_chars / 4 : 0;
    while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80) start--;
    char *out = ld_arena_alloc(arena, max_chars * 4 + 8);
    if (!out) return NULL;
    size_t o = 0, chars = 0, i = start;
    if (start > 0) { memcpy(out, "...", 3); o = 3; }
    while (i < s_len && chars < max_chars) {
        unsigned char c = (unsigned char)s[i];
        size_t want = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4, n = 1;
        while (i + n < s_len && n < want && ((unsigned char)s[i + n] & 0xC0) == 0x80) n++;
        if (n < want && i + n == s_len) break; /* the text ends inside a character: not shown */
        memcpy(out + o, s + i, n);
        o += n;
        i += n;
        chars++;
    }
    if (i < s_len) { memcpy(out + o, "...", 3); o += 3; }
    out[o] = '\0';
    return out;
}

static const char *const categories[] = { "harness", "template", "kernels", "sampling", "log" };

/* Every kind of finding.h (tests/replay/analysis/test_baseline.c checks that none is
 * missing). */
static const char *const kinds[] = {
    LD_K_HARNESS_EMPTY_ASSISTANT, LD_K_HARNESS_STALE_ASSISTANT, LD_K_HARNESS_ORPHAN_TOOL,
    LD_K_TEMPLATE_DROPPED, LD_K_TEMPLATE_MANGLED, LD_K_TEMPLATE_ORDER,
    LD_K_TEMPLATE_DROPPED_TOOL_CALL, LD_K_TEMPLATE_REASONING_STRIPPED,
    LD_K_TEMPLATE_FAITHFUL, LD_K_TEMPLATE_RENDER_MISMATCH, LD_K_TEMPLATE_NOT_RENDERED,
    LD_K_TEMPLATE_TOKENS_FAITHFUL, LD_K_TEMPLATE_TOKEN_MISMATCH, LD_K_TEMPLATE_TOKENS_NOT_CHECKED,
    LD_K_TEMPLATE_SERVERS_DIFFER,
    LD_K_LOG_TRUNCATED, LD_K_LOG_UNPAIRED, LD_K_LOG_PARSE_ERROR, LD_K_LOG_CAPTURE_LOSS, LD_K_LOG_CAPTURE_CUT,
    LD_K_LOG_MESSAGE_HIDDEN, LD_K_LOG_NO_MESSAGES,
    LD_K_SAMPLING_REPETITION,
    LD_K_KERNELS_DIVERGENCE, LD_K_KERNELS_CONSISTENT, LD_K_KERNELS_NOT_REPLAYED,
};

const char *ld_kind_static(const char *s)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(s, kinds[i])) return kinds[i];
    return NULL;
}

const char *ld_verdict_static(const char *s)
{
    static const char *const verdicts[] = { "ok", "harness", "template", "kernels", "sampling", "log" };
    for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++)
        if (!strcmp(s, verdicts[i])) return verdicts[i];
    return NULL;
}

const char *ld_kind_category(const char *kind)
{
    for (size_t i = 0; i < sizeof categories / sizeof categories[0]; i++) {
        size_t n = strlen(categories[i]);
        if (!strncmp(kind, categories[i], n) && kind[n] == '.') return categories[i];
    }
    return "log";
}

static int category_rank(const char *category)
{
    for (size_t i = 0; i < sizeof categories / sizeof categories[0]; i++)
        if (!strcmp(category, categories[i])) return (int)i;
    return (int)(sizeof categories / sizeof categories[0]);
}

const char *ld_verdict_of(const ld_findings *list)
{
    const char *best = NULL;
    for (size_t i = 0; i < list->n; i++) {
        if (list->v[i].severity != LD_SEV_ERROR) continue;
        const char *cat = ld_kind_category(list->v[i].kind);
        if (!best || category_rank(cat) < category_rank(best)) best = cat;
    }
    return best ? best : "ok";
}
