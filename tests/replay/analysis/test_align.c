/* test_align.c - replay/align: message array vs templated prompt.
 *
 * The golden case aligns every render of ../shared/templates/goldens with the
 * conversation it came from and checks the result against
 * testdata/replay/align/oracle.json (tools/gen_align_oracle.py: jinja2 itself
 * decides, by sentinel substitution, which parts each template keeps).  The
 * other cases are synthetic: each finding fires and does not fire.
 */
#include "replay/analysis/align.h"
#include "tests/support/ld_test.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <time.h>

/* ------------------------------------------------------------ helpers */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); b = NULL; }
            b = nb;
        }
    }
    fclose(f);
    if (b) b[n] = 0;
    if (len) *len = n;
    return b;
}

static ld_align_msg M(const char *role, const char *content)
{
    ld_align_msg m;
    memset(&m, 0, sizeof m);
    m.role = role;
    m.content = content;
    m.content_len = content ? strlen(content) : 0;
    m.content_present = content != NULL;
    return m;
}

static size_t count_kind(const ld_align_result *r, const char *kind, long msg)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_findings; i++)
        if (!strcmp(r->findings[i].kind, kind) && (msg < 0 || r->findings[i].msg_index == (size_t)msg))
            n++;
    return n;
}

static const ld_align_part *part_of(const ld_align_result *r, size_t mi, ld_align_part_kind k,
                                    size_t tool)
{
    const ld_align_msg_result *m = &r->msgs[mi];
    for (size_t i = 0; i < m->n_parts; i++)
        if (m->parts[i].kind == k && (k != LD_ALIGN_PART_TOOL_NAME && k != LD_ALIGN_PART_TOOL_ARGS
                                      ? 1 : m->parts[i].tool_index == tool))
            return &m->parts[i];
    return NULL;
}

static void dump(const ld_align_result *r)
{
    for (size_t i = 0; i < r->n_msgs; i++) {
        const ld_align_msg_result *m = &r->msgs[i];
        fprintf(stderr, "    msg %zu found=%d [%zu,%zu) in_order=%d\n", i, m->found, m->start,
                m->end, m->in_order);
        for (size_t j = 0; j < m->n_parts; j++)
            fprintf(stderr, "      %s[%zu] %s/%s [%zu,%zu)\n",
                    ld_align_part_kind_name(m->parts[j].kind), m->parts[j].tool_index,
                    ld_align_state_name(m->parts[j].state), ld_align_how_name(m->parts[j].how),
                    m->parts[j].start, m->parts[j].end);
    }
    for (size_t i = 0; i < r->n_findings; i++)
        fprintf(stderr, "    finding %s %s msg %zu: %s\n", r->findings[i].severity,
                r->findings[i].kind, r->findings[i].msg_index, r->findings[i].detail);
}

static ld_align_result *align(ld_arena *a, const ld_align_msg *m, size_t n, const char *prompt,
                              const ld_align_prompt_info *info)
{
    ld_align_result *r = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_align_run(m, n, prompt, strlen(prompt), info, a, &r, &err) != LD_OK) {
        fprintf(stderr, "  ld_align_run: %s\n", err.msg);
        return NULL;
    }
    return r;
}

/* ------------------------------------------------------------ goldens */

typedef struct golden_msgs {
    ld_align_msg msgs[16];
    ld_align_tool_call calls[16][4];
    char *owned[64];
    size_t n, n_owned;
} golden_msgs;

static void build_msgs(const cJSON *arr, golden_msgs *g)
{
    memset(g, 0, sizeof *g);
    const cJSON *jm;
    cJSON_ArrayForEach(jm, arr) {
        if (g->n == 16) break;
        const cJSON *c = cJSON_GetObjectItem(jm, "content");
        ld_align_msg *m = &g->msgs[g->n];
        *m = M(cJSON_GetStringValue(cJSON_GetObjectItem(jm, "role")), cJSON_GetStringValue(c));
        const char *r = cJSON_GetStringValue(cJSON_GetObjectItem(jm, "reasoning_content"));
        if (r) { m->reasoning = r; m->reasoning_len = strlen(r); }
        m->tool_call_id = cJSON_GetStringValue(cJSON_GetObjectItem(jm, "tool_call_id"));
        m->name = cJSON_GetStringValue(cJSON_GetObjectItem(jm, "name"));
        const cJSON *tc;
        size_t k = 0;
        cJSON_ArrayForEach(tc, cJSON_GetObjectItem(jm, "tool_calls")) {
            if (k == 4) break;
            ld_align_tool_call *t = &g->calls[g->n][k++];
            const cJSON *fn = cJSON_GetObjectItem(tc, "function");
            const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
            t->id = cJSON_GetStringValue(cJSON_GetObjectItem(tc, "id"));
            t->name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));
            t->name_len = t->name ? strlen(t->name) : 0;
            if (cJSON_IsString(args)) {
                t->arguments = args->valuestring;
            } else if (args && g->n_owned < 64) { /* compact, unlike json.dumps */
                t->arguments = g->owned[g->n_owned++] = cJSON_PrintUnformatted(args);
                t->arguments_is_object = 1;
            }
            t->arguments_len = t->arguments ? strlen(t->arguments) : 0;
        }
        m->tool_calls = g->calls[g->n];
        m->n_tool_calls = k;
        g->n++;
    }
}

static const ld_align_part *oracle_part(const ld_align_result *r, size_t mi, const char *name)
{
    size_t k = 0;
    if (!strcmp(name, "content")) return part_of(r, mi, LD_ALIGN_PART_CONTENT, 0);
    if (!strcmp(name, "tool_result")) return part_of(r, mi, LD_ALIGN_PART_TOOL_RESULT, 0);
    if (!strcmp(name, "reasoning")) return part_of(r, mi, LD_ALIGN_PART_REASONING, 0);
    if (sscanf(name, "tool_calls[%zu]", &k) == 1)
        return part_of(r, mi, strstr(name, ".name") ? LD_ALIGN_PART_TOOL_NAME
                                                     : LD_ALIGN_PART_TOOL_ARGS, k);
    return NULL;
}

/* Checks one render against the oracle; returns the number of mismatches. */
static int check_render(const char *tname, const char *cname, const cJSON *omsgs,
                        const ld_align_result *r, size_t *n_drops)
{
    int bad = 0, all_kept = 1;
    const cJSON *om;
    size_t mi = 0;
    cJSON_ArrayForEach(om, omsgs) {
        int vis_dropped = 0, rsn_dropped = 0;
        const cJSON *pe;
        cJSON_ArrayForEach(pe, cJSON_GetObjectItem(om, "parts")) {
            const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(pe, "state"));
            const ld_align_part *p = oracle_part(r, mi, pe->string);
            if (!st || !strcmp(st, "error")) continue;
            int kept = !strcmp(st, "kept");
            if (!kept) {
                all_kept = 0;
                (*n_drops)++;
                if (!strcmp(pe->string, "content") || !strcmp(pe->string, "tool_result"))
                    vis_dropped = 1;
                if (!strcmp(pe->string, "reasoning")) rsn_dropped = 1;
            }
            ld_align_state want = kept ? LD_ALIGN_FOUND : LD_ALIGN_ABSENT;
            if (!p || p->state != want) {
                fprintf(stderr, "  %s/%s msg %zu %s: oracle %s, align %s\n", tname, cname, mi,
                        pe->string, st, p ? ld_align_state_name(p->state) : "(no part)");
                bad++;
            }
        }
        size_t nd = count_kind(r, LD_ALIGN_DROPPED_MESSAGE, (long)mi);
        if ((nd > 0) != vis_dropped) {
            fprintf(stderr, "  %s/%s msg %zu: dropped_message %zu, oracle visible %s\n", tname,
                    cname, mi, nd, vis_dropped ? "dropped" : "kept");
            bad++;
        }
        if (rsn_dropped && !vis_dropped && !count_kind(r, LD_ALIGN_REASONING_STRIPPED, (long)mi)) {
            fprintf(stderr, "  %s/%s msg %zu: reasoning_stripped missing\n", tname, cname, mi);
            bad++;
        }
        mi++;
    }
    if (all_kept && r->n_errors) {
        fprintf(stderr, "  %s/%s: %zu error findings on a template that keeps everything\n",
                tname, cname, r->n_errors);
        bad++;
    }
    if (bad) dump(r);
    return bad;
}

static int test_align_goldens(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/templates/goldens/SUMMARY.json", LD_SHARED_DIR);
    char *sum_txt = slurp(path, NULL);
    if (!sum_txt) SKIP("%s not found (../shared absent)", path);
    char *or_txt = slurp(LD_TESTDATA_DIR "/replay/align/oracle.json", NULL);
    CHECK(or_txt != NULL);
    cJSON *sum = cJSON_Parse(sum_txt), *orc = cJSON_Parse(or_txt);
    CHECK(sum && orc);
    const cJSON *cases = cJSON_GetObjectItem(sum, "cases"), *t;
    int bad = 0, renders = 0;
    size_t drops = 0;
    ld_arena arena;
    ld_arena_init(&arena, 0);
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(orc, "templates")) {
        const cJSON *c;
        cJSON_ArrayForEach(c, t) {
            snprintf(path, sizeof path, "%s/templates/goldens/%s/%s.txt", LD_SHARED_DIR,
                     t->string, c->string);
            char *prompt = slurp(path, NULL);
            CHECK_MSG(prompt != NULL, "missing golden %s", path);
            golden_msgs g;
            build_msgs(cJSON_GetObjectItem(cJSON_GetObjectItem(cases, c->string), "messages"), &g);
            ld_align_result *r = align(&arena, g.msgs, g.n, prompt, NULL);
            CHECK(r != NULL);
            CHECK_EQ_INT(r->n_msgs, cJSON_GetArraySize(c));
            bad += check_render(t->string, c->string, c, r, &drops);
            renders++;
            for (size_t i = 0; i < g.n_owned; i++) cJSON_free(g.owned[i]);
            free(prompt);
            ld_arena_reset(&arena);
        }
    }
    printf("  %d renders, %zu parts dropped by the templates, %d mismatches\n", renders, drops, bad);
    ld_arena_release(&arena);
    cJSON_Delete(sum);
    cJSON_Delete(orc);
    free(sum_txt);
    free(or_txt);
    CHECK(renders >= 100);
    CHECK_EQ_INT(bad, 0);
    return 0;
}

/* ------------------------------------------------------------ synthetic */

static const char CHATML[] =
    "<|im_start|>system\nYou are terse.<|im_end|>\n"
    "<|im_start|>user\nPlease summarise the attached quarterly report for me.<|im_end|>\n"
    "<|im_start|>assistant\nRevenue grew by twelve percent while costs stayed flat overall.<|im_end|>\n"
    "<|im_start|>user\nAnd what about the outlook for the next two quarters?<|im_end|>\n";

static void chat_msgs(ld_align_msg *m)
{
    m[0] = M("system", "You are terse.");
    m[1] = M("user", "Please summarise the attached quarterly report for me.");
    m[2] = M("assistant", "Revenue grew by twelve percent while costs stayed flat overall.");
    m[3] = M("user", "And what about the outlook for the next two quarters?");
}

static int test_align_clean(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_align_msg m[4];
    chat_msgs(m);
    ld_align_result *r = align(&a, m, 4, CHATML, NULL);
    CHECK(r);
    CHECK_EQ_INT(r->n_findings, 0);
    for (size_t i = 0; i < 4; i++) {
        CHECK(r->msgs[i].found);
        CHECK_EQ_INT(r->msgs[i].parts[0].state, LD_ALIGN_FOUND);
        CHECK_EQ_INT(r->msgs[i].parts[0].how, LD_ALIGN_HOW_EXACT);
    }
    CHECK(!strncmp(CHATML + r->msgs[2].start, "Revenue", 7));
    ld_arena_release(&a);
    return 0;
}

static int test_align_dropped_message(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_align_msg m[4];
    chat_msgs(m);
    const char *p = "<|im_start|>system\nYou are terse.<|im_end|>\n"
                    "<|im_start|>user\nPlease summarise the attached quarterly report for me.<|im_end|>\n"
                    "<|im_start|>user\nAnd what about the outlook for the next two quarters?<|im_end|>\n";
    ld_align_result *r = align(&a, m, 4, p, NULL);
    CHECK(r);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_DROPPED_MESSAGE, 2), 1);
    CHECK_EQ_INT(r->n_errors, 1);
    CHECK_EQ_INT(r->msgs[2].parts[0].state, LD_ALIGN_ABSENT);
    CHECK(!r->msgs[2].found);
    ld_arena_release(&a);
    return 0;
}

static int test_align_mangled_message(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_align_msg m[4];
    chat_msgs(m);
    const char *p = "<|im_start|>system\nYou are terse.<|im_end|>\n"
                    "<|im_start|>user\nPlease summarise the attached quarterly report for me.<|im_end|>\n"
                    "<|im_start|>assistant\nRevenue grew by twelve PERCENT while costs stayed flat overall.<|im_end|>\n"
                    "<|im_start|>user\nAnd what about the outlook for the next two quarters?<|im_end|>\n";
    ld_align_result *r = align(&a, m, 4, p, NULL);
    CHECK(r);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_MANGLED_MESSAGE, 2), 1);
    CHECK_EQ_INT(r->n_errors, 1);
    const ld_align_part *pt = &r->msgs[2].parts[0];
    CHECK_EQ_INT(pt->state, LD_ALIGN_PARTLY);
    CHECK_EQ_INT(pt->first_diff, strlen("Revenue grew by twelve "));
    CHECK(!strncmp(p + pt->first_diff_prompt, "PERCENT", 7));
    CHECK_EQ_INT(pt->n_pieces, 2);
    CHECK_EQ_INT(pt->pieces[1].len, strlen(" while costs stayed flat overall."));
    CHECK(!strncmp(r->findings[0].prompt_excerpt, "PERCENT", 7));
    ld_arena_release(&a);
    return 0;
}

static int test_align_order(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_align_msg m[4];
    chat_msgs(m);
    const char *p = "<|im_start|>system\nYou are terse.<|im_end|>\n"
                    "<|im_start|>assistant\nRevenue grew by twelve percent while costs stayed flat overall.<|im_end|>\n"
                    "<|im_start|>user\nPlease summarise the attached quarterly report for me.<|im_end|>\n"
                    "<|im_start|>user\nAnd what about the outlook for the next two quarters?<|im_end|>\n";
    ld_align_result *r = align(&a, m, 4, p, NULL);
    CHECK(r);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_ORDER, -1), 1);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_ORDER, 2), 1);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_DROPPED_MESSAGE, -1), 0);
    CHECK_EQ_INT(r->n_errors, 1);
    for (size_t i = 0; i < 4; i++) CHECK_EQ_INT(r->msgs[i].parts[0].state, LD_ALIGN_FOUND);
    /* a system prompt moved to the end is not an order problem (Mistral Nemo) */
    const char *q = "[INST]Please summarise the attached quarterly report for me.[/INST]"
                    "Revenue grew by twelve percent while costs stayed flat overall.</s>"
                    "[INST]You are terse.\n\nAnd what about the outlook for the next two quarters?[/INST]";
    r = align(&a, m, 4, q, NULL);
    CHECK(r);
    CHECK_EQ_INT(r->n_findings, 0);
    ld_arena_release(&a);
    return 0;
}

static int test_align_whitespace_stripped(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_align_msg m[2] = {M("user", "\n  Hello there, how are you?  \n"), M("assistant", "  Fine.\n")};
    const char *p = "<user>Hello there, how are you?</user><bot>Fine.</bot>";
    ld_align_result *r = align(&a, m, 2, p, NULL);
    CHECK(r);
    CHECK_EQ_INT(r->n_findings, 0);
    CHECK_EQ_INT(r->msgs[0].parts[0].how, LD_ALIGN_HOW_STRIPPED);
    CHECK_EQ_INT(r->msgs[1].parts[0].state, LD_ALIGN_FOUND);
    ld_arena_release(&a);
    return 0;
}

static int test_align_think_split(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_align_msg m[3] = {M("user", "Q1 is here"), M("assistant", "<think>\nlong reasoning R1\n</think>\n\nA1 answer"),
                         M("user", "Q2 follows")};
    /* Qwen3: earlier reasoning removed -> info only */
    const char *p = "<|im_start|>user\nQ1 is here<|im_end|>\n<|im_start|>assistant\nA1 answer<|im_end|>\n"
                    "<|im_start|>user\nQ2 follows<|im_end|>\n";
    ld_align_result *r = align(&a, m, 3, p, NULL);
    CHECK(r);
    CHECK_EQ_INT(r->n_errors, 0);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_REASONING_STRIPPED, 1), 1);
    CHECK_EQ_INT(part_of(r, 1, LD_ALIGN_PART_CONTENT, 0)->state, LD_ALIGN_FOUND);
    /* reasoning kept -> no finding */
    const char *q = "<|im_start|>user\nQ1 is here<|im_end|>\n<|im_start|>assistant\n<think>\nlong reasoning R1\n"
                    "</think>\n\nA1 answer<|im_end|>\n<|im_start|>user\nQ2 follows<|im_end|>\n";
    r = align(&a, m, 3, q, NULL);
    CHECK(r);
    CHECK_EQ_INT(r->n_findings, 0);
    CHECK_EQ_INT(part_of(r, 1, LD_ALIGN_PART_REASONING, 0)->state, LD_ALIGN_FOUND);
    /* a turn that was only reasoning, removed: the model saw an empty turn */
    m[1] = M("assistant", "<think>only thinking here</think>");
    r = align(&a, m, 3, p, NULL);
    CHECK(r);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_DROPPED_MESSAGE, 1), 1);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_REASONING_STRIPPED, -1), 0);
    /* an empty assistant turn is not a template issue */
    m[1] = M("assistant", "");
    r = align(&a, m, 3, p, NULL);
    CHECK(r);
    CHECK_EQ_INT(r->n_findings, 0);
    CHECK_EQ_INT(r->msgs[1].n_parts, 0);
    ld_arena_release(&a);
    return 0;
}

static int tool_case(ld_arena *a, const char *args, int is_obj, const char *prompt,
                     ld_align_how want_how, size_t want_errors)
{
    ld_align_tool_call tc = {"call1", "get_weather", 11, args, strlen(args), is_obj};
    ld_align_msg m[3] = {M("user", "Weather in Paris?"), M("assistant", NULL),
                         M("tool", "{\"temp_c\": 21}")};
    m[1].tool_calls = &tc;
    m[1].n_tool_calls = 1;
    ld_align_result *r = align(a, m, 3, prompt, NULL);
    CHECK(r);
    const ld_align_part *p = part_of(r, 1, LD_ALIGN_PART_TOOL_ARGS, 0);
    if (want_errors == 0) {
        CHECK_MSG(p && p->state == LD_ALIGN_FOUND && p->how == want_how, "args %s/%s in %s",
                  p ? ld_align_state_name(p->state) : "-", p ? ld_align_how_name(p->how) : "-",
                  prompt);
        CHECK_EQ_INT(part_of(r, 1, LD_ALIGN_PART_TOOL_NAME, 0)->state, LD_ALIGN_FOUND);
    }
    if (r->n_errors != want_errors) dump(r);
    CHECK_EQ_INT(r->n_errors, want_errors);
    return 0;
}

static int test_align_tool_arguments(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    const char *args = "{\"city\": \"Paris\", \"days\": 3}";
    /* raw */
    CHECK(!tool_case(&a, args, 0, "U:Weather in Paris?\nA:<call>get_weather {\"city\": \"Paris\", \"days\": 3}</call>\n"
                     "T:{\"temp_c\": 21}\n", LD_ALIGN_HOW_EXACT, 0));
    /* JSON-encoded a second time */
    CHECK(!tool_case(&a, args, 0, "U:Weather in Paris?\nA:{\"name\": \"get_weather\", \"arguments\": "
                     "\"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 3}\"}\nT:{\"temp_c\": 21}\n",
                     LD_ALIGN_HOW_ESCAPED, 0));
    /* re-serialised: other spacing and key order */
    CHECK(!tool_case(&a, "{\"city\":\"Paris\",\"days\":3}", 1,
                     "U:Weather in Paris?\nA:get_weather\n{\n  \"days\": 3,\n  \"city\": \"Paris\"\n}\n"
                     "T:{\"temp_c\": 21}\n", LD_ALIGN_HOW_JSON, 0));
    /* json.dumps spacing of a compact object */
    CHECK(!tool_case(&a, "{\"city\":\"Paris\",\"days\":3}", 1,
                     "U:Weather in Paris?\nA:get_weather {\"city\": \"Paris\", \"days\": 3}\n"
                     "T:{\"temp_c\": 21}\n", LD_ALIGN_HOW_JSON, 0));
    /* key/value markup (GLM, Qwen3-Coder) */
    CHECK(!tool_case(&a, args, 0, "U:Weather in Paris?\nA:<tool_call>get_weather<arg_key>city</arg_key>"
                     "<arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>\n"
                     "T:<tool_response>{\"temp_c\": 21}</tool_response>\n", LD_ALIGN_HOW_VALUES, 0));
    /* tool call dropped (and the tool result double-encoded, which is fine) */
    CHECK(!tool_case(&a, args, 0, "U:Weather in Paris?\nA:\nT:\"{\\\"temp_c\\\": 21}\"\n",
                     LD_ALIGN_HOW_NONE, 1));
    ld_arena_release(&a);
    return 0;
}

static int test_align_logger_cut(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_align_msg m[4];
    chat_msgs(m);
    /* the logger kept head and tail of the prompt: message 2 lies in the cut */
    const char *head = "<|im_start|>system\nYou are terse.<|im_end|>\n"
                       "<|im_start|>user\nPlease summarise the attached quarterly";
    const char *tail = "<|im_end|>\n<|im_start|>user\nAnd what about the outlook for the next two quarters?<|im_end|>\n";
    char p[512];
    snprintf(p, sizeof p, "%s%s", head, tail);
    ld_align_prompt_info info = {1, strlen(head)};
    ld_align_result *r = align(&a, m, 4, p, &info);
    CHECK(r);
    if (r->n_errors != 1) dump(r);
    /* message 2 cannot be located: the log cannot decide (never ok, never dropped) */
    CHECK_EQ_INT(r->n_errors, 1);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_MESSAGE_HIDDEN, 2), 1);
    CHECK_EQ_INT(r->msgs[2].parts[0].state, LD_ALIGN_UNKNOWN);
    /* message 1 runs into the cut: matched on what is visible */
    CHECK_EQ_INT(r->msgs[1].parts[0].state, LD_ALIGN_FOUND);
    CHECK_EQ_INT(r->msgs[1].parts[0].how, LD_ALIGN_HOW_CUT);
    CHECK_EQ_INT(r->msgs[1].parts[0].end, strlen(head));
    CHECK_EQ_INT(r->msgs[3].parts[0].state, LD_ALIGN_FOUND);
    /* the other way round: the tail begins inside the last message, and the
     * message before it is whole in the head */
    const char *head2 = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n"
                        "Please summarise the attached quarterly report for me.<|im_end|>\n<|im_start|>assistant\n"
                        "Revenue grew by twelve percent while costs stayed flat overall.<|im_end|>\n";
    const char *tail2 = "the next two quarters?<|im_end|>\n";
    char p2[512];
    snprintf(p2, sizeof p2, "%s%s", head2, tail2);
    ld_align_prompt_info info2 = {1, strlen(head2)};
    r = align(&a, m, 4, p2, &info2);
    CHECK(r);
    if (r->n_errors) dump(r);
    CHECK_EQ_INT(r->n_errors, 0);
    CHECK_EQ_INT(r->msgs[3].parts[0].state, LD_ALIGN_FOUND);
    CHECK_EQ_INT(r->msgs[3].parts[0].how, LD_ALIGN_HOW_CUT);
    CHECK_EQ_INT(r->msgs[3].parts[0].start, strlen(head2));
    /* without the cut information the same prompt is damage */
    r = align(&a, m, 4, p, NULL);
    CHECK(r);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_DROPPED_MESSAGE, 2), 1);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_MANGLED_MESSAGE, 1), 1);
    /* a message the logger cut: head and tail found around the hidden middle */
    ld_align_msg c[1] = {M("user", "Beginning of a long text and its ending part.")};
    c[0].content_truncated = 1;
    c[0].content_cut = strlen("Beginning of a long text ");
    r = align(&a, c, 1, "<u>Beginning of a long text MIDDLE WE DID NOT LOG and its ending part.</u>", NULL);
    CHECK(r);
    if (r->n_findings) dump(r);
    CHECK_EQ_INT(r->n_findings, 0);
    CHECK_EQ_INT(r->msgs[0].parts[0].how, LD_ALIGN_HOW_CUT);
    /* its logged ending is not in the whole prompt: changed, at the cut */
    r = align(&a, c, 1, "<u>Beginning of a long text MIDDLE WE DID NOT LOG and another end.</u>", NULL);
    CHECK(r);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_MANGLED_MESSAGE, 0), 1);
    CHECK_EQ_INT(r->findings[0].text_off, strlen("Beginning of a long text "));
    ld_arena_release(&a);
    return 0;
}

static int test_align_linear(void)
{
    enum { N = 5000 };
    size_t cap = 1100000, len = 0;
    char *prompt = malloc(cap);
    char *text = malloc((size_t)N * 200);
    ld_align_msg *m = calloc(N, sizeof *m);
    CHECK(prompt && text && m);
    uint32_t seed = 12345;
    for (size_t i = 0; i < N; i++) {
        char *t = text + i * 200;
        int n = snprintf(t, 200, "message %zu:", i);
        while (n < 180) { /* pseudo-random words, so anchors are distinctive */
            seed = seed * 1103515245u + 12345u;
            t[n++] = (char)('a' + (seed >> 16) % 26);
            if ((seed >> 8) % 7 == 0) t[n++] = ' ';
        }
        t[n] = 0;
        m[i] = M(i % 2 ? "assistant" : "user", t);
        if (i == 1234) continue; /* dropped */
        len += (size_t)snprintf(prompt + len, cap - len, "<|im_start|>%s\n%s<|im_end|>\n",
                                m[i].role, t);
    }
    CHECK(len > 1000000);
    ld_arena a;
    ld_arena_init(&a, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ld_align_result *r = align(&a, m, N, prompt, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(r);
    printf("  %zu-byte prompt, %d messages: %.3f s\n", len, N,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    CHECK_EQ_INT(r->n_errors, 1);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_DROPPED_MESSAGE, 1234), 1);
    for (size_t i = 0; i < N; i++) CHECK(i == 1234 || r->msgs[i].in_order);
    /* worst case: nothing is there, every message costs a failed search */
    memset(prompt, 'x', len);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = align(&a, m, N, prompt, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(r);
    printf("  same prompt, no message in it: %.3f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    CHECK_EQ_INT(count_kind(r, LD_ALIGN_DROPPED_MESSAGE, -1), N);
    ld_arena_release(&a);
    free(prompt);
    free(text);
    free(m);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_align_goldens),
    LD_CASE(test_align_clean),
    LD_CASE(test_align_dropped_message),
    LD_CASE(test_align_mangled_message),
    LD_CASE(test_align_order),
    LD_CASE(test_align_whitespace_stripped),
    LD_CASE(test_align_think_split),
    LD_CASE(test_align_tool_arguments),
    LD_CASE(test_align_logger_cut),
    LD_CASE(test_align_linear),
};

LD_TEST_MAIN(cases)
