/* replay_batched.c - see replay_batched.h. */
#include "replay_batched.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "parse/pylit/pylit_json.h"

int ld_cli_batch_rids_parse(const char *list, const char *rid, char **buf, const char ***rids, size_t *n, char *msg,
                        size_t cap)
{
    *buf = strdup(list);
    *rids = calloc(strlen(list) / 2 + 2, sizeof **rids);
    *n = 0;
    if (!*buf || !*rids) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    for (char *p = *buf;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        if (!*p) return snprintf(msg, cap, "--batch-with: an empty rid in '%s'", list), -1;
        if (!strcmp(p, rid)) return snprintf(msg, cap, "--batch-with: '%s' is the request replayed", p), -1;
        for (size_t i = 0; i < *n; i++)
            if (!strcmp((*rids)[i], p)) return snprintf(msg, cap, "--batch-with: '%s' named twice", p), -1;
        (*rids)[(*n)++] = p;
        if (!comma) return 0;
        p = comma + 1;
    }
}

/* where the first difference starts: "embeddings", "layer" (first_layer
 * set), "final_norm" or "head" */
static const char *first_in(const ld_replay_batch_report *rep, int *first_layer)
{
    *first_layer = -1;
    if (rep->first_plane == LD_REPLAY_BATCH_HEAD) return "head";
    if (rep->first_plane == 0) return "embeddings";
    if (rep->first_plane > rep->n_layers) return "final_norm";
    *first_layer = rep->first_plane - 1;
    return "layer";
}

static void print_first_in(FILE *f, const ld_replay_batch_report *rep)
{
    int l;
    const char *in = first_in(rep, &l);
    if (l >= 0) fprintf(f, "first in layer %d's output (the layers before it bitwise the same)", l);
    else if (!strcmp(in, "head")) fprintf(f, "first in the logits (every hidden plane bitwise the same)");
    else if (!strcmp(in, "embeddings")) fprintf(f, "first in the embeddings");
    else fprintf(f, "first in the final norm's output (every layer's bitwise the same)");
}

void ld_cli_print_batch_report(FILE *f, const char *rid, const char *const *with, size_t n_with,
                           const ld_replay_batch_report *rep, int json)
{
    if (json) {
        cJSON *o = cJSON_CreateObject(), *w = cJSON_CreateArray();
        cJSON_AddItemToObject(o, "rid", ld_json_cstr(rid));
        for (size_t i = 0; i < n_with; i++) cJSON_AddItemToArray(w, ld_json_cstr(with[i]));
        cJSON_AddItemToObject(o, "batch_with", w);
        cJSON_AddNumberToObject(o, "positions", (double)rep->positions);
        cJSON_AddNumberToObject(o, "steps", (double)rep->steps);
        if (rep->tp) cJSON_AddNumberToObject(o, "tp", rep->tp);
        cJSON_AddBoolToObject(o, "identical", rep->first_diff < 0);
        int l;
        const char *in = first_in(rep, &l);
        if (rep->first_diff < 0) {
            cJSON_AddNullToObject(o, "first_difference");
            cJSON_AddNullToObject(o, "first_in");
        } else {
            cJSON_AddNumberToObject(o, "first_difference", (double)rep->first_diff);
            cJSON_AddItemToObject(o, "first_in", ld_json_cstr(in));
        }
        if (rep->first_diff < 0 || l < 0) cJSON_AddNullToObject(o, "first_layer");
        else cJSON_AddNumberToObject(o, "first_layer", l);
        cJSON_AddNumberToObject(o, "positions_differing", (double)rep->n_diff);
        cJSON_AddNumberToObject(o, "positions_logits_differing", (double)rep->n_diff_logits);
        cJSON_AddNumberToObject(o, "max_abs_difference", rep->max_abs);
        cJSON_AddNumberToObject(o, "max_abs_hidden_difference", rep->max_abs_hidden);
        ld_json_print_line(f, o); /* deletes o */
        return;
    }
    fprintf(f, "%s  batched with", rid);
    for (size_t i = 0; i < n_with; i++) fprintf(f, "%s %s", i ? "," : "", with[i]);
    fprintf(f, " (%zu steps", rep->steps);
    if (rep->tp) fprintf(f, ", every replay split over %d ranks", rep->tp);
    fprintf(f, ")\n");
    if (rep->first_diff < 0) {
        fprintf(f, "batch.identical: the logits and hidden planes of all %zu positions are bitwise those of the "
                   "request alone\n", rep->positions);
        return;
    }
    fprintf(f, "batch.differs at position %lld, ", (long long)rep->first_diff);
    print_first_in(f, rep);
    fprintf(f, ": %zu of %zu positions differ from the request alone (hidden values by up to %.3g), ", rep->n_diff,
            rep->positions, rep->max_abs_hidden);
    if (rep->n_diff_logits) fprintf(f, "%zu in their logits (by up to %.3g)", rep->n_diff_logits, rep->max_abs);
    else fprintf(f, "none in their logits");
    fprintf(f, ": a fault of logdiff's engine, please report it\n");
}
