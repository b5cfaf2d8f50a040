/* tpl_json.c - keeps the literal text of JSON numbers on a cJSON tree, so
 * that the template values made from it (ld_tpl_value_from_json) tell 2.0
 * (a Python float) from 2 (an int) as Python's json module does; cJSON keeps
 * only the double.  The text is re-scanned in step with the tree. */
#include <cjson/cJSON.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

typedef struct scan {
    const char *p, *end;
} scan;

static void skip_ws(scan *s)
{
    while (s->p < s->end && (unsigned char)*s->p <= 32) s->p++;
}

static bool eat(scan *s, char c)
{
    skip_ws(s);
    if (s->p >= s->end || *s->p != c) return false;
    s->p++;
    return true;
}

static bool skip_string(scan *s)
{
    if (!eat(s, '"')) return false;
    while (s->p < s->end && *s->p != '"') s->p += *s->p == '\\' ? 2 : 1;
    if (s->p >= s->end) return false;
    s->p++;
    return true;
}

static bool number_text(scan *s, cJSON *j)
{
    const char *b = s->p;
    while (s->p < s->end && strchr("+-0123456789.eE", *s->p) && *s->p) s->p++;
    if (s->p == b) return false;
    if (j->valuestring) return true; /* annotated before */
    size_t n = (size_t)(s->p - b);
    char *t = cJSON_malloc(n + 1);
    if (!t) return false;
    memcpy(t, b, n);
    t[n] = 0;
    j->valuestring = t; /* freed by cJSON_Delete */
    return true;
}

static bool walk(scan *s, cJSON *j, int depth)
{
    if (depth > 1000) return false;
    skip_ws(s);
    if (cJSON_IsNumber(j)) return number_text(s, j);
    if (cJSON_IsString(j)) return skip_string(s);
    if (cJSON_IsBool(j) || cJSON_IsNull(j)) {
        size_t n = cJSON_IsTrue(j) ? 4 : cJSON_IsFalse(j) ? 5 : 4;
        if ((size_t)(s->end - s->p) < n) return false;
        s->p += n;
        return true;
    }
    bool obj = cJSON_IsObject(j);
    if (!obj && !cJSON_IsArray(j)) return false;
    if (!eat(s, obj ? '{' : '[')) return false;
    for (cJSON *c = j->child; c; c = c->next) {
        if (c != j->child && !eat(s, ',')) return false;
        if (obj && (!skip_string(s) || !eat(s, ':'))) return false;
        if (!walk(s, c, depth + 1)) return false;
    }
    return eat(s, obj ? '}' : ']');
}

ld_status ld_tpl_json_keep_floats(struct cJSON *root, const char *text, size_t len)
{
    scan s = {text, text + len};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) s.p += 3;
    return root && text && walk(&s, root, 0) ? LD_OK : LD_ERR_MISMATCH;
}
