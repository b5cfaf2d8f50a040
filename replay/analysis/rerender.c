/* rerender.c - re-render a logged request and compare with the logged
 * prompt (rerender.h). */
#include "rerender.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/template/render_date.h"
#include "udiff.h"

enum { EXCERPT_CHARS = 60 };

/* 1 when the logger cut or abbreviated a value somewhere in the tree (the
 * JSON view marks those as {"__truncated__": ...} / {"__abbreviated__": ...}). */
static int has_log_cut(const cJSON *j, int depth)
{
    if (!j || depth > 64) return 0;
    if (cJSON_IsObject(j) && (cJSON_GetObjectItemCaseSensitive(j, "__truncated__") ||
                              cJSON_GetObjectItemCaseSensitive(j, "__abbreviated__")))
        return 1;
    for (const cJSON *c = j->child; c; c = c->next)
        if (has_log_cut(c, depth + 1)) return 1;
    return 0;
}

/* Why the re-render cannot be compared with the log, or NULL. */
static const char *not_comparable(const ld_request *r, const cJSON *request)
{
    if (!request) return "the message array was not logged (no 'Receive OpenAI' line)";
    if (has_log_cut(cJSON_GetObjectItemCaseSensitive(request, "messages"), 0) ||
        has_log_cut(cJSON_GetObjectItemCaseSensitive(request, "tools"), 0))
        return "the logger cut the message array (raise --log-requests-level or max_length)";
    if (!r->prompt.bytes || !(r->prompt.flags & LD_TEXT_PRESENT))
        return "the log holds no prompt text (token ids only; comparing needs the tokenizer)";
    if (r->prompt.flags & LD_TEXT_ABBREVIATED) return "the logger abbreviated the prompt";
    return NULL;
}

static ld_finding *add_not_rendered(ld_findings *out, ld_arena *arena, const char *why)
{
    return ld_findings_add(out, arena, LD_K_TEMPLATE_NOT_RENDERED, LD_SEV_INFO, -1,
                           "not re-rendered: %s", why);
}

/* Prepares and renders with strftime_now dated `day` (*date_used set when
 * the template printed a date); SGLang's retry with bare function tools
 * included.  Built-in encoders prepare the request themselves. */
static ld_status render_request(const ld_rerender *rr, const cJSON *request, const char *day,
                                int *date_used, char **out, size_t *out_len, ld_error *err)
{
    ld_tpl_limits lim = rr->chat.limits ? *rr->chat.limits : (ld_tpl_limits){ 0 };
    lim.today = day;
    lim.date_used = date_used;
    ld_chat_opts chat = rr->chat;
    chat.limits = &lim;
    if (rr->src->kind != LD_TPL_JINJA)
        return ld_chat_render(rr->src, request, &chat, out, out_len, err);
    cJSON *prepared = NULL;
    LD_TRY(ld_server_prepare(rr->server, rr->content_parts, request, &prepared, err));
    ld_status st = ld_chat_render(rr->src, prepared, &chat, out, out_len, err);
    if (st == LD_ERR_MISMATCH && rr->server == LD_SERVER_SGLANG &&
        ld_server_flatten_tools(prepared)) {
        ld_error second;
        ld_error_clear(&second);
        st = ld_chat_render(rr->src, prepared, &chat, out, out_len, &second);
        if (st != LD_ERR_MISMATCH && err) *err = second;
    }
    cJSON_Delete(prepared);
    return st;
}

/* How the two texts line up: bytes skipped at the start of each. */
typedef struct lineup {
    size_t log_skip, render_skip;
    const char *note; /* said in the detail, "" when nothing was skipped */
} lineup;

static lineup line_up(const char *bos, const char *p, size_t p_len, const char *x, size_t x_len)
{
    lineup l = { 0, 0, "" };
    size_t b = bos ? strlen(bos) : 0;
    int p_has = b && p_len >= b && !memcmp(p, bos, b);
    int x_has = b && x_len >= b && !memcmp(x, bos, b);
    if (p_has && !x_has) {
        l.log_skip = b;
        l.note = " (the logged prompt begins with the BOS text the tokenizer adds)";
    } else if (x_has && !p_has) {
        l.render_skip = b;
        l.note = " (the logged prompt lacks the template's BOS text)";
    }
    return l;
}

static size_t common_prefix(const char *a, size_t na, const char *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

static size_t common_suffix(const char *a, size_t na, const char *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[na - 1 - i] == b[nb - 1 - i]) i++;
    return i;
}

/* The outcome of comparing the logged prompt with the render. */
typedef struct comparison {
    int same;
    size_t log_off, render_off; /* first difference, in each text's own bytes */
    const char *where;          /* "" or where in a cut prompt */
    const char *lw;             /* the windows the unified diff shows */
    size_t lw_len;
    const char *rw;
    size_t rw_len;
} comparison;

/* A prompt the logger cut: head [0, cut) must begin the render, the tail
 * [cut, len) must end it. */
static void compare_cut(comparison *c, const char *p, size_t p_len, size_t cut,
                        const char *x, size_t x_len)
{
    size_t k = common_prefix(p, cut, x, x_len);
    if (k < cut) {
        *c = (comparison){ 0, k, k, " in the head the logger kept", p, cut, x,
                           x_len < cut ? x_len : cut };
        return;
    }
    size_t tail = p_len - cut, s = common_suffix(p + cut, tail, x, x_len);
    if (s == tail && x_len >= p_len) {
        c->same = 1;
        c->where = " (within the head and tail the logger kept)";
        return;
    }
    size_t shown = x_len < tail ? x_len : tail;
    *c = (comparison){ 0, s < tail ? p_len - 1 - s : cut, s < tail && x_len > s ? x_len - 1 - s : 0,
                       " in the tail the logger kept", p + cut, tail, x + x_len - shown, shown };
}

static comparison compare(const ld_text *prompt, const lineup *l, const char *x, size_t x_len)
{
    comparison c = { 0, 0, 0, "", NULL, 0, NULL, 0 };
    const char *p = prompt->bytes + l->log_skip;
    size_t p_len = prompt->len - l->log_skip;
    x += l->render_skip;
    x_len -= l->render_skip;
    if ((prompt->flags & LD_TEXT_TRUNCATED) && prompt->cut >= l->log_skip) {
        compare_cut(&c, p, p_len, prompt->cut - l->log_skip, x, x_len);
    } else {
        size_t k = common_prefix(p, p_len, x, x_len);
        int head_only = (prompt->flags & LD_TEXT_HEAD_ONLY) != 0;
        c = (comparison){ k == p_len && (k == x_len || head_only), k, k,
                          head_only ? " (within the head the logger kept)" : "",
                          p, p_len, x, x_len };
    }
    c.log_off += l->log_skip;
    c.render_off += l->render_skip;
    return c;
}

static ld_status add_mismatch(const ld_rerender *rr, const ld_request *r, const lineup *l,
                              const comparison *c, const char *date_note, const char *x, size_t x_len,
                              ld_arena *arena, ld_findings *out, ld_error *err)
{
    ld_finding *f = ld_findings_add(out, arena, LD_K_TEMPLATE_RENDER_MISMATCH, LD_SEV_ERROR, -1,
                                    "re-rendering the logged array through %s gives another "
                                    "prompt: first difference at byte %zu of the logged prompt%s%s%s",
                                    rr->src->template_path, c->log_off, c->where, l->note, date_note);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
    f->first_diff = (int64_t)c->log_off;
    f->prompt_offset = (int64_t)c->log_off;
    f->array_offset = (int64_t)c->render_off;
    f->actual_len = (int64_t)r->prompt.len;
    f->expected_len = (int64_t)x_len;
    f->prompt_excerpt = ld_excerpt(arena, r->prompt.bytes, r->prompt.len, c->log_off, EXCERPT_CHARS);
    f->array_excerpt = ld_excerpt(arena, x, x_len, c->render_off, EXCERPT_CHARS);
    f->unified_diff = ld_udiff(c->lw, c->lw_len, c->rw, c->rw_len, "logged prompt",
                               "re-rendered", NULL, arena);
    if (!f->prompt_excerpt || !f->array_excerpt || !f->unified_diff)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for evidence");
    return LD_OK;
}

/* A render that failed: the template refuses what the server rendered
 * (error), or logdiff cannot render it (info). */
static ld_status add_render_failure(const ld_rerender *rr, const ld_error *e, ld_arena *arena,
                                    ld_findings *out, ld_error *err)
{
    ld_finding *f;
    if (e->code == LD_ERR_MISMATCH)
        f = ld_findings_add(out, arena, LD_K_TEMPLATE_RENDER_MISMATCH, LD_SEV_ERROR, -1,
                            "%s refuses the logged array (%s, template line %llu), yet the "
                            "server built a prompt from it", rr->src->template_path, e->msg,
                            (unsigned long long)e->line);
    else if (e->code == LD_ERR_NOMEM)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "%s", e->msg);
    else
        f = ld_findings_add(out, arena, LD_K_TEMPLATE_NOT_RENDERED, LD_SEV_INFO, -1,
                            "not re-rendered: %s (%s)", e->msg, ld_strerror(e->code));
    return f ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
}

static const char *bos_of(const ld_rerender *rr)
{
    return rr->chat.bos_token ? rr->chat.bos_token : rr->src->bos_token;
}

/* The BOS text the logged prompt begins with, when the template prints
 * `bos_token` but was given none (a bare .jinja without --bos-token) and
 * the prompt is that text followed by the render: a short special token
 * (`<...>` or `[...]`, no blank) before the render's first bytes.  Its
 * length, 0 when it is not so. */
static size_t missing_bos(const ld_rerender *rr, const ld_request *r, const char *x, size_t x_len)
{
    if (bos_of(rr) || !rr->src->text || !strstr(rr->src->text, "bos_token") || !r->prompt.bytes) return 0;
    const char *p = r->prompt.bytes;
    size_t n = r->prompt.len, probe = x_len < 32 ? x_len : 32;
    if (!probe || n == 0 || (p[0] != '<' && p[0] != '[')) return 0;
    for (size_t t = 1; t <= 48 && t + probe <= n; t++) {
        if (p[t - 1] == ' ' || p[t - 1] == '\n') return 0;
        if ((p[t - 1] == '>' || p[t - 1] == ']') && !memcmp(p + t, x, probe)) return t;
    }
    return 0;
}

/* One render compared with the logged prompt. */
typedef struct attempt {
    char *x;    /* the render, malloc'd */
    size_t x_len;
    lineup l;
    comparison c;
} attempt;

/* Renders dated `day` and compares; `bos` (a missing_bos lineup, or NULL)
 * lines the two texts up when the template was given no BOS. */
static ld_status attempt_day(const ld_rerender *rr, const ld_request *r, const cJSON *request,
                             const char *day, int *date_used, const lineup *bos, attempt *a, ld_error *err)
{
    a->x = NULL;
    a->x_len = 0;
    LD_TRY(render_request(rr, request, day, date_used, &a->x, &a->x_len, err));
    a->l = bos ? *bos : line_up(bos_of(rr), r->prompt.bytes, r->prompt.len, a->x, a->x_len);
    a->c = compare(&r->prompt, &a->l, a->x, a->x_len);
    return LD_OK;
}

/* A template that prints the date (strftime_now) and differs on the day
 * the request was logged: the server's clock may keep another time zone
 * than its logger, so the days either side are tried; *a becomes the one
 * that gives the logged prompt, and note says which. */
static void try_days_either_side(const ld_rerender *rr, const ld_request *r, const cJSON *request,
                                 const char *day, const lineup *bos, attempt *a, char *note, size_t cap)
{
    for (int k = -1; k <= 1; k += 2) {
        char alt[LD_DATE_LEN + 1];
        ld_date_shift(day, k, alt);
        attempt b;
        int used = 0;
        ld_error e;
        ld_error_clear(&e);
        if (attempt_day(rr, r, request, alt, &used, bos, &b, &e) != LD_OK) continue;
        if (!b.c.same) {
            free(b.x);
            continue;
        }
        free(a->x);
        *a = b;
        snprintf(note, cap, "; strftime_now dated %s, the day %s the logged one (the server's clock keeps "
                 "another time zone)", alt, k < 0 ? "before" : "after");
        return;
    }
}

ld_status ld_rerender_check(const ld_rerender *rr, const ld_request *r,
                            const cJSON *request, ld_arena *arena, ld_findings *out,
                            ld_error *err)
{
    const char *why = not_comparable(r, request);
    if (why)
        return add_not_rendered(out, arena, why) ? LD_OK
               : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
    char day[LD_DATE_LEN + 1], note[200] = "";
    int logged = ld_date_of_timestamp(r->timestamp, day), used = 0;
    if (!logged) ld_date_today(day);
    attempt a;
    ld_error re;
    ld_error_clear(&re);
    if (attempt_day(rr, r, request, day, &used, NULL, &a, &re) != LD_OK)
        return add_render_failure(rr, &re, arena, out, err);
    size_t bos = a.c.same ? 0 : missing_bos(rr, r, a.x, a.x_len);
    char bos_note[256];
    lineup bos_l = { bos, 0, bos_note };
    if (bos) { /* compare what follows it, and say how to give the template its BOS */
        snprintf(bos_note, sizeof bos_note, " (after the logged prompt's leading \"%.*s\": the template prints "
                 "bos_token, which a bare template does not give; pass --bos-token '%.*s' or a "
                 "tokenizer_config.json)", (int)bos, r->prompt.bytes, (int)bos, r->prompt.bytes);
        a.l = bos_l;
        a.c = compare(&r->prompt, &a.l, a.x, a.x_len);
    }
    if (!a.c.same && used) try_days_either_side(rr, r, request, day, bos ? &bos_l : NULL, &a, note, sizeof note);
    if (used && !note[0])
        snprintf(note, sizeof note, "; strftime_now dated %s, %s", day,
                 logged ? "the day logged" : "today's date: the log gives none");
    ld_status st = LD_OK;
    if (a.c.same) {
        ld_finding *f = ld_findings_add(out, arena, LD_K_TEMPLATE_FAITHFUL, LD_SEV_INFO, -1,
                                        "re-rendering the logged array through %s gives the "
                                        "logged prompt byte for byte%s%s%s",
                                        rr->src->template_path, a.c.where, a.l.note, note);
        if (f) f->expected_len = (int64_t)a.x_len, f->actual_len = (int64_t)r->prompt.len;
        else st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
    } else {
        st = add_mismatch(rr, r, &a.l, &a.c, note, a.x, a.x_len, arena, out, err);
    }
    free(a.x);
    return st;
}
