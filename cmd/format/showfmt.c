/* showfmt.c - see showfmt.h. */
#include "showfmt.h"

#include <math.h>
#include <string.h>

#include "parse/pylit/pylit_json.h"
#include "cmd/common/logread.h"
#include "cmd/common/pd.h"

enum { PREVIEW_CHARS = 60, TEXT_KEEP = 2000 };

typedef struct style {
    const char *bold, *dim, *warn, *reset;
} style;

static style style_for(const struct ld_cli *cli)
{
    style s = { "", "", "", "" };
    if (cli->out_is_tty) s = (style){ "\033[1m", "\033[2m", "\033[33m", "\033[0m" };
    return s;
}

/* One-line preview: newlines and tabs shown as spaces, cut after n chars. */
static void preview(FILE *f, const ld_text *t, int n)
{
    if (!t->bytes) { fputs(t->flags & LD_TEXT_PRESENT ? "(not kept)" : "", f); return; }
    int chars = 0;
    for (size_t i = 0; i < t->len && chars < n; i++) {
        unsigned char c = (unsigned char)t->bytes[i];
        if ((c & 0xC0) != 0x80) chars++;
        fputc(c == '\n' || c == '\t' || c == '\r' ? ' ' : c, f);
    }
    if (t->n_chars > (uint64_t)n) fputs("...", f);
}

static void print_params(FILE *f, const style *st, const ld_request *r)
{
    fprintf(f, "%sparameters%s\n", st->bold, st->reset);
    fprintf(f, "  model        %s\n", r->model ? r->model : "-");
    if (!isnan(r->temperature)) fprintf(f, "  temperature  %g\n", r->temperature);
    if (!isnan(r->top_p)) fprintf(f, "  top_p        %g\n", r->top_p);
    if (r->top_k != LD_UNSET_INT) fprintf(f, "  top_k        %lld\n", (long long)r->top_k);
    if (r->max_tokens != LD_UNSET_INT) fprintf(f, "  max tokens   %lld\n", (long long)r->max_tokens);
    if (r->n != LD_UNSET_INT) fprintf(f, "  n            %lld\n", (long long)r->n);
    if (r->stream >= 0) fprintf(f, "  stream       %s\n", r->stream ? "yes" : "no");
    fprintf(f, "  tools        %s", r->n_tools >= 0 ? "" : "-");
    if (r->n_tools >= 0) fprintf(f, "%lld", (long long)r->n_tools);
    fputc('\n', f);
    if (r->chat_template_kwargs) {
        ld_arena scratch;
        ld_arena_init(&scratch, 0);
        cJSON *j = ld_json_value(r->chat_template_kwargs, &scratch);
        char *s = j ? cJSON_PrintUnformatted(j) : NULL;
        fprintf(f, "  template kwargs  %s\n", s ? s : "?");
        cJSON_free(s);
        cJSON_Delete(j);
        ld_arena_release(&scratch);
    }
}

static void print_messages(FILE *f, const style *st, const ld_request *r)
{
    if (r->n_messages < 0) {
        fprintf(f, "%smessages%s  none logged (no Receive OpenAI line)\n", st->bold, st->reset);
        return;
    }
    fprintf(f, "%smessages (%lld)%s\n", st->bold, (long long)r->n_messages, st->reset);
    fprintf(f, "  %s%3s  %-10s %8s %9s %5s  %s%s\n", st->dim, "#", "role", "chars", "reasoning",
            "tools", "preview", st->reset);
    for (int64_t i = 0; i < r->n_messages; i++) {
        const ld_message *m = &r->messages[i];
        int empty = m->role && !strcmp(m->role, "assistant") && m->content.n_chars == 0 &&
                    m->n_tool_calls == 0;
        fprintf(f, "  %3lld  %-10s %8llu %9llu %5u  %s", (long long)i, m->role ? m->role : "?",
                (unsigned long long)m->content.n_chars,
                (unsigned long long)m->reasoning_content.n_chars, (unsigned)m->n_tool_calls,
                empty ? st->warn : "");
        if (empty) fputs("(empty assistant turn)", f);
        else preview(f, &m->content, PREVIEW_CHARS);
        fprintf(f, "%s\n", empty ? st->reset : "");
    }
}

static void print_text_block(FILE *f, const style *st, const ld_text *t, int full)
{
    if (!(t->flags & LD_TEXT_PRESENT)) {
        fprintf(f, "  %s(not in the log%s)%s\n", st->dim,
                (t->flags & LD_TEXT_SKIPPED) ? ": left out at this log level" :
                (t->flags & LD_TEXT_NONE) ? ": logged as None" : "", st->reset);
        return;
    }
    if (!t->bytes) { fprintf(f, "  %s(%llu chars, abbreviated by the logger)%s\n", st->dim,
                             (unsigned long long)t->n_chars, st->reset); return; }
    size_t cut = (t->flags & LD_TEXT_TRUNCATED) ? t->cut : t->len;
    size_t head = cut, tail_from = cut;
    if (!full && cut > TEXT_KEEP) { head = TEXT_KEEP / 2; tail_from = cut - TEXT_KEEP / 2; }
    fwrite(t->bytes, 1, head, f);
    if (tail_from > head)
        fprintf(f, "%s[... %zu bytes not shown; --full prints them ...]%s", st->dim,
                tail_from - head, st->reset);
    fwrite(t->bytes + tail_from, 1, cut - tail_from, f);
    if (t->flags & LD_TEXT_TRUNCATED) {
        fprintf(f, "%s[... cut by the logger: the middle is not in the log ...]%s", st->warn, st->reset);
        fwrite(t->bytes + cut, 1, t->len - cut, f);
    }
    fputc('\n', f);
}

static void print_outcome(FILE *f, const style *st, const ld_request *r)
{
    fprintf(f, "%sfinish%s       %s", st->bold, st->reset, r->finish_type ? r->finish_type : "-");
    if (r->finish_matched) fprintf(f, " (matched %s)", r->finish_matched);
    if (r->finish_length != LD_UNSET_INT) fprintf(f, " (length %lld)", (long long)r->finish_length);
    if (r->finish_message) fprintf(f, " %s%s%s", st->warn, r->finish_message, st->reset);
    fputc('\n', f);
    fprintf(f, "%stokens%s       prompt %lld, completion %lld, cached %lld", st->bold, st->reset,
            (long long)(r->prompt_tokens == LD_UNSET_INT ? -1 : r->prompt_tokens),
            (long long)(r->completion_tokens == LD_UNSET_INT ? -1 : r->completion_tokens),
            (long long)(r->cached_tokens == LD_UNSET_INT ? -1 : r->cached_tokens));
    if (!isnan(r->e2e_latency)) fprintf(f, "; latency %.3f s", r->e2e_latency);
    fputc('\n', f);
}

void ld_cli_show_text(struct ld_cli *cli, const ld_request *r, int full)
{
    FILE *f = cli->out;
    style st = style_for(cli);
    char words[256];
    ld_cli_request_flag_words(r, words, sizeof words);
    fprintf(f, "%srequest %s%s  (%s%s%s)\n", st.bold, r->rid ? r->rid : "(no rid)", st.reset,
            ld_engine_name(r->engine), r->timestamp ? ", " : "", r->timestamp ? r->timestamp : "");
    if (words[0]) fprintf(f, "  %sflags: %s%s\n", st.warn, words, st.reset);
    char pd[1024];
    if (*ld_cli_pd_line(r, pd, sizeof pd)) fprintf(f, "  servers: %s\n", pd);
    for (int p = 0; p < LD_PART_COUNT; p++) {
        if (r->seen & LD_PART_BIT(p))
            fprintf(f, "  %-15s %s:%llu\n", ld_part_name((ld_part)p), r->src[p].member,
                    (unsigned long long)r->src[p].line);
        else if (r->missing & LD_PART_BIT(p))
            fprintf(f, "  %-15s %smissing%s\n", ld_part_name((ld_part)p), st.warn, st.reset);
    }
    print_params(f, &st, r);
    print_messages(f, &st, r);
    fprintf(f, "%sprompt%s (%llu chars, %lld input ids)\n", st.bold, st.reset,
            (unsigned long long)r->prompt.n_chars, (long long)r->n_input_ids);
    print_text_block(f, &st, &r->prompt, full);
    fprintf(f, "%soutput%s (%llu chars, %lld output ids)\n", st.bold, st.reset,
            (unsigned long long)r->output.n_chars, (long long)r->n_output_ids);
    print_text_block(f, &st, &r->output, full);
    print_outcome(f, &st, r);
}

/* {"text": ..., "chars": N, ...}: a truncated text gives "head" and "tail"
 * instead of "text", so nothing cut by the logger passes for whole text. */
static cJSON *text_json(const ld_text *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int present = (t->flags & LD_TEXT_PRESENT) != 0;
    if (t->flags & LD_TEXT_TRUNCATED) {
        cJSON_AddItemToObject(o, "head", ld_json_text(t->bytes, t->cut));
        cJSON_AddItemToObject(o, "tail", ld_json_text(t->bytes ? t->bytes + t->cut : NULL, t->len - t->cut));
    } else {
        cJSON_AddItemToObject(o, "text", present ? ld_json_text(t->bytes, t->len) : cJSON_CreateNull());
    }
    cJSON_AddItemToObject(o, "chars", present ? ld_json_int((int64_t)t->n_chars) : cJSON_CreateNull());
    cJSON_AddBoolToObject(o, "truncated", (t->flags & LD_TEXT_TRUNCATED) != 0);
    cJSON_AddBoolToObject(o, "abbreviated", (t->flags & LD_TEXT_ABBREVIATED) != 0);
    cJSON_AddBoolToObject(o, "head_only", (t->flags & LD_TEXT_HEAD_ONLY) != 0);
    cJSON_AddBoolToObject(o, "skipped_by_level", (t->flags & LD_TEXT_SKIPPED) != 0);
    return o;
}

static cJSON *messages_json(const ld_request *r)
{
    if (r->n_messages < 0) return cJSON_CreateNull();
    cJSON *arr = cJSON_CreateArray();
    for (int64_t i = 0; arr && i < r->n_messages; i++) {
        const ld_message *m = &r->messages[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "index", ld_json_int(i));
        cJSON_AddItemToObject(o, "role", ld_json_cstr(m->role));
        cJSON_AddItemToObject(o, "content", text_json(&m->content));
        cJSON_AddBoolToObject(o, "content_parts", (m->content.flags & LD_TEXT_PARTS) != 0);
        cJSON_AddItemToObject(o, "reasoning_content", text_json(&m->reasoning_content));
        cJSON_AddItemToObject(o, "tool_calls", ld_json_int(m->n_tool_calls));
        cJSON_AddItemToObject(o, "tool_call_id", ld_json_cstr(m->tool_call_id));
        cJSON_AddItemToObject(o, "name", ld_json_cstr(m->name));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static cJSON *parts_json(const ld_request *r)
{
    cJSON *o = cJSON_CreateObject();
    for (int p = 0; o && p < LD_PART_COUNT; p++) {
        if (!(r->seen & LD_PART_BIT(p))) continue;
        cJSON *src = cJSON_CreateObject();
        cJSON_AddItemToObject(src, "file", ld_json_cstr(r->src[p].member));
        cJSON_AddItemToObject(src, "line", ld_json_int((int64_t)r->src[p].line));
        cJSON_AddItemToObject(src, "offset", ld_json_int((int64_t)r->src[p].offset));
        cJSON_AddItemToObject(o, ld_part_name((ld_part)p), src);
    }
    return o;
}

static cJSON *params_json(const ld_request *r, ld_arena *scratch)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "model", ld_json_cstr(r->model));
    cJSON_AddItemToObject(o, "temperature", ld_json_double(r->temperature));
    cJSON_AddItemToObject(o, "top_p", ld_json_double(r->top_p));
    cJSON_AddItemToObject(o, "top_k", ld_json_int(r->top_k));
    cJSON_AddItemToObject(o, "max_tokens", ld_json_int(r->max_tokens));
    cJSON_AddItemToObject(o, "n", ld_json_int(r->n));
    cJSON_AddItemToObject(o, "stream", r->stream < 0 ? cJSON_CreateNull() : cJSON_CreateBool(r->stream));
    cJSON_AddItemToObject(o, "tools", r->n_tools >= 0 ? ld_json_int(r->n_tools) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "chat_template_kwargs", ld_json_value(r->chat_template_kwargs, scratch));
    return o;
}

static cJSON *finish_json(const ld_request *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "reason", ld_json_cstr(r->finish_type));
    cJSON_AddItemToObject(o, "matched", ld_json_cstr(r->finish_matched));
    cJSON_AddItemToObject(o, "length", ld_json_int(r->finish_length));
    cJSON_AddItemToObject(o, "message", ld_json_cstr(r->finish_message));
    cJSON_AddItemToObject(o, "prompt_tokens", ld_json_int(r->prompt_tokens));
    cJSON_AddItemToObject(o, "completion_tokens", ld_json_int(r->completion_tokens));
    cJSON_AddItemToObject(o, "cached_tokens", ld_json_int(r->cached_tokens));
    cJSON_AddItemToObject(o, "e2e_latency", ld_json_double(r->e2e_latency));
    return o;
}

void ld_cli_show_json(FILE *f, const ld_request *r)
{
    ld_arena scratch;
    ld_arena_init(&scratch, 0);
    cJSON *o = cJSON_CreateObject();
    char words[256];
    ld_cli_request_flag_words(r, words, sizeof words);
    cJSON_AddItemToObject(o, "rid", ld_json_cstr(r->rid));
    cJSON_AddItemToObject(o, "parent_rid", ld_json_cstr(r->parent_rid));
    cJSON_AddItemToObject(o, "sub_index", r->sub_index >= 0 ? ld_json_int(r->sub_index) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "time", ld_json_cstr(r->timestamp));
    cJSON_AddItemToObject(o, "engine", cJSON_CreateString(ld_engine_name(r->engine)));
    cJSON *flags = cJSON_AddArrayToObject(o, "flags");
    for (char *w = strtok(words, ","); w; w = strtok(NULL, ","))
        cJSON_AddItemToArray(flags, cJSON_CreateString(w));
    cJSON_AddItemToObject(o, "parts", parts_json(r));
    cJSON *missing = cJSON_AddArrayToObject(o, "missing");
    for (int p = 0; p < LD_PART_COUNT; p++)
        if (r->missing & LD_PART_BIT(p))
            cJSON_AddItemToArray(missing, cJSON_CreateString(ld_part_name((ld_part)p)));
    cJSON_AddItemToObject(o, "parameters", params_json(r, &scratch));
    cJSON_AddItemToObject(o, "messages", messages_json(r));
    cJSON *prompt = text_json(&r->prompt);
    cJSON_AddItemToObject(prompt, "input_ids", r->n_input_ids >= 0 ? ld_json_int(r->n_input_ids) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "prompt", prompt);
    cJSON *output = text_json(&r->output);
    cJSON_AddItemToObject(output, "output_ids", r->n_output_ids >= 0 ? ld_json_int(r->n_output_ids) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "output", output);
    cJSON_AddItemToObject(o, "finish", finish_json(r));
    cJSON_AddItemToObject(o, "pd", ld_cli_pd_json(r));
    cJSON *values = cJSON_AddObjectToObject(o, "values");
    cJSON_AddItemToObject(values, "openai", ld_json_value(r->openai_obj, &scratch));
    cJSON_AddItemToObject(values, "receive", ld_json_value(r->receive_obj, &scratch));
    cJSON_AddItemToObject(values, "finish", ld_json_value(r->finish_obj, &scratch));
    cJSON_AddItemToObject(values, "out", ld_json_value(r->out, &scratch));
    ld_json_print_line(f, o);
    ld_arena_release(&scratch);
}
