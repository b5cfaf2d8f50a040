/* replay_kernels.c - see replay_kernels.h. */
#include "replay_kernels.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "parse/pylit/pylit_json.h"

/* "embeddings", "layer 3", "final norm" */
static const char *plane_name(int p, int n_layers, char *buf, size_t cap)
{
    if (p == 0) return "embeddings";
    if (p == n_layers + 1) return "final norm";
    snprintf(buf, cap, "layer %d", p - 1);
    return buf;
}

static void print_json(FILE *f, const char *rid, const ld_kernel_cmp_report *rep)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "rid", ld_json_cstr(rid));
    cJSON_AddItemToObject(o, "reference", ld_json_cstr(rep->cuda ? "cuda:all=ref" : "ref"));
    cJSON_AddItemToObject(o, "reference_verdict", ld_json_cstr(ld_replay_verdict_kind(rep->base.verdict)));
    cJSON_AddItemToObject(o, "tolerance", ld_json_double(LD_KCMP_TOL));
    if (rep->tp) cJSON_AddItemToObject(o, "tp", ld_json_int(rep->tp));
    cJSON *vs = cJSON_CreateArray();
    char buf[32];
    for (size_t i = 0; i < rep->n; i++) {
        const ld_kernel_cmp *c = &rep->v[i];
        cJSON *v = cJSON_CreateObject();
        cJSON_AddItemToObject(v, "variant", ld_json_cstr(c->variant));
        if (c->refused[0]) { /* the engine refused it here: why, and no numbers */
            cJSON_AddItemToObject(v, "refused", ld_json_cstr(c->refused));
            cJSON_AddItemToArray(vs, v);
            continue;
        }
        cJSON *dep = cJSON_CreateNull();
        if (c->first_plane >= 0) {
            cJSON_Delete(dep);
            dep = cJSON_CreateObject();
            cJSON_AddItemToObject(dep, "plane", ld_json_int(c->first_plane));
            cJSON_AddItemToObject(dep, "where", ld_json_cstr(plane_name(c->first_plane, rep->n_layers, buf, sizeof buf)));
            cJSON_AddItemToObject(dep, "position", ld_json_int(c->first_pos));
            cJSON_AddItemToObject(dep, "nerr", ld_json_double(c->first_nerr));
        }
        cJSON_AddItemToObject(v, "first_departure", dep);
        cJSON_AddItemToObject(v, "final_norm_max_nerr", ld_json_double(c->max_nerr));
        cJSON_AddItemToObject(v, "max_abs_dlogprob", ld_json_double(c->max_dlogprob));
        cJSON_AddItemToObject(v, "rank_changes", ld_json_int((int64_t)c->rank_changes));
        cJSON_AddItemToObject(v, "verdict", ld_json_cstr(ld_replay_verdict_kind(c->verdict)));
        cJSON_AddItemToObject(v, "divergence", c->divergence >= 0 ? ld_json_int(c->divergence) : cJSON_CreateNull());
        cJSON_AddItemToArray(vs, v);
    }
    cJSON_AddItemToObject(o, "variants", vs);
    ld_json_print_line(f, o);
}

void ld_cli_print_kernel_cmp(FILE *f, const char *rid, const ld_kernel_cmp_report *rep, int json)
{
    if (json) {
        print_json(f, rid, rep);
        return;
    }
    char tp[48] = "";
    if (rep->tp) snprintf(tp, sizeof tp, ", every replay split over %d ranks", rep->tp);
    fprintf(f, "%s: %s (%s%s); a hidden row departs beyond normalised error %g\n", rid,
            rep->cuda ? "each custom CUDA kernel alone, then all of them, against the CUDA reference kernels"
                      : "each kernel variant against the reference backend",
            ld_replay_verdict_kind(rep->base.verdict), tp, LD_KCMP_TOL);
    fprintf(f, "  %-15s %-34s %14s %14s %6s  %s\n", "variant", "first departure", "final-norm err",
            "max |d logp|", "ranks", "verdict");
    char buf[32], dep[64];
    for (size_t i = 0; i < rep->n; i++) {
        const ld_kernel_cmp *c = &rep->v[i];
        if (c->refused[0]) {
            fprintf(f, "  %-15s refused: %s\n", c->variant, c->refused);
            continue;
        }
        if (c->first_plane < 0) snprintf(dep, sizeof dep, "none");
        else
            snprintf(dep, sizeof dep, "%s, position %lld (%.2g)", plane_name(c->first_plane, rep->n_layers, buf,
                                                                             sizeof buf),
                     (long long)c->first_pos, c->first_nerr);
        char verdict[64];
        if (c->divergence >= 0) snprintf(verdict, sizeof verdict, "divergent at %lld", (long long)c->divergence);
        else snprintf(verdict, sizeof verdict, "%s", ld_replay_verdict_kind(c->verdict));
        fprintf(f, "  %-15s %-34s %14.3g %14.3g %6zu  %s\n", c->variant, dep, c->max_nerr, c->max_dlogprob,
                c->rank_changes, verdict);
    }
}

void ld_cli_print_backend_cmp(FILE *f, const char *rid, const ld_backend_cmp *c, int json)
{
    char buf[32];
    int slice = c->last > 0;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "rid", ld_json_cstr(rid));
        cJSON_AddItemToObject(o, "backend", ld_json_cstr(c->name_a));
        cJSON_AddItemToObject(o, "kernels", c->kernels_a[0] ? ld_json_cstr(c->kernels_a) : cJSON_CreateNull());
        if (c->tp_a) cJSON_AddItemToObject(o, "tp", ld_json_int(c->tp_a));
        cJSON_AddItemToObject(o, "check", ld_json_cstr(c->name_b));
        if (slice) cJSON_AddItemToObject(o, "layers", cJSON_CreateIntArray((const int[]){c->first, c->last - 1}, 2));
        cJSON_AddItemToObject(o, "positions", ld_json_int((int64_t)c->n_pos));
        cJSON *ps = cJSON_CreateArray();
        for (int p = c->plane_lo; p <= c->plane_hi; p++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToObject(e, "where", ld_json_cstr(plane_name(p, c->n_layers, buf, sizeof buf)));
            cJSON_AddItemToObject(e, "max_nerr", ld_json_double(c->plane[p].max_nerr));
            cJSON_AddItemToObject(e, "max_abs", ld_json_double(c->plane[p].max_abs));
            cJSON_AddItemToObject(e, "worst_position", c->plane[p].worst_pos >= 0 ? ld_json_int(c->plane[p].worst_pos)
                                                                                : cJSON_CreateNull());
            cJSON_AddItemToArray(ps, e);
        }
        cJSON_AddItemToObject(o, "planes", ps);
        if (slice) { /* no logits on the check side */
            cJSON_AddItemToObject(o, "max_abs_dlogprob", cJSON_CreateNull());
            cJSON_AddItemToObject(o, "rank_changes", cJSON_CreateNull());
            cJSON_AddItemToObject(o, "verdicts", cJSON_CreateStringArray((const char *const[]){
                                                     ld_replay_verdict_kind(c->a.verdict)}, 1));
        } else {
            cJSON_AddItemToObject(o, "max_abs_dlogprob", ld_json_double(c->max_dlogprob));
            cJSON_AddItemToObject(o, "rank_changes", ld_json_int((int64_t)c->rank_changes));
            cJSON_AddItemToObject(o, "verdicts", cJSON_CreateStringArray((const char *const[]){
                                                     ld_replay_verdict_kind(c->a.verdict),
                                                     ld_replay_verdict_kind(c->b.verdict)}, 2));
        }
        ld_json_print_line(f, o);
        return;
    }
    char name_a[256], kern[160] = "", tp[32] = ""; /* the backend, its variants and split */
    if (c->kernels_a[0] && !strstr(c->name_a, c->kernels_a)) /* the CPU names carry their variants */
        snprintf(kern, sizeof kern, " (--kernels %s)", c->kernels_a);
    if (c->tp_a) snprintf(tp, sizeof tp, ", tp %d", c->tp_a);
    snprintf(name_a, sizeof name_a, "%s%s%s", c->name_a, kern, tp);
    if (slice) {
        char which[48];
        if (c->last - 1 == c->first) snprintf(which, sizeof which, "layer %d", c->first);
        else snprintf(which, sizeof which, "layers %d-%d", c->first, c->last - 1);
        fprintf(f, "%s: backend %s against %s alone on %s, fed that replay's state entering layer %d, over %zu "
                   "positions (normalised error of a row, largest element difference)\n",
                rid, name_a, which, c->name_b, c->first, c->n_pos);
    } else {
        fprintf(f, "%s: backend %s against %s over %zu positions (normalised error of a row, largest element "
                   "difference)\n", rid, name_a, c->name_b, c->n_pos);
    }
    fprintf(f, "  %-12s %14s %14s  %s\n", "plane", "max nerr", "max |diff|", "worst row");
    for (int p = c->plane_lo; p <= c->plane_hi; p++) {
        fprintf(f, "  %-12s %14.3g %14.3g", plane_name(p, c->n_layers, buf, sizeof buf), c->plane[p].max_nerr,
                c->plane[p].max_abs);
        if (c->plane[p].worst_pos >= 0) fprintf(f, "  position %lld", (long long)c->plane[p].worst_pos);
        fprintf(f, "\n");
    }
    if (slice)
        fprintf(f, "logged tokens: not compared (the slice has no head); verdict %s\n",
                ld_replay_verdict_kind(c->a.verdict));
    else
        fprintf(f, "logged tokens: largest |d logprob| %.3g, %zu rank changes; verdicts %s / %s\n", c->max_dlogprob,
                c->rank_changes, ld_replay_verdict_kind(c->a.verdict), ld_replay_verdict_kind(c->b.verdict));
}
