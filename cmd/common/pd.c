/* pd.c - see pd.h. */
#include "pd.h"

#include <string.h>

#include "parse/pylit/pylit_json.h"

static const char *const diff_names[] = {"messages", "prompt", "input_ids"};
static const unsigned diff_bits[] = {LD_PD_DIFF_MESSAGES, LD_PD_DIFF_PROMPT, LD_PD_DIFF_IDS};

static void add_word(char *buf, size_t cap, size_t *used, const char *w)
{
    if (*used >= cap) return;
    int n = snprintf(buf + *used, cap - *used, "%s%s", *used ? "," : "", w);
    if (n > 0 && (size_t)n < cap - *used) *used += (size_t)n;
}

void ld_cli_pd_words(const ld_request *r, char *buf, size_t cap, size_t *used)
{
    if (r->pd & LD_PD_JOINED) add_word(buf, cap, used, "pd");
    if (r->pd & LD_PD_DIFF) add_word(buf, cap, used, "pd-differs");
    if (r->pd & LD_PD_ALONE) add_word(buf, cap, used, "pd-alone");
}

static const char *role_of(const ld_request *r)
{
    if (r->pd & LD_PD_JOINED) return "decode";
    if (r->pd & LD_PD_PREFILL) return "prefill";
    return "unknown";
}

static const ld_source *first_source(const ld_request *r)
{
    static const ld_part order[] = {LD_PART_OPENAI, LD_PART_RECEIVE, LD_PART_FINISH};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (r->seen & LD_PART_BIT(order[i])) return &r->src[order[i]];
    return NULL;
}

cJSON *ld_cli_pd_json(const ld_request *r)
{
    if (!r->pd) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "bootstrap_room", ld_json_int(r->bootstrap_room));
    cJSON_AddItemToObject(o, "role", cJSON_CreateString(role_of(r)));
    cJSON_AddItemToObject(o, "joined_by", !(r->pd & LD_PD_JOINED) ? cJSON_CreateNull()
                          : cJSON_CreateString((r->pd & LD_PD_BY_RID) ? "rid" : "room"));
    cJSON_AddItemToObject(o, "roles_guessed", cJSON_CreateBool((r->pd & LD_PD_ROLES_GUESSED) != 0));
    cJSON *d = cJSON_AddArrayToObject(o, "differs");
    for (size_t i = 0; i < 3; i++)
        if (r->pd & diff_bits[i]) cJSON_AddItemToArray(d, cJSON_CreateString(diff_names[i]));
    if (!r->peer) {
        cJSON_AddItemToObject(o, "peer", cJSON_CreateNull());
        return o;
    }
    const ld_source *s = first_source(r->peer);
    cJSON *peer = cJSON_AddObjectToObject(o, "peer");
    cJSON_AddItemToObject(peer, "rid", ld_json_cstr(r->peer->rid));
    cJSON_AddItemToObject(peer, "file", ld_json_cstr(s ? s->member : NULL));
    cJSON_AddItemToObject(peer, "line", s ? ld_json_int((int64_t)s->line) : cJSON_CreateNull());
    return o;
}

const char *ld_cli_pd_line(const ld_request *r, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!r->pd) return buf;
    if (!r->peer) {
        snprintf(buf, cap, "%s server's record of bootstrap room %lld; the other server's is not in the logs read",
                 (r->pd & LD_PD_PREFILL) ? "the prefill" : "one", (long long)r->bootstrap_room);
        return buf;
    }
    const ld_source *s = first_source(r->peer);
    size_t o = (size_t)snprintf(buf, cap, "decode server's record; the prefill server's is rid %s at %s:%llu "
                                "(bootstrap room %lld, joined by %s%s)",
                                r->peer->rid ? r->peer->rid : "-", s && s->member ? s->member : "-",
                                s ? (unsigned long long)s->line : 0ULL, (long long)r->bootstrap_room,
                                (r->pd & LD_PD_BY_RID) ? "rid" : "room",
                                (r->pd & LD_PD_ROLES_GUESSED) ? ", roles guessed" : "");
    for (size_t i = 0, k = 0; i < 3 && o < cap; i++)
        if (r->pd & diff_bits[i])
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", k++ ? ", " : "; the servers logged different ",
                                  diff_names[i]);
    return buf;
}

const char *ld_cli_pd_summary(const ld_pair_stats *ps, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!ps->pd_joined && !ps->pd_alone) return buf;
    snprintf(buf, cap, "prefill/decode: %llu requests joined from their two servers' records "
             "(%llu by rid, %llu by bootstrap room), %llu with records that differ; "
             "%llu alone (the other server's record not in the logs read)",
             (unsigned long long)ps->pd_joined, (unsigned long long)ps->pd_by_rid,
             (unsigned long long)(ps->pd_joined - ps->pd_by_rid), (unsigned long long)ps->pd_differ,
             (unsigned long long)ps->pd_alone);
    return buf;
}

cJSON *ld_cli_pd_summary_json(const ld_pair_stats *ps)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "joined", ld_json_int((int64_t)ps->pd_joined));
    cJSON_AddItemToObject(o, "joined_by_rid", ld_json_int((int64_t)ps->pd_by_rid));
    cJSON_AddItemToObject(o, "differ", ld_json_int((int64_t)ps->pd_differ));
    cJSON_AddItemToObject(o, "alone", ld_json_int((int64_t)ps->pd_alone));
    return o;
}
