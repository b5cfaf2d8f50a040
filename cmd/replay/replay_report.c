/* replay_report.c - the report of a plain `logdiff replay`: a table of the
 * teacher-forced positions, the continuation and the verdict for people,
 * or one JSON object for scripts (tokens decoded where the model has a
 * tokenizer). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/common/logread.h"
#include "parse/pylit/pylit_json.h"
#include "replay_cli.h"

/* Length of the valid UTF-8 sequence at s[0..n) (n >= 1), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t k = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (!k || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (k == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (k == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return k;
}

/* Bytes as people read them, into buf (NUL-terminated): \n \t \" \\, other
 * control bytes and bytes that are not valid UTF-8 as \xNN; at most `max`
 * source bytes, then "...". */
static void escape(char *buf, size_t cap, const char *text, size_t len, size_t max)
{
    size_t o = 0;
    const unsigned char *t = (const unsigned char *)text;
    for (size_t i = 0; i < len && i < max && o + 8 < cap;) {
        unsigned char c = t[i];
        size_t k = c >= 0x80 ? utf8_len(t + i, len - i) : 1;
        if (c == '\n') o += (size_t)snprintf(buf + o, cap - o, "\\n");
        else if (c == '\t') o += (size_t)snprintf(buf + o, cap - o, "\\t");
        else if (c == '"' || c == '\\') o += (size_t)snprintf(buf + o, cap - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f || k == 0) o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        else {
            memcpy(buf + o, t + i, k);
            o += k;
            i += k;
            continue;
        }
        i++;
    }
    if (len > max && o + 4 < cap) o += (size_t)snprintf(buf + o, cap - o, "...");
    buf[o < cap ? o : cap - 1] = 0;
}

/* A token as people read it: the id, and its bytes quoted and escaped when a
 * tokenizer is there. */
static const char *tok_show(const ld_tok *tok, int32_t id, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%ld", (long)id);
    char *text = NULL;
    size_t len = 0;
    if (!tok || n < 0 || (size_t)n + 8 >= cap || ld_tok_decode(tok, &id, 1, &text, &len, NULL) != LD_OK)
        return buf;
    char esc[80];
    escape(esc, sizeof esc, text, len, 18);
    snprintf(buf + n, cap - (size_t)n, " \"%s\"", esc);
    free(text);
    return buf;
}

static cJSON *tok_json(const ld_tok *tok, int32_t id)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "id", ld_json_int(id));
    char *text = NULL;
    size_t len = 0;
    if (tok && ld_tok_decode(tok, &id, 1, &text, &len, NULL) == LD_OK)
        cJSON_AddItemToObject(o, "text", ld_json_text(text, len));
    else
        cJSON_AddItemToObject(o, "text", cJSON_CreateNull());
    free(text);
    return o;
}

static cJSON *ids_json(const int32_t *ids, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, ld_json_int(ids[i]));
    return a;
}

static cJSON *text_json(const ld_tok *tok, const int32_t *ids, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *j = tok && ld_tok_decode(tok, ids, n, &text, &len, NULL) == LD_OK ? ld_json_text(text, len)
                                                                            : cJSON_CreateNull();
    free(text);
    return j;
}

/* The `dump` object of --json: where the files went and which rows. */
static cJSON *dump_json(const char *dir, const ld_replay_dump *d)
{
    if (!dir) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "dir", ld_json_cstr(dir));
    cJSON_AddItemToObject(o, "sequence_length", ld_json_int((int64_t)d->seq_len));
    cJSON *pos = cJSON_CreateArray();
    for (size_t i = 0; i < d->n_pos; i++) cJSON_AddItemToArray(pos, ld_json_int(d->pos[i]));
    cJSON_AddItemToObject(o, "positions", pos);
    cJSON_AddItemToObject(o, "n_layers", ld_json_int(d->n_layers));
    cJSON_AddItemToObject(o, "hidden", ld_json_int(d->hidden));
    cJSON *files = cJSON_CreateArray();
    char name[48];
    for (int k = 0; k < d->n_layers + 2; k++)
        cJSON_AddItemToArray(files, cJSON_CreateString(ld_replay_dump_file(k, d->n_layers, name, sizeof name)));
    cJSON_AddItemToArray(files, cJSON_CreateString("positions.npy"));
    cJSON_AddItemToArray(files, cJSON_CreateString("tokens.npy"));
    cJSON_AddItemToArray(files, cJSON_CreateString("manifest.json"));
    cJSON_AddItemToObject(o, "files", files);
    return o;
}

/* the request, the engine and the replay's settings */
static void json_head(cJSON *o, const ld_request *r, const ld_replay_engine *e, const ld_replay_result *res)
{
    char where[512];
    cJSON_AddItemToObject(o, "rid", ld_json_cstr(r->rid));
    cJSON_AddItemToObject(o, "where", ld_json_cstr(ld_cli_request_where(r, where, sizeof where, NULL)));
    cJSON_AddItemToObject(o, "verdict", cJSON_CreateString(ld_replay_verdict_kind(res->verdict)));
    cJSON_AddItemToObject(o, "model", ld_json_cstr(ld_replay_engine_arch(e)));
    cJSON_AddItemToObject(o, "backend", ld_json_cstr(ld_replay_engine_backend(e)));
    if (ld_replay_engine_tp(e)) cJSON_AddItemToObject(o, "tp", ld_json_int(ld_replay_engine_tp(e)));
    int gpus = ld_replay_engine_tp_gpus(e); /* said only when the ranks share GPUs */
    if (gpus && gpus < ld_replay_engine_tp(e)) cJSON_AddItemToObject(o, "tp_gpus", ld_json_int(gpus));
    cJSON_AddItemToObject(o, "tokenizer", cJSON_CreateBool(ld_replay_engine_tok(e) != NULL));
    cJSON_AddItemToObject(o, "prompt_source", cJSON_CreateString(res->prompt_source == LD_REPLAY_PROMPT_IDS
                                                                     ? "input_ids" : "tokenized_text"));
    cJSON_AddItemToObject(o, "prompt_tokens", ld_json_int((int64_t)res->n_prompt));
    cJSON_AddItemToObject(o, "output_tokens", ld_json_int((int64_t)res->n_output));
    cJSON_AddItemToObject(o, "temperature", ld_json_double(r->temperature));
    cJSON_AddItemToObject(o, "top_k", ld_json_int(res->top_k));
    cJSON_AddItemToObject(o, "near_tie", ld_json_double(res->near_tie));
}

/* the output: its cut, why there is none, the first positions off the
 * top-k and the top-1, the near-ties */
static void json_output(cJSON *o, const ld_replay_result *res)
{
    cJSON *cut = cJSON_CreateNull();
    if (res->output_cut) {
        cJSON_Delete(cut);
        cut = cJSON_CreateObject();
        cJSON_AddItemToObject(cut, "replayed", ld_json_int((int64_t)res->n_output));
        cJSON_AddItemToObject(cut, "logged", res->n_output_logged >= 0 ? ld_json_int(res->n_output_logged)
                                                                       : cJSON_CreateNull());
    }
    cJSON_AddItemToObject(o, "output_cut", cut);
    cJSON_AddItemToObject(o, "no_output_reason",
                          res->no_output_reason[0] ? cJSON_CreateString(res->no_output_reason) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "first_outside_top_k", res->first_outside >= 0 ? ld_json_int(res->first_outside)
                                                                            : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "first_not_top1", res->first_not_top1 >= 0 ? ld_json_int(res->first_not_top1)
                                                                        : cJSON_CreateNull());
    cJSON *nt = cJSON_CreateArray();
    for (size_t i = 0; i < res->n_output; i++)
        if (res->pos[i].near_tie) cJSON_AddItemToArray(nt, ld_json_int((int64_t)i));
    cJSON_AddItemToObject(o, "near_ties", nt);
}

/* the divergence: both tokens, the margin, the replay's top k there */
static cJSON *json_divergence(const ld_tok *tok, const ld_replay_result *res)
{
    if (res->divergence < 0) return cJSON_CreateNull();
    const ld_replay_pos *p = &res->pos[res->divergence];
    cJSON *d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "position", ld_json_int(res->divergence));
    cJSON *lg = tok_json(tok, p->id);
    cJSON_AddItemToObject(lg, "rank", ld_json_int(p->rank));
    cJSON_AddItemToObject(lg, "logprob", ld_json_double(p->logprob));
    cJSON_AddItemToObject(d, "logged", lg);
    cJSON *rp = tok_json(tok, p->top1);
    cJSON_AddItemToObject(rp, "logprob", ld_json_double(p->top1_logprob));
    cJSON_AddItemToObject(d, "replay", rp);
    cJSON_AddItemToObject(d, "margin", ld_json_double(p->margin));
    cJSON_AddItemToObject(d, "gap", ld_json_double(p->gap));
    cJSON *top = cJSON_CreateArray();
    for (size_t i = 0; i < res->n_top; i++) {
        cJSON *t = tok_json(tok, res->top[i].id);
        cJSON_AddItemToObject(t, "logprob", ld_json_double(res->top[i].logprob));
        cJSON_AddItemToArray(top, t);
    }
    cJSON_AddItemToObject(d, "top_k", top);
    return d;
}

/* the continuation, greedy or sampled (the other null) */
static void json_continuation(cJSON *o, const ld_tok *tok, const ld_replay_result *res)
{
    if (res->greedy_from < 0) {
        cJSON_AddItemToObject(o, "greedy", cJSON_CreateNull());
        cJSON_AddItemToObject(o, "sampled", cJSON_CreateNull());
        return;
    }
    cJSON *g = cJSON_CreateObject();
    cJSON_AddItemToObject(g, "from", ld_json_int(res->greedy_from));
    if (res->sampled) {
        char seed[24];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)res->seed);
        cJSON_AddItemToObject(g, "seed", cJSON_CreateString(seed));
        cJSON_AddItemToObject(g, "temperature", ld_json_double(res->params.temperature));
        cJSON_AddItemToObject(g, "top_k", ld_json_int(res->params.top_k));
        cJSON_AddItemToObject(g, "top_p", ld_json_double(res->params.top_p));
        cJSON_AddItemToObject(g, "min_p", ld_json_double(res->params.min_p));
    }
    cJSON_AddItemToObject(g, "ids", ids_json(res->greedy, res->n_greedy));
    cJSON_AddItemToObject(g, "text", text_json(tok, res->greedy, res->n_greedy));
    cJSON_AddItemToObject(o, res->sampled ? "sampled" : "greedy", g);
    cJSON_AddItemToObject(o, res->sampled ? "greedy" : "sampled", cJSON_CreateNull());
}

/* a row a teacher-forced position */
static cJSON *json_positions(const ld_tok *tok, const ld_replay_result *res)
{
    cJSON *rows = cJSON_CreateArray();
    for (size_t i = 0; i < res->n_output; i++) {
        const ld_replay_pos *p = &res->pos[i];
        cJSON *row = cJSON_CreateObject();
        cJSON_AddItemToObject(row, "position", ld_json_int((int64_t)i));
        cJSON_AddItemToObject(row, "logged", tok_json(tok, p->id));
        cJSON_AddItemToObject(row, "rank", ld_json_int(p->rank));
        cJSON_AddItemToObject(row, "logprob", ld_json_double(p->logprob));
        cJSON_AddItemToObject(row, "top1", tok_json(tok, p->top1));
        cJSON_AddItemToObject(row, "top1_logprob", ld_json_double(p->top1_logprob));
        cJSON_AddItemToObject(row, "margin", ld_json_double(p->margin));
        cJSON_AddItemToObject(row, "near_tie", cJSON_CreateBool(p->near_tie));
        cJSON_AddItemToArray(rows, row);
    }
    return rows;
}

void ld_cli_replay_print_json(struct ld_cli *cli, const ld_request *r, const ld_replay_engine *e,
                              const ld_replay_result *res, const char *dump_dir, const ld_replay_dump *dump)
{
    const ld_tok *tok = ld_replay_engine_tok(e);
    cJSON *o = cJSON_CreateObject();
    json_head(o, r, e, res);
    json_output(o, res);
    cJSON_AddItemToObject(o, "divergence", json_divergence(tok, res));
    json_continuation(o, tok, res);
    cJSON_AddItemToObject(o, "positions", json_positions(tok, res));
    if (dump_dir) cJSON_AddItemToObject(o, "dump", dump_json(dump_dir, dump));
    ld_json_print_line(cli->out, o);
}

/* Rows shown: the first few, those around the divergence, every one whose
 * logged token is not the replay's top-1, the last; the others (the logged
 * token is the top-1 there) are counted on one line. */
static int shown(const ld_replay_result *res, size_t i)
{
    int64_t P = res->divergence;
    return i < 8 || i + 2 >= res->n_output || res->pos[i].rank > 1 ||
           (P >= 0 && (int64_t)i + 6 >= P && (int64_t)i <= P + 3);
}

void ld_cli_replay_print_text(struct ld_cli *cli, const ld_request *r, const ld_replay_engine *e,
                       const ld_replay_result *res)
{
    FILE *f = cli->out;
    const ld_tok *tok = ld_replay_engine_tok(e);
    char where[512], a[96], b[96];
    char tpn[96] = "";
    int tp = ld_replay_engine_tp(e), gpus = ld_replay_engine_tp_gpus(e);
    if (tp && gpus && gpus < tp)
        snprintf(tpn, sizeof tpn, ", tp %d on %d GPU%s (the collectives through host memory)", tp, gpus,
                 gpus > 1 ? "s" : "");
    else if (tp) snprintf(tpn, sizeof tpn, ", tp %d", tp);
    fprintf(f, "%s  %s  %s, %zu prompt ids (%s), %zu output ids, top-k %d, backend %s%s\n", r->rid ? r->rid : "-",
            ld_cli_request_where(r, where, sizeof where, NULL), ld_replay_engine_arch(e), res->n_prompt,
            res->prompt_source == LD_REPLAY_PROMPT_IDS ? "logged input_ids" : "the logged text, tokenized",
            res->n_output, res->top_k, ld_replay_engine_backend(e), tpn);
    if (res->n_output) {
        fprintf(f, "     pos  %-26s %6s %9s  %-26s %9s %8s\n", "logged", "rank", "logprob", "replay top-1",
                "logprob", "margin");
        size_t hidden = 0;
        for (size_t i = 0; i < res->n_output; i++) {
            const ld_replay_pos *p = &res->pos[i];
            if (!shown(res, i)) {
                hidden++;
                continue;
            }
            if (hidden) fprintf(f, "     ...  (%zu positions where the logged token is the top-1)\n", hidden);
            hidden = 0;
            const char *mark = (int64_t)i == res->divergence ? ">>" : p->near_tie ? "~ " : p->outside ? "! " : "  ";
            fprintf(f, "  %s%4zu  %-26s %6lld %9.4f  %-26s %9.4f %8.4f%s\n", mark, i, tok_show(tok, p->id, a, sizeof a),
                    (long long)p->rank, p->logprob, tok_show(tok, p->top1, b, sizeof b), p->top1_logprob, p->margin,
                    (int64_t)i == res->divergence ? "  divergence"
                    : p->near_tie                 ? "  near-tie"
                                                  : "");
        }
        if (hidden) fprintf(f, "     ...  (%zu positions where the logged token is the top-1)\n", hidden);
    }
    if (res->greedy_from >= 0) {
        if (res->sampled)
            fprintf(f, "sampled (seed %llu, temperature %g, top-k %lld, top-p %g, min-p %g) from position %lld:",
                    (unsigned long long)res->seed, res->params.temperature,
                    (long long)(res->params.top_k > 0 ? res->params.top_k : -1),
                    isnan(res->params.top_p) ? 1.0 : res->params.top_p,
                    isnan(res->params.min_p) ? 0.0 : res->params.min_p, (long long)res->greedy_from);
        else
            fprintf(f, "greedy from position %lld:", (long long)res->greedy_from);
        for (size_t i = 0; i < res->n_greedy; i++) fprintf(f, " %ld", (long)res->greedy[i]);
        char *text = NULL;
        size_t len = 0;
        if (tok && ld_tok_decode(tok, res->greedy, res->n_greedy, &text, &len, NULL) == LD_OK) {
            char esc[512];
            escape(esc, sizeof esc, text, len, 120);
            fprintf(f, "  \"%s\"", esc);
        }
        free(text);
        fputc('\n', f);
    }
    const char *kind = ld_replay_verdict_kind(res->verdict);
    if (res->verdict == LD_REPLAY_DIVERGENT) {
        const ld_replay_pos *p = &res->pos[res->divergence];
        fprintf(f, "%s at position %lld: logged %s (rank %lld, logprob %.4f), the replay's top-1 %s (logprob %.4f); "
                   "%.4f nats apart, top-two margin %.4f\n",
                kind, (long long)res->divergence, tok_show(tok, p->id, a, sizeof a), (long long)p->rank, p->logprob,
                tok_show(tok, p->top1, b, sizeof b), p->top1_logprob, p->gap, p->margin);
    } else if (res->verdict == LD_REPLAY_CONSISTENT) {
        fprintf(f, "%s: all %zu logged tokens within the replay's top %d", kind, res->n_output, res->top_k);
        if (res->n_near_ties) fprintf(f, " or near-ties (%zu, within %g nats of the top-1)", res->n_near_ties,
                                      res->near_tie);
        if (res->first_not_top1 >= 0)
            fprintf(f, "; first token other than the top-1 at position %lld (margin %.4f)\n",
                    (long long)res->first_not_top1, res->pos[res->first_not_top1].margin);
        else
            fprintf(f, "; each is the replay's top-1\n");
    } else {
        fprintf(f, "%s: %s; the greedy continuation of the prompt is shown\n", kind, res->no_output_reason);
    }
}

