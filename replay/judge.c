/* judge.c - see judge.h. */
#include "judge.h"

#include <stdlib.h>
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

/* A prompt the logger cut whose input ids it kept whole: the ids decoded
 * with the model's tokenizer are the whole prompt (SGLang's level-2 text is
 * itself that decode).  Trusted only when it begins with the logged head and
 * ends with the logged tail; then *whole is r with that prompt and 1 is
 * returned, else 0 (nothing changed). */
static int whole_prompt(const ld_tok *tok, const ld_request *r, ld_arena *arena, ld_request *whole,
                        size_t *n_ids)
{
    const ld_text *p = &r->prompt;
    if (!tok || !(p->flags & LD_TEXT_TRUNCATED) || !p->bytes || r->n_messages <= 0) return 0;
    int32_t *ids = NULL;
    char *text = NULL;
    size_t n = 0, len = 0, tail = p->len - p->cut;
    int ok = ld_request_input_ids(r, &ids, &n, NULL) == LD_OK &&
             ld_tok_decode(tok, ids, n, &text, &len, NULL) == LD_OK &&
             len > p->len && memcmp(text, p->bytes, p->cut) == 0 &&
             memcmp(text + len - tail, p->bytes + p->cut, tail) == 0;
    char *kept = ok ? ld_arena_memdup(arena, text, len) : NULL;
    free(ids);
    free(text);
    if (!kept) return 0;
    *whole = *r;
    whole->prompt.bytes = kept;
    whole->prompt.len = len;
    whole->prompt.cut = 0;
    whole->prompt.flags &= ~LD_TEXT_TRUNCATED;
    *n_ids = n;
    return 1;
}

static ld_status note_whole(const ld_request *r, size_t n_ids, size_t len, ld_arena *arena, ld_verdict *v,
                            ld_error *e)
{
    ld_finding *f = ld_findings_add(&v->findings, arena, LD_K_LOG_TRUNCATED, LD_SEV_INFO, -1,
        "templated prompt cut by the logger at byte %zu; judged on the whole prompt (%zu bytes) "
        "decoded from the %zu input ids it kept whole, which begins and ends as the logged text",
        r->prompt.cut, len, n_ids);
    if (!f) return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory for findings");
    f->prompt_offset = (int64_t)r->prompt.cut;
    return LD_OK;
}

ld_status ld_judge_request(ld_differ *d, const ld_judge_checks *checks, const ld_request *r,
                           ld_arena *arena, ld_verdict *v, ld_error *e)
{
    ld_request whole;
    size_t n_ids = 0;
    const ld_request *jr = r; /* what the template checks see */
    if (checks && whole_prompt(checks->tok, r, arena, &whole, &n_ids)) jr = &whole;
    LD_TRY(ld_differ_judge(d, jr, arena, v, e));
    if (jr != r) LD_TRY(note_whole(r, n_ids, whole.prompt.len, arena, v, e));
    if (checks && checks->rerender) LD_TRY(rerender(checks->rerender, jr, arena, v, e));
    /* the token check needs the request's own lines: not an OpenAI-only or error record */
    if (checks && checks->tok && r->rid && !(r->flags & LD_REQ_ERROR))
        LD_TRY(ld_tokcheck(checks->tok, r, arena, &v->findings, e));
    if (checks && checks->replay) LD_TRY(ld_replay_check(checks->replay, r, arena, &v->findings, e));
    ld_harness_capture_loss(r, &v->findings); /* the re-render's and tokens' too */
    v->verdict = ld_verdict_of(&v->findings);
    return LD_OK;
}
