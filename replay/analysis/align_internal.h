/* align_internal.h - shared between replay/analysis/align.c (the alignment) and
 * replay/analysis/align_report.c (findings).  Not a public header. */
#ifndef LD_ALIGN_INTERNAL_H
#define LD_ALIGN_INTERNAL_H

#include "align.h"
#include "align_find.h"

/* Per-message view of the parts' texts (borrowed from the input). */
typedef struct ld_align_work {
    const char *vis;        /* visible content / tool result text */
    size_t vis_len;
    int vis_cut;            /* the logger cut lies inside vis */
    size_t vis_cut_at;      /* relative to vis */
    const char *rsn;        /* reasoning text (field or <think> body) */
    size_t rsn_len;
    int is_system;          /* system/developer: may be moved anywhere */
    int primary;            /* index of the CONTENT/TOOL_RESULT part, -1 if none */
    int reasoning;          /* index of the REASONING part, -1 if none */
    int has_think_only;     /* content non-empty but all of it was reasoning */
} ld_align_work;

/* Appends the findings derived from res (arrays already sized by the caller:
 * res->findings has room for `cap` entries).  Returns LD_OK or LD_ERR_NOMEM. */
ld_status ld_align_report(const ld_align_msg *msgs, const ld_align_work *work,
                          const ld_af_prompt *pr, ld_align_result *res, size_t cap,
                          ld_arena *arena, ld_error *err);

#endif
