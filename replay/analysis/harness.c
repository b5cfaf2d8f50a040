/* harness.c - see harness.h. */
#define _GNU_SOURCE /* memmem */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "repetition.h"

#define NOMEM(err) LD_FAIL((err), LD_ERR_NOMEM, 0, "out of memory adding a finding")
#define ADD(out, arena, err, ...)                                  \
    do {                                                           \
        if (!ld_findings_add((out), (arena), __VA_ARGS__)) return NOMEM(err); \
    } while (0)

int ld_harness_text_blank(const ld_text *t)
{
    if (!(t->flags & LD_TEXT_PRESENT)) return 1;
    if (t->flags & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED | LD_TEXT_HEAD_ONLY))
        return t->n_chars == 0;
    if (!t->bytes) return t->n_chars == 0;
    for (size_t i = 0; i < t->len; i++) {
        char c = t->bytes[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f') return 0;
    }
    return 1;
}

static int is_role(const ld_message *m, const char *role)
{
    return m->role && !strcmp(m->role, role);
}

/* ---------------------------------------------------------------- log.* */

static ld_status parse_error(const ld_request *r, ld_arena *a, ld_findings *out, ld_error *err)
{
    const ld_error *e = &r->error;
    ADD(out, a, err, LD_K_LOG_PARSE_ERROR, LD_SEV_ERROR, -1,
        "request line failed to parse: %s:%llu: byte %llu: %s (%s); the request is not checked",
        e->path ? e->path : "-", (unsigned long long)e->line, (unsigned long long)e->offset,
        e->msg[0] ? e->msg : "?", ld_strerror(e->code));
    return LD_OK;
}

static ld_status unpaired(const ld_request *r, ld_arena *a, ld_findings *out, ld_error *err)
{
    unsigned m = r->missing;
    char parts[128] = "";
    for (int p = 0; p < LD_PART_COUNT; p++)
        if (m & LD_PART_BIT(p))
            snprintf(parts + strlen(parts), sizeof parts - strlen(parts), "%s%s",
                     parts[0] ? ", " : "", ld_part_name((ld_part)p));
    const char *why;
    if (r->engine == LD_ENGINE_VLLM)
        why = "no output line: output logging off (--enable-log-outputs), client disconnect or "
              "cancelled stream, crash, or a line in another file";
    else if ((m & LD_PART_BIT(LD_PART_FINISH)) && (m & LD_PART_BIT(LD_PART_RECEIVE)))
        why = "Receive OpenAI without Receive: rejected before tokenization (validation error), "
              "or its Receive is in another file";
    else if (m & LD_PART_BIT(LD_PART_FINISH))
        why = "Receive without Finish: client disconnect or cancelled stream (raises before "
              "Finish is logged), validation error before scheduling, "
              "SGLANG_LOG_REQUEST_EXCEEDED_MS (Finish only for slow requests), n>1 sampling "
              "(Finish rids regenerated), a crash, or logging toggled off at runtime; not "
              "evidence of a dropped message";
    else
        why = "Finish without Receive: the Receive is in another file (rotation, another "
              "server), logging was turned on after it arrived, or an n>1 sub-request whose "
              "rid was regenerated";
    ADD(out, a, err, LD_K_LOG_UNPAIRED, LD_SEV_ERROR, -1, "missing %s: %s",
        parts[0] ? parts : "a part", why);
    return LD_OK;
}

/* What the logger did to t, for a detail; NULL when nothing. */
static const char *cut_words(const ld_text *t, int *gone)
{
    *gone = 0;
    if (t->flags & LD_TEXT_SKIPPED) return *gone = 1, "left out (log level 0/1)";
    if (t->flags & LD_TEXT_ABBREVIATED)
        return *gone = 1, "abbreviated to a length and a digest";
    if (t->flags & LD_TEXT_TRUNCATED) return "cut in the middle (head and tail kept)";
    if (t->flags & LD_TEXT_HEAD_ONLY) return "maybe cut at the end (vLLM --max-log-len)";
    return NULL;
}

/* A line whose capture lost bytes inside it (Docker's U+FFFD at a cut):
 * what differs there is the capture's, so template findings are only
 * evidence (ld_harness_capture_loss). */
static ld_status capture_loss(const ld_request *r, ld_arena *a, ld_findings *out, ld_error *err)
{
    for (int p = 0; p < LD_PART_COUNT; p++) {
        const ld_source *s = &r->src[p];
        if (!s->line || !s->lost_bytes) continue;
        ADD(out, a, err, LD_K_LOG_CAPTURE_LOSS, LD_SEV_ERROR, -1,
            "the %s line (%s:%llu) lost %llu bytes in its capture (cut inside a character, written as "
            "U+FFFD): template checks cannot tell its differences from the capture's",
            ld_part_name((ld_part)p), s->member ? s->member : "-", (unsigned long long)s->line,
            (unsigned long long)s->lost_bytes);
    }
    return LD_OK;
}

/* A line cut for good and read up to its last whole field: the request is
 * judged on what came; what differs may be what the cut took. */
static ld_status capture_cut(const ld_request *r, ld_arena *a, ld_findings *out, ld_error *err)
{
    for (int p = 0; p < LD_PART_COUNT; p++) {
        const ld_source *s = &r->src[p];
        if (!s->line || !s->cut_at) continue;
        ADD(out, a, err, LD_K_LOG_CAPTURE_CUT, LD_SEV_ERROR, -1,
            "the %s line (%s:%llu) was cut for good after %llu bytes (by its capture, or where it was "
            "copied from): read up to its last whole field; %s%s%s is missing, and template checks "
            "cannot tell its differences from the cut's",
            ld_part_name((ld_part)p), s->member ? s->member : "-", (unsigned long long)s->line,
            (unsigned long long)s->cut_at, s->cut_field && *s->cut_field ? "from `" : "what came after it",
            s->cut_field && *s->cut_field ? s->cut_field : "", s->cut_field && *s->cut_field ? "` on" : "");
    }
    return LD_OK;
}

void ld_harness_capture_loss(const ld_request *r, ld_findings *list)
{
    if (!(r->flags & (LD_REQ_CAPTURE_LOSS | LD_REQ_CAPTURE_CUT))) return;
    for (size_t i = 0; i < list->n; i++)
        if (!strncmp(list->v[i].kind, "template.", 9)) list->v[i].severity = LD_SEV_INFO;
}

static ld_status trunc_levels(const ld_request *r, ld_arena *a, ld_findings *out,
                              ld_error *err)
{
    int pg, og;
    const char *pw = cut_words(&r->prompt, &pg), *ow = cut_words(&r->output, &og);
    if ((r->prompt.flags & LD_TEXT_SKIPPED) && (r->output.flags & LD_TEXT_SKIPPED)) {
        ADD(out, a, err, LD_K_LOG_TRUNCATED, LD_SEV_ERROR, -1,
            "no templated prompt in the log (level 0/1): template checks not possible; no output "
            "text: conversation and repetition checks not possible%s",
            r->n_messages < 0 ? "; no message array (Receive OpenAI is logged from level 2)" : "");
        return LD_OK;
    }
    if (pw) {
        ld_finding *f = ld_findings_add(out, a, LD_K_LOG_TRUNCATED, pg ? LD_SEV_ERROR : LD_SEV_INFO,
            -1, "templated prompt %s: %llu chars shown%s", pw,
            (unsigned long long)r->prompt.n_chars,
            pg ? ": template checks not possible" : ": template checks see only what is shown");
        if (!f) return NOMEM(err);
        if (r->prompt.flags & LD_TEXT_TRUNCATED) f->prompt_offset = (int64_t)r->prompt.cut;
    }
    if (ow) {
        ld_finding *f = ld_findings_add(out, a, LD_K_LOG_TRUNCATED, og ? LD_SEV_ERROR : LD_SEV_INFO,
            -1, "output text %s: %llu chars shown%s", ow, (unsigned long long)r->output.n_chars,
            og ? ": conversation and repetition checks not possible"
               : ": later turns are compared on what is shown");
        if (!f) return NOMEM(err);
    }
    return LD_OK;
}

/* Role markers of the chat templates in common use: a prompt opening with
 * one was built from a conversation, whatever the log kept of it. */
static int looks_templated(const ld_text *prompt)
{
    static const char *const markers[] = {
        "<|im_start|>", "<|start_header_id|>", "[INST]", "<\xef\xbd\x9c" "User\xef\xbd\x9c>", /* DeepSeek's fullwidth bars */
        "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>", "<start_of_turn>", "<|user|>", "<|assistant|>",
        "<|system|>", "<|start|>", "<|User|>", "<|turn>", "[SYSTEM_PROMPT]",
    };
    if (!prompt->bytes || !(prompt->flags & LD_TEXT_PRESENT)) return 0;
    /* a template opens with its first role marker: the head is enough, and a
     * long prompt is not read once per marker */
    size_t head = prompt->len < 4096 ? prompt->len : 4096;
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++)
        if (memmem(prompt->bytes, head, markers[i], strlen(markers[i]))) return 1;
    return 0;
}

/* A record with a prompt and no message array (vLLM, SGLang before 0.5 or
 * below level 2, a native /generate request): no harness or template check
 * can run.  A templated prompt says a conversation was there: the log cannot
 * decide (error); a plain prompt had no template to check (info).  An
 * unpaired record is told by log.unpaired: its array may be in the line that
 * did not come. */
static ld_status no_messages(const ld_request *r, ld_arena *a, ld_findings *out, ld_error *err)
{
    if (r->n_messages >= 0 || r->missing || !(r->prompt.flags & LD_TEXT_PRESENT) ||
        (r->prompt.flags & LD_TEXT_SKIPPED))
        return LD_OK;
    int chat = looks_templated(&r->prompt);
    ADD(out, a, err, LD_K_LOG_NO_MESSAGES, chat ? LD_SEV_ERROR : LD_SEV_INFO, -1,
        chat ? "no message array in the log for a templated prompt (SGLang logs `Receive OpenAI` "
               "from --log-requests-level 2; vLLM and SGLang before 0.5 never): harness and "
               "template checks not possible"
             : "no message array and no chat template in the prompt (a native /generate "
               "request): no harness or template check applies");
    return LD_OK;
}

static ld_status trunc_messages(const ld_request *r, ld_arena *a, ld_findings *out,
                                ld_error *err)
{
    int64_t first = -1, n = 0, gone_any = 0;
    for (int64_t i = 0; i < r->n_messages; i++) {
        const ld_message *m = &r->messages[i];
        int g1, g2;
        int hit = cut_words(&m->content, &g1) != NULL;
        hit |= cut_words(&m->reasoning_content, &g2) != NULL;
        for (uint32_t k = 0; m->tool_calls && k < m->n_tool_calls; k++)
            hit |= (m->tool_calls[k].arguments.flags & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED)) != 0;
        if (!hit) continue;
        if (first < 0) first = i;
        n++;
        gone_any |= g1;
    }
    if (!n) return LD_OK;
    ADD(out, a, err, LD_K_LOG_TRUNCATED, gone_any ? LD_SEV_ERROR : LD_SEV_INFO, first,
        "%lld of %lld messages cut by the logger (first: message %lld)%s", (long long)n,
        (long long)r->n_messages, (long long)first,
        gone_any ? ": a message content is only a digest, its checks are not possible"
                 : ": checks see only head and tail");
    return LD_OK;
}

/* ---------------------------------------------------------------- harness.* */

static const char *content_state(const ld_text *t)
{
    if (t->flags & LD_TEXT_NONE) return "content None";
    if (!(t->flags & LD_TEXT_PRESENT)) return "no content";
    if (t->len == 0 && t->n_chars == 0) return "content \"\"";
    return "content whitespace only";
}

/* A text's size as the conversation checks count it (conv.c): bytes, the
 * blanks at either end aside; its characters when the bytes were not kept. */
static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static const char *text_size(const ld_text *t, char *buf, size_t cap)
{
    if (!t->bytes) {
        snprintf(buf, cap, "%llu chars", (unsigned long long)t->n_chars);
        return buf;
    }
    size_t b = 0, e = t->len;
    while (b < e && blank(t->bytes[b])) b++;
    while (e > b && blank(t->bytes[e - 1])) e--;
    snprintf(buf, cap, "%zu bytes", e - b);
    return buf;
}

static ld_status empty_assistant(const ld_request *r, ld_arena *a, ld_findings *out,
                                 ld_error *err)
{
    for (int64_t i = 0; i + 1 < r->n_messages; i++) { /* the last one is a prefill */
        const ld_message *m = &r->messages[i];
        if (!is_role(m, "assistant") || m->n_tool_calls || !ld_harness_text_blank(&m->content))
            continue;
        char rs[96] = "", size[48];
        if (m->reasoning_content.n_chars)
            snprintf(rs, sizeof rs, "; its reasoning_content holds %s",
                     text_size(&m->reasoning_content, size, sizeof size));
        ld_finding *f = ld_findings_add(out, a, LD_K_HARNESS_EMPTY_ASSISTANT, LD_SEV_ERROR, i,
            "assistant message %lld is empty (%s) and has no tool calls%s", (long long)i,
            content_state(&m->content), rs);
        if (!f) return NOMEM(err);
        f->actual_len = (int64_t)m->content.len;
    }
    return LD_OK;
}

typedef struct pending {
    int64_t msg;     /* assistant message index */
    uint32_t k;      /* tool call index */
    int answered;
} pending;

/* Reports the calls of [from, n) that are still unanswered when message
 * `at` (a user or assistant turn) arrives. */
static ld_status unanswered(const ld_request *r, pending *pd, size_t from, size_t n, int64_t at,
                            ld_arena *a, ld_findings *out, ld_error *err)
{
    for (size_t i = from; i < n; i++) {
        if (pd[i].answered) continue;
        const ld_tool_call *tc = &r->messages[pd[i].msg].tool_calls[pd[i].k];
        int end = is_role(&r->messages[at], "tool");
        ADD(out, a, err, LD_K_HARNESS_ORPHAN_TOOL, LD_SEV_ERROR, pd[i].msg,
            "tool call %s (%s) of assistant message %lld is never answered: %s message %lld (%s)",
            tc->id ? tc->id : "without id", tc->name ? tc->name : "?", (long long)pd[i].msg,
            end ? "the array ends at" : "the next turn comes first,", (long long)at,
            r->messages[at].role);
        pd[i].answered = 1;
    }
    return LD_OK;
}

static ld_status tool_result(const ld_request *r, pending *pd, size_t np, int64_t i,
                             ld_arena *a, ld_findings *out, ld_error *err)
{
    const char *id = r->messages[i].tool_call_id;
    for (size_t k = 0; k < np; k++) {
        const ld_tool_call *tc = &r->messages[pd[k].msg].tool_calls[pd[k].k];
        if (id ? (tc->id && !strcmp(tc->id, id)) : !pd[k].answered) {
            pd[k].answered = 1;
            return LD_OK;
        }
    }
    if (!id && np) return LD_OK; /* an extra result without id: nothing to match */
    ADD(out, a, err, LD_K_HARNESS_ORPHAN_TOOL, LD_SEV_ERROR, i,
        id ? "tool result %lld answers tool_call_id '%s', which no earlier tool call has"
           : "tool result %lld%s has no tool_call_id and no tool call comes before it",
        (long long)i, id ? id : "");
    return LD_OK;
}

static ld_status orphan_tools(const ld_request *r, ld_arena *a, ld_findings *out, ld_error *err)
{
    size_t total = 0;
    for (int64_t i = 0; i < r->n_messages; i++) {
        if (r->messages[i].n_tool_calls && !r->messages[i].tool_calls) return LD_OK; /* not kept */
        total += r->messages[i].n_tool_calls;
    }
    pending *pd = ld_arena_alloc(a, (total + 1) * sizeof *pd);
    if (!pd) return NOMEM(err);
    size_t np = 0, open_from = 0;
    for (int64_t i = 0; i < r->n_messages; i++) {
        const ld_message *m = &r->messages[i];
        if (is_role(m, "tool")) {
            LD_TRY(tool_result(r, pd, np, i, a, out, err));
            continue;
        }
        if (is_role(m, "user") || is_role(m, "assistant")) {
            LD_TRY(unanswered(r, pd, open_from, np, i, a, out, err));
            open_from = np;
        }
        for (uint32_t k = 0; k < m->n_tool_calls; k++) pd[np++] = (pending){i, k, 0};
    }
    /* the array ends with tool results: the model answers now, so every call
     * of the last tool turn must have its result */
    if (r->n_messages > 0 && is_role(&r->messages[r->n_messages - 1], "tool"))
        LD_TRY(unanswered(r, pd, open_from, np, r->n_messages - 1, a, out, err));
    return LD_OK;
}

/* ---------------------------------------------------------------- sampling.* */

static ld_status repetition(const ld_request *r, ld_arena *a, ld_findings *out, ld_error *err)
{
    const ld_text *t = &r->output;
    if (!t->bytes || !t->len) return LD_OK;
    size_t cut = (t->flags & LD_TEXT_TRUNCATED) ? t->cut : t->len;
    ld_repetition best = {0}, rp;
    int found = 0, f;
    LD_TRY(ld_repetition_find(t->bytes, cut, a, &rp, &f, err)); /* a loop never spans the cut */
    if (f) best = rp, found = 1;
    if (cut < t->len) {
        LD_TRY(ld_repetition_find(t->bytes + cut, t->len - cut, a, &rp, &f, err));
        if (f && (!found || rp.len > best.len)) {
            rp.start += cut;
            rp.unit_off += cut;
            best = rp;
            found = 1;
        }
    }
    if (!found) return LD_OK;
    const char *unit = ld_excerpt(a, t->bytes + best.unit_off, best.unit_len, 0, 60);
    char temp[32] = "unknown", top_p[32] = "unknown";
    if (!isnan(r->temperature)) snprintf(temp, sizeof temp, "%g", r->temperature);
    if (!isnan(r->top_p)) snprintf(top_p, sizeof top_p, "%g", r->top_p);
    ld_finding *fd = ld_findings_add(out, a, LD_K_SAMPLING_REPETITION, LD_SEV_ERROR, -1,
        "output loops: \"%s\" (%zu bytes) repeated %zu times, %zu of %zu bytes from byte %zu; "
        "temperature %s, top_p %s%s", unit ? unit : "?", best.unit_len, best.count, best.len,
        t->len, best.start, temp, top_p,
        r->finish_kind == LD_FINISH_LENGTH ? "; stopped at max_tokens" : "");
    if (!fd) return NOMEM(err);
    fd->array_offset = (int64_t)best.start;
    fd->actual_len = (int64_t)best.len;
    fd->expected_len = (int64_t)best.unit_len;
    fd->array_excerpt = unit;
    return LD_OK;
}

ld_status ld_harness_check(const ld_request *r, ld_arena *arena, ld_findings *out,
                           ld_error *err)
{
    if (!r || !arena || !out) return LD_FAIL(err, LD_ERR_USAGE, 0, "ld_harness_check: NULL argument");
    if (r->flags & LD_REQ_ERROR) return parse_error(r, arena, out, err);
    if (r->missing) LD_TRY(unpaired(r, arena, out, err));
    LD_TRY(capture_loss(r, arena, out, err));
    LD_TRY(capture_cut(r, arena, out, err));
    LD_TRY(trunc_levels(r, arena, out, err));
    LD_TRY(trunc_messages(r, arena, out, err));
    LD_TRY(no_messages(r, arena, out, err));
    LD_TRY(empty_assistant(r, arena, out, err));
    LD_TRY(orphan_tools(r, arena, out, err));
    return repetition(r, arena, out, err);
}
