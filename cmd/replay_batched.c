/* replay_batched.c - see replay_batched.h. */
#include "replay_batched.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "jsonout.h"

int ld_batch_rids_parse(const char *list, const char *rid, char **buf, const char ***rids, size_t *n, char *msg,
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

void ld_print_batch_report(FILE *f, const char *rid, const char *const *with, size_t n_with,
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
        if (rep->first_diff < 0) cJSON_AddNullToObject(o, "first_difference");
        else cJSON_AddNumberToObject(o, "first_difference", (double)rep->first_diff);
        cJSON_AddNumberToObject(o, "positions_differing", (double)rep->n_diff);
        cJSON_AddNumberToObject(o, "max_abs_difference", rep->max_abs);
        ld_json_print_line(f, o); /* deletes o */
        return;
    }
    fprintf(f, "%s  batched with", rid);
    for (size_t i = 0; i < n_with; i++) fprintf(f, "%s %s", i ? "," : "", with[i]);
    fprintf(f, " (%zu steps", rep->steps);
    if (rep->tp) fprintf(f, ", every replay split over %d ranks", rep->tp);
    fprintf(f, ")\n");
    if (rep->first_diff < 0)
        fprintf(f, "batch.identical: the logits of all %zu positions are bitwise those of the request alone\n",
                rep->positions);
    else
        fprintf(f, "batch.differs at position %lld: %zu of %zu positions differ from the request alone, by up to "
                   "%.3g (a fault of logdiff's engine: please report it)\n",
                (long long)rep->first_diff, rep->n_diff, rep->positions, rep->max_abs);
}
