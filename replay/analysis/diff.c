/* diff.c - see diff.h. */
#include "diff.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pd.h"

struct ld_differ {
    ld_diff_options opts;
    ld_conv_tracker *conv; /* NULL with no_conversations */
};

ld_status ld_differ_new(const ld_diff_options *opts, ld_differ **out, ld_error *err)
{
    ld_differ *d = calloc(1, sizeof *d);
    if (!d) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the differ");
    if (opts) d->opts = *opts;
    if (!d->opts.no_conversations) {
        ld_status st = ld_conv_tracker_new(&d->opts.conv, &d->conv, err);
        if (st != LD_OK) {
            free(d);
            return st;
        }
    }
    *out = d;
    return LD_OK;
}

void ld_differ_free(ld_differ *d)
{
    if (!d) return;
    ld_conv_tracker_free(d->conv);
    free(d);
}

void ld_differ_conv_stats(const ld_differ *d, ld_conv_stats *out)
{
    memset(out, 0, sizeof *out);
    if (d->conv) ld_conv_tracker_stats(d->conv, out);
}

ld_status ld_differ_conv_replay(ld_differ *d, const ld_conv_op *op, ld_error *err)
{
    return d->conv ? ld_conv_replay(d->conv, op, err) : LD_OK;
}

/* The aligner's view of one message: borrowed pointers into the record. */
static ld_status align_msg_of(const ld_message *m, ld_arena *arena, ld_align_msg *a,
                              ld_error *err)
{
    memset(a, 0, sizeof *a);
    a->role = m->role ? m->role : "";
    a->content_present = m->content.bytes != NULL;
    a->content = m->content.bytes ? m->content.bytes : "";
    a->content_len = m->content.len;
    a->content_truncated = (m->content.flags & LD_TEXT_TRUNCATED) != 0;
    a->content_cut = m->content.cut;
    a->reasoning = m->reasoning_content.bytes;
    a->reasoning_len = m->reasoning_content.len;
    a->tool_call_id = m->tool_call_id;
    a->name = m->name;
    if (!m->tool_calls || !m->n_tool_calls) return LD_OK;
    ld_align_tool_call *tc = ld_arena_alloc(arena, m->n_tool_calls * sizeof *tc);
    if (!tc) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for tool calls");
    for (uint32_t i = 0; i < m->n_tool_calls; i++) {
        const ld_tool_call *c = &m->tool_calls[i];
        tc[i] = (ld_align_tool_call){ c->id, c->name ? c->name : "",
                                      c->name ? strlen(c->name) : 0,
                                      c->arguments.bytes ? c->arguments.bytes : "",
                                      c->arguments.len,
                                      (c->flags & LD_TOOL_ARGS_OBJECT) != 0 };
    }
    a->tool_calls = tc;
    a->n_tool_calls = m->n_tool_calls;
    return LD_OK;
}

/* 1 when the record holds what an alignment needs: the messages and the
 * prompt bytes (a cut prompt is fine: nothing inside the cut is judged). */
static int can_align(const ld_request *r)
{
    return r->n_messages > 0 && r->messages && r->prompt.bytes &&
           (r->prompt.flags & LD_TEXT_PRESENT) && !(r->flags & LD_REQ_ERROR);
}

static ld_status add_align_findings(const ld_align_result *res, ld_arena *arena,
                                    ld_findings *out, ld_error *err)
{
    for (size_t i = 0; i < res->n_findings; i++) {
        const ld_align_finding *a = &res->findings[i];
        ld_severity sev = strcmp(a->severity, LD_ALIGN_SEV_ERROR) ? LD_SEV_INFO : LD_SEV_ERROR;
        ld_finding *f = ld_findings_add(out, arena, a->kind, sev, (int64_t)a->msg_index,
                                        "%s", a->detail);
        if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
        f->array_offset = (int64_t)a->text_off;
        f->actual_len = (int64_t)a->text_len;
        f->prompt_offset = (int64_t)a->prompt_off;
        f->expected_len = (int64_t)a->prompt_len;
        f->array_excerpt = a->text_excerpt;
        f->prompt_excerpt = a->prompt_excerpt;
    }
    return LD_OK;
}

/* The alignment into out->align; its findings appended when `findings`. */
static ld_status align_request(const ld_request *r, ld_arena *arena, ld_verdict *out, int findings,
                               ld_error *err)
{
    size_t n = (size_t)r->n_messages;
    ld_align_msg *msgs = ld_arena_alloc(arena, n * sizeof *msgs);
    if (!msgs) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for messages");
    for (size_t i = 0; i < n; i++) LD_TRY(align_msg_of(&r->messages[i], arena, &msgs[i], err));
    ld_align_prompt_info info = { (r->prompt.flags & LD_TEXT_TRUNCATED) != 0, r->prompt.cut };
    ld_align_result *res = NULL;
    LD_TRY(ld_align_run(msgs, n, r->prompt.bytes, r->prompt.len, &info, arena, &res, err));
    out->align = res;
    out->aligned = 1;
    return findings ? add_align_findings(res, arena, &out->findings, err) : LD_OK;
}

ld_status ld_differ_align_only(const ld_request *r, ld_arena *arena, ld_verdict *out, ld_error *err)
{
    out->align = NULL;
    out->aligned = 0;
    return can_align(r) ? align_request(r, arena, out, 0, err) : LD_OK;
}

/* Whether ld_differ_judge follows r's conversation. */
static int tracks(const ld_differ *d, const ld_request *r)
{
    return d->conv && !(r->flags & LD_REQ_ERROR) && r->n_messages >= 0;
}

ld_status ld_differ_track(ld_differ *d, const ld_request *r, ld_arena *arena, ld_error *err)
{
    ld_findings scratch;
    memset(&scratch, 0, sizeof scratch);
    return tracks(d, r) ? ld_conv_check(d->conv, r, arena, &scratch, NULL, err) : LD_OK;
}

ld_status ld_differ_judge(ld_differ *d, const ld_request *r, ld_arena *arena,
                          ld_verdict *out, ld_error *err)
{
    memset(out, 0, sizeof *out);
    LD_TRY(ld_harness_check(r, arena, &out->findings, err));
    LD_TRY(ld_pd_check(r, arena, &out->findings, err));
    if (tracks(d, r)) LD_TRY(ld_conv_check(d->conv, r, arena, &out->findings, &out->conversation, err));
    if (can_align(r)) LD_TRY(align_request(r, arena, out, 1, err));
    ld_harness_capture_loss(r, &out->findings);
    out->verdict = ld_verdict_of(&out->findings);
    return LD_OK;
}
