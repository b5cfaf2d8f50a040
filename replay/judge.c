/* judge.c - see judge.h. */
#include "judge.h"

#include <string.h>

#include "parse/pylit/pylit_json.h"
#include "replay/analysis/harness.h"
#include "replay/analysis/tokcheck.h"
#include "replay/template/server_prep.h"

ld_status ld_judge_open_template(const char *path, const char *server, ld_rerender *rr, ld_tpl_source **src,
                                 ld_error *err)
{
    int kind = ld_server_by_name(server);
    if (kind < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "unknown server '%.40s' (sglang or hf)", server);
    LD_TRY(ld_tpl_source_load(path, NULL, src, err));
    rr->src = *src;
    rr->server = (ld_server_kind)kind;
    rr->content_parts = (*src)->text && ld_server_template_wants_parts((*src)->text, (*src)->text_len);
    return LD_OK;
}

ld_status ld_judge_open_replay(const char *dir, const char *backend, int tp, int threads, ld_replay_engine **e,
                               int *in_split, ld_error *err)
{
    const char *b = backend ? backend : "cpu";
    *in_split = 0;
    /* split: the engine's own backend is made by the split (replay.h) */
    ld_status st = ld_replay_engine_open(dir, tp ? "cpu" : b, threads, e, err);
    if (st == LD_OK && tp) {
        *in_split = 1;
        st = ld_replay_engine_set_tp(*e, tp, 1, b, NULL, threads, err);
    }
    if (st != LD_OK) {
        ld_replay_engine_close(*e);
        *e = NULL;
    }
    return st;
}

int ld_judge_needs_values(const ld_judge_checks *c)
{
    return c->rerender || c->tok || c->replay;
}

/* --template: the re-render findings join the request's. */
static ld_status rerender(const ld_rerender *rr, const ld_request *r, ld_arena *arena,
                          ld_verdict *v, ld_error *e)
{
    cJSON *request = r->openai_obj && !(r->flags & LD_REQ_ERROR)
                     ? ld_json_value_plain(r->openai_obj, arena) : NULL;
    if (r->openai_obj && !request && !(r->flags & LD_REQ_ERROR))
        return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory converting the logged request");
    ld_status st = LD_OK;
    if (!(r->flags & LD_REQ_ERROR))
        st = ld_rerender_check(rr, r, request, arena, &v->findings, e);
    cJSON_Delete(request);
    return st;
}

ld_status ld_judge_request(ld_differ *d, const ld_judge_checks *checks, const ld_request *r,
                           ld_arena *arena, ld_verdict *v, ld_error *e)
{
    LD_TRY(ld_differ_judge(d, r, arena, v, e));
    if (checks && checks->rerender) LD_TRY(rerender(checks->rerender, r, arena, v, e));
    /* the token check needs the request's own lines: not an OpenAI-only or error record */
    if (checks && checks->tok && r->rid && !(r->flags & LD_REQ_ERROR))
        LD_TRY(ld_tokcheck(checks->tok, r, arena, &v->findings, e));
    if (checks && checks->replay) LD_TRY(ld_replay_check(checks->replay, r, arena, &v->findings, e));
    ld_harness_capture_loss(r, &v->findings); /* the re-render's and tokens' too */
    v->verdict = ld_verdict_of(&v->findings);
    return LD_OK;
}
