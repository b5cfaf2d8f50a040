/* finding_json.c - see finding_json.h. */
#include <string.h>

#include "finding_json.h"
#include "parse/pylit/pylit_json.h"
#include "parse/request/request_json.h"

static const char *const number_names[] = { "array_offset", "prompt_offset", "expected_len",
                                            "actual_len", "first_diff" };
static const char *const text_names[] = { "array_excerpt", "prompt_excerpt", "related_rid",
                                          "unified_diff" };

static int64_t *numbers_of(ld_finding *f, size_t i)
{
    int64_t *v[] = { &f->array_offset, &f->prompt_offset, &f->expected_len, &f->actual_len,
                     &f->first_diff };
    return v[i];
}

static const char **texts_of(ld_finding *f, size_t i)
{
    const char **v[] = { &f->array_excerpt, &f->prompt_excerpt, &f->related_rid, &f->unified_diff };
    return v[i];
}

/* Exact (cJSON's own printer rounds past 15 digits); null for LD_NO_VALUE. */
static cJSON *evidence(int64_t v)
{
    return ld_json_int(v);
}

cJSON *ld_finding_json(const ld_finding *f)
{
    ld_finding copy = *f; /* numbers_of / texts_of take a mutable finding */
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddStringToObject(o, "kind", f->kind) &&
             cJSON_AddStringToObject(o, "severity", f->severity == LD_SEV_ERROR ? "error" : "info") &&
             cJSON_AddItemToObject(o, "message", ld_json_int(f->message)) &&
             cJSON_AddItemToObject(o, "detail", ld_json_bytes(f->detail, f->detail ? strlen(f->detail) : 0));
    for (size_t i = 0; ok && i < sizeof number_names / sizeof *number_names; i++)
        ok = cJSON_AddItemToObject(o, number_names[i], evidence(*numbers_of(&copy, i)));
    for (size_t i = 0; ok && i < sizeof text_names / sizeof *text_names; i++) {
        const char *s = *texts_of(&copy, i);
        ok = cJSON_AddItemToObject(o, text_names[i], ld_json_bytes(s, s ? strlen(s) : 0));
    }
    if (!ok) { cJSON_Delete(o); return NULL; }
    return o;
}

static ld_status bad(ld_error *err, const char *name, const char *what)
{
    return LD_FAIL(err, LD_ERR_SYNTAX, 0, "finding: %s: %s", name, what);
}

/* An integer field that a double holds exactly (|v| < 2^53), or null. */
static ld_status get_int(const cJSON *o, const char *name, int nullable, int64_t *out, ld_error *err)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
    if (nullable && cJSON_IsNull(j)) { *out = LD_NO_VALUE; return LD_OK; }
    double d = cJSON_IsNumber(j) ? j->valuedouble : 0.5;
    if (!(d > -9007199254740992.0 && d < 9007199254740992.0) || d != (double)(int64_t)d)
        return bad(err, name, "not a whole number");
    *out = (int64_t)d;
    return LD_OK;
}

static ld_status get_text(const cJSON *o, const char *name, ld_arena *arena, const char **out,
                          ld_error *err)
{
    size_t len;
    if (ld_json_bytes_get(cJSON_GetObjectItemCaseSensitive(o, name), arena, out, &len) != 0)
        return bad(err, name, "not a text");
    if (*out && strlen(*out) != len) return bad(err, name, "holds a NUL byte");
    return LD_OK;
}

static ld_status get_head(const cJSON *j, ld_finding *f, ld_error *err)
{
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
    const cJSON *sev = cJSON_GetObjectItemCaseSensitive(j, "severity");
    f->kind = cJSON_IsString(kind) ? ld_kind_static(kind->valuestring) : NULL;
    if (!f->kind) return bad(err, "kind", "not a kind this logdiff knows");
    if (!cJSON_IsString(sev) || (strcmp(sev->valuestring, "error") && strcmp(sev->valuestring, "info")))
        return bad(err, "severity", "neither error nor info");
    f->severity = strcmp(sev->valuestring, "error") ? LD_SEV_INFO : LD_SEV_ERROR;
    LD_TRY(get_int(j, "message", 0, &f->message, err));
    if (f->message < -1) return bad(err, "message", "below -1");
    return LD_OK;
}

ld_status ld_finding_from_json(const cJSON *j, ld_arena *arena, ld_findings *list, ld_error *err)
{
    if (!cJSON_IsObject(j)) return bad(err, "(the finding)", "not an object");
    ld_finding f;
    memset(&f, 0, sizeof f);
    LD_TRY(get_head(j, &f, err));
    LD_TRY(get_text(j, "detail", arena, &f.detail, err));
    if (!f.detail) return bad(err, "detail", "missing");
    for (size_t i = 0; i < sizeof number_names / sizeof *number_names; i++)
        LD_TRY(get_int(j, number_names[i], 1, numbers_of(&f, i), err));
    for (size_t i = 0; i < sizeof text_names / sizeof *text_names; i++)
        LD_TRY(get_text(j, text_names[i], arena, texts_of(&f, i), err));
    ld_finding *slot = ld_findings_add(list, arena, f.kind, f.severity, f.message, "%s", "");
    if (!slot) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for findings");
    *slot = f;
    return LD_OK;
}
