/* pair_feed.c - per-line handling of the pairer: recognise, parse, merge
 * into the open record of the rid, join `Receive OpenAI` lines, emit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse/line/logline.h"
#include "pair_internal.h"
#include "parse/pylit/pylit.h"
#include "parse/request/request_fill.h"
#include "parse/request/request_text.h"

static int is_internal(const char *rid)
{
    return rid && !strncmp(rid, "HEALTH_CHECK_", 13);
}

static void set_ts(ld_request *r, const ld_logline *l)
{
    if (!r->timestamp && l->ts) r->timestamp = ld_request_strdup(r, l->ts, l->ts_len);
}

/* ---------------------------------------------------------------- OpenAI join */

/* The text of message `m` for identifying it in a prompt (the tail of a cut
 * message, the last part of a part list, trailing blanks off as templates
 * strip them); 0 when it has none.  *in_kept: *s points into kept's bytes. */
static int message_text(const ld_fill_ctx *c, const ld_py_value *m, const ld_text *kept, const char **s,
                        size_t *n, int *in_kept)
{
    *in_kept = 0;
    const ld_py_value *ct = ld_req_get(m, "content");
    const char *t = NULL;
    size_t tn = 0;
    if (ct && ct->kind == LD_PY_LIST && ct->n > 0) {
        ct = ld_req_get(&ct->u.items[ct->n - 1], "text");
    } else if (ld_req_is_text(ct) && kept && kept->bytes) { /* the record kept this text, decoded */
        *s = kept->bytes;
        *n = kept->cut;
        if (kept->flags & LD_TEXT_TRUNCATED) t = kept->bytes + kept->cut, tn = kept->len - kept->cut;
        *in_kept = 1;
        goto got;
    }
    if (!ld_req_is_text(ct) || ld_req_decode_parts(c, ct, s, n, &t, &tn, NULL)) return 0;
got:
    if (t) *s = t, *n = tn; /* a cut message: its tail */
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\n')) (*n)--;
    return *n > 0;
}

static int is_user(const ld_fill_ctx *c, const ld_py_value *m)
{
    const ld_py_value *role = ld_req_get(m, "role");
    const char *s, *t;
    size_t n, tn;
    return role && ld_req_is_text(role) && !ld_req_decode_parts(c, role, &s, &n, &t, &tn, NULL) &&
           n == 4 && !memcmp(s, "user", 4);
}

/* Text that identifies an OpenAI payload in its templated prompt: the
 * content of its final message (user, tool, or a prefilled assistant turn),
 * which templates put just before the generation prompt; when that message
 * has no text (an assistant turn with only tool calls), the last user
 * message, which may then be anywhere.  With a final message, the last user
 * message before it is noted too, for a prompt that lost its final message.
 * In q's record: the bytes it kept of that message, else a copy. */
static void note_user_text(ld_pending_openai *q, const ld_fill_ctx *c, const ld_py_value *obj)
{
    const ld_py_value *ms = ld_req_get(obj, "messages");
    if (!ms || ms->kind != LD_PY_LIST) return;
    q->n_messages = (int)ms->n;
    /* the messages q's record kept, decoded, when it was filled from obj
     * (its k-th message is the list's k-th dict) */
    const ld_message *kept = c->keep_text && q->filled ? q->r->messages : NULL;
    int64_t k = kept ? q->r->n_messages : 0;
    for (uint32_t i = ms->n; i-- > 0;) {
        int final = i + 1 == ms->n;
        const char *s;
        size_t n;
        int in_kept;
        const ld_text *kt = NULL;
        if (kept && ms->u.items[i].kind == LD_PY_DICT && --k >= 0) kt = &kept[k].content;
        if ((!final && !is_user(c, &ms->u.items[i])) ||
            !message_text(c, &ms->u.items[i], kt, &s, &n, &in_kept))
            continue;
        if (!in_kept) s = ld_request_strdup(q->r, s, n);
        if (q->user_text) { /* the earlier user message of an anchored payload */
            q->earlier_user = s;
            q->earlier_user_len = q->earlier_user ? n : 0;
            return;
        }
        q->user_text = s;
        q->user_len = q->user_text ? n : 0;
        q->anchored = final;
        if (!final || !q->user_text) return;
    }
}

/* Where a line's `Receive OpenAI` lines queue for their Receive: its
 * member, and the writer its capture names (two services interleaved by
 * journalctl, a container's two streams), so that one server's OpenAI line
 * never waits for another server's Receive.  NUL-free: "member\x1fsource". */
typedef struct queue_key {
    char buf[512];
} queue_key;

static const char *make_queue_key(queue_key *k, const char *member, const ld_line *line)
{
    if (!line->source || !line->source_len) return member;
    int n = line->source_len > 255 ? 255 : (int)line->source_len;
    snprintf(k->buf, sizeof k->buf, "%.250s\x1f%.*s", member, n, line->source);
    return k->buf;
}

static ld_status handle_openai(ld_pairer *p, const char *member, const char *queue, const ld_logline *l,
                               const ld_line *line, ld_error *err)
{
    ld_pending_openai *q = calloc(1, sizeof *q);
    ld_request *r = ld_request_new(p->opts.max_record_bytes);
    char *m = malloc(strlen(queue) + 1);
    if (!q || !r || !m) {
        free(q);
        free(m);
        ld_request_free(r);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for an OpenAI line");
    }
    strcpy(m, queue);
    q->member = m;
    q->r = r;
    q->born = p->clock;
    ld_request_set_source(r, LD_PART_OPENAI, member, line->lineno, line->offset, line->lost_bytes);
    ld_request_set_cut(r, LD_PART_OPENAI, l->cut_at, l->cut_field, l->cut_field_len);
    set_ts(r, l);
    if (l->json) r->flags |= LD_REQ_JSON;
    /* The payload is filled into r once, here, and its request copies the
     * fields (ld_request_copy_openai).  A copy of the value tree is kept
     * only where something reads it later: the values are kept, the
     * context of the request differs from this one (only_rid), or the
     * fill failed and the request must meet the same failure. */
    int keep_tree = (p->opts.flags & LD_PAIR_KEEP_VALUES) || p->opts.only_rid;
    const ld_py_value *obj = l->obj;
    if (keep_tree) obj = r->openai_obj = ld_py_value_clone(&r->arena, l->obj);
    ld_fill_ctx c = ld_pair_fill_ctx(p, NULL, NULL);
    unsigned before = r->flags;
    ld_status st = obj ? ld_request_fill_openai(r, &c, obj, err)
                       : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for an OpenAI line");
    q->fill_flags = r->flags & ~before;
    q->filled = st == LD_OK && !p->opts.only_rid;
    if (!q->filled && obj && !r->openai_obj) r->openai_obj = ld_py_value_clone(&r->arena, l->obj);
    if (st == LD_OK) st = ld_request_fill_pd(r, &c, l->obj, -1, 1, err);
    if (obj) note_user_text(q, &c, obj);
    ld_pair_add_openai(p, q);
    return st;
}

/* Checks (and maybe corrects) the OpenAI join against a prompt value:
 * r's prompt, just filled from it, when its bytes were kept (decoded once). */
static ld_status check_prompt(ld_pairer *p, const ld_fill_ctx *c, ld_open *o,
                              const ld_pending_openai *batch_q, const ld_py_value *text,
                              ld_error *err)
{
    const char *h, *t = NULL;
    size_t hn, tn = 0;
    const ld_text *kept = &o->r->prompt;
    if (!ld_req_is_text(text)) return LD_OK;
    if (kept->bytes && c->keep_text) { /* ld_request_fill_obj kept this very text */
        h = kept->bytes;
        hn = kept->cut;
        if (kept->flags & LD_TEXT_TRUNCATED) t = kept->bytes + kept->cut, tn = kept->len - kept->cut;
    } else if (ld_req_decode_parts(c, text, &h, &hn, &t, &tn, NULL) != LD_OK) {
        return LD_OK;
    }
    if (batch_q) { /* one OpenAI line for every sub-request of a batch */
        if (!batch_q->user_text) return LD_OK;
        o->checked = 1;
        o->confirmed |= ld_pair_openai_fits(batch_q, h, hn, t, tn);
        return LD_OK;
    }
    return ld_pair_openai_check(p, o, h, hn, t, tn, err);
}

/* ---------------------------------------------------------------- SGLang */

static ld_part sglang_part(ld_logline_kind k)
{
    return k == LD_LOGLINE_SG_RECEIVE ? LD_PART_RECEIVE
           : k == LD_LOGLINE_SG_FINISH ? LD_PART_FINISH
                                       : LD_PART_INOUT;
}

static ld_status get_open(ld_pairer *p, const char *rid, ld_open **o, ld_error *err)
{
    *o = ld_pair_lookup(p, rid);
    return *o ? LD_OK : ld_pair_create(p, rid, o, err);
}

/* The key of a line's open record: its rid; for a line of the PD router
 * whose capture names its writer, the rid and the writer, so that a
 * prefill and a decode server interleaved in one capture, both logging a
 * client's rid, stay two records until pair_pd.c joins them (the key is cut
 * back to the rid when the record is complete).  In the line arena. */
static const char *record_key(ld_pairer *p, const ld_line *line, const ld_logline *l,
                              const char *rid, int sub)
{
    if (!line->source || !line->source_len || l->kind == LD_LOGLINE_SG_INOUT) return rid;
    ld_fill_ctx c = ld_pair_fill_ctx(p, NULL, NULL);
    if (!ld_request_obj_pd_routed(&c, l->obj, sub)) return rid;
    size_t n = strlen(rid);
    char *k = ld_arena_alloc(&p->line_arena, n + line->source_len + 2);
    if (!k) return rid;
    memcpy(k, rid, n);
    k[n] = LD_PAIR_KEY_SEP;
    memcpy(k + n + 1, line->source, line->source_len);
    k[n + 1 + line->source_len] = '\0';
    return k;
}

typedef struct sub_job {
    const ld_logline *l;
    const ld_line *line;
    const char *member;
    const char *queue; /* its OpenAI queue (queue_key) */
    ld_pending_openai *q;
    int n, i;
} sub_job;

static ld_status sglang_sub(ld_pairer *p, const sub_job *j, const char *rid,
                            const char *parent, ld_error *err)
{
    const ld_logline *l = j->l;
    ld_part part = sglang_part(l->kind);
    int sub = j->n > 1 ? j->i : -1;
    ld_open *o;
    LD_TRY(get_open(p, record_key(p, j->line, l, rid, sub), &o, err));
    ld_request *r = o->r;
    if (sub >= 0) r->flags |= LD_REQ_BATCH;
    if (j->n > 1 || r->sub_index < 0) r->sub_index = sub;
    if (parent && !r->parent_rid) r->parent_rid = ld_request_strdup(r, parent, strlen(parent));
    if (l->json) r->flags |= LD_REQ_JSON;
    if (is_internal(rid)) r->flags |= LD_REQ_INTERNAL;
    ld_request_set_source(r, part, j->member, j->line->lineno, j->line->offset, j->line->lost_bytes);
    ld_request_set_cut(r, part, l->cut_at, l->cut_field, l->cut_field_len);
    ld_fill_ctx c = ld_pair_fill_ctx(p, rid, parent ? parent : r->parent_rid);
    if (part == LD_PART_RECEIVE && !o->queue && !(o->queue = strdup(j->queue)))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a request");
    if (j->q) LD_TRY(ld_pair_apply_openai(p, j->q, r, 0, err)); /* every sub-request's */
    else if (part == LD_PART_RECEIVE && !o->q && !(r->seen & LD_PART_BIT(LD_PART_OPENAI)) &&
             !is_internal(rid))
        o->q = ld_pair_take_oldest_openai(p, j->queue);
    set_ts(r, l);
    LD_TRY(ld_request_fill_obj(r, &c, l->obj, sub, err));
    LD_TRY(ld_request_fill_pd(r, &c, l->obj, sub, 0, err));
    const ld_py_value *text = ld_req_get(l->obj, "text");
    if (sub >= 0 && text && text->kind == LD_PY_LIST) text = (uint32_t)sub < text->n ? &text->u.items[sub] : NULL;
    LD_TRY(check_prompt(p, &c, o, j->q, text, err));
    LD_TRY(ld_pair_keep_value(r, &c, l->obj, part == LD_PART_RECEIVE ? &r->receive_obj : &r->finish_obj, err));
    if (l->out) {
        LD_TRY(ld_request_fill_out(r, &c, l->out, err));
        LD_TRY(ld_pair_keep_value(r, &c, l->out, &r->out, err));
    }
    if (part != LD_PART_RECEIVE) ld_pair_complete(p, o);
    return LD_OK;
}

static ld_status handle_sglang(ld_pairer *p, const char *member, const char *queue, const ld_logline *l,
                               const ld_line *line, ld_error *err)
{
    sub_job j = {l, line, member, queue, NULL, 1, 0};
    const ld_py_value *rv = l->rid ? l->rid : ld_req_get(l->obj, "rid");
    if (l->kind == LD_LOGLINE_SG_RECEIVE) {
        j.n = ld_request_n_subs(l->obj, l->rid);
        if (j.n > 1) j.q = ld_pair_take_oldest_openai(p, queue);
    } else if (rv && rv->kind == LD_PY_LIST && rv->n > 1) {
        j.n = (int)rv->n;
    }
    ld_status st = LD_OK;
    int internal = 0;
    for (j.i = 0; j.i < j.n && st == LD_OK; j.i++) {
        const char *rid, *parent;
        ld_fill_ctx c = ld_pair_fill_ctx(p, NULL, NULL);
        st = ld_request_sub_rid(&c, l->obj, l->rid, j.n, j.i, &rid, &parent, err);
        if (st != LD_OK) break;
        char synth[64];
        if (!rid) { /* no rid logged: one record per line */
            snprintf(synth, sizeof synth, "<no rid>@%llu", (unsigned long long)line->lineno);
            rid = synth;
        }
        if (is_internal(rid)) {
            internal = 1;
            if (!(p->opts.flags & LD_PAIR_KEEP_INTERNAL)) {
                ld_open *o = ld_pair_lookup(p, rid);
                if (o && l->kind != LD_LOGLINE_SG_RECEIVE) ld_pair_complete(p, o);
                continue;
            }
        }
        st = sglang_sub(p, &j, rid, parent, err);
    }
    if (internal && l->kind != LD_LOGLINE_SG_FINISH) p->stats.health_checks++; /* requests, not lines */
    ld_pair_free_openai(j.q);
    ld_pair_evict(p);
    return st;
}

/* ---------------------------------------------------------------- vLLM */

static ld_status handle_vllm(ld_pairer *p, const char *member, const ld_logline *l,
                             const ld_line *line, ld_error *err)
{
    char *rid = ld_arena_memdup(&p->line_arena, l->vllm_rid, l->vllm_rid_len);
    if (!rid) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a rid");
    ld_part part = l->kind == LD_LOGLINE_VLLM_RECEIVED  ? LD_PART_VLLM_RECEIVED
                   : l->kind == LD_LOGLINE_VLLM_DETAILS ? LD_PART_VLLM_DETAILS
                                                        : LD_PART_VLLM_GENERATED;
    if (part == LD_PART_VLLM_GENERATED) p->seen_vllm_generated = 1;
    ld_open *o;
    LD_TRY(get_open(p, rid, &o, err));
    ld_request *r = o->r;
    r->engine = LD_ENGINE_VLLM;
    ld_request_set_source(r, part, member, line->lineno, line->offset, line->lost_bytes);
    r->flags &= ~LD_REQ_DUPLICATE; /* streaming deltas repeat the Generated line */
    set_ts(r, l);
    ld_fill_ctx c = ld_pair_fill_ctx(p, rid, NULL);
    LD_TRY(ld_request_fill_vllm(r, &c, l, err));
    if (part == LD_PART_VLLM_GENERATED && l->vllm_streaming != 1) ld_pair_complete(p, o);
    ld_pair_evict(p);
    return LD_OK;
}

/* ---------------------------------------------------------------- lines */

static ld_part kind_part(ld_logline_kind k)
{
    switch (k) {
    case LD_LOGLINE_SG_OPENAI: return LD_PART_OPENAI;
    case LD_LOGLINE_SG_RECEIVE: return LD_PART_RECEIVE;
    case LD_LOGLINE_SG_FINISH: return LD_PART_FINISH;
    case LD_LOGLINE_SG_INOUT: return LD_PART_INOUT;
    case LD_LOGLINE_VLLM_RECEIVED: return LD_PART_VLLM_RECEIVED;
    case LD_LOGLINE_VLLM_DETAILS: return LD_PART_VLLM_DETAILS;
    case LD_LOGLINE_VLLM_GENERATED: return LD_PART_VLLM_GENERATED;
    default: return LD_PART_COUNT;
    }
}

static void emit_error(ld_pairer *p, const ld_logline *l, const ld_line *line,
                       const ld_error *e)
{
    ld_request *r = ld_request_new(0);
    if (!r) return;
    r->flags |= LD_REQ_ERROR | (l->json ? LD_REQ_JSON : 0);
    r->error = *e;
    r->error.path = e->path ? ld_request_strdup(r, e->path, strlen(e->path)) : NULL;
    if (l->kind >= LD_LOGLINE_VLLM_RECEIVED && l->kind <= LD_LOGLINE_VLLM_GENERATED)
        r->engine = LD_ENGINE_VLLM;
    ld_part part = kind_part(l->kind);
    if (part != LD_PART_COUNT)
        ld_request_set_source(r, part, e->path, line->lineno, line->offset, line->lost_bytes);
    set_ts(r, l);
    ld_pair_emit(p, r);
}

static ld_status dispatch(ld_pairer *p, const char *member, const ld_logline *l,
                          const ld_line *line, ld_error *err)
{
    queue_key k;
    const char *queue = make_queue_key(&k, member, line);
    switch (l->kind) {
    case LD_LOGLINE_SG_OPENAI: return handle_openai(p, member, queue, l, line, err);
    case LD_LOGLINE_SG_RECEIVE:
    case LD_LOGLINE_SG_FINISH:
    case LD_LOGLINE_SG_INOUT: return handle_sglang(p, member, queue, l, line, err);
    default: return handle_vllm(p, member, l, line, err);
    }
}

ld_status ld_pairer_feed_line(ld_pairer *p, const char *member_name,
                              const ld_line *line, ld_line_result *out_result,
                              ld_error *err)
{
    ld_error e;
    ld_logline l;
    ld_error_clear(&e);
    if (!member_name) member_name = "-";
    p->stats.lines++;
    ld_arena_reset(&p->line_arena);
    memset(&p->memo, 0, sizeof p->memo); /* its strings lived in line_arena */
    /* counts of token ids are all a pairer needs unless values are kept
     * (only token-id fields are skimmed, so kept texts are whole) */
    unsigned pyflags = (p->opts.flags & LD_PAIR_KEEP_VALUES) ? 0 : LD_PYLIT_SKIM_INT_LISTS;
    p->body = NULL;
    ld_status st = ld_logline_parse_ex(line->data, line->len, p->opts.json_trunc_half,
                                       pyflags, &p->line_arena, &l, &e);
    if (st == LD_ERR_TRUNCATED) { /* cut for good: read up to its last whole field where it can be */
        ld_error cut_err;
        ld_error_clear(&cut_err);
        if (ld_logline_parse_cut(line->data, line->len, pyflags, &p->line_arena, &l, &cut_err) == LD_OK) {
            st = LD_OK;
            p->stats.cut_lines++;
        }
    }
    if (st == LD_OK && l.kind == LD_LOGLINE_OTHER) {
        p->stats.skipped++;
        if (out_result) *out_result = LD_LINE_SKIPPED;
        return LD_OK;
    }
    p->body = l.body;
    if (st == LD_OK) st = dispatch(p, member_name, &l, line, &e);
    if (st == LD_OK) {
        p->stats.request_lines++;
        if (out_result) *out_result = LD_LINE_PARSED;
        return LD_OK;
    }
    p->stats.errors++;
    e.code = st;
    e.path = member_name;
    e.line = line->lineno;
    e.offset += line->offset;
    if (!e.msg[0]) snprintf(e.msg, sizeof e.msg, "%s", ld_strerror(st));
    if (p->opts.flags & LD_PAIR_ERROR_RECORDS) emit_error(p, &l, line, &e);
    if (err) *err = e;
    if (out_result) *out_result = LD_LINE_ERROR;
    return st;
}
