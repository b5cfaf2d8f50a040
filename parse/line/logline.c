/* logline.c - recognition of request-log lines and parsing of SGLang text
 * lines.  JSON lines: logline_json.c; vLLM lines: logline_vllm.c. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "logline.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* The text before an SGLang marker: optional log-shipper tokens (no quotes),
 * then an optional `[date time(.ms)( DPn TPn ...)] `.  Group 1 = the time
 * stamp inside the brackets. */
static const char PREFIX_RE[] =
    "^[ \\t]*(?:[^ \\t'\"]+[ \\t]+)*?"
    "(?:\\[((?:\\d{4}-\\d{2}-\\d{2} )?\\d{2}:\\d{2}:\\d{2}(?:\\.\\d{3})?)"
    "(?: (?:DP|PP|TP|EP|ATTN_CP|MOE_DP)\\d+)*\\] ?)?$";

/* A time stamp anywhere in a shipper / vLLM prefix. */
static const char TS_RE[] =
    "(?:\\d{4}-)?\\d{2}-\\d{2}[T ]\\d{2}:\\d{2}:\\d{2}(?:[.,]\\d+)?Z?";

static pcre2_code *g_prefix_re;
static pcre2_code *g_ts_re;

static pcre2_code *compile_re(const char *pat)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, 0,
                                   &ec, &eo, NULL);
    if (re) pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    return re;
}

ld_status ld_logline_init(ld_error *err)
{
    if (!g_prefix_re) g_prefix_re = compile_re(PREFIX_RE);
    if (!g_ts_re) g_ts_re = compile_re(TS_RE);
    if (!g_prefix_re || !g_ts_re)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "cannot compile the prefix regexes");
    return LD_OK;
}

/* Runs `re` on s[0..n); returns 1 on a match, with group `grp` in b..e. */
static int re_match(pcre2_code *re, const char *s, size_t n, int grp,
                    size_t *b, size_t *e)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) return 0;
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    if (rc > grp) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        *b = ov[2 * grp];
        *e = ov[2 * grp + 1];
        if (*b == PCRE2_UNSET) *b = *e = 0;
    } else if (rc > 0) {
        *b = *e = 0;
    }
    pcre2_match_data_free(md);
    return rc > 0;
}

static const char *find(const char *h, size_t hn, const char *needle)
{
    size_t nn = strlen(needle);
    if (nn > hn) return NULL;
    const char *end = h + hn - nn;
    for (const char *p = h; p <= end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p) + 1);
        if (!p) return NULL;
        if (memcmp(p, needle, nn) == 0) return p;
    }
    return NULL;
}

static int ends_with(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

/* Validates the prefix s[0..n) and extracts its time stamp. */
static int accept_prefix(const char *s, size_t n, ld_logline *out)
{
    size_t b = 0, e = 0;
    if (ld_logline_init(NULL) != LD_OK) return 0;
    if (!re_match(g_prefix_re, s, n, 1, &b, &e)) return 0;
    if (e > b) {
        out->ts = s + b;
        out->ts_len = e - b;
    } else if (n > 0 && re_match(g_ts_re, s, n, 0, &b, &e) && e > b) {
        out->ts = s + b;
        out->ts_len = e - b;
    }
    return 1;
}

static void vllm_ts(const char *s, size_t n, ld_logline *out)
{
    size_t b = 0, e = 0;
    if (ld_logline_init(NULL) == LD_OK && re_match(g_ts_re, s, n, 0, &b, &e) && e > b) {
        out->ts = s + b;
        out->ts_len = e - b;
    }
}

static int classify_sglang(const char *d, size_t w, ld_logline *out)
{
    static const struct { const char *m; ld_logline_kind k; } marks[] = {
        {"Receive OpenAI: ", LD_LOGLINE_SG_OPENAI},
        {"Receive: ", LD_LOGLINE_SG_RECEIVE},
        {"Finish: ", LD_LOGLINE_SG_FINISH},
    };
    const char *p = find(d, w, "obj=");
    if (!p) return 0;
    size_t at = (size_t)(p - d);
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        if (!ends_with(d, at, marks[i].m)) continue;
        size_t pre = at - strlen(marks[i].m);
        if (!accept_prefix(d, pre, out)) return 0;
        out->kind = marks[i].k;
        out->body_off = at;
        return 1;
    }
    return 0;
}

static int classify_inout(const char *d, size_t w, ld_logline *out)
{
    const char *p = find(d, w, "in=");
    if (!p) return 0;
    size_t at = (size_t)(p - d);
    if (at > 0 && d[at - 1] != ' ' && d[at - 1] != '\t') return 0;
    /* the dataclass repr `Name(` follows */
    size_t i = at + 3;
    while (i < w && (d[i] == '_' || ((d[i] | 32) >= 'a' && (d[i] | 32) <= 'z'))) i++;
    if (i == at + 3 || i >= w || d[i] != '(') return 0;
    if (!accept_prefix(d, at, out)) return 0;
    out->kind = LD_LOGLINE_SG_INOUT;
    out->body_off = at;
    return 1;
}

static int classify_json(const char *d, size_t w, ld_logline *out)
{
    const char *br = memchr(d, '{', w);
    if (!br) return 0;
    size_t at = (size_t)(br - d);
    const char *ev = find(br, w - at, "\"event\"");
    if (!ev || !find(ev, w - (size_t)(ev - d), "\"request.")) return 0;
    if (!accept_prefix(d, at, out)) return 0;
    out->json = 1;
    out->body_off = at;
    if (find(ev, w - (size_t)(ev - d), "\"request.received.openai\""))
        out->kind = LD_LOGLINE_SG_OPENAI;
    else if (find(ev, w - (size_t)(ev - d), "\"request.received\""))
        out->kind = LD_LOGLINE_SG_RECEIVE;
    else if (find(ev, w - (size_t)(ev - d), "\"request.finished\""))
        out->kind = LD_LOGLINE_SG_FINISH;
    else
        return out->json = 0, 0;
    return 1;
}

static int classify_vllm(const char *d, size_t w, ld_logline *out)
{
    const char *p;
    if ((p = find(d, w, "Received request ")) != NULL) {
        out->kind = LD_LOGLINE_VLLM_RECEIVED;
        out->body_off = (size_t)(p - d) + strlen("Received request ");
    } else if ((p = find(d, w, "Generated response ")) != NULL) {
        out->kind = LD_LOGLINE_VLLM_GENERATED;
        out->body_off = (size_t)(p - d) + strlen("Generated response ");
    } else if ((p = find(d, w, " details: prompt: ")) != NULL) {
        const char *r = find(d, (size_t)(p - d), "Request ");
        if (!r) return 0;
        out->kind = LD_LOGLINE_VLLM_DETAILS;
        out->body_off = (size_t)(r - d) + strlen("Request ");
        p = r;
    } else {
        return 0;
    }
    /* a ':' must follow the request id on the same token run */
    const char *colon = memchr(d + out->body_off, ':', w - out->body_off);
    if (!colon) return out->kind = LD_LOGLINE_OTHER, 0;
    vllm_ts(d, (size_t)(p - d), out);
    return 1;
}

/* 1 when d[0..n) names a field of SGLang's request records
 * (GenerateReqInput of every era, the Finish line's out) */
static int request_field(const char *d, size_t n)
{
    static const char *const names[] = {
        "rid", "text", "input_ids", "input_embeds", "image_data", "sampling_params", "return_logprob",
        "logprob_start_len", "top_logprobs_num", "token_ids_logprob", "return_text_in_logprobs", "stream",
        "log_metrics", "return_hidden_states", "modalities", "session_params", "lora_path", "lora_id",
        "custom_logit_processor", "bootstrap_host", "bootstrap_port", "bootstrap_room", "data_parallel_rank",
        "http_worker_ipc", "out", "audio_data", "video_data", "session_id", "routed_dp_rank"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strlen(names[k]) == n && !memcmp(d, names[k], n)) return 1;
    return 0;
}

/* A line that begins inside a request record (a copied excerpt, a line
 * broken by a log shipper): no marker, no ": " before the first of at least
 * three `, name=value` items of a dataclass repr, two of them fields of a
 * request record.  Start-up lines of the same shape are not fragments:
 * `server_args=ServerArgs(model_path=..., ...)`, a scheduler's
 * `max_total_num_tokens=..., chunked_prefill_size=..., ...`. */
static int classify_fragment(const char *d, size_t w)
{
    int hits = 0, known = 0;
    for (size_t i = 0; i + 3 < w && (hits < 3 || known < 2); i++) {
        if (d[i] == ':' && d[i + 1] == ' ' && hits == 0) return 0;
        if (d[i] != ',' || d[i + 1] != ' ') continue;
        size_t j = i + 2;
        while (j < w && (d[j] == '_' || (d[j] >= 'a' && d[j] <= 'z'))) j++;
        if (j > i + 2 && j < w && d[j] == '=' && j + 1 < w && d[j + 1] != '=') {
            hits++;
            known += request_field(d + i + 2, j - i - 2);
        }
    }
    return hits >= 3 && known >= 2;
}

void ld_logline_classify(const char *data, size_t len, ld_logline *out)
{
    memset(out, 0, sizeof *out);
    size_t w = len < LD_LOGLINE_MARKER_WINDOW ? len : LD_LOGLINE_MARKER_WINDOW;
    if (classify_sglang(data, w, out)) return;
    memset(out, 0, sizeof *out);
    if (classify_json(data, w, out)) return;
    memset(out, 0, sizeof *out);
    if (classify_vllm(data, w, out)) return;
    memset(out, 0, sizeof *out);
    if (classify_inout(data, w, out)) return;
    memset(out, 0, sizeof *out);
    if (classify_fragment(data, w)) out->kind = LD_LOGLINE_FRAGMENT;
}

static size_t trim_end(const char *d, size_t len)
{
    while (len > 0 && (d[len - 1] == ' ' || d[len - 1] == '\r' || d[len - 1] == '\t' ||
                       d[len - 1] == '\n'))
        len--;
    return len;
}

static ld_status parse_sglang_text(const char *data, size_t len, unsigned pylit_flags,
                                   ld_arena *arena, ld_logline *out, ld_error *err)
{
    ld_py_value *kw = NULL;
    size_t off = out->body_off;
    ld_pylit_limits lim = { 0, 0, pylit_flags & ~LD_LOGLINE_CUT_OK };
    ld_status st = ld_pylit_parse_kwargs(data + off, len - off, &lim, arena, &kw, err);
    if (st != LD_OK) {
        if (err) {
            err->offset += off;
            ld_logline_rebase_msg(err, off);
            if (!err->msg[0])
                snprintf(err->msg, sizeof err->msg, "cannot parse the request line payload");
        }
        return st;
    }
    out->body = data + off;
    const char *first = out->kind == LD_LOGLINE_SG_INOUT ? "in" : "obj";
    out->obj = ld_py_call_get(kw, first);
    out->headers = ld_py_call_get(kw, "headers");
    out->out = ld_py_call_get(kw, "out");
    if (!out->obj)
        return LD_FAIL(err, LD_ERR_SYNTAX, off, "request line without '%s='", first);
    if (out->kind == LD_LOGLINE_SG_INOUT && !out->out && !(pylit_flags & LD_LOGLINE_CUT_OK))
        return LD_FAIL(err, LD_ERR_SYNTAX, off, "legacy 'in=' line without 'out='");
    return LD_OK;
}

ld_status ld_logline_parse(const char *data, size_t len, uint32_t json_half,
                           ld_arena *arena, ld_logline *out, ld_error *err)
{
    return ld_logline_parse_ex(data, len, json_half, 0, arena, out, err);
}

ld_status ld_logline_parse_ex(const char *data, size_t len, uint32_t json_half,
                              unsigned pylit_flags, ld_arena *arena,
                              ld_logline *out, ld_error *err)
{
    ld_logline_classify(data, len, out);
    len = trim_end(data, len);
    if (out->kind == LD_LOGLINE_OTHER) return LD_OK;
    if (out->body_off > len)
        return LD_FAIL(err, LD_ERR_TRUNCATED, len, "line ends after the request marker");
    if (out->kind == LD_LOGLINE_FRAGMENT)
        return LD_FAIL(err, LD_ERR_TRUNCATED, 0,
                       "line starts inside a request record (its beginning is missing)");
    if (out->json)
        return ld_logline_parse_json(data, len, out->body_off, json_half,
                                     pylit_flags & ~LD_LOGLINE_CUT_OK, arena, out, err);
    switch (out->kind) {
    case LD_LOGLINE_VLLM_RECEIVED:
    case LD_LOGLINE_VLLM_DETAILS:
    case LD_LOGLINE_VLLM_GENERATED:
        return ld_logline_parse_vllm(data, len, arena, out, err);
    default:
        return parse_sglang_text(data, len, pylit_flags, arena, out, err);
    }
}
